// report.md: the review copy of report.json (see report/report_markdown.h). Sections in the order a
// reviewer reads: outcome, model, templates, chosen plan and why, alternatives, kernels, probe
// evidence, expert balance, decisions, timeline, artifacts.
#include "report/report_markdown.h"

#include <sstream>
#include <string>
#include <vector>

#include "report/expert_comm_section.h"
#include "report/fusion_section.h"
#include "report/image_section.h"
#include "report/probe_comparison_section.h"
#include "report/report_format.h"
#include "report/weights_section.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

std::string Cell(std::string s) {  // table cells: no pipes or newlines
  for (auto& c : s)
    if (c == '|' || c == '\n') c = c == '|' ? '/' : ' ';
  return s;
}

void Outcome(std::ostringstream& o, const json& r) {
  const json& out = JsonAt(r, "outcome");
  const json& plan = JsonAt(r, "plan");
  o << "# Onboarding report: " << JsonStr(JsonAt(r, "model"), "name") << "\n\n";
  o << "- Topology: " << JsonStr(JsonAt(r, "topology"), "name") << " (" << JsonAt(JsonAt(r, "topology"), "devices").dump()
    << " x " << JsonStr(JsonAt(JsonAt(r, "topology"), "device"), "name") << ")\n";
  o << "- Mode: " << JsonStr(JsonAt(r, "request"), "mode") << " (LoRA rank " << JsonAt(JsonAt(r, "request"), "lora_rank").dump()
    << "), seq " << JsonAt(JsonAt(r, "request"), "seq").dump() << "\n";
  if (plan.is_object())
    o << "- Chosen plan: `" << JsonStr(JsonAt(plan, "chosen"), "summary") << "`"
      << (JsonTrue(JsonAt(plan, "feasible")) ? "" : " -- **NOTHING FITS: closest plan shown**") << "\n";
  o << "- Probe rounds: " << JsonAt(out, "probe_rounds").dump() << ", converged: "
    << (JsonTrue(JsonAt(out, "converged")) ? "yes" : "**no**")
    << "; agent decisions: " << JsonAt(out, "decisions").dump() << "\n";
  if (JsonAt(out, "image_learned").is_boolean())  // a model with a vision tower (report/image_section.h)
    o << "- Image path (vision tower): "
      << (JsonTrue(JsonAt(out, "image_learned")) ? "learned" : "**NOT learned**") << "\n";
  o << "- Unknown modules: " << JsonAt(out, "unknown_modules").dump()
    << "; kernels on reference fallback: " << JsonAt(out, "kernel_fallbacks").dump() << "\n\n";
}

void Model(std::ostringstream& o, const json& r) {
  const json& m = JsonAt(r, "model");
  o << "## Model\n\n";
  o << "`" << JsonStr(m, "model_type") << "` / `" << JsonStr(m, "architecture") << "`: " << JsonAt(m, "layers").dump()
    << " layers, hidden " << JsonAt(m, "hidden").dump() << ", vocab " << JsonAt(m, "vocab").dump() << ", context "
    << JsonAt(m, "max_position").dump() << " tokens\n\n";
  for (const auto& line : JsonAt(m, "summary")) o << "- " << line.get<std::string>() << "\n";
  o << "\n| total params | active params | vision params | weights | forward FLOPs/token (seq " << JsonAt(m, "stats_seq").dump()
    << ") |\n|---|---|---|---|---|\n";
  o << "| " << FmtCount(JsonAt(m, "total_params")) << " | " << FmtCount(JsonAt(m, "active_params")) << " | "
    << FmtCount(JsonAt(m, "vision_params")) << " | " << FmtGiB(JsonAt(m, "weight_bytes")) << " | "
    << FmtCount(JsonAt(m, "flops_per_token")) << " |\n\n";
  for (const auto& w : JsonAt(m, "warnings")) o << "> warning: " << w.get<std::string>() << "\n";
  if (!JsonAt(m, "warnings").empty()) o << "\n";
}

void Templates(std::ostringstream& o, const json& r) {
  const json& t = JsonAt(r, "templates");
  o << "## Module templates\n\n| module | kind | layers | detail | template | kernel |\n"
       "|---|---|---|---|---|---|\n";
  for (const auto& m : JsonAt(t, "modules")) {
    const json& tp = JsonAt(m, "template");
    o << "| " << JsonStr(m, "module") << " | " << JsonStr(m, "kind") << " | " << JsonStr(m, "layers") << " | "
      << Cell(JsonStr(m, "detail")) << " | ";
    if (tp.is_null()) {
      o << "**UNKNOWN** | " << Cell(JsonStr(m, "unknown")) << " |\n";
      continue;
    }
    o << JsonStr(tp, "name") << " | " << (JsonStr(tp, "kernel").empty() ? "(library)" : JsonStr(tp, "kernel"))
      << " |\n";
  }
  if (JsonAt(t, "unknown").is_number() && JsonAt(t, "unknown").get<int64_t>() > 0)
    o << "\n**" << JsonAt(t, "unknown").dump()
      << " module(s) have no template**: they run with reference operators and default parallelism; add a template "
         "(templates/README.md) or pass `--templates FILE`.\n";
  o << "\n";
}

void MemoryTable(std::ostringstream& o, const json& mem) {
  o << "| weights | grads | optimizer | activations | a2a buffers | workspace | total | capacity |\n"
       "|---|---|---|---|---|---|---|---|\n| ";
  for (const char* k : {"weights", "grads", "optimizer", "activations", "a2a_buffers", "workspace", "total", "capacity"})
    o << FmtGiB(JsonAt(mem, k)) << " | ";
  o << "\n\n";
}

void Plan(std::ostringstream& o, const json& r) {
  const json& p = JsonAt(r, "plan");
  if (!p.is_object()) return;
  const json& ch = JsonAt(p, "chosen");
  const json& e = JsonAt(ch, "estimate");
  o << "## Chosen plan\n\n`" << JsonStr(ch, "summary") << "`\n\n";
  o << "| step | tokens/s | MFU | exposed comm | bubble | fits |\n|---|---|---|---|---|---|\n";
  o << "| " << FmtSeconds(JsonAt(e, "step_s")) << " | " << FmtSig(JsonAt(e, "tokens_per_s")) << " | " << FmtPct(JsonAt(e, "mfu"))
    << " | " << FmtSeconds(JsonAt(e, "exposed_comm_s")) << " | " << FmtSeconds(JsonAt(e, "bubble_s")) << " | "
    << (JsonTrue(JsonAt(e, "fits")) ? "yes" : "**no**") << " |\n\n";
  o << "Memory per device:\n\n";
  MemoryTable(o, JsonAt(e, "memory"));
  o << "### Why this plan\n\n";
  for (const auto& w : JsonAt(p, "why")) o << "- " << w.get<std::string>() << "\n";
  for (const auto& n : JsonAt(e, "notes")) o << "- " << n.get<std::string>() << "\n";
  if (JsonTrue(JsonAt(p, "bias_balancing")))
    o << "- aux-loss-free bias balancing of the router enabled (expert imbalance measured in the probe)\n";
  o << "\nStep time terms:\n\n| term | exposed | total | tier | formula |\n|---|---|---|---|---|\n";
  for (const auto& t : JsonAt(e, "time_terms"))
    o << "| " << JsonStr(t, "name") << " | " << FmtSeconds(JsonAt(t, "exposed_s")) << " | " << FmtSeconds(JsonAt(t, "total_s"))
      << " | " << JsonStr(t, "tier") << " | " << Cell(JsonStr(t, "formula")) << " |\n";
  o << "\n## Alternatives\n\n";
  o << "Searched " << JsonAt(p, "candidates_enumerated").dump() << " layouts, costed " << JsonAt(p, "candidates_evaluated").dump()
    << ".\n\n| runner-up | step | MFU | memory/device | fits |\n|---|---|---|---|---|\n";
  for (const auto& c : JsonAt(p, "runners_up")) {
    const json& ce = JsonAt(c, "estimate");
    o << "| `" << JsonStr(c, "summary") << "` | " << FmtSeconds(JsonAt(ce, "step_s")) << " | " << FmtPct(JsonAt(ce, "mfu"))
      << " | " << FmtGiB(JsonAt(JsonAt(ce, "memory"), "total")) << " | "
      << (JsonTrue(JsonAt(ce, "fits")) ? "yes" : "no") << " |\n";
  }
  o << "\nRejected:\n\n| reason | count | example |\n|---|---|---|\n";
  for (const auto& g : JsonAt(p, "rejected"))
    o << "| " << JsonStr(g, "reason") << " | " << JsonAt(g, "count").dump() << " | " << Cell(JsonStr(g, "example")) << " |\n";
  o << "\nPareto front (time vs memory):\n\n| plan | step | memory/device |\n|---|---|---|\n";
  for (const auto& c : JsonAt(p, "pareto"))
    o << "| `" << JsonStr(c, "summary") << "` | " << FmtSeconds(JsonAt(c, "step_s")) << " | " << FmtGiB(JsonAt(c, "memory_bytes")) << " |\n";
  if (JsonAt(p, "rounds").size() > 1) {
    o << "\nPlan rounds:\n\n| round | reason | plan | step | memory | imbalance | recompute | margin |\n|---|---|---|---|---|---|---|---|\n";
    for (const auto& pr : JsonAt(p, "rounds"))
      o << "| " << JsonAt(pr, "round").dump() << " | " << JsonStr(pr, "reason") << " | `" << JsonStr(pr, "summary") << "` | "
        << FmtSeconds(JsonAt(pr, "step_s")) << " | " << FmtGiB(JsonAt(pr, "memory_bytes")) << " | "
        << FmtFixed(JsonAt(pr, "expert_imbalance"), 2) << " | "
        << (JsonStr(pr, "recompute_constraint").empty() ? "searched" : JsonStr(pr, "recompute_constraint")) << " | "
        << FmtPct(JsonAt(pr, "memory_margin")) << " |\n";
  }
  o << "\n";
}

void Kernels(std::ostringstream& o, const json& r) {
  const json& k = JsonAt(r, "kernels");
  o << "## Kernels\n\n";
  if (!JsonAt(k, "ran").is_boolean() || !JsonTrue(JsonAt(k, "ran"))) {
    o << "Not generated: " << JsonStr(k, "skipped_reason") << "\n\n";
    return;
  }
  o << JsonAt(k, "generated").size() << " kernels generated (sources and manifests in `kernels/`); " << JsonAt(k, "passed").dump()
    << "/" << JsonAt(k, "total").dump() << " checks passed.\n\n";
  o << "| kernel | shape | against | rel err | state err | tol | pass | note |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& row : JsonAt(k, "rows"))
    o << "| " << JsonStr(row, "kernel") << " | " << Cell(JsonStr(row, "shape")) << " | " << JsonStr(row, "against") << " | "
      << FmtSig(JsonAt(row, "rel_err")) << " | " << FmtSig(JsonAt(row, "state_err")) << " | " << FmtSig(JsonAt(row, "tol")) << " | "
      << (JsonTrue(JsonAt(row, "pass")) ? "yes" : "**FAIL**") << " | " << Cell(JsonStr(row, "note")) << " |\n";
  for (const auto& [kernel, ref] : JsonAt(k, "fallbacks").items())
    o << "\n**Fallback:** `" << kernel << "` failed its check; the module runs the reference operator `"
      << ref.get<std::string>() << "` instead.\n";
  o << "\n";
}

void Probe(std::ostringstream& o, const json& r) {
  const json& p = JsonAt(r, "probe");
  o << "## Probe evidence\n\n";
  if (JsonAt(p, "rounds").empty()) {
    o << "No probe ran" << (JsonAt(p, "enabled").is_boolean() && !JsonTrue(JsonAt(p, "enabled")) ? " (disabled)" : "") << ".\n\n";
    return;
  }
  o << "| round | proxy | ranks/ep | lr | clip | loss first -> last | verdict | rank imbalance | comm share | peak mem (pred) |\n"
       "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& pr : JsonAt(p, "rounds")) {
    if (pr.contains("error")) {
      o << "| " << JsonAt(pr, "round").dump() << " | failed: " << Cell(JsonStr(pr, "error")) << " |||||||||\n";
      continue;
    }
    const json& loss = JsonAt(pr, "loss");
    const json& cfg = JsonAt(pr, "config");
    const json& meas = JsonAt(pr, "measured");
    const json& pred = JsonAt(pr, "predicted");
    o << "| " << JsonAt(pr, "round").dump() << " | " << JsonStr(pr, "proxy") << " | " << JsonAt(cfg, "ranks").dump() << "/"
      << JsonAt(cfg, "ep").dump() << " | " << FmtSig(JsonAt(cfg, "lr")) << " | " << FmtSig(JsonAt(cfg, "clip")) << " | "
      << (loss.empty() ? "-" : FmtFixed(loss.front(), 3) + " -> " + FmtFixed(loss.back(), 3)) << " | "
      << JsonStr(pr, "convergence") << " | " << FmtFixed(JsonAt(pr, "rank_imbalance"), 2) << " | "
      << FmtPct(JsonAt(meas, "comm_share")) << " | " << FmtGiB(JsonAt(meas, "peak_bytes")) << " ("
      << FmtGiB(JsonAt(pred, "memory_bytes")) << ") |\n";
  }
  for (const auto& pr : JsonAt(p, "rounds"))
    for (const auto& c : JsonAt(pr, "checks")) o << "\n- round " << JsonAt(pr, "round").dump() << ": " << c.get<std::string>();
  o << "\n\nLogs: `probe/round<N>/`.\n\n";
  const json& eb = JsonAt(r, "expert_balance");
  if (eb.is_object()) {
    o << "### Expert load before/after placement\n\n" << JsonStr(eb, "action") << "\n\n";
    o << "| | max/mean per EP rank | tokens per rank |\n|---|---|---|\n";
    o << "| before (round " << JsonAt(eb, "round").dump() << ") | " << FmtFixed(JsonAt(eb, "before_max_over_mean"), 3) << " | "
      << CompactJson(JsonAt(eb, "before")) << " |\n";
    o << "| predicted after | " << FmtFixed(JsonAt(eb, "predicted_max_over_mean"), 3) << " | "
      << CompactJson(JsonAt(eb, "predicted_after")) << " |\n";
    if (eb.contains("measured_after"))
      o << "| measured after | " << FmtFixed(JsonAt(eb, "measured_after_max_over_mean"), 3) << " | "
        << CompactJson(JsonAt(eb, "measured_after")) << " |\n";
    o << "\n";
  }
}

// What each round's KDA layers ran, its DSA kernel choice and round 1's kernel loss parity (issue 12).
void ProbeKernels(std::ostringstream& o, const json& r) {
  if (!AnyProbeKernelRecord(r)) return;
  const json& rounds = JsonAt(JsonAt(r, "probe"), "rounds");
  o << "### Kernels in the probe: KDA ops run, loss parity\n\n"
       "| round | kda_kernel | KDA forward calls (generated / torch ops) | dsa_kernel | loss parity "
       "(generated vs reference ops) |\n"
       "|---|---|---|---|---|\n";
  for (const auto& pr : rounds) {
    if (pr.contains("error")) continue;
    const json& calls = JsonAt(pr, "kda_calls");
    std::string parity;
    for (const auto& lp : JsonAt(pr, "loss_parity"))
      parity += (parity.empty() ? "" : "; ") + std::string(JsonTrue(JsonAt(lp, "pass")) ? "ok" : "**FAIL**") +
                " (" + JsonStr(lp, "kernel") + ", " + JsonAt(lp, "steps").dump() +
                " steps, max relative difference " + FmtSig(JsonAt(lp, "max_rel")) + " at step " +
                JsonAt(lp, "worst_step").dump() + ", tolerance " + FmtSig(JsonAt(lp, "tolerance")) + ")";
    o << "| " << JsonAt(pr, "round").dump() << " | " << JsonStr(JsonAt(pr, "config"), "kda_kernel") << " | "
      << JsonAt(calls, "generated").dump() << " / " << JsonAt(calls, "torch").dump() << " | "
      << JsonStr(JsonAt(pr, "config"), "dsa_kernel") << " | " << (parity.empty() ? "not run" : parity)
      << " |\n";
  }
  o << "\n";
}

// The plan's layout beside the probe's (the last round's), factor by factor.
void ProbeLayout(std::ostringstream& o, const json& r) {
  const json& rounds = JsonAt(JsonAt(r, "probe"), "rounds");
  if (rounds.empty() || !rounds.back().contains("layout")) return;
  o << "### Probe layout beside the plan\n\n| factor | plan | probe | why not kept |\n|---|---|---|---|\n";
  for (const auto& f : JsonAt(rounds.back()["layout"], "factors"))
    o << "| " << JsonStr(f, "factor") << " | " << JsonStr(f, "plan") << " | " << JsonStr(f, "probe") << " | "
      << (JsonStr(f, "reason").empty() ? "kept" : Cell(JsonStr(f, "reason"))) << " |\n";
  o << "\n";
}

void Decisions(std::ostringstream& o, const json& r) {
  o << "## Agent decisions\n\n";
  const json& ds = JsonAt(r, "decisions");
  if (ds.empty()) o << "No rule fired.\n\n";
  int n = 0;
  for (const auto& d : ds) {
    o << ++n << ". **round " << JsonAt(d, "round").dump() << ", rule `" << JsonStr(d, "rule") << "`** ("
      << JsonStr(d, "family") << "): " << JsonStr(d, "action") << "\n";
    o << "   - observed: " << Cell(CompactJson(JsonAt(d, "observed"))) << "\n";
    o << "   - threshold: " << JsonStr(d, "threshold") << "\n";
    o << "   - changed: " << Cell(CompactJson(JsonAt(d, "changed"))) << "\n";
  }
  o << "\nObservations per round:\n\n| round | stage | observed | outcome |\n|---|---|---|---|\n";
  for (const auto& ob : JsonAt(r, "observations"))
    o << "| " << JsonAt(ob, "round").dump() << " | " << JsonStr(ob, "stage") << " | " << Cell(CompactJson(JsonAt(ob, "observed")))
      << " | " << JsonStr(ob, "outcome") << " |\n";
  o << "\nRules: ";
  for (const auto& rule : JsonAt(r, "rules")) o << "`" << JsonStr(rule, "name") << "` ";
  o << "\n\n";
}

// Artifact names are paths relative to the run folder, where report.md is written: each one is a
// relative link. The engine exports (exports/, search/plan_export.h) come first, on their own.
void Artifacts(std::ostringstream& o, const json& r) {
  std::vector<std::string> exports, other;
  for (const auto& a : JsonAt(r, "artifacts")) {
    const std::string name = a.get<std::string>();
    (name.rfind("exports/", 0) == 0 ? exports : other).push_back(name);
  }
  auto link = [&](const std::string& name, const std::string& text) {
    o << "- [`" << text << "`](" << name << ")\n";
  };
  o << "## Artifacts\n\n";
  if (!exports.empty()) {
    o << "Engine exports of the chosen plan (each file names its engine and version, what that engine cannot "
         "do, and "
         "what you must supply; `EXPORTS.md` indexes them):\n\n";
    for (const std::string& e : exports) link(e, e.substr(std::string("exports/").size()));
    o << "\nOther files of this run:\n\n";
  }
  for (const std::string& a : other) link(a, a);
}

void Timeline(std::ostringstream& o, const json& r) {
  o << "## Stage timeline\n\n| stage | round | wall time | ok | summary |\n|---|---|---|---|---|\n";
  for (const auto& s : JsonAt(r, "timeline"))
    o << "| " << JsonStr(s, "stage") << " | " << JsonAt(s, "round").dump() << " | " << FmtSeconds(JsonAt(s, "seconds")) << " | "
      << (JsonTrue(JsonAt(s, "ok")) ? "yes" : "**no**") << " | " << Cell(JsonStr(s, "summary")) << " |\n";
  o << "\n";
  for (const auto& n : JsonAt(r, "notes")) o << "> note: " << n.get<std::string>() << "\n";
  if (!JsonAt(r, "notes").empty()) o << "\n";
  Artifacts(o, r);
}

}  // namespace

std::string RenderMarkdownReport(const nlohmann::json& report) {
  std::ostringstream o;
  Outcome(o, report);
  Model(o, report);
  Templates(o, report);
  Plan(o, report);
  Kernels(o, report);
  FusionsMarkdown(o, report);
  WeightsMarkdown(o, report);
  Probe(o, report);
  ImageProbeMarkdown(o, report);
  ProbeKernels(o, report);
  ProbeLayout(o, report);
  ProbeComparisonMarkdown(o, report);
  ExpertCommMarkdown(o, report);
  Decisions(o, report);
  Timeline(o, report);
  return o.str();
}

}  // namespace onboard::agent
