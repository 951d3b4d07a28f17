// The stable C ABI of every generated CPU kernel library (one shared object per kernel).
// Callers need no LibTorch: raw fp32 pointers, int64 dims, row-major contiguous tensors.
//
// Layout legend (all row-major, contiguous, fp32):
//   B = batch, T = tokens; H = q/k heads, HV = value heads (HV % H == 0, value head hv reads q/k head
//   hv / (HV/H)); K = key head dim, V = value head dim (compile-time constants of the library).
//
// KDA forward (onboard_kda_fwd): gated delta rule, chunked (WY/UT form), state carried across chunks.
//   q, k          [B,T,H,K]   RAW: the kernel L2-normalises q and k inside (x / sqrt(sum x^2 + 1e-6))
//                             when the spec says normalize_qk (the default), and multiplies q by K^-1/2.
//   v             [B,T,HV,V]
//   g             [B,T,HV,K]  gate input. gate_form "original": g_raw, decay = -exp(a_log[hv]) *
//                             softplus(g_raw + dt_bias[hv,:]); "bounded": decay = lower_bound *
//                             sigmoid(exp(a_log[hv]) * (g_raw + dt_bias[hv,:])); "none": g IS the
//                             log decay (<= 0) and a_log / dt_bias are ignored (may be null).
//   beta          [B,T,HV]    already in (0,1) (post-sigmoid), or the logit when the spec says
//                             beta_sigmoid (the kernel applies the sigmoid: fused prologue)
//   a_log         [HV]        (gate forms original/bounded)
//   dt_bias       [HV,K]      or null (= zeros)
//   initial_state [B,HV,K,V]  or null (= zeros)
//   o             [B,T,HV,V]  written
//   final_state   [B,HV,K,V]  written, or null (not returned)
//   num_threads   <= 0: std::thread::hardware_concurrency(); work is split over (batch, value head)
// DSA forward (onboard_dsa_fwd = onboard_dsa_index then onboard_dsa_attn):
//   q             [B,T,HQ,D]      query heads (MLA absorbed form: HKV = 1, D = 576, DV = 512)
//   k             [B,T,HKV,D]
//   v             [B,T,HKV,DV]
//   index_q       [B,T,HI,DI]     indexer queries
//   index_k       [B,T,DI]        one indexer key per token, shared by the indexer heads
//   index_w       [B,T,HI]        per-query head weights, used as given (caller applies HI^-1/2 DI^-1/2)
//   gate          [B,T,HQ,OV]     pre-sigmoid output gate logits, or null (required iff spec output_gate);
//                                 applied to the per-head output AFTER the value up-projection
//   sink          [HQ]            per-head attention sink logit, or null (required iff spec sink)
//   v_up          [HQ,DV,VO]      per-head value up-projection (absorbed MLA's W_UV: o_h = lat_h v_up[h]),
//                                 or null (required iff spec v_up_dim = VO > 0)
//   o             [B,T,HQ,OV]     written; OV = VO when VO > 0, else DV
//   topk_indices  [B,T,TOPK] int32: selected keys of each query sorted ascending, -1 padded
//                 (written by onboard_dsa_index / onboard_dsa_fwd when non-null, read by onboard_dsa_attn)
//   Score I[t,s] = sum_j index_w[t,j] * relu(index_q[t,j,:] . index_k[s,:]) for s <= t; the selection is
//   the top min(TOPK, t+1) keys ordered by (score desc, index asc); softmax over exactly those keys with
//   scale softmax_scale (compile-time), plus exp(sink[h]) in the denominator when sink is on.
// Return value of every entry point: 0 ok, 1 bad runtime dims (batch < 1, seq_len < 1),
// 2 a required pointer is null.
#pragma once

#include <stdint.h>

#define ONBOARD_KERNEL_ABI_VERSION 2  // 2: DSA entry points take v_up (value up-projection)

extern "C" {

typedef int (*onboard_kda_fwd_fn)(const float* q, const float* k, const float* v, const float* g,
                                  const float* beta, const float* a_log, const float* dt_bias,
                                  const float* initial_state, float* o, float* final_state,
                                  int64_t batch, int64_t seq_len, int64_t num_threads);

typedef int (*onboard_dsa_fwd_fn)(const float* q, const float* k, const float* v, const float* index_q,
                                  const float* index_k, const float* index_w, const float* gate,
                                  const float* sink, const float* v_up, float* o, int32_t* topk_indices,
                                  int64_t batch, int64_t seq_len, int64_t num_threads);

typedef int (*onboard_dsa_index_fn)(const float* index_q, const float* index_k,
                                    const float* index_w, int32_t* topk_indices, int64_t batch,
                                    int64_t seq_len, int64_t num_threads);

typedef int (*onboard_dsa_attn_fn)(const float* q, const float* k, const float* v, const float* gate,
                                   const float* sink, const float* v_up, const int32_t* topk_indices,
                                   float* o, int64_t batch, int64_t seq_len, int64_t num_threads);

// Every library also exports:
//   int onboard_kernel_abi_version(void);          -> ONBOARD_KERNEL_ABI_VERSION
//   const char* onboard_kernel_name(void);         -> GeneratedKernel::name
// and CPU libraries, optionally (not part of ABI v1's required set):
//   const char* onboard_kernel_simd_target(void);  -> Highway target name, e.g. "AVX2", "AVX3"
typedef int (*onboard_abi_version_fn)(void);
typedef const char* (*onboard_kernel_name_fn)(void);

}  // extern "C"
