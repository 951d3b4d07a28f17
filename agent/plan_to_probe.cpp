// ApplyPlanToProbe (see plan_to_probe.h): the plan's structure scaled down to the probe's ranks.
#include "agent/plan_to_probe.h"

#include <algorithm>
#include <utility>

#include "backends/probe_layout_check.h"

namespace onboard::agent {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// Largest d in [2, cap] dividing both n and m; 1 when none.
int64_t LargestCommonDivisorUpTo(int64_t n, int64_t m, int64_t cap) {
  for (int64_t d = std::min(n, cap); d >= 2; --d)
    if (n % d == 0 && m % d == 0) return d;
  return 1;
}

std::string RecomputeSummary(const Plan& plan) {
  std::string out;
  for (const auto& [kind, r] : plan.recompute)
    if (r != Recompute::kNone) out += (out.empty() ? "" : ",") + kind + "=" + RecomputeName(r);
  return out.empty() ? "none" : out;
}

// Step 1: what the probe does not run yet.
void Unsupported(const Plan& plan, ProbeLayout& L) {
  const auto& d = plan.deg;
  if (d.sequence_parallel)
    L.factors.push_back({"sequence_parallel", "on", "off",
                         "the probe's tensor parallelism keeps activations replicated over TP (no sequence "
                         "parallelism yet)"});
  if (d.pp > 1)
    L.factors.push_back({"pp", Str(d.pp), "1", "the probe has no pipeline schedule yet: runs every layer on every rank"});
  if (d.interleave > 1)
    L.factors.push_back({"interleave", Str(d.interleave), "1", "needs pipeline parallelism, which the probe lacks"});
}

// Step 5: recompute per block kind onto the proxy's kinds.
void RecomputePolicies(const Plan& plan, ProbeLayout& L) {
  static const std::map<std::string, std::string> kAs = {
      {"KDA", "KDA"}, {"MLA", "MLA"}, {"DSA", "DSA"},           {"MoE", "MoE"},
      {"MLP", "MLP"}, {"*", "*"},     {"GatedDeltaNet", "KDA"}, {"LinearAttention", "KDA"},
      {"MHA", "MLA"}, {"GQA", "MLA"}, {"SlidingWindow", "MLA"}};
  L.recompute = {{"*", Recompute::kNone}};  // the plan's default for kinds it does not name
  std::string reason;
  for (const auto& [kind, r] : plan.recompute) {
    auto it = kAs.find(kind);
    if (it == kAs.end()) {
      reason += (reason.empty() ? "" : "; ") + kind + " is no block kind of the proxy: dropped";
      continue;
    }
    if (it->second != kind)
      reason += (reason.empty() ? "" : "; ") + kind + " runs as the proxy's " + it->second;
    if (it->second != kind && plan.recompute.count(it->second) > 0) continue;  // the plan names it itself
    L.recompute[it->second] = r;
  }
  std::string probe;
  for (const auto& [kind, r] : L.recompute)
    probe += (probe.empty() ? "" : ",") + kind + "=" + RecomputeName(r);
  L.factors.push_back({"recompute", RecomputeSummary(plan), probe, reason});
}

// Step 1b: tensor parallelism, scaled down: the largest t <= the plan's tp that divides the ranks
// and every proxy size TP splits (heads, MLP widths, vocab: backends/probe_layout_check.h), at
// most ranks/2 when the plan has data or expert parallelism too (so that it keeps >= 2 of them).
void TensorParallel(const Plan& plan, const ProxySpec* proxy, ProbeLayout& L) {
  const int64_t want = plan.deg.tp;
  L.tp = 1;
  if (want <= 1) return;
  const bool others = plan.deg.dp_shard * plan.deg.dp_replicate > 1 || plan.deg.ep > 1;
  const int64_t cap = std::min(want, others && L.ranks >= 4 ? L.ranks / 2 : L.ranks);
  std::vector<std::pair<std::string, int64_t>> sizes;
  if (proxy != nullptr) sizes = TpSplitSizes(*proxy);
  std::string blocked;  // the first proxy size that ruled out a larger tp
  for (int64_t t = cap; t >= 2 && L.tp == 1; --t) {
    if (L.ranks % t != 0) continue;
    std::string bad;
    for (const auto& [name, v] : sizes)
      if (v % t != 0 && bad.empty()) bad = name + "=" + Str(v);
    if (bad.empty())
      L.tp = t;
    else if (blocked.empty())
      blocked = "tp=" + Str(t) + " does not divide the proxy's " + bad;
  }
  std::string reason;  // empty: scaled down to the probe's ranks with its structure kept
  if (L.tp != want && !blocked.empty())
    reason = blocked + ": runs tp=" + Str(L.tp);
  else if (L.tp == 1)
    reason = "no tp >= 2 divides ranks=" + Str(L.ranks);
  L.factors.push_back({"tp", Str(want), Str(L.tp), reason});
}

// Step 2: replicas x shards. Pure data parallelism stays pure (fsdp = 1); HSDP keeps 2 replicas
// when there are at least 4 ranks; otherwise every rank is a shard.
void DataParallel(const Plan& plan, ProbeLayout& L) {
  const auto& d = plan.deg;
  const int64_t D = L.ranks / L.tp;  // data-parallel ranks
  if (d.dp_replicate > 1 && d.dp_shard == 1) {
    L.replicas = D;
  } else if (d.dp_replicate > 1) {
    L.replicas = D >= 4 && D % 2 == 0 ? 2 : 1;
  } else {
    L.replicas = 1;
  }
  L.fsdp = D / L.replicas;
  const bool hsdp_lost = d.dp_replicate > 1 && d.dp_shard > 1 && L.replicas == 1;
  L.factors.push_back({"replicas", Str(d.dp_replicate), Str(L.replicas),
                       hsdp_lost ? "HSDP replicas x shards need at least 4 probe ranks: every rank is a shard" : ""});
  const bool zero_lt3 = L.fsdp > 1 && d.dp_shard > 1 && plan.zero_stage < 3;
  L.factors.push_back({"fsdp", Str(d.dp_shard), Str(L.fsdp),
                       zero_lt3 ? "the probe shards weights, gradients and optimizer state (FSDP); the plan has zero_stage=" +
                                      Str(plan.zero_stage)
                                : ""});
}

// Step 3: expert parallelism.
void ExpertParallel(const Plan& plan, int64_t proxy_experts, ProbeLayout& L) {
  const int64_t want = plan.deg.ep;
  if (want <= 1 || proxy_experts <= 0) {
    L.ep = 1;
    L.factors.push_back({"ep", Str(want), "1", want > 1 ? "the proxy has no routed experts" : ""});
    return;
  }
  L.ep = LargestCommonDivisorUpTo(L.ranks / L.tp, proxy_experts, want);
  L.factors.push_back({"ep", Str(want), Str(L.ep),
                       L.ep > 1 ? ""
                                : "no ep >= 2 divides both the data-parallel ranks=" + Str(L.ranks / L.tp) +
                                      " and the proxy's experts=" + Str(proxy_experts)});
}

// Step 4: micro-batches.
void MicroBatches(const Plan& plan, int64_t sequences_per_rank, ProbeLayout& L) {
  const int64_t want = std::max<int64_t>(1, plan.num_micro_batches);
  const int64_t cap = std::min(sequences_per_rank, kMaxProbeMicroSteps);
  int64_t m = 1;
  for (int64_t c = std::min(want, cap); c >= 1; --c)
    if (sequences_per_rank % c == 0) {
      m = c;
      break;
    }
  L.micro_steps = m;
  L.micro_batch = sequences_per_rank / m;
  std::string reason;
  if (m != want && want > kMaxProbeMicroSteps && sequences_per_rank >= kMaxProbeMicroSteps)
    reason = "capped at " + Str(kMaxProbeMicroSteps) +
             " micro-steps: they run the accumulation path; each more is a whole forward/backward";
  else if (m != want)
    reason = "capped by the " + Str(sequences_per_rank) + " sequences each rank trains on per step";
  L.factors.push_back({"micro_batches", Str(want), Str(m), reason});
}

}  // namespace

nlohmann::json ProbeLayout::ToJson() const {
  nlohmann::json rc = nlohmann::json::object();
  for (const auto& [kind, r] : recompute) rc[kind] = RecomputeName(r);
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : factors)
    f.push_back({{"factor", x.factor}, {"plan", x.plan}, {"probe", x.probe}, {"kept", x.reason.empty()},
                 {"reason", x.reason}});
  return {{"ranks", ranks},
          {"tp", tp},
          {"ep", ep},
          {"fsdp", fsdp},
          {"replicas", replicas},
          {"micro_steps", micro_steps},
          {"micro_batch", micro_batch},
          {"recompute", rc},
          {"factors", f}};
}

Expected<ProbeLayout> ApplyPlanToProbe(const Plan& plan, int64_t ranks, int64_t sequences_per_rank,
                                       int64_t proxy_experts, const ProxySpec* proxy) {
  if (ranks < 1) return BadInput("probe settings", "ranks", "must be >= 1", Str(ranks));
  if (sequences_per_rank < 1)
    return BadInput("probe settings", "micro_batch", "sequences per rank must be >= 1", Str(sequences_per_rank));
  ProbeLayout L;
  L.ranks = ranks;
  Unsupported(plan, L);
  TensorParallel(plan, proxy, L);
  DataParallel(plan, L);
  ExpertParallel(plan, proxy_experts, L);
  MicroBatches(plan, sequences_per_rank * L.tp, L);  // a TP group trains its ranks' sequences together
  RecomputePolicies(plan, L);
  return L;
}

}  // namespace onboard::agent
