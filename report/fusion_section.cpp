// Kernel fusions section of report.md / report.html (see report/fusion_section.h).
#include "report/fusion_section.h"

#include <string>
#include <vector>

#include "report/report_format.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

std::string Layers(const json& g) {
  const std::string a = JsonAt(g, "first_layer").dump(), b = JsonAt(g, "last_layer").dump();
  return a == b ? "layer " + a : "layers " + a + "-" + b + " (each)";
}

std::string Totals(const json& f) {
  return FmtFixed(JsonAt(f, "launches_saved_per_forward"), 0) + " kernel launches per forward pass and " +
         FmtSig(JsonAt(f, "bytes_saved_per_token")) + " B of HBM traffic per token (all layers, seq " +
         JsonAt(f, "seq").dump() + ")";
}

// Seconds to 3 significant digits ("4.12 ms", "59.7 s"): close step times stay distinguishable.
std::string Seconds3(double s) { return s < 1 ? FmtSig(s * 1e3) + " ms" : FmtSig(s) + " s"; }

// "With fused kernels the final plan's step takes 1.23 s ..." (empty when the run has no cost values).
std::string CostValue(const json& f) {
  if (!f.contains("cost_model")) return "";
  const json& c = f.at("cost_model");
  const double fs = JsonAt(c, "fused_step_s").get<double>(), us = JsonAt(c, "unfused_step_s").get<double>();
  return "In the cost model the final plan's step takes " + Seconds3(fs) + " with fused kernels and " +
         Seconds3(us) +
         " unfused (softmax scores stored, KDA prologue and DSA indexer as separate kernels: " +
         FmtPct(fs > 0 ? us / fs - 1 : 0) + " longer); activations " +
         FmtGiB(JsonAt(c, "fused_activation_bytes")) + " vs " +
         FmtGiB(JsonAt(c, "unfused_activation_bytes")) + " per device.";
}

// One table row per fusion term (and per chain the graph keeps unfused: `blocked` rows).
struct Row {
  std::vector<std::string> cells;
  bool blocked = false;
};

std::vector<Row> Rows(const json& f) {
  std::vector<Row> rows;
  for (const auto& g : JsonAt(f, "groups")) {
    for (const auto& t : JsonAt(g, "terms"))
      rows.push_back(
          {{Layers(g), JsonStr(t, "kind"), JsonStr(t, "chain"), FmtFixed(JsonAt(t, "launches_saved"), 0),
            FmtFixed(JsonAt(t, "bytes_saved_per_token"), 0), JsonStr(t, "formula")},
           false});
    for (const auto& t : JsonAt(g, "blocked"))
      rows.push_back({{Layers(g), "NOT fused: " + JsonStr(t, "kind"), JsonStr(t, "chain"), "0", "0",
                       JsonStr(t, "blocked_by")},
                      true});
  }
  return rows;
}

const std::vector<std::string> kHeader = {"layers",         "fusion",        "chain",
                                          "launches saved", "B/token saved", "formula"};

}  // namespace

void FusionsMarkdown(std::ostringstream& o, const json& r) {
  const json& f = JsonAt(r, "fusions");
  o << "## Kernel fusions\n\n";
  if (!f.is_object()) {
    o << "-\n\n";
    return;
  }
  o << "Fusing saves " << Totals(f) << ".";
  if (const std::string v = CostValue(f); !v.empty()) o << " " << v;
  o << "\n\n|";
  for (const std::string& h : kHeader) o << " " << h << " |";
  o << "\n|";
  for (size_t i = 0; i < kHeader.size(); ++i) o << "---|";
  o << "\n";
  for (const Row& row : Rows(f)) {
    o << "|";
    for (const std::string& c : row.cells) o << " " << c << " |";
    o << "\n";
  }
  o << "\n";
}

void FusionsHtml(std::ostringstream& o, const json& r) {
  const json& f = JsonAt(r, "fusions");
  o << "<h2>Kernel fusions</h2>";
  if (!f.is_object()) {
    o << "<p>-</p>";
    return;
  }
  o << "<p>Fusing saves " << XmlEscape(Totals(f)) << ".";
  if (const std::string v = CostValue(f); !v.empty()) o << " " << XmlEscape(v);
  o << "</p><table><tr>";
  for (const std::string& h : kHeader) o << "<th>" << XmlEscape(h) << "</th>";
  o << "</tr>";
  for (const Row& row : Rows(f)) {
    o << (row.blocked ? "<tr class=\"bad\">" : "<tr>");
    for (const std::string& c : row.cells) o << "<td>" << XmlEscape(c) << "</td>";
    o << "</tr>";
  }
  o << "</table>";
}

}  // namespace onboard::agent
