// ModelIR + ModelStats -> JSON (see core/model_json.h).
#include "core/model_json.h"

namespace onboard {

using nlohmann::json;

json LayerSpecToJson(const LayerSpec& l) {
  const AttentionSpec& a = l.attn;
  json mixer = {{"kind", MixerKindName(a.kind)}, {"heads", a.num_heads}, {"kv_heads", a.num_kv_heads},
                {"head_dim", a.head_dim}, {"v_head_dim", a.v_head_dim}};
  if (a.qkv_bias) mixer["qkv_bias"] = true;
  if (a.o_bias) mixer["o_bias"] = true;
  if (a.qk_norm) mixer["qk_norm"] = a.qk_norm_full ? "full" : "per_head";
  if (a.output_gate) mixer["output_gate"] = true;
  if (a.window > 0) mixer["window"] = a.window;
  if (a.sinks) mixer["sinks"] = true;
  const MixerKind base = a.kind == MixerKind::kDSA ? a.dsa_base : a.kind;
  if (base == MixerKind::kMLA) {
    mixer["q_lora_rank"] = a.q_lora_rank;
    mixer["kv_lora_rank"] = a.kv_lora_rank;
    mixer["qk_nope_head_dim"] = a.qk_nope_head_dim;
    mixer["qk_rope_head_dim"] = a.qk_rope_head_dim;
  }
  if (a.kind == MixerKind::kDSA) {
    mixer["dsa_base"] = MixerKindName(a.dsa_base);
    mixer["index_heads"] = a.index_heads;
    mixer["index_head_dim"] = a.index_head_dim;
    mixer["index_topk"] = a.index_topk;
  }
  if (a.kind == MixerKind::kKDA || a.kind == MixerKind::kGatedDeltaNet || a.kind == MixerKind::kLinearAttention) {
    mixer["v_heads"] = a.num_v_heads > 0 ? a.num_v_heads : a.num_heads;
    mixer["conv_kernel"] = a.conv_kernel;
    mixer["gate_form"] = GateFormName(a.gate_form);
    if (a.gate_form == GateForm::kBounded) mixer["gate_lower_bound"] = a.gate_lower_bound;
    if (a.full_rank_gate) mixer["full_rank_gate"] = true;
    mixer["chunk_size"] = a.chunk_size;
  }
  json channel;
  if (l.channel == ChannelKind::kDenseMLP) {
    channel = {{"kind", "MLP"}, {"act", ActivationName(l.mlp.act)}, {"intermediate", l.mlp.intermediate},
               {"gated", l.mlp.gated}, {"bias", l.mlp.bias}};
  } else {
    const MoESpec& m = l.moe;
    channel = {{"kind", "MoE"},
               {"experts", m.num_experts},
               {"top_k", m.top_k},
               {"expert_intermediate", m.expert_intermediate},
               {"shared_experts", m.num_shared},
               {"shared_intermediate", m.shared_intermediate},
               {"latent_dim", m.latent_dim},
               {"router", RouterActivationName(m.router)},
               {"groups", m.num_groups},
               {"topk_groups", m.topk_groups},
               {"routed_scaling", m.routed_scaling},
               {"act", ActivationName(m.act)}};
  }
  return {{"index", l.index}, {"mixer", mixer}, {"channel", channel}, {"norms", l.norms}};
}

json ModelStatsToJson(const ModelIR& m, const ModelStats& s) {
  json model = {{"name", m.name},
                {"source", m.source},
                {"model_type", m.model_type},
                {"architecture", m.architecture},
                {"family", m.family},
                {"vocab", m.vocab},
                {"hidden", m.hidden},
                {"max_position", m.max_position},
                {"num_layers", m.layers.size()},
                {"tied_embeddings", m.tied_embeddings},
                {"dtype", DTypeName(m.dtype)},
                {"expert_dtype", DTypeName(m.expert_dtype)},
                {"linear_dtype", DTypeName(m.linear_dtype == DType::kUnknown ? m.dtype : m.linear_dtype)},
                {"quantization", m.quantization},
                {"mtp_layers_not_counted", m.mtp_layers}};
  json vision = nullptr;
  if (m.vision) {
    const VisionTower& v = *m.vision;
    vision = {{"kind", v.kind},     {"depth", v.depth},   {"hidden", v.hidden}, {"intermediate", v.intermediate},
              {"heads", v.heads},   {"patch", v.patch},   {"merge", v.merge},   {"out_hidden", v.out_hidden},
              {"params", v.params}};
  }
  double attn_flops = 0, act_bytes = 0;
  int64_t expert_params = 0;
  json layers = json::array();
  for (size_t i = 0; i < m.layers.size() && i < s.layers.size(); ++i) {
    const LayerStats& ls = s.layers[i];
    json l = LayerSpecToJson(m.layers[i]);
    l["stats"] = {{"params", ls.params},
                  {"active_params", ls.active_params},
                  {"attn_params", ls.attn_params},
                  {"channel_params", ls.channel_params},
                  {"expert_params", ls.expert_params},
                  {"flops_per_token", ls.flops_per_token},
                  {"attn_flops_per_token", ls.attn_flops_per_token},
                  {"act_bytes_per_token", ls.act_bytes_per_token}};
    layers.push_back(l);
    attn_flops += ls.attn_flops_per_token;
    act_bytes += ls.act_bytes_per_token;
    expert_params += ls.expert_params;
  }
  json by_dtype = json::object();
  for (const auto& [dt, b] : s.weight_bytes_by_dtype) by_dtype[DTypeName(dt)] = b;
  json totals = {{"seq", s.seq},
                 {"params", s.total_params},
                 {"active_params", s.active_params},
                 {"embedding_params", s.embedding_params},
                 {"head_params", s.head_params},
                 {"vision_params", s.vision_params},
                 {"other_params", s.other_params},
                 {"routed_expert_params", expert_params},
                 {"flops_per_token", s.flops_per_token},
                 {"attn_flops_per_token", attn_flops},
                 {"act_bytes_per_token", act_bytes},
                 {"weight_bytes", s.weight_bytes},
                 {"weight_bytes_by_dtype", by_dtype}};
  return {{"model", model},          {"layer_summary", SummarizeLayers(m)}, {"vision", vision},
          {"totals", totals},        {"layers", layers},                    {"warnings", m.warnings}};
}

}  // namespace onboard
