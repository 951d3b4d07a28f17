// The one spelling, parser and size of FloatDtype (see float_dtype.h).
#include "core/float_dtype.h"

#include "core/enum_names.h"

namespace onboard {

const char* FloatDtypeName(FloatDtype d) { return d == FloatDtype::kFP64 ? "fp64" : "fp32"; }

double FloatDtypeBytes(FloatDtype d) { return d == FloatDtype::kFP64 ? 8.0 : 4.0; }

Expected<FloatDtype> ParseFloatDtype(const std::string& origin, const std::string& field,
                                     const std::string& value) {
  return ParseByName(origin, field, value, {FloatDtype::kFP32, FloatDtype::kFP64}, FloatDtypeName);
}

}  // namespace onboard
