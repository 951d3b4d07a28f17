// ValidateParallelFactors (probe_layout_check.h): tp first (ranks and every proxy size it splits,
// backends/probe_tp.h), then fsdp / ep over the data-parallel ranks (ranks / tp), then the batch.
// Units: ranks, heads, widths (features), sequences.
#include "backends/probe_layout_check.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace onboard {
namespace {

std::string S(int64_t v) { return std::to_string(v); }

bool Any(const ProxySpec& s, bool (*pred)(const ProxyLayer&)) {
  return std::any_of(s.layers.begin(), s.layers.end(), pred);
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
  // Step 1: tensor parallelism: divides the ranks and every size it splits.
  const int64_t t = c.tp;
  bool tp_ok = t >= 0;
  if (t < 0) bad.push_back("tp=" + S(t) + " must be >= 1");
  if (t > 1) {
    if (c.ranks % t != 0) {
      bad.push_back("tp=" + S(t) + " must divide ranks=" + S(c.ranks));
      tp_ok = false;
    }
    for (const auto& [name, v] : TpSplitSizes(spec))
      if (v % t != 0) bad.push_back("tp=" + S(t) + " must divide " + name + "=" + S(v));
  }
  // Step 2: fsdp and ep over the data-parallel ranks.
  const int64_t d = tp_ok ? c.data_ranks() : c.ranks;
  const std::string dn = tp_ok && c.tp_degree() > 1 ? "ranks/tp=" + S(d) : "ranks=" + S(d);
  const int64_t e = c.ep_degree(), f = c.fsdp_degree();
  if (e < 1 || d % e != 0) bad.push_back("ep=" + S(e) + " must divide " + dn);
  if (e >= 1 && spec.num_experts % e != 0)
    bad.push_back("ep=" + S(e) + " must divide num_experts=" + S(spec.num_experts));
  if (f < 1 || d % f != 0) bad.push_back("fsdp=" + S(f) + " must divide " + dn);
  // Step 3: the global batch over the data-parallel ranks and micro-batches.
  if (c.batch < 1 || c.batch % d != 0)
    bad.push_back("batch=" + S(c.batch) + " must be a positive multiple of " + dn);
  else if (c.micro_batch < 0 || (c.micro_batch > 0 && c.batch % (d * c.micro_batch) != 0))
    bad.push_back("batch=" + S(c.batch) + " must be a multiple of " + dn +
                  " * micro_batch=" + S(c.micro_batch));
  if (bad.empty()) return Status::Ok();
  std::string msg;
  for (const std::string& b : bad) msg += (msg.empty() ? "" : "; ") + b;
  std::string value = "tp=" + S(c.tp_degree()) + " fsdp=" + S(f) + " ep=" + S(e) + " ranks=" + S(c.ranks);
  return BadInput("probe", "layout", msg, value);
}

}  // namespace onboard
