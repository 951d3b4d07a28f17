// The loss over the logits (PlanRequest::cross_entropy, search/cross_entropy_cost.h): what it holds on
// the last stage and what its passes cost in the head time, per implementation; the checks that refuse
// an unknown one; and the measured-runs reader's rule for which one a run used.
// Units: bytes, bytes per logit element, seconds.
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search/plan_export.h"
#include "search_test_util.h"

namespace onboard {
namespace {

// gpt-oss-120b (vocab 201088) on 8 H100-80GBs, one stage, micro-batch 2 at seq 4096: T x V = 1.6 G logits.
// With `tp` 2 (sequence parallel, 4 FSDP ranks) the logits are vocab-sharded: T x V / 2 per device.
struct LossCase {
  explicit LossCase(int64_t tp = 1)
      : plan(test::MakePlan({1, 8 / tp, tp, 1, 8, 1, 1, tp > 1, 1}, 4096, 2, 4)) {}
  PlanRequest req = test::HfRequestOn("gpt-oss-120b", "H100-80GB", 8);
  Plan plan;
  MemoryBreakdown Memory(const std::string& loss) {
    req.cross_entropy = loss;
    plan.zero_stage = 1;
    return EstimateMemory(MakeCostContext(req), plan, {}, nullptr);
  }
  double Head(const std::string& loss) {
    req.cross_entropy = loss;
    auto e = EvaluatePlan(req, plan);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    const TimeTerm* t = e.ok() ? test::Term(*e, "compute.head") : nullptr;
    return t ? t->total_s : -1;
  }
};

TEST(CrossEntropy, TheLastStageHoldsWhatItsLossKeeps) {
  LossCase k;
  const double logits = 2.0 * 4096 * 201088;  // T x V / t
  const double megatron = k.Memory("megatron").workspace;
  EXPECT_NEAR(megatron - k.Memory("te_inplace").workspace, (6 - 2) * logits, 1e-6 * logits);
  EXPECT_NEAR(k.Memory("torch").workspace - megatron, (12 - 6) * logits, 1e-6 * logits);
  EXPECT_NEAR(k.Memory("te").workspace, megatron, 1e-6 * logits);  // 2 B logits + 4 B fp32 gradient
  const PlanRequest plain = test::HfRequestOn("gpt-oss-120b", "H100-80GB", 8);
  EXPECT_EQ(plain.cross_entropy, "megatron");  // the default, Megatron-LM's own path
}

TEST(CrossEntropy, ItsPassesAddToTheHeadTimeByTheirBytes) {
  LossCase k;
  const double inplace = k.Head("te_inplace"), megatron = k.Head("megatron"), torch = k.Head("torch");
  const double te = k.Head("te");
  ASSERT_GT(inplace, 0);
  // Same GEMMs, the loss's HBM bytes per logit 10 / 22 / 48 / 52: the differences scale with the bytes.
  EXPECT_NEAR((megatron - inplace) / (torch - inplace), (52.0 - 10) / (48 - 10), 1e-9);
  EXPECT_NEAR((te - inplace) / (torch - inplace), (22.0 - 10) / (48 - 10), 1e-9);
}

// Under TP, torchtitan's loss runs as loss parallel (its default): PyTorch's unfused handlers hold 16 B
// and move 76 B per local logit where the fused t = 1 path holds 12 and moves 48; Megatron-Core's and
// TE's losses are the same kernels at any t.
TEST(CrossEntropy, TorchtitansLossUnderTpIsLossParallel) {
  LossCase k(2);
  const double logits = 2.0 * 4096 * 201088 / 2;  // T x V / t
  const double megatron = k.Memory("megatron").workspace;
  EXPECT_NEAR(k.Memory("torch").workspace - megatron, (16 - 6) * logits, 1e-6 * logits);
  EXPECT_NEAR(megatron - k.Memory("te_inplace").workspace, (6 - 2) * logits, 1e-6 * logits);
  const double inplace = k.Head("te_inplace"), torch = k.Head("torch");
  ASSERT_GT(inplace, 0);
  EXPECT_NEAR((k.Head("megatron") - inplace) / (torch - inplace), (52.0 - 10) / (76 - 10), 1e-9);
  const CrossEntropyCost* t = FindCrossEntropy("torch");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Held(1), 12);
  EXPECT_EQ(t->Traffic(1), 48);
  EXPECT_EQ(FindCrossEntropy("megatron")->Held(8), 6);
}

TEST(CrossEntropy, AnUnknownLossIsBadInputWhereverItIsNamed) {
  PlanRequest req = test::HfRequestOn("gpt-oss-120b", "H100-80GB", 8);
  req.cross_entropy = "fp32";
  Status st = req.Validate();
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("field 'cross_entropy'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(got fp32)"), std::string::npos) << st.message();
  auto bad = ParseLayoutJson(R"({"tp":1,"pp":1,"cross_entropy":"fp32"})", "layout.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layout.json: field 'cross_entropy'"), std::string::npos)
      << bad.status().message();
  auto good = ParseLayoutJson(R"({"tp":1,"pp":1,"cross_entropy":"torch"})", "layout.json");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  PlanRequest applied = test::HfRequestOn("gpt-oss-120b", "H100-80GB", 8);
  ApplyRunOptions(good->front(), &applied);
  EXPECT_EQ(applied.cross_entropy, "torch");
  auto unset = ParseLayoutJson(R"({"tp":1,"pp":1})", "layout.json");
  ASSERT_TRUE(unset.ok());
  ApplyRunOptions(unset->front(), &applied);
  EXPECT_EQ(applied.cross_entropy, "torch");  // a layout that names none leaves the request's
}

// Each export's engine runs its own loss: torchtitan torch's, the Megatron family Megatron-Core's;
// the launchers and `all` leave the engine to launch time. Every name is one the request accepts.
TEST(CrossEntropy, EachExportNamesItsEnginesLoss) {
  EXPECT_EQ(ExportEngineLoss("torchtitan"), "torch");
  EXPECT_EQ(ExportEngineLoss("torchtitan-v0.2"), "torch");
  for (const char* e : {"megatron", "bridge", "mindspeed"}) EXPECT_EQ(ExportEngineLoss(e), "megatron") << e;
  for (const char* e : {"all", "torchrun", "slurm", ""}) EXPECT_EQ(ExportEngineLoss(e), "") << e;
  for (const char* e : {"torchtitan", "megatron"}) EXPECT_NE(FindCrossEntropy(ExportEngineLoss(e)), nullptr);
  // What plan costs: the named loss wins; else the exported engine's; else Megatron-Core's.
  EXPECT_EQ(CostedLoss("", "torchtitan"), "torch");
  EXPECT_EQ(CostedLoss("te", "torchtitan"), "te");
  EXPECT_EQ(CostedLoss("", "all"), "megatron");
  EXPECT_EQ(CostedLoss("", ""), "megatron");
}

// Megatron-Bridge's performance scripts run Transformer Engine's fused loss (in place up to container
// 26.08); NeMo 2 runs Megatron-Core's; torchtitan torch's; a framework that says nothing is assumed
// Megatron-Core's, and says so.
TEST(MeasuredRunsReader, EachRunsLossFollowsItsFramework) {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  std::map<std::string, const LayoutRun*> by_id;
  for (const LayoutRun& r : *runs) by_id[r.id] = &r;
  ASSERT_TRUE(by_id.count("mb2604-dsv3-gb300-mxfp8") && by_id.count("nemo2504-mixtral8x7b-gb200-fp8") &&
              by_id.count("am-dsv3-h100-256") && by_id.count("tt-llama31-405b-512-h100-i1f1b"));
  EXPECT_EQ(by_id["mb2604-dsv3-gb300-mxfp8"]->cross_entropy, "te_inplace");
  EXPECT_EQ(RequestForRun(*by_id["mb2604-dsv3-gb300-mxfp8"]).cross_entropy, "te_inplace");
  EXPECT_EQ(by_id["nemo2504-mixtral8x7b-gb200-fp8"]->cross_entropy, "");
  EXPECT_EQ(RequestForRun(*by_id["nemo2504-mixtral8x7b-gb200-fp8"]).cross_entropy, "megatron");
  EXPECT_EQ(by_id["tt-llama31-405b-512-h100-i1f1b"]->cross_entropy, "torch");
  const LayoutRun& am = *by_id["am-dsv3-h100-256"];
  EXPECT_EQ(am.cross_entropy, "");
  bool said = false;
  for (const std::string& a : am.assumptions) said = said || a.find("loss not stated") == 0;
  EXPECT_TRUE(said);
  // A Bridge container after 26.08 runs a TE with the fp32 gradient (TE PR #3193).
  const std::string later = R"({"configs":{"deepseek-ai/DeepSeek-V3":{"file":"hf/deepseek-v3.config.json"}},
      "runs":[{"id":"x","model":"deepseek-ai/DeepSeek-V3","hardware":"GB300","gpus":256,"tp":1,"pp":2,
      "vp":8,"ep":32,"global_batch":4096,"micro_batch":2,"seq":4096,"precision":"mxfp8",
      "framework":"Megatron-Bridge / Megatron-Core, NeMo container 26.10",
      "measured":{"tokens_per_s_per_gpu":5000}}]})";
  auto l = ParseLayoutJson(later, std::string(ONBOARD_TEST_DATA) + "/inline.json");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->front().cross_entropy, "te");
}

}  // namespace
}  // namespace onboard
