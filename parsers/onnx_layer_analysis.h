// Internal to the ONNX reader: recovers one decoder/encoder layer's LayerSpec from its nodes.
#pragma once

#include <optional>
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

// A malformed layer (e.g. a KDA kernel op without num_heads): the reader returns it as kBadInput.
struct LayerError {
  std::string field;  // "graph.node[/layers.0/self_attn/ChunkKDA].attribute.num_heads"
  std::string problem;
  std::string value;
};

struct LayerFacts {
  LayerSpec spec;
  std::optional<LayerError> error;  // set: the layer cannot be read (the other fields are partial)
  std::set<std::string> params;     // parameters read by the layer's nodes
  std::vector<std::string> notes;   // how each fact was recovered
  std::vector<std::string> warnings;
};

// `hidden` comes from the token embedding. A KDA kernel op (onnx_kda_mixer.cpp) makes the mixer KDA;
// otherwise the layer's attention is found from its Softmax over a
// MatMul of two activations; its projections from dataflow around it; norms from LayerNormalization
// ops or ReduceMean..Sqrt patterns; MoE from a TopK; experts from indexed scopes ("experts.3").
LayerFacts AnalyzeLayer(const GraphIndex& g, const ParamTable& p, const LayerNodes& layer, int64_t hidden);

struct Ctx;
// A KDA recurrence exported as one custom-domain op (com.onboard::ChunkKDA).
bool IsKdaKernelOp(const onnx::NodeProto& node);
// Step 1b (onnx_kda_mixer.cpp): when the layer holds a KDA kernel op, fills facts->spec.attn from its
// attributes and projections (or facts->error when the op is malformed), adds the mixer's nodes and
// linears, and returns true; false when the layer has no such op.
bool AnalyzeKdaMixer(const Ctx& c, const LayerNodes& layer, int64_t hidden, std::set<int>* attn_nodes,
                     std::set<int>* attn_linears, LayerFacts* facts);
// Steps 3-4 (onnx_channel_analysis.cpp): fills facts->spec's channel from the layer's linears that
// are not attention projections.
void AnalyzeChannel(const Ctx& c, const LayerNodes& layer, const std::set<int>& attn_nodes,
                    const std::set<int>& attn_linears, int64_t hidden, LayerFacts* facts);

}  // namespace onboard::onnx_internal
