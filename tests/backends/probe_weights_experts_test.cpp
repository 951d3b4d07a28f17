// The real-weights probe's routed-expert adapters (core/lora_targets.h AdaptsRoutedExperts: an MoE
// layer without a shared expert adapts each routed expert, one adapter per expert): on Mixtral and
// Qwen3-MoE checkpoints the adapters are the hand-counted set under the checkpoint's names; tp 2, ep 2
// and ep 2 over 4 ranks (the expert-data-parallel gradient sum) train the one-rank curve in fp64; the
// PEFT file holds every expert's adapter (gathered from the EP owners), equal to the one-rank run's.
// gpt-oss's fused experts: probe_weights_fused_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_weights.h"
#include "tests/backends/hf_test_checkpoint.h"
#include "tests/backends/hf_test_families.h"
#include "tests/backends/probe_weights_layout_helpers.h"

namespace onboard {
namespace weights_experts {  // a unity batch shares the anonymous namespace with other test files
namespace {

using hftest::Launch;
using hftest::LayoutOptions;
using hftest::Worst;
using hftest::Write;

// The adapted modules of `layers` MoE layers by hand: q/k/v/o, then each expert's three projections.
std::vector<std::string> ByHand(int layers, const std::string& experts, int n,
                                const std::vector<std::string>& fc) {
  std::vector<std::string> want;
  for (int l = 0; l < layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const char* a : {"q_proj", "k_proj", "v_proj", "o_proj"}) want.push_back(p + "self_attn." + a);
    for (int e = 0; e < n; ++e)
      for (const std::string& f : fc) want.push_back(p + experts + std::to_string(e) + "." + f);
  }
  return want;
}

TEST(ProbeWeightsExperts, MoeWithoutSharedExpertAdaptsEachRoutedExpert) {
  // mixtral: 2 MoE layers of 4 experts (w1 / w3 / w2), no shared expert: 2 x (4 + 4 x 3) = 32 adapters.
  WeightsProbeOptions o = LayoutOptions(Write(hftest::MakeMixtral(256)), 1, 8);
  const WeightsProbeResult r = Launch(o);
  const std::vector<std::string> want = ByHand(2, "block_sparse_moe.experts.", 4, {"w1", "w3", "w2"});
  ASSERT_EQ(want.size(), 32u);
  EXPECT_EQ(r.targets, want);
  EXPECT_EQ(r.caveat, "");  // nothing kLoraTargets adapts is left frozen (gpt-oss's caveat: combos test)
  // The PEFT file: every expert's adapter, trained (B off zero: every expert got tokens), and its
  // target_modules exactly the adapted paths past "layers.N.".
  Expected<PeftLoraAdapter> pa = ReadPeftAdapter(r.adapter_dir);
  ASSERT_TRUE(pa.ok()) << pa.status().message();
  ASSERT_EQ(pa->modules.size(), 32u);
  for (const LoraModule& m : pa->modules) EXPECT_GT(m.b.abs().max().item<double>(), 0.0) << m.module;
  std::vector<std::string> targets;
  for (const char* a : {"q_proj", "k_proj", "v_proj", "o_proj"})
    targets.push_back(std::string("self_attn.") + a);
  for (int e = 0; e < 4; ++e)
    for (const char* f : {"w1", "w2", "w3"})
      targets.push_back("block_sparse_moe.experts." + std::to_string(e) + "." + f);
  std::sort(targets.begin(), targets.end());
  EXPECT_EQ(pa->TargetModules(), targets);

  // qwen3_moe: mlp.experts.E.gate_proj / up_proj / down_proj, 8 experts: 2 x (4 + 8 x 3) = 56.
  WeightsProbeOptions oq = LayoutOptions(Write(hftest::MakeQwen3Moe(256)), 1, 8);
  oq.steps = 2;
  const WeightsProbeResult rq = Launch(oq);
  EXPECT_EQ(rq.targets, ByHand(2, "mlp.experts.", 8, {"gate_proj", "up_proj", "down_proj"}));
  EXPECT_EQ(rq.targets.size(), 56u);
}

TEST(ProbeWeightsExperts, TensorAndExpertParallelTrainTheOneRankExpertAdapters) {
  // fp64, 8 steps, against 1 rank: the train curve, both held-out losses and the PEFT file's every A
  // and B (gathered from the owners). tp 2: each expert's rows / columns split, adapters whole; ep 2
  // on 2 ranks: each owns 2 experts and their adapters; ep 2 on 4 ranks: 2 EP groups, each expert's
  // adapter on 2 owners, its gradient summed over them; ep 2 x fsdp 2; pp 2 x ep 2 on 4 ranks: each
  // stage's EP ranks write their parts of the file; tp 2 x ep 2 on 4 ranks: each expert's adapter
  // gradient summed over its owner's 2 TP ranks.
  const std::string ckpt = Write(hftest::MakeMixtral(256));
  WeightsProbeOptions one = LayoutOptions(ckpt, 1, 8);
  one.fp64 = true;
  const WeightsProbeResult r1 = Launch(one);
  Expected<PeftLoraAdapter> a1 = ReadPeftAdapter(r1.adapter_dir);
  ASSERT_TRUE(a1.ok()) << a1.status().message();
  ASSERT_EQ(a1->modules.size(), 32u);
  std::vector<std::string> names;  // the one-rank file's modules (sorted): the EP runs' merged targets
  for (const LoraModule& m : a1->modules) names.push_back(m.module);
  using L = hftest::ProbeLayout;
  for (const L& l :
       {L{"tp2", 2, 2, 1, 1, 1}, L{"ep2", 2, 1, 2, 1, 1}, L{"ep2 on 4 ranks", 4, 1, 2, 1, 1},
        L{"ep2 x fsdp2", 2, 1, 2, 2, 1}, L{"pp2 x ep2", 4, 1, 2, 1, 2}, L{"tp2 x ep2", 4, 2, 2, 1, 1}}) {
    const WeightsProbeResult r = hftest::ExpectLayoutMatchesOneRank(ckpt, l, "mixtral", r1, *a1);
    if (l.ep > 1 || l.pp > 1) {
      EXPECT_EQ(r.targets, names) << l.name;
    }
  }
  std::printf("1 rank held-out %.6g -> %.6g\n", r1.held_out_frozen, r1.held_out_final);
  EXPECT_GT(hftest::Rel(r1.held_out_final, r1.held_out_frozen), hftest::kLayoutWrongAtLeast);  // it trained
}

TEST(ProbeWeightsExperts, ExpertParallelClipsToTheGlobalNormCountingEachExpertOnce) {
  // The clip (global norm 1) acts only when the gradient norm exceeds 1: alpha / r = 64 (B's gradient
  // scales with it) makes it exceed 1 here, so the norm's count matters: ep 2 on 4 ranks (each
  // expert's adapter on 2 owners, one per EP group) must count each expert once to train the one-rank
  // curve. fp64, 8 steps.
  const std::string ckpt = Write(hftest::MakeMixtral(256));
  WeightsProbeOptions one = LayoutOptions(ckpt, 1, 8), ep = LayoutOptions(ckpt, 4, 8);
  one.fp64 = ep.fp64 = true;
  one.lora_alpha = ep.lora_alpha = 64.0 * double(one.lora_rank);
  ep.ep = 2;
  const WeightsProbeResult r1 = Launch(one), re = Launch(ep);
  std::printf(
      "mixtral fp64 alpha/r 64, ep2 on 4 ranks vs 1 rank: worst relative %.3g; held-out %.6g -> %.6g\n",
      Worst(re, r1), r1.held_out_frozen, r1.held_out_final);
  EXPECT_LT(Worst(re, r1), hftest::kLayoutTolFp64);
}

}  // namespace
}  // namespace weights_experts
}  // namespace onboard
