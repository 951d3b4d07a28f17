// RunOnboarding: the agent loop (see agent/orchestrator.h).
//   Step 1: parse the model and topology     Step 2: match templates
//   Step 3: plan the full model              Step 4: generate + check kernels (fallback rule)
//   Step 5: rounds of probe -> validate -> (re-plan) while a rule asks for a re-probe; round 1
//           also probes the vision tower on the image task when the model has one
//   Step 6: reports
#include <filesystem>
#include <fstream>
#include <functional>

#include "agent/orchestrator.h"
#include "agent/orchestrator_stages.h"
#include "agent/probe_recipe.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

// Runs one stage: events, timing, trace. Errors pass through.
class StageRunner {
 public:
  StageRunner(RunState& st, Emitter& em, const CancelToken& cancel) : st_(st), em_(em), cancel_(cancel) {}

  Status Run(const std::string& stage, int round, const std::function<Expected<std::string>()>& fn,
             bool* failed_softly = nullptr) {
    if (cancel_.cancelled()) return Status(ErrorCode::kInternal, "cancelled before stage " + stage);
    StageTiming t;
    t.stage = stage;
    t.round = round;
    t.start_s = em_.Elapsed();
    em_.Emit({{"type", "stage_started"}, {"stage", stage}, {"round", round}});
    Expected<std::string> r = fn();
    t.seconds = em_.Elapsed() - t.start_s;
    t.ok = r.ok();
    t.summary = r.ok() ? *r : r.status().message();
    st_.trace.AddStage(t);
    em_.Emit({{"type", "stage_finished"},
              {"stage", stage},
              {"round", round},
              {"ok", t.ok},
              {"seconds", t.seconds},
              {"summary", t.summary}});
    if (!r.ok() && failed_softly && !IsCancelled(r.status())) {  // recorded; the loop goes on
      *failed_softly = true;
      em_.Log("warn", stage + ": " + r.status().message());
      return Status::Ok();
    }
    return r.ok() ? Status::Ok() : r.status();
  }

 private:
  RunState& st_;
  Emitter& em_;
  const CancelToken& cancel_;
};

// The rules' starting lr and clip: the probe recipe's (agent/probe_recipe.h), with the request's
// overrides.
void InitKnobs(RunState& st) {
  const ProbeConfig recipe = ProbeRecipe(st.req);
  st.knobs.learning_rate = recipe.lr;
  st.knobs.grad_clip = recipe.clip;
}

std::string ReplanReason(const std::vector<Decision>& ds) {
  std::string r;
  for (const auto& d : ds)
    if (d.family != "divergence") r += (r.empty() ? "" : "+") + d.rule;
  return r.empty() ? "rules" : r;
}

// Step 5 of RunLoop: probe -> validate -> (image probe in round 1) -> (re-plan) while a rule asks for a
// re-probe, up to req.max_rounds; a failed probe ends the rounds (recorded, not fatal).
Status RunProbeRounds(const RunRequest& req, RunState& st, StageRunner& stage, Emitter& em,
                      const CancelToken& cancel) {
  if (!req.probe.enabled) {
    st.notes.push_back("probing disabled for this run");
    return Status::Ok();
  }
  for (int round = 1; round <= req.max_rounds; ++round) {
    bool probe_failed = false;
    ONBOARD_RETURN_IF_ERROR(stage.Run(
        "probe", round, [&] { return StageProbe(st, round, em, cancel); }, &probe_failed));
    if (probe_failed) {
      st.notes.push_back("probe round " + std::to_string(round) + " failed: " + st.probes.back().error);
      break;
    }
    ONBOARD_RETURN_IF_ERROR(stage.Run("validate", round, [&] { return StageValidate(st, round, em); }));
    // Round 1 of a model with a vision tower: the image probe (recorded, not fatal when it fails).
    bool image_failed = false;
    if (round == 1 && HasVisionTower(st))
      ONBOARD_RETURN_IF_ERROR(stage.Run(
          "image_probe", round, [&] { return StageImageProbe(st, em, cancel); }, &image_failed));
    if (image_failed) st.notes.push_back("image probe failed: " + st.image.error);
    if (st.knobs.replan)
      ONBOARD_RETURN_IF_ERROR(stage.Run(
          "adjust", round, [&] { return StagePlan(st, round, ReplanReason(st.probes.back().decisions)); }));
    if (!st.knobs.reprobe) break;
    if (round == req.max_rounds)
      st.notes.push_back("stopped after max_rounds=" + std::to_string(req.max_rounds) +
                         " with a re-probe still requested");
  }
  return Status::Ok();
}

// Last part of RunLoop: the result from the run state; artifact events and the "finished" event.
RunResult CollectResult(const RunRequest& req, RunState& st, Emitter& em) {
  RunResult out;
  out.out_dir = req.out_dir;
  out.artifacts = st.artifacts;
  out.timings = st.trace.stages();
  out.rounds = static_cast<int>(st.probes.size());
  out.decisions = static_cast<int>(st.trace.decisions().size());
  out.converged = st.probes.empty() ||
                  (st.probes.back().error.empty() && st.probes.back().result.convergence == "converged");
  out.plan_feasible = st.final_plan() && st.final_plan()->search.feasible;
  std::ifstream in(st.artifacts["report.json"]);
  out.report = nlohmann::json::parse(in, nullptr, false);
  out.summary = st.final_plan() ? PlanSummary(st.final_plan()->search.best.plan) : "";
  out.summary += "; " + std::to_string(out.rounds) + " probe round(s), " + std::to_string(out.decisions) +
                 " decision(s)" + (out.converged ? "" : ", probe NOT converged");
  if (st.image.ran && !st.image.learned()) out.summary += ", image probe NOT learned";
  for (const char* name : {"plan.json", "trace.json", "report.json", "report.md", "report.html"})
    if (st.artifacts.count(name))
      em.Emit({{"type", "artifact"}, {"name", name}, {"path", st.artifacts[name]}});
  em.Emit({{"type", "finished"},
           {"ok", true},
           {"report", st.artifacts["report.json"]},
           {"summary", out.summary}});
  return out;
}

Expected<RunResult> RunLoop(const RunRequest& req, Emitter& em, const CancelToken& cancel) {
  ONBOARD_RETURN_IF_ERROR(req.Validate());
  std::error_code ec;
  fs::create_directories(req.out_dir, ec);
  if (ec) return IoError(req.out_dir + ": cannot create output directory: " + ec.message());

  RunState st;
  st.req = req;
  StageRunner stage(st, em, cancel);

  // Steps 1-3.
  ONBOARD_RETURN_IF_ERROR(stage.Run("parse", 0, [&] { return StageParse(st); }));
  ONBOARD_RETURN_IF_ERROR(stage.Run("templates", 0, [&] { return StageTemplates(st); }));
  InitKnobs(st);
  ONBOARD_RETURN_IF_ERROR(stage.Run("plan", 0, [&] { return StagePlan(st, 0, "initial"); }));
  bool weights_failed = false;  // recorded in the report's weights section, not fatal
  ONBOARD_RETURN_IF_ERROR(stage.Run(
      "weights", 0, [&] { return StageWeights(st); }, &weights_failed));

  // Step 4: kernels (a failure to run the checks is recorded, not fatal).
  if (req.generate_kernels) {
    bool failed = false;
    ONBOARD_RETURN_IF_ERROR(stage.Run(
        "kernels", 0, [&] { return StageKernels(st, em, cancel); }, &failed));
    if (failed) st.notes.push_back("kernel generation/checks could not run; see the stage timeline");
  } else {
    st.kernels.skipped_reason = "kernel generation disabled for this run";
  }

  // Step 5: probe rounds.
  ONBOARD_RETURN_IF_ERROR(RunProbeRounds(req, st, stage, em, cancel));

  // Step 6: reports.
  ONBOARD_RETURN_IF_ERROR(stage.Run("report", 0, [&] { return StageReport(st); }));

  return CollectResult(req, st, em);
}

}  // namespace

Expected<RunResult> RunOnboarding(const RunRequest& req, EventSink& sink, const CancelToken& cancel) {
  Emitter em(sink);
  Expected<RunResult> r = RunLoop(req, em, cancel);
  if (!r.ok())
    em.Emit({{"type", "finished"},
             {"ok", false},
             {"cancelled", IsCancelled(r.status())},
             {"error", r.status().message()},
             {"code", ErrorCodeName(r.status().code())}});
  return r;
}

}  // namespace onboard::agent
