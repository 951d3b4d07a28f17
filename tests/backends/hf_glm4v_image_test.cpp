// GLM-4.5V (glm4v_moe) with one image: the vision tower (model.visual.*), the image features written
// over the image_token_id placeholders and the M-RoPE t/h/w positions (get_rope_index, mrope_section),
// against the independent loop references (hf_reference_glm4v.h for the tower, hf_reference_forward.h
// with SetMropePositions for the decoder) on a tiny random checkpoint in GLM-4.5V's layout.
// Negative controls: a reference with 1-D positions for the image tokens, and one without the 2D
// vision RoPE, each miss by more than kWrongAtLeast. A missing vision tensor is named with its shape.
#include <gtest/gtest.h>

#include <fstream>

#include "backends/hf_glm4v_vision.h"
#include "backends/hf_npy.h"
#include "backends/hf_verify.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_reference_glm4v.h"
#include "tests/backends/hf_test_glm4v.h"

namespace onboard {
namespace {

using hftest::kImageToken;
using hftest::kVideoStart;
using hftest::MakeTextAndVision;
using hftest::ToGlm45v;
const nlohmann::json& kVision = hftest::kGlm4vVision;
const std::array<int64_t, 3> kGrid = {1, 4, 6};  // 24 patches -> 6 placeholders (2 x 3 merged)
const std::vector<int64_t> kIds = {3, 17, 60, 60, 60, 60, 60, 60, 42, 5, 29};

std::vector<std::vector<double>> Pixels() { return hftest::PixelRows(24, 99); }

// get_rope_index written from the modeling code's loop: text groups count on from the last max + 1;
// the image group is (st + frame, st + row, st + col) over the merged grid.
std::vector<std::array<int64_t, 3>> RefPositions(const std::vector<int64_t>& ids) {
  std::vector<std::array<int64_t, 3>> pos;
  int64_t next = 0;
  for (size_t i = 0; i < ids.size();) {
    if (ids[i] != kImageToken) {
      pos.push_back({next, next, next});
      ++next, ++i;
      continue;
    }
    int64_t mx = next;
    for (int64_t r = 0; r < kGrid[1] / 2; ++r)
      for (int64_t c = 0; c < kGrid[2] / 2; ++c, ++i) {
        pos.push_back({next, next + r, next + c});
        mx = std::max({mx, next + r, next + c});
      }
    next = mx + 1;
  }
  return pos;
}

struct RefOpts {
  bool one_d = false;  // image tokens at 1-D positions 0..S-1
  bool no_vision_rope = false;
};

hftest::Mat ReferenceLogits(const hftest::Checkpoint& g, RefOpts o = {}) {
  hftest::VisionRefOptions vo;
  vo.no_rope = o.no_vision_rope;
  const auto feats = hftest::VisionReference(g, kVision, vo).Features(Pixels(), kGrid[0], kGrid[1], kGrid[2]);
  hftest::Reference ref(g);
  hftest::Mat x = ref.Embed(kIds);
  for (size_t i = 0, k = 0; i < kIds.size(); ++i)
    if (kIds[i] == kImageToken) x[i] = feats[k++];
  std::vector<std::array<int64_t, 3>> pos = RefPositions(kIds);
  if (o.one_d)
    for (size_t i = 0; i < pos.size(); ++i) pos[i] = {int64_t(i), int64_t(i), int64_t(i)};
  ref.SetMropePositions(pos, {1, 1, 2});
  return ref.LogitsOfEmbeds(x);
}

double MaxAbs(const torch::Tensor& ours, const hftest::Mat& ref) {
  double m = 0;
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t v = 0; v < ref[t].size(); ++v)
      m = std::max(m, std::fabs(ours[t][v].item<double>() - ref[t][v]));
  return m;
}

// The backend's logits for kIds + the image, through the public pieces, in `dtype`.
torch::Tensor BackendLogits(const std::string& dir, torch::ScalarType dtype) {
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  EXPECT_TRUE(c.ok() && ck.ok());
  Expected<Glm4vVisionConfig> v = ReadGlm4vVisionConfig(*c);
  EXPECT_TRUE(v.ok()) << v.status().message();
  Expected<HfModelWeights> w = MapHfWeights(*c, *ck, {}, dtype);
  Expected<Glm4vVisionWeights> vw = MapGlm4vVision(*v, *ck, dtype);
  EXPECT_TRUE(w.ok() && vw.ok()) << (vw.ok() ? "" : vw.status().message());
  std::vector<double> flat;
  for (const auto& r : Pixels()) flat.insert(flat.end(), r.begin(), r.end());
  const torch::Tensor px = torch::tensor(flat, torch::kDouble).view({24, 24}).to(dtype);
  const torch::Tensor feats = Glm4vVisionForward(*v, *vw, px, kGrid);
  Glm4vGridCursor at;
  Expected<torch::Tensor> pos = Glm4vRopeIndex(*v, kIds, {{kGrid}, {}}, &at, "ids");
  EXPECT_TRUE(pos.ok());
  const HfMrope m{*pos, v->mrope_section};
  return HfForwardEmbeds(*c, *w, Glm4vInputEmbeds(*v, *w, kIds, feats), &m).to(torch::kDouble);
}

TEST(HfGlm4vImage, RopeIndexGivesTheImageItsGridRows) {
  Glm4vVisionConfig v;
  v.merge = 2;
  v.image_token_id = kImageToken;
  v.video_start_token_id = kVideoStart;
  Glm4vGridCursor at;
  Expected<torch::Tensor> p = Glm4vRopeIndex(v, kIds, {{kGrid}, {}}, &at, "ids");
  ASSERT_TRUE(p.ok()) << p.status().message();
  // Text 0, 1; image at st = 2: t = 2, rows 2 + {0, 1}, cols 2 + {0, 1, 2}; text resumes at 2 + 2 + 1.
  const std::vector<std::vector<int64_t>> want = {{0, 1, 2, 2, 2, 2, 2, 2, 5, 6, 7},
                                                  {0, 1, 2, 2, 2, 3, 3, 3, 5, 6, 7},
                                                  {0, 1, 2, 3, 4, 2, 3, 4, 5, 6, 7}};
  for (int r = 0; r < 3; ++r)
    for (size_t i = 0; i < kIds.size(); ++i)
      EXPECT_EQ((*p)[r][int64_t(i)].item<int64_t>(), want[r][i]) << r << "," << i;
  std::vector<int64_t> five = kIds;
  five.erase(five.begin() + 2);
  Glm4vGridCursor at5;
  Expected<torch::Tensor> bad = Glm4vRopeIndex(v, five, {{kGrid}, {}}, &at5, "ids");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected 6 placeholders"), std::string::npos)
      << bad.status().message();
}

TEST(HfGlm4vImage, VisionTowerMatchesTheLoopReference) {
  const hftest::Checkpoint g = MakeTextAndVision();
  const std::string dir = hftest::TempDir();
  ToGlm45v(g).Write(dir);
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  ASSERT_TRUE(c.ok() && ck.ok());
  Expected<Glm4vVisionConfig> v = ReadGlm4vVisionConfig(*c);
  ASSERT_TRUE(v.ok()) << v.status().message();
  Expected<Glm4vVisionWeights> w = MapGlm4vVision(*v, *ck, torch::kDouble);
  ASSERT_TRUE(w.ok()) << w.status().message();
  std::vector<double> flat;
  for (const auto& r : Pixels()) flat.insert(flat.end(), r.begin(), r.end());
  const torch::Tensor f =
      Glm4vVisionForward(*v, *w, torch::tensor(flat, torch::kDouble).view({24, 24}), kGrid);
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{6, 32}));
  const auto ref = hftest::VisionReference(g, kVision).Features(Pixels(), 1, 4, 6);
  hftest::VisionRefOptions no_rope;
  no_rope.no_rope = true;
  const auto wrong = hftest::VisionReference(g, kVision, no_rope).Features(Pixels(), 1, 4, 6);
  EXPECT_LT(MaxAbs(f, ref), hftest::kF64Tol);
  EXPECT_GT(MaxAbs(f, wrong), hftest::kWrongAtLeast);
}

TEST(HfGlm4vImage, LogitsWithAnImageMatchTheReference) {
  const hftest::Checkpoint g = MakeTextAndVision();
  const std::string dir = hftest::TempDir();
  ToGlm45v(g).Write(dir);
  const hftest::Mat ref = ReferenceLogits(g);
  const double f64 = MaxAbs(BackendLogits(dir, torch::kDouble), ref);
  const double f32 = MaxAbs(BackendLogits(dir, torch::kFloat), ref);
  const double one_d = MaxAbs(BackendLogits(dir, torch::kDouble), ReferenceLogits(g, {true, false}));
  const double no_vrope = MaxAbs(BackendLogits(dir, torch::kDouble), ReferenceLogits(g, {false, true}));
  EXPECT_LT(f64, hftest::kF64Tol);
  EXPECT_LT(f32, hftest::kF32Tol);
  EXPECT_GT(one_d, hftest::kWrongAtLeast);     // 1-D positions for the image tokens
  EXPECT_GT(no_vrope, hftest::kWrongAtLeast);  // no 2D RoPE in the vision blocks
  std::printf("glm4v image: fp64 %.3g, fp32 %.3g; controls: 1-D positions %.3g, no vision RoPE %.3g\n", f64,
              f32, one_d, no_vrope);
}

// `onboard verify`'s path: pixel_values .npy + grid -> logits .npy compared with the reference's.
TEST(HfGlm4vImage, VerifyRunsTheImageAndMissingVisionTensorsAreNamed) {
  const hftest::Checkpoint g = MakeTextAndVision();
  const std::string dir = hftest::TempDir();
  ToGlm45v(g).Write(dir);
  std::vector<float> px, ref;
  for (const auto& r : Pixels()) px.insert(px.end(), r.begin(), r.end());
  for (const auto& r : ReferenceLogits(g)) ref.insert(ref.end(), r.begin(), r.end());
  ASSERT_TRUE(WriteNpyF32(dir + "/pv.npy", {24, 24}, px.data()).ok());
  ASSERT_TRUE(WriteNpyF32(dir + "/ref.npy", {1, 11, 64}, ref.data()).ok());
  std::ofstream(dir + "/ids.json") << nlohmann::json({kIds}).dump();
  HfVerifyOptions o;
  o.checkpoint = dir;
  o.ids_path = dir + "/ids.json";
  o.reference = dir + "/ref.npy";
  o.pixel_values = dir + "/pv.npy";
  o.image_grid_thw = {kGrid};
  Expected<HfVerifyResult> r = RunHfVerify(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->passed) << r->max_abs;
  EXPECT_EQ(r->image_features, 6);
  // Without the image the placeholders are plain tokens at 1-D positions: the comparison fails.
  o.pixel_values.clear();
  Expected<HfVerifyResult> text_only = RunHfVerify(o);
  ASSERT_TRUE(text_only.ok());
  EXPECT_FALSE(text_only->passed);
  // A missing vision tensor: named, with its expected shape.
  hftest::Checkpoint m = ToGlm45v(g);
  m.tensors.erase("model.visual.blocks.1.attn.qkv.weight");
  const std::string mdir = hftest::TempDir();
  m.Write(mdir);
  o.checkpoint = mdir;
  o.pixel_values = dir + "/pv.npy";
  Expected<HfVerifyResult> miss = RunHfVerify(o);
  ASSERT_FALSE(miss.ok());
  EXPECT_EQ(miss.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(miss.status().message().find("model.visual.blocks.1.attn.qkv.weight"), std::string::npos)
      << miss.status().message();
  EXPECT_NE(miss.status().message().find("[48,16]"), std::string::npos) << miss.status().message();
}

}  // namespace
}  // namespace onboard
