// Thresholds::Validate: the one range check of the rules' thresholds (agent/rules/thresholds.h).
#include "agent/rules/thresholds.h"

namespace onboard::agent {
namespace {
Status Range(const std::string& field, double v, double lo, double hi) {
  return CheckRange("run request", field, v, lo, hi);
}
}  // namespace

Status Thresholds::Validate() const {
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.divergence_loss_ratio", divergence_loss_ratio, 1.0, 100));
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.expert_imbalance", expert_imbalance, 1.0, 100));
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.comm_share", comm_share, 0.0, 1.0));
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.memory_over_prediction", memory_over_prediction, 1.0, 100));
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.calibration_tolerance", calibration_tolerance, 0.0, 10));
  ONBOARD_RETURN_IF_ERROR(Range("thresholds.memory_min_predicted_bytes", memory_min_predicted_bytes, 0, 1e15));
  return Status::Ok();
}

}  // namespace onboard::agent
