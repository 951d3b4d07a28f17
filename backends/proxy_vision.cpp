// The proxy's vision tower (see proxy_vision.h): layout and forward.
#include "backends/proxy_vision.h"

#include <cmath>
#include <string>

namespace onboard::backends {
namespace {

double VisionFan(int64_t in) { return 1.0 / std::sqrt(static_cast<double>(in)); }

void VisionMat(FlatLayout& f, const std::string& name, int64_t out, int64_t in) {
  f.Add(name, {out, in}, Init::kNormal, VisionFan(in), true);
}

void VisionOnes(FlatLayout& f, const std::string& name, int64_t n) {
  f.Add(name, {n}, Init::kOnes, 0, false);
}

std::string VisionBlock(int64_t i) { return "v_block" + std::to_string(i) + "."; }

// Step 2 helper: bidirectional multi-head self-attention over the patches. h [b, P, dv].
at::Tensor PatchAttention(const ProxyVision& v, const Weights& W, const std::string& p, const at::Tensor& h) {
  const int64_t b = h.size(0), n = h.size(1), hd = v.hidden / v.heads;
  at::Tensor qkv = W.Lin(p + "qkv", h).view({b, n, 3, v.heads, hd}).permute({2, 0, 3, 1, 4});  // [3,b,H,P,hd]
  at::Tensor att =
      at::softmax(at::matmul(qkv[0], qkv[1].transpose(-1, -2)) / std::sqrt(static_cast<double>(hd)), -1);
  at::Tensor o = at::matmul(att, qkv[2]).permute({0, 2, 1, 3}).reshape({b, n, v.hidden});
  return W.Lin(p + "o", o);
}

}  // namespace

void AddVisionTower(UnitLayout& u, const ProxySpec& s) {
  const ProxyVision& v = s.vision;
  const int64_t grid = v.image / v.patch, merged = v.merge * v.merge * v.hidden;
  VisionMat(u.dense, "v_patch", v.hidden, v.patch * v.patch * 3);
  u.dense.Add("v_pos", {grid * grid, v.hidden}, Init::kNormal, 0.02, false);
  for (int64_t i = 0; i < v.blocks; ++i) {
    VisionOnes(u.dense, VisionBlock(i) + "norm1", v.hidden);
    VisionMat(u.dense, VisionBlock(i) + "qkv", 3 * v.hidden, v.hidden);
    VisionMat(u.dense, VisionBlock(i) + "o", v.hidden, v.hidden);
    VisionOnes(u.dense, VisionBlock(i) + "norm2", v.hidden);
    VisionMat(u.dense, VisionBlock(i) + "fc1", v.inter, v.hidden);
    VisionMat(u.dense, VisionBlock(i) + "fc2", v.hidden, v.inter);
  }
  VisionOnes(u.dense, "v_merge_norm", merged);
  VisionMat(u.dense, "v_proj1", s.hidden, merged);
  VisionMat(u.dense, "v_proj2", s.hidden, s.hidden);
}

at::Tensor VisionForward(const ProxySpec& s, const Weights& W, const at::Tensor& images) {
  const ProxyVision& v = s.vision;
  const int64_t b = images.size(0), p = v.patch, g = v.image / p, m = v.merge, gm = g / m;
  // Step 1: patches in row-major grid order, each flattened as (row, column, channel), embedded.
  at::Tensor patches =
      images.view({b, g, p, g, p, 3}).permute({0, 1, 3, 2, 4, 5}).reshape({b, g * g, p * p * 3});
  at::Tensor h = W.Lin("v_patch", patches) + W["v_pos"];
  // Step 2: pre-norm ViT blocks.
  for (int64_t i = 0; i < v.blocks; ++i) {
    h = h + PatchAttention(v, W, VisionBlock(i), Rms(h, W[VisionBlock(i) + "norm1"]));
    h = h + W.Lin(VisionBlock(i) + "fc2",
                  at::gelu(W.Lin(VisionBlock(i) + "fc1", Rms(h, W[VisionBlock(i) + "norm2"]))));
  }
  // Step 3: spatial merge: each m x m square of patches becomes one token of m*m*dv values.
  at::Tensor merged =
      h.view({b, gm, m, gm, m, v.hidden}).permute({0, 1, 3, 2, 4, 5}).reshape({b, gm * gm, m * m * v.hidden});
  // Step 4: projector into the LM (norm, linear, GELU, linear).
  return W.Lin("v_proj2", at::gelu(W.Lin("v_proj1", Rms(merged, W["v_merge_norm"]))));
}

}  // namespace onboard::backends
