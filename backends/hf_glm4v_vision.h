// GLM-4.5V's vision tower (transformers' Glm4vVisionModel, shared by glm4v and glm4v_moe) and how its
// output enters the language model (Glm4vModel.forward + get_rope_index, images and videos):
//   patch_embed    Conv3d(C -> hidden, kernel = stride = [temporal_patch, patch, patch]) (+bias) over
//                  pixel_values rows [C * temporal_patch * patch * patch] (the processor's patch order:
//                  each row holds temporal_patch consecutive frames of one patch)
//   post_conv_layernorm  RMSNorm
//   embeddings     learned (image_size/patch)^2 positions, resampled to the image's (h, w) patch grid by
//                  bicubic grid_sample (align_corners = False, border padding) and added
//   blocks         x += proj(attn(norm1 x)); x += down(silu(gate norm2 x) * up norm2 x) (MLP width
//                  out_hidden_size); attention is full (non-causal) within each temporal frame, q/k
//                  rotated by the 2D vision RoPE: head_dim/4 frequencies (theta 10000 over head_dim/2)
//                  of the patch row, then as many of its column, rotate-half over the whole head
//   post_layernorm RMSNorm, then downsample Conv2d(hidden -> out_hidden, merge x merge) (+bias) over each
//                  window of merge^2 consecutive patches
//   merger         proj (no bias), LayerNorm (eps 1e-5), exact GELU, down(silu(gate x) * up x) with the
//                  vision config's intermediate_size
// A video [t, h, w] runs as t frames [1, h, w] (get_video_features), which is the same per-frame
// attention and position grid. The features replace the image_token_id placeholders in order; inside
// video_start .. video_end those placeholders are video frames. Positions are three rows (t, h, w):
// text counts on, an image's tokens get (st, st + row, st + col) over its merged grid, and each video
// temporal patch (one run of placeholders between its timestamp text) the same with its own st; the
// text after a group resumes at max + 1; mrope_section splits the rotary frequencies between rows.
// Shapes: pixel_values [t*h*w, C*T*P*P]; features [t*h*w/merge^2, out_hidden]. Units: patches.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "backends/hf_model.h"

namespace onboard {

struct Glm4vVisionConfig {
  int64_t depth = 0, hidden = 0, heads = 0, patch = 0, temporal_patch = 1, in_channels = 3, merge = 2;
  int64_t out_hidden = 0, intermediate = 0, image_size = 0;
  double eps = 1e-5;
  bool qkv_bias = false;
  int64_t image_token_id = -1, video_start_token_id = -1, video_end_token_id = -1;
  std::vector<int64_t> mrope_section;  // text_config rope_scaling (or rope_parameters).mrope_section: t, h, w
};

struct Glm4vVisionBlock {
  torch::Tensor norm1, norm2;  // [hidden]
  HfLinear qkv, proj;          // [3 hidden, hidden], [hidden, hidden]
  HfMlpWeights mlp;            // hidden -> out_hidden -> hidden
};

struct Glm4vVisionWeights {
  HfLinear patch;                // Conv3d as [hidden, C*T*P*P] + bias
  torch::Tensor post_conv_norm;  // [hidden]
  torch::Tensor pos_embed;       // [(image_size/patch)^2, hidden]
  std::vector<Glm4vVisionBlock> blocks;
  torch::Tensor post_norm;  // [hidden]
  HfLinear downsample;      // Conv2d as [out_hidden, hidden*merge*merge] (c, i, j order) + bias
  HfLinear merger_proj;     // [out_hidden, out_hidden]
  torch::Tensor merger_ln_w, merger_ln_b;  // [out_hidden]
  HfMlpWeights merger_mlp;                 // out_hidden -> intermediate -> out_hidden
  std::vector<std::string> used;
};

// config.json parsed, with its vision_config present (else kBadInput); shared by the vision mappers
// (GLM-4.5V here, kimi_k3's MoonViT in hf_map_moonvit.cpp).
[[nodiscard]] Expected<nlohmann::json> ReadVisionConfigRoot(const HfForwardConfig& c);

// A 2D-RoPE tower's head_dim divides by 4 and its output width is the text hidden (else kBadInput).
[[nodiscard]] Status CheckVisionDims(const HfForwardConfig& c, int64_t hidden, int64_t heads,
                                     int64_t out_hidden);

// config.json's vision_config + the top-level token ids (glm4v_moe only; otherwise kBadInput).
[[nodiscard]] Expected<Glm4vVisionConfig> ReadGlm4vVisionConfig(const HfForwardConfig& c);

// model.visual.* -> modules; a missing tensor is kBadInput naming it and its expected shape.
[[nodiscard]] Expected<Glm4vVisionWeights> MapGlm4vVision(const Glm4vVisionConfig& v,
                                                          const SafetensorsCheckpoint& ckpt,
                                                          torch::ScalarType dtype);

// pixel_values [t*h*w, C*T*P*P] of one image or video with patch grid `thw` -> features
// [t*h*w/merge^2, out_hidden] (t frames of full attention each).
torch::Tensor Glm4vVisionForward(const Glm4vVisionConfig& v, const Glm4vVisionWeights& w,
                                 const torch::Tensor& pixel_values, const std::array<int64_t, 3>& thw);

// image_grid_thw / video_grid_thw rows (T, H, W in patches), consumed in order over the batch.
struct Glm4vGrids {
  std::vector<std::array<int64_t, 3>> images, videos;
};

// "T,H,W;T,H,W" (the CLI's form of the grids).
std::string Glm4vGridsText(const std::vector<std::array<int64_t, 3>>& grids);

// Where the batch stands in the grids: the next image, the next video and its next temporal patch.
struct Glm4vGridCursor {
  size_t image = 0, video = 0;
  int64_t frame = 0;
};

// get_rope_index for one sequence: positions int64 [3, S]. Each run of image placeholders takes the
// next image grid (t*h*w/m^2 tokens), each run inside video_start .. video_end the next temporal patch
// of the current video (h*w/m^2 tokens); kBadInput names the flag, the grid and the counts when a run's
// length or the number of grids disagrees (`where` names the sequence). No placeholders: 0..S-1.
[[nodiscard]] Expected<torch::Tensor> Glm4vRopeIndex(const Glm4vVisionConfig& v,
                                                     const std::vector<int64_t>& ids, const Glm4vGrids& grids,
                                                     Glm4vGridCursor* at, const std::string& where);

// The language model's input for one sequence: token embeddings with `features` [n, hidden] written
// over its n image_token_id placeholders, in order (Glm4vModel.forward's masked_scatter).
torch::Tensor Glm4vInputEmbeds(const Glm4vVisionConfig& v, const HfModelWeights& w,
                               const std::vector<int64_t>& ids, const torch::Tensor& features);

}  // namespace onboard
