// Builds a generated CUDA kernel (its unchanged .cu text) with the system C++ compiler under CPU
// EMULATION of the CUDA programming model (validators/cuda_emulation_runtime.h) and loads it. This checks
// the kernel's logic on a machine without a GPU; it is NOT a GPU run (no timing, no warp-level
// behaviour, no memory-model races). Pointers passed to the entry points are host pointers.
// Operand layouts and return values: the CUDA ABI in codegen/README.md (elem_t operands are `const
// void*` here: float, or bf16 bit patterns (uint16_t) for bf16 kernels).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/kernel_generator.h"
#include "core/status.h"

namespace onboard::validators {

extern "C" {
typedef size_t (*onboard_cuda_workspace_bytes_fn)(int64_t batch, int64_t seq_len);
typedef int (*onboard_kda_fwd_cuda_fn)(const void* q, const void* k, const void* v, const void* g,
                                       const void* beta, const float* a_log, const float* dt_bias,
                                       const float* initial_state, float* o, float* final_state,
                                       void* workspace, int64_t batch, int64_t seq_len, void* stream);
typedef int (*onboard_dsa_fwd_cuda_fn)(const void* q, const void* k, const void* v, const void* index_q,
                                       const void* index_k, const void* index_w, const void* gate,
                                       const float* sink, const float* v_up, float* o, int32_t* topk_indices,
                                       void* workspace, int64_t batch, int64_t seq_len, void* stream);
typedef const char* (*onboard_cuda_emulation_message_fn)(void);
typedef void (*onboard_cuda_emulation_configure_fn)(int reverse);
typedef void (*onboard_cuda_emulation_stats_fn)(int64_t* launches_blocks_threads_rounds);
}

struct EmulatedCudaKernel {
  std::shared_ptr<codegen::CpuKernelLibrary> lib;  // the built shared object (cached by content hash)
  onboard_cuda_workspace_bytes_fn workspace_bytes = nullptr;  // kda or dsa workspace bytes
  onboard_kda_fwd_cuda_fn kda_fwd = nullptr;                  // op "kda"
  onboard_dsa_fwd_cuda_fn dsa_fwd = nullptr;                  // op "dsa"
  onboard_cuda_emulation_message_fn message = nullptr;        // last launch failure ("" none)
  onboard_cuda_emulation_configure_fn configure = nullptr;    // 1: reverse thread and block order
  onboard_cuda_emulation_stats_fn stats = nullptr;            // launches, blocks, threads, barrier rounds
};

// The text of validators/cuda_emulation_runtime.h, the host runtime for CPU emulation of the CUDA model
// (not a GPU), as embedded at build time: {path, text} (cmake/embed_files.cmake).
const std::vector<std::pair<std::string, std::string>>& EmbeddedEmulationRuntime();
// That runtime's text.
const std::string& CudaEmulationSource();

// The translation unit compiled for emulation: defines + emulation runtime + kernel.source (verbatim).
std::string CudaEmulationTranslationUnit(const codegen::GeneratedKernel& kernel);

// kBadInput when the kernel is not a CUDA kernel; kBuild with the compiler log
// when the host compiler rejects the .cu text.
[[nodiscard]] Expected<EmulatedCudaKernel> LoadEmulatedCudaKernel(const codegen::GeneratedKernel& kernel);

}  // namespace onboard::validators
