// "Expert communication by probe round" section of report.md / report.html (see
// report/expert_comm_section.h). Units: per routed token per MoE layer (nodes, rows, copies, bytes:
// dispatch + combine), rows per EP rank as max / mean (worst MoE layer), milliseconds per training
// step (mean over the steps after the first, max over ranks).
#include "report/expert_comm_section.h"

#include <string>
#include <vector>

#include "report/report_format.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

const std::vector<std::string> kHeader = {"round",
                                          "nodes x ranks/node",
                                          "experts",
                                          "overlap",
                                          "nodes/token",
                                          "cross-node rows/token",
                                          "node-dedup copies/token",
                                          "slow-tier B/token",
                                          "rows/EP rank max/mean",
                                          "all-to-all exposed",
                                          "all-to-all hidden"};

// Step 1: the rounds that ran with expert routing recorded, in order.
std::vector<const json*> CommRounds(const json& r) {
  std::vector<const json*> out;
  for (const auto& pr : JsonAt(JsonAt(r, "probe"), "rounds"))
    if (!pr.contains("error") && JsonAt(pr, "expert_comm").is_object()) out.push_back(&pr);
  return out;
}

double Num(const json& ec, const char* key) {
  const json& v = JsonAt(ec, key);
  return v.is_number() ? v.get<double>() : 0.0;
}

std::string Experts(const json& ec) {
  const double slots = Num(ec, "physical_slots");
  std::string s = JsonStr(ec, "placement") == "set" ? "placed by the loop" : "contiguous";
  if (slots > 0) s += ", " + FmtFixed(slots, 0) + " slots with replicas";
  return s;
}

// Step 2: one row per round.
std::vector<std::vector<std::string>> Rows(const std::vector<const json*>& rounds) {
  std::vector<std::vector<std::string>> rows;
  for (const json* pr : rounds) {
    const json& ec = JsonAt(*pr, "expert_comm");
    rows.push_back(
        {JsonAt(*pr, "round").dump(),
         FmtFixed(Num(ec, "nodes"), 0) + " x " + FmtFixed(Num(ec, "ranks_per_node"), 0), Experts(ec),
         JsonTrue(JsonAt(ec, "overlap")) ? "on" : "off", FmtFixed(Num(ec, "nodes_per_token"), 3),
         FmtFixed(Num(ec, "cross_node_rows_per_token"), 3),
         FmtFixed(Num(ec, "cross_node_copies_per_token"), 3),
         FmtFixed(Num(ec, "slow_tier_bytes_per_token"), 1), FmtFixed(Num(ec, "rank_max_over_mean"), 3),
         FmtSeconds(Num(ec, "a2a_exposed_s")), FmtSeconds(Num(ec, "a2a_hidden_s"))});
  }
  return rows;
}

std::string Change(const json& a, const json& b, const char* key, const char* what, int decimals) {
  const double x = Num(a, key), y = Num(b, key);
  return std::string(what) + " " + FmtFixed(x, decimals) + " -> " + FmtFixed(y, decimals) +
         (x > 0 ? " (" + FmtFixed(y / x, 2) + "x)" : "");
}

// Step 3: the last round against the first, when the loop changed the expert layout between them.
std::string BeforeAfter(const std::vector<const json*>& rounds) {
  if (rounds.size() < 2) return "";
  const json &a = JsonAt(*rounds.front(), "expert_comm"), &b = JsonAt(*rounds.back(), "expert_comm");
  if (JsonStr(a, "placement") == JsonStr(b, "placement") &&
      Num(a, "physical_slots") == Num(b, "physical_slots") &&
      JsonTrue(JsonAt(a, "overlap")) == JsonTrue(JsonAt(b, "overlap")))
    return "";
  return "Round " + JsonAt(*rounds.back(), "round").dump() + " against round " +
         JsonAt(*rounds.front(), "round").dump() +
         ", measured: " + Change(a, b, "cross_node_copies_per_token", "node-dedup copies/token", 3) + "; " +
         Change(a, b, "slow_tier_bytes_per_token", "slow-tier bytes/token", 1) + "; " +
         Change(a, b, "rank_max_over_mean", "rows/EP rank max/mean", 3) + "; " +
         Change(a, b, "a2a_exposed_s", "all-to-all exposed s/step", 4) + ".";
}

const char* kIntro =
    "Measured by each round's probe over its declared nodes (per routed token per MoE layer; rows/EP "
    "rank: worst MoE layer; all-to-all: per step, max over ranks).";

}  // namespace

void ExpertCommMarkdown(std::ostringstream& o, const json& r) {
  const std::vector<const json*> rounds = CommRounds(r);
  if (rounds.empty()) return;
  o << "### Expert communication by probe round\n\n" << kIntro << "\n\n";
  MarkdownTable(o, kHeader, Rows(rounds));
  if (const std::string ba = BeforeAfter(rounds); !ba.empty()) o << ba << "\n\n";
}

void ExpertCommHtml(std::ostringstream& o, const json& r) {
  const std::vector<const json*> rounds = CommRounds(r);
  if (rounds.empty()) return;
  o << "<h3>Expert communication by probe round</h3><p>" << XmlEscape(kIntro) << "</p>";
  HtmlTable(o, kHeader, Rows(rounds));
  if (const std::string ba = BeforeAfter(rounds); !ba.empty()) o << "<p>" << XmlEscape(ba) << "</p>";
}

}  // namespace onboard::agent
