// bench_probe_saved_tensors: the saved-tensor tally of one proxy layer unit (issue 17 item 7): which
// tensors the unit's forward under grad leaves alive for backward, with the op that allocated each,
// its shape and bytes. It runs the unit the way the probe's kept path does (RunFsdpUnit, fsdp_unit.h)
// in one process, at bench_probe_memory's per-rank size: the default 4-layer proxy, 8 sequences x
// seq 128 (1024 tokens: 2 ranks x batch 16 / 2), fp32, the probe's default kernels (KDA generated,
// DSA torch ops), DSA indexer KL on. One process: fsdp = ep = 1, so the unit's MoE runs all 8
// experts on this rank's 2048 (token, expert) pairs (the probe's EP = 2 rank runs 4 experts on about
// the same number of received pairs).
//
// Method: the tracking CPU allocator (tensor_memory_compat.h) records every allocation during the
// unit's forward with its ATen op stack (RecordFunction) and the shape of the first op output on
// it; the allocations still alive after the forward are the unit's held bytes (its output + what
// autograd saved), the same quantity as bench_probe_memory's "held" row.
//
// Legend: b sequences (8), T tokens per sequence (128), D hidden (64); shapes as the ops returned
// them. Units: bytes and MiB (2^20 B).
// Usage: bench_probe_saved_tensors [UNIT] [POLICY] (default 4 = layer3 (0 = embed), none; POLICY
// none | selective | full applies to both the token mixer and the channel).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "backends/c10d_compat.h"
#include "backends/fsdp_unit.h"
#include "backends/kda_generated.h"
#include "backends/proxy_model.h"
#include "backends/tensor_memory_compat.h"
#include "bench/default_proxy.h"

namespace {

using namespace onboard;
using namespace onboard::backends;

constexpr double kMiB = 1048576.0;

Recompute PolicyOf(const std::string& name) {
  if (name == "selective") return Recompute::kSelective;
  if (name == "full") return Recompute::kFull;
  return Recompute::kNone;
}

// Prints the survivors in allocation order, then the total.
void PrintTally(const std::vector<TracedAllocation>& held, int64_t live_delta) {
  std::printf("%5s %10s %9s  %-28s %s\n", "order", "bytes", "MiB", "shape", "ops (outermost first)");
  int64_t sum = 0;
  for (const TracedAllocation& a : held) {
    sum += a.bytes;
    std::printf("%5lld %10lld %9.4f  %-28s %s\n", static_cast<long long>(a.order),
                static_cast<long long>(a.bytes), a.bytes / kMiB, a.shape.c_str(), a.ops.c_str());
  }
  std::printf("held: %zu storages, %lld B = %.3f MiB (live-byte delta of the forward %lld B = %.3f MiB)\n",
              held.size(), static_cast<long long>(sum), sum / kMiB, static_cast<long long>(live_delta),
              live_delta / kMiB);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t unit = argc > 1 ? static_cast<size_t>(std::atoll(argv[1])) : 4;
  const Recompute policy = PolicyOf(argc > 2 ? argv[2] : "none");
  if (!InstallLiveTensorCounter()) {
    std::fprintf(stderr, "bench_probe_saved_tensors: the tracking allocator was not installed\n");
    return 1;
  }
  SetProcessKdaImpl(ProbeKernel::kGenerated);  // the probe's default (DSA: torch ops, the default)
  // Step 1: the unit's layout and weights; the batch of one rank.
  const ProxySpec spec = bench::DefaultProxy();
  ProbeConfig cfg;
  cfg.seq = 128;
  cfg.batch = 8;
  const std::vector<UnitLayout> units = BuildLayout(spec, cfg);
  if (unit == 0 || unit + 1 >= units.size()) {
    std::fprintf(stderr, "bench_probe_saved_tensors: UNIT must be a layer unit, 1..%zu\n", units.size() - 2);
    return 2;
  }
  const UnitLayout& u = units[unit];
  at::manual_seed(1);
  at::Tensor dense = InitFlat(u.dense, 100 + unit).requires_grad_(true);
  std::vector<at::Tensor> rows;
  for (int64_t e = 0; e < spec.num_experts; ++e)
    if (u.expert.numel > 0) rows.push_back(InitFlat(u.expert, 200 + 31 * unit + static_cast<uint64_t>(e)));
  at::Tensor experts = (rows.empty() ? at::zeros({0}) : at::cat(rows)).requires_grad_(true);
  at::Tensor none = at::zeros({0});
  at::Tensor x = at::randn({cfg.batch, cfg.seq, spec.hidden}).requires_grad_(true);
  // Step 2: groups of one rank, routing with every expert local, the unit's inputs.
  Rendezvous store("127.0.0.1", 0, /*is_server=*/true, 10.0);
  Group one(store, "fsdp", 0, 1, 10.0, "127.0.0.1");
  MoeRouting routing;
  routing.ep = &one;
  for (int64_t e = 0; e < spec.num_experts; ++e) {
    routing.placement.push_back(0);
    routing.local_experts.push_back(e);
  }
  std::map<int64_t, double> kl;
  UnitInputs in;
  in.inv_global_tokens = 1.0 / static_cast<double>(2 * cfg.batch * cfg.seq);  // 2 ranks' tokens
  in.indexer_kl = &kl;
  UnitRunner runner{&spec, &u, &one, &one, &routing, &in, 0.0, policy, policy};
  // Step 3: the traced forward (grad on, as the probe's kept units run).
  const int64_t before = LiveTensorBytes();
  StartAllocationTrace();
  at::Tensor out = RunFsdpUnit(&runner, x, dense, none, experts, none);
  const std::vector<TracedAllocation> held = StopAllocationTrace();
  const int64_t live_delta = LiveTensorBytes() - before;
  std::printf(
      "bench_probe_saved_tensors: unit %s, recompute %s, x [%lld, %lld, %lld] fp32, output [%lld, %lld, "
      "%lld]\n",
      u.name.c_str(), RecomputeName(policy), static_cast<long long>(cfg.batch),
      static_cast<long long>(cfg.seq), static_cast<long long>(spec.hidden),
      static_cast<long long>(out.size(0)), static_cast<long long>(out.size(1)),
      static_cast<long long>(out.size(2)));
  PrintTally(held, live_delta);
  // Step 4: the backward runs (the graph is whole) and frees what the forward saved.
  out.sum().backward();
  return 0;
}
