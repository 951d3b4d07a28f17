// Parameter layout of the proxy (which weights each FSDP unit holds, their shapes and init) and
// the seeded initial values. Shapes follow torch.nn.Linear: weight [out, in], used as x W^T.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "backends/proxy_model.h"
#include "backends/proxy_vision.h"
#include "core/lora_targets.h"

namespace onboard::backends {
namespace {

double Fan(int64_t in) { return 1.0 / std::sqrt(static_cast<double>(in)); }

// A linear weight [out, in] and, in lora mode for adapted weights, its A [r, in] and B [out, r].
// Which weights are adapted: kLoraTargets (core/lora_targets.h), the set the exports adapt.
void Linear(UnitLayout& u, const std::string& name, int64_t out, int64_t in, bool adapted,
            const ProbeConfig& c, bool expert = false) {
  FlatLayout& base = expert ? u.expert : u.dense;
  FlatLayout& lora = expert ? u.expert_lora : u.lora;
  base.Add(name, {out, in}, Init::kNormal, Fan(in), true);
  if (adapted && c.mode == FinetuneMode::kLoRA) {
    lora.Add(name + ".A", {c.lora_rank, in}, Init::kNormal, Fan(in), false);
    lora.Add(name + ".B", {out, c.lora_rank}, Init::kZeros, 0, false);
  }
}

void Norm(FlatLayout& f, const std::string& name, int64_t n) { f.Add(name, {n}, Init::kOnes, 0, false); }

void AddKda(UnitLayout& u, const ProxySpec& s, const ProbeConfig& c) {
  const int64_t hk = s.kda_heads * s.kda_head_dim;
  for (const char* n : {"q_proj", "k_proj", "v_proj"}) Linear(u, n, hk, s.hidden, kLoraTargets.attention, c);
  for (const char* n : {"conv_q", "conv_k", "conv_v"})
    u.dense.Add(n, {hk, s.conv_kernel}, Init::kNormal, Fan(s.conv_kernel), false);
  Linear(u, "g_proj", hk, s.hidden, false, c);
  u.dense.Add("dt_bias", {hk}, Init::kConst, -4.0, false);  // slow initial decay: sigmoid(-4) * lb
  u.dense.Add("A_log", {s.kda_heads}, Init::kZeros, 0, false);
  Linear(u, "beta_proj", s.kda_heads, s.hidden, false, c);
  Linear(u, "gate_a", s.gate_rank, s.hidden, false, c);
  Linear(u, "gate_b", hk, s.gate_rank, false, c);
  Norm(u.dense, "o_norm", s.kda_head_dim);
  Linear(u, "o_proj", s.hidden, hk, kLoraTargets.attention, c);
}

void AddMla(UnitLayout& u, const ProxySpec& s, const ProbeConfig& c) {
  const int64_t dqk = s.qk_nope_dim + s.qk_rope_dim;
  if (s.q_lora_rank > 0) {
    Linear(u, "q_a", s.q_lora_rank, s.hidden, kLoraTargets.attention, c);
    Norm(u.dense, "q_a_norm", s.q_lora_rank);
    Linear(u, "q_b", s.mla_heads * dqk, s.q_lora_rank, kLoraTargets.attention, c);
  } else {
    Linear(u, "q_proj", s.mla_heads * dqk, s.hidden, kLoraTargets.attention, c);
  }
  Linear(u, "kv_a", s.kv_lora_rank + s.qk_rope_dim, s.hidden, kLoraTargets.attention, c);
  Norm(u.dense, "kv_a_norm", s.kv_lora_rank);
  Linear(u, "kv_b", s.mla_heads * (s.qk_nope_dim + s.v_head_dim), s.kv_lora_rank, kLoraTargets.attention, c);
  if (s.mla_output_gate) Linear(u, "gate", s.mla_heads * s.v_head_dim, s.hidden, false, c);
  Linear(u, "o_proj", s.hidden, s.mla_heads * s.v_head_dim, kLoraTargets.attention, c);
  if (s.index_topk > 0) {
    Linear(u, "idx_q", s.index_heads * s.index_head_dim, s.hidden, false, c);
    Linear(u, "idx_k", s.index_head_dim, s.hidden, false, c);
    Linear(u, "idx_w", s.index_heads, s.hidden, false, c);
  }
}

void AddMoe(UnitLayout& u, const ProxySpec& s, const ProbeConfig& c) {
  Linear(u, "router", s.num_experts, s.hidden, false, c);
  if (s.num_shared > 0) {
    const int64_t w = s.num_shared * s.shared_inter;  // shared experts side by side = one wider FFN
    Linear(u, "sh_w1", w, s.hidden, kLoraTargets.shared_experts, c);
    Linear(u, "sh_w3", w, s.hidden, kLoraTargets.shared_experts, c);
    Linear(u, "sh_w2", s.hidden, w, kLoraTargets.shared_experts, c);
  }
  int64_t d = s.hidden;
  if (s.latent_dim > 0) {
    d = s.latent_dim;
    Linear(u, "lat_down", d, s.hidden, false, c);
    if (s.latent_norm) Norm(u.dense, "lat_norm", d);
    Linear(u, "lat_up", s.hidden, d, false, c);
  }
  const bool adapted = AdaptsRoutedExperts(s.num_shared);  // one adapter per expert
  Linear(u, "w1", s.expert_inter, d, adapted, c, /*expert=*/true);
  Linear(u, "w3", s.expert_inter, d, adapted, c, true);
  Linear(u, "w2", d, s.expert_inter, adapted, c, true);
}

}  // namespace

void FlatLayout::Add(const std::string& name, std::vector<int64_t> shape, Init init, double value,
                     bool decay) {
  ParamSlot p;
  p.name = name;
  p.numel = 1;
  for (int64_t d : shape) p.numel *= d;
  p.shape = std::move(shape);
  p.offset = numel;
  p.init = init;
  p.value = value;
  p.decay = decay;
  numel += p.numel;
  slots.push_back(std::move(p));
}

std::vector<UnitLayout> BuildLayout(const ProxySpec& s, const ProbeConfig& c) {
  std::vector<UnitLayout> units;
  UnitLayout embed;
  embed.name = "embed";
  embed.kind = UnitKind::kEmbed;
  embed.dense.Add("tok", {s.vocab, s.hidden}, Init::kNormal, 1.0, true);
  if (c.task == ProbeTask::kImage && s.vision.blocks > 0) AddVisionTower(embed, s);  // proxy_vision.h
  units.push_back(std::move(embed));
  for (int64_t i = 0; i < s.num_layers(); ++i) {
    UnitLayout u;
    u.name = "layer" + std::to_string(i);
    u.layer = i;
    Norm(u.dense, "norm1", s.hidden);
    if (s.layers[static_cast<size_t>(i)].mixer == ProxyMixer::kKDA)
      AddKda(u, s, c);
    else
      AddMla(u, s, c);
    Norm(u.dense, "norm2", s.hidden);
    if (s.layers[static_cast<size_t>(i)].channel == ProxyChannel::kMoE) {
      AddMoe(u, s, c);
    } else {
      Linear(u, "w1", s.mlp_inter, s.hidden, kLoraTargets.dense_mlp, c);
      Linear(u, "w3", s.mlp_inter, s.hidden, kLoraTargets.dense_mlp, c);
      Linear(u, "w2", s.hidden, s.mlp_inter, kLoraTargets.dense_mlp, c);
    }
    units.push_back(std::move(u));
  }
  UnitLayout head;
  head.name = "head";
  head.kind = UnitKind::kHead;
  Norm(head.dense, "final_norm", s.hidden);
  // LoRA also adapts the output head (PEFT target "lm_head"): the target task's letters are
  // rare for the base, and a frozen head bounds how far adapters can move the output distribution.
  Linear(head, "out", s.vocab, s.hidden, kLoraTargets.output_head, c);
  units.push_back(std::move(head));
  return units;
}

ProxyParamCounts CountParams(const std::vector<UnitLayout>& units, const ProxySpec& s, const ProbeConfig& c) {
  ProxyParamCounts n;
  for (const UnitLayout& u : units) {
    n.total += u.dense.numel + u.expert.numel * s.num_experts;
    n.expert += u.expert.numel * s.num_experts;
    n.lora += u.lora.numel + u.expert_lora.numel * s.num_experts;
  }
  n.trainable = c.mode == FinetuneMode::kLoRA ? n.lora : n.total;
  return n;
}

at::Tensor InitFlat(const FlatLayout& layout, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor flat = at::zeros({layout.numel});
  for (const ParamSlot& p : layout.slots) {
    at::Tensor v = flat.narrow(0, p.offset, p.numel);
    switch (p.init) {
      case Init::kNormal:
        v.normal_(0.0, p.value, gen);
        break;
      case Init::kOnes:
        v.fill_(1.0);
        break;
      case Init::kZeros:
        v.zero_();
        break;
      case Init::kConst:
        v.fill_(p.value);
        break;
    }
  }
  return flat;
}

at::Tensor DecayMask(const FlatLayout& layout) {
  at::Tensor m = at::zeros({layout.numel});
  for (const ParamSlot& p : layout.slots)
    if (p.decay) m.narrow(0, p.offset, p.numel).fill_(1.0);
  return m;
}

}  // namespace onboard::backends
