// The report's "Probe: measured beside predicted" section (Markdown and HTML), from the last probe
// round of report.json that carries a "comparison" (backends/probe.h PredictionComparisonToJson):
// per collective kind the measured seconds per step beside the cost model's term for the same
// mini-layout on this machine's measured topology, the pipeline bubble, and the live-tensor peak
// beside the memory model, each with measured / predicted. No such round -> nothing is drawn.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::agent {

void ProbeComparisonMarkdown(std::ostringstream& o, const nlohmann::json& report);
void ProbeComparisonHtml(std::ostringstream& o, const nlohmann::json& report);

}  // namespace onboard::agent
