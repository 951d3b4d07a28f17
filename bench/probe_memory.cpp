// bench_probe_memory: the probe's live-tensor memory term by term beside the memory model's
// (issue 17 item 7), under recompute none / selective / full, at one proxy size where activations
// dominate: the default 4-layer proxy (KDA,KDA,KDA,MLA+DSA; dense first, latent MoE 8 experts top-2
// + 1 shared), 2 ranks fsdp = ep = 2, seq 128, batch 16 (8 sequences per rank, 1 micro-step), fp32.
// Why this size: per rank it keeps ~1k tokens x 4 layers of activations (tens of MiB) against
// ~0.4 M parameters x 12 bytes of weights + moments (~5 MiB), so the activation terms, the ones the
// recompute policy changes, dominate the peak.
//
// Measured (each rank's OUT/rank<r>.memory.jsonl, backends/probe_train_step.cpp WriteMemoryTerms;
// max over ranks, steps after the first; bytes of live CPU tensor storages, not RSS):
//   persistent   live bytes at the step's start (weight shards + Adam moments)
//   held u       what unit u's forward left alive (its output + what autograd saved for backward)
//   backward     peak - persistent - sum of held (grads, gathered layers, recomputed layer, logits grad)
// Predicted (backends/probe_report.h PredictProbe / ProbePlanRequest: the same request and plan;
// memory terms of search/memory_model.cpp converted to fp32 as probe_comparison.cpp does):
//   persistent   weights + optimizer
//   held layer   LayerActivationBytes(layer) x 4/2 (bf16 -> fp32); embed 0 (layer 0 counts its input)
//   held head    the fp32 logits copy log_softmax saves: 4 T V
//   backward     total - persistent - held
// Units: MiB per rank. Usage: bench_probe_memory [ONBOARD_BINARY] [STEPS] (default ./onboard, 3).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/backend_entry.h"
#include "backends/probe_report.h"
#include "bench/build_paths.h"
#include "bench/default_proxy.h"

namespace {

using onboard::ProbeConfig;
using onboard::ProbeResult;

struct Measured {
  double persistent = 0, backward = 0, peak = 0;
  std::vector<double> held;  // per unit: embed, layers, head
};

// Max over ranks and the steps after the first of each term (rank<r>.memory.jsonl).
Measured ReadTerms(const std::string& dir, int64_t ranks) {
  Measured m;
  double held_sum = 0;
  for (int64_t r = 0; r < ranks; ++r) {
    std::ifstream f(dir + "/rank" + std::to_string(r) + ".memory.jsonl");
    std::string line;
    while (std::getline(f, line)) {
      const nlohmann::json j = nlohmann::json::parse(line);
      if (j.at("step").get<int64_t>() == 0) continue;  // step 0 creates the Adam moments
      const std::vector<int64_t> u = j.at("unit_held_bytes").get<std::vector<int64_t>>();
      m.held.resize(std::max(m.held.size(), u.size()), 0.0);
      double sum = 0;
      for (size_t k = 0; k < u.size(); ++k) {
        m.held[k] = std::max(m.held[k], static_cast<double>(u[k]));
        sum += static_cast<double>(u[k]);
      }
      held_sum = std::max(held_sum, sum);
      m.persistent = std::max(m.persistent, j.at("live_start_bytes").get<double>());
      m.peak = std::max(m.peak, j.at("live_peak_bytes").get<double>());
    }
  }
  m.backward = m.peak - m.persistent - held_sum;
  return m;
}

void Row(const std::string& name, double pred, double meas) {
  const double mib = 1.0 / 1048576.0;
  std::printf("  %-14s %10.3f %10.3f %8s\n", name.c_str(), pred * mib, meas * mib,
              pred > 0 ? (std::to_string(meas / pred).substr(0, 5) + "x").c_str() : "-");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace onboard;
  const std::string worker = bench::WorkerOr(argc > 1 ? argv[1] : nullptr);
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 3;
  ProxySpec spec = bench::DefaultProxy();
  std::printf(
      "bench_probe_memory: default proxy %s, hidden %lld, 2 ranks fsdp=ep=2, batch 16 x seq 128, %lld "
      "steps\n",
      spec.PatternString().c_str(), static_cast<long long>(spec.hidden), static_cast<long long>(steps));
  int status = 0;
  for (Recompute rc : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    ProbeConfig c;
    c.ranks = 2;
    c.steps = steps;
    c.seq = 128;
    c.batch = 16;
    c.copy_symbols = 64;  // the copy task needs >= (seq-1)/2 distinct symbols
    c.recompute = {{"*", rc}};
    c.worker_binary = worker;
    c.timeout_s = 600;
    c.out_dir = std::string("/tmp/bench-probe-memory-") + RecomputeName(rc) + "-" + std::to_string(getpid());
    Expected<ProbeResult> r = backend::RunProbeSpec(spec, c);
    if (!r.ok()) {
      std::printf("%s: failed: %s\n", RecomputeName(rc), r.status().message().c_str());
      status = 1;
      continue;
    }
    // Step 1: the measured terms; step 2: the model's for the same request and plan.
    const Measured m = ReadTerms(c.out_dir, c.ranks);
    const MemoryComparison& pm = r->prediction.memory;
    PlanRequest req;
    Plan plan;
    backends::ProbePlanRequest(r->spec, r->config, Topology{}, &req, &plan);  // memory terms: no topology
    const std::vector<double> layer = backends::LayerActivationBytes(req, plan);
    const double tokens = static_cast<double>(r->config.micro_batch_size() * r->config.seq);
    const double head = 4 * tokens * static_cast<double>(r->spec.vocab);
    double held = head;
    for (double a : layer) held += a * 2;  // bf16 -> fp32
    const double persistent = pm.weights + pm.optimizer;
    std::printf("\nrecompute *=%s (MiB per rank)   predicted   measured   ratio\n", RecomputeName(rc));
    Row("persistent", persistent, m.persistent);
    for (size_t u = 0; u < m.held.size(); ++u) {
      const bool embed = u == 0, last = u + 1 == m.held.size();
      const double pred = embed ? 0 : last ? head : (u - 1 < layer.size() ? 2 * layer[u - 1] : 0);
      Row(embed ? "held embed" : last ? "held head" : "held layer" + std::to_string(u - 1), pred, m.held[u]);
    }
    Row("backward", pm.predicted - persistent - held, m.backward);
    Row("total (peak)", pm.predicted, m.peak);
  }
  return status;
}
