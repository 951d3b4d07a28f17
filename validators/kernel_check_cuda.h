// The CUDA target's half of CheckKernels (kernel_check.cpp): nvcc, the check cases, CPU emulation.
#pragma once

#include "validators/kernel_check.h"

namespace onboard::validators {

// Step 3 of CheckKernels for the CUDA target, after the sources are written: nvcc every kernel in
// report.kernels (two at a time, one row each; a note when nvcc is missing), the check cases into
// opt.out_dir/cases, the CPU-emulated rows when opt.emulate_cuda && opt.run_checks, and the note that
// numerics need a GPU.
[[nodiscard]] Status FinishCudaKernelCheck(const ModelIR& model, const CheckPlan& plan,
                                           const KernelCheckOptions& opt, KernelCheckReport& report);

}  // namespace onboard::validators
