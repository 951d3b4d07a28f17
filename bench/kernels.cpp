// bench_kernels: generated CPU kernels against baselines measured in the same run.
//   KDA  T=4096, H=HV=4, K=V=128, C=64, bounded gate, B=1:
//        chunked generated kernel vs the token recurrence (fp64 reference and fp32), vs the same chunked
//        algorithm in LibTorch ops, and its GFLOP/s vs LibTorch's fp32 matmul GFLOP/s.
//   DSA  T=16384 (or argv[3]), top-k=2048, HQ=16 sharing one KV head (MQA), D=DV=128, indexer 4x64:
//        sparse attention over the selected keys vs dense causal attention (LibTorch, causal blocks);
//        the fused forward (index + attention per query block) vs the two calls, alternated argv[2]
//        times (default 3) in one run, wall and process CPU seconds, medians.
//   KDA layer forward, same shapes: fused prologue (gate, q/k L2 norm, beta sigmoid in the kernel) vs the
//        unfused sequence (the three steps in LibTorch ops, then the kernel), with bytes moved.
// Prints the CPU model, its vector extensions and the Highway target the kernels were built for;
// $ONBOARD_KERNEL_MARCH=znver3 builds the kernels for an AVX2-only machine (see codegen/README.md).
// Usage: bench_kernels [all|kda|dsa] [DSA_REPS] [DSA_T].
// Units: seconds (best of N runs; DSA and the KDA GFLOP/s ratio: medians of alternated repetitions), FLOPs
// per the formulas in /work/shared/reference/kernels.md.
#include <ATen/Version.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "codegen/kernels/dsa_index_cpu.h"
#include "validators/reference_dsa.h"
#include "validators/reference_kda.h"

namespace {

using namespace onboard;

double Seconds(const std::function<void()>& fn, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void Row(const char* what, double measured, double target, const char* unit) {
  std::printf("%-62s %10.2f%s  target >= %5.2f%s  %s\n", what, measured, unit, target, unit,
              measured >= target ? "met" : "NOT met");
}

// "AMD EPYC 9R14 ...: avx512f avx2 fma" from /proc/cpuinfo and the compiler's CPU feature checks.
std::string CpuDescription() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  }
  std::string isa;
  if (__builtin_cpu_supports("avx512f")) isa += " avx512f";
  if (__builtin_cpu_supports("avx2")) isa += " avx2";
  if (__builtin_cpu_supports("fma")) isa += " fma";
  return model + ", vector extensions:" + (isa.empty() ? " none beyond sse2" : isa);
}

// The BLAS library this process actually loaded (Debian switches libblas.so.3 by alternatives, so the
// build-time BLAS_INFO does not say whether OpenBLAS or the reference BLAS runs).
std::string LoadedBlas() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t at = line.find('/');
    if (at == std::string::npos) continue;
    const std::string path = line.substr(at);
    if (path.find("blas") != std::string::npos) return path;
  }
  return "none found in /proc/self/maps";
}

// The unfused KDA prologue as a model's code runs it (LibTorch ops, each a pass over memory):
// bounded gate -> log decay, q/k L2 norm, beta sigmoid. Outputs the kernel's inputs for gate "none".
void TorchKdaPrologue(const codegen::KdaSpec& s, const validators::KdaInputs& in, int64_t T,
                      validators::KdaInputs* out) {
  const int64_t H = s.num_heads, K = s.head_dim;
  auto f = torch::TensorOptions().dtype(torch::kFloat32);
  auto blob = [&](const std::vector<float>& v, std::vector<int64_t> shape) {
    return torch::from_blob(const_cast<float*>(v.data()), shape, f);
  };
  auto into = [&](const torch::Tensor& t, std::vector<float>* dst) {
    std::memcpy(dst->data(), t.contiguous().data_ptr<float>(), dst->size() * sizeof(float));
  };
  auto a = torch::exp(blob(in.a_log, {H, 1}));
  auto g = s.gate_lower_bound * torch::sigmoid(a * (blob(in.g, {T, H, K}) + blob(in.dt_bias, {H, K})));
  into(g, &out->g);
  into(torch::nn::functional::normalize(blob(in.q, {T, H, K}),
                                        torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-3)), &out->q);
  into(torch::nn::functional::normalize(blob(in.k, {T, H, K}),
                                        torch::nn::functional::NormalizeFuncOptions().dim(-1).eps(1e-3)), &out->k);
  into(torch::sigmoid(blob(in.beta, {T, H})), &out->beta);
}

// The chunked KDA algorithm in LibTorch ops (fp32), heads batched; unanchored exp(G)/exp(-G)
// factorisation (cheaper than the generated kernel's anchored form; fine for the mild gates here).
torch::Tensor TorchChunkedKda(const codegen::KdaSpec& s, const validators::KdaInputs& in, int64_t T) {
  using torch::indexing::Slice;
  const int64_t H = s.num_heads, K = s.head_dim, V = s.v_head_dim, C = s.chunk_size;
  const int64_t N = (T + C - 1) / C, Tp = N * C;
  auto f = torch::TensorOptions().dtype(torch::kFloat32);
  auto q = torch::from_blob(const_cast<float*>(in.q.data()), {T, H, K}, f).transpose(0, 1);
  auto k = torch::from_blob(const_cast<float*>(in.k.data()), {T, H, K}, f).transpose(0, 1);
  auto v = torch::from_blob(const_cast<float*>(in.v.data()), {T, H, V}, f).transpose(0, 1);
  auto g = torch::from_blob(const_cast<float*>(in.g.data()), {T, H, K}, f).transpose(0, 1);
  auto beta = torch::from_blob(const_cast<float*>(in.beta.data()), {T, H}, f).transpose(0, 1);
  auto a_log = torch::from_blob(const_cast<float*>(in.a_log.data()), {H, 1, 1}, f);
  auto dt = torch::from_blob(const_cast<float*>(in.dt_bias.data()), {H, 1, K}, f);
  q = q / torch::sqrt((q * q).sum(-1, true) + 1e-6) / std::sqrt(double(K));
  k = k / torch::sqrt((k * k).sum(-1, true) + 1e-6);
  g = s.gate_lower_bound * torch::sigmoid(torch::exp(a_log) * (g + dt));
  auto pad = [&](const torch::Tensor& x) { return torch::constant_pad_nd(x, {0, 0, 0, Tp - T}); };
  q = pad(q).reshape({H, N, C, K});
  k = pad(k).reshape({H, N, C, K});
  v = pad(v).reshape({H, N, C, V});
  g = pad(g).reshape({H, N, C, K});
  beta = torch::constant_pad_nd(beta, {0, Tp - T}).reshape({H, N, C, 1});
  auto G = g.cumsum(2);
  auto eG = torch::exp(G), emG = torch::exp(-G);
  auto Akk = torch::matmul(k * eG, (k * emG).transpose(-1, -2)).tril(-1);
  auto Aqk = torch::matmul(q * eG, (k * emG).transpose(-1, -2)).tril(0);
  auto eye = torch::eye(C, f);
  auto X = torch::linalg_solve_triangular(eye + beta * Akk, torch::diag_embed(beta.squeeze(-1)),
                                          /*upper=*/false, /*left=*/true, /*unitriangular=*/true);
  auto W = torch::matmul(X, k * eG), U = torch::matmul(X, v);
  auto Qg = q * eG;
  auto Glast = G.index({Slice(), Slice(), Slice(C - 1, C), Slice()});  // [H,N,1,K]
  auto Kl = k * torch::exp(Glast - G);
  auto S = torch::zeros({H, K, V}, f);
  auto O = torch::empty({H, N, C, V}, f);
  for (int64_t n = 0; n < N; ++n) {
    auto Vn = U.select(1, n) - torch::matmul(W.select(1, n), S);
    O.select(1, n).copy_(torch::matmul(Qg.select(1, n), S) + torch::matmul(Aqk.select(1, n), Vn));
    S = S * torch::exp(Glast.select(1, n)).transpose(-1, -2) +
        torch::matmul(Kl.select(1, n).transpose(-1, -2), Vn);
  }
  return O.reshape({H, Tp, V}).index({Slice(), Slice(0, T)});
}

// Dense causal attention (MQA: all heads share k, v), in query blocks of 512 that skip masked key
// blocks; only every `stride`-th query block is computed (the caller scales the time by stride).
torch::Tensor TorchDenseCausal(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale, int64_t stride) {
  // q [HQ,T,D], k [T,D], v [T,DV]
  using torch::indexing::Slice;
  const int64_t T = q.size(1), QB = 512;
  auto out = torch::zeros({q.size(0), T, v.size(1)});
  for (int64_t t0 = (stride / 2) * QB; t0 < T; t0 += stride * QB) {
    const int64_t t1 = std::min(T, t0 + QB);
    auto s = torch::matmul(q.index({Slice(), Slice(t0, t1)}), k.index({Slice(0, t1)}).t()) * scale;
    auto mask = torch::ones({t1 - t0, t1}, torch::kBool).triu(t0 + 1);
    s.masked_fill_(mask, -INFINITY);
    out.index_put_({Slice(), Slice(t0, t1)}, torch::matmul(torch::softmax(s, -1), v.index({Slice(0, t1)})));
  }
  return out;
}

// KDA: chunked kernel vs the recurrence and LibTorch, then the fused layer forward vs the unfused one.
int BenchKda(int64_t threads, const char* march) {
  codegen::KdaSpec kda;
  kda.num_heads = kda.num_v_heads = 4;
  kda.head_dim = kda.v_head_dim = 128;
  kda.chunk_size = 64;
  kda.gate_form = GateForm::kBounded;
  kda.gate_lower_bound = -5;
  const int64_t T = 4096;
  auto gen = codegen::GenerateKda(kda, {});
  if (!gen.ok()) { std::fprintf(stderr, "%s\n", gen.status().ToString().c_str()); return 1; }
  auto lib = codegen::LoadCpuKernel(*gen);
  if (!lib.ok()) { std::fprintf(stderr, "%s\n", lib.status().ToString().c_str()); return 1; }
  std::printf("kernels built with -march=%s for Highway target %s\n\n", march, (*lib)->simd_target.c_str());
  auto in = validators::RandomKdaInputs(kda, 1, T, false, 1);
  // Mild gates (decay >= about -0.2 per step) so that the unanchored LibTorch baseline stays finite.
  for (float& x : in.dt_bias) x = -5.0f;
  std::vector<float> o(T * 4 * 128), st(4 * 128 * 128);
  auto run_chunked = [&] {
    (*lib)->kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.a_log.data(),
                    in.dt_bias.data(), nullptr, o.data(), st.data(), 1, T, threads);
  };
  const double t_chunk = Seconds(run_chunked, 5);
  const double t_rec64 = Seconds([&] { (void)validators::ReferenceKda<double>(kda, in); }, 1);
  const double t_rec32 = Seconds([&] { (void)validators::ReferenceKda<float>(kda, in); }, 1);
  torch::Tensor torch_o;
  const double t_torch = Seconds([&] { torch::NoGradGuard ng; torch_o = TorchChunkedKda(kda, in, T); }, 3);
  // Same answer check (not timed): LibTorch chunked vs generated kernel.
  auto ours = torch::from_blob(o.data(), {T, 4, 128}).transpose(0, 1);
  const double diff = ((torch_o - ours).norm() / ours.norm()).item<double>();
  const double d = 128, C = 64;
  const double kda_flops = 4.0 * (6 * T * d * d + 3 * T * C * d + T * C * C);
  // GFLOP/s against LibTorch's matmul: blocks of (best of 3 kernel runs, best of 3 matmuls) alternate
  // kRatioReps times and the ratio is the median of the per-block ratios, so that a shared machine's
  // load moves both timings of one block alike (timed minutes apart, one and the same kernel gave
  // 0.18-0.43). Best of 3, not single runs: OpenBLAS's threads spin on for a while after a matmul
  // and slow the kernel run right after it (single alternated runs gave ~0.19 for both kernels).
  const int64_t n = 2048;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  auto run_mm = [&] {
    torch::NoGradGuard ng;
    (void)torch::matmul(a, b);
  };
  constexpr int kRatioReps = 5;
  std::vector<double> ratios, mm_times;
  for (int r = 0; r < kRatioReps; ++r) {
    const double tc = Seconds(run_chunked, 3), tm = Seconds(run_mm, 3);
    ratios.push_back((kda_flops / tc) / (2.0 * n * n * n / tm));
    mm_times.push_back(tm);
  }
  const double mm_gflops = 2.0 * n * n * n / Median(mm_times) / 1e9;
  const double kda_gflops = kda_flops / t_chunk / 1e9;
  std::printf("KDA T=%lld H=4 K=V=128 C=64 bounded gate: chunked %.2f ms, fp64 recurrence %.1f ms, "
              "fp32 recurrence %.1f ms, LibTorch chunked %.2f ms (rel diff %.1e)\n",
              static_cast<long long>(T), t_chunk * 1e3, t_rec64 * 1e3, t_rec32 * 1e3, t_torch * 1e3, diff);
  std::printf(
      "     %.1f GFLOP/s (%.3g FLOPs by 6Td^2+3TCd+TC^2 per head, best of 5); LibTorch fp32 matmul "
      "%lldx%lld: "
      "%.1f GFLOP/s (median of %d blocks); per-block GFLOP/s ratios:",
      kda_gflops, kda_flops, static_cast<long long>(n), static_cast<long long>(n), mm_gflops, kRatioReps);
  for (double r : ratios) std::printf(" %.2f", r);
  std::printf("\n");
  Row("KDA chunked vs fp64 recurrence (speedup)", t_rec64 / t_chunk, 8, "x");
  Row("KDA chunked vs fp32 recurrence (speedup)", t_rec32 / t_chunk, 8, "x");
  Row("KDA chunked vs LibTorch chunked (speedup)", t_torch / t_chunk, 1, "x");
  Row("KDA chunked GFLOP/s vs LibTorch fp32 matmul GFLOP/s (median ratio)", Median(ratios), 0.30, "");
  // ---- KDA layer forward: fused prologue vs the unfused sequence (same shapes) ----
  codegen::KdaSpec fused = kda, unfused = kda;
  fused.beta_sigmoid = true;
  unfused.gate_form = GateForm::kNone;
  unfused.normalize_qk = false;
  auto fgen = codegen::GenerateKda(fused, {});
  auto ugen = codegen::GenerateKda(unfused, {});
  if (!fgen.ok() || !ugen.ok()) { std::fprintf(stderr, "generate failed\n"); return 1; }
  auto flib = codegen::LoadCpuKernel(*fgen);
  auto ulib = codegen::LoadCpuKernel(*ugen);
  if (!flib.ok() || !ulib.ok()) { std::fprintf(stderr, "load failed\n"); return 1; }
  validators::KdaInputs lin = in;  // beta as logits of the same values
  for (float& x : lin.beta) x = std::log(x / (1.0f - x));
  validators::KdaInputs pre = lin;
  std::vector<float> of(o.size()), ou(o.size());
  const double t_fused = Seconds([&] {
    (*flib)->kda_fwd(lin.q.data(), lin.k.data(), lin.v.data(), lin.g.data(), lin.beta.data(), lin.a_log.data(),
                     lin.dt_bias.data(), nullptr, of.data(), nullptr, 1, T, threads);
  }, 5);
  const double t_unfused = Seconds([&] {
    torch::NoGradGuard ng;
    TorchKdaPrologue(kda, lin, T, &pre);
    (*ulib)->kda_fwd(pre.q.data(), pre.k.data(), pre.v.data(), pre.g.data(), pre.beta.data(), nullptr, nullptr,
                     nullptr, ou.data(), nullptr, 1, T, threads);
  }, 5);
  double num = 0, den = 0;
  for (size_t i = 0; i < of.size(); ++i) {
    num += (double(of[i]) - ou[i]) * (double(of[i]) - ou[i]);
    den += double(ou[i]) * ou[i];
  }
  // Bytes moved (fp32): the kernel reads q, k, v, g, beta and writes o; the unfused sequence also
  // writes and reads back the activated gate, the normalised q/k and the sigmoid beta.
  const double H4 = 4, K128 = 128;
  const double kernel_bytes = 4.0 * T * (2 * H4 * K128 + H4 * K128 + H4 * K128 + H4 + H4 * K128);
  const double extra_bytes = 2 * 4.0 * T * (H4 * K128 + 2 * H4 * K128 + H4);
  std::printf("\nKDA layer forward T=%lld (same shapes): fused prologue %.2f ms (%.1f MB moved), unfused "
              "(LibTorch gate + L2 norm + sigmoid, then the kernel) %.2f ms (%.1f MB moved), rel diff %.1e\n",
              static_cast<long long>(T), t_fused * 1e3, kernel_bytes / 1e6, t_unfused * 1e3,
              (kernel_bytes + extra_bytes) / 1e6, std::sqrt(num / den));
  Row("KDA layer forward: fused prologue vs unfused sequence (speedup)", t_unfused / t_fused, 1, "x");
  return 0;
}

// Wall and CPU seconds (all threads of this process) of one call. On a shared, loaded machine the wall
// time mostly measures waiting for a core; the CPU time measures the work.
struct Timed {
  double wall = 0, cpu = 0;
};

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Timed TimeOnce(const std::function<void()>& fn) {
  const double c0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          ProcessCpuSeconds() - c0};
}

// DSA: sparse attention vs dense causal; the fused forward vs the two calls, alternated `reps` times in
// one run (index, attention, fused per repetition) so that load on a shared machine hits both; medians.
int BenchDsa(int64_t threads, int reps, int64_t TD) {
  codegen::DsaSpec dsa;
  dsa.num_heads = 16;
  dsa.num_kv_heads = 1;
  dsa.head_dim = dsa.v_head_dim = 128;
  dsa.index_heads = 4;
  dsa.index_head_dim = 64;
  dsa.topk = 2048;
  auto dgen = codegen::GenerateDsa(dsa, {});
  if (!dgen.ok()) { std::fprintf(stderr, "%s\n", dgen.status().ToString().c_str()); return 1; }
  auto dlib = codegen::LoadCpuKernel(*dgen);
  if (!dlib.ok()) { std::fprintf(stderr, "%s\n", dlib.status().ToString().c_str()); return 1; }
  const auto din = validators::RandomDsaInputs(dsa, 1, TD, 2);
  std::vector<int32_t> idx(TD * dsa.topk);
  std::vector<float> dout(TD * 16 * 128), dfused(TD * 16 * 128);
  std::vector<double> ti, ta, tf, ratio, ci, ca, cf, cratio;
  for (int r = 0; r < reps; ++r) {
    const Timed i = TimeOnce([&] {
      (*dlib)->dsa_index(din.index_q.data(), din.index_k.data(), din.index_w.data(), idx.data(), 1, TD,
                         threads);
    });
    const Timed a = TimeOnce([&] {
      (*dlib)->dsa_attn(din.q.data(), din.k.data(), din.v.data(), nullptr, nullptr, nullptr, idx.data(),
                        dout.data(), 1, TD, threads);
    });
    const Timed f = TimeOnce([&] {
      (*dlib)->dsa_fwd(din.q.data(), din.k.data(), din.v.data(), din.index_q.data(), din.index_k.data(),
                       din.index_w.data(), nullptr, nullptr, nullptr, dfused.data(), nullptr, 1, TD, threads);
    });
    ti.push_back(i.wall);
    ta.push_back(a.wall);
    tf.push_back(f.wall);
    ci.push_back(i.cpu);
    ca.push_back(a.cpu);
    cf.push_back(f.cpu);
    ratio.push_back((i.wall + a.wall) / f.wall);
    cratio.push_back((i.cpu + a.cpu) / f.cpu);
    std::printf(
        "  DSA repetition %d: indexer+top-k %.0f ms (cpu %.0f), sparse attention %.0f ms (cpu %.0f), fused "
        "forward %.0f ms (cpu %.0f); ratio wall %.3fx, cpu %.3fx\n",
        r + 1, i.wall * 1e3, i.cpu * 1e3, a.wall * 1e3, a.cpu * 1e3, f.wall * 1e3, f.cpu * 1e3, ratio.back(),
        cratio.back());
    std::fflush(stdout);
  }
  const double t_index = Median(ti), t_sparse = Median(ta), t_fwd = Median(tf);
  const bool fused_same = dfused == dout;
  auto qt = torch::from_blob(const_cast<float*>(din.q.data()), {TD, 16, 128}).transpose(0, 1).contiguous();
  auto kt = torch::from_blob(const_cast<float*>(din.k.data()), {TD, 128});
  auto vt = torch::from_blob(const_cast<float*>(din.v.data()), {TD, 128});
  // Dense over all 32 query blocks takes minutes with a slow BLAS; time 1 block in `stride` (centred
  // in each group, so the causal lengths average out) and scale by stride.
  const int64_t stride = 8;
  torch::Tensor dense;
  const double t_dense = stride * Seconds([&] {
    torch::NoGradGuard ng;
    dense = TorchDenseCausal(qt, kt, vt, dsa.ResolvedScale(), stride);
  }, 1);
  const double sel = static_cast<double>(TD) * dsa.topk - dsa.topk * (dsa.topk - 1) / 2.0;  // sum_t min(k, t+1)
  const double sparse_bytes = sel * (128 + 128) * 4.0;  // gathered K and V rows, fp32
  const double sparse_flops = 2.0 * sel * 16 * (128 + 128);
  std::printf(
      "\nDSA T=%lld top-k=%lld HQ=16 MQA D=DV=128 indexer 4x64 (medians of %d): indexer+top-k %.0f ms, "
      "sparse attention %.0f ms (%.1f GFLOP/s, gather %.1f GB/s), dense causal (LibTorch, 1 in %lld query "
      "blocks of 512, x %lld) %.0f ms\n",
      static_cast<long long>(TD), static_cast<long long>(dsa.topk), reps, t_index * 1e3, t_sparse * 1e3,
      sparse_flops / t_sparse / 1e9, sparse_bytes / t_sparse / 1e9, static_cast<long long>(stride),
      static_cast<long long>(stride), t_dense * 1e3);
  // Scores held at once per thread: the indexer's candidates (codegen/kernels/dsa_index_cpu.h), against
  // a whole 16 x T fp32 block (the kernel before the streaming top-k) and the T x T matrix. The two
  // calls also write and read back the T x top-k int32 selection.
  const int64_t held = kernels::DsaIndexCpu<4, 64, 2048>::ScoreBytes(TD);
  std::printf(
      "     fused forward (index + attention per 16-query block) %.0f ms, output %s the two calls'; "
      "indexer scores held per thread %lld B (a 16 x T block: %lld B; T x T: %.0f MB); selection the two "
      "calls write and read back %.0f MB\n",
      t_fwd * 1e3, fused_same ? "bit-identical to" : "DIFFERS from", static_cast<long long>(held),
      static_cast<long long>(16 * TD * 4), static_cast<double>(TD) * TD * 4 / 1e6,
      2.0 * TD * dsa.topk * 4 / 1e6);
  Row("DSA sparse attention vs dense causal attention (speedup)", t_dense / t_sparse, 4, "x");
  Row("DSA indexer + top-k + sparse attention vs dense causal (speedup)", t_dense / (t_sparse + t_index), 1, "x");
  std::printf("     CPU seconds (medians): indexer+top-k %.2f, sparse attention %.2f, fused forward %.2f\n",
              Median(ci), Median(ca), Median(cf));
  Row("DSA fused forward vs indexer + attention calls (median, wall)", Median(ratio), 1, "x");
  Row("DSA fused forward vs indexer + attention calls (median, CPU s)", Median(cratio), 1, "x");
  return fused_same ? 0 : 1;
}

}  // namespace

// bench_kernels [all|kda|dsa] [DSA_REPS=3] [DSA_T=16384] (the targets are for T=16384)
int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  const int reps = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const int64_t dsa_t = argc > 3 ? std::atoll(argv[3]) : 16384;
  if ((which != "all" && which != "kda" && which != "dsa") || dsa_t < 4096 || dsa_t % 512 != 0) {
    std::fprintf(stderr,
                 "usage: bench_kernels [all|kda|dsa] [DSA_REPS] [DSA_T: a multiple of 512, >= 4096]: got "
                 "'%s' T=%lld\n",
                 which.c_str(), static_cast<long long>(dsa_t));
    return 2;
  }
  torch::set_num_threads(2);
  const int64_t threads = 2;
  std::printf("bench_kernels: generated CPU kernels (%lld threads) vs baselines in the same run\n",
              static_cast<long long>(threads));
  std::printf("CPU: %s\n", CpuDescription().c_str());
  const char* march = std::getenv("ONBOARD_KERNEL_MARCH");
  // The LibTorch baselines are only as fast as the BLAS it was built on: say which.
  const std::string cfg = at::show_config();
  const size_t blas = cfg.find("BLAS_INFO");
  std::printf(
      "LibTorch %s, %s, loaded %s\n", TORCH_VERSION,
      blas == std::string::npos ? "BLAS unknown" : cfg.substr(blas, cfg.find(',', blas) - blas).c_str(),
      LoadedBlas().c_str());
  const char* arch = march != nullptr && *march ? march : "native";
  if (which != "dsa" && BenchKda(threads, arch) != 0) return 1;
  if (which != "kda" && BenchDsa(threads, reps, dsa_t) != 0) return 1;
  return 0;
}
