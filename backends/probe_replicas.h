// Redundant experts in the probe (issue 18 item 3), DeepSeek EPLB's maps, torch-free:
//   phy2log [P]: physical slot p sits on EP rank p / S (S = P / ep slots per rank) and holds
//                logical expert phy2log[p]; every logical expert has c copies, c a power of two
//                dividing ep (1 = not replicated);
//   replica i of expert e = its i-th physical slot in ascending order;
//   log2phy of source s: e -> the slot of replica floor(s * c / ep): each replica serves one aligned
//                block of ep / c source ranks, so its per-source weight gradients are a subtree of
//                the canonical pairwise order over sources (ordered_sum.h) and the replicas' sums,
//                pairwise in replica order, give the bits of the expert without replicas.
// The replicas' gradients are exchanged in proxy_moe.cpp (ReplicaGradSyncFn); each replica then
// takes the same AdamW step from the same initial values, so the copies stay identical.
// Units: loads in tokens; slots and ranks are indices.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace onboard {

struct ReplicaMap {
  int64_t slots_per_rank = 0;
  std::vector<int64_t> phy2log;              // [P]
  std::vector<std::vector<int64_t>> copies;  // [E]: physical slots of each expert, ascending
};

// Checks phy2log against `experts` and `ep` (field "expert_phy2log" and the value named):
// P a multiple of ep, every id in [0, experts), every expert present, copies a power of two
// dividing ep, and ep a power of two when any expert is replicated.
Expected<ReplicaMap> BuildReplicaMap(const std::vector<int64_t>& phy2log, int64_t experts, int64_t ep);

// Logical expert -> physical slot for the tokens of EP source rank `source`.
std::vector<int64_t> SourceLog2Phy(const ReplicaMap& map, int64_t source, int64_t ep);

// EPLB-style redundant placement from measured loads: the expert with the highest load per copy
// doubles its copies while spare slots remain (doubling keeps counts powers of two), then slots are
// packed heaviest first onto the least-loaded EP rank with a free slot and no copy of that expert
// yet. Returns phy2log with spare_slots_per_rank extra slots per rank (experts % ep == 0).
std::vector<int64_t> Phy2LogFromLoads(const std::vector<double>& expert_load, int64_t ep,
                                      int64_t spare_slots_per_rank);

// Tokens per EP rank when each expert's load is split evenly over its copies (max/mean input).
std::vector<double> ReplicaRankLoads(const ReplicaMap& map, const std::vector<double>& expert_load,
                                     int64_t ep);

}  // namespace onboard
