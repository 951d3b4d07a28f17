// Expert GEMM sweep (GPU only): how fast the routed experts' GEMMs of an eager Megatron-Core MoE
// layer run, against one dense GEMM of the same FLOPs measured in the same run.
//
// Issue 13 leaves the cost model too optimistic where each expert sees few tokens: over the Megatron-
// Bridge MoE runs (shared + held out), rows with m < 3,000 tokens per expert read +29..32% and rows with
// m >= 3,000 within +1..5% (search/README.md, nineteenth pass). The two candidate mechanisms are the
// device time of many small per-expert GEMMs and the host time of issuing them; this sweep measures both.
//
// It issues the GEMMs the way Transformer Engine's GroupedLinear does (TE@d0067d0
// transformer_engine/common/gemm/cublaslt_gemm.cu:970-1022 multi_stream_cublas_gemm, :440-780
// cublas_gemm): one cuBLASLt matmul per expert, round-robin on 4 compute streams
// (util/multi_stream.cpp:53 num_compute_streams = 4) forked from and joined to the caller's stream
// with events; every call creates its matmul descriptor, layouts and preference and asks
// cublasLtMatmulAlgoGetHeuristic for one algorithm ("eager" rows). The "prebuilt" rows issue the same
// GEMMs with all of that created once (device cost only); the baseline is one GEMM with M = E x m.
//
// Legend (units): E local experts, m tokens per expert, n and k the expert matrix's output and input
// widths; per pass the per-expert GEMM Y[M, N] = X[M, K] W[N, K]^T is fprop (m, n, k), dgrad (m, k, n)
// or wgrad (n, k, m: the tokens are the reduction), all TN as TE runs fp8 (its column-wise copies make
// every GEMM TN); the dense baseline is (E m, n, k), (E m, k, n), (n, k, E m). FLOPs = 2 E m n k per
// grouped call; ms per grouped call (median of the timed repetitions); TFLOP/s; host us per GEMM =
// the eager loop's issue time / E. Row-major X_e, W_e, Y_e (bf16 out); fp8 = e4m3 inputs without
// scales (scale 1); fp32 accumulation.
//
// Step 1 shapes and sizes, Step 2 buffers filled from an index hash, Step 3 sampled outputs against a
// host fp64 reference (a wrong layout fails here, before anything is timed), Step 4 timing, Step 5 table.
//   usage: expert_gemm_sweep [--quick]      (no GPU: prints so and exits 0)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK_CUDA(x) CheckCuda((x), #x, __FILE__, __LINE__)
#define CHECK_CUBLAS(x) CheckCublas((x), #x, __FILE__, __LINE__)

namespace {

void CheckCuda(cudaError_t e, const char* what, const char* file, int line) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
  std::exit(1);
}

void CheckCublas(cublasStatus_t s, const char* what, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", file, line, what, static_cast<int>(s));
  std::exit(1);
}

constexpr int kStreams = 4;               // TE num_compute_streams
constexpr size_t kWorkspace = 32u << 20;  // TE's cuBLAS workspace on Hopper and later (bytes)

struct Shape {
  const char* name;  // model and GEMM (fprop of fc1 / fc2)
  int64_t n, k;
};

// Step 1: the routed experts' matrices (fc1 = gate + up, fc2 = down) of the models in the measured-run
// files (config.json widths), as (n, k) of their forward GEMM.
const Shape kShapes[] = {
    {"deepseek-v3 fc1", 4096, 7168},  {"deepseek-v3 fc2", 7168, 2048},  {"qwen3-235b fc1", 3072, 4096},
    {"qwen3-235b fc2", 4096, 1536},   {"qwen3-30b fc1", 1536, 2048},    {"qwen3-30b fc2", 2048, 768},
    {"gpt-oss-120b fc1", 5760, 2880}, {"gpt-oss-120b fc2", 2880, 2880},
};

// The value stored at flat index i of a buffer (seed s), before rounding to the element type: uniform
// in [-1, 1) from a 32-bit integer hash, the same on host and device.
__host__ __device__ float HashValue(uint64_t i, uint32_t s) {
  uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(i >> 32) ^ (s * 0x9E3779B9u);
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

template <typename T>
__global__ void Fill(T* p, uint64_t count, uint32_t seed) {
  for (uint64_t i = blockIdx.x * static_cast<uint64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<uint64_t>(gridDim.x) * blockDim.x)
    p[i] = T(HashValue(i, seed));
}

// The stored value (rounded to the element type) read back as float, on the host.
float Stored(bool fp8, uint64_t i, uint32_t seed) {
  const float v = HashValue(i, seed);
  return fp8 ? static_cast<float>(__nv_fp8_e4m3(v)) : __bfloat162float(__float2bfloat16(v));
}

enum class Pass { kFprop, kDgrad, kWgrad };
const char* PassName(Pass p) { return p == Pass::kFprop ? "fprop" : p == Pass::kDgrad ? "dgrad" : "wgrad"; }

struct Problem {
  bool fp8 = false;
  Shape shape{};
  Pass pass = Pass::kFprop;
  int64_t experts = 0, m = 0;
  int64_t M = 0, N = 0, K = 0;     // one expert's GEMM
  int64_t dM = 0, dN = 0, dK = 0;  // the dense baseline (same FLOPs; its buffers reuse the experts')
  void* x = nullptr;               // E x [M, K]
  void* w = nullptr;               // E x [N, K]
  __nv_bfloat16* y = nullptr;      // E x [M, N]
  size_t in_bytes() const { return fp8 ? 1 : 2; }
  void SetDims() {
    const int64_t n = shape.n, k = shape.k, E = experts;
    if (pass == Pass::kFprop) M = m, N = n, K = k, dM = E * m, dN = n, dK = k;
    if (pass == Pass::kDgrad) M = m, N = k, K = n, dM = E * m, dN = k, dK = n;
    if (pass == Pass::kWgrad) M = n, N = k, K = m, dM = n, dN = k, dK = E * m;
  }
};

// One cuBLASLt GEMM's descriptor, layouts and algorithm: Y[m, n] = X[m, k] W[n, k]^T, in cuBLASLt's
// column-major terms D (n x m) = op(A = W, k x n)^T op(B = X, k x m).
struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulHeuristicResult_t algo{};

  void Create(cublasLtHandle_t lt, bool fp8, int64_t m, int64_t n, int64_t k) {
    const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
    CHECK_CUBLAS(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&a, in, k, n, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&b, in, k, m, k));
    CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, n, m, n));
    CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                      &kWorkspace, sizeof kWorkspace));
    int found = 0;
    CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, d, d, pref, 1, &algo, &found));
    if (found == 0) {
      std::fprintf(stderr, "expert_gemm_sweep: no cuBLASLt algorithm for m=%lld n=%lld k=%lld %s\n",
                   static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                   fp8 ? "fp8" : "bf16");
      std::exit(1);
    }
  }
  void Run(cublasLtHandle_t lt, const void* w, const void* x, void* y, void* ws, cudaStream_t s) const {
    const float one = 1.0f, zero = 0.0f;
    CHECK_CUBLAS(
        cublasLtMatmul(lt, desc, &one, w, a, x, b, &zero, y, d, y, d, &algo.algo, ws, kWorkspace, s));
  }
  void Destroy() {
    CHECK_CUBLAS(cublasLtMatmulPreferenceDestroy(pref));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(d));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(b));
    CHECK_CUBLAS(cublasLtMatrixLayoutDestroy(a));
    CHECK_CUBLAS(cublasLtMatmulDescDestroy(desc));
  }
};

struct Device {
  cublasLtHandle_t lt = nullptr;
  cudaStream_t main = nullptr, side[kStreams] = {};
  cudaEvent_t fork = nullptr, join[kStreams] = {};
  void* ws[kStreams] = {};
};

enum class Mode { kDense, kPrebuilt, kEager };

// One grouped call as `mode` issues it; returns the host seconds spent issuing.
double Issue(const Device& dev, const Problem& p, Mode mode, const std::vector<Gemm>& built) {
  const int64_t M = p.M, N = p.N, K = p.K, E = p.experts;
  const auto t0 = std::chrono::steady_clock::now();
  if (mode == Mode::kDense) {
    built[0].Run(dev.lt, p.w, p.x, p.y, dev.ws[0], dev.main);
  } else {
    CHECK_CUDA(cudaEventRecord(dev.fork, dev.main));
    for (int s = 0; s < kStreams; ++s) CHECK_CUDA(cudaStreamWaitEvent(dev.side[s], dev.fork, 0));
    for (int64_t e = 0; e < E; ++e) {
      const int s = static_cast<int>(e % kStreams);
      const char* w = static_cast<const char*>(p.w) + e * N * K * p.in_bytes();
      const char* x = static_cast<const char*>(p.x) + e * M * K * p.in_bytes();
      __nv_bfloat16* y = p.y + e * M * N;
      if (mode == Mode::kEager) {  // TE: descriptor, layouts, preference and heuristic per call
        Gemm g;
        g.Create(dev.lt, p.fp8, M, N, K);
        g.Run(dev.lt, w, x, y, dev.ws[s], dev.side[s]);
        g.Destroy();
      } else {
        built[1].Run(dev.lt, w, x, y, dev.ws[s], dev.side[s]);
      }
    }
    for (int s = 0; s < kStreams; ++s) {
      CHECK_CUDA(cudaEventRecord(dev.join[s], dev.side[s]));
      CHECK_CUDA(cudaStreamWaitEvent(dev.main, dev.join[s], 0));
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Step 3: sampled outputs of the first and last expert against a host fp64 dot product of the stored
// inputs. Tolerance: the bf16 output rounding (2^-8 relative) plus fp32 accumulation, 1e-2 x max(1, |ref|).
bool CheckSamples(const Problem& p) {
  const int64_t M = p.M, N = p.N, K = p.K;
  std::vector<__nv_bfloat16> row(static_cast<size_t>(N));
  for (int64_t e : {int64_t{0}, p.experts - 1}) {
    for (int64_t i : {int64_t{0}, M / 2, M - 1}) {
      CHECK_CUDA(
          cudaMemcpy(row.data(), p.y + (e * M + i) * N, N * sizeof(__nv_bfloat16), cudaMemcpyDeviceToHost));
      for (int64_t j : {int64_t{0}, N / 3, N - 1}) {
        double ref = 0;
        for (int64_t kk = 0; kk < K; ++kk)
          ref += static_cast<double>(Stored(p.fp8, static_cast<uint64_t>((e * M + i) * K + kk), 1)) *
                 Stored(p.fp8, static_cast<uint64_t>((e * N + j) * K + kk), 2);
        const double got = __bfloat162float(row[static_cast<size_t>(j)]);
        if (std::fabs(got - ref) > 1e-2 * std::max(1.0, std::fabs(ref))) {
          std::printf("CHECK FAIL %s %s E=%lld m=%lld expert %lld row %lld col %lld: %.5f, reference %.5f\n",
                      p.shape.name, PassName(p.pass), static_cast<long long>(p.experts),
                      static_cast<long long>(p.m), static_cast<long long>(e), static_cast<long long>(i),
                      static_cast<long long>(j), got, ref);
          return false;
        }
      }
    }
  }
  return true;
}

struct Timing {
  double ms = 0, host_us_per_gemm = 0;
};

// Step 4: median device time of `reps` grouped calls after `warm` untimed ones.
Timing Time(const Device& dev, const Problem& p, Mode mode, const std::vector<Gemm>& built, int reps) {
  const int warm = 3;
  std::vector<double> ms, host;
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int r = 0; r < warm + reps; ++r) {
    CHECK_CUDA(cudaEventRecord(a, dev.main));
    const double h = Issue(dev, p, mode, built);
    CHECK_CUDA(cudaEventRecord(b, dev.main));
    CHECK_CUDA(cudaEventSynchronize(b));
    float t = 0;
    CHECK_CUDA(cudaEventElapsedTime(&t, a, b));
    if (r >= warm) {
      ms.push_back(t);
      host.push_back(h);
    }
  }
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  std::sort(ms.begin(), ms.end());
  std::sort(host.begin(), host.end());
  const double gemms = mode == Mode::kDense ? 1.0 : static_cast<double>(p.experts);
  return {ms[ms.size() / 2], host[host.size() / 2] * 1e6 / gemms};
}

// Steps 2-5 for one (dtype, shape, pass, E, m): false when the sampled check fails.
bool RunOne(const Device& dev, bool fp8, const Shape& sh, Pass pass, int64_t E, int64_t m, int reps) {
  Problem p{fp8, sh, pass, E, m};
  p.SetDims();
  const uint64_t xs = static_cast<uint64_t>(E * p.M * p.K), ws = static_cast<uint64_t>(E * p.N * p.K);
  CHECK_CUDA(cudaMalloc(&p.x, xs * p.in_bytes()));
  CHECK_CUDA(cudaMalloc(&p.w, ws * p.in_bytes()));
  CHECK_CUDA(cudaMalloc(&p.y, static_cast<size_t>(E * p.M * p.N) * sizeof(__nv_bfloat16)));
  if (fp8) {
    Fill<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(p.x), xs, 1);
    Fill<<<1024, 256>>>(static_cast<__nv_fp8_e4m3*>(p.w), ws, 2);
  } else {
    Fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p.x), xs, 1);
    Fill<<<1024, 256>>>(static_cast<__nv_bfloat16*>(p.w), ws, 2);
  }
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(
      cudaDeviceSynchronize());  // the fills ran on the legacy stream; the GEMMs' streams do not wait on it
  std::vector<Gemm> built(2);
  built[0].Create(dev.lt, fp8, p.dM, p.dN, p.dK);  // dense: the same FLOPs in one GEMM
  built[1].Create(dev.lt, fp8, p.M, p.N, p.K);     // one expert
  Issue(dev, p, Mode::kPrebuilt, built);
  CHECK_CUDA(cudaStreamSynchronize(dev.main));
  const bool ok = CheckSamples(p);
  if (ok) {
    const Timing dense = Time(dev, p, Mode::kDense, built, reps);
    const Timing pre = Time(dev, p, Mode::kPrebuilt, built, reps);
    const Timing eager = Time(dev, p, Mode::kEager, built, reps);
    const double tf = 2.0 * E * m * sh.n * sh.k / 1e9;  // GFLOP per grouped call; / ms = TFLOP/s
    std::printf("%-5s %-18s %-6s %4lld %6lld %10.1f %10.1f %7.3f %10.1f %7.3f %10.1f\n", fp8 ? "fp8" : "bf16",
                sh.name, PassName(pass), static_cast<long long>(E), static_cast<long long>(m), tf / dense.ms,
                tf / pre.ms, dense.ms / pre.ms, tf / eager.ms, dense.ms / eager.ms, eager.host_us_per_gemm);
  }
  for (Gemm& g : built) g.Destroy();
  CHECK_CUDA(cudaFree(p.x));
  CHECK_CUDA(cudaFree(p.w));
  CHECK_CUDA(cudaFree(p.y));
  return ok;
}

Device OpenDevice() {
  Device dev;
  CHECK_CUBLAS(cublasLtCreate(&dev.lt));
  CHECK_CUDA(cudaStreamCreateWithFlags(&dev.main, cudaStreamNonBlocking));
  CHECK_CUDA(cudaEventCreateWithFlags(&dev.fork, cudaEventDisableTiming));
  for (int s = 0; s < kStreams; ++s) {
    CHECK_CUDA(cudaStreamCreateWithFlags(&dev.side[s], cudaStreamNonBlocking));
    CHECK_CUDA(cudaEventCreateWithFlags(&dev.join[s], cudaEventDisableTiming));
    CHECK_CUDA(cudaMalloc(&dev.ws[s], kWorkspace));
  }
  return dev;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("expert_gemm_sweep: no GPU on this machine: nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("expert_gemm_sweep: %s, %d SMs, sm_%d%d, %d streams, cuBLASLt %zu\n", prop.name,
              prop.multiProcessorCount, prop.major, prop.minor, kStreams, cublasLtGetVersion());
  const Device dev = OpenDevice();
  const std::vector<int64_t> experts = quick ? std::vector<int64_t>{32} : std::vector<int64_t>{4, 16, 32};
  const std::vector<int64_t> tokens =
      quick ? std::vector<int64_t>{1024, 8192} : std::vector<int64_t>{512, 1024, 2048, 4096, 8192};
  std::printf("%-5s %-18s %-6s %4s %6s %10s %10s %7s %10s %7s %10s\n", "dtype", "matrix", "pass", "E", "m",
              "dense_TF", "prebuilt_TF", "x_dense", "eager_TF", "x_dense", "host_us");
  int fails = 0;
  for (bool fp8 : {false, true}) {
    if (fp8 && prop.major * 10 + prop.minor < 89) continue;  // e4m3 tensor cores: Ada / Hopper and later
    for (const Shape& sh : kShapes)
      for (int64_t E : experts)
        for (int64_t m : tokens)
          for (Pass pass : {Pass::kFprop, Pass::kDgrad, Pass::kWgrad})
            fails += RunOne(dev, fp8, sh, pass, E, m, quick ? 5 : 15) ? 0 : 1;
  }
  std::printf(
      "x_dense: the dense GEMM's time over the row's (1 = as fast as one GEMM of the same FLOPs); "
      "host_us: issue time per expert GEMM of the eager loop\n");
  std::printf("expert_gemm_sweep: %d sampled checks failed\n", fails);
  return fails == 0 ? 0 : 1;
}
