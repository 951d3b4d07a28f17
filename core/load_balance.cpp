// MaxOverMean (see load_balance.h).
#include "core/load_balance.h"

#include <algorithm>
#include <numeric>

#include "core/status.h"

namespace onboard {

double MaxOverMean(const std::vector<double>& v) {
  if (v.empty()) return 1.0;
  ONBOARD_ASSERT(*std::min_element(v.begin(), v.end()) >= 0, "MaxOverMean: negative load");
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  if (sum <= 0) return 1.0;
  return *std::max_element(v.begin(), v.end()) / (sum / static_cast<double>(v.size()));
}

}  // namespace onboard
