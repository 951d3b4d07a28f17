// RunHfVerify's per-rank bytes (the report's "bytes read per rank"): with tp x fsdp of the plan, each
// rank maps the checkpoint on its own and reads only its slice; FSDP ranks 0 and last of each TP rank
// are measured, and with fsdp = 2 they are the whole TP slice between them. The negative: a tp that
// does not divide the heads gives no rows and names the field.
#include <gtest/gtest.h>

#include <fstream>

#include "backends/hf_verify.h"
#include "tests/backends/hf_compare.h"

namespace onboard {
namespace {

HfVerifyOptions Options(const std::string& dir, int64_t tp, int64_t fsdp) {
  std::ofstream(dir + "/ids.json") << "[[1, 2, 3, 4]]";
  HfVerifyOptions o;
  o.checkpoint = dir;
  o.ids_path = dir + "/ids.json";
  o.tp = tp;
  o.fsdp = fsdp;
  return o;
}

TEST(HfVerifyRanks, EachPlanRankReadsOnlyItsSlice) {
  const std::string dir = hftest::TempDir();
  hftest::MakeDense("qwen2").Write(dir, 2);
  Expected<HfVerifyResult> r = RunHfVerify(Options(dir, 2, 2));
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->rank_bytes.size(), 4u) << r->rank_bytes_error;
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  ASSERT_TRUE(cfg.ok());
  for (int64_t t = 0; t < 2; ++t) {
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    ASSERT_TRUE(ck.ok());
    HfRankSlice s;
    s.tp = 2;
    s.tp_rank = t;
    ASSERT_TRUE(MapHfSlice(*cfg, *ck, s, torch::kFloat).ok());
    const HfRankBytes& a = r->rank_bytes[size_t(2 * t)];
    const HfRankBytes& b = r->rank_bytes[size_t(2 * t + 1)];
    EXPECT_EQ(a.tp_rank, t);
    EXPECT_EQ(b.fsdp_rank, 1);
    EXPECT_LT(a.bytes, ck->touched_bytes());
    EXPECT_EQ(a.bytes + b.bytes, ck->touched_bytes()) << "tp rank " << t;  // the two FSDP chunks: the slice
    EXPECT_LT(ck->touched_bytes(), r->checkpoint_bytes);
  }
  // The negative: tp=3 does not divide 4 heads: no rows, the field named.
  Expected<HfVerifyResult> bad = RunHfVerify(Options(dir, 3, 1));
  ASSERT_TRUE(bad.ok()) << bad.status().message();
  EXPECT_TRUE(bad->rank_bytes.empty());
  EXPECT_NE(bad->rank_bytes_error.find("num_attention_heads"), std::string::npos) << bad->rank_bytes_error;
}

}  // namespace
}  // namespace onboard
