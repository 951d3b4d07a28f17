// `onboard run MODEL --topology T [--mode lora|full] [--out DIR]`: the whole agent loop
// (agent/orchestrator.h) with progress on stderr (bars on a TTY, plain lines otherwise) and the
// wall time of every stage; artifacts and reports in DIR.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>

#include "agent/orchestrator.h"
#include "cli/command_registry.h"
#include "cli/expert_routing_flags.h"

namespace onboard::cli {
namespace {

struct RunOptions {
  std::string model, topology, mode = "lora", out, templates, templates_dir, base_dtype = "bf16";
  std::string compute_dtype = "bf16";
  std::string verify_ids, verify_reference;  // stage "weights" (a checkpoint directory)
  std::string weights_text;                  // stage "weights": the real-weights LoRA probe's text
  int64_t lora_rank = 16, seq = 4096, global_batch = 0;
  int64_t bf16_layers_first = 0, bf16_layers_last = 0;  // RunRequest's fields of the same names
  int max_rounds = 3, probe_ranks = 2, threads = 2;
  int64_t probe_ranks_per_node = 0;  // 0 = one node
  int probe_steps = 0;  // 0 = the probe recipe's (DefaultProbeConfig)
  std::string probe_control;  // negative control of every probe round ("" = none)
  double lr = 0;        // 0 = the probe recipe's
  ExpertRoutingFlags routing;  // issue 18 (cli/expert_routing_flags.h)
  bool no_probe = false, no_kernels = false, json = false;
};

// Prints events to stderr: one line per stage start/finish and decision; progress as a bar on a TTY.
class ProgressPrinter : public agent::EventSink {
 public:
  ProgressPrinter() : tty_(isatty(STDERR_FILENO) == 1) {}
  void OnEvent(const nlohmann::json& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string type = e.value("type", "");
    if (type == "stage_progress") {
      int64_t done = e.value("done", 0), total = e.value("total", 0);
      std::string msg = e.value("message", "");
      if (tty_ && total > 0) {
        int width = 30, fill = static_cast<int>(width * done / total);
        std::fprintf(stderr, "\r  %-9s [%s%s] %lld/%lld %-40.40s", e.value("stage", "").c_str(),
                     std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(),
                     static_cast<long long>(done), static_cast<long long>(total), msg.c_str());
        bar_open_ = true;
      } else {
        std::fprintf(stderr, "  %s %lld/%lld %s\n", e.value("stage", "").c_str(), static_cast<long long>(done),
                     static_cast<long long>(total), msg.c_str());
      }
      return;
    }
    CloseBar();
    if (type == "stage_started") {
      std::fprintf(stderr, "[%s%s] ...\n", e.value("stage", "").c_str(), RoundTag(e).c_str());
    } else if (type == "stage_finished") {
      std::fprintf(stderr, "[%s%s] %s in %.2f s: %s\n", e.value("stage", "").c_str(), RoundTag(e).c_str(),
                   e.value("ok", false) ? "done" : "FAILED", e.value("seconds", 0.0), e.value("summary", "").c_str());
    } else if (type == "decision") {
      std::fprintf(stderr, "  decision (round %d, %s): %s\n", e.value("round", 0), e.value("rule", "").c_str(),
                   e.value("action", "").c_str());
    } else if (type == "log") {
      std::fprintf(stderr, "  %s: %s\n", e.value("level", "").c_str(), e.value("message", "").c_str());
    }
  }

 private:
  static std::string RoundTag(const nlohmann::json& e) {
    int r = e.value("round", 0);
    return r > 0 ? " round " + std::to_string(r) : "";
  }
  void CloseBar() {
    if (bar_open_) std::fputc('\n', stderr);
    bar_open_ = false;
  }
  std::mutex mu_;
  bool tty_;
  bool bar_open_ = false;
};

int RunRun(const RunOptions& o) {
  agent::RunRequest req;
  req.model_path = o.model;
  req.topology = o.topology;
  Expected<FinetuneMode> mode = ParseFinetuneMode("--mode", "mode", o.mode);
  if (!mode.ok()) return ReportError("run", mode.status());
  req.mode = *mode;
  req.lora_rank = o.lora_rank;
  req.seq = o.seq;
  req.global_batch = o.global_batch;
  Expected<Precision> base =
      ParsePrecision("run request", "base_dtype", o.base_dtype, PrecisionUse::kFrozenBase);
  if (!base.ok()) return ReportError("run", base.status());
  req.base_dtype = *base;
  Expected<Precision> compute =
      ParsePrecision("run request", "compute_dtype", o.compute_dtype, PrecisionUse::kCompute);
  if (!compute.ok()) return ReportError("run", compute.status());
  req.compute_dtype = *compute;
  req.bf16_layers_first = o.bf16_layers_first;  // the rule: RunRequest::Validate
  req.bf16_layers_last = o.bf16_layers_last;
  if (Status rs = ApplyExpertRoutingFlags(o.routing, &req); !rs.ok())
    return ReportError("run", rs);  // ranges: Validate
  req.out_dir = o.out.empty() ? "onboard-run" : o.out;
  req.templates_override = o.templates;
  req.templates_dir = o.templates_dir;
  req.max_rounds = o.max_rounds;
  req.threads = o.threads;
  req.probe.ranks = o.probe_ranks;
  req.probe.ranks_per_node = o.probe_ranks_per_node;
  if (o.probe_steps != 0) req.probe.steps = o.probe_steps;
  req.probe.control = o.probe_control;
  if (o.lr != 0) req.probe.learning_rate = o.lr;
  req.probe.enabled = !o.no_probe;
  req.generate_kernels = !o.no_kernels;
  req.verify_ids = o.verify_ids;
  req.verify_reference = o.verify_reference;
  req.weights_text = o.weights_text;

  ProgressPrinter printer;
  agent::CancelToken cancel;
  auto result = agent::RunOnboarding(req, printer, cancel);
  if (!result.ok()) return ReportError("run", result.status());
  if (o.json) {
    std::cout << result->report.dump(2) << "\n";
  } else {
    std::cout << "onboard run: " << result->summary << "\n";
    for (const char* name : {"report.html", "report.md", "report.json", "plan.json", "trace.json"}) {
      auto it = result->artifacts.find(name);
      if (it != result->artifacts.end()) std::cout << "  " << name << ": " << it->second << "\n";
    }
    double total = 0;
    for (const auto& t : result->timings) total += t.seconds;
    std::printf("  wall time in stages: %.1f s\n", total);
  }
  if (!result->plan_feasible) return ExitCodeFor(ErrorCode::kInfeasible);
  return 0;
}

OnboardCommand kRun{"run", "The whole agent loop: parse, templates, plan, kernels, probe, adjust, report", 60,
                    [](CLI::App& sub) -> RunFn {
                      auto o = std::make_shared<RunOptions>();
                      sub.add_option("model", o->model, "config.json, model directory or .onnx")->required();
                      sub.add_option("--topology,-t", o->topology,
                                     "topology file, name under examples/topologies, or inline JSON")
                          ->required();
                      sub.add_option("--mode", o->mode, "lora | full")->capture_default_str();
                      sub.add_option("--lora-rank", o->lora_rank, "LoRA rank")->capture_default_str();
                      sub.add_option("--base-dtype", o->base_dtype, "LoRA frozen base: bf16 | fp8 | mxfp4")
                          ->capture_default_str();
                      sub.add_option("--compute-dtype", o->compute_dtype,
                                     "GEMM precision of the plans: bf16 | fp16 | fp8 | mxfp8 | nvfp4")
                          ->capture_default_str();
                      sub.add_option(
                          "--bf16-layers-first", o->bf16_layers_first,
                          "with a quantised --compute-dtype: first N decoder layers in bf16 GEMMs");
                      sub.add_option("--bf16-layers-last", o->bf16_layers_last,
                                     "with a quantised --compute-dtype: last N decoder layers in bf16 GEMMs");
                      sub.add_option("--seq", o->seq, "tokens per sequence")->capture_default_str();
                      sub.add_option("--global-batch", o->global_batch, "sequences per step (0 = ~4M tokens)");
                      AddExpertRoutingFlags(sub, &o->routing);
                      sub.add_option("--out,-o", o->out, "output directory (default ./onboard-run)");
                      sub.add_option("--templates", o->templates, "JSON file of template overrides");
                      sub.add_option("--templates-dir", o->templates_dir,
                                     "template data directory (default $ONBOARD_TEMPLATES_DIR or built-in)");
                      std::vector<CLI::Option*> probe_only;  // meaningless with --no-probe: refused beside it
                      probe_only.push_back(
                          sub.add_option("--max-rounds", o->max_rounds, "probe/adjust rounds")
                              ->capture_default_str());
                      sub.add_option("--probe-ranks", o->probe_ranks, "probe processes")->capture_default_str();
                      probe_only.push_back(
                          sub.add_option("--probe-ranks-per-node", o->probe_ranks_per_node,
                                         "probe ranks per emulated node (0 = one node); with >= 2 nodes the "
                                         "expert rules act on the measured cross-node traffic"));
                      probe_only.push_back(sub.add_option(
                          "--probe-steps", o->probe_steps,
                          "steps per probe round (LoRA: adapter steps; default: the probe recipe's, "
                          "as `onboard probe`)"));
                      probe_only.push_back(sub.add_option(
                          "--probe-control", o->probe_control,
                          "negative control of every probe round (onboard probe --control), e.g. "
                          "perturbed_kda_gate: round 1's kernel loss parity must fail and round 2 "
                          "run on the reference ops"));
                      probe_only.push_back(sub.add_option(
                          "--probe-lr", o->lr,
                          "starting probe peak learning rate (LoRA: the adapters'; default: the "
                          "probe recipe's, as `onboard probe`)"));
                      sub.add_option("--threads", o->threads, "plan search threads")->capture_default_str();
                      sub.add_option("--verify-ids", o->verify_ids,
                                     "checkpoint dir: token ids (JSON list of lists) for the logit check");
                      sub.add_option("--verify-reference", o->verify_reference,
                                     "checkpoint dir: reference logits .npy (default: fp64 forward)");
                      sub.add_option("--weights-text", o->weights_text,
                                     "checkpoint dir: text for a LoRA probe on its real layers 0-1 "
                                     "(bytes = token ids; default: not run)");
                      CLI::Option* no_probe = sub.add_flag(
                          "--no-probe", o->no_probe,
                          "skip the training probes (--probe-ranks still sizes a --weights-text LoRA probe)");
                      for (CLI::Option* opt : probe_only) opt->excludes(no_probe);
                      sub.add_flag("--no-kernels", o->no_kernels, "skip kernel generation and checks");
                      sub.add_flag("--json", o->json, "print report.json to stdout");
                      return [o] { return RunRun(*o); };
                    }};

}  // namespace
}  // namespace onboard::cli
