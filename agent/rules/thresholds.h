// The thresholds the rules (agent/rules/rules.h) compare a round's observations against, with their
// one validation. Dimensionless unless noted.
#pragma once

#include "core/status.h"
#include "validators/probe_observations.h"

namespace onboard::agent {

// Thresholds the rules compare observations against. Dimensionless unless noted. The probe
// observations' thresholds (expert_imbalance, comm_share, divergence_factor) and their defaults are
// ObservationThresholds' (validators/probe_observations.h): the probe's report judges with them too.
struct Thresholds : ObservationThresholds {
  double memory_over_prediction = 1.15;  // measured peak / predicted peak above this = re-plan memory
  double memory_min_predicted_bytes = 64.0 * 1024 * 1024;  // bytes; smaller predictions are dominated
                                         // by runtime/allocator overheads: the ratio is not applied
  double calibration_tolerance = 0.25;   // |measured/predicted - 1| below this = no recalibration
  double expert_nodes_change = 0.10;     // |measured D (transferred to the plan) / D the plan used - 1|
                                         // above this = re-plan with it (rules_expert_routing.cpp);
                                         // D = distinct nodes a token's top-k experts span
  double expert_a2a_exposed_share = 0.10;  // exposed expert all-to-all seconds / step seconds above this =
                                           // re-probe with it overlapped (rules_expert_overlap.cpp): a
                                           // tenth of the step is worth a second probe to hide
  Status Validate() const;               // every field finite and in range; message names the field
};

}  // namespace onboard::agent
