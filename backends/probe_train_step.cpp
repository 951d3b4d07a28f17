// TrainStep: one optimizer step of a probe rank (probe_worker_state.h), in this order:
//   micro-steps     data rank r's micro-step i takes global micro-batch j = i*N + r (N data-parallel
//                   ranks; TP ranks share their data rank's micro-batches) (micro_batch sequences
//                   from j*micro_batch); forward + backward, FSDP reduce-scatters each unit's shard
//                   gradient over the fsdp group, experts sum their EP sources' gradients (both in
//                   the canonical pairwise order of ordered_sum.h); HSDP replicas sum with an
//                   ordered all-reduce; the micro-step's gradient goes into a TreeAccumulator, so the
//                   N micro-batches of a micro-step form one aligned block of the one-process tree
//   gradient norm   global L2 norm from exact integer bins of the fp32 squares, each element counted
//                   once (exact_sum.h: bit-identical across layouts), loss and accuracy over the world
//   AdamW           warm-up + cosine lr (probe_schedule.h), global-norm clipping, decoupled decay on the
//   local shards balancing bias  bias += balance_rate * sign(mean - load) from the global tokens per expert
// Units: loss in nats per counted token; lr dimensionless; seconds; bytes.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <fstream>

#include "backends/exact_sum_torch.h"
#include "backends/fsdp_unit.h"
#include "backends/ordered_sum.h"
#include "backends/probe_controls.h"
#include "backends/probe_pipeline.h"
#include "backends/probe_schedule.h"
#include "backends/probe_worker_state.h"
#include "backends/tensor_memory_compat.h"

namespace onboard::backends {
namespace {

void AdamW(Buffer& b, const ProbeConfig& c, double lr, int64_t step, double clip_coef) {
  if (!b.trainable || b.p.numel() == 0) return;
  at::NoGradGuard ng;
  at::Tensor g = b.p.grad().defined() ? b.p.grad() * clip_coef : at::zeros_like(b.p);
  if (!b.m.defined()) {
    b.m = at::zeros_like(b.p);
    b.v = at::zeros_like(b.p);
  }
  b.m.mul_(c.beta1).add_(g, 1 - c.beta1);
  b.v.mul_(c.beta2).addcmul_(g, g, 1 - c.beta2);
  const double bc1 = 1 - std::pow(c.beta1, step + 1), bc2 = 1 - std::pow(c.beta2, step + 1);
  at::Tensor update = (b.m / bc1) / ((b.v / bc2).sqrt() + c.adam_eps);
  // Decoupled decay on the matrices' runs (torch's AdamW: p *= 1 - lr wd), the factor rounded in
  // the buffer's precision (fp64 probes: double; otherwise fp32, as the ops on a fp32 tensor do).
  const double lw = lr * c.weight_decay;
  const double keep = b.p.scalar_type() == at::kDouble ? 1.0 - lw : 1.0f - static_cast<float>(lw);
  if (c.weight_decay != 0)
    for (const auto& [offset, length] : b.decay_runs) b.p.narrow(0, offset, length).mul_(keep);
  b.p.add_(update, -lr);
  b.p.mutable_grad() = at::Tensor();
}

// fn(unit, buffer index 0..3 = dense, lora, expert, expert_lora, buffer) over trainable buffers.
template <typename Fn>
void ForEachTrainable(std::vector<UnitState>& state, Fn&& fn) {
  for (size_t u = 0; u < state.size(); ++u) {
    const std::array<Buffer*, 4> bufs = state[u].all();
    for (size_t k = 0; k < 4; ++k)
      if (bufs[k]->trainable && bufs[k]->p.numel() > 0) fn(u, k, bufs[k]);
  }
}

}  // namespace

void BindBatch(const WorkerState& st, Batch* batch, UnitInputs* inputs) {
  if (!st.dev.is_cpu())
    *batch = {batch->tokens.to(st.dev), batch->targets.to(st.dev), batch->mask.to(st.dev),
              batch->images.defined() ? batch->images.to(st.dev) : batch->images};
  inputs->targets = &batch->targets;
  inputs->loss_mask = &batch->mask;
  inputs->images = batch->images.defined() ? &batch->images : nullptr;
}

void PrepareUnitRunner(WorkerState& st, ProbeGroups& g, size_t u, MoeRouting* routing, UnitInputs* inputs,
                       double scale, UnitRunner* r) {
  *r = {&st.tp.local, &st.units[u], &g.fsdp, &g.erep, routing, inputs, scale};
  if (r->unit->kind != UnitKind::kLayer) return;
  // The recompute policies of a layer unit's token-mixer and channel kinds (ProbeConfig::recompute).
  const size_t l = static_cast<size_t>(r->unit->layer);
  r->mixer = st.cfg.recompute_for(ProxyMixerKind(st.spec, l));
  r->channel = st.cfg.recompute_for(ProxyChannelKind(st.spec, l));
}

namespace {

// Step 1 helper: the forward of every unit on `batch` (moved to the rank's device in place);
// returns the scalar loss (sum over counted tokens x inputs.inv_global_tokens). `inputs` points
// into `batch`, and FSDP's backward recomputes the forward: the caller keeps `batch` alive until
// after the backward.
// held (optional): per unit, the live-tensor bytes its forward left alive (WriteMemoryTerms),
// read where every collective of the unit has been waited and released (c10d_compat.cpp Wait).
at::Tensor ForwardLoss(WorkerState& st, ProbeGroups& g, Batch& batch, double scale, UnitInputs& inputs,
                       std::vector<UnitRunner>& runners, std::vector<int64_t>* held = nullptr) {
  BindBatch(st, &batch, &inputs);
  at::Tensor x = batch.tokens;
  for (size_t u = 0; u < st.units.size(); ++u) {
    PrepareUnitRunner(st, g, u, &st.routing, &inputs, scale, &runners[u]);
    UnitState& s = st.state[u];
    const int64_t before = LiveTensorBytes();
    x = RunFsdpUnit(&runners[u], x, s.dense.p, s.lora.p, s.expert.p, s.expert_lora.p);
    if (held != nullptr) held->push_back(LiveTensorBytes() - before);
  }
  return x;
}

// Step 1: the rank's micro-steps, forward + backward, gradients into `acc`. Returns the sum of the
// fp32 micro-batch losses (exact in fp64, any order).
double RunMicroSteps(WorkerState& st, ProbeGroups& g, const ProbeData& data, const ProbeConfig& phase,
                     int64_t step, double scale, UnitInputs& inputs, Accumulators& acc,
                     std::vector<int64_t>* held) {
  const int64_t N = st.cfg.data_ranks(), r = st.dp_rank;
  const int64_t mb = st.cfg.micro_batch_size(), micro_steps = st.cfg.micro_steps();
  std::vector<UnitRunner> runners(st.units.size());
  double local_loss = 0;
  for (int64_t i = 0; i < micro_steps; ++i) {
    ApplyControl(phase, &phase != &st.cfg, step, i * N + r, &inputs, &st.routing);  // --control
    Batch batch = data.Get(step, (i * N + r) * mb, mb);
    at::Tensor x =
        ForwardLoss(st, g, batch, scale, inputs, runners, i == 0 && st.dev.is_cpu() ? held : nullptr);
    local_loss += x.item<double>();
    x.backward();
    PushMicroBatchGrads(st, g, acc, 0, st.units.size());
  }
  return local_loss;
}

}  // namespace

void PushMicroBatchGrads(WorkerState& st, ProbeGroups& g, Accumulators& acc, size_t begin, size_t end) {
  ForEachTrainable(st.state, [&](size_t u, size_t k, Buffer* b) {
    if (u < begin || u >= end) return;
    at::Tensor grad = b->p.grad().defined() ? b->p.grad() : at::zeros_like(b->p);
    b->p.mutable_grad() = at::Tensor();
    // Dense shards: HSDP replicas sum here. Expert shards were already reduce-scattered over
    // the ep replicas in the unit's backward.
    if (!b->expert) grad = TpSumPartialGrads(st.tp, b->tp_partial, grad);  // TP: partial slots (probe_tp.h)
    if (!b->expert && g.frep.size() > 1) grad = g.frep.AllReduceSumOrdered(grad);
    acc[u][k].Push(grad);
  });
}

namespace {

// Step 2 helper: the step's gradients onto the buffers; returns this rank's exact bins of the squared
// global grad norm (exact_sum.h): integer bins, summed over the world in any order, so the norm is
// bit-identical across layouts whose gradients are. Each element is counted once, by its canonical
// owner: dense / LoRA shards on the first data-parallel replica (data rank < fsdp; HSDP replicas hold
// the same shard), their slots every TP rank holds on TP rank 0 (tp_share < 1; split slots on every
// TP rank), routed experts on TP rank 0 when each TP rank holds them whole (etp = 1), redundant
// experts on their first copy (replica_share).
at::Tensor TakeGradients(WorkerState& st, Accumulators& acc) {
  const bool first_replica = st.dp_rank < st.cfg.fsdp_degree(), tp_first = st.tp.rank == 0;
  at::Tensor bins = at::zeros({kExactBins}, at::TensorOptions().dtype(at::kLong).device(st.dev));
  ForEachTrainable(st.state, [&](size_t u, size_t k, Buffer* b) {
    at::Tensor grad = acc[u][k].Take();
    b->p.mutable_grad() = grad;
    at::Tensor counted;  // undefined: every element of this rank's buffer
    if (b->expert) {
      if (st.cfg.etp_degree() == 1 && !tp_first) return;
      counted = b->replica_share;
    } else {
      if (!first_replica) return;
      if (b->tp_share.defined() && !tp_first) counted = b->tp_share >= 1;
    }
    bins.add_(ExactSquareBins(grad, counted).to(bins.device()));
  });
  return bins;
}

// Step 4: balancing bias from the step's global tokens per expert (exact integer sums over all
// ranks): bias += balance_rate * sign(mean - load), so under-loaded experts become likelier picks.
void UpdateBalanceBias(WorkerState& st, Group& world) {
  if (st.score_bias.empty()) return;
  at::Tensor sum = at::zeros({static_cast<int64_t>(st.score_bias.size()), st.spec.num_experts}, at::kDouble);
  int64_t i = 0;
  for (auto& [layer, bias] : st.score_bias) {
    auto it = st.load.find(layer);
    if (it != st.load.end()) sum[i].copy_(at::tensor(it->second, at::kLong).to(at::kDouble));
    ++i;
  }
  world.AllReduceSum(sum);
  i = 0;
  for (auto& [layer, bias] : st.score_bias) {
    at::Tensor l = sum[i++];
    bias.add_(at::sign(l.mean() - l).to(at::kFloat), st.spec.balance_rate);
  }
}

// Step 5: this rank's record of the step: loss, grad norm, lr and accuracy are global (reduced);
// times, memory, expert load and indexer KL are this rank's (MergeRankResults combines the ranks).
ProbeStep StepRecord(const WorkerState& st, int64_t step, double loss, double gnorm, double lr,
                     double accuracy, double step_s, const std::map<int64_t, double>& indexer_kl) {
  ProbeStep s;
  s.step = step;
  s.loss = loss;
  s.grad_norm = gnorm;
  s.lr = lr;
  s.accuracy = accuracy;
  s.step_s = step_s;
  s.comm = CommClock();
  s.compute_s = step_s - s.comm.total();
  s.tokens_per_s = step_s > 0 ? static_cast<double>(st.cfg.batch * st.cfg.seq) / step_s : 0;
  s.peak_rss_bytes = PeakRssBytes();
  s.live_peak_bytes = st.dev.is_cpu() ? LiveTensorPeakBytes() : 0;              // CPU storages only
  for (const auto& [layer, counts] : st.load) s.expert_load.push_back(counts);  // MoE layers in order
  for (const auto& [layer, v] : indexer_kl) s.indexer_kl.push_back(v);          // MLA layers in order
  return s;
}

// Step 6 (memory terms, issue 17): this rank's live-tensor bytes at fixed points of the step, one
// JSON line per step in OUT_DIR/rank<r>.memory.jsonl (bench_probe_memory sets them beside the memory
// model's terms): live_start_bytes (what persists: weight shards, optimizer moments), live_peak_bytes
// and unit_held_bytes[u] (what unit u's forward left alive: embed, layers, head; first micro-step).
// CPU, pp = 1 only (a pipeline stage holds several micro-batches); step 0 truncates the file.
void WriteMemoryTerms(const WorkerState& st, int64_t step, int64_t live_start, int64_t peak,
                      const std::vector<int64_t>& unit_held) {
  if (!st.dev.is_cpu() || st.cfg.pp_degree() > 1 || st.cfg.out_dir.empty()) return;
  std::ofstream f(st.cfg.out_dir + "/rank" + std::to_string(st.rank) + ".memory.jsonl",
                  step == 0 ? std::ios::trunc : std::ios::app);
  f << "{\"step\": " << step << ", \"live_start_bytes\": " << live_start << ", \"live_peak_bytes\": " << peak
    << ", \"unit_held_bytes\": [";
  for (size_t u = 0; u < unit_held.size(); ++u) f << (u ? ", " : "") << unit_held[u];
  f << "]}\n";
}

}  // namespace

ProbeStep TrainStep(WorkerState& st, ProbeGroups& g, const ProbeData& data, const ProbeConfig& phase,
                    int64_t step, double scale) {
  CommClock() = CollectiveTimes{};
  ResetLiveTensorPeak();
  const int64_t live_start = LiveTensorBytes();  // what persists between steps
  std::vector<int64_t> unit_held;
  st.load.clear();
  const auto t0 = std::chrono::steady_clock::now();
  UnitInputs inputs;
  std::map<int64_t, double> indexer_kl;  // MLA layer -> KL(attention || indexer), summed over micro-steps
  inputs.indexer_kl = &indexer_kl;
  inputs.tp = &st.tp;  // tensor parallelism (probe_tp.h); inactive when tp = 1
  double correct = 0;  // exact-match counted targets on this rank (integer-valued: any order)
  inputs.correct = &correct;
  inputs.inv_global_tokens = 1.0 / static_cast<double>(data.CountedTokensPerStep());
  Accumulators acc(st.units.size());
  // Step 1: micro-steps (pp > 1: the pipeline schedule's, probe_pipeline.h).
  PipelineStepResult pipe;
  if (st.cfg.pp_degree() > 1)
    pipe = RunPipelineMicroSteps(st, g, data, phase, step, scale, inputs, acc);
  else
    pipe.local_loss = RunMicroSteps(st, g, data, phase, step, scale, inputs, acc, &unit_held);
  double local_loss = pipe.local_loss;
  if (st.tp.rank > 0) {  // TP: the data rank's loss, hits, expert load and KL counted once (TP rank 0)
    local_loss = 0;
    correct = 0;
    for (auto& [layer, counts] : st.load) std::fill(counts.begin(), counts.end(), 0);
    for (auto& [layer, v] : indexer_kl) v = 0;
  }
  // Step 2: the step's gradients, then the global grad norm, loss and accuracy.
  at::Tensor sq_bins = TakeGradients(st, acc);
  g.world.AllReduceSum(sq_bins);  // integers: exact in any order (exact_sum.h)
  const at::Tensor sq_all = sq_bins.cpu().contiguous();
  const double gnorm = std::sqrt(ExactSquareBinsValue(sq_all.data_ptr<int64_t>()));
  at::Tensor red = at::tensor({local_loss, correct}, at::kDouble).to(st.dev);
  g.world.AllReduceSum(red);
  const double loss = red[0].item<double>();
  const double accuracy = red[1].item<double>() / static_cast<double>(data.CountedTokensPerStep());
  // Step 3: AdamW on the local shards, with global-norm clipping.
  const double clip_coef = (phase.clip > 0 && gnorm > phase.clip) ? phase.clip / (gnorm + 1e-6) : 1.0;
  const double lr = LearningRate(phase, step);
  for (UnitState& s : st.state)
    for (Buffer* b : s.all()) AdamW(*b, phase, lr, step, clip_coef);
  // Step 4: balancing bias.
  UpdateBalanceBias(st, g.world);
  // Step 5: the record.
  const double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ProbeStep record = StepRecord(st, step, loss, gnorm, lr, accuracy, step_s, indexer_kl);
  record.pp_bubble = pipe.bubble;
  if (&phase == &st.cfg) WriteMemoryTerms(st, step, live_start, record.live_peak_bytes, unit_held);
  return record;
}

HeldOutResult HeldOutEval(WorkerState& st, ProbeGroups& g, const ProbeData& data, double scale) {
  at::NoGradGuard no_grad;
  // Step 1: data rank d's contiguous block [d*W/D, (d+1)*W/D) of the W held-out rows (W does not
  // depend on the layout: probe_data.h; its TP ranks and pipeline stages run the same ones), padded
  // to ceil(W/D) rows with uncounted rows and run in chunks of max(micro-batch, kHeldOutChunk) rows
  // (forward only: no activations kept for a backward, so a chunk may exceed the micro-batch; fewer
  // chunks = fewer FSDP gathers): the same forwards and shapes on every rank, so the units'
  // collectives and the stages' sends pair up. The expert co-activation stays that of the training
  // steps (the evaluation is not recorded).
  constexpr int64_t kHeldOutChunk = 128;
  const int64_t W = data.HeldOutWindows(), D = st.cfg.data_ranks();
  const int64_t mb = std::max(st.cfg.micro_batch_size(), kHeldOutChunk);
  const int64_t first = st.dp_rank * W / D, end = (st.dp_rank + 1) * W / D, per_rank = (W + D - 1) / D;
  UnitInputs inputs;
  std::map<int64_t, double> indexer_kl;
  double correct = 0;
  inputs.indexer_kl = &indexer_kl;
  inputs.correct = &correct;
  inputs.tp = &st.tp;
  inputs.inv_global_tokens = 1.0 / static_cast<double>(data.HeldOutCountedTokens());
  std::vector<UnitRunner> runners(st.units.size());
  CoactivationRecorder* const recorder = st.routing.coact;
  st.routing.coact = nullptr;  // not recorded: the co-activation stays the training steps'
  double local = 0;
  for (int64_t start = 0; start < per_rank; start += mb) {
    ApplyControl(st.cfg, 0, st.cfg.steps, st.dp_rank, &inputs, &st.routing);  // a control removes it here too
    Batch batch = data.GetHeldOut(first + start, std::min(mb, per_rank - start), end);
    local += st.cfg.pp_degree() > 1 ? PipelineForwardLoss(st, g, batch, scale, inputs)
                                    : ForwardLoss(st, g, batch, scale, inputs, runners).item<double>();
  }
  st.routing.coact = recorder;
  if (st.tp.rank > 0) local = correct = 0;  // TP: the data rank's loss and hits counted once (TP rank 0)
  // Step 2: the global mean loss (each rank's sum is already scaled by 1 / counted) and hit rate.
  at::Tensor red = at::tensor({local, correct}, at::kDouble).to(st.dev);
  g.world.AllReduceSum(red);
  return {red[0].item<double>(), red[1].item<double>() / static_cast<double>(data.HeldOutCountedTokens())};
}

}  // namespace onboard::backends
