// KDA CUDA harness: nvcc -O3 -arch=sm_90 -DKERNEL_CU='"path/to/kda_....cu"' kda_harness.cu
//   kda_harness check CASE_DIR...   -> per case: rel err of o and final state vs the CPU fp64 reference
//   kda_harness time B T            -> median ms, TFLOP/s (6Td^2 + 3TCd + TC^2 per head)
#include <algorithm>
#include KERNEL_CU
#include "harness_common.h"

// The generated file's Config (onboard_gen::Config) and its template's dims.
using Kda = onboard::kernels::KdaCuda<onboard_gen::Config>;
using elem_t = Kda::elem_t;
constexpr int H = Kda::H, HV = Kda::HV, K = Kda::K, V = Kda::V, C = Kda::C;

static int Check(const std::string& dir) {
  int64_t B = 0, T = 0, has_state = 0;
  std::ifstream(dir + "/meta.txt") >> B >> T >> has_state;
  const size_t nq = B * T * H * K, nv = B * T * HV * V, ng = B * T * HV * K, ns = B * HV * K * V;
  auto q = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/q.f32", nq));
  auto k = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/k.f32", nq));
  auto v = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/v.f32", nv));
  auto g = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/g.f32", ng));
  auto beta = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/beta.f32", B * T * HV));
  auto a_log = harness::Upload<float>(harness::ReadRaw<float>(dir + "/a_log.f32", HV));
  auto dt = harness::Upload<float>(harness::ReadRaw<float>(dir + "/dt_bias.f32", HV * K));
  auto h0 = has_state ? harness::Upload<float>(harness::ReadRaw<float>(dir + "/h0.f32", ns)) : nullptr;
  const auto o_ref = harness::ReadRaw<float>(dir + "/o_ref.f32", nv);
  const auto s_ref = harness::ReadRaw<float>(dir + "/s_ref.f32", ns);
  float* o = harness::DeviceNaN(nv);
  float* s = harness::DeviceNaN(ns);
  void* ws = nullptr;
  HCHECK(cudaMalloc(&ws, onboard_kda_cuda_workspace_bytes(B, T)));
  HCHECK((cudaError_t)onboard_kda_fwd_cuda(q, k, v, g, beta, a_log, dt, h0, o, s, ws, B, T, 0));
  HCHECK(cudaDeviceSynchronize());
  bool nf1 = false, nf2 = false;
  const double eo = harness::RelErr(harness::Download(o, nv), o_ref, &nf1);
  const double es = harness::RelErr(harness::Download(s, ns), s_ref, &nf2);
  const double tol = sizeof(elem_t) == 2 ? 1e-2 : 1e-5;
  const bool pass = !nf1 && !nf2 && eo < tol && es < tol;
  std::printf("CHECK %s %s B=%lld T=%lld rel_err=%.3e state_err=%.3e tol=%.0e %s\n", onboard_kernel_name(),
              dir.c_str(), (long long)B, (long long)T, eo, es, tol, pass ? "pass" : "FAIL");
  return pass ? 0 : 1;
}

static int Time(int64_t B, int64_t T) {
  const size_t nq = B * T * H * K, nv = B * T * HV * V, ng = B * T * HV * K;
  auto q = harness::Upload<elem_t>(harness::Random(nq, -1, 1, 1));
  auto k = harness::Upload<elem_t>(harness::Random(nq, -1, 1, 2));
  auto v = harness::Upload<elem_t>(harness::Random(nv, -1, 1, 3));
  auto g = harness::Upload<elem_t>(harness::Random(ng, -3, 0, 4));
  auto beta = harness::Upload<elem_t>(harness::Random(B * T * HV, 0.1f, 0.9f, 5));
  auto a_log = harness::Upload<float>(harness::Random(HV, -1, 0, 6));
  float* o = harness::DeviceNaN(nv);
  void* ws = nullptr;
  HCHECK(cudaMalloc(&ws, onboard_kda_cuda_workspace_bytes(B, T)));
  const float ms = harness::TimeMs([&] {
    HCHECK((cudaError_t)onboard_kda_fwd_cuda(q, k, v, g, beta, a_log, nullptr, nullptr, o, nullptr, ws, B, T, 0));
  }, 5);
  const double flops = double(B) * HV * (6.0 * T * K * V + 3.0 * T * C * K + double(T) * C * C);
  std::printf("TIME %s kda B=%lld T=%lld HV=%d K=%d V=%d ms=%.3f tflops=%.3f\n", onboard_kernel_name(),
              (long long)B, (long long)T, HV, K, V, ms, flops / (ms * 1e-3) / 1e12);
  return 0;
}

int main(int argc, char** argv) { return harness::Main(argc, argv, Check, Time); }
