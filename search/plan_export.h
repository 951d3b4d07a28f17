// Exports of a Plan for the frameworks users already run: a torchtitan TOML [parallelism]
// section (+ [activation_checkpoint], [training]) and Megatron-LM command-line arguments.
#pragma once

#include <string>

#include "core/plan.h"

namespace onboard {

// torchtitan job-config fragment:
//   [parallelism] data_parallel_replicate_degree, data_parallel_shard_degree, tensor_parallel_degree,
//   pipeline_parallel_degree, pipeline_parallel_schedule, expert_parallel_degree, ...
std::string ToTorchtitanToml(const Plan& plan);

// Megatron-LM arguments: --tensor-model-parallel-size ... --expert-model-parallel-size ...
// --recompute-granularity ... --micro-batch-size ... --global-batch-size ... (one line).
std::string ToMegatronArgs(const Plan& plan);

}  // namespace onboard
