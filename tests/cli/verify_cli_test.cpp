// `onboard verify` end to end on a checkpoint written by the test: logits .npy (NaN rows past a
// shorter sequence), exit 0 against the independent reference, 1 against a wrong one, 2 on bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "backends/hf_npy.h"
#include "tests/backends/hf_reference_forward.h"
#include "tests/cli/onboard_runner.h"

namespace onboard {
namespace {

using clitest::RunOnboard;

struct Fixture {
  std::string dir;
  hftest::Checkpoint ckpt = hftest::MakeDense("qwen3");
  std::vector<std::vector<int64_t>> ids = {{1, 2, 3, 4, 5}, {9, 8, 7}};
  Fixture() {
    std::string t = "/tmp/onboard_verify_XXXXXX";
    dir = mkdtemp(&t[0]);
    ckpt.Write(dir + "/ckpt", 2);
    std::ofstream(dir + "/ids.json") << nlohmann::json(ids).dump();
  }
  // Reference logits [2, 5, vocab] with NaN past the second sequence's end.
  std::string WriteReference(const std::string& name, hftest::RefOverrides o = {}) const {
    const int64_t vocab = 64, longest = 5;
    std::vector<float> v(size_t(2 * longest * vocab), std::nanf(""));
    for (size_t b = 0; b < ids.size(); ++b) {
      const hftest::Mat m = hftest::Reference(ckpt, o).Logits(ids[b]);
      for (size_t s = 0; s < m.size(); ++s)
        for (int64_t k = 0; k < vocab; ++k) v[(b * longest + s) * vocab + size_t(k)] = float(m[s][size_t(k)]);
    }
    const std::string path = dir + "/" + name;
    EXPECT_TRUE(WriteNpyF32(path, {2, longest, vocab}, v.data()).ok());
    return path;
  }
  std::string Args() const { return "verify " + dir + "/ckpt --input-ids " + dir + "/ids.json"; }
};

TEST(VerifyCli, LogitsNpyAndReferencePass) {
  Fixture f;
  const std::string ref = f.WriteReference("ref.npy");
  const auto r = RunOnboard(f.Args() + " --logits-out " + f.dir + "/out.npy --reference " + ref);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("top-1 agreement 8/8 -> PASS"), std::string::npos) << r.out;
  Expected<NpyArray> out = ReadNpy(f.dir + "/out.npy");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->shape, (std::vector<int64_t>{2, 5, 64}));
  EXPECT_TRUE(std::isnan(out->data[size_t((5 + 3) * 64)]));  // row 3 of the 3-token sequence
  EXPECT_FALSE(std::isnan(out->data[size_t((5 + 2) * 64)]));
}

TEST(VerifyCli, WrongReferenceExitsOne) {
  Fixture f;
  const auto r = RunOnboard(f.Args() + " --reference " + f.WriteReference("bad.npy", hftest::RefOverrides{2.0, -1.0}));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(VerifyCli, BadInputExitsTwo) {
  Fixture f;
  std::ofstream(f.dir + "/bad_ids.json") << "[[1, 2, 64]]";
  auto r = RunOnboard("verify " + f.dir + "/ckpt --input-ids " + f.dir + "/bad_ids.json");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("bad_ids.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0][2]"), std::string::npos) << r.out;
  r = RunOnboard(f.Args() + " --layers 1-7");
  EXPECT_EQ(r.code, 2) << r.out;
  std::remove((f.dir + "/ckpt/model-00001-of-00002.safetensors").c_str());
  r = RunOnboard(f.Args());
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("model-00001-of-00002.safetensors"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace onboard
