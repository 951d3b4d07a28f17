// Generated CPU DSA forward: lightning indexer scores -> exact causal top-k per query (selection
// sorted ascending) -> softmax attention over exactly the selected keys, walked in blocks of
// contiguous runs (each run one memcpy), online softmax across blocks.
//
// onboard_dsa_index, per (batch, block of QB queries):
//   Step 1  Qi[QB*HI][DIP] = index_q rows; tile = Qi . index_k^T (keys in blocks of 64)
//   Step 2  I[t,s] = sum_j w[t,j] * relu(tile[t,j,s]) for s <= t
//   Step 3  top min(TOPK, t+1) by (score desc, index asc): threshold by nth_element on the scores,
//           then one pass in index order (above threshold, then ties by index) -> sorted; pad -1
// onboard_dsa_attn, per (batch, query, kv head) with G = HQ/HKV query heads sharing the kv head:
//   Step 1  QtT[DP][GP] = (scale * q)^T
//   Step 2  per block of up to BLOCK selected keys: L = K_sel QtT (logits^T), rows read in place
//           through row pointers when D, DV are multiples of 16, else gathered run by run
//   Step 3  online softmax per head (running max m, sum l), acc = acc*alpha + P V_sel
//   Step 4  o = acc / (l + exp(sink - m)) [* sigmoid(gate)]
#include "codegen/source_template.h"

namespace onboard::codegen {

std::string DsaCpuTemplate() {
  return R"CPP(
namespace onboard_gen {

constexpr int HQ = @HQ@, HKV = @HKV@, D = @D@, DV = @DV@, HI = @HI@, DI = @DI@;
constexpr int64_t TOPK = @TOPK@;
constexpr int BLOCK = @BLOCK@;
constexpr float SCALE = @SCALE@;
constexpr bool GATED = @GATED@;
constexpr bool SINK = @SINK@;
constexpr int G = HQ / HKV;
constexpr int DP = pad16(D), DVP = pad16(DV), DIP = pad16(DI), GP = pad16(G);
constexpr int QB = 16;   // queries per indexer work item
constexpr int KB = 64;   // keys per indexer tile

static void index_block(const float* index_q, const float* kT, const float* index_w,
                        int32_t* topk_indices, int64_t b, int64_t t0, int64_t T, int64_t Tp,
                        std::vector<float>& Qi, std::vector<float>& tile, std::vector<float>& score,
                        std::vector<float>& vals) {
  const int nq = static_cast<int>(std::min<int64_t>(QB, T - t0));
  // Step 1: indexer queries of this block, padded.
  std::fill(Qi.begin(), Qi.end(), 0.0f);
  for (int r = 0; r < nq; ++r)
    for (int j = 0; j < HI; ++j) {
      const float* src = index_q + (((b * T + t0 + r) * HI) + j) * DI;
      std::copy(src, src + DI, &Qi[(r * HI + j) * DIP]);
    }
  const int64_t last = t0 + nq - 1;
  // Step 2: weighted relu scores for keys 0..last.
  for (int64_t s0 = 0; s0 <= last; s0 += KB) {
    std::fill(tile.begin(), tile.end(), 0.0f);
    gemm_acc<KB>(nq * HI, DIP, Qi.data(), DIP, 1, kT + s0, Tp, tile.data(), KB);
    for (int r = 0; r < nq; ++r) {
      const float* w = index_w + (b * T + t0 + r) * HI;
      float* out = &score[static_cast<int64_t>(r) * Tp + s0];
      for (int c = 0; c < KB; ++c) out[c] = 0.0f;
      for (int j = 0; j < HI; ++j) {
        const float* row = &tile[(r * HI + j) * KB];
        const float wj = w[j];
        for (int c = 0; c < KB; ++c) out[c] += wj * (row[c] > 0.0f ? row[c] : 0.0f);
      }
    }
  }
  // Step 3: exact top-k per query, sorted ascending.
  for (int r = 0; r < nq; ++r) {
    const int64_t t = t0 + r;
    int32_t* dst = topk_indices + (b * T + t) * TOPK;
    const int64_t n = t + 1;
    if (n <= TOPK) {
      for (int64_t s = 0; s < n; ++s) dst[s] = static_cast<int32_t>(s);
      for (int64_t s = n; s < TOPK; ++s) dst[s] = -1;
      continue;
    }
    // The TOPK-th largest score (threshold), then one pass in index order: every key above it, and
    // keys equal to it by ascending index until TOPK are taken. The output comes out sorted.
    const float* sc = &score[static_cast<int64_t>(r) * Tp];
    vals.assign(sc, sc + n);
    std::nth_element(vals.begin(), vals.begin() + (n - TOPK), vals.end());
    const float thr = vals[n - TOPK];
    int64_t above = 0;
    for (int64_t s = 0; s < n; ++s) above += sc[s] > thr;
    int64_t ties_left = TOPK - above, w = 0;
    for (int64_t s = 0; s < n && w < TOPK; ++s) {
      const bool take = sc[s] > thr || (sc[s] == thr && ties_left > 0);
      if (take) {
        ties_left -= sc[s] == thr;
        dst[w++] = static_cast<int32_t>(s);
      }
    }
    for (; w < TOPK; ++w) dst[w] = -1;  // only reachable with NaN scores
  }
}

// Rows of K and V can be read in place (no gather copy) when their widths are whole 16-lane vectors.
constexpr bool IN_PLACE = D % 16 == 0 && DV % 16 == 0;

struct AttnScratch {
  std::vector<float> QtT, Kblk, Vblk, L, acc, m, l, alpha, mx, sum;
  std::vector<const float*> krow, vrow;
  AttnScratch()
      : QtT(DP * GP), Kblk(BLOCK * DP), Vblk(BLOCK * DVP), L(BLOCK * GP), acc(G * DVP), m(GP), l(GP),
        alpha(GP), mx(GP), sum(GP), krow(BLOCK), vrow(BLOCK) {}
};

// L[i][0..GP) = krow[i] . QtT (MR key rows at a time, read in place through row pointers).
template <int MR>
static inline void logits_tile(const float* const* krow, const float* QtT, float* L) {
  constexpr int NV = GP / 16;
  vf acc[MR][NV] = {};
  for (int k = 0; k < D; ++k) {
    vf b[NV];
    for (int v = 0; v < NV; ++v) b[v] = vload(QtT + k * GP + v * 16);
    for (int r = 0; r < MR; ++r) {
      const float a = krow[r][k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) vstore(L + r * GP + v * 16, acc[r][v]);
}

// acc[MR rows of heads][64 * j .. + 16*NV) += P[heads][nb] . V rows (in place through row pointers).
template <int MR, int NV>
static inline void pv_tile(int nb, const float* P, const float* const* vrow, int col, float* acc) {
  vf c[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = vload(acc + r * DVP + col + v * 16);
  for (int i = 0; i < nb; ++i) {
    vf b[NV];
    for (int v = 0; v < NV; ++v) b[v] = vload(vrow[i] + col + v * 16);
    for (int r = 0; r < MR; ++r) {
      const float a = P[i * GP + r];
      for (int v = 0; v < NV; ++v) c[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) vstore(acc + r * DVP + col + v * 16, c[r][v]);
}

template <int NV>
static inline void pv_cols(int nb, const float* P, const float* const* vrow, int col, float* acc) {
  int g = 0;
  for (; g + 4 <= G; g += 4) pv_tile<4, NV>(nb, P + g, vrow, col, acc + g * DVP);
  if constexpr (G % 4 != 0) {
    for (; g < G; ++g) pv_tile<1, NV>(nb, P + g, vrow, col, acc + g * DVP);
  }
}

static void attend(const float* q, const float* k, const float* v, const float* gate,
                   const float* sink, const int32_t* idx, float* o, int64_t b, int64_t t, int kh,
                   int64_t T, AttnScratch& s) {
  // Step 1: scaled queries of the heads sharing kv head kh, transposed.
  std::fill(s.QtT.begin(), s.QtT.end(), 0.0f);
  for (int g = 0; g < G; ++g) {
    const float* qr = q + ((b * T + t) * HQ + kh * G + g) * D;
    for (int d = 0; d < D; ++d) s.QtT[d * GP + g] = qr[d] * SCALE;
  }
  std::fill(s.acc.begin(), s.acc.end(), 0.0f);
  for (int g = 0; g < GP; ++g) {
    s.m[g] = -INFINITY;
    s.l[g] = 0.0f;
  }
  const int32_t* sel = idx + (b * T + t) * TOPK;
  int64_t nsel = 0;
  while (nsel < TOPK && sel[nsel] >= 0) ++nsel;
  for (int64_t i0 = 0; i0 < nsel; i0 += BLOCK) {
    const int nb = static_cast<int>(std::min<int64_t>(BLOCK, nsel - i0));
    // Step 2: logits of the block; rows read in place, or gathered run by run (one memcpy per row).
    if constexpr (IN_PLACE) {
      for (int i = 0; i < nb; ++i) {
        s.krow[i] = k + ((b * T + sel[i0 + i]) * HKV + kh) * D;
        s.vrow[i] = v + ((b * T + sel[i0 + i]) * HKV + kh) * DV;
      }
      int i = 0;
      for (; i + 8 <= nb; i += 8) logits_tile<8>(&s.krow[i], s.QtT.data(), &s.L[i * GP]);
      for (; i < nb; ++i) logits_tile<1>(&s.krow[i], s.QtT.data(), &s.L[i * GP]);
    }
    for (int i = 0; !IN_PLACE && i < nb;) {
      int run = 1;
      while (i + run < nb && sel[i0 + i + run] == sel[i0 + i] + run) ++run;
      const int64_t s0 = sel[i0 + i];
      for (int r = 0; r < run; ++r) {
        const float* kr = k + ((b * T + s0 + r) * HKV + kh) * D;
        const float* vr = v + ((b * T + s0 + r) * HKV + kh) * DV;
        std::memcpy(&s.Kblk[(i + r) * DP], kr, sizeof(float) * D);
        std::memcpy(&s.Vblk[(i + r) * DVP], vr, sizeof(float) * DV);
        for (int d = D; d < DP; ++d) s.Kblk[(i + r) * DP + d] = 0.0f;
        for (int e = DV; e < DVP; ++e) s.Vblk[(i + r) * DVP + e] = 0.0f;
      }
      i += run;
    }
    if constexpr (!IN_PLACE) {
      std::fill(s.L.begin(), s.L.begin() + nb * GP, 0.0f);
      gemm_acc<GP>(nb, DP, s.Kblk.data(), DP, 1, s.QtT.data(), GP, s.L.data(), GP);
    }
    // Step 3: online softmax, vectorised across heads; L becomes P (unnormalised probabilities).
    for (int g = 0; g < GP; ++g) s.mx[g] = s.m[g];
    for (int i = 0; i < nb; ++i)
      for (int g = 0; g < GP; ++g) s.mx[g] = std::max(s.mx[g], s.L[i * GP + g]);
    for (int g = 0; g < GP; ++g) s.sum[g] = 0.0f;
    for (int i = 0; i < nb; ++i)
      for (int g = 0; g < GP; ++g) {
        const float p = fexp(s.L[i * GP + g] - s.mx[g]);
        s.L[i * GP + g] = p;
        s.sum[g] += p;
      }
    for (int g = 0; g < GP; ++g) {
      s.alpha[g] = fexp(s.m[g] - s.mx[g]);
      s.l[g] = s.l[g] * s.alpha[g] + s.sum[g];
      s.m[g] = s.mx[g];
    }
    for (int g = 0; g < G; ++g)
      for (int e = 0; e < DVP; ++e) s.acc[g * DVP + e] *= s.alpha[g];
    if constexpr (IN_PLACE) {
      constexpr int kFull = DV / 64, kRem = (DV % 64) / 16;
      for (int j = 0; j < kFull; ++j) pv_cols<4>(nb, s.L.data(), s.vrow.data(), j * 64, s.acc.data());
      if constexpr (kRem > 0) pv_cols<kRem>(nb, s.L.data(), s.vrow.data(), kFull * 64, s.acc.data());
    } else {
      gemm_acc<DVP>(G, nb, s.L.data(), 1, GP, s.Vblk.data(), DVP, s.acc.data(), DVP);
    }
  }
  // Step 4: normalise, sink, gate.
  for (int g = 0; g < G; ++g) {
    const int h = kh * G + g;
    float den = s.l[g];
    if constexpr (SINK) den += fexp(sink[h] - s.m[g]);
    const float inv = 1.0f / den;
    float* orow = o + ((b * T + t) * HQ + h) * DV;
    const float* gr = GATED ? gate + ((b * T + t) * HQ + h) * DV : nullptr;
    for (int e = 0; e < DV; ++e) {
      float val = s.acc[g * DVP + e] * inv;
      if constexpr (GATED) val *= 1.0f / (1.0f + fexp(-gr[e]));
      orow[e] = val;
    }
  }
}

}  // namespace onboard_gen

extern "C" const char* onboard_kernel_name(void) { return "@NAME@"; }

extern "C" int onboard_dsa_index(const float* index_q, const float* index_k, const float* index_w,
                                 int32_t* topk_indices, int64_t batch, int64_t seq_len,
                                 int64_t num_threads) {
  using namespace onboard_gen;
  if (batch < 1 || seq_len < 1) return 1;
  if (!index_q || !index_k || !index_w || !topk_indices) return 2;
  const int64_t T = seq_len, Tp = (T + KB - 1) / KB * KB;
  // Indexer keys transposed and padded: kT[b][DIP][Tp].
  std::vector<float> kT(static_cast<size_t>(batch) * DIP * Tp, 0.0f);
  parallel_for(batch, num_threads, [&](int64_t b) {
    float* dst = &kT[static_cast<size_t>(b) * DIP * Tp];
    for (int64_t s = 0; s < T; ++s)
      for (int d = 0; d < DI; ++d) dst[d * Tp + s] = index_k[(b * T + s) * DI + d];
  });
  const int64_t nblocks = (T + QB - 1) / QB;
  parallel_for(batch * nblocks, num_threads, [&](int64_t item) {
    thread_local std::vector<float> Qi, tile, score, vals;
    Qi.resize(QB * HI * DIP);
    tile.resize(QB * HI * KB);
    score.resize(static_cast<size_t>(QB) * Tp);
    const int64_t b = item / nblocks;
    index_block(index_q, &kT[static_cast<size_t>(b) * DIP * Tp], index_w, topk_indices, b,
                (item % nblocks) * QB, T, Tp, Qi, tile, score, vals);
  });
  return 0;
}

extern "C" int onboard_dsa_attn(const float* q, const float* k, const float* v, const float* gate,
                                const float* sink, const int32_t* topk_indices, float* o,
                                int64_t batch, int64_t seq_len, int64_t num_threads) {
  using namespace onboard_gen;
  if (batch < 1 || seq_len < 1) return 1;
  if (!q || !k || !v || !o || !topk_indices) return 2;
  if ((GATED && !gate) || (SINK && !sink)) return 2;
  const int64_t T = seq_len;
  parallel_for(batch * T * HKV, num_threads, [&](int64_t item) {
    thread_local AttnScratch s;
    const int kh = static_cast<int>(item % HKV);
    const int64_t bt = item / HKV;
    attend(q, k, v, gate, sink, topk_indices, o, bt / T, bt % T, kh, T, s);
  });
  return 0;
}

extern "C" int onboard_dsa_fwd(const float* q, const float* k, const float* v, const float* index_q,
                               const float* index_k, const float* index_w, const float* gate,
                               const float* sink, float* o, int32_t* topk_indices, int64_t batch,
                               int64_t seq_len, int64_t num_threads) {
  using namespace onboard_gen;
  if (batch < 1 || seq_len < 1) return 1;
  std::vector<int32_t> own;
  if (topk_indices == nullptr) {
    own.resize(static_cast<size_t>(batch) * seq_len * TOPK);
    topk_indices = own.data();
  }
  int rc = onboard_dsa_index(index_q, index_k, index_w, topk_indices, batch, seq_len, num_threads);
  if (rc != 0) return rc;
  return onboard_dsa_attn(q, k, v, gate, sink, topk_indices, o, batch, seq_len, num_threads);
}
)CPP";
}

}  // namespace onboard::codegen
