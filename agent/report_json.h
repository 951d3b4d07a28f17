// report.json: the machine-readable onboarding report, built once from the run's state; the
// Markdown and HTML reports are rendered from this JSON (report/report_markdown.h, report_html.h),
// so all three say the same thing. Schema "onboard.report/1" (documented in agent/README.md).
// Units in the JSON: seconds (*_s), bytes (*_bytes), tokens, loss in nats.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/orchestrator_state.h"

namespace onboard::agent {

nlohmann::json BuildReportJson(const RunState& st);

// Artifacts as paths relative to the output directory, sorted.
nlohmann::json ArtifactsToJson(const RunState& st);

// The report with wall-clock parts removed (timeline seconds, probe step times, measured comm and
// memory, host-dependent paths): what golden files compare.
nlohmann::json StripNondeterministic(nlohmann::json report);

nlohmann::json PlanToJson(const Plan& p);
nlohmann::json EstimateToJson(const PlanEstimate& e);

}  // namespace onboard::agent
