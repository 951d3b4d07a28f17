// CheckMindSpeedArgs: the MindSpeed-LLM argument rules the MindSpeed export (export_mindspeed.cpp)
// relies on, the ones its own validation refused exports for (scripts/check-exports-with-engines.sh),
// each citing where Ascend/MindSpeed-LLM master @ c77308a1 (or Ascend/MindSpeed @ 028de58c, whose
// features it loads) enforces it. Re-stated from that source, so CI, which has no engine code,
// checks every golden against them (tests/search/export_mindspeed_rules_test.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "search/export_megatron.h"

namespace onboard {

// transformer_block.py validate_args: with --first-k-dense-replace K and pp > 1, MindSpeed-LLM
// requires K < --num-layers // pp. It reads --num-layers, not --num-layer-list, so a plan whose
// first stage is not all dense can still be refused (DeepSeek-V3: 3 < 61 // 16 fails).
bool MindSpeedDenseLayersFit(int64_t first_k_dense, int64_t num_layers, int64_t pp);

const std::vector<MegatronRule>& MindSpeedRules();
std::vector<MegatronRuleFailure> CheckMindSpeedArgs(const MegatronArgs& args);

}  // namespace onboard
