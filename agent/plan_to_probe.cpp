// ApplyPlanToProbe (see plan_to_probe.h): the plan's structure scaled down to the probe's ranks.
#include "agent/plan_to_probe.h"

#include <algorithm>

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
  if (d.tp > 1)
    L.factors.push_back({"tp", Str(d.tp), "1", "the probe has no tensor-parallel linears yet: runs tp=1"});
  if (d.sequence_parallel)
    L.factors.push_back({"sequence_parallel", "on", "off", "needs tensor parallelism, which the probe lacks"});
  if (d.pp > 1)
    L.factors.push_back({"pp", Str(d.pp), "1", "the probe has no pipeline schedule yet: runs every layer on every rank"});
  if (d.interleave > 1)
    L.factors.push_back({"interleave", Str(d.interleave), "1", "needs pipeline parallelism, which the probe lacks"});
  const std::string rc = RecomputeSummary(plan);
  if (rc != "none")
    L.factors.push_back({"recompute", rc, "none", "the probe keeps every activation (no checkpointing yet)"});
}

// Step 2: replicas x shards. Pure data parallelism stays pure (fsdp = 1); HSDP keeps 2 replicas
// when there are at least 4 ranks; otherwise every rank is a shard.
void DataParallel(const Plan& plan, ProbeLayout& L) {
  const auto& d = plan.deg;
  if (d.dp_replicate > 1 && d.dp_shard == 1) {
    L.replicas = L.ranks;
  } else if (d.dp_replicate > 1) {
    L.replicas = L.ranks >= 4 && L.ranks % 2 == 0 ? 2 : 1;
  } else {
    L.replicas = 1;
  }
  L.fsdp = L.ranks / L.replicas;
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
  L.ep = LargestCommonDivisorUpTo(L.ranks, proxy_experts, want);
  L.factors.push_back({"ep", Str(want), Str(L.ep),
                       L.ep > 1 ? "" : "no ep >= 2 divides both ranks=" + Str(L.ranks) +
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
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : factors)
    f.push_back({{"factor", x.factor}, {"plan", x.plan}, {"probe", x.probe}, {"kept", x.reason.empty()},
                 {"reason", x.reason}});
  return {{"ranks", ranks},           {"ep", ep},
          {"fsdp", fsdp},             {"replicas", replicas},
          {"micro_steps", micro_steps}, {"micro_batch", micro_batch},
          {"factors", f}};
}

Expected<ProbeLayout> ApplyPlanToProbe(const Plan& plan, int64_t ranks, int64_t sequences_per_rank,
                                       int64_t proxy_experts) {
  if (ranks < 1) return BadInput("probe settings", "ranks", "must be >= 1", Str(ranks));
  if (sequences_per_rank < 1)
    return BadInput("probe settings", "micro_batch", "sequences per rank must be >= 1", Str(sequences_per_rank));
  ProbeLayout L;
  L.ranks = ranks;
  Unsupported(plan, L);
  DataParallel(plan, L);
  ExpertParallel(plan, proxy_experts, L);
  MicroBatches(plan, sequences_per_rank, L);
  return L;
}

}  // namespace onboard::agent
