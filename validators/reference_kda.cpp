// The KDA recurrence, token by token (plain and obviously right). Per value head hv (q/k head
// h = hv / (HV/H)), state S[K][V]:
//   q <- q / sqrt(sum q^2 + 1e-6) * K^-1/2;  k <- k / sqrt(sum k^2 + 1e-6)   (when normalize_qk)
//   S <- Diag(exp(g_t)) S
//   u <- v_t - S^T k_t
//   S <- S + beta_t k_t u^T          (beta_t = sigmoid(beta input) when beta_sigmoid)
//   o_t = S^T q_t
#include "validators/reference_kda.h"

#include <cmath>
#include <random>

namespace onboard::validators {

template <typename Real>
Real KdaLogDecay(GateForm form, double lower_bound, Real a_log, Real dt_bias, Real g_in) {
  switch (form) {
    case GateForm::kNone:
      return g_in;
    case GateForm::kOriginal: {
      const Real z = g_in + dt_bias;
      const Real softplus = z > Real(20) ? z : std::log1p(std::exp(z));
      return -std::exp(a_log) * softplus;
    }
    case GateForm::kBounded: {
      const Real z = std::exp(a_log) * (g_in + dt_bias);
      return static_cast<Real>(lower_bound) / (Real(1) + std::exp(-z));
    }
  }
  return g_in;
}

template <typename Real>
KdaResult<Real> ReferenceKda(const codegen::KdaSpec& spec, const KdaInputs& in) {
  const int64_t B = in.batch, T = in.seq, H = spec.num_heads, HV = spec.num_v_heads;
  const int64_t K = spec.head_dim, V = spec.v_head_dim, group = HV / H;
  KdaResult<Real> out;
  out.o.assign(B * T * HV * V, Real(0));
  out.final_state.assign(B * HV * K * V, Real(0));
  std::vector<Real> S(K * V), q(K), k(K), u(V);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hv = 0; hv < HV; ++hv) {
      const int64_t h = hv / group;
      for (int64_t i = 0; i < K * V; ++i) {
        S[i] = in.initial_state.empty() ? Real(0) : Real(in.initial_state[(b * HV + hv) * K * V + i]);
      }
      for (int64_t t = 0; t < T; ++t) {
        // Normalise q and k.
        Real qq = 0, kk = 0;
        for (int64_t d = 0; d < K; ++d) {
          q[d] = in.q[((b * T + t) * H + h) * K + d];
          k[d] = in.k[((b * T + t) * H + h) * K + d];
          qq += q[d] * q[d];
          kk += k[d] * k[d];
        }
        const Real qn = spec.normalize_qk ? Real(1) / std::sqrt(qq + Real(1e-6)) : Real(1);
        const Real kn = spec.normalize_qk ? Real(1) / std::sqrt(kk + Real(1e-6)) : Real(1);
        const Real scale = Real(1) / std::sqrt(static_cast<Real>(K));
        for (int64_t d = 0; d < K; ++d) {
          q[d] *= qn * scale;
          k[d] *= kn;
        }
        // Decay.
        for (int64_t d = 0; d < K; ++d) {
          const Real a = spec.gate_form == GateForm::kNone ? Real(0) : Real(in.a_log[hv]);
          const Real bias = in.dt_bias.empty() ? Real(0) : Real(in.dt_bias[hv * K + d]);
          const Real gin = in.g[((b * T + t) * HV + hv) * K + d];
          const Real decay = std::exp(KdaLogDecay<Real>(spec.gate_form, spec.gate_lower_bound, a, bias, gin));
          for (int64_t e = 0; e < V; ++e) S[d * V + e] *= decay;
        }
        // Delta update.
        const Real beta_in = in.beta[(b * T + t) * HV + hv];
        const Real beta = spec.beta_sigmoid ? Real(1) / (Real(1) + std::exp(-beta_in)) : beta_in;
        for (int64_t e = 0; e < V; ++e) {
          Real sk = 0;
          for (int64_t d = 0; d < K; ++d) sk += S[d * V + e] * k[d];
          u[e] = Real(in.v[((b * T + t) * HV + hv) * V + e]) - sk;
        }
        for (int64_t d = 0; d < K; ++d)
          for (int64_t e = 0; e < V; ++e) S[d * V + e] += beta * k[d] * u[e];
        // Output.
        for (int64_t e = 0; e < V; ++e) {
          Real acc = 0;
          for (int64_t d = 0; d < K; ++d) acc += S[d * V + e] * q[d];
          out.o[((b * T + t) * HV + hv) * V + e] = acc;
        }
      }
      for (int64_t i = 0; i < K * V; ++i) out.final_state[(b * HV + hv) * K * V + i] = S[i];
    }
  }
  return out;
}

KdaInputs RandomKdaInputs(const codegen::KdaSpec& spec, int64_t batch, int64_t seq, bool with_state,
                          uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  const int64_t H = spec.num_heads, HV = spec.num_v_heads, K = spec.head_dim, V = spec.v_head_dim;
  KdaInputs in;
  in.batch = batch;
  in.seq = seq;
  auto fill = [&](std::vector<float>& x, int64_t n, float mean, float sd) {
    x.resize(n);
    for (float& e : x) e = mean + sd * normal(rng);
  };
  fill(in.q, batch * seq * H * K, 0, 1);
  fill(in.k, batch * seq * H * K, 0, 1);
  fill(in.v, batch * seq * HV * V, 0, 1);
  if (spec.gate_form == GateForm::kNone) {
    in.g.resize(batch * seq * HV * K);
    for (float& e : in.g) e = -0.5f * uni(rng);  // log decay in (-0.5, 0]
  } else {
    fill(in.g, batch * seq * HV * K, 0, 1);
  }
  in.beta.resize(batch * seq * HV);
  for (float& e : in.beta) e = 0.05f + 0.9f * uni(rng);
  if (spec.beta_sigmoid) {
    for (float& e : in.beta) e = std::log(e / (1.0f - e));  // the logit of the same beta
  }
  in.a_log.resize(HV);
  for (float& e : in.a_log) e = -1.0f + 1.5f * uni(rng);
  fill(in.dt_bias, HV * K, -2.0f, 1.0f);  // mild decays: the state carries across many chunks
  if (with_state) fill(in.initial_state, batch * HV * K * V, 0, 0.3f);
  return in;
}

template float KdaLogDecay<float>(GateForm, double, float, float, float);
template double KdaLogDecay<double>(GateForm, double, double, double, double);
template KdaResult<float> ReferenceKda<float>(const codegen::KdaSpec&, const KdaInputs&);
template KdaResult<double> ReferenceKda<double>(const codegen::KdaSpec&, const KdaInputs&);

}  // namespace onboard::validators
