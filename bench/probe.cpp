// bench_probe: steps/s and tokens/s of the default proxy (4 layers KDA,KDA,KDA,MLA+DSA; latent MoE
// 8 experts top-2 + 1 shared) trained with 1, 2 and 4 processes (fsdp = ep = ranks, Gloo over
// loopback), in one table with the ratio against the 1-process run measured in the same run.
// Steady state: the first step (allocations, connections) is excluded. On a machine with fewer
// cores than ranks the ranks share cores: the ratio then shows the cost of the collectives plus
// the oversubscription, not a speed-up.
// Usage: bench_probe [ONBOARD_BINARY] [STEPS]   (default: ./onboard next to the bench folder, 12)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/backend_entry.h"

int main(int argc, char** argv) {
  using namespace onboard;
  std::string worker = argc > 1 ? argv[1] : "";
  if (worker.empty()) {
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = 0;
    std::string self = buf;
    worker = self.substr(0, self.rfind("/bench/")) + "/onboard";
  }
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 12;
  ProxySpec spec;
  spec.source_model = "default-proxy";
  spec.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense},
                 {ProxyMixer::kKDA, ProxyChannel::kMoE},
                 {ProxyMixer::kKDA, ProxyChannel::kMoE},
                 {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  std::printf("bench_probe: default proxy %s, hidden %lld, batch 8 x seq 64, %lld steps, %ld cores\n",
              spec.PatternString().c_str(), static_cast<long long>(spec.hidden),
              static_cast<long long>(steps), sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-6s %10s %10s %12s %8s %9s %9s %9s\n", "ranks", "step_ms", "steps/s", "tokens/s",
              "ratio", "a2a_ms", "ag+rs_ms", "ar_ms");
  double base = 0;
  int status = 0;
  for (int64_t ranks : {1, 2, 4}) {
    ProbeConfig c;
    c.ranks = ranks;
    c.steps = steps;
    c.seq = 64;
    c.batch = 8;
    c.worker_binary = worker;
    c.timeout_s = 600;
    Expected<ProbeResult> r = backend::RunProbeSpec(spec, c);
    if (!r.ok()) {
      std::printf("%-6lld failed: %s\n", static_cast<long long>(ranks), r.status().message().c_str());
      status = 1;
      continue;
    }
    double step_s = 0, a2a = 0, agrs = 0, ar = 0;
    int64_t n = 0;
    for (size_t i = 1; i < r->steps.size(); ++i, ++n) {
      const ProbeStep& s = r->steps[i];
      step_s += s.step_s;
      a2a += s.comm.all_to_all_s;
      agrs += s.comm.all_gather_s + s.comm.reduce_scatter_s;
      ar += s.comm.all_reduce_s;
    }
    const double k = n > 0 ? 1.0 / static_cast<double>(n) : 0.0;
    step_s *= k;
    const double tps = step_s > 0 ? static_cast<double>(c.batch * c.seq) / step_s : 0;
    if (ranks == 1) base = tps;
    std::printf("%-6lld %10.1f %10.2f %12.0f %7.2fx %9.2f %9.2f %9.2f\n", static_cast<long long>(ranks),
                step_s * 1e3, step_s > 0 ? 1.0 / step_s : 0.0, tps, base > 0 ? tps / base : 0.0,
                a2a * k * 1e3, agrs * k * 1e3, ar * k * 1e3);
  }
  return status;
}
