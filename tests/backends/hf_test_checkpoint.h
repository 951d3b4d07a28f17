// Small Hugging Face checkpoints written by the tests: real tensor names, random weights, config.json,
// one file or shards + model.safetensors.index.json, BF16/F32 storage. The values each tensor holds
// after storage rounding are kept in `tensors` for the independent reference (hf_reference_forward.h).
// Shapes as in the checkpoints: linears [out, in].
#pragma once

#include <sys/stat.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parsers/safetensors.h"

namespace onboard::hftest {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> v;  // row-major, as stored (after bf16 rounding)
};

inline double RoundBf16(double x) {
  float f = float(x);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  b += 0x7fff + ((b >> 16) & 1);  // round to nearest even
  b &= 0xffff0000u;
  std::memcpy(&f, &b, 4);
  return f;
}

// E4M3 (fn) value of code c, from the format's definition (bias 7, subnormals, 0x7f NaN).
inline double E4M3Value(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return (c & 0x80) ? -mag : mag;
}
// Nearest E4M3 code to x (|x| <= 448).
inline uint8_t E4M3Code(double x) {
  int best = 0;
  for (int c = 0; c < 256; ++c)
    if ((c & 0x7f) != 0x7f && std::fabs(E4M3Value(c) - x) < std::fabs(E4M3Value(best) - x)) best = c;
  return uint8_t(best);
}

struct Checkpoint {
  nlohmann::json config;
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::vector<double>> fp8_scales;  // weight name -> block scale_inv [ceil(R/128) x ceil(C/128)]
  std::map<std::string, TensorToWrite> raw;  // written as given (gpt-oss MXFP4 blocks/scales: U8)
  std::map<std::string, Tensor> decoded;     // reference-only values of raw tensors, by weight name
  std::string dtype = "BF16";  // storage dtype of every tensor
  std::mt19937 rng{1234};

  // Normal(mean, std) values rounded to the storage dtype.
  void Add(const std::string& name, std::vector<int64_t> shape, double std, double mean = 0.0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<double> dist(mean, std);
    Tensor t{shape, {}};
    for (int64_t i = 0; i < n; ++i) {
      const double x = dist(rng);
      t.v.push_back(dtype == "BF16" ? RoundBf16(x) : double(float(x)));
    }
    tensors[name] = t;
  }
  void Linear(const std::string& prefix, int64_t out, int64_t in, bool bias = false) {
    Add(prefix + ".weight", {out, in}, 1.0 / std::sqrt(double(in)));
    if (bias) Add(prefix + ".bias", {out}, 0.1);
  }
  void Norm(const std::string& name, int64_t n) { Add(name, {n}, 0.1, 1.0); }
  void Mlp(const std::string& p, int64_t h, int64_t inter, const char* g = "gate_proj", const char* u = "up_proj",
           const char* d = "down_proj") {
    Linear(p + "." + g, inter, h);
    Linear(p + "." + u, inter, h);
    Linear(p + "." + d, h, inter);
  }
  // DeepSeek block fp8: stores `name` as F8_E4M3 with one scale per 128x128 block (max|w| / 448) in
  // "<name>_scale_inv"; the kept values become the dequantised ones.
  void QuantizeFp8(const std::string& name) {
    Tensor& t = tensors.at(name);
    const int64_t R = t.shape[0], C = t.shape[1], br = (R + 127) / 128, bc = (C + 127) / 128;
    std::vector<double> scale(size_t(br * bc), 0.0);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        double& s = scale[size_t((r / 128) * bc + c / 128)];
        s = std::max(s, std::fabs(t.v[size_t(r * C + c)]) / 448.0);
      }
    for (double& s : scale) s = double(float(s));  // stored as F32
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < C; ++c) {
        const double s = scale[size_t((r / 128) * bc + c / 128)];
        double& v = t.v[size_t(r * C + c)];
        v = E4M3Value(E4M3Code(v / s)) * double(float(s));
      }
    fp8_scales[name] = scale;
  }
  const std::vector<double>& W(const std::string& name) const {
    return decoded.count(name) ? decoded.at(name).v : tensors.at(name).v;
  }
  bool Has(const std::string& name) const { return tensors.count(name) > 0; }

  std::string Bytes(const std::string& name, const Tensor& t) const {
    std::string out;
    if (fp8_scales.count(name)) {
      const std::vector<double>& sc = fp8_scales.at(name);
      const int64_t C = t.shape[1], bc = (C + 127) / 128;
      for (size_t i = 0; i < t.v.size(); ++i)
        out.push_back(char(E4M3Code(t.v[i] / sc[size_t((int64_t(i) / C / 128) * bc + (int64_t(i) % C) / 128)])));
      return out;
    }
    for (double x : t.v) {
      const float f = float(x);
      uint32_t b;
      std::memcpy(&b, &f, 4);
      if (dtype == "BF16") {
        const uint16_t h = uint16_t(b >> 16);
        out.append(reinterpret_cast<const char*>(&h), 2);
      } else {
        out.append(reinterpret_cast<const char*>(&f), 4);
      }
    }
    return out;
  }

  // Writes config.json and the weights: one model.safetensors, or `shards` files + the index.
  void Write(const std::string& dir, int shards = 1) const {
    ::mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/config.json") << config.dump(2);
    std::vector<std::vector<TensorToWrite>> parts(static_cast<size_t>(shards));
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
    size_t k = 0;
    for (const auto& [name, t] : tensors) {
      const size_t s = k++ % size_t(shards);
      if (fp8_scales.count(name)) {
        const std::vector<double>& sc = fp8_scales.at(name);
        std::vector<float> f(sc.begin(), sc.end());
        parts[s].push_back({name, "F8_E4M3", t.shape, Bytes(name, t)});
        parts[s].push_back({name + "_scale_inv", "F32", {(t.shape[0] + 127) / 128, (t.shape[1] + 127) / 128},
                            std::string(reinterpret_cast<const char*>(f.data()), f.size() * 4)});
        index["weight_map"][name + "_scale_inv"] = ShardName(int(s), shards);
      } else {
        parts[s].push_back({name, dtype, t.shape, Bytes(name, t)});
      }
      index["weight_map"][name] = ShardName(int(s), shards);
    }
    for (const auto& [name, t] : raw) {
      const size_t s = k++ % size_t(shards);
      parts[s].push_back(t);
      index["weight_map"][name] = ShardName(int(s), shards);
    }
    for (int s = 0; s < shards; ++s) {
      const Status st = WriteSafetensorsFile(dir + "/" + ShardName(s, shards), parts[size_t(s)]);
      if (!st.ok()) throw std::runtime_error(st.message());
    }
    if (shards > 1) std::ofstream(dir + "/model.safetensors.index.json") << index.dump(2);
  }
  static std::string ShardName(int s, int shards) {
    if (shards == 1) return "model.safetensors";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05d-of-%05d.safetensors", s + 1, shards);
    return buf;
  }
};

// MLA projections under `a` ("model.layers.N.self_attn."): low-rank q (rq > 0), latent kv, o_proj.
inline void AddMla(Checkpoint& c, const std::string& a, int64_t h, int64_t H, int64_t rq, int64_t rkv,
                   int64_t dn, int64_t dr, int64_t dv) {
  c.Linear(a + "q_a_proj", rq, h);
  c.Norm(a + "q_a_layernorm.weight", rq);
  c.Linear(a + "q_b_proj", H * (dn + dr), rq);
  c.Linear(a + "kv_a_proj_with_mqa", rkv + dr, h);
  c.Norm(a + "kv_a_layernorm.weight", rkv);
  c.Linear(a + "kv_b_proj", H * (dn + dv), rkv);
  c.Linear(a + "o_proj", h, H * dv);
}

// Dense llama-style: llama / qwen2 (q/k/v bias) / qwen3 (q/k norm, tied head).
inline Checkpoint MakeDense(const std::string& model_type, int layers = 2, int64_t vocab = 64) {
  Checkpoint c;
  const int64_t h = 32, heads = 4, kv = 2, d = 8, inter = 48;
  c.config = {{"model_type", model_type}, {"vocab_size", vocab}, {"hidden_size", h},
              {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
              {"head_dim", d}, {"intermediate_size", inter}, {"rms_norm_eps", 1e-5},
              {"rope_theta", 10000.0}, {"max_position_embeddings", 128}, {"hidden_act", "silu"},
              {"torch_dtype", "bfloat16"}, {"tie_word_embeddings", model_type == "qwen3"}};
  const bool bias = model_type == "qwen2";
  c.Add("model.embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    c.Linear(p + "self_attn.q_proj", heads * d, h, bias);
    c.Linear(p + "self_attn.k_proj", kv * d, h, bias);
    c.Linear(p + "self_attn.v_proj", kv * d, h, bias);
    c.Linear(p + "self_attn.o_proj", h, heads * d);
    if (model_type == "qwen3") {
      c.Norm(p + "self_attn.q_norm.weight", d);
      c.Norm(p + "self_attn.k_norm.weight", d);
    }
    c.Mlp(p + "mlp", h, inter);
  }
  c.Norm("model.norm.weight", h);
  if (model_type != "qwen3") c.Linear("lm_head", vocab, h);
  return c;
}

// Replaces each layer's dense mlp with a router `moe`.gate [E, 32] and E experts of width `inter`.
inline void DenseToExperts(Checkpoint& c, const std::string& moe, int experts, int64_t inter, const char* g = "gate_proj",
                           const char* u = "up_proj", const char* d = "down_proj") {
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* n : {"mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) c.tensors.erase(p + n);
    c.Linear(p + moe + ".gate", experts, 32);
    for (int e = 0; e < experts; ++e) c.Mlp(p + moe + ".experts." + std::to_string(e), 32, inter, g, u, d);
  }
}

// qwen3_moe: every layer MoE (decoder_sparse_step 1), 8 experts top-2, norm_topk_prob true.
inline Checkpoint MakeQwen3Moe(int64_t vocab = 64) {
  Checkpoint c = MakeDense("qwen3", 2, vocab);
  c.config["model_type"] = "qwen3_moe";
  c.config["num_experts"] = 8;
  c.config["num_experts_per_tok"] = 2;
  c.config["moe_intermediate_size"] = 16;
  c.config["norm_topk_prob"] = true;
  c.config["tie_word_embeddings"] = false;
  c.Linear("lm_head", vocab, 32);
  DenseToExperts(c, "mlp", 8, 16);
  return c;
}

// mixtral: block_sparse_moe with w1/w2/w3, 4 experts top-2.
inline Checkpoint MakeMixtral(int64_t vocab = 64) {
  Checkpoint c = MakeDense("llama", 2, vocab);
  c.config["model_type"] = "mixtral";
  c.config["num_local_experts"] = 4;
  c.config["num_experts_per_tok"] = 2;
  c.config["rope_theta"] = 1e6;
  DenseToExperts(c, "block_sparse_moe", 4, 48, "w1", "w3", "w2");
  return c;
}

// deepseek_v3: MLA (q_lora 24, kv_lora 16, nope 8, rope 4, v 8), layer 0 dense, layers 1-2 MoE with
// 8 experts in 4 groups (topk_group 2), top-2, 1 shared expert, noaux_tc bias, routed scale 2.5, YaRN.
inline Checkpoint MakeDeepSeekV3(int64_t vocab = 64) {
  Checkpoint c;
  const int64_t h = 32, H = 4, rq = 24, rkv = 16, dn = 8, dr = 4, dv = 8, E = 8, I = 16, inter = 40;
  c.config = {{"model_type", "deepseek_v3"}, {"vocab_size", vocab}, {"hidden_size", h}, {"num_hidden_layers", 3},
              {"num_attention_heads", H}, {"num_key_value_heads", H}, {"q_lora_rank", rq}, {"kv_lora_rank", rkv},
              {"qk_nope_head_dim", dn}, {"qk_rope_head_dim", dr}, {"v_head_dim", dv}, {"intermediate_size", inter},
              {"moe_intermediate_size", I}, {"n_routed_experts", E}, {"n_shared_experts", 1},
              {"num_experts_per_tok", 2}, {"n_group", 4}, {"topk_group", 2}, {"topk_method", "noaux_tc"},
              {"scoring_func", "sigmoid"}, {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5},
              {"first_k_dense_replace", 1}, {"moe_layer_freq", 1}, {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0},
              {"max_position_embeddings", 512}, {"hidden_act", "silu"}, {"torch_dtype", "bfloat16"},
              {"tie_word_embeddings", false},
              {"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 128},
                                {"beta_fast", 32}, {"beta_slow", 1}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}}}};
  c.Add("model.embed_tokens.weight", {vocab, h}, 1.0);
  for (int i = 0; i < 3; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    c.Norm(p + "input_layernorm.weight", h);
    c.Norm(p + "post_attention_layernorm.weight", h);
    AddMla(c, p + "self_attn.", h, H, rq, rkv, dn, dr, dv);
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

}  // namespace onboard::hftest
