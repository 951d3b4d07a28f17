// FloatDtype: the floating element type a CPU-side computation of our own runs in (LibTorch's
// default dtype there): the training probe (ProbeConfig::dtype, backends/probe.h) and `onboard
// verify`'s reference forward. Not a training precision of a plan (that is Precision,
// core/precision.h): fp64 exists only to check fp32 against, and a plan never trains in it.
// One spelling, one parser, one printer, one size (bytes per element).
#pragma once

#include <string>

#include "core/status.h"

namespace onboard {

enum class FloatDtype { kFP32, kFP64 };

const char* FloatDtypeName(FloatDtype d);  // "fp32" | "fp64"
double FloatDtypeBytes(FloatDtype d);      // 4 | 8 bytes per element

// `value` (exact spelling, as FloatDtypeName prints it); otherwise kBadInput naming origin, field
// and value: "--dtype: field 'dtype': must be fp32 or fp64 (got fp16)".
[[nodiscard]] Expected<FloatDtype> ParseFloatDtype(const std::string& origin, const std::string& field,
                                                   const std::string& value);

}  // namespace onboard
