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
// same on every TP rank, so are their gradients (no TP reduction).
bool OutsideTpRegion(const std::string& name) {
  static const std::set<std::string> kOutside = {"norm1",    "norm2",  "router",    "lat_down",
                                                 "lat_norm", "lat_up", "final_norm"};
  return kOutside.count(name) > 0;
}

// Test-only fault (the negative of the TP exactness test): ONBOARD_PROBE_TP_FAULT=no_row_reduce
// makes every row-parallel linear skip its all-reduce. Read once per process.
bool SkipRowReduce() {
  static const bool skip = [] {
    const char* v = std::getenv("ONBOARD_PROBE_TP_FAULT");
    return v != nullptr && std::string(v) == "no_row_reduce";
  }();
  return skip;
}

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
at::Tensor SlotMask(const FlatLayout& full, const FlatLayout& local, bool inside_only, double replicated,
                    double split) {
  ONBOARD_ASSERT(full.slots.size() == local.slots.size(), "TP layout has other slots than the full one");
  at::Tensor m = at::zeros({local.numel});
  for (size_t i = 0; i < local.slots.size(); ++i) {
    const ParamSlot& l = local.slots[i];
    const bool rep = l.shape == full.slots[i].shape;
    const bool mark = rep && (!inside_only || !OutsideTpRegion(l.name));
    m.narrow(0, l.offset, l.numel).fill_(mark ? replicated : (rep ? 0.0 : split));
  }
  return m;
}

}  // namespace

ProxySpec TpLocalSpec(const ProxySpec& s, int64_t tp) {
  ProxySpec l = s;
  if (tp <= 1) return l;
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

at::Tensor TpPartialMask(const FlatLayout& full, const FlatLayout& local) {
  return SlotMask(full, local, /*inside_only=*/true, 1.0, 0.0);
}

at::Tensor TpNormShare(const FlatLayout& full, const FlatLayout& local, int64_t size) {
  return SlotMask(full, local, /*inside_only=*/false, 1.0 / static_cast<double>(size), 1.0);
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

at::Tensor TpVocabEmbed(const TpContext& tp, const at::Tensor& tok, const at::Tensor& ids) {
  const int64_t vl = tok.size(0);
  at::Tensor local = ids.flatten() - tp.rank * vl;
  at::Tensor here = local.ge(0).logical_and(local.lt(vl)).to(tok.scalar_type()).unsqueeze(1);
  // Rows of other ranks' vocab come out exactly 0 here: the sum over TP is exact.
  at::Tensor rows = tok.index_select(0, local.clamp(0, vl - 1)) * here;
  return TpSum(&tp, rows.view({ids.size(0), ids.size(1), tok.size(1)}));
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
