// Table test: every run of tests/data/measured_training_runs.json (copied from
// shared/reference/; NVIDIA Megatron-Bridge/NeMo/AutoModel tables, DeepSeek-V3, torchtitan) through
// EvaluatePlan with its HF config and exact layout. The rendered table is a golden file
// (tests/data/measured_runs_table.txt, regenerate with ONBOARD_REGEN_GOLDEN=1).
//
// Issue 13's targets are mean |error| <= 10%, every run within 20%, no run that ran predicted not to
// fit. The first two are NOT met yet (search/README.md, "Calibration table"): AccuracyReached pins what the
// calibrated model reaches so that a change making it worse fails. Tighten these as the model
// improves; never loosen them to make a change pass.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "search/calibration_table.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

const std::string kRuns = std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json";
const std::string kGolden = std::string(ONBOARD_TEST_DATA) + "/measured_runs_table.txt";

CalibrationTable Table() {
  auto runs = LoadLayoutFile(kRuns);
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  if (!runs.ok()) return {};
  EXPECT_EQ(runs->size(), 33u);
  auto t = BuildCalibrationTable(*runs);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : CalibrationTable{};
}

TEST(MeasuredRuns, TableMatchesGolden) {
  const CalibrationTable t = Table();
  std::cout << t.text;
  if (std::getenv("ONBOARD_REGEN_GOLDEN")) {
    std::ofstream(kGolden) << t.text;
    GTEST_SKIP() << "regenerated " << kGolden;
  }
  std::ifstream in(kGolden);
  ASSERT_TRUE(in) << "missing golden " << kGolden << " (ONBOARD_REGEN_GOLDEN=1)";
  std::stringstream want;
  want << in.rdbuf();
  EXPECT_EQ(t.text, want.str());
}

constexpr double kMeanAbsErrReached = 0.114;  // target 0.10 (reached 11.3%)
constexpr double kMaxAbsErrReached =
    0.52;                              // target 0.20 (mb2511-dsv3-b200-mxfp8-mtp +51.1%, recipe not pinned)
constexpr int kWithin20Reached = 27;   // of 30; target 30
constexpr int kNotFittingReached = 0;  // target 0: met (Llama-405B GB200 fits with the bf16 grad buffer
                                       // and the replayed interleaved schedule)

TEST(MeasuredRuns, AccuracyReached) {
  const CalibrationTable t = Table();
  EXPECT_EQ(t.evaluated, 30);
  EXPECT_LE(t.mean_abs_err, kMeanAbsErrReached) << t.text;
  EXPECT_LE(t.max_abs_err, kMaxAbsErrReached) << t.worst_id;
  EXPECT_GE(t.within_20, kWithin20Reached) << t.text;
  EXPECT_LE(t.not_fitting, kNotFittingReached) << t.text;
}

// The runs the layout format cannot express are skipped with their reason, never silently.
TEST(MeasuredRuns, SkippedRunsSayWhy) {
  const CalibrationTable t = Table();
  int skipped = 0;
  for (const CalibrationRow& r : t.rows) {
    if (r.evaluated) continue;
    ++skipped;
    EXPECT_FALSE(r.note.empty()) << r.id;
  }
  EXPECT_EQ(skipped, 3);
}

}  // namespace
}  // namespace onboard
