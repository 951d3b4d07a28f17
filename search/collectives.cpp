// Alpha-beta collective costs on a tiered topology (formulas from reference hardware facts):
//   ring all-reduce:              2(n-1) a + 2 (n-1)/n * B / bw         (bw over tiers: below)
//   all-gather / reduce-scatter:  (n-1) a + (n-1)/n * B / bw            (B = gathered size)
//   all-to-all:                   (1 + log2 n) a + max over tiers of (bytes leaving the tier / its bw)
//                                 (x beyond_first_tier for tiers past the first: node-limited routing)
//                                 (sends are issued concurrently, so latency does not grow with n-1)
//   point-to-point:               a + B / bw
//   ring of sends (kRingP2P):     (n-1) a + (n-1)/n * B / bw            (bw of the slowest tier: one link)
// bw = tier bandwidth * efficiency * calibration. A group of n ranks with stride s spans an aligned
// block of n*s ranks; the slowest tier whose group holds that block carries ring traffic.
// Ring collectives over several tiers (all-reduce, all-gather, reduce-scatter): a tier's bandwidth is
// per device (one NIC per GPU: hardware catalog nic_gbit), and NCCL spreads its rings (channels) over
// the NICs so that each ring crosses a block boundary through a different NIC (rail-optimized
// networks, NCCL_CROSS_NIC): the (n-1)/n B a rank moves crosses tier i over m_{i-1} links at once,
// m_{i-1} = group members inside one block of tier i-1 (1 for the fastest tier). Seconds per ring byte
//   = max over the tiers crossed of 1 / (m_{i-1} * bw_i); m = 1 (each member in its own node) = 1 / bw.
// Units: bytes, seconds, GB/s = 1e9 B/s, microseconds.
#include <algorithm>
#include <cmath>

#include "search/cost_model.h"

namespace onboard {
namespace {

double TierBw(const Topology& t, const CostCalibration& cal, size_t i) {
  const CommTier& c = t.tiers[i];
  const double scale = i < cal.tier_bandwidth.size() ? cal.tier_bandwidth[i] : 1.0;
  return c.bw_gbps * 1e9 * c.efficiency * scale;
}

// Seconds per byte of ring traffic for a group of n ranks with stride s that crosses up to `tier`
// (header: rings spread over the m_{i-1} links the members of one lower-tier block own).
double RingSecondsPerByte(const Topology& t, const CostCalibration& cal, size_t tier, int64_t n, int64_t s) {
  const double span = static_cast<double>(n) * static_cast<double>(std::max<int64_t>(s, 1));
  double worst = 0, below = 1;  // members per block of the tier below (1 below the fastest)
  for (size_t i = 0; i <= tier; ++i) {
    const double g = static_cast<double>(t.tiers[i].group_size);
    const double members =
        std::min(static_cast<double>(n), std::max(1.0, std::min(span, g) / std::max<int64_t>(s, 1)));
    if (i == tier || members > below) worst = std::max(worst, 1.0 / (below * TierBw(t, cal, i)));
    below = members;
  }
  return worst;
}

double TierLat(const Topology& t, const CostCalibration& cal, size_t i) {
  return t.tiers[i].latency_us * 1e-6 * cal.latency;
}

}  // namespace

CommCost CollectiveCost(const Topology& t, const CostCalibration& cal, Collective kind, int64_t n,
                        int64_t stride, double bytes, double beyond_first_tier) {
  CommCost out;
  if (t.tiers.empty()) return out;
  if (kind != Collective::kP2P && (n <= 1 || bytes <= 0)) return out;
  const size_t tier = kind == Collective::kP2P ? TierForGroup(t, 2 * std::max<int64_t>(stride, 1))
                                               : TierForStridedGroup(t, n, stride);
  out.tier = t.tiers[tier].name;
  const double bw = TierBw(t, cal, tier), a = TierLat(t, cal, tier);
  const double nn = static_cast<double>(n);
  const double ring =
      kind == Collective::kP2P || kind == Collective::kAllToAll || kind == Collective::kRingP2P
          ? 1 / bw
          : RingSecondsPerByte(t, cal, tier, n, stride);  // s per byte
  switch (kind) {
    case Collective::kAllReduce:
      out.seconds = 2 * (nn - 1) * a + 2 * (nn - 1) / nn * bytes * ring;
      break;
    case Collective::kAllGather:
    case Collective::kReduceScatter:
    case Collective::kRingP2P:
      out.seconds = (nn - 1) * a + (nn - 1) / nn * bytes * ring;
      break;
    case Collective::kP2P:
      out.seconds = a + bytes / bw;
      break;
    case Collective::kAllToAll: {
      // Fraction of a rank's traffic whose destination lies outside its tier-i block is
      // 1 - g_i/span; that share runs at tier i+1's bandwidth. Tier links work concurrently.
      const double span = nn * static_cast<double>(std::max<int64_t>(stride, 1));
      double worst = 0;
      double inside_prev = 1.0 / nn;  // own rank: no traffic
      for (size_t i = 0; i <= tier; ++i) {
        const double g = std::min(span, static_cast<double>(t.tiers[i].group_size));
        const double inside = std::min(1.0, g / span);
        const double share = inside - inside_prev;  // destinations first reachable on tier i
        const double scale = i == 0 ? 1.0 : beyond_first_tier;
        if (share > 0) worst = std::max(worst, share * scale * bytes / TierBw(t, cal, i));
        inside_prev = std::max(inside_prev, inside);
      }
      out.seconds = (1 + std::log2(nn)) * a + worst;
      break;
    }
  }
  return out;
}

}  // namespace onboard
