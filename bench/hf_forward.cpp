// bench_hf_forward: forward tokens/s of a ~1B-parameter random llama-layout checkpoint on CPU (the
// `onboard verify` path: mmap, BF16 -> F32, HfForward), against LibTorch's own matmul throughput
// measured in the same run on the shapes the forward multiplies.
//   baseline  torch::matmul [S, k] x W^T, W [n, k] as nn.Linear stores it, for the model's linear shapes
//             (q, k/v, o, gate/up, down, head), each weighted by how often the forward runs it: the best
//             the forward's GEMMs can do
//   forward   HfForward over one sequence of S tokens: tokens/s, and its linear FLOP/s (2 x linear
//             params x S / wall) as a share of the baseline's FLOP/s
// Checkpoint: vocab 32000, hidden 2048, 16 heads x 128 (8 KV heads), intermediate 5632, LAYERS layers
// (20: 1.07e9 parameters), BF16 with bits from a fixed LCG (|w| in [2^-8, 2^-5)), one shard per layer
// + index, in /tmp. Units: tokens/s; GFLOP/s; GB; seconds (median of N).
// Usage: bench_hf_forward [THREADS=2] [SEQ=128] [N=3] [LAYERS=20]
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/hf_model.h"
#include "parsers/safetensors.h"

namespace {

using namespace onboard;

constexpr int64_t kVocab = 32000, kHidden = 2048, kHeads = 16, kKv = 8, kHeadDim = 128, kInter = 5632;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// BF16 bits: random sign, exponent 2^-8..2^-6, random mantissa; norms are 1.0.
std::string RandomBf16(int64_t n, uint64_t* state, bool ones) {
  std::string out(size_t(2 * n), '\0');
  for (int64_t i = 0; i < n; ++i) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = uint32_t(*state >> 33);
    const uint16_t bits =
        ones ? 0x3f80 : uint16_t(((r & 1) << 15) | ((119 + (r >> 1) % 3) << 7) | ((r >> 3) & 0x7f));
    out[size_t(2 * i)] = char(bits & 0xff);
    out[size_t(2 * i + 1)] = char(bits >> 8);
  }
  return out;
}

// Step 1: config.json, one shard per layer (+ one for embedding / norm / head), the index.
int64_t WriteCheckpoint(const std::string& dir, int64_t layers) {
  ::mkdir(dir.c_str(), 0755);
  const nlohmann::json cfg = {{"model_type", "llama"},
                              {"vocab_size", kVocab},
                              {"hidden_size", kHidden},
                              {"num_hidden_layers", layers},
                              {"num_attention_heads", kHeads},
                              {"num_key_value_heads", kKv},
                              {"head_dim", kHeadDim},
                              {"intermediate_size", kInter},
                              {"rms_norm_eps", 1e-5},
                              {"rope_theta", 500000.0},
                              {"max_position_embeddings", 4096},
                              {"hidden_act", "silu"},
                              {"torch_dtype", "bfloat16"},
                              {"tie_word_embeddings", false}};
  std::ofstream(dir + "/config.json") << cfg.dump(2);
  nlohmann::json index = {{"metadata", nlohmann::json::object()}, {"weight_map", nlohmann::json::object()}};
  uint64_t state = 42;
  int64_t params = 0;
  for (int64_t shard = 0; shard <= layers; ++shard) {
    std::vector<TensorToWrite> t;
    auto add = [&](const std::string& name, std::vector<int64_t> shape, bool ones = false) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      params += n;
      t.push_back({name, "BF16", shape, RandomBf16(n, &state, ones)});
    };
    if (shard == layers) {
      add("model.embed_tokens.weight", {kVocab, kHidden});
      add("model.norm.weight", {kHidden}, true);
      add("lm_head.weight", {kVocab, kHidden});
    } else {
      const std::string p = "model.layers." + std::to_string(shard) + ".";
      add(p + "input_layernorm.weight", {kHidden}, true);
      add(p + "post_attention_layernorm.weight", {kHidden}, true);
      add(p + "self_attn.q_proj.weight", {kHeads * kHeadDim, kHidden});
      add(p + "self_attn.k_proj.weight", {kKv * kHeadDim, kHidden});
      add(p + "self_attn.v_proj.weight", {kKv * kHeadDim, kHidden});
      add(p + "self_attn.o_proj.weight", {kHidden, kHeads * kHeadDim});
      add(p + "mlp.gate_proj.weight", {kInter, kHidden});
      add(p + "mlp.up_proj.weight", {kInter, kHidden});
      add(p + "mlp.down_proj.weight", {kHidden, kInter});
    }
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05lld-of-%05lld.safetensors", (long long)shard + 1,
                  (long long)layers + 1);
    for (const TensorToWrite& x : t) index["weight_map"][x.name] = file;
    if (!WriteSafetensorsFile(dir + "/" + file, t).ok()) std::exit(3);
  }
  std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
  return params;
}

// Step 3: LibTorch matmul FLOP/s on the forward's linear shapes, weighted by their FLOPs per token.
double MatmulFlops(int64_t seq, int64_t layers, int reps) {
  struct Shape {
    int64_t n, k, per_layer;  // [seq, k] x [k, n], count per layer (0: once, the head)
  };
  const Shape shapes[] = {{kHeads * kHeadDim, kHidden, 2},
                          {kKv * kHeadDim, kHidden, 2},
                          {kInter, kHidden, 2},
                          {kHidden, kInter, 1},
                          {kVocab, kHidden, 0}};
  double flops = 0, secs = 0;
  for (const Shape& s : shapes) {
    // b as the forward holds it: an nn.Linear weight [n, k], used transposed (HfApplyLinear).
    const torch::Tensor a = torch::randn({seq, s.k}), b = torch::randn({s.n, s.k}).t();
    torch::matmul(a, b);  // warm
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) t.push_back(Seconds([&] { torch::matmul(a, b); }));
    const double w = s.per_layer == 0 ? 1.0 : double(s.per_layer * layers);  // times per forward
    flops += w * 2.0 * double(seq * s.k * s.n);
    secs += w * Median(t);
  }
  return flops / secs;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const int64_t seq = argc > 2 ? std::max(2, std::atoi(argv[2])) : 128;
  const int reps = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  const int64_t layers = argc > 4 ? std::max(1, std::atoi(argv[4])) : 20;
  at::set_num_threads(threads);
  const std::string dir = "/tmp/onboard_bench_hf_forward";
  double load_avg[3] = {0, 0, 0};
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load_avg[0], &load_avg[1], &load_avg[2]) != 3) load_avg[0] = -1;
    std::fclose(f);
  }
  int64_t params = 0;
  const double written = Seconds([&] { params = WriteCheckpoint(dir, layers); });

  // Step 2: the load (mmap + BF16 -> F32) and the forward over one sequence.
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  if (!cfg.ok() || !ck.ok()) return 2;
  Expected<HfModelWeights> w = Status(ErrorCode::kInternal, "unset");
  const double load_s = Seconds([&] { w = MapHfWeights(*cfg, *ck, {}, torch::kFloat); });
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().message().c_str());
    return 2;
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < seq; ++i) ids.push_back((i * 7919 + 1) % kVocab);
  HfForward(*cfg, *w, ids);  // warm
  std::vector<double> fwd;
  for (int r = 0; r < reps; ++r) fwd.push_back(Seconds([&] { HfForward(*cfg, *w, ids); }));
  const double fwd_s = Median(fwd);
  const int64_t linear = params - kVocab * kHidden - (2 * layers + 1) * kHidden;  // all but embedding, norms
  const double fwd_flops = 2.0 * double(linear) * double(seq) / fwd_s;
  const double mm_flops = MatmulFlops(seq, layers, reps);

  // Step 4: the table.
  std::printf(
      "bench_hf_forward: %lld params (%lld layers), %lld tokens, %d threads, load avg %.2f %.2f %.2f\n",
      (long long)params, (long long)layers, (long long)seq, threads, load_avg[0], load_avg[1], load_avg[2]);
  std::printf(
      "checkpoint: %.2f GB bf16 written in %.1f s; load (mmap + BF16->F32) %.1f s = %.2f GB/s of bf16\n",
      double(ck->data_bytes()) / 1e9, written, load_s, double(ck->data_bytes()) / 1e9 / load_s);
  std::printf("| measure | wall s | tokens/s | GFLOP/s | vs LibTorch matmul |\n|---|---|---|---|---|\n");
  std::printf("| LibTorch matmul on the forward's linear shapes (baseline) | - | - | %.1f | 1.00x |\n",
              mm_flops / 1e9);
  std::printf("| HfForward, %lld tokens (linear FLOPs only) | %.3f | %.1f | %.1f | %.2fx |\n", (long long)seq,
              fwd_s, double(seq) / fwd_s, fwd_flops / 1e9, fwd_flops / mm_flops);
  return 0;
}
