// INTERNAL to backends/ (includes LibTorch). Activation checkpointing of one region of a unit's
// forward (torch.utils.checkpoint, non-reentrant semantics in one custom autograd function):
//   forward:  body(inputs) without keeping its graph; only `inputs` are saved;
//   backward: body again with grad from leaves that stand for the inputs, backpropagate.
// The recomputation runs with MoeRouting::record off (no routed-token count, indexer KL or exact
// match is recorded twice). Outputs: body's tensors; only those that require grad get gradients.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <vector>

#include "backends/proxy_model.h"

namespace onboard::backends {

using CheckpointBody = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// inputs: tensors the body reads (floating ones get gradients; others, e.g. bool masks, pass as is).
std::vector<at::Tensor> Checkpoint(CheckpointBody body, const std::vector<at::Tensor>& inputs,
                                   MoeRouting& routing);

}  // namespace onboard::backends
