// The terms issue 13 lists beside the MoE passes: TP communication overlap (TE userbuffers), expert
// tensor parallelism (etp > 1) and the DualPipe schedule (DeepSeek-V3 report). Each is checked
// against the plan without it, and against the input that must be refused.
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

PlanRequest Request(const std::string& model, const std::string& topo, int64_t seq) {
  PlanRequest req;
  req.model = test::HfModel(model);
  req.topology = test::ShippedTopology(topo);
  req.mode = FinetuneMode::kFull;
  req.seq = seq;
  req.compute_dtype = Precision::kFP8;
  return req;
}

using test::Term;

double Exposed(const PlanEstimate& e, const std::string& name) {
  const TimeTerm* t = Term(e, name);
  return t ? t->exposed_s : 0;
}

// Llama-3.1-405B, tp 8 pp 8 on 128 H800 (NVLink 8 per node).
Plan LlamaPlan(const PlanRequest& req) {
  Plan p = test::MakePlan({1, 2, 8, 8, 1, 1, 1, true}, req.seq, 1, 16);
  p.zero_stage = 1;
  p.compute_dtype = Precision::kFP8;
  return p;
}

TEST(TpCommOverlap, HidesAllButOneChunkOfEachCollective) {
  const PlanRequest req = Request("llama-3.1-405b", "h800-2048-deepseek-v3", 8192);
  PlanRequest small = req;
  small.topology.num_devices = 128;
  const CostContext c = MakeCostContext(small);
  Plan off = LlamaPlan(small), on = off;
  on.tp_comm_overlap = true;
  ASSERT_TRUE(CheckPlanAgainstModel(c, on).ok()) << CheckPlanAgainstModel(c, on).ToString();
  const PlanEstimate a = EstimatePlan(c, off), b = EstimatePlan(c, on);
  ASSERT_NE(Term(a, "comm.tp"), nullptr);
  ASSERT_NE(Term(b, "comm.tp"), nullptr);
  // Same traffic, less of it exposed; at least one of t chunks per collective stays exposed.
  EXPECT_DOUBLE_EQ(Term(a, "comm.tp")->total_s, Term(b, "comm.tp")->total_s);
  EXPECT_DOUBLE_EQ(Term(a, "comm.tp")->exposed_s, Term(a, "comm.tp")->total_s);
  EXPECT_LT(Exposed(b, "comm.tp"), 0.5 * Exposed(a, "comm.tp"));
  EXPECT_GE(Exposed(b, "comm.tp"), Term(b, "comm.tp")->total_s / 8 * (1 - 1e-12));
  EXPECT_LT(b.step_s, a.step_s);
  // The SM share the pipelined reduce-scatter takes is charged: without it, less is exposed.
  CostContext no_tax = c;
  no_tax.k.tp_overlap_sm_tax = 0;
  EXPECT_LT(Exposed(EstimatePlan(no_tax, on), "comm.tp"), Exposed(b, "comm.tp"));
}

// Interleaved PP with overlap_p2p_comm (Megatron-Core): the sends hide behind the chunk passes but
// the 2(p-1) warm-up / cool-down hand-offs; blocking (batch_p2p_comm) with vp = 1 whatever the flag.
TEST(PpP2pOverlap, InterleavedSendsHideButTheWarmUpAndCoolDown) {
  PlanRequest req = Request("llama-3.1-405b", "h800-2048-deepseek-v3", 8192);
  req.topology.num_devices = 128;
  Plan p = LlamaPlan(req);
  p.deg.interleave = 2;
  const PlanEstimate off = EstimatePlan(MakeCostContext(req), p);
  req.overlap_pp_p2p = true;
  const PlanEstimate on = EstimatePlan(MakeCostContext(req), p);
  const TimeTerm *a = Term(off, "comm.pp_p2p"), *b = Term(on, "comm.pp_p2p");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(a->tier, "ib");  // pp at stride tp*dp = 16 crosses the 8-GPU nodes
  EXPECT_DOUBLE_EQ(a->total_s, b->total_s);
  EXPECT_DOUBLE_EQ(a->exposed_s, a->total_s);
  const double sends = 16.0 * 2 * 2 + 2 * 7, one = a->total_s / sends;  // m*2v + 2(p-1)
  EXPECT_NEAR(b->exposed_s, 2 * 7 * one, 1e-9);  // each send is far shorter than a chunk pass
  EXPECT_LT(on.step_s, off.step_s);
  p.deg.interleave = 1;  // Megatron turns overlap_p2p_comm off without interleaving
  const PlanEstimate plain = EstimatePlan(MakeCostContext(req), p);
  EXPECT_DOUBLE_EQ(Term(plain, "comm.pp_p2p")->exposed_s, Term(plain, "comm.pp_p2p")->total_s);
}

// DeepSeek-V3 (256 experts of width 2048) on 256 H800: pp 4, ep 8 x etp 2 vs ep 8 x etp 1.
Plan DsPlan(int64_t etp) {
  Plan p = test::MakePlan({1, 64, 1, 4, 8, 8 / etp, 1, false}, 4096, 1, 8);
  p.deg.etp = etp;
  p.zero_stage = 1;
  p.compute_dtype = Precision::kFP8;
  p.recompute["*"] = Recompute::kFull;
  return p;
}

TEST(ExpertTensorParallel, SplitsExpertWeightsAndPaysItsGather) {
  PlanRequest req = Request("deepseek-v3", "h800-2048-deepseek-v3", 4096);
  req.topology.num_devices = 256;
  const CostContext c = MakeCostContext(req);
  const Plan one = DsPlan(1), two = DsPlan(2);
  ASSERT_TRUE(CheckPlanAgainstModel(c, two).ok()) << CheckPlanAgainstModel(c, two).ToString();
  const PlanEstimate a = EstimatePlan(c, one), b = EstimatePlan(c, two);
  // Experts are most of DeepSeek-V3's weights: halving them per rank cuts weights by > 40%.
  EXPECT_LT(b.memory.weights, 0.6 * a.memory.weights);
  // The etp all-gather / reduce-scatter of the dispatched tokens adds to the MoE communication.
  EXPECT_GT(Term(b, "comm.ep_a2a")->total_s, Term(a, "comm.ep_a2a")->total_s);
  EXPECT_NE(PlanSummary(two).find("etp=2"), std::string::npos);
  EXPECT_EQ(PlanSummary(one).find("etp="), std::string::npos);
}

TEST(ExpertTensorParallel, RefusesSplitsTheModelOrTheRanksCannotTake) {
  PlanRequest req = Request("deepseek-v3", "h800-2048-deepseek-v3", 4096);
  req.topology.num_devices = 256;
  const CostContext c = MakeCostContext(req);
  Plan bad = DsPlan(2);
  bad.deg.etp = 3;  // 64 ranks of a stage do not split into ep 8 x etp 3
  const Status st = CheckPlanAgainstModel(c, bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ep*etp=8*3"), std::string::npos) << st.message();
  // gpt-oss-120b's experts are 2880 wide: 1024 ranks split into ep 8 x etp 128, the width does not.
  PlanRequest oss = Request("gpt-oss-120b", "h800-2048-deepseek-v3", 4096);
  oss.topology.num_devices = 1024;
  const CostContext co = MakeCostContext(oss);
  Plan narrow = test::MakePlan({1, 1024, 1, 1, 8, 1, 1, false}, 4096, 1, 1);
  narrow.deg.etp = 128;
  const Status sw = CheckPlanAgainstModel(co, narrow);
  ASSERT_FALSE(sw.ok());
  EXPECT_NE(sw.message().find("etp=128 must divide the expert FFN width 2880"), std::string::npos)
      << sw.message();
  narrow.deg.etp = 64;  // 2880 = 64 x 45
  narrow.deg.expert_fsdp = 2;
  EXPECT_TRUE(CheckPlanAgainstModel(co, narrow).ok()) << CheckPlanAgainstModel(co, narrow).ToString();
  // Layout files: etp is read, and 0 is refused naming the field.
  const std::string base =
      std::string(R"({"tp":1,"pp":4,"dp":64,"ep":8,"micro_batch":1,"global_batch":512,)") +
      R"("seq":4096,"etp":)";
  auto ok = ParseLayoutJson(base + "2}", "inline.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].plan.deg.etp, 2);
  EXPECT_EQ((*ok)[0].plan.deg.expert_fsdp, 4);
  auto zero = ParseLayoutJson(base + "0}", "inline.json");
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("etp"), std::string::npos) << zero.status().message();
}

// DeepSeek-V3 on its 2,048 H800: pp 16, ep 64 (the report's layout), 1F1B vs DualPipe.
Plan ReportPlan(PipelineSchedule s) {
  Plan p = test::MakePlan({1, 128, 1, 16, 64, 2, 1, false}, 4096, 1, 120);
  p.zero_stage = 1;
  p.compute_dtype = Precision::kFP8;
  p.mtp_layers = 1;
  p.pipeline_schedule = s;
  p.recompute["MLA"] = Recompute::kSelective;
  return p;
}

TEST(DualPipe, SmallerBubbleHiddenSendsTwiceTheParameters) {
  const PlanRequest req = Request("deepseek-v3", "h800-2048-deepseek-v3", 4096);
  const CostContext c = MakeCostContext(req);
  const Plan f = ReportPlan(PipelineSchedule::k1F1B), d = ReportPlan(PipelineSchedule::kDualPipe);
  ASSERT_TRUE(CheckPlanAgainstModel(c, d).ok()) << CheckPlanAgainstModel(c, d).ToString();
  const PlanEstimate a = EstimatePlan(c, f), b = EstimatePlan(c, d);
  // (p/2-1)(F&B + B - 3W) < (p/2-1)/(p-1) of 1F1B's (p-1) t_mb, and above zero.
  EXPECT_GT(Exposed(b, "bubble"), 0);
  EXPECT_LT(Exposed(b, "bubble"), Exposed(a, "bubble") * 7.0 / 15.0);
  // PP sends hidden, EP all-to-all overlapped.
  EXPECT_GT(Exposed(a, "comm.pp_p2p"), 0);
  EXPECT_EQ(Exposed(b, "comm.pp_p2p"), 0);
  EXPECT_LT(Exposed(b, "comm.ep_a2a"), Exposed(a, "comm.ep_a2a"));
  EXPECT_LT(b.step_s, a.step_s);
}

TEST(DualPipe, EachRankHoldsTwoStagesOfParameters) {
  // Uniform dense layers and a tiny vocabulary: every 1F1B stage holds the same weights, a DualPipe
  // rank holds two of them.
  auto m = ModelFromDims(R"({"hidden":4096,"ffn":16384,"heads":32,"layers":16,"vocab":1000,"gated":true})",
                         "dims");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  PlanRequest req;
  req.model = *m;
  req.topology = test::ShippedTopology("h800-2048-deepseek-v3");
  req.topology.num_devices = 32;
  req.seq = 4096;
  const CostContext c = MakeCostContext(req);
  Plan f = test::MakePlan({1, 8, 1, 4, 1, 8, 1, false}, 4096, 1, 8);
  f.zero_stage = 1;
  Plan d = f;
  d.pipeline_schedule = PipelineSchedule::kDualPipe;
  ASSERT_TRUE(CheckPlanAgainstModel(c, d).ok()) << CheckPlanAgainstModel(c, d).ToString();
  const PlanEstimate a = EstimatePlan(c, f), b = EstimatePlan(c, d);
  EXPECT_NEAR(b.memory.weights / a.memory.weights, 2.0, 0.02);
  EXPECT_NEAR(b.memory.optimizer / a.memory.optimizer, 2.0, 0.02);
  EXPECT_GT(b.memory.activations, a.memory.activations);  // p+1 micro-batches of a stage, not p
}

TEST(DualPipe, RefusesLayoutsItCannotRun) {
  const PlanRequest req = Request("deepseek-v3", "h800-2048-deepseek-v3", 4096);
  const CostContext c = MakeCostContext(req);
  Plan odd = ReportPlan(PipelineSchedule::kDualPipe);
  odd.deg.interleave = 2;
  EXPECT_NE(CheckPlanAgainstModel(c, odd).message().find("interleave=1"), std::string::npos);
  Plan few = ReportPlan(PipelineSchedule::kDualPipe);
  few.num_micro_batches = 16;  // < 2 * pp
  few.global_batch = 16 * 128;
  EXPECT_NE(CheckPlanAgainstModel(c, few).message().find(">= 2*pp=32"), std::string::npos)
      << CheckPlanAgainstModel(c, few).message();
  auto bad = ParseLayoutJson(R"({"tp":1,"pp":2,"dp":4,"micro_batch":1,"global_batch":32,"seq":4096,)"
                             R"("pipeline_schedule":"zb-v"})",
                             "inline.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pipeline_schedule"), std::string::npos);
}

}  // namespace
}  // namespace onboard
