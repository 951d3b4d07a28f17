// The shared prelude of every generated CUDA kernel: operand conversions and launch helpers.
// Kernel launches and dynamic shared memory go through two macros so that the same .cu text also
// compiles with the host C++ compiler under CPU emulation of the CUDA model (ONBOARD_CUDA_EMULATION,
// validators/cuda_emulation_source.cpp); with nvcc they expand to exactly `kernel<<<g, b, smem, stream>>>(...)`
// and `extern __shared__ T name[]`.
#include "codegen/kernel_headers.h"
#include "codegen/source_template.h"

namespace onboard::codegen {

std::string CudaPreludeSource() {
  return AmalgamatedKernelHeader("core/gate_form.h") + R"CU(
#include <stdint.h>
#ifdef ONBOARD_CUDA_EMULATION
// The emulation runtime precedes this text (CPU emulation of the CUDA model; not a GPU run).
#define ONBOARD_LAUNCH(kernel, grid, block, smem, stream, ...)                                  \
  ::onboard_emu::Launch(::onboard_emu::FuncKey(kernel), #kernel, grid, block, smem,           \
                        [&] { kernel(__VA_ARGS__); })
#define ONBOARD_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(::onboard_emu::g_dyn_smem)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#define ONBOARD_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define ONBOARD_DYNAMIC_SMEM(type, name) extern __shared__ type name[]
#endif

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
