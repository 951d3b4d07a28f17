// The probe's pipeline schedules (backends/probe_pipeline_schedule.h), pure: the 1F1B and
// interleaved orders, their consistency check (and the wrong orders it rejects), the chunk split
// and the layout checks of ProbeConfig::Validate. No processes.
#include <gtest/gtest.h>

#include "backends/probe.h"
#include "backends/probe_pipeline_schedule.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

std::vector<std::vector<PipeOp>> AllRanks(int64_t p, int64_t v, int64_t m) {
  std::vector<std::vector<PipeOp>> all;
  for (int64_t r = 0; r < p; ++r) all.push_back(PipelineSchedule(p, v, m, r));
  return all;
}

TEST(PipelineSchedule, OneFOneBOrder) {
  EXPECT_EQ(PipeOpsString(PipelineSchedule(2, 1, 4, 0)), "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3");
  EXPECT_EQ(PipeOpsString(PipelineSchedule(2, 1, 4, 1)), "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3");
  // fewer micro-batches than stages: warm-up capped at m
  EXPECT_EQ(PipeOpsString(PipelineSchedule(4, 1, 2, 0)), "F0.0 F0.1 B0.0 B0.1");
}

TEST(PipelineSchedule, InterleavedOrder) {
  // p=2, v=2, m=4: forwards go chunk 0 on mb 0,1, chunk 1 on mb 0,1, chunk 0 on mb 2,3, ...
  EXPECT_EQ(PipeOpsString(PipelineSchedule(2, 2, 4, 1)),
            "F0.0 F0.1 F1.0 B1.0 F1.1 B1.1 F0.2 B0.0 F0.3 B0.1 F1.2 B1.2 F1.3 B1.3 B0.2 B0.3");
}

TEST(PipelineSchedule, EveryLayoutIsConsistentAndBackwardsAscend) {
  for (int64_t p : {1, 2, 3, 4})
    for (int64_t v : {1, 2, 3})
      for (int64_t m : {1, 2, 3, 4, 6, 8, 12}) {
        if (v > 1 && m % p != 0) continue;
        const auto all = AllRanks(p, v, m);
        const Status s = CheckPipelineSchedule(p, v, m, all);
        EXPECT_TRUE(s.ok()) << "p=" << p << " v=" << v << " m=" << m << ": " << s.message();
        // Each chunk sees its backwards in micro-batch order: the gradient sums keep the one-process order.
        for (const auto& ops : all) {
          std::vector<int64_t> last(static_cast<size_t>(v), -1);
          for (const PipeOp& op : ops)
            if (op.kind == PipeOpKind::kBackward) {
              EXPECT_GT(op.micro_batch, last[op.chunk]) << "p=" << p << " v=" << v << " m=" << m;
              last[op.chunk] = op.micro_batch;
            }
        }
      }
}

// Negative: stage 0 runs its first two backwards on each other's micro-batches (the probe's
// kPipeFaultSwapBackward): it would apply micro-batch 0's gradient to micro-batch 1.
TEST(PipelineSchedule, CheckRejectsSwappedBackward) {
  auto all = AllRanks(2, 1, 4);
  std::swap(all[0][2].micro_batch, all[0][4].micro_batch);  // B0.0 <-> B0.1
  const Status s = CheckPipelineSchedule(2, 1, 4, all);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("would receive the gradient of micro-batch 0"), std::string::npos)
      << s.message();
}

TEST(PipelineSchedule, CheckRejectsDeadlockAndBackwardFirst) {
  // rank 1 runs two forwards before its first backward while rank 0 waits for that backward
  // before sending the second forward: neither can proceed.
  std::vector<std::vector<PipeOp>> all = AllRanks(2, 1, 2);
  all[0] = {{PipeOpKind::kForward, 0, 0},
            {PipeOpKind::kBackward, 0, 0},
            {PipeOpKind::kForward, 0, 1},
            {PipeOpKind::kBackward, 0, 1}};
  all[1] = {{PipeOpKind::kForward, 0, 0},
            {PipeOpKind::kForward, 0, 1},
            {PipeOpKind::kBackward, 0, 0},
            {PipeOpKind::kBackward, 0, 1}};
  Status s = CheckPipelineSchedule(2, 1, 2, all);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  all = AllRanks(2, 1, 2);
  std::swap(all[1][0], all[1][1]);  // B0.0 before F0.0 on the last stage
  s = CheckPipelineSchedule(2, 1, 2, all);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("backward before its forward"), std::string::npos) << s.message();
  all = AllRanks(2, 1, 2);
  all[1].pop_back();
  EXPECT_FALSE(CheckPipelineSchedule(2, 1, 2, all).ok());  // an op missing
}

TEST(PipelineSchedule, ChunksSplitTheUnits) {
  EXPECT_EQ(BalancedStageStarts(4, 2), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(BalancedStageStarts(5, 2), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(BalancedStageStarts(4, 4), (std::vector<int64_t>{0, 1, 2, 3}));
  // units: embed 0, layers 1..4, head 5
  const std::vector<int64_t> starts = {0, 2};
  EXPECT_EQ(ChunkUnits(starts, 4, 0).begin, 0);
  EXPECT_EQ(ChunkUnits(starts, 4, 0).end, 3);
  EXPECT_EQ(ChunkUnits(starts, 4, 1).begin, 3);
  EXPECT_EQ(ChunkUnits(starts, 4, 1).end, 6);
}

// Negative inputs of the layout check: every bad factor is named in one message.
TEST(PipelineSchedule, ValidateNamesEveryBadFactor) {
  const ProxySpec spec = testing_probe::SmallSpec();  // 4 layers, 8 experts
  ProbeConfig c;
  c.ranks = 4;
  c.batch = 8;
  c.pp = 3;
  c.ep = 3;
  Status s = c.Validate(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pp=3 must divide ranks=4"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ep=3 must divide"), std::string::npos) << s.message();
  c.pp = 8;
  c.ranks = 8;
  c.ep = 0;
  s = c.Validate(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("must be <= the model's layers=4"), std::string::npos) << s.message();
  c = ProbeConfig();
  c.ranks = 4;
  c.batch = 8;
  c.pp = 2;
  c.ep = 4;  // ep counts the data ranks of a stage: 2
  s = c.Validate(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("ep=4 must divide ranks/pp=2"), std::string::npos) << s.message();
  c.ep = 0;
  c.interleave = 2;
  c.micro_batch = 4;  // batch 8 / (2 data ranks * 4) = 1 micro-batch: not a multiple of pp
  s = c.Validate(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("multiple of pp=2"), std::string::npos) << s.message();
  c.micro_batch = 1;
  c.stage_layer_starts = {0, 2, 1, 3};
  s = c.Validate(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stage_layer_starts"), std::string::npos) << s.message();
  c.stage_layer_starts = {0, 1, 2, 3};
  EXPECT_TRUE(c.Validate(spec).ok()) << c.Validate(spec).message();
}

}  // namespace
}  // namespace onboard
