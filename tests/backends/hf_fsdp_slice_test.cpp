// Loading by FSDP plan (torchtitan's FSDP2: every parameter Shard(0)): each FSDP rank reads only its
// dim-0 chunk of each tensor it holds from the mapping (torch.chunk sizes: ceil(rows / n), the last
// chunks shorter or empty). Checked per family: each rank's tensors are the whole load's chunk bit for
// bit, bytes read = bytes held, and the ranks together read every byte of the load exactly once (the
// all-gather restores it). FSDP over a TP slice (2-D: tp x fsdp) chunks the TP shard's rows.
#include <gtest/gtest.h>

#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_slice_util.h"
#include "tests/backends/hf_test_families.h"

namespace onboard {
namespace {

struct Mapped {
  std::string dir;
  HfForwardConfig cfg;
};

Mapped WriteCase(const hftest::Checkpoint& c) {
  Mapped m{hftest::TempDir(), {}};
  c.Write(m.dir, 2);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(m.dir);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  if (cfg.ok()) m.cfg = *cfg;
  return m;
}

// Every tensor a rank holds (layers, then embedding / norm / head), in one fixed order.
std::vector<torch::Tensor> AllTensors(const HfModelWeights& w) {
  std::vector<torch::Tensor> t = {w.embed, w.final_norm, w.lm_head};
  for (const HfLayerWeights& l : w.layers)
    for (const torch::Tensor& x : hftest::LayerTensors(l)) t.push_back(x);
  return t;
}

// Maps rank `r` of `n` FSDP ranks (over TP rank `tp_rank` of `tp`); checks it against `base` (the
// whole load, or the TP shard's load) and returns the bytes it read.
uint64_t CheckFsdpRank(const Mapped& m, const std::vector<torch::Tensor>& base, int64_t n, int64_t r,
                       int64_t tp, int64_t tp_rank) {
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(m.dir);  // each rank maps on its own
  EXPECT_TRUE(ck.ok());
  HfRankSlice s;
  s.fsdp = n;
  s.fsdp_rank = r;
  s.tp = tp;
  s.tp_rank = tp_rank;
  Expected<HfModelWeights> w = MapHfSlice(m.cfg, *ck, s, torch::kDouble);
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok()) return 0;
  const std::vector<torch::Tensor> mine = AllTensors(*w);
  EXPECT_EQ(mine.size(), base.size());
  for (size_t k = 0; k < mine.size() && k < base.size(); ++k) {
    EXPECT_EQ(mine[k].defined(), base[k].defined()) << m.cfg.ir.model_type << " tensor " << k;
    if (!mine[k].defined() || !base[k].defined()) continue;
    const HfRowSpan rows = HfFsdpRows(base[k].size(0), n, r);
    EXPECT_TRUE(torch::equal(mine[k], base[k].narrow(0, rows.begin, rows.len)))
        << m.cfg.ir.model_type << " fsdp " << r << "/" << n << " tensor " << k;
  }
  // Bytes read from the mapping = bytes the rank holds (BF16 checkpoints: 2 per element).
  std::vector<std::vector<torch::Tensor>> layers;
  for (const HfLayerWeights& l : w->layers) layers.push_back(hftest::LayerTensors(l));
  EXPECT_EQ(ck->touched_bytes(), hftest::HeldBytes(*w, layers, w->layers))
      << m.cfg.ir.model_type << " rank " << r;
  return ck->touched_bytes();
}

TEST(HfFsdpLoad, EachRankReadsOnlyItsDim0Chunk) {
  const hftest::Checkpoint cases[] = {
      hftest::MakeDense("qwen2"), hftest::MakeDense("qwen3"), hftest::MakeQwen3Moe(),  hftest::MakeMixtral(),
      hftest::MakeDeepSeekV32(),  hftest::MakeGlm4Moe(),      hftest::MakeKimiLinear()};
  for (const hftest::Checkpoint& c : cases) {
    const Mapped m = WriteCase(c);
    Expected<SafetensorsCheckpoint> whole = SafetensorsCheckpoint::Open(m.dir);
    ASSERT_TRUE(whole.ok());
    Expected<HfModelWeights> full = MapHfWeights(m.cfg, *whole, {}, torch::kDouble);
    ASSERT_TRUE(full.ok()) << full.status().message();
    const std::vector<torch::Tensor> base = AllTensors(*full);
    for (int64_t n : {2, 3}) {  // 3: uneven chunks (and empty ones for short tensors)
      uint64_t sum = 0;
      for (int64_t r = 0; r < n; ++r) {
        const uint64_t read = CheckFsdpRank(m, base, n, r, 1, 0);
        // The negative: the whole load (what an unsharded rank reads) exceeds each rank's chunk.
        EXPECT_LT(read, whole->touched_bytes()) << m.cfg.ir.model_type;
        sum += read;
        if (n == 2 && r == 0)
          std::printf("%s fsdp=2 rank 0 read %llu of %llu bytes\n", m.cfg.ir.model_type.c_str(),
                      static_cast<unsigned long long>(read),
                      static_cast<unsigned long long>(whole->touched_bytes()));
      }
      // Together the ranks read each byte of the whole load once: no overlap, nothing missing.
      EXPECT_EQ(sum, whole->touched_bytes()) << m.cfg.ir.model_type << " fsdp=" << n;
    }
  }
}

// 2-D: FSDP over the TP shard: each (tp rank, fsdp rank) holds the FSDP chunk of its TP slice.
TEST(HfFsdpLoad, FsdpChunksTheTpSlice) {
  for (const hftest::Checkpoint& c : {hftest::MakeDense("qwen2"), hftest::MakeDeepSeekV3()}) {
    const Mapped m = WriteCase(c);
    for (int64_t t = 0; t < 2; ++t) {
      Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(m.dir);
      ASSERT_TRUE(ck.ok());
      HfRankSlice s;
      s.tp = 2;
      s.tp_rank = t;
      Expected<HfModelWeights> tp_load = MapHfSlice(m.cfg, *ck, s, torch::kDouble);
      ASSERT_TRUE(tp_load.ok()) << tp_load.status().message();
      uint64_t sum = 0;
      for (int64_t r = 0; r < 2; ++r) sum += CheckFsdpRank(m, AllTensors(*tp_load), 2, r, 2, t);
      EXPECT_EQ(sum, ck->touched_bytes()) << m.cfg.ir.model_type << " tp rank " << t;
    }
  }
}

// gpt-oss's fused [E, ...] experts: FSDP2's Shard(0) of a fused tensor shards its experts, so each
// FSDP rank holds a run of whole experts (bit-equal to the whole load's), every expert is held by
// exactly one rank, and the ranks together read each byte of the whole load once.
TEST(HfFsdpLoad, GptOssFusedExpertsShardByExpertAndTheRanksHoldEachOnce) {
  for (bool mxfp4 : {false, true}) {
    const Mapped m = WriteCase(hftest::MakeGptOss(mxfp4));
    Expected<SafetensorsCheckpoint> whole = SafetensorsCheckpoint::Open(m.dir);
    ASSERT_TRUE(whole.ok());
    Expected<HfModelWeights> full = MapHfWeights(m.cfg, *whole, {}, torch::kDouble);
    ASSERT_TRUE(full.ok()) << full.status().message();
    for (int64_t n : {2, 3}) {  // 4 experts over 3: chunks of 2, 2, 0
      std::vector<std::vector<int>> held(full->layers.size(), std::vector<int>(4, 0));
      uint64_t sum = 0;
      for (int64_t r = 0; r < n; ++r) {
        Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(m.dir);
        ASSERT_TRUE(ck.ok());
        HfRankSlice s;
        s.fsdp = n;
        s.fsdp_rank = r;
        Expected<HfModelWeights> w = MapHfSlice(m.cfg, *ck, s, torch::kDouble);
        ASSERT_TRUE(w.ok()) << w.status().message();
        for (size_t i = 0; i < w->layers.size(); ++i)
          for (size_t e = 0; e < 4; ++e) {
            const HfMlpWeights& x = w->layers[i].experts.experts[e];
            if (!x.gate.w.defined()) continue;
            ++held[i][e];
            const HfMlpWeights& y = full->layers[i].experts.experts[e];
            const HfLinear* mine[] = {&x.gate, &x.up, &x.down};
            const HfLinear* base[] = {&y.gate, &y.up, &y.down};
            for (int k = 0; k < 3; ++k) {
              EXPECT_TRUE(torch::equal(mine[k]->w, base[k]->w))
                  << "mxfp4 " << mxfp4 << " layer " << i << " expert " << e;
              EXPECT_TRUE(torch::equal(mine[k]->b, base[k]->b))
                  << "mxfp4 " << mxfp4 << " layer " << i << " expert " << e;
            }
          }
        sum += ck->touched_bytes();
        EXPECT_LT(ck->touched_bytes(), whole->touched_bytes());
      }
      for (const auto& layer : held)
        for (int k : layer) EXPECT_EQ(k, 1) << "mxfp4 " << mxfp4 << " fsdp " << n;
      EXPECT_EQ(sum, whole->touched_bytes()) << "mxfp4 " << mxfp4 << " fsdp " << n;
    }
  }
}

}  // namespace
}  // namespace onboard
