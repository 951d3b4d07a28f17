// The CPU emulation of the CUDA programming model (validators/cuda_emulation_runtime.h) itself: the
// generated .cu text builds with the host compiler; __syncthreads is a real barrier and a divergent one
// is a launch failure; reversed scheduling exposes an order-dependent (racy) kernel; launch limits are
// enforced. This is CPU emulation, NOT a GPU run. Numerics vs the fp64 references:
// tests/validators/cuda_emulation_check_test.cpp.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "codegen/cpu_kernel_loader.h"
#include "validators/cuda_emulation_loader.h"
#include "codegen/kernel_generator.h"
#include "codegen/kernel_headers.h"

namespace onboard::codegen {
namespace {

using namespace ::onboard::validators;  // the emulation support lives in validators/

void UseTestCache() { setenv("ONBOARD_KERNEL_CACHE", ONBOARD_BINARY_DIR "/kernel-cache", 0); }

// Hand-written probe kernels on top of the CUDA kernel headers, launched through ONBOARD_LAUNCH.
constexpr const char* kProbeKernels = R"CU(
namespace probe {
constexpr int THREADS = 256;
// out[i] = inclusive prefix sum of in[0..i] over one block: the DSA kernel's block_scan (dsa_cuda.cuh,
// Hillis-Steele with barriers).
__global__ void scan_kernel(const int* in, int* out) {
  __shared__ int tmp[THREADS];
  out[blockIdx.x * THREADS + threadIdx.x] = onboard::kernels::block_scan(in[threadIdx.x], tmp);
}
static_assert(THREADS == onboard::kernels::kDsaCudaThreads, "block_scan spans kDsaCudaThreads threads");
// The same scan with the middle barrier missing: reads and writes of tmp race.
__global__ void racy_scan_kernel(const int* in, int* out) {
  __shared__ int tmp[THREADS];
  tmp[threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  for (int off = 1; off < THREADS; off <<= 1) {
    const int add = threadIdx.x >= off ? tmp[threadIdx.x - off] : 0;
    tmp[threadIdx.x] += add;
    __syncthreads();
  }
  out[blockIdx.x * THREADS + threadIdx.x] = tmp[threadIdx.x];
}
// Half the block skips a barrier.
__global__ void divergent_kernel(int* out) {
  if (threadIdx.x < 128) __syncthreads();
  out[threadIdx.x] = 1;
}
// Threads 0..127 return before a barrier the others wait at.
__global__ void early_exit_kernel(int* out) {
  if (threadIdx.x < 128) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
// Dynamic shared memory: every thread writes its slot, then reads its neighbour's.
__global__ void smem_kernel(float* out, int n) {
  ONBOARD_DYNAMIC_SMEM(float, buf);
  for (int i = threadIdx.x; i < n; i += THREADS) buf[i] = (float)i + blockIdx.y;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += THREADS) out[blockIdx.y * n + i] = buf[(i + 1) % n];
}
}  // namespace probe

ONBOARD_EXPORT_CUDA_COMMON("emu_probe")
extern "C" int probe_scan(const int* in, int* out, int blocks, int racy) {
  if (racy) ONBOARD_LAUNCH(probe::racy_scan_kernel, blocks, probe::THREADS, 0, 0, in, out);
  else ONBOARD_LAUNCH(probe::scan_kernel, blocks, probe::THREADS, 0, 0, in, out);
  return (int)cudaGetLastError();
}
extern "C" int probe_divergent(int* out, int early_exit) {
  if (early_exit) ONBOARD_LAUNCH(probe::early_exit_kernel, 1, probe::THREADS, 0, 0, out);
  else ONBOARD_LAUNCH(probe::divergent_kernel, 1, probe::THREADS, 0, 0, out);
  return (int)cudaGetLastError();
}
extern "C" int probe_smem(float* out, int n, int grid_y, int raise_limit) {
  const size_t bytes = sizeof(float) * n;
  if (raise_limit) {
    const cudaError_t e = onboard::kernels::allow_smem(probe::smem_kernel, bytes);
    if (e != cudaSuccess) return (int)e;
  }
  ONBOARD_LAUNCH(probe::smem_kernel, dim3(1, grid_y), probe::THREADS, bytes, 0, out, n);
  return (int)cudaGetLastError();
}
)CU";

struct Probe {
  std::shared_ptr<CpuKernelLibrary> lib;
  int (*scan)(const int*, int*, int, int) = nullptr;
  int (*divergent)(int*, int) = nullptr;
  int (*smem)(float*, int, int, int) = nullptr;
  const char* (*message)() = nullptr;
  void (*configure)(int) = nullptr;
};

// ucontext: the portable fiber switch (makecontext/swapcontext) instead of the x86-64 one.
Probe BuildProbe(bool ucontext = false) {
  GeneratedKernel k;
  k.name = "emu_probe";
  k.op = "probe";
  k.target = KernelTarget::kCuda;
  k.source = AmalgamatedKernelHeader("codegen/kernels/dsa_cuda.cuh") + kProbeKernels;
  Probe p;
  const std::string tu =
      (ucontext ? "#define ONBOARD_EMU_UCONTEXT 1\n" : "") + CudaEmulationTranslationUnit(k);
  auto lib = BuildKernelLibrary(k.name, tu);
  EXPECT_TRUE(lib.ok()) << lib.status().ToString();
  if (!lib.ok()) return p;
  p.lib = *lib;
  p.scan = reinterpret_cast<decltype(p.scan)>(p.lib->Symbol("probe_scan"));
  p.divergent = reinterpret_cast<decltype(p.divergent)>(p.lib->Symbol("probe_divergent"));
  p.smem = reinterpret_cast<decltype(p.smem)>(p.lib->Symbol("probe_smem"));
  p.message = reinterpret_cast<decltype(p.message)>(p.lib->Symbol("onboard_cuda_emulation_message"));
  p.configure = reinterpret_cast<decltype(p.configure)>(p.lib->Symbol("onboard_cuda_emulation_configure"));
  return p;
}

TEST(CudaEmulationTest, BarrierScanIsCorrectInBothSchedulingOrdersAndSwitchImplementations) {
  UseTestCache();
  std::vector<int> in(256);
  for (int i = 0; i < 256; ++i) in[i] = (i * 7919) % 13 - 6;
  for (int impl = 0; impl < 2; ++impl)
  for (int reverse = 0; reverse < 2; ++reverse) {
    Probe p = BuildProbe(impl == 1);
    ASSERT_NE(p.scan, nullptr);
    p.configure(reverse);
    std::vector<int> out(3 * 256, -12345);
    ASSERT_EQ(p.scan(in.data(), out.data(), 3, 0), 0) << p.message();
    for (int b = 0, acc = 0; b < 3; ++b, acc = 0) {
      for (int i = 0; i < 256; ++i) {
        acc += in[i];
        ASSERT_EQ(out[b * 256 + i], acc) << "block " << b << " thread " << i << " reverse " << reverse
                                         << " ucontext " << impl;
      }
    }
  }
}

TEST(CudaEmulationTest, ReversedSchedulingExposesAMissingBarrier) {
  UseTestCache();
  Probe p = BuildProbe();
  ASSERT_NE(p.scan, nullptr);
  std::vector<int> in(256, 1), fwd(256), rev(256);
  p.configure(0);
  ASSERT_EQ(p.scan(in.data(), fwd.data(), 1, 1), 0);
  p.configure(1);
  ASSERT_EQ(p.scan(in.data(), rev.data(), 1, 1), 0);
  EXPECT_NE(fwd, rev) << "a racy scan gave the same result in both thread orders";
}

TEST(CudaEmulationTest, DivergentBarrierIsALaunchFailure) {
  UseTestCache();
  Probe p = BuildProbe();
  ASSERT_NE(p.divergent, nullptr);
  std::vector<int> out(256, 0);
  p.configure(0);
  EXPECT_EQ(p.divergent(out.data(), 0), 719);  // cudaErrorLaunchFailure
  EXPECT_NE(std::string(p.message()).find("divergent __syncthreads"), std::string::npos) << p.message();
  p.configure(0);
  EXPECT_EQ(p.divergent(out.data(), 1), 719);
  EXPECT_NE(std::string(p.message()).find("exited while thread"), std::string::npos) << p.message();
}

TEST(CudaEmulationTest, DynamicSharedMemoryAndItsLimits) {
  UseTestCache();
  Probe p = BuildProbe();
  ASSERT_NE(p.smem, nullptr);
  p.configure(0);
  const int n = 1000;
  std::vector<float> out(2 * n, -1.0f);
  ASSERT_EQ(p.smem(out.data(), n, 2, 0), 0) << p.message();
  for (int y = 0; y < 2; ++y) {
    for (int i = 0; i < n; ++i) ASSERT_EQ(out[y * n + i], float((i + 1) % n + y));
  }
  // 64 KiB needs cudaFuncSetAttribute (sm_90 default limit 48 KiB); 228 KiB exceeds sm_90.
  std::vector<float> big(16384);
  EXPECT_EQ(p.smem(big.data(), 16384, 1, 0), 1) << "64 KiB launched without raising the limit";
  EXPECT_NE(std::string(p.message()).find("dynamic shared memory"), std::string::npos) << p.message();
  p.configure(0);
  EXPECT_EQ(p.smem(big.data(), 16384, 1, 1), 0) << p.message();
  std::vector<float> huge(228 * 256);
  EXPECT_EQ(p.smem(huge.data(), 228 * 256, 1, 1), 1);
  // Grid y above 65535 is an invalid configuration, as on the device.
  p.configure(0);
  EXPECT_EQ(p.smem(out.data(), 1, 70000, 0), 9) << p.message();
}

TEST(CudaEmulationTest, GeneratedKernelsBuildForEmulationAndDsaNeedsNoWorkspace) {
  UseTestCache();
  KdaSpec k;
  k.num_heads = 1;
  k.num_v_heads = 2;
  k.head_dim = k.v_head_dim = 16;
  k.chunk_size = 8;
  k.dtype = DType::kBF16;
  DsaSpec d;
  d.num_heads = 2;
  d.head_dim = d.v_head_dim = 8;
  d.index_heads = 2;
  d.index_head_dim = 8;
  d.topk = 4;
  d.block = 8;
  auto kda = GenerateKda(k, {KernelTarget::kCuda, 90});
  auto dsa = GenerateDsa(d, {KernelTarget::kCuda, 80});
  ASSERT_TRUE(kda.ok() && dsa.ok());
  auto ekda = LoadEmulatedCudaKernel(*kda);
  ASSERT_TRUE(ekda.ok()) << ekda.status().ToString();
  EXPECT_NE(ekda->kda_fwd, nullptr);
  EXPECT_GT(ekda->workspace_bytes(1, 5), 0u);
  // One pass: the DSA kernel keeps its scores in shared memory, so it needs no global workspace.
  auto edsa = LoadEmulatedCudaKernel(*dsa);
  ASSERT_TRUE(edsa.ok()) << edsa.status().ToString();
  EXPECT_NE(edsa->dsa_fwd, nullptr);
  EXPECT_EQ(edsa->workspace_bytes(1, 16384), 0u);  // was 1 GiB (a 1 GiB-capped score block)
  EXPECT_EQ(edsa->workspace_bytes(1, int64_t{1} << 20), 0u);
  EXPECT_EQ(edsa->workspace_bytes(2, 300), 0u);
  KdaSpec f32 = k;
  f32.dtype = DType::kF32;
  auto cpu = GenerateKda(f32, {});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(LoadEmulatedCudaKernel(*cpu).status().code(), ErrorCode::kBadInput);
}

}  // namespace
}  // namespace onboard::codegen
