// SafetensorsDtype: the element types a .safetensors header may name (safetensors/src/tensor.rs
// Dtype). One spelling, one parser (ParseSafetensorsDtype), one printer (SafetensorsDtypeName), one
// element size and one mapping to the IR's DType; the readers and dequantisers compare the enum.
// F8_E4M3 and F8_E5M2 stay apart here (both map to DType::kFP8 in the IR).
#pragma once

#include <optional>
#include <string>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// Adding one: an enumerator and a row in kSafetensorsDtypes (safetensors_dtype.cpp).
enum class SafetensorsDtype {
  kBOOL,
  kU8,
  kI8,
  kF8_E5M2,
  kF8_E4M3,
  kF8_E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64,
  kC64,
};

const char* SafetensorsDtypeName(SafetensorsDtype d);  // "BF16", "F8_E4M3", ... (the header's spelling)
int SafetensorsDtypeBytes(SafetensorsDtype d);         // bytes per element ("BF16" -> 2)
DType SafetensorsDtypeIr(SafetensorsDtype d);          // the IR's DType (F8_* -> kFP8, F8_E8M0 -> kU8, ...)

// The dtype `name` spells (exact SafetensorsDtypeName spelling); nullopt for anything else.
std::optional<SafetensorsDtype> FindSafetensorsDtype(const std::string& name);
// FindSafetensorsDtype, or kBadInput naming origin, field and value:
// "x.safetensors: field 'w.dtype': unknown dtype (got F12)".
[[nodiscard]] Expected<SafetensorsDtype> ParseSafetensorsDtype(const std::string& origin,
                                                               const std::string& field,
                                                               const std::string& value);

}  // namespace onboard
