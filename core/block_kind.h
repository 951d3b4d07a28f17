// BlockKind: the unit the cost model (search/) groups layers by. Every layer is two blocks, its token
// mixer (one kind per MixerKind) and its channel mixer (dense MLP or MoE). The search gives each kind
// one recompute policy and sums compute time per kind. Plan::recompute keys and
// PlanEstimate::compute_s_by_kind keys spell a kind as BlockKindName prints it ("KDA", "MLA",
// "DSA", "MoE", "MLP", ...: MixerKindName / ChannelKindName, so plan files read as before).
// One printer (BlockKindName), one parser (ParseBlockKind); the cost model compares the enum.
// ValidatePlan (core/plan.cpp) refuses a Plan::recompute key that is neither a kind nor "*".
#pragma once

#include <optional>
#include <string>

#include "core/model_ir.h"

namespace onboard {

// Token mixers (one per MixerKind), then channel mixers. Adding one: an enumerator and a row in
// kBlockKinds (block_kind.cpp); a MixerKind without a row fails MixerBlockKind's assert.
enum class BlockKind {
  kMHA,
  kGQA,
  kMLA,
  kDSA,
  kKDA,
  kGatedDeltaNet,
  kLinearAttention,
  kSlidingWindow,
  kMLP,
  kMoE,
};

BlockKind MixerBlockKind(MixerKind k);
BlockKind ChannelBlockKind(ChannelKind c);
const char* BlockKindName(BlockKind k);  // "KDA", "MoE", ... (the Plan::recompute key)
// The kind `name` spells (exact BlockKindName spelling); nullopt for anything else ("*", "head").
std::optional<BlockKind> ParseBlockKind(const std::string& name);
// Every kind's name, comma-separated in enum order, for error messages.
std::string BlockKindList();

}  // namespace onboard
