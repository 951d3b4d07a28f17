// The checks of the fields that a plan request shares with the loop's request (agent::RunRequest)
// and with layout files: their limits (the precisions a plan names: core/precision.h). One home:
// PlanRequest::Validate, RunRequest::Validate and the layout-file reader call these; the front ends
// (CLI, HTTP) only convert types and map the Status.
//
// Limits and why:
//   lora_rank     [1, 65536]   adapters wider than any hidden size in the catalog are refused
//   seq           [1, 2^24]    tokens per sequence (16M; the longest context planned is 1M)
//   global_batch  [0, 2^30]    sequences per step, 0 = planner default; seq * global_batch <= 2^54
//                              stays exact in a double and far from int64 overflow
// Units: tokens, sequences.
#pragma once

#include <cstdint>
#include <string>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"

namespace onboard {

inline constexpr int64_t kMaxLoraRank = 65536;
inline constexpr int64_t kMaxSeq = int64_t{1} << 24;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;

// lora_rank (when mode is LoRA), seq and global_batch against the limits above. `origin` names the
// input in the message ("plan request", "run request").
[[nodiscard]] Status CheckPlanShape(const std::string& origin, FinetuneMode mode, int64_t lora_rank,
                                    int64_t seq, int64_t global_batch);

}  // namespace onboard
