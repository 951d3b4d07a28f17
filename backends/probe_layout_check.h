// The probe's parallel layout checked factor by factor (tp, fsdp, ep, batch, micro-batch against
// the ranks and the proxy's sizes). Torch-free: ProbeConfig::Validate calls it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "backends/probe.h"

namespace onboard {

// Every factor of the layout that cannot run, in ONE error naming each of them ("tp=3 must divide
// ranks=4; tp=3 must divide kda_heads=2; ep=3 must divide ranks/tp=2"), field "layout".
Status ValidateParallelFactors(const ProbeConfig& c, const ProxySpec& spec);

// The proxy sizes tensor parallelism splits (backends/probe_tp.h), only those the proxy uses:
// ("kda_heads", 2), ("mla_heads", 2), ("index_heads", 2), ("mlp_inter", 64), ("shared_inter", 32),
// ("vocab", 256). A tp degree must divide every one.
std::vector<std::pair<std::string, int64_t>> TpSplitSizes(const ProxySpec& s);

// ProbeConfig::ep_dispatcher: "alltoall", or "deepep" over EP groups that each span >= 2 nodes with
// the same number of their ranks on each, consecutive in EP rank order (backends/probe_node_dedup.h),
// without moe_overlap. Field "ep_dispatcher", its value.
Status ValidateEpDispatcher(const ProbeConfig& c);

}  // namespace onboard
