// The onboarding agent: one closed loop from a checkpoint to a reviewed training layout.
//
//   parse -> templates -> plan -> kernels -> probe -> validate -> (adjust, re-plan/re-probe)* -> report
//
// Entry point: RunOnboarding(request, sink, cancel). `onboard run` (cli/run_command.cpp) and the
// job service (`onboard serve`, serve/http_*) both call it; nothing else drives the stages.
//
// Every observable step is an event (a JSON object, see "Events" below) sent to an EventSink; the
// service stores them and streams them as SSE, the CLI prints them as progress lines/bars.
// Every decision the loop makes is also recorded in trace.json (agent/trace.h): what was observed,
// which rule fired (agent/rules.h), what changed.
//
// Units: seconds, bytes, tokens; timestamps are Unix epoch seconds (double, wall clock).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/cancel_token.h"
#include "core/plan.h"
#include "agent/rules/thresholds.h"
#include "core/status.h"

namespace onboard::agent {

// ---- Request --------------------------------------------------------------------------------

// Short distributed training probes (backends/probe.h) run by the loop on a small proxy of the model.
// The training recipe (steps, seq, batch, lr, warm-up, clip, LoRA base phase) is the probe's own,
// DefaultProbeConfig(mode) (backends/probe_schedule.cpp), the one home of those numbers, so
// `onboard run` trains what `onboard probe` trains. The optional fields below override it when set
// (agent/probe_recipe.h says how); unset, the recipe's value is used.
struct ProbeSettings {
  int ranks = 2;                 // processes in the c10d/Gloo group (CPU); EP = ranks when it divides
  // Probe ranks per emulated node (ProbeConfig::ranks_per_node; 0 = all on one node): with >= 2
  // nodes the probe measures cross-node expert traffic and the loop's expert rules
  // (expert_coactivation, expert_routing) can act on it.
  int64_t ranks_per_node = 0;
  std::optional<int> steps;      // recorded optimizer steps per probe round (LoRA: adapter steps)
  std::optional<int64_t> seq;    // tokens per proxy sequence
  std::optional<int64_t> micro_batch;  // sequences per rank per step (the recipe's: batch / ranks)
  int64_t proxy_blocks = 1;      // proxy depth in blocks of 4 layers (keeps the mixer pattern, e.g. K,K,K,M)
  std::optional<double> learning_rate;  // peak LR (LoRA: the adapters'); the divergence rule lowers it
  std::optional<double> grad_clip;      // clip norm; the divergence rule tightens it
  uint64_t seed = 1234;
  double timeout_s = 300;        // per probe round
  std::string worker_binary;     // `onboard` executable for probe workers ("" = this executable)
  bool enabled = true;           // false: skip probing (plan + kernels + report only)
  // Negative control of every round's probe (backends/probe_controls.h; "" = none): shows the loop
  // catching what the control breaks (perturbed_kda_gate: round 1's kernel loss parity fails and
  // the kernel-fallback rule moves round 2 to the reference ops).
  std::string control;
};

struct RunRequest {
  // Model: exactly one of model_path or model_bytes.
  std::string model_path;        // HF config.json / model dir / safetensors index / .onnx file
  std::string model_bytes;       // in-memory config JSON text or ONNX protobuf bytes
  std::string model_format;      // for model_bytes: "json" | "onnx" ("" = sniff: '{' -> json)
  std::string model_name;        // display name for in-memory models ("" = from the config)

  // Topology: a file path, a name under examples/topologies ("atlas-950-superpod-128"), or inline
  // JSON text (first non-space character '{').
  std::string topology;

  FinetuneMode mode = FinetuneMode::kLoRA;
  int64_t lora_rank = 16;
  int64_t seq = 4096;            // tokens per sequence for the plan
  int64_t global_batch = 0;      // sequences per step; 0 = planner default (~4M tokens)
  Precision base_dtype = Precision::kBF16;  // LoRA frozen base: bf16 | fp8 | mxfp4 (core/precision.h)
  Precision compute_dtype = Precision::kBF16;  // GEMM recipe of the searched plans and their exports:
                                               // bf16 | fp16 | fp8 | mxfp8 | nvfp4 (the device must have it)
  int64_t bf16_layers_first = 0;  // with a quantised compute_dtype: decoder layers at the start / end kept
  int64_t bf16_layers_last = 0;   // in bf16 GEMMs (PlanRequest's fields of the same names)
  // Expert routing for the plan's all-to-all split by tier (issue 18; PlanRequest's fields of the same
  // names, search/planner.h; limits: search/plan_request_checks.h CheckExpertRouting).
  double expert_nodes_per_token = 0;  // measured mean nodes a token's top-k experts span (0 = uniform)
  int64_t max_route_nodes = 0;        // node-limited routing M (0 = off)
  EpDispatcher ep_dispatcher = EpDispatcher::kAllToAll;  // dispatcher of the searched plans
  // When model_path is a checkpoint directory with safetensors (stage "weights"): token ids to run
  // (JSON list of lists; "" = a fixed 8-token sequence) and reference logits .npy ("" = an fp64
  // forward of the same weights: a precision check, not an independent semantics check).
  std::string verify_ids;
  std::string verify_reference;
  // Then the real-weights LoRA probe (backends/probe_weights.h) on layers 0-1 (or the one layer) of the
  // checkpoint over this text file, with probe.ranks ranks ("" = not run; the report says so). It runs
  // with probe.enabled false too (that switch is the proxy probes').
  std::string weights_text;
  // verify_ids, verify_reference and weights_text need model_path to be such a directory
  // (IsCheckpointDir): with a config or graph they are refused by Validate, not ignored.

  std::string out_dir;           // artifacts go here (created); required
  std::string templates_override;  // user JSON file with template overrides ("" = none)
  std::string templates_dir;     // template data dir ("" = $ONBOARD_TEMPLATES_DIR or built-in)

  ProbeSettings probe;
  bool generate_kernels = true;  // false: skip kernel generation/checking
  int max_rounds = 3;            // probe/adjust rounds, >= 1
  Thresholds thresholds;
  int threads = 2;               // worker threads for the plan search

  Status Validate() const;       // names the field and value on error
};

// ---- Events ---------------------------------------------------------------------------------
//
// Each event is a JSON object with at least {"type": ..., "ts": <epoch seconds>, "seq": <n>}:
//   {"type":"stage_started",  "stage":"plan", "round":0}
//   {"type":"stage_progress", "stage":"probe", "done":3, "total":12, "message":"step 3 loss 4.12"}
//   {"type":"stage_finished", "stage":"plan", "ok":true, "seconds":1.9, "summary":"..."}
//   {"type":"decision", "round":1, "rule":"expert_imbalance", "observed":{...}, "action":"...",
//    "changed":{...}}
//   {"type":"log", "level":"info"|"warn"|"error", "message":"..."}
//   {"type":"artifact", "name":"report.html", "path":"/out/report.html"}
//   {"type":"finished", "ok":true, "report":"/out/report.json"}  (last event of a run)
// Stage names: parse, templates, plan, kernels, probe, validate, adjust, report.

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Called from the orchestrator thread (and, for probe progress, possibly from a probe worker
  // thread, serialized by Emitter). Must not throw.
  virtual void OnEvent(const nlohmann::json& event) = 0;
};

// Discards everything.
class NullEventSink : public EventSink {
 public:
  void OnEvent(const nlohmann::json&) override {}
};

// Keeps every event (tests, and the report's stage timeline).
class CollectingEventSink : public EventSink {
 public:
  void OnEvent(const nlohmann::json& event) override;
  std::vector<nlohmann::json> events() const;

 private:
  mutable std::mutex mu_;
  std::vector<nlohmann::json> events_;
};

// Cooperative cancellation: set from any thread; the loop checks it between stages, between probe
// rounds and inside long stages, and returns a Status whose message starts with "cancelled".
// (core/cancel_token.h: the same type the service and the probe launcher use.)
using onboard::CancelToken;

// True for the Status RunOnboarding returns when the CancelToken fired.
bool IsCancelled(const Status& st);

// True when `path` is a directory holding *.safetensors or model.safetensors.index.json: a checkpoint
// stage "weights" loads (agent/orchestrator_weights.cpp).
bool IsCheckpointDir(const std::string& path);

// ---- Result ---------------------------------------------------------------------------------

struct StageTiming {
  std::string stage;             // parse, templates, plan, ...
  int round = 0;                 // probe/adjust round (0 for one-shot stages)
  double start_s = 0;            // seconds since the run started
  double seconds = 0;            // wall time of the stage
  bool ok = true;
  std::string summary;           // one line
};

struct RunResult {
  std::string out_dir;
  std::map<std::string, std::string> artifacts;  // "report.html" -> absolute path, "plan.json", ...
  nlohmann::json report;         // the content of report.json
  std::vector<StageTiming> timings;
  int rounds = 0;                // probe rounds run
  int decisions = 0;             // rules fired
  bool converged = true;         // last probe round passed validation
  bool plan_feasible = true;     // false: nothing fits; the report shows the closest plan (CLI exit 4)
  std::string summary;           // one line for the CLI / job list
};

// Runs the whole loop. Errors: bad request / unreadable model or topology (kBadInput/kNotFound),
// nothing fits (kInfeasible), cancelled (IsCancelled). Stage failures that the loop can recover
// from (a kernel check failing, a probe diverging) are decisions in the trace, not errors.
Expected<RunResult> RunOnboarding(const RunRequest& req, EventSink& sink, const CancelToken& cancel);

}  // namespace onboard::agent
