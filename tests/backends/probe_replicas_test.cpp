// Redundant experts in the probe (backends/probe_replicas.h): the maps on hand-made inputs, then a
// real 4-rank probe re-run with replicas of its hottest experts placed from its measured loads:
// the loss curve must stay bit-exact in fp32 and the measured rows per EP rank must even out.
// Negative: a wrong log2phy (ProbeConfig::fault_log2phy) must change the curve.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "backends/probe_replicas.h"
#include "backends/probe_step_series.h"
#include "core/load_balance.h"
#include "tests/backends/probe_test_util.h"
#include "validators/probe_observations.h"

namespace onboard {
namespace {

using testing_probe::Losses;
using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

TEST(ProbeReplicas, MapSplitsSourcesInAlignedBlocksAndRefusesBadCounts) {
  // 4 experts, ep 2, 3 slots per rank: expert 0 on both ranks, expert 1 twice, 2 and 3 once.
  Expected<ReplicaMap> m = BuildReplicaMap({0, 1, 2, 0, 1, 3}, 4, 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->slots_per_rank, 3);
  EXPECT_EQ(m->copies[0], (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(SourceLog2Phy(*m, 0, 2), (std::vector<int64_t>{0, 1, 2, 5}));  // source 0: first copies
  EXPECT_EQ(SourceLog2Phy(*m, 1, 2), (std::vector<int64_t>{3, 4, 2, 5}));  // source 1: second copies
  // Negatives: three copies, a missing expert, an id out of range, slots not a multiple of ep.
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
           {0, 0, 1, 0, 2, 3}, {0, 1, 2, 0, 1, 2}, {0, 1, 2, 3, 4, 0}, {0, 1, 2, 3, 0}}) {
    Expected<ReplicaMap> b = BuildReplicaMap(bad, 4, 2);
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("expert_phy2log"), std::string::npos) << b.status().message();
  }
  // Two copies each over ep = 6: 2 divides 6, but the source blocks need a power-of-two ep.
  Expected<ReplicaMap> six = BuildReplicaMap({0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}, 6, 6);
  ASSERT_FALSE(six.ok());
  EXPECT_NE(six.status().message().find("power-of-two ep"), std::string::npos) << six.status().message();
  EXPECT_TRUE(BuildReplicaMap({0, 1, 2, 3, 4, 5}, 6, 6).ok()) << "no replicas: any ep";
}

TEST(ProbeReplicas, PlacementFromLoadsEvensRanks) {
  const std::vector<double> load = {400, 50, 60, 70, 300, 40, 30, 50};  // two hot experts
  const std::vector<int64_t> phy2log = Phy2LogFromLoads(load, 4, 1);
  ASSERT_EQ(phy2log.size(), 12u);
  Expected<ReplicaMap> m = BuildReplicaMap(phy2log, 8, 4);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_GE(m->copies[0].size(), 2u);  // the hottest expert is replicated
  for (const auto& c : m->copies)      // copies on distinct ranks
    for (size_t i = 1; i < c.size(); ++i) EXPECT_NE(c[i] / 3, c[i - 1] / 3);
  const double before = MaxOverMean(RankLoads(load, 4, {}));
  const double after = MaxOverMean(ReplicaRankLoads(*m, load, 4));
  std::printf("predicted rank max/mean: contiguous %.3f -> replicas %.3f\n", before, after);
  EXPECT_LT(after, before);
}

std::vector<double> RankRowsMaxOverMean(const ProbeResult& r) {
  std::vector<double> out;
  for (const ProbeCoactivationLayer& l : r.coactivation.layers)
    out.push_back(LayerTraffic(l).rank_max_over_mean);
  return out;
}

TEST(ProbeReplicas, FourRanksReplicasKeepTheCurveBitExactAndEvenTheRanks) {
  const ProxySpec spec = SmallSpec();
  ProbeConfig c = SmallConfig(4, TempDir("replicas-none"));
  c.steps = 8;
  c.micro_batch = 2;  // fixed micro-batch: the curve does not depend on the expert layout
  Expected<ProbeResult> base = RunProbeSpec(spec, c);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  // Replicas of the hottest experts from the measured loads (one spare slot per rank).
  const std::vector<double> load = MeasuredExpertLoad(*base);
  c.expert_phy2log = Phy2LogFromLoads(load, 4, 1);
  c.out_dir = TempDir("replicas-on");
  Expected<ProbeResult> rep = RunProbeSpec(spec, c);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  // The fp32 loss and the loads are bit-exact, and so is the grad norm: exact integer bins of the
  // squares, each expert counted once by its first copy (backends/exact_sum.h).
  EXPECT_EQ(Losses(*rep), Losses(*base)) << "replicas changed the maths";
  ASSERT_EQ(rep->steps.size(), base->steps.size());
  for (size_t i = 0; i < rep->steps.size(); ++i) {
    EXPECT_EQ(rep->steps[i].grad_norm, base->steps[i].grad_norm) << "step " << i;
    EXPECT_EQ(rep->steps[i].expert_load, base->steps[i].expert_load) << "step " << i;
  }
  const std::vector<double> mb = RankRowsMaxOverMean(*base), mr = RankRowsMaxOverMean(*rep);
  ASSERT_EQ(mb.size(), mr.size());
  double worst_b = 0, worst_r = 0;
  for (size_t l = 0; l < mb.size(); ++l) {
    std::printf("MoE layer %zu: rows per EP rank max/mean %.3f -> %.3f with replicas\n", l, mb[l], mr[l]);
    worst_b = std::max(worst_b, mb[l]);
    worst_r = std::max(worst_r, mr[l]);
  }
  EXPECT_LT(worst_r, worst_b);
  // Negative: a wrong log2phy sends a replicated expert's tokens to another expert's slot.
  c.fault_log2phy = true;
  c.out_dir = TempDir("replicas-wrong");
  Expected<ProbeResult> wrong = RunProbeSpec(spec, c);
  ASSERT_TRUE(wrong.ok()) << wrong.status().ToString();
  EXPECT_NE(Losses(*wrong), Losses(*base)) << "a wrong log2phy left the curve unchanged";
}

// Tensor parallelism: each TP rank's EP group holds every slot (the routed experts are computed
// alike on the TP ranks, probe_tp.h). 4 ranks = tp 2 x 2 data ranks (ep 2), replicas from the
// measured loads: the fp32 loss curve and the grad norm (exact integer bins, each element counted
// once: TP rank 0 for what every TP rank holds, an expert's first copy) stay bit-exact. The wrong-log2phy
// negative is FourRanksReplicasKeepTheCurveBitExactAndEvenTheRanks's (it also changed this curve).
TEST(ProbeReplicas, Tp2ReplicasKeepTheCurveBitExact) {
  const ProxySpec spec = SmallSpec();
  ProbeConfig c = SmallConfig(4, TempDir("replicas-tp2-none"));
  c.tp = 2;
  c.steps = 3;
  c.micro_batch = 2;
  Expected<ProbeResult> base = RunProbeSpec(spec, c);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  c.expert_phy2log = Phy2LogFromLoads(MeasuredExpertLoad(*base), 2, 1);  // 10 slots over ep 2
  c.out_dir = TempDir("replicas-tp2-on");
  Expected<ProbeResult> rep = RunProbeSpec(spec, c);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(Losses(*rep), Losses(*base)) << "replicas under TP changed the maths";
  ASSERT_EQ(rep->steps.size(), base->steps.size());
  for (size_t i = 0; i < rep->steps.size(); ++i)
    EXPECT_EQ(rep->steps[i].grad_norm, base->steps[i].grad_norm) << "step " << i;
  EXPECT_NE(RankRowsMaxOverMean(*rep), RankRowsMaxOverMean(*base)) << "the replicas took no tokens";
}

TEST(ProbeReplicas, ConfigRefusesReplicasOverPartOfTheDataRanks) {
  ProbeConfig c = SmallConfig(4, "/tmp/unused");
  c.expert_phy2log = {0, 1, 2, 0, 3, 4, 1, 5, 6, 2, 7, 3};  // 8 experts in 12 slots over ep 4
  EXPECT_TRUE(c.Validate(SmallSpec()).ok()) << c.Validate(SmallSpec()).ToString();
  c.ep = 2;  // two EP groups of 2 data ranks each: the replicas' exchange spans one group only
  c.expert_phy2log = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1};
  const Status st = c.Validate(SmallSpec());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("expert_phy2log"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
