// INTERNAL to backends/ (includes LibTorch). Megatron-style tensor parallelism of the probe's proxy
// (ProbeConfig::tp), over the TP group (tp consecutive ranks; probe_worker_state.h):
//   column-parallel  q/k/v/g/beta/gate_b (KDA), q_b/q_proj/kv_b/gate (MLA), idx_q/idx_w (DSA
//                    indexer), w1/w3 and sh_w1/sh_w3 (MLPs), the output head: each rank holds a
//                    block of output rows (heads / FFN units / vocab), input through TpCopyIn (f:
//                    identity forward, all-reduce of the input gradient backward);
//   row-parallel     o_proj, w2, sh_w2: a block of input columns, output through TpReduceOut (g:
//                    all-reduce forward, identity backward);
//   vocab-parallel   embedding rows (masked lookup + all-reduce) and cross-entropy (max
//                    all-gather, sum-exp and target-logit all-reduces);
//   indexer          partial index scores over the local heads and the main attention's head
//                    sum for the KL are all-reduced (TpSum), so top-k and the KL see every head.
// Everything else (norms outside the TP regions, router, latent projections, routed experts) is
// replicated and computed identically on every TP rank. Replicated weights used INSIDE a region
// (gate_a, o_norm, q_a, q_a_norm, kv_a, kv_a_norm, idx_k, LoRA A of column- / B of row-parallel
// linears) get only their local heads' share of the gradient: TpPartialMask marks them and the
// train step sums them over the TP group (Megatron reduces such grads the same way).
// Legend: T = tp degree, t = TP rank; shapes [out, in] as torch.nn.Linear; Vl = vocab / T.
#pragma once

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/proxy_model.h"

namespace onboard::backends {

struct TpContext {
  Group* group = nullptr;  // the TP group; null (or size 1) = no tensor parallelism
  int64_t rank = 0, size = 1;
  ProxySpec local;  // the spec with heads, MLP widths and vocab divided by size (TpLocalSpec)
  bool active() const { return group != nullptr && size > 1; }
};

// s with kda_heads, mla_heads, index_heads, mlp_inter, shared_inter and vocab divided by tp
// (ProbeConfig::Validate checked they divide): BuildLayout of it is one TP rank's layout.
ProxySpec TpLocalSpec(const ProxySpec& s, int64_t tp);

// Rank t's slice of a full flat buffer: per slot, the block t of the one dim where the local
// layout is smaller (T times); slots of equal shape are copied (replicated).
at::Tensor TpSliceFlat(const FlatLayout& full, const FlatLayout& local, const at::Tensor& flat, int64_t t,
                       int64_t size);
// Per element of the local flat buffer: 1 on replicated slots used inside a TP region (their
// gradient is partial: summed over the TP group), else 0.
at::Tensor TpPartialMask(const FlatLayout& full, const FlatLayout& local);
// Per element: 1 / size on replicated slots (every TP rank holds a copy), 1 on split slots; the
// weight of each element in the global grad-norm sum.
at::Tensor TpNormShare(const FlatLayout& full, const FlatLayout& local, int64_t size);

// f: identity forward, input gradient all-reduced over TP backward. x unchanged when !active.
at::Tensor TpCopyIn(const TpContext* tp, const at::Tensor& x);
// g of a row-parallel linear: partial outputs all-reduced forward, identity backward.
at::Tensor TpReduceOut(const TpContext* tp, const at::Tensor& y);
// The same all-reduce (forward) / identity (backward) for partial sums that are not a linear's
// output (indexer scores over heads, the main attention's head sum, CE sums).
at::Tensor TpSum(const TpContext* tp, const at::Tensor& y);

// Vocab-parallel embedding: tok [Vl, D] rows of this rank's vocab block, ids [b, T] -> [b, T, D].
at::Tensor TpVocabEmbed(const TpContext& tp, const at::Tensor& tok, const at::Tensor& ids);
// Vocab-parallel cross-entropy: logits [b, T, Vl] (this rank's block), targets [b, T] -> nll
// [b, T] = log sum_v exp(l_v) - l_target over the whole vocabulary (max-shifted).
at::Tensor TpVocabNll(const TpContext& tp, const at::Tensor& logits, const at::Tensor& targets);
// The full logits [b, T, V] (no gradient), for the accuracy's argmax.
at::Tensor TpFullLogits(const TpContext& tp, const at::Tensor& logits);

// Sums the partial-gradient slots (mask: TpPartialMask's shard) of a gradient shard over TP;
// grad unchanged when !active or the mask is undefined.
at::Tensor TpSumPartialGrads(const TpContext& tp, const at::Tensor& mask, const at::Tensor& grad);

}  // namespace onboard::backends
