// WorkerState: one rank's layout, expert placement, seeded full init + shards, and the LoRA phase
// switch (probe_worker_state.h). Weights are built in full from seeds on every rank (the same
// values whatever the layout), then each rank keeps its shard.
// Units: element counts for buffers, bytes for RSS.
#include <sys/resource.h>

#include <tuple>

#include "backends/probe_replicas.h"
#include "backends/probe_worker_state.h"
#include "core/lora_targets.h"

namespace onboard::backends {
namespace {

// Shard `rank` of `size` of a flat tensor, zero-padded to a multiple of size.
at::Tensor ShardOf(const at::Tensor& full, int64_t rank, int64_t size) {
  const int64_t n = full.numel(), shard = (n + size - 1) / size;
  return at::constant_pad_nd(full, {0, shard * size - n}).narrow(0, rank * shard, shard).clone();
}

// The runs of 1s of a 0/1 decay mask (a shard's, CPU), as [offset, length) pairs.
std::vector<std::pair<int64_t, int64_t>> DecayRuns(const at::Tensor& mask) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  const at::Tensor m = mask.ne(0).contiguous();  // any float dtype (fp64 probes build fp64 masks)
  const bool* d = m.data_ptr<bool>();
  for (int64_t i = 0, n = m.numel(); i < n; ++i) {
    if (!d[i]) continue;
    if (!runs.empty() && runs.back().first + runs.back().second == i)
      ++runs.back().second;
    else
      runs.emplace_back(i, 1);
  }
  return runs;
}

Buffer MakeShard(const at::Tensor& full, const at::Tensor& decay, int64_t rank, int64_t size,
                 bool trainable) {
  Buffer b;
  b.p = ShardOf(full, rank, size).requires_grad_(trainable);
  b.decay_runs = DecayRuns(ShardOf(decay, rank, size));
  b.trainable = trainable;
  return b;
}

// Local experts' buffers, sharded over the EP replicas (rank `rep` of `reps`): experts are
// generated one by one from (seed, expert id), so every rank builds the same values for an expert
// whatever the placement, then keeps its shard of the local experts' flat buffer.
// Expert TP: each expert is built whole (full layout), then sliced to this TP rank's `layout`
// (TpSliceFlat; a copy when the layouts are equal).
Buffer MakeExperts(const FlatLayout& full, const FlatLayout& layout, const std::vector<int64_t>& local,
                   uint64_t seed, bool trainable, int64_t rep, int64_t reps, int64_t t, int64_t T) {
  if (layout.numel == 0) {
    Buffer b;
    b.p = at::zeros({0});
    b.trainable = trainable;
    b.expert = true;
    return b;
  }
  std::vector<at::Tensor> rows, masks;
  for (int64_t e : local) {
    rows.push_back(TpSliceFlat(full, layout, InitFlat(full, seed + static_cast<uint64_t>(e) * 7919u), t, T));
    masks.push_back(DecayMask(layout));
  }
  Buffer b = MakeShard(at::cat(rows), at::cat(masks), rep, reps, trainable);
  b.expert = true;
  return b;
}

// Step 3a helper, redundant experts (probe_replicas.h): this source's log2phy, the destination
// rank and node of each expert from here, this rank's slots and the replica gradient exchange.
void PlaceReplicas(Group& ep, const std::vector<int64_t>& ep_node, WorkerState* st) {
  if (st->cfg.expert_phy2log.empty()) return;
  const Expected<ReplicaMap> m = BuildReplicaMap(st->cfg.expert_phy2log, st->spec.num_experts, ep.size());
  ONBOARD_ASSERT(m.ok(), m.status().message());  // ProbeConfig::Validate checked it
  MoeRouting& routing = st->routing;
  const int64_t S = m->slots_per_rank, P = static_cast<int64_t>(m->phy2log.size());
  routing.slots_per_rank = S;
  routing.log2phy = SourceLog2Phy(*m, ep.rank(), ep.size());
  for (size_t e = 0; e < routing.log2phy.size(); ++e) {
    if (st->cfg.fault_log2phy && m->copies[e].size() > 1) routing.log2phy[e] = (routing.log2phy[e] + 1) % P;
    routing.placement[e] = routing.log2phy[e] / S;
    routing.expert_node[e] = ep_node[static_cast<size_t>(routing.placement[e])];
  }
  routing.local_experts.assign(m->phy2log.begin() + ep.rank() * S, m->phy2log.begin() + (ep.rank() + 1) * S);
  st->replica_sync = ReplicaGradSync{&ep, m->phy2log, m->copies, S};
  routing.replica_sync = &st->replica_sync;
}

// The experts EP rank `ep_rank` holds in the i-th MoE layer (per-layer placement: the i-th block
// of num_experts entries; else the one placement's local experts).
std::vector<int64_t> LayerLocalExperts(const MoeRouting& routing, size_t moe_index, int64_t experts,
                                       int64_t ep_rank) {
  if (static_cast<int64_t>(routing.placement.size()) <= experts) return routing.local_experts;
  std::vector<int64_t> out;
  for (int64_t e = 0; e < experts; ++e)
    if (routing.placement[moe_index * static_cast<size_t>(experts) + static_cast<size_t>(e)] == ep_rank)
      out.push_back(e);
  return out;
}

// Redundant experts: per element of this rank's slots, 1 on an expert's first copy, else 0.
at::Tensor ReplicaShare(const ReplicaGradSync& sync, int64_t numel) {
  if (sync.ep == nullptr) return at::Tensor();
  std::vector<double> share;
  for (int64_t j = 0; j < sync.slots_per_rank; ++j) {
    const int64_t p = sync.ep->rank() * sync.slots_per_rank + j;
    share.push_back(sync.copies[static_cast<size_t>(sync.phy2log[static_cast<size_t>(p)])][0] == p ? 1.0
                                                                                                   : 0.0);
  }
  return at::tensor(share, at::kDouble).repeat_interleave(numel);
}

// Step 3a helper: expert -> EP rank (contiguous blocks unless cfg.expert_placement), this rank's
// experts, and the balancing bias per MoE layer.
void PlaceExperts(Group& ep, WorkerState* st) {
  const ProxySpec& spec = st->spec;
  const int64_t E = st->cfg.ep_degree();
  MoeRouting& routing = st->routing;
  routing.ep = &ep;
  routing.placement = st->cfg.expert_placement;
  if (routing.placement.empty())
    for (int64_t e = 0; e < spec.num_experts; ++e) routing.placement.push_back(e / (spec.num_experts / E));
  for (int64_t e = 0; e < spec.num_experts; ++e)
    if (routing.placement[static_cast<size_t>(e)] == ep.rank()) routing.local_experts.push_back(e);
  routing.load = &st->load;
  // Issue 18: node of each EP rank of this group, gathered (whatever the rank layout).
  const at::Tensor gathered = ep.AllGather(at::full({1}, st->cfg.node_of(st->rank), at::kLong)).cpu();
  const std::vector<int64_t> ep_node(gathered.data_ptr<int64_t>(), gathered.data_ptr<int64_t>() + E);
  st->coact.Configure(spec.num_experts, spec.top_k, ep_node, st->cfg.node_of(st->rank));
  routing.coact = &st->coact;
  for (int64_t r : routing.placement)  // per layer too (one block of num_experts per MoE layer)
    routing.expert_node.push_back(ep_node[static_cast<size_t>(r)]);
  routing.max_route_nodes = st->cfg.max_route_nodes;
  routing.overlap = st->cfg.moe_overlap;
  PlaceReplicas(ep, ep_node, st);
  if (spec.balance_bias)
    for (const UnitLayout& L : st->units)
      if (L.expert.numel > 0) st->score_bias[L.layer] = at::zeros({spec.num_experts}, at::kFloat);
  routing.score_bias = st->score_bias.empty() ? nullptr : &st->score_bias;
}

}  // namespace

int64_t PeakRssBytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux: kilobytes
}

void InitWorkerState(Group& ep, Group& tp, WorkerState* st) {
  const ProbeConfig& cfg = st->cfg;
  const int64_t T = cfg.tp_degree(), t = cfg.tp_rank_of(st->rank);
  const int64_t N = cfg.data_ranks(), r = cfg.data_rank_of(st->rank), F = cfg.fsdp_degree(),
                E = cfg.ep_degree();
  // Step 3a: layout (TP: this rank's slices, probe_tp.h), the units of this pipeline stage and
  // expert placement.
  st->baseline_rss = PeakRssBytes();
  st->stage = cfg.stage_of(st->rank);
  st->dp_rank = r;
  st->tp = TpContext{&tp,
                     t,
                     T,
                     TpLocalSpec(st->spec, T, cfg.etp_degree()),
                     cfg.sequence_parallel,
                     T > 1 && cfg.etp_degree() == T};
  st->routing.tp = &st->tp;
  const std::vector<UnitLayout> full = BuildLayout(st->spec, cfg);
  st->units = BuildLayout(st->tp.local, cfg);
  st->local_unit = PipelineLocalUnits(cfg, st->spec.num_layers(), st->stage);
  PlaceExperts(ep, st);
  st->counts = CountParams(full, st->spec, cfg);
  st->lora = cfg.mode == FinetuneMode::kLoRA;
  st->base_steps = st->lora ? LoraBaseSteps(cfg) : 0;
  // Step 3b: seeded full init, then shards. LoRA with a base phase: the base (dense + experts) is
  // trained first, adapters frozen.
  const bool lora = st->lora, base_first = st->base_steps > 0;
  st->state.assign(st->units.size(), UnitState{});
  size_t moe = 0;  // MoE layers so far (per-layer placement)
  for (size_t u = 0; u < st->units.size(); ++u) {
    const uint64_t base = cfg.seed * 1000003u + u * 16u;
    const UnitLayout& L = st->units[u];
    UnitState& s = st->state[u];
    if (!st->local_unit[u]) {  // another pipeline stage's unit: nothing held here
      for (Buffer* b : s.all()) {
        b->p = at::zeros({0});
      }
      continue;
    }
    const UnitLayout& Full = full[u];
    const std::vector<int64_t> local = LayerLocalExperts(st->routing, moe, st->spec.num_experts, r % E);
    if (L.expert.numel > 0) ++moe;
    s.dense = MakeShard(TpSliceFlat(Full.dense, L.dense, InitFlat(Full.dense, base), t, T),
                        DecayMask(L.dense), r % F, F, !lora || base_first);
    s.lora = MakeShard(TpSliceFlat(Full.lora, L.lora, InitFlat(Full.lora, base + 1), t, T), DecayMask(L.lora),
                       r % F, F, lora && !base_first);
    if (T > 1) {
      for (auto [b, full_l, local_l] : {std::make_tuple(&s.dense, &Full.dense, &L.dense),
                                        std::make_tuple(&s.lora, &Full.lora, &L.lora)}) {
        const at::Tensor partial = TpPartialMask(*full_l, *local_l, cfg.sequence_parallel);
        if (partial.sum().item<double>() > 0) b->tp_partial = ShardOf(partial, r % F, F);
        b->tp_share = ShardOf(TpNormShare(*full_l, *local_l, T), r % F, F);
      }
    }
    s.expert = MakeExperts(Full.expert, L.expert, local, base + 2, !lora || base_first, r / E, N / E, t, T);
    s.expert_lora = MakeExperts(Full.expert_lora, L.expert_lora, local, base + 3, lora && !base_first, r / E,
                                N / E, t, T);
    s.expert.replica_share = ReplicaShare(st->replica_sync, L.expert.numel);  // redundant experts
    s.expert_lora.replica_share = ReplicaShare(st->replica_sync, L.expert_lora.numel);
  }
  // Step 3c: built on the CPU from seeds (same values on every device), then moved to the rank's device.
  if (!st->dev.is_cpu()) {
    for (UnitState& s : st->state)
      for (Buffer* b : s.all()) {
        b->p = b->p.detach().to(st->dev).requires_grad_(b->p.requires_grad());
        if (b->tp_partial.defined()) b->tp_partial = b->tp_partial.to(st->dev);
        if (b->tp_share.defined()) b->tp_share = b->tp_share.to(st->dev);
      }
  }
  const double alpha = cfg.lora_alpha > 0 ? cfg.lora_alpha : DefaultLoraAlpha(cfg.lora_rank);
  st->lora_scale = lora ? alpha / static_cast<double>(cfg.lora_rank) : 0.0;
}

void FreezeBaseForAdapters(WorkerState* st) {
  for (UnitState& s : st->state) {
    for (Buffer* b : {&s.dense, &s.expert}) {
      b->p.requires_grad_(false);
      b->trainable = false;
      b->m = at::Tensor();
      b->v = at::Tensor();
    }
    for (Buffer* b : {&s.lora, &s.expert_lora}) {
      b->p.requires_grad_(b->p.numel() > 0);
      b->trainable = true;
    }
  }
}

}  // namespace onboard::backends
