// safetensors header reader + mmap tensor access on files written into a temp dir.
#include <gtest/gtest.h>

#include <cstring>

#include "parsers/safetensors.h"
#include "tests/parsers/safetensors_test_util.h"

namespace onboard {
namespace {

using testing_st::MakeTempDir;
using testing_st::RawFile;
using testing_st::WriteBytes;

std::string FloatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(SafetensorsHeader, WriterRoundTripAndMmapReads) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/tiny.safetensors";
  const std::vector<float> w = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  ASSERT_TRUE(WriteSafetensorsFile(path,
                                   {{"b.weight", "F32", {2, 3}, FloatBytes(w)},
                                    {"a.bias", "BF16", {4}, std::string(8, '\x01')},
                                    {"c.blocks", "U8", {2, 2}, std::string("\x10\x20\x30\x40", 4)}},
                                   {{"format", "pt"}})
                  .ok());

  auto inv = ReadSafetensorsFile(path);
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  ASSERT_EQ(inv->tensors.size(), 3u);
  EXPECT_EQ(inv->tensors[0].name, "a.bias");  // sorted by name
  EXPECT_EQ(inv->metadata.at("format"), "pt");
  const TensorInfo* b = inv->Find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF32);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->bytes(), 24u);
  EXPECT_EQ(inv->DataBytes(), 24u + 8u + 4u);
  EXPECT_EQ(inv->ParamCount(), 6 + 4 + 4);  // "c.blocks" is not an MXFP4 "_blocks" tensor

  auto mapped = MappedTensorFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  auto span = mapped->TensorBytes("b.weight");
  ASSERT_TRUE(span.ok());
  ASSERT_EQ(span->size, 24u);
  std::vector<float> back(6);
  std::memcpy(back.data(), span->data, 24);
  EXPECT_EQ(back, w);
  auto blocks = mapped->TensorBytes("c.blocks");
  ASSERT_TRUE(blocks.ok());
  EXPECT_EQ(blocks->data[3], 0x40);
  auto missing = mapped->TensorBytes("nope");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(SafetensorsHeader, MxFp4BlocksCountTwoParamsPerByteAndScalesNone) {
  auto inv = ParseSafetensorsBytes(
      RawFile(R"({"x.gate_up_proj_blocks":{"dtype":"U8","shape":[2,4,1,16],"data_offsets":[0,128]},)"
              R"("x.gate_up_proj_scales":{"dtype":"U8","shape":[2,4,1],"data_offsets":[128,136]}})",
              std::string(136, '\0')),
      "mx.safetensors");
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->ParamCount(), 2 * 4 * 32);  // E * out * in
}

struct BadCase {
  const char* label;
  std::string bytes;
  const char* field;  // must appear in the message
  const char* value;  // must appear in the message
};

TEST(SafetensorsHeader, UntrustedBytesAreBadInputNamingFileFieldValue) {
  const std::string ok_entry = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::vector<BadCase> cases = {
      {"short file", std::string("\x01\x02\x03", 3), "header_length", "3 bytes"},
      {"length past EOF", RawFile(4096, "{}"), "header_length", "4096"},
      {"length over cap", RawFile(200000000ull, "{}"), "header_length", "200000000"},
      {"length 2^63", RawFile(1ull << 63, "{}"), "header_length", "9223372036854775808"},
      {"not JSON", RawFile("{not json"), "header", "{not json"},
      {"not an object", RawFile("[1,2]"), "header", "[1,2]"},
      {"unknown dtype", RawFile(R"({"w":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}})", "x"), "w.dtype", "F7"},
      {"negative dim", RawFile(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,0]}})"), "w.shape", "-4"},
      {"overflowing dims",
       RawFile(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"), "w.shape",
       "4294967296"},
      {"non-integer dim", RawFile(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,6]}})"), "w.shape", "1.5"},
      {"offsets past data", RawFile("{" + ok_entry + "}", std::string(4, '\0')), "t.data_offsets", "[0,8]"},
      {"begin > end", RawFile(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[5,1]}})", "abcde"),
       "w.data_offsets", "[5,1]"},
      {"size mismatch", RawFile(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
       "w.data_offsets", "[0,8]"},
      {"overlap",
       RawFile("{" + ok_entry + R"(,"u":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", std::string(12, '\0')),
       "u.data_offsets", "[4,12]"},
      {"negative offset", RawFile(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", "x"),
       "w.data_offsets", "-1"},
      {"metadata not strings", RawFile(R"({"__metadata__":{"k":3}})"), "__metadata__.k", "3"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseSafetensorsBytes(c.bytes, "bad.safetensors");
    ASSERT_FALSE(r.ok()) << c.label;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput) << c.label;
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("bad.safetensors"), std::string::npos) << c.label << ": " << msg;
    EXPECT_NE(msg.find(c.field), std::string::npos) << c.label << ": " << msg;
    EXPECT_NE(msg.find(c.value), std::string::npos) << c.label << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.label;
  }
}

TEST(SafetensorsHeader, FileReaderChecksLengthBeforeReading) {
  const std::string dir = MakeTempDir();
  // 8 bytes declaring an enormous header: must fail on the length, not try to allocate it.
  WriteBytes(dir + "/huge.safetensors", RawFile(~0ull, ""));
  auto r = ReadSafetensorsFile(dir + "/huge.safetensors");
  ASSERT_EQ(r.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(r.status().message().find("header_length"), std::string::npos);
  EXPECT_EQ(ReadSafetensorsFile(dir + "/absent.safetensors").status().code(), ErrorCode::kNotFound);
  // A valid header whose data was cut off: the mapped reader rejects it too.
  WriteBytes(dir + "/cut.safetensors", RawFile(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "abc"));
  auto m = MappedTensorFile::Open(dir + "/cut.safetensors");
  ASSERT_EQ(m.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(m.status().message().find("w.data_offsets"), std::string::npos);
}

TEST(SafetensorsHeader, EmptyHeaderAndZeroSizedTensorsAreValid) {
  auto empty = ParseSafetensorsBytes(RawFile("{}"), "e.safetensors");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->tensors.empty());
  auto zero = ParseSafetensorsBytes(
      RawFile(R"({"a":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})",
              std::string(4, '\0')),
      "z.safetensors");
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->Find("b")->numel(), 1);
}

}  // namespace
}  // namespace onboard
