// SafetensorsDtype: one table for spelling, size and IR DType; the unknown-dtype error names file,
// field and value wherever a dtype is read (header) or written (writer).
#include <gtest/gtest.h>

#include "parsers/safetensors_dtype.h"
#include "parsers/safetensors_weights.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::MakeTempDir;
using testing_st::RawFile;

TEST(SafetensorsDtype, EveryDtypeRoundTripsAndHasItsSize) {
  for (int i = 0; i <= static_cast<int>(SafetensorsDtype::kC64); ++i) {
    const auto d = static_cast<SafetensorsDtype>(i);
    Expected<SafetensorsDtype> back = ParseSafetensorsDtype("t", "dtype", SafetensorsDtypeName(d));
    ASSERT_TRUE(back.ok()) << SafetensorsDtypeName(d);
    EXPECT_EQ(*back, d) << SafetensorsDtypeName(d);
  }
  EXPECT_STREQ(SafetensorsDtypeName(SafetensorsDtype::kBF16), "BF16");
  EXPECT_EQ(SafetensorsDtypeBytes(SafetensorsDtype::kBF16), 2);
  EXPECT_EQ(SafetensorsDtypeBytes(SafetensorsDtype::kF64), 8);
  EXPECT_EQ(SafetensorsDtypeIr(SafetensorsDtype::kF8_E8M0), DType::kU8);
  EXPECT_FALSE(FindSafetensorsDtype("bf16").has_value());  // the header's exact spelling only
}

// Both fp8 formats are kFP8 in the IR, but stay two dtypes here: an E5M2 tensor is not decoded with
// the E4M3 layout.
TEST(SafetensorsDtype, E4M3AndE5M2StayApart) {
  EXPECT_NE(*FindSafetensorsDtype("F8_E4M3"), *FindSafetensorsDtype("F8_E5M2"));
  EXPECT_EQ(SafetensorsDtypeIr(SafetensorsDtype::kF8_E4M3), DType::kFP8);
  EXPECT_EQ(SafetensorsDtypeIr(SafetensorsDtype::kF8_E5M2), DType::kFP8);
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(
      WriteSafetensorsFile(dir + "/model.safetensors", {{"w", "F8_E5M2", {1}, std::string("\x38", 1)}}).ok());
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status().message();
  EXPECT_EQ(ck->Get("w")->info->storage, SafetensorsDtype::kF8_E5M2);
  float out[1];
  const Status st = DecodePlain<float>(*ck->Get("w"), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("w.dtype"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("(got F8_E5M2)"), std::string::npos) << st.message();
}

TEST(SafetensorsDtype, UnknownDtypeNamesFileFieldAndValue) {
  const Expected<SafetensorsDtype> p = ParseSafetensorsDtype("x.safetensors", "w.dtype", "F12");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kBadInput);
  EXPECT_EQ(p.status().message(), "x.safetensors: field 'w.dtype': unknown dtype (got F12)");

  auto header = ParseSafetensorsBytes(
      RawFile(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0')),
      "h.safetensors");
  ASSERT_FALSE(header.ok());
  EXPECT_EQ(header.status().message(), "h.safetensors: field 'w.dtype': unknown dtype (got f32)");

  const std::string path = MakeTempDir() + "/out.safetensors";
  const Status written = WriteSafetensorsFile(path, {{"v", "FP32", {1}, std::string(4, '\0')}});
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.code(), ErrorCode::kBadInput);
  EXPECT_EQ(written.message(), path + ": field 'v.dtype': unknown dtype (got FP32)");
}

}  // namespace
}  // namespace onboard
