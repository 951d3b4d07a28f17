// The sharded probe is the same computation as a single process: 2- and 4-process FSDP + EP runs
// (real processes over Gloo) give the 1-process loss curve to a relative 1e-4 over 20 steps.
//   - fp32 with a fixed micro-batch (the setting): every gradient is summed in one
//     canonical order whatever the layout (backends/ordered_sum.h), so 1, 2 and 4 processes and
//     HSDP agree exactly; this is what makes discrete top-k routing safe to compare.
//   - default micro-batch (batch/ranks, no accumulation): beside one process with 1 micro-batch,
//     each layout sums its gradients in a different order, leaving ~1e-7 differences; in fp32
//     these flip near-tie top-k decisions (MoE router or DSA indexer) after some steps (measured:
//     4 ranks, step 17, 4e-4; with the K3 latent-norm order 2 ranks, step 7 on), so that path is
//     compared in fp64 for 2 and 4 ranks, and in fp32 for 2 ranks against one process running the
//     same micro-batches (the same operations).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "backends/proxy_model.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using testing_probe::Losses;
using testing_probe::MaxRelDiff;
using testing_probe::SmallConfig;
using testing_probe::SmallSpec;
using testing_probe::TempDir;

void ExpectSameCurve(const std::vector<double>& a, const std::vector<double>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(std::isfinite(a[i]) && std::isfinite(b[i])) << what << " step " << i;
    EXPECT_LT(std::abs(a[i] - b[i]) / std::abs(b[i]), 1e-4) << what << " step " << i << ": " << a[i] << " vs " << b[i];
  }
}

// The per-step global grad norms (exact: backends/exact_sum.h).
std::vector<double> EquivalenceGradNorms(const ProbeResult& r) {
  std::vector<double> g;
  for (const ProbeStep& s : r.steps) g.push_back(s.grad_norm);
  return g;
}

ProbeConfig Fp64(ProbeConfig c) {
  c.dtype = FloatDtype::kFP64;
  return c;
}

TEST(ProbeEquivalence, ShardedRunsMatchOneProcess) {
  const ProxySpec spec = SmallSpec();
  Expected<ProbeResult> one = RunProbeSpec(spec, Fp64(SmallConfig(1, TempDir("r1"))));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->steps.size(), 20u);
  EXPECT_LT(one->steps.back().loss, one->steps.front().loss);  // it learns at all

  ProbeConfig two = Fp64(SmallConfig(2, TempDir("r2")));  // fsdp=2, ep=2
  Expected<ProbeResult> r2 = RunProbeSpec(spec, two);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ExpectSameCurve(Losses(*r2), Losses(*one), "2 ranks fsdp=2 ep=2");
  EXPECT_GT(r2->steps.back().comm.all_to_all_s, 0.0);      // EP exchanged tokens
  EXPECT_GT(r2->steps.back().comm.reduce_scatter_s, 0.0);  // FSDP reduce-scattered grads
  EXPECT_EQ(r2->backend, "gloo");

  ProbeConfig four = Fp64(SmallConfig(4, TempDir("r4")));  // fsdp=4, ep=4: 2 experts per rank
  Expected<ProbeResult> r4 = RunProbeSpec(spec, four);
  ASSERT_TRUE(r4.ok()) << r4.status().ToString();
  ExpectSameCurve(Losses(*r4), Losses(*one), "4 ranks fsdp=4 ep=4");

  // Expert load is recorded per MoE layer and sums to tokens * top_k on every layout.
  ASSERT_EQ(r4->steps[0].expert_load.size(), 3u);
  int64_t routed = 0;
  for (int64_t c : r4->steps[0].expert_load[0]) routed += c;
  EXPECT_EQ(routed, 8 * 16 * 2);
  EXPECT_EQ(r4->steps[0].expert_load, one->steps[0].expert_load);
}

// The issue's own setting, fp32, with the default micro-batch (batch/ranks = 4 sequences per rank,
// no accumulation): 2 processes vs the one process that does the same work, its 8 sequences as 2
// accumulated micro-batches of 4 (the canonical sum order makes the two the same operations), 20
// steps, relative difference under 1e-4. Not the one process's 1 micro-batch of 8: that is another
// fp32 computation (the sums over 8 rows rounded differently), and with the K3 latent-norm order
// one process alone, 8 vs 2 x 4, drifts to 5.3e-3 by step 15: a DSA indexer top-k flip at step 7
// (one-process margin 6.9e-5), a router flip at step 9 (margin 5.2e-5), more after; the different
// order over the same layouts is compared in fp64 (ShardedRunsMatchOneProcess).
TEST(ProbeEquivalence, Fp32TwoProcessesMatchOneProcess) {
  const ProxySpec spec = SmallSpec();
  ProbeConfig c1 = SmallConfig(1, TempDir("f1"));
  c1.micro_batch = c1.batch / 2;  // the 2-process run's micro-batch (ProbeConfig default: batch/ranks)
  Expected<ProbeResult> one = RunProbeSpec(spec, c1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->steps.size(), 20u);
  Expected<ProbeResult> two = RunProbeSpec(spec, SmallConfig(2, TempDir("f2")));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ExpectSameCurve(Losses(*two), Losses(*one), "2 ranks fp32");
  std::printf("fp32 default micro-batch, 20 steps: max relative difference 2 ranks vs 1 process: %.3g\n",
              MaxRelDiff(Losses(*two), Losses(*one)));
}

// fp32 with a fixed micro-batch (2 sequences; 4 micro-batches per step): the one process
// accumulates 4 micro-steps, 2 ranks 2 each, 4 ranks 1 each, and every gradient is summed in the
// canonical pairwise order (backends/ordered_sum.h). The curves must agree under the issue's
// 1e-4 on all 20 steps; on this CPU build they agree bit for bit (printed), because the sharded
// runs then do the same floating-point operations as the single process.
TEST(ProbeEquivalence, Fp32FixedMicroBatchLayoutsMatchOneProcess) {
  const ProxySpec spec = SmallSpec();
  auto cfg = [](int64_t ranks, const std::string& dir) {
    ProbeConfig c = SmallConfig(ranks, TempDir(dir));
    c.micro_batch = 2;
    return c;
  };
  Expected<ProbeResult> one = RunProbeSpec(spec, cfg(1, "m1"));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_EQ(one->steps.size(), 20u);
  EXPECT_LT(one->steps.back().loss, one->steps.front().loss);
  Expected<ProbeResult> two = RunProbeSpec(spec, cfg(2, "m2"));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  ExpectSameCurve(Losses(*two), Losses(*one), "2 ranks fsdp=2 ep=2 fp32 micro_batch=2");
  Expected<ProbeResult> four = RunProbeSpec(spec, cfg(4, "m4"));
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  ExpectSameCurve(Losses(*four), Losses(*one), "4 ranks fsdp=4 ep=4 fp32 micro_batch=2");
  std::printf("fp32 micro_batch=2, 20 steps: max relative difference vs 1 process: 2 ranks %.3g, 4 ranks %.3g\n",
              MaxRelDiff(Losses(*two), Losses(*one)), MaxRelDiff(Losses(*four), Losses(*one)));
  EXPECT_EQ(four->steps[0].expert_load, one->steps[0].expert_load);
  // The grad norm is exact (backends/exact_sum.h): bit-identical wherever the gradients are.
  EXPECT_EQ(EquivalenceGradNorms(*two), EquivalenceGradNorms(*one));
  EXPECT_EQ(EquivalenceGradNorms(*four), EquivalenceGradNorms(*one));
  EXPECT_GT(four->steps.back().comm.reduce_scatter_s, 0.0);
  EXPECT_GT(four->steps.back().comm.all_to_all_s, 0.0);
}

// AdamW's decoupled decay is applied to each shard's runs of matrix elements (Buffer::decay_runs):
// 2 processes (fsdp = 2: the runs are cut at the shard boundary) give the 1-process curve to the
// bit in fp32 with a fixed micro-batch, and the decay acts (negative control: without it the
// curve differs).
TEST(ProbeEquivalence, WeightDecayShardedMatchesOneProcessAndActs) {
  const ProxySpec spec = SmallSpec();
  auto cfg = [](int64_t ranks, double wd, const std::string& dir) {
    ProbeConfig c = SmallConfig(ranks, TempDir(dir));
    c.micro_batch = 2;
    c.steps = 8;
    c.weight_decay = wd;
    return c;
  };
  Expected<ProbeResult> one = RunProbeSpec(spec, cfg(1, 0.5, "wd1"));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  Expected<ProbeResult> two = RunProbeSpec(spec, cfg(2, 0.5, "wd2"));
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(Losses(*two), Losses(*one));
  Expected<ProbeResult> none = RunProbeSpec(spec, cfg(1, 0.0, "wd0"));
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(Losses(*none).front(), Losses(*one).front());  // the same first forward
  EXPECT_NE(Losses(*none).back(), Losses(*one).back());
}

// 4 ranks: HSDP (fsdp=2 x 2 replicas), ep=2 with a non-contiguous expert placement; LoRA mode.
// fp32, micro_batch 2: the 4 ranks each run one micro-step, the single process four.
void ExpectHybridLoraMatchesOneProcess(const ProxySpec& spec, const std::string& tag) {
  ProbeConfig base = SmallConfig(1, TempDir(tag + "1"));
  base.micro_batch = 2;
  base.mode = FinetuneMode::kLoRA;
  base.steps = 8;
  base.lr = 1e-2;
  Expected<ProbeResult> one = RunProbeSpec(spec, base);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ProbeConfig hs = base;
  hs.ranks = 4;
  hs.fsdp = 2;
  hs.ep = 2;
  hs.expert_placement = {1, 0, 1, 0, 0, 1, 1, 0};
  hs.out_dir = TempDir(tag + "4");
  Expected<ProbeResult> r = RunProbeSpec(spec, hs);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameCurve(Losses(*r), Losses(*one), tag + ": 4 ranks hsdp 2x2 ep=2 lora fp32 micro_batch=2");
  EXPECT_EQ(MaxRelDiff(Losses(*r), Losses(*one)), 0.0) << tag << ": expected bit-identical curves";
  EXPECT_EQ(EquivalenceGradNorms(*r), EquivalenceGradNorms(*one))
      << tag << ": HSDP replicas and the placement changed the grad norm";
  EXPECT_GT(r->params.lora, 0);
  EXPECT_EQ(r->params.trainable, r->params.lora);
  EXPECT_EQ(r->params.lora, one->params.lora);
}

TEST(ProbeEquivalence, HybridShardingAndPlacementMatch) {
  ExpectHybridLoraMatchesOneProcess(SmallSpec(), "lora");
}

// Without a shared expert the routed experts carry adapters, one per expert (core/lora_targets.h
// AdaptsRoutedExperts); they shard with their experts (EP placement, expert HSDP) and must give the
// same curve as one process. With the shared expert they stay frozen.
TEST(ProbeEquivalence, RoutedExpertAdaptersShardLikeTheirExperts) {
  ProxySpec routed_only = SmallSpec();
  routed_only.num_shared = 0;
  ProbeConfig c = SmallConfig(1, "");
  c.mode = FinetuneMode::kLoRA;
  auto expert_adapters = [&](const ProxySpec& s) {
    int64_t n = 0;
    for (const backends::UnitLayout& u : backends::BuildLayout(s, c)) n += u.expert_lora.numel;
    return n;
  };
  EXPECT_EQ(expert_adapters(SmallSpec()), 0) << "a shared expert is the MoE layers' adapted path";
  // 3 MoE layers x (w1, w3: r x (latent 16 + inter 16); w2: r x (inter 16 + latent 16)).
  EXPECT_EQ(expert_adapters(routed_only), 3 * 3 * c.lora_rank * (16 + 16));
  ExpectHybridLoraMatchesOneProcess(routed_only, "lora-routed");
}
}  // namespace
}  // namespace onboard
