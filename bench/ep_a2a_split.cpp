// bench_ep_a2a_split (issue 18 item 2, plan side): the expert all-to-all term split by tier
// (search/ep_a2a_traffic.h) for MoE models of tests/data/hf on a multi-node topology, at EP degrees
// spanning 2 and 8 nodes. For each (model, EP) the search picks the best plan with that EP (LoRA, so
// every model fits), then the same plan is costed (EvaluatePlan) under four routings:
//   alltoall          plain all-to-all, uniform routing (the baseline of the ratios, same run)
//   deepep            node-deduplicating dispatcher, D = the uniform expectation N (1 - (1 - 1/N)^k)
//   deepep D=1        deepep with a measured expert_nodes_per_token = 1 (all of a token's experts on
//                     one node: the best a co-activation placement can reach)
//   deepep M=4        deepep with node-limited routing max_route_nodes = 4 (DeepSeek-V3's M)
// Columns: N nodes the EP group spans, D used, slow-tier copies per token (one direction, first MoE
// layer, EpA2aTraffic: the function the cost model calls), comm.ep_a2a seconds per step (all layers,
// fwd + bwd), and both as ratios against the alltoall row. Links search only (no LibTorch).
// Usage: bench_ep_a2a_split [TOPOLOGY] (default b200-32x8: 32 nodes x 8 B200).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "parsers/load_model.h"
#include "search/ep_a2a_traffic.h"
#include "search/model_profile.h"
#include "search/planner.h"

using namespace onboard;

namespace {

struct Variant {
  const char* name;
  EpDispatcher dispatcher;
  double nodes_per_token;
  int64_t max_route_nodes;
};

const Variant kVariants[] = {{"alltoall", EpDispatcher::kAllToAll, 0, 0},
                             {"deepep", EpDispatcher::kDeepEP, 0, 0},
                             {"deepep D=1", EpDispatcher::kDeepEP, 1, 0},
                             {"deepep M=4", EpDispatcher::kDeepEP, 0, 4}};

const LayerProfile* FirstMoeLayer(const ModelProfile& prof) {
  for (const LayerProfile& lp : prof.layers)
    if (lp.top_k > 0 && lp.experts > 0) return &lp;
  return nullptr;
}

double A2aSeconds(const PlanEstimate& e) {
  for (const TimeTerm& t : e.time_terms)
    if (t.name == "comm.ep_a2a") return t.total_s;
  return -1;
}

// One (model, EP) block of the table: search the best plan with that EP, cost it per variant.
int PrintBlock(const std::string& model_name, const ModelIR& model, const Topology& topo, int64_t ep) {
  PlanRequest req;
  req.model = model;
  req.topology = topo;
  req.mode = FinetuneMode::kLoRA;
  req.constraints.ep = ep;
  req.top_n = 0;
  req.threads = 2;
  auto r = SearchPlans(req);
  if (!r.ok() || !r->feasible) {
    std::fprintf(stderr, "bench_ep_a2a_split: %s ep=%lld: %s\n", model_name.c_str(),
                 static_cast<long long>(ep), r.ok() ? "nothing fits" : r.status().ToString().c_str());
    return 1;
  }
  const ModelProfile prof = BuildProfile(model, r->best.plan.seq, 0, false);
  const LayerProfile* lp = FirstMoeLayer(prof);
  if (lp == nullptr) return 1;
  double base_copies = 0, base_s = 0;
  for (const Variant& v : kVariants) {
    Plan p = r->best.plan;
    p.ep_dispatcher = v.dispatcher;
    req.expert_nodes_per_token = v.nodes_per_token;
    req.max_route_nodes = v.max_route_nodes;
    auto e = EvaluatePlan(req, p);
    if (!e.ok()) {
      std::fprintf(stderr, "bench_ep_a2a_split: %s\n", e.status().ToString().c_str());
      return 1;
    }
    const EpTierTraffic t =
        EpA2aTraffic(lp->top_k, p.deg.ep, p.deg.etp, topo.tiers.front().group_size, lp->cross_node_fraction,
                     EpRouting{v.nodes_per_token, v.max_route_nodes, v.dispatcher});
    const double a2a = A2aSeconds(*e);
    if (v.dispatcher == EpDispatcher::kAllToAll) base_copies = t.slow_copies, base_s = a2a;
    std::printf("%-16s %4lld %3lld %5.0f %-11s %6.3f %10.3f %8.3f %10.4f %8.3f %9.3f  %s\n",
                model_name.c_str(), static_cast<long long>(ep), static_cast<long long>(lp->top_k), t.nodes,
                v.name, t.nodes_per_token, t.slow_copies, t.slow_copies / base_copies, a2a, a2a / base_s,
                e->step_s, PlanSummary(p).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string src = ONBOARD_SOURCE_DIR;
  const std::string topo_name = argc > 1 ? argv[1] : "b200-32x8";
  auto topo = LoadTopologyFile(src + "/examples/topologies/" + topo_name + ".json");
  if (!topo.ok()) {
    std::fprintf(stderr, "bench_ep_a2a_split: %s\n", topo.status().ToString().c_str());
    return 2;
  }
  std::printf(
      "bench_ep_a2a_split: %s (%lld devices, %lld per node), LoRA, best plan per EP, same plan per row\n",
      topo_name.c_str(), static_cast<long long>(topo->num_devices),
      static_cast<long long>(topo->tiers.front().group_size));
  std::printf("%-16s %4s %3s %5s %-11s %6s %10s %8s %10s %8s %9s  %s\n", "model", "ep", "k", "N", "dispatch",
              "D", "slow_copy", "x_a2a", "ep_a2a_s", "x_a2a", "step_s", "plan");
  const auto t0 = std::chrono::steady_clock::now();
  for (const char* name : {"qwen3-235b-a22b", "deepseek-v3"}) {
    auto model = LoadModel(src + "/tests/data/hf/" + name + ".config.json");
    if (!model.ok()) {
      std::fprintf(stderr, "bench_ep_a2a_split: %s\n", model.status().ToString().c_str());
      return 2;
    }
    for (int64_t ep : {16, 64})
      if (PrintBlock(name, *model, *topo, ep) != 0) return 1;
  }
  std::printf(
      "slow_copy: copies per token over the slow tier, one direction, first MoE layer; ep_a2a_s: comm.ep_a2a "
      "total seconds per step;\nx_a2a: ratio against the alltoall row of the same (model, ep); %.1f s wall\n",
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}
