// The checks of the fields that a plan request shares with the loop's request (agent::RunRequest)
// and with layout files: their limits (the precisions a plan names: core/precision.h). One home:
// PlanRequest::Validate, RunRequest::Validate and the layout-file reader call these; the front ends
// (CLI, HTTP) only convert types and map the Status.
//
// Limits and why:
//   lora_rank     [1, 65536]   adapters wider than any hidden size in the catalog are refused
//   seq           [1, 2^24]    tokens per sequence (16M; the longest context planned is 1M)
//   global_batch  [0, 2^30]    sequences per step, 0 = planner default; seq * global_batch <= 2^54
//                              stays exact in a double and far from int64 overflow
//   expert_nodes_per_token  0, or [1, top_k]  a token's top-k experts span at least one node and at
//                              most top_k (the model's largest top_k; a model without routed experts
//                              takes none); 0 = not given
//   max_route_nodes  [0, 65536]  node-limited routing M (0 = off); beyond any node count planned
//   ep_dispatcher    alltoall | deepep | hybridep
// Units: tokens, sequences, nodes.
#pragma once

#include <cstdint>
#include <string>

#include "core/model_ir.h"
#include "core/plan.h"
#include "core/status.h"

namespace onboard {

inline constexpr int64_t kMaxLoraRank = 65536;
inline constexpr int64_t kMaxSeq = int64_t{1} << 24;
inline constexpr int64_t kMaxGlobalBatch = int64_t{1} << 30;

// lora_rank (when mode is LoRA), seq and global_batch against the limits above. `origin` names the
// input in the message ("plan request", "run request").
inline constexpr int64_t kMaxRouteNodes = 65536;
inline constexpr int64_t kTopKUnknown = -1;  // CheckExpertRouting before the model is known

// expert_nodes_per_token and max_route_nodes against the limits above; `max_top_k` = the model's
// largest routed top_k (0: no routed experts, kTopKUnknown: only the model-free bounds).
// `prefix` goes before the field names ("runs[2]." in a layout file).
[[nodiscard]] Status CheckExpertRouting(const std::string& origin, const std::string& prefix,
                                        double expert_nodes_per_token, int64_t max_route_nodes,
                                        int64_t max_top_k);

// A loss over the logits (PlanRequest::cross_entropy, a layout's "cross_entropy"): one of
// search/cross_entropy_cost.h's names; anything else names the field and the value.
[[nodiscard]] Status CheckCrossEntropy(const std::string& origin, const std::string& name);

// The largest routed top_k of the model's MoE layers (0: no routed experts).
int64_t MaxRoutedTopK(const ModelIR& model);

// "alltoall" | "deepep" | "hybridep" (core/plan.h EpDispatcher); anything else names field and value.
[[nodiscard]] Expected<EpDispatcher> ParseEpDispatcher(const std::string& origin, const std::string& field,
                                                       const std::string& text);

[[nodiscard]] Status CheckPlanShape(const std::string& origin, FinetuneMode mode, int64_t lora_rank,
                                    int64_t seq, int64_t global_batch);

// bf16 first / last layers of a request (core/plan.h CheckBf16Layers before pp is chosen; `num_layers`
// 0 when the model is not known yet): refused naming field 'bf16_layers' and "first,last".
[[nodiscard]] Status CheckBf16LayerRequest(const std::string& origin, Precision compute_dtype, int64_t first,
                                           int64_t last, int64_t num_layers);

}  // namespace onboard
