// Calibration table (see calibration_table.h): one row per measured run, then the statistics.
#include "search/calibration_table.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace onboard {
namespace {

constexpr double kGiB = 1073741824.0;

std::string LayoutText(const LayoutRun& r) {
  const Plan& p = r.plan;
  std::ostringstream os;
  os << r.topology.device.name << " x" << r.topology.num_devices << " tp" << p.deg.tp << " pp" << p.deg.pp
     << " vp" << p.deg.interleave << " cp" << p.deg.cp << " ep" << p.deg.ep << " dp"
     << p.deg.dp_shard * p.deg.dp_replicate << (p.zero_stage >= 3 ? "(fsdp)" : "") << " mb" << p.micro_batch
     << "x" << p.num_micro_batches << " " << PrecisionName(p.compute_dtype);
  return os.str();
}

std::string Row(const CalibrationRow& r) {
  char b[512];
  if (!r.evaluated) {
    std::snprintf(b, sizeof b, "%-38s %-58s %9s %9s %7s  skipped: %s\n", r.id.c_str(), r.layout.c_str(), "-", "-",
                  "-", r.note.c_str());
  } else {
    std::snprintf(b, sizeof b, "%-38s %-58s %9.0f %9.0f %+6.1f%%  %s %5.1f/%5.1f GiB%s%s\n", r.id.c_str(),
                  r.layout.c_str(), r.predicted_tps, r.measured_tps, 100 * r.err, r.fits ? "fits" : "OOM!",
                  r.mem_gib, r.usable_gib, r.note.empty() ? "" : "  ", r.note.c_str());
  }
  return b;
}

}  // namespace

void ResolveUnstatedRecompute(LayoutRun* run) {
  if (!run->recompute_unstated || !run->skipped.empty()) return;
  const PlanRequest req = RequestForRun(*run);
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    Plan p = run->plan;
    p.recompute =
        r == Recompute::kSelective ? CoreAttnRecompute() : std::map<std::string, Recompute>{{"*", r}};
    auto est = EvaluatePlan(req, p);
    if (!est.ok()) return;
    if (est->fits || r == Recompute::kFull) {
      run->plan = p;
      run->assumptions.push_back(std::string("recompute not stated: ") + RecomputeName(r) + ", the lightest that fits");
      return;
    }
  }
}

CalibrationRow MakeCalibrationRow(const LayoutRun& run, const PlanEstimate* est) {
  CalibrationRow row;
  row.id = run.id;
  row.layout = run.skipped.find("hardware") == 0 ? run.id : LayoutText(run);
  if (!est) {
    row.note = run.skipped.empty() ? "no tokens/s measured" : run.skipped;
    return row;
  }
  row.evaluated = true;
  row.predicted_tps = est->tokens_per_s / static_cast<double>(run.topology.num_devices);
  row.measured_tps = *run.measured_tokens_per_s_per_gpu;
  row.err = row.predicted_tps / row.measured_tps - 1;
  row.fits = est->fits;
  row.mem_gib = est->memory.total / kGiB;
  row.usable_gib = est->memory.usable() / kGiB;
  if (!run.uncertain.empty()) row.note = "(source caveat)";
  return row;
}

CalibrationTable TabulateCalibrationRows(std::vector<CalibrationRow> rows) {
  CalibrationTable t;
  std::ostringstream os;
  char head[256];
  std::snprintf(head, sizeof head, "%-38s %-58s %9s %9s %7s  %s\n", "run", "layout", "predicted", "measured", "error",
                "memory (worst stage / usable)");
  os << head;
  double sum = 0;
  for (const CalibrationRow& row : rows) {
    os << Row(row);
    if (!row.evaluated) continue;
    ++t.evaluated;
    const double a = std::fabs(row.err);
    sum += a;
    if (a <= 0.10) ++t.within_10;
    if (a <= 0.20) ++t.within_20;
    if (!row.fits) ++t.not_fitting;
    if (a > t.max_abs_err) {
      t.max_abs_err = a;
      t.worst_id = row.id;
    }
  }
  t.mean_abs_err = t.evaluated > 0 ? sum / t.evaluated : 0;
  char tail[512];
  std::snprintf(
      tail, sizeof tail,
      "evaluated %d of %zu runs: mean |error| %.1f%%, max %.1f%% (%s), within 10%%: %d, within 20%%: %d, "
      "predicted not to fit: %d\n",
      t.evaluated, rows.size(), 100 * t.mean_abs_err, 100 * t.max_abs_err, t.worst_id.c_str(), t.within_10,
      t.within_20, t.not_fitting);
  os << tail;
  t.text = os.str();
  t.rows = std::move(rows);
  return t;
}

Expected<CalibrationTable> BuildCalibrationTable(const std::vector<LayoutRun>& input,
                                                 bool unfused_framework) {
  std::vector<LayoutRun> runs = input;
  std::vector<CalibrationRow> rows;
  for (LayoutRun& run : runs) {
    ResolveUnstatedRecompute(&run);
    if (!run.skipped.empty() || !run.measured_tokens_per_s_per_gpu) {
      rows.push_back(MakeCalibrationRow(run, nullptr));
      continue;
    }
    PlanRequest req = RequestForRun(run);
    req.unfused_framework = unfused_framework;
    auto est = EvaluatePlan(req, run.plan);
    if (!est.ok()) return Status(est.status().code(), run.id + ": " + est.status().message());
    rows.push_back(MakeCalibrationRow(run, &*est));
  }
  return TabulateCalibrationRows(std::move(rows));
}

}  // namespace onboard
