// The smallest probe proxy that learns the copy task with the probe's default recipe
// (DefaultProbeConfig): two softmax-attention layers with rotary positions (a 2-layer induction
// circuit), the second with a MoE channel. The KDA SmallSpec needs the full 400 steps and minutes.
// Used by the negative controls (probe_controls_test.cpp) and the real-Slurm probe (slurm_probe_test.cpp).
#pragma once

#include "tests/backends/probe_test_util.h"

namespace onboard::testing_probe {

inline ProxySpec CopyLearnerSpec() {
  ProxySpec s = SmallSpec();
  s.source_model = "copy-learner-proxy";
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kDense}, {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.rope = true;
  s.index_topk = 0;
  s.index_heads = 0;
  s.index_head_dim = 0;
  s.mla_heads = 4;
  return s;
}

}  // namespace onboard::testing_probe
