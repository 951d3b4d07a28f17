// report.json's "fusions" section: the fusion plan of the run's model at the request's seq and the
// final plan's GEMM input precision (fp8 / mxfp8: each norm fuses with its quantise; search/fusion_plan.h),
// checked against the exported graph when the model came from an .onnx file (search/fusion_plan_graph.h).
// Shape: search/fusion_plan_json.h without the per-layer list, plus "source" ("model IR" | "model IR + ONNX
// graph") and "graph_error" when the graph could not be read; "cost_model": the final plan's step time and
// activation bytes per device with fused kernels and with the attention-side kernels unfused (fused_step_s,
// unfused_step_s, fused_activation_bytes, unfused_activation_bytes), absent when there is no plan or the
// request already runs unfused.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/orchestrator_state.h"

namespace onboard::agent {

nlohmann::json FusionsSection(const RunState& st);

}  // namespace onboard::agent
