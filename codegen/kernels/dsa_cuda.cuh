// CUDA DSA forward (NOT yet run on a GPU; its logic is checked under CPU emulation of the CUDA model,
// see validators/cuda_emulation_source.cpp). A template over its configuration: the generator emits a
// short file defining Config for one model and exporting the C ABI with ONBOARD_EXPORT_DSA_CUDA; the
// build compiles a default instantiation (default_cuda_instances.cu).
//
// Config (all static constexpr unless noted): int HQ, HKV, D, DV (query heads, kv heads, q/k and value
//   head dims), HI, DI (indexer heads and head dim); int64_t TOPK; int BLOCK (keys per softmax block);
//   float SCALE (softmax scale); bool GATED (sigmoid output gate), SINK (per-head sink logit); type
//   elem_t (float or __nv_bfloat16: the q, k, v, indexer and gate operands).
//   Units: T tokens; scores fp32; workspace in bytes.
//   index kernel, one block per query row r = b*T + t of the current launch's row range [row0, row0 + rows):
//     Step 1  scores I[t,s] for s <= t into the workspace row (r - row0) of T fp32
//             (workspace = rows * T * 4 bytes <= ONBOARD_DSA_SCORE_WORKSPACE_BYTES, default 1 GiB, at least
//             one row: the launcher walks the B*T query rows in ranges of `rows`; T = 1M -> 256 rows/launch)
//     Step 2  exact k-th largest key by 4-pass 8-bit radix select over order-preserving uint32 keys
//     Step 3  compaction in index order (block prefix sums): keys above the k-th, then ties at the
//             k-th by ascending index -> each query's selection comes out sorted ascending
//   attention kernel, one block per (batch, query, kv head, group of <= 16 query heads): q in shared memory,
//     selected keys walked in blocks of BLOCK (sorted -> monotone, mostly contiguous rows), online
//     softmax, acc[G][DV] in shared memory, sink + gate at the end.
#pragma once

#include "codegen/kernels/cuda_prelude.cuh"

// The C ABI of one DSA instantiation (codegen/README.md): its name, workspace size and forward
// (the generated file's one line after its Config).
#define ONBOARD_EXPORT_DSA_CUDA(Config, kernel_name)                                                                \
  ONBOARD_EXPORT_CUDA_LIBRARY(::onboard::kernels::DsaCuda<Config>, dsa, kernel_name)                                \
  extern "C" int onboard_dsa_fwd_cuda(                                                                              \
      const onboard_dsa_cuda_t::elem_t* q, const onboard_dsa_cuda_t::elem_t* k, const onboard_dsa_cuda_t::elem_t* v,\
      const onboard_dsa_cuda_t::elem_t* index_q, const onboard_dsa_cuda_t::elem_t* index_k,                         \
      const onboard_dsa_cuda_t::elem_t* index_w, const onboard_dsa_cuda_t::elem_t* gate, const float* sink,         \
      float* o, int32_t* topk_indices, void* workspace, int64_t batch, int64_t seq_len, cudaStream_t stream) {      \
    return onboard_dsa_cuda_t::Forward(q, k, v, index_q, index_k, index_w, gate, sink, o, topk_indices,             \
                                       workspace, batch, seq_len, stream);                                          \
  }

// Byte cap of the indexer score workspace (fp32 rows of T scores); override with -D at compile time.
#ifndef ONBOARD_DSA_SCORE_WORKSPACE_BYTES
#define ONBOARD_DSA_SCORE_WORKSPACE_BYTES (1ull << 30)
#endif

namespace onboard::kernels {

constexpr int kDsaCudaThreads = 256;  // threads per block of both kernels

// Query rows scored per index launch: as many T-float rows as fit the cap (at least 1, at most B*T).
__host__ __device__ inline int64_t score_rows_per_launch(int64_t batch, int64_t T) {
  const int64_t fit = (int64_t)((unsigned long long)ONBOARD_DSA_SCORE_WORKSPACE_BYTES /
                                (sizeof(float) * (unsigned long long)T));
  int64_t rows = fit < 1 ? 1 : fit;
  if (rows > batch * T) rows = batch * T;
  return rows < 2147483647LL ? rows : 2147483647LL;
}

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // larger float -> larger key
}

// Inclusive block-wide prefix sum of one value per thread (kDsaCudaThreads threads).
__device__ inline int block_scan(int x, int* tmp) {
  tmp[threadIdx.x] = x;
  __syncthreads();
  for (int off = 1; off < kDsaCudaThreads; off <<= 1) {
    const int add = threadIdx.x >= off ? tmp[threadIdx.x - off] : 0;
    __syncthreads();
    tmp[threadIdx.x] += add;
    __syncthreads();
  }
  const int r = tmp[threadIdx.x];
  __syncthreads();
  return r;
}

template <class Config>
struct DsaCuda {
  using elem_t = typename Config::elem_t;
  static constexpr int HQ = Config::HQ, HKV = Config::HKV, D = Config::D, DV = Config::DV;
  static constexpr int HI = Config::HI, DI = Config::DI;
  static constexpr int64_t TOPK = Config::TOPK;
  static constexpr int BLOCK = Config::BLOCK;
  static constexpr float SCALE = Config::SCALE;
  static constexpr bool GATED = Config::GATED, SINK = Config::SINK;
  static constexpr int G = HQ / HKV;
  static constexpr int GB = G < 16 ? G : 16;  // query heads per attention block (shared memory bound)
  static constexpr int NGROUPS = (G + GB - 1) / GB;
  static constexpr int THREADS = kDsaCudaThreads;
  static_assert(HKV >= 1 && HQ % HKV == 0, "query heads must be a multiple of the kv heads");

  // Workspace bytes: the indexer's fp32 score rows of one launch, rows * T * 4 <= the cap (>= one row).
  static size_t WorkspaceBytes(int64_t batch, int64_t seq_len) {
    if (batch < 1 || seq_len < 1) return 0;
    return static_cast<size_t>(score_rows_per_launch(batch, seq_len)) * seq_len * sizeof(float);
  }

  // Device pointers; o fp32; idx [B,T,TOPK] int32 written (sorted, -1 padded).
  static int Forward(const elem_t* q, const elem_t* k, const elem_t* v, const elem_t* index_q,
                     const elem_t* index_k, const elem_t* index_w, const elem_t* gate, const float* sink,
                     float* o, int32_t* topk_indices, void* workspace, int64_t batch, int64_t seq_len,
                     cudaStream_t stream);
};

template <class Config>
__global__ void __launch_bounds__(kDsaCudaThreads)
dsa_index_kernel(const typename Config::elem_t* __restrict__ iq, const typename Config::elem_t* __restrict__ ik,
                 const typename Config::elem_t* __restrict__ iw, int32_t* __restrict__ idx,
                 float* __restrict__ scores, int64_t T, int64_t row0) {
  using P = DsaCuda<Config>;
  constexpr int HI = P::HI, DI = P::DI, THREADS = P::THREADS;
  constexpr int64_t TOPK = P::TOPK;
  using elem_t = typename P::elem_t;
  __shared__ float qs[HI * DI];
  __shared__ float ws[HI];
  __shared__ int hist[256];
  __shared__ int scan_tmp[THREADS];
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int s_remaining;
  const int64_t r = row0 + blockIdx.x;
  const int64_t b = r / T, t = r % T;
  const int tid = threadIdx.x;
  int32_t* out = idx + (b * T + t) * TOPK;
  const int64_t n = t + 1;
  if (n <= TOPK) {
    for (int64_t s = tid; s < TOPK; s += THREADS) out[s] = s < n ? (int32_t)s : -1;
    return;
  }
  // Step 1: scores.
  for (int i = tid; i < HI * DI; i += THREADS) qs[i] = to_f(iq[(b * T + t) * HI * DI + i]);
  for (int j = tid; j < HI; j += THREADS) ws[j] = to_f(iw[(b * T + t) * HI + j]);
  __syncthreads();
  float* row = scores + (int64_t)blockIdx.x * T;
  for (int64_t s = tid; s < n; s += THREADS) {
    const elem_t* kr = ik + (b * T + s) * DI;
    float acc = 0.0f;
    for (int j = 0; j < HI; ++j) {
      float dot = 0.0f;
      for (int d = 0; d < DI; ++d) dot += qs[j * DI + d] * to_f(kr[d]);
      acc += ws[j] * fmaxf(dot, 0.0f);
    }
    row[s] = acc;
  }
  // Step 2: radix select of the TOPK-th largest key.
  if (tid == 0) { s_prefix = 0; s_mask = 0; s_remaining = (int)TOPK; }
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += THREADS) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int64_t s = tid; s < n; s += THREADS) {
      const uint32_t key = order_key(row[s]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    if (tid == 0) {
      int cum = 0, bin = 255;
      for (; bin > 0; --bin) {
        if (cum + hist[bin] >= s_remaining) break;
        cum += hist[bin];
      }
      s_remaining -= cum;
      s_prefix = prefix | ((uint32_t)bin << shift);
      s_mask = mask | (255u << shift);
    }
    __syncthreads();
  }
  const uint32_t kth = s_prefix;
  const int ties = s_remaining;  // how many keys equal to kth to take, lowest indices first
  // Step 3: compaction in index order.
  int written = 0, ties_seen = 0;
  for (int64_t base = 0; base < n; base += THREADS) {
    const int64_t s = base + tid;
    const uint32_t key = s < n ? order_key(row[s]) : 0u;
    const int is_tie = (s < n && key == kth) ? 1 : 0;
    const int tie_rank = block_scan(is_tie, scan_tmp) - is_tie + ties_seen;
    const int take = (s < n && (key > kth || (is_tie && tie_rank < ties))) ? 1 : 0;
    const int pos = block_scan(take, scan_tmp) - take + written;
    if (take) out[pos] = (int32_t)s;
    // Totals of this tile (the last thread's inclusive sums).
    __shared__ int tile_tie, tile_take;
    if (tid == THREADS - 1) { tile_tie = tie_rank - ties_seen + is_tie; tile_take = pos - written + take; }
    __syncthreads();
    ties_seen += tile_tie;
    written += tile_take;
    __syncthreads();
  }
}

template <class Config>
__global__ void __launch_bounds__(kDsaCudaThreads)
dsa_attn_kernel(const typename Config::elem_t* __restrict__ q, const typename Config::elem_t* __restrict__ k,
                const typename Config::elem_t* __restrict__ v, const typename Config::elem_t* __restrict__ gate,
                const float* __restrict__ sink, const int32_t* __restrict__ idx, float* __restrict__ o,
                int64_t T) {
  using P = DsaCuda<Config>;
  constexpr int HQ = P::HQ, HKV = P::HKV, D = P::D, DV = P::DV;
  constexpr int64_t TOPK = P::TOPK;
  constexpr int BLOCK = P::BLOCK, G = P::G, GB = P::GB, NGROUPS = P::NGROUPS, THREADS = P::THREADS;
  constexpr float SCALE = P::SCALE;
  constexpr bool GATED = P::GATED, SINK = P::SINK;
  using elem_t = typename P::elem_t;
  ONBOARD_DYNAMIC_SMEM(float, smem);
  float* qs = smem;                 // [GB][D]
  float* acc = qs + GB * D;         // [GB][DV]
  float* p = acc + GB * DV;         // [GB][BLOCK]
  float* m = p + GB * BLOCK;        // [GB]
  float* l = m + GB;                // [GB]
  float* alpha = l + GB;            // [GB]
  __shared__ int nsel_s;
  const int64_t t = blockIdx.x;
  const int grp = blockIdx.y % NGROUPS;
  const int kh = (blockIdx.y / NGROUPS) % HKV;
  const int64_t b = blockIdx.y / (NGROUPS * HKV);
  const int h0 = kh * G + grp * GB;                 // first query head of this block
  const int gn = G - grp * GB < GB ? G - grp * GB : GB;  // heads in this block
  const int tid = threadIdx.x;
  const int32_t* sel = idx + (b * T + t) * TOPK;
  for (int i = tid; i < gn * D; i += THREADS) {
    const int g = i / D, d = i % D;
    qs[i] = to_f(q[((b * T + t) * HQ + h0 + g) * D + d]) * SCALE;
  }
  for (int i = tid; i < gn * DV; i += THREADS) acc[i] = 0.0f;
  for (int g = tid; g < gn; g += THREADS) { m[g] = -INFINITY; l[g] = 0.0f; }
  if (tid == 0) {
    int n = 0;
    while (n < TOPK && sel[n] >= 0) ++n;
    nsel_s = n;
  }
  __syncthreads();
  const int nsel = nsel_s;
  for (int i0 = 0; i0 < nsel; i0 += BLOCK) {
    const int nb = min(BLOCK, nsel - i0);
    // Logits of the block.
    for (int i = tid; i < gn * BLOCK; i += THREADS) {
      const int g = i / BLOCK, j = i % BLOCK;
      float dot = -INFINITY;
      if (j < nb) {
        const elem_t* kr = k + ((b * T + sel[i0 + j]) * HKV + kh) * D;
        dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qs[g * D + d] * to_f(kr[d]);
      }
      p[i] = dot;
    }
    __syncthreads();
    // Online softmax statistics, one thread per head.
    for (int g = tid; g < gn; g += THREADS) {
      float mx = m[g];
      for (int j = 0; j < nb; ++j) mx = fmaxf(mx, p[g * BLOCK + j]);
      float sum = 0.0f;
      for (int j = 0; j < nb; ++j) {
        const float e = expf(p[g * BLOCK + j] - mx);
        p[g * BLOCK + j] = e;
        sum += e;
      }
      alpha[g] = expf(m[g] - mx);
      l[g] = l[g] * alpha[g] + sum;
      m[g] = mx;
    }
    __syncthreads();
    // acc = acc * alpha + P V (coalesced over the value channel).
    for (int i = tid; i < gn * DV; i += THREADS) {
      const int g = i / DV, e = i % DV;
      float a = acc[i] * alpha[g];
      for (int j = 0; j < nb; ++j) a += p[g * BLOCK + j] * to_f(v[((b * T + sel[i0 + j]) * HKV + kh) * DV + e]);
      acc[i] = a;
    }
    __syncthreads();
  }
  for (int i = tid; i < gn * DV; i += THREADS) {
    const int g = i / DV, e = i % DV;
    const int h = h0 + g;
    float den = l[g];
    if (SINK) den += expf(sink[h] - m[g]);
    float val = acc[i] / den;
    if (GATED) val *= 1.0f / (1.0f + expf(-to_f(gate[((b * T + t) * HQ + h) * DV + e])));
    o[((b * T + t) * HQ + h) * DV + e] = val;
  }
}

template <class Config>
int DsaCuda<Config>::Forward(const elem_t* q, const elem_t* k, const elem_t* v,
                             const elem_t* index_q, const elem_t* index_k, const elem_t* index_w,
                             const elem_t* gate, const float* sink, float* o, int32_t* topk_indices,
                             void* workspace, int64_t batch, int64_t seq_len, cudaStream_t stream) {
  if (batch < 1 || seq_len < 1) return (int)cudaErrorInvalidValue;
  // Index launches over query-row ranges that fit the workspace (the same stream orders them).
  const int64_t total = batch * seq_len, rows = score_rows_per_launch(batch, seq_len);
  cudaError_t err = cudaSuccess;
  for (int64_t row0 = 0; row0 < total; row0 += rows) {
    const int64_t nr = total - row0 < rows ? total - row0 : rows;
    ONBOARD_LAUNCH(dsa_index_kernel<Config>, dim3((unsigned)nr), THREADS, 0, stream, index_q, index_k,
                   index_w, topk_indices, static_cast<float*>(workspace), seq_len, row0);
    err = cudaGetLastError();
    if (err != cudaSuccess) return (int)err;
  }
  const size_t smem = sizeof(float) * (GB * D + GB * DV + GB * BLOCK + 3 * GB);
  err = allow_smem(dsa_attn_kernel<Config>, smem);
  if (err != cudaSuccess) return (int)err;
  dim3 agrid((unsigned)seq_len, (unsigned)(batch * HKV * NGROUPS));
  ONBOARD_LAUNCH(dsa_attn_kernel<Config>, agrid, THREADS, smem, stream, q, k, v, gate, sink, topk_indices, o,
                 seq_len);
  return (int)cudaGetLastError();
}

}  // namespace onboard::kernels
