// LoadMoonVitVisual / MoonVitSequenceLogits / MoonVitCheckFeaturesUsed: kimi_k3's images through the
// MoonViT tower (hf_moonvit.h) and into its language model, batch order (see hf_glm4v_inputs.h).
// Refused (kBadInput, exit 2): videos; a grid with t != 1 or h, w not multiples of merge_kernel_size;
// pixel_values other than [sum h*w, C, P, P] (the processor's form) or [sum h*w, C*P*P]; placeholder
// counts other than the features' (KimiVL's scatter `inputs_embeds[mask] = image_features` raises).
#include "backends/hf_glm4v_inputs.h"
#include "backends/hf_npy.h"

namespace onboard {
namespace {

// Step 1: each image grid is 1,H,W with H, W multiples of the merge kernel.
Status CheckMoonVitGrids(const MoonVitConfig& v, const std::vector<std::array<int64_t, 3>>& grids) {
  if (grids.empty()) return BadInput("--image-grid-thw", "T,H,W", "at least one grid", "");
  for (size_t k = 0; k < grids.size(); ++k) {
    const std::array<int64_t, 3>& g = grids[k];
    if (g[0] != 1 || g[1] < 1 || g[2] < 1 || g[1] % v.merge_h != 0 || g[2] % v.merge_w != 0)
      return BadInput("--image-grid-thw", "image " + std::to_string(k),
                      "1,H,W with H a multiple of " + std::to_string(v.merge_h) + " and W of " +
                          std::to_string(v.merge_w) + " (merge_kernel_size)",
                      Glm4vGridsText({g}));
  }
  return Status::Ok();
}

// Step 2: the pixels, then the tower once per image on its rows.
Expected<torch::Tensor> MoonVitGridFeatures(const MoonVitConfig& v, const MoonVitWeights& w,
                                            const std::string& path,
                                            const std::vector<std::array<int64_t, 3>>& grids,
                                            torch::ScalarType dtype) {
  int64_t rows = 0;
  for (const std::array<int64_t, 3>& g : grids) rows += g[1] * g[2];
  ONBOARD_ASSIGN_OR_RETURN(NpyArray px, ReadNpy(path));
  const int64_t cols = v.in_channels * v.patch * v.patch;
  const std::vector<int64_t> four = {rows, v.in_channels, v.patch, v.patch}, two = {rows, cols};
  if (px.shape != four && px.shape != two)
    return BadInput(path, "shape",
                    "expected " + ShapeText(four) + " or " + ShapeText(two) +
                        " (sum of h*w over --image-grid-thw " + Glm4vGridsText(grids) + ")",
                    ShapeText(px.shape));
  const torch::Tensor pv = torch::from_blob(px.data.data(), {rows, cols}, torch::kFloat).to(dtype);
  std::vector<torch::Tensor> out;
  int64_t row = 0;
  for (const std::array<int64_t, 3>& g : grids) {
    out.push_back(MoonVitForward(v, w, pv.narrow(0, row, g[1] * g[2]), g[1], g[2]));
    row += g[1] * g[2];
  }
  return torch::cat(out, 0);
}

}  // namespace

Status LoadMoonVitVisual(const Glm4vVisualOptions& o, const HfForwardConfig& c,
                         const SafetensorsCheckpoint& ckpt, torch::ScalarType dtype, Glm4vVisual* vis) {
  if (!o.pixel_values_videos.empty())
    return BadInput("--pixel-values-videos", "(flag)", "kimi_k3's MoonViT path takes images only",
                    o.pixel_values_videos);
  ONBOARD_ASSIGN_OR_RETURN(vis->moonvit, ReadMoonVitConfig(c));
  vis->grids = o.grids;
  ONBOARD_RETURN_IF_ERROR(CheckMoonVitGrids(vis->moonvit, vis->grids.images));
  ONBOARD_ASSIGN_OR_RETURN(MoonVitWeights w, MapMoonVit(vis->moonvit, ckpt, dtype));
  ONBOARD_ASSIGN_OR_RETURN(vis->features,
                           MoonVitGridFeatures(vis->moonvit, w, o.pixel_values, vis->grids.images, dtype));
  vis->tensors = int64_t(w.used.size());
  vis->is_moonvit = true;
  vis->present = true;
  return Status::Ok();
}

Expected<torch::Tensor> MoonVitSequenceLogits(const HfForwardConfig& c, const HfModelWeights& w,
                                              const Glm4vVisual& vis, const std::vector<int64_t>& ids,
                                              Glm4vBatchCursor* at, const std::string& where) {
  // Step 3: this sequence's placeholders take the next feature rows; no positions (NoPE MLA + KDA).
  const torch::Tensor idx = torch::tensor(ids, torch::kLong);
  const torch::Tensor rows = (idx == vis.moonvit.media_token).nonzero().squeeze(1);
  const int64_t n = rows.numel(), left = vis.features.size(0) - at->feature_row;
  if (n > left)
    return BadInput(where, "media_placeholder_token_id " + std::to_string(vis.moonvit.media_token),
                    std::to_string(left) + " image feature row(s) left for this sequence (the grids " +
                        Glm4vGridsText(vis.grids.images) + " give " + std::to_string(vis.features.size(0)) +
                        ")",
                    std::to_string(n) + " placeholders");
  torch::Tensor h = w.embed.index_select(0, idx).clone();
  if (n > 0) h.index_copy_(0, rows, vis.features.narrow(0, at->feature_row, n).to(h.scalar_type()));
  at->feature_row += n;
  return HfForwardEmbeds(c, w, h, nullptr);
}

Status MoonVitCheckFeaturesUsed(const Glm4vVisual& vis, const Glm4vBatchCursor& at) {
  if (at.feature_row == vis.features.size(0)) return Status::Ok();
  return BadInput(
      "--image-grid-thw", "(count)",
      std::to_string(vis.features.size(0)) + " feature rows from " + Glm4vGridsText(vis.grids.images) +
          ", the ids' media_placeholder_token_id placeholders take " + std::to_string(at.feature_row),
      std::to_string(at.feature_row));
}

}  // namespace onboard
