// Pipeline stages of the real-weights probe (probe_weights_pp.h). Legend: b windows of S tokens,
// hidden H; tag 0 = activations forward, tag 1 = their gradients backward.
#include "backends/probe_weights_pp.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "backends/hf_peft_adapter.h"
#include "backends/probe_pipeline_schedule.h"

namespace onboard::backends {

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Micro-batch i of b: windows [i * bm, (i + 1) * bm).
Batch MicroBatch(const Batch& b, int64_t i, int64_t bm) {
  Batch x;
  x.tokens = b.tokens.narrow(0, i * bm, bm);
  x.targets = b.targets.narrow(0, i * bm, bm);
  return x;
}

}  // namespace

PpStepResult PpStageStep(RankModel& m, TpContext& tp, PpContext& pp, const Batch& b, int64_t counted,
                         double inv_tokens, bool backward, int64_t microbatches) {
  const int64_t M = microbatches, bm = b.tokens.size(0) / M, V = pp.chunks, P = pp.stages;
  ONBOARD_ASSERT(M >= 1 && bm * M == b.tokens.size(0), "micro-batches must divide the rank's windows");
  const std::vector<int64_t> shape{bm, b.tokens.size(1), m.c.ir.hidden};
  const auto opts = torch::TensorOptions().dtype(m.w.layers.front().input_norm.scalar_type());
  // Per (local chunk v, micro-batch i) at v * M + i: the chunk's input and output.
  std::vector<torch::Tensor> in(size_t(V * M)), out(size_t(V * M));
  torch::Tensor loss = torch::zeros({}, opts);
  double wait = 0;
  auto recv = [&](int64_t peer, int64_t tag) {
    const Clock::time_point t = Clock::now();
    torch::Tensor x = pp.pair->Recv(shape, opts, peer, tag);
    wait += Since(t);
    return x;
  };
  // Model chunk q = v * P + stage: chunk 0 embeds, the last one has the head; chunk q's neighbours
  // live on the previous / next stage (wrapping around: stage P - 1's chunk v feeds stage 0's v + 1).
  const int64_t prev = (pp.index + P - 1) % P, next = (pp.index + 1) % P;
  auto first = [&](int64_t v) { return v == 0 && pp.first(); };
  auto last = [&](int64_t v) { return v == V - 1 && pp.last(); };
  const Clock::time_point t0 = Clock::now();
  // Step 1: a forward of local chunk v on micro-batch i: the embedding rows or the previous chunk's
  // activations, the chunk's layers, then the loss (the last chunk) or the activations out.
  auto forward = [&](int64_t v, int64_t i) {
    const Batch mb = MicroBatch(b, i, bm);
    const size_t k = size_t(v * M + i);
    // The chunk's W + scale B A anew per forward: each backward frees its own graph (FSDP: inside
    // the unit).
    if (backward && !m.fsdp) ApplyAdapters(m, false, v);
    if (!first(v)) {
      in[k] = recv(prev, 0);
      if (backward) in[k].requires_grad_(true);
    }
    torch::Tensor h = RunLayers(m, tp, first(v) ? EmbedRows(m, mb) : in[k], v);
    if (last(v)) {
      h = HeadNll(m, h, mb, std::clamp<int64_t>(counted - i * bm, 0, bm), inv_tokens);
      loss = loss + h.detach();
    } else {
      pp.pair->Send(h.detach().contiguous(), next, 0);
    }
    out[k] = backward ? h : torch::Tensor();
  };
  // Step 2: a backward: the loss's, or the gradient the next chunk sent; the input's gradient back.
  auto backward_op = [&](int64_t v, int64_t i) {
    const size_t k = size_t(v * M + i);
    if (last(v))
      out[k].backward();
    else
      out[k].backward(recv(next, 1));
    if (!first(v)) pp.pair->Send(in[k].grad().contiguous(), prev, 1);
    out[k] = in[k] = torch::Tensor();
  };
  // Step 3: the ops in (interleaved) 1F1B order; forward only: per micro-batch the chunks in order.
  // Then every stage's sends done and the pair group met: the step's span.
  if (backward) {
    for (const PipeOp& op : PipelineSchedule(P, V, M, pp.index))
      op.kind == PipeOpKind::kForward ? forward(op.chunk, op.micro_batch)
                                      : backward_op(op.chunk, op.micro_batch);
  } else {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t v = 0; v < V; ++v) forward(v, i);
  }
  const Clock::time_point t1 = Clock::now();
  pp.pair->WaitSends();
  pp.pair->Barrier();
  wait += Since(t1);
  const double span = Since(t0);
  return {loss, span > 0 ? wait / span : 0.0};
}

void ClipToGlobalNorm(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& counted,
                      Group& world) {
  double sq = 0;
  for (const torch::Tensor& p : counted) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  torch::Tensor total = torch::tensor({sq}, torch::kDouble);
  world.AllReduceSum(total);
  const double coef = 1.0 / (std::sqrt(total[0].item<double>()) + 1e-6);
  if (coef >= 1.0) return;
  for (const torch::Tensor& p : params) p.grad().mul_(coef);
}

Status MergeStageAdapters(const std::vector<std::string>& dirs, const std::string& out) {
  PeftLoraAdapter all;
  for (const std::string& d : dirs) {
    ONBOARD_ASSIGN_OR_RETURN(PeftLoraAdapter a, ReadPeftAdapter(d));
    all.r = a.r;
    all.alpha = a.alpha;
    all.base_model = a.base_model;
    all.modules.insert(all.modules.end(), a.modules.begin(), a.modules.end());
    all.target_parameters.insert(all.target_parameters.end(), a.target_parameters.begin(),
                                 a.target_parameters.end());  // WritePeftAdapter writes each once
  }
  std::sort(all.modules.begin(), all.modules.end(),
            [](const LoraModule& x, const LoraModule& y) { return x.module < y.module; });
  return WritePeftAdapter(out, all);
}

}  // namespace onboard::backends
