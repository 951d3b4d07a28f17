// SearchPlans: enumerate FSDP/HSDP x CP x TP x PP x EP x expert TP x micro-batch x interleave x
// optimizer sharding (FSDP, distributed optimizer) x pipeline schedule (1F1B, DualPipe) layouts, reject the
// invalid ones with a reason, choose recompute per block kind greedily (least extra time per byte saved until
// the plan fits), prune on memory before costing time, cost the rest, keep the best, the runners-up, the
// time/memory Pareto front and a grouped summary of rejections. Work is split over req.threads std::threads
// by layout index. Units: seconds, bytes.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include "search/cost_model.h"
#include "search/plan_explain.h"

namespace onboard {
namespace {

std::vector<int64_t> Divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      out.push_back(i);
      if (i != n / i) out.push_back(n / i);
    }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Gib(double bytes) {
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << bytes / 1073741824.0;
  return os.str();
}

struct Layout {
  int64_t tp, pp, dp_rep, dp_shard, ep, cp, etp;
};

// Context parallelism enters the space only where a rank would still hold a long chunk: below
// this many tokens per CP rank attention no longer dominates and the KV exchange cannot hide.
constexpr int64_t kMinTokensPerCpRank = 4096;
// When one sequence alone puts this many tokens on a device (seq/cp), its GEMMs already run at full
// efficiency (eff = max/(1 + d0/m + ...): d0/m < 0.4%), so a larger micro-batch only adds memory and
// pipeline bubble: long-context plans keep micro_batch = 1.
constexpr int64_t kSaturatedTokensPerDevice = 16384;

// Rejections grouped by reason. The example kept per reason is the one with the lowest score
// (memory: the layout closest to fitting), ties broken by text, so results do not depend on threads.
struct Rejects {
  std::map<std::string, RejectGroup> groups;
  std::map<std::string, double> score;
  void Add(const std::string& reason, const std::string& example, double sc = 0) {
    RejectGroup& g = groups[reason];
    auto it = score.find(reason);
    if (g.count == 0 || sc < it->second || (sc == it->second && example < g.example)) {
      g.reason = reason;
      g.example = example;
      score[reason] = sc;
    }
    ++g.count;
  }
  void Merge(const Rejects& o) {
    for (const auto& [k, g] : o.groups) {
      const int64_t before = groups.count(k) ? groups[k].count : 0;
      Add(k, g.example, o.score.at(k));
      groups[k].count = before + g.count;
    }
  }
};

struct Worker {
  std::vector<PlanCandidate> fitting;   // every costed plan that fits
  PlanCandidate closest;                // least memory over capacity among non-fitting
  double closest_over = 1e300;
  std::string closest_msg;
  Rejects rejects;
  int64_t enumerated = 0, evaluated = 0;
};

std::vector<Recompute> Levels(const CostContext& c, BlockKind kind) {
  bool selective = false;
  for (const LayerProfile& lp : c.prof.layers)
    if (lp.mixer_kind == kind && (lp.act_mixer_selective > 0 || lp.scores_bytes_per_key > 0)) selective = true;
  if (selective) return {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  return {Recompute::kNone, Recompute::kFull};
}

// The recompute levels the search may give each block kind (indexed like ModelProfile::kinds),
// weakest first; one level where the request forces a policy. The same for every layout.
std::vector<std::vector<Recompute>> AllowedLevels(const CostContext& c) {
  std::vector<std::vector<Recompute>> levels;
  const std::optional<Recompute>& forced = c.req->constraints.recompute;
  for (BlockKind k : c.prof.kinds) {
    std::vector<Recompute> lv = Levels(c, k);
    if (forced) {
      const Recompute r = *forced;
      lv = {std::find(lv.begin(), lv.end(), r) != lv.end() ? r : (r == Recompute::kSelective ? lv.front() : lv.back())};
    }
    levels.push_back(lv);
  }
  return levels;
}

// Greedy recompute: escalate the kind that saves the most bytes per extra second until it fits.
// Returns false when even the strongest allowed policy everywhere does not fit (plan then holds it).
// `levels` = AllowedLevels(c); kinds are visited in ModelProfile::kinds order (ties: the first).
bool ChooseRecompute(const CostContext& c, const std::vector<std::vector<Recompute>>& levels, Plan* plan,
                     MemoryBreakdown* mem, Worker* w) {
  const auto& kinds = c.prof.kinds;
  const size_t K = kinds.size();
  std::vector<size_t> at(K, 0);
  // Step 1: prune on memory before costing time: the strongest policy must fit at all.
  for (size_t k = 0; k < K; ++k) plan->recompute[BlockKindName(kinds[k])] = levels[k].back();
  const auto starts = PlanStageStarts(c, *plan);
  *mem = EstimateMemory(c, *plan, starts, nullptr);
  ++w->enumerated;
  if (mem->total > mem->usable()) return false;
  for (size_t k = 0; k < K; ++k) plan->recompute[BlockKindName(kinds[k])] = levels[k][0];
  *mem = EstimateMemory(c, *plan, starts, nullptr);
  ++w->enumerated;
  if (mem->total <= mem->usable()) return true;
  // Step 2: extra forward seconds of every (kind, level), computed once.
  std::vector<std::vector<double>> extra(K);
  for (size_t k = 0; k < K; ++k)
    for (Recompute r : levels[k]) extra[k].push_back(RecomputeSeconds(c, *plan, kinds[k], r));
  // Step 3: escalate greedily.
  while (mem->total > mem->usable()) {
    size_t best = K;
    double best_ratio = -1;
    MemoryBreakdown best_mem;
    for (size_t k = 0; k < K; ++k) {
      if (at[k] + 1 >= levels[k].size()) continue;
      Plan q = *plan;
      q.recompute[BlockKindName(kinds[k])] = levels[k][at[k] + 1];
      const MemoryBreakdown m2 = EstimateMemory(c, q, starts, nullptr);
      ++w->enumerated;
      const double saved = mem->total - m2.total;
      if (saved <= 0) continue;
      const double cost = std::max(1e-9, extra[k][at[k] + 1] - extra[k][at[k]]);
      if (saved / cost > best_ratio) {
        best_ratio = saved / cost;
        best = k;
        best_mem = m2;
      }
    }
    if (best == K) return false;
    ++at[best];
    plan->recompute[BlockKindName(kinds[best])] = levels[best][at[best]];
    *mem = best_mem;
  }
  return true;
}

// Step 2 of a layout: one plan checked, fitted by recompute, then costed (or kept as the closest
// to fitting).
void TryPlan(const CostContext& c, const std::vector<std::vector<Recompute>>& levels, Plan p, Worker* w) {
  Status st = CheckPlanAgainstModel(c, p);
  if (!st.ok()) {
    w->rejects.Add("invalid", st.message());
    return;
  }
  MemoryBreakdown mem;
  if (!ChooseRecompute(c, levels, &p, &mem, w)) {
    const double over = mem.total - mem.usable();
    const std::string msg = PlanSummary(p) + ": needs " + Gib(mem.total) + " GiB per device, has " +
                            Gib(mem.usable()) + " (" + Gib(mem.capacity) + " less " + Gib(mem.margin) +
                            " margin)";
    w->rejects.Add("memory", msg, over);
    if (over < w->closest_over || (over == w->closest_over && msg < w->closest_msg)) {
      w->closest_over = over;
      w->closest_msg = msg;
      w->closest.plan = p;
    }
    return;
  }
  PlanCandidate cand{p, EstimatePlan(c, p)};
  ++w->evaluated;
  w->fitting.push_back(std::move(cand));
}

// With constraints.schedule "any" or "dualpipe", DualPipe is tried where ValidatePlan lets it run (even
// pp, interleave 1, at least 2*pp micro-batches); plans it cannot run are not counted as rejections.
bool DualPipeCanRun(const Plan& p) {
  return p.deg.pp >= 2 && p.deg.pp % 2 == 0 && p.deg.interleave == 1 && p.num_micro_batches >= 2 * p.deg.pp;
}

// The optimizer shardings tried on a layout: FSDP (zero 3) and, where more than one data rank holds the
// same weights (dp_shard x cp; Megatron shards its distributed optimizer over the DP x CP group), the
// distributed optimizer (zero 1); a fixed constraints.zero_stage keeps that one.
std::vector<int64_t> ZeroStages(const PlanConstraints& cons, const Layout& lay) {
  if (cons.zero_stage > 0) return {cons.zero_stage};
  if (lay.dp_shard * lay.cp > 1) return {3, 1};
  return {3};
}

void EvaluateLayout(const CostContext& c, const std::vector<std::vector<Recompute>>& levels,
                    const Layout& lay, Worker* w) {
  const PlanRequest& req = *c.req;
  const PlanConstraints& cons = req.constraints;
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  const int64_t dp = lay.dp_rep * lay.dp_shard;
  std::vector<int64_t> mbs = {1, 2, 4, 8};
  if (cons.micro_batch > 0) mbs = {cons.micro_batch};
  const int64_t target = req.global_batch > 0 ? req.global_batch
                                              : std::max<int64_t>(1, (int64_t{4} << 20) / std::max<int64_t>(req.seq, 1));
  for (int64_t mb : mbs) {
    if (cons.micro_batch == 0 && mb > 1 && req.seq / lay.cp >= kSaturatedTokensPerDevice) break;
    int64_t gb = req.global_batch;
    if (gb > 0 && gb % (dp * mb) != 0) {
      w->rejects.Add("batch_divisibility", "global_batch=" + std::to_string(gb) + " is not a multiple of dp*micro_batch=" +
                                               std::to_string(dp) + "*" + std::to_string(mb));
      continue;
    }
    if (gb == 0) gb = (target + dp * mb - 1) / (dp * mb) * (dp * mb);
    const int64_t m = gb / (dp * mb);
    std::vector<int64_t> vs = {1};
    if (lay.pp > 1) vs = {1, 2, 3, 4};
    if (cons.interleave > 0) vs = {cons.interleave};
    for (int64_t v : vs) {
      if (v > 1 && m % lay.pp != 0) {
        w->rejects.Add("interleave_batch", "interleave=" + std::to_string(v) + " needs micro-batches=" +
                                               std::to_string(m) + " divisible by pp=" + std::to_string(lay.pp));
        continue;
      }
      if (lay.pp * v > L) {
        w->rejects.Add("interleave_layers", "pp*interleave=" + std::to_string(lay.pp) + "*" + std::to_string(v) +
                                                " exceeds layers=" + std::to_string(L));
        continue;
      }
      Plan p;
      p.deg = {lay.dp_rep, lay.dp_shard, lay.tp, lay.pp, lay.ep, 1, v, lay.tp > 1, lay.cp};
      p.deg.etp = lay.etp;
      p.deg.expert_fsdp = (lay.dp_shard * lay.cp * lay.tp) / (lay.ep * lay.etp);
      p.micro_batch = mb;
      p.num_micro_batches = m;
      p.seq = req.seq;
      p.global_batch = gb;
      p.mode = req.mode;
      p.lora_rank = req.mode == FinetuneMode::kLoRA ? req.lora_rank : 0;
      p.base_dtype = req.base_dtype;
      p.compute_dtype = req.compute_dtype;
      p.bf16_layers_first = req.bf16_layers_first;
      p.bf16_layers_last = req.bf16_layers_last;
      p.ep_dispatcher = req.ep_dispatcher;
      for (int64_t zero : ZeroStages(cons, lay)) {
        p.zero_stage = zero;
        p.fsdp_pipelining = zero == 3 ? req.fsdp_pipelining : FsdpPipelining::kPerMicroBatch;
        p.pipeline_schedule = PipelineSchedule::k1F1B;
        if (cons.schedule != "dualpipe") TryPlan(c, levels, p, w);
        p.pipeline_schedule = PipelineSchedule::kDualPipe;
        if (cons.schedule != "1f1b" && DualPipeCanRun(p)) TryPlan(c, levels, p, w);  // "any" or "dualpipe"
      }
    }
  }
}

// The widths expert TP must divide: the gcd of every routed expert's FFN width (0: no routed experts).
int64_t ExpertWidthGcd(const ModelProfile& prof) {
  int64_t g = 0;
  for (const LayerProfile& lp : prof.layers)
    if (lp.top_k > 0 && lp.expert_inter > 0) g = std::gcd(g, static_cast<int64_t>(lp.expert_inter));
  return g;
}

std::vector<Layout> EnumerateLayouts(const CostContext& c, Rejects* rej) {
  const PlanRequest& req = *c.req;
  const PlanConstraints& cons = req.constraints;
  const int64_t world = req.topology.num_devices;
  const int64_t L = static_cast<int64_t>(c.prof.layers.size());
  const int64_t E = c.prof.experts;
  const int64_t expert_width = ExpertWidthGcd(c.prof);
  const int64_t max_tp = cons.max_tp > 0 ? cons.max_tp : std::min(world, req.topology.tiers.front().group_size);
  std::vector<Layout> out;
  // Fixed degrees that cannot divide the device count leave nothing to search: say so.
  for (auto [name, v] : {std::pair<const char*, int64_t>{"tp", cons.tp}, {"pp", cons.pp}, {"ep", cons.ep},
                         {"dp_shard", cons.dp_shard}, {"dp_replicate", cons.dp_replicate}})
    if (v > 0 && world % v != 0)
      rej->Add("constraint", std::string(name) + "=" + std::to_string(v) + " must divide the device count " +
                                 std::to_string(world));
  for (int64_t tp : Divisors(world)) {
    if (cons.tp > 0 && tp != cons.tp) continue;
    if (tp > max_tp) {
      rej->Add("tp_tier", "tp=" + std::to_string(tp) + " exceeds the fastest tier (" + req.topology.tiers.front().name +
                              ", " + std::to_string(max_tp) + " devices)");
      continue;
    }
    if (c.prof.min_heads % tp != 0) {
      rej->Add("tp_heads", "tp=" + std::to_string(tp) + " must divide attention heads=" + std::to_string(c.prof.min_heads));
      continue;
    }
    for (int64_t cp : Divisors(world / tp)) {
    if (cons.cp > 0 && cp != cons.cp) continue;
    if (cp > 1 && (req.seq % (2 * cp) != 0 || req.seq / cp < kMinTokensPerCpRank)) {
      rej->Add("cp_seq", "cp=" + std::to_string(cp) + " needs seq=" + std::to_string(req.seq) + " divisible by 2*cp and >= " +
                             std::to_string(kMinTokensPerCpRank) + " tokens per CP rank");
      continue;
    }
    for (int64_t pp : Divisors(world / (tp * cp))) {
      if (cons.pp > 0 && pp != cons.pp) continue;
      if (pp > L) {
        rej->Add("pp_layers", "pp=" + std::to_string(pp) + " exceeds layers=" + std::to_string(L));
        continue;
      }
      const int64_t dp = world / (tp * cp * pp);
      for (int64_t rep : Divisors(dp)) {
        if (cons.dp_replicate > 0 && rep != cons.dp_replicate) continue;
        const int64_t shard = dp / rep;
        if (cons.dp_shard > 0 && shard != cons.dp_shard) continue;
        const std::vector<int64_t> eps = E > 0 ? Divisors(shard * cp * tp) : std::vector<int64_t>{1};
        for (int64_t ep : eps) {
          if (cons.ep > 0 && ep != cons.ep) continue;
          if (E > 0 && E % ep != 0) {
            rej->Add("ep_experts", "ep=" + std::to_string(ep) + " must divide experts=" + std::to_string(E));
            continue;
          }
          // Expert TP (etp x ep x expert_fsdp = dp_shard*cp*tp): the search tries Megatron-Core's two
          // settings, etp = 1 and etp = tp (its default when --expert-tensor-parallel-size is unset), so
          // the ETP group (an all-gather / reduce-scatter in every MoE layer) spans the TP group, inside
          // the fastest tier; a fixed constraints.etp may be any divisor. etp must divide the expert width.
          std::vector<int64_t> etps = {1};
          if (cons.etp > 0)
            etps = {cons.etp};
          else if (E > 0 && tp > 1)
            etps = {1, tp};
          for (int64_t etp : etps) {
            if ((shard * cp * tp) % (ep * etp) != 0) {
              rej->Add("etp_ranks", "ep*etp=" + std::to_string(ep) + "*" + std::to_string(etp) +
                                        " must divide dp_shard*cp*tp=" + std::to_string(shard * cp * tp));
              continue;
            }
            if (etp > 1 && expert_width % etp != 0) {
              rej->Add("etp_width", "etp=" + std::to_string(etp) + " must divide the expert FFN width " +
                                        std::to_string(expert_width));
              continue;
            }
            out.push_back({tp, pp, rep, shard, ep, cp, etp});
          }
        }
      }
    }
    }
  }
  return out;
}

// Pareto front over fitting plans: no other plan is both faster and smaller.
std::vector<PlanCandidate> Pareto(std::vector<PlanCandidate> all) {
  std::sort(all.begin(), all.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.estimate.memory.total != b.estimate.memory.total) return a.estimate.memory.total < b.estimate.memory.total;
    if (a.estimate.step_s != b.estimate.step_s) return a.estimate.step_s < b.estimate.step_s;
    return PlanSummary(a.plan) < PlanSummary(b.plan);
  });
  std::vector<PlanCandidate> front;
  double best_time = 1e300;
  for (auto& c : all)
    if (c.estimate.step_s < best_time * (1 - 1e-9)) {
      best_time = c.estimate.step_s;
      front.push_back(std::move(c));
    }
  return front;
}

}  // namespace

Expected<SearchResult> SearchPlans(const PlanRequest& req) {
  ONBOARD_RETURN_IF_ERROR(req.Validate());
  const auto t0 = std::chrono::steady_clock::now();
  const CostContext c = MakeCostContext(req);
  SearchResult r;
  Rejects rej;
  const std::vector<Layout> layouts = EnumerateLayouts(c, &rej);
  const std::vector<std::vector<Recompute>> levels = AllowedLevels(c);
  // Step 1: cost layouts on worker threads (std::thread), each with its own results.
  const int nthreads = std::max(1, std::min<int>(req.threads, static_cast<int>(layouts.size())));
  std::vector<Worker> workers(nthreads);
  std::atomic<size_t> next{0};
  auto run = [&](Worker* w) {
    for (size_t i = next++; i < layouts.size(); i = next++) EvaluateLayout(c, levels, layouts[i], w);
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < nthreads; ++i) pool.emplace_back(run, &workers[i]);
  if (!layouts.empty()) run(&workers[0]);
  for (auto& th : pool) th.join();
  // Step 2: merge.
  std::vector<PlanCandidate> fitting;
  Worker* closest = nullptr;
  for (auto& w : workers) {
    r.candidates_enumerated += w.enumerated;
    r.candidates_evaluated += w.evaluated;
    rej.Merge(w.rejects);
    for (auto& f : w.fitting) fitting.push_back(std::move(f));
    if (w.closest_over < 1e300 &&
        (!closest || w.closest_over < closest->closest_over ||
         (w.closest_over == closest->closest_over && w.closest_msg < closest->closest_msg)))
      closest = &w;
  }
  for (const auto& [k, g] : rej.groups) r.rejected.push_back(g);
  std::sort(r.rejected.begin(), r.rejected.end(),
            [](const RejectGroup& a, const RejectGroup& b) { return a.count > b.count || (a.count == b.count && a.reason < b.reason); });
  // Step 3: best, runners-up with distinct degrees, Pareto front.
  auto faster = [](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.estimate.step_s != b.estimate.step_s) return a.estimate.step_s < b.estimate.step_s;
    if (a.estimate.memory.total != b.estimate.memory.total) return a.estimate.memory.total < b.estimate.memory.total;
    return PlanSummary(a.plan) < PlanSummary(b.plan);
  };
  std::sort(fitting.begin(), fitting.end(), faster);
  if (!fitting.empty()) {
    r.feasible = true;
    r.best = fitting.front();
    std::vector<std::string> seen{PlanSummary(r.best.plan).substr(0, PlanSummary(r.best.plan).find(" mb="))};
    for (size_t i = 1; i < fitting.size() && static_cast<int>(r.runners_up.size()) < req.top_n; ++i) {
      const std::string s = PlanSummary(fitting[i].plan);
      const std::string key = s.substr(0, s.find(" mb="));
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      r.runners_up.push_back(fitting[i]);
    }
    // Record the balanced layer split points the estimate used (exports and JSON show them).
    auto fill = [&c](PlanCandidate& pc) {
      if (pc.plan.deg.pp > 1 && pc.plan.stage_layer_starts.empty()) pc.plan.stage_layer_starts = PlanStageStarts(c, pc.plan);
    };
    fill(r.best);
    for (auto& ru : r.runners_up) fill(ru);
    r.explanation = ExplainBest(c, r.best, fitting);
    r.pareto = Pareto(std::move(fitting));
  } else if (closest) {
    r.best = closest->closest;
    r.best.estimate = EstimatePlan(c, r.best.plan);
    ++r.candidates_evaluated;
    r.explanation = ExplainInfeasible(c, r.best);
  } else {
    r.explanation.push_back("no layout of " + std::to_string(req.topology.num_devices) +
                            " devices is valid for this model (see rejected)");
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Expected<PlanEstimate> EvaluatePlan(const PlanRequest& req, const Plan& plan) {
  ONBOARD_RETURN_IF_ERROR(req.Validate());
  const CostContext c = MakeCostContext(req);
  ONBOARD_RETURN_IF_ERROR(CheckPlanAgainstModel(c, plan));
  return EstimatePlan(c, plan);
}

}  // namespace onboard
