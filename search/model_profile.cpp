// BuildProfile: split ComputeStats' per-layer totals into what TP divides, what EP moves and what
// each recompute policy keeps. Units and legend: search/model_profile.h.
#include "search/model_profile.h"

#include <algorithm>
#include <tuple>

#include "core/lora_targets.h"
#include "core/plan.h"
#include "search/fusion_cost.h"

namespace onboard {
namespace {

// Step 3 of BuildProfile: the mixer's GEMM inputs, MLA up-projection FLOPs and what context
// parallelism exchanges. MLA under CP hands K,V after the up-projection (Megatron-Core MLA + TE
// attention: H*(d_nope+d_rope) + H*dv per token); DSA gathers the indexer key and the latent.
void MixerExtras(const AttentionSpec& a, double h, LayerProfile* lp) {
  const double H = static_cast<double>(a.num_heads), KV = static_cast<double>(a.num_kv_heads);
  const double d = static_cast<double>(a.head_dim);
  const double dv = static_cast<double>(a.v_head_dim > 0 ? a.v_head_dim : a.head_dim);
  const double HV = static_cast<double>(a.num_v_heads > 0 ? a.num_v_heads : a.num_heads);
  const double ql = static_cast<double>(a.q_lora_rank), kvl = static_cast<double>(a.kv_lora_rank);
  const double dqk = static_cast<double>(a.qk_nope_head_dim + a.qk_rope_head_dim);
  const bool mla = a.kind == MixerKind::kMLA || a.kind == MixerKind::kDSA;
  if (mla) {
    lp->mixer_gemm_inputs = 2 * h + ql + kvl + H * dv;
    lp->mla_up_flops = 2 * (ql > 0 ? ql * H * dqk : 0) + 2 * kvl * H * (static_cast<double>(a.qk_nope_head_dim) + dv);
    lp->act_mixer_selective = std::min(lp->act_mixer, 2 * (2 * H * dqk + H * dv));  // q, k, v after up-projection
    lp->cp_kv_elems = H * dqk + H * dv;
    lp->attn_out_elems = H * dv;
  } else if (a.kind == MixerKind::kKDA || a.kind == MixerKind::kGatedDeltaNet) {
    lp->mixer_gemm_inputs = h + HV * dv;
    lp->kda_state_elems = HV * d * dv;
  } else {
    lp->mixer_gemm_inputs = h + H * dv;
    lp->cp_kv_elems = 2 * KV * d;
    lp->attn_out_elems = H * dv;
  }
  if (a.kind == MixerKind::kDSA)
    lp->dsa_gather_elems = static_cast<double>(a.index_head_dim) + kvl + static_cast<double>(a.qk_rope_head_dim);
}

// Every field of LayerProfile but class_id, for SameLayerCost.
auto CostFields(const LayerProfile& x) {
  return std::tie(x.mixer, x.channel, x.mixer_kind, x.channel_kind, x.mixer_kind_id, x.channel_kind_id,
                  x.softmax, x.bf16_gemms, x.heads, x.params, x.dense_params, x.expert_params,
                  x.expert_params_each, x.lora_params_per_rank, x.lora_expert_params_per_rank,
                  x.dense_gemm_flops, x.mixer_gemm_flops, x.core_flops, x.routed_flops, x.experts, x.top_k,
                  x.dispatch_width, x.expert_inter, x.cross_node_fraction, x.act_norms, x.act_inputs,
                  x.act_mixer, x.act_mixer_selective, x.act_channel, x.act_routed, x.scores_bytes_per_key,
                  x.dropout_mask_bytes, x.hidden, x.mla_up_flops, x.mixer_gemm_inputs, x.channel_gemm_inputs,
                  x.routed_gemm_inputs, x.cp_kv_elems, x.attn_out_elems, x.kda_state_elems,
                  x.dsa_gather_elems, x.fused_mixer_bytes, x.unfused_mixer_launches, x.rope_unfused_elems,
                  x.clamp_elems, x.expert_bias_elems);
}
// 4 enums + 2 bools (+ 6 padding) + 3 int64 + 3 size_t + 35 doubles = 352 bytes on LP64: a new
// field changes the size; add it to CostFields, then update this number.
static_assert(sizeof(void*) != 8 || sizeof(LayerProfile) == 352,
              "LayerProfile changed: update CostFields and this size");

// Step 1: channel split (formulas as in core/model_stats.cpp ActivationBytes). Returns the LoRA
// adapter parameters per unit rank, the sum of (in + out) over the matrices kLoraTargets adapts
// (core/lora_targets.h), one term per adapted set.
double ChannelSplit(const LayerSpec& l, double h, LayerProfile* lp) {
  double lora_per_rank = kLoraTargets.attention ? 8 * h : 0;  // ~4 attention projections, ~2h each
  if (l.channel == ChannelKind::kMoE) {
    const MoESpec& m = l.moe;
    lp->experts = m.num_experts;
    lp->top_k = m.top_k;
    lp->dispatch_width = m.latent_dim > 0 ? static_cast<double>(m.latent_dim) : h;
    lp->expert_inter = static_cast<double>(m.expert_intermediate);
    if (m.num_groups > 1 && m.topk_groups > 0 && m.top_k > 0)
      lp->cross_node_fraction =
          std::min(1.0, static_cast<double>(m.topk_groups) / static_cast<double>(m.top_k));
    lp->expert_params_each = m.num_experts > 0 ? lp->expert_params / static_cast<double>(m.num_experts) : 0;
    lp->routed_flops = 2.0 * static_cast<double>(m.top_k) * lp->expert_params_each;
    const double I = lp->expert_inter, Is = static_cast<double>(m.shared_intermediate);
    lp->act_routed = static_cast<double>(m.top_k) * (2 * lp->dispatch_width + (m.gated ? 6 : 4) * I);
    lp->act_channel = 4.0 * static_cast<double>(m.num_experts) + static_cast<double>(m.num_shared) * 6 * Is;
    lp->routed_gemm_inputs = static_cast<double>(m.top_k) * (lp->dispatch_width + I);
    lp->clamp_elems = m.act_clamp > 0 && m.gated ? I : 0;
    lp->expert_bias_elems = m.expert_bias ? lp->dispatch_width : 0;
    lp->channel_gemm_inputs = static_cast<double>(m.num_shared) * (h + Is) + (m.latent_dim > 0 ? 2 * h : 0);
    if (m.latent_dim > 0) lp->act_channel += 2 * (h + static_cast<double>(m.latent_dim));
    if (kLoraTargets.shared_experts)  // shared experts: gate, up, down of width Is each
      lora_per_rank += static_cast<double>(m.num_shared) * 3 * (h + Is);
    // Routed experts where the layer has no shared expert: per expert (gated ? gate, up, down :
    // fc1, fc2) x (dispatch width + expert width), the matrices the probe's proxy adapts
    // (backends/proxy_layout.cpp), times the experts.
    if (AdaptsRoutedExperts(m.num_shared))
      lp->lora_expert_params_per_rank =
          static_cast<double>(m.num_experts) * (m.gated ? 3 : 2) * (lp->dispatch_width + I);
  } else {
    const double I = static_cast<double>(l.mlp.intermediate);
    lp->act_channel = (l.mlp.gated ? 6 : 4) * I;
    lp->channel_gemm_inputs = h + I;
    if (kLoraTargets.dense_mlp) lora_per_rank += (l.mlp.gated ? 3 : 2) * (h + I);  // dense MLP
  }
  return lora_per_rank;
}

// Step 2: mixer split = the rest of ComputeStats' no-recompute bytes, and the unfused score bytes.
void MixerActivations(const LayerSpec& l, const LayerStats& ls, double h, double dropout,
                      bool unfused_attention, LayerProfile* lp) {
  const double H = static_cast<double>(l.attn.num_heads);
  const double d = static_cast<double>(l.attn.head_dim);
  const double HV = static_cast<double>(l.attn.num_v_heads > 0 ? l.attn.num_v_heads : l.attn.num_heads);
  const double dv = static_cast<double>(l.attn.v_head_dim > 0 ? l.attn.v_head_dim : l.attn.head_dim);
  lp->act_norms = 2 * h * static_cast<double>(l.norms);
  lp->act_inputs = 4 * h;
  // ComputeStats counts each block's input (2h) inside the block; here both sit in act_inputs.
  lp->act_mixer = std::max(
      0.0, ls.act_bytes_per_token - lp->act_norms - lp->act_inputs - lp->act_channel - lp->act_routed);
  if (l.attn.kind == MixerKind::kKDA || l.attn.kind == MixerKind::kGatedDeltaNet)
    lp->act_mixer_selective = std::min(lp->act_mixer, 2 * (2 * H * d + HV * dv));  // pre-conv q, k, v
  if (lp->softmax && unfused_attention) lp->scores_bytes_per_key = H * (2 + (dropout > 0 ? 3 : 0));
  // Unfused DSA lightning indexer (DeepSeek-V3.2-Exp report, eq. 1 and the KL of its warm-up
  // stage), per token per key, one term per saved tensor (LibTorch derivatives.yaml semantics):
  if (l.attn.kind == MixerKind::kDSA && unfused_attention && l.attn.index_heads > 0) {
    // relu(qI.kI) [b,T,ih,T]: the mul by w saves it.
    lp->scores_bytes_per_key += 2 * static_cast<double>(l.attn.index_heads);
    lp->scores_bytes_per_key += 2;  // log_softmax(I) [b,T,T]: log_softmax saves its output
    lp->scores_bytes_per_key += 2;  // KL distribution p [b,T,T]: mul p * log q saves p
    // Top-k selection mask [b,T,T] bool, 1 byte per key: masked_fill saves its mask (the main
    // scores' and the KL's log-softmax fills share one; bench_probe_saved_tensors).
    lp->scores_bytes_per_key += 1;
  }
  lp->dropout_mask_bytes = dropout > 0 ? 2 * h : 0;
}

// Index of block kind k in p.kinds, appended when new.
size_t KindId(ModelProfile* p, BlockKind k) {
  auto it = std::find(p->kinds.begin(), p->kinds.end(), k);
  if (it != p->kinds.end()) return static_cast<size_t>(it - p->kinds.begin());
  p->kinds.push_back(k);
  return p->kinds.size() - 1;
}

// The class of equal layers layer `i` joins (or opens): ModelProfile::class_first, LayerProfile::class_id.
void JoinClass(size_t i, ModelProfile* p) {
  LayerProfile& lp = p->layers[i];
  lp.class_id = p->class_first.size();
  for (size_t c = 0; c < p->class_first.size(); ++c)
    if (SameLayerCost(p->layers[p->class_first[c]], lp)) {
      lp.class_id = c;
      return;
    }
  p->class_first.push_back(i);
}

}  // namespace

bool SameLayerCost(const LayerProfile& a, const LayerProfile& b) { return CostFields(a) == CostFields(b); }

ModelProfile BuildProfile(const ModelIR& model, int64_t seq, double dropout, bool unfused_attention,
                          bool unfused_framework) {
  const ModelStats st = ComputeStats(model, seq);
  ModelProfile p;
  p.seq = seq;
  p.hidden = static_cast<double>(model.hidden);
  p.vocab = static_cast<double>(model.vocab);
  p.dropout = dropout;
  p.unfused_attention = unfused_attention;
  const double h = p.hidden;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& l = model.layers[i];
    const LayerStats& ls = st.layers[i];
    LayerProfile lp;
    lp.hidden = h;
    lp.mixer = l.attn.kind;
    lp.channel = l.channel;
    lp.mixer_kind = MixerBlockKind(l.attn.kind);
    lp.channel_kind = ChannelBlockKind(l.channel);
    lp.softmax = IsSoftmaxAttention(l.attn.kind);
    lp.heads = l.attn.num_heads;
    lp.params = static_cast<double>(ls.params);
    lp.expert_params = static_cast<double>(ls.expert_params);
    lp.dense_params = lp.params - lp.expert_params;
    lp.core_flops = ls.attn_flops_per_token;
    // Steps 1-3: channel split, mixer split, mixer extras (+ the fusion plan's).
    lp.lora_params_per_rank = ChannelSplit(l, h, &lp);
    lp.mixer_kind_id = KindId(&p, lp.mixer_kind);
    lp.channel_kind_id = KindId(&p, lp.channel_kind);
    lp.dense_gemm_flops = std::max(0.0, ls.flops_per_token - lp.core_flops - lp.routed_flops);
    lp.mixer_gemm_flops = std::min(lp.dense_gemm_flops, 2.0 * static_cast<double>(ls.attn_params));
    MixerActivations(l, ls, h, dropout, unfused_attention, &lp);
    MixerExtras(l.attn, h, &lp);
    if (lp.softmax && l.attn.rope_attention_factor != 1.0)  // rotary on full q/k heads (GQA/MHA families)
      lp.rope_unfused_elems =
          (static_cast<double>(l.attn.num_heads) + static_cast<double>(l.attn.num_kv_heads)) *
          static_cast<double>(l.attn.head_dim);
    ApplyMixerFusion(model, l, seq, unfused_attention, &lp, unfused_framework);
    p.min_heads = p.min_heads == 0 ? lp.heads : std::min(p.min_heads, lp.heads);
    p.experts = std::max(p.experts, lp.experts);
    p.expert_params += lp.expert_params;
    // Step 4: the class of equal layers this one joins (or opens).
    p.layers.push_back(lp);
    JoinClass(p.layers.size() - 1, &p);
  }
  p.embed_params = static_cast<double>(st.embedding_params);
  p.head_params = static_cast<double>(st.head_params);
  p.vision_params = static_cast<double>(st.vision_params);
  p.other_params = static_cast<double>(st.other_params);
  p.total_params = static_cast<double>(st.total_params);
  p.active_params = static_cast<double>(st.active_params);
  p.head_flops = 2 * h * p.vocab;
  p.model_flops_per_token = st.flops_per_token;
  return p;
}

void MarkBf16GemmLayers(int64_t first, int64_t last, ModelProfile* p) {
  const int64_t L = static_cast<int64_t>(p->layers.size());
  for (int64_t l = 0; l < L; ++l)
    p->layers[static_cast<size_t>(l)].bf16_gemms = IsBf16EndLayer(l, L, first, last);
  p->class_first.clear();
  for (size_t i = 0; i < p->layers.size(); ++i) JoinClass(i, p);
}

}  // namespace onboard
