// The one table of safetensors dtypes: spelling, element size, IR DType (see safetensors_dtype.h).
#include "parsers/safetensors_dtype.h"

namespace onboard {
namespace {

struct DtypeRow {
  SafetensorsDtype dtype;
  const char* name;
  int bytes;
  DType ir;
};

// The dtypes safetensors defines (safetensors/src/tensor.rs Dtype), in enum order.
constexpr DtypeRow kSafetensorsDtypes[] = {
    {SafetensorsDtype::kBOOL, "BOOL", 1, DType::kBool},
    {SafetensorsDtype::kU8, "U8", 1, DType::kU8},
    {SafetensorsDtype::kI8, "I8", 1, DType::kI8},
    {SafetensorsDtype::kF8_E5M2, "F8_E5M2", 1, DType::kFP8},
    {SafetensorsDtype::kF8_E4M3, "F8_E4M3", 1, DType::kFP8},
    {SafetensorsDtype::kF8_E8M0, "F8_E8M0", 1, DType::kU8},
    {SafetensorsDtype::kI16, "I16", 2, DType::kUnknown},
    {SafetensorsDtype::kU16, "U16", 2, DType::kUnknown},
    {SafetensorsDtype::kF16, "F16", 2, DType::kF16},
    {SafetensorsDtype::kBF16, "BF16", 2, DType::kBF16},
    {SafetensorsDtype::kI32, "I32", 4, DType::kI32},
    {SafetensorsDtype::kU32, "U32", 4, DType::kUnknown},
    {SafetensorsDtype::kF32, "F32", 4, DType::kF32},
    {SafetensorsDtype::kI64, "I64", 8, DType::kI64},
    {SafetensorsDtype::kU64, "U64", 8, DType::kUnknown},
    {SafetensorsDtype::kF64, "F64", 8, DType::kF64},
    {SafetensorsDtype::kC64, "C64", 8, DType::kUnknown},
};

constexpr bool InEnumOrder() {
  size_t i = 0;
  for (const DtypeRow& row : kSafetensorsDtypes)
    if (static_cast<size_t>(row.dtype) != i++) return false;
  return i == static_cast<size_t>(SafetensorsDtype::kC64) + 1;
}
static_assert(InEnumOrder(), "kSafetensorsDtypes must list every SafetensorsDtype once, in enum order");

const DtypeRow& Row(SafetensorsDtype d) { return kSafetensorsDtypes[static_cast<size_t>(d)]; }

}  // namespace

const char* SafetensorsDtypeName(SafetensorsDtype d) { return Row(d).name; }
int SafetensorsDtypeBytes(SafetensorsDtype d) { return Row(d).bytes; }
DType SafetensorsDtypeIr(SafetensorsDtype d) { return Row(d).ir; }

std::optional<SafetensorsDtype> FindSafetensorsDtype(const std::string& name) {
  for (const DtypeRow& row : kSafetensorsDtypes)
    if (name == row.name) return row.dtype;
  return std::nullopt;
}

Expected<SafetensorsDtype> ParseSafetensorsDtype(const std::string& origin, const std::string& field,
                                                 const std::string& value) {
  if (std::optional<SafetensorsDtype> d = FindSafetensorsDtype(value)) return *d;
  return BadInput(origin, field, "unknown dtype", value);
}

}  // namespace onboard
