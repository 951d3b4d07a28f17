// The one significant-digits formatter of report numbers (see number_text.h).
#include "core/number_text.h"

#include <sstream>

#include "core/status.h"

namespace onboard {

std::string FormatSignificant(double v, int digits) {
  ONBOARD_ASSERT(digits >= 1, "FormatSignificant: digits must be >= 1");
  std::ostringstream os;
  os.precision(digits);
  os << v;
  return os.str();
}

}  // namespace onboard
