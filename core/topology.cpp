// Topology JSON reading, validation and tier lookup. Schema: examples/topologies/README.md.
// Units: TFLOP/s, GiB, GB/s (1e9 B/s) per device each way, microseconds.
#include "core/topology.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard {
namespace {

using nlohmann::json;

std::string Num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

bool Finite(double v) { return std::isfinite(v); }

// Reads a number field; missing -> default when `required` is false.
Status ReadNumber(const json& obj, const std::string& key, const std::string& path,
                  const std::string& origin, bool required, double* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return BadInput(origin, path + key, "missing required number");
    return Status::Ok();
  }
  if (!it->is_number()) return BadInput(origin, path + key, "must be a number", it->dump());
  *out = it->get<double>();
  if (!Finite(*out)) return BadInput(origin, path + key, "must be finite", it->dump());
  return Status::Ok();
}

Status ReadInt(const json& obj, const std::string& key, const std::string& path,
               const std::string& origin, bool required, int64_t* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) return BadInput(origin, path + key, "missing required integer");
    return Status::Ok();
  }
  if (!it->is_number_integer() && !it->is_number_unsigned())
    return BadInput(origin, path + key, "must be an integer", it->dump());
  // An unsigned literal above INT64_MAX would wrap to a negative int64 (and be quoted as one).
  if (it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX})
    return BadInput(origin, path + key, "must be at most " + std::to_string(INT64_MAX), it->dump());
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadString(const json& obj, const std::string& key, const std::string& path,
                  const std::string& origin, std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Ok();
  if (!it->is_string()) return BadInput(origin, path + key, "must be a string", it->dump());
  *out = it->get<std::string>();
  return Status::Ok();
}

// Unknown keys are typos more often than extensions: reject them (keys starting '_' are comments).
Status CheckKeys(const json& obj, const std::vector<std::string>& known, const std::string& path,
                 const std::string& origin) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!it.key().empty() && it.key()[0] == '_') continue;
    bool ok = false;
    for (const auto& k : known) ok = ok || k == it.key();
    if (!ok) return BadInput(origin, path + it.key(), "unknown field", it.key());
  }
  return Status::Ok();
}

}  // namespace

Status ValidateTopology(const Topology& t) {
  const std::string& f = t.source.empty() ? t.name : t.source;
  if (t.num_devices <= 0 || t.num_devices > (int64_t{1} << 20))
    return BadInput(f, "num_devices", "must be in [1, 1048576]", std::to_string(t.num_devices));
  if (!(t.device.tflops_bf16 > 0) || !Finite(t.device.tflops_bf16))
    return BadInput(f, "device.tflops_bf16", "must be > 0", Num(t.device.tflops_bf16));
  if (t.device.tflops_fp8 < 0 || !Finite(t.device.tflops_fp8))
    return BadInput(f, "device.tflops_fp8", "must be >= 0", Num(t.device.tflops_fp8));
  if (t.device.tflops_fp4 < 0 || !Finite(t.device.tflops_fp4))
    return BadInput(f, "device.tflops_fp4", "must be >= 0", Num(t.device.tflops_fp4));
  if (t.device.tflops_fp32 < 0 || !Finite(t.device.tflops_fp32))
    return BadInput(f, "device.tflops_fp32", "must be >= 0", Num(t.device.tflops_fp32));
  if (!(t.device.hbm_gib > 0) || !Finite(t.device.hbm_gib))
    return BadInput(f, "device.hbm_gib", "must be > 0", Num(t.device.hbm_gib));
  if (!(t.device.hbm_gbps > 0) || !Finite(t.device.hbm_gbps))
    return BadInput(f, "device.hbm_gbps", "must be > 0", Num(t.device.hbm_gbps));
  if (t.tiers.empty()) return BadInput(f, "tiers", "needs at least one communication tier", "[]");
  int64_t prev = 1;
  for (size_t i = 0; i < t.tiers.size(); ++i) {
    const CommTier& c = t.tiers[i];
    const std::string p = "tiers[" + std::to_string(i) + "].";
    if (c.group_size <= 0 || c.group_size < prev || c.group_size % prev != 0)
      return BadInput(f, p + "group_size",
                      "must be a positive multiple of the previous tier's group_size " +
                          std::to_string(prev),
                      std::to_string(c.group_size));
    if (c.group_size > t.num_devices || t.num_devices % c.group_size != 0)
      return BadInput(f, p + "group_size",
                      "must divide num_devices=" + std::to_string(t.num_devices),
                      std::to_string(c.group_size));
    if (!(c.bw_gbps > 0) || !Finite(c.bw_gbps)) return BadInput(f, p + "bw_gbps", "must be > 0", Num(c.bw_gbps));
    if (c.latency_us < 0 || !Finite(c.latency_us))
      return BadInput(f, p + "latency_us", "must be >= 0", Num(c.latency_us));
    if (!(c.efficiency > 0) || c.efficiency > 1 || !Finite(c.efficiency))
      return BadInput(f, p + "efficiency", "must be in (0, 1]", Num(c.efficiency));
    prev = c.group_size;
  }
  if (t.tiers.back().group_size != t.num_devices)
    return BadInput(f, "tiers[" + std::to_string(t.tiers.size() - 1) + "].group_size",
                    "the slowest tier must span num_devices=" + std::to_string(t.num_devices),
                    std::to_string(t.tiers.back().group_size));
  return Status::Ok();
}

Expected<Topology> ParseTopologyJson(const std::string& text, const std::string& origin) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadInput(origin, "(document)", "not valid JSON");
  if (!j.is_object()) return BadInput(origin, "(document)", "must be a JSON object", j.dump().substr(0, 40));
  ONBOARD_RETURN_IF_ERROR(CheckKeys(j, {"name", "num_devices", "device", "tiers"}, "", origin));
  Topology t;
  t.source = origin;
  ONBOARD_RETURN_IF_ERROR(ReadString(j, "name", "", origin, &t.name));
  ONBOARD_RETURN_IF_ERROR(ReadInt(j, "num_devices", "", origin, true, &t.num_devices));
  auto dev = j.find("device");
  if (dev == j.end() || !dev->is_object()) return BadInput(origin, "device", "missing or not an object");
  ONBOARD_RETURN_IF_ERROR(CheckKeys(
      *dev, {"name", "tflops_bf16", "tflops_fp8", "tflops_fp4", "tflops_fp32", "hbm_gib", "hbm_gbps"},
      "device.", origin));
  ONBOARD_RETURN_IF_ERROR(ReadString(*dev, "name", "device.", origin, &t.device.name));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "tflops_bf16", "device.", origin, true, &t.device.tflops_bf16));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "tflops_fp8", "device.", origin, false, &t.device.tflops_fp8));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "tflops_fp4", "device.", origin, false, &t.device.tflops_fp4));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "tflops_fp32", "device.", origin, false, &t.device.tflops_fp32));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "hbm_gib", "device.", origin, true, &t.device.hbm_gib));
  ONBOARD_RETURN_IF_ERROR(ReadNumber(*dev, "hbm_gbps", "device.", origin, true, &t.device.hbm_gbps));
  auto tiers = j.find("tiers");
  if (tiers == j.end() || !tiers->is_array()) return BadInput(origin, "tiers", "missing or not an array");
  for (size_t i = 0; i < tiers->size(); ++i) {
    const json& c = (*tiers)[i];
    const std::string p = "tiers[" + std::to_string(i) + "].";
    if (!c.is_object()) return BadInput(origin, "tiers[" + std::to_string(i) + "]", "must be an object", c.dump());
    ONBOARD_RETURN_IF_ERROR(CheckKeys(c, {"name", "group_size", "bw_gbps", "latency_us", "efficiency"}, p, origin));
    CommTier tier;
    ONBOARD_RETURN_IF_ERROR(ReadString(c, "name", p, origin, &tier.name));
    ONBOARD_RETURN_IF_ERROR(ReadInt(c, "group_size", p, origin, true, &tier.group_size));
    ONBOARD_RETURN_IF_ERROR(ReadNumber(c, "bw_gbps", p, origin, true, &tier.bw_gbps));
    ONBOARD_RETURN_IF_ERROR(ReadNumber(c, "latency_us", p, origin, false, &tier.latency_us));
    ONBOARD_RETURN_IF_ERROR(ReadNumber(c, "efficiency", p, origin, false, &tier.efficiency));
    t.tiers.push_back(tier);
  }
  ONBOARD_RETURN_IF_ERROR(ValidateTopology(t));
  return t;
}

Expected<Topology> LoadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("topology file " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().size() > (16u << 20)) return BadInput(path, "(document)", "file larger than 16 MiB");
  return ParseTopologyJson(ss.str(), path);
}

std::string TopologyToJson(const Topology& t) {
  json j;
  j["name"] = t.name;
  j["num_devices"] = t.num_devices;
  j["device"] = {{"name", t.device.name},       {"tflops_bf16", t.device.tflops_bf16},
                 {"tflops_fp8", t.device.tflops_fp8}, {"tflops_fp32", t.device.tflops_fp32},
                 {"hbm_gib", t.device.hbm_gib}, {"hbm_gbps", t.device.hbm_gbps}};
  if (t.device.tflops_fp4 > 0)
    j["device"]["tflops_fp4"] = t.device.tflops_fp4;  // only where the device has it
  j["tiers"] = json::array();
  for (const auto& c : t.tiers)
    j["tiers"].push_back({{"name", c.name}, {"group_size", c.group_size}, {"bw_gbps", c.bw_gbps},
                          {"latency_us", c.latency_us}, {"efficiency", c.efficiency}});
  return j.dump(2);
}

size_t TierForGroup(const Topology& t, int64_t group_size) {
  for (size_t i = 0; i < t.tiers.size(); ++i)
    if (group_size <= t.tiers[i].group_size) return i;
  return t.tiers.empty() ? 0 : t.tiers.size() - 1;
}

size_t TierForStridedGroup(const Topology& t, int64_t group_size, int64_t stride) {
  if (group_size <= 1) return 0;
  return TierForGroup(t, group_size * std::max<int64_t>(stride, 1));  // aligned block it spans
}

Topology LocalhostTopology(int64_t ranks, double matmul_gflops, double loopback_gbps,
                           double latency_us, double mem_gib) {
  Topology t;
  t.name = "localhost-cpu";
  t.source = "localhost-cpu (measured)";
  t.num_devices = ranks;
  t.device.name = "localhost-cpu";
  t.device.tflops_bf16 = matmul_gflops / 1000.0;
  t.device.tflops_fp32 = matmul_gflops / 1000.0;
  t.device.hbm_gib = mem_gib;
  t.device.hbm_gbps = std::max(1.0, loopback_gbps * 4);
  t.tiers.push_back({"loopback", ranks, loopback_gbps, latency_us, 1.0});
  return t;
}

}  // namespace onboard
