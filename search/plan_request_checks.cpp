// Plan-shape limits (see plan_request_checks.h).
#include "search/plan_request_checks.h"

namespace onboard {
namespace {

Status CheckInt(const std::string& origin, const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return BadInput(origin, field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                  std::to_string(v));
}

}  // namespace

Status CheckPlanShape(const std::string& origin, FinetuneMode mode, int64_t lora_rank, int64_t seq,
                      int64_t global_batch) {
  if (mode == FinetuneMode::kLoRA)
    ONBOARD_RETURN_IF_ERROR(CheckInt(origin, "lora_rank", lora_rank, 1, kMaxLoraRank));
  ONBOARD_RETURN_IF_ERROR(CheckInt(origin, "seq", seq, 1, kMaxSeq));
  return CheckInt(origin, "global_batch", global_batch, 0, kMaxGlobalBatch);
}

}  // namespace onboard
