// `onboard plan MODEL --topology T`: search the parallel layout (or `--evaluate LAYOUT.json` to cost
// a given layout / a published_runs.json-style file of runs), print the best plan with its time and
// memory breakdown, runners-up, Pareto front and rejected summary; exit 4 when nothing fits (after
// printing the memory arithmetic and the smallest device count of the same family that fits).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "agent/topology_source.h"
#include "cli/command_registry.h"
#include "cli/expert_routing_flags.h"
#include "core/number_text.h"
#include "parsers/load_model.h"
#include "search/calibration_table.h"
#include "search/expert_placement.h"
#include "search/layout_file.h"
#include "search/plan_export.h"
#include "search/plan_request_checks.h"
#include "search/planner.h"

namespace onboard::cli {
namespace {

struct PlanOptions {
  std::string model, topology, mode, evaluate, export_fmt, export_out, base_dtype = "bf16";  // mode "" = lora
  std::string compute_dtype = "bf16";  // GEMM recipe of the searched plans (PlanRequest::compute_dtype)
  std::string schedule = "1f1b";  // search constraint: pipeline schedules tried (PlanConstraints::schedule)
  std::string cross_entropy;      // PlanRequest::cross_entropy; "" = CostedLoss (plan_export.h)
  int64_t lora_rank = 16, seq = 4096, global_batch = 0, max_devices = 65536;
  int64_t bf16_layers_first = 0, bf16_layers_last = 0;  // PlanRequest::bf16_layers_first / last
  int64_t etp = 0;  // search constraint: expert TP, 0 = searched (PlanConstraints::etp)
  int64_t zero_stage = -1;  // search constraint (PlanConstraints::zero_stage); -1 = the export engine's
  int threads = 2;
  double imbalance = 1.0, zipf = 0;
  int64_t spare_slots = 1;
  int64_t devices_per_node = 8;   // --export: accelerators per host (launchers: nodes x per node)
  ExpertRoutingFlags routing;     // issue 18 (cli/expert_routing_flags.h)
  bool json = false;
};

std::string Pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * v);
  return b;
}

int RunExport(const PlanOptions& o, const PlanRequest& req, const Plan& plan);

// An export launches its engine's own loss (ExportEngineLoss): a plan costed with another one, named
// in `origin`, is refused rather than exported unlike it was costed.
Status CheckExportLoss(const PlanOptions& o, const std::string& origin, const std::string& loss) {
  if (o.export_fmt.empty() || loss.empty()) return Status::Ok();
  std::string runs = ExportEngineLoss(o.export_fmt);
  if (loss == runs) return Status::Ok();
  if (runs.empty()) runs = "each engine its own";
  return BadInput(origin, "cross_entropy",
                  "is not the loss the " + o.export_fmt + " export runs (" + runs + ")", loss);
}

// A single layout's fine-tuning mode: the file's "mode" where it names one (a --mode that says
// otherwise is refused), else --mode (default lora); the LoRA rank likewise.
Status ResolveLayoutMode(const PlanOptions& o, LayoutRun* run, PlanRequest* req) {
  if (!run->mode_stated) {
    run->plan.mode = req->mode;
    if (req->mode == FinetuneMode::kLoRA && run->plan.lora_rank == 0) run->plan.lora_rank = req->lora_rank;
    return Status::Ok();
  }
  if (!o.mode.empty() && run->plan.mode != req->mode)
    return BadInput(o.evaluate, "mode", "conflicts with --mode " + o.mode,
                    run->plan.mode == FinetuneMode::kLoRA ? "lora" : "full");
  req->mode = run->plan.mode;
  if (run->plan.mode == FinetuneMode::kLoRA) req->lora_rank = run->plan.lora_rank;
  return Status::Ok();
}

// The request a single layout (no model of its own) is costed with: the CLI's request with the
// layout's options, after the checks that a layout and the flags agree.
Status SingleLayoutRequest(const PlanOptions& o, const PlanRequest* base, LayoutRun* run, PlanRequest* req) {
  if (!base) return BadInput(o.evaluate, "runs", "a single layout needs MODEL and --topology", o.evaluate);
  *req = *base;
  ApplyRunOptions(*run, req);
  if (run->plan.seq == 0) run->plan.seq = req->seq;
  req->seq = run->plan.seq;
  ONBOARD_RETURN_IF_ERROR(ResolveLayoutMode(o, run, req));
  if (!o.cross_entropy.empty() && !run->cross_entropy.empty() && run->cross_entropy != o.cross_entropy)
    return BadInput(o.evaluate, "cross_entropy", "conflicts with --cross-entropy " + o.cross_entropy,
                    run->cross_entropy);
  if (run->layout_layers >= 0 && run->layout_layers != static_cast<int64_t>(req->model.layers.size()))
    return BadInput(o.evaluate, "pp_layout", "places a different number of decoder layers than the model has",
                    std::to_string(run->layout_layers));
  return Status::Ok();
}

// What --export refuses for a costed layout: the request-level memory techniques are costed but not
// written by the exports (refused rather than dropped from the launch), and a loss the engine does
// not run.
Status CheckExportable(const PlanOptions& o, const PlanRequest& req, const LayoutRun& run) {
  const char* unexported = req.cpu_offload_layers > 0 ? "cpu_offload_layers"
                           : req.recompute_norms      ? "recompute_norms"
                           : req.fp8_act_input_store  ? "fp8_act_input_store"
                                                      : nullptr;
  if (unexported) return BadInput(o.evaluate, unexported, "is costed but not written by --export", "set");
  return CheckExportLoss(o, run.cross_entropy.empty() ? "--cross-entropy" : o.evaluate,
                         run.cross_entropy.empty() ? o.cross_entropy : run.cross_entropy);
}

// One costed run as JSON: the estimate, and beside it what the run measured.
nlohmann::json EvaluationJson(const LayoutRun& run, const PlanEstimate& est, double tps, double tflops) {
  nlohmann::json j = nlohmann::json::parse(EstimateToJson(run.plan, est));
  j["id"] = run.id;
  if (run.measured_step_s) j["measured_step_s"] = *run.measured_step_s;
  if (run.measured_tokens_per_s_per_gpu) {
    j["predicted_tokens_per_s_per_gpu"] = tps;
    j["measured_tokens_per_s_per_gpu"] = *run.measured_tokens_per_s_per_gpu;
    j["error"] = tps / *run.measured_tokens_per_s_per_gpu - 1;
  }
  if (run.measured_tflops_per_gpu) {  // beside it the prediction, in the model FLOPs onboard counts
    j["measured_tflops_per_gpu"] = *run.measured_tflops_per_gpu;
    j["predicted_tflops_per_gpu"] = tflops;
  }
  if (!run.assumptions.empty()) j["assumptions"] = run.assumptions;
  return j;
}

// One costed run as text: the estimate, prediction beside measurement, the assumptions applied.
void PrintEvaluation(const LayoutRun& run, const PlanRequest& req, const PlanEstimate& est, double tps,
                     double tflops) {
  std::cout << run.id << " on " << req.topology.name << ":\n" << FormatEstimate(req, run.plan, est);
  if (run.measured_step_s)
    std::cout << "  predicted " << est.step_s << " s vs measured " << *run.measured_step_s << " s ("
              << Pct(est.step_s / *run.measured_step_s - 1) << ")\n";
  if (run.measured_tokens_per_s_per_gpu)
    std::cout << "  predicted " << std::lround(tps) << " tokens/s/GPU vs measured "
              << *run.measured_tokens_per_s_per_gpu << " ("
              << Pct(tps / *run.measured_tokens_per_s_per_gpu - 1) << ")\n";
  if (run.measured_tflops_per_gpu) {  // the source's TFLOP count may differ from ours (MTP, causal halving)
    std::cout << "  predicted " << std::lround(tflops) << " model TFLOP/s/GPU vs published "
              << *run.measured_tflops_per_gpu << " (" << Pct(tflops / *run.measured_tflops_per_gpu - 1)
              << ")";
    // Both figures per token: where they differ, the TFLOP/s line compares two FLOP counts and the
    // tokens/s line is the like-for-like one.
    if (run.measured_tokens_per_s_per_gpu && tps > 0 && *run.measured_tokens_per_s_per_gpu > 0)
      std::cout << "; per token onboard counts " << FormatSignificant(tflops * 1e3 / tps, 4)
                << " GFLOP, the source's figures imply "
                << FormatSignificant(*run.measured_tflops_per_gpu * 1e3 / *run.measured_tokens_per_s_per_gpu,
                                     4);
    std::cout << "\n";
  }
  for (const std::string& a : run.assumptions) std::cout << "  assumed: " << a << "\n";
  std::cout << "\n";
}

// Evaluates every run of a layout file; prints predicted vs measured (with --export: the one
// layout's export instead).
int RunEvaluate(const PlanOptions& o, const PlanRequest* base) {
  // Step 1: the runs (one, with --export).
  auto runs = LoadLayoutFile(o.evaluate);
  if (!runs.ok()) return ReportError("plan", runs.status());
  if (!o.export_fmt.empty() && runs->size() != 1)
    return ReportError("plan", BadInput(o.evaluate, "runs", "--export needs a file with one layout",
                                        std::to_string(runs->size()) + " runs"));
  nlohmann::json out = nlohmann::json::array();
  std::vector<CalibrationRow> rows;  // measured tokens/s: the file's calibration table, after the runs
  bool measured = false;
  for (LayoutRun& run : *runs) {
    if (!run.skipped.empty()) {  // measured-runs files: a run the layout format cannot express
      if (!o.export_fmt.empty())
        return ReportError("plan", BadInput(o.evaluate, run.id, "cannot be costed", run.skipped));
      if (!o.json) std::cout << run.id << ": skipped (" << run.skipped << ")\n\n";
      rows.push_back(MakeCalibrationRow(run, nullptr));
      continue;
    }
    // Step 2: its request (its own model and hardware, or the CLI's), and its estimate.
    PlanRequest req;
    if (run.has_model) {
      ResolveUnstatedRecompute(&run);
      req = RequestForRun(run);
    } else if (Status st = SingleLayoutRequest(o, base, &run, &req); !st.ok()) {
      return ReportError("plan", st);
    }
    auto est = EvaluatePlan(req, run.plan);
    if (!est.ok())
      return ReportError("plan", BadInput(o.evaluate, run.id, est.status().message(), PlanSummary(run.plan)));
    if (!o.export_fmt.empty()) {
      if (Status st = CheckExportable(o, req, run); !st.ok()) return ReportError("plan", st);
      return RunExport(o, req, run.plan);
    }
    // Step 3: prediction beside measurement.
    measured = measured || run.measured_tokens_per_s_per_gpu.has_value();
    rows.push_back(MakeCalibrationRow(run, run.measured_tokens_per_s_per_gpu ? &*est : nullptr));
    const double gpus = static_cast<double>(req.topology.num_devices);
    const double tps = est->tokens_per_s / gpus, tflops = est->model_flops / est->step_s / gpus / 1e12;
    if (o.json)
      out.push_back(EvaluationJson(run, *est, tps, tflops));
    else
      PrintEvaluation(run, req, *est, tps, tflops);
  }
  if (o.json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  // Measured tokens/s: the calibration table of the file, with its error summary (the estimates above).
  if (measured) std::cout << TabulateCalibrationRows(std::move(rows)).text;
  return 0;
}

// `--export ENGINE [--out DIR]`: print one export, or write it (or `all` of them) into DIR.
int RunExport(const PlanOptions& o, const PlanRequest& req, const Plan& plan) {
  static const std::map<std::string, std::string> kFiles = {
      {"megatron", "plan.megatron.sh"},          {"bridge", "plan_megatron_bridge.py"},
      {"torchtitan", "plan_torchtitan.py"},      {"torchtitan-v0.2", "plan.torchtitan-v0.2.toml"},
      {"mindspeed", "plan.mindspeed.sh"},        {"torchrun", "plan.torchrun.sh"},
      {"slurm", "plan.sbatch"}};
  ExportOptions eo;
  eo.devices_per_node = o.devices_per_node;
  if (o.export_fmt == "all") {
    if (o.export_out.empty()) return ReportError("plan", BadInput("(command line)", "--out", "--export all needs --out DIR"));
    Status st = WriteAllExports(plan, req.model, o.export_out, eo);
    if (!st.ok()) return ReportError("plan", st);
    const auto failures = CheckMegatronScript(ToMegatronScript(plan, req.model, ShapeFor(plan, eo.devices_per_node)));
    std::cout << "wrote the exports of " << PlanSummary(plan) << " to " << o.export_out << " (see EXPORTS.md); Megatron-LM rules: "
              << (failures.empty() ? "all pass" : std::to_string(failures.size()) + " FAIL") << "\n"
              << FormatRuleFailures(failures);
    return 0;
  }
  const std::string name = kFiles.at(o.export_fmt);
  for (const ExportFile& f : BuildAllExports(plan, req.model, eo)) {
    if (f.name != name) continue;
    if (o.export_out.empty()) {
      std::cout << f.text;
      return 0;
    }
    if (mkdir(o.export_out.c_str(), 0755) != 0 && errno != EEXIST)
      return ReportError("plan", BadInput(o.export_out, "--out", "cannot create directory", strerror(errno)));
    const std::string path = o.export_out + "/" + f.name;
    std::ofstream out(path);
    out << f.text;
    if (!out) return ReportError("plan", IoError("cannot write " + path));
    std::cout << "wrote " << path << "\n";
    return 0;
  }
  return ReportError("plan", Status(ErrorCode::kInternal, "export " + name + " not built"));
}

// Step 1 of RunPlan: the request from MODEL, --topology and the options (*req stays empty without
// MODEL and --topology); the first bad input is returned.
Status BuildPlanRequest(const PlanOptions& o, std::unique_ptr<PlanRequest>* req) {
  if (o.model.empty() && o.topology.empty()) return Status::Ok();
  if (o.model.empty()) return BadInput("(command line)", "MODEL", "missing model path");
  if (o.topology.empty())
    return BadInput("(command line)", "--topology",
                    "missing topology (a name under examples/topologies, a file or inline JSON)");
  auto model = LoadModel(o.model);
  if (!model.ok()) return model.status();
  auto topo = agent::ResolveTopology(o.topology);
  if (!topo.ok()) return topo.status();
  *req = std::make_unique<PlanRequest>();
  PlanRequest& r = **req;
  r.model = std::move(*model);
  r.topology = std::move(*topo);
  Expected<FinetuneMode> mode = ParseFinetuneMode("--mode", "mode", o.mode.empty() ? "lora" : o.mode);
  if (!mode.ok()) return mode.status();
  r.mode = *mode;
  r.lora_rank = o.lora_rank;
  Expected<Precision> base =
      ParsePrecision("plan request", "base_dtype", o.base_dtype, PrecisionUse::kFrozenBase);
  if (!base.ok()) return base.status();
  r.base_dtype = *base;
  Expected<Precision> compute =
      ParsePrecision("plan request", "compute_dtype", o.compute_dtype, PrecisionUse::kCompute);
  if (!compute.ok()) return compute.status();
  r.compute_dtype = *compute;  // the device must have it (nvfp4: fp4 tensor cores): PlanRequest::Validate
  r.bf16_layers_first = o.bf16_layers_first;  // quantised compute_dtype, counts: PlanRequest::Validate
  r.bf16_layers_last = o.bf16_layers_last;
  r.seq = o.seq;
  r.global_batch = o.global_batch;
  r.threads = o.threads;
  r.expert_imbalance = o.imbalance;
  r.constraints.etp = o.etp;  // ranges and names: PlanRequest::Validate, the one check
  r.constraints.schedule = o.schedule;
  const EngineDataParallel engine_dp = ExportEngineDataParallel(o.export_fmt);
  r.constraints.zero_stage = o.zero_stage >= 0 ? o.zero_stage : engine_dp.zero_stage;
  r.fsdp_pipelining = engine_dp.fsdp_pipelining;
  r.cross_entropy = CostedLoss(o.cross_entropy, o.export_fmt);  // the one named, else the engine's
  if (Status rs = ApplyExpertRoutingFlags(o.routing, &r); !rs.ok()) return rs;
  return r.Validate();
}

// Step 2 of RunPlan, with --zipf: place skewed synthetic expert loads for the chosen EP, then search
// again with the resulting max/mean imbalance. *placement: the line to print ("" when not placed).
Status PlaceExpertsAndResearch(const PlanOptions& o, PlanRequest& req, SearchResult& r,
                               std::string* placement) {
  int64_t experts = 0;
  for (const auto& l : req.model.layers) experts = std::max(experts, l.moe.num_experts);
  if (!(o.zipf > 0 && experts > 0 && r.feasible && r.best.plan.deg.ep > 1)) return Status::Ok();
  ExpertPlacementRequest pr;
  pr.expert_load = ZipfExpertLoads(experts, o.zipf, 1e6, 1);
  pr.ep_ranks = r.best.plan.deg.ep;
  pr.ranks_per_node = std::min(pr.ep_ranks, req.topology.tiers.front().group_size);
  while (pr.ep_ranks % pr.ranks_per_node != 0) --pr.ranks_per_node;
  pr.spare_slots_per_rank = o.spare_slots;
  auto pl = PlaceExperts(pr);
  if (!pl.ok()) return pl.status();
  *placement = "expert placement (Zipf s=" + std::to_string(o.zipf) + ", ep=" + std::to_string(pr.ep_ranks) +
               ", " + std::to_string(pr.spare_slots_per_rank) + " spare slot(s) per rank): max/mean load " +
               std::to_string(pl->max_over_mean_before) + " -> " + std::to_string(pl->max_over_mean_after) +
               "; plan re-searched with imbalance " + std::to_string(pl->max_over_mean_after);
  req.expert_imbalance = std::max(1.0, pl->max_over_mean_after);
  ONBOARD_ASSIGN_OR_RETURN(r, SearchPlans(req));
  return Status::Ok();
}

// Step 3 of RunPlan, when nothing fits: the smallest device count of the same family that does, as
// text and as JSON.
void DescribeSmallestFit(const PlanOptions& o, const PlanRequest& req, std::string* text, nlohmann::json* j) {
  auto w = SmallestFittingWorld(req, o.max_devices);
  if (w.ok()) {
    *text = "smallest " + req.topology.name + "-family size that fits: " + std::to_string(w->world) +
            " devices (" + PlanSummary(w->best.plan) + ", " + std::to_string(w->best.estimate.step_s) +
            " s/step)";
    for (const auto& t : w->tried) *text += "\n  tried " + t;
    *j = {{"devices", w->world},
          {"plan", PlanSummary(w->best.plan)},
          {"step_s", w->best.estimate.step_s},
          {"tried", w->tried}};
  } else {
    *text = "no size of the " + req.topology.name + " family up to " + std::to_string(o.max_devices) +
            " devices fits";
    *j = {{"devices", nullptr}, {"message", *text}};
  }
}

int RunPlan(const PlanOptions& o) {
  // Step 1: inputs.
  std::unique_ptr<PlanRequest> req;
  if (Status st = BuildPlanRequest(o, &req); !st.ok()) return ReportError("plan", st);
  if (!o.evaluate.empty()) return RunEvaluate(o, req.get());
  if (!req) return ReportError("plan", BadInput("(command line)", "MODEL", "missing model path (or --evaluate RUNS.json)"));
  if (Status st = CheckExportLoss(o, "--cross-entropy", o.cross_entropy); !st.ok())
    return ReportError("plan", st);
  // Step 2: search (with --zipf: place the experts and search again).
  auto r = SearchPlans(*req);
  if (!r.ok()) return ReportError("plan", r.status());
  std::string placement;
  if (Status st = PlaceExpertsAndResearch(o, *req, *r, &placement); !st.ok()) return ReportError("plan", st);
  if (!o.export_fmt.empty() && r->feasible) return RunExport(o, *req, r->best.plan);
  // Step 3: when nothing fits, the smallest device count of the same family that does.
  std::string smallest;
  nlohmann::json smallest_json;
  if (!r->feasible) DescribeSmallestFit(o, *req, &smallest, &smallest_json);
  // Step 4: print; exit 4 when nothing fits.
  if (o.json) {
    nlohmann::json j = nlohmann::json::parse(SearchResultToJson(*req, *r));
    if (!smallest.empty()) j["smallest_fitting"] = smallest_json;
    if (!placement.empty()) j["expert_placement"] = placement;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << FormatSearchResult(*req, *r);
    if (!placement.empty()) std::cout << "\n" << placement << "\n";
    if (!smallest.empty()) std::cout << "\n" << smallest << "\n";
  }
  if (!r->feasible) return ExitCodeFor(ErrorCode::kInfeasible);
  return 0;
}

}  // namespace

static OnboardCommand kPlan{
    "plan", "Search the parallel layout (FSDP/HSDP x TP x PP x EP x recompute) with a cost model", 20,
    [](CLI::App& sub) -> RunFn {
      auto o = std::make_shared<PlanOptions>();
      sub.add_option("model", o->model, "model directory, config.json or .onnx file");
      sub.add_option("--topology", o->topology, "topology: a name under examples/topologies, a JSON file, or inline JSON");
      sub.add_option(
          "--mode", o->mode,
          "fine-tuning mode: lora (default) | full (with --evaluate: a layout's own \"mode\" wins; "
          "a --mode that contradicts it is refused)");
      sub.add_option("--lora-rank", o->lora_rank, "LoRA rank r");  // ranges: PlanRequest::Validate
      sub.add_option("--base-dtype", o->base_dtype, "frozen base precision in LoRA: bf16 | fp8 | mxfp4");
      sub.add_option(
          "--compute-dtype", o->compute_dtype,
          "GEMM precision of the searched plans: bf16 | fp16 | fp8 | mxfp8 | nvfp4 (with --evaluate: "
          "each layout's own)");
      sub.add_option("--bf16-layers-first", o->bf16_layers_first,
                     "with a quantised --compute-dtype: the first N decoder layers run bf16 GEMMs (Megatron "
                     "--first-last-layers-bf16 --num-layers-at-start-in-bf16 N)");
      sub.add_option("--bf16-layers-last", o->bf16_layers_last,
                     "with a quantised --compute-dtype: the last N decoder layers run bf16 GEMMs "
                     "(--num-layers-at-end-in-bf16 N)");
      sub.add_option("--seq", o->seq, "tokens per sequence");
      sub.add_option("--global-batch", o->global_batch, "sequences per optimizer step (0 = ~4M tokens)");
      sub.add_option("--imbalance", o->imbalance, "expert load max/mean per EP rank (from placement)")
          ->check(CLI::Range(1.0, 64.0));
      sub.add_option("--zipf", o->zipf, "place Zipf(s)-skewed synthetic expert loads for the chosen EP and re-plan")
          ->check(CLI::Range(0.0, 4.0));
      sub.add_option("--spare-slots", o->spare_slots, "spare expert slots per rank for replicas (with --zipf)")
          ->check(CLI::Range(int64_t{0}, int64_t{64}));
      AddExpertRoutingFlags(sub, &o->routing);
      sub.add_option("--threads", o->threads, "search threads")->check(CLI::Range(1, 256));
      sub.add_option("--etp", o->etp,
                     "expert tensor parallel degree the search keeps (0 = searched: 1 and tp)");
      sub.add_option("--zero-stage", o->zero_stage,
                     "optimizer sharding the search tries: 0 = both FSDP (3) and Megatron's distributed "
                     "optimizer (1) (default; 3 with --export torchtitan), 1 or 3 = that one");
      sub.add_option("--schedule", o->schedule,
                     "pipeline schedules the search tries: 1f1b (default; every exported engine runs it), "
                     "dualpipe, or any");
      sub.add_option("--cross-entropy", o->cross_entropy,
                     "the loss over the logits the plan is costed with (memory and time, "
                     "search/cross_entropy_cost.h): megatron (default) | te | te_inplace | torch "
                     "(default with --export torchtitan)");
      sub.add_option("--max-devices", o->max_devices, "largest device count tried when nothing fits")
          ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
      sub.add_option("--evaluate", o->evaluate, "cost this layout / published_runs.json-style file instead of searching");
      CLI::Option* exp =
          sub.add_option("--export", o->export_fmt,
                         "print the best plan's export for an engine, or write `all` of them into --out DIR "
                         "(search/plan_export.h); with --evaluate, the export of the file's one layout")
              ->check(CLI::IsMember({"all", "megatron", "bridge", "torchtitan", "torchtitan-v0.2",
                                     "mindspeed", "torchrun", "slurm"}));
      // Without --export these two would be ignored: refused instead (exit 2, "... requires --export").
      sub.add_option("--out", o->export_out, "folder the exports are written to (with --export)")->needs(exp);
      sub.add_option("--devices-per-node", o->devices_per_node,
                     "accelerators per host for the launchers (with --export)")
          ->check(CLI::Range(int64_t{1}, int64_t{1024}))
          ->capture_default_str()
          ->needs(exp);
      sub.add_flag("--json", o->json, "print JSON");
      return [o] { return RunPlan(*o); };
    }};

}  // namespace onboard::cli
