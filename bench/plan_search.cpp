// bench_plan_search: full layout search for the flagship (LoRA) on 128 and on 8,192 Atlas 950
// devices at seq 4096, and full training at its 1M context on 8,192 devices with context
// parallelism in the space (Atlas 950 and GB300 NVL72). Prints candidates costed, candidates/s and
// wall time for 1 thread (baseline measured in the same run) and 2 threads, the speed-up, and the
// ratio to the targets (2 s, 20 s, and 5 s with CP, on 2 cores). Beside the wall time it prints the
// process CPU seconds of the search (getrusage: user + system, all threads) and the load average, since
// on a shared machine the wall time is mostly waiting for a core.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "parsers/load_model.h"
#include "search/planner.h"

using namespace onboard;

namespace {

double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double LoadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

}  // namespace

int main() {
  const std::string src = ONBOARD_SOURCE_DIR;
  auto model = LoadModel(src + "/examples/flagship/config.json");
  if (!model.ok()) {
    std::fprintf(stderr, "bench_plan_search: %s\n", model.status().ToString().c_str());
    return 2;
  }
  struct Case {
    const char* topo;
    double target_s;
    int64_t seq;
    bool full;
  };
  std::printf("%-26s %7s %7s %10s %8s %6s %12s %12s %9s %8s %9s  %s\n", "topology", "seq", "threads",
              "wall_s", "cpu_s", "load", "memchecked", "costed", "costed/s", "speedup", "target", "best");
  for (const Case& c : {Case{"atlas-950-superpod-128", 2.0, 4096, false}, Case{"atlas-950-superpod-8192", 20.0, 4096, false},
                        Case{"atlas-950-superpod-8192", 5.0, 1 << 20, true}, Case{"gb300-nvl72-8192", 5.0, 1 << 20, true}}) {
    auto topo = LoadTopologyFile(src + "/examples/topologies/" + c.topo + ".json");
    if (!topo.ok()) {
      std::fprintf(stderr, "bench_plan_search: %s\n", topo.status().ToString().c_str());
      return 2;
    }
    double base = 0;
    for (int threads : {1, 2}) {
      PlanRequest req;
      req.model = *model;
      req.topology = *topo;
      req.mode = c.full ? FinetuneMode::kFull : FinetuneMode::kLoRA;
      req.seq = c.seq;
      req.threads = threads;
      const double load = LoadAverage();
      const double cpu0 = ProcessCpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      auto r = SearchPlans(req);
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double cpu = ProcessCpuSeconds() - cpu0;
      if (!r.ok()) {
        std::fprintf(stderr, "bench_plan_search: %s\n", r.status().ToString().c_str());
        return 1;
      }
      if (threads == 1) base = wall;
      char target[32];
      std::snprintf(target, sizeof target, "%.2fx", wall / c.target_s);
      std::printf("%-26s %7lld %7d %10.3f %8.3f %6.1f %12lld %12lld %9.0f %7.2fx %9s  %s\n", c.topo,
                  static_cast<long long>(c.seq), threads, wall, cpu, load,
                  static_cast<long long>(r->candidates_enumerated),
                  static_cast<long long>(r->candidates_evaluated),
                  static_cast<double>(r->candidates_evaluated) / wall, base / wall, target,
                  r->feasible ? PlanSummary(r->best.plan).c_str() : "nothing fits");
    }
  }
  std::printf(
      "target column: wall / target (128 devices: 2 s, 8192 devices: 20 s, 8192 with CP at 1M: 5 s); < 1 "
      "meets it;\n"
      "cpu_s: process CPU seconds of the search (all threads), load: 1-min load average before it\n");
  return 0;
}
