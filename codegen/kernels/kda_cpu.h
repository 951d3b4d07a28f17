// CPU KDA forward: chunked gated delta rule (WY/UT form, forward substitution), state carried across
// chunks, parallel over (batch, value head). A template over its configuration: the generator emits a
// short file defining Config for one model and exporting the C ABI with ONBOARD_EXPORT_KDA_CPU.
//
// Config (all static constexpr): int H, HV, K, V, C (heads, value heads, key/value head dims, chunk);
//   GateForm kGate; float kLowerBound (kBounded only); bool kNormalizeQk (q/k L2 norm inside);
//   bool kBetaSigmoid (beta input is a logit; sigmoid inside). Shapes: codegen/kernel_abi.h.
//
// Per chunk of C rows (rows past T are zero: k = v = 0, beta = 0, g = 0, which changes nothing):
//   Step 1  load q,k (L2-normalised, q * K^-1/2), v, beta; log decay gl from the gate form (the fused
//           prologue: gate activation, q/k norm and beta sigmoid happen here, per row, in registers)
//   Step 2  G = cumsum(gl) in fp64 (differences of large G lose digits in fp32); eg = exp(gl)
//   Step 3  Qg = q*exp(G), Kg = k*exp(G), Kl = k*exp(G_last - G), gamma = exp(G_last)
//   Step 4  Akk[c,i] = sum_d k_c k_i exp(G_c - G_i) (i < c), Aqk the same with q_c (i <= c):
//           off-diagonal 16-row sub-chunks anchored at the later sub-chunk's first row (both factors
//           <= 1, never a future row); diagonal sub-chunks by running products of eg (factors <= 1),
//           or, for bounded gates (|lb| * 16 <= 80), by the same anchored GEMM (factors <= e^80)
//   Step 5  X = (I + Diag(beta) Akk)^-1 Diag(beta) by forward substitution
//   Step 6  W = X Kg, U = X V
//   Step 7  V' = U - W S;  O = Qg S + Aqk V';  S = Diag(gamma) S + Kl^T V'
#pragma once

// cpu_simd.h first: it sets Highway's target options before any Highway header.
#include "codegen/kernels/cpu_simd.h"
// clang-format off
#include <hwy/contrib/math/math-inl.h>
// clang-format on
#include "core/gate_form.h"

namespace onboard::kernels {

template <class Config>
struct KdaCpu {
  static constexpr int H = Config::H, HV = Config::HV, K = Config::K, V = Config::V, C = Config::C;
  static constexpr GateForm kGate = Config::kGate;
  static constexpr float kLowerBound = Config::kLowerBound;
  static constexpr int GROUP = HV / H;
  static constexpr int KP = pad16(K), VP = pad16(V), CP = pad16(C);
  static constexpr int SUB = C < 16 ? C : 16;
  static constexpr int NSUB = C / SUB;
  // Bounded gates decay by at most |lb| per step: over one sub-chunk exp(G_r0 - G_i) <= e^(|lb|*SUB)
  // stays far inside fp32, so the diagonal sub-chunks can use the anchored GEMM too.
  static constexpr bool DIAG_GEMM = kGate == GateForm::kBounded && -kLowerBound * SUB <= 80.0f;
  static_assert(H >= 1 && HV % H == 0, "value heads must be a multiple of the q/k heads");
  static_assert(C >= 4 && (C & (C - 1)) == 0 && C % SUB == 0, "chunk: a power of two >= 4");

  struct Scratch {
    std::vector<float> Q, Kx, Vx, gl, eg, Qg, Kg, Kl, gamma, KQa, KinvT, AB, Akk, Aqk, X, W, U, O, S, tmp,
        bias;
    std::vector<double> G;
    std::vector<float> beta;
    Scratch()
        : Q(C * KP),
          Kx(C * KP),
          Vx(C * VP),
          gl(C * KP),
          eg(C * KP),
          Qg(C * KP),
          Kg(C * KP),
          Kl(C * KP),
          gamma(KP),
          KQa(2 * SUB * KP),
          KinvT(KP * CP),
          AB(2 * SUB * CP),
          Akk(C * CP),
          Aqk(C * CP),
          X(C * CP),
          W(C * KP),
          U(C * VP),
          O(C * VP),
          S(KP * VP),
          tmp(KP),
          bias(KP),
          G(C * KP),
          beta(C) {}
  };

  // gl[0..KP) = log decay of one gate row x[0..K) (padded lanes come out 0 for zero inputs).
  static void log_decay_row(const float* x, float a_exp, const float* bias, float* gl) {
    if constexpr (kGate == GateForm::kNone) {
      std::copy(x, x + K, gl);
      return;
    }
    std::copy(x, x + K, gl);
    const DF d;
    const VF a = hn::Set(d, a_exp);
    for (int i = 0; i < KP; i += kLanes) {
      const VF z = hn::Add(hn::LoadU(d, gl + i), hn::LoadU(d, bias + i));
      VF out;
      if constexpr (kGate == GateForm::kOriginal) {
        // -a * softplus(z); softplus(z) = z for z > 20 (exp would overflow the log1p argument).
        const VF sp = hn::IfThenElse(hn::Gt(z, hn::Set(d, 20.0f)), z, hn::Log1p(d, vexp(d, z)));
        out = hn::Neg(hn::Mul(a, sp));
      } else {
        out = hn::Mul(hn::Set(d, kLowerBound), vsigmoid(d, hn::Mul(a, z)));
      }
      hn::StoreU(out, d, gl + i);
    }
    for (int i = K; i < KP; ++i) gl[i] = 0.0f;  // padded lanes decay by nothing
  }

  // Copies one q/k row into a zero-padded row, L2-normalised (when configured) and scaled.
  static void load_qk_row(const float* src, float* dst, float scale_by) {
    std::copy(src, src + K, dst);
    std::fill(dst + K, dst + KP, 0.0f);
    const float inv = Config::kNormalizeQk ? scale_by / std::sqrt(dot(KP, dst, dst) + 1e-6f) : scale_by;
    scale(KP, inv, dst);
  }

  // Step 1 for one chunk: rows c0 .. c0+n-1 of (b, hv) into the scratch (padded rows stay zero).
  static void load_chunk(const float* q, const float* k, const float* v, const float* g, const float* beta,
                         float a_exp, int64_t b, int hv, int64_t T, int64_t c0, int n, Scratch& s) {
    const int h = hv / GROUP;
    const float qscale = 1.0f / std::sqrt(static_cast<float>(K));
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
      std::copy(vr, vr + V, &s.Vx[r * VP]);
      log_decay_row(g + ((b * T + t) * HV + hv) * K, a_exp, s.bias.data(), &s.gl[r * KP]);
      const float bt = beta[(b * T + t) * HV + hv];
      s.beta[r] = Config::kBetaSigmoid ? 1.0f / (1.0f + fexp(-bt)) : bt;
    }
  }

  // Steps 2-3: cumulative decays and decayed operands.
  static void decay_operands(Scratch& s) {
    const hn::ScalableTag<double> dd;
    const hn::Rebind<float, decltype(dd)> dh;
    constexpr int kStep = static_cast<int>(hn::MaxLanes(dd));
    for (int r = 0; r < C; ++r) {
      for (int d = 0; d < KP; d += kStep) {
        auto gr = hn::PromoteTo(dd, hn::LoadU(dh, &s.gl[r * KP + d]));
        if (r > 0) gr = hn::Add(gr, hn::LoadU(dd, &s.G[(r - 1) * KP + d]));
        hn::StoreU(gr, dd, &s.G[r * KP + d]);
      }
    }
    const DF df;
    for (int i = 0; i < C * KP; i += kLanes) hn::StoreU(vexp(df, hn::LoadU(df, &s.gl[i])), df, &s.eg[i]);
    const double* Glast = &s.G[(C - 1) * KP];
    for (int r = 0; r < C; ++r) {
      const double* Gr = &s.G[r * KP];
      mul_exp_diff(KP, &s.Q[r * KP], Gr, nullptr, &s.Qg[r * KP]);
      mul_exp_diff(KP, &s.Kx[r * KP], Gr, nullptr, &s.Kg[r * KP]);
      mul_exp_diff(KP, &s.Kx[r * KP], Glast, Gr, &s.Kl[r * KP]);
    }
    mul_exp_diff(KP, nullptr, Glast, nullptr, s.gamma.data());
  }

  // Step 4, off-diagonal (and, with DIAG_GEMM, diagonal) sub-chunks by one anchored GEMM each.
  static void intra_chunk_gemm(Scratch& s) {
    for (int p = DIAG_GEMM ? 0 : 1; p < NSUB; ++p) {
      const int r0 = p * SUB;
      const int ncols = DIAG_GEMM ? r0 + SUB : r0;  // columns this row block takes from the GEMM
      const double* Ga = &s.G[r0 * KP];
      for (int c = 0; c < SUB; ++c) {
        const double* Gc = &s.G[(r0 + c) * KP];
        mul_exp_diff(KP, &s.Kx[(r0 + c) * KP], Gc, Ga, &s.KQa[c * KP]);        // anchored k
        mul_exp_diff(KP, &s.Q[(r0 + c) * KP], Gc, Ga, &s.KQa[(SUB + c) * KP]);  // anchored q
      }
      std::fill(s.KinvT.begin(), s.KinvT.end(), 0.0f);
      for (int i = 0; i < ncols; ++i) {
        mul_exp_diff(KP, &s.Kx[i * KP], Ga, &s.G[i * KP], s.tmp.data());
        for (int d = 0; d < KP; ++d) s.KinvT[d * CP + i] = s.tmp[d];
      }
      // One GEMM for both: [Ka; Qa] (2*SUB rows) x KinvT, only the columns this block needs.
      const int n16 = (ncols + 15) / 16 * 16;
      std::fill(s.AB.begin(), s.AB.end(), 0.0f);
      gemm_acc_cols(2 * SUB, n16, KP, s.KQa.data(), KP, 1, s.KinvT.data(), CP, s.AB.data(), CP);
      for (int c = 0; c < SUB; ++c) {
        std::copy(&s.AB[c * CP], &s.AB[c * CP] + ncols, &s.Akk[(r0 + c) * CP]);
        std::copy(&s.AB[(SUB + c) * CP], &s.AB[(SUB + c) * CP] + ncols, &s.Aqk[(r0 + c) * CP]);
      }
    }
  }

  // Step 4, diagonal sub-chunks: GEMM results masked to the causal pattern, or running products.
  static void intra_chunk_diagonal(Scratch& s) {
    if constexpr (DIAG_GEMM) {
      // Diagonal blocks came from the GEMM: keep Akk strictly lower, Aqk lower inclusive.
      for (int c = 0; c < C; ++c) {
        for (int i = c; i < CP; ++i) {
          s.Akk[c * CP + i] = 0.0f;
          if (i > c) s.Aqk[c * CP + i] = 0.0f;
        }
      }
      return;
    }
    const DF d;
    for (int p = 0; p < NSUB; ++p) {
      const int r0 = p * SUB;
      for (int i = r0; i < r0 + SUB; ++i) {
        std::copy(&s.Kx[i * KP], &s.Kx[i * KP] + KP, s.tmp.begin());
        s.Aqk[i * CP + i] = dot(KP, &s.Q[i * KP], s.tmp.data());
        for (int c = i + 1; c < r0 + SUB; ++c) {
          for (int e = 0; e < KP; e += kLanes) {
            hn::StoreU(hn::Mul(hn::LoadU(d, &s.tmp[e]), hn::LoadU(d, &s.eg[c * KP + e])), d, &s.tmp[e]);
          }
          s.Akk[c * CP + i] = dot(KP, &s.Kx[c * KP], s.tmp.data());
          s.Aqk[c * CP + i] = dot(KP, &s.Q[c * KP], s.tmp.data());
        }
      }
    }
  }

  // Steps 5-7 for one chunk; S (the state, KP x VP) is updated in place.
  static void solve_and_update(Scratch& s) {
    float* S = s.S.data();
    // Step 5: X = (I + Diag(beta) Akk)^-1 Diag(beta); row i of X is zero past column i, so each
    // update may run over whole vectors up to column i.
    std::fill(s.X.begin(), s.X.end(), 0.0f);
    for (int c = 0; c < C; ++c) {
      float* xc = &s.X[c * CP];
      xc[c] = s.beta[c];
      for (int i = 0; i < c; ++i) {
        const int width = (i + kLanes) / kLanes * kLanes;
        axpy(width, -s.beta[c] * s.Akk[c * CP + i], &s.X[i * CP], xc);
      }
    }
    // Step 6: W = X Kg (stored negated), U = X V. X is lower triangular: row block [r0, r0+SUB) only
    // needs columns < r0+SUB.
    std::fill(s.W.begin(), s.W.end(), 0.0f);
    std::fill(s.U.begin(), s.U.end(), 0.0f);
    for (int r0 = 0; r0 < C; r0 += SUB) {
      gemm_acc<KP>(SUB, r0 + SUB, &s.X[r0 * CP], CP, 1, s.Kg.data(), KP, &s.W[r0 * KP], KP);
      gemm_acc<VP>(SUB, r0 + SUB, &s.X[r0 * CP], CP, 1, s.Vx.data(), VP, &s.U[r0 * VP], VP);
    }
    scale(C * KP, -1.0f, s.W.data());
    // Step 7: V' = U - W S (in place in U); O = Qg S + Aqk V'; S = Diag(gamma) S + Kl^T V'.
    float* Vn = s.U.data();
    gemm_acc<VP>(C, KP, s.W.data(), KP, 1, S, VP, Vn, VP);
    std::fill(s.O.begin(), s.O.end(), 0.0f);
    gemm_acc<VP>(C, KP, s.Qg.data(), KP, 1, S, VP, s.O.data(), VP);
    for (int r0 = 0; r0 < C; r0 += SUB) {
      gemm_acc<VP>(SUB, r0 + SUB, &s.Aqk[r0 * CP], CP, 1, Vn, VP, &s.O[r0 * VP], VP);
    }
    for (int d = 0; d < KP; ++d) scale(VP, s.gamma[d], S + d * VP);
    gemm_acc<VP>(KP, C, s.Kl.data(), 1, KP, Vn, VP, S, VP);
  }

  static void head(const float* q, const float* k, const float* v, const float* g, const float* beta,
                   const float* a_log, const float* dt_bias, const float* initial_state, float* o,
                   float* final_state, int64_t b, int hv, int64_t T) {
    const float a_exp = kGate == GateForm::kNone ? 0.0f : std::exp(a_log[hv]);
    Scratch s;
    if (kGate != GateForm::kNone && dt_bias != nullptr) std::copy(dt_bias + hv * K, dt_bias + (hv + 1) * K, s.bias.begin());
    float* S = s.S.data();
    if (initial_state != nullptr) {
      const float* s0 = initial_state + (b * HV + hv) * static_cast<int64_t>(K) * V;
      for (int d = 0; d < K; ++d) std::copy(s0 + d * V, s0 + (d + 1) * V, S + d * VP);
    }
    for (int64_t c0 = 0; c0 < T; c0 += C) {
      const int n = static_cast<int>(std::min<int64_t>(C, T - c0));
      load_chunk(q, k, v, g, beta, a_exp, b, hv, T, c0, n, s);
      decay_operands(s);
      std::fill(s.Akk.begin(), s.Akk.end(), 0.0f);
      std::fill(s.Aqk.begin(), s.Aqk.end(), 0.0f);
      intra_chunk_gemm(s);
      intra_chunk_diagonal(s);
      solve_and_update(s);
      for (int r = 0; r < n; ++r) {
        std::copy(&s.O[r * VP], &s.O[r * VP] + V, o + ((b * T + c0 + r) * HV + hv) * V);
      }
    }
    if (final_state != nullptr) {
      float* sf = final_state + (b * HV + hv) * static_cast<int64_t>(K) * V;
      for (int d = 0; d < K; ++d) std::copy(S + d * VP, S + d * VP + V, sf + d * V);
    }
  }

  // The ABI entry point (codegen/kernel_abi.h: onboard_kda_fwd).
  static int Forward(const float* q, const float* k, const float* v, const float* g, const float* beta,
                     const float* a_log, const float* dt_bias, const float* initial_state, float* o,
                     float* final_state, int64_t batch, int64_t seq_len, int64_t num_threads) {
    if (batch < 1 || seq_len < 1) return 1;
    if (!q || !k || !v || !g || !beta || !o) return 2;
    if (kGate != GateForm::kNone && !a_log) return 2;
    parallel_for(batch * HV, num_threads, [&](int64_t item) {
      head(q, k, v, g, beta, a_log, dt_bias, initial_state, o, final_state, item / HV,
           static_cast<int>(item % HV), seq_len);
    });
    return 0;
  }
};

}  // namespace onboard::kernels

// Exports the C ABI of one KDA CPU library for Config (used once, by the generated file).
#define ONBOARD_EXPORT_KDA_CPU(Config, kernel_name)                                                          \
  extern "C" int onboard_kernel_abi_version(void) { return 2; }                                              \
  extern "C" const char* onboard_kernel_name(void) { return kernel_name; }                                   \
  extern "C" const char* onboard_kernel_simd_target(void) { return ::onboard::kernels::simd_target_name(); } \
  extern "C" int onboard_kda_fwd(const float* q, const float* k, const float* v, const float* g,             \
                                 const float* beta, const float* a_log, const float* dt_bias,                \
                                 const float* initial_state, float* o, float* final_state, int64_t batch,    \
                                 int64_t seq_len, int64_t num_threads) {                                     \
    return ::onboard::kernels::KdaCpu<Config>::Forward(q, k, v, g, beta, a_log, dt_bias, initial_state, o,   \
                                                       final_state, batch, seq_len, num_threads);            \
  }
