// Configurations of the build's default kernel instantiation (codegen/kernels/default_instances.cpp):
// tests call DefaultKda::Forward / DefaultDsa::Forward directly, without generating or loading a library.
#pragma once

#include "codegen/kernels/dsa_cpu.h"
#include "codegen/kernels/kda_cpu.h"

namespace onboard::kernels {

struct DefaultKdaConfig {
  static constexpr int H = 4, HV = 4, K = 128, V = 128, C = 64;
  static constexpr GateForm kGate = GateForm::kBounded;
  static constexpr float kLowerBound = -5.0f;
  static constexpr bool kNormalizeQk = true;
  static constexpr bool kBetaSigmoid = false;
};

struct DefaultDsaConfig {
  static constexpr int HQ = 16, HKV = 1, D = 128, DV = 128, HI = 4, DI = 64;
  static constexpr int64_t TOPK = 64;
  static constexpr int BLOCK = 64;
  static constexpr float SCALE = 0.0883883476f;  // 128^-1/2
  static constexpr bool GATED = false, SINK = false;
};

using DefaultKda = KdaCpu<DefaultKdaConfig>;
using DefaultDsa = DsaCpu<DefaultDsaConfig>;
extern template struct KdaCpu<DefaultKdaConfig>;
extern template struct DsaCpu<DefaultDsaConfig>;

// The vector target the build compiled the default instantiation for (the build's baseline ISA).
const char* DefaultInstancesSimdTarget();

}  // namespace onboard::kernels
