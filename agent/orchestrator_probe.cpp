// Stages probe and validate of the orchestrator (see orchestrator_stages.h): one probe round on a
// proxy of the model with the loop's current knobs, then the rules on what it measured.
// Units: seconds, bytes, tokens; loss in nats.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <utility>

#include "agent/orchestrator_stages.h"
#include "agent/plan_to_probe.h"
#include "agent/probe_recipe.h"
#include "backends/backend_entry.h"
#include "backends/probe_replicas.h"
#include "report/report_format.h"
#include "validators/loss_parity.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

// The probe's layout: the chosen plan scaled to the probe's ranks (agent/plan_to_probe.h), on the
// recipe's sequences per rank; before any plan, the plan of a pure FSDP + EP job over all ranks.
ProbeLayout ProbeLayoutFor(const RunState& st, const ProxySpec& spec, const ProbeConfig& recipe) {
  const ProbeSettings& s = st.req.probe;
  Plan plan;
  if (const PlanRound* p = st.final_plan()) {
    plan = p->search.best.plan;
  } else {
    plan.deg.dp_shard = s.ranks;
    plan.deg.ep = s.ranks;
  }
  auto L = ApplyPlanToProbe(plan, s.ranks, recipe.batch / recipe.ranks, spec.num_experts, &spec,
                            static_cast<int64_t>(st.model.layers.size()));
  ONBOARD_ASSERT(L.ok(), "probe settings were validated: " + L.status().message());
  return std::move(L).value();
}

// Round `round`'s probe: the recipe (agent/probe_recipe.h) on the round's layout, with what the
// rules changed (knobs: lr, clip, step scale, expert placement, kernel fallbacks).
ProbeConfig MakeProbeConfig(const RunState& st, const ProxySpec& spec, const ProbeConfig& recipe,
                            const ProbeLayout& L, int round) {
  ProbeConfig c = recipe;
  c.ep = L.ep;
  c.fsdp = L.fsdp;
  c.tp = L.tp;  // tensor parallelism (issue 17)
  c.sequence_parallel = L.sequence_parallel;
  c.etp = L.etp;
  c.micro_batch = L.micro_batch;
  c.recompute = L.recompute;  // the plan's recompute per block kind (issue 17, ApplyPlanToProbe Step 5)
  c.pp = L.pp;                // pipeline parallelism (issue 17, ApplyPlanToProbe Step 1c)
  c.interleave = L.interleave;
  c.stage_layer_starts = L.stage_layer_starts;
  // The learning rule scales the recorded steps (LoRA: the adapter phase; the base phase is the
  // recipe's, or follows the steps when they were overridden).
  c.steps =
      static_cast<int64_t>(std::llround(static_cast<double>(recipe.steps) * st.knobs.probe_steps_scale));
  c.lr = st.knobs.learning_rate;
  c.clip = st.knobs.grad_clip;
  // Expert layout from the balance rules (issue 18): per-layer blocks or one for all, or replicas.
  const auto placed = static_cast<int64_t>(st.knobs.expert_placement.size());
  if (placed > 0 && placed % spec.num_experts == 0) c.expert_placement = st.knobs.expert_placement;
  // Replicas only where this round's layout can run them (the plan may have changed ep).
  if (c.ep_degree() == c.data_ranks() &&
      BuildReplicaMap(st.knobs.expert_phy2log, spec.num_experts, c.ep_degree()).ok())
    c.expert_phy2log = st.knobs.expert_phy2log;
  // The expert overlap rule (rules_expert_overlap.cpp): dispatch / combine under the shared expert.
  if (st.knobs.moe_overlap) c.moe_overlap = true;
  c.out_dir = (fs::path(st.req.out_dir) / "probe" / ("round" + std::to_string(round))).string();
  // A control that perturbs a generated kernel has nothing left to perturb once it falls back.
  ApplyKernelFallbacks(st.knobs, &c);
  if (c.kda_kernel == ProbeKernel::kTorch && c.control == kControlPerturbedKdaGate) c.control.clear();
  if (c.dsa_kernel == ProbeKernel::kTorch && c.control == kControlPerturbedDsaTopk) c.control.clear();
  // Round 1 checks the generated kernels' loss parity against the reference ops (issue 12).
  if (round == 1 && (c.kda_kernel == ProbeKernel::kGenerated || c.dsa_kernel == ProbeKernel::kGenerated))
    c.loss_parity_steps = std::min<int64_t>(kLossParitySteps, c.steps);
  return c;
}

}  // namespace

void ApplyKernelFallbacks(const LoopKnobs& knobs, ProbeConfig* c) {
  for (const auto& [kernel, op] : knobs.kernel_fallbacks) {
    if (kernel.rfind("kda", 0) == 0) c->kda_kernel = ProbeKernel::kTorch;
    if (kernel.rfind("dsa", 0) == 0) c->dsa_kernel = ProbeKernel::kTorch;
  }
}

LoopProbeObserver::LoopProbeObserver(const CancelToken& cancel, Emitter& em, std::string stage, int round,
                                     int64_t total)
    : cancel_(cancel), em_(em), stage_(std::move(stage)), round_(round), total_(total) {}

void LoopProbeObserver::OnStep(const ProbeStep& s) {
  em_.Emit({{"type", "stage_progress"},
            {"stage", stage_},
            {"round", round_},
            {"done", s.step + 1},
            {"total", total_},
            {"message", "step " + std::to_string(s.step) + " loss " + FmtFixed(s.loss, 6)}});
}

Expected<std::string> StageProbe(RunState& st, int round, Emitter& em, const CancelToken& cancel) {
  ProbeRound pr;
  pr.round = round;
  pr.knobs = st.knobs;
  ProxySpec spec = ProxyFromModel(st.model, st.req.probe.proxy_blocks);
  const ProbeConfig recipe = ProbeRecipe(st.req);
  pr.layout = ProbeLayoutFor(st, spec, recipe);
  ProbeConfig cfg = MakeProbeConfig(st, spec, recipe, pr.layout, round);
  pr.log_dir = cfg.out_dir;
  std::error_code ec;
  fs::create_directories(cfg.out_dir, ec);
  em.Emit({{"type", "stage_progress"}, {"stage", "probe"}, {"round", round}, {"done", 0}, {"total", cfg.steps},
           {"message", "proxy " + spec.PatternString() + ", " + std::to_string(cfg.ranks) + " ranks, ep " +
                           std::to_string(cfg.ep) + ", lr " + FmtFixed(cfg.lr, 5)}});
  // Step 1: run the probe; the observer turns its steps into progress events, and the launcher
  // stops the workers once `cancel` fires (within kProbeCancelGraceS).
  LoopProbeObserver observer(cancel, em, "probe", round, cfg.steps);
  Expected<ProbeResult> res = backend::RunProbeSpec(spec, cfg, &observer);
  if (cancel.cancelled()) {
    em.Log("warn", "cancel requested: the workers of probe round " + std::to_string(round) + " were stopped");
    return Status(ErrorCode::kInternal, "cancelled during probe round " + std::to_string(round));
  }
  // Step 2: keep the result (or the failure) and its logs.
  if (!res.ok()) {
    pr.error = res.status().message();
    st.probes.push_back(std::move(pr));
    return Status(res.status().code(), "probe round " + std::to_string(round) + " failed: " + res.status().message());
  }
  pr.result = std::move(*res);
  std::string rel = "probe/round" + std::to_string(round) + "/";
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, rel + "probe.json", ProbeResultToJson(pr.result)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, rel + "probe.txt", FormatProbeResult(pr.result)));
  const auto& steps = pr.result.steps;
  em.Emit({{"type", "stage_progress"}, {"stage", "probe"}, {"round", round}, {"done", steps.size()},
           {"total", cfg.steps}, {"message", "done"}});
  std::string summary = std::to_string(steps.size()) + " steps, loss " +
                        (steps.empty() ? std::string("-") : FmtFixed(steps.front().loss, 3) + " -> " + FmtFixed(steps.back().loss, 3)) +
                        ", " + pr.result.convergence;
  st.probes.push_back(std::move(pr));
  return summary;
}

Expected<std::string> StageValidate(RunState& st, int round, Emitter& em) {
  ONBOARD_ASSERT(!st.probes.empty(), "validate before any probe");
  ProbeRound& pr = st.probes.back();
  // Step 1: evidence for the rules.
  RoundEvidence ev;
  ev.round = round;
  ev.probe = &pr.result;
  PlanRequest plan_request;  // the chosen plan's request with the model (the round keeps it without)
  if (const PlanRound* p = st.final_plan()) {
    ev.plan = &p->search.best;
    plan_request = p->request;
    plan_request.model = st.model;
    ev.plan_request = &plan_request;
  }
  ev.target_device = st.topology.device.name;
  ev.kernel_reference_ops = KernelReferenceOps(st);  // round 1's loss parity (rules_kernel_fallback.cpp)
  st.knobs.replan = false;
  st.knobs.reprobe = false;
  // Step 2: rules.
  pr.decisions = ApplyRules(ev, st.req.thresholds, st.knobs);
  for (const auto& d : pr.decisions) {
    st.trace.AddDecision(d);
    em.Emit({{"type", "decision"}, {"round", round}, {"rule", d.rule}, {"observed", d.observed},
             {"action", d.action}, {"changed", d.changed}});
  }
  // Step 3: the observations, also when nothing fired (why the loop stops).
  LossTrend t = ComputeLossTrend(pr.result);
  CommShareReport c = ProbeCommShare(pr.result, st.req.thresholds);
  std::vector<double> load = MeasuredExpertLoad(pr.result);
  double imb = load.empty() ? 1.0
                            : ObserveRankBalance(load, pr.result.config.ep_degree(),
                                                 pr.result.config.expert_placement, st.req.thresholds)
                                  .rank_max_over_mean;
  nlohmann::json observed = {{"convergence", pr.result.convergence},
                             {"loss_ratio", std::isfinite(t.ratio) ? nlohmann::json(t.ratio) : nlohmann::json("non-finite")},
                             {"rank_expert_imbalance", imb},
                             {"comm_share", c.share},
                             {"peak_bytes", MeasuredPeakBytes(pr.result)}};
  if (pr.result.prediction.available) observed["predicted_peak_bytes"] = pr.result.prediction.memory_bytes;
  std::string outcome = pr.decisions.empty() ? "no rule fired: stop"
                        : std::to_string(pr.decisions.size()) + " rule(s) fired" +
                              (st.knobs.replan ? ", re-plan" : "") + (st.knobs.reprobe ? ", re-probe" : "");
  st.trace.AddObservation(round, "validate", observed, outcome);
  return pr.result.convergence + "; " + outcome;
}

}  // namespace onboard::agent
