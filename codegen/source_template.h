// Internal to codegen/: fills @NAME@ placeholders of a kernel source template. Values are produced by
// the generator from validated specs only (integers, fixed keywords, float literals it formats itself).
#pragma once

#include <map>
#include <string>

namespace onboard::codegen {

// Replaces every @KEY@ with values.at(KEY). An unknown or unterminated placeholder is a bug in a
// template and throws InvariantError (ONBOARD_ASSERT).
std::string FillTemplate(const std::string& tmpl, const std::map<std::string, std::string>& values);

// Source-text builders of the CUDA kernels (one file each). The CPU kernels are real headers in
// codegen/kernels/ (see kernel_headers.h).
std::string CudaPreludeSource(); // operand type, conversions, fast exp for .cu kernels
std::string KdaCudaTemplate();
std::string DsaCudaTemplate();

// An exactly-representable C++ float literal for a validated finite double ("-5.0f", "0.0883883f").
std::string FloatLiteral(double v);

}  // namespace onboard::codegen
