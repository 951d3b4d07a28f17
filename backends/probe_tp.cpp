// Tensor parallelism of the proxy (probe_tp.h): the local spec, weight slices, gradient masks, the
// f / g autograd ops and the vocab-parallel embedding and cross-entropy. Collectives go through
// Group (c10d_compat.h) and are billed to CollectiveTimes::tp_* (not to the FSDP / replica fields).
// Legend: T = tp degree, t = TP rank, b sequences, T_seq tokens, V vocab, Vl = V / T.
#include "backends/probe_tp.h"

#include <cstdlib>
#include <set>
#include <string>

namespace onboard::backends {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Replicated slots that sit outside every TP region: their inputs and output gradients are the
// same on every TP rank, so are their gradients (no TP reduction). With sequence parallelism the
// norms see only the rank's tokens: their gradients are partial (summed over TP).
bool OutsideTpRegion(const std::string& name, bool sequence_parallel) {
  static const std::set<std::string> kOutside = {"norm1",    "norm2",  "router",    "lat_down",
                                                 "lat_norm", "lat_up", "final_norm"};
  static const std::set<std::string> kNorms = {"norm1", "norm2", "final_norm"};
  return kOutside.count(name) > 0 && !(sequence_parallel && kNorms.count(name) > 0);
}

// Test-only faults (negatives of the TP exactness tests), ONBOARD_PROBE_TP_FAULT, read once per
// process: "no_row_reduce" = every row-parallel linear skips its all-reduce; "no_sp_gather" = a
// sequence-parallel region's input all-gather is skipped (the rank's own chunk stands for every
// rank's: the shapes of a gathered input, other ranks' tokens missing); "no_expert_reduce" = expert
// TP's all-reduce of the experts' partial outputs is skipped.
const std::string& TpFault() {
  static const std::string fault = [] {
    const char* v = std::getenv("ONBOARD_PROBE_TP_FAULT");
    return std::string(v != nullptr ? v : "");
  }();
  return fault;
}
bool SkipRowReduce() { return TpFault() == "no_row_reduce"; }

// The ordered all-reduce of the TP group, its time moved from all_reduce_s to tp_all_reduce_s.
at::Tensor TpAllReduce(Group* g, const at::Tensor& t) {
  const double before = CommClock().all_reduce_s;
  at::Tensor out = g->AllReduceSumOrdered(t);
  CommClock().tp_all_reduce_s += CommClock().all_reduce_s - before;
  CommClock().all_reduce_s = before;
  return out;
}

// Every rank's t as rows [T, numel], its time moved from all_gather_s to tp_all_gather_s.
at::Tensor TpGatherRows(Group* g, const at::Tensor& t) {
  const double before = CommClock().all_gather_s;
  at::Tensor out = g->AllGather(t.contiguous().view({-1})).view({g->size(), t.numel()});
  CommClock().tp_all_gather_s += CommClock().all_gather_s - before;
  CommClock().all_gather_s = before;
  return out;
}

// Sequence dim 1 of x [b, Ts, ...] gathered over the TP group: [b, T*Ts, ...], rank t's chunk at
// [t*Ts, (t+1)*Ts). Time moved to tp_all_gather_s.
at::Tensor SeqGather(Group* g, const at::Tensor& x) {
  std::vector<int64_t> shape = x.sizes().vec();
  if (TpFault() == "no_sp_gather") {
    std::vector<at::Tensor> same(static_cast<size_t>(g->size()), x);
    return at::cat(same, 1);
  }
  const at::Tensor rows = TpGatherRows(g, x);  // [T, numel]
  std::vector<int64_t> blocks = shape;
  blocks.insert(blocks.begin(), g->size());             // [T, b, Ts, ...]
  at::Tensor full = rows.view(blocks).transpose(0, 1);  // [b, T, Ts, ...]
  shape[1] *= g->size();
  return full.reshape(shape);
}

// y [b, T*Ts, ...] summed over the TP group, rank t keeping its chunk [b, Ts, ...] (the ordered
// reduce-scatter of c10d_compat.h). Time moved from reduce_scatter_s to tp_reduce_scatter_s.
at::Tensor SeqReduceScatter(Group* g, const at::Tensor& y) {
  std::vector<int64_t> shape = y.sizes().vec();
  ONBOARD_ASSERT(shape[1] % g->size() == 0, "sequence parallelism: tokens not divisible by tp");
  shape[1] /= g->size();
  std::vector<int64_t> blocks = shape;
  blocks.insert(blocks.begin() + 1, g->size());  // [b, T, Ts, ...]
  const at::Tensor byrank = y.reshape(blocks).transpose(0, 1).contiguous().view({-1});
  const double before = CommClock().reduce_scatter_s;
  at::Tensor out = g->ReduceScatterSum(byrank).view(shape);
  CommClock().tp_reduce_scatter_s += CommClock().reduce_scatter_s - before;
  CommClock().reduce_scatter_s = before;
  return out;
}

// Rank t's chunk [b, Ts, ...] of a full-sequence y [b, T*Ts, ...].
at::Tensor SeqChunk(Group* g, const at::Tensor& y) {
  const int64_t ts = y.size(1) / g->size();
  return y.narrow(1, g->rank() * ts, ts).contiguous();
}

// The four sequence-parallel boundaries: (forward, backward) = (gather, reduce-scatter),
// (reduce-scatter, gather), (gather, chunk), (chunk, gather).
enum class SpOp : int64_t { kGatherIn, kReduceOut, kGatherReplicated, kChunk };

at::Tensor SpApply(Group* g, SpOp op, const at::Tensor& x, bool backward) {
  switch (op) {
    case SpOp::kGatherIn:
      return backward ? SeqReduceScatter(g, x) : SeqGather(g, x);
    case SpOp::kReduceOut:
      return backward ? SeqGather(g, x) : SeqReduceScatter(g, x);
    case SpOp::kGatherReplicated:
      return backward ? SeqChunk(g, x) : SeqGather(g, x);
    default:
      return backward ? SeqGather(g, x) : SeqChunk(g, x);
  }
}

class SpFn : public torch::autograd::Function<SpFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group, int64_t op) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["op"] = op;
    return SpApply(reinterpret_cast<Group*>(group), static_cast<SpOp>(op), x, false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    const auto op = static_cast<SpOp>(ctx->saved_data["op"].toInt());
    return {SpApply(g, op, grads[0], true), at::Tensor(), at::Tensor()};
  }
};

at::Tensor Sp(const TpContext* tp, SpOp op, const at::Tensor& x) {
  return SpFn::apply(x, reinterpret_cast<int64_t>(tp->group), static_cast<int64_t>(op));
}

class CopyInFn : public torch::autograd::Function<CopyInFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* g = reinterpret_cast<Group*>(ctx->saved_data["group"].toInt());
    return {TpAllReduce(g, grads[0]), at::Tensor()};
  }
};

class SumFn : public torch::autograd::Function<SumFn> {
 public:
  static at::Tensor forward(AutogradContext* /*ctx*/, const at::Tensor& y, int64_t group) {
    return TpAllReduce(reinterpret_cast<Group*>(group), y);
  }
  static variable_list backward(AutogradContext* /*ctx*/, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

// Per element of the local buffer: value_replicated on slots of equal shape (inside a region
// only when inside_only), value_split elsewhere.
at::Tensor SlotMask(const FlatLayout& full, const FlatLayout& local, bool inside_only, bool sequence_parallel,
                    double replicated, double split) {
  ONBOARD_ASSERT(full.slots.size() == local.slots.size(), "TP layout has other slots than the full one");
  at::Tensor m = at::zeros({local.numel});
  for (size_t i = 0; i < local.slots.size(); ++i) {
    const ParamSlot& l = local.slots[i];
    const bool rep = l.shape == full.slots[i].shape;
    const bool mark = rep && (!inside_only || !OutsideTpRegion(l.name, sequence_parallel));
    m.narrow(0, l.offset, l.numel).fill_(mark ? replicated : (rep ? 0.0 : split));
  }
  return m;
}

}  // namespace

ProxySpec TpLocalSpec(const ProxySpec& s, int64_t tp, int64_t etp) {
  ProxySpec l = s;
  if (tp <= 1) return l;
  if (etp > 1) l.expert_inter = s.expert_inter / etp;
  l.kda_heads = s.kda_heads / tp;
  l.mla_heads = s.mla_heads / tp;
  l.index_heads = s.index_heads / tp;
  l.mlp_inter = s.mlp_inter / tp;
  l.shared_inter = s.shared_inter / tp;
  l.vocab = s.vocab / tp;
  return l;
}

at::Tensor TpSliceFlat(const FlatLayout& full, const FlatLayout& local, const at::Tensor& flat, int64_t t,
                       int64_t size) {
  ONBOARD_ASSERT(full.slots.size() == local.slots.size(), "TP layout has other slots than the full one");
  at::Tensor out = at::zeros({local.numel}, flat.options());
  for (size_t i = 0; i < local.slots.size(); ++i) {
    const ParamSlot& f = full.slots[i];
    const ParamSlot& l = local.slots[i];
    ONBOARD_ASSERT(f.name == l.name && f.shape.size() == l.shape.size(), "TP slot " + l.name + " differs");
    at::Tensor src = flat.narrow(0, f.offset, f.numel).view(f.shape);
    for (size_t d = 0; d < l.shape.size(); ++d) {
      if (l.shape[d] == f.shape[d]) continue;
      ONBOARD_ASSERT(l.shape[d] * size == f.shape[d],
                     "TP slot " + l.name + " is not split " + std::to_string(size) + " ways");
      src = src.narrow(static_cast<int64_t>(d), t * l.shape[d], l.shape[d]);
    }
    out.narrow(0, l.offset, l.numel).copy_(src.reshape({-1}));
  }
  return out;
}

at::Tensor TpPartialMask(const FlatLayout& full, const FlatLayout& local, bool sequence_parallel) {
  return SlotMask(full, local, /*inside_only=*/true, sequence_parallel, 1.0, 0.0);
}

at::Tensor TpNormShare(const FlatLayout& full, const FlatLayout& local, int64_t size) {
  return SlotMask(full, local, /*inside_only=*/false, false, 1.0 / static_cast<double>(size), 1.0);
}

at::Tensor TpCopyIn(const TpContext* tp, const at::Tensor& x) {
  if (tp == nullptr || !tp->active()) return x;
  return CopyInFn::apply(x, reinterpret_cast<int64_t>(tp->group));
}

at::Tensor TpReduceOut(const TpContext* tp, const at::Tensor& y) {
  if (tp == nullptr || !tp->active() || SkipRowReduce()) return y;
  return SumFn::apply(y, reinterpret_cast<int64_t>(tp->group));
}

at::Tensor TpSum(const TpContext* tp, const at::Tensor& y) {
  if (tp == nullptr || !tp->active()) return y;
  return SumFn::apply(y, reinterpret_cast<int64_t>(tp->group));
}

at::Tensor TpRegionIn(const TpContext* tp, const at::Tensor& h) {
  if (tp == nullptr || !tp->sp()) return TpCopyIn(tp, h);
  return Sp(tp, SpOp::kGatherIn, h);
}

at::Tensor TpRegionOut(const TpContext* tp, const at::Tensor& y) {
  if (tp == nullptr || !tp->sp()) return TpReduceOut(tp, y);
  if (SkipRowReduce()) return SeqChunk(tp->group, y);
  return Sp(tp, SpOp::kReduceOut, y);
}

at::Tensor SpGatherReplicated(const TpContext* tp, const at::Tensor& h) {
  if (tp == nullptr || !tp->sp()) return h;
  return Sp(tp, SpOp::kGatherReplicated, h);
}

at::Tensor SpChunk(const TpContext* tp, const at::Tensor& y) {
  if (tp == nullptr || !tp->sp()) return y;
  return Sp(tp, SpOp::kChunk, y);
}

at::Tensor TpExpertIn(const TpContext* tp, const at::Tensor& x) {
  return tp != nullptr && tp->expert_tp ? TpCopyIn(tp, x) : x;
}

at::Tensor TpExpertOut(const TpContext* tp, const at::Tensor& y) {
  if (TpFault() == "no_expert_reduce") return y;
  return tp != nullptr && tp->expert_tp ? TpReduceOut(tp, y) : y;
}

at::Tensor TpVocabEmbed(const TpContext& tp, const at::Tensor& tok, const at::Tensor& ids) {
  const int64_t vl = tok.size(0);
  at::Tensor local = ids.flatten() - tp.rank * vl;
  at::Tensor here = local.ge(0).logical_and(local.lt(vl)).to(tok.scalar_type()).unsqueeze(1);
  // Rows of other ranks' vocab come out exactly 0 here: the sum over TP is exact.
  at::Tensor rows = tok.index_select(0, local.clamp(0, vl - 1)) * here;
  rows = rows.view({ids.size(0), ids.size(1), tok.size(1)});
  return tp.sp() ? TpRegionOut(&tp, rows) : TpSum(&tp, rows);  // SP: the rank's tokens
}

at::Tensor TpVocabNll(const TpContext& tp, const at::Tensor& logits, const at::Tensor& targets) {
  const int64_t vl = logits.size(-1);
  // Step 1: the global max logit per token (a constant shift: no gradient).
  at::Tensor m;
  {
    at::NoGradGuard ng;
    at::Tensor local_max = std::get<0>(logits.max(-1));
    m = std::get<0>(TpGatherRows(tp.group, local_max).max(0)).view(local_max.sizes());
  }
  // Step 2: sum of exp over the whole vocabulary, and the target's logit from the rank holding it.
  at::Tensor sumexp = TpSum(&tp, (logits - m.unsqueeze(-1)).exp().sum(-1));
  at::Tensor local = targets - tp.rank * vl;
  at::Tensor here = local.ge(0).logical_and(local.lt(vl)).to(logits.scalar_type());
  at::Tensor tl = TpSum(&tp, logits.gather(-1, local.clamp(0, vl - 1).unsqueeze(-1)).squeeze(-1) * here);
  return sumexp.log() + m - tl;
}

at::Tensor TpFullLogits(const TpContext& tp, const at::Tensor& logits) {
  at::NoGradGuard ng;
  at::Tensor rows = TpGatherRows(tp.group, logits.detach());  // [T, b*T_seq*Vl]
  std::vector<int64_t> shape = logits.sizes().vec();
  shape.insert(shape.begin(), tp.size);
  at::Tensor blocks = rows.view(shape);  // [T, b, T_seq, Vl]
  return blocks.permute({1, 2, 0, 3}).reshape({logits.size(0), logits.size(1), tp.size * logits.size(2)});
}

at::Tensor TpSumPartialGrads(const TpContext& tp, const at::Tensor& mask, const at::Tensor& grad) {
  if (!tp.active() || !mask.defined()) return grad;
  return grad * (1 - mask) + TpAllReduce(tp.group, grad * mask);
}

}  // namespace onboard::backends
