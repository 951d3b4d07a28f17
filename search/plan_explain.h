// Plain-language reasons for a search result: why this EP / FSDP split, what limits the step,
// and, when nothing fits, the memory arithmetic. Internal to search/.
#pragma once

#include <string>
#include <vector>

#include "search/cost_model.h"

namespace onboard {

std::vector<std::string> ExplainBest(const CostContext& c, const PlanCandidate& best,
                                     const std::vector<PlanCandidate>& fitting);
std::vector<std::string> ExplainInfeasible(const CostContext& c, const PlanCandidate& closest);
std::string GibStr(double bytes);  // "132.5"

}  // namespace onboard
