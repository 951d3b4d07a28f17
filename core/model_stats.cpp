// ComputeStats: parameters, active parameters, forward FLOPs and activation bytes per token.
//
// Units: parameters are scalar counts (fp8/MXFP4 weights counted unpacked, one per element); FLOPs are
// floating-point operations with a multiply-add = 2; bytes are bytes. Per-token figures are averages
// over the positions 1..seq of one causal sequence of `seq` tokens.
//
// Legend: h = hidden, H = query heads, KV = kv heads, d = head_dim, dv = v_head_dim, n = seq,
// E = routed experts, k = top-k, I = FFN width, L = latent width (latent MoE), C = chunk size.
//
// Forward FLOPs per token of one layer =
//     2 * (active matmul parameters)                      [every weight a token touches, once]
//   + attention term by mixer kind (attn_flops_per_token):
//       full softmax (MHA/GQA):  2 * H * (d + dv) * n_avg,        n_avg = (n + 1) / 2 (causal average)
//       sliding window W:        2 * H * (d + dv) * w_avg,        w_avg = mean_t min(t, W)
//       MLA (training form):     2 * H * (nope + rope + dv) * n_avg
//       DSA indexer:             2 * H_I * d_I * n_avg            (q_I . k_I over all earlier keys)
//                              + 2 * H_I * n_avg                  (ReLU, weighting by w[t,j])
//       DSA core attention:      2 * H * (d_qk + dv) * k_avg,     k_avg = mean_t min(topk, t); on MLA in
//                                MQA form (kernels.md, FlashMLA sparse): d_qk = kv_lora + rope, dv = kv_lora
//                                (the kv_b absorption matmuls equal kv_b's 2 * params, already counted)
//       KDA / gated DeltaNet:    per value head  6 * dk * dv       (state decay, S^T k, rank-1 update, S^T q)
//                                             + 3 * C * dk         (intra-chunk L, W, Q K^T)
//                                             + C * C              (intra-chunk triangular solve / A V)
//                              + 2 * conv * conv_channels          (short causal depthwise conv)
//       lightning/linear attn:   per head  4 * d * d + 2 * C * d   (state update + read, intra-chunk)
//   + LM head: 2 * vocab * h (the embedding lookup is free).
//   The vision tower runs per image patch, not per text token: its parameters count in total and active,
//   its FLOPs are not in flops_per_token.
//
// Activation bytes per token kept for backward (16-bit tensors, no recompute, flash attention so no
// n x n score matrix, no dropout masks; fp32 where the kernels keep fp32). Per layer:
//     2 * h * norms                                      norm inputs
//   attention, softmax kinds:
//     2 * h                                              input of q/k/v projections
//     2 * (H*d + KV*d + KV*dv)                           q, k, v (MLA: H*(nope+rope) for q and k, H*dv v)
//     2 * (q_lora + kv_lora + rope)                      MLA latents
//     2 * H * dv                                         attention output (o_proj input)
//     4 * H                                              softmax log-sum-exp (fp32)
//     2 * H * dv                                         output gate (when gated)
//     2 * (H_I * d_I + d_I) + 4 * H_I + 4 * topk         DSA indexer q/k, weights, selected indices (i32)
//   attention, KDA / gated DeltaNet / linear:
//     2 * h + 4 * (q + k + v channels)                   input; q,k,v before and after the short conv
//     4 * HV * dk + 4 * HV                               decay g (fp32, per channel for KDA) and beta
//     4 * HV * dk * dv / C                               chunk-boundary states (fp32)
//     6 * HV * dv                                        o, output gate, gated-norm output
//   dense MLP:  2 * h + 6 * I (gated: gate, up, act) or 2 * h + 4 * I (up, act)
//   MoE:        2 * h + 4 * E (router logits, fp32) + k * (2 * w + 6 * I) + shared * 6 * I_s
//               + 2 * (h + L) (latent down/up inputs) when latent
// For a standard 16-bit layer (MHA, non-gated 4h GELU MLP) this gives 32 * h, Korthikanti et al.'s
// 34 * h less the two 1-byte dropout masks.
#include <algorithm>
#include <map>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {
namespace {

// Counts are computed in long double (exact for integers below 2^64 on every target we build for) so
// that absurd dimensions are detected (ModelSizeFitsInt64) rather than overflowing int64 arithmetic.
using Num = long double;

struct AttnCount {
  Num params = 0;
  Num matmul = 0;  // of which matmul weights (the rest are norms, biases, sinks, decay vectors)
};

// Parameters of a softmax attention block without the DSA indexer.
AttnCount SoftmaxAttentionParams(const AttentionSpec& a, MixerKind kind, Num h) {
  AttnCount c;
  const Num H = a.num_heads, KV = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  const Num d = a.head_dim, dv = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  const Num qr = a.q_lora_rank, kvr = a.kv_lora_rank;
  const Num nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim;
  if (kind == MixerKind::kMLA) {
    if (a.q_lora_rank > 0) {
      c.matmul += h * qr;                        // q_a_proj
      c.params += qr;                            // q_a_layernorm
      c.matmul += qr * H * (nope + rope);        // q_b_proj
    } else {
      c.matmul += h * H * (nope + rope);         // q_proj
    }
    c.matmul += h * (kvr + rope);                // kv_a_proj_with_mqa
    c.params += kvr;                             // kv_a_layernorm
    c.matmul += kvr * H * (nope + dv);           // kv_b_proj
    c.matmul += H * dv * h;                      // o_proj
    if (a.output_gate) c.matmul += h * H * dv;   // output gate projection
    if (a.o_bias) c.params += h;
  } else {
    c.matmul += h * H * d;                       // q_proj
    c.matmul += h * KV * d;                      // k_proj
    c.matmul += h * KV * dv;                     // v_proj
    c.matmul += H * dv * h;                      // o_proj
    if (a.output_gate) c.matmul += h * H * d;    // gate half of q_proj (Qwen3-Next) / gate proj
    if (a.qkv_bias) c.params += H * d * (a.output_gate ? 2 : 1) + KV * d + KV * dv;
    if (a.o_bias) c.params += h;
    if (a.qk_norm) c.params += a.qk_norm_full ? (H + KV) * d  // q_norm, k_norm over all heads
                                              : 2 * d;        // per head, shared over heads
  }
  if (a.sinks) c.params += H;                    // learned attention sinks
  c.params += c.matmul;
  return c;
}

AttnCount AttentionParams(const AttentionSpec& a, Num h) {
  AttnCount c;
  const Num H = a.num_heads;
  const Num HV = a.num_v_heads > 0 ? a.num_v_heads : a.num_heads;
  const Num dk = a.head_dim, dv = a.v_head_dim > 0 ? a.v_head_dim : a.head_dim;
  const Num conv = a.conv_kernel;
  switch (a.kind) {
    case MixerKind::kMHA:
    case MixerKind::kGQA:
    case MixerKind::kSlidingWindow:
    case MixerKind::kMLA:
      return SoftmaxAttentionParams(a, a.kind, h);
    case MixerKind::kDSA: {
      c = SoftmaxAttentionParams(a, a.dsa_base, h);
      const Num q_in = (a.dsa_base == MixerKind::kMLA && a.q_lora_rank > 0) ? a.q_lora_rank : h;
      const Num IH = a.index_heads, Id = a.index_head_dim;
      Num ind = 0;
      ind += q_in * IH * Id;                     // indexer wq_b (from the q latent when MLA)
      ind += h * Id;                             // indexer wk (one key per token)
      ind += h * IH;                             // indexer weights_proj
      c.matmul += ind;
      c.params += ind + 2 * Id;                  // + indexer k_norm LayerNorm (weight, bias)
      return c;
    }
    case MixerKind::kKDA: {
      c.matmul += 2 * h * H * dk;                // q_proj, k_proj
      c.matmul += h * HV * dv;                   // v_proj
      c.params += (2 * H * dk + HV * dv) * conv; // q/k/v short depthwise convs
      c.params += HV;                            // A_log
      if (a.full_rank_gate) {
        c.matmul += h * HV * dk;                 // f_proj (full-rank decay gate)
      } else {
        c.matmul += h * dk + dk * HV * dk;       // f_a_proj, f_b_proj (low-rank decay gate)
      }
      c.params += HV * dk;                       // dt_bias
      c.matmul += h * HV;                        // b_proj (beta)
      c.matmul += h * dv + dv * HV * dv;         // g_a_proj, g_b_proj (output gate)
      c.params += dv;                            // o_norm (gated RMSNorm)
      c.matmul += HV * dv * h;                   // o_proj
      c.params += c.matmul;
      return c;
    }
    case MixerKind::kGatedDeltaNet: {
      const Num key_dim = H * dk, value_dim = HV * dv;
      c.matmul += h * (2 * key_dim + 2 * value_dim);  // in_proj_qkvz
      c.matmul += h * 2 * HV;                         // in_proj_ba
      c.params += (2 * key_dim + value_dim) * conv;   // conv1d (depthwise, no bias)
      c.params += 2 * HV;                             // dt_bias, A_log
      c.params += dv;                                 // gated RMSNorm
      c.matmul += value_dim * h;                      // out_proj
      c.params += c.matmul;
      return c;
    }
    case MixerKind::kLinearAttention: {
      c.matmul += h * 3 * H * dk;                // qkv_proj
      c.params += H * dk;                        // norm over all heads
      c.matmul += H * dk * h;                    // out_proj
      c.matmul += h * H * dk;                    // output_gate
      c.params += c.matmul;
      return c;
    }
  }
  return c;
}

struct ChannelCount {
  Num params = 0;
  Num active = 0;
  Num experts = 0;         // all routed expert parameters
  Num expert_vectors = 0;  // of which biases (stored at the model dtype, not the expert dtype)
  Num router = 0;
};

Num FfnParams(Num in, Num width, bool gated, bool bias) {
  Num p = (gated ? 3 : 2) * in * width;
  if (bias) p += (gated ? 2 : 1) * width + in;
  return p;
}

ChannelCount ChannelParams(const LayerSpec& l, Num h) {
  ChannelCount c;
  if (l.channel == ChannelKind::kDenseMLP) {
    c.params = FfnParams(h, l.mlp.intermediate, l.mlp.gated, l.mlp.bias);
    c.active = c.params;
    return c;
  }
  const MoESpec& m = l.moe;
  const Num E = m.num_experts, L = m.latent_dim;
  const Num w = m.latent_dim > 0 ? L : h;
  c.router = h * E + (m.router_bias ? E : 0) + (m.expert_score_bias ? E : 0);
  const Num per_expert = FfnParams(w, m.expert_intermediate, m.gated, m.expert_bias);
  c.experts = E * per_expert;
  c.expert_vectors = E * (per_expert - FfnParams(w, m.expert_intermediate, m.gated, false));
  Num always = c.router;
  if (m.latent_dim > 0) always += 2 * h * L + (m.latent_norm ? L : 0);  // latent down/up (+ norm)
  always += static_cast<Num>(m.num_shared) * FfnParams(h, m.shared_intermediate, true, false);
  if (m.shared_gate) always += h;                                        // shared_expert_gate
  c.params = always + c.experts;
  c.active = always + static_cast<Num>(m.top_k) * per_expert;
  return c;
}

// mean over t = 1..n of min(t, cap)
double MeanCapped(int64_t n, int64_t cap) {
  if (n <= 0) return 0;
  if (cap <= 0 || cap >= n) return (static_cast<double>(n) + 1.0) / 2.0;
  const double c = static_cast<double>(cap);
  return (c * (c + 1.0) / 2.0 + static_cast<double>(n - cap) * c) / static_cast<double>(n);
}

double AttentionFlops(const AttentionSpec& a, int64_t seq) {
  const double H = static_cast<double>(a.num_heads);
  const double HV = static_cast<double>(a.num_v_heads > 0 ? a.num_v_heads : a.num_heads);
  const double d = static_cast<double>(a.head_dim);
  const double dv = static_cast<double>(a.v_head_dim > 0 ? a.v_head_dim : a.head_dim);
  const double n_avg = MeanCapped(seq, 0);
  const double C = static_cast<double>(a.chunk_size > 0 ? a.chunk_size : 64);
  const MixerKind base = a.kind == MixerKind::kDSA ? a.dsa_base : a.kind;
  const double dqk = base == MixerKind::kMLA ? static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim) : d;
  switch (a.kind) {
    case MixerKind::kMHA:
    case MixerKind::kGQA:
    case MixerKind::kMLA:
      return 2 * H * (dqk + dv) * n_avg;
    case MixerKind::kSlidingWindow:
      return 2 * H * (dqk + dv) * MeanCapped(seq, a.window);
    case MixerKind::kDSA: {
      const double IH = static_cast<double>(a.index_heads), Id = static_cast<double>(a.index_head_dim);
      const bool mqa = base == MixerKind::kMLA;
      const double sq = mqa ? static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) : dqk;
      const double sv = mqa ? static_cast<double>(a.kv_lora_rank) : dv;
      double f = 0;
      f += 2 * IH * Id * n_avg;
      f += 2 * IH * n_avg;
      f += 2 * H * (sq + sv) * MeanCapped(seq, a.index_topk);
      return f;
    }
    case MixerKind::kKDA:
    case MixerKind::kGatedDeltaNet: {
      double f = 0;
      f += HV * 6 * d * dv;
      f += HV * 3 * C * d;
      f += HV * C * C;
      f += 2 * static_cast<double>(a.conv_kernel) * (2 * H * d + HV * dv);
      return f;
    }
    case MixerKind::kLinearAttention:
      return H * (4 * d * d + 2 * C * d);
  }
  return 0;
}

double ActivationBytes(const LayerSpec& l, int64_t h) {
  const AttentionSpec& a = l.attn;
  const double H = static_cast<double>(a.num_heads);
  const double KV = static_cast<double>(a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads);
  const double HV = static_cast<double>(a.num_v_heads > 0 ? a.num_v_heads : a.num_heads);
  const double d = static_cast<double>(a.head_dim);
  const double dv = static_cast<double>(a.v_head_dim > 0 ? a.v_head_dim : a.head_dim);
  const double hd = static_cast<double>(h);
  const double C = static_cast<double>(a.chunk_size > 0 ? a.chunk_size : 64);
  double b = 2 * hd * static_cast<double>(l.norms);
  const MixerKind base = a.kind == MixerKind::kDSA ? a.dsa_base : a.kind;
  if (IsSoftmaxAttention(a.kind)) {
    b += 2 * hd;
    if (base == MixerKind::kMLA) {
      const double dqk = static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
      b += 2 * (H * dqk + H * dqk + H * dv);
      b += 2 * static_cast<double>(a.q_lora_rank + a.kv_lora_rank + a.qk_rope_head_dim);
    } else {
      b += 2 * (H * d + KV * d + KV * dv);
    }
    b += 2 * H * dv;
    b += 4 * H;
    if (a.output_gate) b += 2 * H * dv;
    if (a.kind == MixerKind::kDSA) {
      const double IH = static_cast<double>(a.index_heads), Id = static_cast<double>(a.index_head_dim);
      b += 2 * (IH * Id + Id) + 4 * IH + 4 * static_cast<double>(a.index_topk);
    }
  } else {
    const double qkv = 2 * H * d + HV * dv;
    b += 2 * hd + 4 * qkv;
    b += 4 * HV * d + 4 * HV;
    b += 4 * HV * d * dv / C;
    b += 6 * HV * dv;
  }
  if (l.channel == ChannelKind::kDenseMLP) {
    const double I = static_cast<double>(l.mlp.intermediate);
    b += 2 * hd + (l.mlp.gated ? 6 : 4) * I;
  } else {
    const MoESpec& m = l.moe;
    const double w = static_cast<double>(m.latent_dim > 0 ? m.latent_dim : h);
    const double Ie = static_cast<double>(m.expert_intermediate);
    b += 2 * hd + 4 * static_cast<double>(m.num_experts);
    b += static_cast<double>(m.top_k) * (2 * w + (m.gated ? 6 : 4) * Ie);
    b += static_cast<double>(m.num_shared) * 6 * static_cast<double>(m.shared_intermediate);
    if (m.latent_dim > 0) b += 2 * (hd + w);
  }
  return b;
}


Num LayerParamsNum(const LayerSpec& l, Num h) {
  return AttentionParams(l.attn, h).params + ChannelParams(l, h).params +
         static_cast<Num>(l.norms) * h * (l.norm_bias ? 2 : 1);
}

int64_t I64(Num x) {
  ONBOARD_ASSERT(x >= 0 && x < 9.2e18L, "parameter count overflows int64; check ModelSizeFitsInt64 first");
  return static_cast<int64_t>(x);
}

}  // namespace

bool ModelSizeFitsInt64(const ModelIR& model) {
  const Num h = model.hidden;
  Num total = 0;
  for (const LayerSpec& l : model.layers) total += LayerParamsNum(l, h);
  total += 2 * static_cast<Num>(model.vocab) * h + static_cast<Num>(model.max_position) * h +
           static_cast<Num>(model.type_vocab) * h + static_cast<Num>(model.extra_params);
  if (model.vision) total += static_cast<Num>(model.vision->params);
  return total < 4.0e18L;  // headroom for sums over dtype and FLOPs
}

ModelStats ComputeStats(const ModelIR& model, int64_t seq) {
  ONBOARD_ASSERT(ModelSizeFitsInt64(model), "model " + model.name + " too large for int64 counts");
  ModelStats s;
  s.seq = seq;
  const Num h = model.hidden;
  const DType linear = model.linear_dtype == DType::kUnknown ? model.dtype : model.linear_dtype;
  std::map<DType, double> bytes;
  // Step 1: layers.
  for (const LayerSpec& l : model.layers) {
    LayerStats ls;
    const AttnCount ac = AttentionParams(l.attn, h);
    const ChannelCount cc = ChannelParams(l, h);
    const Num norm_params = static_cast<Num>(l.norms) * h * (l.norm_bias ? 2 : 1);
    ls.attn_params = I64(ac.params);
    ls.channel_params = I64(cc.params);
    ls.expert_params = I64(cc.experts);
    ls.params = I64(ac.params + cc.params + norm_params);
    ls.active_params = I64(ac.params + cc.active + norm_params);
    ls.attn_flops_per_token = AttentionFlops(l.attn, seq);
    ls.flops_per_token = 2.0 * static_cast<double>(ls.active_params) + ls.attn_flops_per_token;
    ls.act_bytes_per_token = ActivationBytes(l, model.hidden);
    // Weight bytes: routed experts at expert_dtype, other matmuls at the linear dtype, vectors and
    // routers at the model dtype.
    const Num other_matmul = ac.matmul + (cc.params - cc.experts - cc.router);
    const Num expert_matmul = cc.experts - cc.expert_vectors;
    const Num vectors = ac.params + cc.params + norm_params - expert_matmul - other_matmul;
    bytes[model.expert_dtype] += static_cast<double>(expert_matmul) * DTypeBytes(model.expert_dtype);
    bytes[linear] += static_cast<double>(other_matmul) * DTypeBytes(linear);
    bytes[model.dtype] += static_cast<double>(vectors) * DTypeBytes(model.dtype);
    s.total_params += ls.params;
    s.active_params += ls.active_params;
    s.flops_per_token += ls.flops_per_token;
    s.layers.push_back(ls);
  }
  // Step 2: embeddings, head, final norm, vision, extra.
  const int64_t hi = model.hidden;
  s.embedding_params = model.vocab * hi;
  if (model.has_position_embedding) s.embedding_params += model.max_position * hi;
  s.embedding_params += model.type_vocab * hi;
  s.head_params = model.tied_embeddings ? 0 : model.vocab * hi;
  const bool ln = !model.layers.empty() && model.layers.front().norm_bias;
  s.other_params = (model.final_norm ? hi * (ln ? 2 : 1) : 0) + model.extra_params;
  s.vision_params = model.vision ? model.vision->params : 0;
  const int64_t outside = s.embedding_params + s.head_params + s.other_params + s.vision_params;
  s.total_params += outside;
  s.active_params += outside;
  s.flops_per_token += 2.0 * static_cast<double>(model.vocab) * static_cast<double>(hi);
  bytes[model.dtype] += static_cast<double>(outside) * DTypeBytes(model.dtype);
  // Step 3: totals by dtype.
  for (const auto& [dt, b] : bytes) {
    if (b <= 0) continue;
    s.weight_bytes_by_dtype.emplace_back(dt, b);
    s.weight_bytes += b;
  }
  return s;
}

}  // namespace onboard
