// ProxyFromModel / ProxySpec::Validate / ProxyToModelIR: the scaled-down proxy of a model, checked
// field by field (ProbeConfig::Validate: probe_config_validate.cpp). No LibTorch here.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "backends/probe.h"

namespace onboard {
namespace {

Status Bad(const std::string& field, const std::string& problem, const std::string& value) {
  return BadInput("probe", field, problem, value);
}

// The model's vision tower at the proxy's scale: its depth capped at 2 blocks, its MLP ratio and
// its spatial merge kept (capped at 2 per side), a 2 x 2 grid of merged tokens per image.
ProxyVision ScaledVision(const VisionTower& t) {
  ProxyVision v;
  v.blocks = std::clamp<int64_t>(t.depth, 1, 2);
  if (t.hidden > 0 && t.intermediate > 0)
    v.inter = std::max<int64_t>(8, (v.hidden * t.intermediate / t.hidden + 4) / 8 * 8);
  v.merge = std::clamp<int64_t>(t.merge, 1, 2);
  v.image = 2 * v.patch * v.merge;
  v.source = t.kind + ": depth " + std::to_string(t.depth) + ", hidden " + std::to_string(t.hidden) +
             ", MLP " + std::to_string(t.intermediate) + ", " + std::to_string(t.heads) + " heads, patch " +
             std::to_string(t.patch) + ", " + std::to_string(t.merge) + "x" + std::to_string(t.merge) +
             " merge into " + std::to_string(t.out_hidden);
  return v;
}

Status ValidateVision(const ProxyVision& v) {
  if (v.blocks < 0 || v.blocks > 8)
    return Bad("vision.blocks", "must be in [0, 8]", std::to_string(v.blocks));
  if (v.blocks == 0) return Status::Ok();
  for (auto [f, x] : {std::pair<const char*, int64_t>{"vision.hidden", v.hidden},
                      {"vision.heads", v.heads},
                      {"vision.inter", v.inter},
                      {"vision.patch", v.patch},
                      {"vision.merge", v.merge},
                      {"vision.image", v.image}})
    if (x <= 0 || x > 4096) return Bad(f, "must be in [1, 4096]", std::to_string(x));
  if (v.hidden % v.heads != 0)
    return Bad("vision.heads", "must divide vision.hidden=" + std::to_string(v.hidden),
               std::to_string(v.heads));
  if (v.image % (v.patch * v.merge) != 0)
    return Bad("vision.image", "must be a multiple of patch x merge = " + std::to_string(v.patch * v.merge),
               std::to_string(v.image));
  return Status::Ok();
}

bool IsLinearMixer(MixerKind k) {
  return k == MixerKind::kKDA || k == MixerKind::kGatedDeltaNet || k == MixerKind::kLinearAttention;
}

}  // namespace

std::string ProxySpec::PatternString() const {
  std::ostringstream os;
  for (size_t i = 0; i < layers.size(); ++i) {
    os << (i ? "," : "") << (layers[i].mixer == ProxyMixer::kKDA ? "KDA" : (index_topk > 0 && index_heads > 0 ? "MLA+DSA" : "MLA"))
       << "/" << (layers[i].channel == ProxyChannel::kMoE ? "MoE" : "MLP");
  }
  return os.str();
}

Status ProxySpec::Validate() const {
  if (layers.empty()) return Bad("layers", "proxy needs at least one layer", "0");
  auto pos = [](const char* f, int64_t v) -> Status {
    if (v <= 0) return Bad(f, "must be > 0", std::to_string(v));
    return Status::Ok();
  };
  ONBOARD_RETURN_IF_ERROR(pos("vocab", vocab));
  ONBOARD_RETURN_IF_ERROR(pos("hidden", hidden));
  ONBOARD_RETURN_IF_ERROR(pos("kda_heads", kda_heads));
  ONBOARD_RETURN_IF_ERROR(pos("kda_head_dim", kda_head_dim));
  ONBOARD_RETURN_IF_ERROR(pos("conv_kernel", conv_kernel));
  ONBOARD_RETURN_IF_ERROR(pos("chunk", chunk));
  ONBOARD_RETURN_IF_ERROR(pos("gate_rank", gate_rank));
  ONBOARD_RETURN_IF_ERROR(pos("mla_heads", mla_heads));
  ONBOARD_RETURN_IF_ERROR(pos("kv_lora_rank", kv_lora_rank));
  ONBOARD_RETURN_IF_ERROR(pos("qk_nope_dim", qk_nope_dim));
  ONBOARD_RETURN_IF_ERROR(pos("v_head_dim", v_head_dim));
  ONBOARD_RETURN_IF_ERROR(pos("mlp_inter", mlp_inter));
  if (q_lora_rank < 0) return Bad("q_lora_rank", "must be >= 0", std::to_string(q_lora_rank));
  if (qk_rope_dim < 0) return Bad("qk_rope_dim", "must be >= 0", std::to_string(qk_rope_dim));
  if (rope && qk_rope_dim % 2 != 0)
    return Bad("qk_rope_dim", "must be even with rope (rotated in pairs)", std::to_string(qk_rope_dim));
  if (rope && !(rope_theta > 1)) return Bad("rope_theta", "must be > 1", std::to_string(rope_theta));
  if (!(gate_lower_bound < 0) || gate_lower_bound < -20)
    return Bad("gate_lower_bound", "must be in [-20, 0)", std::to_string(gate_lower_bound));
  if (gate_lower_bound * chunk < -80)
    return Bad("chunk", "chunk * |gate_lower_bound| must be <= 80 (exp range of fp32)",
               std::to_string(chunk));
  if (index_topk < 0 || index_heads < 0 || index_head_dim < 0)
    return Bad("index_topk", "indexer sizes must be >= 0", std::to_string(index_topk));
  if (index_topk > 0 && (index_heads == 0 || index_head_dim == 0))
    return Bad("index_heads", "index_topk > 0 needs index_heads and index_head_dim > 0",
               std::to_string(index_heads));
  if (!(indexer_kl_weight >= 0) || !std::isfinite(indexer_kl_weight)) {
    std::ostringstream v;
    v << indexer_kl_weight;
    return Bad("indexer_kl_weight", "must be a finite number >= 0", v.str());
  }
  if (!(balance_rate >= 0) || !std::isfinite(balance_rate)) {
    std::ostringstream v;
    v << balance_rate;
    return Bad("balance_rate", "must be a finite number >= 0", v.str());
  }
  bool any_moe = std::any_of(layers.begin(), layers.end(),
                             [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; });
  if (any_moe) {
    ONBOARD_RETURN_IF_ERROR(pos("num_experts", num_experts));
    ONBOARD_RETURN_IF_ERROR(pos("top_k", top_k));
    ONBOARD_RETURN_IF_ERROR(pos("expert_inter", expert_inter));
    if (top_k > num_experts)
      return Bad("top_k", "must be <= num_experts=" + std::to_string(num_experts),
                 std::to_string(top_k));
    if (num_shared < 0) return Bad("num_shared", "must be >= 0", std::to_string(num_shared));
    if (num_shared > 0) ONBOARD_RETURN_IF_ERROR(pos("shared_inter", shared_inter));
    if (latent_dim < 0) return Bad("latent_dim", "must be >= 0", std::to_string(latent_dim));
  }
  return ValidateVision(vision);
}

ProxySpec ProxyFromModel(const ModelIR& model, int64_t blocks) {
  ProxySpec s;
  s.source_model = model.name;
  blocks = std::max<int64_t>(1, blocks);
  const int64_t n = 4 * blocks;
  // Step 1: the first n layers' mixer and channel kinds (the pattern repeats, so the prefix keeps it).
  int64_t kda = 0, mla = 0;
  for (int64_t i = 0; i < n; ++i) {
    ProxyLayer pl;
    if (i < static_cast<int64_t>(model.layers.size())) {
      const LayerSpec& l = model.layers[static_cast<size_t>(i)];
      if (IsLinearMixer(l.attn.kind)) {
        pl.mixer = ProxyMixer::kKDA;
        if (l.attn.kind != MixerKind::kKDA)
          s.notes.push_back("layer " + std::to_string(i) + ": " + MixerKindName(l.attn.kind) +
                            " mixer mapped to KDA");
      } else {
        pl.mixer = ProxyMixer::kMLA;
        if (l.attn.kind != MixerKind::kMLA && l.attn.kind != MixerKind::kDSA)
          s.notes.push_back("layer " + std::to_string(i) + ": " + MixerKindName(l.attn.kind) +
                            " mixer mapped to MLA");
      }
      pl.channel = l.channel == ChannelKind::kMoE ? ProxyChannel::kMoE : ProxyChannel::kDense;
    } else {
      pl.mixer = (i % 4 == 3) ? ProxyMixer::kMLA : ProxyMixer::kKDA;
      pl.channel = ProxyChannel::kMoE;
    }
    (pl.mixer == ProxyMixer::kKDA ? kda : mla) += 1;
    s.layers.push_back(pl);
  }
  if (model.layers.size() < static_cast<size_t>(n))
    s.notes.push_back("model has " + std::to_string(model.layers.size()) +
                      " layers; proxy padded with the KDA,KDA,KDA,MLA pattern");
  // Step 2: features of the first MoE / MLA / KDA layer that the proxy keeps.
  bool has_dsa = false, has_latent = false, has_shared = false, any_gate = false;
  for (const LayerSpec& l : model.layers) {
    if (l.attn.kind == MixerKind::kDSA || l.attn.index_topk > 0) has_dsa = true;
    if (l.channel == ChannelKind::kMoE) {
      s.router = l.moe.router;
      s.renormalize = l.moe.renormalize;
      s.routed_scaling = l.moe.routed_scaling > 0 ? l.moe.routed_scaling : 1.0;
      s.balance_bias = l.moe.expert_score_bias;
      has_latent = has_latent || l.moe.latent_dim > 0;
      has_shared = has_shared || l.moe.num_shared > 0;
      s.latent_norm = l.moe.latent_norm;
    }
    if (l.attn.kind == MixerKind::kKDA && l.attn.gate_lower_bound < 0)
      s.gate_lower_bound = std::max(-5.0, l.attn.gate_lower_bound);
    if (IsSoftmaxAttention(l.attn.kind)) any_gate = any_gate || l.attn.output_gate;
  }
  // The MLA output gate only where the source model's softmax attention has one (issue 12: every
  // proxy used to carry it, ProxySpec's default, e.g. Kimi-Linear's ungated MLA and Llama's GQA).
  s.mla_output_gate = any_gate;
  if (!has_dsa) {
    s.index_topk = 0;
    s.index_heads = 0;
    s.index_head_dim = 0;
  }
  if (!has_latent) s.latent_dim = 0;
  // RoPE: softmax-attention models here use it; the linear-attention hybrids' MLA (Kimi-Linear,
  // the flagship: mla_use_nope) does not, and the parser does not carry mla_use_nope, so a model
  // with any linear mixer keeps NoPE.
  s.rope = kda == 0 && std::none_of(model.layers.begin(), model.layers.end(),
                                    [](const LayerSpec& l) { return IsLinearMixer(l.attn.kind); });
  if (s.rope) s.notes.push_back("MLA rope dims rotated (RoPE, as the source model's attention)");
  if (!has_shared) s.num_shared = 0;
  // Step 3: a vocab too small for byte-level tokens is raised (text task needs 256 symbols).
  s.vocab = 256;
  if (kda == 0 || mla == 0)
    s.notes.push_back("pattern has " + std::to_string(kda) + " KDA and " + std::to_string(mla) +
                      " MLA layers");
  // Step 4: the vision tower, scaled down (used by the image task only: backends/probe_image.h).
  if (model.vision) s.vision = ScaledVision(*model.vision);
  return s;
}

ModelIR ProxyToModelIR(const ProxySpec& s) {
  ModelIR m;
  m.name = "proxy-of-" + s.source_model;
  m.model_type = "onboard_proxy";
  m.family = "decoder";
  m.vocab = s.vocab;
  m.hidden = s.hidden;
  m.max_position = 4096;
  m.dtype = DType::kF32;
  m.expert_dtype = DType::kF32;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerSpec l;
    l.index = static_cast<int64_t>(i);
    if (s.layers[i].mixer == ProxyMixer::kKDA) {
      l.attn.kind = MixerKind::kKDA;
      l.attn.num_heads = s.kda_heads;
      l.attn.num_kv_heads = s.kda_heads;
      l.attn.num_v_heads = s.kda_heads;
      l.attn.head_dim = s.kda_head_dim;
      l.attn.v_head_dim = s.kda_head_dim;
      l.attn.conv_kernel = s.conv_kernel;
      l.attn.gate_form = GateForm::kBounded;
      l.attn.gate_lower_bound = s.gate_lower_bound;
      l.attn.full_rank_gate = true;
      l.attn.chunk_size = s.chunk;
    } else {
      l.attn.kind = s.index_topk > 0 ? MixerKind::kDSA : MixerKind::kMLA;
      l.attn.dsa_base = MixerKind::kMLA;
      l.attn.num_heads = s.mla_heads;
      l.attn.num_kv_heads = s.mla_heads;
      l.attn.head_dim = s.qk_nope_dim + s.qk_rope_dim;
      l.attn.v_head_dim = s.v_head_dim;
      l.attn.q_lora_rank = s.q_lora_rank;
      l.attn.kv_lora_rank = s.kv_lora_rank;
      l.attn.qk_nope_head_dim = s.qk_nope_dim;
      l.attn.qk_rope_head_dim = s.qk_rope_dim;
      l.attn.output_gate = s.mla_output_gate;
      l.attn.index_heads = s.index_heads;
      l.attn.index_head_dim = s.index_head_dim;
      l.attn.index_topk = s.index_topk;
    }
    if (s.layers[i].channel == ProxyChannel::kMoE) {
      l.channel = ChannelKind::kMoE;
      l.moe.num_experts = s.num_experts;
      l.moe.top_k = s.top_k;
      l.moe.num_shared = s.num_shared;
      l.moe.shared_intermediate = s.shared_inter;
      l.moe.expert_intermediate = s.expert_inter;
      l.moe.latent_dim = s.latent_dim;
      l.moe.latent_norm = s.latent_norm;
      l.moe.router = s.router;
      l.moe.renormalize = s.renormalize;
      l.moe.routed_scaling = s.routed_scaling;
      l.moe.expert_score_bias = s.balance_bias;
    } else {
      l.channel = ChannelKind::kDenseMLP;
      l.mlp.intermediate = s.mlp_inter;
    }
    m.layers.push_back(l);
  }
  return m;
}

}  // namespace onboard
