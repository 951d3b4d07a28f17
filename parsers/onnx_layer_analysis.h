// Internal to the ONNX reader: recovers one decoder/encoder layer's LayerSpec from its nodes.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "parsers/onnx_graph.h"

namespace onboard::onnx_internal {

struct LayerNodes {
  int64_t index = 0;          // layer number from the scope ("layers.3" -> 3)
  size_t depth = 0;           // position of the "layers.N" segment in the scope
  std::vector<int> nodes;     // node indices in graph order
};

// Step 5 of the reader (onnx_model.cpp): the repeated block list = the indexed scope prefix
// ("/model/layers") with most indices, in layer order.
std::vector<LayerNodes> FindLayers(const GraphIndex& g);
// A norm's core: LayerNormalization-family ops, or a Sqrt over ReduceMean (+ eps) (RMSNorm).
bool IsNormNode(const GraphIndex& g, int n);

struct LayerFacts {
  LayerSpec spec;
  std::set<std::string> params;     // parameters read by the layer's nodes
  std::vector<std::string> notes;   // how each fact was recovered
  std::vector<std::string> warnings;
};

// `hidden` comes from the token embedding. The layer's attention is found from its Softmax over a
// MatMul of two activations; its projections from dataflow around it; norms from LayerNormalization
// ops or ReduceMean..Sqrt patterns; MoE from a TopK; experts from indexed scopes ("experts.3").
LayerFacts AnalyzeLayer(const GraphIndex& g, const ParamTable& p, const LayerNodes& layer, int64_t hidden);

struct Ctx;
// Steps 3-4 (onnx_channel_analysis.cpp): fills facts->spec's channel from the layer's linears that
// are not attention projections.
void AnalyzeChannel(const Ctx& c, const LayerNodes& layer, const std::set<int>& attn_nodes,
                    const std::set<int>& attn_linears, int64_t hidden, LayerFacts* facts);

}  // namespace onboard::onnx_internal
