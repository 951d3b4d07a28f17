// bench_probe: ms/step and tokens/s of the default proxy (4 layers KDA,KDA,KDA,MLA+DSA; latent MoE
// 8 experts top-2 + 1 shared) trained with 1, 2, 4 and 8 processes in data-parallel (fsdp = ep =
// data ranks), tensor-parallel (tp consecutive ranks) and pipeline layouts (pp stages, 1F1B or
// interleaved) and their products, with sequence parallelism (SP) and expert tensor parallelism
// (etp = tp) on tensor-parallel rows (the probe's rank order: pp outermost, data ranks, tp innermost;
// fsdp = ep = ranks / (tp * pp) on every row; Gloo over loopback), in one table with the ratio
// against the 1-process run measured in the same run, each collective's share of the step (tp =
// TP all-reduce + all-gather + reduce-scatter (SP); p2p = pipeline send + recv, recv including the wait for
// the other stage) and the measured bubble (idle share of the pipeline span, max over ranks). Micro-batch 1
// sequence on every layout (8 micro-batches per step on 1 process).
// Steady state: the first step (allocations, connections) is excluded. On a machine with fewer
// cores than ranks the ranks share cores: the ratio then shows the cost of the collectives plus
// the oversubscription, not a speed-up.
// Usage: bench_probe [ONBOARD_BINARY] [STEPS]   (default: ./onboard next to the bench folder, 12)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/backend_entry.h"
#include "bench/build_paths.h"
#include "bench/default_proxy.h"

namespace {

struct Layout {
  const char* name;
  int64_t ranks, tp, pp, interleave;
  bool sp = false;  // sequence parallelism over the TP group
  int64_t etp = 0;  // expert tensor parallelism (= tp when set)
};
// fsdp = ep = the data ranks (ranks / (tp * pp)) on every row.
// clang-format off
const Layout kLayouts[] = {
    {"1 process", 1, 1, 1, 1},
    {"dp: fsdp=ep=2", 2, 1, 1, 1},
    {"tp=2", 2, 2, 1, 1},
    {"tp=2 + SP", 2, 2, 1, 1, true},
    {"pp=2 1F1B", 2, 1, 2, 1},
    {"pp=2 interleave=2", 2, 1, 2, 2},
    {"dp: fsdp=ep=4", 4, 1, 1, 1},
    {"tp=2 x fsdp=ep=2", 4, 2, 1, 1},
    {"tp=2 x fsdp=ep=2 etp=2", 4, 2, 1, 1, false, 2},
    {"tp=2 x fsdp=ep=2 SP+etp", 4, 2, 1, 1, true, 2},
    {"pp=2 x fsdp=ep=2", 4, 1, 2, 1},
    {"pp=4 1F1B", 4, 1, 4, 1},
    {"tp=2 x pp=2", 4, 2, 2, 1},
    {"tp=2 x pp=2 x fsdp=ep=2", 8, 2, 2, 1},
};
// clang-format on

// Means over the steps after the first: step time, each collective's time, the bubble (max over ranks).
struct Row {
  double step_s = 0, a2a = 0, agrs = 0, ar = 0, tp = 0, p2p = 0, bubble = 0;
};
Row Measure(const onboard::ProbeResult& r) {
  Row m;
  int64_t n = 0;
  for (size_t i = 1; i < r.steps.size(); ++i, ++n) {
    const onboard::ProbeStep& s = r.steps[i];
    m.step_s += s.step_s;
    m.a2a += s.comm.all_to_all_s;
    m.agrs += s.comm.all_gather_s + s.comm.reduce_scatter_s;
    m.ar += s.comm.all_reduce_s;
    m.tp += s.comm.tp_total();
    m.p2p += s.comm.pp_total();
    m.bubble += s.pp_bubble;
  }
  const double k = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
  for (double* v : {&m.step_s, &m.a2a, &m.agrs, &m.ar, &m.tp, &m.p2p, &m.bubble}) *v *= k;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace onboard;
  const std::string worker = bench::WorkerOr(argc > 1 ? argv[1] : nullptr);
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 12;
  ProxySpec spec = bench::DefaultProxy();
  std::printf("bench_probe: default proxy %s, hidden %lld, batch 8 x seq 64, %lld steps, %ld cores\n",
              spec.PatternString().c_str(), static_cast<long long>(spec.hidden),
              static_cast<long long>(steps), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-24s %6s %9s %10s %7s %6s %6s %6s %6s %6s %7s\n", "layout", "ranks", "step_ms", "tokens/s",
              "ratio", "a2a%", "ag+rs%", "ar%", "tp%", "p2p%", "bubble%");
  double base = 0;
  int status = 0;
  for (const Layout& L : kLayouts) {
    ProbeConfig c;
    c.ranks = L.ranks;
    c.tp = L.tp;
    c.pp = L.pp;
    c.interleave = L.interleave;
    c.sequence_parallel = L.sp;
    c.etp = L.etp;
    c.steps = steps;
    c.seq = 64;
    c.batch = 8;
    c.micro_batch = 1;  // the same micro-batches on every layout (pp: the schedule's)
    c.worker_binary = worker;
    c.timeout_s = 600;
    Expected<ProbeResult> r = backend::RunProbeSpec(spec, c);
    if (!r.ok()) {
      std::printf("%-24s failed: %s\n", L.name, r.status().message().c_str());
      status = 1;
      continue;
    }
    const Row m = Measure(*r);
    const double tps = m.step_s > 0 ? static_cast<double>(c.batch * c.seq) / m.step_s : 0;
    if (base == 0) base = tps;
    auto pct = [&](double v) { return m.step_s > 0 ? 100 * v / m.step_s : 0.0; };
    std::printf("%-24s %6lld %9.1f %10.0f %6.2fx %6.1f %6.1f %6.1f %6.1f %6.1f %7.1f\n", L.name,
                static_cast<long long>(L.ranks), m.step_s * 1e3, tps, base > 0 ? tps / base : 0.0, pct(m.a2a),
                pct(m.agrs), pct(m.ar), pct(m.tp), pct(m.p2p), 100 * m.bubble);
  }
  return status;
}
