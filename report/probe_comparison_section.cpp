// "Probe: measured beside predicted" section of report.md / report.html (see
// report/probe_comparison_section.h). Units: seconds per training step (mean over the steps after
// the first, max over ranks), the bubble as a share of the pipeline span, bytes per rank.
#include "report/probe_comparison_section.h"

#include <string>
#include <vector>

#include "report/report_format.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

const std::vector<std::string> kHeader = {"what", "cost-model term", "measured", "predicted",
                                          "measured / predicted"};

// The last round that ran and carries a comparison; null when none does.
const json* LastComparedRound(const json& r) {
  const json* last = nullptr;
  for (const auto& pr : JsonAt(JsonAt(r, "probe"), "rounds"))
    if (!pr.contains("error") && pr.contains("comparison")) last = &pr;
  return last;
}

std::string Ratio(double measured, double predicted) {
  return predicted > 0 ? FmtFixed(measured / predicted, 2) + "x" : "-";
}

std::string MiB(double bytes) { return FmtSig(bytes / (1024.0 * 1024.0)) + " MiB"; }

// Step 1: one row per collective kind; Step 2: the bubble (pipelines only); Step 3: live-tensor memory.
std::vector<std::vector<std::string>> Rows(const json& round) {
  std::vector<std::vector<std::string>> rows;
  const json& cmp = JsonAt(round, "comparison");
  for (const auto& c : JsonAt(cmp, "collectives")) {
    const double m = JsonAt(c, "measured_s").get<double>(), p = JsonAt(c, "predicted_s").get<double>();
    rows.push_back({JsonStr(c, "kind"), JsonStr(c, "term"), FmtSeconds(m) + "/step", FmtSeconds(p) + "/step",
                    Ratio(m, p)});
  }
  const double mb = JsonAt(JsonAt(round, "measured"), "pp_bubble").is_number()
                        ? JsonAt(JsonAt(round, "measured"), "pp_bubble").get<double>()
                        : 0.0;
  const double pb = JsonAt(cmp, "pp_bubble").get<double>();
  if (mb > 0 || pb > 0)
    rows.push_back({"pipeline bubble", "bubble share", FmtPct(mb), FmtPct(pb), Ratio(mb, pb)});
  const json& mem = JsonAt(cmp, "memory");
  const double mm = JsonAt(mem, "measured_live_peak_bytes").get<double>(),
               pm = JsonAt(mem, "predicted_bytes").get<double>();
  if (pm > 0) rows.push_back({"live-tensor peak per rank", "memory model", MiB(mm), MiB(pm), Ratio(mm, pm)});
  return rows;
}

std::string Intro(const json& round) {
  return "Round " + JsonAt(round, "round").dump() + " on " + JsonAt(JsonAt(round, "config"), "ranks").dump() +
         " ranks; the cost model evaluates the probe's own layout on this machine's topology (" +
         JsonStr(JsonAt(round, "predicted"), "topology") + ").";
}

}  // namespace

void ProbeComparisonMarkdown(std::ostringstream& o, const json& r) {
  const json* round = LastComparedRound(r);
  if (round == nullptr) return;
  o << "### Probe: measured beside predicted\n\n" << Intro(*round) << "\n\n";
  MarkdownTable(o, kHeader, Rows(*round));
}

void ProbeComparisonHtml(std::ostringstream& o, const json& r) {
  const json* round = LastComparedRound(r);
  if (round == nullptr) return;
  o << "<h3>Probe: measured beside predicted</h3><p>" << XmlEscape(Intro(*round)) << "</p>";
  HtmlTable(o, kHeader, Rows(*round));
}

}  // namespace onboard::agent
