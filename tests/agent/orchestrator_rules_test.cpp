// Each agent rule in isolation, on real inputs built here: ProbeResults with diverging or healthy
// loss curves, skewed expert loads, comm-heavy steps, memory above prediction; kernel check rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "agent/rules/rules.h"
#include "backends/probe_replicas.h"
#include "core/load_balance.h"

namespace onboard::agent {
namespace {

// A probe result with `n` steps whose loss follows `loss(i)`.
template <typename F>
ProbeResult Curve(int n, F loss) {
  ProbeResult p;
  p.config.ranks = 2;
  p.config.ep = 2;
  for (int i = 0; i < n; ++i) {
    ProbeStep s;
    s.step = i;
    s.loss = loss(i);
    s.grad_norm = 1.0 + 0.1 * i;
    s.step_s = 0.1;
    s.comm.all_to_all_s = 0.01;
    s.compute_s = 0.09;
    s.peak_rss_bytes = 400LL << 20;
    p.steps.push_back(s);
  }
  p.convergence = "converged";
  return p;
}

ProbeResult Healthy() { return Curve(12, [](int i) { return 4.0 * std::exp(-0.2 * i); }); }

TEST(RuleProbeDiverged, RisingLossLowersLrTightensClipAndReprobes) {
  ProbeResult p = Curve(12, [](int i) { return 3.0 + 0.5 * i; });
  p.convergence = "diverged";
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  LoopKnobs k;
  k.learning_rate = 1e-2;
  k.grad_clip = 1.0;
  auto d = RuleProbeDiverged(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->rule, "probe_diverged");
  EXPECT_NEAR(k.learning_rate, 3e-3, 1e-12);
  EXPECT_NEAR(k.grad_clip, 0.5, 1e-12);
  EXPECT_TRUE(k.reprobe);
  EXPECT_EQ(d->observed["step"].get<int64_t>(), 7);  // 6.5 > 2 x the running minimum 3.0
  EXPECT_EQ(d->changed["learning_rate"][0], 1e-2);
  EXPECT_FALSE(d->changed.contains("router_fp32"));  // the probe's router is always fp32: no knob
}

// A loss that falls, then blows back up: the last and first windows look alike (ratio 1.0), so the
// old last/first-window test did not fire; the running-minimum observation does.
TEST(RuleProbeDiverged, BlowUpAfterLearningFiresOnTheRunningMinimum) {
  ProbeResult p = Curve(10, [](int i) { return i < 4 ? 4.0 - i : (i < 8 ? 1.0 : 3.5); });
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  k.learning_rate = 1e-2;
  auto d = RuleProbeDiverged(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->observed["step"].get<int64_t>(), 8);
  EXPECT_NEAR(d->observed["min_loss"].get<double>(), 1.0, 1e-12);
  Thresholds lax;
  lax.divergence_factor = 4.0;  // 3.5 is under 4 x 1.0: the threshold passed in decides
  LoopKnobs k2;
  EXPECT_FALSE(RuleProbeDiverged(ev, lax, k2).has_value());
}

TEST(RuleProbeDiverged, NanLossFiresEvenWithoutAValidatorVerdict) {
  ProbeResult p = Curve(10, [](int i) { return i < 6 ? 3.0 - 0.1 * i : NAN; });
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleProbeDiverged(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->observed["nonfinite"].get<bool>());
  EXPECT_NO_THROW(d->ToJson().dump());  // NaN never reaches the JSON
}

TEST(RuleProbeDiverged, HealthyCurveDoesNotFire) {
  ProbeResult p = Healthy();
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  EXPECT_FALSE(RuleProbeDiverged(ev, Thresholds{}, k).has_value());
  EXPECT_FALSE(k.reprobe);
}

// Loads per step per layer: experts 0-3 (all on rank 0 under contiguous placement) get `hot`.
ProbeResult Skewed(int64_t hot, int64_t cold) {
  ProbeResult p = Healthy();
  for (auto& s : p.steps) {
    std::vector<int64_t> layer(8);
    for (int e = 0; e < 8; ++e) layer[e] = e < 4 ? hot - e : cold + e;
    s.expert_load = {layer, layer};
  }
  return p;
}

// Tokens per EP rank of MoE layer `l` under per-layer placement blocks (8 experts).
std::vector<double> LayerRanks(const ProbeResult& p, size_t l, const std::vector<int64_t>& placement) {
  std::vector<double> load(8, 0.0);
  for (const ProbeStep& s : p.steps)
    for (size_t e = 0; e < 8; ++e) load[e] += static_cast<double>(s.expert_load[l][e]);
  return RankLoads(load, 2, std::vector<int64_t>(placement.begin() + 8 * l, placement.begin() + 8 * (l + 1)));
}

TEST(RuleExpertImbalance, RePlacesExpertsPerLayerFromMeasuredLoads) {
  ProbeResult p = Skewed(100, 10);
  RoundEvidence ev;
  ev.round = 2;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleExpertImbalance(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(k.expert_placement.size(), 16u);  // one block per MoE layer
  EXPECT_TRUE(k.expert_phy2log.empty());      // placement alone evens these ranks: no replicas
  // Each layer's placement splits its hot experts across both ranks.
  const double before = d->observed["rank_max_over_mean"].get<double>();
  EXPECT_GT(before, 1.5);
  for (size_t l = 0; l < 2; ++l) EXPECT_LT(MaxOverMean(LayerRanks(p, l, k.expert_placement)), 1.1) << l;
  EXPECT_NEAR(d->observed["rank_max_over_mean_after_predicted"].get<double>(),
              std::max(MaxOverMean(LayerRanks(p, 0, k.expert_placement)),
                       MaxOverMean(LayerRanks(p, 1, k.expert_placement))),
              1e-9);
  EXPECT_TRUE(k.reprobe);
  EXPECT_TRUE(k.replan);
  EXPECT_TRUE(k.bias_balancing);
  EXPECT_GE(k.expert_imbalance, 1.0);
  // Re-running on the loads measured under the new placement does not fire again.
  p.config.expert_placement = k.expert_placement;
  LoopKnobs k2 = k;
  k2.reprobe = false;
  EXPECT_FALSE(RuleExpertImbalance(ev, Thresholds{}, k2).has_value());
}

// Layer 0 hot on experts 0-3, layer 1 on 4-7: the loads summed over layers are even, so one
// placement for all layers sees nothing; the worst layer is 1.7 and each layer is placed.
TEST(RuleExpertImbalance, LayersHotOnDifferentExpertsArePlacedEach) {
  ProbeResult p = Skewed(100, 10);
  for (ProbeStep& s : p.steps) std::reverse(s.expert_load[1].begin(), s.expert_load[1].end());
  EXPECT_LT(MaxOverMean(RankLoads(MeasuredExpertLoad(p), 2, {})), Thresholds{}.expert_imbalance);
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleExpertImbalance(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(k.expert_placement.size(), 16u);
  for (size_t l = 0; l < 2; ++l) EXPECT_LT(MaxOverMean(LayerRanks(p, l, k.expert_placement)), 1.1) << l;
}

// One expert takes 400 of 470 tokens: no placement gets the rank that holds it under 400/235 =
// 1.70; two copies of it (one spare slot per rank) split its tokens, so the rule replicates.
TEST(RuleExpertImbalance, AnExpertHotterThanARankGetsReplicas) {
  ProbeResult p = Skewed(100, 10);
  for (ProbeStep& s : p.steps) s.expert_load = {{400, 10, 10, 10, 10, 10, 10, 10}};
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleExpertImbalance(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(k.expert_phy2log.size(), 10u);  // 8 experts + 1 spare slot on each of 2 ranks
  EXPECT_TRUE(k.expert_placement.empty());
  Expected<ReplicaMap> m = BuildReplicaMap(k.expert_phy2log, 8, 2);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->copies[0].size(), 2u);
  EXPECT_GE(d->observed["rank_max_over_mean_per_layer_placement_predicted"].get<double>(), 1.7 - 1e-9);
  EXPECT_LT(d->observed["rank_max_over_mean_replicas_predicted"].get<double>(), 1.1);
  // Measured under the replicas, nothing more to do.
  p.config.expert_phy2log = k.expert_phy2log;
  LoopKnobs k2 = k;
  EXPECT_FALSE(RuleExpertImbalance(ev, Thresholds{}, k2).has_value());
  // Where the probe cannot run replicas (EP over half the data ranks), only placement is tried.
  p.config.expert_phy2log.clear();
  p.config.ranks = 4;
  LoopKnobs k3;
  auto d3 = RuleExpertImbalance(ev, Thresholds{}, k3);
  ASSERT_TRUE(d3.has_value());
  EXPECT_TRUE(k3.expert_phy2log.empty());
}

TEST(RuleExpertImbalance, BalancedLoadsDoNotFire) {
  ProbeResult p = Skewed(20, 20);
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  EXPECT_FALSE(RuleExpertImbalance(ev, Thresholds{}, k).has_value());
  EXPECT_TRUE(k.expert_placement.empty());
}

TEST(RuleCommShare, CalibratesFromMeasuredVsPredictedOnce) {
  ProbeResult p = Healthy();
  for (auto& s : p.steps) {
    s.step_s = 0.2;
    s.comm.all_gather_s = 0.08;
    s.comm.all_to_all_s = 0.04;
    s.compute_s = 0.08;
  }
  p.prediction.available = true;
  p.prediction.step_s = 0.05;
  p.prediction.comm_s = 0.012;  // the cost model thinks collectives are 10x faster than measured
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleCommShare(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->observed["comm_share"].get<double>(), 0.6, 1e-9);
  ASSERT_FALSE(k.calibration.tier_bandwidth.empty());
  EXPECT_NEAR(k.calibration.tier_bandwidth[0], 0.012 / 0.12, 1e-9);
  EXPECT_NEAR(k.calibration.compute_efficiency, 0.038 / 0.08, 1e-9);
  EXPECT_TRUE(k.calibration.Validate().ok());
  EXPECT_TRUE(k.replan);
  EXPECT_FALSE(RuleCommShare(ev, Thresholds{}, k).has_value());  // once per run
}

// Healthy()'s steps (all_to_all 10 ms of a 100 ms step) on 4 ranks with tp or pp 2, plus 40 ms of the
// TP group's collectives (tp > 1) or the pipeline's send/recv (pp > 1); compute_s as the worker
// records it (step_s - comm.total()).
ProbeResult WithTpOrPpComm(int64_t tp, int64_t pp) {
  ProbeResult p = Healthy();
  p.config.ranks = 4;
  p.config.tp = tp;
  p.config.pp = pp;
  for (auto& s : p.steps) {
    (tp > 1 ? s.comm.tp_all_reduce_s : s.comm.pp_recv_s) = 0.03;
    (tp > 1 ? s.comm.tp_all_gather_s : s.comm.pp_send_s) = 0.01;
    s.compute_s = s.step_s - s.comm.total();
  }
  return p;
}

// Issue 10: the communication measured holds the TP group's collectives (and the pipeline's
// send/recv), as the step's compute_s = step_s - comm.total() does. FSDP + EP alone are 10% of the
// step, under the 35% threshold; with the TP all-reduces and all-gathers it is 50%, so the rule must
// fire. Leaving the TP kinds out of ProbeStepTimes (backends/probe_step_series.cpp) fails this test.
TEST(RuleCommShare, TensorParallelCollectivesCountAsCommunication) {
  ProbeResult p = WithTpOrPpComm(2, 1);
  const CommShareReport c = ProbeCommShare(p, Thresholds{});
  EXPECT_NEAR(c.comm_s, 0.05, 1e-12);
  EXPECT_NEAR(c.share, 0.5, 1e-9);
  EXPECT_NEAR(c.share_by_kind.at("tp_all_reduce"), 0.3, 1e-9);
  EXPECT_EQ(c.largest, "tp_all_reduce");
  EXPECT_NEAR(c.comm_s + c.compute_s, c.step_s, 1e-12);
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto d = RuleCommShare(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->observed["comm_share"].get<double>(), 0.5, 1e-9);
  // The pipeline's send/recv count too (pp = 2).
  const CommShareReport q = ProbeCommShare(WithTpOrPpComm(1, 2), Thresholds{});
  EXPECT_NEAR(q.share, 0.5, 1e-9);
  EXPECT_NEAR(q.share_by_kind.at("pp_recv"), 0.3, 1e-9);
  // Without tp/pp the kinds are not listed (a probe without them reports as before).
  EXPECT_EQ(ProbeCommShare(Healthy(), Thresholds{}).share_by_kind.count("tp_all_reduce"), 0u);
}

TEST(RuleCommShare, LowShareDoesNotFire) {
  ProbeResult p = Healthy();  // 10% comm
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  EXPECT_FALSE(RuleCommShare(ev, Thresholds{}, k).has_value());
  EXPECT_FALSE(k.calibrated);
}

PlanCandidate PlanUsing(double total_gib) {
  PlanCandidate c;
  c.estimate.memory.capacity = 100.0 * (1 << 30);
  c.estimate.memory.margin = 8.0 * (1 << 30);
  c.estimate.memory.total = total_gib * (1 << 30);
  return c;
}

TEST(RuleMemoryOverPrediction, RecomputesThenShardsFurtherWhenThePlanWouldNotFit) {
  ProbeResult p = Healthy();  // peak 100 MiB
  p.prediction.available = true;
  p.prediction.memory_bytes = 200LL << 20;  // predicted half of it
  PlanCandidate plan = PlanUsing(80);    // 80 GiB * 2 > 92 GiB usable
  RoundEvidence ev;
  ev.probe = &p;
  ev.plan = &plan;
  LoopKnobs k;
  auto d = RuleMemoryOverPrediction(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->observed["ratio"].get<double>(), 2.0, 1e-9);
  EXPECT_EQ(k.plan_constraints.recompute, Recompute::kFull);
  EXPECT_TRUE(k.replan);
  auto d2 = RuleMemoryOverPrediction(ev, Thresholds{}, k);
  ASSERT_TRUE(d2.has_value());
  EXPECT_GT(k.plan_constraints.memory_margin, 0.08);
  EXPECT_TRUE(d2->changed.contains("memory_margin"));
}

TEST(RuleMemoryOverPrediction, KeepsAPlanThatStillFits) {
  ProbeResult p = Healthy();
  p.prediction.available = true;
  p.prediction.memory_bytes = 200LL << 20;
  PlanCandidate plan = PlanUsing(30);  // 60 GiB scaled still fits in 92
  RoundEvidence ev;
  ev.probe = &p;
  ev.plan = &plan;
  LoopKnobs k;
  auto d = RuleMemoryOverPrediction(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->changed.empty());
  EXPECT_FALSE(k.plan_constraints.recompute.has_value());
  EXPECT_FALSE(k.replan);
  p.prediction.memory_bytes = 380LL << 20;  // within the threshold: nothing to say
  EXPECT_FALSE(RuleMemoryOverPrediction(ev, Thresholds{}, k).has_value());
}

TEST(RuleMemoryOverPrediction, SmallProxyPredictionIsNotAppliedToThePlan) {
  ProbeResult p = Healthy();
  p.baseline_rss_bytes = 380LL << 20;  // runtime before the model: 20 MiB of model memory measured
  p.prediction.available = true;
  p.prediction.memory_bytes = 1 << 20;
  EXPECT_NEAR(MeasuredPeakBytes(p), 20.0 * (1 << 20), 1);
  PlanCandidate plan = PlanUsing(80);
  RoundEvidence ev;
  ev.probe = &p;
  ev.plan = &plan;
  LoopKnobs k;
  auto d = RuleMemoryOverPrediction(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_NEAR(d->observed["ratio"].get<double>(), 20.0, 1e-9);
  EXPECT_TRUE(d->changed.empty());
  EXPECT_FALSE(k.plan_constraints.recompute.has_value());
  EXPECT_FALSE(k.replan);
}

TEST(RuleCommShare, FactorsFromAnotherHostAreNotTransferred) {
  ProbeResult p = Healthy();
  for (auto& s : p.steps) {
    s.step_s = 0.2;
    s.comm.all_to_all_s = 0.12;
    s.compute_s = 0.08;
  }
  p.prediction.available = true;
  p.prediction.step_s = 0.05;
  p.prediction.comm_s = 0.012;
  p.prediction.topology = "localhost-cpu (measured): loopback 1.8 GB/s";
  RoundEvidence ev;
  ev.probe = &p;
  ev.target_device = "Ascend-950DT";
  LoopKnobs k;
  auto d = RuleCommShare(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->changed.empty());
  EXPECT_TRUE(k.calibration.tier_bandwidth.empty());
  EXPECT_FALSE(k.replan);
  EXPECT_NE(d->action.find("Ascend-950DT"), std::string::npos);
  // Same hardware: applied.
  p.prediction.topology = "Ascend-950DT x2 (measured)";
  LoopKnobs k2;
  ASSERT_TRUE(RuleCommShare(ev, Thresholds{}, k2).has_value());
  EXPECT_FALSE(k2.calibration.tier_bandwidth.empty());
  EXPECT_TRUE(k2.replan);
}

TEST(RuleKernelFallback, FailedCheckFallsBackToTheTemplateReference) {
  std::vector<validators::KernelCheckRow> rows(3);
  rows[0] = {"kda_h2_k16", "T=33", "fp64 recurrence", 1e-7, 1e-7, 1e-5, true, true, ""};
  rows[1] = {"dsa_hq2_k16", "T=33", "fp64 dense", 0.3, -1, 1e-5, true, false, "index mismatch"};
  rows[2] = {"dsa_hq2_k16", "T=65", "fp64 dense", 0.2, -1, 1e-5, true, false, ""};
  RoundEvidence ev;
  ev.kernel_rows = &rows;
  ev.kernel_reference_ops = {{"kda", "kda_recurrent_reference"}, {"dsa", "dsa_reference"}};
  LoopKnobs k;
  auto d = RuleKernelFallback(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  ASSERT_EQ(k.kernel_fallbacks.size(), 1u);
  EXPECT_EQ(k.kernel_fallbacks.at("dsa_hq2_k16"), "dsa_reference");
  EXPECT_NE(d->action.find("dsa_hq2_k16"), std::string::npos);
  EXPECT_FALSE(RuleKernelFallback(ev, Thresholds{}, k).has_value());  // already on fallback
  rows[1].pass = rows[2].pass = true;
  LoopKnobs fresh;
  EXPECT_FALSE(RuleKernelFallback(ev, Thresholds{}, fresh).has_value());
}

// Round 1's kernel loss parity (issue 12): a failed parity falls back to the template's reference
// operator and re-probes; a passing one, or one already on fallback, does nothing.
TEST(RuleKernelFallback, FailedLossParityFallsBackAndReprobes) {
  ProbeResult p = Healthy();
  ProbeLossParity lp;
  lp.kernel = "kda";
  lp.pass = true;
  lp.steps = 50;
  lp.max_rel = 4e-6;
  lp.tolerance = 1e-3;
  p.loss_parity = {lp};
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  ev.kernel_reference_ops = {{"kda", "kda_recurrent_reference"}};
  LoopKnobs k;
  EXPECT_FALSE(RuleKernelFallback(ev, Thresholds{}, k).has_value());
  EXPECT_FALSE(k.reprobe);
  p.loss_parity[0].pass = false;
  p.loss_parity[0].max_rel = 0.07;
  auto d = RuleKernelFallback(ev, Thresholds{}, k);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->family, "kernels");
  EXPECT_EQ(k.kernel_fallbacks.at("kda_loss_parity"), "kda_recurrent_reference");
  EXPECT_TRUE(k.reprobe);
  EXPECT_EQ(d->observed["failed_rows"][0]["max_rel"].get<double>(), 0.07);
  EXPECT_NE(d->action.find("re-probe on the reference ops"), std::string::npos);
  LoopKnobs again = k;
  again.reprobe = false;
  EXPECT_FALSE(RuleKernelFallback(ev, Thresholds{}, again).has_value());  // already on fallback
  EXPECT_FALSE(again.reprobe);
}

TEST(ApplyRules, ADivergedProbeIsNotEvidenceForOtherRules) {
  ProbeResult p = Skewed(100, 10);
  for (size_t i = 0; i < p.steps.size(); ++i) p.steps[i].loss = 2.0 + i;  // diverging
  RoundEvidence ev;
  ev.probe = &p;
  LoopKnobs k;
  auto ds = ApplyRules(ev, Thresholds{}, k);
  ASSERT_EQ(ds.size(), 1u);
  EXPECT_EQ(ds[0].rule, "probe_diverged");
  EXPECT_TRUE(k.expert_placement.empty());
  // Healthy loss with the same skew: the balance rule fires.
  ProbeResult q = Skewed(100, 10);
  ev.probe = &q;
  LoopKnobs k2;
  auto ds2 = ApplyRules(ev, Thresholds{}, k2);
  ASSERT_EQ(ds2.size(), 1u);
  EXPECT_EQ(ds2[0].rule, "expert_imbalance");
  EXPECT_EQ(RuleTable().size(), 9u);  // + expert_coactivation, expert_routing, expert_overlap (issue 18)
}

TEST(RuleProbeNotLearned, MoreStepsThenHigherLrThenStops) {
  ProbeResult p = Healthy();
  p.convergence = "not_learned";
  p.skill_metric = "copy_accuracy";
  p.skill = 0.05;
  p.skill_target = 0.9;
  RoundEvidence ev;
  ev.round = 1;
  ev.probe = &p;
  LoopKnobs k;
  const double lr0 = k.learning_rate;
  auto d1 = RuleProbeNotLearned(ev, Thresholds{}, k);
  ASSERT_TRUE(d1.has_value());
  EXPECT_EQ(d1->family, "learning");
  EXPECT_DOUBLE_EQ(k.probe_steps_scale, 2.0);
  EXPECT_DOUBLE_EQ(k.learning_rate, lr0);
  EXPECT_TRUE(k.reprobe);
  EXPECT_EQ(d1->observed["skill"].get<double>(), 0.05);
  auto d2 = RuleProbeNotLearned(ev, Thresholds{}, k);
  ASSERT_TRUE(d2.has_value());
  EXPECT_DOUBLE_EQ(k.probe_steps_scale, 4.0);
  EXPECT_DOUBLE_EQ(k.learning_rate, lr0 * 1.5);
  // Bounded: a third failure is reported, not retried.
  EXPECT_FALSE(RuleProbeNotLearned(ev, Thresholds{}, k).has_value());
}

TEST(RuleProbeNotLearned, ConvergedOrDivergedProbeDoesNotFire) {
  for (const char* v : {"converged", "diverged", "nan"}) {
    ProbeResult p = Healthy();
    p.convergence = v;
    RoundEvidence ev;
    ev.probe = &p;
    LoopKnobs k;
    EXPECT_FALSE(RuleProbeNotLearned(ev, Thresholds{}, k).has_value()) << v;
  }
}

TEST(Thresholds, ValidateNamesTheField) {
  Thresholds t;
  t.comm_share = 1.5;
  Status s = t.Validate();
  EXPECT_EQ(s.code(), ErrorCode::kBadInput);
  EXPECT_NE(s.message().find("comm_share"), std::string::npos);
  EXPECT_NE(s.message().find("1.5"), std::string::npos);
}

}  // namespace
}  // namespace onboard::agent
