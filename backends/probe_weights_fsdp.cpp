// HfFsdp / HfFsdpUnit: FSDP of the real-weights probe's frozen base (probe_weights_fsdp.h).
// Legend: F ranks in the FSDP group; a slot's whole tensor has rows = the sum of the ranks' chunk
// rows; a chunk is padded to rank 0's rows (the largest: torch.chunk) for the all-gather.
#include "backends/probe_weights_fsdp.h"

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t RowNumel(const torch::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 1; d < t.dim(); ++d) n *= t.size(d);
  return n;
}

void Gather(HfFsdpRun& r) {
  for (const auto& [f, u] : r.units) f->Gather(u);
}

void Release(HfFsdpRun& r) {
  for (const auto& [f, u] : r.units) f->Release(u);
  if (r.release) r.release();
}

// Forward: gather, run without a graph, release. Backward: gather, recompute with grad, release.
class HfFsdpUnitFn : public torch::autograd::Function<HfFsdpUnitFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::TensorList params, int64_t run) {
    (void)params;
    ctx->save_for_backward({x});
    ctx->saved_data["run"] = run;
    auto* r = reinterpret_cast<HfFsdpRun*>(run);
    Gather(*r);
    at::Tensor y = r->run(x);
    Release(*r);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* r = reinterpret_cast<HfFsdpRun*>(ctx->saved_data["run"].toInt());
    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    Gather(*r);
    variable_list g;
    {
      at::AutoGradMode enable(true);
      const at::Tensor y = r->run(x);
      std::vector<at::Tensor> in{x};
      in.insert(in.end(), r->params.begin(), r->params.end());
      g = torch::autograd::grad({y}, in, {grads[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                /*allow_unused=*/true);
    }
    Release(*r);
    g.push_back(at::Tensor());  // `run`
    return g;
  }
};

}  // namespace

size_t HfFsdp::AddUnit(const std::vector<torch::Tensor*>& slots) {
  Unit u;
  u.slots = slots;
  for (torch::Tensor* s : slots) u.shards.push_back(*s);
  units_.push_back(std::move(u));
  return units_.size() - 1;
}

void HfFsdp::Finish() {
  // Step 1: this rank's chunk rows of every slot, in unit order; one all-gather gives everyone's.
  std::vector<int64_t> mine;
  for (const Unit& u : units_)
    for (const torch::Tensor& s : u.shards) mine.push_back(s.size(0));
  const int64_t n = int64_t(mine.size()), F = group_.size();
  const torch::Tensor all = group_.AllGather(torch::tensor(mine, torch::kLong)).view({F, n}).contiguous();
  const auto a = all.accessor<int64_t, 2>();
  int64_t k = 0;
  for (Unit& u : units_)
    for (size_t i = 0; i < u.shards.size(); ++i, ++k) {
      std::vector<int64_t> rows;
      for (int64_t q = 0; q < F; ++q) rows.push_back(a[q][k]);
      u.rows.push_back(rows);
    }
}

void HfFsdp::Gather(size_t ui) {
  Unit& u = units_[ui];
  const int64_t F = group_.size();
  // Step 1: the unit's chunks, each padded to rank 0's rows, as one flat buffer.
  std::vector<torch::Tensor> parts;
  int64_t n = 0;
  for (size_t i = 0; i < u.shards.size(); ++i) {
    const torch::Tensor& s = u.shards[i];
    const int64_t pad = (u.rows[i][0] - s.size(0)) * RowNumel(s);
    parts.push_back(s.contiguous().flatten());
    if (pad > 0) parts.push_back(torch::zeros({pad}, s.options()));
    n += u.rows[i][0] * RowNumel(s);
  }
  const torch::Tensor all = group_.AllGather(torch::cat(parts)).view({F, n});
  // Step 2: each slot's whole tensor = the ranks' chunks in rank order.
  int64_t off = 0;
  for (size_t i = 0; i < u.shards.size(); ++i) {
    const torch::Tensor& s = u.shards[i];
    const int64_t row = RowNumel(s);
    std::vector<torch::Tensor> chunks;
    int64_t rows = 0;
    for (int64_t q = 0; q < F; ++q) {
      chunks.push_back(all[q].narrow(0, off, u.rows[i][size_t(q)] * row));
      rows += u.rows[i][size_t(q)];
    }
    std::vector<int64_t> shape = s.sizes().vec();
    shape[0] = rows;
    *u.slots[i] = torch::cat(chunks).view(shape);
    off += u.rows[i][0] * row;
  }
  ++gathers_;
}

void HfFsdp::Release(size_t ui) {
  Unit& u = units_[ui];
  for (size_t i = 0; i < u.slots.size(); ++i) *u.slots[i] = u.shards[i];
}

torch::Tensor HfFsdpUnit(HfFsdpRun& r, const torch::Tensor& x) {
  return HfFsdpUnitFn::apply(x, at::TensorList(r.params), reinterpret_cast<int64_t>(&r));
}

std::vector<torch::Tensor*> HfRoutedExpertTensors(HfLayerWeights& l) {
  std::vector<torch::Tensor*> out;
  for (HfMlpWeights& e : l.experts.experts)
    for (HfLinear* x : {&e.gate, &e.up, &e.down})
      for (torch::Tensor* t : {&x->w, &x->b})
        if (t->defined()) out.push_back(t);
  return out;
}

std::vector<torch::Tensor*> HfLayerTensors(HfLayerWeights& l, bool routed) {
  std::vector<torch::Tensor*> out;
  auto t = [&](torch::Tensor& x) {
    if (x.defined()) out.push_back(&x);
  };
  auto lin = [&](HfLinear& x) {
    t(x.w);
    t(x.b);
  };
  auto mlp = [&](HfMlpWeights& m) {
    lin(m.gate);
    lin(m.up);
    lin(m.down);
  };
  t(l.input_norm);
  t(l.post_norm);
  HfAttentionWeights& a = l.attn;
  for (HfLinear* x : {&a.q, &a.k, &a.v, &a.o, &a.q_a, &a.q_b, &a.kv_a, &a.kv_b, &a.idx_wq_b, &a.idx_wk,
                      &a.idx_weights, &a.f_a, &a.f_b, &a.beta, &a.g_a, &a.g_b, &a.g})
    lin(*x);
  for (torch::Tensor* x : {&a.q_norm, &a.k_norm, &a.sinks, &a.q_a_norm, &a.kv_a_norm, &a.idx_k_norm_w,
                           &a.idx_k_norm_b, &a.q_conv, &a.k_conv, &a.v_conv, &a.a_log, &a.dt_bias, &a.o_norm})
    t(*x);
  mlp(l.mlp);
  lin(l.experts.router);
  t(l.experts.score_bias);
  if (routed)
    for (torch::Tensor* x : HfRoutedExpertTensors(l)) out.push_back(x);
  mlp(l.experts.shared);
  lin(l.experts.shared_gate);
  lin(l.experts.latent_down);
  lin(l.experts.latent_up);
  t(l.experts.latent_norm);
  return out;
}

}  // namespace onboard::backends
