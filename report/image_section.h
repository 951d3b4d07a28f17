// The report's "Image probe" section (Markdown and HTML), rendered from report.json's "image_probe"
// object (agent/report_image.h; issue 12 item 6): the image task's verdict, the loss on the
// image-conditioned answers against the no-image baseline (ln 8) and the answers' accuracy against
// the bar. A verdict other than converged, or a probe that could not run, is marked FAIL. Absent
// section (a text-only model, or probing off): nothing is rendered. Missing fields -> "-".
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::agent {

void ImageProbeMarkdown(std::ostringstream& o, const nlohmann::json& report);
void ImageProbeHtml(std::ostringstream& o, const nlohmann::json& report);

}  // namespace onboard::agent
