// The real-weights LoRA probe (backends/probe_weights.h) on a small llama-layout checkpoint written
// here (vocab 256: the text's bytes are the token ids): the held-out loss falls below the frozen
// checkpoint's, the frozen-adapter control does not pass, TP = 2 trains the same curve as one data
// rank, and a missing layer tensor is bad input naming it; on a deepseek_v3-layout checkpoint the
// adapters are kLoraTargets' (core/lora_targets.h) and TP = 2 trains them as one rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_weights.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_checkpoint.h"
#include "tests/backends/probe_weights_options.h"

namespace onboard {
namespace {

std::string WriteLlama(const hftest::Checkpoint& c) { return hftest::WriteCheckpoint(c); }

WeightsProbeOptions Options(const std::string& ckpt, int64_t ranks, int64_t tp) {
  WeightsProbeOptions o = hftest::ProbeWeightsOptions(ckpt, ranks);
  o.tp = tp;
  return o;
}

TEST(ProbeWeights, LoraOnRealLayersLowersHeldOutLossAndTheFrozenControlDoesNot) {
  const std::string ckpt = WriteLlama(hftest::MakeDense("llama", 2, 256));
  Expected<WeightsProbeResult> r = RunWeightsProbe(Options(ckpt, 2, 1));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->learned) << r->verdict;
  EXPECT_LT(r->held_out_final, (1 - kWeightsProbeMinFall) * r->held_out_frozen);
  EXPECT_EQ(r->targets.size(), 14u);  // q/k/v/o and the MLP's gate/up/down of both layers
  EXPECT_EQ(r->rank_bytes.size(), 2u);
  EXPECT_EQ(r->rank_bytes[0], r->checkpoint_bytes);  // tp 1: each rank reads the whole model
  // The PEFT export holds the trained adapters: B moved off zero.
  Expected<PeftLoraAdapter> pa = ReadPeftAdapter(r->adapter_dir);
  ASSERT_TRUE(pa.ok()) << pa.status().message();
  ASSERT_EQ(pa->modules.size(), 14u);
  EXPECT_EQ(pa->modules[0].module, "model.layers.0.mlp.down_proj");
  EXPECT_GT(pa->modules[0].b.abs().max().item<double>(), 0.0);

  // Negative control: frozen adapters (lr 0 on every step) leave the checkpoint's loss as it was.
  WeightsProbeOptions frozen = Options(ckpt, 2, 1);
  frozen.control = "frozen_lora";
  Expected<WeightsProbeResult> f = RunWeightsProbe(frozen);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_FALSE(f->learned) << f->verdict;
  EXPECT_EQ(f->held_out_final, f->held_out_frozen);
  EXPECT_EQ(f->held_out_frozen, r->held_out_frozen);  // same weights, same windows
}

TEST(ProbeWeights, TensorParallelRanksTrainTheCurveOfOneRankAndReadHalfTheLayers) {
  const std::string ckpt = WriteLlama(hftest::MakeDense("qwen2", 2, 256));  // q/k/v biases split too
  WeightsProbeOptions one = Options(ckpt, 1, 1), tp = Options(ckpt, 2, 2);
  one.steps = tp.steps = 8;
  Expected<WeightsProbeResult> a = RunWeightsProbe(one), b = RunWeightsProbe(tp);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->train_loss.size(), b->train_loss.size());
  double worst = 0;
  for (size_t i = 0; i < a->train_loss.size(); ++i)
    worst = std::max(worst, std::fabs(a->train_loss[i] - b->train_loss[i]) / a->train_loss[i]);
  EXPECT_LT(worst, 1e-5);
  EXPECT_NEAR(b->held_out_final, a->held_out_final, 1e-5 * a->held_out_final);
  // The curve moved (the comparison is not of two flat lines) ...
  EXPECT_LT(a->train_loss.back(), a->train_loss.front() - 0.05);
  // ... and each TP rank read less than the whole checkpoint: its rows / columns of the layers.
  EXPECT_LT(b->rank_bytes[0], a->rank_bytes[0]);
  EXPECT_LT(b->rank_bytes[1], a->rank_bytes[0]);
}

TEST(ProbeWeights, MissingLayerTensorIsBadInputNamingItAndASliceWithoutThatLayerRuns) {
  hftest::Checkpoint c = hftest::MakeDense("llama", 2, 256);
  c.tensors.erase("model.layers.1.self_attn.k_proj.weight");
  const std::string ckpt = WriteLlama(c);
  WeightsProbeOptions o = Options(ckpt, 2, 1);
  o.steps = 2;
  Expected<WeightsProbeResult> r = RunWeightsProbe(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput) << r.status().message();
  EXPECT_NE(r.status().message().find("model.layers.1.self_attn.k_proj.weight"), std::string::npos)
      << r.status().message();
  // --layers 0-0 never asks for layer 1's tensors.
  o.layers = {0, 0};
  Expected<WeightsProbeResult> s = RunWeightsProbe(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->layers_first, 0);
  EXPECT_EQ(s->layers_last, 0);
  EXPECT_EQ(s->targets.size(), 7u);
  EXPECT_LT(s->rank_bytes[0], s->checkpoint_bytes);
}
TEST(ProbeWeights, DenseMlpAndSharedExpertAdaptersUnderTensorParallelMatchOneRank) {
  // deepseek_v3, 3 layers: MLA with a low-rank q (o_proj its only adapted projection), layer 0 dense,
  // layers 1-2 MoE with a shared expert (so their 8 routed experts stay frozen: AdaptsRoutedExperts).
  const std::string ckpt = WriteLlama(hftest::MakeDeepSeekV3(256));
  WeightsProbeOptions one = Options(ckpt, 1, 1), tp = Options(ckpt, 2, 2);
  one.steps = tp.steps = 8;
  Expected<WeightsProbeResult> a = RunWeightsProbe(one), b = RunWeightsProbe(tp);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  // By hand: 1 + 3 adapters per layer, the FFN's under the checkpoint's names.
  std::vector<std::string> want;
  for (const char* m : {"model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj",
                        "model.layers.0.mlp.up_proj", "model.layers.0.mlp.down_proj"})
    want.push_back(m);
  for (const char* l : {"model.layers.1.", "model.layers.2."})
    for (const char* m : {"self_attn.o_proj", "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj",
                          "mlp.shared_experts.down_proj"})
      want.push_back(std::string(l) + m);
  EXPECT_EQ(a->targets, want);
  EXPECT_EQ(b->targets, want);
  // TP: gate/up split by rows, down (and o_proj) by columns; the adapters' A and B whole on each rank.
  ASSERT_EQ(a->train_loss.size(), b->train_loss.size());
  double worst = std::fabs(b->held_out_final - a->held_out_final) / a->held_out_final;
  for (size_t i = 0; i < a->train_loss.size(); ++i)
    worst = std::max(worst, std::fabs(a->train_loss[i] - b->train_loss[i]) / a->train_loss[i]);
  std::printf("deepseek_v3 tp2 vs one rank: worst relative difference %.3g; held-out %.6g -> %.6g\n", worst,
              a->held_out_frozen, a->held_out_final);
  EXPECT_LT(worst, 1e-5);
  EXPECT_LT(a->train_loss.back(), a->train_loss.front() - 0.05);  // the curves moved
  // The PEFT file's target_modules name these projections only (not the routed experts').
  Expected<PeftLoraAdapter> pa = ReadPeftAdapter(a->adapter_dir);
  ASSERT_TRUE(pa.ok()) << pa.status().message();
  EXPECT_EQ(pa->TargetModules(),
            (std::vector<std::string>{"mlp.down_proj", "mlp.gate_proj", "mlp.shared_experts.down_proj",
                                      "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj",
                                      "mlp.up_proj", "self_attn.o_proj"}));
}

TEST(ProbeWeights, BadOptionsNameTheFlag) {
  WeightsProbeOptions o = Options("/nonexistent", 3, 2);
  Status st = o.Validate();
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("--tp"), std::string::npos) << st.message();
  o = Options("/nonexistent", 2, 1);
  o.batch = 3;
  st = o.Validate();
  EXPECT_NE(st.message().find("--batch"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
