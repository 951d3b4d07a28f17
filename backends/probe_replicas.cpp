// Redundant-expert maps of the probe (see probe_replicas.h).
//   BuildReplicaMap   Step 1: shape and ids; Step 2: copies per expert (powers of two dividing ep).
//   Phy2LogFromLoads  Step 1: doubling of the hottest expert per copy; Step 2: greedy packing.
// Units: loads in tokens; slots, ranks and experts are indices.
#include "backends/probe_replicas.h"

#include <algorithm>
#include <numeric>

namespace onboard {
namespace {

bool PowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

Status Bad(const std::string& what, const std::string& value) {
  return BadInput("probe config", "expert_phy2log", what, value);
}

}  // namespace

Expected<ReplicaMap> BuildReplicaMap(const std::vector<int64_t>& phy2log, int64_t experts, int64_t ep) {
  // Step 1: shape and ids.
  const int64_t P = static_cast<int64_t>(phy2log.size());
  if (ep <= 0 || P % ep != 0 || P < experts)
    return Bad("needs a multiple of ep=" + std::to_string(ep) +
                   " slots, at least experts=" + std::to_string(experts),
               std::to_string(P) + " slots");
  ReplicaMap m;
  m.slots_per_rank = P / ep;
  m.phy2log = phy2log;
  m.copies.assign(static_cast<size_t>(experts), {});
  for (int64_t p = 0; p < P; ++p) {
    const int64_t e = phy2log[static_cast<size_t>(p)];
    if (e < 0 || e >= experts)
      return Bad(
          "slot " + std::to_string(p) + " holds an expert outside [0, " + std::to_string(experts) + ")",
          std::to_string(e));
    m.copies[static_cast<size_t>(e)].push_back(p);
  }
  // Step 2: copies per expert.
  bool replicated = false;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t c = static_cast<int64_t>(m.copies[static_cast<size_t>(e)].size());
    if (!PowerOfTwo(c) || ep % c != 0)
      return Bad(
          "expert " + std::to_string(e) + " needs 1, 2, 4, ... copies dividing ep=" + std::to_string(ep),
          std::to_string(c) + " copies");
    replicated = replicated || c > 1;
  }
  if (replicated && !PowerOfTwo(ep))
    return Bad("replicas need a power-of-two ep (aligned source blocks)", "ep=" + std::to_string(ep));
  return m;
}

std::vector<int64_t> SourceLog2Phy(const ReplicaMap& map, int64_t source, int64_t ep) {
  std::vector<int64_t> out;
  for (const std::vector<int64_t>& c : map.copies) {
    const int64_t n = static_cast<int64_t>(c.size());
    out.push_back(c[static_cast<size_t>(source * n / ep)]);
  }
  return out;
}

std::vector<int64_t> Phy2LogFromLoads(const std::vector<double>& load, int64_t ep, int64_t spare) {
  const int64_t E = static_cast<int64_t>(load.size());
  ONBOARD_ASSERT(ep > 0 && E % ep == 0 && spare >= 0, "experts must divide over ep");
  // Step 1: doubling (a doubling of c copies takes c slots; c * 2 must still divide ep).
  std::vector<int64_t> copies(static_cast<size_t>(E), 1);
  int64_t free_slots = ep * spare;
  while (true) {
    int64_t best = -1;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t c = copies[static_cast<size_t>(e)];
      if (c > free_slots || ep % (2 * c) != 0) continue;
      if (best < 0 ||
          load[static_cast<size_t>(e)] / static_cast<double>(c) >
              load[static_cast<size_t>(best)] / static_cast<double>(copies[static_cast<size_t>(best)]))
        best = e;
    }
    if (best < 0) break;
    free_slots -= copies[static_cast<size_t>(best)];
    copies[static_cast<size_t>(best)] *= 2;
  }
  // A spare slot is left only when every expert already has >= 2 copies (spare >= experts / ep).
  ONBOARD_ASSERT(free_slots == 0, "spare slots left that no doubling fits: use fewer spare slots");
  // Step 2: slots heaviest first onto the least-loaded rank with room and no copy of the expert.
  struct Slot {
    int64_t e;
    double w;
  };
  std::vector<Slot> slots;
  for (int64_t e = 0; e < E; ++e)
    for (int64_t i = 0; i < copies[static_cast<size_t>(e)]; ++i)
      slots.push_back(
          {e, load[static_cast<size_t>(e)] / static_cast<double>(copies[static_cast<size_t>(e)])});
  std::stable_sort(slots.begin(), slots.end(), [](const Slot& a, const Slot& b) { return a.w > b.w; });
  const int64_t S = static_cast<int64_t>(slots.size()) / ep;
  ONBOARD_ASSERT(static_cast<int64_t>(slots.size()) == S * ep, "slots do not fill the ranks evenly");
  std::vector<std::vector<int64_t>> rank_slots(static_cast<size_t>(ep));
  std::vector<double> rank_load(static_cast<size_t>(ep), 0);
  for (const Slot& s : slots) {
    int64_t best = -1;
    for (int64_t r = 0; r < ep; ++r) {
      const auto& held = rank_slots[static_cast<size_t>(r)];
      if (static_cast<int64_t>(held.size()) >= S || std::find(held.begin(), held.end(), s.e) != held.end())
        continue;
      if (best < 0 || rank_load[static_cast<size_t>(r)] < rank_load[static_cast<size_t>(best)]) best = r;
    }
    ONBOARD_ASSERT(best >= 0, "no rank left for a copy");
    rank_slots[static_cast<size_t>(best)].push_back(s.e);
    rank_load[static_cast<size_t>(best)] += s.w;
  }
  std::vector<int64_t> phy2log;
  for (auto& held : rank_slots) {
    std::sort(held.begin(), held.end());
    phy2log.insert(phy2log.end(), held.begin(), held.end());
  }
  return phy2log;
}

std::vector<double> ReplicaRankLoads(const ReplicaMap& map, const std::vector<double>& load, int64_t ep) {
  std::vector<double> out(static_cast<size_t>(ep), 0);
  for (size_t e = 0; e < map.copies.size(); ++e)
    for (int64_t p : map.copies[e])
      out[static_cast<size_t>(p / map.slots_per_rank)] += load[e] / static_cast<double>(map.copies[e].size());
  return out;
}

}  // namespace onboard
