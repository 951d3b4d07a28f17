// Pipeline parallelism of the probe: running one rank's schedule (see probe_pipeline.h).
// Shapes: tokens [mb, T] int64; activations and their gradients [mb, T, hidden]. Units: seconds.
#include "backends/probe_pipeline.h"

#include <chrono>
#include <map>
#include <memory>
#include <utility>

#include "backends/fsdp_unit.h"
#include "backends/probe_controls.h"
#include "backends/probe_pipeline_schedule.h"

namespace onboard::backends {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<int64_t> ChunkStarts(const ProbeConfig& c, int64_t layers) {
  return c.stage_layer_starts.empty() ? BalancedStageStarts(layers, c.pp_degree() * c.interleave)
                                      : c.stage_layer_starts;
}

// The other rank of a pair group (ProbeGroups::pp_links).
int64_t Peer(const Group* link) { return 1 - link->rank(); }

// The activation [mb, T, hidden] of `tokens` [mb, T] from the previous stage over `link`
// (sequence parallelism: the TP rank's [mb, T/tp, hidden] chunk, probe_tp.h).
at::Tensor RecvActivation(const WorkerState& st, Group* link, const at::Tensor& tokens) {
  const int64_t t = st.tp.sp() ? tokens.size(1) / st.tp.size : tokens.size(1);
  const std::vector<int64_t> shape = {tokens.size(0), t, st.spec.hidden};
  const auto opts = at::TensorOptions().dtype(at::get_default_dtype()).device(st.dev);
  return link->Recv(shape, opts, Peer(link), kPipeTagActivation);
}

// Units [range) of this stage on x; runners[k] is unit range.begin + k's (kept alive by the caller
// until the backward: the autograd nodes point at them).
at::Tensor RunChunk(WorkerState& st, ProbeGroups& g, const UnitRange& range, MoeRouting* routing,
                    UnitInputs* inputs, double scale, std::vector<UnitRunner>* runners, at::Tensor x) {
  runners->resize(static_cast<size_t>(range.end - range.begin));
  for (int64_t u = range.begin; u < range.end; ++u) {
    UnitRunner& r = (*runners)[static_cast<size_t>(u - range.begin)];
    PrepareUnitRunner(st, g, static_cast<size_t>(u), routing, inputs, scale, &r);
    UnitState& s = st.state[static_cast<size_t>(u)];
    x = RunFsdpUnit(&r, x, s.dense.p, s.lora.p, s.expert.p, s.expert_lora.p);
  }
  return x;
}

// One micro-batch on one local chunk, from its forward until its backward.
struct InFlight {
  Batch batch;
  UnitInputs inputs;
  MoeRouting routing;
  std::vector<UnitRunner> runners;  // one per unit of the chunk; the autograd nodes point at them
  at::Tensor in, out;               // chunk input (leaf) and output (loss on the last chunk)
  UnitRange units;
};

struct Runner {
  WorkerState& st;
  ProbeGroups& g;
  const ProbeData& data;
  const ProbeConfig& phase;
  int64_t step;
  double scale;
  const UnitInputs& inputs;
  Accumulators& acc;
  std::vector<int64_t> starts;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<InFlight>> live;  // (chunk, micro-batch)
  double local_loss = 0;

  int64_t ModelChunk(const PipeOp& op) const { return op.chunk * st.cfg.pp_degree() + st.stage; }
  bool Last(int64_t q) const { return q == st.cfg.pp_degree() * st.cfg.interleave - 1; }

  void Forward(const PipeOp& op) {
    const int64_t q = ModelChunk(op), mb = st.cfg.micro_batch_size();
    const int64_t j = op.micro_batch * st.cfg.data_ranks() + st.dp_rank;  // global micro-batch
    auto f = std::make_unique<InFlight>();
    f->units = ChunkUnits(starts, st.spec.num_layers(), q);
    f->inputs = inputs;
    f->routing = st.routing;
    ApplyControl(phase, &phase != &st.cfg, step, j, &f->inputs, &f->routing);  // --control
    f->batch = data.Get(step, j * mb, mb);
    BindBatch(st, &f->batch, &f->inputs);
    // Step 1: the chunk's input.
    at::Tensor x = f->batch.tokens;
    if (q > 0) x = RecvActivation(st, g.pp_prev, f->batch.tokens).requires_grad_(true);
    f->in = x;
    // Step 2: the chunk's units.
    x = RunChunk(st, g, f->units, &f->routing, &f->inputs, scale, &f->runners, x);
    f->out = x;
    // Step 3: loss (last chunk) or the activation to the next stage.
    if (Last(q))
      local_loss += x.item<double>();
    else
      g.pp_next->Send(x.detach(), Peer(g.pp_next), kPipeTagActivation);
    live[{op.chunk, op.micro_batch}] = std::move(f);
  }

  void Backward(const PipeOp& op) {
    const int64_t q = ModelChunk(op);
    auto it = live.find({op.chunk, op.micro_batch});
    ONBOARD_ASSERT(it != live.end(), "pipeline backward without its forward");
    InFlight& f = *it->second;
    if (Last(q)) {
      f.out.backward();
    } else {
      at::Tensor grad = g.pp_next->Recv(f.out.sizes(), f.out.options(), Peer(g.pp_next), kPipeTagGradient);
      f.out.backward(grad);
    }
    if (q > 0) {
      at::Tensor gin = f.in.grad().defined() ? f.in.grad() : at::zeros_like(f.in);
      g.pp_prev->Send(gin, Peer(g.pp_prev), kPipeTagGradient);
    }
    PushMicroBatchGrads(st, g, acc, static_cast<size_t>(f.units.begin), static_cast<size_t>(f.units.end));
    live.erase(it);
  }
};

// This rank's op order: the schedule (checked across all ranks), or the test fault's wrong one.
std::vector<PipeOp> RankSchedule(const ProbeConfig& c, int64_t stage) {
  const int64_t p = c.pp_degree(), v = c.interleave, m = c.micro_steps();
  std::vector<PipeOp> ops = PipelineSchedule(p, v, m, stage);
  if (c.pp_fault == kPipeFaultSwapBackward) {
    if (stage == 0) {  // the first two backwards trade micro-batches
      std::vector<size_t> b;
      for (size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kind == PipeOpKind::kBackward) b.push_back(i);
      if (b.size() >= 2) std::swap(ops[b[0]].micro_batch, ops[b[1]].micro_batch);
    }
    return ops;
  }
  std::vector<std::vector<PipeOp>> all;
  for (int64_t r = 0; r < p; ++r) all.push_back(PipelineSchedule(p, v, m, r));
  const Status ok = CheckPipelineSchedule(p, v, m, all);
  ONBOARD_ASSERT(ok.ok(), ok.message());
  return ops;
}

}  // namespace

std::vector<bool> PipelineLocalUnits(const ProbeConfig& c, int64_t layers, int64_t stage) {
  std::vector<bool> local(static_cast<size_t>(layers + 2), c.pp_degree() <= 1);
  if (c.pp_degree() <= 1) return local;
  const std::vector<int64_t> starts = ChunkStarts(c, layers);
  for (int64_t v = 0; v < c.interleave; ++v) {
    const UnitRange r = ChunkUnits(starts, layers, v * c.pp_degree() + stage);
    for (int64_t u = r.begin; u < r.end; ++u) local[static_cast<size_t>(u)] = true;
  }
  return local;
}

double PipelineForwardLoss(WorkerState& st, ProbeGroups& g, Batch& batch, double scale, UnitInputs& inputs) {
  BindBatch(st, &batch, &inputs);
  const int64_t P = st.cfg.pp_degree(), Q = P * st.cfg.interleave;
  const std::vector<int64_t> starts = ChunkStarts(st.cfg, st.spec.num_layers());
  std::vector<UnitRunner> runners;
  double loss = 0;
  at::Tensor x = batch.tokens;
  for (int64_t q = st.stage; q < Q; q += P) {  // this stage's model chunks, in model order
    if (q > 0) x = RecvActivation(st, g.pp_prev, batch.tokens);
    x = RunChunk(st, g, ChunkUnits(starts, st.spec.num_layers(), q), &st.routing, &inputs, scale, &runners,
                 x);
    if (q == Q - 1)
      loss = x.item<double>();
    else
      g.pp_next->Send(x.detach(), Peer(g.pp_next), kPipeTagActivation);
  }
  for (const std::unique_ptr<Group>& link : g.pp_links) link->WaitSends();
  return loss;
}

PipelineStepResult RunPipelineMicroSteps(WorkerState& st, ProbeGroups& g, const ProbeData& data,
                                         const ProbeConfig& phase, int64_t step, double scale,
                                         const UnitInputs& inputs, Accumulators& acc) {
  // Step 1: every MoE / indexed MLA layer has a row on every stage (zeros for other stages'
  // layers), so the ranks' records line up when the launcher sums them.
  for (const UnitLayout& L : st.units)
    if (L.expert.numel > 0) st.load[L.layer].assign(static_cast<size_t>(st.spec.num_experts), 0);
  const bool indexer = st.spec.index_topk > 0 && st.spec.index_heads > 0;
  for (const UnitLayout& L : st.units)
    if (indexer && inputs.indexer_kl != nullptr && L.kind == UnitKind::kLayer &&
        st.spec.layers[static_cast<size_t>(L.layer)].mixer == ProxyMixer::kMLA)
      (*inputs.indexer_kl)[L.layer] += 0.0;
  // Step 2: the ops in schedule order, each timed without its point-to-point waits.
  Runner run{st, g, data, phase, step, scale, inputs, acc, ChunkStarts(st.cfg, st.spec.num_layers()), {}, 0};
  const std::vector<PipeOp> ops = RankSchedule(st.cfg, st.stage);
  const auto t0 = Clock::now();
  double busy = 0;
  for (const PipeOp& op : ops) {
    const double p2p0 = CommClock().pp_total();
    const auto t = Clock::now();
    if (op.kind == PipeOpKind::kForward)
      run.Forward(op);
    else
      run.Backward(op);
    busy += Since(t) - (CommClock().pp_total() - p2p0);
  }
  // Step 3: the sends still in flight; the pipeline phase ends when every stage is done (a world
  // barrier: a stage that finishes first idles until then), then the bubble.
  for (const std::unique_ptr<Group>& link : g.pp_links) link->WaitSends();
  g.world.Barrier();
  const double span = Since(t0);
  ONBOARD_ASSERT(run.live.empty(), "pipeline step ended with micro-batches in flight");
  return {run.local_loss, span > 0 ? std::max(0.0, 1.0 - busy / span) : 0.0};
}

}  // namespace onboard::backends
