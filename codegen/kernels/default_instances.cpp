// The default instantiation of each CPU kernel template, compiled by the build (so errors in
// codegen/kernels/ show at build time) and callable from tests through DefaultKda / DefaultDsa.
// Dims: the flagship's KDA (H = HV = 4 here for a small instance, K = V = 128, C = 64, bounded gate)
// and a small DSA (HQ = 16 MQA, D = DV = 128, indexer 4 x 64, top-k 64).
#include "codegen/kernels/default_instances.h"

namespace onboard::kernels {

template struct KdaCpu<DefaultKdaConfig>;
template struct DsaCpu<DefaultDsaConfig>;

const char* DefaultInstancesSimdTarget() { return simd_target_name(); }

}  // namespace onboard::kernels
