// The shared prelude of every generated CPU kernel: a vectorisable exp, a register-blocked small GEMM
// on 16-float vectors (dims padded to multiples of 16 by the kernels), and a tiny thread pool.
#include "codegen/source_template.h"

namespace onboard::codegen {

std::string CpuPreludeSource() {
  return R"CPP(
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace onboard_gen {

// 16 fp32 lanes; unaligned loads/stores allowed (aligned(4)).
typedef float vf __attribute__((vector_size(64), aligned(4), __may_alias__));

static inline vf vload(const float* p) { vf v; std::memcpy(&v, p, sizeof(vf)); return v; }
static inline void vstore(float* p, vf v) { std::memcpy(p, &v, sizeof(vf)); }

// exp(x) for fp32, relative error ~1e-7, vectorisable (no libm call): 2^n * p(r), |r| <= ln2/2.
// x < -87 returns 0 (the true value is below the fp32 normal range).
static inline float fexp(float x) {
  const float xc = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float n = (xc * 1.44269504088896341f + magic) - magic;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(float));
  return x < -87.0f ? 0.0f : y * scale;
}

// acc[MR x 16*NV] += A[MR x Kd] * B[Kd x 16*NV]; a(m,k) = A[m*sam + k*sak]; B, Cm row-major.
template <int MR, int NV>
static inline void gemm_tile(int Kd, const float* A, long sam, long sak, const float* B, long ldb,
                             float* Cm, long ldc) {
  vf acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = vload(Cm + r * ldc + v * 16);
  for (int k = 0; k < Kd; ++k) {
    vf b[NV];
    for (int v = 0; v < NV; ++v) b[v] = vload(B + k * ldb + v * 16);
    for (int r = 0; r < MR; ++r) {
      const float a = A[r * sam + k * sak];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) vstore(Cm + r * ldc + v * 16, acc[r][v]);
}

template <int NV>
static inline void gemm_rows(int M, int Kd, const float* A, long sam, long sak, const float* B,
                             long ldb, float* Cm, long ldc) {
  int m = 0;
  for (; m + 4 <= M; m += 4) gemm_tile<4, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
  for (; m < M; ++m) gemm_tile<1, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
}

// Cm[M x N] += A[M x Kd] * B[Kd x N]; N is a multiple of 16 known at compile time.
template <int N>
static inline void gemm_acc(int M, int Kd, const float* A, long sam, long sak, const float* B, long ldb,
                            float* Cm, long ldc) {
  static_assert(N % 16 == 0, "padded widths only");
  constexpr int kFull = (N / 16) / 4;
  constexpr int kRem = (N / 16) % 4;
  for (int j = 0; j < kFull; ++j) gemm_rows<4>(M, Kd, A, sam, sak, B + j * 64, ldb, Cm + j * 64, ldc);
  if constexpr (kRem > 0) {
    gemm_rows<kRem>(M, Kd, A, sam, sak, B + kFull * 64, ldb, Cm + kFull * 64, ldc);
  }
}

// Cm[M x N16] += A[M x Kd] * B[Kd x N16] with a run-time width N16 (a multiple of 16).
static inline void gemm_acc_cols(int M, int N16, int Kd, const float* A, long sam, long sak,
                                 const float* B, long ldb, float* Cm, long ldc) {
  int j = 0;
  for (; j + 64 <= N16; j += 64) gemm_rows<4>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc);
  switch ((N16 - j) / 16) {
    case 3: gemm_rows<3>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    case 2: gemm_rows<2>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    case 1: gemm_rows<1>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    default: break;
  }
}

// Runs fn(item) for item in [0, n) on up to num_threads threads (<= 0: all cores).
template <typename Fn>
static void parallel_for(int64_t n, int64_t num_threads, Fn fn) {
  int64_t threads = num_threads > 0 ? num_threads : static_cast<int64_t>(std::thread::hardware_concurrency());
  threads = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& th : pool) th.join();
}

constexpr int pad16(int x) { return (x + 15) / 16 * 16; }

}  // namespace onboard_gen

extern "C" int onboard_kernel_abi_version(void) { return 1; }
)CPP";
}

}  // namespace onboard::codegen
