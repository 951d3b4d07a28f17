// Stages parse, templates, plan, kernels and report of the orchestrator (see orchestrator_stages.h).
// The probe and validate stages are in orchestrator_probe.cpp.
#include "agent/orchestrator_stages.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "report/report_format.h"
#include "report/report_html.h"
#include "agent/report_json.h"
#include "report/report_markdown.h"
#include "parsers/load_model.h"
#include "search/plan_export.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

}  // namespace

Status WriteArtifact(RunState& st, const std::string& name, const std::string& text) {
  fs::path path = fs::path(st.req.out_dir) / name;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  if (!out) return IoError(path.string() + ": cannot write");
  out << text;
  if (!out.good()) return IoError(path.string() + ": write failed");
  st.artifacts[name] = fs::absolute(path, ec).string();
  return Status::Ok();
}

Expected<std::string> StageParse(RunState& st) {
  const RunRequest& req = st.req;
  std::string path = req.model_path;
  if (path.empty()) {  // in-memory model: keep a copy beside the artifacts and parse that
    std::string fmt = req.model_format;
    if (fmt.empty()) {
      size_t first = req.model_bytes.find_first_not_of(" \t\r\n");
      fmt = first != std::string::npos && req.model_bytes[first] == '{' ? "json" : "onnx";
    }
    std::string name = fmt == "json" ? "model/config.json" : "model/model.onnx";
    ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, name, req.model_bytes));
    path = st.artifacts[name];
  }
  ONBOARD_ASSIGN_OR_RETURN(st.model, LoadModel(path));
  if (!req.model_name.empty()) st.model.name = req.model_name;
  ONBOARD_ASSIGN_OR_RETURN(st.topology, ResolveTopology(req.topology));
  st.stats = ComputeStats(st.model, req.seq);
  return st.model.name + ": " + std::to_string(st.model.layers.size()) + " layers, " +
         FmtCount(st.stats.total_params) + " params (" + FmtCount(st.stats.active_params) + " active); topology " +
         st.topology.name + " (" + std::to_string(st.topology.num_devices) + " x " + st.topology.device.name + ")";
}

Expected<std::string> StageTemplates(RunState& st) {
  ONBOARD_ASSIGN_OR_RETURN(st.library, LoadTemplateLibrary(st.req.templates_dir));
  if (!st.req.templates_override.empty())
    ONBOARD_RETURN_IF_ERROR(ApplyTemplateOverrides(st.library, st.req.templates_override));
  st.match = MatchTemplates(st.model, st.library);
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "templates.json", TemplateMatchToJson(st.match).dump(2) + "\n"));
  std::string s = std::to_string(st.match.modules.size()) + " modules matched from " +
                  std::to_string(st.library.templates.size()) + " templates";
  if (st.match.unknown > 0) s += "; " + std::to_string(st.match.unknown) + " UNKNOWN (flagged in the report)";
  return s;
}

Expected<std::string> StagePlan(RunState& st, int round, const std::string& reason) {
  PlanRound pr;
  pr.round = round;
  pr.reason = reason;
  PlanRequest& r = pr.request;
  r.model = st.model;
  r.topology = st.topology;
  r.mode = st.req.mode;
  r.lora_rank = st.req.lora_rank;
  r.base_dtype = st.req.base_dtype;
  r.compute_dtype = st.req.compute_dtype;
  r.bf16_layers_first = st.req.bf16_layers_first;
  r.bf16_layers_last = st.req.bf16_layers_last;
  r.seq = st.req.seq;
  r.global_batch = st.req.global_batch;
  // Measured routing from the expert_routing rule (rules_expert_routing.cpp), else the request's.
  r.expert_nodes_per_token =
      st.knobs.expert_nodes_per_token > 0 ? st.knobs.expert_nodes_per_token : st.req.expert_nodes_per_token;
  r.max_route_nodes = st.req.max_route_nodes;
  r.ep_dispatcher = st.req.ep_dispatcher;
  r.threads = st.req.threads;
  r.expert_imbalance = std::max(1.0, st.knobs.expert_imbalance);
  r.constraints = st.knobs.plan_constraints;
  r.calibration = st.knobs.calibration;
  ONBOARD_RETURN_IF_ERROR(r.Validate());
  ONBOARD_ASSIGN_OR_RETURN(pr.search, SearchPlans(r));
  const PlanCandidate& best = pr.search.best;
  std::string json = SearchResultToJson(r, pr.search);
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "plan.json", json));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "plans/plan_round" + std::to_string(round) + ".json", json));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "plan.txt", FormatSearchResult(r, pr.search)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "plan.torchtitan.toml", ToTorchtitanToml(best.plan)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "plan.megatron.txt", ToMegatronArgs(best.plan) + "\n"));
  // Every engine export and launcher (search/plan_export.h), listed with the artifacts in the report.
  for (const ExportFile& f : BuildAllExports(best.plan, st.model))
    ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "exports/" + f.name, f.text));
  r.model = ModelIR{};  // the report does not need a second copy of the model
  st.plans.push_back(std::move(pr));
  const auto& e = best.estimate;
  return std::string(st.plans.back().search.feasible ? "" : "NOTHING FITS; closest: ") + PlanSummary(best.plan) +
         " step " + FmtFixed(e.step_s, 2) + " s, MFU " + FmtFixed(e.mfu * 100, 1) + "%, " +
         FmtFixed(e.memory.total / (1024.0 * 1024 * 1024), 1) + " GiB/device";
}

namespace {

// Step 2 of StageKernels: the model's own kernels at full dims, CPU and CUDA (sm_90) sources + manifests.
Status WriteModelKernels(RunState& st) {
  KernelStage& ks = st.kernels;
  for (auto target : {codegen::KernelTarget::kCpu, codegen::KernelTarget::kCuda}) {
    codegen::TargetOptions to;
    to.target = target;
    ONBOARD_ASSIGN_OR_RETURN(auto kernels, codegen::GenerateKernels(st.model, to));
    std::string sub = std::string("kernels/") + codegen::KernelTargetName(target) + "/";
    for (const auto& g : kernels) {
      ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, sub + g.FileName(), g.source));
      ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, sub + g.name + ".json", g.ManifestJson()));
      ks.generated.push_back(sub.substr(8) + g.FileName());
    }
  }
  ks.notes.push_back("CUDA sources are generated, not compiled or run here; `onboard kernels --target cuda` "
                     "compiles them and scripts/gpu-check.sh checks them on a GPU");
  return Status::Ok();
}

// Step 3 of StageKernels: build and check the CPU kernels one spec at a time (scaled model dims + odd
// shapes; cancellable, with progress). A kernel that cannot be built or run is a failed row.
Status CheckPlannedKernels(RunState& st, const validators::CheckPlan& plan, Emitter& em,
                           const CancelToken& cancel) {
  KernelStage& ks = st.kernels;
  validators::KernelCheckOptions opt;
  opt.num_threads = st.req.threads;
  const size_t total = plan.kda.size() + plan.dsa.size();
  size_t done = 0;
  auto progress = [&](const std::string& name) {
    ++done;
    em.Emit({{"type", "stage_progress"}, {"stage", "kernels"}, {"done", done}, {"total", total},
             {"message", name}});
  };
  auto record = [&](const std::string& name, Expected<std::vector<validators::KernelCheckRow>> rows) {
    if (rows.ok()) {
      for (auto& r : *rows) ks.rows.push_back(r);
    } else {  // could not build or run: the check failed for this kernel
      validators::KernelCheckRow r;
      r.kernel = name;
      r.shape = "(not run)";
      r.against = "reference";
      r.pass = false;
      r.note = rows.status().message();
      ks.rows.push_back(r);
      ks.notes.push_back(name + ": " + rows.status().message());
    }
    progress(name);
  };
  // KDA specs, then DSA specs, each through its own check.
  auto check_all = [&](const auto& specs, auto check) {
    for (const auto& spec : specs) {
      if (cancel.cancelled()) return Status(ErrorCode::kInternal, "cancelled during kernel checks");
      record(spec.name.empty() ? spec.DefaultName() : spec.name, check(spec, opt));
    }
    return Status::Ok();
  };
  ONBOARD_RETURN_IF_ERROR(
      check_all(plan.kda, [](const auto& s, const auto& o) { return validators::CheckKdaKernel(s, o); }));
  return check_all(plan.dsa, [](const auto& s, const auto& o) { return validators::CheckDsaKernel(s, o); });
}

// Step 4 of StageKernels: the kernel-fallback rule, with the reference operators the templates name;
// returns the passed row count.
int ApplyKernelFallbackRule(RunState& st, Emitter& em) {
  KernelStage& ks = st.kernels;
  RoundEvidence ev;
  ev.round = 0;
  ev.kernel_rows = &ks.rows;
  ev.kernel_reference_ops = KernelReferenceOps(st);
  int passed = 0;
  for (const auto& r : ks.rows) passed += r.pass ? 1 : 0;
  if (auto d = RuleKernelFallback(ev, st.req.thresholds, st.knobs)) {
    st.trace.AddDecision(*d);
    em.Emit({{"type", "decision"}, {"round", 0}, {"rule", d->rule}, {"observed", d->observed},
             {"action", d->action}, {"changed", d->changed}});
  } else {
    st.trace.AddObservation(0, "kernels", {{"rows", ks.rows.size()}, {"passed", passed}},
                            "every generated kernel matches its reference");
  }
  return passed;
}

}  // namespace

Expected<std::string> StageKernels(RunState& st, Emitter& em, const CancelToken& cancel) {
  KernelStage& ks = st.kernels;
  ks.dir = (fs::path(st.req.out_dir) / "kernels").string();
  // Step 1: the model's KDA / DSA kernel specs; none, nothing to generate.
  ONBOARD_ASSIGN_OR_RETURN(validators::CheckPlan plan, validators::KernelCheckPlan(st.model));
  if (plan.kda.empty() && plan.dsa.empty()) {
    ks.skipped_reason = "the model has no KDA/DSA blocks; its other kernels come from the vendor library";
    return ks.skipped_reason;
  }
  // Step 2: the model's own kernels at full dims, CPU and CUDA (sm_90) sources + manifests.
  ONBOARD_RETURN_IF_ERROR(WriteModelKernels(st));
  // Step 3: build and check the CPU kernels one spec at a time (cancellable, with progress).
  ONBOARD_RETURN_IF_ERROR(CheckPlannedKernels(st, plan, em, cancel));
  ks.ran = true;
  // Step 4: the kernel-fallback rule, with the reference operators the templates name.
  const int passed = ApplyKernelFallbackRule(st, em);
  return std::to_string(ks.generated.size()) + " kernel sources generated, " + std::to_string(passed) + "/" +
         std::to_string(ks.rows.size()) + " checks passed" +
         (st.knobs.kernel_fallbacks.empty() ? ""
                                            : ", " + std::to_string(st.knobs.kernel_fallbacks.size()) +
                                                  " on reference fallback");
}

std::map<std::string, std::string> KernelReferenceOps(const RunState& st) {
  std::map<std::string, std::string> ops;
  for (const auto& m : st.match.modules) {
    if (!m.chosen || m.module != "mixer") continue;
    if (m.kind == "KDA" || m.kind == "GatedDeltaNet") ops["kda"] = m.chosen->reference_op;
    if (m.kind == "DSA") ops["dsa"] = m.chosen->reference_op;
  }
  return ops;
}

Expected<std::string> StageReport(RunState& st) {
  // Step 1: register the report files first so every report lists all artifacts.
  std::error_code ec;
  fs::path out = fs::absolute(fs::path(st.req.out_dir), ec);
  for (const char* name : {"trace.json", "report.json", "report.md", "report.html"})
    st.artifacts[name] = (out / name).string();
  // Step 2: build once, render three ways.
  nlohmann::json report = BuildReportJson(st);
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "trace.json", st.trace.ToJson().dump(2) + "\n"));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "report.md", RenderMarkdownReport(report)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "report.html", RenderHtmlReport(report)));
  ONBOARD_RETURN_IF_ERROR(WriteArtifact(st, "report.json", report.dump(2) + "\n"));
  return "report.json, report.md, report.html, trace.json in " + st.req.out_dir;
}

}  // namespace onboard::agent
