// BlockKind's one table, printer and parser (see block_kind.h). The names are core/model_ir's
// MixerKindName / ChannelKindName, so a block kind and the layer kind it comes from print alike.
#include "core/block_kind.h"

#include <string>

#include "core/status.h"

namespace onboard {
namespace {

// Each block kind and the layer kind it stands for (a token mixer's or a channel mixer's).
struct BlockKindRow {
  BlockKind kind;
  bool channel;  // false: `mixer` holds the layer kind; true: `channel` does
  MixerKind mixer;
  ChannelKind channel_kind;
};

constexpr BlockKindRow kBlockKinds[] = {
    {BlockKind::kMHA, false, MixerKind::kMHA, ChannelKind::kDenseMLP},
    {BlockKind::kGQA, false, MixerKind::kGQA, ChannelKind::kDenseMLP},
    {BlockKind::kMLA, false, MixerKind::kMLA, ChannelKind::kDenseMLP},
    {BlockKind::kDSA, false, MixerKind::kDSA, ChannelKind::kDenseMLP},
    {BlockKind::kKDA, false, MixerKind::kKDA, ChannelKind::kDenseMLP},
    {BlockKind::kGatedDeltaNet, false, MixerKind::kGatedDeltaNet, ChannelKind::kDenseMLP},
    {BlockKind::kLinearAttention, false, MixerKind::kLinearAttention, ChannelKind::kDenseMLP},
    {BlockKind::kSlidingWindow, false, MixerKind::kSlidingWindow, ChannelKind::kDenseMLP},
    {BlockKind::kMLP, true, MixerKind::kMHA, ChannelKind::kDenseMLP},
    {BlockKind::kMoE, true, MixerKind::kMHA, ChannelKind::kMoE},
};

const BlockKindRow& Row(BlockKind k) {
  for (const BlockKindRow& r : kBlockKinds)
    if (r.kind == k) return r;
  ONBOARD_ASSERT(false, "BlockKind " + std::to_string(static_cast<int>(k)) + " has no row in kBlockKinds");
  return kBlockKinds[0];
}

}  // namespace

BlockKind MixerBlockKind(MixerKind k) {
  for (const BlockKindRow& r : kBlockKinds)
    if (!r.channel && r.mixer == k) return r.kind;
  ONBOARD_ASSERT(false, "MixerKind " + std::to_string(static_cast<int>(k)) + " has no row in kBlockKinds");
  return BlockKind::kMHA;
}

BlockKind ChannelBlockKind(ChannelKind c) {
  for (const BlockKindRow& r : kBlockKinds)
    if (r.channel && r.channel_kind == c) return r.kind;
  ONBOARD_ASSERT(false, "ChannelKind " + std::to_string(static_cast<int>(c)) + " has no row in kBlockKinds");
  return BlockKind::kMLP;
}

const char* BlockKindName(BlockKind k) {
  const BlockKindRow& r = Row(k);
  return r.channel ? ChannelKindName(r.channel_kind) : MixerKindName(r.mixer);
}

std::optional<BlockKind> ParseBlockKind(const std::string& name) {
  for (const BlockKindRow& r : kBlockKinds)
    if (name == BlockKindName(r.kind)) return r.kind;
  return std::nullopt;
}

std::string BlockKindList() {
  std::string out;
  for (const BlockKindRow& r : kBlockKinds)
    out += (out.empty() ? "" : ", ") + std::string(BlockKindName(r.kind));
  return out;
}

}  // namespace onboard
