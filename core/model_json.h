// Machine-readable form of a ModelIR and its ModelStats (what `onboard inspect --json` prints).
// Units as in core/model_ir.h: params are scalar counts, FLOPs are per token (forward, multiply-add = 2),
// bytes are bytes.
#pragma once

#include <nlohmann/json.hpp>

#include "core/model_ir.h"

namespace onboard {

// {"model": facts, "layer_summary": [...], "vision": {...}|null, "totals": {...}, "layers": [...],
//  "warnings": [...]}
nlohmann::json ModelStatsToJson(const ModelIR& model, const ModelStats& stats);

// One layer's architecture (mixer + channel fields).
nlohmann::json LayerSpecToJson(const LayerSpec& layer);

}  // namespace onboard
