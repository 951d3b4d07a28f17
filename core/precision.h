// Precision: the training precisions a plan names (Plan, search::PlanRequest, agent::RunRequest),
// with their one spelling, one parser and one table of where each may be used. A precision is a
// recipe, not only an element type: fp8 (per-tensor scaling) and mxfp8 (one e8m0 scale per 32
// elements, TE MXFP8BlockScaling) both store FP8 elements but are different GEMM recipes, so each
// keeps its own value; nvfp4 is TE's NVFP4BlockScaling (e2m1 elements, one e4m3 scale per 16 and an
// fp32 scale per tensor; Megatron --fp4-format e2m1 --fp4-recipe nvfp4); PrecisionElement gives the element
// DType (core/model_ir.h) for sizes.
//
// Uses and the precisions each allows:
//   frozen base (LoRA's frozen weights)        bf16 | fp8 | mxfp4
//   compute (GEMM inputs)                      bf16 | fp16 | fp8 | mxfp8 | nvfp4
//   optimizer state (Adam moments, master)     fp32 | bf16   (bf16: Megatron precision-aware optimizer)
//   grads (main-grad buffer, its DP reduction) fp32 | bf16
// Adding one: a row in kPrecisions (precision.cpp) and its enumerator here; the parse, the print
// and every use check follow from the row.
#pragma once

#include <string>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

enum class Precision { kFP32, kBF16, kFP16, kFP8, kMXFP8, kMXFP4, kNVFP4 };
enum class PrecisionUse { kFrozenBase, kCompute, kOptimizerState, kGrads };

const char* PrecisionName(Precision p);  // "fp32", "bf16", "fp16", "fp8", "mxfp8", "mxfp4", "nvfp4"
DType PrecisionElement(Precision p);     // element type: mxfp8 -> kFP8 (its scales are not counted here)
// A compute precision whose GEMM inputs are cast to a scaled 8- or 4-bit format first (fp8, mxfp8, nvfp4):
// a quantise step sits between each producer and its GEMM. False for bf16 / fp16 and non-compute rows.
bool QuantisedGemmInputs(Precision p);

// `value` (exact spelling, as PrecisionName prints it) as a precision allowed for `use`; otherwise
// kBadInput naming origin, field and value: "plan.json: field 'best.plan.compute_dtype': must be
// bf16 | fp16 | fp8 | mxfp8 | nvfp4 (got 'fp7')".
[[nodiscard]] Expected<Precision> ParsePrecision(const std::string& origin, const std::string& field,
                                                 const std::string& value, PrecisionUse use);
// The same check on a typed value (a struct's Validate()).
[[nodiscard]] Status CheckPrecisionUse(const std::string& origin, const std::string& field, Precision p,
                                       PrecisionUse use);

}  // namespace onboard
