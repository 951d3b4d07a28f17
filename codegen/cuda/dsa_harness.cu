// DSA CUDA harness: nvcc -O3 -arch=sm_90 -DKERNEL_CU='"path/to/dsa_....cu"' dsa_harness.cu
//   dsa_harness check CASE_DIR...   -> per case: index mismatches and rel err of o vs the CPU fp64 reference
//   dsa_harness time B T            -> median ms of the fused index + attention kernel, TFLOP/s
//   (2*sum(topk)*HQ*(D+DV)) and
//                                      gather GB/s (sum(topk) * HKV * (D+DV) * sizeof(elem))
#include <algorithm>
#include KERNEL_CU
#include "harness_common.h"

// The generated file's Config (onboard_gen::Config) and its template's dims.
using Dsa = onboard::kernels::DsaCuda<onboard_gen::Config>;
using elem_t = Dsa::elem_t;
constexpr int HQ = Dsa::HQ, HKV = Dsa::HKV, D = Dsa::D, DV = Dsa::DV, HI = Dsa::HI, DI = Dsa::DI;
constexpr int VO = Dsa::VO, OV = Dsa::OV;  // value up-projection width (0 = none), output width per head
constexpr int64_t TOPK = Dsa::TOPK;
constexpr bool GATED = Dsa::GATED, SINK = Dsa::SINK;

static int Check(const std::string& dir) {
  int64_t B = 0, T = 0;
  std::ifstream(dir + "/meta.txt") >> B >> T;
  const size_t BT = B * T;
  auto q = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/q.f32", BT * HQ * D));
  auto k = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/k.f32", BT * HKV * D));
  auto v = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/v.f32", BT * HKV * DV));
  auto iq = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/iq.f32", BT * HI * DI));
  auto ik = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/ik.f32", BT * DI));
  auto iw = harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/iw.f32", BT * HI));
  auto gate =
      GATED ? harness::Upload<elem_t>(harness::ReadRaw<float>(dir + "/gate.f32", BT * HQ * OV)) : nullptr;
  auto sink = SINK ? harness::Upload<float>(harness::ReadRaw<float>(dir + "/sink.f32", HQ)) : nullptr;
  auto v_up = VO > 0
                  ? harness::Upload<float>(harness::ReadRaw<float>(dir + "/v_up.f32", size_t(HQ) * DV * VO))
                  : nullptr;
  const auto o_ref = harness::ReadRaw<float>(dir + "/o_ref.f32", BT * HQ * OV);
  const auto idx_ref = harness::ReadRaw<int32_t>(dir + "/idx_ref.i32", BT * TOPK);
  float* o = harness::DeviceNaN(BT * HQ * OV);
  int32_t* idx = nullptr;
  HCHECK(cudaMalloc(&idx, BT * TOPK * sizeof(int32_t)));
  // No workspace (onboard_dsa_cuda_workspace_bytes is 0: the scores stay in shared memory).
  HCHECK((cudaError_t)onboard_dsa_fwd_cuda(q, k, v, iq, ik, iw, gate, sink, v_up, o, idx, nullptr, B, T, 0));
  HCHECK(cudaDeviceSynchronize());
  const auto idx_got = harness::Download(idx, BT * TOPK);
  int64_t mism = 0;
  for (size_t i = 0; i < idx_got.size(); ++i) mism += idx_got[i] != idx_ref[i];
  bool nf = false;
  const double eo = harness::RelErr(harness::Download(o, BT * HQ * OV), o_ref, &nf);
  const double tol = sizeof(elem_t) == 2 ? 1e-2 : 1e-5;
  const bool pass = !nf && mism == 0 && eo < tol;
  std::printf("CHECK %s %s B=%lld T=%lld rel_err=%.3e index_mismatch=%lld tol=%.0e %s\n", onboard_kernel_name(),
              dir.c_str(), (long long)B, (long long)T, eo, (long long)mism, tol, pass ? "pass" : "FAIL");
  return pass ? 0 : 1;
}

static int Time(int64_t B, int64_t T) {
  const size_t BT = B * T;
  auto q = harness::Upload<elem_t>(harness::Random(BT * HQ * D, -1, 1, 1));
  auto k = harness::Upload<elem_t>(harness::Random(BT * HKV * D, -1, 1, 2));
  auto v = harness::Upload<elem_t>(harness::Random(BT * HKV * DV, -1, 1, 3));
  auto iq = harness::Upload<elem_t>(harness::Random(BT * HI * DI, -1, 1, 4));
  auto ik = harness::Upload<elem_t>(harness::Random(BT * DI, -1, 1, 5));
  auto iw = harness::Upload<elem_t>(harness::Random(BT * HI, 0, 0.1f, 6));
  auto gate = GATED ? harness::Upload<elem_t>(harness::Random(BT * HQ * OV, -1, 1, 7)) : nullptr;
  auto sink = SINK ? harness::Upload<float>(harness::Random(HQ, -1, 1, 8)) : nullptr;
  auto v_up =
      VO > 0 ? harness::Upload<float>(harness::Random(size_t(HQ) * DV * VO, -0.05f, 0.05f, 9)) : nullptr;
  float* o = harness::DeviceNaN(BT * HQ * OV);
  int32_t* idx = nullptr;
  HCHECK(cudaMalloc(&idx, BT * TOPK * sizeof(int32_t)));
  const float ms = harness::TimeMs(
      [&] {
        HCHECK((cudaError_t)onboard_dsa_fwd_cuda(q, k, v, iq, ik, iw, gate, sink, v_up, o, idx, nullptr, B, T,
                                                 0));
      },
      3);
  double sel = 0;
  for (int64_t t = 0; t < T; ++t) sel += std::min<int64_t>(TOPK, t + 1);
  sel *= B;
  const double flops = 2.0 * sel * HQ * (D + DV);
  const double bytes = sel * HKV * (D + DV) * sizeof(elem_t);
  std::printf("TIME %s dsa B=%lld T=%lld HQ=%d topk=%lld ms=%.3f tflops=%.3f gather_gbs=%.1f\n",
              onboard_kernel_name(), (long long)B, (long long)T, HQ, (long long)TOPK, ms,
              flops / (ms * 1e-3) / 1e12, bytes / (ms * 1e-3) / 1e9);
  return 0;
}

int main(int argc, char** argv) { return harness::Main(argc, argv, Check, Time); }
