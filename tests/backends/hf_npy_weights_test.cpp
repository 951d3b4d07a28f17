// .npy round trip and hostile .npy files; F32 checkpoints load as views of the mapping (no copy)
// while BF16 ones decode into new tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>

#include "backends/hf_model.h"
#include "backends/hf_npy.h"
#include "tests/backends/hf_test_checkpoint.h"

namespace onboard {
namespace {

std::string NpyTempDir() {
  std::string t = "/tmp/onboard_npy_XXXXXX";
  return mkdtemp(&t[0]);
}

TEST(HfNpy, RoundTripWithNaN) {
  const std::string p = NpyTempDir() + "/a.npy";
  const std::vector<float> v = {1.5f, -2.0f, std::nanf(""), 4.0f, 5.0f, 6.0f};
  ASSERT_TRUE(WriteNpyF32(p, {1, 2, 3}, v.data()).ok());
  Expected<NpyArray> a = ReadNpy(p);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(a->data[1], -2.0f);
  EXPECT_TRUE(std::isnan(a->data[2]));
  std::ifstream in(p, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.size() - v.size() * 4, 128u);  // header padded to a multiple of 64
  EXPECT_NE(bytes.find("'shape': (1, 2, 3)"), std::string::npos);
}

TEST(HfNpy, HostileFilesAreNamed) {
  const std::string dir = NpyTempDir();
  const std::vector<float> v(6, 1.0f);
  ASSERT_TRUE(WriteNpyF32(dir + "/a.npy", {2, 3}, v.data()).ok());
  std::ifstream in(dir + "/a.npy", std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto expect_bad = [&](const std::string& bytes, const std::string& field) {
    std::ofstream(dir + "/b.npy", std::ios::binary) << bytes;
    Expected<NpyArray> a = ReadNpy(dir + "/b.npy");
    ASSERT_FALSE(a.ok()) << field;
    EXPECT_EQ(a.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(a.status().message().find(field), std::string::npos) << a.status().message();
  };
  expect_bad(good.substr(0, good.size() - 4), "shape");  // truncated data
  std::string f8 = good;
  f8.replace(f8.find("<f4"), 3, "<i4");
  expect_bad(f8, "descr");
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  expect_bad(fortran, "fortran_order");
  std::string len = good;
  len[8] = '\xff';
  len[9] = '\x7f';
  expect_bad(len, "header_len");
  expect_bad("not numpy", "magic");
}

TEST(HfWeightReader, F32AliasesTheMappingBf16Decodes) {
  for (const char* dtype : {"F32", "BF16"}) {
    hftest::Checkpoint c = hftest::MakeDense("llama");
    c.dtype = dtype;
    c.tensors.clear();
    c.Add("model.norm.weight", {32}, 1.0);
    const std::string dir = NpyTempDir();
    c.Write(dir);
    Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
    ASSERT_TRUE(ck.ok());
    HfWeightReader r(*ck, torch::kFloat);
    Expected<torch::Tensor> t = r.Read("model.norm.weight", {32});
    ASSERT_TRUE(t.ok());
    const bool alias = t->data_ptr() == static_cast<const void*>(ck->Get("model.norm.weight")->bytes.data);
    EXPECT_EQ(alias, std::string(dtype) == "F32") << dtype;
    EXPECT_EQ(t->index({5}).item<float>(), float(c.W("model.norm.weight")[5])) << dtype;
  }
}

}  // namespace
}  // namespace onboard
