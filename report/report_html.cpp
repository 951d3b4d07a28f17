// report.html renderer (see report/report_html.h). No JavaScript: charts are inline SVG
// (report/svg_charts.h), styling is one inline <style> block.
#include "report/report_html.h"

#include <cmath>
#include <sstream>

#include "report/expert_comm_section.h"
#include "report/fusion_section.h"
#include "report/image_section.h"
#include "report/probe_comparison_section.h"
#include "report/report_format.h"
#include "report/svg_charts.h"
#include "report/weights_section.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

std::string E(const std::string& s) { return XmlEscape(s); }
double D(const json& j) { return j.is_number() ? j.get<double>() : std::nan(""); }
std::vector<double> Vec(const json& a) {
  std::vector<double> v;
  for (const auto& x : a) v.push_back(D(x));
  return v;
}

// A table: header cells, then rows of already-escaped cells.
class Table {
 public:
  explicit Table(std::vector<std::string> head) : head_(std::move(head)) {}
  void Row(std::vector<std::string> cells, const std::string& cls = "") { rows_.push_back({std::move(cells), cls}); }
  std::string Html() const {
    std::ostringstream o;
    o << "<table><tr>";
    for (const auto& h : head_) o << "<th>" << E(h) << "</th>";
    o << "</tr>";
    for (const auto& [cells, cls] : rows_) {
      o << "<tr" << (cls.empty() ? "" : " class=\"" + cls + "\"") << ">";
      for (const auto& c : cells) o << "<td>" << c << "</td>";
      o << "</tr>";
    }
    o << "</table>";
    return o.str();
  }

 private:
  std::vector<std::string> head_;
  std::vector<std::pair<std::vector<std::string>, std::string>> rows_;
};

const char* kStyle =
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1220px;color:#222}"
    "h1{font-size:24px}h2{font-size:19px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:30px}"
    "table{border-collapse:collapse;margin:8px 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;"
    "text-align:left;vertical-align:top;overflow-wrap:anywhere}th{background:#f0f0f0}tr.bad td{background:#fde2e2}tr.warn td{background:#fff4d6}"
    "code{background:#f4f4f4;padding:1px 4px;border-radius:3px}.charts{display:flex;flex-wrap:wrap;gap:12px}"
    ".chart{border:1px solid #ddd}.kv{display:grid;grid-template-columns:220px auto;gap:2px 12px;font-size:14px}"
    ".decision{border-left:4px solid #1f77b4;padding:4px 10px;margin:8px 0;background:#f7fbff;font-size:13px;"
    "overflow-wrap:anywhere}"
    ".flag{color:#b00;font-weight:bold}";

void Header(std::ostringstream& o, const json& r) {
  const json& m = JsonAt(r, "model");
  const json& t = JsonAt(r, "topology");
  const json& out = JsonAt(r, "outcome");
  const json& p = JsonAt(r, "plan");
  o << "<h1>Onboarding report: " << E(JsonStr(m, "name")) << "</h1><div class=\"kv\">";
  o << "<div>Topology</div><div>" << E(JsonStr(t, "name")) << " (" << JsonAt(t, "devices").dump() << " x "
    << E(JsonStr(JsonAt(t, "device"), "name")) << ")</div>";
  o << "<div>Mode</div><div>" << E(JsonStr(JsonAt(r, "request"), "mode")) << ", LoRA rank "
    << JsonAt(JsonAt(r, "request"), "lora_rank").dump() << ", seq " << JsonAt(JsonAt(r, "request"), "seq").dump() << "</div>";
  if (p.is_object())
    o << "<div>Chosen plan</div><div><code>" << E(JsonStr(JsonAt(p, "chosen"), "summary")) << "</code>"
      << (JsonTrue(JsonAt(p, "feasible")) ? "" : " <span class=\"flag\">NOTHING FITS: closest plan shown</span>") << "</div>";
  o << "<div>Probe</div><div>" << JsonAt(out, "probe_rounds").dump() << " round(s), "
    << (JsonTrue(JsonAt(out, "converged")) ? "converged" : "<span class=\"flag\">not converged</span>") << "</div>";
  if (JsonAt(out, "image_learned").is_boolean())  // a model with a vision tower (report/image_section.h)
    o << "<div>Image path</div><div>"
      << (JsonTrue(JsonAt(out, "image_learned")) ? "learned" : "<span class=\"flag\">NOT learned</span>")
      << "</div>";
  o << "<div>Agent decisions</div><div>" << JsonAt(out, "decisions").dump() << "</div>";
  o << "<div>Unknown modules</div><div>"
    << (D(JsonAt(out, "unknown_modules")) > 0 ? "<span class=\"flag\">" + JsonAt(out, "unknown_modules").dump() + "</span>" : "0")
    << "</div></div>";
}

void Model(std::ostringstream& o, const json& r) {
  const json& m = JsonAt(r, "model");
  o << "<h2>Model</h2><p><code>" << E(JsonStr(m, "model_type")) << "</code> / <code>" << E(JsonStr(m, "architecture"))
    << "</code>: " << JsonAt(m, "layers").dump() << " layers, hidden " << JsonAt(m, "hidden").dump() << ", vocab "
    << JsonAt(m, "vocab").dump() << ", context " << JsonAt(m, "max_position").dump() << " tokens</p><ul>";
  for (const auto& l : JsonAt(m, "summary")) o << "<li>" << E(l.get<std::string>()) << "</li>";
  o << "</ul>";
  Table t({"total params", "active params", "vision params", "weights", "forward FLOPs/token"});
  t.Row({FmtCount(JsonAt(m, "total_params")), FmtCount(JsonAt(m, "active_params")), FmtCount(JsonAt(m, "vision_params")),
         E(FmtGiB(JsonAt(m, "weight_bytes"))), FmtCount(JsonAt(m, "flops_per_token"))});
  o << t.Html();
  for (const auto& w : JsonAt(m, "warnings")) o << "<p class=\"flag\">warning: " << E(w.get<std::string>()) << "</p>";
}

void Templates(std::ostringstream& o, const json& r) {
  o << "<h2>Module templates</h2>";
  Table t({"module", "kind", "layers", "detail", "template", "kernel"});
  for (const auto& m : JsonAt(JsonAt(r, "templates"), "modules")) {
    const json& tp = JsonAt(m, "template");
    if (tp.is_null()) {
      t.Row({E(JsonStr(m, "module")), E(JsonStr(m, "kind")), E(JsonStr(m, "layers")), E(JsonStr(m, "detail")),
             "<span class=\"flag\">UNKNOWN</span>", E(JsonStr(m, "unknown"))},
            "bad");
      continue;
    }
    t.Row({E(JsonStr(m, "module")), E(JsonStr(m, "kind")), E(JsonStr(m, "layers")), E(JsonStr(m, "detail")),
           E(JsonStr(tp, "name")), E(JsonStr(tp, "kernel").empty() ? "(library)" : JsonStr(tp, "kernel"))});
  }
  o << t.Html();
}

void Plan(std::ostringstream& o, const json& r) {
  const json& p = JsonAt(r, "plan");
  if (!p.is_object()) return;
  const json& ch = JsonAt(p, "chosen");
  const json& e = JsonAt(ch, "estimate");
  const json& mem = JsonAt(e, "memory");
  o << "<h2>Chosen plan</h2><p><code>" << E(JsonStr(ch, "summary")) << "</code></p>";
  Table t({"step", "tokens/s", "MFU", "exposed comm", "bubble", "memory/device", "fits"});
  t.Row({FmtSeconds(JsonAt(e, "step_s")), FmtSig(JsonAt(e, "tokens_per_s")), FmtPct(JsonAt(e, "mfu")),
         FmtSeconds(JsonAt(e, "exposed_comm_s")), FmtSeconds(JsonAt(e, "bubble_s")), FmtGiB(JsonAt(mem, "total")),
         JsonTrue(JsonAt(e, "fits")) ? "yes" : "<span class=\"flag\">no</span>"});
  o << t.Html() << "<h3>Why this plan</h3><ul>";
  for (const auto& w : JsonAt(p, "why")) o << "<li>" << E(w.get<std::string>()) << "</li>";
  for (const auto& n : JsonAt(e, "notes")) o << "<li>" << E(n.get<std::string>()) << "</li>";
  o << "</ul>";
  Table terms({"term", "exposed", "total", "tier", "formula"});
  for (const auto& x : JsonAt(e, "time_terms"))
    terms.Row({E(JsonStr(x, "name")), FmtSeconds(JsonAt(x, "exposed_s")), FmtSeconds(JsonAt(x, "total_s")),
               E(JsonStr(x, "tier")), E(JsonStr(x, "formula"))});
  o << terms.Html();

  // Charts: memory per device (chosen vs runners-up) and the Pareto front.
  const char* parts[] = {"weights", "grads", "optimizer", "activations", "a2a_buffers", "workspace"};
  std::vector<std::string> bars = {"chosen"};
  std::vector<std::vector<double>> values;
  auto stack = [&](const json& m) {
    std::vector<double> v;
    for (const char* k : parts) v.push_back(D(JsonAt(m, k)) / (1024.0 * 1024 * 1024));
    values.push_back(v);
  };
  stack(mem);
  int i = 0;
  for (const auto& c : JsonAt(p, "runners_up")) {
    if (++i > 4) break;
    bars.push_back("runner-up " + std::to_string(i));
    stack(JsonAt(JsonAt(c, "estimate"), "memory"));
  }
  std::vector<SvgPoint> front;
  for (const auto& c : JsonAt(p, "pareto"))
    front.push_back({D(JsonAt(c, "memory_bytes")) / (1024.0 * 1024 * 1024), D(JsonAt(c, "step_s")), JsonStr(c, "summary"),
                     JsonStr(c, "summary") == JsonStr(ch, "summary")});
  double usable = (D(JsonAt(mem, "capacity")) - D(JsonAt(mem, "margin"))) / (1024.0 * 1024 * 1024);
  o << "<div class=\"charts\">"
    << SvgStackedBars("Memory per device (GiB)", bars, {"weights", "grads", "optimizer", "activations", "a2a buffers", "workspace"},
                      values, "GiB", usable, "usable HBM")
    << SvgScatter("Plan Pareto front", front, "memory per device (GiB)", "step time (s)") << "</div>";

  o << "<h2>Alternatives</h2><p>Searched " << JsonAt(p, "candidates_enumerated").dump() << " layouts, costed "
    << JsonAt(p, "candidates_evaluated").dump() << ".</p>";
  Table ru({"runner-up", "step", "MFU", "memory/device", "fits"});
  for (const auto& c : JsonAt(p, "runners_up")) {
    const json& ce = JsonAt(c, "estimate");
    ru.Row({"<code>" + E(JsonStr(c, "summary")) + "</code>", FmtSeconds(JsonAt(ce, "step_s")), FmtPct(JsonAt(ce, "mfu")),
            FmtGiB(JsonAt(JsonAt(ce, "memory"), "total")), JsonTrue(JsonAt(ce, "fits")) ? "yes" : "no"});
  }
  o << ru.Html();
  Table rej({"rejected because", "count", "example"});
  for (const auto& g : JsonAt(p, "rejected"))
    rej.Row({E(JsonStr(g, "reason")), JsonAt(g, "count").dump(), E(JsonStr(g, "example"))});
  o << rej.Html();
  if (JsonAt(p, "rounds").size() > 1) {
    Table pr({"plan round", "reason", "plan", "step", "memory", "imbalance", "recompute", "margin"});
    for (const auto& x : JsonAt(p, "rounds"))
      pr.Row({JsonAt(x, "round").dump(), E(JsonStr(x, "reason")), "<code>" + E(JsonStr(x, "summary")) + "</code>",
              FmtSeconds(JsonAt(x, "step_s")), FmtGiB(JsonAt(x, "memory_bytes")), FmtFixed(JsonAt(x, "expert_imbalance"), 2),
              E(JsonStr(x, "recompute_constraint").empty() ? "searched" : JsonStr(x, "recompute_constraint")),
              FmtPct(JsonAt(x, "memory_margin"))});
    o << pr.Html();
  }
}

void Kernels(std::ostringstream& o, const json& r) {
  const json& k = JsonAt(r, "kernels");
  o << "<h2>Kernels</h2>";
  if (!JsonTrue(JsonAt(k, "ran"))) {
    o << "<p>Not generated: " << E(JsonStr(k, "skipped_reason")) << "</p>";
    return;
  }
  o << "<p>" << JsonAt(k, "generated").size() << " kernels generated (sources and manifests in <code>kernels/</code>); "
    << JsonAt(k, "passed").dump() << "/" << JsonAt(k, "total").dump() << " checks passed.</p>";
  Table t({"kernel", "shape", "against", "rel err", "state err", "tol", "pass", "note"});
  for (const auto& row : JsonAt(k, "rows"))
    t.Row({E(JsonStr(row, "kernel")), E(JsonStr(row, "shape")), E(JsonStr(row, "against")), FmtSig(JsonAt(row, "rel_err")),
           FmtSig(JsonAt(row, "state_err")), FmtSig(JsonAt(row, "tol")), JsonTrue(JsonAt(row, "pass")) ? "yes" : "<b>FAIL</b>",
           E(JsonStr(row, "note"))},
          JsonTrue(JsonAt(row, "pass")) ? "" : "bad");
  o << t.Html();
  for (const auto& [kernel, ref] : JsonAt(k, "fallbacks").items())
    o << "<p class=\"flag\">Fallback: <code>" << E(kernel) << "</code> failed its check; the module runs the reference operator <code>"
      << E(ref.get<std::string>()) << "</code>.</p>";
}

// What each round's KDA layers ran, its DSA kernel choice and round 1's kernel loss parity (issue 12).
void ProbeKernels(std::ostringstream& o, const json& r) {
  if (!AnyProbeKernelRecord(r)) return;
  const json& rounds = JsonAt(JsonAt(r, "probe"), "rounds");
  o << "<h3>Kernels in the probe: KDA ops run, loss parity</h3>";
  Table t({"round", "kda_kernel", "KDA forward calls (generated / torch ops)", "dsa_kernel",
           "loss parity (generated vs reference ops)"});
  for (const auto& pr : rounds) {
    if (pr.contains("error")) continue;
    const json& calls = JsonAt(pr, "kda_calls");
    std::string parity;
    bool failed = false;
    for (const auto& lp : JsonAt(pr, "loss_parity")) {
      failed = failed || !JsonTrue(JsonAt(lp, "pass"));
      parity += (parity.empty() ? "" : "; ") + std::string(JsonTrue(JsonAt(lp, "pass")) ? "ok" : "FAIL") +
                " (" + E(JsonStr(lp, "kernel")) + ", " + JsonAt(lp, "steps").dump() +
                " steps, max relative difference " + FmtSig(JsonAt(lp, "max_rel")) + " at step " +
                JsonAt(lp, "worst_step").dump() + ", tolerance " + FmtSig(JsonAt(lp, "tolerance")) + ")";
    }
    t.Row({JsonAt(pr, "round").dump(), E(JsonStr(JsonAt(pr, "config"), "kda_kernel")),
           JsonAt(calls, "generated").dump() + " / " + JsonAt(calls, "torch").dump(),
           E(JsonStr(JsonAt(pr, "config"), "dsa_kernel")), parity.empty() ? "not run" : parity},
          failed ? "bad" : "");
  }
  o << t.Html();
}

// The plan's layout beside the probe's (the last round's), factor by factor.
void ProbeLayout(std::ostringstream& o, const json& r) {
  const json& rounds = JsonAt(JsonAt(r, "probe"), "rounds");
  if (rounds.empty() || !rounds.back().contains("layout")) return;
  o << "<h3>Probe layout beside the plan</h3>";
  Table t({"factor", "plan", "probe", "why not kept"});
  for (const auto& f : JsonAt(rounds.back()["layout"], "factors"))
    t.Row({E(JsonStr(f, "factor")), E(JsonStr(f, "plan")), E(JsonStr(f, "probe")),
           JsonStr(f, "reason").empty() ? "kept" : E(JsonStr(f, "reason"))},
          JsonStr(f, "reason").empty() ? "" : "warn");
  o << t.Html();
}

void Probe(std::ostringstream& o, const json& r) {
  const json& rounds = JsonAt(JsonAt(r, "probe"), "rounds");
  o << "<h2>Probe evidence</h2>";
  if (rounds.empty()) {
    o << "<p>No probe ran.</p>";
    return;
  }
  std::vector<SvgSeries> loss, grad;
  Table t({"round", "proxy", "ranks/ep", "lr", "clip", "loss first -> last", "verdict", "rank imbalance", "comm share",
           "peak mem (predicted)"});
  for (const auto& pr : rounds) {
    std::string name = "round " + JsonAt(pr, "round").dump();
    if (pr.contains("error")) {
      t.Row({JsonAt(pr, "round").dump(), "failed: " + E(JsonStr(pr, "error")), "", "", "", "", "", "", "", ""}, "bad");
      continue;
    }
    SvgSeries l{name, {}, Vec(JsonAt(pr, "loss"))}, g{name, {}, Vec(JsonAt(pr, "grad_norm"))};
    for (size_t i = 0; i < l.y.size(); ++i) l.x.push_back(static_cast<double>(i + 1));
    g.x = l.x;
    loss.push_back(l);
    grad.push_back(g);
    // The task's no-learning loss as a flat line beside the curve: learning = well below it.
    const json& base = JsonAt(JsonAt(pr, "baselines"), "no_learning_nats");
    if (base.is_number() && !l.x.empty())
      loss.push_back({name + " baseline",  // legend names keep 20 chars
                      {l.x.front(), l.x.back()},
                      {base.get<double>(), base.get<double>()}});
    const json& ls = JsonAt(pr, "loss");
    const json& cfg = JsonAt(pr, "config");
    t.Row({JsonAt(pr, "round").dump(), E(JsonStr(pr, "proxy")),
           JsonAt(cfg, "ranks").dump() + "/" + JsonAt(cfg, "ep").dump(), FmtSig(JsonAt(cfg, "lr")),
           FmtSig(JsonAt(cfg, "clip")),
           ls.empty() ? "-" : FmtFixed(ls.front(), 3) + " -> " + FmtFixed(ls.back(), 3),
           E(JsonStr(pr, "convergence")) + " (" + E(JsonStr(JsonAt(pr, "skill"), "metric")) + " " +
               FmtPct(JsonAt(JsonAt(pr, "skill"), "value")) + ")",
           FmtFixed(JsonAt(pr, "rank_imbalance"), 2), FmtPct(JsonAt(JsonAt(pr, "measured"), "comm_share")),
           FmtGiB(JsonAt(JsonAt(pr, "measured"), "peak_bytes")) + " (" +
               FmtGiB(JsonAt(JsonAt(pr, "predicted"), "memory_bytes")) + ")"},
          JsonStr(pr, "convergence") == "converged" ? "" : "warn");
  }
  o << "<div class=\"charts\">" << SvgLineChart("Probe loss per round", loss, "step", "loss (nats)")
    << SvgLineChart("Gradient norm per round", grad, "step", "grad norm", true) << "</div>" << t.Html() << "<ul>";
  for (const auto& pr : rounds)
    for (const auto& c : JsonAt(pr, "checks")) o << "<li>round " << JsonAt(pr, "round").dump() << ": " << E(c.get<std::string>()) << "</li>";
  o << "</ul>";

  // Expert load: before/after placement when the rule fired, else the last round's loads.
  const json& eb = JsonAt(r, "expert_balance");
  std::vector<std::string> names;
  std::vector<std::vector<double>> vals;
  std::vector<std::string> cats;
  if (eb.is_object()) {
    names = {"before", "predicted after"};
    vals = {Vec(JsonAt(eb, "before")), Vec(JsonAt(eb, "predicted_after"))};
    if (eb.contains("measured_after")) {
      names.push_back("measured after");
      vals.push_back(Vec(JsonAt(eb, "measured_after")));
    }
    for (size_t i = 0; i < vals[0].size(); ++i) cats.push_back("rank " + std::to_string(i));
    o << "<h3>Expert load before/after placement</h3><p>" << E(JsonStr(eb, "action")) << "</p>";
    Table bt({"", "max/mean per EP rank"});
    bt.Row({"before (round " + JsonAt(eb, "round").dump() + ")", FmtFixed(JsonAt(eb, "before_max_over_mean"), 3)});
    bt.Row({"predicted after", FmtFixed(JsonAt(eb, "predicted_max_over_mean"), 3)});
    if (eb.contains("measured_after")) bt.Row({"measured after", FmtFixed(JsonAt(eb, "measured_after_max_over_mean"), 3)});
    o << bt.Html();
  }
  const json& last = rounds.back();
  std::vector<double> experts = Vec(JsonAt(last, "expert_load"));
  std::vector<std::string> ecats;
  for (size_t i = 0; i < experts.size(); ++i) ecats.push_back("e" + std::to_string(i));
  o << "<div class=\"charts\">";
  if (!cats.empty()) o << SvgGroupedBars("Routed tokens per EP rank", cats, names, vals, "tokens");
  o << SvgGroupedBars("Routed tokens per expert (last round)", ecats, {"round " + JsonAt(last, "round").dump()}, {experts}, "tokens")
    << "</div>";
}

void Decisions(std::ostringstream& o, const json& r) {
  o << "<h2>Agent decisions</h2>";
  if (JsonAt(r, "decisions").empty()) o << "<p>No rule fired.</p>";
  for (const auto& d : JsonAt(r, "decisions"))
    o << "<div class=\"decision\"><b>round " << JsonAt(d, "round").dump() << ", rule <code>" << E(JsonStr(d, "rule"))
      << "</code></b> (" << E(JsonStr(d, "family")) << "): " << E(JsonStr(d, "action")) << "<br>observed: "
      << E(CompactJson(JsonAt(d, "observed"))) << "<br>threshold: " << E(JsonStr(d, "threshold")) << "<br>changed: "
      << E(CompactJson(JsonAt(d, "changed"))) << "</div>";
  Table t({"round", "stage", "observed", "outcome"});
  for (const auto& ob : JsonAt(r, "observations"))
    t.Row({JsonAt(ob, "round").dump(), E(JsonStr(ob, "stage")), E(CompactJson(JsonAt(ob, "observed"))), E(JsonStr(ob, "outcome"))});
  o << t.Html();
}

void Timeline(std::ostringstream& o, const json& r) {
  o << "<h2>Stage timeline</h2>";
  std::vector<SvgSpan> spans;
  Table t({"stage", "round", "wall time", "ok", "summary"});
  for (const auto& s : JsonAt(r, "timeline")) {
    spans.push_back({JsonStr(s, "stage"), D(JsonAt(s, "start_s")), D(JsonAt(s, "seconds")), JsonTrue(JsonAt(s, "ok")),
                     JsonStr(s, "stage") + " round " + JsonAt(s, "round").dump() + ": " + FmtSeconds(JsonAt(s, "seconds"))});
    t.Row({E(JsonStr(s, "stage")), JsonAt(s, "round").dump(), FmtSeconds(JsonAt(s, "seconds")), JsonTrue(JsonAt(s, "ok")) ? "yes" : "no",
           E(JsonStr(s, "summary"))},
          JsonTrue(JsonAt(s, "ok")) ? "" : "bad");
  }
  for (auto& s : spans)
    if (!(s.start >= 0)) s.start = 0;
  o << SvgTimeline("Stage timeline", spans) << t.Html();
  for (const auto& n : JsonAt(r, "notes")) o << "<p>note: " << E(n.get<std::string>()) << "</p>";
  o << "<h2>Artifacts</h2><ul>";
  for (const auto& a : JsonAt(r, "artifacts")) {
    std::string name = a.get<std::string>();
    o << "<li><a href=\"" << E(name) << "\">" << E(name) << "</a></li>";
  }
  o << "</ul>";
}

}  // namespace

std::string RenderHtmlReport(const nlohmann::json& report) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Onboarding report: "
    << E(JsonStr(JsonAt(report, "model"), "name")) << "</title><style>" << kStyle << "</style></head><body>";
  Header(o, report);
  Model(o, report);
  Templates(o, report);
  Plan(o, report);
  Kernels(o, report);
  FusionsHtml(o, report);
  WeightsHtml(o, report);
  Probe(o, report);
  ImageProbeHtml(o, report);
  ProbeKernels(o, report);
  ProbeLayout(o, report);
  ProbeComparisonHtml(o, report);
  ExpertCommHtml(o, report);
  Decisions(o, report);
  Timeline(o, report);
  o << "</body></html>\n";
  return o.str();
}

}  // namespace onboard::agent
