// Pipeline parallelism in the probe (backends/probe_pipeline.h) is the same computation as one
// process: real worker processes over Gloo, activations and gradients by c10d send/recv, fp32,
// a fixed micro-batch of 2 sequences (4 micro-batches per step), 12 steps.
//   - 2 processes pp=2 (1F1B), and pp=2 x interleave=2, vs 1 process;
//   - 4 processes pp=2 x fsdp=2 x ep=2 vs 1 process.
// Every unit sums its micro-batch gradients in the one-process order (ordered_sum.h), so the
// curves must agree under the 1e-4; they agree bit for bit (asserted: 0).
// With tensor parallelism too (the rank order of backends/probe.h: pp outermost, data ranks, tp
// innermost): 4 processes tp=2 x pp=2, and 8 processes tp=2 x pp=2 x ep=2 (fsdp=2), vs 1 process,
// to the relative 1e-4 (not bit-identical: a row-parallel linear sums 2 partial GEMMs and
// the vocab-parallel CE sums exp over 2 vocab blocks, as in probe_tp_test.cpp); measured printed.
// These are compared in fp64 (the TP runs and their one-process reference): in fp32 the ~1e-7
// rounding differences flip near-tie top-k decisions (MoE router, DSA indexer) after some steps,
// and one flip moves the loss by more than 1e-4. Measured with the K3 latent-norm order (the norm on
// the experts' weighted sum): tp=2 x pp=2 fp32 stays within 1.2e-6 until step 9, then at step 10 a
// router flip (layer 1, one-process margin 6e-6) and 7 indexer flips give 2.3e-4; in fp64 no
// decision is that close to a tie, so only a wrong computation can leave the bound.
// Negatives: kPipeFaultSwapBackward (stage 0 applies micro-batch 0's gradient to micro-batch 1
// and back) must break the agreement, on pp=2 alone, on tp=2 x pp=2 and on tp=2 x pp=2 x ep=2
// (ProbePipelineNegative: kNegativeControlSteps steps beside a one-process run of as many; the
// swap changes step 1's loss).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>

#include "backends/probe_data.h"
#include "core/float_dtype.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::kNegativeControlSteps;
using testing_probe::Losses;
using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

// The bound for layouts whose summation order differs from one process (tp > 1).
constexpr double kRelTolerance = 1e-4;

ProbeConfig PipelineCfg(int64_t ranks, int64_t pp, const std::string& dir,
                        FloatDtype dtype = FloatDtype::kFP32) {
  ProbeConfig c = SmallConfig(ranks, TempDir(dir));
  c.steps = 12;
  c.micro_batch = 2;
  c.pp = pp;
  c.dtype = dtype;
  return c;
}

// Largest relative loss difference of two runs' curves (infinite when their lengths differ; NaN
// when a loss is not finite: every comparison with it then fails).
double MaxRelDiff(const ProbeResult& a, const ProbeResult& b) {
  for (const ProbeStep& s : a.steps)
    if (!std::isfinite(s.loss)) return std::nan("");
  return testing_probe::MaxRelDiff(Losses(a), Losses(b));
}

// A tp x pp (x ep) run in fp64 and its relative difference from one process (`one`, fp64).
// The run has as many steps as `one`.
double TpPpDiff(const ProbeResult& one, int64_t ranks, int64_t ep, const std::string& fault,
                const std::string& dir, ProbeResult* out) {
  ProbeConfig c = PipelineCfg(ranks, 2, dir, FloatDtype::kFP64);
  c.steps = static_cast<int64_t>(one.steps.size());
  c.tp = 2;
  c.ep = ep;
  c.fsdp = ep;
  c.pp_fault = fault;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return INFINITY;
  if (out != nullptr) *out = *r;
  return MaxRelDiff(*r, one);
}

// The one-process reference of `steps` steps (PipelineCfg's 12, or a negative control's
// kNegativeControlSteps) in `dtype`, run on first use in this test process; nullptr when it failed.
const ProbeResult* OneProcessOf(int64_t steps, FloatDtype dtype = FloatDtype::kFP32) {
  static std::map<std::pair<int64_t, FloatDtype>, Expected<ProbeResult>> runs;
  auto it = runs.find({steps, dtype});
  if (it == runs.end()) {
    ProbeConfig c = PipelineCfg(1, 1, "pp-ref-" + std::to_string(steps) + FloatDtypeName(dtype), dtype);
    c.steps = steps;
    it = runs.emplace(std::make_pair(steps, dtype), RunProbeSpec(SmallSpec(), c)).first;
    EXPECT_TRUE(it->second.ok()) << it->second.status().ToString();
  }
  return it->second.ok() ? &*it->second : nullptr;
}

class ProbePipeline : public ::testing::Test {
 protected:
  void SetUp() override { one_ = OneProcessOf(PipelineCfg(1, 1, "").steps); }
  const ProbeResult* one_ = nullptr;
  // The fp64 reference of the tensor-parallel layouts (run on first use).
  const ProbeResult* One64() const { return OneProcessOf(PipelineCfg(1, 1, "").steps, FloatDtype::kFP64); }
};

// A negative control's run: kNegativeControlSteps steps, beside OneProcessOf(those steps) (fp32 for
// the pipeline alone, fp64 for the tensor-parallel layouts, as the checks they control).
class ProbePipelineNegative : public ::testing::Test {
 protected:
  void SetUp() override { one_ = OneProcessOf(kNegativeControlSteps); }
  const ProbeResult* one_ = nullptr;
  const ProbeResult* One64() const { return OneProcessOf(kNegativeControlSteps, FloatDtype::kFP64); }
};

TEST_F(ProbePipeline, TwoStagesMatchOneProcess) {
  ASSERT_NE(one_, nullptr);
  ASSERT_LT(one_->steps.back().loss, one_->steps.front().loss);  // it learns at all
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), PipelineCfg(2, 2, "pp2"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double d = MaxRelDiff(*r, *one_);
  std::printf("pp=2 1F1B vs 1 process, fp32, 12 steps: max relative loss difference %.3g\n", d);
  EXPECT_EQ(d, 0.0) << "expected bit-identical curves";
  // Measured: activations / gradients crossed the stages, and the bubble is a share of the span.
  const ProbeStep& s = r->steps.back();
  EXPECT_GT(s.comm.pp_recv_s, 0.0);
  EXPECT_GT(s.comm.pp_send_s, 0.0);
  ASSERT_EQ(s.pp_bubble_by_rank.size(), 2u);
  EXPECT_GT(s.pp_bubble, 0.0);
  EXPECT_LT(s.pp_bubble, 1.0);
  EXPECT_EQ(s.expert_load, one_->steps.back().expert_load);  // both stages' MoE layers, summed
  EXPECT_GT(r->prediction.pp_bubble, 0.0);
  EXPECT_NE(FormatProbeResult(*r).find("pipeline: pp=2 x interleave=1"), std::string::npos);
}

TEST_F(ProbePipeline, InterleavedMatchesOneProcess) {
  ASSERT_NE(one_, nullptr);
  ProbeConfig c = PipelineCfg(2, 2, "pp2v2");
  c.interleave = 2;  // 4 model chunks of one layer each, 2 per rank
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double d = MaxRelDiff(*r, *one_);
  std::printf("pp=2 interleave=2 vs 1 process, fp32, 12 steps: max relative loss difference %.3g\n", d);
  EXPECT_EQ(d, 0.0) << "expected bit-identical curves";
}

TEST_F(ProbePipeline, FourProcessesPipelineFsdpEpMatchOneProcess) {
  ASSERT_NE(one_, nullptr);
  ProbeConfig c = PipelineCfg(4, 2, "pp2x2");
  c.fsdp = 2;
  c.ep = 2;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double d = MaxRelDiff(*r, *one_);
  std::printf(
      "pp=2 x fsdp=2 x ep=2 (4 processes) vs 1 process, fp32, 12 steps: max relative loss difference %.3g\n",
      d);
  EXPECT_EQ(d, 0.0) << "expected bit-identical curves";
  const ProbeStep& s = r->steps.back();
  EXPECT_GT(s.comm.all_to_all_s, 0.0);      // EP inside each stage
  EXPECT_GT(s.comm.reduce_scatter_s, 0.0);  // FSDP inside each stage
  EXPECT_EQ(s.pp_bubble_by_rank.size(), 4u);
}

// Negative: a wrong schedule (stage 0's first two backwards on each other's micro-batches) gives
// another curve: the exactness check above would fail on it.
TEST_F(ProbePipelineNegative, SwappedBackwardBreaksTheCurve) {
  ASSERT_NE(one_, nullptr);
  ProbeConfig c = PipelineCfg(2, 2, "pp2fault");
  c.steps = kNegativeControlSteps;
  c.pp_fault = kPipeFaultSwapBackward;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->steps.size(), one_->steps.size());  // else MaxRelDiff is infinite and proves nothing
  const double d = MaxRelDiff(*r, *one_);
  std::printf("pp=2 with swapped backwards vs 1 process: max relative loss difference %.3g\n", d);
  EXPECT_GT(d, 1e-4);
  EXPECT_EQ(r->steps[0].loss, one_->steps[0].loss);  // the forward of step 0 is untouched
}

TEST_F(ProbePipeline, FourProcessesTp2Pp2MatchOneProcess) {
  const ProbeResult* one = One64();
  ASSERT_NE(one, nullptr);
  ProbeResult r;
  const double d = TpPpDiff(*one, 4, 0, "", "tp2pp2", &r);
  std::printf("tp=2 x pp=2 (4 processes) vs 1 process, fp64, 12 steps: max relative loss difference %.3g\n",
              d);
  EXPECT_LT(d, kRelTolerance);
  ASSERT_FALSE(r.steps.empty());
  const ProbeStep& s = r.steps.back();
  EXPECT_GT(s.comm.tp_all_reduce_s, 0.0);  // TP inside each stage
  EXPECT_GT(s.comm.pp_recv_s, 0.0);        // and activations between the stages
  EXPECT_EQ(s.pp_bubble_by_rank.size(), 4u);
  EXPECT_EQ(s.expert_load, one->steps.back().expert_load);  // counted once per data rank
}

TEST_F(ProbePipeline, EightProcessesTp2Pp2Ep2MatchOneProcess) {
  const ProbeResult* one = One64();
  ASSERT_NE(one, nullptr);
  ProbeResult r;
  const double d = TpPpDiff(*one, 8, 2, "", "tp2pp2ep2", &r);
  std::printf(
      "tp=2 x pp=2 x ep=2 x fsdp=2 (8 processes) vs 1 process, fp64, 12 steps: max relative loss "
      "difference %.3g\n",
      d);
  EXPECT_LT(d, kRelTolerance);
  ASSERT_FALSE(r.steps.empty());
  const ProbeStep& s = r.steps.back();
  EXPECT_GT(s.comm.all_to_all_s, 0.0);
  EXPECT_GT(s.comm.tp_all_reduce_s, 0.0);
  EXPECT_GT(s.comm.pp_recv_s, 0.0);
  EXPECT_EQ(s.expert_load, one->steps.back().expert_load);
}

// tp=2 x pp=2 with sequence parallelism and expert TP: the stages send each TP rank's half of the
// sequence, the experts are split over the TP group; still the one-process curve.
TEST_F(ProbePipeline, FourProcessesTp2Pp2SequenceParallelExpertTpMatchOneProcess) {
  const ProbeResult* one = One64();
  ASSERT_NE(one, nullptr);
  ProbeConfig c = PipelineCfg(4, 2, "tp2pp2sp", FloatDtype::kFP64);
  c.tp = 2;
  c.sequence_parallel = true;
  c.etp = 2;
  Expected<ProbeResult> r = RunProbeSpec(SmallSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double d = MaxRelDiff(*r, *one);
  std::printf(
      "tp=2 x pp=2 + SP + etp=2 (4 processes) vs 1 process, fp64, 12 steps: max relative loss "
      "difference %.3g\n",
      d);
  EXPECT_LT(d, kRelTolerance);
  EXPECT_GT(r->steps.back().comm.tp_reduce_scatter_s, 0.0);
  EXPECT_GT(r->steps.back().comm.pp_recv_s, 0.0);
}

// One held-out layout run (copy task when `text_file` is empty): 4 steps, micro-batch 2.
ProbeResult HeldOutRun(const std::string& text_file, int64_t ranks, int64_t tp, int64_t pp,
                       const std::string& dir) {
  ProbeConfig c = SmallConfig(ranks, TempDir(dir));
  if (!text_file.empty()) {
    c.task = ProbeTask::kText;
    c.text_file = text_file;
  }
  c.steps = 4;
  c.micro_batch = 2;
  c.tp = tp;
  c.pp = pp;
  return testing_probe::RunExpectingOk(SmallSpec(), c);
}

// Text task, held-out loss: every layout evaluates the one process's held-out windows. The file
// is the first 10000 bytes of the test prose: a 1000-byte tail, W = 62 windows of 16, which is no
// multiple of 4 (the held-out set used to be rounded down to a multiple of the ranks: 60 windows
// on 4 ranks, another loss than one process's 62). tp=2 x pp=2 (one data rank) and 4 data ranks
// (62 = 15 + 16 + 15 + 16 windows, the short ranks padded with uncounted rows) must give the one
// process's held-out loss.
TEST(ProbePipelineHeldOut, TextHeldOutLossMatchesOneProcessOnEveryLayout) {
  const std::string file = TempDir("heldout-text") + ".txt";
  {
    std::ifstream in(std::string(ONBOARD_TEST_DATA) + "/text/readme_prose.txt", std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GE(text.size(), 10000u);
    std::ofstream(file, std::ios::binary) << text.substr(0, 10000);
  }
  const double one = HeldOutRun(file, 1, 1, 1, "heldout-one").held_out_loss,
               tppp = HeldOutRun(file, 4, 2, 2, "heldout-tp2pp2").held_out_loss,
               dp4 = HeldOutRun(file, 4, 1, 1, "heldout-dp4").held_out_loss;
  std::printf("held-out loss after 4 steps: 1 process %.6f, tp=2 x pp=2 %.6f, 4 data ranks %.6f\n", one, tppp,
              dp4);
  ASSERT_TRUE(std::isfinite(one));
  EXPECT_LT(std::abs(tppp - one) / one, kRelTolerance);
  EXPECT_LT(std::abs(dp4 - one) / one, kRelTolerance);
}

// Copy task (backends/probe_data.h kCopyEvalSequences): every layout evaluates the one process's
// 1024 held-out sequences (4 data ranks: 256 rows each; tp=2 x pp=2: one data rank, the stages'
// sends): the same held-out loss and accuracy, and the verdict's skill is that held-out accuracy.
TEST(ProbePipelineHeldOut, CopyHeldOutAccuracyMatchesOneProcessOnEveryLayout) {
  const ProbeResult one = HeldOutRun("", 1, 1, 1, "copy-eval-one"),
                    tppp = HeldOutRun("", 4, 2, 2, "copy-eval-tp2pp2"),
                    dp4 = HeldOutRun("", 4, 1, 1, "copy-eval-dp4");
  std::printf(
      "copy held-out after 4 steps: 1 process loss %.6f acc %.4f, tp=2 x pp=2 %.6f %.4f, 4 data ranks %.6f "
      "%.4f\n",
      one.held_out_loss, one.held_out_accuracy, tppp.held_out_loss, tppp.held_out_accuracy, dp4.held_out_loss,
      dp4.held_out_accuracy);
  ASSERT_TRUE(std::isfinite(one.held_out_loss));
  EXPECT_EQ(one.held_out_tokens, backends::kCopyEvalSequences * backends::CopyHalf(16));
  const double one_hit = 1.0 / static_cast<double>(one.held_out_tokens);
  for (const ProbeResult* r : {&tppp, &dp4}) {
    EXPECT_LT(std::abs(r->held_out_loss - one.held_out_loss) / one.held_out_loss, kRelTolerance);
    EXPECT_NEAR(r->held_out_accuracy, one.held_out_accuracy, 2 * one_hit);  // an argmax tie at most
  }
  EXPECT_DOUBLE_EQ(one.skill, one.held_out_accuracy);
  EXPECT_DOUBLE_EQ(one.final_loss, one.held_out_loss);
  EXPECT_TRUE(std::isfinite(one.last_steps_accuracy));
}

// Negatives of the two tests above: the same layouts with a wrong schedule leave the curve.
TEST_F(ProbePipelineNegative, SwappedBackwardBreaksTp2Pp2) {
  ASSERT_NE(One64(), nullptr);
  const double d = TpPpDiff(*One64(), 4, 0, kPipeFaultSwapBackward, "tp2pp2fault", nullptr);
  std::printf("tp=2 x pp=2 with swapped backwards vs 1 process: max relative loss difference %.3g\n", d);
  EXPECT_GT(d, kRelTolerance);
}

TEST_F(ProbePipelineNegative, SwappedBackwardBreaksTp2Pp2Ep2) {
  ASSERT_NE(One64(), nullptr);
  const double d = TpPpDiff(*One64(), 8, 2, kPipeFaultSwapBackward, "tp2pp2ep2fault", nullptr);
  std::printf("tp=2 x pp=2 x ep=2 with swapped backwards vs 1 process: max relative loss difference %.3g\n",
              d);
  EXPECT_GT(d, kRelTolerance);
}

}  // namespace
}  // namespace onboard
