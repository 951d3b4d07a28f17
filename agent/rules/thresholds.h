// The thresholds the rules (agent/rules/rules.h) compare a round's observations against, with their
// one validation. Dimensionless unless noted.
#pragma once

#include "core/status.h"

namespace onboard::agent {

// Thresholds the rules compare observations against. Dimensionless unless noted.
struct Thresholds {
  double divergence_loss_ratio = 1.5;    // last-window mean loss / first-window mean loss above this = diverged
  double expert_imbalance = 1.25;        // max/mean routed tokens per expert (or EP rank) above this = imbalanced
  double comm_share = 0.35;              // measured collective time / step time above this = comm-bound
  double memory_over_prediction = 1.15;  // measured peak / predicted peak above this = re-plan memory
  double memory_min_predicted_bytes = 64.0 * 1024 * 1024;  // bytes; smaller predictions are dominated
                                         // by runtime/allocator overheads: the ratio is not applied
  double calibration_tolerance = 0.25;   // |measured/predicted - 1| below this = no recalibration
  Status Validate() const;               // every field finite and in range; message names the field
};

}  // namespace onboard::agent
