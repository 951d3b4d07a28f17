// Measured beside predicted, per collective kind and for memory (probe_report.h CompareCollectives,
// CompareMemory). Units: seconds per optimizer step; bytes per rank.
//
// Collectives: one row per kind in kCollectiveKinds (the probe's CollectiveTimes field(s) and the
// cost model's time term for the same traffic: search/cost_model.cpp Step 5). A new collective kind
// is one more row here. Measured = mean over the steps after
// the first (warm-up: connections, allocations) of the max over ranks; predicted = the term's
// total seconds per step (exposed + overlapped: the probe times each collective whole).
//
// Memory: the memory model's breakdown (search/memory_model.cpp) is in the model's dtypes; the probe
// trains in cfg.dtype (fp32 or fp64) throughout. Converted term by term (bytes per element):
//   weights, grads, optimizer   zero 3: fp32 (4)         x probe/4
//   activations, a2a buffers    bf16 (2)                 x probe/2
//   workspace: gathered layers  bf16 (2)                 x probe/2
//   workspace: logits + grad    fp32 (4): 2*4*T*V/t      x probe/4   (T tokens per micro-batch, V vocab)
#include <algorithm>
#include <cmath>

#include "backends/probe_report.h"
#include "search/cost_model.h"

namespace onboard::backends {
namespace {

struct CollectiveKind {
  const char* kind;
  const char* term;  // search/cost_model.cpp time term
  double (*measured)(const CollectiveTimes&);
};

// clang-format off
const CollectiveKind kCollectiveKinds[] = {
    {"fsdp_ag_rs", "comm.fsdp",    [](const CollectiveTimes& c) { return c.all_gather_s + c.reduce_scatter_s; }},
    {"ep_a2a",     "comm.ep_a2a",  [](const CollectiveTimes& c) { return c.all_to_all_s; }},
    {"all_reduce", "comm.dp_sync", [](const CollectiveTimes& c) { return c.all_reduce_s; }},
    {"tp_ar_ag",   "comm.tp",      [](const CollectiveTimes& c) { return c.tp_total(); }},
    {"pp_p2p",     "comm.pp_p2p",  [](const CollectiveTimes& c) { return c.pp_total(); }},
};
// clang-format on

double ProbeElementBytes(const ProbeConfig& c) { return FloatDtypeBytes(c.dtype); }

}  // namespace

std::vector<CollectiveComparison> PredictedCollectives(const std::vector<TimeTerm>& terms) {
  std::vector<CollectiveComparison> out;
  for (const CollectiveKind& k : kCollectiveKinds) {
    CollectiveComparison c;
    c.kind = k.kind;
    c.term = k.term;
    for (const TimeTerm& t : terms)
      if (t.name == k.term) c.predicted_s += t.total_s;
    out.push_back(c);
  }
  return out;
}

void MeasureCollectives(const std::vector<ProbeStep>& steps, std::vector<CollectiveComparison>* rows) {
  const size_t first = steps.size() > 1 ? 1 : 0;
  for (CollectiveComparison& c : *rows) {
    const CollectiveKind* k = nullptr;
    for (const CollectiveKind& x : kCollectiveKinds)
      if (c.kind == x.kind) k = &x;
    if (k == nullptr || steps.size() <= first) continue;
    double sum = 0;
    for (size_t i = first; i < steps.size(); ++i) sum += k->measured(steps[i].comm);
    c.measured_s = sum / static_cast<double>(steps.size() - first);
    c.ratio = c.predicted_s > 0 ? c.measured_s / c.predicted_s : 0;
  }
}

MemoryComparison PredictedMemory(const MemoryBreakdown& m, const ProbeConfig& cfg, int64_t vocab) {
  MemoryComparison p;
  const double e = ProbeElementBytes(cfg);
  const double tokens = static_cast<double>(cfg.micro_batch_size() * cfg.seq);
  const double logits = 2 * 4 * tokens * static_cast<double>(vocab);  // fp32 logits + their gradient (tp = 1)
  p.weights = m.weights * e / 4;
  p.grads = m.grads * e / 4;
  p.optimizer = m.optimizer * e / 4;
  p.activations = m.activations * e / 2;
  p.a2a_buffers = m.a2a_buffers * e / 2;
  p.workspace = std::max(0.0, m.workspace - logits) * e / 2 + logits * e / 4;
  p.predicted = p.weights + p.grads + p.optimizer + p.activations + p.a2a_buffers + p.workspace;
  p.dtype_note = std::string("model terms converted to the probe's ") + FloatDtypeName(cfg.dtype) +
                 " (weights/grads/optimizer/logits from fp32, activations/a2a/gathered layers from bf16)";
  return p;
}

std::vector<double> LayerActivationBytes(const PlanRequest& req, const Plan& plan) {
  const CostContext c = MakeCostContext(req);
  const std::vector<Recompute> pol = KindPolicies(c, plan);
  std::vector<double> out;
  for (size_t l = 0; l < c.prof.layers.size(); ++l) {
    double routed = 0;
    const double kept = LayerActBytesPerToken(c, plan, l, &routed, &pol);
    out.push_back(TokensPerRank(plan) * (kept + routed));
  }
  return out;
}

void MeasureMemory(const std::vector<int64_t>& rank_peaks, MemoryComparison* m) {
  m->measured = 0;
  for (int64_t b : rank_peaks) m->measured = std::max(m->measured, static_cast<double>(b));
  m->ratio = m->predicted > 0 ? m->measured / m->predicted : 0;
}

}  // namespace onboard::backends
