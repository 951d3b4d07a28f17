// Generated CPU KDA forward: chunked gated delta rule (WY/UT form, forward substitution), state carried
// across chunks, parallel over (batch, value head). Shapes are compile-time constants of the template.
//
// Per chunk of C rows (rows past T are zero: k = v = 0, beta = 0, g = 0, which changes nothing):
//   Step 1  load q,k (L2-normalised, q * K^-1/2), v, beta; log decay gl from the gate form
//   Step 2  G = cumsum(gl) in fp64 (differences of large G lose digits in fp32); eg = exp(gl)
//   Step 3  Qg = q*exp(G), Kg = k*exp(G), Kl = k*exp(G_last - G), gamma = exp(G_last)
//   Step 4  Akk[c,i] = sum_d k_c k_i exp(G_c - G_i) (i < c), Aqk the same with q_c (i <= c):
//           off-diagonal 16-row sub-chunks anchored at the later sub-chunk's first row (both factors
//           <= 1, never a future row); diagonal sub-chunks by running products of eg (factors <= 1),
//           or, for bounded gates (|lb| * 16 <= 80), by the same anchored GEMM (factors <= e^80)
//   Step 5  X = (I + Diag(beta) Akk)^-1 Diag(beta) by forward substitution
//   Step 6  W = X Kg, U = X V
//   Step 7  V' = U - W S;  O = Qg S + Aqk V';  S = Diag(gamma) S + Kl^T V'
#include "codegen/source_template.h"

namespace onboard::codegen {

std::string KdaCpuTemplate() {
  return R"CPP(
namespace onboard_gen {

constexpr int H = @H@, HV = @HV@, K = @K@, V = @V@, C = @C@;
constexpr int GROUP = HV / H;
constexpr int GATE = @GATE@;  // 0: g is the log decay; 1: original; 2: bounded
constexpr float LOWER_BOUND = @LB@;
constexpr bool NORMALIZE = @NORM@;
constexpr int KP = pad16(K), VP = pad16(V), CP = pad16(C);
constexpr int SUB = C < 16 ? C : 16;
constexpr int NSUB = C / SUB;
// Bounded gates decay by at most |lb| per step: over one sub-chunk exp(G_r0 - G_i) <= e^(|lb|*SUB) stays
// far inside fp32, so the diagonal sub-chunks can use the anchored GEMM too (else: running products).
constexpr bool DIAG_GEMM = GATE == 2 && -LOWER_BOUND * SUB <= 80.0f;

static inline float hsum(vf v) {
  float s = 0.0f;
  for (int i = 0; i < 16; ++i) s += v[i];
  return s;
}

static inline float dot_padded(const float* a, const float* b) {
  vf acc = {};
  for (int d = 0; d < KP; d += 16) acc += vload(a + d) * vload(b + d);
  return hsum(acc);
}

static inline float log_decay(float x, float a_exp, float bias) {
  if constexpr (GATE == 0) {
    return x;
  } else if constexpr (GATE == 1) {
    const float z = x + bias;
    const float sp = z > 20.0f ? z : std::log1p(std::exp(z));
    return -a_exp * sp;
  } else {
    const float z = a_exp * (x + bias);
    return LOWER_BOUND / (1.0f + fexp(-z));
  }
}

struct Scratch {
  std::vector<float> Q, Kx, Vx, gl, eg, Qg, Kg, Kl, gamma, KQa, KinvT, AB, Akk, Aqk, X, W, U, Vn, O, S, tmp;
  std::vector<double> G;
  std::vector<float> beta;
  Scratch()
      : Q(C * KP), Kx(C * KP), Vx(C * VP), gl(C * KP), eg(C * KP), Qg(C * KP), Kg(C * KP),
        Kl(C * KP), gamma(KP), KQa(2 * SUB * KP), KinvT(KP * CP), AB(2 * SUB * CP), Akk(C * CP),
        Aqk(C * CP), X(C * CP), W(C * KP), U(C * VP), Vn(C * VP), O(C * VP), S(KP * VP), tmp(KP),
        G(C * KP), beta(C) {}
};

// Copies one q/k row into a zero-padded row, L2-normalised (16-lane sum of squares) and scaled.
static void load_qk_row(const float* src, float* dst, float scale) {
  for (int d = 0; d < K; ++d) dst[d] = src[d];
  for (int d = K; d < KP; ++d) dst[d] = 0.0f;
  const float inv = NORMALIZE ? scale / std::sqrt(dot_padded(dst, dst) + 1e-6f) : scale;
  for (int d = 0; d < KP; ++d) dst[d] *= inv;
}

static void kda_head(const float* q, const float* k, const float* v, const float* g,
                     const float* beta, const float* a_log, const float* dt_bias,
                     const float* initial_state, float* o, float* final_state, int64_t b, int hv,
                     int64_t T) {
  const int h = hv / GROUP;
  const float qscale = 1.0f / std::sqrt(static_cast<float>(K));
  const float a_exp = GATE == 0 ? 0.0f : std::exp(a_log[hv]);
  std::vector<float> bias(K, 0.0f);
  if (GATE != 0 && dt_bias != nullptr) std::copy(dt_bias + hv * K, dt_bias + (hv + 1) * K, bias.begin());
  Scratch s;
  float* S = s.S.data();
  if (initial_state != nullptr) {
    const float* s0 = initial_state + (b * HV + hv) * static_cast<int64_t>(K) * V;
    for (int d = 0; d < K; ++d)
      for (int e = 0; e < V; ++e) S[d * VP + e] = s0[d * V + e];
  }
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int n = static_cast<int>(std::min<int64_t>(C, T - c0));
    // Step 1: rows, normalised and gated; padded rows stay zero.
    std::fill(s.Q.begin(), s.Q.end(), 0.0f);
    std::fill(s.Kx.begin(), s.Kx.end(), 0.0f);
    std::fill(s.Vx.begin(), s.Vx.end(), 0.0f);
    std::fill(s.gl.begin(), s.gl.end(), 0.0f);
    std::fill(s.beta.begin(), s.beta.end(), 0.0f);
    for (int r = 0; r < n; ++r) {
      const int64_t t = c0 + r;
      load_qk_row(q + ((b * T + t) * H + h) * K, &s.Q[r * KP], qscale);
      load_qk_row(k + ((b * T + t) * H + h) * K, &s.Kx[r * KP], 1.0f);
      const float* vr = v + ((b * T + t) * HV + hv) * V;
      for (int e = 0; e < V; ++e) s.Vx[r * VP + e] = vr[e];
      const float* gr = g + ((b * T + t) * HV + hv) * K;
      for (int d = 0; d < K; ++d) s.gl[r * KP + d] = log_decay(gr[d], a_exp, bias[d]);
      s.beta[r] = beta[(b * T + t) * HV + hv];
    }
    // Step 2: cumulative log decay in fp64, per-step decay factors.
    for (int r = 0; r < C; ++r)
      for (int d = 0; d < KP; ++d)
        s.G[r * KP + d] = (r > 0 ? s.G[(r - 1) * KP + d] : 0.0) + static_cast<double>(s.gl[r * KP + d]);
    for (int i = 0; i < C * KP; ++i) s.eg[i] = fexp(s.gl[i]);
    // Step 3: decayed operands.
    const double* Glast = &s.G[(C - 1) * KP];
    for (int r = 0; r < C; ++r) {
      const double* Gr = &s.G[r * KP];
      for (int d = 0; d < KP; ++d) {
        const float e = fexp(static_cast<float>(Gr[d]));
        s.Qg[r * KP + d] = s.Q[r * KP + d] * e;
        s.Kg[r * KP + d] = s.Kx[r * KP + d] * e;
        s.Kl[r * KP + d] = s.Kx[r * KP + d] * fexp(static_cast<float>(Glast[d] - Gr[d]));
      }
    }
    for (int d = 0; d < KP; ++d) s.gamma[d] = fexp(static_cast<float>(Glast[d]));
    // Step 4: Akk, Aqk.
    std::fill(s.Akk.begin(), s.Akk.end(), 0.0f);
    std::fill(s.Aqk.begin(), s.Aqk.end(), 0.0f);
    for (int p = DIAG_GEMM ? 0 : 1; p < NSUB; ++p) {
      const int r0 = p * SUB;
      const int ncols = DIAG_GEMM ? r0 + SUB : r0;  // columns this row block takes from the GEMM
      const double* Ga = &s.G[r0 * KP];
      for (int c = 0; c < SUB; ++c) {
        const double* Gc = &s.G[(r0 + c) * KP];
        for (int d = 0; d < KP; ++d) {
          const float e = fexp(static_cast<float>(Gc[d] - Ga[d]));
          s.KQa[c * KP + d] = s.Kx[(r0 + c) * KP + d] * e;          // rows 0..SUB-1: anchored k
          s.KQa[(SUB + c) * KP + d] = s.Q[(r0 + c) * KP + d] * e;   // rows SUB..2SUB-1: anchored q
        }
      }
      std::fill(s.KinvT.begin(), s.KinvT.end(), 0.0f);
      for (int i = 0; i < ncols; ++i) {
        const double* Gi = &s.G[i * KP];
        for (int d = 0; d < KP; ++d) s.tmp[d] = s.Kx[i * KP + d] * fexp(static_cast<float>(Ga[d] - Gi[d]));
        for (int d = 0; d < KP; ++d) s.KinvT[d * CP + i] = s.tmp[d];
      }
      // One GEMM for both: [Ka; Qa] (2*SUB rows) x KinvT, only the columns this block needs.
      const int n16 = (ncols + 15) / 16 * 16;
      std::fill(s.AB.begin(), s.AB.end(), 0.0f);
      gemm_acc_cols(2 * SUB, n16, KP, s.KQa.data(), KP, 1, s.KinvT.data(), CP, s.AB.data(), CP);
      for (int c = 0; c < SUB; ++c)
        for (int i = 0; i < ncols; ++i) {
          s.Akk[(r0 + c) * CP + i] = s.AB[c * CP + i];
          s.Aqk[(r0 + c) * CP + i] = s.AB[(SUB + c) * CP + i];
        }
    }
    if constexpr (DIAG_GEMM) {
      // Diagonal blocks came from the GEMM: keep Akk strictly lower, Aqk lower inclusive.
      for (int c = 0; c < C; ++c)
        for (int i = c; i < CP; ++i) {
          s.Akk[c * CP + i] = 0.0f;
          if (i > c) s.Aqk[c * CP + i] = 0.0f;
        }
    }
    for (int p = 0; p < (DIAG_GEMM ? 0 : NSUB); ++p) {
      const int r0 = p * SUB;
      for (int i = r0; i < r0 + SUB; ++i) {
        const float* ki = &s.Kx[i * KP];
        for (int d = 0; d < KP; ++d) s.tmp[d] = ki[d];
        s.Aqk[i * CP + i] = dot_padded(&s.Q[i * KP], s.tmp.data());
        for (int c = i + 1; c < r0 + SUB; ++c) {
          for (int d = 0; d < KP; ++d) s.tmp[d] *= s.eg[c * KP + d];
          s.Akk[c * CP + i] = dot_padded(&s.Kx[c * KP], s.tmp.data());
          s.Aqk[c * CP + i] = dot_padded(&s.Q[c * KP], s.tmp.data());
        }
      }
    }
    // Step 5: X = (I + Diag(beta) Akk)^-1 Diag(beta).
    std::fill(s.X.begin(), s.X.end(), 0.0f);
    for (int c = 0; c < C; ++c) {
      float* xc = &s.X[c * CP];
      xc[c] = s.beta[c];
      for (int i = 0; i < c; ++i) {
        const float l = s.beta[c] * s.Akk[c * CP + i];
        const float* xi = &s.X[i * CP];
        for (int j = 0; j <= i; ++j) xc[j] -= l * xi[j];
      }
    }
    // Step 6: W = X Kg (stored negated), U = X V.
    std::fill(s.W.begin(), s.W.end(), 0.0f);
    std::fill(s.U.begin(), s.U.end(), 0.0f);
    // X is lower triangular: row block [r0, r0+SUB) only needs columns < r0+SUB.
    for (int r0 = 0; r0 < C; r0 += SUB) {
      gemm_acc<KP>(SUB, r0 + SUB, &s.X[r0 * CP], CP, 1, s.Kg.data(), KP, &s.W[r0 * KP], KP);
      gemm_acc<VP>(SUB, r0 + SUB, &s.X[r0 * CP], CP, 1, s.Vx.data(), VP, &s.U[r0 * VP], VP);
    }
    for (float& w : s.W) w = -w;
    // Step 7: V' = U - W S; O = Qg S + Aqk V'; S = Diag(gamma) S + Kl^T V'.
    s.Vn = s.U;
    gemm_acc<VP>(C, KP, s.W.data(), KP, 1, S, VP, s.Vn.data(), VP);
    std::fill(s.O.begin(), s.O.end(), 0.0f);
    gemm_acc<VP>(C, KP, s.Qg.data(), KP, 1, S, VP, s.O.data(), VP);
    for (int r0 = 0; r0 < C; r0 += SUB) {
      gemm_acc<VP>(SUB, r0 + SUB, &s.Aqk[r0 * CP], CP, 1, s.Vn.data(), VP, &s.O[r0 * VP], VP);
    }
    for (int d = 0; d < KP; ++d)
      for (int e = 0; e < VP; ++e) S[d * VP + e] *= s.gamma[d];
    gemm_acc<VP>(KP, C, s.Kl.data(), 1, KP, s.Vn.data(), VP, S, VP);
    for (int r = 0; r < n; ++r) {
      float* orow = o + ((b * T + c0 + r) * HV + hv) * V;
      for (int e = 0; e < V; ++e) orow[e] = s.O[r * VP + e];
    }
  }
  if (final_state != nullptr) {
    float* sf = final_state + (b * HV + hv) * static_cast<int64_t>(K) * V;
    for (int d = 0; d < K; ++d)
      for (int e = 0; e < V; ++e) sf[d * V + e] = S[d * VP + e];
  }
}

}  // namespace onboard_gen

extern "C" const char* onboard_kernel_name(void) { return "@NAME@"; }

extern "C" int onboard_kda_fwd(const float* q, const float* k, const float* v, const float* g,
                               const float* beta, const float* a_log, const float* dt_bias,
                               const float* initial_state, float* o, float* final_state,
                               int64_t batch, int64_t seq_len, int64_t num_threads) {
  using namespace onboard_gen;
  if (batch < 1 || seq_len < 1) return 1;
  if (!q || !k || !v || !g || !beta || !o) return 2;
  if (GATE != 0 && !a_log) return 2;
  parallel_for(batch * HV, num_threads, [&](int64_t item) {
    kda_head(q, k, v, g, beta, a_log, dt_bias, initial_state, o, final_state, item / HV,
             static_cast<int>(item % HV), seq_len);
  });
  return 0;
}
)CPP";
}

}  // namespace onboard::codegen
