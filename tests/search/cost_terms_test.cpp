// The issue-13 terms one at a time, each against the input that should move it: context
// parallelism (softmax ring, KDA state hand-off, DSA gathers), fp8 quantisation, the de-duplicating
// EP dispatcher, the precision-aware optimizer, MTP layers, pipeline layouts and the measured-runs
// reader's errors.
#include <cmath>
#include <string>
#include <utility>

#include "core/plan.h"
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

using test::Term;

// Dense GQA decoder (Llama-3-8B-like dims) on 16 H100s.
PlanRequest DenseRequest(int64_t seq) {
  PlanRequest req;
  auto m = ModelFromDims(R"({"hidden":4096,"ffn":14336,"heads":32,"kv_heads":8,"layers":8,"vocab":128256,
                             "gated":true,"seq":131072})", "dense");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  req.model = *m;
  auto t = TopologyForHardware("H100-80GB", 16, 400, "test");
  EXPECT_TRUE(t.ok());
  req.topology = *t;
  req.seq = seq;
  return req;
}

TEST(CostTerms, ContextParallelSplitsTokensAndPaysKvExchange) {
  const PlanRequest req = DenseRequest(65536);
  ParallelDegrees one{1, 16, 1, 1, 1, 1, 1, false, 1}, four{1, 4, 1, 1, 1, 1, 1, false, 4};
  Plan a = test::MakePlan(one, 65536, 1, 4), b = test::MakePlan(four, 65536, 1, 16);
  a.recompute = b.recompute = {{"*", Recompute::kFull}};
  auto ea = EvaluatePlan(req, a), eb = EvaluatePlan(req, b);
  ASSERT_TRUE(ea.ok() && eb.ok()) << eb.status().ToString();
  // A quarter of the tokens per device: activations shrink about 4x; the KV ring is a real term.
  EXPECT_NEAR(ea->memory.activations / eb->memory.activations, 4.0, 0.2);
  const TimeTerm* cp = Term(*eb, "comm.cp");
  ASSERT_NE(cp, nullptr);
  EXPECT_GT(cp->total_s, 0);
  EXPECT_EQ(Term(*ea, "comm.cp"), nullptr);
  // The all-gather variant hides nothing behind attention: at least as much exposed as the ring.
  Plan g = b;
  g.cp_comm = CpComm::kAllGather;
  auto eg = EvaluatePlan(req, g);
  ASSERT_TRUE(eg.ok());
  EXPECT_GE(Term(*eg, "comm.cp")->exposed_s, cp->exposed_s);
}

// The softmax ring (TE AttnFuncWithCPAndKVP2P) posts step i+1's KV beside step i's core: forward, its
// cp-1 transfers hide behind (cp-1)/cp of the core f; backward every step sends, so all of the core fb
// hides. On a link slow enough that every step waits, H = total - exposed = (cp-1)/cp f + fb per rank,
// f and fb of cp 4 half those of cp 2: H(2)/H(4) = ((1/2 + 2.5)/2) / ((3/4 + 2.5)/4) = 1.846 (2 if the
// whole core hid both passes, at fb = 2.5 f).
TEST(CostTerms, ContextParallelRingHidesBehindAllButTheLastStep) {
  auto hidden = [](int64_t cp) {
    PlanRequest req = DenseRequest(65536);
    auto t = TopologyForHardware("H100-80GB", 8 * cp, 1, "test");  // 1 Gb/s NIC: every ring step waits
    EXPECT_TRUE(t.ok());
    req.topology = *t;
    ParallelDegrees d{1, 1, 8, 1, 1, 1, 1, false, cp};  // tp 8 = a node: each CP hop crosses the NIC
    Plan p = test::MakePlan(d, 65536, 1, 4);
    auto e = EvaluatePlan(req, p);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    const TimeTerm* cp_term = Term(*e, "comm.cp");
    EXPECT_NE(cp_term, nullptr);
    EXPECT_GT(cp_term->exposed_s, 0);
    return cp_term->total_s - cp_term->exposed_s;
  };
  const double h2 = hidden(2), h4 = hidden(4);
  ASSERT_GT(h4, 0);
  EXPECT_NEAR(h2 / h4, (0.5 + 2.5) / 2 / ((0.75 + 2.5) / 4), 0.03);
}

TEST(CostTerms, ContextParallelOnKdaAndDsaLayers) {
  PlanRequest req = test::SeedRequest(FinetuneMode::kFull);
  req.seq = 65536;
  ParallelDegrees d{1, 16, 1, 1, 128, 1, 1, false, 8};
  Plan p = test::MakePlan(d, 65536, 1, 2);
  p.recompute = {{"*", Recompute::kFull}};
  auto e = EvaluatePlan(req, p);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const TimeTerm* cp = Term(*e, "comm.cp");
  ASSERT_NE(cp, nullptr);
  // KDA state hops are sequential and DSA gathers are not hidden: exposed, not zero.
  EXPECT_GT(cp->exposed_s, 0);
  ParallelDegrees d2 = d;
  d2.cp = 16;
  d2.dp_shard = 8;
  auto e2 = EvaluatePlan(req, test::MakePlan(d2, 65536, 1, 4));
  ASSERT_TRUE(e2.ok()) << e2.status().ToString();
  EXPECT_GT(Term(*e2, "comm.cp")->total_s / 4, cp->total_s / 2 * 0.5);  // more ranks, more hops per micro-batch
}

TEST(CostTerms, Fp8IsFasterButNotTwiceAndPaysQuantisation) {
  PlanRequest req = DenseRequest(8192);
  ParallelDegrees d{1, 16, 1, 1, 1, 1, 1, false, 1};
  Plan p = test::MakePlan(d, 8192, 1, 4);
  p.zero_stage = 1;  // FSDP over IB would hide the GEMMs behind weight gathers
  auto bf = EvaluatePlan(req, p);
  req.compute_dtype = Precision::kMXFP8;
  p.compute_dtype = Precision::kMXFP8;
  auto f8 = EvaluatePlan(req, p);
  ASSERT_TRUE(bf.ok() && f8.ok()) << f8.status().ToString();
  const double speedup = bf->step_s / f8->step_s;
  EXPECT_GT(speedup, 1.1);
  EXPECT_LT(speedup, 1.9);
  // fp8 keeps the 1-byte quantised GEMM inputs: less activation memory.
  EXPECT_LT(f8->memory.activations, bf->memory.activations);
}

TEST(CostTerms, DeepEpSendsATokenToARemoteNodeOnce) {
  PlanRequest req;
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-235b-a22b.config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  req.model = *m;
  req.topology = test::ShippedTopology("b200-32x8");
  ParallelDegrees d{1, 32, 1, 8, 32, 1, 1, false, 1};
  Plan p = test::MakePlan(d, 4096, 1, 8);
  p.recompute = {{"*", Recompute::kFull}};
  auto nccl = EvaluatePlan(req, p);
  p.ep_dispatcher = EpDispatcher::kDeepEP;
  auto deepep = EvaluatePlan(req, p);
  ASSERT_TRUE(nccl.ok() && deepep.ok()) << nccl.status().ToString();
  EXPECT_LT(Term(*deepep, "comm.ep_a2a")->total_s, 0.8 * Term(*nccl, "comm.ep_a2a")->total_s);
}

// Fused softmax attention pays one exponential per score element on the SFUs, forward and again
// backward, at the catalog's rate: the attention compute term differs by exactly that between the same
// device with and without an SFU figure, and between HGX B200 (4.5e12/s) and HGX B300 (9.63e12/s), whose
// catalog rows agree otherwise (peaks, HBM). The HGX parts run the NVL72 parts' die at the clock their
// datasheet peaks imply (2.25 vs 2.5 PF bf16): their SFU rate is the NVL72 rate x the same ratio.
TEST(CostTerms, SoftmaxExponentialsRunOnTheSfusAtTheCatalogRate) {
  EXPECT_EQ(SoftmaxExpsPerSecond("B200-180GB"), 4.5e12);
  EXPECT_EQ(SoftmaxExpsPerSecond("GB300"), 10.7e12);  // alias
  EXPECT_NEAR(SoftmaxExpsPerSecond("B200") / SoftmaxExpsPerSecond("GB200"), 2250.0 / 2500.0, 1e-3);
  EXPECT_NEAR(SoftmaxExpsPerSecond("B300") / SoftmaxExpsPerSecond("GB300"), 2250.0 / 2500.0, 1e-3);
  EXPECT_EQ(SoftmaxExpsPerSecond("Ascend-950DT"), 0);
  const int64_t seq = 4096, layers = 8, m = 4;
  const double scores = 32 * (seq + 1) / 2.0;  // per token: 32 query heads x the mean causal span
  const double tokens = static_cast<double>(m * seq);
  ParallelDegrees d{1, 16, 1, 1, 1, 1, 1, false, 1};
  const Plan p = test::MakePlan(d, seq, 1, m);
  auto attn = [&](const PlanRequest& req) {
    auto e = EvaluatePlan(req, p);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() && Term(*e, "compute.GQA") ? Term(*e, "compute.GQA")->exposed_s : -1.0;
  };
  PlanRequest h100 = DenseRequest(seq), custom = h100;
  custom.topology.device.name = "H100-like";  // no catalog figure: no SFU term
  EXPECT_NEAR(attn(h100) - attn(custom), 2 * layers * tokens * scores / 4.2e12, 1e-9);
  // Blackwell: the catalog device against a nameless twin at its sustained tensor rate (no SFU term).
  for (const auto& [name, exps] : {std::pair<const char*, double>{"B200", 4.5e12}, {"B300", 9.63e12}}) {
    auto t = TopologyForHardware(name, 16, 400, "test");
    ASSERT_TRUE(t.ok());
    PlanRequest dev = h100;
    dev.topology = *t;
    PlanRequest twin = dev;
    const double rate = SustainedTensorRate(dev.topology.device, CostConstants{}.gemm_eff_max);
    twin.topology.device.name = std::string(name) + "-like";
    twin.topology.device.tflops_bf16 *= rate;
    EXPECT_NEAR(attn(dev) - attn(twin), 2 * layers * tokens * scores / exps, 1e-9) << name;
  }
}

// Datasheet peaks are sustained only up to the device's measured matmul (MAMF): GB200's 2.5 PF is 11%
// above B200's 2.25 PF on paper, 4.4% in measured matmuls. Every tensor term (GEMMs at fp8, the bf16
// attention cores) follows the measured ratio; devices at or above the GEMM ceiling and devices
// without a measurement keep their datasheet peak; MFU stays against the datasheet.
TEST(CostTerms, DatasheetPeaksAreSustainedOnlyUpToTheMeasuredMatmul) {
  const double ceiling = CostConstants{}.gemm_eff_max;
  auto rate = [&](const char* name) {
    auto t = TopologyForHardware(name, 8, 400, "test");
    EXPECT_TRUE(t.ok());
    return t.ok() ? SustainedTensorRate(t->device, ceiling) : -1.0;
  };
  EXPECT_NEAR(rate("GB200"), 1822.0 / 2500.0 / ceiling, 1e-9);
  EXPECT_NEAR(rate("B200"), 1745.0 / 2250.0 / ceiling, 1e-9);
  EXPECT_EQ(rate("H100-80GB"), 1.0);  // 80.3% >= the ceiling
  EXPECT_EQ(rate("A100-80GB"), 1.0);  // 86.9%: headroom above the ceiling is not extra speed
  EXPECT_EQ(rate("GB300"), 1.0);      // no measurement
  const int64_t seq = 4096;
  const Plan p = test::MakePlan(ParallelDegrees{1, 8, 1, 1, 1, 1, 1, false, 1}, seq, 1, 4);
  auto compute = [&](const char* name, double* mfu_check) {
    PlanRequest req = DenseRequest(seq);
    auto t = TopologyForHardware(name, 8, 400, "test");
    EXPECT_TRUE(t.ok());
    if (t.ok()) req.topology = *t;
    req.compute_dtype = Precision::kFP8;
    auto e = EvaluatePlan(req, p);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    if (!e.ok() || !Term(*e, "compute.GQA")) return -1.0;
    *mfu_check = e->mfu * e->step_s * 8 * req.topology.device.tflops_fp8 * 1e12 / e->model_flops;
    return Term(*e, "compute.GQA")->exposed_s;
  };
  double mfu_b200 = 0, mfu_gb200 = 0;
  const double b200 = compute("B200", &mfu_b200), gb200 = compute("GB200", &mfu_gb200);
  // Compute-bound GEMMs and attention: the time ratio is the measured matmul ratio (the few
  // memory-bound passes, equal on both at 8 TB/s, pull it slightly towards 1).
  EXPECT_GT(b200 / gb200, 1.0);
  EXPECT_LT(b200 / gb200, 1822.0 / 1745.0 + 1e-3);
  EXPECT_GT(b200 / gb200, 1.02);
  EXPECT_NEAR(mfu_b200, 1.0, 1e-9);
  EXPECT_NEAR(mfu_gb200, 1.0, 1e-9);
}

// bf16 moments (optimizer_dtype) and bf16 main grads (grad_dtype) are separate: the DeepSeek-V3 report
// keeps fp32 grads beside bf16 moments (sec. 3.3.3), Bridge's precision-aware recipes halve both.
TEST(CostTerms, Bf16MomentsAndBf16GradsAreSeparateTerms) {
  const PlanRequest req = DenseRequest(4096);
  ParallelDegrees d{1, 16, 1, 1, 1, 1, 1, false, 1};
  Plan p = test::MakePlan(d, 4096, 1, 4);
  p.zero_stage = 1;
  auto fp32 = EvaluatePlan(req, p);
  p.optimizer_dtype = Precision::kBF16;
  auto moments = EvaluatePlan(req, p);
  p.grad_dtype = Precision::kBF16;
  auto both = EvaluatePlan(req, p);
  ASSERT_TRUE(fp32.ok() && moments.ok() && both.ok());
  EXPECT_NEAR(moments->memory.optimizer / fp32->memory.optimizer, 8.0 / 12, 1e-9);  // (4+8)/d -> (4+4)/d
  EXPECT_DOUBLE_EQ(moments->memory.grads, fp32->memory.grads);                      // fp32 grads kept
  EXPECT_NEAR(both->memory.grads / fp32->memory.grads, 0.5, 1e-9);                  // 4 B -> 2 B main grads
  EXPECT_DOUBLE_EQ(both->memory.optimizer, moments->memory.optimizer);
  // The optimizer step's traffic per parameter: 30 B, 22 B (bf16 m, v), 20 B (and a bf16 grad).
  const double o32 = Term(*fp32, "optimizer")->exposed_s, om = Term(*moments, "optimizer")->exposed_s;
  EXPECT_NEAR(om / o32, 22.0 / 30, 1e-9);
  EXPECT_NEAR(Term(*both, "optimizer")->exposed_s / o32, 20.0 / 30, 1e-9);
}

TEST(CostTerms, MtpLayersCostTimeAndMemoryOnTheLastStage) {
  PlanRequest req;
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/deepseek-v3.config.json");
  ASSERT_TRUE(m.ok());
  req.model = *m;
  req.topology = test::ShippedTopology("gb300-nvl72-x4");
  req.compute_dtype = Precision::kMXFP8;
  ParallelDegrees d{1, 256, 1, 1, 32, 8, 1, false, 1};
  Plan p = test::MakePlan(d, 4096, 1, 2);
  p.compute_dtype = Precision::kMXFP8;
  p.recompute = {{"*", Recompute::kFull}};
  auto base = EvaluatePlan(req, p);
  p.mtp_layers = 1;
  auto mtp = EvaluatePlan(req, p);
  ASSERT_TRUE(base.ok() && mtp.ok()) << mtp.status().ToString();
  ASSERT_NE(Term(*mtp, "compute.mtp"), nullptr);
  EXPECT_EQ(Term(*base, "compute.mtp"), nullptr);
  EXPECT_GT(mtp->step_s, base->step_s);
}

// MoE plan on 256 B200s in MXFP8: `model` (an HF config in tests/data/hf), pp 16, ep `ep`.
Expected<PlanEstimate> MoeOnB200(const std::string& model, int64_t ep, Precision grads, CudaGraph graph,
                                 Precision compute = Precision::kMXFP8) {
  PlanRequest req;
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + model);
  if (!m.ok()) return m.status();
  req.model = *m;
  auto t = TopologyForHardware("B200", 256, 400, "test");
  if (!t.ok()) return t.status();
  req.topology = *t;
  req.compute_dtype = compute;
  ParallelDegrees d{1, 16, 1, 16, ep, 16 / ep, 1, false, 1};
  Plan p = test::MakePlan(d, 4096, 1, 8);
  p.compute_dtype = compute;
  p.grad_dtype = grads;
  p.cuda_graph = graph;
  p.recompute = {{"*", Recompute::kFull}};
  return EvaluatePlan(req, p);
}

// Each expert's weight-grad GEMM accumulates into its main_grad (read + write). DeepSeek-V3 at ep 8: 32
// experts per rank, 1,024 tokens each: fp32 main grads make it memory-bound (MoE compute +4.9%), bf16 grads
// do not. At ep 16 (16 experts, 2,048 tokens each) both dtypes stay compute-bound. Without the term the
// grads' dtype moves no compute time, and the first check fails.
TEST(CostTerms, ExpertWeightGradsAccumulateIntoMainGrad) {
  auto moe = [](int64_t ep, Precision g) {
    auto e = MoeOnB200("deepseek-v3.config.json", ep, g, CudaGraph::kNone);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? Term(*e, "compute.MoE")->exposed_s : -1.0;
  };
  EXPECT_GT(moe(8, Precision::kFP32), 1.01 * moe(8, Precision::kBF16));
  EXPECT_DOUBLE_EQ(moe(16, Precision::kFP32), moe(16, Precision::kBF16));
}

// Eager grouped GEMMs launch per local expert (one cuBLAS GEMM each for fc1 and fc2, and one quantise
// each in fp8) right after the dispatcher's host sync. Qwen3-30B-A3B's small experts are launch-bound:
// 64 experts per rank at ep 2 expose about 3x the launch time of 8 per rank at ep 16. A full-iteration
// graph removes the launch term. Without the term, the launch term is the dispatcher sync alone, the
// same at every ep, and the first check fails.
TEST(CostTerms, EagerExpertLaunchesAreExposedAfterTheDispatcherSync) {
  auto launch = [](int64_t ep, CudaGraph g) {
    auto e = MoeOnB200("qwen3-30b-a3b.config.json", ep, Precision::kBF16, g);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    const TimeTerm* t = e.ok() ? Term(*e, "launch") : nullptr;
    return t ? t->exposed_s : 0.0;
  };
  const double ep2 = launch(2, CudaGraph::kNone), ep16 = launch(16, CudaGraph::kNone);
  EXPECT_GT(ep2, 1.5 * ep16);
  EXPECT_EQ(launch(2, CudaGraph::kFull), 0.0);
  EXPECT_TRUE(PerExpertGemmLaunches("B200"));           // TE: one cuBLAS GEMM per expert
  EXPECT_FALSE(PerExpertGemmLaunches("Ascend-950DT"));  // npu_grouped_matmul: one launch
}

// Per local expert, TE's GroupedLinear quantises its input expert by expert: MXFP8 one cast each, fp8
// per-tensor current scaling four kernels each (zero amax, amax, scale, cast: TE v2.9 quantizer.cpp,
// current_scaling.cu), so fc1 + fc2 cost the host 10 ops per expert per forward and 12 per backward
// against MXFP8's 4 and 6 (expert_host_ops.cpp). Qwen3-30B-A3B at ep 2 (64 local experts) on B200, TE
// partial graphs, full recompute: the GPU time of the two recipes is the same, the host time is not. Counting
// one quantise per expert in both (the term before this count) makes them equal and the first check fails.
TEST(CostTerms, PerExpertHostOpsFollowTheQuantisationRecipe) {
  auto launch = [](Precision dtype, CudaGraph graph) {
    auto e = MoeOnB200("qwen3-30b-a3b.config.json", 2, Precision::kBF16, graph, dtype);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    const TimeTerm* l = e.ok() ? Term(*e, "launch") : nullptr;
    return l ? l->exposed_s : 0.0;
  };
  EXPECT_GT(launch(Precision::kFP8, CudaGraph::kLayers), 1.2 * launch(Precision::kMXFP8, CudaGraph::kLayers));
  EXPECT_GT(launch(Precision::kMXFP8, CudaGraph::kLayers), launch(Precision::kBF16, CudaGraph::kLayers));
  EXPECT_EQ(launch(Precision::kFP8, CudaGraph::kFull), 0.0);
}

// Megatron-Core's grouped experts pad fp8 rows themselves (TE Fp8Padding / Fp8Unpadding) where neither
// the router nor HybridEP did: one copy of the permuted input and one of the fc2 output, forward and
// backward. Qwen3-235B in MXFP8 on 8 B200s per node, ep 8: the all-to-all dispatcher (bf16 input rows) and
// DeepEP (fp8 input rows: (1 + 2) / (2 + 2) of the bytes) pay it, HybridEP and bf16 do not. Without the
// term the first check fails.
TEST(CostTerms, Fp8RowPaddingWhereNeitherRouterNorHybridEpPadded) {
  auto moe = [](EpDispatcher disp, Precision prec, bool padding) {
    PlanRequest req;
    auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/qwen3-235b-a22b.config.json");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return -1.0;
    req.model = *m;
    req.topology = test::ShippedTopology("b200-32x8");
    req.compute_dtype = prec;
    req.fp8_expert_padding = padding;
    Plan p = test::MakePlan(ParallelDegrees{1, 32, 1, 8, 8, 4, 1, false, 1}, 4096, 1, 8);
    p.compute_dtype = prec;
    p.ep_dispatcher = disp;
    auto e = EvaluatePlan(req, p);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? Term(*e, "compute.MoE")->exposed_s : -1.0;
  };
  const double a2a = moe(EpDispatcher::kAllToAll, Precision::kMXFP8, true) -
                     moe(EpDispatcher::kAllToAll, Precision::kMXFP8, false);
  const double deepep = moe(EpDispatcher::kDeepEP, Precision::kMXFP8, true) -
                        moe(EpDispatcher::kDeepEP, Precision::kMXFP8, false);
  EXPECT_GT(a2a, 0.0);
  EXPECT_NEAR(deepep / a2a, 0.75, 1e-9);
  EXPECT_DOUBLE_EQ(moe(EpDispatcher::kHybridEP, Precision::kMXFP8, true),
                   moe(EpDispatcher::kHybridEP, Precision::kMXFP8, false));
  EXPECT_DOUBLE_EQ(moe(EpDispatcher::kAllToAll, Precision::kBF16, true),
                   moe(EpDispatcher::kAllToAll, Precision::kBF16, false));
}

TEST(CostTerms, PlanRejectsCpThatDoesNotSplitTheSequence) {
  Plan p = test::MakePlan(ParallelDegrees{1, 2, 1, 1, 1, 1, 1, false, 3}, 4096, 1, 1);
  Status st = ValidatePlan(p, 6, 0, 32, 8);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cp=3"), std::string::npos) << st.message();
  p.deg.cp = 2;
  EXPECT_FALSE(ValidatePlan(p, 6, 0, 32, 8).ok());  // world 2*2 != 6, message names cp
  EXPECT_NE(ValidatePlan(p, 6, 0, 32, 8).message().find("cp"), std::string::npos);
  EXPECT_TRUE(ValidatePlan(p, 4, 0, 32, 8).ok());
}

TEST(CostTerms, SearchUsesCpOnlyForLongSequences) {
  PlanRequest req = DenseRequest(4096);
  req.constraints.cp = 2;
  auto r = SearchPlans(req);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->feasible);  // 2048 tokens per CP rank: below the floor
  req.seq = 65536;
  req.global_batch = 8;
  auto r2 = SearchPlans(req);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ASSERT_TRUE(r2->feasible);
  EXPECT_EQ(r2->best.plan.deg.cp, 2);
}

// --- pipeline layouts and the measured-runs reader ---

Expected<std::vector<LayoutRun>> ParseOne(const std::string& run_fields) {
  const std::string text = R"({"configs":{"m":{"file":"models/hf/deepseek-v3.config.json"}},"runs":[{"id":"r","model":"m",
      "hardware":"GB300","gpus":256,"tp":1,"pp":2,"vp":8,"cp":1,"ep":32,"dp":128,"global_batch":4096,"micro_batch":1,
      "seq":4096,"precision":"mxfp8","recompute":"none","optimizer":"precision-aware","measured":{"tokens_per_s_per_gpu":5000})" +
                           run_fields + "}]}";
  return ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
}

TEST(MeasuredRunsReader, ReadsLayoutMtpAndLaunchSettings) {
  auto runs = ParseOne(R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4|(t*4|)*14tmL","cuda_graph_impl":"full_iteration",
                         "moe_flex_dispatcher_backend":"hybridep","moe_a2a_overlap":true}})");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const LayoutRun& r = (*runs)[0];
  ASSERT_EQ(r.plan.stage_layer_starts.size(), 16u);
  EXPECT_EQ(r.plan.stage_layer_starts[1], 4);
  EXPECT_EQ(r.plan.stage_layer_starts[15], 60);
  EXPECT_EQ(r.plan.mtp_layers, 1);
  EXPECT_EQ(r.plan.cuda_graph, CudaGraph::kFull);
  EXPECT_EQ(r.plan.ep_dispatcher, EpDispatcher::kHybridEP);
  EXPECT_EQ(r.plan.optimizer_dtype, Precision::kBF16);
  EXPECT_EQ(r.plan.grad_dtype, Precision::kBF16);  // Bridge's precision-aware recipes: main_grads_dtype bf16
  EXPECT_EQ(r.plan.compute_dtype, Precision::kMXFP8);
  EXPECT_TRUE(r.overlap_ep_comm);
  ASSERT_TRUE(r.measured_tokens_per_s_per_gpu.has_value());
  EXPECT_NEAR(*r.measured_step_s, 4096.0 * 4096 / (5000.0 * 256), 1e-9);
}

// The source row's label decides MTP before the config does ("DeepSeekV3 (w/o MTP)" in the 25.11
// Megatron-Bridge tables); a Megatron-Core framework with vp > 1 overlaps its PP sends.
TEST(MeasuredRunsReader, LabelWithoutMtpAndInterleavedP2pOverlap) {
  auto without = ParseOne(
      R"x(,"model_label_in_source":"DeepSeekV3 (w/o MTP)","framework":"Megatron-Bridge / Megatron-Core")x");
  auto with = ParseOne(R"x(,"model_label_in_source":"DeepSeekV3 (w/ MTP)","framework":"HAI-LLM")x");
  ASSERT_TRUE(without.ok() && with.ok()) << without.status().ToString() << with.status().ToString();
  EXPECT_EQ((*without)[0].plan.mtp_layers, 0);
  EXPECT_EQ((*with)[0].plan.mtp_layers, 1);   // the config's num_nextn_predict_layers
  EXPECT_TRUE((*without)[0].overlap_pp_p2p);  // pp 2, vp 8, Megatron-Core
  EXPECT_FALSE((*with)[0].overlap_pp_p2p);    // not a Megatron-Core framework
  EXPECT_TRUE(RequestForRun((*without)[0]).overlap_pp_p2p);
}

// Dropless Megatron-Core runs without router padding read as fp8_expert_padding; router padding in the
// recipe text, a token-dropping run or another framework do not.
TEST(MeasuredRunsReader, Fp8RowPaddingForDroplessMegatronCoreRuns) {
  const std::string mcore =
      R"x(,"framework":"Megatron-Bridge / Megatron-Core","notes":["all benchmarks are token-dropless"])x";
  auto plain = ParseOne(mcore);
  auto padded = ParseOne(mcore + R"x(,"recipe":{"file":"x (moe_router_padding_for_fp8=True)"})x");
  auto dropping = ParseOne(R"x(,"framework":"NeMo 2.0 (Megatron-Core)","notes":["token dropping"])x");
  auto other = ParseOne(R"x(,"framework":"HAI-LLM","notes":["token-dropless"])x");
  ASSERT_TRUE(plain.ok() && padded.ok() && dropping.ok() && other.ok()) << plain.status().ToString();
  EXPECT_TRUE((*plain)[0].fp8_expert_padding);
  EXPECT_TRUE(RequestForRun((*plain)[0]).fp8_expert_padding);
  EXPECT_FALSE((*padded)[0].fp8_expert_padding);
  EXPECT_FALSE((*dropping)[0].fp8_expert_padding);
  EXPECT_FALSE((*other)[0].fp8_expert_padding);
}

TEST(MeasuredRunsReader, BadInputsNameTheField) {
  struct Case {
    const char* fields;
    const char* want;
  } cases[] = {
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4|(t*4|)*13tmL"}})", "needs pp*vp=16"},
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4m|(t*4|)*14tL"}})", "runs[0].recipe.pp_layout"},
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4L|(t*4|)*14tm"}})",
       "L (loss) must be in the last chunk"},
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4|(t*4|)*14t*2mL"}})", "places 62 decoder layers"},
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Et*4|(t*4|*14tmL"}})", "unclosed"},
      {R"(,"recipe":{"preset_fields":{"pp_layout":"Xt*4|(t*4|)*14tmL"}})", "unknown symbol"},
      {R"(,"etp":0)", "runs[0].etp"},
  };
  for (const Case& c : cases) {
    auto r = ParseOne(c.fields);
    ASSERT_FALSE(r.ok()) << c.fields;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  // dp must equal gpus/(tp*pp*cp).
  const std::string text = R"({"configs":{"m":{"file":"x/deepseek-v3.config.json"}},"runs":[{"id":"r","model":"m",
      "hardware":"GB300","gpus":256,"tp":1,"pp":2,"dp":64,"global_batch":64,"micro_batch":1,"seq":4096,
      "measured":{"tokens_per_s_per_gpu":1}}]})";
  auto r = ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("runs[0].dp"), std::string::npos) << r.status().message();
  // A model without a configs entry.
  auto r2 = ParseLayoutJson(R"({"configs":{},"runs":[{"id":"r","model":"nope","hardware":"B200","gpus":8}]})",
                            std::string(ONBOARD_TEST_DATA) + "/inline.json");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("runs[0].model"), std::string::npos) << r2.status().message();
}

}  // namespace
}  // namespace onboard
