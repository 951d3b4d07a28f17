// Shared settings of the multi-process probe tests: a small proxy and the `onboard` worker binary.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/probe.h"

namespace onboard::testing_probe {

// Default 4-layer KDA,KDA,KDA,MLA+DSA proxy (dense first layer, latent MoE with a shared expert),
// shrunk so one step takes a few milliseconds.
inline ProxySpec SmallSpec() {
  ProxySpec s;
  s.source_model = "test-proxy";
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.hidden = 32;
  s.kda_heads = 2;
  s.kda_head_dim = 8;
  s.chunk = 8;
  s.gate_rank = 8;
  s.q_lora_rank = 16;
  s.kv_lora_rank = 16;
  s.qk_nope_dim = 8;
  s.qk_rope_dim = 4;
  s.v_head_dim = 8;
  s.index_heads = 2;
  s.index_head_dim = 8;
  s.index_topk = 6;
  s.num_experts = 8;
  s.top_k = 2;
  s.expert_inter = 16;
  s.shared_inter = 32;
  s.latent_dim = 16;
  s.mlp_inter = 64;
  return s;
}

// A per-process output folder for one probe run: $TMPDIR (or /tmp)/onboard-probe-test-NAME-PID.
inline std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TMPDIR");
  return std::string(base ? base : "/tmp") + "/onboard-probe-test-" + name + "-" + std::to_string(getpid());
}

inline ProbeConfig SmallConfig(int64_t ranks, const std::string& out) {
  ProbeConfig c;
  c.ranks = ranks;
  c.steps = 20;
  c.seq = 16;
  c.batch = 8;
  c.lr = 3e-3;
  c.warmup = 3;
  c.timeout_s = 120;
  c.out_dir = out;
  c.worker_binary = std::string(ONBOARD_BINARY_DIR) + "/onboard";
  return c;
}

// Steps of a negative control's run (a fault that must leave the one-process curve). Every fault
// of the layout tests changes step 0's forward or step 1's update by far more than their
// tolerance, so a few steps show it; such a run is compared with a one-process run of the same
// length (the learning-rate schedule depends on the step count, so a prefix of a longer curve is
// not the same run).
constexpr int64_t kNegativeControlSteps = 3;

// One probe run that the test expects to start and finish: its result, or (after a non-fatal
// failure naming the status) an empty result, so the caller's checks fail instead of crashing.
inline ProbeResult RunExpectingOk(const ProxySpec& spec, const ProbeConfig& config) {
  Expected<ProbeResult> r = RunProbeSpec(spec, config);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ProbeResult{};
}

// The recorded loss curve of a probe (one value per step, nats).
inline std::vector<double> Losses(const ProbeResult& r) {
  std::vector<double> l;
  for (const ProbeStep& s : r.steps) l.push_back(s.loss);
  return l;
}

// Largest relative difference between two loss curves (infinite when their lengths differ).
inline double MaxRelDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = a.size() == b.size() ? 0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return m;
}

// "" when two runs' steps have bit-identical loss, grad norm and expert loads; else the first
// difference ("step 3 grad_norm 1.2 vs 1.3"). For layouts that must not change the maths.
inline std::string FirstStepDifference(const ProbeResult& a, const ProbeResult& b) {
  if (a.steps.size() != b.steps.size())
    return std::to_string(a.steps.size()) + " vs " + std::to_string(b.steps.size()) + " steps";
  for (size_t i = 0; i < a.steps.size(); ++i) {
    const ProbeStep &x = a.steps[i], &y = b.steps[i];
    const std::string at = "step " + std::to_string(i) + " ";
    if (x.loss != y.loss) return at + "loss " + std::to_string(x.loss) + " vs " + std::to_string(y.loss);
    if (x.grad_norm != y.grad_norm)
      return at + "grad_norm " + std::to_string(x.grad_norm) + " vs " + std::to_string(y.grad_norm);
    if (x.expert_load != y.expert_load) return at + "expert_load differs";
  }
  return "";
}

}  // namespace onboard::testing_probe
