// report.json's "fusions" section: the fusion plan of the run's model at the request's seq
// (search/fusion_plan.h), checked against the exported graph when the model came from an .onnx file
// (search/fusion_plan_graph.h). Shape: search/fusion_plan_json.h without the per-layer list, plus
// "source" ("model IR" | "model IR + ONNX graph") and "graph_error" when the graph could not be read.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/orchestrator_state.h"

namespace onboard::agent {

nlohmann::json FusionsSection(const RunState& st);

}  // namespace onboard::agent
