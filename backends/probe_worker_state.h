// INTERNAL to backends/ (includes LibTorch). One probe rank's pieces, as RunProbeWorker
// (probe_worker.cpp, the loop) puts them together:
//   ProbeGroups     probe_groups.cpp        rendezvous + the five process groups of the layout
//   WorkerState     probe_worker_state.cpp  layout, expert placement, seeded init + shards, AdamW state
//   TrainStep       probe_train_step.cpp    one optimizer step: micro-steps, gradient sums, AdamW, bias
//
// Ranks and groups (N = world, T = tp, F = fsdp, E = ep; TP innermost as in Megatron: rank
// r = d*T + t, TP rank t = r%T, data-parallel rank d = r/T of D = N/T; the groups below are
// over the data-parallel ranks d of one TP rank t; with T = 1, d = r):
//   tp group    {T*(r/T) .. +T}   heads / MLP widths / vocab split (probe_tp.h), same data
//   fsdp group  {F*(d/F) .. +F}   non-expert weights sharded, grads reduce-scattered
//   replicas    {d%F + j*F}       HSDP: shard grads all-reduced across fsdp groups (D/F of them)
//   ep group    {E*(d/E) .. +E}   routed experts partitioned, tokens exchanged all-to-all
//   ep replicas {d%E + j*E}       local experts' buffer sharded over them (D/E), FSDP-style: gathered
//                                 before use, grads reduce-scattered (torchtitan's dp_shard_mod_ep)
// Every TP group is one data-parallel rank: it takes batch/D of the global batch (generated
// identically on all), as micro_steps() micro-batches of micro_batch_size() sequences whose
// gradients accumulate.
// Units: element counts for buffers, bytes for RSS, seconds for times.
#pragma once

#include <torch/torch.h>

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/c10d_compat.h"
#include "backends/ordered_sum.h"
#include "backends/probe_data.h"
#include "backends/probe_schedule.h"
#include "backends/probe_tp.h"
#include "backends/proxy_model.h"

namespace onboard::backends {

struct UnitRunner;  // fsdp_unit.h

// One trainable or frozen flat buffer with its AdamW state.
struct Buffer {
  at::Tensor p;  // shard (dense/lora) or local experts (expert/expert_lora)
  at::Tensor m, v;
  // AdamW's decoupled decay applies to these [offset, offset + length) runs of p (matrices; not
  // norms or biases): a parameter group per slot, as torch.optim's, not a mask as large as p.
  std::vector<std::pair<int64_t, int64_t>> decay_runs;
  bool trainable = false;
  bool expert =
      false;  // sharded over the ep replicas (else: sharded over fsdp, replicated over its replicas)
  // TP (probe_tp.h), shards like p; undefined without TP: partial-gradient slots (summed over
  // the TP group; undefined too when there are none) and each element's grad-norm share.
  at::Tensor tp_partial, tp_share;
  // Redundant experts (probe_replicas.h), like p: 1 on each expert's first copy, 0 on the other
  // copies (the grad norm counts an expert once); undefined without replicas.
  at::Tensor replica_share;
};

struct UnitState {
  Buffer dense, lora, expert, expert_lora;
  // The four buffers in index order 0..3 = dense, lora, expert, expert_lora.
  std::array<Buffer*, 4> all() { return {&dense, &lora, &expert, &expert_lora}; }
};

// Step 2 of a rank: the rendezvous store and the layout's process groups, created in this order on
// every rank (the store keys depend on it). Not movable: the groups keep the store's address.
struct ProbeGroups {
  ProbeGroups(const std::string& master_addr, int64_t master_port, bool serve_store, const ProbeConfig& cfg,
              int64_t rank);
  Rendezvous store;
  Group world, fsdp, frep, ep, erep;
  Group tp;  // tensor parallelism (probe_tp.h)
  std::array<Group*, 6> all() { return {&world, &fsdp, &frep, &ep, &erep, &tp}; }
  // ---- pipeline parallelism (pp > 1): the links to the neighbouring stages of this data rank ----
  // pp_prev / pp_next: the pair groups {stage s-1, s} and {s, s+1} (pipeline order wraps around:
  // stage 0's prev is stage pp-1, used by interleaved schedules); null where the stage has none.
  // Pair group ranks: the lower stage of a pair is 0, except on the wrap pair {pp-1, 0} (pp-1 is 0).
  // pp == 2: prev and next are the one pair group {0, 1}.
  std::vector<std::unique_ptr<Group>> pp_links;
  Group* pp_prev = nullptr;
  Group* pp_next = nullptr;
  // ---- node-deduplicated dispatch (ep_dispatcher deepep, probe_node_dedup.h); null otherwise ----
  // ep_inter: the EP ranks with this rank's local index on each node; ep_intra: its node's EP ranks.
  std::unique_ptr<Group> ep_inter, ep_intra;

 private:
  void AddPipelineLinks(const std::string& master_addr, const ProbeConfig& cfg, int64_t r);
  void AddNodeDedupGroups(const std::string& master_addr, const ProbeConfig& cfg, int64_t r);
};

// local[u]: unit u is on pipeline stage `stage` (pp = 1: every unit); probe_pipeline.cpp.
std::vector<bool> PipelineLocalUnits(const ProbeConfig& c, int64_t layers, int64_t stage);

// Step 3 of a rank: everything the train step reads and updates. Not copyable or movable:
// `routing` points at `load` and `score_bias`.
struct WorkerState {
  WorkerState() = default;
  WorkerState(const WorkerState&) = delete;
  WorkerState& operator=(const WorkerState&) = delete;

  ProxySpec spec;
  ProbeConfig cfg;
  int64_t rank = 0, world = 1;
  // This rank's pipeline stage and data rank (ProbeConfig::stage_of / data_rank_of; pp = tp = 1:
  // stage 0, dp_rank = rank); local_unit[u]: unit u lives on this stage (pp = 1: every unit).
  int64_t stage = 0, dp_rank = 0;
  std::vector<bool> local_unit;
  at::Device dev{at::kCPU};
  int64_t baseline_rss = 0;  // RSS before the model was built, bytes
  std::vector<UnitLayout> units;
  MoeRouting routing;
  std::map<int64_t, std::vector<int64_t>> load;  // MoE layer -> tokens per expert, this step, this rank
  CoactivationRecorder coact;    // expert co-activation + tier traffic over the recorded steps, this rank
  ReplicaGradSync replica_sync;  // redundant experts (probe_replicas.h); unused without replicas
  // Aux-loss-free balancing (ProxySpec::balance_bias): per MoE layer, a selection bias per expert.
  std::map<int64_t, at::Tensor> score_bias;
  std::vector<UnitState> state;  // one per unit
  ProxyParamCounts counts;
  bool lora = false;
  int64_t base_steps = 0;  // LoRA base phase length (0 = none)
  double lora_scale = 0;   // alpha / rank in LoRA mode, else 0
  // Tensor parallelism: the TP group (set by the worker after the groups), rank, degree and the
  // local spec the units are built from and run with (== spec without TP).
  TpContext tp;
};

// Peak resident set size of this process (getrusage high-water mark), bytes.
int64_t PeakRssBytes();

// Step 3: layout, expert placement, seeded full init then shards (TP: this rank's slices of the
// full init), moved to st->dev. st->spec, cfg, rank, world and dev are set by the caller; `tp`
// is the TP group.
void InitWorkerState(Group& ep, Group& tp, WorkerState* st);

// Step 4a -> 4b (LoRA): freezes the trained base (dropping its AdamW state) and makes the adapters
// trainable.
void FreezeBaseForAdapters(WorkerState* st);

// One optimizer step of `phase` (its steps/warmup drive the lr schedule) on `data`, with adapter
// scale `lora_scale`. Returns this rank's step record (probe_train_step.cpp).
ProbeStep TrainStep(WorkerState& st, ProbeGroups& g, const ProbeData& data, const ProbeConfig& phase,
                    int64_t step, double lora_scale);

// Held-out evaluation of the current weights (ProbeData::GetHeldOut: text's held-out windows, the
// copy task's evaluation sequences), forward only, never trained on. Every rank calls it.
struct HeldOutResult {
  double loss = 0;      // nats per counted target, global over the ranks
  double accuracy = 0;  // exact-match fraction of the counted targets (argmax logit == target)
};
HeldOutResult HeldOutEval(WorkerState& st, ProbeGroups& g, const ProbeData& data, double lora_scale);

// Gradient sums of the step: [unit][buffer index 0..3] (probe_train_step.cpp).
using Accumulators = std::vector<std::array<TreeAccumulator, 4>>;
// After one micro-batch's backward: the gradients of units [begin, end) leave the buffers, HSDP
// replicas sum them (dense shards), and they go into `acc` (probe_train_step.cpp).
void PushMicroBatchGrads(WorkerState& st, ProbeGroups& g, Accumulators& acc, size_t begin, size_t end);
// `batch` moved to the rank's device in place, and `inputs`' targets / loss mask pointed into it
// (the caller keeps `batch` alive until after the backward); probe_train_step.cpp.
void BindBatch(const WorkerState& st, Batch* batch, UnitInputs* inputs);
// Unit u's runner (fsdp_unit.h) on this rank: TP-local spec, the fsdp / ep-replica groups, the
// recompute policies of its block kinds (ProbeConfig::recompute); probe_train_step.cpp.
void PrepareUnitRunner(WorkerState& st, ProbeGroups& g, size_t u, MoeRouting* routing, UnitInputs* inputs,
                       double scale, UnitRunner* r);

}  // namespace onboard::backends
