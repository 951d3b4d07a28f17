// kimi_k3's latent MoE under tensor parallelism (backends/hf_tp_slice.cpp, probe_weights_model.cpp's
// Channel): the routed experts split per expert (ETP = TP) or owned whole per TP rank, the latent
// projections and norm replicated. Each rank's routed sum at the latent width is partial, and the norm
// needs the whole sum, so the partials are all-reduced before RMSNorm + up-projection (Megatron's combine
// over the expert-TP group). HfTpSlice.LatentMoe*: the shards' pieces put together that way reproduce the
// whole layer's HfMoe (fp64); summing each rank's own HfMoe (its partial normed alone) does not.
// ProbeWeightsLatentTp.*: the real-weights probe with --tp 2 (alone, x EP x FSDP, x PP) trains the
// one-rank run's curve on a small kimi_k3 checkpoint and reads less per rank; the `no_latent_allreduce`
// control (the partial sums normed on each rank) moves the held-out loss off it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "backends/probe_weights.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_kimi_k3.h"
#include "tests/backends/probe_weights_layout_helpers.h"

namespace onboard {
namespace tp_latent_moe {  // a unity batch shares the anonymous namespace with other test files
namespace {

using hftest::ExpectFaultMovesHeldOut;
using hftest::kLayoutTol;
using hftest::Launch;
using hftest::LayoutOptions;
using hftest::Rel;
using hftest::Worst;
using hftest::Write;

double MaxAbs(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

TEST(HfTpSlice, LatentMoeShardsReduceBeforeTheNormToTheFullChannel) {
  const std::string dir = hftest::TempDir();
  hftest::MakeKimiK3(256).Write(dir);
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  ASSERT_TRUE(c.ok()) << c.status().message();
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  Expected<HfModelWeights> w = MapHfWeights(*c, *ck, {}, torch::kDouble);
  ASSERT_TRUE(w.ok()) << w.status().message();
  torch::NoGradGuard g;
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({7, c->ir.hidden}, torch::kDouble);
  int64_t checked = 0;
  double worst_wrong[2] = {0, 0};  // [etp]
  for (const HfLayerWeights& lw : w->layers) {
    const LayerSpec& l = c->ir.layers[size_t(lw.index)];
    if (!lw.moe) continue;
    ASSERT_GT(l.moe.latent_dim, 0);
    const torch::Tensor full = HfMoe(*c, l.moe, lw.experts, x);
    for (bool etp : {true, false}) {
      // Step 1: the former refusal is gone: tp 2 divides this layer.
      const Status st = CheckTpDivides(*c, l, 2, etp);
      ASSERT_TRUE(st.ok()) << st.message();
      // Step 2: per rank the partial routed sum [T, L] and the shared experts' partial [T, h].
      torch::Tensor routed, shared, naive;
      for (int64_t r = 0; r < 2; ++r) {
        const HfTpLayer s = TpShardLayer(l, lw, 2, r, etp);
        const torch::Tensor u = HfMoeRouted(*c, s.spec.moe, s.weights.experts, x);
        const torch::Tensor sh = HfSharedExperts(*c, s.weights.experts, x);
        const torch::Tensor own = HfMoe(*c, s.spec.moe, s.weights.experts, x);
        routed = r == 0 ? u : routed + u;
        shared = r == 0 ? sh : shared + sh;
        naive = r == 0 ? own : naive + own;
      }
      // Step 3: all-reduce, then the replicated norm + up-projection, plus the shared partials' sum.
      const double ours = MaxAbs(HfLatentOut(*c, lw.experts, routed) + shared, full);
      const double wrong = MaxAbs(naive, full);
      std::printf("layer %lld etp=%d: reduced %.3g, each rank normed alone %.3g\n", (long long)lw.index,
                  int(etp), ours, wrong);
      EXPECT_LT(ours, hftest::kF64Tol) << "layer " << lw.index << " etp " << etp;
      worst_wrong[etp ? 1 : 0] = std::max(worst_wrong[etp ? 1 : 0], wrong);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 6);  // layers 1-3, both expert layouts
  // Negative control: the partial sums normed on each rank, the ranks' outputs summed. With whole
  // experts per rank a layer whose tokens all route both experts to one rank cannot tell (norm(0) = 0):
  // the control must fail on some layer for each layout.
  EXPECT_GT(worst_wrong[0], hftest::kWrongAtLeast);
  EXPECT_GT(worst_wrong[1], hftest::kWrongAtLeast);
}

// Layers 1-2 of the kimi_k3 checkpoint: KDA + latent MoE, gated MLA with the DSA indexer + latent MoE.
WeightsProbeOptions K3Options(const std::string& ckpt, int64_t ranks) {
  WeightsProbeOptions o = LayoutOptions(ckpt, ranks, 8);
  o.layers = {1, 2};
  return o;
}

TEST(ProbeWeightsLatentTp, KimiK3TensorParallelMatchesOneRankAndReadsLess) {
  const std::string ckpt = Write(hftest::MakeKimiK3(256));
  const WeightsProbeResult one = Launch(K3Options(ckpt, 1));
  WeightsProbeOptions o = K3Options(ckpt, 2);
  o.tp = 2;
  const WeightsProbeResult tp = Launch(o);
  ASSERT_EQ(tp.rank_bytes.size(), 2u);
  ASSERT_EQ(one.rank_bytes.size(), 1u);
  std::printf("kimi_k3 tp=2 vs 1 rank: worst relative %.3g; bytes %llu %llu of %llu\n", Worst(tp, one),
              (unsigned long long)tp.rank_bytes[0], (unsigned long long)tp.rank_bytes[1],
              (unsigned long long)one.rank_bytes[0]);
  std::printf("1 rank: held-out %.6g -> %.6g, train %.6g -> %.6g\n", one.held_out_frozen, one.held_out_final,
              one.train_loss.front(), one.train_loss.back());
  EXPECT_LT(Worst(tp, one), kLayoutTol);
  // Not two flat curves: the adapters moved the held-out loss by far more than the bound.
  EXPECT_GT(Rel(one.held_out_final, one.held_out_frozen), hftest::kLayoutWrongAtLeast);
  // Each TP rank reads its heads and expert slices; the embedding, head, norms, router and latent
  // projections are whole on both, so each reads more than half and less than the whole.
  for (uint64_t b : tp.rank_bytes) {
    EXPECT_LT(b, one.rank_bytes[0]);
    EXPECT_GT(2 * b, one.rank_bytes[0]);
  }

  // Negative control: each TP rank norms and up-projects its own partial latent sum.
  ExpectFaultMovesHeldOut(o, "no_latent_allreduce", one);
}

TEST(ProbeWeightsLatentTp, KimiK3TensorParallelComposesWithExpertFsdpAndPipeline) {
  // 4 ranks: (a) tp 2 x 2 data ranks, each data pair an EP group (2 of the 4 experts each, sliced by
  // TP) and an FSDP group (fsdp / ep = 1: experts whole on their EP rank, the rest chunked);
  // (b) pp 2 x tp 2: one layer per stage, each stage's TP pair.
  const std::string ckpt = Write(hftest::MakeKimiK3(256));
  const WeightsProbeResult one = Launch(K3Options(ckpt, 1));
  WeightsProbeOptions a = K3Options(ckpt, 4), b = K3Options(ckpt, 4);
  a.tp = b.tp = 2;
  a.ep = a.fsdp = 2;
  b.pp = 2;
  const WeightsProbeResult ra = Launch(a), rb = Launch(b);
  ASSERT_EQ(ra.rank_bytes.size(), 4u);
  ASSERT_EQ(rb.rank_bytes.size(), 4u);
  std::printf("kimi_k3 tp2 x ep2 x fsdp2 worst relative %.3g; pp2 x tp2 %.3g; bytes", Worst(ra, one),
              Worst(rb, one));
  for (uint64_t x : ra.rank_bytes) std::printf(" %llu", (unsigned long long)x);
  std::printf(" /");
  for (uint64_t x : rb.rank_bytes) std::printf(" %llu", (unsigned long long)x);
  std::printf(" of %llu\n", (unsigned long long)one.rank_bytes[0]);
  EXPECT_LT(Worst(ra, one), kLayoutTol);
  EXPECT_LT(Worst(rb, one), kLayoutTol);
  for (uint64_t x : ra.rank_bytes) EXPECT_LT(2 * x, one.rank_bytes[0]);  // a TP slice, then FSDP / EP
  for (uint64_t x : rb.rank_bytes) EXPECT_LT(2 * x, one.rank_bytes[0]);  // a TP slice of one layer

  // Negative control: the EP path's partial latent sums normed on each TP rank.
  ExpectFaultMovesHeldOut(a, "no_latent_allreduce", one);
}

}  // namespace
}  // namespace tp_latent_moe
}  // namespace onboard
