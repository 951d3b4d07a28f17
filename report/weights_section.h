// The report's "Weights" section (Markdown and HTML), rendered from report.json's "weights" object
// (agent/report_weights.h): which checkpoint tensors loaded, their dtypes and how each was dequantised,
// bytes read (the forward's and each plan rank's), and the logit check against its reference with the
// tolerance and the verdict. Absent weights (a config-only model) say why. Missing fields -> "-".
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::agent {

void WeightsMarkdown(std::ostringstream& o, const nlohmann::json& report);
void WeightsHtml(std::ostringstream& o, const nlohmann::json& report);

}  // namespace onboard::agent
