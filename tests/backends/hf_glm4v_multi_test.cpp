// GLM-4.5V with several images per sequence, a batch of sequences with different image counts, and
// videos (several temporal patches, each a run of placeholders between the processor's begin / end of
// image and timestamp text), through `onboard verify`'s path (LoadGlm4vVisual + Glm4vSequenceLogits),
// against the independent references: hf_reference_glm4v.h (the tower as loops, per grid),
// hf_reference_glm4v_rope.h (get_rope_index's loop) and hf_reference_forward.h (the decoder).
// Negative controls: a reference whose second image restarts at the first image's start, and one
// whose video temporal patch k gets t index st + k, each miss by more than kWrongAtLeast. Bad input
// (grids vs pixel rows, runs vs grids, leftover grids, an image with t > 1, images + videos) is
// kBadInput naming the flag and the values.
#include <gtest/gtest.h>

#include "backends/hf_glm4v_inputs.h"
#include "backends/hf_npy.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_glm4v_cases.h"

namespace onboard {
namespace {

constexpr int64_t kImg = hftest::kImageToken;

// Writes the checkpoint + pixels of `k` into a new directory; returns it.
std::string WriteGlm4vCase(const hftest::Case& k, const hftest::Checkpoint& g) {
  const std::string dir = hftest::TempDir();
  hftest::ToGlm45v(g).Write(dir);
  std::vector<float> flat;
  for (const auto& r : hftest::PixelRows(hftest::Rows(k.grids), k.seed))
    flat.insert(flat.end(), r.begin(), r.end());
  EXPECT_TRUE(WriteNpyF32(dir + "/pv.npy", {hftest::Rows(k.grids), hftest::kPatchValues}, flat.data()).ok());
  return dir;
}

Glm4vVisualOptions Glm4vOptions(const hftest::Case& k, const std::string& dir) {
  Glm4vVisualOptions o;
  (k.video ? o.pixel_values_videos : o.pixel_values) = dir + "/pv.npy";
  (k.video ? o.grids.videos : o.grids.images) = k.grids;
  return o;
}

// The backend's logits per sequence, or its error.
Expected<std::vector<torch::Tensor>> Glm4vBackendLogits(const hftest::Case& k, const std::string& dir,
                                                        torch::ScalarType dtype, Glm4vVisualOptions o) {
  ONBOARD_ASSIGN_OR_RETURN(HfForwardConfig c, ReadHfForwardConfig(dir));
  ONBOARD_ASSIGN_OR_RETURN(SafetensorsCheckpoint ck, SafetensorsCheckpoint::Open(dir));
  ONBOARD_ASSIGN_OR_RETURN(HfModelWeights w, MapHfWeights(c, ck, {}, dtype));
  ONBOARD_ASSIGN_OR_RETURN(Glm4vVisual vis, LoadGlm4vVisual(o, c, ck, dtype));
  Glm4vBatchCursor at;
  std::vector<torch::Tensor> out;
  for (size_t b = 0; b < k.ids.size(); ++b) {
    ONBOARD_ASSIGN_OR_RETURN(torch::Tensor l,
                             Glm4vSequenceLogits(c, w, vis, k.ids[b], &at, "ids[" + std::to_string(b) + "]"));
    out.push_back(l.to(torch::kDouble));
  }
  ONBOARD_RETURN_IF_ERROR(Glm4vCheckGridsUsed(vis, at));
  return out;
}

double MaxAbsBatch(const std::vector<torch::Tensor>& ours, const std::vector<hftest::Mat>& ref) {
  double m = 0;
  for (size_t b = 0; b < ref.size(); ++b)
    for (size_t t = 0; t < ref[b].size(); ++t)
      for (size_t v = 0; v < ref[b][t].size(); ++v)
        m = std::max(m, std::fabs(ours[b][int64_t(t)][int64_t(v)].item<double>() - ref[b][t][v]));
  return m;
}

TEST(HfGlm4vMulti, RopeIndexContinuesOverImagesAndVideoPatches) {
  Glm4vVisionConfig v;
  v.image_token_id = kImg;
  v.video_start_token_id = hftest::kVideoStart;
  v.video_end_token_id = hftest::kVideoEnd;
  for (const hftest::Case& k : {hftest::Images(), hftest::Videos()}) {
    const Glm4vGrids grids{k.video ? hftest::Grids{} : k.grids, k.video ? k.grids : hftest::Grids{}};
    const auto ref = hftest::RefRopeIndex(k.ids, grids.images, grids.videos,
                                          {kImg, hftest::kVideoStart, hftest::kVideoEnd, 2});
    Glm4vGridCursor at;
    for (size_t b = 0; b < k.ids.size(); ++b) {
      Expected<torch::Tensor> p = Glm4vRopeIndex(v, k.ids[b], grids, &at, "ids");
      ASSERT_TRUE(p.ok()) << p.status().message();
      for (size_t i = 0; i < k.ids[b].size(); ++i)
        for (int r = 0; r < 3; ++r)
          EXPECT_EQ((*p)[r][int64_t(i)].item<int64_t>(), ref[b][i][size_t(r)]) << b << "," << i;
    }
  }
  // Hand-checked anchors: image 2 of sequence 0 starts at 10 (after image 1's 3..5 and text 6..9);
  // the video's second temporal patch has t = 8 (after patch 1 at 3, end_of_image 5, timestamp 6,
  // begin_of_image 7).
  const hftest::RopeRefTokens tok{kImg, hftest::kVideoStart, hftest::kVideoEnd, 2};
  EXPECT_EQ(hftest::RefRopeIndex(hftest::Images().ids, hftest::Images().grids, {}, tok)[0][13][0], 10);
  EXPECT_EQ(hftest::RefRopeIndex(hftest::Videos().ids, {}, hftest::Videos().grids, tok)[0][12][0], 8);
}

TEST(HfGlm4vMulti, SeveralImagesAndABatchMatchTheReference) {
  const hftest::Checkpoint g = hftest::MakeTextAndVision();
  const hftest::Case k = hftest::Images();
  const std::string dir = WriteGlm4vCase(k, g);
  Expected<std::vector<torch::Tensor>> f64 = Glm4vBackendLogits(k, dir, torch::kDouble, Glm4vOptions(k, dir));
  Expected<std::vector<torch::Tensor>> f32 = Glm4vBackendLogits(k, dir, torch::kFloat, Glm4vOptions(k, dir));
  ASSERT_TRUE(f64.ok() && f32.ok()) << (f64.ok() ? f32.status().message() : f64.status().message());
  const std::vector<hftest::Mat> ref = hftest::Glm4vRefLogits(k, g);
  const double d64 = MaxAbsBatch(*f64, ref), d32 = MaxAbsBatch(*f32, ref);
  const double restart = MaxAbsBatch(*f64, hftest::Glm4vRefLogits(k, g, {true, false}));
  EXPECT_LT(d64, hftest::kF64Tol);
  EXPECT_LT(d32, hftest::kF32Tol);
  EXPECT_GT(restart, hftest::kWrongAtLeast);  // image 2 restarting at image 1's start
  std::printf("glm4v 3 images / 2 sequences: fp64 %.3g, fp32 %.3g; control: restarted image 2 %.3g\n", d64,
              d32, restart);
}

TEST(HfGlm4vMulti, VideosMatchTheReference) {
  const hftest::Checkpoint g = hftest::MakeTextAndVision();
  const hftest::Case k = hftest::Videos();
  const std::string dir = WriteGlm4vCase(k, g);
  Expected<std::vector<torch::Tensor>> f64 = Glm4vBackendLogits(k, dir, torch::kDouble, Glm4vOptions(k, dir));
  ASSERT_TRUE(f64.ok()) << f64.status().message();
  const double d64 = MaxAbsBatch(*f64, hftest::Glm4vRefLogits(k, g));
  const double frame_t = MaxAbsBatch(*f64, hftest::Glm4vRefLogits(k, g, {false, true}));
  EXPECT_LT(d64, hftest::kF64Tol);
  EXPECT_GT(frame_t, hftest::kWrongAtLeast);  // temporal patch k at t = st + k
  std::printf("glm4v 2 videos (3 temporal patches): fp64 %.3g; control: t = st + k %.3g\n", d64, frame_t);
}

// Each refusal is kBadInput and names the flag (or file) and the values.
void ExpectGlm4vBad(const hftest::Case& k, const std::string& dir, const Glm4vVisualOptions& o,
                    const std::vector<std::string>& words) {
  Expected<std::vector<torch::Tensor>> r = Glm4vBackendLogits(k, dir, torch::kDouble, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
  for (const std::string& w : words)
    EXPECT_NE(r.status().message().find(w), std::string::npos) << r.status().message();
}

TEST(HfGlm4vMulti, GridsThatDisagreeAreBadInput) {
  const hftest::Checkpoint g = hftest::MakeTextAndVision();
  const hftest::Case k = hftest::Images();
  const std::string dir = WriteGlm4vCase(k, g);
  Glm4vVisualOptions o = Glm4vOptions(k, dir);
  o.grids.images[1] = {1, 4, 6};  // 24 patches where the pixels hold 16
  ExpectGlm4vBad(k, dir, o, {"pv.npy", "expected [56,24]", "--image-grid-thw 1,4,6;1,4,6;1,2,4", "[48,24]"});
  hftest::Case short_run = k;  // sequence 0's second run holds 3 placeholders where its grid gives 4
  short_run.ids[0].erase(short_run.ids[0].begin() + 14);
  ExpectGlm4vBad(short_run, dir, Glm4vOptions(k, dir),
                 {"--image-grid-thw", "image 1 (1,4,4)", "expected 4", "(got 3)"});
  hftest::Case fewer = k;  // the ids hold 2 image runs, 3 grids given
  fewer.ids.pop_back();
  ExpectGlm4vBad(fewer, dir, Glm4vOptions(k, dir),
                 {"--image-grid-thw", "3 grid(s) given (1,4,6;1,4,4;1,2,4)", "(got 2)"});
  o = Glm4vOptions(k, dir);
  o.grids.images[2] = {2, 2, 2};
  ExpectGlm4vBad(k, dir, o, {"--image-grid-thw", "image 2", "t is 1", "(got 2,2,2)"});
  o = Glm4vOptions(k, dir);
  o.pixel_values_videos = o.pixel_values;
  ExpectGlm4vBad(k, dir, o, {"--pixel-values-videos", "images and videos"});
  const hftest::Case v = hftest::Videos();
  const std::string vdir = WriteGlm4vCase(v, g);
  hftest::Case short_patch = v;  // the video's second temporal patch holds 3 placeholders
  short_patch.ids[0].erase(short_patch.ids[0].begin() + 13);
  ExpectGlm4vBad(short_patch, vdir, Glm4vOptions(v, vdir),
                 {"--video-grid-thw", "video 0 (2,4,4)", "expected 4", "(got 3)"});
}

}  // namespace
}  // namespace onboard
