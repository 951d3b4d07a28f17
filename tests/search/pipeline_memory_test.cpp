// Terms added for the measured runs' memory and the MoE/CP passes: the replayed (interleaved) 1F1B
// schedule, Megatron's embedding/loss pipeline split, the bf16 main-grad buffer
// (grad_reduce_in_fp32=False), the all-to-all dispatcher's chunk sort and the CP ring's output
// correction. Each is checked against the input that must move it.
#include "core/plan.h"
#include "search/cost_model.h"
#include "search/layout_file.h"
#include "search_test_util.h"

namespace onboard {
namespace {

TEST(PipelineMemory, EqualChunksGiveKorthikantiInFlightCount) {
  // Plain 1F1B: stage s holds min(m, p - s) micro-batches.
  EXPECT_DOUBLE_EQ(PeakHeldActivations(4, 1, 8, 0, {1.0}), 4);
  EXPECT_DOUBLE_EQ(PeakHeldActivations(4, 1, 8, 3, {1.0}), 1);
  EXPECT_DOUBLE_EQ(PeakHeldActivations(4, 1, 2, 0, {1.0}), 2);
  // Interleaved, equal chunks: stage 0 holds p*v*(1 + (p-1)/(p*v)) = p*v + p - 1 chunk-micro-batches.
  const std::vector<double> eq(2, 1.0);
  EXPECT_DOUBLE_EQ(PeakHeldActivations(4, 2, 8, 0, eq), 4 * 2 + 4 - 1);
  EXPECT_DOUBLE_EQ(PeakHeldActivations(16, 4, 384, 0, std::vector<double>(4, 1.0)), 16 * 4 + 16 - 1);
  // Later stages warm up less: 2*(p-1-s) + (v-1)*p + 1.
  EXPECT_DOUBLE_EQ(PeakHeldActivations(4, 2, 8, 3, eq), 0 + 4 + 1);
  EXPECT_THROW(PeakHeldActivations(4, 2, 8, 0, {1.0}), std::exception);  // one entry per chunk
}

TEST(PipelineMemory, ALightFirstChunkLowersStageZeroOnly) {
  // Llama-3.1-405B on pp16 vp4 with the embedding in chunk 0's slot: 1 layer there, 2 elsewhere.
  const double uniform = PeakHeldActivations(16, 4, 384, 0, {2, 2, 2, 2});
  const double light = PeakHeldActivations(16, 4, 384, 0, {1, 2, 2, 2});
  EXPECT_DOUBLE_EQ(uniform, 2 * 79);
  EXPECT_DOUBLE_EQ(light, 127);  // 31 micro-batches of chunk 0 weigh 1 layer, 96 chunk-mbs weigh 2
  EXPECT_DOUBLE_EQ(PeakHeldActivations(16, 4, 384, 1, {2, 2, 2, 2}), 2 * 77);
}

Expected<std::vector<LayoutRun>> ParseRun(const std::string& layout, const std::string& extra,
                                          const std::string& precision = "mxfp8") {
  const std::string text =
      R"({"configs":{"m":{"file":"models/hf/deepseek-v3.config.json"}},"runs":[{"id":"r","model":"m",
      "hardware":"B200","gpus":96,"tp":1,)" +
      layout + R"(,"cp":1,"ep":32,"global_batch":3072,"micro_batch":1,
      "seq":4096,"precision":")" +
      precision + R"(","recompute":"none","optimizer":"Adam","measured":{"tokens_per_s_per_gpu":3000})" +
      extra + "}]}";
  return ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
}

TEST(PipelineMemory, EmbeddingAndLossTakeALayerSlotWhenLayersDoNotDivide) {
  // DeepSeek-V3 has 61 layers: 3 chunks cannot split 61 evenly, but 61 + 2 = 63 = 3 x 21.
  auto r = ParseRun(R"("pp":3,"vp":1,"dp":32)", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].plan.stage_layer_starts, (std::vector<int64_t>{0, 20, 41}));
  // 2 chunks: 63 is odd, no even split exists: left to the time-balanced split.
  auto r2 = ParseRun(R"("pp":2,"vp":1,"dp":48)", "");
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_TRUE((*r2)[0].plan.stage_layer_starts.empty());
}

// A precision the cost model has no GEMM rate for is a skipped run with its reason (it would otherwise
// be costed as bf16: an "assumed" line under a meaningless error). NVFP4 is a recipe it costs.
TEST(PipelineMemory, AnUnmodelledPrecisionSkipsTheRun) {
  for (const char* prec : {"fp32", "mxfp4", "fp4 (e2m1, per-tensor)"}) {
    auto r = ParseRun(R"("pp":3,"vp":1,"dp":32)", "", prec);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_NE((*r)[0].skipped.find("not modelled"), std::string::npos) << prec << ": " << (*r)[0].skipped;
  }
  const std::pair<const char*, Precision> modelled[] = {
      {"bf16", Precision::kBF16},   {"fp16", Precision::kBF16},   {"fp8 (current scaling)", Precision::kFP8},
      {"mxfp8", Precision::kMXFP8}, {"nvfp4", Precision::kNVFP4}, {"NVFP4 (per-block)", Precision::kNVFP4}};
  for (const auto& [prec, want] : modelled) {
    auto r = ParseRun(R"("pp":3,"vp":1,"dp":32)", "", prec);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE((*r)[0].skipped.empty()) << prec << ": " << (*r)[0].skipped;
    EXPECT_EQ((*r)[0].plan.compute_dtype, want) << prec;
  }
}

TEST(PipelineMemory, OneSlotChunksLeaveTheEmbeddingAndTheLossAlone) {
  // Megatron-Bridge's Llama-3.1-405B MXFP8 preset on GB200 (26.02-26.06): 126 layers on pp16 vp8 = 128
  // chunks, embedding and loss a slot each, so chunk 0 holds the embedding alone and chunk 127 the loss
  // alone (Megatron-Core transformer_block.py: num_layers_to_build >= 0).
  const std::string text =
      R"({"configs":{"m":{"file":"models/hf/llama-3.1-405b.config.json"}},"runs":[{"id":"r","model":"m",
      "hardware":"GB200","gpus":256,"tp":4,"pp":16,"vp":8,"cp":1,"ep":1,"dp":4,"global_batch":1536,
      "micro_batch":1,"seq":8192,"precision":"mxfp8","recompute":"none","optimizer":"Adam",
      "measured":{"tokens_per_s_per_gpu":800}}]})";
  auto r = ParseLayoutJson(text, std::string(ONBOARD_TEST_DATA) + "/inline.json");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::vector<int64_t>& s = (*r)[0].plan.stage_layer_starts;
  ASSERT_EQ(s.size(), 128u);
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1], 0);      // chunk 0: no decoder layer
  EXPECT_EQ(s[2], 1);      // then one a chunk
  EXPECT_EQ(s[127], 126);  // chunk 127: no decoder layer
  auto e = EvaluatePlan(RequestForRun((*r)[0]), (*r)[0].plan);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_TRUE(e->fits);
  EXPECT_GT(e->step_s, 0);
  // The same degrees without explicit boundaries still need a decoder layer a chunk.
  Plan even = (*r)[0].plan;
  even.stage_layer_starts.clear();
  EXPECT_FALSE(EvaluatePlan(RequestForRun((*r)[0]), even).ok());
}

TEST(PipelineMemory, BridgePerfRecipesReduceGradsInBf16) {
  auto fp32 = ParseRun(R"("pp":3,"vp":1,"dp":32)", "");
  auto bf16 = ParseRun(
      R"("pp":3,"vp":1,"dp":32)",
      R"(,"recipe":{"file":"NVIDIA-NeMo/Megatron-Bridge@21d102f5:scripts/performance/configs/deepseek/x.py"})");
  ASSERT_TRUE(fp32.ok() && bf16.ok());
  EXPECT_EQ((*fp32)[0].plan.grad_dtype, Precision::kFP32);
  EXPECT_EQ((*bf16)[0].plan.grad_dtype, Precision::kBF16);
  auto a = EvaluatePlan(RequestForRun((*fp32)[0]), (*fp32)[0].plan);
  auto b = EvaluatePlan(RequestForRun((*bf16)[0]), (*bf16)[0].plan);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(b->memory.grads / a->memory.grads, 0.5, 1e-9);   // 4 B -> 2 B main grads
  EXPECT_DOUBLE_EQ(b->memory.optimizer, a->memory.optimizer);  // fp32 master + moments unchanged
}

const TimeTerm* Find(const PlanEstimate& e, const std::string& name) {
  for (const TimeTerm& t : e.time_terms)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(PipelineMemory, AllToAllDispatcherPaysTheChunkSortFlexDoesNot) {
  auto r = ParseRun(R"("pp":3,"vp":1,"dp":32)", "");
  ASSERT_TRUE(r.ok());
  Plan p = (*r)[0].plan;
  const PlanRequest req = RequestForRun((*r)[0]);
  p.ep_dispatcher = EpDispatcher::kAllToAll;
  auto a2a = EvaluatePlan(req, p);
  p.ep_dispatcher = EpDispatcher::kHybridEP;
  auto flex = EvaluatePlan(req, p);
  ASSERT_TRUE(a2a.ok() && flex.ok());
  // 8 experts per rank (256 / ep 32): the all-to-all dispatcher sorts tokens by local expert.
  EXPECT_GT(Find(*a2a, "compute.MoE")->total_s, Find(*flex, "compute.MoE")->total_s);
}

TEST(PipelineMemory, CpRingPaysTheOutputCorrectionPerStep) {
  PlanRequest req;
  auto m = ModelFromDims(R"({"hidden":4096,"ffn":14336,"heads":32,"kv_heads":8,"layers":8,"vocab":128256,
                             "gated":true,"seq":65536})",
                         "dense");
  ASSERT_TRUE(m.ok());
  req.model = *m;
  auto t = TopologyForHardware("H100-80GB", 16, 400, "test");
  ASSERT_TRUE(t.ok());
  req.topology = *t;
  req.seq = 65536;
  ParallelDegrees eight{1, 2, 1, 1, 1, 1, 1, false, 8};
  Plan ring = test::MakePlan(eight, 65536, 1, 32);
  ring.recompute = {{"*", Recompute::kFull}};
  Plan gather = ring;
  gather.cp_comm = CpComm::kAllGather;
  auto er = EvaluatePlan(req, ring), eg = EvaluatePlan(req, gather);
  ASSERT_TRUE(er.ok() && eg.ok());
  // Same tokens and FLOPs; only the ring merges cp partial outputs (all-gather attends to the whole KV once).
  EXPECT_GT(Find(*er, "compute.GQA")->total_s, 1.001 * Find(*eg, "compute.GQA")->total_s);
}

}  // namespace
}  // namespace onboard
