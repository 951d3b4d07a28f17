// The dims of the build's default kernel instantiations, shared by the CPU one (default_instances.h)
// and the CUDA one (default_cuda_instances.cu, which adds the operand type). Dependency-free so that
// both the host compiler and nvcc include it.
// KDA: H = HV = 4 (a small instance of the flagship's KDA), K = V = 128, C = 64, bounded gate.
// DSA: HQ = 16 MQA, D = DV = 128, indexer 4 x 64, top-k 64.
#pragma once

#include <stdint.h>

#include "core/gate_form.h"

namespace onboard::kernels {

struct DefaultKdaConfig {
  static constexpr int H = 4, HV = 4, K = 128, V = 128, C = 64;
  static constexpr GateForm kGate = GateForm::kBounded;
  static constexpr float kLowerBound = -5.0f;
  static constexpr bool kNormalizeQk = true;
  static constexpr bool kBetaSigmoid = false;
};

struct DefaultDsaConfig {
  static constexpr int HQ = 16, HKV = 1, D = 128, DV = 128, HI = 4, DI = 64, VO = 0;
  static constexpr int64_t TOPK = 64;
  static constexpr int BLOCK = 64;
  static constexpr float SCALE = 0.0883883476f;  // 128^-1/2
  static constexpr bool GATED = false, SINK = false;
};

}  // namespace onboard::kernels
