// bench_probe_learning: does `onboard probe MODEL --ranks 2` with its DEFAULTS learn the copy task,
// and how long does it take? For each listed config and mode (full, LoRA), one probe with
// DefaultProbeConfig(mode) on 2 local ranks, in one table: verdict, final loss against the target,
// copy accuracy, recorded steps (+ LoRA base steps), the first step at >= 90% accuracy, wall
// seconds, the wall ratio against the first row measured in the same run, and the 1-minute load
// average when the row finished (2 shared cores: timings are only comparable within one run).
// Usage: bench_probe_learning [ONBOARD_BINARY] [CONFIG...]   (default: the six issue-12 configs)
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "bench/build_paths.h"
#include "parsers/load_model.h"

namespace {

double LoadAverage() {
  std::ifstream f("/proc/loadavg");
  double one = 0;
  f >> one;
  return one;
}

std::string SelfDir() { return onboard::bench::BuildDir(); }

}  // namespace

int main(int argc, char** argv) {
  using namespace onboard;
  const std::string worker = argc > 1 && argv[1][0] != '\0' ? argv[1] : SelfDir() + "/onboard";
  std::vector<std::string> configs;
  for (int i = 2; i < argc; ++i) configs.push_back(argv[i]);
  if (configs.empty()) {
    const std::string d = std::string(ONBOARD_SOURCE_DIR) + "/";
    configs = {d + "examples/flagship/config.json",
               d + "tests/data/hf/kimi-linear-48b-a3b-instruct.config.json",
               d + "tests/data/hf/deepseek-v3.config.json",
               d + "tests/data/hf/qwen3-30b-a3b.config.json",
               d + "tests/data/hf/mixtral-8x7b-v0.1.config.json",
               d + "tests/data/hf/llama-3.1-8b.config.json"};
  }
  std::printf("bench_probe_learning: defaults, 2 ranks, %ld cores\n", sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-44s %-5s %-14s %8s %8s %7s %11s %9s %7s %6s %5s\n", "config", "mode", "verdict", "loss",
              "target", "acc", "steps(+base)", "step@90%", "wall_s", "ratio", "load");
  double base_wall = 0;
  int status = 0;
  for (const std::string& path : configs) {
    Expected<ModelIR> model = LoadModel(path);
    if (!model.ok()) {
      std::printf("%s: %s\n", path.c_str(), model.status().message().c_str());
      status = 1;
      continue;
    }
    for (FinetuneMode mode : {FinetuneMode::kFull, FinetuneMode::kLoRA}) {
      ProbeConfig c = DefaultProbeConfig(mode);
      c.ranks = 2;
      c.worker_binary = worker;
      const auto t0 = std::chrono::steady_clock::now();
      Expected<ProbeResult> r = RunProbe(*model, c);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string name = path.substr(path.rfind('/', path.rfind('/') - 1) + 1);
      const char* m = FinetuneModeName(mode);
      if (!r.ok()) {
        std::printf("%-44s %-5s failed: %s\n", name.c_str(), m, r.status().message().c_str());
        status = 1;
        continue;
      }
      int64_t at90 = -1;
      for (const ProbeStep& s : r->steps)
        if (at90 < 0 && s.accuracy >= 0.9) at90 = s.step;
      if (base_wall == 0) base_wall = wall;
      const int64_t base = mode == FinetuneMode::kLoRA ? c.base_steps : 0;
      const std::string steps =
          std::to_string(r->steps.size()) + (base > 0 ? "+" + std::to_string(base) : "");
      std::printf("%-44s %-5s %-14s %8.4f %8.4f %6.1f%% %11s %9lld %7.1f %6.2f %5.1f\n", name.c_str(), m,
                  r->convergence.c_str(), r->final_loss, r->loss_target, 100 * r->skill, steps.c_str(),
                  static_cast<long long>(at90), wall, wall / base_wall, LoadAverage());
      std::fflush(stdout);
      if (r->convergence != "converged") status = 1;
    }
  }
  return status;
}
