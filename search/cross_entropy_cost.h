// What the loss over the output logits holds and moves, per implementation (PlanRequest::cross_entropy).
// Used by the memory model (the last stage's workspace: memory_model.cpp) and the head time
// (layer_time.cpp HeadTime), once per head (the main head and each MTP head).
//
// Units: bytes per logit element, an element being one of the T x V/t logits of one micro-batch on one
// device (T tokens, V vocab, t tensor-parallel ranks). bf16 logits (2 B) come out of the head GEMM.
//   held    : the most the loss keeps at once (peak, forward or backward);
//   traffic : HBM bytes read + written by the loss's own kernels, forward and backward together.
//
// megatron   (Megatron-Core tensor_parallel/cross_entropy.py _VocabParallelCrossEntropy, Megatron-LM's
//             path without --cross-entropy-loss-fusion; the 'native' fusion keeps the same tensors):
//   held    = 2 (bf16 logits, still referenced by the caller)
//           + 4 (logits.float(); max-subtract, exp, divide in place: it becomes the saved softmax)
//           = 6, and again in backward: the fp32 gradient (in place) + its bf16 cast by autograd
//   traffic = .float() 2 + 4 | max 4 | subtract 4 + 4 | exp 4 + 4 | sum 4 | divide 4 + 4        = 38 fwd
//           + multiply by grad_output 4 + 4 | cast to bf16 4 + 2                              = 14 bwd
// te         (Transformer Engine parallel_cross_entropy, TE >= 2.18: PR #3193, 2026-07-09, "Store the
//             input gradient in FP32"; Megatron --cross-entropy-fusion-impl te):
//   held    = 2 (bf16 logits) + 4 (fp32 gradient written in the forward, saved) = 6; backward: 4 + 2 (cast)
//   traffic = online-softmax pass 2 | loss + gradient pass 2 + 4                                = 8 fwd
//           + element_mul_kernel 4 + 4 | cast to bf16 4 + 2                                    = 14 bwd
// te_inplace (the same kernels before PR #3193, TE <= 2.17.1: the gradient overwrites the bf16 logits;
//             what Megatron-Bridge's performance scripts ran: cross_entropy_fusion_impl "te" in every
//             scripts/performance version from 25.09 (yaml) to 26.08 (utils/overrides.py))
//   held    = 2
//   traffic = online-softmax pass 2 | loss + gradient pass 2 + 2 | element_mul_kernel 2 + 2     = 10
// torch      (torch.nn.functional.cross_entropy over logits.float(): torchtitan components/loss.py
//             cross_entropy_loss; torchtitan frees the bf16 logits before the backward, `del pred`):
//   t = 1 (fused ATen log_softmax and nll_loss):
//   held    = backward: the saved log-softmax 4 + nll_loss's gradient 4 + log_softmax's gradient 4 = 12
//             (forward: bf16 2 + fp32 copy 4 + log-softmax 4 = 10)
//   traffic = .float() 2 + 4 | log_softmax: max, sum-exp, write passes 4 + 4 + 4 + 4            = 22 fwd
//           + nll gradient 4 | log_softmax backward 4 + 4 + 4 + 4 | cast to bf16 4 + 2          = 26 bwd
//   t > 1: loss parallel, torchtitan's default with TP (parallelism.disable_loss_parallel = False: the
//   output projection keeps the logits vocab-sharded, Shard(-1), and the step runs under
//   loss_parallel()). PyTorch's handlers (torch/distributed/tensor/parallel/loss.py _log_softmax,
//   _nll_loss_and_log_softmax_backward) run unfused elementwise ops on the local V/t shard:
//   held    = forward: bf16 2 + fp32 copy 4 + shifted = x - max 4 + exp(shifted) or the result 4  = 14;
//             backward: saved log-softmax 4 + zeros_like 4 + exp(x) 4 + (grad_input + exp) 4    = 16
//             (then * grad_output replaces exp(x))
//   traffic = .float() 2 + 4 | amax 4 | shifted 4 + 4 | exp 4 + 4 | sum 4 | shifted - lse 4 + 4 = 38 fwd
//           + zeros_like 4 | exp 4 + 4 | add 4 + 4 + 4 | * grad_output 4 + 4 | cast 4 + 2     = 38 bwd
//   (disable_loss_parallel = True would hold the full vocabulary on every TP rank: not costed; the
//   torchtitan exports leave loss parallel on.)
#pragma once

#include <cstdint>
#include <string>

namespace onboard {

struct CrossEntropyCost {
  const char* name;         // PlanRequest::cross_entropy
  double held_bytes;        // per logit element, peak
  double traffic_bytes;     // per logit element, HBM, forward + backward
  double tp_held_bytes;     // the same under tensor parallelism (t > 1), where the implementation
  double tp_traffic_bytes;  // can differ (torch: loss parallel)

  double Held(int64_t tp) const { return tp > 1 ? tp_held_bytes : held_bytes; }
  double Traffic(int64_t tp) const { return tp > 1 ? tp_traffic_bytes : traffic_bytes; }
};

// PlanRequest's default: Megatron-LM's own path (the Megatron-family exports set no loss fusion).
inline constexpr const char* kDefaultCrossEntropy = "megatron";

// The implementation named `name`, or nullptr (CheckCrossEntropy, plan_request_checks.h, lists
// CrossEntropyNames()).
const CrossEntropyCost* FindCrossEntropy(const std::string& name);
// "megatron | te | te_inplace | torch".
std::string CrossEntropyNames();

}  // namespace onboard
