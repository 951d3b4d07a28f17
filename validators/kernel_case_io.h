// Check cases on disk for the CUDA host harness (scripts/gpu-check.sh): inputs and fp64 reference
// outputs (stored as fp32) of the check plan, one folder per kernel and shape:
//   <dir>/<kernel>/B<b>_T<t>/{meta.txt, <tensor>.f32, idx_ref.i32}
// meta.txt: "B T has_state" (KDA) or "B T" (DSA). Tensors are raw little-endian row-major arrays in
// the layouts of codegen/kernel_abi.h. KDA: q k v g beta a_log dt_bias [h0] o_ref s_ref.
// DSA: q k v iq ik iw [gate] [sink] o_ref idx_ref.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "validators/kernel_check.h"

namespace onboard::validators {

[[nodiscard]] Status WriteKernelCases(const CheckPlan& plan, uint64_t seed, const std::string& dir);

}  // namespace onboard::validators
