// report.html: one self-contained page (inline CSS and SVG, no scripts, no external resources)
// rendered from report.json: model summary, chosen plan and why, alternatives, kernel checks,
// probe evidence, every agent decision, and charts: loss curves per probe round, expert load
// before/after placement, memory breakdown per device, the plan Pareto front, the stage timeline.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace onboard::agent {

std::string RenderHtmlReport(const nlohmann::json& report);

}  // namespace onboard::agent
