// Image probe section of report.md / report.html (see report/image_section.h).
#include "report/image_section.h"

#include <string>
#include <utility>
#include <vector>

#include "report/report_format.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

const char* kIntro =
    "Round 1 trained the proxy's vision tower on the image task: each answer is the colour of one "
    "image region, so only the image can predict it.";

std::string Verdict(const json& im) {
  if (JsonAt(im, "error").is_string())
    return "FAIL: the image probe did not run (" + JsonStr(im, "error") + ")";
  return (JsonTrue(JsonAt(im, "learned")) ? "pass: " : "FAIL: ") + JsonStr(im, "verdict");
}

// (label, value) rows; the first is the verdict.
std::vector<std::pair<std::string, std::string>> Rows(const json& im) {
  std::vector<std::pair<std::string, std::string>> rows = {{"verdict", Verdict(im)}};
  if (JsonAt(im, "error").is_string()) return rows;
  const json& c = JsonAt(im, "config");
  rows.push_back({"image loss", FmtFixed(JsonAt(im, "final_loss"), 3) + " nats (must be <= " +
                                    FmtFixed(JsonAt(im, "loss_target_nats"), 3) + ")"});
  rows.push_back(
      {"no-image baseline", "ln 8 = " + FmtFixed(JsonAt(im, "no_image_baseline_nats"), 3) + " nats"});
  rows.push_back({"image accuracy", FmtPct(JsonAt(im, "image_accuracy")) +
                                        " (must be >= " + FmtPct(JsonAt(im, "accuracy_target")) + ")"});
  rows.push_back({"vision tower", JsonStr(im, "vision_tower")});
  rows.push_back({"probe", JsonStr(im, "proxy") + "; " + JsonAt(c, "ranks").dump() + " rank(s), " +
                               JsonAt(c, "steps").dump() + " steps, lr " + FmtSig(JsonAt(c, "lr")) +
                               (JsonStr(c, "control").empty() ? "" : ", control " + JsonStr(c, "control"))});
  return rows;
}

}  // namespace

void ImageProbeMarkdown(std::ostringstream& o, const json& r) {
  const json& im = JsonAt(r, "image_probe");
  if (!im.is_object()) return;
  o << "### Image probe (vision tower)\n\n" << kIntro << "\n\n| | |\n|---|---|\n";
  for (const auto& [k, v] : Rows(im)) {
    const bool bad = k == "verdict" && !JsonTrue(JsonAt(im, "learned"));
    o << "| " << k << " | " << (bad ? "**" + v + "**" : v) << " |\n";
  }
  o << "\nLogs: `" << JsonStr(im, "log_dir") << "/`.\n\n";
}

void ImageProbeHtml(std::ostringstream& o, const json& r) {
  const json& im = JsonAt(r, "image_probe");
  if (!im.is_object()) return;
  o << "<h3>Image probe (vision tower)</h3><p>" << XmlEscape(kIntro) << "</p><table>";
  for (const auto& [k, v] : Rows(im)) {
    const bool bad = k == "verdict" && !JsonTrue(JsonAt(im, "learned"));
    o << (bad ? "<tr class=\"bad\">" : "<tr>") << "<th>" << XmlEscape(k) << "</th><td>" << XmlEscape(v)
      << "</td></tr>";
  }
  o << "</table><p>Logs: <code>" << XmlEscape(JsonStr(im, "log_dir")) << "/</code></p>";
}

}  // namespace onboard::agent
