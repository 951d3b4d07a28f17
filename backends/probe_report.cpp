// Merge of the ranks' JSON, validator verdicts and the cost-model comparison (probe_report.h).
#include "backends/probe_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "backends/probe_data.h"
#include "backends/probe_step_series.h"
#include "search/planner.h"
#include "validators/convergence.h"
#include "validators/learning_verdict.h"
#include "validators/probe_observations.h"

namespace onboard::backends {
namespace {

using nlohmann::json;

double NumOr(const json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

std::string Fmt(double v, int precision = 3) {
  std::ostringstream os;
  os.precision(precision);
  os << v;
  return os.str();
}

}  // namespace

void MergeRankResults(const std::vector<json>& ranks, ProbeResult* r) {
  if (ranks.empty()) return;
  const json& r0 = ranks[0];
  r->backend = r0.value("backend", "");
  r->torch_version = r0.value("torch", "");
  if (r0.contains("params")) {
    const json& p = r0["params"];
    r->params = {p.value("total", int64_t{0}), p.value("expert", int64_t{0}),
                 p.value("lora", int64_t{0}), p.value("trainable", int64_t{0})};
  }
  // LoRA base phase (rank JSON "base_phase"): reported beside the curve, never in it.
  if (r0.contains("base_phase") && !r0["base_phase"]["steps"].empty()) {
    const json& bp = r0["base_phase"];
    const json& bs = bp["steps"];
    auto mean3 = [&](bool last) {
      double sum = 0;
      const size_t n = std::min<size_t>(3, bs.size());
      for (size_t i = 0; i < n; ++i) sum += NumOr(bs[last ? bs.size() - 1 - i : i], "loss", std::nan(""));
      return sum / static_cast<double>(n);
    };
    double secs = 0;
    for (const json& st : bs) secs += NumOr(st, "step_s", 0);
    r->spec.notes.push_back("LoRA base phase (not in the curve): " + std::to_string(bs.size()) +
                            " full-training steps on the source task (copy over letters shifted by " +
                            std::to_string(bp.value("symbol_offset", int64_t{0})) + ", " +
                            Fmt(100 * bp.value("target_share", 0.0)) + "% target letters), loss " +
                            Fmt(mean3(false)) + " -> " + Fmt(mean3(true)) + " (mean of first/last 3), " +
                            Fmt(secs) + " s; then base frozen, adapters trained on the target task");
  }
  size_t steps = r0["steps"].size();
  for (const json& j : ranks) {
    steps = std::min(steps, j["steps"].size());
    r->baseline_rss_bytes = std::max<int64_t>(r->baseline_rss_bytes, j.value("baseline_rss_bytes", int64_t{0}));
  }
  const double tokens = static_cast<double>(r->config.batch * r->config.seq);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (size_t i = 0; i < steps; ++i) {
    ProbeStep s;
    const json& a = r0["steps"][i];
    s.step = a.value("step", int64_t{0});
    s.loss = NumOr(a, "loss", nan);
    s.grad_norm = NumOr(a, "grad_norm", nan);
    s.lr = NumOr(a, "lr", 0);
    s.accuracy = NumOr(a, "accuracy", nan);
    std::map<int64_t, std::vector<int64_t>> load;
    std::map<int64_t, double> kl;  // each rank's share is already scaled by the global token count
    for (const json& j : ranks) {
      const json& st = j["steps"][i];
      const double step_s = NumOr(st, "step_s", 0);
      CollectiveTimes c{NumOr(st, "all_gather_s", 0), NumOr(st, "reduce_scatter_s", 0),
                        NumOr(st, "all_to_all_s", 0), NumOr(st, "all_reduce_s", 0)};
      s.step_s = std::max(s.step_s, step_s);
      s.comm.all_gather_s = std::max(s.comm.all_gather_s, c.all_gather_s);
      s.comm.reduce_scatter_s = std::max(s.comm.reduce_scatter_s, c.reduce_scatter_s);
      s.comm.all_to_all_s = std::max(s.comm.all_to_all_s, c.all_to_all_s);
      s.comm.all_reduce_s = std::max(s.comm.all_reduce_s, c.all_reduce_s);
      s.compute_s = std::max(s.compute_s, step_s - c.total());
      s.peak_rss_bytes = std::max<int64_t>(s.peak_rss_bytes, st.value("peak_rss_bytes", int64_t{0}));
      for (const json& l : st["expert_load"]) {
        auto& row = load[l["layer"].get<int64_t>()];
        auto counts = l["tokens"].get<std::vector<int64_t>>();
        if (row.empty()) row.assign(counts.size(), 0);
        for (size_t e = 0; e < counts.size() && e < row.size(); ++e) row[e] += counts[e];
      }
      if (st.contains("indexer_kl"))
        for (const json& l : st["indexer_kl"]) kl[l["layer"].get<int64_t>()] += NumOr(l, "kl", nan);
    }
    for (auto& [layer, v] : kl) s.indexer_kl.push_back(v);
    s.tokens_per_s = s.step_s > 0 ? tokens / s.step_s : 0;
    for (auto& [layer, counts] : load) s.expert_load.push_back(counts);
    r->steps.push_back(std::move(s));
  }
}

std::string TaskFloor(const ProbeConfig& c, double* floor_nats, double* baseline_nats) {
  if (c.task == ProbeTask::kText) {
    *floor_nats = std::numeric_limits<double>::quiet_NaN();
    *baseline_nats = std::log(256.0);
    return "text task (byte-level " + c.text_file + "): no known floor; uniform bytes = ln(256) = 5.55 nats";
  }
  *floor_nats = 0.0;
  *baseline_nats = std::log(static_cast<double>(c.copy_symbols));  // uniform targets: unigram entropy
  return "copy task (" + std::to_string(CopyHalf(c.seq)) + " distinct of " + std::to_string(c.copy_symbols) +
         " symbols, loss + exact match on the copied half): floor 0 nats; no-learning (unigram) baseline ln(" +
         std::to_string(c.copy_symbols) + ") = " + Fmt(*baseline_nats) + " nats; uniform start ln(256) = 5.55 nats";
}

ProbePrediction PredictProbe(const ProxySpec& spec, const ProbeConfig& cfg, const Topology& topo) {
  ProbePrediction p;
  p.topology = topo.source + ": " + Fmt(topo.device.tflops_fp32 * 1e3) + " GFLOP/s per rank, loopback " +
               Fmt(topo.tiers.empty() ? 0 : topo.tiers.back().bw_gbps) + " GB/s, " +
               Fmt(topo.tiers.empty() ? 0 : topo.tiers.back().latency_us) + " us";
  PlanRequest req;
  req.model = ProxyToModelIR(spec);
  req.topology = topo;
  req.mode = cfg.mode;
  req.lora_rank = cfg.lora_rank;
  req.seq = cfg.seq;
  req.global_batch = cfg.batch;
  req.constraints.reserved_gib = 0;
  req.constraints.memory_margin = 0;
  req.threads = 1;
  Plan plan;
  plan.deg.dp_shard = cfg.fsdp_degree();
  plan.deg.dp_replicate = cfg.ranks / cfg.fsdp_degree();
  plan.deg.ep = cfg.ep_degree();
  plan.deg.expert_fsdp = std::max<int64_t>(1, cfg.fsdp_degree() / cfg.ep_degree());
  plan.micro_batch = cfg.batch / cfg.ranks;
  plan.num_micro_batches = 1;
  plan.seq = cfg.seq;
  plan.global_batch = cfg.batch;
  plan.mode = cfg.mode;
  plan.lora_rank = cfg.lora_rank;
  for (const char* k : {"KDA", "MLA", "DSA", "MoE", "MLP"}) plan.recompute[k] = Recompute::kFull;
  Expected<PlanEstimate> est = EvaluatePlan(req, plan);
  if (!est.ok()) {
    p.notes.push_back("cost model: " + est.status().message());
    return p;
  }
  p.available = true;
  p.step_s = est->step_s;
  p.memory_bytes = est->memory.total;
  p.comm_s = est->exposed_comm_s;
  p.notes.push_back("cost model assumes bf16 weights/activations; the probe runs fp32");
  for (const std::string& n : est->notes) p.notes.push_back(n);
  return p;
}

void FinishProbeResult(ProbeResult* r) {
  r->task_floor = TaskFloor(r->config, &r->floor_nats, &r->baseline_nats);
  std::vector<double> losses, accuracies;
  std::vector<std::vector<int64_t>> load;
  int64_t peak = 0;
  for (size_t i = 0; i < r->steps.size(); ++i) {
    const ProbeStep& s = r->steps[i];
    losses.push_back(s.loss);
    accuracies.push_back(s.accuracy);
    peak = std::max(peak, s.peak_rss_bytes);
    if (i == 0 && r->steps.size() > 1) continue;  // first step: warm-up (allocations, connections)
    if (load.empty()) load = s.expert_load;
    else
      for (size_t l = 0; l < load.size() && l < s.expert_load.size(); ++l)
        for (size_t e = 0; e < load[l].size() && e < s.expert_load[l].size(); ++e) load[l][e] += s.expert_load[l][e];
  }
  // Step 1: learning verdict: the loss curve, then the task's baselines and skill metric.
  LearningCriteria crit;
  crit.curve.target_fraction = r->config.converge_fraction;
  TaskBaselines base{r->baseline_nats, r->floor_nats, r->config.task == ProbeTask::kCopy};
  if (!base.has_accuracy) {  // text: no skill metric yet; judged on the curve and the uniform bound
    base.no_learning_nats = r->baseline_nats;
    accuracies.clear();
  }
  Expected<LearningReport> conv = CheckLearning(losses, accuracies, base, crit);
  r->convergence = conv.ok() ? ConvergenceVerdictName(conv->verdict) : "not_converged";
  r->checks.push_back(conv.ok() ? conv->message : conv.status().message());
  r->skill_metric = base.has_accuracy ? "copy_accuracy" : "";
  r->skill = conv.ok() && base.has_accuracy ? conv->final_accuracy : std::numeric_limits<double>::quiet_NaN();
  r->skill_target = crit.min_accuracy;
  r->final_loss = conv.ok() ? conv->final_loss : std::numeric_limits<double>::quiet_NaN();
  r->loss_target = conv.ok() ? conv->loss_target : std::numeric_limits<double>::quiet_NaN();
  // Step 2: where the step time goes.
  // The observations' own thresholds (validators/probe_observations.h): the loop judges with the same.
  const ObservationThresholds th;
  Expected<CommShareReport> share = ObserveCommShare(ProbeStepTimes(*r), th);
  if (share.ok()) r->checks.push_back(share->message);
  // Step 3: expert balance over the whole probe.
  if (!load.empty()) {
    Expected<ExpertBalanceReport> bal = ObserveExpertBalance(load, th);
    if (bal.ok()) r->checks.push_back(bal->message);
    // Per step (what an EP step waits on): the whole-probe sum can look even while every step is
    // skewed (e.g. a balancing bias that oscillates). Mean and max of each step's worst layer
    // over the last quarter of the steps.
    const size_t n = r->steps.size(), k = std::max<size_t>(1, n / 4);
    double sum = 0, mx = 0;
    size_t counted = 0;
    for (size_t i = n - k; i < n; ++i) {
      if (r->steps[i].expert_load.empty()) continue;
      Expected<ExpertBalanceReport> b = ObserveExpertBalance(r->steps[i].expert_load, th);
      if (!b.ok()) continue;
      sum += b->worst;
      mx = std::max(mx, b->worst);
      ++counted;
    }
    if (counted > 0) {
      char line[160];
      std::snprintf(line, sizeof line, "expert load per step (last %zu steps): worst max/mean %.2f on average, %.2f at most",
                    counted, sum / static_cast<double>(counted), mx);
      r->checks.push_back(line);
    }
  }
  // Step 4: cost model for the same layout on this machine; memory measured vs predicted.
  r->prediction = PredictProbe(r->spec, r->config, MeasureThisMachine(r->config.ranks, r->config.threads_per_rank));
  const double measured = static_cast<double>(peak - r->baseline_rss_bytes);
  if (r->prediction.available && measured > 0) {
    Expected<MemoryReport> mem = CheckMemory(measured, r->prediction.memory_bytes, 4.0);
    if (mem.ok())
      r->checks.push_back(mem->message + " [measured = peak RSS high-water mark minus RSS before the "
                                         "model was built]");
  }
}

}  // namespace onboard::backends
