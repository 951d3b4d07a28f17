// Thresholds::Validate: the one range check of the rules' thresholds (agent/rules/thresholds.h).
#include "agent/rules/thresholds.h"

namespace onboard::agent {

Status Thresholds::Validate() const {
  struct Limit {
    const char* field;
    double value, lo, hi;
  };
  const Limit limits[] = {
      {"thresholds.divergence_loss_ratio", divergence_loss_ratio, 1.0, 100},
      {"thresholds.expert_imbalance", expert_imbalance, 1.0, 100},
      {"thresholds.comm_share", comm_share, 0.0, 1.0},
      {"thresholds.memory_over_prediction", memory_over_prediction, 1.0, 100},
      {"thresholds.calibration_tolerance", calibration_tolerance, 0.0, 10},
      {"thresholds.memory_min_predicted_bytes", memory_min_predicted_bytes, 0, 1e15},
  };
  for (const Limit& l : limits)
    ONBOARD_RETURN_IF_ERROR(CheckRange("run request", l.field, l.value, l.lo, l.hi));
  return Status::Ok();
}

}  // namespace onboard::agent
