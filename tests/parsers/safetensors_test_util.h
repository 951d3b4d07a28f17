// Helpers shared by the safetensors tests: temp dirs, raw byte files, and a tiny llama checkpoint.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "parsers/safetensors.h"

namespace onboard::testing_st {

inline std::string MakeTempDir() {
  std::string tmpl = "/tmp/onboard_st_XXXXXX";
  char* p = mkdtemp(&tmpl[0]);
  return p ? std::string(p) : std::string("/tmp");
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// 8-byte little-endian length + header text + data.
inline std::string RawFile(uint64_t declared_len, const std::string& header, const std::string& data = "") {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((declared_len >> (8 * i)) & 0xff);
  return s + header + data;
}
inline std::string RawFile(const std::string& header, const std::string& data = "") {
  return RawFile(header.size(), header, data);
}

inline TensorToWrite Zeros(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype = "BF16") {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  const std::optional<SafetensorsDtype> d = FindSafetensorsDtype(dtype);
  return {name, dtype, shape, std::string(size_t(n) * size_t(d ? SafetensorsDtypeBytes(*d) : 0), '\0')};
}

// Tiny llama: vocab 64, hidden 32, 2 layers, 4 heads x 8, 2 kv heads, SwiGLU 48, untied.
inline ModelIR TinyLlamaIR() {
  ModelIR m;
  m.name = "tiny-llama";
  m.model_type = "llama";
  m.family = "decoder";
  m.vocab = 64;
  m.hidden = 32;
  for (int i = 0; i < 2; ++i) {
    LayerSpec l;
    l.index = i;
    l.attn.kind = MixerKind::kGQA;
    l.attn.num_heads = 4;
    l.attn.num_kv_heads = 2;
    l.attn.head_dim = 8;
    l.mlp.intermediate = 48;
    m.layers.push_back(l);
  }
  return m;
}

// The same model's tensors in HF naming, written out by hand (not from ExpectedTensorNames).
inline std::vector<TensorToWrite> TinyLlamaTensors() {
  std::vector<TensorToWrite> t = {Zeros("model.embed_tokens.weight", {64, 32})};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(Zeros(p + "input_layernorm.weight", {32}));
    t.push_back(Zeros(p + "post_attention_layernorm.weight", {32}));
    t.push_back(Zeros(p + "self_attn.q_proj.weight", {32, 32}));
    t.push_back(Zeros(p + "self_attn.k_proj.weight", {16, 32}));
    t.push_back(Zeros(p + "self_attn.v_proj.weight", {16, 32}));
    t.push_back(Zeros(p + "self_attn.o_proj.weight", {32, 32}));
    t.push_back(Zeros(p + "mlp.gate_proj.weight", {48, 32}));
    t.push_back(Zeros(p + "mlp.up_proj.weight", {48, 32}));
    t.push_back(Zeros(p + "mlp.down_proj.weight", {32, 48}));
  }
  t.push_back(Zeros("model.norm.weight", {32}));
  t.push_back(Zeros("lm_head.weight", {64, 32}));
  return t;
}

}  // namespace onboard::testing_st
