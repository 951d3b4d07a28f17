// A small kimi_k3 (the flagship's layout, examples/flagship/config.json) checkpoint in HF layout:
// KimiK3ForConditionalGeneration's names (language_model.model.*, language_model.lm_head.weight, a tiny
// MoonViT tower vision_tower.* + projector mm_projector.*, AddMoonVit), config.json with text_config in
// kimi_linear style, a MoonViT vision_config and media_placeholder_token_id. Text model: 4 layers, 1-based
// KDA at 1, 2, 4 (full-rank output gate g_proj, bounded decay gate -5) and gated MLA + DSA indexer at 3
// (q_lora 24, kv_lora 16, no RoPE, top-3 keys); layer 0 dense, the rest latent MoE (4 experts, top-2, sigmoid
// + bias, renormalised, routed scale 1.5, 2 shared experts at full width, latent 32 -> 16 with its norm);
// SiTU-GLU MLPs and experts (betas 2 and 3: small enough to differ from SwiGLU on these O(1) activations).
// K3TextView: the same values under the text model's own names ("model.*", "lm_head.weight") with
// text_config as the config, which is how the wrapper's language_model sees them; the reference
// (hf_reference_forward.h) reads that view.
#pragma once

#include "tests/backends/hf_test_families.h"

namespace onboard::hftest {

inline const std::string kK3Root = "language_model.model.";

// The gated MLA + indexer (AddMla, AddIndexer) with g_proj [H*dv, hidden] (mla_use_output_gate).
inline void AddK3Mla(Checkpoint& c, const std::string& a, int64_t h) {
  const int64_t H = 4, rq = 24, rkv = 16, dn = 8, dr = 4, dv = 8, nI = 2, dI = 16;
  AddMla(c, a, h, H, rq, rkv, dn, dr, dv);
  c.Linear(a + "g_proj", H * dv, h);
  AddIndexer(c, a + "indexer.", h, rq, nI, dI);
}

inline nlohmann::json K3TextConfig(int64_t vocab, int64_t h, int64_t E, int64_t I, int64_t L, int64_t inter) {
  return {{"model_type", "kimi_linear"},
          {"vocab_size", vocab},
          {"hidden_size", h},
          {"num_hidden_layers", 4},
          {"first_k_dense_replace", 1},
          {"intermediate_size", inter},
          {"hidden_act", "situ"},
          {"activation_situ_beta", 2.0},
          {"activation_situ_linear_beta", 3.0},
          {"rms_norm_eps", 1e-5},
          {"max_position_embeddings", 256},
          {"tie_word_embeddings", false},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 4},
          {"q_lora_rank", 24},
          {"kv_lora_rank", 16},
          {"qk_nope_head_dim", 8},
          {"qk_rope_head_dim", 4},
          {"v_head_dim", 8},
          {"mla_use_nope", true},
          {"mla_use_output_gate", true},
          {"index_n_heads", 2},
          {"index_head_dim", 16},
          {"index_topk", 3},
          {"linear_attn_config",
           {{"kda_layers", {1, 2, 4}},
            {"full_attn_layers", {3}},
            {"num_heads", 2},
            {"head_dim", 8},
            {"short_conv_kernel_size", 4},
            {"use_full_rank_gate", true},
            {"gate_lower_bound", -5.0}}},
          {"num_experts", E},
          {"num_experts_per_token", 2},
          {"num_shared_experts", 2},
          {"moe_intermediate_size", I},
          {"routed_expert_hidden_size", L},
          {"latent_moe_use_norm", true},
          {"moe_router_activation_func", "sigmoid"},
          {"moe_renormalize", true},
          {"routed_scaling_factor", 1.5},
          {"num_expert_group", 1},
          {"topk_group", 1}};
}

inline constexpr int64_t kK3Media = 60;  // media_placeholder_token_id

// A tiny MoonViT: 2 blocks, hidden 16 (2 heads of 8), patch 2 (12 values per patch), a 4 x 6 position
// grid, 2 x 2 merge into the text hidden h.
inline nlohmann::json K3VisionConfig(int64_t h) {
  return {{"model_type", "moonvit"},     {"depth", 2},           {"hidden_size", 16},
          {"intermediate_size", 24},     {"num_heads", 2},       {"patch_size", 2},
          {"merge_kernel_size", {2, 2}}, {"out_hidden_size", h}, {"init_pos_emb_height", 4},
          {"init_pos_emb_width", 6}};
}

// vision_tower.* (Kimi-VL's MoonVitPretrainedModel names) and mm_projector.* (Kimi-K2.5's PatchMergerMLP).
inline void AddMoonVit(Checkpoint& c, const nlohmann::json& vc) {
  const int64_t hd = vc["hidden_size"], I = vc["intermediate_size"], P = vc["patch_size"];
  const int64_t out = vc["out_hidden_size"], m = 4 * hd, ph = vc["init_pos_emb_height"],
                pw = vc["init_pos_emb_width"];
  const std::string t = "vision_tower.";
  c.Add(t + "patch_embed.proj.weight", {hd, 3, P, P}, 1.0 / std::sqrt(3.0 * double(P * P)));
  c.Add(t + "patch_embed.proj.bias", {hd}, 0.1);
  c.Add(t + "patch_embed.pos_emb.weight", {ph, pw, hd}, 1.0);
  for (int64_t b = 0; b < int64_t(vc["depth"]); ++b) {
    const std::string p = t + "encoder.blocks." + std::to_string(b) + ".";
    for (const char* n : {"norm0", "norm1"}) {
      c.Norm(p + n + ".weight", hd);
      c.Add(p + n + ".bias", {hd}, 0.1);
    }
    c.Linear(p + "wqkv", 3 * hd, hd, true);
    c.Linear(p + "wo", hd, hd, true);
    c.Linear(p + "mlp.fc0", I, hd, true);
    c.Linear(p + "mlp.fc1", hd, I, true);
  }
  c.Norm(t + "encoder.final_layernorm.weight", hd);
  c.Add(t + "encoder.final_layernorm.bias", {hd}, 0.1);
  c.Norm("mm_projector.pre_norm.weight", hd);
  c.Add("mm_projector.pre_norm.bias", {hd}, 0.1);
  c.Linear("mm_projector.proj.0", m, m, true);
  c.Linear("mm_projector.proj.2", out, m, true);
}

// `vocab` >= 256 for the real-weights probe's byte tokens.
inline Checkpoint MakeKimiK3(int64_t vocab = 64) {
  Checkpoint c;
  const int64_t h = 32, E = 4, I = 16, L = 16, inter = 40;
  c.config = {{"architectures", {"KimiK3ForConditionalGeneration"}},
              {"model_type", "kimi_k3"},
              {"torch_dtype", "bfloat16"},
              {"text_config", K3TextConfig(vocab, h, E, I, L, inter)},
              {"media_placeholder_token_id", kK3Media},
              {"vision_config", K3VisionConfig(h)}};
  c.Add(kK3Root + "embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < 4; ++i) {
    const std::string p = kK3Root + "layers." + std::to_string(i) + ".";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    if (i == 2) {  // 1-based 3: gated MLA + indexer
      AddK3Mla(c, p + "self_attn.", h);
    } else {
      AddKda(c, p + "self_attn.", h, 2, 8, 4, /*full_rank_gate=*/true);
    }
    if (i == 0) {
      c.Mlp(p + "mlp", h, inter);
      continue;
    }
    const std::string m = p + "block_sparse_moe.";
    AddKimiMoe(c, m, h, E, L, I, 2 * I);
    c.Linear(m + "routed_expert_down_proj", L, h);
    c.Norm(m + "routed_expert_norm.weight", L);
    c.Linear(m + "routed_expert_up_proj", h, L);
  }
  c.Norm(kK3Root + "norm.weight", h);
  c.Linear("language_model.lm_head", vocab, h);
  AddMoonVit(c, c.config["vision_config"]);
  return c;
}

// The text model's view: names without "language_model." ("model.*", "lm_head.weight"), config = text_config
// with model_type kimi_k3; vision tensors dropped.
inline Checkpoint K3TextView(const Checkpoint& c) {
  Checkpoint v;
  v.config = c.config["text_config"];
  v.config["model_type"] = "kimi_k3";
  const std::string lm = "language_model.";
  for (const auto& [name, t] : c.tensors)
    if (name.compare(0, lm.size(), lm) == 0) v.tensors[name.substr(lm.size())] = t;
  return v;
}

}  // namespace onboard::hftest
