// The GLM-4.5V image / video cases shared by the backend and CLI tests, and their reference logits
// (tests only; no backend code): hf_reference_glm4v.h's tower per grid, hf_reference_glm4v_rope.h's
// get_rope_index over the batch, hf_reference_forward.h's decoder with those M-RoPE positions.
//   Images(): sequence 0 holds two images (grids 1,4,6 -> 6 placeholders; 1,4,4 -> 4), sequence 1 one
//   (1,2,4 -> 2), each run wrapped in begin / end of image; pixel rows 24 + 16 + 8.
//   Videos(): sequence 0 a video of 2 temporal patches (2,4,4 -> 4 placeholders per patch, each patch
//   followed by its timestamp token), sequence 1 a 1-patch video (1,4,6 -> 6); pixel rows 32 + 24.
#pragma once

#include "tests/backends/hf_reference_forward.h"
#include "tests/backends/hf_reference_glm4v.h"
#include "tests/backends/hf_reference_glm4v_rope.h"
#include "tests/backends/hf_test_glm4v.h"

namespace onboard::hftest {

using Grids = std::vector<std::array<int64_t, 3>>;
// ids + begin_of_image, n placeholders, end_of_image.
inline std::vector<int64_t> PlaceholderRun(std::vector<int64_t> ids, int64_t n) {
  ids.push_back(kBeginImage);
  ids.insert(ids.end(), size_t(n), kImageToken);
  ids.push_back(kEndImage);
  return ids;
}
inline std::vector<int64_t> Concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A batch with its grids (images, or videos) and the seed of its pixel rows.
struct Case {
  std::vector<std::vector<int64_t>> ids;
  Grids grids;
  bool video = false;
  unsigned seed = 0;
};
// Two images (1,4,6: 6 tokens; 1,4,4: 4) in sequence 0, one (1,2,4: 2) in sequence 1.
inline Case Images() {
  return {{Concat(PlaceholderRun(Concat(PlaceholderRun({3, 17}, 6), {42, 5}), 4), {29}),
           Concat(PlaceholderRun({7}, 2), {11, 13})},
          {{1, 4, 6}, {1, 4, 4}, {1, 2, 4}},
          false,
          5};
}
// A video of 2 temporal patches (2,4,4: 4 tokens each, timestamps 20 / 21 after each) in sequence 0,
// a 1-patch video (1,4,6: 6 tokens) in sequence 1.
inline Case Videos() {
  const int64_t vs = kVideoStart, ve = kVideoEnd;
  return {{Concat(PlaceholderRun(Concat(PlaceholderRun({3, vs}, 4), {20}), 4), {21, ve, 42, 5}),
           Concat(PlaceholderRun({7, vs}, 6), {20, ve, 11})},
          {{2, 4, 4}, {1, 4, 6}},
          true,
          6};
}

inline int64_t Rows(const Grids& g) {
  int64_t n = 0;
  for (const auto& x : g) n += x[0] * x[1] * x[2];
  return n;
}

// "T,H,W;T,H,W" as `onboard verify --image-grid-thw / --video-grid-thw` take them.
inline std::string Glm4vGridsCli(const Grids& grids) {
  std::string out;
  for (const auto& g : grids)
    out += (out.empty() ? "" : ";") + std::to_string(g[0]) + "," + std::to_string(g[1]) + "," +
           std::to_string(g[2]);
  return out;
}

// The references' logits per sequence: features per grid, placeholders filled in batch order.
inline std::vector<Mat> Glm4vRefLogits(const Case& k, const Checkpoint& g, RopeRefOptions ro = {}) {
  const auto px = PixelRows(Rows(k.grids), k.seed);
  Mat feats;
  size_t row = 0;
  for (const auto& gr : k.grids) {
    const size_t n = size_t(gr[0] * gr[1] * gr[2]);
    const Mat rows(px.begin() + int64_t(row), px.begin() + int64_t(row + n));
    const Mat f = VisionReference(g, kGlm4vVision).Features(rows, gr[0], gr[1], gr[2]);
    feats.insert(feats.end(), f.begin(), f.end());
    row += n;
  }
  const std::vector<Positions> pos =
      RefRopeIndex(k.ids, k.video ? Grids{} : k.grids, k.video ? k.grids : Grids{},
                   {kImageToken, kVideoStart, kVideoEnd, 2}, ro);
  std::vector<Mat> out;
  size_t f = 0;
  for (size_t b = 0; b < k.ids.size(); ++b) {
    Reference ref(g);
    Mat x = ref.Embed(k.ids[b]);
    for (size_t i = 0; i < x.size(); ++i)
      if (k.ids[b][i] == kImageToken) x[i] = feats[f++];
    ref.SetMropePositions(pos[b], {1, 1, 2});
    out.push_back(ref.LogitsOfEmbeds(x));
  }
  return out;
}

}  // namespace onboard::hftest
