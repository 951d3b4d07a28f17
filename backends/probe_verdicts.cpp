// FinishProbeResult (probe_report.h): the task floor, the validators' verdicts (learning, comm
// share, expert balance, memory) and the cost model's prediction beside the measurements.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "backends/probe_report.h"
#include "backends/probe_step_series.h"
#include "validators/convergence.h"
#include "validators/learning_verdict.h"
#include "validators/probe_observations.h"

namespace onboard::backends {
namespace {

// FinishProbeResult's inputs from the merged steps: the loss and accuracy curves, the highest
// peak RSS, and the expert load summed over the steps after the first (warm-up) one.
struct StepTotals {
  std::vector<double> losses, accuracies;
  std::vector<std::vector<int64_t>> load;
  int64_t peak = 0;
};

StepTotals SumSteps(const std::vector<ProbeStep>& steps) {
  StepTotals t;
  for (size_t i = 0; i < steps.size(); ++i) {
    const ProbeStep& s = steps[i];
    t.losses.push_back(s.loss);
    t.accuracies.push_back(s.accuracy);
    t.peak = std::max(t.peak, s.peak_rss_bytes);
    if (i == 0 && steps.size() > 1) continue;  // first step: warm-up (allocations, connections)
    if (t.load.empty())
      t.load = s.expert_load;
    else
      for (size_t l = 0; l < t.load.size() && l < s.expert_load.size(); ++l)
        for (size_t e = 0; e < t.load[l].size() && e < s.expert_load[l].size(); ++e)
          t.load[l][e] += s.expert_load[l][e];
  }
  return t;
}

// Step 1: learning verdict: the loss curve, then the task's baselines and skill metric.
// The observations' thresholds are the config's (validators/probe_observations.h, passed in):
// `onboard run` sets the run's, so the loop's rules and this report judge with the same numbers.
void JudgeLearning(const std::vector<double>& losses, std::vector<double> accuracies, ProbeResult* r) {
  const bool text = r->config.task == ProbeTask::kText;
  const ObservationThresholds& th = r->config.thresholds;
  LearningCriteria crit;
  crit.curve.target_fraction = r->config.converge_fraction;
  crit.curve.divergence_factor = th.divergence_factor;
  TaskBaselines base{r->baseline_nats, r->floor_nats, !text};
  if (text) {  // text: the held-out loss against the held-out bigram (a NaN bigram: never converged)
    base.bigram_nats = std::isfinite(r->bigram_nats) ? r->bigram_nats : -1.0;
    accuracies.clear();
  }
  const bool copy = r->config.task == ProbeTask::kCopy;  // judged on its held-out evaluation
  Expected<LearningReport> conv = CheckLearning(losses, accuracies, base, crit, r->held_out_loss,
                                                copy ? r->held_out_accuracy : std::nan(""));
  if (conv.ok() && !text) r->last_steps_accuracy = conv->window_accuracy;
  r->convergence = conv.ok() ? ConvergenceVerdictName(conv->verdict) : "not_converged";
  r->checks.push_back(conv.ok() ? conv->message : conv.status().message());
  r->skill_metric = text                                   ? "held_out_loss"
                    : r->config.task == ProbeTask::kLookup ? "lookup_accuracy"
                    : r->config.task == ProbeTask::kImage  ? "image_accuracy"
                                                           : "copy_accuracy";
  r->skill =
      text ? r->held_out_loss : (conv.ok() ? conv->final_accuracy : std::numeric_limits<double>::quiet_NaN());
  r->skill_target = text ? (conv.ok() ? conv->loss_target : r->bigram_nats) : crit.min_accuracy;
  r->final_loss = conv.ok() ? conv->final_loss : std::numeric_limits<double>::quiet_NaN();
  r->loss_target = conv.ok() ? conv->loss_target : std::numeric_limits<double>::quiet_NaN();
}

// Step 3: expert balance over the whole probe (load: summed over the steps), then per step (what
// an EP step waits on): the whole-probe sum can look even while every step is skewed (e.g. a
// balancing bias that oscillates). Mean and max of each step's worst layer over the last quarter
// of the steps.
void CheckExpertBalance(const std::vector<std::vector<int64_t>>& load, ProbeResult* r) {
  const ObservationThresholds& th = r->config.thresholds;
  Expected<ExpertBalanceReport> bal = ObserveExpertBalance(load, th);
  if (bal.ok()) r->checks.push_back(bal->message);
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
    std::snprintf(line, sizeof line,
                  "expert load per step (last %zu steps): worst max/mean %.2f on average, %.2f at most",
                  counted, sum / static_cast<double>(counted), mx);
    r->checks.push_back(line);
  }
}

// Steps 4 and 5: the cost model for the same layout on this machine; peak RSS (peak: the highest
// step's) against its memory, then per collective kind and live-tensor memory, measured beside
// predicted.
void CompareWithCostModel(int64_t peak, ProbeResult* r) {
  r->prediction =
      PredictProbe(r->spec, r->config, MeasureThisMachine(r->config.ranks, r->config.threads_per_rank));
  const double measured = static_cast<double>(peak - r->baseline_rss_bytes);
  if (r->prediction.available && measured > 0) {
    Expected<MemoryReport> mem = CheckMemory(measured, r->prediction.memory_bytes, 4.0);
    if (mem.ok())
      r->checks.push_back(mem->message +
                          " [measured = peak RSS high-water mark minus RSS before the "
                          "model was built]");
  }
  MeasureCollectives(r->steps, &r->prediction.collectives);
  MeasureMemory(r->rank_live_peak_bytes, &r->prediction.memory);
  if (r->prediction.available && r->prediction.memory.measured > 0) {
    Expected<MemoryReport> live =
        CheckMemory(r->prediction.memory.measured, r->prediction.memory.predicted, kLiveMemoryTolerance);
    if (live.ok()) r->checks.push_back(live->message + " [measured = live-tensor peak, tracking allocator]");
  }
}

}  // namespace

void FinishProbeResult(ProbeResult* r) {
  const bool text = r->config.task == ProbeTask::kText;
  r->task_floor =
      text ? TextTaskFloor(r->config, r) : TaskFloor(r->spec, r->config, &r->floor_nats, &r->baseline_nats);
  StepTotals t = SumSteps(r->steps);
  // Step 1: learning verdict (the loss curve, the task's baselines and skill metric).
  JudgeLearning(t.losses, std::move(t.accuracies), r);
  // Step 2: where the step time goes.
  Expected<CommShareReport> share = ObserveCommShare(ProbeStepTimes(*r), r->config.thresholds);
  if (share.ok()) r->checks.push_back(share->message);
  // Step 3: expert balance over the whole probe and per step.
  if (!t.load.empty()) CheckExpertBalance(t.load, r);
  // Steps 4 and 5: the cost model's prediction for this layout on this machine, beside the measurements.
  CompareWithCostModel(t.peak, r);
}

}  // namespace onboard::backends
