// Rule "expert_routing" (family comm): the probe ran over >= 2 declared nodes (ProbeConfig::
// ranks_per_node) and measured D_p, the mean distinct nodes a token's top-k experts span
// (backends/probe_coactivation.h TotalTraffic().nodes_per_token) -> re-plan with that routing, so the
// plan's comm.ep_a2a (search/ep_a2a_traffic.h) costs the measured instead of the uniform routing.
//
// The probe's node count N_p (2 on a localhost probe) is not the plan's EP node count N, and its proxy
// top-k k_p need not be the model's k, so D_p is not copied. What transfers is the concentration c:
// the measured spread beyond the one node a token always reaches, relative to the spread of k_p
// uniform picks over N_p nodes,
//   U(N, k) = N (1 - (1 - 1/N)^k)                    nodes per token, k uniform picks (UniformNodesPerToken)
//   c       = (D_p - 1) / (U(N_p, k_p) - 1)          dimensionless; 0 = every token on one node,
//                                                    1 = uniform, > 1 = spread wider than uniform
//   D       = 1 + c (U(N, k) - 1)                    nodes per token at the plan's N and k, then capped
//             at min(k, N) and at the request's max_route_nodes M (node-limited routing)
// The excess over 1 (not D_p / U_p) is what scales: the first node is reached whatever the routing,
// so perfectly concentrated routing stays at 1 node and uniform routing at U(N, k) at any size. It
// assumes the full-size placement keeps the probe's concentration (a co-activation placement made on
// the probe, rules_expert_coactivation.cpp, carries over as the same share of the spread). N = the
// chosen plan's EP span / ranks per node (EpA2aTraffic's nodes); a re-plan may choose another N, where
// the request's one D is capped as above.
//
// Fires when |D / D_used - 1| > Thresholds::expert_nodes_change, D_used = the D the chosen plan's
// comm.ep_a2a used (the request's, else the uniform expectation), only for a node-deduplicating
// dispatcher (deepep / hybridep): a plain all-to-all sends every top-k copy, D does not enter its cost.
// Needs one EP group over all probe ranks (each token may reach all N_p nodes) and k_p >= 2 (with one
// pick U = 1: nothing to measure). Sets LoopKnobs::expert_nodes_per_token = D (StagePlan copies it into
// the PlanRequest) and asks for a re-plan; the decision shows the chosen layout's comm.ep_a2a seconds
// per step before -> after (EvaluatePlan, same layout, only D changed).
// Units: nodes per token (means over tokens and MoE layers), seconds per optimizer step.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "agent/rules/rules.h"
#include "search/ep_a2a_traffic.h"
#include "search/model_profile.h"

namespace onboard::agent {
namespace {

// Step 1 helper: D_p, N_p, k_p and the concentration c of the probe; nullopt when it cannot say.
struct ProbeRouting {
  double nodes = 0, top_k = 0, nodes_per_token = 0, uniform = 0, concentration = 0;
};
std::optional<ProbeRouting> MeasuredRouting(const ProbeResult& p) {
  const ProbeCoactivation& c = p.coactivation;
  if (c.empty() || c.nodes < 2 || p.config.nodes() < 2) return std::nullopt;
  if (p.config.ep_degree() != p.config.ranks) return std::nullopt;  // EP group = all ranks = all nodes
  ProbeRouting r;
  r.nodes = static_cast<double>(c.nodes);
  r.top_k = static_cast<double>(c.top_k);
  r.nodes_per_token = TotalTraffic(c).nodes_per_token;
  r.uniform = UniformNodesPerToken(r.nodes, c.top_k);
  if (!(r.uniform > 1) || !(r.nodes_per_token >= 1)) return std::nullopt;
  r.concentration = (r.nodes_per_token - 1) / (r.uniform - 1);
  return r;
}

// Step 2 helper: the chosen plan's split, first routed layer (as comm.ep_a2a's formula reads it).
struct PlanRouting {
  int64_t top_k = 0;
  EpTierTraffic used;
};
std::optional<PlanRouting> ChosenPlanRouting(const PlanRequest& req, const Plan& plan) {
  const ModelProfile prof =
      BuildProfile(req.model, req.seq, req.dropout, req.attention_kernel == "unfused", req.unfused_framework);
  for (const LayerProfile& lp : prof.layers) {
    if (lp.top_k <= 0 || lp.experts <= 0) continue;
    const EpRouting routing{req.expert_nodes_per_token, req.max_route_nodes, plan.ep_dispatcher};
    return PlanRouting{
        lp.top_k, EpA2aTraffic(lp.top_k, plan.deg.ep, plan.deg.etp, req.topology.tiers.front().group_size,
                               lp.cross_node_fraction, routing)};
  }
  return std::nullopt;
}

// The comm.ep_a2a term of `plan` under `req`, seconds per step {exposed, total}; {0, 0} when absent.
std::pair<double, double> EpA2aSeconds(const PlanRequest& req, const Plan& plan) {
  Expected<PlanEstimate> e = EvaluatePlan(req, plan);
  if (!e.ok()) return {0, 0};
  for (const TimeTerm& t : e->time_terms)
    if (t.name == "comm.ep_a2a") return {t.exposed_s, t.total_s};
  return {0, 0};
}

}  // namespace

double TransferNodesPerToken(double concentration, double plan_nodes, int64_t plan_top_k,
                             int64_t max_route_nodes) {
  double d = 1 + std::max(0.0, concentration) * (UniformNodesPerToken(plan_nodes, plan_top_k) - 1);
  d = std::min({d, plan_nodes, static_cast<double>(plan_top_k)});
  if (max_route_nodes > 0) d = std::min(d, static_cast<double>(max_route_nodes));
  return std::max(1.0, d);
}

std::optional<Decision> RuleExpertRouting(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k) {
  if (!ev.probe || !ev.plan || !ev.plan_request || ev.plan_request->topology.tiers.empty())
    return std::nullopt;
  const Plan& plan = ev.plan->plan;
  if (plan.ep_dispatcher == EpDispatcher::kAllToAll) return std::nullopt;  // D does not enter its cost
  // Step 1: the probe's measured routing and its concentration.
  const std::optional<ProbeRouting> m = MeasuredRouting(*ev.probe);
  if (!m) return std::nullopt;
  // Step 2: what the chosen plan used, and the measurement transferred to its N and k.
  const PlanRequest& req = *ev.plan_request;
  const std::optional<PlanRouting> pr = ChosenPlanRouting(req, plan);
  if (!pr || pr->used.nodes <= 1) return std::nullopt;  // EP inside one node: no slow tier
  const double used = pr->used.nodes_per_token;
  const double d = TransferNodesPerToken(m->concentration, pr->used.nodes, pr->top_k, req.max_route_nodes);
  const double change = used > 0 ? std::fabs(d / used - 1) : 0;
  if (!(change > th.expert_nodes_change)) return std::nullopt;
  // Step 3: the chosen layout's ep a2a before -> after (only D changes).
  PlanRequest after_req = req;
  after_req.expert_nodes_per_token = d;
  const auto [before_s, before_total_s] = EpA2aSeconds(req, plan);
  const auto [after_s, after_total_s] = EpA2aSeconds(after_req, plan);
  // Step 4: the decision.
  Decision out;
  out.round = ev.round;
  out.rule = "expert_routing";
  out.family = "comm";
  out.observed = {{"probe_nodes", m->nodes},
                  {"probe_top_k", m->top_k},
                  {"probe_nodes_per_token", m->nodes_per_token},
                  {"probe_uniform_nodes_per_token", m->uniform},
                  {"concentration", m->concentration},
                  {"plan_nodes", pr->used.nodes},
                  {"plan_top_k", pr->top_k},
                  {"plan_uniform_nodes_per_token", UniformNodesPerToken(pr->used.nodes, pr->top_k)},
                  {"plan_nodes_per_token_used", used},
                  {"plan_nodes_per_token_measured", d},
                  {"ep_dispatcher", EpDispatcherName(plan.ep_dispatcher)},
                  {"ep_a2a_s_before", before_s},
                  {"ep_a2a_s_after", after_s},
                  {"ep_a2a_total_s_before", before_total_s},
                  {"ep_a2a_total_s_after", after_total_s}};
  char thr[120];
  std::snprintf(thr, sizeof(thr), "|measured nodes/token (at the plan's N, k) / used - 1| > %.2f",
                th.expert_nodes_change);
  out.threshold = thr;
  out.changed["expert_nodes_per_token"] = {k.expert_nodes_per_token, d};
  k.expert_nodes_per_token = d;
  k.replan = true;
  char act[320];
  std::snprintf(act, sizeof(act),
                "re-plan with the measured routing: %.3g nodes/token at the plan's %.3g nodes (probe %.3g of "
                "%.3g uniform over %.3g nodes, concentration %.2f) instead of %.3g; %s ep a2a %.4g -> %.4g "
                "s/step for the chosen layout",
                d, pr->used.nodes, m->nodes_per_token, m->uniform, m->nodes, m->concentration, used,
                EpDispatcherName(plan.ep_dispatcher), before_s, after_s);
  out.action = act;
  return out;
}

}  // namespace onboard::agent
