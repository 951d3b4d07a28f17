// The real `onboard verify` binary on a tiny GLM-4.5V checkpoint written by the test, with
// --pixel-values + --image-grid-thw "T,H,W;T,H,W;..." (3 images over 2 sequences) and with
// --pixel-values-videos + --video-grid-thw (2 videos, 3 temporal patches): its logits .npy against the
// independent reference (tests/backends/hf_glm4v_cases.h) passes (exit 0); a perturbed reference (the
// second image restarting at the first image's start; video patch k at t = st + k) exits 1; grids that
// disagree with the pixels or the ids, or a malformed grid list, exit 2 with one line naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "backends/hf_npy.h"
#include "tests/backends/hf_glm4v_cases.h"
#include "tests/cli/onboard_runner.h"

namespace onboard {
namespace {

using clitest::RunOnboard;

struct Glm4vFixture {
  std::string dir;
  hftest::Checkpoint g = hftest::MakeTextAndVision();
  hftest::Case k;
  int64_t longest = 0;
  explicit Glm4vFixture(hftest::Case c) : k(std::move(c)) {
    std::string t = "/tmp/onboard_verify_glm4v_XXXXXX";
    dir = mkdtemp(&t[0]);
    hftest::ToGlm45v(g).Write(dir + "/ckpt");
    std::vector<float> px;
    for (const auto& r : hftest::PixelRows(hftest::Rows(k.grids), k.seed))
      px.insert(px.end(), r.begin(), r.end());
    EXPECT_TRUE(WriteNpyF32(dir + "/pv.npy", {hftest::Rows(k.grids), hftest::kPatchValues}, px.data()).ok());
    std::ofstream(dir + "/ids.json") << nlohmann::json(k.ids).dump();
    for (const auto& s : k.ids) longest = std::max<int64_t>(longest, int64_t(s.size()));
  }
  // Reference logits [batch, longest, vocab], NaN past a shorter sequence's end.
  std::string WriteReference(const std::string& name, hftest::RopeRefOptions o = {}) const {
    const int64_t vocab = 64, batch = int64_t(k.ids.size());
    std::vector<float> v(size_t(batch * longest * vocab), std::nanf(""));
    const std::vector<hftest::Mat> ref = hftest::Glm4vRefLogits(k, g, o);
    for (size_t b = 0; b < ref.size(); ++b)
      for (size_t s = 0; s < ref[b].size(); ++s)
        for (int64_t x = 0; x < vocab; ++x)
          v[(b * size_t(longest) + s) * size_t(vocab) + size_t(x)] = float(ref[b][s][size_t(x)]);
    EXPECT_TRUE(WriteNpyF32(dir + "/" + name, {batch, longest, vocab}, v.data()).ok());
    return dir + "/" + name;
  }
  std::string Args(const std::string& grids) const {
    const std::string flags =
        k.video ? " --pixel-values-videos " + dir + "/pv.npy --video-grid-thw '" + grids + "'"
                : " --pixel-values " + dir + "/pv.npy --image-grid-thw '" + grids + "'";
    return "verify " + dir + "/ckpt --input-ids " + dir + "/ids.json" + flags;
  }
};

// The binary against the reference (exit 0, `features` in its summary, the .npy's shape), then
// against the reference perturbed by `wrong` (exit 1).
void PassThenFail(const hftest::Case& k, const std::string& features, hftest::RopeRefOptions wrong) {
  Glm4vFixture f(k);
  const std::string grids = hftest::Glm4vGridsCli(f.k.grids);
  auto r = RunOnboard(f.Args(grids) + " --logits-out " + f.dir + "/out.npy --reference " +
                      f.WriteReference("ref.npy"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(features), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("-> PASS"), std::string::npos) << r.out;
  Expected<NpyArray> out = ReadNpy(f.dir + "/out.npy");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(out->shape, (std::vector<int64_t>{2, f.longest, 64}));
  r = RunOnboard(f.Args(grids) + " --reference " + f.WriteReference("wrong.npy", wrong));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST(VerifyGlm4vCli, SeveralImagesPassAndAPerturbedReferenceFails) {
  PassThenFail(hftest::Images(), "image      12 features", {true, false});  // image 2 restarted
}

TEST(VerifyGlm4vCli, VideosPassAndAPerturbedReferenceFails) {
  PassThenFail(hftest::Videos(), "video      14 features", {false, true});  // patch k at t = st + k
}

// One line on stderr (naming the flag and the values), exit 2.
void ExpectExit2(const clitest::CliRun& r, const std::vector<std::string>& words) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  for (const std::string& w : words) EXPECT_NE(r.out.find(w), std::string::npos) << r.out;
}

TEST(VerifyGlm4vCli, GridsThatDisagreeExitTwo) {
  Glm4vFixture f(hftest::Images());
  ExpectExit2(RunOnboard(f.Args("1,4,6;1,4,4")), {"pv.npy", "--image-grid-thw 1,4,6;1,4,4", "[48,24]"});
  ExpectExit2(RunOnboard(f.Args("1,4,4;1,4,6;1,2,4")),
              {"--image-grid-thw", "image 0 (1,4,4)", "expected 4", "(got 6)"});
  ExpectExit2(RunOnboard(f.Args("1,4,6;1,4;1,2,4")),
              {"--image-grid-thw", "T,H,W[;T,H,W...]", "1,4,6;1,4;1,2,4"});
  ExpectExit2(
      RunOnboard("verify " + f.dir + "/ckpt --input-ids " + f.dir + "/ids.json --image-grid-thw 1,4,6"),
      {"--pixel-values and --image-grid-thw go together"});
  Glm4vFixture v(hftest::Videos());
  ExpectExit2(RunOnboard(v.Args("2,4,4;1,4,4")), {"pv.npy", "--video-grid-thw 2,4,4;1,4,4", "[56,24]"});
  ExpectExit2(RunOnboard(v.Args("1,4,6;1,4,4;1,4,4")),
              {"--video-grid-thw", "video 0 (1,4,6)", "expected 6", "(got 4)"});
}

}  // namespace
}  // namespace onboard
