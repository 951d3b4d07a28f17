// Internal to the orchestrator and the report writers: everything one run has gathered so far.
// Not a public API (h7's service uses agent/orchestrator.h only).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/orchestrator.h"
#include "agent/plan_to_probe.h"
#include "agent/rules/rules.h"
#include "agent/trace.h"
#include "backends/hf_verify.h"
#include "backends/probe.h"
#include "backends/probe_weights.h"
#include "core/model_ir.h"
#include "core/topology.h"
#include "search/planner.h"
#include "templates/template_library.h"
#include "validators/kernel_check.h"

namespace onboard::agent {

struct PlanRound {
  int round = 0;
  std::string reason;            // "initial", "expert_imbalance", ...
  PlanRequest request;           // model omitted from reports
  SearchResult search;
};

struct ProbeRound {
  int round = 0;
  LoopKnobs knobs;               // what the probe ran with
  ProbeLayout layout;            // the plan scaled to the probe's ranks, factor by factor
  ProbeResult result;
  std::string log_dir;
  std::string error;             // the probe failed to run (rank died, timeout): no result
  std::vector<Decision> decisions;  // fired after this round
};

struct KernelStage {
  bool ran = false;
  std::string skipped_reason;    // when !ran
  std::vector<std::string> generated;  // kernel names, with source/manifest written
  std::vector<validators::KernelCheckRow> rows;
  std::vector<std::string> notes;
  std::string dir;               // out/kernels
};

// Stage "weights" (agent/orchestrator_weights.cpp): a checkpoint directory's safetensors loaded and
// its fp32 logits compared (report.json "weights", agent/report_weights.h).
struct WeightsStage {
  bool loaded = false;
  std::string reason;  // when !loaded: why (no safetensors, or the load's error)
  HfVerifyResult result;
  std::string reference;     // what the logits were compared with
  int64_t tp = 1, fsdp = 1;  // the plan's, for the per-rank bytes
  // The real-weights LoRA probe after the check (RunRequest::weights_text).
  bool probed = false;
  std::string probe_reason;  // when !probed: why
  WeightsProbeResult probe;
};

// The image probe (issue 12 item 6; agent/orchestrator_image.cpp): one extra full-mode probe of the
// proxy's vision tower on the image task (backends/probe_image.h) in round 1, for a model with a
// vision tower. ran = false: the model has none, or probing is off (no report section).
struct ImageProbe {
  bool ran = false;
  ProbeResult result;
  std::string log_dir;
  std::string error;  // the probe failed to run (rank died, timeout, refused): no result
  // The image path learned: the probe ran and its learning verdict is converged.
  bool learned() const { return ran && error.empty() && result.convergence == "converged"; }
};

struct RunState {
  RunRequest req;
  ModelIR model;
  ModelStats stats;
  Topology topology;
  TemplateLibrary library;
  TemplateMatch match;
  std::vector<PlanRound> plans;  // initial first
  KernelStage kernels;
  std::vector<ProbeRound> probes;
  WeightsStage weights;
  ImageProbe image;
  LoopKnobs knobs;
  Trace trace;
  std::map<std::string, std::string> artifacts;  // name -> path
  std::vector<std::string> notes;                // loop-level notes for the report
  const PlanRound* final_plan() const { return plans.empty() ? nullptr : &plans.back(); }
};

// Thread-safe event emission with a sequence number and a timestamp.
class Emitter {
 public:
  explicit Emitter(EventSink& sink) : sink_(sink), t0_(std::chrono::steady_clock::now()) {}
  void Emit(nlohmann::json event);
  void Log(const std::string& level, const std::string& message);
  double Elapsed() const;        // seconds since the run started

 private:
  EventSink& sink_;
  std::mutex mu_;
  int64_t seq_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

double NowEpochSeconds();

}  // namespace onboard::agent
