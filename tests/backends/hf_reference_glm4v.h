// Independent reference for GLM-4.5V's image path (tests only; shares no code with backends/): the
// vision tower (transformers' Glm4vVisionModel) and get_rope_index for one image, as plain loops in
// double over the values the test wrote, one patch / head / channel at a time:
//   Conv3d patch embed; RMSNorm; learned positions resampled by bicubic grid_sample (align_corners
//   False: source = (g + 1) * size / 2 - 1/2, cubic convolution A = -0.75, border = clamped taps);
//   blocks with the 2D vision RoPE (per head: dims [0, hd/4) at the patch row, [hd/4, hd/2) at its
//   column, theta 10000 over hd/2, rotate-half over the head) and full attention within a frame;
//   post RMSNorm; Conv2d merge x merge downsample; merger (Linear, LayerNorm, erf GELU, SwiGLU).
// Shapes: Mat [rows][features]; pixel rows [C*T*P*P] in Conv3d weight order (c, t, i, j).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::hftest {

struct VisionRefOptions {
  bool no_rope = false;  // negative control: blocks without the 2D vision RoPE
};

class VisionReference {
 public:
  // `c` holds model.visual.* tensors; `vc` is the vision_config.
  VisionReference(const Checkpoint& c, const nlohmann::json& vc, VisionRefOptions o = {})
      : c_(c), vc_(vc), o_(o) {}

  // pixels [t*h*w][C*T*P*P] -> features [t*h*w/m^2][out_hidden].
  std::vector<std::vector<double>> Features(const std::vector<std::vector<double>>& px, int64_t t, int64_t gh,
                                            int64_t gw) const {
    using Mat = std::vector<std::vector<double>>;
    const int64_t hid = vc_["hidden_size"], out = vc_["out_hidden_size"], m = vc_["spatial_merge_size"];
    const int64_t n = t * gh * gw;
    // Patch coordinates in the processor's order.
    std::vector<int64_t> row, col;
    for (int64_t f = 0; f < t; ++f)
      for (int64_t hb = 0; hb < gh / m; ++hb)
        for (int64_t wb = 0; wb < gw / m; ++wb)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < m; ++j) {
              row.push_back(hb * m + i);
              col.push_back(wb * m + j);
            }
    Mat x;
    for (int64_t p = 0; p < n; ++p) {
      std::vector<double> e = Lin("patch_embed.proj.weight", px[size_t(p)], hid, "patch_embed.proj.bias");
      e = Rms(e, "post_conv_layernorm.weight");
      for (int64_t k = 0; k < hid; ++k) e[size_t(k)] += Bicubic(row[size_t(p)], col[size_t(p)], gh, gw, k);
      x.push_back(e);
    }
    for (int64_t b = 0; b < int64_t(vc_["depth"]); ++b) Block(b, x, row, col, t);
    for (std::vector<double>& e : x) e = Rms(e, "post_layernorm.weight");
    Mat feats;
    for (int64_t g = 0; g < n / (m * m); ++g) {
      std::vector<double> y(static_cast<size_t>(out));
      for (int64_t o = 0; o < out; ++o) {
        double s = W("downsample.bias")[size_t(o)];
        for (int64_t ch = 0; ch < hid; ++ch)
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < m; ++j)
              s += W("downsample.weight")[size_t(((o * hid + ch) * m + i) * m + j)] *
                   x[size_t(g * m * m + i * m + j)][size_t(ch)];
        y[size_t(o)] = s;
      }
      feats.push_back(Merger(y));
    }
    return feats;
  }

 private:
  const std::vector<double>& W(const std::string& n) const { return c_.W("model.visual." + n); }
  std::vector<double> Lin(const std::string& w, const std::vector<double>& x, int64_t out,
                          const std::string& bias = "") const {
    std::vector<double> y(size_t(out), 0.0);
    for (int64_t o = 0; o < out; ++o) {
      for (size_t i = 0; i < x.size(); ++i) y[size_t(o)] += W(w)[size_t(o) * x.size() + i] * x[i];
      if (!bias.empty()) y[size_t(o)] += W(bias)[size_t(o)];
    }
    return y;
  }
  std::vector<double> Rms(const std::vector<double>& x, const std::string& w) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    const double r = 1.0 / std::sqrt(ss / double(x.size()) + double(vc_["rms_norm_eps"]));
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = W(w)[i] * x[i] * r;
    return y;
  }
  std::vector<double> SwiGlu(const std::string& p, const std::vector<double>& x, int64_t inter) const {
    const std::vector<double> g = Lin(p + "gate_proj.weight", x, inter),
                              u = Lin(p + "up_proj.weight", x, inter);
    std::vector<double> a(static_cast<size_t>(inter));
    for (int64_t i = 0; i < inter; ++i)
      a[size_t(i)] = g[size_t(i)] / (1 + std::exp(-g[size_t(i)])) * u[size_t(i)];
    return Lin(p + "down_proj.weight", a, int64_t(x.size()));
  }
  static double Cubic(double d) {  // cubic convolution kernel, A = -0.75, distance |d| < 2
    const double A = -0.75, x = std::fabs(d);
    if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
    return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  }
  // Channel k of the learned position grid sampled at patch (r, c)'s centre of a gh x gw grid.
  double Bicubic(int64_t r, int64_t c, int64_t gh, int64_t gw, int64_t k) const {
    const int64_t side = int64_t(std::lround(std::sqrt(
        double(W("embeddings.position_embedding.weight").size() / size_t(int64_t(vc_["hidden_size"]))))));
    const double gx = (double(c) + 0.5) / double(gw) * 2 - 1, gy = (double(r) + 0.5) / double(gh) * 2 - 1;
    const double sx = ((gx + 1) * double(side) - 1) / 2, sy = ((gy + 1) * double(side) - 1) / 2;
    const double x0 = std::floor(sx), y0 = std::floor(sy);
    double v = 0;
    for (int64_t a = -1; a <= 2; ++a)
      for (int64_t b = -1; b <= 2; ++b) {
        const int64_t yy = std::clamp<int64_t>(int64_t(y0) + a, 0, side - 1);
        const int64_t xx = std::clamp<int64_t>(int64_t(x0) + b, 0, side - 1);
        v += Cubic(sy - (y0 + double(a))) * Cubic(sx - (x0 + double(b))) *
             W("embeddings.position_embedding.weight")[size_t((yy * side + xx) * int64_t(vc_["hidden_size"]) +
                                                              k)];
      }
    return v;
  }
  // Rotate-half over one head's q or k at patch (r, c): dims [0, hd/4) row, [hd/4, hd/2) column.
  void Rope2d(std::vector<double>& v, int64_t r, int64_t c) const {
    if (o_.no_rope) return;
    const int64_t hd = int64_t(v.size()), q = hd / 4;
    const std::vector<double> x = v;
    for (int64_t d = 0; d < hd; ++d) {
      const int64_t e = d % (hd / 2);
      const double pos = e < q ? double(r) : double(c);
      const double a = pos * std::pow(10000.0, -2.0 * double(e % q) / double(hd / 2));
      const double rot = d < hd / 2 ? -x[size_t(d + hd / 2)] : x[size_t(d - hd / 2)];
      v[size_t(d)] = x[size_t(d)] * std::cos(a) + rot * std::sin(a);
    }
  }
  void Block(int64_t b, std::vector<std::vector<double>>& x, const std::vector<int64_t>& row,
             const std::vector<int64_t>& col, int64_t t) const {
    const std::string p = "blocks." + std::to_string(b) + ".";
    const int64_t hid = vc_["hidden_size"], H = vc_["num_heads"], hd = hid / H, n = int64_t(x.size()),
                  per = n / t;
    std::vector<std::vector<double>> qkv,
        att(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(hid)));
    for (int64_t i = 0; i < n; ++i)
      qkv.push_back(Lin(p + "attn.qkv.weight", Rms(x[size_t(i)], p + "norm1.weight"), 3 * hid,
                        vc_.value("attention_bias", false) ? p + "attn.qkv.bias" : ""));
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n; ++i) {
        std::vector<double> q(qkv[size_t(i)].begin() + h * hd, qkv[size_t(i)].begin() + (h + 1) * hd);
        Rope2d(q, row[size_t(i)], col[size_t(i)]);
        const int64_t f0 = (i / per) * per;
        std::vector<double> s(static_cast<size_t>(per));
        double mx = -1e300, z = 0;
        for (int64_t j = 0; j < per; ++j) {
          const std::vector<double>& kr = qkv[size_t(f0 + j)];
          std::vector<double> k(kr.begin() + hid + h * hd, kr.begin() + hid + (h + 1) * hd);
          Rope2d(k, row[size_t(f0 + j)], col[size_t(f0 + j)]);
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += q[size_t(d)] * k[size_t(d)];
          mx = std::max(mx, s[size_t(j)] = dot / std::sqrt(double(hd)));
        }
        for (double& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j < per; ++j)
          for (int64_t d = 0; d < hd; ++d)
            att[size_t(i)][size_t(h * hd + d)] +=
                s[size_t(j)] / z * qkv[size_t(f0 + j)][size_t(2 * hid + h * hd + d)];
      }
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> o = Lin(p + "attn.proj.weight", att[size_t(i)], hid);
      for (int64_t k = 0; k < hid; ++k) x[size_t(i)][size_t(k)] += o[size_t(k)];
      const std::vector<double> mlp =
          SwiGlu(p + "mlp.", Rms(x[size_t(i)], p + "norm2.weight"), vc_["out_hidden_size"]);
      for (int64_t k = 0; k < hid; ++k) x[size_t(i)][size_t(k)] += mlp[size_t(k)];
    }
  }
  std::vector<double> Merger(const std::vector<double>& y) const {
    const int64_t out = int64_t(y.size());
    std::vector<double> a = Lin("merger.proj.weight", y, out);
    double mean = 0, var = 0;
    for (double e : a) mean += e / double(out);
    for (double e : a) var += (e - mean) * (e - mean) / double(out);
    for (int64_t k = 0; k < out; ++k) {
      const double ln =
          (a[size_t(k)] - mean) / std::sqrt(var + 1e-5) * W("merger.post_projection_norm.weight")[size_t(k)] +
          W("merger.post_projection_norm.bias")[size_t(k)];
      a[size_t(k)] = 0.5 * ln * (1 + std::erf(ln / std::sqrt(2.0)));
    }
    return SwiGlu("merger.", a, vc_["intermediate_size"]);
  }

  const Checkpoint& c_;
  nlohmann::json vc_;
  VisionRefOptions o_;
};

}  // namespace onboard::hftest
