// The next probe's expert placement from the co-activation this probe measured (issue 18 item 3):
// the measured pair counts and loads (summed over MoE layers and recorded steps, and per layer) go to
// search/coactivation_placement.h PlaceExpertsByCoactivation with the probe's node layout
// (ProbeConfig::ranks_per_node) and no spare slots (every EP rank holds num_experts/ep experts, as
// the probe's buffers do). Torch-free: the agent's re-placement rule calls it between rounds.
// Units: pair counts and loads in tokens; ratios dimensionless.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/probe.h"
#include "core/status.h"

namespace onboard {

struct ProbeCoactivationPlacement {
  std::vector<int64_t> placement;        // expert -> EP rank (ProbeConfig::expert_placement)
  int64_t co_selected_pairs = 0;         // measured tokens choosing two distinct experts (pairs)
  int64_t intra_node_pairs_before = 0;   // of those, pairs on one node under the probe's placement
  int64_t intra_node_pairs_after = 0;    // ... under the new placement (same routings)
  double rank_max_over_mean_before = 0;  // tokens per EP rank
  double rank_max_over_mean_after = 0;
  // Per MoE layer (PerLayerPlacement), each from its own loads and pairs, and
  // the measured pairs sharing a node, summed over layers, each layer under its own placement.
  std::vector<std::vector<int64_t>> placement_by_layer;
  int64_t intra_node_pairs_by_layer_before = 0, intra_node_pairs_by_layer_after = 0;
};

// Errors (kBadInput, naming the field): no co-activation recorded, one node (ranks_per_node),
// an EP group that is not all ranks, and those of PlaceExpertsByCoactivation.
Expected<ProbeCoactivationPlacement> PlaceFromProbeCoactivation(const ProbeResult& probe);

// ProbeConfig::expert_placement for one placement per MoE layer: the layers' expert -> EP rank
// lists one after the other (num_experts x MoE layers entries; ProbeConfig::Validate checks each).
std::vector<int64_t> PerLayerPlacement(const std::vector<std::vector<int64_t>>& by_layer);

}  // namespace onboard
