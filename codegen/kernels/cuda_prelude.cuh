// The shared prelude of every CUDA kernel template (kda_cuda.cuh, dsa_cuda.cuh): operand conversions
// and launch helpers. Kernel launches and dynamic shared memory go through two macros so that the same
// text also compiles with the host C++ compiler under CPU emulation of the CUDA model
// (ONBOARD_CUDA_EMULATION, validators/cuda_emulation_runtime.h, which precedes this text there); with
// nvcc they expand to exactly `kernel<<<g, b, smem, stream>>>(...)` and `extern __shared__ T name[]`.
#pragma once

#include <stdint.h>

#include "core/gate_form.h"

#ifdef ONBOARD_CUDA_EMULATION
// The emulation runtime precedes this text (CPU emulation of the CUDA model; not a GPU run).
// (Launches are synchronous there: the stream is evaluated and not used.)
#define ONBOARD_LAUNCH(kernel, grid, block, smem, stream, ...)                                       \
  ((void)(stream), ::onboard_emu::Launch(::onboard_emu::FuncKey(kernel), #kernel, grid, block, smem, \
                                         [&] { kernel(__VA_ARGS__); }))
#define ONBOARD_DYNAMIC_SMEM(type, name) type* name = reinterpret_cast<type*>(::onboard_emu::g_dyn_smem)
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#define ONBOARD_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#define ONBOARD_DYNAMIC_SMEM(type, name) extern __shared__ type name[]
#endif

namespace onboard::kernels {

__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

// Enables more than 48 KiB of dynamic shared memory for a kernel (sm_80: 163 KiB, sm_90: 227 KiB).
template <typename Kernel>
static cudaError_t allow_smem(Kernel kernel, size_t bytes) {
  if (bytes <= 48 * 1024) return cudaSuccess;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

}  // namespace onboard::kernels

// The C entry points every CUDA kernel library exports besides its op's (codegen/README.md, CUDA ABI).
#define ONBOARD_EXPORT_CUDA_COMMON(kernel_name)                 \
  extern "C" int onboard_kernel_abi_version(void) { return 2; } \
  extern "C" const char* onboard_kernel_name(void) { return kernel_name; }

// The common entry points plus onboard_<op>_cuda_workspace_bytes(batch, seq_len) of the instantiation
// `Kernel` (KdaCuda<Config>, ...), which later lines of the export macro name onboard_<op>_cuda_t.
#define ONBOARD_EXPORT_CUDA_LIBRARY(Kernel, op, kernel_name)                                        \
  ONBOARD_EXPORT_CUDA_COMMON(kernel_name)                                                           \
  using onboard_##op##_cuda_t = Kernel;                                                             \
  extern "C" size_t onboard_##op##_cuda_workspace_bytes(int64_t batch, int64_t seq_len) {           \
    return onboard_##op##_cuda_t::WorkspaceBytes(batch, seq_len);                                   \
  }
