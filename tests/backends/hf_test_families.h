// Test checkpoints for glm4_moe (GLM-4.5 text layout), gpt_oss (sinks, alternating sliding window,
// router with bias, fused experts stored MXFP4 as released or dense BF16) and deepseek_v32 (the DSA
// indexer), beside hf_test_checkpoint.h.
// MXFP4 is encoded here from the OCP MX definition (e2m1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 =
// sign, low nibble = even element; one e8m0 exponent, bias 127, per 32 values); the decoded values the
// reference uses are computed here, not by the parser.
// Shapes: gpt-oss experts gate_up [E, 2I, h] (MXFP4 out x in) or [E, h, 2I] (dense), down [E, h, I] / [E, I,
// h].
#pragma once

#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::hftest {

// glm4_moe: 3 layers (layer 0 dense), GQA 4/2 x 8 with q/k/v bias and q/k norm, partial_rotary 0.5,
// 8 experts in 2 groups (topk_group 1), top-2, 1 shared expert, routed scale 1.5.
inline Checkpoint MakeGlm4Moe() {
  Checkpoint c;
  const int64_t h = 32, H = 4, KV = 2, d = 8, vocab = 64, E = 8, I = 16, inter = 40;
  c.config = {{"model_type", "glm4_moe"},
              {"vocab_size", vocab},
              {"hidden_size", h},
              {"num_hidden_layers", 3},
              {"num_attention_heads", H},
              {"num_key_value_heads", KV},
              {"head_dim", d},
              {"attention_bias", true},
              {"use_qk_norm", true},
              {"partial_rotary_factor", 0.5},
              {"intermediate_size", inter},
              {"moe_intermediate_size", I},
              {"n_routed_experts", E},
              {"n_shared_experts", 1},
              {"num_experts_per_tok", 2},
              {"n_group", 2},
              {"topk_group", 1},
              {"norm_topk_prob", true},
              {"routed_scaling_factor", 1.5},
              {"first_k_dense_replace", 1},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"max_position_embeddings", 256},
              {"hidden_act", "silu"},
              {"torch_dtype", "bfloat16"},
              {"tie_word_embeddings", false}};
  c.Add("model.embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < 3; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    c.Linear(p + "self_attn.q_proj", H * d, h, true);
    c.Linear(p + "self_attn.k_proj", KV * d, h, true);
    c.Linear(p + "self_attn.v_proj", KV * d, h, true);
    c.Linear(p + "self_attn.o_proj", h, H * d);
    c.Norm(p + "self_attn.q_norm.weight", d);
    c.Norm(p + "self_attn.k_norm.weight", d);
    if (i == 0) {
      c.Mlp(p + "mlp", h, inter);
      continue;
    }
    c.Linear(p + "mlp.gate", E, h);
    c.Add(p + "mlp.gate.e_score_correction_bias", {E}, 0.5);
    for (int e = 0; e < E; ++e) c.Mlp(p + "mlp.experts." + std::to_string(e), h, I);
    c.Mlp(p + "mlp.shared_experts", h, I);
  }
  c.Norm("model.norm.weight", h);
  c.Linear("lm_head", vocab, h);
  return c;
}

inline double E2M1Value(int nibble) {
  static const double kMag[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (nibble & 8) ? -kMag[nibble & 7] : kMag[nibble & 7];
}

// Random MXFP4 tensor `name` of logical shape [E, out, in]: "<name>_blocks" U8 [E, out, in/32, 16] and
// "<name>_scales" U8 [E, out, in/32] with exponents 2^-6..2^-3; decoded values kept for the reference.
inline void AddMxfp4(Checkpoint& c, const std::string& name, int64_t e, int64_t out, int64_t in) {
  std::uniform_int_distribution<int> nib(0, 15), ex(127 - 6, 127 - 3);
  const int64_t groups = in / 32, n = e * out * groups;
  std::string blocks, scales;
  Tensor dec{{e, out, in}, {}};
  for (int64_t g = 0; g < n; ++g) {
    const int x = ex(c.rng);
    scales.push_back(char(uint8_t(x)));
    for (int j = 0; j < 16; ++j) {
      const int lo = nib(c.rng), hi = nib(c.rng);
      blocks.push_back(char(uint8_t(lo | (hi << 4))));
      dec.v.push_back(std::ldexp(E2M1Value(lo), x - 127));
      dec.v.push_back(std::ldexp(E2M1Value(hi), x - 127));
    }
  }
  c.raw[name + "_blocks"] = {name + "_blocks", "U8", {e, out, groups, 16}, blocks};
  c.raw[name + "_scales"] = {name + "_scales", "U8", {e, out, groups}, scales};
  c.decoded[name] = dec;
}

// gpt_oss: 2 layers (sliding window 3, full), GQA 4/2 x 8 with biases and sinks, 4 experts top-2 of
// width 32, YaRN (factor 4, truncate false). mxfp4: experts as released; else dense BF16 [E, in, out].
inline Checkpoint MakeGptOss(bool mxfp4, int64_t I = 32) {
  Checkpoint c;
  const int64_t h = 32, H = 4, KV = 2, d = 8, vocab = 64, E = 4;
  c.config = {{"model_type", "gpt_oss"},
              {"vocab_size", vocab},
              {"hidden_size", h},
              {"num_hidden_layers", 2},
              {"num_attention_heads", H},
              {"num_key_value_heads", KV},
              {"head_dim", d},
              {"attention_bias", true},
              {"intermediate_size", I},
              {"num_local_experts", E},
              {"num_experts_per_tok", 2},
              {"experts_per_token", 2},
              {"sliding_window", 3},
              {"swiglu_limit", 7.0},
              {"layer_types", {"sliding_attention", "full_attention"}},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 150000.0},
              {"max_position_embeddings", 256},
              {"hidden_act", "silu"},
              {"torch_dtype", "bfloat16"},
              {"tie_word_embeddings", false},
              {"rope_scaling",
               {{"rope_type", "yarn"},
                {"factor", 4.0},
                {"beta_fast", 32.0},
                {"beta_slow", 1.0},
                {"original_max_position_embeddings", 64},
                {"truncate", false}}}};
  if (mxfp4) c.config["quantization_config"] = {{"quant_method", "mxfp4"}};
  c.Add("model.embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    c.Linear(p + "self_attn.q_proj", H * d, h, true);
    c.Linear(p + "self_attn.k_proj", KV * d, h, true);
    c.Linear(p + "self_attn.v_proj", KV * d, h, true);
    c.Linear(p + "self_attn.o_proj", h, H * d, true);
    c.Add(p + "self_attn.sinks", {H}, 1.0, 1.0);
    c.Linear(p + "mlp.router", E, h, true);
    const std::string x = p + "mlp.experts.";
    if (mxfp4) {
      AddMxfp4(c, x + "gate_up_proj", E, 2 * I, h);
      AddMxfp4(c, x + "down_proj", E, h, I);
    } else {
      c.Add(x + "gate_up_proj", {E, h, 2 * I}, 1.5 / std::sqrt(double(h)));
      c.Add(x + "down_proj", {E, I, h}, 1.0 / std::sqrt(double(I)));
    }
    c.Add(x + "gate_up_proj_bias", {E, 2 * I}, 0.5);
    c.Add(x + "down_proj_bias", {E, h}, 0.1);
  }
  c.Norm("model.norm.weight", h);
  c.Linear("lm_head", vocab, h);
  return c;
}

// The DeepSeek-V3.2 indexer under `a` ("model.layers.N.self_attn.indexer."): nI heads of dI, queries from
// the rq-wide low-rank q.
inline void AddIndexer(Checkpoint& c, const std::string& a, int64_t h, int64_t rq, int64_t nI, int64_t dI) {
  c.Linear(a + "wq_b", nI * dI, rq);
  c.Linear(a + "wk", dI, h);
  c.Norm(a + "k_norm.weight", dI);
  c.Add(a + "k_norm.bias", {dI}, 0.1);
  c.Linear(a + "weights_proj", nI, h);
}

// A Kimi KDA mixer under `a` ("model.layers.N.self_attn."): KH heads of d, conv width K; the output gate
// low-rank (g_a_proj -> g_b_proj) or, `full_rank_gate` (kimi_k3), g_proj.
inline void AddKda(Checkpoint& c, const std::string& a, int64_t h, int64_t KH, int64_t d, int64_t K,
                   bool full_rank_gate) {
  const int64_t D = KH * d;
  for (const char* n : {"q_proj", "k_proj", "v_proj"}) c.Linear(a + n, D, h);
  for (const char* n : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"})
    c.Add(a + n, {D, 1, K}, 0.5);
  c.Add(a + "A_log", {1, 1, KH, 1}, 0.5);
  c.Add(a + "dt_bias", {D}, 1.0);
  c.Linear(a + "f_a_proj", d, h);
  c.Linear(a + "f_b_proj", D, d);
  c.Linear(a + "b_proj", KH, h);
  if (full_rank_gate) {
    c.Linear(a + "g_proj", D, h);
  } else {
    c.Linear(a + "g_a_proj", d, h);
    c.Linear(a + "g_b_proj", D, d);
  }
  c.Norm(a + "o_norm.weight", d);
  c.Linear(a + "o_proj", h, D);
}

// Kimi's block_sparse_moe under `m` ("model.layers.N.block_sparse_moe."): router + e_score_correction_bias,
// E experts w1/w3/w2 of width I at input width d (kimi_k3: the latent width), shared experts of width
// `shared`.
inline void AddKimiMoe(Checkpoint& c, const std::string& m, int64_t h, int64_t E, int64_t d, int64_t I,
                       int64_t shared) {
  c.Linear(m + "gate", E, h);
  c.Add(m + "gate.e_score_correction_bias", {E}, 0.5);
  for (int e = 0; e < E; ++e) c.Mlp(m + "experts." + std::to_string(e), d, I, "w1", "w3", "w2");
  c.Mlp(m + "shared_experts", h, shared);
}

// deepseek_v32: MakeDeepSeekV3 plus the DSA lightning indexer on every layer (2 heads of 16, top-3 keys).
inline Checkpoint MakeDeepSeekV32() {
  Checkpoint c = MakeDeepSeekV3();
  const int64_t h = 32, rq = 24, nI = 2, dI = 16;
  c.config["model_type"] = "deepseek_v32";
  c.config["index_n_heads"] = nI;
  c.config["index_head_dim"] = dI;
  c.config["index_topk"] = 3;
  for (int i = 0; i < 3; ++i)
    AddIndexer(c, "model.layers." + std::to_string(i) + ".self_attn.indexer.", h, rq, nI, dI);
  return c;
}

// kimi_linear: 4 layers, KDA at 1-based 1, 2, 4 and MLA (no RoPE, q_proj) at 3; layer 0 dense, the rest
// MoE (4 experts in 2 groups, top-2, 1 shared, routed scale 2.0); KDA `kda_heads` heads of 8, conv width 4
// (4 heads for TP over 4 ranks); `vocab` >= 256 for the real-weights probe's byte tokens.
inline Checkpoint MakeKimiLinear(int64_t kda_heads = 2, int64_t vocab = 64) {
  Checkpoint c;
  const int64_t h = 32, H = 4, dn = 8, dr = 4, dv = 8, rkv = 16, E = 4, I = 16, inter = 40;
  const int64_t KH = kda_heads, d = 8, K = 4;
  c.config = {{"model_type", "kimi_linear"},
              {"vocab_size", vocab},
              {"hidden_size", h},
              {"num_hidden_layers", 4},
              {"num_attention_heads", H},
              {"num_key_value_heads", H},
              {"q_lora_rank", nullptr},
              {"kv_lora_rank", rkv},
              {"qk_nope_head_dim", dn},
              {"qk_rope_head_dim", dr},
              {"v_head_dim", dv},
              {"mla_use_nope", true},
              {"head_dim", 72},
              {"intermediate_size", inter},
              {"moe_intermediate_size", I},
              {"num_experts", E},
              {"num_experts_per_token", 2},
              {"num_shared_experts", 1},
              {"num_expert_group", 2},
              {"topk_group", 1},
              {"moe_renormalize", true},
              {"moe_router_activation_func", "sigmoid"},
              {"use_grouped_topk", true},
              {"routed_scaling_factor", 2.0},
              {"first_k_dense_replace", 1},
              {"moe_layer_freq", 1},
              {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0},
              {"rope_scaling", nullptr},
              {"max_position_embeddings", 256},
              {"hidden_act", "silu"},
              {"torch_dtype", "bfloat16"},
              {"tie_word_embeddings", false},
              {"linear_attn_config",
               {{"kda_layers", {1, 2, 4}},
                {"full_attn_layers", {3}},
                {"num_heads", KH},
                {"head_dim", d},
                {"short_conv_kernel_size", K}}}};
  c.Add("model.embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < 4; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    if (i == 2) {  // 1-based 3: MLA
      c.Linear(a + "q_proj", H * (dn + dr), h);
      c.Linear(a + "kv_a_proj_with_mqa", rkv + dr, h);
      c.Norm(a + "kv_a_layernorm.weight", rkv);
      c.Linear(a + "kv_b_proj", H * (dn + dv), rkv);
      c.Linear(a + "o_proj", h, H * dv);
    } else {
      AddKda(c, a, h, KH, d, K, /*full_rank_gate=*/false);
    }
    if (i == 0) {
      c.Mlp(p + "mlp", h, inter);
      continue;
    }
    AddKimiMoe(c, p + "block_sparse_moe.", h, E, h, I, I);
  }
  c.Norm("model.norm.weight", h);
  c.Linear("lm_head", vocab, h);
  return c;
}

}  // namespace onboard::hftest
