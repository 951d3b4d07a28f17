// Autograd functions of the proxy's routed experts (backends/proxy_moe.cpp): the experts run per EP
// source with per-source weight gradients summed in the canonical pairwise order, and redundant
// experts' gradients summed over their copies. Both keep the fp32 curve bit-exact against one
// process. Internal to backends/.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "backends/proxy_model.h"

namespace onboard::backends {

// Expert FFN over rows x [R, d] received from seg.size() EP source ranks (seg[s] rows from source s,
// grouped by source in rank order); w: one expert's flat weights, wl: its flat adapters ([0] without
// LoRA), laid out by u.expert / u.expert_lora.
at::Tensor ExpertSegments(const at::Tensor& x, const at::Tensor& w, const at::Tensor& wl, const UnitLayout& u,
                          double lora_scale, std::vector<int64_t> seg);

// Redundant experts (probe_replicas.h): w (this rank's slots, flat) unchanged forward; backward each
// slot gets the pairwise sum of its expert's copies' gradients. w itself where sync is null, w is
// empty or w needs no gradient.
at::Tensor SyncReplicas(const at::Tensor& w, const ReplicaGradSync* sync);

}  // namespace onboard::backends
