// Latency samples gathered per thread by the API benches, merged into one sorted vector.
#pragma once

#include <algorithm>
#include <vector>

namespace onboard::bench {

inline std::vector<double> MergeSorted(const std::vector<std::vector<double>>& per_thread) {
  std::vector<double> all;
  for (const auto& v : per_thread) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace onboard::bench
