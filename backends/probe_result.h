// What a probe measured (backends/probe.h): per-step records, collective times, the cost model's
// prediction beside the measurement, loss parity and expert co-activation. Torch-free.
// Units: seconds (s), bytes, tokens, FLOPs; loss in nats per predicted token; lr dimensionless.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backends/probe_coactivation.h"
#include "backends/probe_config.h"
#include "backends/proxy_spec.h"
#include "core/status.h"

namespace onboard {

// ---- Results ----

// Seconds spent waiting on each collective kind during one step (this rank, or max over ranks).
struct CollectiveTimes {
  double all_gather_s = 0;      // FSDP parameter all-gathers (forward + backward re-gather)
  double reduce_scatter_s = 0;  // FSDP gradient reduce-scatters
  double all_to_all_s = 0;      // EP dispatch + combine (incl. the count exchange): host blocked (exposed)
  // Asynchronous EP all-to-alls (ProbeConfig::moe_overlap): seconds the collective was in flight
  // while the host computed (post returned -> wait entered, or completed if sooner); not in total().
  double all_to_all_hidden_s = 0;
  double all_reduce_s = 0;  // grad-norm / loss / replica gradient all-reduces
  // Tensor parallelism (backends/probe_tp.h), over the TP group only:
  double tp_all_reduce_s = 0;      // row-parallel outputs, input grads, CE sums, partial grads
  double tp_all_gather_s = 0;      // CE max logit, the accuracy's full logits; SP region inputs
  double tp_reduce_scatter_s = 0;  // sequence parallelism: region outputs, input grads
  double tp_total() const { return tp_all_reduce_s + tp_all_gather_s + tp_reduce_scatter_s; }
  // ---- pipeline parallelism: point-to-point between stages (backends/probe_pipeline.h) ----
  double pp_send_s = 0;  // posting activation / gradient sends + waiting for them to complete
  double pp_recv_s = 0;  // blocked in receives (includes waiting for the other stage: bubble)
  double pp_total() const { return pp_send_s + pp_recv_s; }
  // ---- end pipeline parallelism ----
  double total() const {
    return all_gather_s + reduce_scatter_s + all_to_all_s + all_reduce_s + tp_total() + pp_total();
  }
};

struct ProbeStep {
  int64_t step = 0;
  double loss = 0;       // global mean over predicted tokens, nats
  double grad_norm = 0;  // global L2 norm before clipping
  double lr = 0;
  // Exact-match accuracy of the step's counted targets (copy: the copied half), fraction in [0, 1];
  // NaN when the worker did not record it.
  double accuracy = 0;
  double step_s = 0;           // wall time of the step (max over ranks)
  double tokens_per_s = 0;     // global tokens / step_s
  CollectiveTimes comm;        // max over ranks
  double compute_s = 0;        // step_s - comm.total() on the slowest rank
  int64_t peak_rss_bytes = 0;  // max over ranks of the RSS high-water mark (getrusage)
  // Max over ranks of the step's live-tensor high-water mark: bytes of live CPU tensor storages
  // (tracking allocator, backends/tensor_memory_compat.h), not RSS; 0 = not measured (CUDA).
  int64_t live_peak_bytes = 0;
  // expert_load[l][e]: tokens routed to expert e in MoE layer l (global, forward pass only).
  std::vector<std::vector<int64_t>> expert_load;
  // indexer_kl[l]: DSA indexer KL(main attention || indexer) of the l-th MLA layer with an indexer,
  // nats per counted token of the global batch (what ProxySpec::indexer_kl_weight multiplies).
  std::vector<double> indexer_kl;
  // ---- pipeline parallelism (pp > 1; else 0) ----
  // Bubble: idle share of the rank's pipeline span (first op start until every stage is done: sends
  // completed, then a world barrier) not spent in its forward/backward ops, from steady_clock timestamps; max
  // over ranks. pp_bubble_by_rank: each rank's.
  double pp_bubble = 0;
  std::vector<double> pp_bubble_by_rank;
  // ---- end pipeline parallelism ----
};

// Comparison of the measurement with the cost model (search/planner.h EvaluatePlan) for the same
// proxy layout on a topology of this machine (measured GEMM FLOP/s and loopback bandwidth).
// One collective kind measured beside the cost model's term for it (backends/probe_comparison.cpp
// holds the table of kinds: one row per kind, so new kinds slot in there).
struct CollectiveComparison {
  std::string kind;        // "fsdp_ag_rs", "ep_a2a", "all_reduce", ...
  std::string term;        // cost-model time term it is set beside ("comm.fsdp")
  double measured_s = 0;   // per step: mean over the steps after the first, max over ranks
  double predicted_s = 0;  // the term's total (exposed + overlapped) seconds per step
  double ratio = 0;        // measured / predicted (0 when nothing predicted)
};

// The memory model's per-rank breakdown (search/memory_model.cpp) for the probe's layout, in the
// probe's dtype, beside the measured live-tensor peak.
struct MemoryComparison {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, a2a_buffers = 0, workspace = 0;
  double predicted = 0;    // sum of the above
  double measured = 0;     // max over ranks and steps of the live-tensor peak
  double ratio = 0;        // measured / predicted
  std::string dtype_note;  // how bf16 model terms were converted to the probe's dtype
};

struct ProbePrediction {
  bool available = false;
  std::vector<CollectiveComparison> collectives;
  MemoryComparison memory;
  std::string topology;     // how the topology was obtained
  double step_s = 0;        // predicted
  double memory_bytes = 0;  // predicted per-rank peak
  double comm_s = 0;        // predicted exposed communication
  std::vector<std::string> notes;
  // Pipeline bubble share of the step the cost model gives for this layout (search/cost_model.cpp:
  // bubble = (pp-1)/v * t_mb, share = bubble / (m * t_mb + bubble) = (pp-1) / (v*m + pp - 1)); 0 = no
  // pipeline.
  double pp_bubble = 0;
};

// Kernel loss parity of one generated kernel against its reference ops (validators/loss_parity.h).
struct ProbeLossParity {
  std::string kernel;  // "kda"
  std::string proxy;   // the parity proxy's pattern ("K K | dense,dense")
  bool pass = false;
  int64_t steps = 0;
  double max_rel = 0;  // max over steps of |generated - reference| / |reference|
  int64_t worst_step = -1;
  double tolerance = 0;  // relative, per step
  std::string message;   // one line with the numbers
  // Forward calls of the KDA core in the generated run, rank 0 (a generated run whose kernel fell
  // back to the torch ops compares torch with torch; the report says so).
  int64_t generated_kernel_calls = 0;
  int64_t torch_op_calls = 0;
  std::vector<double> generated, reference;  // the two loss curves, nats
};

// How often this probe's KDA core ran each implementation (rank 0, forward calls; backward
// always differentiates the torch ops): shows what ProbeConfig::kda_kernel really ran.
struct KdaCalls {
  int64_t generated = 0;
  int64_t torch = 0;
  std::string fallback_reason;  // why a generated request ran torch ops ("" = none)
};

struct ProbeResult {
  ProxySpec spec;
  ProbeConfig config;
  ProxyParamCounts params;
  std::vector<ProbeStep> steps;
  std::string task_floor;    // "copy task: floor 0 nats; no-copy baseline ln(32)=3.47 nats"
  double floor_nats = 0;     // known floor (NaN for text)
  double baseline_nats = 0;  // no-learning loss: unigram entropy of the targets
  // Skill metric (copy: exact-match accuracy on the copied half, mean of the last steps; NaN when
  // the task has none) and the learning bar it was judged by (validators/learning_verdict.h).
  std::string skill_metric;  // "copy_accuracy" | "" (text)
  double skill = 0;
  double skill_target = 0;  // min accuracy
  double final_loss = 0;    // mean of the last steps' losses
  double loss_target = 0;   // max loss for "converged"
  // Text task (backends/probe_text_split.h; NaN for copy): the loss on the held-out split, which no
  // step trained on, and its baselines there: unigram (= baseline_nats) and the best interpolated
  // bigram, which the held-out loss must be below (skill_metric "held_out_loss").
  double held_out_loss = std::numeric_limits<double>::quiet_NaN();
  double bigram_nats = std::numeric_limits<double>::quiet_NaN();
  // Copy task (issue 12): the final weights' held-out evaluation (backends/probe_data.h
  // kCopyEvalSequences), which the verdict judges; held_out_loss is its loss. last_steps_accuracy:
  // the mean of the last LearningCriteria::window training steps' accuracies, shown beside it.
  double held_out_accuracy = std::numeric_limits<double>::quiet_NaN();
  int64_t held_out_tokens = 0;  // counted targets of the held-out evaluation
  double last_steps_accuracy = std::numeric_limits<double>::quiet_NaN();
  ProbePrediction prediction;
  int64_t baseline_rss_bytes = 0;             // max over ranks of RSS before the model was built (runtime)
  std::vector<int64_t> rank_live_peak_bytes;  // per rank: max over steps of its live-tensor peak
  std::string backend;                        // c10d backend of the world group: "gloo" | "nccl" | "local"
  std::string torch_version;                  // LibTorch the workers were built against
  // Validator verdicts (validators/convergence.h, validators/probe_checks.h), one line each.
  // "converged" | "not_learned" | "diverged" | "nan" | "plateau" | "not_converged"
  std::string convergence;
  std::vector<std::string> checks;  // human-readable lines, first = convergence
  std::string out_dir;
  double wall_s = 0;
  // Expert co-activation and tier traffic over the recorded steps, summed over ranks (issue 18).
  ProbeCoactivation coactivation;
  // Kernel loss parity (issue 12): one entry per generated kernel compared; empty = not run
  // (ProbeConfig::loss_parity_steps = 0, or the proxy has no KDA layer).
  std::vector<ProbeLossParity> loss_parity;
  KdaCalls kda_calls;  // what the KDA layers of this probe ran (issue 12)
};

}  // namespace onboard
