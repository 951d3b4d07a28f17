// ValidateParallelFactors (probe_layout_check.h), in ProbeConfig's rank order: tp first (ranks and
// every proxy size it splits, backends/probe_tp.h), then pp (ranks / tp, the proxy's layers,
// backends/probe_pipeline_schedule.h), then fsdp / ep over the data ranks (ranks / (tp * pp)),
// then the batch and the pipeline schedule's micro-batches.
// Units: ranks, heads, widths (features), layers, sequences.
#include "backends/probe_layout_check.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backends/probe_pipeline_schedule.h"

namespace onboard {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool Any(const ProxySpec& s, bool (*pred)(const ProxyLayer&)) {
  return std::any_of(s.layers.begin(), s.layers.end(), pred);
}

// Step 1 helper: sequence parallelism splits the tokens; expert TP (1 or tp) the routed experts'
// FFN width.
void CheckTpOptions(const ProbeConfig& c, const ProxySpec& spec, std::vector<std::string>* bad) {
  const int64_t t = c.tp_degree();
  if (c.sequence_parallel && t <= 1) bad->push_back("sequence_parallel needs tp > 1 (tp=" + S(c.tp) + ")");
  if (c.sequence_parallel && t > 1 && c.seq % t != 0)
    bad->push_back("tp=" + S(t) + " must divide seq=" + S(c.seq) + " (sequence parallelism)");
  if (c.etp > 1 && c.etp != t) bad->push_back("etp=" + S(c.etp) + " must be 1 or tp=" + S(t));
  if (c.etp > 1 && c.etp == t && spec.expert_inter % t != 0)
    bad->push_back("etp=" + S(c.etp) + " must divide expert_inter=" + S(spec.expert_inter));
  if (c.etp < 0) bad->push_back("etp=" + S(c.etp) + " must be >= 0");
  if (c.etp > 1 && c.mode == FinetuneMode::kLoRA)
    bad->push_back("etp=" + S(c.etp) +
                   " with mode=lora: the probe does not sum the expert adapters' TP-partial gradients");
}

// Step 1: tensor parallelism divides the ranks and every size it splits (and its options are
// possible); false when the ranks cannot be split by it.
bool CheckTp(const ProbeConfig& c, const ProxySpec& spec, std::vector<std::string>* bad) {
  const int64_t t = c.tp;
  if (t < 0) bad->push_back("tp=" + S(t) + " must be >= 1");
  CheckTpOptions(c, spec, bad);
  if (t <= 1) return t >= 0;
  const bool ok = c.ranks % t == 0;
  if (!ok) bad->push_back("tp=" + S(t) + " must divide ranks=" + S(c.ranks));
  for (const auto& [name, v] : TpSplitSizes(spec))
    if (v % t != 0) bad->push_back("tp=" + S(t) + " must divide " + name + "=" + S(v));
  return ok;
}

// Step 2: pipeline stages divide ranks / tp; the layers and interleave (PipelineLayoutProblems
// without the micro-batches, checked in Step 4); false when the ranks cannot be split by it.
bool CheckPp(const ProbeConfig& c, const ProxySpec& spec, bool tp_ok, std::vector<std::string>* bad) {
  const int64_t p = c.pp_degree(), n = tp_ok ? c.ranks / c.tp_degree() : c.ranks;
  const std::string nn = tp_ok && c.tp_degree() > 1 ? "ranks/tp=" + S(n) : "ranks=" + S(n);
  const bool ok = c.pp >= 1 && n % p == 0;
  if (c.pp >= 1 && !ok) bad->push_back("pp=" + S(c.pp) + " must divide " + nn);
  const int64_t m = std::max<int64_t>(1, p);  // micro-batches: every interleave problem is Step 4's
  for (const std::string& s : PipelineLayoutProblems(c.pp, c.interleave, spec.num_layers(), m, {}))
    bad->push_back(s);
  return ok;
}

// How the data ranks are named in messages: "ranks=4", "ranks/tp=2", "ranks/pp=2", "ranks/(tp*pp)=2".
std::string DataRanksName(const ProbeConfig& c) {
  const bool tp = c.tp_degree() > 1, pp = c.pp_degree() > 1;
  const std::string what = tp && pp ? "ranks/(tp*pp)=" : tp ? "ranks/tp=" : pp ? "ranks/pp=" : "ranks=";
  return what + S(c.data_ranks());
}

}  // namespace

std::vector<std::pair<std::string, int64_t>> TpSplitSizes(const ProxySpec& s) {
  const bool kda = Any(s, [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kKDA; });
  const bool mla = Any(s, [](const ProxyLayer& l) { return l.mixer == ProxyMixer::kMLA; });
  const bool dense = Any(s, [](const ProxyLayer& l) { return l.channel == ProxyChannel::kDense; });
  const bool moe = Any(s, [](const ProxyLayer& l) { return l.channel == ProxyChannel::kMoE; });
  std::vector<std::pair<std::string, int64_t>> out;
  if (kda) out.emplace_back("kda_heads", s.kda_heads);
  if (mla) out.emplace_back("mla_heads", s.mla_heads);
  if (mla && s.index_topk > 0 && s.index_heads > 0) out.emplace_back("index_heads", s.index_heads);
  if (dense) out.emplace_back("mlp_inter", s.mlp_inter);
  if (moe && s.num_shared > 0) out.emplace_back("shared_inter", s.shared_inter);
  out.emplace_back("vocab", s.vocab);
  return out;
}

Status ValidateParallelFactors(const ProbeConfig& c, const ProxySpec& spec) {
  std::vector<std::string> bad;
  const bool tp_ok = CheckTp(c, spec, &bad);
  const bool pp_ok = CheckPp(c, spec, tp_ok, &bad);
  // Step 3: fsdp and ep over the data ranks (the ranks tp leaves when pp cannot split them; all
  // ranks when tp cannot).
  const bool split = tp_ok && pp_ok, tp_only = tp_ok && !pp_ok && c.tp_degree() > 1;
  const int64_t d = split ? c.data_ranks() : tp_only ? c.ranks / c.tp_degree() : c.ranks;
  const std::string dn = split ? DataRanksName(c) : tp_only ? "ranks/tp=" + S(d) : "ranks=" + S(d);
  const int64_t e = c.ep > 0 ? c.ep : d, f = c.fsdp > 0 ? c.fsdp : d;
  if (e < 1 || d % e != 0) bad.push_back("ep=" + S(e) + " must divide " + dn);
  if (e >= 1 && spec.num_experts % e != 0)
    bad.push_back("ep=" + S(e) + " must divide num_experts=" + S(spec.num_experts));
  if (f < 1 || d % f != 0) bad.push_back("fsdp=" + S(f) + " must divide " + dn);
  // Step 4: the global batch over the data ranks and micro-batches; the pipeline schedule's
  // micro-batches and split points.
  if (c.batch < 1 || c.batch % d != 0) {
    bad.push_back("batch=" + S(c.batch) + " must be a positive multiple of " + dn);
  } else if (c.micro_batch < 0 || (c.micro_batch > 0 && c.batch % (d * c.micro_batch) != 0)) {
    bad.push_back("batch=" + S(c.batch) + " must be a multiple of " + dn +
                  " * micro_batch=" + S(c.micro_batch));
  } else if (split && c.pp_degree() > 1 && c.interleave >= 1) {
    const int64_t m = c.micro_steps();
    for (const std::string& s :
         PipelineLayoutProblems(c.pp, c.interleave, spec.num_layers(), m, c.stage_layer_starts))
      if (std::find(bad.begin(), bad.end(), s) == bad.end()) bad.push_back(s);
  }
  if (bad.empty()) return Status::Ok();
  std::string msg;
  for (const std::string& b : bad) msg += (msg.empty() ? "" : "; ") + b;
  const std::string value =
      "tp=" + S(c.tp_degree()) + " pp=" + S(c.pp) + " fsdp=" + S(f) + " ep=" + S(e) + " ranks=" + S(c.ranks);
  return BadInput("probe", "layout", msg, value);
}

std::vector<int64_t> ProbeConfig::ep_group_nodes(int64_t r) const {
  const int64_t E = ep_degree(), d0 = data_rank_of(r) / E * E;
  std::vector<int64_t> nodes;
  for (int64_t j = 0; j < E; ++j)
    nodes.push_back(node_of(stage_of(r) * stage_ranks() + (d0 + j) * tp_degree() + tp_rank_of(r)));
  return nodes;
}

Status ValidateEpDispatcher(const ProbeConfig& c) {
  const std::string v = c.ep_dispatcher;
  if (v == "alltoall") return Status::Ok();
  if (v != "deepep")
    return BadInput("probe", "ep_dispatcher", "must be alltoall or deepep (hybridep is not in the probe)", v);
  if (c.nodes() < 2)
    return BadInput(
        "probe", "ep_dispatcher",
        "deepep needs >= 2 nodes (ranks_per_node=" + std::to_string(c.ranks_per_node) + " gives 1)", v);
  if (c.moe_overlap)
    return BadInput("probe", "ep_dispatcher", "deepep runs synchronously: not with moe_overlap", v);
  for (int64_t r = 0; r < c.ranks; ++r) {
    const std::vector<int64_t> n = c.ep_group_nodes(r);
    std::vector<int64_t> runs;  // EP ranks per node, nodes in EP rank order
    for (size_t j = 0; j < n.size(); ++j) {
      if (j == 0 || n[j] != n[j - 1]) runs.push_back(0);
      ++runs.back();
    }
    const bool ok = std::is_sorted(n.begin(), n.end()) && runs.size() >= 2 &&
                    std::all_of(runs.begin(), runs.end(), [&](int64_t x) { return x == runs[0]; });
    if (!ok)
      return BadInput(
          "probe", "ep_dispatcher",
          "deepep needs every EP group to span >= 2 nodes with the same number of its ranks on each (ep=" +
              std::to_string(c.ep_degree()) + ", ranks_per_node=" + std::to_string(c.ranks_per_node) +
              ", tp=" + std::to_string(c.tp_degree()) + ")",
          v);
  }
  return Status::Ok();
}

}  // namespace onboard
