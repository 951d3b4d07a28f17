// SafetensorsCheckpoint (mmap, shards) and the dequantisers, against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "parsers/safetensors_weights.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::MakeTempDir;

std::string F32Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(SafetensorsWeights, ElementDecoders) {
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xc040), -3.0f);
  EXPECT_EQ(F16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(F16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(F16ToFloat(0x7c00)));
  EXPECT_EQ(Fp8E4M3ToFloat(0x38), 1.0f);                  // e=7, m=0
  EXPECT_EQ(Fp8E4M3ToFloat(0x7e), 448.0f);                // largest finite
  EXPECT_EQ(Fp8E4M3ToFloat(0xfe), -448.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(0x7f)));
  EXPECT_EQ(Fp8E4M3ToFloat(0x3c), 1.5f);                  // e=7, m=4
}

// One file, several dtypes; spans point into the mapping and touched bytes count each tensor once.
TEST(SafetensorsWeights, SingleFileDecodesEachDtype) {
  const std::string dir = MakeTempDir();
  const uint16_t bf[2] = {0x3f80, 0xc040}, hf[2] = {0x3c00, 0xc000};
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors",
                                   {{"a", "F32", {2}, F32Bytes({0.5f, -4.0f})},
                                    {"b", "BF16", {2}, std::string(reinterpret_cast<const char*>(bf), 4)},
                                    {"c", "F16", {2}, std::string(reinterpret_cast<const char*>(hf), 4)},
                                    {"d", "F8_E4M3", {2}, std::string("\x38\x7e", 2)}})
                  .ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  const std::vector<std::pair<std::string, std::vector<double>>> want = {
      {"a", {0.5, -4}}, {"b", {1, -3}}, {"c", {1, -2}}, {"d", {1, 448}}};
  for (const auto& [name, values] : want) {
    Expected<WeightRef> w = ck->Get(name);
    ASSERT_TRUE(w.ok());
    double out[2];
    ASSERT_TRUE(DecodePlain<double>(*w, out).ok());
    EXPECT_EQ(out[0], values[0]) << name;
    EXPECT_EQ(out[1], values[1]) << name;
  }
  (void)ck->Get("a");
  EXPECT_EQ(ck->touched_bytes(), 8u + 4 + 4 + 2);
  EXPECT_EQ(ck->data_bytes(), 18u);
  Expected<WeightRef> missing = ck->Get("zzz");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("zzz"), std::string::npos);
}

// 130 x 130 fp8 weight: 2 x 2 blocks of scales, the last block partial.
TEST(SafetensorsWeights, Fp8BlockScales) {
  const std::string dir = MakeTempDir();
  const int64_t n = 130;
  std::string w(size_t(n * n), '\x38');  // every element 1.0
  w[size_t(129 * n + 129)] = '\x3c';     // 1.5 in the partial corner block
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors",
                                   {{"w", "F8_E4M3", {n, n}, w}, {"w_scale_inv", "F32", {2, 2}, F32Bytes({1, 2, 3, 4})},
                                    {"bad_scale_inv", "F32", {1, 2}, F32Bytes({1, 2})}})
                  .ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  std::vector<float> out(size_t(n * n));
  ASSERT_TRUE(DequantFp8Blocks<float>(*ck->Get("w"), *ck->Get("w_scale_inv"), out.data()).ok());
  EXPECT_EQ(out[0], 1.0f);                      // block (0, 0)
  EXPECT_EQ(out[size_t(127)], 1.0f);
  EXPECT_EQ(out[size_t(128)], 2.0f);            // block (0, 1)
  EXPECT_EQ(out[size_t(128 * n)], 3.0f);        // block (1, 0)
  EXPECT_EQ(out[size_t(129 * n + 129)], 6.0f);  // 1.5 x 4
  const Status bad = DequantFp8Blocks<float>(*ck->Get("w"), *ck->Get("bad_scale_inv"), out.data());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("bad_scale_inv.shape"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("expected [2,2]"), std::string::npos) << bad.message();
}

// gpt-oss MXFP4: byte 0x21 = (lo 1 -> 0.5, hi 2 -> 1.0); 0x9f = (lo 15 -> -6, hi 9 -> -0.5); scale 128 = x2.
TEST(SafetensorsWeights, Mxfp4BlocksAndScales) {
  const std::string dir = MakeTempDir();
  std::string blocks(32, '\0');
  blocks[0] = '\x21';
  blocks[16] = '\x9f';
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors",
                                   {{"e_blocks", "U8", {1, 2, 16}, blocks}, {"e_scales", "U8", {1, 2}, std::string("\x7f\x80", 2)}})
                  .ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok());
  std::vector<double> out(64);
  ASSERT_TRUE(DequantMxfp4<double>(*ck->Get("e_blocks"), *ck->Get("e_scales"), out.data()).ok());
  EXPECT_EQ(out[0], 0.5);
  EXPECT_EQ(out[1], 1.0);
  EXPECT_EQ(out[2], 0.0);
  EXPECT_EQ(out[32], -12.0);  // -6 x 2
  EXPECT_EQ(out[33], -1.0);   // -0.5 x 2
  // Scales of the wrong shape are refused.
  const Status bad = DequantMxfp4<double>(*ck->Get("e_blocks"), *ck->Get("e_blocks"), out.data());
  EXPECT_FALSE(bad.ok());
}

TEST(SafetensorsWeights, SeveralFilesWithoutIndexRefused) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/a.safetensors", {{"x", "F32", {1}, F32Bytes({1})}}).ok());
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/b.safetensors", {{"y", "F32", {1}, F32Bytes({1})}}).ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(ck.status().message().find("model.safetensors.index.json"), std::string::npos);
}

TEST(SafetensorsWeights, WrongDtypeForPlainDecodeIsNamed) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", {{"ids", "I64", {1}, std::string(8, '\0')}}).ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok());
  float out[1];
  const Status st = DecodePlain<float>(*ck->Get("ids"), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ids.dtype"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("I64"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
