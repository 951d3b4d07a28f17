// Host-side stream operations per local expert of Megatron-Core's TEGroupedMLP, counted from
// Transformer Engine v2.9 (NeMo 25.11; v2.7 / v2.12 / v2.14~10 of 25.09 / 26.02 / 26.04 have the same
// per-expert structure) and Megatron-Core 0.15 (experts.py TEGroupedMLP.forward: fc1 and fc2 are one
// GroupedLinear call each, no per-expert Python loop of its own). Per GroupedLinear call, per expert:
//   GEMM      : one cuBLASLt matmul per expert per GEMM (grouped_linear.py -> general_grouped_gemm ->
//               nvte_multi_tensor_gemm -> multi_stream_cublas_gemm, cublaslt_gemm.cu:941-966), each
//               creating its layouts / descriptor / preference and calling cublasLtMatmulAlgoGetHeuristic
//               (cublaslt_gemm.cu:430-437, 702-723, 748-753); forward 1 (fprop), backward 2 (dgrad,
//               wgrad: grouped_linear.py:363, 412-432)
//   quantise  : tex.split_quantize (cast.cpp:496-598) quantises the experts one by one except for fp8
//               delayed scaling (cast.cpp:117-149, "only have fused kernel for FP8 delayed scaling"):
//               mxfp8 one kernel each (quantizer.cpp:1091-1103, a bidimensional cast, cast_kernels.cuh
//               :1687-1695); fp8 current scaling four each (quantizer.cpp:497-536: zero amax, amax,
//               scale from amax, cast; current_scaling.cu:75-96); nvfp4 two each (TransformerEngine@d0067d0
//               quantizer.cpp NVFP4Quantizer::quantize_impl: nvte_hadamard_transform_amax, then
//               nvte_quantize_with_hadamard_transform); forward the input, backward grad_output
//               (grouped_linear.py:127, 316-327)
// Weights are cast once per step (is_first_microbatch caching, Megatron TEGroupedLinear.forward), scale
// swizzles run as one multi-tensor kernel per grouped GEMM (util.cpp:87-180, up to 64 tensors a launch),
// the side-stream events do not scale with experts: none of these is counted here.
#include "search/expert_host_ops.h"

namespace onboard {

namespace {

// Quantise kernels per expert per GroupedLinear input (fwd: activation, bwd: grad_output).
double QuantiseOpsPerExpert(Precision p) {
  if (p == Precision::kMXFP8) return 1;  // one MXFP8 cast, row- and column-wise in one launch
  if (p == Precision::kFP8) return 4;    // current scaling: zero amax, amax, scale, cast
  if (p == Precision::kNVFP4) return 2;  // amax (post-RHT), then one fused row- + column-wise (RHT) cast
  return 0;                              // bf16 / fp16: torch.split views, no kernel
}

}  // namespace

ExpertHostOps ExpertHostOpsPerExpert(Precision compute_dtype) {
  // Step 1: per GroupedLinear call, per expert: GEMMs (fwd 1, bwd 2) plus one quantise of their input.
  const double q = QuantiseOpsPerExpert(compute_dtype);
  // Step 2: two GroupedLinear calls per MoE block (fc1, fc2).
  return {2 * (1 + q), 2 * (2 + q)};
}

}  // namespace onboard
