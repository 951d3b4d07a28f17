// Build-time check of the CPU emulation runtime (validators/cuda_emulation_runtime.h): the CUDA kernel
// templates' default instantiation (codegen/kernels/default_cuda_instances.cu) compiled with the host
// C++ compiler under ONBOARD_CUDA_EMULATION, as LoadEmulatedCudaKernel builds a generated .cu at run
// time. The build fails here when the runtime, or a kernel template under it, does not compile.
// The object is not linked into anything (validators/CMakeLists.txt).
#define ONBOARD_CUDA_EMULATION 1
// The runtime must precede the kernel text (a blank line keeps the include sorter from swapping them).
#include "validators/cuda_emulation_runtime.h"

#include "codegen/kernels/default_cuda_instances.cu"
