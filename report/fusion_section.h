// The report's "Kernel fusions" section (Markdown and HTML), rendered from report.json's "fusions"
// object (search/fusion_plan_json.h: runs of identical layers, each term with launches saved per layer
// forward pass and HBM bytes of intermediates saved per token, with its formula). Missing -> "-".
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::agent {

void FusionsMarkdown(std::ostringstream& o, const nlohmann::json& report);
void FusionsHtml(std::ostringstream& o, const nlohmann::json& report);

}  // namespace onboard::agent
