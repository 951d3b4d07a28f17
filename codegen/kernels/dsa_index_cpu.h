// CPU DSA lightning indexer for one block of QB queries: weighted relu scores streamed tile by tile
// into an exact causal top-k, so no query ever holds its whole score row (T floats), let alone T x T.
// A template over the indexer's dims (used by DsaCpu, codegen/kernels/dsa_cpu.h).
//
// Shapes (fp32 row-major): index_q[B][T][HI][DI], index_w[B][T][HI], kT[Tp/KB][DIP][KB] (the batch's
//   index keys transposed tile by tile, zero padded to DIP = pad16(DI) rows and Tp = T rounded up to
//   KB keys): one key tile is a contiguous DIP*KB*4 B block (16 KB at DI = 64), not DIP rows T*4 B apart.
// Memory per thread: Qi QB*HI*DIP + tile QB*HI*KB floats, candidates QB x cap (fp32 score + int32
//   key) with cap = min(kCap, Tp), kCap = TOPK + max(TOPK, KB) rounded up to KB: independent of T.
//
// Block(t0, nq):
//   Step 1  Qi[QB*HI][DIP] = index_q rows of queries t0 .. t0+nq-1
//   Step 2  per tile of KB keys s0 .. s0+KB-1 (s0 <= last query): tile = Qi . kT[s0/KB],
//           score[r][s] = sum_j w[t,j] * relu(tile[r,j,s]) for s <= t = t0 + r
//   Step 3  offer the tile's scores to query r's candidates: all while it has fewer than cap, else
//           only scores > thr[r]; when a tile may no longer fit, prune to the top TOPK (thr[r] = the
//           TOPK-th largest score). A later key (higher index) that only ties thr loses to every kept
//           one, so nothing dropped can re-enter the top-k: the pruning is exact.
//   Step 4  the top min(TOPK, t+1) of the candidates by (score desc, index asc), ascending; pad -1.
// Top-k of n entries kept in index order: threshold by nth_element on a copy of the scores, then one
//   pass (above threshold, then ties by index until TOPK): the order is kept, in place.
#pragma once

#include "codegen/kernels/cpu_simd.h"

namespace onboard::kernels {

template <int HI, int DI, int64_t TOPK>
struct DsaIndexCpu {
  static constexpr int DIP = pad16(DI);
  static constexpr int QB = 16;  // queries per indexer work item
  static constexpr int KB = 64;  // keys per indexer tile
  static constexpr int64_t kCap = (TOPK + std::max<int64_t>(TOPK, KB) + KB - 1) / KB * KB;

  struct Scratch {
    std::vector<float> Qi, tile, cs, vals;
    std::vector<int32_t> ci;
    int64_t cap = 0;
    int64_t n[QB];
    float thr[QB];
    bool full[QB];
    void Resize(int64_t Tp) {
      cap = std::min(kCap, Tp);
      Qi.resize(QB * HI * DIP);
      tile.resize(QB * HI * KB);
      cs.resize(static_cast<size_t>(QB) * cap);
      ci.resize(static_cast<size_t>(QB) * cap);
    }
  };

  // Bytes of scores one thread holds at once for a sequence of T keys (candidate scores + keys).
  static int64_t ScoreBytes(int64_t T) {
    const int64_t Tp = (T + KB - 1) / KB * KB;
    return QB * std::min(kCap, Tp) * static_cast<int64_t>(sizeof(float) + sizeof(int32_t));
  }

  // Indexer keys transposed per key tile and padded: kT[b][Tp/KB][DIP][KB].
  static std::vector<float> TransposeKeys(const float* index_k, int64_t batch, int64_t T, int64_t Tp,
                                          int64_t num_threads) {
    std::vector<float> kT(static_cast<size_t>(batch) * DIP * Tp, 0.0f);
    parallel_for(batch, num_threads, [&](int64_t b) {
      float* dst = &kT[static_cast<size_t>(b) * DIP * Tp];
      for (int64_t s = 0; s < T; ++s)
        for (int d = 0; d < DI; ++d) dst[(s / KB * DIP + d) * KB + s % KB] = index_k[(b * T + s) * DI + d];
    });
    return kT;
  }

  // Top-k of (cs, ci)[0..n) in place, index order kept; returns the count kept, thr = the threshold.
  static int64_t KeepTop(float* cs, int32_t* ci, int64_t n, std::vector<float>& vals, float& thr) {
    vals.assign(cs, cs + n);
    std::nth_element(vals.begin(), vals.begin() + (n - TOPK), vals.end());
    thr = vals[n - TOPK];
    int64_t above = 0;
    for (int64_t s = 0; s < n; ++s) above += cs[s] > thr;
    int64_t ties_left = TOPK - above, w = 0;
    for (int64_t s = 0; s < n && w < TOPK; ++s) {
      const bool take = cs[s] > thr || (cs[s] == thr && ties_left > 0);
      if (take) {
        ties_left -= cs[s] == thr;
        cs[w] = cs[s];
        ci[w++] = ci[s];
      }
    }
    return w;  // < TOPK only with NaN scores
  }

  // Step 3: the scores sc[0..nvalid) of keys s0.. offered to query r's candidates.
  static void Offer(int r, const float* sc, int64_t s0, int nvalid, Scratch& s) {
    float* cs = &s.cs[r * s.cap];
    int32_t* ci = &s.ci[r * s.cap];
    int64_t n = s.n[r];
    if (!s.full[r]) {
      for (int j = 0; j < nvalid; ++j, ++n) {
        cs[n] = sc[j];
        ci[n] = static_cast<int32_t>(s0 + j);
      }
    } else {
      const DF d;
      const float thr = s.thr[r];
      const VF tv = hn::Set(d, thr);
      for (int c = 0; c < nvalid; c += kLanes) {
        if (hn::AllFalse(d, hn::Gt(hn::LoadU(d, sc + c), tv))) continue;
        for (int j = c; j < std::min(c + kLanes, nvalid); ++j) {
          if (!(sc[j] > thr)) continue;
          cs[n] = sc[j];
          ci[n++] = static_cast<int32_t>(s0 + j);
        }
      }
    }
    if (n + KB > s.cap && n > TOPK) {
      n = KeepTop(cs, ci, n, s.vals, s.thr[r]);
      s.full[r] = true;
    }
    s.n[r] = n;
  }

  // Step 2: scores of the block's queries for keys s0 .. s0+KB-1, each offered to its candidates.
  static void ScoreTile(const float* kT, const float* index_w, int64_t b, int64_t t0, int nq, int64_t s0,
                        int64_t T, Scratch& s) {
    const DF d;
    const VF zero = hn::Zero(d);
    std::fill(s.tile.begin(), s.tile.end(), 0.0f);
    gemm_acc<KB>(nq * HI, DIP, s.Qi.data(), DIP, 1, kT + s0 * DIP, KB, s.tile.data(), KB);
    alignas(64) float sc[KB];
    for (int r = 0; r < nq; ++r) {
      const int64_t t = t0 + r;
      if (s0 > t) continue;
      const float* w = index_w + (b * T + t) * HI;
      for (int c = 0; c < KB; c += kLanes) {
        VF sum = zero;
        for (int j = 0; j < HI; ++j) {
          const VF row = hn::LoadU(d, &s.tile[(r * HI + j) * KB + c]);
          sum = hn::MulAdd(hn::Set(d, w[j]), hn::Max(row, zero), sum);
        }
        hn::StoreU(sum, d, sc + c);
      }
      Offer(r, sc, s0, static_cast<int>(std::min<int64_t>(KB, t - s0 + 1)), s);
    }
  }

  // The whole index of one query block: selections of queries t0..t0+nq-1 into dst[nq][TOPK].
  static void Block(const float* index_q, const float* kT, const float* index_w, int64_t b, int64_t t0,
                    int nq, int64_t T, Scratch& s, int32_t* dst) {
    // Step 1: the block's index queries.
    std::fill(s.Qi.begin(), s.Qi.end(), 0.0f);
    for (int r = 0; r < nq; ++r)
      for (int j = 0; j < HI; ++j) {
        const float* src = index_q + (((b * T + t0 + r) * HI) + j) * DI;
        std::copy(src, src + DI, &s.Qi[(r * HI + j) * DIP]);
      }
    for (int r = 0; r < QB; ++r) {
      s.n[r] = 0;
      s.full[r] = false;
    }
    // Steps 2-3: stream the key tiles.
    for (int64_t s0 = 0; s0 <= t0 + nq - 1; s0 += KB) ScoreTile(kT, index_w, b, t0, nq, s0, T, s);
    // Step 4: the selections.
    for (int r = 0; r < nq; ++r) {
      int32_t* out = dst + static_cast<int64_t>(r) * TOPK;
      int64_t n = s.n[r];
      if (n > TOPK) {
        float thr;
        n = KeepTop(&s.cs[r * s.cap], &s.ci[r * s.cap], n, s.vals, thr);
      }
      std::copy(&s.ci[r * s.cap], &s.ci[r * s.cap] + n, out);
      for (int64_t w = n; w < TOPK; ++w) out[w] = -1;
    }
  }
};

}  // namespace onboard::kernels
