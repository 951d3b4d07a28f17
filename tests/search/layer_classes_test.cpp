// Classes of equal layers (ModelProfile::class_first, LayerProfile::class_id): the cost model costs
// one layer per class and copies it. These checks hold the shortcut to the per-layer answer: the same
// plans costed with one class per layer give bit-identical estimates, and a profile whose classes
// merge unequal layers does not.
#include "search/cost_model.h"
#include "search_test_util.h"

namespace onboard {
namespace {

// The context with every layer its own class (what the cost model computed before classes existed).
CostContext OneClassPerLayer(const CostContext& c) {
  CostContext flat = c;
  flat.prof.class_first.clear();
  for (size_t i = 0; i < flat.prof.layers.size(); ++i) {
    flat.prof.layers[i].class_id = i;
    flat.prof.class_first.push_back(i);
  }
  return flat;
}

void ExpectSameEstimate(const PlanEstimate& a, const PlanEstimate& b, const std::string& what) {
  EXPECT_EQ(a.step_s, b.step_s) << what;
  EXPECT_EQ(a.memory.total, b.memory.total) << what;
  EXPECT_EQ(a.memory.activations, b.memory.activations) << what;
  ASSERT_EQ(a.time_terms.size(), b.time_terms.size()) << what;
  for (size_t i = 0; i < a.time_terms.size(); ++i) {
    EXPECT_EQ(a.time_terms[i].name, b.time_terms[i].name) << what;
    EXPECT_EQ(a.time_terms[i].exposed_s, b.time_terms[i].exposed_s) << what << " " << a.time_terms[i].name;
    EXPECT_EQ(a.time_terms[i].formula, b.time_terms[i].formula) << what;
  }
}

PlanRequest FullAtOneMillion() {
  PlanRequest req;
  req.model = test::Flagship();
  req.topology = test::ShippedTopology("gb300-nvl72-8192");
  req.mode = FinetuneMode::kFull;
  req.seq = 1 << 20;
  return req;
}

TEST(LayerClasses, FlagshipHasFewClassesOfEqualLayers) {
  const PlanRequest req = FullAtOneMillion();
  const CostContext c = MakeCostContext(req);
  const ModelProfile& prof = c.prof;
  ASSERT_GT(prof.layers.size(), 20u);
  EXPECT_LT(prof.class_first.size(), prof.layers.size() / 4);
  for (size_t i = 0; i < prof.layers.size(); ++i) {
    const size_t first = prof.class_first.at(prof.layers[i].class_id);
    EXPECT_LE(first, i);
    EXPECT_TRUE(SameLayerCost(prof.layers[first], prof.layers[i])) << "layer " << i;
  }
  // Distinct classes are not equal to each other.
  for (size_t a = 0; a < prof.class_first.size(); ++a)
    for (size_t b = a + 1; b < prof.class_first.size(); ++b)
      EXPECT_FALSE(SameLayerCost(prof.layers[prof.class_first[a]], prof.layers[prof.class_first[b]]));
}

TEST(LayerClasses, OneDifferentFieldMakesLayersUnequal) {
  const PlanRequest req = FullAtOneMillion();
  const CostContext c = MakeCostContext(req);
  const LayerProfile& base = c.prof.layers.back();
  LayerProfile x = base;
  EXPECT_TRUE(SameLayerCost(base, x));
  x.class_id = base.class_id + 7;  // not a cost field
  EXPECT_TRUE(SameLayerCost(base, x));
  x = base;
  x.fused_mixer_bytes += 1;  // the last field
  EXPECT_FALSE(SameLayerCost(base, x));
  x = base;
  x.mixer = base.mixer == MixerKind::kKDA ? MixerKind::kMLA : MixerKind::kKDA;  // the first field
  EXPECT_FALSE(SameLayerCost(base, x));
  x = base;
  x.top_k += 1;
  EXPECT_FALSE(SameLayerCost(base, x));
  x = base;
  x.channel_kind = base.channel_kind == BlockKind::kMoE ? BlockKind::kMLP : BlockKind::kMoE;
  EXPECT_FALSE(SameLayerCost(base, x));
}

TEST(LayerClasses, EstimatesEqualThePerLayerAnswerBitForBit) {
  const PlanRequest full = FullAtOneMillion();
  const PlanRequest lora = test::SeedRequest(FinetuneMode::kLoRA);
  struct Case {
    const PlanRequest* req;
    Plan plan;
  };
  std::vector<Case> cases;
  // pp 4 x vp 3 (time-balanced split over heterogeneous layers), cp 128, tp 16, ep 128.
  Plan a = test::MakePlan({1, 1, 16, 4, 128, 16, 3, true, 128}, full.seq, 1, 4);
  a.recompute["*"] = Recompute::kFull;
  cases.push_back({&full, a});
  // pp 8, mixed recompute, FSDP 2 over cp 64 x tp 8.
  Plan b = test::MakePlan({1, 2, 8, 8, 128, 8, 1, true, 64}, full.seq, 1, 8);
  b.recompute = {{"KDA", Recompute::kSelective}, {"MoE", Recompute::kFull}};
  cases.push_back({&full, b});
  Plan l = test::MakePlan({1, 32, 4, 1, 128, 1, 1, true}, lora.seq, 1, 32);
  l.mode = FinetuneMode::kLoRA;
  l.lora_rank = 16;
  cases.push_back({&lora, l});
  for (const Case& k : cases) {
    const CostContext c = MakeCostContext(*k.req);
    const CostContext flat = OneClassPerLayer(c);
    ASSERT_TRUE(CheckPlanAgainstModel(c, k.plan).ok()) << CheckPlanAgainstModel(c, k.plan).ToString();
    const std::string what = PlanSummary(k.plan);
    ExpectSameEstimate(EstimatePlan(c, k.plan), EstimatePlan(flat, k.plan), what);
    EXPECT_EQ(PlanStageStarts(c, k.plan), PlanStageStarts(flat, k.plan)) << what;
    for (BlockKind kind : c.prof.kinds)
      EXPECT_EQ(RecomputeSeconds(c, k.plan, kind, Recompute::kFull),
                RecomputeSeconds(flat, k.plan, kind, Recompute::kFull))
          << what << " " << BlockKindName(kind);
  }
}

TEST(LayerClasses, MergingUnequalLayersChangesTheAnswer) {
  // The comparison above can fail: classes that wrongly merge every layer into layer 0's class
  // (a KDA layer standing in for the MLA ones) give another step time and memory.
  const PlanRequest full = FullAtOneMillion();
  const CostContext c = MakeCostContext(full);
  CostContext merged = c;
  merged.prof.class_first = {0};
  for (LayerProfile& lp : merged.prof.layers) lp.class_id = 0;
  Plan a = test::MakePlan({1, 1, 16, 4, 128, 16, 3, true, 128}, full.seq, 1, 4);
  a.recompute["*"] = Recompute::kFull;
  const PlanEstimate e = EstimatePlan(c, a), m = EstimatePlan(merged, a);
  EXPECT_NE(e.step_s, m.step_s);
  EXPECT_NE(e.memory.total, m.memory.total);
}

}  // namespace
}  // namespace onboard
