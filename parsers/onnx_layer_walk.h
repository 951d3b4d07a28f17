// Internal to the ONNX reader: dataflow walks inside one layer's nodes, shared by the attention/norm
// step (onnx_layer_analysis.cpp) and the channel step (onnx_channel_analysis.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/model_ir.h"
#include "parsers/onnx_graph.h"

namespace onboard::onnx_internal {

constexpr int kMaxSearchNodes = 4096;  // per BFS: bounds work on adversarial graphs

struct Ctx {
  const GraphIndex& g;
  const ParamTable& p;
  std::set<int> in_layer;
  std::map<int, Linear> linears;  // node -> linear
};

const std::string& Op(const Ctx& c, int i);
// Producer of `v` when it lies inside the layer, else -1.
int ProducerIn(const Ctx& c, const std::string& v);
// Backward BFS from `values` over producers inside the layer; stops at linears (collected), Shape and
// Constant nodes (shape metadata is not data flow). Subgraph-captured values count as inputs.
std::set<int> LinearsUpstream(const Ctx& c, const std::vector<std::string>& values, std::set<int>* visited);
// Forward BFS from node `start` over consumers inside the layer; stops at linears (collected) and Shape.
std::set<int> LinearsDownstream(const Ctx& c, int start, std::set<int>* visited);
// Follows the data input back through cheap elementwise ops up to `steps` nodes; returns the first node
// whose op is in `targets` (or -1); `path` collects the nodes passed.
int BackTo(const Ctx& c, const std::string& value, const std::set<std::string>& targets, int steps,
           std::vector<int>* path = nullptr);
// A MatMul of two activations (attention scores / values), not a linear.
bool IsActivationMatMul(const Ctx& c, int n);
// Activation family among `nodes`: Erf/Gelu -> GELU, x*Sigmoid(x) -> SiLU, Relu; gated -> GLU form.
Activation FindActivation(const Ctx& c, const std::set<int>& nodes, bool gated);
// "/a/b/c" from the first n segments.
std::string ScopeKey(const std::vector<std::string>& segs, size_t n);
// "experts.12" -> true.
bool IsIndexed(const std::string& seg);

}  // namespace onboard::onnx_internal
