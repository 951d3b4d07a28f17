// Generate -> build -> check: each generated kernel against its hand-written reference on fresh random
// inputs, outputs poisoned with NaN before every run, over odd shapes. Entry point of
// `onboard kernels`. No LibTorch here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_generator.h"
#include "core/model_ir.h"
#include "core/status.h"

namespace onboard::validators {

struct KernelCheckRow {
  std::string kernel;       // generated kernel name
  std::string shape;        // "B=1 T=33 H=2 HV=4 K=100 V=100"
  std::string against;      // "fp64 recurrence" | "fp32 recurrence" | "fp64 dense over selected"
  double rel_err = 0;       // ||out - ref|| / ||ref||
  double state_err = -1;    // ||S - S_ref|| / ||S_ref||, -1 when not applicable (DSA)
  double tol = 0;
  bool nonfinite_match = true;  // NaN/Inf positions equal (and no poison left)
  bool pass = false;
  std::string note;         // e.g. "index mismatch 0/4096"
};

struct KernelCheckOptions {
  codegen::TargetOptions target;
  uint64_t seed = 20261130;
  int64_t num_threads = 0;  // 0 = all cores
  std::string out_dir;      // when set: sources, manifests (and cubins for CUDA) are written here
  bool run_checks = true;   // false: generate + build only
  // CUDA only: also run every CUDA kernel of the check plan under CPU emulation of the CUDA model
  // (validators/cuda_emulation_check.h; logic only, NOT a GPU run) and add its rows.
  bool emulate_cuda = false;
};

struct KernelCheckReport {
  std::vector<codegen::GeneratedKernel> kernels;  // everything generated (model + odd-shape variants)
  std::vector<KernelCheckRow> rows;
  std::vector<std::string> notes;                // e.g. "numerics need a GPU: ..."
  bool all_pass = true;
};

// Specs checked for a model: the model's KDA/DSA specs scaled to run in seconds on CPU (heads capped,
// dims kept), plus the fixed odd-shape variants (head dim 64 and 100, grouped values, both gate forms,
// top-k above and below T). Returned in check order.
struct CheckPlan {
  std::vector<codegen::KdaSpec> kda;
  std::vector<codegen::DsaSpec> dsa;
};
[[nodiscard]] Expected<CheckPlan> KernelCheckPlan(const ModelIR& model);

// One kernel against its reference over the odd-shape list (CPU only).
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckKdaKernel(const codegen::KdaSpec& spec,
                                                                   const KernelCheckOptions& opt);
[[nodiscard]] Expected<std::vector<KernelCheckRow>> CheckDsaKernel(const codegen::DsaSpec& spec,
                                                                   const KernelCheckOptions& opt);

// The whole model. Errors (kBadInput, kBuild) abort; failed numerics are rows with pass = false.
[[nodiscard]] Expected<KernelCheckReport> CheckKernels(const ModelIR& model,
                                                       const KernelCheckOptions& opt);

// Plain-text table: kernel | shape | vs | ||out-ref||/||ref|| | state err | tol | pass.
std::string FormatKernelTable(const KernelCheckReport& report);

// Pieces of the CPU check shared with the CUDA emulation check (validators/cuda_emulation_check.h).
inline constexpr double kKernelTolF32VsF64 = 1e-5;  // fp32 kernel vs the fp64 reference (relative L2)
struct KernelErrStats {
  double rel = 0;               // ||got - ref|| / ||ref|| over positions where ref is finite
  bool nonfinite_match = true;  // NaN/Inf positions coincide (poison left behind shows up here)
};
KernelErrStats CompareKernelOutput(const std::vector<float>& got, const std::vector<double>& ref);
KernelErrStats CompareKernelOutput(const std::vector<float>& got, const std::vector<float>& ref);
// A KDA row from the output and final-state comparisons: pass = NaN/Inf positions match and both
// errors are below tol (callers may add conditions of their own).
KernelCheckRow KdaCheckRow(const std::string& kernel, const std::string& shape, const std::string& against,
                           double tol, const KernelErrStats& out, const KernelErrStats& state);
// The odd-shape token counts: KDA T = 1, T < C, T % C != 0, several chunks; DSA T = 1, T < k, T > k.
std::vector<int64_t> KdaCheckLengths(int64_t chunk);
std::vector<int64_t> DsaCheckLengths(int64_t topk);
std::string KdaCheckShape(const codegen::KdaSpec& s, int64_t batch, int64_t seq, bool with_state);
std::string DsaCheckShape(const codegen::DsaSpec& s, int64_t batch, int64_t seq);

}  // namespace onboard::validators
