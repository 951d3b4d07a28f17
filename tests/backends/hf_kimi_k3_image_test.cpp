// kimi_k3 (the flagship's layout) with images: the MoonViT tower (vision_tower.*) and projector
// (mm_projector.*) of a tiny random checkpoint (hf_test_kimi_k3.h, AddMoonVit), the features written over
// media_placeholder_token_id, against the independent loops (hf_reference_moonvit.h for the tower,
// hf_reference_forward.h on the text view for the decoder). Two images: 4 x 6 patches (the position grid
// as is) and 2 x 8 (bicubic-resampled), over a batch of two sequences.
// Negative controls: a reference without the 2D RoPE, and one merging 4 consecutive row-major patches in
// place of 2 x 2 windows, each miss by more than kWrongAtLeast. Bad input: a missing vision tensor named
// with its shape; a grid with t != 1 or an odd H; placeholders that do not match the features.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>

#include "backends/hf_glm4v_inputs.h"
#include "backends/hf_moonvit.h"
#include "backends/hf_npy.h"
#include "backends/hf_verify.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_reference_moonvit.h"
#include "tests/backends/hf_test_kimi_k3.h"

namespace onboard {
namespace {

using Mat = std::vector<std::vector<double>>;
constexpr int64_t kM = hftest::kK3Media, kPatchValues = 3 * 2 * 2;
const std::vector<std::array<int64_t, 3>> kGrids = {{1, 4, 6}, {1, 2, 8}};  // 6 + 4 placeholders
const std::vector<std::vector<int64_t>> kSeqs = {{3, 17, kM, kM, kM, kM, kM, kM, 42, 5},
                                                 {kM, kM, kM, kM, 29, 7}};

// Pixel rows of both images (float-representable: verify reads the .npy as float32).
Mat Pixels() {
  std::mt19937 rng(99);
  std::normal_distribution<double> d(0.0, 1.0);
  Mat px(24 + 16, std::vector<double>(size_t(kPatchValues)));
  for (auto& r : px)
    for (double& v : r) v = double(float(d(rng)));
  return px;
}

// Reference features of both images, in grid order.
Mat RefFeatures(const hftest::Checkpoint& c, hftest::MoonVitRefOptions o = {}) {
  const Mat px = Pixels();
  const hftest::MoonVitReference ref(c, c.config["vision_config"], o);
  Mat a = ref.Features(Mat(px.begin(), px.begin() + 24), 4, 6);
  const Mat b = ref.Features(Mat(px.begin() + 24, px.end()), 2, 8);
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Reference logits per sequence: token embeddings, the features over the placeholders in batch order.
std::vector<Mat> RefLogits(const hftest::Checkpoint& c, const Mat& feats) {
  const hftest::Checkpoint view = hftest::K3TextView(c);
  const hftest::Reference ref(view);
  std::vector<Mat> out;
  size_t k = 0;
  for (const auto& ids : kSeqs) {
    Mat x = ref.Embed(ids);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == kM) x[i] = feats[k++];
    out.push_back(ref.LogitsOfEmbeds(x));
  }
  return out;
}

double MaxAbs(const torch::Tensor& ours, const Mat& ref) {
  double m = 0;
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t v = 0; v < ref[t].size(); ++v)
      m = std::max(m, std::fabs(ours[int64_t(t)][int64_t(v)].item<double>() - ref[t][v]));
  return m;
}

// The backend's features of both images in `dtype`.
torch::Tensor BackendFeatures(const std::string& dir, torch::ScalarType dtype) {
  Expected<HfForwardConfig> c = ReadHfForwardConfig(dir);
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  EXPECT_TRUE(c.ok() && ck.ok());
  Expected<MoonVitConfig> v = ReadMoonVitConfig(*c);
  EXPECT_TRUE(v.ok()) << v.status().message();
  Expected<MoonVitWeights> w = MapMoonVit(*v, *ck, dtype);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.status().message());
  std::vector<double> flat;
  for (const auto& r : Pixels()) flat.insert(flat.end(), r.begin(), r.end());
  const torch::Tensor px = torch::tensor(flat, torch::kDouble).view({40, kPatchValues}).to(dtype);
  return torch::cat({MoonVitForward(*v, *w, px.narrow(0, 0, 24), 4, 6),
                     MoonVitForward(*v, *w, px.narrow(0, 24, 16), 2, 8)})
      .to(torch::kDouble);
}

std::string WriteInputs(const hftest::Checkpoint& c, HfVerifyOptions* o) {
  const std::string dir = hftest::TempDir();
  c.Write(dir, /*shards=*/2);
  std::vector<float> px;
  for (const auto& r : Pixels()) px.insert(px.end(), r.begin(), r.end());
  EXPECT_TRUE(WriteNpyF32(dir + "/pv.npy", {40, 3, 2, 2}, px.data()).ok());
  std::ofstream(dir + "/ids.json") << nlohmann::json(kSeqs).dump();
  o->checkpoint = dir;
  o->ids_path = dir + "/ids.json";
  o->pixel_values = dir + "/pv.npy";
  o->image_grid_thw = kGrids;
  return dir;
}

TEST(HfKimiK3Image, TowerMatchesTheLoopReferenceAndTheControlsMiss) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  const std::string dir = hftest::TempDir();
  c.Write(dir);
  const torch::Tensor f = BackendFeatures(dir, torch::kDouble);
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{10, 32}));
  hftest::MoonVitRefOptions no_rope, row_major;
  no_rope.no_rope = true;
  row_major.merge_row_major = true;
  const double ok = MaxAbs(f, RefFeatures(c)), miss_rope = MaxAbs(f, RefFeatures(c, no_rope)),
               miss_merge = MaxAbs(f, RefFeatures(c, row_major));
  std::printf("MoonViT features vs reference: fp64 %.3g; controls: no 2D RoPE %.3g, row-major merge %.3g\n",
              ok, miss_rope, miss_merge);
  EXPECT_LT(ok, hftest::kF64Tol);
  EXPECT_GT(miss_rope, hftest::kWrongAtLeast);
  EXPECT_GT(miss_merge, hftest::kWrongAtLeast);
  EXPECT_LT(MaxAbs(BackendFeatures(dir, torch::kFloat), RefFeatures(c)), hftest::kF32Tol);
}

// `onboard verify --pixel-values --image-grid-thw 1,4,6;1,2,8 --dtype fp64`: two sequences take the
// images' placeholders in batch order; logits against the reference (float32 .npy).
TEST(HfKimiK3Image, VerifyWithTwoImagesMatchesTheReference) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  HfVerifyOptions o;
  const std::string dir = WriteInputs(c, &o);
  o.dtype = FloatDtype::kFP64;
  o.logits_out = dir + "/out.npy";
  Expected<HfVerifyResult> r = RunHfVerify(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->image_features, 10);
  EXPECT_EQ(r->vision_tensors, 3 + 2 * 12 + 2 + 6);
  Expected<NpyArray> out = ReadNpy(o.logits_out);
  ASSERT_TRUE(out.ok());
  const std::vector<Mat> ref = RefLogits(c, RefFeatures(c)),
                         wrong = RefLogits(c, RefFeatures(c, {true, false}));
  double diff = 0, miss = 0;
  for (size_t b = 0; b < kSeqs.size(); ++b)
    for (size_t t = 0; t < kSeqs[b].size(); ++t)
      for (size_t v = 0; v < 64; ++v) {
        const double ours = out->data[(b * 10 + t) * 64 + v];
        diff = std::max(diff, std::fabs(ours - ref[b][t][v]));
        miss = std::max(miss, std::fabs(ours - wrong[b][t][v]));
      }
  std::printf(
      "kimi_k3 verify with 2 images: max |logit diff| %.3g (fp64 run, float32 .npy); no-RoPE control %.3g\n",
      diff, miss);
  EXPECT_LT(diff, hftest::kF32Tol);
  EXPECT_GT(miss, hftest::kWrongAtLeast);
}

TEST(HfKimiK3Image, MissingVisionTensorIsNamedWithItsShape) {
  const std::pair<std::string, std::string> cases[] = {
      {"vision_tower.encoder.blocks.1.wqkv.bias", "[48]"},
      {"vision_tower.patch_embed.pos_emb.weight", "[4,6,16]"},
      {"mm_projector.proj.2.weight", "[32,64]"},
  };
  for (const auto& [name, shape] : cases) {
    hftest::Checkpoint c = hftest::MakeKimiK3();
    c.tensors.erase(name);
    HfVerifyOptions o;
    WriteInputs(c, &o);
    Expected<HfVerifyResult> r = RunHfVerify(o);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(r.status().message().find(name), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(shape), std::string::npos) << r.status().message();
  }
}

TEST(HfKimiK3Image, BadGridsAndPlaceholderCountsAreRefused) {
  const hftest::Checkpoint c = hftest::MakeKimiK3();
  HfVerifyOptions o;
  const std::string dir = WriteInputs(c, &o);
  const std::pair<std::vector<std::array<int64_t, 3>>, std::string> grids[] = {
      {{{2, 4, 6}, {1, 2, 8}}, "merge_kernel_size"},  // t != 1
      {{{1, 3, 8}, {1, 2, 8}}, "merge_kernel_size"},  // odd H
      {{{1, 4, 6}}, "shape"},                         // pixels for two images, one grid
  };
  for (const auto& [g, want] : grids) {
    o.image_grid_thw = g;
    Expected<HfVerifyResult> r = RunHfVerify(o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
  o.image_grid_thw = kGrids;
  std::vector<std::vector<int64_t>> short_ids = kSeqs;
  short_ids[1].erase(short_ids[1].begin());  // 9 placeholders for 10 feature rows
  std::ofstream(dir + "/ids.json") << nlohmann::json(short_ids).dump();
  Expected<HfVerifyResult> r = RunHfVerify(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("placeholders take 9"), std::string::npos) << r.status().message();
  short_ids[1].push_back(kM), short_ids[1].push_back(kM);  // 11
  std::ofstream(dir + "/ids.json") << nlohmann::json(short_ids).dump();
  Expected<HfVerifyResult> r2 = RunHfVerify(o);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("5 placeholders"), std::string::npos) << r2.status().message();
}

}  // namespace
}  // namespace onboard
