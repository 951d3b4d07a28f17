// ProxyFromModel / ProxySpec::Validate / ProbeConfig::Validate / ProxyToModelIR: the scaled-down
// proxy of a model and the probe configuration, both checked field by field. No LibTorch here.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "backends/probe.h"
#include "backends/probe_image.h"
#include "backends/probe_layout_check.h"
#include "backends/probe_replicas.h"
#include "backends/probe_schedule.h"

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

// The image task's limits (probe_image.h): a tower, full training, one embed unit on one rank of
// a TP/PP group, and room for the placeholders, BOS and the answers.
Status ValidateImageTask(const ProbeConfig& c, const ProxySpec& spec) {
  if (c.task != ProbeTask::kImage) {
    if (c.control == kControlNoImage) return Bad("control", "no_image needs task image", c.control);
    return Status::Ok();
  }
  if (spec.vision.blocks == 0)
    return Bad("task", "image needs a vision tower (the model has no vision_config)", "image");
  if (c.mode == FinetuneMode::kLoRA) return Bad("task", "image runs in mode full only", "image");
  if (c.tp_degree() > 1 || c.pp_degree() > 1)
    return Bad("task", "image runs with tp 1 and pp 1 (the tower is not split)", "image");
  const int64_t m = backends::ImageTokens(spec.vision);
  if (c.seq < 2 * m + 1)
    return Bad("seq",
               "the image task needs seq >= " + std::to_string(2 * m + 1) + " (" + std::to_string(m) +
                   " image tokens, BOS and " + std::to_string(m) + " answers)",
               std::to_string(c.seq));
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

Status ProbeConfig::Validate(const ProxySpec& spec) const {
  auto num = [](double v) { std::ostringstream os; os << v; return os.str(); };
  if (ranks < 1 || ranks > 64) return Bad("ranks", "must be in [1, 64]", std::to_string(ranks));
  ONBOARD_RETURN_IF_ERROR(ValidateParallelFactors(*this, spec));  // tp, pp, fsdp, ep, batch (one error)
  if (steps < 1 || steps > 100000) return Bad("steps", "must be in [1, 100000]", std::to_string(steps));
  if (!pp_fault.empty() && pp_fault != kPipeFaultSwapBackward)
    return Bad("pp_fault", std::string("must be empty or ") + kPipeFaultSwapBackward, pp_fault);
  if (pp_degree() > 1 && control == kControlRandomRouter)
    return Bad("control", "random_router is not supported with pp > 1", control);
  if (seq < 4 || seq > 8192) return Bad("seq", "must be in [4, 8192]", std::to_string(seq));
  if (mode == FinetuneMode::kLoRA && (lora_rank < 1 || lora_rank > backends::kMaxLoraRank))
    return Bad("lora_rank", "must be in [1, " + std::to_string(backends::kMaxLoraRank) + "] in lora mode",
               std::to_string(lora_rank));
  if (!(lr > 0) || !std::isfinite(lr)) return Bad("lr", "must be a finite number > 0", num(lr));
  if (warmup < 0) return Bad("warmup", "must be >= 0", std::to_string(warmup));
  if (!(clip >= 0)) return Bad("clip", "must be >= 0", num(clip));
  if (!(weight_decay >= 0)) return Bad("weight_decay", "must be >= 0", num(weight_decay));
  if (!(beta1 >= 0 && beta1 < 1)) return Bad("beta1", "must be in [0, 1)", num(beta1));
  if (!(beta2 >= 0 && beta2 < 1)) return Bad("beta2", "must be in [0, 1)", num(beta2));
  if (!(min_lr_ratio >= 0 && min_lr_ratio <= 1))
    return Bad("min_lr_ratio", "must be in [0, 1]", num(min_lr_ratio));
  if (task == ProbeTask::kCopy && (copy_symbols < 2 || copy_symbols > 250))
    return Bad("copy_symbols", "must be in [2, 250]", std::to_string(copy_symbols));
  if (task == ProbeTask::kCopy && copy_symbols < (seq - 1) / 2)
    return Bad("copy_symbols", "must be >= (seq-1)/2 = " + std::to_string((seq - 1) / 2) +
               " (the copied symbols are distinct)", std::to_string(copy_symbols));
  if (task == ProbeTask::kLookup) {  // lookup task (issue 12, backends/probe_lookup.h)
    if (lookup_keys < 2 || lookup_keys > 26)
      return Bad("lookup_keys", "must be in [2, 26]", std::to_string(lookup_keys));
    if (lookup_values < 2 || lookup_values > 127)
      return Bad("lookup_values", "must be in [2, 127]", std::to_string(lookup_values));
    if (seq < 3) return Bad("seq", "the lookup task needs seq >= 3 (one triple)", std::to_string(seq));
    if (mode == FinetuneMode::kLoRA)
      return Bad("task", "lookup runs in mode full only (no LoRA source task)", "lookup");
  }
  if (task == ProbeTask::kText && text_file.empty()) return Bad("text_file", "text task needs a file", "");
  ONBOARD_RETURN_IF_ERROR(ValidateImageTask(*this, spec));
  ONBOARD_RETURN_IF_ERROR(ValidateRecompute(*this));
  if (!(timeout_s > 0)) return Bad("timeout", "must be > 0 seconds", num(timeout_s));
  if (!(collective_timeout_s > 0))
    return Bad("collective_timeout", "must be > 0 seconds", num(collective_timeout_s));
  if (device != "cpu" && device != "cuda") return Bad("device", "must be cpu or cuda", device);
  if (threads_per_rank < 1 || threads_per_rank > 64)
    return Bad("threads_per_rank", "must be in [1, 64]", std::to_string(threads_per_rank));
  if (!(converge_fraction > 0 && converge_fraction < 1))
    return Bad("converge_fraction", "must be in (0, 1)", num(converge_fraction));
  if (base_steps < -1 || base_steps > 100000)
    return Bad("base_steps", "must be -1 (default) or in [0, 100000]", std::to_string(base_steps));
  if (!control.empty() && control != kControlNoLookback && control != kControlRandomRouter &&
      control != kControlFrozenLora && control != kControlPerturbedKdaGate &&
      control != kControlPerturbedDsaTopk && control != kControlNoImage)
    return Bad("control",
               std::string("must be one of ") + kControlNoLookback + ", " + kControlRandomRouter + ", " +
                   kControlFrozenLora + ", " + kControlPerturbedKdaGate + ", " + kControlPerturbedDsaTopk +
                   ", " + kControlNoImage,
               control);
  if (control == kControlPerturbedDsaTopk &&
      (dsa_kernel != ProbeKernel::kGenerated ||
       std::none_of(spec.layers.begin(), spec.layers.end(),
                    [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kMLA; }) ||
       spec.index_topk < 2 || spec.index_heads < 1))
    return Bad("control",
               "perturbed_dsa_topk needs an MLA layer with an indexer (top-k >= 2) and dsa_kernel generated",
               control);
  if (control == kControlPerturbedKdaGate &&
      (kda_kernel != ProbeKernel::kGenerated ||
       std::none_of(spec.layers.begin(), spec.layers.end(),
                    [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kKDA; })))
    return Bad("control", "perturbed_kda_gate needs a KDA layer and kda_kernel generated", control);
  if (control == kControlFrozenLora && mode != FinetuneMode::kLoRA)
    return Bad("control", "frozen_lora needs mode lora", control);
  if (control == kControlRandomRouter &&
      std::none_of(spec.layers.begin(), spec.layers.end(),
                   [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; }))
    return Bad("control", "random_router needs a MoE layer (the proxy has none)", control);
  if (loss_parity_steps < 0 || loss_parity_steps > 100000)  // kernel loss parity (issue 12)
    return Bad("loss_parity_steps", "must be in [0, 100000] (0 = off)", std::to_string(loss_parity_steps));
  // Per-layer placement (issue 18): num_experts x MoE layers entries, layer after layer; each
  // layer's block is checked as a placement of its own.
  const auto moe_layers = std::count_if(spec.layers.begin(), spec.layers.end(),
                                        [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; });
  if (moe_layers > 1 && static_cast<int64_t>(expert_placement.size()) == spec.num_experts * moe_layers) {
    if (!expert_phy2log.empty())
      return Bad("expert_placement", "a per-layer placement cannot be combined with expert_phy2log",
                 "both set");
    ProbeConfig one = *this;
    for (int64_t i = 0; i < moe_layers; ++i) {
      one.expert_placement.assign(expert_placement.begin() + i * spec.num_experts,
                                  expert_placement.begin() + (i + 1) * spec.num_experts);
      if (Status st = one.Validate(spec); !st.ok())
        return Bad("expert_placement", "MoE layer " + std::to_string(i) + ": " + st.message(), "per layer");
    }
    return Status::Ok();
  }
  if (!expert_placement.empty()) {
    const int64_t e = ep_degree();
    if (static_cast<int64_t>(expert_placement.size()) != spec.num_experts)
      return Bad("expert_placement", "needs one EP rank per expert (" +
                                         std::to_string(spec.num_experts) + ")",
                 std::to_string(expert_placement.size()));
    std::vector<int64_t> per_rank(static_cast<size_t>(e), 0);
    for (size_t i = 0; i < expert_placement.size(); ++i) {
      int64_t r = expert_placement[i];
      if (r < 0 || r >= e)
        return Bad("expert_placement", "expert " + std::to_string(i) + " placed on rank outside [0, ep=" +
                                           std::to_string(e) + ")", std::to_string(r));
      per_rank[static_cast<size_t>(r)] += 1;
    }
    for (int64_t r = 0; r < e; ++r)
      if (per_rank[static_cast<size_t>(r)] != spec.num_experts / e)
        return Bad("expert_placement", "EP rank " + std::to_string(r) + " holds " +
                                           std::to_string(per_rank[static_cast<size_t>(r)]) +
                                           " experts; every rank must hold num_experts/ep=" +
                                           std::to_string(spec.num_experts / e),
                   std::to_string(per_rank[static_cast<size_t>(r)]));
  }
  if (ranks_per_node < 0 || (ranks_per_node > 0 && ranks % ranks_per_node != 0))
    return Bad("ranks_per_node", "must be 0 (one node) or divide ranks=" + std::to_string(ranks),
               std::to_string(ranks_per_node));
  if (max_route_nodes < 0 || max_route_nodes > nodes())
    return Bad("max_route_nodes", "must be 0 (off) or in [1, nodes=" + std::to_string(nodes()) + "]",
               std::to_string(max_route_nodes));
  if (max_route_nodes > 0 && max_route_nodes * (spec.num_experts / nodes()) < spec.top_k)
    return Bad("max_route_nodes",
               "its nodes hold fewer than top_k=" + std::to_string(spec.top_k) + " experts",
               std::to_string(max_route_nodes));
  ONBOARD_RETURN_IF_ERROR(ValidateEpDispatcher(*this));
  if (!expert_phy2log.empty()) {  // redundant experts (probe_replicas.h): EP over all data ranks
    Expected<ReplicaMap> m = BuildReplicaMap(expert_phy2log, spec.num_experts, ep_degree());
    if (!m.ok()) return m.status();
    // TP: each TP rank's EP group holds every slot and computes the routed experts alike
    // (probe_tp.h), so the replicas' gradient exchange runs inside each EP group unchanged.
    if (ep_degree() != data_ranks())
      return Bad("expert_phy2log", "needs one EP group over all data ranks (ep = ranks / (tp * pp))",
                 "ep=" + std::to_string(ep_degree()) + " data ranks=" + std::to_string(data_ranks()));
  }
  if (die_rank >= ranks) return Bad("die_rank", "must be < ranks", std::to_string(die_rank));
  ONBOARD_RETURN_IF_ERROR(thresholds.Validate());
  return spec.Validate();
}

}  // namespace onboard
