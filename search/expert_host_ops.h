// Host-side stream operations per local expert of an eager Megatron-Core MoE layer (TEGroupedMLP: two
// Transformer Engine GroupedLinear calls, fc1 and fc2), counted from the code. Charged by the cost model
// at CostConstants::launch_s_per_kernel each (layer_time.cpp, "expert launches").
#pragma once

#include "core/precision.h"

namespace onboard {

// Stream operations (kernel launches, a cuBLASLt matmul counted as one) that scale with the local
// experts, per local expert per micro-batch: `fwd` in one forward of the MoE block, `bwd` in its backward.
struct ExpertHostOps {
  double fwd = 0, bwd = 0;
};

// bf16 / fp16: 2 fwd, 4 bwd; fp8 per-tensor (current scaling, as the exports write it): 10 fwd, 12 bwd;
// mxfp8: 4 fwd, 6 bwd; nvfp4: 6 fwd, 8 bwd. Sources and the per-op counts in expert_host_ops.cpp.
ExpertHostOps ExpertHostOpsPerExpert(Precision compute_dtype);

}  // namespace onboard
