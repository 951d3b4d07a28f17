// The report's "Expert communication by probe round" section (Markdown and HTML), from report.json's
// probe rounds that carry "expert_comm" (backends/probe.h ExpertCommToJson): per round the probe's
// expert layout (nodes, placement, replica slots, overlap) and what it measured: nodes a token's
// top-k span, cross-node rows and node-deduplicated copies per token, slow-tier bytes per token,
// rows per EP rank max/mean, and the all-to-all exposed and hidden per step. When a later round
// changed the expert layout (the loop's expert rules), a "before -> after" line gives the last
// round against the first. Fewer than one such round -> nothing is drawn.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::agent {

void ExpertCommMarkdown(std::ostringstream& o, const nlohmann::json& report);
void ExpertCommHtml(std::ostringstream& o, const nlohmann::json& report);

}  // namespace onboard::agent
