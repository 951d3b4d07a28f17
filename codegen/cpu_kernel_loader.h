// Builds a generated CPU kernel with the system C++ compiler into a shared object cached by content
// hash, dlopens it and returns typed C-ABI entry points (codegen/kernel_abi.h).
// Cache dir: $ONBOARD_KERNEL_CACHE, else $XDG_CACHE_HOME/onboard/kernels, else
// $HOME/.cache/onboard/kernels. Compiler: $ONBOARD_CXX, else $CXX, else "c++".
// Flags: -std=c++17 -O3 -march=native -fPIC -shared -pthread (no -ffast-math); $ONBOARD_KERNEL_MARCH
// replaces "native" (e.g. znver3 or haswell: an AVX2-only build; x86-64-v3 lacks AES/PCLMUL, which
// Highway 1.0's AVX2 target also requires, so it falls back to SSSE3). Headers: Highway (libhwy-dev).
#pragma once

#include <memory>
#include <string>

#include "codegen/kernel_abi.h"
#include "codegen/kernel_generator.h"
#include "core/status.h"

namespace onboard::codegen {

// A loaded library. Entry points not exported by this kernel's op are null. The handle stays open for
// the life of the object (dlclose on destruction).
struct CpuKernelLibrary {
  std::string name;
  std::string so_path;
  bool cache_hit = false;          // true: no compilation was needed
  double compile_seconds = 0;      // 0 on a cache hit
  std::string simd_target;         // vector target compiled for ("AVX3", "AVX2", ...; "" if not exported)
  onboard_kda_fwd_fn kda_fwd = nullptr;
  onboard_dsa_fwd_fn dsa_fwd = nullptr;
  onboard_dsa_index_fn dsa_index = nullptr;
  onboard_dsa_attn_fn dsa_attn = nullptr;
  void* handle = nullptr;

  void* Symbol(const char* symbol) const;  // dlsym in this library (nullptr when absent)

  CpuKernelLibrary() = default;
  CpuKernelLibrary(const CpuKernelLibrary&) = delete;
  CpuKernelLibrary& operator=(const CpuKernelLibrary&) = delete;
  ~CpuKernelLibrary();
};

std::string KernelCacheDir();

// kBadInput if the kernel is not a CPU kernel; kBuild with the compiler's log tail when compilation or
// dlopen/dlsym fails.
[[nodiscard]] Expected<std::shared_ptr<CpuKernelLibrary>> LoadCpuKernel(const GeneratedKernel& kernel);

// The build + load steps of LoadCpuKernel for any C++ translation unit that exports the ABI's
// onboard_kernel_abi_version() and onboard_kernel_name() (== name); entry points are left for the caller
// to resolve with Symbol(). Used by the CUDA emulation loader (validators/cuda_emulation_loader.h).
[[nodiscard]] Expected<std::shared_ptr<CpuKernelLibrary>> BuildKernelLibrary(const std::string& name,
                                                                            const std::string& source);

}  // namespace onboard::codegen
