// SIMD building blocks of the CPU kernels, written with Highway (libhwy-dev) for the widest vector
// unit the compiler targets: AVX-512 (16 fp32 lanes, 32 registers), AVX2 (8 lanes, 16 registers),
// SSE4/NEON (4 lanes) or scalar. Generated kernels are compiled with -march=native, so the target is
// the machine's own; the build compiles the same header for its baseline (default instantiation).
//
// Layout legend: every matrix is row-major fp32; widths passed to the GEMMs are multiples of 16
// (kernels pad their dims with pad16), so a row is always a whole number of vectors on every target.
//   gemm_acc<N>(M, Kd, A, sam, sak, B, ldb, Cm, ldc):  Cm[M x N] += A[M x Kd] * B[Kd x N],
//   a(m, k) = A[m * sam + k * sak] (any strides: row-major or transposed A).
//
// Why explicit vectors: GCC's generic 64-byte vector type lowers to scalar lane stores and stack
// spills on machines without AVX-512 (measured 15x slower on AVX2); Highway picks the native width.
#pragma once

// Highway 1.0 (Debian 12's libhwy-dev) tests `HWY_BASELINE & HWY_AVX3_DL`, a macro it never defines,
// so on Ice Lake / Sapphire Rapids and later (-march=native turns on VNNI, VAES, VBMI2, ...) the best
// baseline AVX3_DL is left out of the targets and every kernel fails with "Logic error: best
// baseline should be included in dynamic targets". Opting in to AVX3_DL is Highway's own switch.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL 1
#endif
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace onboard::kernels {

namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
inline constexpr int kLanes = static_cast<int>(hn::MaxLanes(DF()));
static_assert(16 % kLanes == 0, "rows padded to 16 floats must be whole vectors");
// Register budget of one GEMM tile: kTileRows x kTileVecs accumulators + kTileVecs B vectors + one
// broadcast A value must fit the register file (AVX-512: 32, AVX2/SSE: 16).
inline constexpr int kTileVecs = kLanes >= 16 ? 4 : 2;
inline constexpr int kTileRows = kLanes >= 16 ? 4 : 6;

constexpr int pad16(int x) { return (x + 15) / 16 * 16; }

// The name of the vector target this translation unit was compiled for ("AVX3", "AVX2", ...).
inline const char* simd_target_name() { return hwy::TargetName(HWY_TARGET); }

// exp(x) lane-wise for fp32, relative error ~1e-7, no libm call: 2^n * p(r), |r| <= ln2/2.
// x < -87 gives 0 (the true value is below the fp32 normal range); x > 88 saturates at e^88.
template <class D>
HWY_INLINE hn::Vec<D> vexp(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto lo = hn::Set(d, -87.0f);
  const auto xc = hn::Min(hn::Max(x, lo), hn::Set(d, 88.0f));
  const auto magic = hn::Set(d, 12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const auto n = hn::Sub(hn::Add(hn::Mul(xc, hn::Set(d, 1.44269504088896341f)), magic), magic);
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), xc);
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = hn::MulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = hn::MulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = hn::MulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  const auto y = hn::MulAdd(hn::Mul(p, r), r, hn::Add(r, hn::Set(d, 1.0f)));
  const auto bits = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
  return hn::IfThenZeroElse(hn::Lt(x, lo), hn::Mul(y, hn::BitCast(d, bits)));
}

// The same exp for one value (one lane of the vector code: one polynomial, one home).
inline float fexp(float x) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(vexp(d1, hn::Set(d1, x)));
}

// 1 / (1 + exp(-x)) lane-wise.
template <class D>
HWY_INLINE hn::Vec<D> vsigmoid(D d, hn::Vec<D> x) {
  const auto one = hn::Set(d, 1.0f);
  return hn::Div(one, hn::Add(one, vexp(d, hn::Neg(x))));
}

// sum_i a[i] * b[i] over n floats, n a multiple of kLanes.
inline float dot(int n, const float* a, const float* b) {
  const DF d;
  VF acc = hn::Zero(d);
  for (int i = 0; i < n; i += kLanes) acc = hn::MulAdd(hn::LoadU(d, a + i), hn::LoadU(d, b + i), acc);
  return hn::GetLane(hn::SumOfLanes(d, acc));
}

// x[i] *= s over n floats (n a multiple of kLanes).
inline void scale(int n, float s, float* x) {
  const DF d;
  const VF vs = hn::Set(d, s);
  for (int i = 0; i < n; i += kLanes) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vs), d, x + i);
}

// y[i] += a * x[i] over n floats (n a multiple of kLanes).
inline void axpy(int n, float a, const float* x, float* y) {
  const DF d;
  const VF va = hn::Set(d, a);
  for (int i = 0; i < n; i += kLanes) hn::StoreU(hn::MulAdd(va, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
}

// out[i] = x[i] * exp(float(a[i] - b[i])) over n values (b may be null: exp(float(a[i]))).
// a, b are fp64 (cumulative log decays: their differences lose digits in fp32); n % kLanes == 0.
// Two fp64 vectors are demoted and joined into one full fp32 vector, so the exp runs at the full
// fp32 width (the same lane-wise arithmetic: the result is bit-identical to a half-width exp).
inline void mul_exp_diff(int n, const float* x, const double* a, const double* b, float* out) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> dh;  // as many floats as doubles per vector
  constexpr int kStep = static_cast<int>(hn::MaxLanes(dd));
  auto diff = [&](int i) {
    auto g = hn::LoadU(dd, a + i);
    return b != nullptr ? hn::Sub(g, hn::LoadU(dd, b + i)) : g;
  };
#if HWY_TARGET != HWY_SCALAR
  const DF df;
  static_assert(2 * kStep == kLanes, "two fp64 vectors demote to one fp32 vector");
  for (int i = 0; i < n; i += kLanes) {
    const VF g = hn::Combine(df, hn::DemoteTo(dh, diff(i + kStep)), hn::DemoteTo(dh, diff(i)));
    const VF e = vexp(df, g);
    hn::StoreU(x != nullptr ? hn::Mul(hn::LoadU(df, x + i), e) : e, df, out + i);
  }
#else
  for (int i = 0; i < n; i += kStep) {
    const auto e = vexp(dh, hn::DemoteTo(dh, diff(i)));
    hn::StoreU(x != nullptr ? hn::Mul(hn::LoadU(dh, x + i), e) : e, dh, out + i);
  }
#endif
}

// acc[MR x NV vectors] += A[MR x Kd] * B[Kd x NV vectors]: the register-blocked inner kernel.
template <int MR, int NV>
HWY_INLINE void gemm_tile(int Kd, const float* A, long sam, long sak, const float* B, long ldb,
                          float* Cm, long ldc) {
  const DF d;
  VF acc[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::LoadU(d, Cm + r * ldc + v * kLanes);
  for (int k = 0; k < Kd; ++k) {
    VF b[NV];
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, B + k * ldb + v * kLanes);
    for (int r = 0; r < MR; ++r) {
      const VF a = hn::Set(d, A[r * sam + k * sak]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, Cm + r * ldc + v * kLanes);
}

template <int NV>
inline void gemm_rows(int M, int Kd, const float* A, long sam, long sak, const float* B, long ldb,
                      float* Cm, long ldc) {
  int m = 0;
  for (; m + kTileRows <= M; m += kTileRows) {
    gemm_tile<kTileRows, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
  }
  // The remainder in as few tiles as possible (a 1-row tile does 2 loads per NV FMAs): 4, 2, then 1.
  if constexpr (kTileRows > 4) {
    if (m + 4 <= M) {
      gemm_tile<4, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
      m += 4;
    }
  }
  if (m + 2 <= M) {
    gemm_tile<2, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
    m += 2;
  }
  if (m < M) gemm_tile<1, NV>(Kd, A + m * sam, sam, sak, B, ldb, Cm + m * ldc, ldc);
}

// Cm[M x N16] += A[M x Kd] * B[Kd x N16] for a run-time width N16 (a multiple of 16).
inline void gemm_acc_cols(int M, int N16, int Kd, const float* A, long sam, long sak, const float* B,
                          long ldb, float* Cm, long ldc) {
  constexpr int kTile = kTileVecs * kLanes;
  int j = 0;
  for (; j + kTile <= N16; j += kTile) gemm_rows<kTileVecs>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc);
  switch ((N16 - j) / kLanes) {
    case 3: gemm_rows<3>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    case 2: gemm_rows<2>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    case 1: gemm_rows<1>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc); break;
    default: break;
  }
}

// Cm[M x N] += A[M x Kd] * B[Kd x N]; N is a multiple of 16 known at compile time.
template <int N>
inline void gemm_acc(int M, int Kd, const float* A, long sam, long sak, const float* B, long ldb,
                     float* Cm, long ldc) {
  static_assert(N % 16 == 0, "padded widths only");
  constexpr int kTile = kTileVecs * kLanes;
  constexpr int kRem = (N % kTile) / kLanes;
  for (int j = 0; j + kTile <= N; j += kTile) gemm_rows<kTileVecs>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc);
  if constexpr (kRem > 0) {
    constexpr int j = N / kTile * kTile;
    gemm_rows<kRem>(M, Kd, A, sam, sak, B + j, ldb, Cm + j, ldc);
  }
}

// Runs fn(item) for item in [0, n) on up to num_threads threads (<= 0: all cores).
template <typename Fn>
void parallel_for(int64_t n, int64_t num_threads, Fn fn) {
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

}  // namespace onboard::kernels
