// The routed-memory proxy of the random_router control (backends/README.md "Lookup task", fifth and
// seventh designs): one RoPE-MLA layer (no output gate, dense attention) and one routed MoE of 16
// experts x inter 8, top-1 without renormalisation, bias balancing, no shared expert, no latent and
// no dense MLP. The lookup table must live in the experts; with a consistent router each expert
// holds its share, with random routing every expert would have to hold all of it. Its recipe is
// backends::RouterControlProbeConfig() (backends/probe_schedule.h).
#pragma once

#include "tests/backends/probe_test_util.h"

namespace onboard::testing_probe {

inline ProxySpec RouterLearnerSpec() {
  ProxySpec s = SmallSpec();
  s.source_model = "router-learner-proxy";
  s.layers = {{ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.rope = true;
  s.mla_output_gate = false;
  s.index_topk = 0;
  s.index_heads = 0;
  s.index_head_dim = 0;
  s.num_experts = 16;
  s.top_k = 1;
  s.expert_inter = 8;
  s.num_shared = 0;
  s.latent_dim = 0;
  s.renormalize = false;
  s.balance_bias = true;
  return s;
}

}  // namespace onboard::testing_probe
