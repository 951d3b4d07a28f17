// MoonVitForward: kimi_k3's MoonViT tower + projector over one image's patches (see hf_moonvit.h).
// Shapes: x [N, hidden] for N = gh*gw patches (row-major); q/k/v [N, heads, head_dim]. Units: patches.
#include <cmath>

#include "backends/hf_moonvit.h"

namespace onboard {
namespace {

constexpr double kVisionRopeTheta = 10000.0;  // Rope2DPosEmb's theta_base default
constexpr double kLayerNormEps = 1e-5;        // nn.LayerNorm(hidden) default (norm0, norm1, final_layernorm)

// Learnable2DInterpPosEmb: the [pos_h, pos_w, hidden] grid, as is when it is the image's grid, else
// F.interpolate(size = (gh, gw), mode bicubic, align_corners False) -> [gh*gw, hidden] row-major.
torch::Tensor Positions(const torch::Tensor& table, int64_t gh, int64_t gw) {
  const int64_t hidden = table.size(2);
  if (table.size(0) == gh && table.size(1) == gw) return table.reshape({gh * gw, hidden});
  const torch::Tensor image = table.permute({2, 0, 1}).unsqueeze(0);
  const torch::Tensor out = torch::upsample_bicubic2d(image, {gh, gw}, /*align_corners=*/false);
  return out.squeeze(0).permute({1, 2, 0}).reshape({gh * gw, hidden});
}

// Rope2DPosEmb angles [N, head_dim/2]: pair i turns by column * f(i/2) (i even) or row * f(i/2) (i odd),
// f(k) = theta^(-4k / head_dim), for the row-major patches of a gh x gw grid.
torch::Tensor RopeAngles(int64_t gh, int64_t gw, int64_t head_dim, torch::ScalarType dtype) {
  const auto opts = torch::TensorOptions().dtype(dtype);
  const torch::Tensor f =
      1.0 / torch::pow(kVisionRopeTheta, torch::arange(0, head_dim, 4, opts) / double(head_dim));
  const torch::Tensor flat = torch::arange(gh * gw, opts);
  const torch::Tensor col = torch::fmod(flat, double(gw)), row = torch::floor(flat / double(gw));
  const torch::Tensor x = col.unsqueeze(1) * f.unsqueeze(0), y = row.unsqueeze(1) * f.unsqueeze(0);
  return torch::stack({x, y}, -1).reshape({gh * gw, head_dim / 2});  // x0, y0, x1, y1, ...
}

// apply_rope: each head's (2i, 2i+1) pair times cis(angle i) (view_as_complex over the last dim).
torch::Tensor Rotate(const torch::Tensor& x, const torch::Tensor& angles) {
  const torch::Tensor p = x.reshape({x.size(0), x.size(1), -1, 2});
  const torch::Tensor a = p.select(-1, 0), b = p.select(-1, 1);
  const torch::Tensor c = angles.cos().unsqueeze(1), s = angles.sin().unsqueeze(1);
  return torch::stack({a * c - b * s, a * s + b * c}, -1).reshape(x.sizes());
}

// One block: x += wo(attention(norm0 x)); x += fc1(gelu_tanh(fc0(norm1 x))).
torch::Tensor Block(const MoonVitConfig& v, const MoonVitBlock& b, const torch::Tensor& x,
                    const torch::Tensor& angles) {
  const int64_t n = x.size(0), hd = v.hidden / v.heads;
  const torch::Tensor h0 = torch::layer_norm(x, {v.hidden}, b.norm0_w, b.norm0_b, kLayerNormEps);
  const torch::Tensor qkv = HfApplyLinear(h0, b.wqkv).view({n, 3, v.heads, hd});
  const torch::Tensor q = Rotate(qkv.select(1, 0), angles), k = Rotate(qkv.select(1, 1), angles);
  const torch::Tensor p = torch::softmax(torch::einsum("shd,thd->hst", {q, k}) / std::sqrt(double(hd)), -1);
  const torch::Tensor o = torch::einsum("hst,thd->shd", {p, qkv.select(1, 2)}).reshape({n, v.hidden});
  const torch::Tensor y = x + HfApplyLinear(o, b.wo);
  const torch::Tensor h1 = torch::layer_norm(y, {v.hidden}, b.norm1_w, b.norm1_b, kLayerNormEps);
  return y + HfApplyLinear(torch::gelu(HfApplyLinear(h1, b.fc0), "tanh"), b.fc1);
}

}  // namespace

torch::Tensor MoonVitForward(const MoonVitConfig& v, const MoonVitWeights& w,
                             const torch::Tensor& pixel_values, int64_t gh, int64_t gw) {
  torch::NoGradGuard no_grad;
  // Step 1: patch embedding (the Conv2d as one matmul over each patch's values) + interpolated positions.
  torch::Tensor x = HfApplyLinear(pixel_values, w.patch) + Positions(w.pos_emb, gh, gw);
  // Step 2: the blocks (full attention over the image, 2D RoPE), final LayerNorm.
  const torch::Tensor angles = RopeAngles(gh, gw, v.hidden / v.heads, x.scalar_type());
  for (const MoonVitBlock& b : w.blocks) x = Block(v, b, x, angles);
  x = torch::layer_norm(x, {v.hidden}, w.final_w, w.final_b, kLayerNormEps);
  // Step 3: patch_merger (mh x mw windows, window-major) then the projector: per-patch pre_norm,
  // the window's patches concatenated, linear_1, exact GELU, linear_2.
  const int64_t mh = v.merge_h, mw = v.merge_w;
  const torch::Tensor win =
      x.view({gh / mh, mh, gw / mw, mw, v.hidden}).permute({0, 2, 1, 3, 4}).reshape({-1, mh * mw, v.hidden});
  const torch::Tensor normed =
      torch::layer_norm(win, {v.hidden}, w.pre_norm_w, w.pre_norm_b, v.projector_eps);
  const torch::Tensor h = torch::gelu(HfApplyLinear(normed.reshape({-1, mh * mw * v.hidden}), w.linear_1));
  return HfApplyLinear(h, w.linear_2);
}

}  // namespace onboard
