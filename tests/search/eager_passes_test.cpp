// The eager elementwise passes Megatron-Core runs outside its fused kernels for gpt-oss's features
// (search/cost_model.h "Eager elementwise passes"): unfused RoPE under a YaRN attention factor != 1, the
// clamped GLU, the prob-weighted fc2 expert bias (fp32 under HybridEP). Each is checked against the bytes
// written out here, on gpt-oss-120b with and without the feature; a model without the features pays none.
//
// Legend: T tokens per micro-batch on a rank (mb * seq, tp = cp = 1), R = T * top_k routed copies
// (imbalance 1), I expert width, h hidden, HBM bytes/s as the cost model derates it.
#include <cmath>

#include "search/cost_model.h"
#include "search/model_profile.h"
#include "search_test_util.h"

namespace onboard {
namespace {

using test::Term;

constexpr int64_t kLayers = 36, kMicroBatches = 4, kSeq = 4096;

PlanRequest GptOss() { return test::HfRequestOn("gpt-oss-120b", "B200-180GB", 8); }

// gpt-oss without the features the passes come from.
ModelIR Without(ModelIR m, bool rope, bool clamp, bool bias) {
  for (LayerSpec& l : m.layers) {
    if (rope) l.attn.rope_attention_factor = 1.0;
    if (clamp) l.moe.act_clamp = 0;
    if (bias) l.moe.expert_bias = false;
  }
  return m;
}

Plan EightWayExperts(EpDispatcher dispatcher, Recompute moe) {
  ParallelDegrees d{1, 8, 1, 1, 8, 1, 1, false, 1};
  Plan p = test::MakePlan(d, kSeq, 1, kMicroBatches);
  p.ep_dispatcher = dispatcher;
  p.recompute = {{"*", Recompute::kNone}, {"MoE", moe}};
  return p;
}

// Seconds of the step's compute.* terms (and recompute) for `model`.
double ComputeSeconds(PlanRequest req, const ModelIR& model, const Plan& p, bool recompute_only = false) {
  req.model = model;
  auto e = EvaluatePlan(req, p);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return 0;
  double s = 0;
  for (const TimeTerm& t : e->time_terms)
    if (recompute_only ? t.name == "recompute" : t.name.rfind("compute.", 0) == 0) s += t.total_s;
  return s;
}

double Hbm(const PlanRequest& req) {
  const CostContext c = MakeCostContext(req);
  return c.hbm_bps * c.k.hbm_eff * req.calibration.memory_bound_efficiency;
}

// Per step: kMicroBatches x kLayers x bytes / HBM.
double StepSeconds(const PlanRequest& req, double bytes_per_layer) {
  return kMicroBatches * kLayers * bytes_per_layer / Hbm(req);
}

TEST(EagerPasses, GptOssPaysUnfusedRopeClampAndBiasPasses) {
  const PlanRequest req = GptOss();
  const Plan p = EightWayExperts(EpDispatcher::kAllToAll, Recompute::kNone);
  const double T = kSeq, R = T * 4, I = 2880, h = 2880;
  const double all = ComputeSeconds(req, req.model, p);
  // Rotary on 64 query + 8 key heads of 64: 20 B fwd + 16 B bwd per element beyond TE's fused RoPE.
  const double rope = all - ComputeSeconds(req, Without(req.model, true, false, false), p);
  EXPECT_NEAR(rope, StepSeconds(req, T * (64 + 8) * 64 * (20 + 16)), 1e-9);
  // Clamp: 16 B fwd + 20 B bwd per routed copy x I.
  const double clamp = all - ComputeSeconds(req, Without(req.model, false, true, false), p);
  EXPECT_NEAR(clamp, StepSeconds(req, R * I * (16 + 20)), 1e-9);
  // fc2 bias with bf16 probs (all-to-all): 12 B fwd + 12 B bwd per copy x h. The bias parameters
  // themselves add 2 FLOPs each to the routed GEMMs' count: 0.4% of this term here.
  const double bias = all - ComputeSeconds(req, Without(req.model, false, false, true), p);
  EXPECT_NEAR(bias / StepSeconds(req, R * h * (12 + 12)), 1.0, 0.01);
}

// HybridEP hands fp32 probs over: the same bias costs 28 + 36 B instead of 12 + 12 per copy x h. The
// difference of the two dispatchers' bias terms is exact (the GEMM side effect above cancels).
TEST(EagerPasses, HybridEpAddsTheExpertBiasInFp32) {
  const PlanRequest req = GptOss();
  const ModelIR no_bias = Without(req.model, false, false, true);
  auto bias = [&](EpDispatcher d) {
    const Plan p = EightWayExperts(d, Recompute::kNone);
    return ComputeSeconds(req, req.model, p) - ComputeSeconds(req, no_bias, p);
  };
  const double R = kSeq * 4.0, h = 2880;
  EXPECT_NEAR(bias(EpDispatcher::kHybridEP) - bias(EpDispatcher::kAllToAll),
              StepSeconds(req, R * h * ((28 + 36) - (12 + 12))), 1e-9);
}

TEST(EagerPasses, MoeActRecomputeRedoesTheClamp) {
  const PlanRequest req = GptOss();
  const Plan p = EightWayExperts(EpDispatcher::kAllToAll, Recompute::kSelective);
  const double R = kSeq * 4.0, I = 2880;
  const double clamp = ComputeSeconds(req, req.model, p, true) -
                       ComputeSeconds(req, Without(req.model, false, true, false), p, true);
  EXPECT_NEAR(clamp, StepSeconds(req, R * I * 16), 1e-9);
}

TEST(EagerPasses, ModelsWithoutTheFeaturesPayNone) {
  const ModelProfile oss = BuildProfile(test::HfModel("gpt-oss-120b"), kSeq, 0, false, false);
  const ModelProfile qwen = BuildProfile(test::HfModel("qwen3-30b-a3b"), kSeq, 0, false, false);
  EXPECT_DOUBLE_EQ(oss.layers[0].rope_unfused_elems, (64 + 8) * 64.0);
  EXPECT_DOUBLE_EQ(oss.layers[0].clamp_elems, 2880.0);
  EXPECT_DOUBLE_EQ(oss.layers[0].expert_bias_elems, 2880.0);
  for (const LayerProfile& lp : qwen.layers) {
    EXPECT_EQ(lp.rope_unfused_elems, 0.0);
    EXPECT_EQ(lp.clamp_elems, 0.0);
    EXPECT_EQ(lp.expert_bias_elems, 0.0);
  }
}

}  // namespace
}  // namespace onboard
