// The memory terms of issue 13's second pass, one at a time, each against the input that should move
// it and one that should not: RMSNorm recompute (DeepSeek-V3 report sec. 3.2.3, Megatron
// recompute_modules layernorm), the fp8 SwiGLU-input store and the recomputed SwiGLU output (report
// sec. 3.3.3, Megatron --activation-func-fp8-input-store / moe_act), and the embedding copy Megatron
// keeps on the MTP stage (not under DualPipe). Units: bytes per token, bytes, seconds.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/plan.h"
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

using test::Term;

// DeepSeek-V3 (MLA + 256 gated routed experts, top 8) on 64 H800s at seq 4096.
PlanRequest DeepSeekRequest(Precision prec) {
  PlanRequest req = test::HfRequestOn("deepseek-v3", "H800", 64);
  req.compute_dtype = prec;
  return req;
}

// The last layer: an MoE layer of DeepSeek-V3 (the first three are dense).
size_t MoeLayer(const CostContext& c) { return c.prof.layers.size() - 1; }

TEST(MemoryTerms, RmsNormRecomputeDropsEachBlocksNormOutputAndPaysOneMorePass) {
  PlanRequest off = DeepSeekRequest(Precision::kBF16), on = off;
  on.recompute_norms = true;
  const CostContext a = MakeCostContext(off), b = MakeCostContext(on);
  const size_t l = MoeLayer(a);
  const LayerProfile& lp = a.prof.layers[l];
  ASSERT_GT(lp.act_norms, 0);
  Plan p = test::MakePlan({1, 64, 1, 1, 64, 1, 1, false, 1}, 4096, 1, 2);
  double ra = 0, rb = 0;
  // Two blocks, each keeps its norm's output (act_norms / 2) unless the norm is recomputed.
  const double kept = LayerActBytesPerToken(a, p, l, &ra), dropped = LayerActBytesPerToken(b, p, l, &rb);
  EXPECT_DOUBLE_EQ(kept - dropped, lp.act_norms);
  EXPECT_DOUBLE_EQ(ra, rb);  // routed experts keep what they kept
  // A fully recomputed layer keeps only its input: nothing more to drop.
  p.recompute = {{"*", Recompute::kFull}};
  EXPECT_DOUBLE_EQ(LayerActBytesPerToken(a, p, l, nullptr), LayerActBytesPerToken(b, p, l, nullptr));
  // Time: without other recompute the only recompute term is the norms' extra pass.
  p.recompute.clear();
  auto ea = EvaluatePlan(off, p), eb = EvaluatePlan(on, p);
  ASSERT_TRUE(ea.ok() && eb.ok()) << eb.status().ToString();
  EXPECT_EQ(Term(*ea, "recompute"), nullptr);
  ASSERT_NE(Term(*eb, "recompute"), nullptr);
  EXPECT_GT(Term(*eb, "recompute")->exposed_s, 0);
  EXPECT_LT(Term(*eb, "recompute")->exposed_s, 0.02 * eb->step_s);  // "a minor overhead" (sec. 3.2.3)
  EXPECT_LT(eb->memory.activations, ea->memory.activations);
}

// CPU offloading (Megatron --cpu-offloading-num-layers, activations only; TE get_cpu_offload_context:
// "activation memory usage is equal to (num_layers - num_offloaded_layers) * T"): a quarter of
// Llama-3.1-8B's 32 layers leave three quarters of its activations on the device, and their copy to the
// host and back is a term that hides behind compute on GB200 (157 GB/s per GPU: two GPUs share one
// Grace's LPDDR5X) and shows over HGX B200's PCIe (55 GB/s). Half the layers show on GB200 too: an 8B
// layer's activations are large for its compute. Megatron's own checks: pp 1 and no recompute; a device
// without a host-link figure cannot be costed.
TEST(MemoryTerms, CpuOffloadingMovesTheFirstLayersActivationsToTheHost) {
  Plan p = test::MakePlan({1, 8, 1, 1, 1, 1, 1, false, 1}, 4096, 4, 4);
  p.mode = FinetuneMode::kFull;
  for (const char* hw : {"GB200", "B200"}) {
    PlanRequest off = test::HfRequestOn("llama-3.1-8b", hw, 8), on = off;
    off.mode = on.mode = FinetuneMode::kFull;
    on.cpu_offload_layers = 8;
    auto a = EvaluatePlan(off, p), b = EvaluatePlan(on, p);
    ASSERT_TRUE(a.ok() && b.ok()) << hw << ": " << b.status().ToString();
    EXPECT_NEAR(b->memory.activations, a->memory.activations * 3 / 4, 1e-6 * a->memory.activations) << hw;
    EXPECT_NEAR(b->memory.offloaded, a->memory.activations / 4, 1e-6 * a->memory.activations) << hw;
    EXPECT_DOUBLE_EQ(a->memory.offloaded, 0);
    EXPECT_EQ(Term(*a, "offload"), nullptr);
    const TimeTerm* t = Term(*b, "offload");
    ASSERT_NE(t, nullptr) << hw;
    const double copy =
        b->memory.offloaded / HostLinkBytesPerSecond(MakeCostContext(on).req->topology.device.name);
    EXPECT_NEAR(t->total_s, 4 * 2 * copy, 1e-9) << hw;  // 4 micro-batches, out and back
    if (std::string(hw) == "GB200") {
      EXPECT_DOUBLE_EQ(t->exposed_s, 0);
    } else {
      EXPECT_GT(t->exposed_s, 0);
    }
  }
  PlanRequest on = test::HfRequestOn("llama-3.1-8b", "GB200", 8);
  on.mode = FinetuneMode::kFull;
  on.cpu_offload_layers = 16;
  auto half = EvaluatePlan(on, p);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  ASSERT_NE(Term(*half, "offload"), nullptr);
  EXPECT_GT(Term(*half, "offload")->exposed_s, 0);
  Plan pp2 = test::MakePlan({1, 4, 1, 2, 1, 1, 1, false, 1}, 4096, 4, 4);
  EXPECT_FALSE(EvaluatePlan(on, pp2).ok());
  Plan rc = p;
  rc.recompute = {{"*", Recompute::kSelective}};
  EXPECT_FALSE(EvaluatePlan(on, rc).ok());
  on.cpu_offload_layers = 32;  // every layer: Megatron requires fewer than num_layers
  EXPECT_FALSE(EvaluatePlan(on, p).ok());
  on.cpu_offload_layers = 16;
  on.topology.device.name = "custom-device";
  auto unknown = EvaluatePlan(on, p);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("host-link bandwidth"), std::string::npos)
      << unknown.status().message();
}

// bf16 sharded parameters (plan.param_dtype; NeMo AutoModel casts its models to bf16): FSDP's shards
// take 2 B per parameter instead of fp32's 4, and the gathered layers do not change.
TEST(MemoryTerms, Bf16ShardedParametersHalveTheShardsOnly) {
  PlanRequest req = test::HfRequestOn("llama-3.1-8b", "H100-80GB", 16);
  req.mode = FinetuneMode::kFull;
  const CostContext c = MakeCostContext(req);
  Plan fp32 = test::MakePlan({1, 16, 1, 1, 1, 1, 1, false, 1}, 4096, 1, 8);
  fp32.mode = FinetuneMode::kFull;
  fp32.recompute = {{"*", Recompute::kFull}};
  Plan bf16 = fp32;
  bf16.param_dtype = Precision::kBF16;
  double params = c.prof.embed_params + c.prof.vision_params + c.prof.head_params + c.prof.other_params;
  for (const LayerProfile& lp : c.prof.layers) params += lp.dense_params;
  const MemoryBreakdown a = EstimateMemory(c, fp32, {0}, nullptr), b = EstimateMemory(c, bf16, {0}, nullptr);
  EXPECT_NEAR(a.weights, 4 * params / 16, 1e-9 * params);
  EXPECT_NEAR(b.weights, 2 * params / 16, 1e-9 * params);
  EXPECT_DOUBLE_EQ(b.workspace, a.workspace);
  EXPECT_DOUBLE_EQ(b.grads, a.grads);  // grad_dtype alone sets the gradients' bytes
}

TEST(MemoryTerms, Fp8SwiGluInputStoreAndRecomputedOutputDropTheirBytes) {
  PlanRequest off = DeepSeekRequest(Precision::kFP8), on = off;
  on.fp8_act_input_store = true;
  const CostContext a = MakeCostContext(off), b = MakeCostContext(on);
  const size_t l = MoeLayer(a);
  const LayerProfile& lp = a.prof.layers[l];
  ASSERT_TRUE(GatedRoutedExperts(lp));
  const double kI = static_cast<double>(lp.top_k) * lp.expert_inter;  // SwiGLU outputs per token
  Plan p = test::MakePlan({1, 64, 1, 1, 64, 1, 1, false, 1}, 4096, 1, 2);
  p.compute_dtype = Precision::kFP8;
  double r0 = 0, r1 = 0, r2 = 0, r3 = 0;
  LayerActBytesPerToken(a, p, l, &r0);
  LayerActBytesPerToken(b, p, l, &r1);
  EXPECT_DOUBLE_EQ(r0 - r1, 2 * kI);  // the 2I-wide input at 1 byte instead of 2
  p.recompute = {{"MoE", Recompute::kSelective}};
  LayerActBytesPerToken(a, p, l, &r2);
  EXPECT_DOUBLE_EQ(r0 - r2, kI);  // the output's 1-byte fp8 copy not kept either
  LayerActBytesPerToken(b, p, l, &r3);
  EXPECT_DOUBLE_EQ(r0 - r3, 3 * kI);
  // In bf16 training the recomputed output saves its 2-byte copy.
  const CostContext bf = MakeCostContext(DeepSeekRequest(Precision::kBF16));
  Plan q = p;
  q.compute_dtype = Precision::kBF16;
  double s0 = 0, s1 = 0;
  q.recompute.clear();
  LayerActBytesPerToken(bf, q, l, &s0);
  q.recompute = {{"MoE", Recompute::kSelective}};
  LayerActBytesPerToken(bf, q, l, &s1);
  EXPECT_DOUBLE_EQ(s0 - s1, 2 * kI);
  // A dense (non-gated-expert) layer has nothing to drop.
  EXPECT_FALSE(GatedRoutedExperts(a.prof.layers[0]));
  // Time: the store's quantise/dequantise passes and the SwiGLU recompute are paid.
  Plan t = p;
  t.recompute.clear();
  auto ea = EvaluatePlan(off, t), eb = EvaluatePlan(on, t);
  ASSERT_TRUE(ea.ok() && eb.ok()) << eb.status().ToString();
  EXPECT_GT(eb->compute_s_by_kind.at("MoE"), ea->compute_s_by_kind.at("MoE"));
  t.recompute = {{"MoE", Recompute::kSelective}};
  auto es = EvaluatePlan(on, t);
  ASSERT_TRUE(es.ok());
  ASSERT_NE(Term(*es, "recompute"), nullptr);
  EXPECT_GT(Term(*es, "recompute")->exposed_s, 0);
}

TEST(MemoryTerms, MtpStageKeepsAnEmbeddingCopyExceptUnderDualPipe) {
  const PlanRequest req = DeepSeekRequest(Precision::kBF16);
  const CostContext c = MakeCostContext(req);
  // pp 2 with the last stage holding 59 of the 61 layers: it is the worst stage with or without MTP.
  Plan p = test::MakePlan({1, 32, 1, 2, 32, 1, 1, false, 1}, 4096, 1, 8);
  p.zero_stage = 1;
  p.stage_layer_starts = {0, 2};
  p.recompute = {{"*", Recompute::kFull}};
  auto weights = [&](const Plan& x) { return EstimatePlanMemory(c, x).weights; };
  Plan m = p;
  m.mtp_layers = 1;
  const double with_copy = weights(m) - weights(p);
  Plan one = test::MakePlan({1, 64, 1, 1, 64, 1, 1, false, 1}, 4096, 1, 8);
  one.zero_stage = 1;
  one.recompute = p.recompute;
  Plan one_m = one;
  one_m.mtp_layers = 1;
  const double same_stage = weights(one_m) - weights(one);  // pp 1: one stage holds both ends
  // The MTP layer at ep 32 vs ep 64 differs in its experts per rank; compare the dense part only:
  // the copy is 2 bytes (bf16 weight) per embedding parameter.
  const LayerProfile& last = c.prof.layers.back();
  const double mtp_32 = 2 * (last.dense_params + 2 * last.hidden * last.hidden + last.expert_params / 32);
  const double mtp_64 = 2 * (last.dense_params + 2 * last.hidden * last.hidden + last.expert_params / 64);
  EXPECT_NEAR(same_stage, mtp_64, 1e-6 * mtp_64);
  EXPECT_NEAR(with_copy, mtp_32 + 2 * c.prof.embed_params, 1e-6 * with_copy);
  // DualPipe: the rank holding the last stage holds the first too, and shares the embedding.
  Plan dp = p, dp_m = m;
  dp.pipeline_schedule = dp_m.pipeline_schedule = PipelineSchedule::kDualPipe;
  EXPECT_NEAR(weights(dp_m) - weights(dp), mtp_32, 1e-6 * mtp_32);
}

// DualPipe: rank r holds stages r and p-1-r, so rank 0 holds the last stage too and with it the fp32
// logits and their gradient. With pp 2 both ranks hold the same stages: the same memory, and the first
// rank reported as the peak (a rank that lost the last stage's logits would leave rank 1 the larger).
TEST(MemoryTerms, DualPipeRankZeroHoldsTheLastStagesLogits) {
  const CostContext c = MakeCostContext(DeepSeekRequest(Precision::kBF16));
  Plan p = test::MakePlan({1, 32, 1, 2, 32, 1, 1, false, 1}, 4096, 1, 8);
  p.zero_stage = 1;
  p.stage_layer_starts = {0, 31};
  p.recompute = {{"*", Recompute::kFull}};
  p.pipeline_schedule = PipelineSchedule::kDualPipe;
  int stage = -1;
  const MemoryBreakdown m = EstimateMemory(c, p, p.stage_layer_starts, &stage);
  EXPECT_EQ(stage, 0);
  // Megatron-Core's loss: bf16 logits + their fp32 softmax-then-gradient, tp 1 (cross_entropy_cost.h)
  const double logits = (2 + 4) * TokensPerRank(p) * c.prof.vocab;
  EXPECT_NEAR(m.workspace, c.req->constraints.reserved_gib * 1073741824.0 + logits, 1e-9 * logits);
}

// The DeepSeek-V3 report's run (tests/data/measured_training_runs.json) is read with its memory
// techniques; the same row quoting another source, or without RMSNorm in its recompute text, is not.
// NeMo AutoModel casts its models to bf16 at initialisation: its FSDP runs keep bf16 shards, gradients
// and Adam moments (search/layout_file_recipe.cpp rule "parameter dtype"); a Megatron-Core FSDP run of
// the same shape keeps fp32. Both AutoModel DeepSeek-V3 runs fit.
TEST(MeasuredRunsReader, AutoModelRunsKeepBf16Shards) {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int seen = 0;
  for (const LayoutRun& r : *runs) {
    if (r.id.rfind("am-", 0) != 0) continue;
    ++seen;
    EXPECT_EQ(r.plan.param_dtype, Precision::kBF16) << r.id;
    EXPECT_EQ(r.plan.grad_dtype, Precision::kBF16) << r.id;
    EXPECT_EQ(r.plan.optimizer_dtype, Precision::kBF16) << r.id;
    EXPECT_EQ(r.plan.fsdp_pipelining, FsdpPipelining::kPerStep) << r.id;  // torch FSDP2 with pp 4
    auto e = EvaluatePlan(RequestForRun(r), r.plan);
    ASSERT_TRUE(e.ok()) << r.id << ": " << e.status().ToString();
    EXPECT_TRUE(e->fits) << r.id << ": " << e->memory.total / 1073741824.0 << " GiB";
  }
  EXPECT_EQ(seen, 2);
  const std::string origin = std::string(ONBOARD_TEST_DATA) + "/inline.json";
  const std::string run = R"({"id":"x","model":"deepseek-ai/DeepSeek-V3","hardware":"H100","gpus":256,
      "tp":1,"pp":4,"vp":8,"ep":64,"fsdp":64,"global_batch":512,"micro_batch":1,"seq":4096,"precision":"bf16",
      "measured":{"tokens_per_s_per_gpu":1000},"framework":)";
  const std::string cfg =
      R"(}],"configs":{"deepseek-ai/DeepSeek-V3":{"file":"hf/deepseek-v3.config.json"}}})";
  auto mcore = ParseLayoutJson(R"({"runs":[)" + run + R"("Megatron-Core")" + cfg, origin);
  ASSERT_TRUE(mcore.ok()) << mcore.status().ToString();
  EXPECT_EQ((*mcore)[0].plan.param_dtype, Precision::kFP32);
  EXPECT_EQ((*mcore)[0].plan.fsdp_pipelining, FsdpPipelining::kPerMicroBatch);  // Megatron-FSDP
  auto am = ParseLayoutJson(R"({"runs":[)" + run + R"("NeMo AutoModel")" + cfg, origin);
  ASSERT_TRUE(am.ok()) << am.status().ToString();
  EXPECT_EQ((*am)[0].plan.param_dtype, Precision::kBF16);
  EXPECT_EQ((*am)[0].plan.fsdp_pipelining, FsdpPipelining::kPerStep);
}

// How FSDP meets pipelining (core/plan.h FsdpPipelining), on a dense 8B model at dp_shard 8, pp 2,
// 8 micro-batches: Megatron-FSDP gathers forward and backward and reduce-scatters every micro-batch;
// torch FSDP2 under pipelining gathers and reduce-scatters once per step but holds the stage gathered
// (2 B x (1 - 1/8) more weights) and its grads unsharded in fp32 (4 B more). Without PP both are the
// same; per_step needs zero 3.
TEST(MemoryTerms, FsdpWithPipeliningFollowsTheImplementation) {
  PlanRequest req = test::HfRequestOn("llama-3.1-8b", "H100-80GB", 16);
  req.mode = FinetuneMode::kFull;
  const int64_t m = 8;
  auto both = [&](int64_t pp) {
    Plan per_mb = test::MakePlan({1, 16 / pp, 1, pp, 1, 1, 1, false, 1}, 4096, 1, m);
    per_mb.mode = FinetuneMode::kFull;
    Plan per_step = per_mb;
    per_step.fsdp_pipelining = FsdpPipelining::kPerStep;
    auto a = EvaluatePlan(req, per_mb), b = EvaluatePlan(req, per_step);
    EXPECT_TRUE(a.ok() && b.ok());
    return std::pair<PlanEstimate, PlanEstimate>{a.ok() ? *a : PlanEstimate{}, b.ok() ? *b : PlanEstimate{}};
  };
  const auto [mb, st] = both(2);
  ASSERT_TRUE(test::Term(mb, "comm.fsdp") && test::Term(st, "comm.fsdp"));
  const double ratio = test::Term(mb, "comm.fsdp")->total_s / test::Term(st, "comm.fsdp")->total_s;
  EXPECT_GT(ratio, static_cast<double>(m));  // m x (2 AG + RS) against AG + RS
  EXPECT_LT(ratio, 2.0 * static_cast<double>(m));
  const double dw = st.memory.weights - mb.memory.weights, dg = st.memory.grads - mb.memory.grads;
  EXPECT_GT(dw, 0);
  EXPECT_NEAR(dg / dw, 4.0 / (2.0 * (1 - 1.0 / 8)), 1e-9);
  const auto [mb1, st1] = both(1);
  EXPECT_DOUBLE_EQ(mb1.step_s, st1.step_s);
  EXPECT_DOUBLE_EQ(mb1.memory.total, st1.memory.total);
  Plan z1 = test::MakePlan({1, 8, 1, 2, 1, 1, 1, false, 1}, 4096, 1, m);
  z1.zero_stage = 1;
  z1.fsdp_pipelining = FsdpPipelining::kPerStep;
  const Status bad = ValidatePlan(z1, 16, 0, 32, 32);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("fsdp_pipelining=per_step needs zero_stage=3"), std::string::npos)
      << bad.message();
}

TEST(MeasuredRunsReader, DeepSeekReportRunReadsItsMemoryTechniques) {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const LayoutRun* r = nullptr;
  for (const LayoutRun& x : *runs)
    if (x.id == "dsv3-report-h800-2048") r = &x;
  ASSERT_NE(r, nullptr);
  EXPECT_TRUE(r->skipped.empty()) << r->skipped;
  EXPECT_TRUE(r->recompute_norms);
  EXPECT_TRUE(r->fp8_act_input_store);
  EXPECT_EQ(r->plan.recompute.at("MLA"), Recompute::kSelective);
  EXPECT_EQ(r->plan.recompute.at("MoE"), Recompute::kSelective);
  EXPECT_EQ(r->plan.micro_batch, 1);
  EXPECT_EQ(r->plan.pipeline_schedule, PipelineSchedule::kDualPipe);
  EXPECT_EQ(r->plan.optimizer_dtype, Precision::kBF16);  // sec. 3.3.3: bf16 AdamW moments,
  EXPECT_EQ(r->plan.grad_dtype, Precision::kFP32);       // fp32 master weights and grads
  bool said = false;
  for (const std::string& a : r->assumptions) said = said || a.find("micro_batch not given: 1 assumed") == 0;
  EXPECT_TRUE(said);
  const PlanRequest req = RequestForRun(*r);
  EXPECT_TRUE(req.recompute_norms && req.fp8_act_input_store);
  // Negative controls, same file shape: another source, and a recompute list with layernorm only.
  const std::string origin = std::string(ONBOARD_TEST_DATA) + "/inline.json";
  const std::string run = R"({"id":"x","model":"deepseek-ai/DeepSeek-V3","hardware":"H800","gpus":2048,
      "tp":1,"pp":16,"ep":64,"global_batch":15360,"micro_batch":1,"seq":4096,"precision":"fp8",
      "measured":{"tokens_per_s_per_gpu":1000},)";
  const std::string cfg = R"(],"configs":{"deepseek-ai/DeepSeek-V3":{"file":"hf/deepseek-v3.config.json"}}})";
  auto other = ParseLayoutJson(
      R"({"runs":[)" + run + R"("source":"elsewhere","recompute":"MLA up-projection"})" + cfg, origin);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  EXPECT_FALSE((*other)[0].recompute_norms);
  EXPECT_FALSE((*other)[0].fp8_act_input_store);
  EXPECT_EQ((*other)[0].plan.optimizer_dtype, Precision::kFP32);
  EXPECT_EQ((*other)[0].plan.recompute.count("MoE"), 0u);
  auto ln = ParseLayoutJson(
      R"({"runs":[)" + run + R"("recipe":{"preset_fields":{"recompute_modules":["layernorm"]}}})" + cfg,
      origin);
  ASSERT_TRUE(ln.ok()) << ln.status().ToString();
  EXPECT_TRUE((*ln)[0].recompute_norms);
  for (const std::string& a : (*ln)[0].assumptions) EXPECT_EQ(a.find("not modelled"), std::string::npos) << a;
}

}  // namespace
}  // namespace onboard
