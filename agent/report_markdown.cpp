// report.md: the review copy of report.json (see agent/report_markdown.h). Sections in the order a
// reviewer reads: outcome, model, templates, chosen plan and why, alternatives, kernels, probe
// evidence, expert balance, decisions, timeline, artifacts.
#include "agent/report_markdown.h"

#include <sstream>

#include "agent/report_format.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

const json& At(const json& j, const char* key) {
  static const json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

bool Bool(const json& j) { return j.is_boolean() && j.get<bool>(); }

std::string Cell(std::string s) {  // table cells: no pipes or newlines
  for (auto& c : s)
    if (c == '|' || c == '\n') c = c == '|' ? '/' : ' ';
  return s;
}

void Outcome(std::ostringstream& o, const json& r) {
  const json& out = At(r, "outcome");
  const json& plan = At(r, "plan");
  o << "# Onboarding report: " << JsonStr(At(r, "model"), "name") << "\n\n";
  o << "- Topology: " << JsonStr(At(r, "topology"), "name") << " (" << At(At(r, "topology"), "devices").dump()
    << " x " << JsonStr(At(At(r, "topology"), "device"), "name") << ")\n";
  o << "- Mode: " << JsonStr(At(r, "request"), "mode") << " (LoRA rank " << At(At(r, "request"), "lora_rank").dump()
    << "), seq " << At(At(r, "request"), "seq").dump() << "\n";
  if (plan.is_object())
    o << "- Chosen plan: `" << JsonStr(At(plan, "chosen"), "summary") << "`"
      << (Bool(At(plan, "feasible")) ? "" : " -- **NOTHING FITS: closest plan shown**") << "\n";
  o << "- Probe rounds: " << At(out, "probe_rounds").dump() << ", converged: "
    << (Bool(At(out, "converged")) ? "yes" : "**no**")
    << "; agent decisions: " << At(out, "decisions").dump() << "\n";
  o << "- Unknown modules: " << At(out, "unknown_modules").dump()
    << "; kernels on reference fallback: " << At(out, "kernel_fallbacks").dump() << "\n\n";
}

void Model(std::ostringstream& o, const json& r) {
  const json& m = At(r, "model");
  o << "## Model\n\n";
  o << "`" << JsonStr(m, "model_type") << "` / `" << JsonStr(m, "architecture") << "`: " << At(m, "layers").dump()
    << " layers, hidden " << At(m, "hidden").dump() << ", vocab " << At(m, "vocab").dump() << ", context "
    << At(m, "max_position").dump() << " tokens\n\n";
  for (const auto& line : At(m, "summary")) o << "- " << line.get<std::string>() << "\n";
  o << "\n| total params | active params | vision params | weights | forward FLOPs/token (seq " << At(m, "stats_seq").dump()
    << ") |\n|---|---|---|---|---|\n";
  o << "| " << FmtCount(At(m, "total_params")) << " | " << FmtCount(At(m, "active_params")) << " | "
    << FmtCount(At(m, "vision_params")) << " | " << FmtGiB(At(m, "weight_bytes")) << " | "
    << FmtCount(At(m, "flops_per_token")) << " |\n\n";
  for (const auto& w : At(m, "warnings")) o << "> warning: " << w.get<std::string>() << "\n";
  if (!At(m, "warnings").empty()) o << "\n";
}

void Templates(std::ostringstream& o, const json& r) {
  const json& t = At(r, "templates");
  o << "## Module templates\n\n| module | kind | layers | detail | template | kernel | parallel | recompute | precision |\n"
       "|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : At(t, "modules")) {
    const json& tp = At(m, "template");
    o << "| " << JsonStr(m, "module") << " | " << JsonStr(m, "kind") << " | " << JsonStr(m, "layers") << " | "
      << Cell(JsonStr(m, "detail")) << " | ";
    if (tp.is_null()) {
      o << "**UNKNOWN** | - | - | - | " << Cell(JsonStr(m, "unknown")) << " |\n";
      continue;
    }
    std::string prec;
    for (const auto& [k, v] : At(tp, "precision").items()) prec += (prec.empty() ? "" : ", ") + k + " " + v.get<std::string>();
    o << JsonStr(tp, "name") << " | " << (JsonStr(tp, "kernel").empty() ? "(library)" : JsonStr(tp, "kernel")) << " | "
      << JsonStr(tp, "parallel") << " over " << JsonStr(tp, "parallel_over") << " | " << JsonStr(tp, "recompute")
      << " | " << Cell(prec) << " |\n";
  }
  if (At(t, "unknown").is_number() && At(t, "unknown").get<int64_t>() > 0)
    o << "\n**" << At(t, "unknown").dump()
      << " module(s) have no template**: they run with reference operators and default parallelism; add a template "
         "(templates/README.md) or pass `--templates FILE`.\n";
  o << "\n";
}

void MemoryTable(std::ostringstream& o, const json& mem) {
  o << "| weights | grads | optimizer | activations | a2a buffers | workspace | total | capacity |\n"
       "|---|---|---|---|---|---|---|---|\n| ";
  for (const char* k : {"weights", "grads", "optimizer", "activations", "a2a_buffers", "workspace", "total", "capacity"})
    o << FmtGiB(At(mem, k)) << " | ";
  o << "\n\n";
}

void Plan(std::ostringstream& o, const json& r) {
  const json& p = At(r, "plan");
  if (!p.is_object()) return;
  const json& ch = At(p, "chosen");
  const json& e = At(ch, "estimate");
  o << "## Chosen plan\n\n`" << JsonStr(ch, "summary") << "`\n\n";
  o << "| step | tokens/s | MFU | exposed comm | bubble | fits |\n|---|---|---|---|---|---|\n";
  o << "| " << FmtSeconds(At(e, "step_s")) << " | " << FmtSig(At(e, "tokens_per_s")) << " | " << FmtPct(At(e, "mfu"))
    << " | " << FmtSeconds(At(e, "exposed_comm_s")) << " | " << FmtSeconds(At(e, "bubble_s")) << " | "
    << (Bool(At(e, "fits")) ? "yes" : "**no**") << " |\n\n";
  o << "Memory per device:\n\n";
  MemoryTable(o, At(e, "memory"));
  o << "### Why this plan\n\n";
  for (const auto& w : At(p, "why")) o << "- " << w.get<std::string>() << "\n";
  for (const auto& n : At(e, "notes")) o << "- " << n.get<std::string>() << "\n";
  if (Bool(At(p, "bias_balancing")))
    o << "- aux-loss-free bias balancing of the router enabled (expert imbalance measured in the probe)\n";
  o << "\nStep time terms:\n\n| term | exposed | total | tier | formula |\n|---|---|---|---|---|\n";
  for (const auto& t : At(e, "time_terms"))
    o << "| " << JsonStr(t, "name") << " | " << FmtSeconds(At(t, "exposed_s")) << " | " << FmtSeconds(At(t, "total_s"))
      << " | " << JsonStr(t, "tier") << " | " << Cell(JsonStr(t, "formula")) << " |\n";
  o << "\n## Alternatives\n\n";
  o << "Searched " << At(p, "candidates_enumerated").dump() << " layouts, costed " << At(p, "candidates_evaluated").dump()
    << ".\n\n| runner-up | step | MFU | memory/device | fits |\n|---|---|---|---|---|\n";
  for (const auto& c : At(p, "runners_up")) {
    const json& ce = At(c, "estimate");
    o << "| `" << JsonStr(c, "summary") << "` | " << FmtSeconds(At(ce, "step_s")) << " | " << FmtPct(At(ce, "mfu"))
      << " | " << FmtGiB(At(At(ce, "memory"), "total")) << " | "
      << (Bool(At(ce, "fits")) ? "yes" : "no") << " |\n";
  }
  o << "\nRejected:\n\n| reason | count | example |\n|---|---|---|\n";
  for (const auto& g : At(p, "rejected"))
    o << "| " << JsonStr(g, "reason") << " | " << At(g, "count").dump() << " | " << Cell(JsonStr(g, "example")) << " |\n";
  o << "\nPareto front (time vs memory):\n\n| plan | step | memory/device |\n|---|---|---|\n";
  for (const auto& c : At(p, "pareto"))
    o << "| `" << JsonStr(c, "summary") << "` | " << FmtSeconds(At(c, "step_s")) << " | " << FmtGiB(At(c, "memory_bytes")) << " |\n";
  if (At(p, "rounds").size() > 1) {
    o << "\nPlan rounds:\n\n| round | reason | plan | step | memory | imbalance | recompute | margin |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& pr : At(p, "rounds"))
      o << "| " << At(pr, "round").dump() << " | " << JsonStr(pr, "reason") << " | `" << JsonStr(pr, "summary") << "` | "
        << FmtSeconds(At(pr, "step_s")) << " | " << FmtGiB(At(pr, "memory_bytes")) << " | "
        << FmtFixed(At(pr, "expert_imbalance"), 2) << " | "
        << (JsonStr(pr, "recompute_constraint").empty() ? "searched" : JsonStr(pr, "recompute_constraint")) << " | "
        << FmtPct(At(pr, "memory_margin")) << " |\n";
  }
  o << "\n";
}

void Kernels(std::ostringstream& o, const json& r) {
  const json& k = At(r, "kernels");
  o << "## Kernels\n\n";
  if (!At(k, "ran").is_boolean() || !Bool(At(k, "ran"))) {
    o << "Not generated: " << JsonStr(k, "skipped_reason") << "\n\n";
    return;
  }
  o << At(k, "generated").size() << " kernels generated (sources and manifests in `kernels/`); " << At(k, "passed").dump()
    << "/" << At(k, "total").dump() << " checks passed.\n\n";
  o << "| kernel | shape | against | rel err | state err | tol | pass | note |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : At(k, "rows"))
    o << "| " << JsonStr(row, "kernel") << " | " << Cell(JsonStr(row, "shape")) << " | " << JsonStr(row, "against") << " | "
      << FmtSig(At(row, "rel_err")) << " | " << FmtSig(At(row, "state_err")) << " | " << FmtSig(At(row, "tol")) << " | "
      << (Bool(At(row, "pass")) ? "yes" : "**FAIL**") << " | " << Cell(JsonStr(row, "note")) << " |\n";
  for (const auto& [kernel, ref] : At(k, "fallbacks").items())
    o << "\n**Fallback:** `" << kernel << "` failed its check; the module runs the reference operator `"
      << ref.get<std::string>() << "` instead.\n";
  o << "\n";
}

void Probe(std::ostringstream& o, const json& r) {
  const json& p = At(r, "probe");
  o << "## Probe evidence\n\n";
  if (At(p, "rounds").empty()) {
    o << "No probe ran" << (At(p, "enabled").is_boolean() && !Bool(At(p, "enabled")) ? " (disabled)" : "") << ".\n\n";
    return;
  }
  o << "| round | proxy | ranks/ep | lr | clip | loss first -> last | verdict | rank imbalance | comm share | peak mem (pred) |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& pr : At(p, "rounds")) {
    if (pr.contains("error")) {
      o << "| " << At(pr, "round").dump() << " | failed: " << Cell(JsonStr(pr, "error")) << " |||||||||\n";
      continue;
    }
    const json& loss = At(pr, "loss");
    const json& cfg = At(pr, "config");
    const json& meas = At(pr, "measured");
    const json& pred = At(pr, "predicted");
    o << "| " << At(pr, "round").dump() << " | " << JsonStr(pr, "proxy") << " | " << At(cfg, "ranks").dump() << "/"
      << At(cfg, "ep").dump() << " | " << FmtSig(At(cfg, "lr")) << " | " << FmtSig(At(cfg, "clip")) << " | "
      << (loss.empty() ? "-" : FmtFixed(loss.front(), 3) + " -> " + FmtFixed(loss.back(), 3)) << " | "
      << JsonStr(pr, "convergence") << " | " << FmtFixed(At(pr, "rank_imbalance"), 2) << " | "
      << FmtPct(At(meas, "comm_share")) << " | " << FmtGiB(At(meas, "peak_bytes")) << " ("
      << FmtGiB(At(pred, "memory_bytes")) << ") |\n";
  }
  for (const auto& pr : At(p, "rounds"))
    for (const auto& c : At(pr, "checks")) o << "\n- round " << At(pr, "round").dump() << ": " << c.get<std::string>();
  o << "\n\nLogs: `probe/round<N>/`.\n\n";
  const json& eb = At(r, "expert_balance");
  if (eb.is_object()) {
    o << "### Expert load before/after placement\n\n" << JsonStr(eb, "action") << "\n\n";
    o << "| | max/mean per EP rank | tokens per rank |\n|---|---|---|\n";
    o << "| before (round " << At(eb, "round").dump() << ") | " << FmtFixed(At(eb, "before_max_over_mean"), 3) << " | "
      << CompactJson(At(eb, "before")) << " |\n";
    o << "| predicted after | " << FmtFixed(At(eb, "predicted_max_over_mean"), 3) << " | "
      << CompactJson(At(eb, "predicted_after")) << " |\n";
    if (eb.contains("measured_after"))
      o << "| measured after | " << FmtFixed(At(eb, "measured_after_max_over_mean"), 3) << " | "
        << CompactJson(At(eb, "measured_after")) << " |\n";
    o << "\n";
  }
}

void Decisions(std::ostringstream& o, const json& r) {
  o << "## Agent decisions\n\n";
  const json& ds = At(r, "decisions");
  if (ds.empty()) o << "No rule fired.\n\n";
  int n = 0;
  for (const auto& d : ds) {
    o << ++n << ". **round " << At(d, "round").dump() << ", rule `" << JsonStr(d, "rule") << "`** ("
      << JsonStr(d, "family") << "): " << JsonStr(d, "action") << "\n";
    o << "   - observed: " << Cell(CompactJson(At(d, "observed"))) << "\n";
    o << "   - threshold: " << JsonStr(d, "threshold") << "\n";
    o << "   - changed: " << Cell(CompactJson(At(d, "changed"))) << "\n";
  }
  o << "\nObservations per round:\n\n| round | stage | observed | outcome |\n|---|---|---|---|\n";
  for (const auto& ob : At(r, "observations"))
    o << "| " << At(ob, "round").dump() << " | " << JsonStr(ob, "stage") << " | " << Cell(CompactJson(At(ob, "observed")))
      << " | " << JsonStr(ob, "outcome") << " |\n";
  o << "\nRules: ";
  for (const auto& rule : At(r, "rules")) o << "`" << JsonStr(rule, "name") << "` ";
  o << "\n\n";
}

void Timeline(std::ostringstream& o, const json& r) {
  o << "## Stage timeline\n\n| stage | round | wall time | ok | summary |\n|---|---|---|---|---|\n";
  for (const auto& s : At(r, "timeline"))
    o << "| " << JsonStr(s, "stage") << " | " << At(s, "round").dump() << " | " << FmtSeconds(At(s, "seconds")) << " | "
      << (Bool(At(s, "ok")) ? "yes" : "**no**") << " | " << Cell(JsonStr(s, "summary")) << " |\n";
  o << "\n";
  for (const auto& n : At(r, "notes")) o << "> note: " << n.get<std::string>() << "\n";
  if (!At(r, "notes").empty()) o << "\n";
  o << "## Artifacts\n\n";
  for (const auto& a : At(r, "artifacts")) o << "- `" << a.get<std::string>() << "`\n";
}

}  // namespace

std::string RenderMarkdownReport(const nlohmann::json& report) {
  std::ostringstream o;
  Outcome(o, report);
  Model(o, report);
  Templates(o, report);
  Plan(o, report);
  Kernels(o, report);
  Probe(o, report);
  Decisions(o, report);
  Timeline(o, report);
  return o.str();
}

}  // namespace onboard::agent
