// The shared prelude of every generated CUDA kernel: operand conversions and launch helpers.
#include "codegen/source_template.h"

namespace onboard::codegen {

std::string CudaPreludeSource() {
  return R"CU(
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace onboard_gen {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

__host__ __device__ constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Enables more than 48 KiB of dynamic shared memory for a kernel (sm_80: 163 KiB, sm_90: 227 KiB).
template <typename Kernel>
static cudaError_t allow_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

}  // namespace onboard_gen

extern "C" int onboard_kernel_abi_version(void) { return 1; }
)CU";
}

}  // namespace onboard::codegen
