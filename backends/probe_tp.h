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
// replicated and computed identically on every TP rank.
// Sequence parallelism (ProbeConfig::sequence_parallel, Megatron-style): outside the regions each
// TP rank holds its seq/T tokens [b, T_seq/T, D] (rank t: tokens [t*T_seq/T, (t+1)*T_seq/T)), so
// norms and residuals run on 1/T of the tokens; a region's input is all-gathered along the
// sequence (TpRegionIn: reduce-scatter of its gradient) and its output reduce-scattered
// (TpRegionOut: all-gather of its gradient); the vocab-parallel embedding reduce-scatters. The
// MoE channel (router and routed experts replicated) runs on the gathered sequence
// (SpGatherReplicated) and keeps its rank's chunk (SpChunk). The norms' gradients are then
// partial (each rank's tokens): TpPartialMask marks them too. Replicated weights used INSIDE a region
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
  bool sequence_parallel = false;  // ProbeConfig::sequence_parallel
  bool expert_tp = false;          // ProbeConfig::etp == tp: routed experts split like the MLPs
  bool active() const { return group != nullptr && size > 1; }
  bool sp() const { return active() && sequence_parallel; }
};

// s with kda_heads, mla_heads, index_heads, mlp_inter, shared_inter and vocab divided by tp, and
// expert_inter by etp (1 or tp; ProbeConfig::Validate checked they divide): BuildLayout of it is
// one TP rank's layout.
ProxySpec TpLocalSpec(const ProxySpec& s, int64_t tp, int64_t etp);

// Rank t's slice of a full flat buffer: per slot, the block t of the one dim where the local
// layout is smaller (T times); slots of equal shape are copied (replicated).
at::Tensor TpSliceFlat(const FlatLayout& full, const FlatLayout& local, const at::Tensor& flat, int64_t t,
                       int64_t size);
// Per element of the local flat buffer: 1 on replicated slots used inside a TP region (their
// gradient is partial: summed over the TP group), and with sequence parallelism on the norms
// outside the regions (each rank saw its own tokens), else 0.
at::Tensor TpPartialMask(const FlatLayout& full, const FlatLayout& local, bool sequence_parallel);
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

// A column-parallel region's input h: TpCopyIn without SP; with SP h is the rank's [b, T_seq/T, D]
// chunk, all-gathered along the sequence to [b, T_seq, D] (backward: gradient reduce-scattered).
at::Tensor TpRegionIn(const TpContext* tp, const at::Tensor& h);
// A row-parallel region's partial output y [b, T_seq, D]: TpReduceOut without SP; with SP
// reduce-scattered along the sequence to the rank's [b, T_seq/T, D] (backward: all-gather).
at::Tensor TpRegionOut(const TpContext* tp, const at::Tensor& y);
// SP only (x unchanged otherwise): the rank's chunk h [b, T_seq/T, D] all-gathered for a
// replicated computation (every TP rank computes the same from it); backward keeps the rank's
// chunk of the gradient (the replicated consumer's gradient is already whole on every rank).
at::Tensor SpGatherReplicated(const TpContext* tp, const at::Tensor& h);
// SP only: the rank's chunk [b, T_seq/T, D] of a replicated full-sequence y; backward all-gathers.
at::Tensor SpChunk(const TpContext* tp, const at::Tensor& y);

// Expert tensor parallelism (TpContext::expert_tp; x / y unchanged otherwise): the rows an EP rank
// received for its experts enter the experts' column-parallel w1 / w3 (TpCopyIn) and their
// row-parallel w2 outputs are all-reduced (TpReduceOut) before the router weights combine them
// (as Megatron's token combine reduces over the expert-TP group before unpermuting).
at::Tensor TpExpertIn(const TpContext* tp, const at::Tensor& x);
at::Tensor TpExpertOut(const TpContext* tp, const at::Tensor& y);

// Vocab-parallel embedding: tok [Vl, D] rows of this rank's vocab block, ids [b, T] -> [b, T, D]
// (SP: the rank's chunk [b, T/T_tp, D], reduce-scattered).
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
