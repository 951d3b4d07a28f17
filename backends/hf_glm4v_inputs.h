// GLM-4.5V's visual inputs for `onboard verify` (Glm4vModel.forward's order): the processor's
// pixel_values (images) or pixel_values_videos (videos), rows concatenated in grid order, and their
// image_grid_thw / video_grid_thw; the tower runs once per grid (a video [t, h, w] as t frames), the
// features are concatenated in the same order and the batch's placeholders take them in row-major
// order (masked_scatter), while get_rope_index consumes the grids in the same order.
// Refused (kBadInput, exit 2), each naming the flag / field and the values:
//   - images and a video in one run: transformers scatters both over every image_token_id
//     (get_placeholder_mask), so its count check refuses the mix;
//   - an image grid with t != 1 (the image processor repeats an image over temporal_patch_size, so its
//     t is 1; a clip is a video), h or w not a multiple of spatial_merge_size;
//   - pixel rows other than the grids' sum of t*h*w, or columns other than C*T*P*P;
//   - a placeholder run whose length is not its grid's, or grids left over after the batch.
// Shapes: pixel_values [sum t*h*w, C*T*P*P]; features [sum t*h*w / merge^2, hidden]. Units: patches.
#pragma once

#include <string>

#include "backends/hf_glm4v_vision.h"
#include "backends/hf_moonvit.h"

namespace onboard {

struct Glm4vVisualOptions {
  std::string pixel_values;         // .npy of the images ("" = none)
  std::string pixel_values_videos;  // .npy of the videos ("" = none)
  Glm4vGrids grids;                 // images with pixel_values, videos with pixel_values_videos
};

struct Glm4vVisual {
  bool present = false;
  bool video = false;  // the features are the videos' (else the images')
  Glm4vVisionConfig v;
  Glm4vGrids grids;
  torch::Tensor features;   // [sum t*h*w / merge^2, hidden] in grid order
  int64_t tensors = 0;      // model.visual.* (or vision_tower.* + mm_projector.*) tensors read
  bool is_moonvit = false;  // kimi_k3: MoonViT features, media_placeholder_token_id, no positions
  MoonVitConfig moonvit;
};

// Where the batch stands: grids consumed and feature rows written so far.
struct Glm4vBatchCursor {
  Glm4vGridCursor grid;
  int64_t feature_row = 0;
};

// Validates the grids and pixels, maps model.visual.* and runs the tower per grid.
[[nodiscard]] Expected<Glm4vVisual> LoadGlm4vVisual(const Glm4vVisualOptions& o, const HfForwardConfig& c,
                                                    const SafetensorsCheckpoint& ckpt,
                                                    torch::ScalarType dtype);

// One sequence's logits [S, vocab]: its placeholders take the next feature rows, its positions the
// next grids (`where` names the sequence in errors).
[[nodiscard]] Expected<torch::Tensor> Glm4vSequenceLogits(const HfForwardConfig& c, const HfModelWeights& w,
                                                          const Glm4vVisual& vis,
                                                          const std::vector<int64_t>& ids,
                                                          Glm4vBatchCursor* at, const std::string& where);

// After the batch: every grid (and every temporal patch of the last video) was consumed.
[[nodiscard]] Status Glm4vCheckGridsUsed(const Glm4vVisual& vis, const Glm4vBatchCursor& at);

// kimi_k3 (hf_moonvit_inputs.cpp): images only, each grid 1,H,W (H, W multiples of
// merge_kernel_size); pixel_values [sum H*W, C, P, P] or [sum H*W, C*P*P]; the tower per image.
[[nodiscard]] Status LoadMoonVitVisual(const Glm4vVisualOptions& o, const HfForwardConfig& c,
                                       const SafetensorsCheckpoint& ckpt, torch::ScalarType dtype,
                                       Glm4vVisual* vis);

// kimi_k3: the sequence's media_placeholder_token_id placeholders take the next feature rows.
[[nodiscard]] Expected<torch::Tensor> MoonVitSequenceLogits(const HfForwardConfig& c, const HfModelWeights& w,
                                                            const Glm4vVisual& vis,
                                                            const std::vector<int64_t>& ids,
                                                            Glm4vBatchCursor* at, const std::string& where);

// kimi_k3: after the batch every feature row was taken.
[[nodiscard]] Status MoonVitCheckFeaturesUsed(const Glm4vVisual& vis, const Glm4vBatchCursor& at);

}  // namespace onboard
