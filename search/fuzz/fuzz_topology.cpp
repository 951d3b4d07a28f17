// libFuzzer target: cluster topology JSON text (--topology FILE) -> ParseTopologyJson.
// Invariants beyond "no crash": an accepted topology passes ValidateTopology, survives
// TopologyToJson -> ParseTopologyJson unchanged, and TierForGroup maps every group size up to
// num_devices to a tier that spans it; a rejected one is kBadInput, one line, naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/topology.h"

namespace {

const char* const kOrigin = "fuzz.topology.json";

void Require(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

bool SameTopology(const onboard::Topology& a, const onboard::Topology& b) {
  if (a.name != b.name || a.num_devices != b.num_devices || a.device.name != b.device.name ||
      a.device.tflops_bf16 != b.device.tflops_bf16 || a.device.tflops_fp8 != b.device.tflops_fp8 ||
      a.device.tflops_fp32 != b.device.tflops_fp32 || a.device.tflops_fp4 != b.device.tflops_fp4 ||
      a.device.hbm_gib != b.device.hbm_gib || a.device.hbm_gbps != b.device.hbm_gbps ||
      a.tiers.size() != b.tiers.size())
    return false;
  for (size_t i = 0; i < a.tiers.size(); ++i) {
    const onboard::CommTier &x = a.tiers[i], &y = b.tiers[i];
    if (x.name != y.name || x.group_size != y.group_size || x.bw_gbps != y.bw_gbps ||
        x.latency_us != y.latency_us || x.efficiency != y.efficiency)
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;  // topology files are KiB; bigger inputs only slow the search
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = onboard::ParseTopologyJson(text, kOrigin);
  if (!t.ok()) {
    const std::string& msg = t.status().message();
    Require(t.status().code() == onboard::ErrorCode::kBadInput, "rejection is not kBadInput",
            t.status().ToString());
    Require(msg.rfind(kOrigin, 0) == 0, "error does not name the file", msg);
    Require(msg.find('\n') == std::string::npos, "error is not one line", msg);
    return 0;
  }
  Require(onboard::ValidateTopology(*t).ok(), "accepted topology fails ValidateTopology",
          onboard::ValidateTopology(*t).ToString());
  auto again = onboard::ParseTopologyJson(onboard::TopologyToJson(*t), kOrigin);
  Require(again.ok(), "TopologyToJson output is rejected", again.status().ToString());
  Require(SameTopology(*t, *again), "TopologyToJson round trip changes the topology",
          onboard::TopologyToJson(*t));
  for (int64_t g = 1; g <= t->num_devices; g = g < 1024 ? g + 1 : g * 2) {
    const size_t i = onboard::TierForGroup(*t, g);
    Require(i < t->tiers.size() && t->tiers[i].group_size >= g, "TierForGroup picks a tier too small",
            std::to_string(g));
  }
  return 0;
}
