// Compiles generated CUDA kernels with nvcc (no GPU needed): .cu -> .cubin (and .ptx) for sm_80/sm_90.
// nvcc: $ONBOARD_NVCC, else `nvcc` on PATH, else /usr/local/cuda/bin/nvcc.
#pragma once

#include <optional>
#include <string>

#include "codegen/kernel_generator.h"
#include "core/status.h"

namespace onboard::codegen {

std::optional<std::string> FindNvcc();

struct CudaBuildResult {
  std::string cu_path;      // the source written to out_dir
  std::string cubin_path;   // out_dir/<name>.sm_XX.cubin
  std::string ptx_path;     // out_dir/<name>.sm_XX.ptx (when want_ptx)
  double seconds = 0;       // nvcc wall time
  bool cached = false;      // true: an up-to-date cubin (sidecar <cubin>.hash) was reused
};

// Writes kernel.source to out_dir and compiles it (skipped when out_dir holds a cubin of the same
// content hash). kNotFound when nvcc is absent; kBuild with the
// log tail when nvcc fails; kBadInput when the kernel is not a CUDA kernel.
[[nodiscard]] Expected<CudaBuildResult> CompileCuda(const GeneratedKernel& kernel,
                                                   const std::string& out_dir, bool want_ptx = false);

}  // namespace onboard::codegen
