// `onboard kernels MODEL [--target cpu|cuda] [--arch 90|80] [--check [--emulate]] [--out DIR]
//  [--threads N] [--seed S]`: generate the model's KDA/DSA kernels, build them (CPU: system compiler -> cached .so;
// CUDA: nvcc -> cubin), and with --check run every kernel against its hand-written reference on fresh
// random inputs over odd shapes and print the table. CUDA without a GPU: generate + compile and say
// that numerics need a GPU. Exit: 0 ok, 2 bad input, 6 build failure, 7 a check failed.
#include <cstdio>
#include <memory>

#include "cli/command_registry.h"
#include "codegen/cpu_kernel_loader.h"
#include "parsers/load_model.h"
#include "validators/kernel_check.h"

namespace onboard::cli {
namespace {

struct KernelsOptions {
  std::string model;
  std::string target = "cpu";
  int arch = 90;
  bool check = false;
  bool emulate = false;
  std::string out;
  int64_t threads = 0;
  uint64_t seed = 20261130;
};

int RunKernels(const KernelsOptions& o) {
  auto model = LoadModel(o.model);
  if (!model.ok()) return ReportError("kernels", model.status());
  auto target = codegen::ParseKernelTarget(o.target);
  if (!target.ok()) return ReportError("kernels", target.status());
  validators::KernelCheckOptions opt;
  opt.target.target = *target;
  opt.target.cuda_arch = o.arch;
  opt.out_dir = o.out;
  opt.num_threads = o.threads;
  opt.seed = o.seed;
  opt.run_checks = o.check;
  opt.emulate_cuda = o.emulate;
  if (o.emulate && (*target != codegen::KernelTarget::kCuda || !o.check))
    return ReportError("kernels", BadInput("kernels", "emulate", "--emulate needs --target cuda --check", "true"));
  auto report = validators::CheckKernels(*model, opt);
  if (!report.ok()) return ReportError("kernels", report.status());
  std::printf("model %s: %zu kernel(s) for %s\n", model->name.c_str(), report->kernels.size(), o.target.c_str());
  for (const auto& k : report->kernels) {
    std::printf("  %-56s hash %s%s\n", k.name.c_str(), k.content_hash.c_str(),
                o.out.empty() ? "" : ("  -> " + o.out + "/" + k.FileName()).c_str());
  }
  // CPU without --check: build the model's kernels (cached by hash) so build errors surface.
  if (*target == codegen::KernelTarget::kCpu && !o.check) {
    for (const auto& k : report->kernels) {
      auto lib = codegen::LoadCpuKernel(k);
      if (!lib.ok()) return ReportError("kernels", lib.status());
      std::printf("  built %s (%s)\n", (*lib)->so_path.c_str(),
                  (*lib)->cache_hit ? "cached" : (std::to_string((*lib)->compile_seconds) + " s").c_str());
    }
  }
  if (!report->rows.empty() || !report->notes.empty()) {
    std::printf("\n%s", validators::FormatKernelTable(*report).c_str());
  }
  if (!report->all_pass) {
    return ReportError("kernels", Status(ErrorCode::kCheckFailed, "some kernel checks failed (see table)"));
  }
  if (o.check && *target == codegen::KernelTarget::kCpu) {
    std::printf("all %zu checks passed\n", report->rows.size());
  }
  return 0;
}

OnboardCommand kKernels{
    "kernels", "Generate, build and check the model's KDA/DSA kernels", 30, [](CLI::App& sub) -> RunFn {
      auto o = std::make_shared<KernelsOptions>();
      sub.add_option("model", o->model, "model directory, config.json or .onnx")->required();
      sub.add_option("--target", o->target, "cpu | cuda")->capture_default_str();
      sub.add_option("--arch", o->arch, "CUDA sm arch: 90 | 80")->capture_default_str();
      sub.add_flag("--check", o->check, "run every kernel against its reference (CPU)");
      sub.add_flag("--emulate", o->emulate,
                   "CUDA + --check: also run the CUDA kernels under CPU emulation of the CUDA "
                   "programming model (checks logic; not a GPU run)");
      sub.add_option("--out", o->out, "write sources, manifests (and cubins, check cases for CUDA) here");
      sub.add_option("--threads", o->threads, "threads for CPU kernels (0 = all cores)");
      sub.add_option("--seed", o->seed, "seed of the random check inputs")->capture_default_str();
      return [o] { return RunKernels(*o); };
    }};

}  // namespace
}  // namespace onboard::cli
