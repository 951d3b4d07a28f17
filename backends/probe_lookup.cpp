// Key-value lookup task: the table and its no-learning baseline (see probe_lookup.h).
#include "backends/probe_lookup.h"

#include <cmath>
#include <random>

namespace onboard::backends {

std::vector<int64_t> LookupTable(int64_t keys, int64_t values) {
  std::mt19937_64 rng(kLookupTableSeed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(keys * 131 + values));
  std::uniform_int_distribution<int64_t> pick(0, values - 1);
  std::vector<int64_t> table(static_cast<size_t>(keys * keys));
  for (int64_t& y : table) y = pick(rng);
  return table;
}

double LookupUnigramNats(const std::vector<int64_t>& table, int64_t values) {
  std::vector<double> count(static_cast<size_t>(values), 0.0);
  for (int64_t y : table) count[static_cast<size_t>(y)] += 1.0;
  double h = 0;
  const double n = static_cast<double>(table.size());
  for (double c : count)
    if (c > 0) h -= c / n * std::log(c / n);
  return h;
}

}  // namespace onboard::backends
