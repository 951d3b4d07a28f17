// Forward of one proxy unit (embed / KDA or MLA layer with dense or MoE channel / head + loss).
// Legend: b sequences, T tokens, D hidden, nh heads, K/V head dims, E experts, n = b*T tokens,
// P = n*top_k (token, expert) pairs. Weights are views into flat buffers (proxy_model.h).
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "backends/checkpoint_fn.h"
#include "backends/dsa_generated.h"
#include "backends/kda_chunked.h"
#include "backends/kda_generated.h"
#include "backends/probe_tp.h"
#include "backends/proxy_model.h"
#include "backends/proxy_vision.h"
#include "backends/proxy_weights.h"

namespace onboard::backends {
namespace {

// SiLU of a causal depthwise conv over tokens: y [b,T,C], w [C, kw].
at::Tensor ConvSilu(const at::Tensor& y, const at::Tensor& w) {
  const int64_t T = y.size(1), kw = w.size(1);
  at::Tensor c = at::conv1d(y.transpose(1, 2), w.unsqueeze(1), {}, 1, kw - 1, 1, w.size(0));
  return at::silu(c.narrow(2, 0, T).transpose(1, 2));
}
// Selective recompute (Megatron's core_attn): the token mixer's core (KDA's chunked recurrence;
// MLA's scores, mask, softmax and attention x values) is checkpointed from its inputs q, k, v (and
// gates): the projections' outputs stay saved, the core's internals are recomputed in backward.
// TP (probe_tp.h): h is the column-parallel input (TpRegionIn), nh the local heads; o_proj is
// row-parallel: its partial output is returned, MixerBlock reduces it (TpRegionOut).
at::Tensor Kda(const ProxySpec& s, const Weights& W, const at::Tensor& h, MoeRouting* ckpt_core) {
  const int64_t b = h.size(0), T = h.size(1), nh = s.kda_heads, K = s.kda_head_dim;
  auto heads = [&](const at::Tensor& t) { return t.view({b, T, nh, K}); };
  at::Tensor q = heads(ConvSilu(W.Lin("q_proj", h), W["conv_q"]));  // raw: KdaCore normalises
  at::Tensor k = heads(ConvSilu(W.Lin("k_proj", h), W["conv_k"]));
  at::Tensor v = heads(ConvSilu(W.Lin("v_proj", h), W["conv_v"]));
  // Bounded gate: g = lb * sigmoid(exp(A_log[h]) * (g_raw + dt_bias)), in [lb, 0].
  at::Tensor graw = heads(W.Lin("g_proj", h) + W["dt_bias"]);
  at::Tensor g = s.gate_lower_bound * at::sigmoid(W["A_log"].exp().view({nh, 1}) * graw);
  at::Tensor beta = at::sigmoid(W.Lin("beta_proj", h));  // [b,T,nh]
  at::Tensor o;                                          // [b,T,nh,K]
  if (ckpt_core != nullptr) {
    const int64_t chunk = s.chunk;
    o = Checkpoint(
        [chunk](const std::vector<at::Tensor>& a) -> std::vector<at::Tensor> {
          return {KdaCore(a[0], a[1], a[2], a[3], a[4], chunk, ProcessKdaImpl())};
        },
        {q, k, v, g, beta}, *ckpt_core)[0];
  } else {
    o = KdaCore(q, k, v, g, beta, s.chunk, ProcessKdaImpl());
  }
  o = Rms(o, W["o_norm"]) * heads(at::sigmoid(W.Lin("gate_b", W.Lin("gate_a", h))));
  return W.Lin("o_proj", o.reshape({b, T, nh * K}));  // partial over TP (MixerBlock reduces)
}

// Rotary position embedding of x [b,T,n,d] (d even), half-split pairs (x_i, x_{i+d/2}) turned by
// angle t * theta^(-2i/d) at token t (HF rotate_half convention).
at::Tensor Rotary(const at::Tensor& x, double theta) {
  const int64_t T = x.size(1), d = x.size(-1), half = d / 2;
  at::Tensor i = at::arange(half, x.options()).mul(-2.0 / static_cast<double>(d));
  at::Tensor ang = at::arange(T, x.options()).unsqueeze(1) * at::pow(theta, i).unsqueeze(0);  // [T,half]
  at::Tensor c = ang.cos().view({1, T, 1, half}), sn = ang.sin().view({1, T, 1, half});
  at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * c - x2 * sn, x2 * c + x1 * sn}, -1);
}

// DSA lightning indexer inputs: qi [b,T,ih,id], ki [b,T,id], wi [b,T,ih] (scaled by (ih_all id)^-1/2).
struct IndexerInputs {
  at::Tensor qi, ki, wi;
};
IndexerInputs IndexerInputsOf(const ProxySpec& s, const Weights& W, const at::Tensor& h,
                              const TpContext* tp) {
  const int64_t b = h.size(0), T = h.size(1), ih = s.index_heads, id = s.index_head_dim;
  const int64_t ih_all = ih * (tp != nullptr ? tp->size : 1);  // every TP rank's heads
  return {W.Lin("idx_q", h).view({b, T, ih, id}), W.Lin("idx_k", h),
          W.Lin("idx_w", h) / std::sqrt(double(ih_all * id))};
}

// DSA lightning indexer scores, causal: I[t,s] = sum_j w[t,j] relu(qI[t,j] . kI[s]), -inf for s > t.
// h [b,T,D] -> I [b,T,T]; causal [T,T] or [b,T,T] bool (true = kept). TP: ih local heads, their
// partial sum all-reduced.
// qI . kI [b,T,ih,T] from qi [b,T,ih,id], ki [b,T,id]. LibTorch's matmul broadcasts kI [b,1,id,T]
// over the T queries; its bmm saves that [b,T,id,T] contiguous copy for backward and its backward
// makes a gradient of the same shape (T x kI's bytes each: 8 MiB at b 8, T 128, id 16;
// bench_probe_saved_tensors). IndexerDotsFn saves qi and ki only; its backward recomputes the same
// matmul under autograd one sequence at a time, so the copy and its gradient exist for one
// sequence (1/b of the bytes) at a time. Values and gradients are the plain matmul's, bit for bit
// (each sequence's bmm batches and sum over queries are the same ops; checked against the batched
// backward at [8,128,2,16], [8,32,2,16], [2,12,2,8], [4,17,3,8]; probe curves equal to the bit).
at::Tensor IndexerDots(const at::Tensor& qi, const at::Tensor& ki) {
  return at::matmul(qi, ki.unsqueeze(1).transpose(-1, -2));
}
class IndexerDotsFn : public torch::autograd::Function<IndexerDotsFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qi,
                            const at::Tensor& ki) {
    ctx->save_for_backward({qi, ki});
    return IndexerDots(qi, ki);  // autograd is off inside a custom function's forward
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    std::vector<std::vector<at::Tensor>> parts(2);  // per input: its gradient per sequence
    for (int64_t i = 0; i < saved[0].size(0); ++i) {
      std::vector<at::Tensor> leaves, wanted;
      for (size_t j = 0; j < 2; ++j) {
        leaves.push_back(saved[j].detach().narrow(0, i, 1).requires_grad_(ctx->needs_input_grad(j)));
        if (ctx->needs_input_grad(j)) wanted.push_back(leaves[j]);
      }
      at::Tensor y;
      {
        at::AutoGradMode enable(true);
        y = IndexerDots(leaves[0], leaves[1]);
      }
      const torch::autograd::variable_list g = torch::autograd::grad({y}, wanted, {grads[0].narrow(0, i, 1)});
      for (size_t j = 0, w = 0; j < 2; ++j)
        if (ctx->needs_input_grad(j)) parts[j].push_back(g[w++]);
    }
    torch::autograd::variable_list result(2);
    for (size_t j = 0; j < 2; ++j)
      if (!parts[j].empty()) result[j] = at::cat(parts[j], 0);
    return result;
  }
};

at::Tensor IndexerScores(const ProxySpec& s, const Weights& W, const at::Tensor& h, const at::Tensor& causal,
                         const TpContext* tp) {
  const IndexerInputs x = IndexerInputsOf(s, W, h, tp);
  at::Tensor rel = at::relu(IndexerDotsFn::apply(x.qi, x.ki));  // [b,T,ih,T]
  return TpSum(tp, (rel * x.wi.unsqueeze(-1)).sum(2)).masked_fill(causal.logical_not(), -INFINITY);
}

// Indexer KL of DeepSeek-V3.2's sparse stage, summed over queries (a scalar, nats):
//   p[t,s]  = sum_h A[h,t,s] / sum_{s' in S_t} sum_h A[h,t,s']   (main attention, detached)
//   KL_t    = sum_{s in S_t} p[t,s] * (log p[t,s] - log_softmax_{S_t}(I[t,:])[s])
//   returns sum_{b,t} KL_t
// attn_heads [b,T,T] = sum_h A[h] (zero off S_t, detached), I [b,T,T], drop [b,T,T] or [T,T] = not
// S_t (the main attention's mask: one saved bool tensor for both). Gradient reaches I only.
at::Tensor IndexerKlSum(const at::Tensor& attn_heads, const at::Tensor& I, const at::Tensor& drop) {
  at::Tensor p = attn_heads / attn_heads.sum(-1, /*keepdim=*/true);
  // Unselected keys: p = 0 and log q = -inf; fill before the product so no 0 * inf reaches autograd.
  at::Tensor logq = at::log_softmax(I.masked_fill(drop, -INFINITY), -1).masked_fill(drop, 0.0);
  return (at::xlogy(p, p) - p * logq).sum();
}

// Megatron's MoEAuxLossAutoScaler: returns y unchanged; backward passes y's gradient through and
// gives the aux scalar gradient 1 (the LM loss's backward scale here: the head's loss is seeded
// with 1), so d(aux)/d(indexer weights) is added to their gradient wherever y is backpropagated,
// including FSDP's recomputation (fsdp_unit.cpp), which is the only backward of a unit.
class AuxLossScaler : public torch::autograd::Function<AuxLossScaler> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& y,
                            const at::Tensor& aux) {
    ctx->save_for_backward({aux});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], at::ones_like(ctx->get_saved_variables()[0])};
  }
};

// Where the indexer KL goes: its weight, scale and the per-layer record.
struct IndexerKlSink {
  double weight = 0;                           // ProxySpec::indexer_kl_weight
  double inv_global_tokens = 1;
  std::map<int64_t, double>* record = nullptr; // nullptr: this pass records nothing
  int64_t layer = -1;
};

// Main attention over the kept keys: {o [b,T,nh,dv], attn [b,nh,T,T]} from q, k [b,T,nh,dn+dr],
// v [b,T,nh,dv] and drop [b,T,T] or [T,T] (bool, true = masked: not causal or not selected).
std::vector<at::Tensor> CoreAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& drop) {
  at::Tensor scores = at::matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-1, -2)) /
                      std::sqrt(double(q.size(-1)));  // [b,nh,T,T]
  scores = scores.masked_fill(drop.unsqueeze(-3), -INFINITY);
  at::Tensor attn = at::softmax(scores, -1);                           // [b,nh,T,T]
  return {at::matmul(attn, v.transpose(1, 2)).transpose(1, 2), attn};  // [b,T,nh,dv]
}

// The generated fused DSA kernel (ProbeConfig::dsa_kernel generated, backends/dsa_generated.h):
// indexer, top-k, attention over the selected keys and the per-head output gate in one forward.
// Sets *o (gated) and *keep and returns true when it ran; false (reason logged once) otherwise.
bool GeneratedDsa(const ProxySpec& s, const Weights& W, const at::Tensor& h, const at::Tensor& q,
                  const at::Tensor& k, const at::Tensor& v, const at::Tensor& gate, const TpContext* tp,
                  at::Tensor* o, at::Tensor* keep) {
  std::string why;
  bool served = false;
  if (tp != nullptr && tp->active()) {
    why = "tp > 1 splits the indexer heads (their scores are all-reduced across ranks)";
  } else {
    IndexerInputs x;
    {
      at::NoGradGuard ng;  // the selection is not differentiable; the indexer trains by its KL only
      x = IndexerInputsOf(s, W, h.detach(), tp);
    }
    DsaCoreOut r = DsaCoreGenerated(q, k, v, gate, x.qi, x.ki, x.wi, s.index_topk, &served, &why);
    if (served) {
      *o = r.o;
      *keep = r.keep;
    }
  }
  if (!served) LogDsaFallbackOnce(why);
  return served;
}

// TP (probe_tp.h): h is the column-parallel input, nh / the indexer's heads local; o_proj row-parallel
// (partial output returned, as Kda's).
at::Tensor Mla(const ProxySpec& s, const Weights& W, const at::Tensor& h, const IndexerKlSink& sink,
               const TpContext* tp, MoeRouting* ckpt_core) {
  const int64_t b = h.size(0), T = h.size(1), nh = s.mla_heads;
  const int64_t dn = s.qk_nope_dim, dr = s.qk_rope_dim, dv = s.v_head_dim;
  at::Tensor q = s.q_lora_rank > 0 ? W.Lin("q_b", Rms(W.Lin("q_a", h), W["q_a_norm"]))
                                   : W.Lin("q_proj", h);
  q = q.view({b, T, nh, dn + dr});
  if (s.rope && dr > 0) q = at::cat({q.narrow(-1, 0, dn), Rotary(q.narrow(-1, dn, dr), s.rope_theta)}, -1);
  at::Tensor kva = W.Lin("kv_a", h);                                        // [b,T,kvl+dr]
  at::Tensor ckv = Rms(kva.narrow(-1, 0, s.kv_lora_rank), W["kv_a_norm"]);
  at::Tensor kv = W.Lin("kv_b", ckv).view({b, T, nh, dn + dv});
  at::Tensor k = kv.narrow(-1, 0, dn);
  if (dr > 0) {  // shared decoupled key dims (rotated with rope, else NoPE)
    at::Tensor kr = kva.narrow(-1, s.kv_lora_rank, dr).unsqueeze(2);
    if (s.rope) kr = Rotary(kr, s.rope_theta);
    kr = kr.expand({b, T, nh, dr});
    k = at::cat({k, kr}, -1);
  }
  at::Tensor v = kv.narrow(-1, dn, dv);
  // keep: the keys each query attends (causal, then the indexer's top-k); masks are applied as
  // drop = not keep, [T,T] while no per-token selection was made (masked_fill saves its mask).
  const at::Tensor causal = at::ones({T, T}, h.options().dtype(at::kBool)).tril();
  at::Tensor keep = causal.expand({b, T, T});
  // Step 1: DSA lightning indexer, top-k causal keys. The selection is not differentiable: the LM
  // loss never reaches the indexer. Its input is detached, so only the KL of Step 3 trains it.
  const bool has_indexer = s.index_topk > 0 && s.index_heads > 0;
  const bool kl_grad = has_indexer && sink.weight > 0 && at::GradMode::is_enabled();
  const bool want_kl = has_indexer && (kl_grad || sink.record != nullptr);
  // The gate acts on the per-head output after the value up-projection (kv_b), as the model's.
  const at::Tensor gate = s.mla_output_gate ? W.Lin("gate", h).view({b, T, nh, dv}) : at::Tensor();
  at::Tensor o, attn;
  const bool kernel =
      has_indexer && ProcessDsaGenerated() && GeneratedDsa(s, W, h, q, k, v, gate, tp, &o, &keep);
  if (has_indexer) RecordDsaCall(kernel);  // what really ran (ProbeResult::dsa_calls)
  at::Tensor I;
  if (has_indexer && ((s.index_topk < T && !kernel) || want_kl)) {
    at::AutoGradMode grad(kl_grad);  // off: indexer frozen (weight 0) or a no-grad forward
    I = IndexerScores(s, W, h.detach(), kernel ? keep : causal, tp);
  }
  at::Tensor drop = (kernel ? keep : causal).logical_not();  // the kernel's selection, else causal
  if (kernel && want_kl) {  // the KL's attention probabilities over the kernel's selection (detached)
    at::NoGradGuard ng;
    attn = CoreAttention(q, k, v, drop)[1];
  }
  if (!kernel) {
    if (has_indexer && s.index_topk < T) {
      // Ties (relu zeros are common) go to the earlier key: a stable sort, not topk, whose order
      // among equal values is unspecified.
      at::Tensor top =
          std::get<1>(I.detach().sort(/*stable=*/true, -1, /*descending=*/true)).narrow(-1, 0, s.index_topk);
      keep = keep.logical_and(at::zeros_like(keep).scatter(-1, top, true));
      drop = keep.logical_not();  // [b,T,T]
    }
    // Step 2: main attention over the selected keys (checkpointed under selective recompute).
    std::vector<at::Tensor> core =
        ckpt_core != nullptr
            ? Checkpoint(
                  [](const std::vector<at::Tensor>& a) { return CoreAttention(a[0], a[1], a[2], a[3]); },
                  {q, k, v, drop}, *ckpt_core)
            : CoreAttention(q, k, v, drop);
    o = core[0];
    attn = core[1];
    if (gate.defined()) o = o * at::sigmoid(gate);
  }
  at::Tensor out = W.Lin("o_proj", o.reshape({b, T, nh * dv}));  // partial over TP (MixerBlock reduces)
  // Step 3: indexer KL (sum over local queries / global counted tokens) recorded and, scaled by
  // the weight, injected as an auxiliary loss on the layer's output.
  if (want_kl) {
    at::Tensor kl = IndexerKlSum(TpSum(tp, attn.detach().sum(1)), I, drop) * sink.inv_global_tokens;
    if (sink.record != nullptr) (*sink.record)[sink.layer] += kl.item<double>();
    if (kl_grad && kl.requires_grad()) out = AuxLossScaler::apply(out, kl * sink.weight);
  }
  return out;
}

// x + token mixer(norm1(x)) of layer unit u, weights viewed from the flat buffers.
at::Tensor MixerBlock(const ProxySpec& s, const UnitLayout& u, const at::Tensor& x, const at::Tensor& dense,
                      const at::Tensor& lora, double lora_scale, MoeRouting& routing, const UnitInputs& in) {
  Weights W;
  W.lora_scale = lora_scale;
  AddViews(W, u.dense, dense);
  if (u.lora.numel > 0) AddViews(W, u.lora, lora);
  const ProxyLayer& pl = s.layers[static_cast<size_t>(u.layer)];
  at::Tensor h = Rms(x, W["norm1"]);
  IndexerKlSink sink{s.indexer_kl_weight, in.inv_global_tokens, routing.record ? in.indexer_kl : nullptr,
                     u.layer};
  MoeRouting* ckpt = in.mixer_recompute == Recompute::kSelective ? &routing : nullptr;
  // no_lookback control: each token is its own sequence in the mixer ([b*T, 1, D]).
  // TP: the mixer is one column-parallel ... row-parallel region (probe_tp.h; SP: h is the rank's
  // tokens, gathered on entry and reduce-scattered on exit).
  const at::Tensor hg = TpRegionIn(in.tp, h);  // [b,T,D] (every token)
  const at::Tensor hm = in.self_only ? hg.reshape({hg.size(0) * hg.size(1), 1, hg.size(2)}) : hg;
  at::Tensor mix = pl.mixer == ProxyMixer::kKDA ? Kda(s, W, hm, ckpt) : Mla(s, W, hm, sink, in.tp, ckpt);
  return x + TpRegionOut(in.tp, mix.reshape(hg.sizes()));
}

// y + channel mixer(norm2(y)) (SwiGLU MLP or MoE) of layer unit u.
at::Tensor ChannelBlock(const ProxySpec& s, const UnitLayout& u, const at::Tensor& y, const at::Tensor& dense,
                        const at::Tensor& lora, const at::Tensor& experts, const at::Tensor& expert_lora,
                        double lora_scale, MoeRouting& routing, const TpContext* tp) {
  Weights W;
  W.lora_scale = lora_scale;
  AddViews(W, u.dense, dense);
  if (u.lora.numel > 0) AddViews(W, u.lora, lora);
  at::Tensor h2 = Rms(y, W["norm2"]);
  if (s.layers[static_cast<size_t>(u.layer)].channel == ProxyChannel::kDense)
    return y + TpRegionOut(tp, SwiGlu(W, "", TpRegionIn(tp, h2)));
  // SP: the MoE (router and routed experts replicated over TP) runs on every token and keeps the
  // rank's chunk; without SP both are the identity.
  return y + SpChunk(tp, MoeForward(s, u, W, experts, expert_lora, lora_scale, SpGatherReplicated(tp, h2),
                                    routing));
}

}  // namespace

at::Tensor UnitForward(const ProxySpec& s, const UnitLayout& u, const at::Tensor& x,
                       const at::Tensor& dense, const at::Tensor& lora, const at::Tensor& experts,
                       const at::Tensor& expert_lora, double lora_scale, MoeRouting& routing,
                       const UnitInputs& in) {
  Weights W;
  W.lora_scale = lora_scale;
  AddViews(W, u.dense, dense);
  if (u.lora.numel > 0) AddViews(W, u.lora, lora);
  const bool tp = in.tp != nullptr && in.tp->active();  // vocab-parallel embedding and head
  if (u.kind == UnitKind::kEmbed) {
    if (tp) return TpVocabEmbed(*in.tp, W["tok"], x);
    at::Tensor e = W["tok"].index_select(0, x.flatten()).view({x.size(0), x.size(1), s.hidden});
    if (in.images == nullptr || !W.has("v_patch")) return e;
    // Image task (probe_image.h): the tower's M tokens replace the sequence's M placeholders.
    at::Tensor v = VisionForward(s, W, *in.images);
    return at::cat({v, e.narrow(1, v.size(1), e.size(1) - v.size(1))}, 1);
  }
  if (u.kind == UnitKind::kHead) {
    at::Tensor logits = W.Lin("out", TpRegionIn(in.tp, Rms(x, W["final_norm"])));  // [b,T,V] (TP: [b,T,V/tp])
    at::Tensor nll = tp ? TpVocabNll(*in.tp, logits, *in.targets)
                        : -at::log_softmax(logits, -1).gather(-1, in.targets->unsqueeze(-1)).squeeze(-1);
    if (in.correct != nullptr && routing.record) {
      at::NoGradGuard ng;
      const at::Tensor full = tp ? TpFullLogits(*in.tp, logits) : logits;
      at::Tensor hit = full.argmax(-1).eq(*in.targets).to(in.loss_mask->scalar_type());
      *in.correct += (hit * *in.loss_mask).sum().item<double>();
    }
    return (nll * *in.loss_mask).sum() * in.inv_global_tokens;
  }
  // Step 1: token mixer (+ residual), step 2: channel mixer (+ residual); either region is
  // checkpointed when its block kind's policy is full (the unit keeps its graph otherwise).
  auto mixer = [&s, &u, lora_scale, &routing,
                in](const std::vector<at::Tensor>& a) -> std::vector<at::Tensor> {
    return {MixerBlock(s, u, a[0], a[1], a[2], lora_scale, routing, in)};
  };
  at::Tensor y = in.mixer_recompute == Recompute::kFull ? Checkpoint(mixer, {x, dense, lora}, routing)[0]
                                                        : mixer({x, dense, lora})[0];
  auto channel = [&s, &u, lora_scale, &routing, tp = in.tp](const std::vector<at::Tensor>& a) -> std::vector<at::Tensor> {
    return {ChannelBlock(s, u, a[0], a[1], a[2], a[3], a[4], lora_scale, routing, tp)};
  };
  const std::vector<at::Tensor> cin = {y, dense, lora, experts, expert_lora};
  return in.channel_recompute == Recompute::kFull ? Checkpoint(channel, cin, routing)[0] : channel(cin)[0];
}

}  // namespace onboard::backends
