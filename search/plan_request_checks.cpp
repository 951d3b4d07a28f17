// Plan-shape limits and plan precisions (see plan_request_checks.h).
#include "search/plan_request_checks.h"

namespace onboard {
namespace {

struct PlanPrecision {
  const char* name;
  DType dtype;
  bool frozen_base;  // allowed as PlanRequest::base_dtype (LoRA's frozen weights)
  bool compute;      // allowed as PlanRequest::compute_dtype (GEMM inputs)
};

// The one table of plan precisions.
constexpr PlanPrecision kPrecisions[] = {
    {"bf16", DType::kBF16, true, true},    {"fp16", DType::kF16, false, true},
    {"fp8", DType::kFP8, true, true},      {"mxfp8", DType::kFP8, false, true},
    {"mxfp4", DType::kMXFP4, true, false},
};

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

Expected<DType> CheckPlanPrecision(const std::string& origin, const std::string& field,
                                   const std::string& value, PlanPrecisionUse use) {
  std::string allowed;
  for (const PlanPrecision& p : kPrecisions) {
    const bool ok = use == PlanPrecisionUse::kFrozenBase ? p.frozen_base : p.compute;
    if (!ok) continue;
    if (value == p.name) return p.dtype;
    allowed += (allowed.empty() ? "" : " | ") + std::string(p.name);
  }
  return BadInput(origin, field, "must be " + allowed, value);
}

}  // namespace onboard
