// Kernel source generation: KdaSpec / DsaSpec + target -> one self-contained translation unit
// (C++17 for CPU, CUDA for GPU) plus a manifest. Dims known at generation time are compile-time
// constants in the emitted code. Entry points follow codegen/kernel_abi.h (CPU) and the CUDA ABI
// documented in codegen/README.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/kernel_spec.h"
#include "core/model_ir.h"
#include "core/status.h"

namespace onboard::codegen {

// The most keys a CUDA DSA kernel selects per query (its 2 x top-k candidate list lives in shared memory,
// 8 bytes per entry: 64 KiB at 4096; codegen/kernels/dsa_cuda.cuh static_asserts the same bound).
inline constexpr int64_t kDsaCudaMaxTopk = 4096;

struct TargetOptions {
  KernelTarget target = KernelTarget::kCpu;
  int cuda_arch = 90;  // sm_XX for kCuda: 80 or 90
  [[nodiscard]] Status Validate() const;
};

struct GeneratedKernel {
  std::string name;                                         // validated identifier
  std::string op;                                           // "kda" | "dsa"
  KernelTarget target = KernelTarget::kCpu;
  int cuda_arch = 90;                                       // meaningful for kCuda
  std::vector<std::pair<std::string, std::string>> params;  // ordered name -> value (manifest)
  std::string source;                                       // the whole translation unit
  std::string content_hash;                                 // 16 hex digits (FNV-1a 64 of source)

  std::string FileName() const;      // name + ".cpp" | ".cu"
  std::string ManifestJson() const;  // {"name","op","target","arch","params":{...},"hash","file"}
};

[[nodiscard]] Expected<GeneratedKernel> GenerateKda(const KdaSpec& spec, const TargetOptions& target);
[[nodiscard]] Expected<GeneratedKernel> GenerateDsa(const DsaSpec& spec, const TargetOptions& target);

// Every distinct KDA/DSA kernel of the model for the target (empty when the model has neither).
[[nodiscard]] Expected<std::vector<GeneratedKernel>> GenerateKernels(const ModelIR& model,
                                                                     const TargetOptions& target);

// An exactly-representable C++ float literal for a validated finite double ("-5.0f", "0.0883883f"),
// as the generated Config structs spell their float members.
std::string FloatLiteral(double v);

// FNV-1a 64-bit of bytes, as 16 lowercase hex digits (the content hash used for caching).
std::string ContentHash(const std::string& bytes);

}  // namespace onboard::codegen
