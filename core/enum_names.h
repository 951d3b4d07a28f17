// ParseByName: the one parser of the enums that have one printer (FloatDtype, ProbeKernel,
// ProbeTask, Recompute, FinetuneMode): the value whose name is `value`, else kBadInput naming origin, field
// and value, with the choices in the order given: "--dtype: field 'dtype': must be fp32 or fp64 (got fp16)".
#pragma once

#include <initializer_list>
#include <string>

#include "core/status.h"

namespace onboard {

template <typename E, typename NameFn>
[[nodiscard]] Expected<E> ParseByName(const std::string& origin, const std::string& field,
                                      const std::string& value, std::initializer_list<E> all, NameFn name) {
  // Step 1: the exact spelling.
  for (E e : all)
    if (value == name(e)) return e;
  // Step 2: "must be A, B or C".
  std::string choices;
  size_t i = 0;
  for (E e : all) {
    if (i > 0) choices += i + 1 == all.size() ? " or " : ", ";
    choices += name(e);
    ++i;
  }
  return BadInput(origin, field, "must be " + choices, value);
}

}  // namespace onboard
