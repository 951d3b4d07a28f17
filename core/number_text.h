// FormatSignificant: the one formatter of a number to N significant digits as reports print it
// (an ostream's default float format at precision N, like %.Ng: 0.1235, 1.235e+04, 12). The
// validators' verdict messages and the probe report each choose their digits and call this.
#pragma once

#include <string>

namespace onboard {

// `v` to `digits` significant digits (>= 1); trailing zeros dropped, scientific form when the
// exponent is below -5 or at least `digits` (ostream defaults): FormatSignificant(0.5, 3) == "0.5".
std::string FormatSignificant(double v, int digits);

}  // namespace onboard
