// DSA reference in fp64, plain loops:
//   I[t,s] = sum_j w[t,j] * relu(q_I[t,j] . k_I[s])           for s <= t
//   S_t    = first min(topk, t+1) keys ordered by (I desc, s asc), then sorted ascending
//   o[t,h] = sum_{s in S_t} softmax_s(scale * q[t,h] . k[s,kh]) v[s,kh]   (+ exp(sink[h]) in the
//            denominator); o[t,h] <- o[t,h] v_up[h] when v_up_dim > 0 (absorbed MLA's W_UV);
//            then times sigmoid(gate[t,h]) when gated (on the up-projected output)
#include "validators/reference_dsa.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace onboard::validators {

std::vector<int32_t> ReferenceDsaIndices(const codegen::DsaSpec& spec, const DsaInputs& in) {
  const int64_t B = in.batch, T = in.seq, HI = spec.index_heads, DI = spec.index_head_dim;
  const int64_t K = spec.topk;
  std::vector<int32_t> out(B * T * K, -1);
  std::vector<double> score;
  std::vector<int32_t> order;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      score.assign(t + 1, 0.0);
      for (int64_t s = 0; s <= t; ++s) {
        for (int64_t j = 0; j < HI; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < DI; ++d) {
            dot += double(in.index_q[((b * T + t) * HI + j) * DI + d]) *
                   double(in.index_k[(b * T + s) * DI + d]);
          }
          score[s] += double(in.index_w[(b * T + t) * HI + j]) * std::max(dot, 0.0);
        }
      }
      order.resize(t + 1);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t c) { return score[a] > score[c]; });
      const int64_t n = std::min<int64_t>(K, t + 1);
      std::sort(order.begin(), order.begin() + n);
      std::copy(order.begin(), order.begin() + n, out.begin() + (b * T + t) * K);
    }
  }
  return out;
}

std::vector<double> ReferenceDsaAttention(const codegen::DsaSpec& spec, const DsaInputs& in,
                                          const std::vector<int32_t>& indices) {
  const int64_t B = in.batch, T = in.seq, HQ = spec.num_heads, HKV = spec.num_kv_heads;
  const int64_t D = spec.head_dim, DV = spec.v_head_dim, K = spec.topk, G = HQ / HKV;
  const int64_t VO = spec.v_up_dim, OV = VO > 0 ? VO : DV;
  const double scale = spec.ResolvedScale();
  std::vector<double> o(B * T * HQ * OV, 0.0);
  std::vector<double> logit;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      const int32_t* sel = &indices[(b * T + t) * K];
      for (int64_t h = 0; h < HQ; ++h) {
        const int64_t kh = h / G;
        logit.clear();
        double mx = -INFINITY;
        for (int64_t i = 0; i < K && sel[i] >= 0; ++i) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) {
            dot += double(in.q[((b * T + t) * HQ + h) * D + d]) *
                   double(in.k[((b * T + sel[i]) * HKV + kh) * D + d]);
          }
          logit.push_back(dot * scale);
          mx = std::max(mx, logit.back());
        }
        if (spec.sink) mx = std::max(mx, double(in.sink[h]));
        double den = spec.sink ? std::exp(double(in.sink[h]) - mx) : 0.0;
        for (double& l : logit) {
          l = std::exp(l - mx);
          den += l;
        }
        std::vector<double> lat(DV, 0.0);
        for (size_t i = 0; i < logit.size(); ++i) {
          const float* vr = &in.v[((b * T + sel[i]) * HKV + kh) * DV];
          for (int64_t e = 0; e < DV; ++e) lat[e] += logit[i] / den * double(vr[e]);
        }
        double* orow = &o[((b * T + t) * HQ + h) * OV];
        if (VO > 0) {
          for (int64_t c = 0; c < DV; ++c)
            for (int64_t e = 0; e < VO; ++e) orow[e] += lat[c] * double(in.v_up[(h * DV + c) * VO + e]);
        } else {
          std::copy(lat.begin(), lat.end(), orow);
        }
        if (spec.output_gate) {
          for (int64_t e = 0; e < OV; ++e) {
            orow[e] /= 1.0 + std::exp(-double(in.gate[((b * T + t) * HQ + h) * OV + e]));
          }
        }
      }
    }
  }
  return o;
}

DsaReference ReferenceDsa(const codegen::DsaSpec& spec, const DsaInputs& in) {
  DsaReference r;
  r.indices = ReferenceDsaIndices(spec, in);
  r.o = ReferenceDsaAttention(spec, in, r.indices);
  return r;
}

DsaInputs RandomDsaInputs(const codegen::DsaSpec& spec, int64_t batch, int64_t seq, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, int64_t n, float sd) {
    x.resize(n);
    for (float& e : x) e = sd * normal(rng);
  };
  DsaInputs in;
  in.batch = batch;
  in.seq = seq;
  const int64_t BT = batch * seq;
  fill(in.q, BT * spec.num_heads * spec.head_dim, 1.0f);
  fill(in.k, BT * spec.num_kv_heads * spec.head_dim, 1.0f);
  fill(in.v, BT * spec.num_kv_heads * spec.v_head_dim, 1.0f);
  fill(in.index_q, BT * spec.index_heads * spec.index_head_dim, 1.0f);
  fill(in.index_k, BT * spec.index_head_dim, 1.0f);
  // Positive head weights scaled by HI^-1/2 DI^-1/2, as the model's projection would produce.
  const float w_scale = 1.0f / std::sqrt(float(spec.index_heads * spec.index_head_dim));
  in.index_w.resize(BT * spec.index_heads);
  for (float& w : in.index_w) w = w_scale * (0.5f + std::fabs(normal(rng)));
  const int64_t ov = spec.v_up_dim > 0 ? spec.v_up_dim : spec.v_head_dim;
  if (spec.output_gate) fill(in.gate, BT * spec.num_heads * ov, 1.0f);
  // W_UV-like weights: unit-variance outputs for unit-variance latents.
  if (spec.v_up_dim > 0)
    fill(in.v_up, spec.num_heads * spec.v_head_dim * spec.v_up_dim, 1.0f / std::sqrt(float(spec.v_head_dim)));
  if (spec.sink) fill(in.sink, spec.num_heads, 1.0f);
  return in;
}

}  // namespace onboard::validators
