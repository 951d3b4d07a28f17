// CUDA DSA forward (NOT yet run on a GPU; its logic is checked under CPU emulation of the CUDA model,
// see validators/cuda_emulation_runtime.h). A template over its configuration: the generator emits a
// short file defining Config for one model and exporting the C ABI with ONBOARD_EXPORT_DSA_CUDA; the
// build compiles a default instantiation (default_cuda_instances.cu).
//
// Config (all static constexpr unless noted): int HQ, HKV, D, DV (query heads, kv heads, q/k and value
//   head dims), HI, DI (indexer heads and head dim), VO (value up-projection width per head, 0 = none);
//   int64_t TOPK; int BLOCK (keys per softmax block); float SCALE (softmax scale); bool GATED (sigmoid
//   output gate), SINK (per-head sink logit); type elem_t (float or __nv_bfloat16: the q, k, v, indexer
//   and gate operands). Units: T tokens; scores fp32; shared memory in bytes.
// ONE kernel, one pass, one block per query row (b, t); no score workspace in global memory:
//   Step 1  indexer scores of the keys s <= t, tile by tile (TOPK keys per tile), as order-preserving
//           uint32 keys appended to a candidate list in shared memory (2*TOPK entries, ascending index)
//   Step 2  whenever the list holds more than TOPK: exact TOPK-th largest key by 4-pass 8-bit radix
//           select, then compaction in index order (block prefix sums), in place: keys above the k-th,
//           then ties at the k-th by ascending index -> the survivors stay sorted ascending. Pruning a
//           set to its top TOPK under the total order (score desc, index asc) and merging more keys
//           keeps the global top TOPK, so the last list is the exact selection.
//   Step 3  attention for every (kv head, group of <= 16 query heads) of the row over the selected keys
//           (held in shared memory), walked in blocks of BLOCK (sorted -> monotone, mostly contiguous
//           rows), online softmax, acc[G][DV] in shared memory; then sink, the value up-projection
//           (VO > 0: o_h = (acc_h / den) v_up[h], v_up [HQ,DV,VO], absorbed MLA's W_UV) and the gate
//           on the per-head output (after the up-projection, as the model computes it).
//   Shared memory: 8 * 2 TOPK (candidates) + 4 * (GB D + GB DV + GB BLOCK + 3 GB) dynamic,
//   4 * (HI DI + HI + 256 + 256) static; TOPK 2048, D 576, DV 512, 16 heads, BLOCK 64: 106 KB + 34 KB.
#pragma once

#include "codegen/kernels/cuda_prelude.cuh"

// The C ABI of one DSA instantiation (codegen/README.md): its name, workspace size (0: none) and
// forward (the generated file's one line after its Config).
#define ONBOARD_EXPORT_DSA_CUDA(Config, kernel_name)                                                 \
  ONBOARD_EXPORT_CUDA_LIBRARY(::onboard::kernels::DsaCuda<Config>, dsa, kernel_name)                 \
  extern "C" int onboard_dsa_fwd_cuda(                                                               \
      const onboard_dsa_cuda_t::elem_t* q, const onboard_dsa_cuda_t::elem_t* k,                      \
      const onboard_dsa_cuda_t::elem_t* v, const onboard_dsa_cuda_t::elem_t* index_q,                \
      const onboard_dsa_cuda_t::elem_t* index_k, const onboard_dsa_cuda_t::elem_t* index_w,          \
      const onboard_dsa_cuda_t::elem_t* gate, const float* sink, const float* v_up, float* o,        \
      int32_t* topk_indices, void* workspace, int64_t batch, int64_t seq_len, cudaStream_t stream) { \
    return onboard_dsa_cuda_t::Forward(q, k, v, index_q, index_k, index_w, gate, sink, v_up, o,      \
                                       topk_indices, workspace, batch, seq_len, stream);             \
  }

namespace onboard::kernels {

constexpr int kDsaCudaThreads = 256;  // threads per block

__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // larger float -> larger key
}

// Inclusive block-wide prefix sum of one value per thread (kDsaCudaThreads threads).
__device__ inline int block_scan(int x, int* tmp) {
  tmp[threadIdx.x] = x;
  __syncthreads();
  for (int off = 1; off < kDsaCudaThreads; off <<= 1) {
    const int add = static_cast<int>(threadIdx.x) >= off ? tmp[threadIdx.x - off] : 0;
    __syncthreads();
    tmp[threadIdx.x] += add;
    __syncthreads();
  }
  const int r = tmp[threadIdx.x];
  __syncthreads();
  return r;
}

// Step 2: keeps the top `need` of the n candidates (key desc, then index asc) in place, in index order.
// keys/ids: shared candidate list in ascending index order; hist [256], tmp [threads] shared scratch.
__device__ inline void dsa_prune(uint32_t* keys, int32_t* ids, int n, int need, int* hist, int* tmp) {
  __shared__ uint32_t s_prefix, s_mask;
  __shared__ int s_remaining, s_tile_tie, s_tile_take;
  const int tid = threadIdx.x;
  if (tid == 0) {
    s_prefix = 0;
    s_mask = 0;
    s_remaining = need;
  }
  __syncthreads();
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += kDsaCudaThreads) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix, mask = s_mask;
    for (int s = tid; s < n; s += kDsaCudaThreads) {
      if ((keys[s] & mask) == prefix) atomicAdd(&hist[(keys[s] >> shift) & 255u], 1);
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
  const int ties = s_remaining;  // how many keys equal to kth to keep, lowest indices first
  // Compaction in index order: each tile reads its entries before the scans' barriers and writes to
  // positions <= its own, so the in-place moves never overwrite an entry not yet read.
  int written = 0, ties_seen = 0;
  for (int base = 0; base < n; base += kDsaCudaThreads) {
    const int s = base + tid;
    const uint32_t key = s < n ? keys[s] : 0u;
    const int32_t id = s < n ? ids[s] : -1;
    const int is_tie = (s < n && key == kth) ? 1 : 0;
    const int tie_rank = block_scan(is_tie, tmp) - is_tie + ties_seen;
    const int take = (s < n && (key > kth || (is_tie && tie_rank < ties))) ? 1 : 0;
    const int pos = block_scan(take, tmp) - take + written;
    if (take) {
      keys[pos] = key;
      ids[pos] = id;
    }
    if (tid == kDsaCudaThreads - 1) {
      s_tile_tie = tie_rank - ties_seen + is_tie;
      s_tile_take = pos - written + take;
    }
    __syncthreads();
    ties_seen += s_tile_tie;
    written += s_tile_take;
    __syncthreads();
  }
}

template <class Config>
struct DsaCuda {
  using elem_t = typename Config::elem_t;
  static constexpr int HQ = Config::HQ, HKV = Config::HKV, D = Config::D, DV = Config::DV;
  static constexpr int HI = Config::HI, DI = Config::DI, VO = Config::VO;
  static constexpr int OV = VO > 0 ? VO : DV;  // output width per head
  static constexpr int64_t TOPK = Config::TOPK;
  static constexpr int CAP = 2 * (int)TOPK;  // candidate list entries
  static constexpr int BLOCK = Config::BLOCK;
  static constexpr float SCALE = Config::SCALE;
  static constexpr bool GATED = Config::GATED, SINK = Config::SINK;
  static constexpr int G = HQ / HKV;
  static constexpr int GB = G < 16 ? G : 16;  // query heads per attention pass (shared memory bound)
  static constexpr int NGROUPS = (G + GB - 1) / GB;
  static constexpr int THREADS = kDsaCudaThreads;
  static_assert(HKV >= 1 && HQ % HKV == 0, "query heads must be a multiple of the kv heads");
  static_assert(TOPK >= 1 && TOPK <= 4096, "the CUDA candidate list holds 2 * TOPK <= 8192 entries");

  // Dynamic shared memory bytes of the kernel: the candidate list, then the attention scratch.
  static constexpr size_t SmemBytes() {
    return sizeof(uint32_t) * CAP + sizeof(int32_t) * CAP +
           sizeof(float) * (GB * D + GB * DV + GB * BLOCK + 3 * GB);
  }
  // No global workspace (kept in the ABI, = 0): the scores never leave shared memory.
  static size_t WorkspaceBytes(int64_t, int64_t) { return 0; }

  // Device pointers; o fp32 [B,T,HQ,OV]; idx [B,T,TOPK] int32 written when non-null (sorted, -1 padded).
  static int Forward(const elem_t* q, const elem_t* k, const elem_t* v, const elem_t* index_q,
                     const elem_t* index_k, const elem_t* index_w, const elem_t* gate, const float* sink,
                     const float* v_up, float* o, int32_t* topk_indices, void* workspace, int64_t batch,
                     int64_t seq_len, cudaStream_t stream);
};

// Step 1 + 2 of one query row: the selection into ids[0 .. return) (ascending), scores in shared memory.
template <class Config>
__device__ int dsa_select(const typename Config::elem_t* __restrict__ iq,
                          const typename Config::elem_t* __restrict__ ik,
                          const typename Config::elem_t* __restrict__ iw, uint32_t* keys, int32_t* ids,
                          int64_t b, int64_t t, int64_t T) {
  using P = DsaCuda<Config>;
  constexpr int HI = P::HI, DI = P::DI, THREADS = P::THREADS;
  constexpr int TOPK = (int)P::TOPK;
  using elem_t = typename P::elem_t;
  __shared__ float qs[HI * DI];
  __shared__ float ws[HI];
  __shared__ int hist[256];
  __shared__ int scan_tmp[THREADS];
  const int tid = threadIdx.x;
  const int64_t n = t + 1;
  if (n <= TOPK) {
    for (int s = tid; s < n; s += THREADS) ids[s] = s;
    __syncthreads();
    return (int)n;
  }
  for (int i = tid; i < HI * DI; i += THREADS) qs[i] = to_f(iq[(b * T + t) * HI * DI + i]);
  for (int j = tid; j < HI; j += THREADS) ws[j] = to_f(iw[(b * T + t) * HI + j]);
  __syncthreads();
  int held = 0;  // candidates in the list, ascending index
  for (int64_t s0 = 0; s0 < n; s0 += TOPK) {
    const int m = n - s0 < TOPK ? (int)(n - s0) : TOPK;
    // Step 1: the tile's scores, appended after the held candidates.
    for (int i = tid; i < m; i += THREADS) {
      const elem_t* kr = ik + (b * T + s0 + i) * DI;
      float acc = 0.0f;
      for (int j = 0; j < HI; ++j) {
        float dot = 0.0f;
        for (int d = 0; d < DI; ++d) dot += qs[j * DI + d] * to_f(kr[d]);
        acc += ws[j] * fmaxf(dot, 0.0f);
      }
      keys[held + i] = order_key(acc);
      ids[held + i] = (int32_t)(s0 + i);
    }
    __syncthreads();
    held += m;
    // Step 2: back to TOPK (held <= 2 * TOPK before, TOPK after).
    if (held > TOPK) {
      dsa_prune(keys, ids, held, TOPK, hist, scan_tmp);
      held = TOPK;
    }
  }
  return held;
}

// Step 3 for one (kv head kh, head group grp) of query row (b, t) over the nsel keys ids[0 .. nsel).
template <class Config>
__device__ void dsa_attend(const typename Config::elem_t* __restrict__ q,
                           const typename Config::elem_t* __restrict__ k,
                           const typename Config::elem_t* __restrict__ v,
                           const typename Config::elem_t* __restrict__ gate, const float* __restrict__ sink,
                           const float* __restrict__ v_up, const int32_t* sel, int nsel, float* scratch,
                           float* __restrict__ o, int64_t b, int64_t t, int64_t T, int kh, int grp) {
  using P = DsaCuda<Config>;
  constexpr int HQ = P::HQ, HKV = P::HKV, D = P::D, DV = P::DV, VO = P::VO, OV = P::OV;
  constexpr int BLOCK = P::BLOCK, G = P::G, GB = P::GB, THREADS = P::THREADS;
  constexpr float SCALE = P::SCALE;
  constexpr bool GATED = P::GATED, SINK = P::SINK;
  using elem_t = typename P::elem_t;
  float* qs = scratch;              // [GB][D]
  float* acc = qs + GB * D;         // [GB][DV]
  float* p = acc + GB * DV;         // [GB][BLOCK]
  float* m = p + GB * BLOCK;        // [GB]
  float* l = m + GB;                // [GB]
  float* alpha = l + GB;            // [GB]
  const int h0 = kh * G + grp * GB;                      // first query head of this pass
  const int gn = G - grp * GB < GB ? G - grp * GB : GB;  // heads in this pass
  const int tid = threadIdx.x;
  for (int i = tid; i < gn * D; i += THREADS) {
    const int g = i / D, d = i % D;
    qs[i] = to_f(q[((b * T + t) * HQ + h0 + g) * D + d]) * SCALE;
  }
  for (int i = tid; i < gn * DV; i += THREADS) acc[i] = 0.0f;
  for (int g = tid; g < gn; g += THREADS) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
  }
  __syncthreads();
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
  // Normalise (sink in the denominator), up-project, gate the per-head output.
  for (int i = tid; i < gn * DV; i += THREADS) {
    const int g = i / DV;
    float den = l[g];
    if (SINK) den += expf(sink[h0 + g] - m[g]);
    acc[i] /= den;
  }
  __syncthreads();
  for (int i = tid; i < gn * OV; i += THREADS) {
    const int g = i / OV, e = i % OV;
    const int h = h0 + g;
    float val;
    if constexpr (VO > 0) {
      val = 0.0f;
      for (int c = 0; c < DV; ++c) val += acc[g * DV + c] * v_up[((int64_t)h * DV + c) * VO + e];
    } else {
      val = acc[i];
    }
    if (GATED) val *= 1.0f / (1.0f + expf(-to_f(gate[((b * T + t) * HQ + h) * OV + e])));
    o[((b * T + t) * HQ + h) * OV + e] = val;
  }
  __syncthreads();  // the next pass rewrites the scratch
}

// One block per query row (blockIdx.x = t, blockIdx.y = b): select, then attend with every head.
template <class Config>
__global__ void __launch_bounds__(kDsaCudaThreads) dsa_fused_kernel(
    const typename Config::elem_t* __restrict__ q, const typename Config::elem_t* __restrict__ k,
    const typename Config::elem_t* __restrict__ v, const typename Config::elem_t* __restrict__ iq,
    const typename Config::elem_t* __restrict__ ik, const typename Config::elem_t* __restrict__ iw,
    const typename Config::elem_t* __restrict__ gate, const float* __restrict__ sink,
    const float* __restrict__ v_up, float* __restrict__ o, int32_t* __restrict__ idx, int64_t T) {
  using P = DsaCuda<Config>;
  constexpr int CAP = P::CAP, HKV = P::HKV, NGROUPS = P::NGROUPS, THREADS = P::THREADS;
  constexpr int64_t TOPK = P::TOPK;
  ONBOARD_DYNAMIC_SMEM(float, smem);
  uint32_t* keys = reinterpret_cast<uint32_t*>(smem);     // [CAP]
  int32_t* ids = reinterpret_cast<int32_t*>(keys + CAP);  // [CAP]
  float* scratch = reinterpret_cast<float*>(ids + CAP);   // attention scratch
  const int64_t t = blockIdx.x, b = blockIdx.y;
  const int nsel = dsa_select<Config>(iq, ik, iw, keys, ids, b, t, T);
  if (idx != nullptr) {
    int32_t* out = idx + (b * T + t) * TOPK;
    for (int64_t s = threadIdx.x; s < TOPK; s += THREADS) out[s] = s < nsel ? ids[s] : -1;
  }
  for (int kh = 0; kh < HKV; ++kh)
    for (int grp = 0; grp < NGROUPS; ++grp)
      dsa_attend<Config>(q, k, v, gate, sink, v_up, ids, nsel, scratch, o, b, t, T, kh, grp);
}

template <class Config>
int DsaCuda<Config>::Forward(const elem_t* q, const elem_t* k, const elem_t* v, const elem_t* index_q,
                             const elem_t* index_k, const elem_t* index_w, const elem_t* gate,
                             const float* sink, const float* v_up, float* o, int32_t* topk_indices,
                             void* /*workspace*/, int64_t batch, int64_t seq_len, cudaStream_t stream) {
  if (batch < 1 || seq_len < 1 || batch > 65535) return (int)cudaErrorInvalidValue;
  if ((GATED && gate == nullptr) || (SINK && sink == nullptr) || (VO > 0 && v_up == nullptr))
    return (int)cudaErrorInvalidValue;
  const size_t smem = SmemBytes();
  cudaError_t err = allow_smem(dsa_fused_kernel<Config>, smem);
  if (err != cudaSuccess) return (int)err;
  ONBOARD_LAUNCH(dsa_fused_kernel<Config>, dim3((unsigned)seq_len, (unsigned)batch), THREADS, smem, stream, q,
                 k, v, index_q, index_k, index_w, gate, sink, v_up, o, topk_indices, seq_len);
  return (int)cudaGetLastError();
}

}  // namespace onboard::kernels
