// CPU DSA forward: lightning indexer scores -> exact causal top-k per query (selection sorted
// ascending) -> softmax attention over exactly the selected keys, walked in blocks of contiguous runs,
// online softmax across blocks. A template over its configuration (the generator emits Config and
// exports the C ABI with ONBOARD_EXPORT_DSA_CPU).
//
// Config (static constexpr): int HQ, HKV, D, DV, HI, DI, VO (value up-projection width per head,
//   0 = none); int64_t TOPK; int BLOCK; float SCALE; bool GATED, SINK. Shapes: codegen/kernel_abi.h.
//
// index (per batch and block of QB queries): DsaIndexCpu (codegen/kernels/dsa_index_cpu.h) streams
//   the block's weighted relu scores tile by tile into an exact causal top-k (score desc, index asc;
//   sorted ascending, -1 padded); a query holds at most 2*TOPK candidates, never its T scores.
// attend (per batch, query, kv head) with G = HQ/HKV query heads sharing the kv head:
//   Step 1  QtT[DP][GP] = (scale * q)^T
//   Step 2  per block of up to BLOCK selected keys: L = K_sel QtT (logits^T), rows read in place
//           through row pointers when D, DV are multiples of 16, else gathered run by run
//   Step 3  online softmax per head (running max m, sum l), acc = acc*alpha + P V_sel
//   Step 4  lat = acc / (l + exp(sink - m)); o = lat (VO = 0) or lat v_up[h] ([DV] x [DV,VO], absorbed
//           MLA's W_UV); then [* sigmoid(gate)] on o: the gate acts on the per-head output after the
//           up-projection, as the model computes it (a sigmoid does not commute with the projection)
// Forward (fused): per (batch, query block) the index, then attend for those queries at once: the
//   block's candidates (L2) and selection (QB x TOPK int32) are used where they are made, and the
//   T x TOPK selection the two calls write and read back is never allocated.
#pragma once

#include "codegen/kernels/cpu_simd.h"
#include "codegen/kernels/dsa_index_cpu.h"

namespace onboard::kernels {

template <class Config>
struct DsaCpu {
  static constexpr int HQ = Config::HQ, HKV = Config::HKV, D = Config::D, DV = Config::DV;
  static constexpr int HI = Config::HI, DI = Config::DI, BLOCK = Config::BLOCK, VO = Config::VO;
  static constexpr int OV = VO > 0 ? VO : DV;  // output width per head
  static constexpr int64_t TOPK = Config::TOPK;
  static constexpr float SCALE = Config::SCALE;
  static constexpr int G = HQ / HKV;
  static constexpr int DP = pad16(D), DVP = pad16(DV), GP = pad16(G);
  using Indexer = DsaIndexCpu<HI, DI, TOPK>;
  static constexpr int QB = Indexer::QB, KB = Indexer::KB;
  // Rows of K and V are read in place (no gather copy) when their widths are whole 16-float rows.
  static constexpr bool IN_PLACE = D % 16 == 0 && DV % 16 == 0;
  static_assert(HQ % HKV == 0, "query heads must be a multiple of the kv heads");

  struct AttnScratch {
    std::vector<float> QtT, Kblk, Vblk, L, acc, m, l, alpha, mx, sum, up;
    std::vector<const float*> krow, vrow;
    AttnScratch()
        : QtT(DP * GP),
          Kblk(BLOCK * DP),
          Vblk(BLOCK * DVP),
          L(BLOCK * GP),
          acc(G * DVP),
          m(GP),
          l(GP),
          alpha(GP),
          mx(GP),
          sum(GP),
          up(OV),
          krow(BLOCK),
          vrow(BLOCK) {}
  };

  // L[i][0..GP) = krow[i] . QtT (MR key rows at a time, read in place through row pointers).
  template <int MR>
  static void logits_tile(const float* const* krow, const float* QtT, float* L) {
    constexpr int NV = GP / kLanes;
    const DF d;
    VF acc[MR][NV];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(d);
    for (int k = 0; k < D; ++k) {
      VF b[NV];
      for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, QtT + k * GP + v * kLanes);
      for (int r = 0; r < MR; ++r) {
        const VF a = hn::Set(d, krow[r][k]);
        for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, L + r * GP + v * kLanes);
  }

  // Step 2 of attend, rows in place: logits of nb selected keys.
  static void block_logits_in_place(int nb, AttnScratch& s) {
    // Rows per tile: kRows x NV accumulators + NV B vectors + one broadcast fit the register file.
    constexpr int kRegs = kLanes >= 16 ? 32 : 16, kNV = GP / kLanes;
    constexpr int kRows = std::max(1, std::min(8, (kRegs - 1 - kNV) / kNV));
    int i = 0;
    for (; i + kRows <= nb; i += kRows) logits_tile<kRows>(&s.krow[i], s.QtT.data(), &s.L[i * GP]);
    for (; i < nb; ++i) logits_tile<1>(&s.krow[i], s.QtT.data(), &s.L[i * GP]);
  }

  // Step 2 of attend, gathered: copies the selected rows run by run (one memcpy per row), then a GEMM.
  static void block_logits_gathered(const float* k, const float* v, const int32_t* sel, int nb, int64_t b,
                                    int kh, int64_t T, AttnScratch& s) {
    for (int i = 0; i < nb;) {
      int run = 1;
      while (i + run < nb && sel[i + run] == sel[i] + run) ++run;
      const int64_t s0 = sel[i];
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
    std::fill(s.L.begin(), s.L.begin() + nb * GP, 0.0f);
    gemm_acc<GP>(nb, DP, s.Kblk.data(), DP, 1, s.QtT.data(), GP, s.L.data(), GP);
  }

  // Step 3 of attend: online softmax across heads (lanes); L becomes P; acc rescaled by alpha.
  static void online_softmax(int nb, AttnScratch& s) {
    const DF d;
    for (int g = 0; g < GP; g += kLanes) {
      VF mx = hn::LoadU(d, &s.m[g]);
      for (int i = 0; i < nb; ++i) mx = hn::Max(mx, hn::LoadU(d, &s.L[i * GP + g]));
      VF sum = hn::Zero(d);
      for (int i = 0; i < nb; ++i) {
        const VF p = vexp(d, hn::Sub(hn::LoadU(d, &s.L[i * GP + g]), mx));
        hn::StoreU(p, d, &s.L[i * GP + g]);
        sum = hn::Add(sum, p);
      }
      const VF alpha = vexp(d, hn::Sub(hn::LoadU(d, &s.m[g]), mx));
      hn::StoreU(alpha, d, &s.alpha[g]);
      hn::StoreU(hn::MulAdd(hn::LoadU(d, &s.l[g]), alpha, sum), d, &s.l[g]);
      hn::StoreU(mx, d, &s.m[g]);
    }
    for (int g = 0; g < G; ++g) scale(DVP, s.alpha[g], &s.acc[g * DVP]);
  }

  // acc[MR heads][col .. col + NV vectors) += P[heads][nb] . V rows (in place through row pointers).
  template <int MR, int NV>
  static void pv_tile(int nb, const float* P, const float* const* vrow, int col, float* acc) {
    const DF d;
    VF c[MR][NV];
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) c[r][v] = hn::LoadU(d, acc + r * DVP + col + v * kLanes);
    for (int i = 0; i < nb; ++i) {
      VF b[NV];
      for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(d, vrow[i] + col + v * kLanes);
      for (int r = 0; r < MR; ++r) {
        const VF a = hn::Set(d, P[i * GP + r]);
        for (int v = 0; v < NV; ++v) c[r][v] = hn::MulAdd(a, b[v], c[r][v]);
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v) hn::StoreU(c[r][v], d, acc + r * DVP + col + v * kLanes);
  }

  template <int NV>
  static void pv_cols(int nb, const float* P, const float* const* vrow, int col, float* acc) {
    int g = 0;
    for (; g + kTileRows <= G; g += kTileRows) pv_tile<kTileRows, NV>(nb, P + g, vrow, col, acc + g * DVP);
    for (; g < G; ++g) pv_tile<1, NV>(nb, P + g, vrow, col, acc + g * DVP);
  }

  // acc += P V over the selected rows, read in place.
  static void block_pv_in_place(int nb, AttnScratch& s) {
    constexpr int kTile = kTileVecs * kLanes;
    constexpr int kFull = DV / kTile, kRem = (DV % kTile) / kLanes;
    for (int j = 0; j < kFull; ++j) pv_cols<kTileVecs>(nb, s.L.data(), s.vrow.data(), j * kTile, s.acc.data());
    if constexpr (kRem > 0) pv_cols<kRem>(nb, s.L.data(), s.vrow.data(), kFull * kTile, s.acc.data());
  }

  static void attend(const float* q, const float* k, const float* v, const float* gate, const float* sink,
                     const float* v_up, const int32_t* sel, float* o, int64_t b, int64_t t, int kh, int64_t T,
                     AttnScratch& s) {
    // Step 1: scaled queries of the heads sharing kv head kh, transposed.
    std::fill(s.QtT.begin(), s.QtT.end(), 0.0f);
    for (int g = 0; g < G; ++g) {
      const float* qr = q + ((b * T + t) * HQ + kh * G + g) * D;
      for (int d = 0; d < D; ++d) s.QtT[d * GP + g] = qr[d] * SCALE;
    }
    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    std::fill(s.m.begin(), s.m.end(), -INFINITY);
    std::fill(s.l.begin(), s.l.end(), 0.0f);
    int64_t nsel = 0;
    while (nsel < TOPK && sel[nsel] >= 0) ++nsel;
    for (int64_t i0 = 0; i0 < nsel; i0 += BLOCK) {
      const int nb = static_cast<int>(std::min<int64_t>(BLOCK, nsel - i0));
      // Step 2: logits of the block.
      if constexpr (IN_PLACE) {
        for (int i = 0; i < nb; ++i) {
          s.krow[i] = k + ((b * T + sel[i0 + i]) * HKV + kh) * D;
          s.vrow[i] = v + ((b * T + sel[i0 + i]) * HKV + kh) * DV;
        }
        block_logits_in_place(nb, s);
      } else {
        block_logits_gathered(k, v, sel + i0, nb, b, kh, T, s);
      }
      // Step 3: online softmax, then acc += P V.
      online_softmax(nb, s);
      if constexpr (IN_PLACE) {
        block_pv_in_place(nb, s);
      } else {
        gemm_acc<DVP>(G, nb, s.L.data(), 1, GP, s.Vblk.data(), DVP, s.acc.data(), DVP);
      }
    }
    // Step 4: normalise, sink, up-project, gate.
    for (int g = 0; g < G; ++g) {
      const int h = kh * G + g;
      float den = s.l[g];
      if constexpr (Config::SINK) den += fexp(sink[h] - s.m[g]);
      const float inv = 1.0f / den;
      float* lat = &s.acc[g * DVP];
      for (int e = 0; e < DV; ++e) lat[e] *= inv;
      const float* val = lat;
      if constexpr (VO > 0) {
        std::fill(s.up.begin(), s.up.end(), 0.0f);
        const float* w = v_up + static_cast<int64_t>(h) * DV * VO;
        for (int c = 0; c < DV; ++c) {
          const float a = lat[c];
          for (int e = 0; e < VO; ++e) s.up[e] += a * w[c * VO + e];
        }
        val = s.up.data();
      }
      float* orow = o + ((b * T + t) * HQ + h) * OV;
      const float* gr = Config::GATED ? gate + ((b * T + t) * HQ + h) * OV : nullptr;
      for (int e = 0; e < OV; ++e) {
        float x = val[e];
        if constexpr (Config::GATED) x *= 1.0f / (1.0f + fexp(-gr[e]));
        orow[e] = x;
      }
    }
  }

  // ABI: onboard_dsa_index.
  static int Index(const float* index_q, const float* index_k, const float* index_w, int32_t* topk_indices,
                   int64_t batch, int64_t seq_len, int64_t num_threads) {
    if (batch < 1 || seq_len < 1) return 1;
    if (!index_q || !index_k || !index_w || !topk_indices) return 2;
    const int64_t T = seq_len, Tp = (T + KB - 1) / KB * KB;
    const std::vector<float> kT = Indexer::TransposeKeys(index_k, batch, T, Tp, num_threads);
    const int64_t nblocks = (T + QB - 1) / QB;
    parallel_for(batch * nblocks, num_threads, [&](int64_t item) {
      thread_local typename Indexer::Scratch s;
      s.Resize(Tp);
      const int64_t b = item / nblocks, t0 = (item % nblocks) * QB;
      const int nq = static_cast<int>(std::min<int64_t>(QB, T - t0));
      Indexer::Block(index_q, &kT[static_cast<size_t>(b) * Indexer::DIP * Tp], index_w, b, t0, nq, T, s,
                     topk_indices + (b * T + t0) * TOPK);
    });
    return 0;
  }

  // ABI: onboard_dsa_attn.
  static int Attend(const float* q, const float* k, const float* v, const float* gate, const float* sink,
                    const float* v_up, const int32_t* topk_indices, float* o, int64_t batch, int64_t seq_len,
                    int64_t num_threads) {
    if (batch < 1 || seq_len < 1) return 1;
    if (!q || !k || !v || !o || !topk_indices) return 2;
    if ((Config::GATED && !gate) || (Config::SINK && !sink) || (VO > 0 && !v_up)) return 2;
    const int64_t T = seq_len;
    parallel_for(batch * T * HKV, num_threads, [&](int64_t item) {
      thread_local AttnScratch s;
      const int kh = static_cast<int>(item % HKV);
      const int64_t bt = item / HKV;
      attend(q, k, v, gate, sink, v_up, topk_indices + bt * TOPK, o, bt / T, bt % T, kh, T, s);
    });
    return 0;
  }

  // ABI: onboard_dsa_fwd, fused: per (batch, query block) the index, then attention for its queries.
  // topk_indices may be null (the selection then lives only in a QB x TOPK block buffer).
  static int Forward(const float* q, const float* k, const float* v, const float* index_q,
                     const float* index_k, const float* index_w, const float* gate, const float* sink,
                     const float* v_up, float* o, int32_t* topk_indices, int64_t batch, int64_t seq_len,
                     int64_t num_threads) {
    if (batch < 1 || seq_len < 1) return 1;
    if (!q || !k || !v || !o || !index_q || !index_k || !index_w) return 2;
    if ((Config::GATED && !gate) || (Config::SINK && !sink) || (VO > 0 && !v_up)) return 2;
    const int64_t T = seq_len, Tp = (T + KB - 1) / KB * KB;
    const std::vector<float> kT = Indexer::TransposeKeys(index_k, batch, T, Tp, num_threads);
    const int64_t nblocks = (T + QB - 1) / QB;
    parallel_for(batch * nblocks, num_threads, [&](int64_t item) {
      thread_local typename Indexer::Scratch is;
      thread_local AttnScratch as;
      thread_local std::vector<int32_t> own;
      is.Resize(Tp);
      const int64_t b = item / nblocks, t0 = (item % nblocks) * QB;
      const int nq = static_cast<int>(std::min<int64_t>(QB, T - t0));
      int32_t* sel = topk_indices;
      if (sel != nullptr) {
        sel += (b * T + t0) * TOPK;
      } else {
        own.resize(static_cast<size_t>(QB) * TOPK);
        sel = own.data();
      }
      Indexer::Block(index_q, &kT[static_cast<size_t>(b) * Indexer::DIP * Tp], index_w, b, t0, nq, T, is,
                     sel);
      for (int r = 0; r < nq; ++r)
        for (int kh = 0; kh < HKV; ++kh)
          attend(q, k, v, gate, sink, v_up, sel + r * TOPK, o, b, t0 + r, kh, T, as);
    });
    return 0;
  }
};

}  // namespace onboard::kernels

// Exports the C ABI of one DSA CPU library for Config (used once, by the generated file).
#define ONBOARD_EXPORT_DSA_CPU(Config, kernel_name)                                                          \
  extern "C" int onboard_kernel_abi_version(void) { return 2; }                                              \
  extern "C" const char* onboard_kernel_name(void) { return kernel_name; }                                   \
  extern "C" const char* onboard_kernel_simd_target(void) { return ::onboard::kernels::simd_target_name(); } \
  extern "C" int onboard_dsa_index(const float* index_q, const float* index_k, const float* index_w,         \
                                   int32_t* topk_indices, int64_t batch, int64_t seq_len,                    \
                                   int64_t num_threads) {                                                    \
    return ::onboard::kernels::DsaCpu<Config>::Index(index_q, index_k, index_w, topk_indices, batch,         \
                                                     seq_len, num_threads);                                  \
  }                                                                                                          \
  extern "C" int onboard_dsa_attn(const float* q, const float* k, const float* v, const float* gate,         \
                                  const float* sink, const float* v_up, const int32_t* topk_indices,         \
                                  float* o, int64_t batch, int64_t seq_len, int64_t num_threads) {           \
    return ::onboard::kernels::DsaCpu<Config>::Attend(q, k, v, gate, sink, v_up, topk_indices, o, batch,     \
                                                      seq_len, num_threads);                                 \
  }                                                                                                          \
  extern "C" int onboard_dsa_fwd(const float* q, const float* k, const float* v, const float* index_q,       \
                                 const float* index_k, const float* index_w, const float* gate,              \
                                 const float* sink, const float* v_up, float* o, int32_t* topk_indices,      \
                                 int64_t batch, int64_t seq_len, int64_t num_threads) {                      \
    return ::onboard::kernels::DsaCpu<Config>::Forward(q, k, v, index_q, index_k, index_w, gate, sink, v_up, \
                                                       o, topk_indices, batch, seq_len, num_threads);        \
  }
