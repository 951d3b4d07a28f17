// Plan-shape limits (see plan_request_checks.h).
#include "search/plan_request_checks.h"

#include <cmath>
#include <cstdio>

#include "search/cross_entropy_cost.h"

namespace onboard {
namespace {

Status CheckInt(const std::string& origin, const std::string& field, int64_t v, int64_t lo, int64_t hi) {
  if (v >= lo && v <= hi) return Status::Ok();
  return BadInput(origin, field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                  std::to_string(v));
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

Status CheckCrossEntropy(const std::string& origin, const std::string& name) {
  if (FindCrossEntropy(name) != nullptr) return Status::Ok();
  return BadInput(origin, "cross_entropy", "must be " + CrossEntropyNames(), name);
}

Status CheckExpertRouting(const std::string& origin, const std::string& prefix, double expert_nodes_per_token,
                          int64_t max_route_nodes, int64_t max_top_k) {
  const double v = expert_nodes_per_token;
  const std::string field = prefix + "expert_nodes_per_token";
  if (!std::isfinite(v) || v < 0 || (v > 0 && v < 1))
    return BadInput(origin, field, "must be 0 (not given) or >= 1 (nodes a token's top-k span)", Num(v));
  if (v > 0 && max_top_k == 0)
    return BadInput(origin, field, "must be 0: the model has no routed experts", Num(v));
  if (v > 0 && max_top_k > 0 && v > static_cast<double>(max_top_k))
    return BadInput(origin, field,
                    "must be <= top_k=" + std::to_string(max_top_k) + " (one node per copy at most)", Num(v));
  return CheckInt(origin, prefix + "max_route_nodes", max_route_nodes, 0, kMaxRouteNodes);
}

int64_t MaxRoutedTopK(const ModelIR& model) {
  int64_t k = 0;
  for (const LayerSpec& l : model.layers)
    if (l.channel == ChannelKind::kMoE && l.moe.top_k > k) k = l.moe.top_k;
  return k;
}

Expected<EpDispatcher> ParseEpDispatcher(const std::string& origin, const std::string& field,
                                         const std::string& text) {
  if (text == "alltoall") return EpDispatcher::kAllToAll;
  if (text == "deepep") return EpDispatcher::kDeepEP;
  if (text == "hybridep") return EpDispatcher::kHybridEP;
  return BadInput(origin, field, "must be alltoall, deepep or hybridep", text);
}

Status CheckPlanShape(const std::string& origin, FinetuneMode mode, int64_t lora_rank, int64_t seq,
                      int64_t global_batch) {
  if (mode == FinetuneMode::kLoRA)
    ONBOARD_RETURN_IF_ERROR(CheckInt(origin, "lora_rank", lora_rank, 1, kMaxLoraRank));
  ONBOARD_RETURN_IF_ERROR(CheckInt(origin, "seq", seq, 1, kMaxSeq));
  return CheckInt(origin, "global_batch", global_batch, 0, kMaxGlobalBatch);
}

Status CheckBf16LayerRequest(const std::string& origin, Precision compute_dtype, int64_t first, int64_t last,
                             int64_t num_layers) {
  if (first == 0 && last == 0) return Status::Ok();
  Plan q;
  q.compute_dtype = compute_dtype;
  q.bf16_layers_first = first;
  q.bf16_layers_last = last;
  const Status st = CheckBf16Layers(q, num_layers);
  if (st.ok()) return st;
  return BadInput(origin, "bf16_layers", st.message(), std::to_string(first) + "," + std::to_string(last));
}

}  // namespace onboard
