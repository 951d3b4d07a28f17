// The default instantiation of each CUDA kernel template, compiled by the build with nvcc for sm_90
// when nvcc is present (codegen/CMakeLists.txt, target onboard_cuda_kernel_instances): errors in
// codegen/kernels/*.cuh show at build time. Generated kernels instantiate the same templates through the
// ONBOARD_EXPORT_*_CUDA macros (compiled by tests/codegen/cuda_compile_test.cpp).
#include "codegen/kernels/default_configs.h"
#include "codegen/kernels/dsa_cuda.cuh"
#include "codegen/kernels/kda_cuda.cuh"

namespace onboard::kernels {

// The CPU defaults' dims (default_configs.h) with bf16 operands.
struct DefaultKdaCudaConfig : DefaultKdaConfig {
  using elem_t = __nv_bfloat16;
};
struct DefaultDsaCudaConfig : DefaultDsaConfig {
  using elem_t = __nv_bfloat16;
};

// Instantiating the structs instantiates their launchers and, through them, the kernels.
template struct KdaCuda<DefaultKdaCudaConfig>;
template struct DsaCuda<DefaultDsaCudaConfig>;

}  // namespace onboard::kernels
