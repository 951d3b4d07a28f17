// PeakHeldActivations: the largest activation footprint one pipeline stage holds during a training
// step, by replaying Megatron-Core's 1F1B schedule (plain or interleaved) forward by forward.
//
// Units: `chunk_bytes[j]` = bytes one micro-batch leaves on virtual chunk j of this stage (any unit;
// the result is in the same unit). p = pp, v = interleave (chunks per stage), m = micro-batches.
// Source: megatron/core/pipeline_parallel/schedules.py (forward_backward_pipelining_with_interleaving,
// get_model_chunk_id; microbatch_group_size_per_vp_stage = p):
//   warmup forwards   = min(m*v, 2*(p-1-stage) + (v-1)*p)   (interleaved; all m*v when m == p)
//                     = min(m, p-1-stage)                    (plain 1F1B, v = 1)
//   k-th forward runs chunk (k mod (p*v)) / p; k-th backward chunk v-1 - (k mod (p*v)) / p
//   steady state      : one forward, then one backward; cooldown: the remaining backwards (they only free)
// The peak is taken after every forward. With equal chunks it is Korthikanti et al. 2022's
// p * (1 + (p-1)/(p*v)) stage-equivalents on stage 0; unequal chunks (a layout that gives the first
// chunk fewer layers for the embedding) change which micro-batches weigh most.
#include <algorithm>

#include "search/cost_model.h"

namespace onboard {

double PeakHeldActivations(int64_t p, int64_t v, int64_t m, int64_t stage,
                           const std::vector<double>& chunk_bytes) {
  ONBOARD_ASSERT(static_cast<int64_t>(chunk_bytes.size()) == v && v >= 1 && p >= 1 && m >= 1,
                 "PeakHeldActivations needs one entry per virtual chunk");
  // Step 1: warmup length and the chunk of the k-th forward / backward.
  const int64_t total = m * v;
  int64_t warmup = v == 1 ? std::min(m, p - 1 - stage) : 2 * (p - 1 - stage) + (v - 1) * p;
  if (v > 1 && m == p) warmup = total;
  warmup = std::max<int64_t>(0, std::min(warmup, total));
  const int64_t group = v == 1 ? 1 : p;
  auto chunk = [&](int64_t k, bool forward) {
    const int64_t c = (k % (group * v)) / group;
    return forward ? c : v - 1 - c;
  };
  // Step 2: replay; the held sum peaks right after a forward.
  double held = 0, peak = 0;
  int64_t f = 0, b = 0;
  auto forward = [&] {
    held += chunk_bytes[chunk(f++, true)];
    peak = std::max(peak, held);
  };
  auto backward = [&] { held -= chunk_bytes[chunk(b++, false)]; };
  // Both chunk sequences repeat every group*v steps and a period adds and frees the same bytes, so
  // the steady state's peak is reached within its first period: replay no further.
  const int64_t last = std::min(total, warmup + group * v);
  for (int64_t i = 0; i < warmup; ++i) forward();
  while (f < last) {
    forward();
    backward();
  }
  return peak;
}

}  // namespace onboard
