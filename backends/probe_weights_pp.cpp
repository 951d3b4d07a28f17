// Pipeline stages of the real-weights probe (probe_weights_pp.h). Legend: b windows of S tokens,
// hidden H; tag 0 = activations forward, tag 1 = their gradients backward.
#include "backends/probe_weights_pp.h"

#include <algorithm>
#include <cmath>

#include "backends/hf_peft_adapter.h"

namespace onboard::backends {

torch::Tensor PpStageStep(RankModel& m, TpContext& tp, PpContext& pp, const Batch& b, int64_t counted,
                          double inv_tokens, bool backward) {
  // Step 1: the stage's input: the embedding rows, or the previous stage's activations.
  const std::vector<int64_t> shape{b.tokens.size(0), b.tokens.size(1), m.c.ir.hidden};
  const auto opts = torch::TensorOptions().dtype(m.w.layers.front().input_norm.scalar_type());
  torch::Tensor in;
  if (!pp.first()) {
    in = pp.pair->Recv(shape, opts, pp.index - 1, 0);
    if (backward) in.requires_grad_(true);
  }
  // Step 2: the stage's layers; the last stage's loss (and its backward), else the activations out
  // and their gradients back.
  torch::Tensor h = RunLayers(m, tp, pp.first() ? EmbedRows(m, b) : in);
  torch::Tensor loss = torch::zeros({}, opts);
  if (pp.last()) {
    loss = HeadNll(m, h, b, counted, inv_tokens);
    if (backward) loss.backward();
  } else {
    pp.pair->Send(h.detach().contiguous(), pp.index + 1, 0);
    if (backward) h.backward(pp.pair->Recv(shape, opts, pp.index + 1, 1));
  }
  // Step 3: the input's gradient to the previous stage.
  if (backward && !pp.first()) pp.pair->Send(in.grad().contiguous(), pp.index - 1, 1);
  pp.pair->WaitSends();
  return loss.detach();
}

void PpClipGradients(const std::vector<torch::Tensor>& params, Group& world, bool owner) {
  double sq = 0;
  for (const torch::Tensor& p : params) sq += p.grad().to(torch::kDouble).pow(2).sum().item<double>();
  torch::Tensor total = torch::tensor({owner ? sq : 0.0}, torch::kDouble);
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
  }
  std::sort(all.modules.begin(), all.modules.end(),
            [](const LoraModule& x, const LoraModule& y) { return x.module < y.module; });
  return WritePeftAdapter(out, all);
}

}  // namespace onboard::backends
