// FinishCudaKernelCheck: the CUDA target's half of CheckKernels (nvcc two at a time, the check cases
// for scripts/gpu-check.sh, CPU emulation of the CUDA kernels when asked).
#include "validators/kernel_check_cuda.h"

#include <future>
#include <limits>

#include "codegen/cpu_kernel_loader.h"
#include "codegen/cuda_compiler.h"
#include "validators/cuda_emulation_check.h"
#include "validators/kernel_case_io.h"

namespace onboard::validators {
namespace {

// nvcc every kernel into `dir`, two at a time (one per core here); one row per kernel, in kernel order.
void CompileCudaRows(const std::string& dir, KernelCheckReport& report) {
  std::vector<std::future<Expected<codegen::CudaBuildResult>>> jobs;
  for (const auto& g : report.kernels) {
    jobs.push_back(std::async(std::launch::deferred, [&g, &dir] { return codegen::CompileCuda(g, dir); }));
  }
  for (size_t i = 0; i < jobs.size(); i += 2) {
    if (i + 1 < jobs.size()) {
      const auto* g = &report.kernels[i + 1];
      jobs[i + 1] = std::async(std::launch::async, [g, &dir] { return codegen::CompileCuda(*g, dir); });
    }
    jobs[i].wait();
  }
  for (size_t i = 0; i < report.kernels.size(); ++i) {
    const auto& g = report.kernels[i];
    auto built = jobs[i].get();
    KernelCheckRow r;
    r.kernel = g.name;
    r.shape = "-";
    r.against = "nvcc sm_" + std::to_string(g.cuda_arch) + " cubin";
    r.rel_err = std::numeric_limits<double>::quiet_NaN();
    r.pass = built.ok();
    r.note = built.ok() ? (built->cached ? "up to date " : "compiled ") + built->cubin_path
                        : built.status().message();
    report.rows.push_back(r);
  }
}

}  // namespace

Status FinishCudaKernelCheck(const ModelIR& model, const CheckPlan& plan, const KernelCheckOptions& opt,
                             KernelCheckReport& report) {
  const auto nvcc = codegen::FindNvcc();
  if (!nvcc) {
    report.notes.push_back("nvcc not found: CUDA sources generated but not compiled");
  } else {
    CompileCudaRows(opt.out_dir.empty() ? codegen::KernelCacheDir() + "/cuda" : opt.out_dir, report);
  }
  if (!opt.out_dir.empty()) {
    ONBOARD_RETURN_IF_ERROR(WriteKernelCases(plan, opt.seed, opt.out_dir + "/cases"));
  }
  if (opt.emulate_cuda && opt.run_checks) {
    CudaEmulationCheckOptions eopt;
    eopt.seed = opt.seed;
    eopt.cuda_arch = opt.target.cuda_arch;
    ONBOARD_ASSIGN_OR_RETURN(auto rows, CheckModelKernelsEmulated(model, eopt));
    for (auto& r : rows) report.rows.push_back(std::move(r));
    report.notes.push_back(
        "rows 'fp64 ref [CUDA emulated]' ran the CUDA kernels under CPU EMULATION of the CUDA model "
        "(logic only: not timing, warps or memory-model races); this is not a GPU run");
  }
  report.notes.push_back(
      "numerics need a GPU: CUDA kernels were generated and compiled, not run (no device here); "
      "run scripts/gpu-check.sh on a GPU machine");
  return Status::Ok();
}

}  // namespace onboard::validators
