// Table test: every run of tests/data/measured_training_runs.json (copied from
// shared/reference/; NVIDIA Megatron-Bridge/NeMo/AutoModel tables, DeepSeek-V3, torchtitan) through
// EvaluatePlan with its HF config and exact layout. The rendered table is a golden file
// (tests/data/measured_runs_table.txt, regenerate with ONBOARD_REGEN_GOLDEN=1).
//
// Issue 13's targets are mean |error| <= 10%, every run within 20%, no run that ran predicted not to
// fit. The last is met; the other two are not over all 32 runs (search/README.md, "Calibration table"):
// AccuracyReached pins what the calibrated model reaches so that a change making it worse fails. Tighten
// these as the model improves; never loosen them to make a change pass.
#include <algorithm>
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

// Pinned over the 30 runs the table held before the second issue-13 pass (tightened as it moved: mean
// 11.3% -> 11.2% -> 10.8% with the softmax exponentials on the SFUs -> 10.7% with the experts' wgrad
// main-grad traffic and eager per-expert launches -> 9.85% with the fifth pass: 'w/o MTP' labels, PP sends
// overlapped under overlap_p2p_comm, ring collectives over every member's NIC); the run that pass brought
// in is pinned on its own below, so adding a run can neither hide nor excuse a regression on the others.
// The fifth pass moved two pins the wrong way, reported, not fitted: max 44.9% -> 46.3% (the mtp run's
// dense DP ring now crosses IB over 8 NICs) and 28 -> 27 within 20% (nemo2502-mixtral8x22b-b200-fp8
// +13.0% -> +23.0%: its interleaved PP sends are now hidden). The seventh pass (fp8 row padding of
// Megatron-Core's grouped experts where neither the router nor HybridEP padded: 9.78% -> 9.76%, max 45.9% ->
// 41.9%, 27 -> 28 within 20%: mb2604-qwen3-235b-b200-mxfp8 +23.2% -> +19.2%) tightened the last three.
// The ninth pass pinned the mtp run's recipe in the layout data (Megatron-Bridge@5776a6d9
// DEEPSEEK_V3_PRETRAIN_CONFIG_B200_BASE_CONFIG, every column of the row): a sourced input beats the
// unknown-recipe default even though it moves these two the wrong way (bf16 main grads from
// grad_reduce_in_fp32=False: +41.9% -> +45.1%, mean 9.76% -> 9.87%); loosened, reported, not fitted.
// The tenth pass charges the dispatcher's device-to-host sync once per forward of the MoE block, so twice
// under full recompute (Megatron-LM token_dispatcher.py: the sync sits in token_dispatch, which a
// recomputed forward runs again). mb2511-dsv3-gb200-bf16, whose unstated recompute is read as full,
// -17.9% -> -24.1%: mean 9.87% -> 10.06%, 28 -> 27 within 20%; loosened, reported, not fitted.
// The eleventh pass pinned two unpinned 25.11 rows by their workload presets (GBS taken from the command
// line; a field only where every preset version of the container's window agrees): mb2511-dsv3-gb200-bf16
// -24.1% -> +7.2% (precision-aware optimizer: selective recompute fits), mb2511-llama31-405b-b200-fp8cs
// +6.2% -> +20.3% (TP comm overlap, bf16 grads): mean 10.06% -> 9.96%, within 20% 27 -> 27; tightened.
constexpr double kMeanAbsErrReached = 0.095;  // target 0.10 (reached 9.45%)
constexpr double kMaxAbsErrReached = 0.432;  // target 0.20 (mb2511-dsv3-b200-mxfp8-mtp +43.1%, recipe pinned)
constexpr int kWithin20Reached = 29;         // of 30; target 30
constexpr int kNotFittingReached = 0;  // target 0: met on these 30
// Runs brought in after the 30 were pinned, each pinned on its own below.
const char* const kAddedRun = "dsv3-report-h800-2048";  // micro-batch not in its source: 1 assumed
// Eleventh pass: published as TFLOP/s only, read by Megatron-Core v0.9's count (tflops_count in the row).
const char* const kTflopsRun = "mcore-readme-mixtral8x7b-h100-bf16";

TEST(MeasuredRuns, AccuracyReached) {
  const CalibrationTable t = Table();
  EXPECT_EQ(t.evaluated, 32);
  int n = 0, within_20 = 0, not_fitting = 0;
  double sum = 0, worst = 0;
  for (const CalibrationRow& r : t.rows) {
    if (!r.evaluated || r.id == kAddedRun || r.id == kTflopsRun) continue;
    ++n;
    sum += std::fabs(r.err);
    worst = std::max(worst, std::fabs(r.err));
    within_20 += std::fabs(r.err) <= 0.20;
    not_fitting += !r.fits;
  }
  EXPECT_EQ(n, 30);
  EXPECT_LE(sum / n, kMeanAbsErrReached) << t.text;
  EXPECT_LE(worst, kMaxAbsErrReached) << t.worst_id;
  EXPECT_GE(within_20, kWithin20Reached) << t.text;
  EXPECT_LE(not_fitting, kNotFittingReached) << t.text;
}

// The row of run `id`, or null (the caller fails the test).
const CalibrationRow* RowOf(const CalibrationTable& t, const std::string& id) {
  for (const CalibrationRow& r : t.rows)
    if (r.id == id) return &r;
  return nullptr;
}

// The DeepSeek-V3 report's run (DualPipe, RMSNorm and MLA up-projection recompute, fp8 SwiGLU inputs,
// bf16 AdamW moments beside fp32 master weights and grads, sec. 3.3.3): within 20% (reached +19.4%),
// and it fits (72.5 of 73.6 GiB; 73.9, not fitting, while the moments were fp32).
TEST(MeasuredRuns, DeepSeekReportRunReached) {
  const CalibrationTable t = Table();
  const CalibrationRow* r = RowOf(t, kAddedRun);
  ASSERT_NE(r, nullptr) << kAddedRun << " not in the table";
  ASSERT_TRUE(r->evaluated) << r->note;
  EXPECT_LE(std::fabs(r->err), 0.20);
  EXPECT_TRUE(r->fits) << r->mem_gib << " of " << r->usable_gib << " GiB";
}

// The Megatron-Core MoE README's Mixtral 8x7B row (468 TFLOP/s/GPU "as of MCore v0.9", 5643 tokens/s/GPU by
// that version's count): within 20% (reached +6.4%), and it fits.
TEST(MeasuredRuns, TflopsOnlyRunReached) {
  const CalibrationTable t = Table();
  const CalibrationRow* r = RowOf(t, kTflopsRun);
  ASSERT_NE(r, nullptr) << kTflopsRun << " not in the table";
  ASSERT_TRUE(r->evaluated) << r->note;
  EXPECT_NEAR(r->measured_tps, 5643.47, 0.01);
  EXPECT_LE(std::fabs(r->err), 0.20);
  EXPECT_TRUE(r->fits);
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
  EXPECT_EQ(skipped, 1);  // hardware not in the catalog (a 500 W H100 no datasheet rates)
}

}  // namespace
}  // namespace onboard
