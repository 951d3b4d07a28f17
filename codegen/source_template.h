// Internal to codegen/: fills @NAME@ placeholders of a kernel source template. Values are produced by
// the generator from validated specs only (integers, fixed keywords, float literals it formats itself).
#pragma once

#include <map>
#include <string>

namespace onboard::codegen {

// Replaces every @KEY@ with values.at(KEY). An unknown or unterminated placeholder is a bug in a
// template and throws InvariantError (ONBOARD_ASSERT).
std::string FillTemplate(const std::string& tmpl, const std::map<std::string, std::string>& values);

// Source-text builders for each op and target (one file each).
std::string CpuPreludeSource();  // fast exp, padded small GEMM, thread pool (shared by CPU kernels)
std::string KdaCpuTemplate();
std::string DsaCpuTemplate();
std::string CudaPreludeSource(); // operand type, conversions, fast exp for .cu kernels
std::string KdaCudaTemplate();
std::string DsaCudaTemplate();
// Host runtime for CPU emulation of the CUDA model (not a GPU): see cuda_emulation_source.cpp.
std::string CudaEmulationSource();

// An exactly-representable C++ float literal for a validated finite double ("-5.0f", "0.0883883f").
std::string FloatLiteral(double v);

}  // namespace onboard::codegen
