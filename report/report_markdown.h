// report.md: the onboarding report as Markdown for review, rendered from report.json
// (agent/report_json.h). Tolerates missing fields (prints "-"), so a report with wall-clock parts
// stripped renders deterministically (golden files in tests/data/reports/).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace onboard::agent {

std::string RenderMarkdownReport(const nlohmann::json& report);

}  // namespace onboard::agent
