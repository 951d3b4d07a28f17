// Reference::Kda: the Kimi-Linear KDA token mixer in loops over double, written from
// shared/reference/kernels.md (the recurrence, the original gate, L2 norm with eps 1e-6 inside the
// root) and the model's modeling_kimi.py (short convs with SiLU, low-rank gates, sigmoid-gated
// per-head RMSNorm). Independent of backends/hf_kda_layer.cpp and backends/kda_chunked.cpp.
// kimi_k3: gate_lower_bound lb gives the bounded decay lb * sigmoid(exp(A_log) * (f + dt_bias)) (fla's
// safe gate) and use_full_rank_gate the output gate sigmoid(g_proj x) in place of g_b(g_a x).
// Shapes: x[t][i]; per head state S[dk][dv]; conv weight [D][1][K] row-major.
#pragma once

#include "tests/backends/hf_reference_forward.h"

namespace onboard::hftest {

inline Mat Reference::Kda(const std::string& p, const Mat& x) const {
  const auto& lin = cfg_["linear_attn_config"];
  const int64_t H = lin["num_heads"], d = lin["head_dim"], K = lin["short_conv_kernel_size"], D = H * d;
  const int64_t h = cfg_["hidden_size"];
  const size_t T = x.size();
  const std::string a = p + "self_attn.";
  // Step 1: projections, causal depthwise conv (tap i sees x[t - (K-1) + i]), SiLU.
  auto conv = [&](const char* proj, const char* cw) {
    Mat y(T, Vec(static_cast<size_t>(D), 0.0)), in;
    for (size_t t = 0; t < T; ++t) in.push_back(MatVec(a + proj + ".weight", x[t], D));
    const std::vector<double>& w = c_.W(a + cw + ".weight");
    for (size_t t = 0; t < T; ++t)
      for (int64_t ch = 0; ch < D; ++ch) {
        double s = 0;
        for (int64_t i = 0; i < K; ++i) {
          const int64_t src = int64_t(t) - (K - 1) + i;
          if (src >= 0) s += w[size_t(ch * K + i)] * in[size_t(src)][size_t(ch)];
        }
        if (o_.kda_no_conv) s = in[t][size_t(ch)];
        y[t][size_t(ch)] = s / (1 + std::exp(-s));
      }
    return y;
  };
  const Mat q = conv("q_proj", "q_conv1d"), k = conv("k_proj", "k_conv1d"), v = conv("v_proj", "v_conv1d");
  Mat out(T, Vec(static_cast<size_t>(D), 0.0));
  for (int64_t hd = 0; hd < H; ++hd) {
    std::vector<Vec> S(static_cast<size_t>(d), Vec(static_cast<size_t>(d), 0.0));  // S[key][value]
    const double A = std::exp(c_.W(a + "A_log")[size_t(hd)]);
    for (size_t t = 0; t < T; ++t) {
      // Step 2: gates of this token and head.
      const Vec f = MatVec(a + "f_b_proj.weight", MatVec(a + "f_a_proj.weight", x[t], d), D);
      const double beta = 1 / (1 + std::exp(-MatVec(a + "b_proj.weight", x[t], H)[size_t(hd)]));
      Vec qh(q[t].begin() + hd * d, q[t].begin() + (hd + 1) * d),
          kh(k[t].begin() + hd * d, k[t].begin() + (hd + 1) * d);
      double qq = 0, kk = 0;
      for (int64_t i = 0; i < d; ++i) qq += qh[i] * qh[i], kk += kh[i] * kh[i];
      for (int64_t i = 0; i < d; ++i) {
        qh[i] = qh[i] / std::sqrt(qq + 1e-6) / std::sqrt(double(d));
        kh[i] = kh[i] / std::sqrt(kk + 1e-6);
      }
      // Step 3: decay, delta update, read-out.
      for (int64_t i = 0; i < d; ++i) {
        const double raw =
            f[size_t(hd * d + i)] + (o_.kda_drop_dt_bias ? 0.0 : c_.W(a + "dt_bias")[size_t(hd * d + i)]);
        const double softplus = raw > 20 ? raw : std::log1p(std::exp(raw));
        const double lb = lin.value("gate_lower_bound", 0.0);
        const double g = lb < 0 && !o_.k3_softplus_decay ? lb / (1 + std::exp(-A * raw)) : -A * softplus;
        for (double& e : S[size_t(i)]) e *= std::exp(g);
      }
      for (int64_t j = 0; j < d; ++j) {
        double pred = 0;
        for (int64_t i = 0; i < d; ++i) pred += S[size_t(i)][size_t(j)] * kh[i];
        const double u = v[t][size_t(hd * d + j)] - pred;
        for (int64_t i = 0; i < d; ++i) S[size_t(i)][size_t(j)] += beta * kh[i] * u;
      }
      Vec o(static_cast<size_t>(d), 0.0);
      for (int64_t j = 0; j < d; ++j)
        for (int64_t i = 0; i < d; ++i) o[size_t(j)] += S[size_t(i)][size_t(j)] * qh[i];
      // Step 4: per-head RMSNorm times the sigmoid output gate.
      const Vec g = c_.Has(a + "g_proj.weight")
                        ? MatVec(a + "g_proj.weight", x[t], D)
                        : MatVec(a + "g_b_proj.weight", MatVec(a + "g_a_proj.weight", x[t], d), D);
      const Vec n = NormVec(o, c_.W(a + "o_norm.weight"), Eps());
      for (int64_t j = 0; j < d; ++j)
        out[t][size_t(hd * d + j)] = n[size_t(j)] / (1 + std::exp(-g[size_t(hd * d + j)]));
    }
  }
  Mat y;
  for (const Vec& o : out) y.push_back(MatVec(a + "o_proj.weight", o, h));
  return y;
}

}  // namespace onboard::hftest
