// The fusion plan in the cost model (search/fusion_cost.h): an unfused KDA prologue / DSA indexer keeps
// and moves exactly the plan's bytes; fused kernels (the default) change nothing; the step time of an
// unfused plan grows by the elementwise traffic of those bytes.
#include "search/fusion_cost.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "search/calibration_table.h"
#include "search/cost_model.h"
#include "search/fusion_plan.h"
#include "search_test_util.h"

namespace onboard {
namespace {

// The bytes of every term of kind `k` in layer i (the KDA prologue is three terms).
double PlanTerm(const ModelIR& m, size_t i, FusionKind k, int64_t seq) {
  FusionOptions o;
  o.seq = seq;
  double b = 0;
  for (const FusionTerm& t : PlanLayerFusions(m, m.layers[i], o).terms)
    if (t.kind == k) b += t.bytes_saved;
  return b;
}

TEST(FusionCost, UnfusedKdaAndDsaLayersKeepHalfThePlanBytes) {
  const ModelIR m = test::Flagship();
  const int64_t seq = 8192;
  const ModelProfile fused = BuildProfile(m, seq, 0, false), unfused = BuildProfile(m, seq, 0, true);
  int kda = 0, dsa = 0, other = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const MixerKind k = m.layers[i].attn.kind;
    const double plan = k == MixerKind::kKDA   ? PlanTerm(m, i, FusionKind::kKdaPrologue, seq)
                        : k == MixerKind::kDSA ? PlanTerm(m, i, FusionKind::kDsaIndexerTopk, seq)
                                               : 0;
    (k == MixerKind::kKDA ? kda : k == MixerKind::kDSA ? dsa : other)++;
    EXPECT_DOUBLE_EQ(unfused.layers[i].act_mixer - fused.layers[i].act_mixer, plan / 2) << "layer " << i;
    EXPECT_DOUBLE_EQ(fused.layers[i].fused_mixer_bytes, plan) << "layer " << i;
    const MixerFusionBytes b = MixerFusionBytesOf(m, m.layers[i], seq);
    EXPECT_DOUBLE_EQ(b.moved, plan);
    EXPECT_DOUBLE_EQ(b.kept, plan / 2);
    EXPECT_EQ(b.launches > 0, plan > 0) << "layer " << i;
  }
  EXPECT_GT(kda, 0);
  EXPECT_GT(dsa, 0);
  // DSA scores scale with the causal length: (seq + 1) / 2 fp32 keys, written and read.
  for (size_t i = 0; i < m.layers.size(); ++i)
    if (m.layers[i].attn.kind == MixerKind::kDSA) {
      EXPECT_DOUBLE_EQ(MixerFusionBytesOf(m, m.layers[i], seq).moved, 2 * 4.0 * (seq + 1) / 2);
      break;
    }
}

TEST(FusionCost, ModelWithoutKdaOrDsaIsUnchanged) {
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/onnx/llama_gqa_tiny.onnx");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const LayerSpec& l : m->layers) {
    const MixerFusionBytes b = MixerFusionBytesOf(*m, l, 4096);
    EXPECT_EQ(b.kept, 0);
    EXPECT_EQ(b.moved, 0);
  }
}

TEST(FusionCost, UnfusedFlagshipStepIsSlowerByItsMixerTraffic) {
  // Same plan, same request except attention_kernel: the unfused request pays the fused-away bytes
  // (and the softmax layers' score traffic); the difference is at least the KDA/DSA elementwise term.
  PlanRequest req = test::SeedRequest(FinetuneMode::kLoRA);
  PlanRequest unf = req;
  unf.attention_kernel = "unfused";
  const CostContext cf = MakeCostContext(req), cu = MakeCostContext(unf);
  Plan p = test::MakePlan({1, 128, 1, 1, 128, 1, 1, false}, req.seq, 1, 1);  // FSDP 128, EP 128
  p.mode = FinetuneMode::kLoRA;
  p.lora_rank = 16;
  const PlanEstimate ef = EstimatePlan(cf, p), eu = EstimatePlan(cu, p);
  double fused_bytes = 0;
  for (const LayerProfile& lp : cf.prof.layers) fused_bytes += lp.fused_mixer_bytes;
  ASSERT_GT(fused_bytes, 0);
  EXPECT_GT(eu.step_s, ef.step_s);
  EXPECT_GT(eu.memory.activations, ef.memory.activations);
}

// The launch term after fusion: a host-bound layout (the 2-layer KDA export, kda_gated_tiny.onnx,
// one 128-token micro-batch per device, eager launches) pays the unfused prologue's 4 kernels per
// layer forward and backward: 2 x 4 x launch_s_per_kernel x 2 layers more host time per micro-batch,
// less whatever the unfused traffic adds to the GPU time the host hides behind. With CUDA graphs no
// launch is exposed either way. Negative: without the launch term the unfused launch time is the
// fused one or less (its GPU time only grows).
TEST(FusionCost, UnfusedKdaPrologueAddsItsLaunchesWhereTheHostIsTheBottleneck) {
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/onnx/kda_gated_tiny.onnx");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  PlanRequest req;
  req.model = *m;
  req.topology = test::ShippedTopology("atlas-950-superpod-128");
  req.mode = FinetuneMode::kFull;
  req.seq = 128;
  PlanRequest unf = req;
  unf.attention_kernel = "unfused";
  const CostContext cf = MakeCostContext(req), cu = MakeCostContext(unf);
  for (const LayerProfile& lp : cu.prof.layers) EXPECT_EQ(lp.unfused_mixer_launches, 4);
  for (const LayerProfile& lp : cf.prof.layers) EXPECT_EQ(lp.unfused_mixer_launches, 0);
  Plan p = test::MakePlan({128, 1, 1, 1, 1, 1, 1, false}, req.seq, 1, 1);  // DP 128, one micro-batch
  p.mode = FinetuneMode::kFull;
  auto launch_s = [](const PlanEstimate& e) {
    for (const TimeTerm& t : e.time_terms)
      if (t.name == "launch") return t.exposed_s;
    return 0.0;
  };
  const double fused = launch_s(EstimatePlan(cf, p)), unfused = launch_s(EstimatePlan(cu, p));
  const double extra = 2 * 4 * CostConstants{}.launch_s_per_kernel * 2;  // fwd+bwd x 4 kernels x 2 layers
  ASSERT_GT(fused, 0) << "this layout must be host-bound";
  EXPECT_GT(unfused - fused, 0.5 * extra);
  EXPECT_LE(unfused - fused, extra);
  p.cuda_graph = CudaGraph::kFull;
  EXPECT_EQ(launch_s(EstimatePlan(cu, p)), 0);
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

// The unfused alternative of the framework chains (PlanRequest::unfused_framework): every layer's
// non-mixer terms are kept once (bytes / 2) with its block's activations and their launches join the
// launch term; the default (fused) profile is unchanged. A dense GQA model has no KDA/DSA terms, so
// every byte of the difference comes from the framework chains (norm+linear, SwiGLU, residual adds,
// rotary).
TEST(FusionCost, UnfusedFrameworkChainsAreChargedPerBlockAndOnlyWhenAsked) {
  const ModelIR m = test::HfModel("llama-3.1-8b");
  const int64_t seq = 4096;
  const ModelProfile fused = BuildProfile(m, seq, 0, false), unf = BuildProfile(m, seq, 0, false, true);
  ASSERT_EQ(fused.layers.size(), m.layers.size());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const FrameworkFusionBytes f = FrameworkFusionBytesOf(m, m.layers[i], seq);
    FusionOptions o;
    o.seq = seq;
    double plan = 0, launches = 0;
    for (const FusionTerm& t : PlanLayerFusions(m, m.layers[i], o).terms) {
      plan += t.bytes_saved;
      launches += t.launches_saved;
    }
    EXPECT_DOUBLE_EQ(f.mixer.moved + f.channel.moved, plan) << "layer " << i;
    EXPECT_GT(f.channel.moved, f.mixer.moved);  // SwiGLU's 4 I b dominate
    EXPECT_DOUBLE_EQ(unf.layers[i].act_mixer - fused.layers[i].act_mixer, f.mixer.kept);
    EXPECT_DOUBLE_EQ(unf.layers[i].act_channel - fused.layers[i].act_channel, f.channel.kept);
    EXPECT_EQ(unf.layers[i].unfused_mixer_launches, launches);
    EXPECT_EQ(fused.layers[i].unfused_mixer_launches, 0);
  }
  PlanRequest req;
  req.model = m;
  req.topology = test::ShippedTopology("atlas-950-superpod-128");
  req.mode = FinetuneMode::kFull;
  req.seq = seq;
  PlanRequest u = req;
  u.unfused_framework = true;
  Plan p = test::MakePlan({1, 128, 1, 1, 1, 1, 1, false}, seq, 1, 4);  // FSDP 128
  p.mode = FinetuneMode::kFull;
  const PlanEstimate ef = EstimatePlan(MakeCostContext(req), p), eu = EstimatePlan(MakeCostContext(u), p);
  EXPECT_GT(eu.step_s, ef.step_s);
}

}  // namespace
}  // namespace onboard

namespace onboard {
namespace {

// The calibration table (tests/data/measured_training_runs.json = shared/reference's file) with the
// framework fusion chains fused (the default, what the measured engines run) and unfused; nothing is
// fitted to either. Every evaluated run is predicted slower when its chains are unfused (more HBM
// traffic, more launches): a cost model that ignored the terms would predict the same.
TEST(FusionCost, CalibrationTableWithTheFusionChainsFusedAndUnfused) {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/measured_training_runs.json");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  auto fused = BuildCalibrationTable(*runs), unfused = BuildCalibrationTable(*runs, true);
  ASSERT_TRUE(fused.ok() && unfused.ok());
  ASSERT_EQ(fused->evaluated, unfused->evaluated);
  ASSERT_GT(fused->evaluated, 0);
  for (size_t i = 0; i < fused->rows.size(); ++i) {
    if (!fused->rows[i].evaluated) continue;
    EXPECT_LT(unfused->rows[i].predicted_tps, fused->rows[i].predicted_tps) << fused->rows[i].id;
  }
  std::printf(
      "calibration, fusion chains fused:   mean |error| %.1f%%, max %.1f%% (%s), within 20%%: %d of %d\n",
      100 * fused->mean_abs_err, 100 * fused->max_abs_err, fused->worst_id.c_str(), fused->within_20,
      fused->evaluated);
  std::printf(
      "calibration, fusion chains unfused: mean |error| %.1f%%, max %.1f%% (%s), within 20%%: %d of %d\n",
      100 * unfused->mean_abs_err, 100 * unfused->max_abs_err, unfused->worst_id.c_str(), unfused->within_20,
      unfused->evaluated);
}

}  // namespace
}  // namespace onboard
