// Block-FP8 weights (DeepSeek's F8_E4M3 + weight_scale_inv, 128x128 blocks) loaded by slice: a TP or
// FSDP rank reads only its window of the weight AND only the scale blocks that window covers, and
// the decoded window is bit-equal to the same rows / columns of the whole load.
// Shapes: q_proj [256, 384] (scales [2, 3]), o_proj [384, 256] (scales [3, 2]); bytes: fp8 = 1 per
// element, F32 scales = 4.
#include <gtest/gtest.h>

#include "backends/hf_model.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_checkpoint.h"

namespace onboard {
namespace {

const std::string kQ = "model.layers.0.self_attn.q_proj.weight";  // column-parallel: rows split
const std::string kO = "model.layers.0.self_attn.o_proj.weight";  // row-parallel: columns split

std::string WriteFp8() {
  hftest::Checkpoint c;
  c.Add(kQ, {256, 384}, 0.05);
  c.Add(kO, {384, 256}, 0.05);
  c.QuantizeFp8(kQ);
  c.QuantizeFp8(kO);
  const std::string dir = hftest::TempDir();
  c.Write(dir);
  return dir;
}

struct Slice {
  int64_t tp = 1, tp_rank = 0, fsdp = 1, fsdp_rank = 0;
};

// The tensor as one rank of `s` reads it, and the bytes that rank read.
std::pair<torch::Tensor, uint64_t> ReadAs(const std::string& dir, const std::string& name,
                                          std::vector<int64_t> shape, Slice s) {
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  EXPECT_TRUE(ck.ok());
  HfWeightReader r(*ck, torch::kDouble);
  r.OwnTpSlice(s.tp, s.tp_rank);
  r.OwnFsdpShard(s.fsdp, s.fsdp_rank);
  Expected<torch::Tensor> t = r.Read(name, shape);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return {t.ok() ? *t : torch::Tensor(), ck->touched_bytes()};
}

TEST(HfFp8Slice, TpRanksReadOnlyTheirScaleBlocksAndDecodeTheWholeLoadsWindow) {
  const std::string dir = WriteFp8();
  const auto [q, q_all] = ReadAs(dir, kQ, {256, 384}, {});
  const auto [o, o_all] = ReadAs(dir, kO, {384, 256}, {});
  EXPECT_EQ(q_all, 256u * 384 + 2 * 3 * 4);  // whole weight + whole scales
  for (int64_t t = 0; t < 2; ++t) {
    const auto [qs, qb] = ReadAs(dir, kQ, {256, 384}, {2, t});
    EXPECT_TRUE(torch::equal(qs, q.narrow(0, 128 * t, 128))) << "q rank " << t;
    EXPECT_EQ(qb, 128u * 384 + 1 * 3 * 4) << "q rank " << t;  // its 128 rows: one scale row of 3
    const auto [os, ob] = ReadAs(dir, kO, {384, 256}, {2, t});
    EXPECT_TRUE(torch::equal(os, o.narrow(1, 128 * t, 128))) << "o rank " << t;
    EXPECT_EQ(ob, 384u * 128 + 3 * 1 * 4) << "o rank " << t;  // its 128 columns: one scale column of 3
  }
}

// FSDP chunks of 256 rows over 3 ranks are 86, 86, 84 rows: not block-aligned, so a chunk inside one
// block reads one scale row and the middle one, which straddles rows 128, reads both.
TEST(HfFp8Slice, FsdpChunksReadTheScaleRowsTheyStraddle) {
  const std::string dir = WriteFp8();
  const auto [q, all] = ReadAs(dir, kQ, {256, 384}, {});
  const int64_t begin[3] = {0, 86, 172}, len[3] = {86, 86, 84}, scale_rows[3] = {1, 2, 1};
  for (int64_t f = 0; f < 3; ++f) {
    const auto [qs, bytes] = ReadAs(dir, kQ, {256, 384}, {1, 0, 3, f});
    EXPECT_TRUE(torch::equal(qs, q.narrow(0, begin[f], len[f]))) << "fsdp rank " << f;
    EXPECT_EQ(bytes, uint64_t(len[f] * 384 + scale_rows[f] * 3 * 4)) << "fsdp rank " << f;
  }
  // TP 2 x FSDP 2 on the columns of o_proj: each rank 192 rows of its 128 columns, 2 scale rows x 1.
  const auto [o, o_all] = ReadAs(dir, kO, {384, 256}, {});
  const auto [os, ob] = ReadAs(dir, kO, {384, 256}, {2, 1, 2, 1});
  EXPECT_TRUE(torch::equal(os, o.narrow(1, 128, 128).narrow(0, 192, 192)));
  EXPECT_EQ(ob, 192u * 128 + 2 * 1 * 4);
}

}  // namespace
}  // namespace onboard
