// LoadGlm4vVisual / Glm4vSequenceLogits / Glm4vCheckGridsUsed: GLM-4.5V's images or videos through
// the vision tower and into the language model, batch order (see hf_glm4v_inputs.h).
#include "backends/hf_glm4v_inputs.h"

#include "backends/hf_npy.h"

namespace onboard {
namespace {

// Step 1: the grids are positive, h and w multiples of the merge, an image's t is 1.
Status CheckGlm4vGrids(const Glm4vVisionConfig& v, const std::vector<std::array<int64_t, 3>>& grids,
                       bool video) {
  const std::string flag = video ? "--video-grid-thw" : "--image-grid-thw";
  if (grids.empty()) return BadInput(flag, "T,H,W", "at least one grid", "");
  for (size_t k = 0; k < grids.size(); ++k) {
    const std::array<int64_t, 3>& g = grids[k];
    const std::string at = (video ? "video " : "image ") + std::to_string(k);
    if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] % v.merge != 0 || g[2] % v.merge != 0)
      return BadInput(flag, at,
                      "positive, h and w multiples of spatial_merge_size " + std::to_string(v.merge),
                      Glm4vGridsText({g}));
    if (!video && g[0] != 1)
      return BadInput(flag, at,
                      "an image's t is 1 (the processor repeats it over temporal_patch_size); frames are a "
                      "video: --video-grid-thw",
                      Glm4vGridsText({g}));
  }
  return Status::Ok();
}

// Step 2: the pixels are [sum t*h*w, C*T*P*P]; the tower runs once per grid on its rows.
Expected<torch::Tensor> Glm4vGridFeatures(const Glm4vVisionConfig& v, const Glm4vVisionWeights& w,
                                          const std::string& path,
                                          const std::vector<std::array<int64_t, 3>>& grids, bool video,
                                          torch::ScalarType dtype) {
  int64_t rows = 0;
  for (const std::array<int64_t, 3>& g : grids) rows += g[0] * g[1] * g[2];
  ONBOARD_ASSIGN_OR_RETURN(NpyArray px, ReadNpy(path));
  const std::vector<int64_t> want = {rows, v.in_channels * v.temporal_patch * v.patch * v.patch};
  if (px.shape != want)
    return BadInput(path, "shape",
                    "expected " + ShapeText(want) + " (sum of t*h*w over " +
                        (video ? "--video-grid-thw " : "--image-grid-thw ") + Glm4vGridsText(grids) +
                        " x C*T*P*P values)",
                    ShapeText(px.shape));
  const torch::Tensor pv = torch::from_blob(px.data.data(), {want[0], want[1]}, torch::kFloat).to(dtype);
  std::vector<torch::Tensor> out;
  int64_t row = 0;
  for (const std::array<int64_t, 3>& g : grids) {
    const int64_t n = g[0] * g[1] * g[2];
    out.push_back(Glm4vVisionForward(v, w, pv.narrow(0, row, n), g));
    row += n;
  }
  return torch::cat(out, 0);
}

}  // namespace

Expected<Glm4vVisual> LoadGlm4vVisual(const Glm4vVisualOptions& o, const HfForwardConfig& c,
                                      const SafetensorsCheckpoint& ckpt, torch::ScalarType dtype) {
  Glm4vVisual vis;
  if (o.pixel_values.empty() && o.pixel_values_videos.empty()) return vis;
  if (c.layout == HfLayout::kKimiK3) {  // the MoonViT tower (hf_moonvit_inputs.cpp)
    ONBOARD_RETURN_IF_ERROR(LoadMoonVitVisual(o, c, ckpt, dtype, &vis));
    return vis;
  }
  if (!o.pixel_values.empty() && !o.pixel_values_videos.empty())
    return BadInput(
        "--pixel-values-videos", "(flag)",
        "images and videos in one run: transformers' Glm4v scatters both over every image_token_id "
        "and refuses the mix; verify them in separate runs",
        o.pixel_values_videos);
  vis.video = !o.pixel_values_videos.empty();
  ONBOARD_ASSIGN_OR_RETURN(vis.v, ReadGlm4vVisionConfig(c));
  if (vis.video && (vis.v.video_start_token_id < 0 || vis.v.video_end_token_id < 0))
    return BadInput(c.config_path, "video_start_token_id / video_end_token_id", "required for a video input");
  vis.grids = o.grids;
  const std::vector<std::array<int64_t, 3>>& grids = vis.video ? vis.grids.videos : vis.grids.images;
  ONBOARD_RETURN_IF_ERROR(CheckGlm4vGrids(vis.v, grids, vis.video));
  ONBOARD_ASSIGN_OR_RETURN(Glm4vVisionWeights w, MapGlm4vVision(vis.v, ckpt, dtype));
  ONBOARD_ASSIGN_OR_RETURN(
      vis.features, Glm4vGridFeatures(vis.v, w, vis.video ? o.pixel_values_videos : o.pixel_values, grids,
                                      vis.video, dtype));
  vis.tensors = int64_t(w.used.size());
  vis.present = true;
  return vis;
}

Expected<torch::Tensor> Glm4vSequenceLogits(const HfForwardConfig& c, const HfModelWeights& w,
                                            const Glm4vVisual& vis, const std::vector<int64_t>& ids,
                                            Glm4vBatchCursor* at, const std::string& where) {
  if (vis.is_moonvit) return MoonVitSequenceLogits(c, w, vis, ids, at, where);
  // Step 3: positions (grids in order), then the next feature rows over the placeholders.
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor pos, Glm4vRopeIndex(vis.v, ids, vis.grids, &at->grid, where));
  int64_t n = 0;
  for (int64_t id : ids) n += id == vis.v.image_token_id ? 1 : 0;
  const torch::Tensor feats = vis.features.narrow(0, at->feature_row, n);
  at->feature_row += n;
  const HfMrope mrope{pos, vis.v.mrope_section};
  return HfForwardEmbeds(c, w, Glm4vInputEmbeds(vis.v, w, ids, feats), &mrope);
}

Status Glm4vCheckGridsUsed(const Glm4vVisual& vis, const Glm4vBatchCursor& at) {
  if (vis.is_moonvit) return MoonVitCheckFeaturesUsed(vis, at);
  const std::vector<std::array<int64_t, 3>>& grids = vis.video ? vis.grids.videos : vis.grids.images;
  const size_t used = vis.video ? at.grid.video : at.grid.image;
  if (used == grids.size() && at.grid.frame == 0) return Status::Ok();
  const std::string flag = vis.video ? "--video-grid-thw" : "--image-grid-thw";
  return BadInput(
      flag, "(count)",
      std::to_string(grids.size()) + " grid(s) given (" + Glm4vGridsText(grids) + "), the ids' " +
          (vis.video ? "video runs fill " : "image runs fill ") + std::to_string(used) +
          (at.grid.frame > 0 ? " and " + std::to_string(at.grid.frame) + " temporal patch(es) of the next"
                             : ""),
      std::to_string(used));
}

}  // namespace onboard
