// MaxOverMean: the imbalance of a load vector (tokens per expert, per EP rank, per node), the one
// definition every stage uses (search/expert_placement, validators/probe_observations, agent/rules,
// the probe's text report). Dimensionless: 1.0 = perfectly even.
#pragma once

#include <vector>

namespace onboard {

// max(v) / mean(v). Empty or all-zero loads are 1.0: nothing is uneven (no load is not an
// imbalance). Negative entries are a broken invariant (loads are counts or seconds).
double MaxOverMean(const std::vector<double>& v);

}  // namespace onboard
