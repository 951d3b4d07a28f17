// INTERNAL to backends/ (includes LibTorch). FSDP for one proxy unit, as an autograd function:
//   forward:  all-gather the unit's flat shards, run the unit without keeping its graph, free the
//             gathered weights (only the unit's input is saved);
//   backward: all-gather again, recompute the unit with grad, backpropagate, reduce-scatter the
//             weight gradients to the shards (sum over the fsdp group), return input gradients.
// This is FSDP with per-block activation recomputation (torchtitan's FSDP2 + full AC): peak weight
// memory is one unit unsharded at a time. That is the path of a layer unit whose token mixer and
// channel mixer kinds both recompute "full" (UnitRunner::mixer / channel).
// Any other layer unit, and the embed and head units (never recomputed, as in Megatron), keep
// their forward graph ("kept" path):
//   forward:  all-gather, run the unit with grad (its token mixer / channel mixer region
//             checkpointed when its policy is full; the mixer's core attention when selective:
//             proxy_forward.cpp), free the gathered weights' bytes (the graph's saved views stay);
//   backward: all-gather into those storages again (RefillStorage), backpropagate the kept graph,
//             reduce-scatter as above.
// Both paths issue the same collectives (2 all-gathers + 1 reduce-scatter per unit and buffer) and
// compute the same values in the same order: the loss curve is bit-identical across policies.
// Routed experts: EP partitions them over the ep group; each rank's local-experts buffer is
// sharded the same way over its EP replicas (expert_fsdp).
#pragma once

#include <torch/torch.h>

#include "backends/proxy_model.h"

namespace onboard::backends {

struct UnitRunner {
  const ProxySpec* spec = nullptr;
  const UnitLayout* unit = nullptr;
  Group* fsdp = nullptr;
  Group* expert_fsdp = nullptr;  // shards the local experts (EP replicas); size 1 = not sharded
  MoeRouting* routing = nullptr;
  const UnitInputs* inputs = nullptr;
  double lora_scale = 0;
  Recompute mixer = Recompute::kFull;    // policy of the layer's token-mixer kind
  Recompute channel = Recompute::kFull;  // policy of the layer's channel kind
};

// shards: dense and lora shards [numel_padded / fsdp]; experts / expert_lora: shards of the local
// experts' flat buffers [padded / expert_fsdp] (empty tensors when the unit has none).
at::Tensor RunFsdpUnit(UnitRunner* runner, const at::Tensor& x, const at::Tensor& dense_shard,
                       const at::Tensor& lora_shard, const at::Tensor& experts,
                       const at::Tensor& expert_lora);

}  // namespace onboard::backends
