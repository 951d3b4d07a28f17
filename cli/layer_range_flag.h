// `--layers A-B` (0-based, inclusive; "A" = one layer) of `onboard verify` and `onboard probe --weights`:
// the one parser of the flag.
#pragma once

#include <string>

#include "backends/hf_layer_range.h"
#include "core/status.h"

namespace onboard::cli {

inline Status ParseLayerRange(const std::string& s, HfLayerRange* r) {
  if (s.empty()) return Status::Ok();
  const size_t dash = s.find('-');
  const std::string a = s.substr(0, dash), b = dash == std::string::npos ? a : s.substr(dash + 1);
  auto digits = [](const std::string& x) {
    return !x.empty() && x.size() < 10 && x.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(a) || !digits(b))
    return BadInput("--layers", "--layers", "expected A-B (0-based, inclusive)", s);
  r->first = std::stoll(a);
  r->last = std::stoll(b);
  if (r->last < r->first) return BadInput("--layers", "--layers", "A must not exceed B", s);
  return Status::Ok();
}

}  // namespace onboard::cli
