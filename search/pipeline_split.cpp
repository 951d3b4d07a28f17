// BalancedSplit: contiguous pipeline chunks balanced by per-layer cost (heterogeneous layers:
// KDA vs MLA/DSA vs dense vs MoE cost differently). Binary search on the largest chunk cost with a
// greedy feasibility check: O(L log(1/eps)). Units: whatever `layer_cost` is in (seconds).
#include <algorithm>

#include "search/cost_model.h"

namespace onboard {

std::vector<int64_t> BalancedSplit(const std::vector<double>& layer_cost, int64_t chunks) {
  const int64_t L = static_cast<int64_t>(layer_cost.size());
  ONBOARD_ASSERT(chunks >= 1 && chunks <= L, "BalancedSplit needs 1 <= chunks <= layers");
  // Step 1: binary search the smallest cap for which a greedy left-to-right cut uses <= chunks parts.
  double lo = 0, hi = 0;
  for (double c : layer_cost) {
    lo = std::max(lo, c);
    hi += c;
  }
  // Does a greedy cut at `cap` need at most `chunks` parts? (Stops at the first part too many.)
  auto fits_in_chunks = [&](double cap) {
    int64_t parts = 1;
    double acc = 0;
    for (double c : layer_cost) {
      if (acc + c > cap && acc > 0) {
        if (++parts > chunks) return false;
        acc = 0;
      }
      acc += c;
    }
    return true;
  };
  for (int it = 0; it < 40 && hi - lo > 1e-12 * hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (fits_in_chunks(mid))
      hi = mid;
    else
      lo = mid;
  }
  // Step 2: cut greedily at cap `hi`, keeping at least one layer for every remaining chunk.
  std::vector<int64_t> starts{0};
  double acc = 0;
  for (int64_t i = 0; i < L; ++i) {
    const int64_t chunks_left = chunks - static_cast<int64_t>(starts.size());
    const bool must_cut = chunks_left > 0 && L - i == chunks_left;
    if ((acc + layer_cost[i] > hi && acc > 0 && chunks_left > 0) || (must_cut && i > starts.back())) {
      starts.push_back(i);
      acc = 0;
    }
    acc += layer_cost[i];
  }
  ONBOARD_ASSERT(static_cast<int64_t>(starts.size()) == chunks, "BalancedSplit produced wrong chunk count");
  return starts;
}

}  // namespace onboard
