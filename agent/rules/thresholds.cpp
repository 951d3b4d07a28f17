// Thresholds::Validate: the one range check of the rules' thresholds (agent/rules/thresholds.h).
#include "agent/rules/thresholds.h"

namespace onboard::agent {

Status Thresholds::Validate() const {
  ONBOARD_RETURN_IF_ERROR(ObservationThresholds::Validate());
  return CheckThresholdRanges({
      {"thresholds.memory_over_prediction", memory_over_prediction, 1.0, 100},
      {"thresholds.calibration_tolerance", calibration_tolerance, 0.0, 10},
      {"thresholds.expert_nodes_change", expert_nodes_change, 0.0, 10},
      {"thresholds.expert_a2a_exposed_share", expert_a2a_exposed_share, 0.0, 1},
      {"thresholds.memory_min_predicted_bytes", memory_min_predicted_bytes, 0, 1e15},
  });
}

}  // namespace onboard::agent
