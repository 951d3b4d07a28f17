// Weights section of report.md / report.html (see report/weights_section.h).
#include "report/weights_section.h"

#include <string>
#include <utility>
#include <vector>

#include "report/report_format.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

std::string Joined(const json& a) {
  std::string s;
  if (!a.is_array()) return "-";
  for (const auto& x : a) s += (s.empty() ? "" : ", ") + (x.is_string() ? x.get<std::string>() : x.dump());
  return s.empty() ? "-" : s;
}

std::string Bytes(const json& b) { return b.is_number() ? FmtCount(b) + "B" : "-"; }

// (label, value) rows of the summary table.
std::vector<std::pair<std::string, std::string>> Summary(const json& w) {
  std::vector<std::pair<std::string, std::string>> rows = {
      {"model", JsonStr(w, "model_type") + " (" + JsonStr(w, "layout") + " layout), " +
                    JsonAt(w, "layers_run").dump() + " layer(s)"},
      {"tensors loaded", JsonAt(w, "tensors").dump()},
      {"checkpoint dtypes", Joined(JsonAt(w, "dtypes"))},
      {"dequantised to", JsonStr(w, "compute_dtype") + ": " + Joined(JsonAt(w, "dequant"))},
      {"bytes read by the forward",
       Bytes(JsonAt(w, "bytes_read")) + " of " + Bytes(JsonAt(w, "checkpoint_bytes"))}};
  const json& c = JsonAt(w, "check");
  if (c.is_object()) {
    rows.push_back({"logit check", "ours (" + JsonStr(c, "ours") + ") vs " + JsonStr(c, "reference")});
    rows.push_back({"tolerance", "abs(ours - ref) <= " + FmtSig(JsonAt(c, "atol_frac")) +
                                     " x max abs(ref) + " + FmtSig(JsonAt(c, "rtol")) +
                                     " x abs(ref) per logit"});
    rows.push_back({"measured", "max abs " + FmtSig(JsonAt(c, "max_abs")) + ", max rel " +
                                    FmtSig(JsonAt(c, "max_rel")) + ", top-1 " +
                                    JsonAt(c, "top1_agree").dump() + "/" + JsonAt(c, "rows").dump()});
    rows.push_back({"verdict", JsonStr(c, "verdict")});
  }
  const json& p = JsonAt(w, "lora_probe");
  if (p.is_object() && !JsonTrue(JsonAt(p, "ran"))) rows.push_back({"LoRA probe", JsonStr(p, "reason")});
  if (p.is_object() && JsonTrue(JsonAt(p, "ran"))) {
    rows.push_back({"LoRA probe weights", "real embedding, layers " + JsonAt(p, "layers").dump() +
                                              ", head: " + JsonAt(p, "tensors").dump() +
                                              " tensors, adapters on " + Joined(JsonAt(p, "targets"))});
    rows.push_back({"LoRA probe held-out",
                    FmtSig(JsonAt(p, "held_out_final")) + " nats after " + JsonAt(p, "steps").dump() +
                        " steps vs " + FmtSig(JsonAt(p, "held_out_frozen")) +
                        " for the frozen checkpoint (must fall by " + FmtPct(JsonAt(p, "min_fall")) + ")"});
    rows.push_back(
        {"LoRA probe verdict", JsonStr(p, "verdict") + " (PEFT adapter " + JsonStr(p, "adapter") + ")"});
  }
  return rows;
}

// One row per plan rank: tp rank, fsdp rank, bytes read, share of the checkpoint.
std::vector<std::vector<std::string>> RankRows(const json& w) {
  std::vector<std::vector<std::string>> rows;
  const json& total = JsonAt(w, "checkpoint_bytes");
  for (const auto& r : JsonAt(w, "ranks")) {
    const json& b = JsonAt(r, "bytes_read");
    const json share = b.is_number() && total.is_number() && total.get<double>() > 0
                           ? json(b.get<double>() / total.get<double>())
                           : json();
    rows.push_back({JsonAt(r, "tp_rank").dump(), JsonAt(r, "fsdp_rank").dump(), Bytes(b), FmtPct(share)});
  }
  return rows;
}

const std::vector<std::string> kRankHeader = {"tp rank", "fsdp rank", "bytes read", "of checkpoint"};

std::string RankIntro(const json& w) {
  return "Each rank of tp=" + JsonAt(w, "tp").dump() + " x fsdp=" + JsonAt(w, "fsdp").dump() +
         " maps the checkpoint on its own and reads only its slice:";
}

}  // namespace

void WeightsMarkdown(std::ostringstream& o, const json& r) {
  const json& w = JsonAt(r, "weights");
  o << "## Weights\n\n";
  if (!w.is_object() || !JsonTrue(JsonAt(w, "loaded"))) {
    o << (w.is_object() ? JsonStr(w, "reason") : std::string("-")) << "\n\n";
    return;
  }
  o << "| | |\n|---|---|\n";
  for (const auto& [k, v] : Summary(w)) o << "| " << k << " | " << v << " |\n";
  const std::vector<std::vector<std::string>> ranks = RankRows(w);
  if (JsonAt(w, "ranks_error").is_string())
    o << "\nPer-rank bytes not measured: " << JsonStr(w, "ranks_error") << "\n";
  if (ranks.empty()) {
    o << "\n";
    return;
  }
  o << "\n" << RankIntro(w) << "\n\n";
  MarkdownTable(o, kRankHeader, ranks);
}

void WeightsHtml(std::ostringstream& o, const json& r) {
  const json& w = JsonAt(r, "weights");
  o << "<h2>Weights</h2>";
  if (!w.is_object() || !JsonTrue(JsonAt(w, "loaded"))) {
    o << "<p>" << XmlEscape(w.is_object() ? JsonStr(w, "reason") : std::string("-")) << "</p>";
    return;
  }
  const bool failed = JsonStr(JsonAt(w, "check"), "verdict") == "FAIL";
  o << "<table>";
  for (const auto& [k, v] : Summary(w))
    o << (k == "verdict" && failed ? "<tr class=\"bad\">" : "<tr>") << "<th>" << XmlEscape(k) << "</th><td>"
      << XmlEscape(v) << "</td></tr>";
  o << "</table>";
  const std::vector<std::vector<std::string>> ranks = RankRows(w);
  if (JsonAt(w, "ranks_error").is_string())
    o << "<p>Per-rank bytes not measured: " << XmlEscape(JsonStr(w, "ranks_error")) << "</p>";
  if (ranks.empty()) return;
  o << "<p>" << XmlEscape(RankIntro(w)) << "</p>";
  HtmlTable(o, kRankHeader, ranks);
}

}  // namespace onboard::agent
