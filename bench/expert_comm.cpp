// bench_expert_comm (issue 18): expert communication of a 4-rank probe declared as 2 nodes x 2 ranks
// (Gloo over loopback), one row per expert layout, all measured in the same run on the same
// tokens (fp32, fixed micro-batch: the placements and replicas leave the curve bit-exact):
//   contiguous      experts e on EP rank e / (E / ep) (the probe's default; the baseline)
//   load-only       DeepSeek-EPLB-style load packing from the baseline's measured loads, no replicas
//                   (search/expert_placement.h PlaceExperts)
//   co-act global   co-selected experts onto one node from the baseline's measured pairs summed
//                   over the MoE layers, one placement for all (backends/probe_coactivation_placement.h)
//   co-act/layer    the same per MoE layer from its own pairs and loads (as EPLB places each layer)
//   replicas        hottest experts doubled into one spare slot per rank (backends/probe_replicas.h)
//   node-limited    each token's experts on at most 1 node (DeepSeek-V3 M = 1; changes the routing)
//   overlap         the baseline with the dispatch / combine posted asynchronously and the shared
//                   expert computed while they are in flight (ProbeConfig::moe_overlap)
//   node-dedup      the baseline with the node-deduplicated (DeepEP-style) dispatch and combine
//                   (ProbeConfig::ep_dispatcher deepep, backends/probe_node_dedup.h): one slow-tier row
//                   per (token, remote node); the combine's per-node sums round differently
//   co-act+dedup    co-act/layer's placement under the node-deduplicated dispatch: the slow-tier rows
//                   then follow the node-deduplicated copies the placement cuts (a flat all-to-all
//                   sends top_k x (1 - 1/nodes) rows per token under any placement)
// Columns (per routed token, summed over the MoE layers): nodes the top-k span, node-deduplicated
// cross-node copies, cross-node rows of the actual all-to-all, slow-tier bytes (dispatch + combine),
// rows per EP rank max/mean (worst layer), all-to-all ms per step exposed (host blocked; without
// overlap that is all of it) and hidden (in flight under compute), max over ranks, last loss and
// whether the curve equals the baseline's bit for bit (if not: the max relative loss difference).
// Usage: bench_expert_comm [ONBOARD_BINARY] [STEPS] [TEXT_FILE]  (default ./onboard, 8, copy task)
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/backend_entry.h"
#include "backends/probe_coactivation_placement.h"
#include "backends/probe_replicas.h"
#include "backends/probe_step_series.h"
#include "bench/build_paths.h"
#include "search/expert_placement.h"

namespace {

using namespace onboard;

std::string Worker(const char* arg) { return bench::WorkerOr(arg); }

// The small proxy of the probe tests (4 layers KDA,KDA,KDA,MLA+DSA; 8 experts top-2, 3 MoE layers).
ProxySpec SmallProxy() {
  ProxySpec s;
  s.source_model = "bench-proxy";
  s.layers = {{ProxyMixer::kKDA, ProxyChannel::kDense},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kKDA, ProxyChannel::kMoE},
              {ProxyMixer::kMLA, ProxyChannel::kMoE}};
  s.hidden = 32, s.kda_heads = 2, s.kda_head_dim = 8, s.chunk = 8, s.gate_rank = 8;
  s.q_lora_rank = 16, s.kv_lora_rank = 16, s.qk_nope_dim = 8, s.qk_rope_dim = 4, s.v_head_dim = 8;
  s.index_heads = 2, s.index_head_dim = 8, s.index_topk = 6;
  s.num_experts = 8, s.top_k = 2, s.expert_inter = 16, s.shared_inter = 32, s.latent_dim = 16;
  s.mlp_inter = 64;
  return s;
}

std::vector<double> Curve(const ProbeResult& r) {
  std::vector<double> l;
  for (const ProbeStep& s : r.steps) l.push_back(s.loss);
  return l;
}

void Row(const char* name, const ProbeResult& r, const std::vector<double>& base) {
  const ProbeTierTraffic t = TotalTraffic(r.coactivation);
  double a2a = 0, hidden = 0;
  for (size_t i = 1; i < r.steps.size(); ++i) {
    a2a += r.steps[i].comm.all_to_all_s;
    hidden += r.steps[i].comm.all_to_all_hidden_s;
  }
  const double n = static_cast<double>(std::max<size_t>(1, r.steps.size() - 1));
  const std::vector<double> curve = Curve(r);
  double rel = curve.size() == base.size() ? 0 : INFINITY;
  for (size_t i = 0; i < curve.size() && i < base.size(); ++i)
    rel = std::max(rel, std::abs(curve[i] - base[i]) / std::abs(base[i]));
  char same[32] = "yes";
  if (rel != 0) std::snprintf(same, sizeof(same), "no %.0e", rel);
  std::printf("%-14s %9.3f %12.3f %10.3f %10.1f %13.3f %9.2f %9.2f %10.4f %10s\n", name, t.nodes_per_token,
              t.cross_node_copies_per_token, t.cross_node_rows_per_token, t.slow_tier_bytes_per_token,
              t.rank_max_over_mean, 1e3 * a2a / n, 1e3 * hidden / n, r.steps.back().loss, same);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string worker = Worker(argc > 1 ? argv[1] : nullptr);
  const ProxySpec spec = SmallProxy();
  ProbeConfig c;
  c.ranks = 4;
  c.ranks_per_node = 2;
  c.steps = argc > 2 ? std::atoll(argv[2]) : 8;
  c.seq = 16;
  c.batch = 8;
  c.micro_batch = 2;
  c.lr = 3e-3;
  c.warmup = 3;
  c.timeout_s = 600;
  c.worker_binary = worker;
  if (argc > 3) c.task = ProbeTask::kText, c.text_file = argv[3];
  std::printf(
      "bench_expert_comm: 4 ranks = 2 nodes x 2 (loopback), proxy %s, %lld steps, %s task, %ld cores\n",
      spec.PatternString().c_str(), static_cast<long long>(c.steps), argc > 3 ? "text" : "copy",
      sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("%-14s %9s %12s %10s %10s %13s %9s %9s %10s %10s\n", "layout", "nodes/tok", "xnode_copies",
              "xnode_rows", "slow_B/tok", "rank_max/mean", "a2a_ms", "hidden_ms", "last_loss", "same_curve");
  auto run = [&](const ProbeConfig& cfg) {
    Expected<ProbeResult> r = backend::RunProbeSpec(spec, cfg);
    if (!r.ok()) std::printf("probe failed: %s\n", r.status().message().c_str());
    return r;
  };
  Expected<ProbeResult> base = run(c);
  if (!base.ok()) return 1;
  const std::vector<double> curve = Curve(*base);
  Row("contiguous", *base, curve);
  // Load-only (EPLB-style) and co-activation placements, replicas: from the baseline's measurements.
  ExpertPlacementRequest req;
  req.expert_load = MeasuredExpertLoad(*base);
  req.ep_ranks = 4;
  req.ranks_per_node = 2;
  Expected<ExpertPlacement> lo = PlaceExperts(req);
  Expected<ProbeCoactivationPlacement> co = PlaceFromProbeCoactivation(*base);
  if (!lo.ok() || !co.ok()) return 1;
  ProbeConfig v = c;
  v.expert_placement.assign(8, 0);
  for (size_t r = 0; r < lo->rank_experts.size(); ++r)
    for (int64_t e : lo->rank_experts[r])
      v.expert_placement[static_cast<size_t>(e)] = static_cast<int64_t>(r);
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("load-only", *r, curve);
  v.expert_placement = co->placement;
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("co-act global", *r, curve);
  v.expert_placement = PerLayerPlacement(co->placement_by_layer);
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("co-act/layer", *r, curve);
  v = c;
  v.expert_phy2log = Phy2LogFromLoads(req.expert_load, 4, 1);
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("replicas", *r, curve);
  v = c;
  v.max_route_nodes = 1;
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("node-limited", *r, curve);
  v = c;
  v.moe_overlap = true;
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("overlap", *r, curve);
  v = c;
  v.ep_dispatcher = "deepep";
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("node-dedup", *r, curve);
  v.expert_placement = PerLayerPlacement(co->placement_by_layer);
  if (Expected<ProbeResult> r = run(v); r.ok()) Row("co-act+dedup", *r, curve);
  std::printf(
      "(a2a_ms: exposed, measured; backward exchanges stay synchronous; wall times on a shared machine "
      "are noisy)\n");
  return 0;
}
