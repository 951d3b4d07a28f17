// CUDA KDA forward: the chunked algorithm of kda_cpu.h, one thread block per (batch, value head), state
// S[K][V] in shared memory, per-chunk matrices in a global workspace. A template over its configuration:
// the generator emits a short file defining Config for one model and exporting the C ABI with
// ONBOARD_EXPORT_KDA_CUDA; the build compiles a default instantiation (default_cuda_instances.cu).
// Written for correctness first (exact per-element exp(G_c - G_i), fp64 cumulative gates); NOT yet run
// on a GPU (its logic is checked under CPU emulation of the CUDA model: codegen/README.md).
//
// Config (all static constexpr unless noted): int H, HV, K, V, C (heads, value heads, key/value head
//   dims, chunk); GateForm kGate; float kLowerBound (kBounded only); bool kNormalizeQk (q/k L2 norm
//   inside); bool kBetaSigmoid (beta input is a logit: sigmoid inside); type elem_t (float or
//   __nv_bfloat16: the q, k, v, g, beta operands). Shapes and units: the CUDA ABI in codegen/README.md.
//
// Steps per chunk as in the CPU kernel:
//   Step 1 load + normalise + gate; Step 2 G = cumsum (fp64); Step 3 Akk, Aqk exact;
//   Step 4 forward substitution X = (I + Diag(beta) Akk)^-1 Diag(beta); Step 5 W = X (k e^G), U = X v;
//   Step 6 V' = U - W S; O = (q e^G) S + Aqk V'; S = e^{G_last} S + (k e^{G_last - G})^T V'.
#pragma once

#include "codegen/kernels/cuda_prelude.cuh"

// The C ABI of one KDA instantiation (codegen/README.md): its name, workspace size and forward
// (the generated file's one line after its Config).
#define ONBOARD_EXPORT_KDA_CUDA(Config, kernel_name)                                                                \
  ONBOARD_EXPORT_CUDA_LIBRARY(::onboard::kernels::KdaCuda<Config>, kda, kernel_name)                                \
  extern "C" int onboard_kda_fwd_cuda(                                                                              \
      const onboard_kda_cuda_t::elem_t* q, const onboard_kda_cuda_t::elem_t* k, const onboard_kda_cuda_t::elem_t* v,\
      const onboard_kda_cuda_t::elem_t* g, const onboard_kda_cuda_t::elem_t* beta, const float* a_log,              \
      const float* dt_bias, const float* initial_state, float* o, float* final_state, void* workspace,              \
      int64_t batch, int64_t seq_len, cudaStream_t stream) {                                                        \
    return onboard_kda_cuda_t::Forward(q, k, v, g, beta, a_log, dt_bias, initial_state, o, final_state,             \
                                       workspace, batch, seq_len, stream);                                          \
  }

namespace onboard::kernels {

constexpr int kKdaCudaThreads = 256;  // threads per block

template <class Config>
struct KdaCuda {
  using elem_t = typename Config::elem_t;
  static constexpr int H = Config::H, HV = Config::HV, K = Config::K, V = Config::V, C = Config::C;
  static constexpr int GROUP = HV / H;
  static constexpr GateForm kGate = Config::kGate;
  static constexpr float kLowerBound = Config::kLowerBound;
  static constexpr bool kNormalizeQk = Config::kNormalizeQk;
  static constexpr bool kBetaSigmoid = Config::kBetaSigmoid;
  static constexpr int THREADS = kKdaCudaThreads;
  static_assert(H >= 1 && HV % H == 0, "value heads must be a multiple of the q/k heads");

  // Workspace floats per (batch, value head).
  static constexpr int64_t WS_FLOATS = 2LL * C * K /*Q,Kx*/ + C * V /*Vx*/ + 3LL * C * C /*Akk,Aqk,X*/ +
                                       C * K /*W*/ + 2LL * C * V /*U->V', O*/ + C /*beta*/ +
                                       2LL * C * K /*G fp64*/;

  __device__ static float log_decay(float x, float a_exp, float bias) {
    if (kGate == GateForm::kNone) return x;
    if (kGate == GateForm::kOriginal) {
      const float z = x + bias;
      const float sp = z > 20.0f ? z : log1pf(expf(z));
      return -a_exp * sp;
    }
    const float z = a_exp * (x + bias);
    return kLowerBound / (1.0f + expf(-z));
  }

  // Workspace bytes the caller provides to Forward.
  static size_t WorkspaceBytes(int64_t batch, int64_t seq_len) {
    (void)seq_len;
    return static_cast<size_t>(batch) * HV * WS_FLOATS * sizeof(float) + 16;
  }

  // Device pointers; o and states fp32; returns a cudaError_t value (0 = success).
  static int Forward(const elem_t* q, const elem_t* k, const elem_t* v, const elem_t* g,
                     const elem_t* beta, const float* a_log, const float* dt_bias,
                     const float* initial_state, float* o, float* final_state, void* workspace,
                     int64_t batch, int64_t seq_len, cudaStream_t stream);
};

template <class Config>
__global__ void __launch_bounds__(kKdaCudaThreads)
kda_chunk_kernel(const typename Config::elem_t* __restrict__ q, const typename Config::elem_t* __restrict__ k,
                 const typename Config::elem_t* __restrict__ v, const typename Config::elem_t* __restrict__ g,
                 const typename Config::elem_t* __restrict__ beta,
                 const float* __restrict__ a_log, const float* __restrict__ dt_bias,
                 const float* __restrict__ h0, float* __restrict__ o, float* __restrict__ final_state,
                 float* __restrict__ workspace, int64_t T) {
  using P = KdaCuda<Config>;
  constexpr int H = P::H, HV = P::HV, K = P::K, V = P::V, C = P::C, GROUP = P::GROUP, THREADS = P::THREADS;
  constexpr GateForm GATE = P::kGate;
  constexpr bool NORMALIZE = P::kNormalizeQk, BETA_SIGMOID = P::kBetaSigmoid;
  constexpr int64_t WS_FLOATS = P::WS_FLOATS;
  ONBOARD_DYNAMIC_SMEM(float, S);  // [K][V]
  __shared__ float norm_q[C], norm_k[C];
  const int64_t b = blockIdx.x / HV;
  const int hv = blockIdx.x % HV;
  const int h = hv / GROUP;
  const int tid = threadIdx.x;
  float* ws = workspace + blockIdx.x * WS_FLOATS;
  float* Q = ws;
  float* Kx = Q + C * K;
  float* Vx = Kx + C * K;
  float* Akk = Vx + C * V;
  float* Aqk = Akk + C * C;
  float* X = Aqk + C * C;
  float* W = X + C * C;
  float* U = W + C * K;
  float* O = U + C * V;
  float* bt = O + C * V;
  double* G = reinterpret_cast<double*>(bt + C + (C & 1));
  const float qscale = rsqrtf(static_cast<float>(K));
  const float a_exp = GATE == GateForm::kNone ? 0.0f : expf(a_log[hv]);
  for (int i = tid; i < K * V; i += THREADS) {
    S[i] = h0 ? h0[(b * HV + hv) * (int64_t)K * V + i] : 0.0f;
  }
  for (int64_t c0 = 0; c0 < T; c0 += C) {
    const int n = (int)(T - c0 < C ? T - c0 : (int64_t)C);
    // Step 1: rows (padded rows zero), norms, gates.
    for (int i = tid; i < C * K; i += THREADS) {
      const int r = i / K, d = i % K;
      const bool live = r < n;
      const int64_t t = c0 + r;
      Q[i] = live ? to_f(q[((b * T + t) * H + h) * K + d]) : 0.0f;
      Kx[i] = live ? to_f(k[((b * T + t) * H + h) * K + d]) : 0.0f;
      const float bias = (GATE != GateForm::kNone && dt_bias) ? dt_bias[hv * K + d] : 0.0f;
      G[i] = live ? (double)P::log_decay(to_f(g[((b * T + t) * HV + hv) * K + d]), a_exp, bias) : 0.0;
    }
    for (int i = tid; i < C * V; i += THREADS) {
      const int r = i / V, e = i % V;
      Vx[i] = r < n ? to_f(v[((b * T + c0 + r) * HV + hv) * V + e]) : 0.0f;
    }
    for (int r = tid; r < C; r += THREADS) {
      const float braw = r < n ? to_f(beta[(b * T + c0 + r) * HV + hv]) : 0.0f;
      bt[r] = r < n && BETA_SIGMOID ? 1.0f / (1.0f + expf(-braw)) : braw;
    }
    __syncthreads();
    for (int r = tid; r < C; r += THREADS) {
      float sq = 0.0f, sk = 0.0f;
      for (int d = 0; d < K; ++d) {
        sq += Q[r * K + d] * Q[r * K + d];
        sk += Kx[r * K + d] * Kx[r * K + d];
      }
      norm_q[r] = (NORMALIZE ? rsqrtf(sq + 1e-6f) : 1.0f) * qscale;
      norm_k[r] = NORMALIZE ? rsqrtf(sk + 1e-6f) : 1.0f;
    }
    __syncthreads();
    for (int i = tid; i < C * K; i += THREADS) {
      Q[i] *= norm_q[i / K];
      Kx[i] *= norm_k[i / K];
    }
    // Step 2: cumulative log decay (fp64), one thread per channel.
    for (int d = tid; d < K; d += THREADS) {
      double acc = 0.0;
      for (int r = 0; r < C; ++r) {
        acc += G[r * K + d];
        G[r * K + d] = acc;
      }
    }
    __syncthreads();
    // Step 3: Akk (strictly lower), Aqk (lower incl.), exact exp(G_c - G_i) <= 1.
    for (int i = tid; i < C * C; i += THREADS) {
      const int c = i / C, j = i % C;
      float akk = 0.0f, aqk = 0.0f;
      if (j <= c) {
        for (int d = 0; d < K; ++d) {
          const float e = expf((float)(G[c * K + d] - G[j * K + d]));
          const float kj = Kx[j * K + d] * e;
          akk += Kx[c * K + d] * kj;
          aqk += Q[c * K + d] * kj;
        }
      }
      Akk[i] = j < c ? akk : 0.0f;
      Aqk[i] = aqk;
    }
    __syncthreads();
    // Step 4: forward substitution, row by row; thread j owns column j.
    for (int c = 0; c < C; ++c) {
      for (int j = tid; j < C; j += THREADS) {
        float x = j == c ? bt[c] : 0.0f;
        for (int i = j; i < c; ++i) x -= bt[c] * Akk[c * C + i] * X[i * C + j];
        X[c * C + j] = j <= c ? x : 0.0f;
      }
      __syncthreads();
    }
    // Step 5: W = X (k e^G), U = X v.
    for (int i = tid; i < C * K; i += THREADS) {
      const int c = i / K, d = i % K;
      float acc = 0.0f;
      for (int j = 0; j <= c; ++j) acc += X[c * C + j] * Kx[j * K + d] * expf((float)G[j * K + d]);
      W[i] = acc;
    }
    for (int i = tid; i < C * V; i += THREADS) {
      const int c = i / V, e = i % V;
      float acc = 0.0f;
      for (int j = 0; j <= c; ++j) acc += X[c * C + j] * Vx[j * V + e];
      U[i] = acc;
    }
    __syncthreads();
    // Step 6a: V' = U - W S (in place in U).
    for (int i = tid; i < C * V; i += THREADS) {
      const int c = i / V, e = i % V;
      float acc = U[i];
      for (int d = 0; d < K; ++d) acc -= W[c * K + d] * S[d * V + e];
      U[i] = acc;
    }
    __syncthreads();
    // Step 6b: O = (q e^G) S + Aqk V'.
    for (int i = tid; i < C * V; i += THREADS) {
      const int c = i / V, e = i % V;
      float acc = 0.0f;
      for (int d = 0; d < K; ++d) acc += Q[c * K + d] * expf((float)G[c * K + d]) * S[d * V + e];
      for (int j = 0; j <= c; ++j) acc += Aqk[c * C + j] * U[j * V + e];
      O[i] = acc;
    }
    __syncthreads();
    // Step 6c: S = e^{G_last} S + (k e^{G_last - G})^T V'.
    for (int i = tid; i < K * V; i += THREADS) {
      const int d = i / V, e = i % V;
      const double gl = G[(C - 1) * K + d];
      float acc = S[i] * expf((float)gl);
      for (int c = 0; c < C; ++c) acc += Kx[c * K + d] * expf((float)(gl - G[c * K + d])) * U[c * V + e];
      S[i] = acc;
    }
    for (int i = tid; i < n * V; i += THREADS) {
      const int r = i / V, e = i % V;
      o[((b * T + c0 + r) * HV + hv) * V + e] = O[i];
    }
    __syncthreads();
  }
  if (final_state) {
    for (int i = tid; i < K * V; i += THREADS) final_state[(b * HV + hv) * (int64_t)K * V + i] = S[i];
  }
}


template <class Config>
int KdaCuda<Config>::Forward(const elem_t* q, const elem_t* k, const elem_t* v, const elem_t* g,
                             const elem_t* beta, const float* a_log, const float* dt_bias,
                             const float* initial_state, float* o, float* final_state, void* workspace,
                             int64_t batch, int64_t seq_len, cudaStream_t stream) {
  if (batch < 1 || seq_len < 1) return (int)cudaErrorInvalidValue;
  const size_t smem = sizeof(float) * K * V;
  cudaError_t err = allow_smem(kda_chunk_kernel<Config>, smem);
  if (err != cudaSuccess) return (int)err;
  ONBOARD_LAUNCH(kda_chunk_kernel<Config>, (unsigned)(batch * HV), THREADS, smem, stream,
                 q, k, v, g, beta, a_log, dt_bias, initial_state, o, final_state,
                 static_cast<float*>(workspace), seq_len);
  return (int)cudaGetLastError();
}

}  // namespace onboard::kernels
