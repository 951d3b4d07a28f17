// The calibration table: every run of a measured-runs file (layout form (c), search/layout_file.h)
// through EvaluatePlan, predicted vs measured tokens/s per GPU, and the error statistics. Used by
// the table test (tests/search/measured_runs_test.cpp, golden tests/data/measured_runs_table.txt),
// bench/ and `onboard plan --evaluate`.
// Units: tokens/s per GPU, GiB, fractions (err = predicted / measured - 1).
#pragma once

#include <string>
#include <vector>

#include "search/layout_file.h"
#include "search/planner.h"

namespace onboard {

struct CalibrationRow {
  std::string id;
  std::string layout;              // "GB300 x256 tp1 pp2 vp8 cp1 ep32 mb2 mxfp8"
  bool evaluated = false;          // false: skipped (reason in `note`)
  double predicted_tps = 0, measured_tps = 0, err = 0;
  bool fits = false;
  double mem_gib = 0, usable_gib = 0;
  std::string note;                // skip reason, or the source's caveat
};

struct CalibrationTable {
  std::vector<CalibrationRow> rows;
  int evaluated = 0, within_10 = 0, within_20 = 0, not_fitting = 0;
  double mean_abs_err = 0, max_abs_err = 0;
  std::string worst_id;
  std::string text;                // the rendered table (stable: no timings)
};

// For a run whose source does not state its recompute: the lightest of none, selective, full (every
// block) that fits, recorded in run->assumptions. No-op when the recompute was stated.
void ResolveUnstatedRecompute(LayoutRun* run);

// One row: `est` is the run's estimate, or null for a run not evaluated (skipped, or no tokens/s
// measured; the note says which).
CalibrationRow MakeCalibrationRow(const LayoutRun& run, const PlanEstimate* est);
// The rendered table and its statistics over `rows`, in their order.
CalibrationTable TabulateCalibrationRows(std::vector<CalibrationRow> rows);

// Evaluates every run; an invalid plan for a run is an error naming the run. unfused_framework: every
// run costed with its framework fusion chains unfused (PlanRequest::unfused_framework; the recompute of
// runs that do not state it is resolved as without it, so both tables evaluate the same plans).
Expected<CalibrationTable> BuildCalibrationTable(const std::vector<LayoutRun>& runs,
                                                 bool unfused_framework = false);

}  // namespace onboard
