// INTERNAL to backends/ (includes LibTorch). The proxy model as flat parameter buffers + pure
// forward functions, one "unit" per FSDP block: embed, each layer, head (final norm + output + loss).
//
// Per unit, four flat buffers (fp32):
//   dense        non-expert weights                   (FSDP: sharded over the fsdp group)
//   lora         rank-r adapters on non-expert weights (FSDP: sharded; mode lora only)
//   expert       one routed expert's weights x local experts (EP: each rank holds its own experts)
//   expert_lora  adapters on each local expert          (mode lora only)
// Shapes: hidden states x_BTD [batch, tokens, hidden]; tokens/targets [batch, tokens] int64.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "backends/c10d_compat.h"
#include "backends/probe.h"

namespace onboard::backends {

struct TpContext;  // tensor parallelism (backends/probe_tp.h)

enum class Init { kNormal, kOnes, kZeros, kConst };

struct ParamSlot {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;   // elements into the flat buffer
  int64_t numel = 0;
  Init init = Init::kNormal;
  double value = 0;     // std (kNormal) or constant (kConst)
  bool decay = true;    // AdamW weight decay applies (matrices)
};

struct FlatLayout {
  std::vector<ParamSlot> slots;
  int64_t numel = 0;
  void Add(const std::string& name, std::vector<int64_t> shape, Init init, double value, bool decay);
};

enum class UnitKind { kEmbed, kLayer, kHead };

struct UnitLayout {
  std::string name;     // "embed", "layer0", ..., "head"
  UnitKind kind = UnitKind::kLayer;
  int64_t layer = -1;
  FlatLayout dense, lora, expert, expert_lora;
};

// All units of the proxy for this mode (adapters only in lora mode).
std::vector<UnitLayout> BuildLayout(const ProxySpec& spec, const ProbeConfig& config);
ProxyParamCounts CountParams(const std::vector<UnitLayout>& units, const ProxySpec& spec,
                             const ProbeConfig& config);

// Full, seeded initial values of a flat layout (identical on every rank).
at::Tensor InitFlat(const FlatLayout& layout, uint64_t seed);
at::Tensor DecayMask(const FlatLayout& layout);

// Redundant experts (backends/probe_replicas.h): what the replicas' gradient exchange needs.
struct ReplicaGradSync {
  Group* ep = nullptr;
  std::vector<int64_t> phy2log;              // [P] physical slot -> logical expert
  std::vector<std::vector<int64_t>> copies;  // [E] physical slots of each expert, ascending
  int64_t slots_per_rank = 0;
};

// What a MoE layer needs beyond its weights: the EP group, expert -> EP rank placement, and the
// per-expert token counts it records (forward passes with record == true only).
struct MoeRouting {
  Group* ep = nullptr;
  std::vector<int64_t> placement;        // expert -> EP rank
  std::vector<int64_t> local_experts;    // global ids held here, ascending
  bool record = true;
  // Aux-loss-free balancing (ProxySpec::balance_bias): layer -> per-expert selection bias [E]
  // (fp32, identical on every rank); null or no entry = no bias.
  const std::map<int64_t, at::Tensor>* score_bias = nullptr;
  std::map<int64_t, std::vector<int64_t>>* load = nullptr;  // layer -> tokens per expert
  // Negative control random_router (probe_controls.h): != 0 = each token's top-k experts are
  // drawn at random from this seed (+ the layer); the gate weights stay the router's scores.
  uint64_t random_route_seed = 0;
  const TpContext* tp = nullptr;  // shared experts: column/row-parallel over TP (null = no TP)
  // Co-activation and tier traffic (backends/probe_coactivation.h), recorded passes only; null = off.
  CoactivationRecorder* coact = nullptr;
  // Node-limited routing (ProbeConfig::max_route_nodes): expert -> node, and M (0 = off).
  std::vector<int64_t> expert_node;
  int64_t max_route_nodes = 0;
  // Redundant experts (backends/probe_replicas.h): this source's log2phy (logical expert -> the
  // physical slot its tokens go to; slots of EP rank r are [r*S, (r+1)*S)), S = slots per rank,
  // and the replica gradient exchange (null = no replicas). Empty log2phy = the placement's order.
  std::vector<int64_t> log2phy;
  int64_t slots_per_rank = 0;
  const ReplicaGradSync* replica_sync = nullptr;
  // ProbeConfig::moe_overlap: the dispatch / combine all-to-alls are waited after the shared
  // expert's halves (proxy_moe.cpp) instead of as soon as they are posted.
  bool overlap = false;
  // ProbeConfig::ep_dispatcher == "deepep" (probe_node_dedup.h): the EP ranks with this rank's local
  // index, one per node (slow tier), and the EP ranks of this rank's node (fast tier); null = plain.
  Group* ep_inter = nullptr;
  Group* ep_intra = nullptr;
};

struct UnitInputs {
  const at::Tensor* targets = nullptr;   // head: [b, T] int64
  const at::Tensor* loss_mask = nullptr; // head: [b, T] float (1 = counted)
  const at::Tensor* images = nullptr;    // embed, image task: [b, S, S, 3] pixels (proxy_vision.h)
  double inv_global_tokens = 1.0;        // head: 1 / counted tokens in the global batch
                                         // (MLA layers: also scales the DSA indexer's KL loss)
  // DSA indexer KL per MLA layer: layer -> sum over local queries of KL(p_t || softmax(I_t)) *
  // inv_global_tokens (nats; without indexer_kl_weight), ADDED on forward passes with
  // MoeRouting::record == true only (not on FSDP's backward recomputation). nullptr = not recorded.
  std::map<int64_t, double>* indexer_kl = nullptr;
  // Head: counted targets whose argmax logit is the target (exact match), ADDED on recorded
  // forward passes (MoeRouting::record) only. nullptr = not recorded.
  double* correct = nullptr;
  // Negative control no_lookback (probe_controls.h): every token mixer sees each token alone
  // (a sequence of length 1), so nothing earlier in the sequence can reach a prediction.
  bool self_only = false;
  // Tensor parallelism (probe_tp.h): the unit's weights are this TP rank's slices; null = no TP.
  const TpContext* tp = nullptr;
  // Recompute of a layer unit's two regions (fsdp_unit.h): kFull = the region is checkpointed
  // (checkpoint_fn.h); kSelective (token mixer only) = its core attention is; kNone = kept.
  Recompute mixer_recompute = Recompute::kNone;
  Recompute channel_recompute = Recompute::kNone;
};

// Forward of one unit given full (unsharded) flat buffers. x: tokens (embed) or hidden states.
at::Tensor UnitForward(const ProxySpec& spec, const UnitLayout& unit, const at::Tensor& x,
                       const at::Tensor& dense, const at::Tensor& lora, const at::Tensor& experts,
                       const at::Tensor& expert_lora, double lora_scale, MoeRouting& routing,
                       const UnitInputs& inputs);

}  // namespace onboard::backends
