// Independent reference for kimi_k3's MoonViT image path (tests only; shares no code with backends/):
// Kimi-VL's MoonVitPretrainedModel + the patch-merger projector (Kimi-K2.5's mm_projector), as plain
// loops in double over the values the test wrote, one patch / head / channel at a time:
//   Conv2d patch embed (+bias); the learned [ph, pw, hd] position grid, as is for an image of that grid,
//   else bicubic-resampled (F.interpolate, align_corners False: source = (dst + 0.5) * in / out - 0.5,
//   cubic convolution A = -0.75, taps clamped to the edge); blocks: LayerNorm, wqkv, the 2D RoPE (complex
//   pair i of a head turns by column * 10000^(-4 floor(i/2) / hd) for even i, by row * the same for odd i),
//   softmax(q.k / sqrt(hd)) over the whole image, wo, LayerNorm, fc0, tanh-GELU, fc1; final LayerNorm;
//   2 x 2 windows window-major; per patch pre_norm, the window concatenated, linear, erf GELU, linear.
// Negative controls (options): no 2D RoPE; merging 4 consecutive row-major patches instead of windows.
// Shapes: Mat [rows][features]; pixel rows [C*P*P] in Conv2d weight order (c, i, j).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::hftest {

struct MoonVitRefOptions {
  bool no_rope = false;          // blocks without the 2D RoPE
  bool merge_row_major = false;  // merge groups of 4 consecutive row-major patches
};

class MoonVitReference {
 public:
  using Vec = std::vector<double>;
  using Mat = std::vector<Vec>;
  MoonVitReference(const Checkpoint& c, const nlohmann::json& vc, MoonVitRefOptions o = {})
      : c_(c), vc_(vc), o_(o), hd_(int64_t(vc["hidden_size"])) {}

  // pixels [gh*gw][C*P*P], row-major over the grid -> features [gh*gw/4][out_hidden].
  Mat Features(const Mat& px, int64_t gh, int64_t gw) const {
    const int64_t n = gh * gw;
    Mat x;
    for (int64_t p = 0; p < n; ++p) {
      Vec e = Lin("vision_tower.patch_embed.proj", px[size_t(p)], hd_);
      for (int64_t k = 0; k < hd_; ++k) e[size_t(k)] += Position(p / gw, p % gw, gh, gw, k);
      x.push_back(e);
    }
    for (int64_t b = 0; b < int64_t(vc_["depth"]); ++b) Block(b, x, gw);
    for (Vec& e : x) e = Ln(e, "vision_tower.encoder.final_layernorm", 1e-5);
    Mat feats;
    for (int64_t wr = 0; wr < gh / 2; ++wr)
      for (int64_t wc = 0; wc < gw / 2; ++wc) {
        Vec cat;
        for (int64_t i = 0; i < 2; ++i)
          for (int64_t j = 0; j < 2; ++j) {
            const int64_t g = wr * (gw / 2) + wc;
            const int64_t p = o_.merge_row_major ? g * 4 + i * 2 + j : (wr * 2 + i) * gw + wc * 2 + j;
            const Vec y = Ln(x[size_t(p)], "mm_projector.pre_norm", 1e-5);
            cat.insert(cat.end(), y.begin(), y.end());
          }
        Vec h = Lin("mm_projector.proj.0", cat, int64_t(cat.size()));
        for (double& e : h) e = 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)));
        feats.push_back(Lin("mm_projector.proj.2", h, int64_t(vc_["out_hidden_size"])));
      }
    return feats;
  }

 private:
  const Vec& W(const std::string& n) const { return c_.W(n); }
  Vec Lin(const std::string& p, const Vec& x, int64_t out) const {
    Vec y(size_t(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i) y[size_t(o)] += W(p + ".weight")[size_t(o) * x.size() + i] * x[i];
      y[size_t(o)] += W(p + ".bias")[size_t(o)];
    }
    return y;
  }
  Vec Ln(const Vec& x, const std::string& p, double eps) const {
    double mean = 0, var = 0;
    for (double e : x) mean += e / double(x.size());
    for (double e : x) var += (e - mean) * (e - mean) / double(x.size());
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = (x[i] - mean) / std::sqrt(var + eps) * W(p + ".weight")[i] + W(p + ".bias")[i];
    return y;
  }
  static double Cubic(double d) {  // cubic convolution kernel, A = -0.75, |d| < 2
    const double A = -0.75, x = std::fabs(d);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  }
  // Channel k of the position grid at patch (r, c) of a gh x gw image.
  double Position(int64_t r, int64_t c, int64_t gh, int64_t gw, int64_t k) const {
    const int64_t ph = vc_["init_pos_emb_height"], pw = vc_["init_pos_emb_width"];
    const Vec& t = W("vision_tower.patch_embed.pos_emb.weight");
    auto at = [&](int64_t y, int64_t x) {
      y = std::min(std::max<int64_t>(y, 0), ph - 1);
      x = std::min(std::max<int64_t>(x, 0), pw - 1);
      return t[size_t((y * pw + x) * hd_ + k)];
    };
    if (gh == ph && gw == pw) return at(r, c);
    const double sy = (double(r) + 0.5) * double(ph) / double(gh) - 0.5;
    const double sx = (double(c) + 0.5) * double(pw) / double(gw) - 0.5;
    const int64_t y0 = int64_t(std::floor(sy)), x0 = int64_t(std::floor(sx));
    double s = 0;
    for (int64_t a = -1; a <= 2; ++a)
      for (int64_t b = -1; b <= 2; ++b)
        s += Cubic(sy - double(y0 + a)) * Cubic(sx - double(x0 + b)) * at(y0 + a, x0 + b);
    return s;
  }
  // Rotates pair i of one head's vector in place for the patch at (row, col).
  void Rope(Vec& v, int64_t off, int64_t hd, int64_t row, int64_t col) const {
    if (o_.no_rope) return;
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double ang = double(i % 2 == 0 ? col : row) / std::pow(10000.0, 4.0 * double(i / 2) / double(hd));
      const double a = v[size_t(off + 2 * i)], b = v[size_t(off + 2 * i + 1)];
      v[size_t(off + 2 * i)] = a * std::cos(ang) - b * std::sin(ang);
      v[size_t(off + 2 * i + 1)] = a * std::sin(ang) + b * std::cos(ang);
    }
  }
  void Block(int64_t b, Mat& x, int64_t gw) const {
    const std::string p = "vision_tower.encoder.blocks." + std::to_string(b) + ".";
    const int64_t n = int64_t(x.size()), heads = vc_["num_heads"], hd = hd_ / heads;
    Mat q, k, v;
    for (int64_t s = 0; s < n; ++s) {
      const Vec qkv = Lin(p + "wqkv", Ln(x[size_t(s)], p + "norm0", 1e-5), 3 * hd_);
      q.emplace_back(qkv.begin(), qkv.begin() + hd_);
      k.emplace_back(qkv.begin() + hd_, qkv.begin() + 2 * hd_);
      v.emplace_back(qkv.begin() + 2 * hd_, qkv.end());
      for (int64_t h = 0; h < heads; ++h) {
        Rope(q.back(), h * hd, hd, s / gw, s % gw);
        Rope(k.back(), h * hd, hd, s / gw, s % gw);
      }
    }
    for (int64_t s = 0; s < n; ++s) {
      Vec o(size_t(hd_), 0.0);
      for (int64_t h = 0; h < heads; ++h) {
        Vec sc(static_cast<size_t>(n));
        double mx = -1e300, z = 0;
        for (int64_t t = 0; t < n; ++t) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e)
            d += q[size_t(s)][size_t(h * hd + e)] * k[size_t(t)][size_t(h * hd + e)];
          sc[size_t(t)] = d / std::sqrt(double(hd));
          mx = std::max(mx, sc[size_t(t)]);
        }
        for (double& e : sc) z += (e = std::exp(e - mx));
        for (int64_t t = 0; t < n; ++t)
          for (int64_t e = 0; e < hd; ++e)
            o[size_t(h * hd + e)] += sc[size_t(t)] / z * v[size_t(t)][size_t(h * hd + e)];
      }
      const Vec a = Lin(p + "wo", o, hd_);
      for (int64_t e = 0; e < hd_; ++e) x[size_t(s)][size_t(e)] += a[size_t(e)];
    }
    for (Vec& e : x) {
      Vec m = Lin(p + "mlp.fc0", Ln(e, p + "norm1", 1e-5), int64_t(vc_["intermediate_size"]));
      for (double& u : m) u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u)));
      const Vec y = Lin(p + "mlp.fc1", m, hd_);
      for (int64_t i = 0; i < hd_; ++i) e[size_t(i)] += y[size_t(i)];
    }
  }

  const Checkpoint& c_;
  nlohmann::json vc_;
  MoonVitRefOptions o_;
  int64_t hd_;
};

}  // namespace onboard::hftest
