// LoadPlanFile: a plan as `onboard plan --json` writes it (search/plan_report.cpp PlanJson), for
// `onboard probe MODEL --plan plan.json --ranks N`. Accepted documents: the search result
// ({"best": {"plan": {...}}, ...}: its best plan), {"plan": {...}} (`onboard plan --evaluate
// --json`), or the plan object itself.
// Errors (kBadInput): unreadable file, not JSON, no plan object, a field missing / of the wrong
// type / out of range / an unknown recompute policy or precision; each names the file and the field's
// JSON path. Ranges are the plan's own (search/plan_request_checks.h); precisions are parsed by
// core/precision.h (mxfp8 stays mxfp8).
#pragma once

#include <string>

#include "core/plan.h"
#include "core/status.h"

namespace onboard::agent {

Expected<Plan> LoadPlanFile(const std::string& path);
Expected<Plan> ParsePlanJson(const std::string& text, const std::string& origin);

}  // namespace onboard::agent
