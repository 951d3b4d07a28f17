// kimi_k3's vision path: the MoonViT tower and the patch-merger projector, as Kimi-VL publishes them
// (modeling_kimi_vl.py: MoonVitPretrainedModel + KimiVLMultiModalProjector) and Kimi-K2.5 keeps them
// for one image (MoonViT3dPretrainedModel with t = 1, its PatchMergerMLP `mm_projector`):
//   patch_embed    Conv2d(C -> hidden, kernel = stride = patch) (+bias) over pixel_values [L, C, P, P]
//                  (the processor's patches, row-major over the h x w patch grid)
//   pos_emb        learned [pos_h, pos_w, hidden], bicubic-interpolated to (h, w) (F.interpolate,
//                  align_corners False; used as is when (h, w) == (pos_h, pos_w)), added
//   blocks         x += wo(attn(norm0 x)); x += fc1(gelu_tanh(fc0(norm1 x))) (LayerNorms eps 1e-5,
//                  biases everywhere); attention full (non-causal) within one image, q/k rotated by the
//                  2D RoPE: complex pair i of each head (dims 2i, 2i+1) turns by col * f(i/2) for even i
//                  and row * f(i/2) for odd i, f(k) = 10000^(-4k / head_dim) (Rope2DPosEmb: x = column
//                  first, interleaved)
//   final_layernorm  LayerNorm
//   patch_merger   2 x 2 (merge_kernel_size) windows of the row-major grid, window-major, each
//                  window's patches in (row, column) order -> [h*w/4, 4, hidden]
//   projector      pre_norm LayerNorm(hidden) on each patch (eps projector_ln_eps, default 1e-5), the
//                  window's 4 patches concatenated [4 hidden], linear_1 (4h -> 4h), exact GELU,
//                  linear_2 (4h -> the text hidden)
// The features replace media_placeholder_token_id placeholders in order over the batch (row-major).
// kimi_k3's language model is NoPE MLA + KDA: the placeholders need no positions.
// Shapes: pixel_values [h*w, C*P*P] (c, i, j order); features [h*w / (mh*mw), text hidden].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "backends/hf_model.h"

namespace onboard {

struct MoonVitConfig {
  int64_t depth = 0, hidden = 0, heads = 0, intermediate = 0, patch = 0, in_channels = 3;
  int64_t merge_h = 2, merge_w = 2, pos_h = 64, pos_w = 64, out_hidden = 0;
  double projector_eps = 1e-5;
  int64_t media_token = -1;  // media_placeholder_token_id (top level)
};

struct MoonVitBlock {
  torch::Tensor norm0_w, norm0_b, norm1_w, norm1_b;  // [hidden]
  HfLinear wqkv, wo, fc0, fc1;                       // all with bias
};

struct MoonVitWeights {
  HfLinear patch;         // Conv2d as [hidden, C*P*P] + bias
  torch::Tensor pos_emb;  // [pos_h, pos_w, hidden]
  std::vector<MoonVitBlock> blocks;
  torch::Tensor final_w, final_b;        // [hidden]
  torch::Tensor pre_norm_w, pre_norm_b;  // [hidden]
  HfLinear linear_1, linear_2;           // [4 hidden, 4 hidden], [out_hidden, 4 hidden]
  std::vector<std::string> used;
};

// vision_config (model_type moonvit) + media_placeholder_token_id (kimi_k3 only; else kBadInput).
[[nodiscard]] Expected<MoonVitConfig> ReadMoonVitConfig(const HfForwardConfig& c);

// vision_tower.* / mm_projector.* -> modules; a missing tensor is kBadInput naming it and its shape.
[[nodiscard]] Expected<MoonVitWeights> MapMoonVit(const MoonVitConfig& v, const SafetensorsCheckpoint& ckpt,
                                                  torch::ScalarType dtype);

// One image: pixel_values [gh*gw, C*P*P] -> projected features [gh*gw/(mh*mw), out_hidden].
torch::Tensor MoonVitForward(const MoonVitConfig& v, const MoonVitWeights& w,
                             const torch::Tensor& pixel_values, int64_t gh, int64_t gw);

}  // namespace onboard
