// Host-side helpers of the CUDA check harnesses (compiled by scripts/gpu-check.sh on a GPU machine, and
// by tests/validators/cuda_harness_emulation_test.cpp with the host compiler under CPU emulation of the
// CUDA model; never by CMake): raw case files, host<->device copies with conversion to the kernel's
// operand type, cudaEvent timing, relative errors.
#pragma once

#ifndef ONBOARD_CUDA_EMULATION  // under CPU emulation the kernel's TU brings the emulation runtime
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#define HCHECK(x)                                                                   \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(3);                                                                 \
    }                                                                               \
  } while (0)

namespace harness {

template <typename T>
std::vector<T> ReadRaw(const std::string& path, size_t expect, bool optional = false) {
  std::ifstream f(path, std::ios::binary);
  std::vector<T> v;
  if (!f) {
    if (optional) return v;
    std::fprintf(stderr, "missing %s\n", path.c_str());
    std::exit(2);
  }
  v.resize(expect);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(expect * sizeof(T)));
  if (static_cast<size_t>(f.gcount()) != expect * sizeof(T)) {
    std::fprintf(stderr, "%s: expected %zu elements\n", path.c_str(), expect);
    std::exit(2);
  }
  return v;
}

inline float ToElem(float x, float*) { return x; }
inline __nv_bfloat16 ToElem(float x, __nv_bfloat16*) { return __float2bfloat16(x); }

// Uploads host fp32 data as operand type E (nullptr for empty input).
template <typename E>
E* Upload(const std::vector<float>& h) {
  if (h.empty()) return nullptr;
  std::vector<E> conv(h.size());
  for (size_t i = 0; i < h.size(); ++i) conv[i] = ToElem(h[i], static_cast<E*>(nullptr));
  E* d = nullptr;
  HCHECK(cudaMalloc(&d, conv.size() * sizeof(E)));
  HCHECK(cudaMemcpy(d, conv.data(), conv.size() * sizeof(E), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> Download(const T* d, size_t n) {
  std::vector<T> h(n);
  HCHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

inline float* DeviceNaN(size_t n) {
  float* d = nullptr;
  HCHECK(cudaMalloc(&d, n * sizeof(float)));
  HCHECK(cudaMemset(d, 0xFF, n * sizeof(float)));  // all-ones bytes = NaN: poisoned output
  return d;
}

// ||got-ref||/||ref||; *nonfinite set when got has a NaN/Inf where ref is finite.
inline double RelErr(const std::vector<float>& got, const std::vector<float>& ref, bool* nonfinite) {
  double num = 0, den = 0;
  *nonfinite = false;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) *nonfinite = true;
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

// Deterministic pseudo-random fp32 data in [lo, hi).
inline std::vector<float> Random(size_t n, float lo, float hi, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((s >> 40) & 0xFFFFFF) / 16777216.0f;
  }
  return v;
}

// Median milliseconds of reps runs of fn (after one warm-up), timed with cudaEvents.
template <typename Fn>
float TimeMs(Fn fn, int reps) {
  cudaEvent_t a, b;
  HCHECK(cudaEventCreate(&a));
  HCHECK(cudaEventCreate(&b));
  fn();
  HCHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    HCHECK(cudaEventRecord(a));
    fn();
    HCHECK(cudaEventRecord(b));
    HCHECK(cudaEventSynchronize(b));
    float t = 0;
    HCHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// The harness command line: `check CASE_DIR...` (exit 1 when any case fails) | `time B T`.
inline int Main(int argc, char** argv, int (*check)(const std::string&), int (*time)(int64_t, int64_t)) {
#ifdef ONBOARD_CUDA_EMULATION
  std::printf("harness built for CPU emulation of the CUDA model: NOT a GPU run (logic only, times are host times)\n");
#endif
  if (argc >= 3 && std::string(argv[1]) == "check") {
    int bad = 0;
    for (int i = 2; i < argc; ++i) bad += check(argv[i]);
    return bad == 0 ? 0 : 1;
  }
  if (argc == 4 && std::string(argv[1]) == "time") return time(std::atoll(argv[2]), std::atoll(argv[3]));
  std::fprintf(stderr, "usage: %s check CASE_DIR... | time B T\n", argv[0]);
  return 2;
}

}  // namespace harness
