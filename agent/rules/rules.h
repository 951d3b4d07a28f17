// Agent rules: what the loop does when an observation crosses a threshold. Each rule is data (name,
// family, what it watches, the threshold it compares against) plus one small function that reads
// the round's evidence, and, when it fires, changes the loop's knobs and returns a Decision saying
// what was observed and what changed. The table is agent/rules/rules_table.cpp; one file per family:
//   rules_divergence.cpp       probe diverged -> lower LR, tighten clipping, re-probe
//   rules_expert_balance.cpp   expert imbalance -> re-place experts from measured loads, re-probe
//   rules_expert_coactivation.cpp  multi-node probe -> co-selected experts onto one node, re-probe
//   rules_expert_routing.cpp   multi-node probe -> re-plan the expert a2a with the measured nodes/token
//   rules_expert_overlap.cpp   exposed expert all-to-all high -> overlap it with the shared expert, re-probe
//   rules_comm.cpp             comm share high -> calibrate the cost model from the probe, re-plan
//   rules_memory.cpp           measured memory over prediction -> more recompute / sharding, re-plan
//   rules_kernel_fallback.cpp  a kernel check failed -> reference operator
//   rules_not_learned.cpp      probe below its task's learning bar -> more steps (then higher LR)
// Units: seconds, bytes, tokens; ratios are dimensionless.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/rules/thresholds.h"
#include "backends/probe.h"
#include "backends/probe_step_series.h"
#include "search/planner.h"
#include "validators/kernel_check.h"

namespace onboard::agent {

// What the rules may change. The orchestrator turns these into the next ProbeConfig/PlanRequest.
struct LoopKnobs {
  // probe training: the next round's values. Their defaults are the request's (agent::ProbeSettings
  // learning_rate, grad_clip), copied in when the loop starts; the rules change them from there.
  double learning_rate = 0;
  double grad_clip = 0;
  double probe_steps_scale = 1.0;       // probe steps = ProbeSettings::steps x this (learning rule)
  int probe_step_doublings = 0;         // times the learning rule raised it (bounded)
  // expert placement (expert -> EP rank; empty = contiguous) and balancing
  std::vector<int64_t> expert_placement;  // one block of num_experts per MoE layer, or one for all
  std::vector<int64_t> expert_phy2log;    // redundant experts (ProbeConfig::expert_phy2log); empty = none
  bool bias_balancing = false;          // aux-loss-free bias balancing recommended in the plan
  double expert_imbalance = 1.0;        // max/mean over EP ranks fed to the planner
  // expert routing (rules_expert_routing.cpp): the probe's measured nodes a token's top-k experts span,
  // transferred to the plan's nodes (PlanRequest::expert_nodes_per_token); 0 = the request's value
  double expert_nodes_per_token = 0;
  // expert overlap (rules_expert_overlap.cpp): the probe's dispatch / combine all-to-alls overlapped with
  // the shared expert's compute (ProbeConfig::moe_overlap)
  bool moe_overlap = false;
  // cost model
  CostCalibration calibration;
  bool calibrated = false;
  // memory: the plan search's constraints (recompute, memory_margin, with PlanConstraints' defaults),
  // which the memory rule tightens; the plan of each round is searched under these.
  PlanConstraints plan_constraints;
  // kernels: kernel -> reference operator; a "kda..." entry runs the probe's KDA on the LibTorch
  // reference ops (ProbeConfig::kda_kernel = "torch")
  std::map<std::string, std::string> kernel_fallbacks;
  // what the next round must redo
  bool replan = false;
  bool reprobe = false;
};

// Everything a rule can look at for one round. Pointers are null when the stage did not run.
struct RoundEvidence {
  int round = 0;
  const ProbeResult* probe = nullptr;
  const PlanCandidate* plan = nullptr;                         // chosen plan for the full model
  const PlanRequest* plan_request = nullptr;                   // the request it was searched under, with
                                                               // the model (rules that re-cost it)
  const std::vector<validators::KernelCheckRow>* kernel_rows = nullptr;
  std::map<std::string, std::string> kernel_reference_ops;     // kernel name -> template reference_op
  std::string target_device;     // the plan's device ("Ascend-950DT"); "" = same hardware as the probe
};

struct Decision {
  int round = 0;
  std::string rule;                  // rule name, e.g. "probe_diverged"
  std::string family;                // divergence | learning | expert_balance | comm | memory | kernels
  nlohmann::json observed;           // the numbers the rule read
  std::string threshold;             // "last/first loss > 1.50"
  std::string action;                // one sentence: what the loop does now
  nlohmann::json changed;            // {"learning_rate": [old, new], ...}
  nlohmann::json ToJson() const;
};

struct Rule {
  std::string name;
  std::string family;
  std::string watches;               // the observation, in words
  std::string threshold_field;       // Thresholds member it compares against
  // Returns a decision and updates `knobs` when the rule fires; nullopt otherwise.
  std::function<std::optional<Decision>(const RoundEvidence&, const Thresholds&, LoopKnobs&)> fire;
};

// ---- Rule functions (one per file) ----
std::optional<Decision> RuleProbeDiverged(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleExpertImbalance(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleExpertCoactivation(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleExpertRouting(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleExpertOverlap(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleCommShare(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleMemoryOverPrediction(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleKernelFallback(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);
std::optional<Decision> RuleProbeNotLearned(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& k);

// The table, in evaluation order (kernels first, divergence before balance/comm/memory: a diverged
// probe's loads and timings are not trusted).
const std::vector<Rule>& RuleTable();

// Runs every rule on one round's evidence; returns the decisions that fired, in table order.
std::vector<Decision> ApplyRules(const RoundEvidence& ev, const Thresholds& th, LoopKnobs& knobs);

// rules_expert_routing.cpp: the probe's routing concentration c = (D_p - 1) / (U(N_p, k_p) - 1) applied at
// the plan's N nodes and top-k k: 1 + c (U(N, k) - 1), capped at min(k, N) and max_route_nodes (0 = off).
// Nodes per token.
double TransferNodesPerToken(double concentration, double plan_nodes, int64_t plan_top_k,
                             int64_t max_route_nodes);

// ---- Observations shared by rules and reports ----

// Loss-curve summary for reports and traces (the divergence verdict is ObserveDivergence's):
// non-finite losses, and the mean of the last window over the first window.
struct LossTrend {
  bool nonfinite = false;
  double first_mean = 0;             // mean loss of the first window (nats)
  double last_mean = 0;              // mean loss of the last window (nats)
  double ratio = 0;                  // last_mean / first_mean
  double max_grad_norm = 0;
  int window = 0;                    // steps per window
};
LossTrend ComputeLossTrend(const ProbeResult& p);

// Expert loads, step times and losses of a probe: backends/probe_step_series.h; their
// observations (rank balance, comm share, divergence): validators/probe_observations.h.

// ObserveCommShare of the probe's steps; a report of zeros when no step has a time.
CommShareReport ProbeCommShare(const ProbeResult& p, const ObservationThresholds& th);
// Max over steps of peak RSS minus the runtime's RSS before the model was built, bytes.
double MeasuredPeakBytes(const ProbeResult& p);

}  // namespace onboard::agent
