// Generated CUDA kernels checked under CPU EMULATION of the CUDA programming model. This is NOT a GPU
// run: the unchanged .cu text is compiled with the host C++ compiler plus the emulation runtime
// (validators/cuda_emulation_runtime.h: blocks run one after another, the threads of a block are fibers
// with real __syncthreads barriers) and run on the CPU. It checks the kernels' logic (indexing, shared
// memory, barriers, radix select, online softmax, chunking, state carry, launch configuration), not
// timing, warp-level behaviour or memory-model races; scripts/gpu-check.sh is the GPU check.
//
// Per case: fresh random inputs (bf16 kernels: inputs rounded to bf16 first, so the fp64 reference sees
// the same operands), outputs poisoned with NaN, ||out - ref|| / ||ref|| < 1e-5 against the fp64
// reference (KDA: output and final state; DSA: output, and the selected indices exactly). Each case
// runs twice, blocks and threads in launch order and then reversed; the outputs must be bit-identical
// (a result that depends on the order of threads between barriers is a shared-memory race).
// DSA kernels run in one pass: one launch per forward and no global workspace (both checked).
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/kernel_generator.h"
#include "codegen/kernel_spec.h"
#include "core/model_ir.h"
#include "core/status.h"
#include "validators/kernel_check.h"

namespace onboard::validators {

struct CudaEmulationCheckOptions {
  uint64_t seed = 20261130;
  int cuda_arch = 90;                        // sm_80 | sm_90: the emulated shared-memory limits
  bool reverse_pass = true;                  // rerun reversed and require bit-identical outputs
  bool long_dsa_case = true;                 // small top-k: add T = 300 (several 256-key scan tiles)
  std::vector<int64_t> lengths;              // token counts to run; empty = the CPU check's odd shapes
};

// One CUDA kernel (dtype f32 or bf16 from the spec) over the odd-shape lengths of the CPU check.
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckKdaKernelEmulated(const codegen::KdaSpec& spec,
                                                                           const CudaEmulationCheckOptions& opt);
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckDsaKernelEmulated(const codegen::DsaSpec& spec,
                                                                           const CudaEmulationCheckOptions& opt);
// The same for an already generated kernel of `spec` (tests check a deliberately broken source with it).
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckGeneratedDsaKernelEmulated(
    const codegen::DsaSpec& spec, const codegen::GeneratedKernel& gen, const CudaEmulationCheckOptions& opt);

// The model's own kernels at full size (f32, B = 1, T = 5, one pass: launch configuration and shared-
// memory limits at the real dims), its check plan (KernelCheckPlan: f32), its first KDA and DSA spec in bf16, and (when the model
// has the op) a KDA with gate "none", K != V, grouped values and a DSA with 20 query heads per KV head
// (two head groups per block, the last partial), D != DV.
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckModelKernelsEmulated(
    const ModelIR& model, const CudaEmulationCheckOptions& opt);

}  // namespace onboard::validators
