// JSON form of a fusion plan (search/fusion_plan.h), shared by `onboard inspect --fusion --json` and the
// run report's "fusions" section. Units as in fusion_plan.h: launches per layer forward pass, HBM bytes
// of intermediates per token.
//
//   {"seq", "act_bytes", "launches_saved_per_forward", "bytes_saved_per_token",
//    "layers": [{"layer", "terms": [{"kind", "chain", "launches_saved", "bytes_saved_per_token",
//                                    "formula"}], "blocked": [same + "blocked_by"] (only when any)}],
//                                                              (every layer; omitted when !per_layer)
//    "groups": [{"first_layer", "last_layer" (1-based), "count", "terms", "blocked", "launches_saved",
//                "bytes_saved_per_token"}]}                    (runs of identical layers, FoldFusionLayers)
#pragma once

#include <nlohmann/json.hpp>

#include "search/fusion_plan.h"

namespace onboard {

nlohmann::json FusionPlanJson(const FusionPlan& plan, bool per_layer);

}  // namespace onboard
