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

// Step 1d (after tp): sequence parallelism and expert TP need the probe's tp > 1. Expert TP runs
// as etp = tp (the probe's one expert-TP layout) when the plan splits its experts at all.
void TpOptions(const Plan& plan, ProbeLayout& L) {
  const auto& d = plan.deg;
  if (d.sequence_parallel) {
    L.sequence_parallel = L.tp > 1;
    L.factors.push_back(
        {"sequence_parallel", "on", L.sequence_parallel ? "on" : "off",
         L.sequence_parallel ? "" : "the probe runs tp=1: nothing to split the sequence over"});
  }
  if (d.etp > 1) {
    L.etp = L.tp > 1 ? L.tp : 1;
    L.factors.push_back({"etp", Str(d.etp), Str(L.etp),
                         L.etp == d.etp ? ""
                         : L.tp > 1
                             ? "the probe splits experts over its whole TP group (etp = tp=" + Str(L.tp) + ")"
                             : "the probe runs tp=1: experts whole"});
  }
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

// Steps 1b, 1c: the most ranks `n` a model-parallel factor (tp, then pp) may take: at most n/2
// when the plan has data or expert parallelism too and n >= 4 (so that >= 2 data ranks remain).
int64_t ModelParallelCap(const Plan& plan, int64_t want, int64_t n) {
  const bool others = plan.deg.dp_shard * plan.deg.dp_replicate > 1 || plan.deg.ep > 1;
  return std::min(want, others && n >= 4 ? n / 2 : n);
}

// Step 1b: tensor parallelism, scaled down: the largest t <= the plan's tp that divides the ranks
// and every proxy size TP splits (heads, MLP widths, vocab: backends/probe_layout_check.h), capped
// by ModelParallelCap.
void TensorParallel(const Plan& plan, const ProxySpec* proxy, ProbeLayout& L) {
  const int64_t want = plan.deg.tp;
  L.tp = 1;
  if (want <= 1) return;
  const int64_t cap = ModelParallelCap(plan, want, L.ranks);
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

// Step 1c helper: the plan's split points (model layers) scaled to the proxy's layers; empty when
// they cannot be kept (then *why says so).
std::vector<int64_t> ScaleSplit(const Plan& plan, int64_t chunks, int64_t proxy_layers, int64_t model_layers,
                                std::string* why) {
  const std::vector<int64_t>& s = plan.stage_layer_starts;
  if (s.empty()) return {};
  if (static_cast<int64_t>(s.size()) != chunks || model_layers <= 0) {
    *why = "the plan's " + Str(s.size()) + " split points do not map onto the probe's " + Str(chunks) +
           " model chunks" + (model_layers <= 0 ? " (model layers unknown)" : "") + ": balanced split";
    return {};
  }
  std::vector<int64_t> out;
  for (int64_t x : s) out.push_back(x * proxy_layers / model_layers);  // floor: keeps out[0] = 0
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i] <= out[i - 1]) {
      *why = "the plan's split points merge on the proxy's " + Str(proxy_layers) + " layers: balanced split";
      return {};
    }
  return out;
}

// Step 1c: pipeline stages over the ranks / tp left by Step 1b (pp outermost in the probe's rank
// order, backends/probe.h), interleave and split points.
void Pipeline(const Plan& plan, const ProxySpec* proxy, int64_t model_layers, ProbeLayout& L) {
  const int64_t want = plan.deg.pp, want_v = std::max<int64_t>(1, plan.deg.interleave);
  if (want <= 1) return;
  const int64_t proxy_layers = proxy != nullptr ? proxy->num_layers() : 0;
  if (proxy_layers <= 0) {
    L.factors.push_back({"pp", Str(want), "1", "the proxy was not given: runs every layer on every rank"});
    return;
  }
  const int64_t n = L.ranks / L.tp;  // ranks left by tensor parallelism
  for (int64_t p = std::min(ModelParallelCap(plan, want, n), proxy_layers); p >= 2 && L.pp == 1; --p)
    if (n % p == 0) L.pp = p;
  const std::string ns = L.tp > 1 ? "ranks/tp=" + Str(n) : "ranks=" + Str(n);
  const std::string rule = " that divides " + ns +
                           ", leaves >= 2 data ranks when the plan has data or expert "
                           "parallelism, and is <= the proxy's layers=" +
                           Str(proxy_layers);
  L.factors.push_back({"pp", Str(want), Str(L.pp),
                       L.pp == want ? ""
                       : L.pp > 1   ? "the largest pp <= the plan's" + rule
                                    : "no pp >= 2" + rule});
  if (L.pp == 1) return;
  L.interleave = std::max<int64_t>(1, std::min(want_v, proxy_layers / L.pp));
  if (want_v > 1)
    L.factors.push_back(
        {"interleave", Str(want_v), Str(L.interleave),
         L.interleave == want_v ? "" : "pp*interleave must be <= the proxy's layers=" + Str(proxy_layers)});
  std::string why;
  if (L.pp == want && L.interleave == want_v)
    L.stage_layer_starts = ScaleSplit(plan, L.pp * L.interleave, proxy_layers, model_layers, &why);
  else if (!plan.stage_layer_starts.empty())
    why = "the plan's split points are for pp*interleave=" + Str(want * want_v) + " chunks: balanced split";
  if (!plan.stage_layer_starts.empty())
    L.factors.push_back({"stage_split", Str(plan.stage_layer_starts.size()) + " chunks",
                         L.stage_layer_starts.empty() ? "balanced" : "scaled", why});
}

// After Step 4: interleaved 1F1B needs micro-batches % pp == 0.
void InterleaveNeedsMicroBatches(ProbeLayout& L) {
  if (L.interleave <= 1 || L.micro_steps % L.pp == 0) return;
  for (auto& f : L.factors)
    if (f.factor == "interleave") {
      f.probe = "1";
      f.reason =
          "interleaved 1F1B needs micro-batches (" + Str(L.micro_steps) + ") divisible by pp=" + Str(L.pp);
    }
  L.interleave = 1;
  if (L.stage_layer_starts.size() != static_cast<size_t>(L.pp)) L.stage_layer_starts.clear();
}

// Step 2: replicas x shards. Pure data parallelism stays pure (fsdp = 1); HSDP keeps 2 replicas
// when there are at least 4 ranks; otherwise every rank is a shard.
void DataParallel(const Plan& plan, ProbeLayout& L) {
  const auto& d = plan.deg;
  const int64_t D = L.ranks / (L.tp * L.pp);  // data ranks
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
  const int64_t D = L.ranks / (L.tp * L.pp);  // data ranks
  L.ep = LargestCommonDivisorUpTo(D, proxy_experts, want);
  L.factors.push_back({"ep", Str(want), Str(L.ep),
                       L.ep > 1 ? ""
                                : "no ep >= 2 divides both the data ranks=" + Str(D) +
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
          {"sequence_parallel", sequence_parallel},
          {"etp", etp},
          {"ep", ep},
          {"fsdp", fsdp},
          {"replicas", replicas},
          {"micro_steps", micro_steps},
          {"micro_batch", micro_batch},
          {"pp", pp},
          {"interleave", interleave},
          {"stage_layer_starts", stage_layer_starts},
          {"recompute", rc},
          {"factors", f}};
}

Expected<ProbeLayout> ApplyPlanToProbe(const Plan& plan, int64_t ranks, int64_t sequences_per_rank,
                                       int64_t proxy_experts, const ProxySpec* proxy, int64_t model_layers) {
  if (ranks < 1) return BadInput("probe settings", "ranks", "must be >= 1", Str(ranks));
  if (sequences_per_rank < 1)
    return BadInput("probe settings", "micro_batch", "sequences per rank must be >= 1", Str(sequences_per_rank));
  ProbeLayout L;
  L.ranks = ranks;
  TensorParallel(plan, proxy, L);
  TpOptions(plan, L);
  Pipeline(plan, proxy, model_layers, L);
  DataParallel(plan, L);
  ExpertParallel(plan, proxy_experts, L);
  // a data rank (a TP group on each stage) trains its tp * pp ranks' sequences
  MicroBatches(plan, sequences_per_rank * L.tp * L.pp, L);
  InterleaveNeedsMicroBatches(L);
  RecomputePolicies(plan, L);
  return L;
}

}  // namespace onboard::agent
