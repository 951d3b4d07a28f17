// Glm4vVisionForward: GLM-4.5V's vision tower over one image's patches (see hf_glm4v_vision.h).
// Shapes: x [N, hidden] for N = t*h*w patches; q/k/v [t, h*w, heads, head_dim]. Units: patches.
#include "backends/hf_glm4v_vision.h"

#include <cmath>

#include "backends/hf_rope.h"

namespace onboard {
namespace {

constexpr double kVisionRopeTheta = 10000.0;  // Glm4vVisionRotaryEmbedding's default theta
constexpr double kMergerLayerNormEps = 1e-5;  // nn.LayerNorm(dim) default in Glm4vVisionPatchMerger
constexpr int64_t kGridBicubic = 2, kGridBorder = 1;

// Row and column of each patch in the processor's order: per frame, windows of merge x merge patches
// (window row, window column, row in window, column in window), as Glm4vVisionModel.rot_pos_emb.
std::array<torch::Tensor, 2> PatchCoords(int64_t t, int64_t gh, int64_t gw, int64_t m) {
  const auto opts = torch::TensorOptions().dtype(torch::kLong);
  const torch::Tensor rows = torch::arange(gh, opts).view({gh / m, 1, m, 1}).expand({gh / m, gw / m, m, m});
  const torch::Tensor cols = torch::arange(gw, opts).view({1, gw / m, 1, m}).expand({gh / m, gw / m, m, m});
  return {rows.reshape({-1}).repeat({t}), cols.reshape({-1}).repeat({t})};
}

// Glm4vVisionEmbeddings: the learned square grid of positions, bicubic-resampled at each patch's
// centre ((coord + 0.5) / grid * 2 - 1 in grid_sample's [-1, 1] frame) -> [N, hidden].
torch::Tensor ResampledPositions(const torch::Tensor& table, const torch::Tensor& rows,
                                 const torch::Tensor& cols, int64_t gh, int64_t gw) {
  const int64_t side = int64_t(std::lround(std::sqrt(double(table.size(0))))), hidden = table.size(1);
  const torch::Tensor image = table.view({side, side, hidden}).permute({2, 0, 1}).unsqueeze(0);
  const torch::Tensor x = (cols.to(table.scalar_type()) + 0.5) / double(gw) * 2 - 1;
  const torch::Tensor y = (rows.to(table.scalar_type()) + 0.5) / double(gh) * 2 - 1;
  const torch::Tensor grid = torch::stack({x, y}, -1).unsqueeze(0).unsqueeze(2);  // [1, N, 1, 2]
  // ATen's grid_sampler_2d codes (LibTorch 1.13's C++ options lack bicubic): mode 2 bicubic, padding 1
  // border.
  const torch::Tensor out =
      torch::grid_sampler_2d(image, grid, kGridBicubic, kGridBorder, /*align_corners=*/false);
  return out.squeeze(0).squeeze(-1).t();  // [N, hidden]
}

// The 2D vision RoPE: cos/sin [N, head_dim] (row frequencies, column frequencies, repeated).
RopeTables VisionRope(const torch::Tensor& rows, const torch::Tensor& cols, int64_t head_dim,
                      torch::ScalarType dtype) {
  const int64_t dim = head_dim / 2;
  const auto opts = torch::TensorOptions().dtype(dtype);
  const torch::Tensor inv = 1.0 / torch::pow(kVisionRopeTheta, torch::arange(0, dim, 2, opts) / double(dim));
  const torch::Tensor fr = rows.to(dtype).unsqueeze(1) * inv.unsqueeze(0);
  const torch::Tensor fc = cols.to(dtype).unsqueeze(1) * inv.unsqueeze(0);
  const torch::Tensor half = torch::cat({fr, fc}, 1);
  const torch::Tensor emb = torch::cat({half, half}, 1);
  return {emb.cos(), emb.sin()};
}

// One block's attention: full within each of the t frames.
torch::Tensor VisionAttention(const Glm4vVisionConfig& v, const Glm4vVisionBlock& b, const torch::Tensor& x,
                              const RopeTables& rope, int64_t t) {
  const int64_t n = x.size(0), hd = v.hidden / v.heads;
  const torch::Tensor qkv = HfApplyLinear(x, b.qkv).view({n, 3, v.heads, hd});
  const torch::Tensor q = ApplyRope(qkv.select(1, 0), rope, false).view({t, n / t, v.heads, hd});
  const torch::Tensor k = ApplyRope(qkv.select(1, 1), rope, false).view({t, n / t, v.heads, hd});
  const torch::Tensor val = qkv.select(1, 2).reshape({t, n / t, v.heads, hd});
  const torch::Tensor p =
      torch::softmax(torch::einsum("fshd,fthd->fhst", {q, k}) / std::sqrt(double(hd)), -1);
  return HfApplyLinear(torch::einsum("fhst,fthd->fshd", {p, val}).reshape({n, v.hidden}), b.proj);
}

// Glm4vVisionPatchMerger: proj -> LayerNorm -> GELU -> SwiGLU MLP.
torch::Tensor Merger(const Glm4vVisionWeights& w, const torch::Tensor& x) {
  torch::Tensor y = HfApplyLinear(x, w.merger_proj);
  y = torch::layer_norm(y, {y.size(1)}, w.merger_ln_w, w.merger_ln_b, kMergerLayerNormEps);
  y = torch::gelu(y);
  const HfMlpWeights& m = w.merger_mlp;
  return HfApplyLinear(torch::silu(HfApplyLinear(y, m.gate)) * HfApplyLinear(y, m.up), m.down);
}

}  // namespace

torch::Tensor Glm4vVisionForward(const Glm4vVisionConfig& v, const Glm4vVisionWeights& w,
                                 const torch::Tensor& pixel_values, const std::array<int64_t, 3>& thw) {
  torch::NoGradGuard no_grad;
  const int64_t t = thw[0], gh = thw[1], gw = thw[2], m = v.merge;
  // Step 1: patch embedding (the Conv3d as one matmul over each patch's values), post-conv RMSNorm.
  torch::Tensor x = HfRmsNorm(HfApplyLinear(pixel_values, w.patch), w.post_conv_norm, v.eps);
  // Step 2: resampled learned positions; the 2D RoPE tables of the same coordinates.
  const std::array<torch::Tensor, 2> rc = PatchCoords(t, gh, gw, m);
  x = x + ResampledPositions(w.pos_embed, rc[0], rc[1], gh, gw);
  const RopeTables rope = VisionRope(rc[0], rc[1], v.hidden / v.heads, x.scalar_type());
  // Step 3: the blocks.
  for (const Glm4vVisionBlock& b : w.blocks) {
    x = x + VisionAttention(v, b, HfRmsNorm(x, b.norm1, v.eps), rope, t);
    const torch::Tensor n = HfRmsNorm(x, b.norm2, v.eps);
    x = x + HfApplyLinear(torch::silu(HfApplyLinear(n, b.mlp.gate)) * HfApplyLinear(n, b.mlp.up), b.mlp.down);
  }
  // Step 4: post RMSNorm, the merge x merge downsample conv (one matmul per window), the merger.
  x = HfRmsNorm(x, w.post_norm, v.eps);
  const torch::Tensor windows =
      x.view({-1, m, m, v.hidden}).permute({0, 3, 1, 2}).reshape({-1, v.hidden * m * m});
  return Merger(w, HfApplyLinear(windows, w.downsample));
}

}  // namespace onboard
