// Configurations of the build's default kernel instantiation (codegen/kernels/default_instances.cpp):
// tests call DefaultKda::Forward / DefaultDsa::Forward directly, without generating or loading a library.
#pragma once

#include "codegen/kernels/default_configs.h"
#include "codegen/kernels/dsa_cpu.h"
#include "codegen/kernels/kda_cpu.h"

namespace onboard::kernels {

using DefaultKda = KdaCpu<DefaultKdaConfig>;
using DefaultDsa = DsaCpu<DefaultDsaConfig>;
extern template struct KdaCpu<DefaultKdaConfig>;
extern template struct DsaCpu<DefaultDsaConfig>;

// The vector target the build compiled the default instantiation for (the build's baseline ISA).
const char* DefaultInstancesSimdTarget();

}  // namespace onboard::kernels
