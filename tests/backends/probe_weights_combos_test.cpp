// The real-weights probe's combined layouts (backends/probe_weights.h): EP x FSDP (the routed experts
// owned by their EP rank and chunked over the expert-data-parallel ranks, the rest chunked over the FSDP
// group), PP x EP and PP x FSDP (each stage's data ranks form its EP / FSDP groups), and PP's 1F1B
// micro-batch schedule with its measured bubble, and its interleaved order (--interleave). Each against
// one rank on small HF-layout checkpoints: the same train curve and held-out losses, fewer bytes read per
// rank; each with a negative control (the wrong expert chunk / experts / FSDP chunk / stage layers /
// chunk order) that moves the held-out loss off one rank's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>

#include "backends/probe_weights.h"
#include "tests/backends/hf_test_checkpoint.h"
#include "tests/backends/hf_test_families.h"
#include "tests/backends/probe_weights_layout_helpers.h"

namespace onboard {
namespace weights_combos {  // a unity batch shares the anonymous namespace with other test files
namespace {

using hftest::ExpectFaultMovesHeldOut;
using hftest::kLayoutTol;
using hftest::Launch;
using hftest::LayoutOptions;
using hftest::Worst;
using hftest::Write;

uint64_t Sum(const std::vector<uint64_t>& v) { return std::accumulate(v.begin(), v.end(), uint64_t{0}); }

void PrintBytes(const char* name, const WeightsProbeResult& r, const WeightsProbeResult& one) {
  std::printf("%s vs 1 rank: worst relative %.3g; bytes per rank", name, Worst(r, one));
  for (uint64_t b : r.rank_bytes) std::printf(" %llu", (unsigned long long)b);
  std::printf(" of %llu\n", (unsigned long long)one.rank_bytes[0]);
}

// One rank and the layout `o` on the same checkpoint: the same curve and held-out losses.
struct Pair {
  WeightsProbeResult one, r;
};
Pair CompareWithOneRank(const WeightsProbeOptions& o, const char* name) {
  Pair p;
  p.one = Launch(LayoutOptions(o.checkpoint, 1, o.batch));
  p.r = Launch(o);
  EXPECT_EQ(p.r.rank_bytes.size(), size_t(o.ranks));
  if (p.r.rank_bytes.size() != size_t(o.ranks) || p.one.rank_bytes.empty()) return p;
  PrintBytes(name, p.r, p.one);
  EXPECT_LT(Worst(p.r, p.one), kLayoutTol);
  return p;
}

TEST(ProbeWeightsCombos, ExpertParallelWithFsdpMatchesOneRankAndTilesTheModel) {
  // mixtral, 4 experts: (a) 2 ranks ep 2 x fsdp 2: each rank owns 2 experts whole (fsdp / ep = 1) and
  // half the rows of every other tensor; (b) 4 ranks ep 2 x fsdp 4: the experts of EP rank e are
  // chunked over the 2 ranks of the FSDP group with that EP rank, the rest over all 4.
  const std::string ckpt = Write(hftest::MakeMixtral(256));
  const WeightsProbeResult one = Launch(LayoutOptions(ckpt, 1, 8));
  WeightsProbeOptions a = LayoutOptions(ckpt, 2, 8), b = LayoutOptions(ckpt, 4, 8);
  a.ep = b.ep = 2;
  a.fsdp = 2;
  b.fsdp = 4;
  const WeightsProbeResult ra = Launch(a), rb = Launch(b);
  ASSERT_EQ(ra.rank_bytes.size(), 2u);
  ASSERT_EQ(rb.rank_bytes.size(), 4u);
  PrintBytes("ep2 x fsdp2", ra, one);
  PrintBytes("ep2 x fsdp4", rb, one);
  EXPECT_LT(Worst(ra, one), kLayoutTol);
  EXPECT_LT(Worst(rb, one), kLayoutTol);
  EXPECT_LT(one.train_loss.back(), one.train_loss.front() - 0.05);  // the curves moved
  // Every byte read once over the ranks; each rank about 1/2 (a) and 1/4 (b) of the model.
  EXPECT_EQ(Sum(ra.rank_bytes), one.rank_bytes[0]);
  EXPECT_EQ(Sum(rb.rank_bytes), one.rank_bytes[0]);
  for (uint64_t x : ra.rank_bytes) EXPECT_LT(double(x), 0.55 * double(one.rank_bytes[0]));
  for (uint64_t x : rb.rank_bytes) EXPECT_LT(double(x), 0.3 * double(one.rank_bytes[0]));

  // Negative control: each rank loads the other expert-FSDP rank's chunk of its experts.
  ExpectFaultMovesHeldOut(b, "wrong_expert_chunk", one);
}

TEST(ProbeWeightsCombos, PipelineWithExpertParallelMatchesOneRank) {
  // mixtral, 2 layers: 2 stages of 1 MoE layer, each stage's 2 data ranks its EP group (4 ranks).
  WeightsProbeOptions o = LayoutOptions(Write(hftest::MakeMixtral(256)), 4, 8);
  o.pp = o.ep = 2;
  const auto [one, r] = CompareWithOneRank(o, "pp2 x ep2");
  ASSERT_EQ(r.rank_bytes.size(), 4u);
  for (uint64_t x : r.rank_bytes) EXPECT_LT(x, one.rank_bytes[0] / 2);  // half the layers, half their experts

  // Negative control: each EP rank of each stage serves the other rank's experts.
  ExpectFaultMovesHeldOut(o, "wrong_expert_range", one);
}

TEST(ProbeWeightsCombos, PipelineWithFsdpMatchesOneRankAndTilesTheModel) {
  // qwen2, 4 layers: 2 stages of 2 layers, each stage's 2 data ranks its FSDP group (4 ranks).
  WeightsProbeOptions o = LayoutOptions(Write(hftest::MakeDense("qwen2", 4, 256)), 4, 8);
  o.pp = o.fsdp = 2;
  const auto [one, r] = CompareWithOneRank(o, "pp2 x fsdp2");
  ASSERT_EQ(r.rank_bytes.size(), 4u);
  EXPECT_EQ(Sum(r.rank_bytes), one.rank_bytes[0]);
  for (uint64_t x : r.rank_bytes) EXPECT_LT(double(x), 0.3 * double(one.rank_bytes[0]));

  // Negative control: each FSDP rank of each stage loads the other rank's chunk.
  ExpectFaultMovesHeldOut(o, "wrong_fsdp_chunk", one);
}

TEST(ProbeWeightsCombos, PipelineMicroBatchesRunOneFOneBAndReportTheBubble) {
  // qwen2, 4 layers, pp 2 on 2 ranks, 8 windows in M = 4 micro-batches of 2: the gradients accumulate
  // over the micro-batches (the curve is one rank's); the JSON has each stage's measured bubble beside
  // (P - 1) / (M + P - 1) = 1/5.
  const std::string ckpt = Write(hftest::MakeDense("qwen2", 4, 256));
  const WeightsProbeResult one = Launch(LayoutOptions(ckpt, 1, 8));
  WeightsProbeOptions o = LayoutOptions(ckpt, 2, 8);
  o.pp = 2;
  o.micro_batch = 2;
  ASSERT_EQ(o.microbatches(), 4);
  const WeightsProbeResult r = Launch(o);
  ASSERT_EQ(r.pp_bubble_by_stage.size(), 2u);
  std::printf("pp2 M4 vs 1 rank: worst relative %.3g; bubble measured %.3f %.3f, theory %.3f\n",
              Worst(r, one), r.pp_bubble_by_stage[0], r.pp_bubble_by_stage[1], r.pp_bubble_theory);
  EXPECT_LT(Worst(r, one), kLayoutTol);
  EXPECT_DOUBLE_EQ(r.pp_bubble_theory, 0.2);
  for (double b : r.pp_bubble_by_stage) {
    EXPECT_GT(b, 0.0);  // a stage waits for the other at least at the ends
    EXPECT_LT(b, 1.0);
  }
  std::ifstream f(r.out_dir + "/weights_probe.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string json = ss.str();
  EXPECT_NE(json.find("\"measured_by_stage\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"microbatches\": 4"), std::string::npos) << json;

  // Negative control: each stage runs the other stage's layers, micro-batched.
  ExpectFaultMovesHeldOut(o, "wrong_stage_layers", one);
}

TEST(ProbeWeightsCombos, TensorParallelWithExpertFsdpAndPipelineMatchesOneRank) {
  // mixtral, 4 ranks: (a) tp 2 x 2 data ranks, each data pair an EP group (2 of the 4 experts each,
  // sliced by TP) and an FSDP group (fsdp / ep = 1: experts whole on their EP rank, the rest chunked);
  // (b) pp 2 x tp 2: one MoE layer per stage, each stage's TP pair. (kimi_k3's latent MoE under the same
  // layouts: ProbeWeightsLatentTp.*.)
  const std::string ckpt = Write(hftest::MakeMixtral(256));
  WeightsProbeOptions a = LayoutOptions(ckpt, 4, 8), b = LayoutOptions(ckpt, 4, 8);
  a.tp = b.tp = 2;
  a.ep = a.fsdp = 2;
  b.pp = 2;
  const auto [one, ra] = CompareWithOneRank(a, "tp2 x ep2 x fsdp2");
  const WeightsProbeResult rb = Launch(b);
  ASSERT_EQ(rb.rank_bytes.size(), 4u);
  PrintBytes("pp2 x tp2", rb, one);
  EXPECT_LT(Worst(rb, one), kLayoutTol);
  for (uint64_t x : ra.rank_bytes) EXPECT_LT(2 * x, one.rank_bytes[0]);
  for (uint64_t x : rb.rank_bytes) EXPECT_LT(2 * x, one.rank_bytes[0]);

  // Negative control: each EP rank of each TP rank serves the other EP rank's experts.
  ExpectFaultMovesHeldOut(a, "wrong_expert_range", one);
}

TEST(ProbeWeightsCombos, InterleavedPipelineMatchesOneRankAndLoadsMegatronsChunks) {
  // qwen2, 4 layers, pp 2 x interleave 2 on 2 ranks: model chunk q = v * 2 + s is layer q, so stage 0
  // holds layers 0 and 2 (and the embedding), stage 1 layers 1 and 3 (and the final norm + head); 8
  // windows in M = 4 micro-batches of 2, Megatron's interleaved 1F1B order; activations wrap from
  // stage 1's chunk 1 to stage 0's chunk 2. Theory bubble (P - 1) / (V M + P - 1) = 1/9.
  const std::string ckpt = Write(hftest::MakeDense("qwen2", 4, 256));
  WeightsProbeOptions o = LayoutOptions(ckpt, 2, 8);
  o.pp = o.interleave = 2;
  o.micro_batch = 2;
  ASSERT_EQ(o.microbatches(), 4);
  const auto [one, r] = CompareWithOneRank(o, "pp2 x interleave2 M4");
  ASSERT_EQ(r.pp_stage_layers.size(), 2u);
  EXPECT_EQ(r.pp_stage_layers[0], (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(r.pp_stage_layers[1], (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(Sum(r.rank_bytes), one.rank_bytes[0]);  // the stages tile the model
  for (uint64_t x : r.rank_bytes) EXPECT_LT(double(x), 0.6 * double(one.rank_bytes[0]));
  EXPECT_DOUBLE_EQ(r.pp_bubble_theory, 1.0 / 9.0);
  ASSERT_EQ(r.pp_bubble_by_stage.size(), 2u);
  std::printf("bubble measured %.3f %.3f, theory %.3f; checkpoint %s\n", r.pp_bubble_by_stage[0],
              r.pp_bubble_by_stage[1], r.pp_bubble_theory, ckpt.c_str());
  std::vector<std::string> want = one.targets;  // q/k/v/o of 4 layers, both stages' merged
  std::sort(want.begin(), want.end());
  EXPECT_EQ(r.targets, want);

  // Negative control: each stage loads the contiguous order's chunks (stage 0 layers 0 and 1) and
  // runs them as chunks 0 and 2: the model runs its layers out of order.
  ExpectFaultMovesHeldOut(o, "wrong_chunk_order", one);
}

TEST(ProbeWeightsCombos, InterleaveThatDoesNotSplitIsRefusedNamingTheFlag) {
  // Megatron's rule, the proxy probe's (PipelineLayoutProblems): a layer per model chunk, M a
  // multiple of P; interleave needs pp > 1.
  const std::string ckpt = Write(hftest::MakeDense("qwen2", 4, 256));
  auto refused = [](const WeightsProbeOptions& o, const char* why) {
    Expected<WeightsProbeResult> r = RunWeightsProbe(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput) << r.status().message();
    EXPECT_NE(r.status().message().find("--interleave"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().message();
  };
  WeightsProbeOptions o = LayoutOptions(ckpt, 2, 8);
  o.pp = 2;
  o.interleave = 3;  // 6 chunks of 4 layers
  o.micro_batch = 2;
  refused(o, "pp*interleave=6 must be <=");
  o.interleave = 2;
  o.micro_batch = 8;  // M = 1
  refused(o, "multiple of pp=2");
  WeightsProbeOptions one = LayoutOptions(ckpt, 1, 8);
  one.interleave = 2;
  refused(one, "needs pp > 1");
}

// gpt-oss (MXFP4 fused experts, sinks, biases) with a 256-token vocabulary (the text's bytes).
hftest::Checkpoint GptOssBytes() {
  hftest::Checkpoint c = hftest::MakeGptOss(/*mxfp4=*/true);
  c.config["vocab_size"] = 256;
  c.Add("model.embed_tokens.weight", {256, 32}, 1.0);
  c.Linear("lm_head", 256, 32);
  return c;
}

TEST(ProbeWeightsCombos, GptOssUnderFsdpMatchesOneRankAndTilesTheModel) {
  // gpt-oss's fused experts are FSDP2-chunked by expert (2 of its 4 per rank), gathered as stacks, their
  // LoRA deltas added to the gathered views; sinks, attention and expert biases and the router are
  // chunked by rows like any tensor.
  WeightsProbeOptions o = LayoutOptions(Write(GptOssBytes()), 2, 8);
  o.fsdp = 2;
  const auto [one, r] = CompareWithOneRank(o, "gpt_oss fsdp2");
  ASSERT_EQ(r.rank_bytes.size(), 2u);
  EXPECT_LT(one.train_loss.back(), one.train_loss.front() - 0.05);
  // Its routed experts are adapted as PEFT's target_parameters (one wrapper per fused parameter:
  // gate_up_proj's the inner "experts.base_layer", down_proj's "experts"), so no caveat.
  EXPECT_EQ(r.caveat, "");
  std::vector<std::string> experts;
  for (const std::string& t : r.targets)
    if (t.find("experts") != std::string::npos) experts.push_back(t);
  std::sort(experts.begin(), experts.end());
  EXPECT_EQ(experts, (std::vector<std::string>{
                         "model.layers.0.mlp.experts", "model.layers.0.mlp.experts.base_layer",
                         "model.layers.1.mlp.experts", "model.layers.1.mlp.experts.base_layer"}));
  EXPECT_EQ(Sum(r.rank_bytes), one.rank_bytes[0]);
  for (uint64_t x : r.rank_bytes) EXPECT_LT(double(x), 0.55 * double(one.rank_bytes[0]));

  // Negative control: each rank loads the other rank's experts (and stacks them as its own).
  ExpectFaultMovesHeldOut(o, "wrong_expert_chunk", one);
}

}  // namespace
}  // namespace weights_combos
}  // namespace onboard
