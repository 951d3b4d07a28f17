// Internal to the ONNX reader (onnx_*.cpp): an index over one GraphProto that the structure-recovery
// steps share. Not a public API; see parsers/onnx_model.h.
//
// Terms: a "value" is a graph edge name. A "parameter" is a weight tensor: a floating-point
// initializer of rank >= 1 (or an integer one feeding DequantizeLinear / MatMulNBits), or the output of
// an Identity chain over one. A "linear" is a MatMul/Gemm whose weight operand is a rank-2 parameter.
// Units: dims are element counts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/status.h"

namespace onboard::onnx_internal {

struct TensorMeta {
  std::vector<int64_t> dims;
  int64_t numel = 0;
  int32_t dtype = 0;                          // onnx::TensorProto::DataType
  bool external = false;                      // data_location == EXTERNAL (never read)
  const onnx::TensorProto* proto = nullptr;
};

struct GraphIndex {
  std::string origin;                                   // file name for errors
  const onnx::GraphProto* graph = nullptr;
  std::map<std::string, TensorMeta> initializers;       // by name
  std::map<std::string, const onnx::TensorProto*> constants;  // Constant node outputs
  std::map<std::string, std::string> root;              // value -> initializer it aliases (Identity chains)
  std::map<std::string, int> producer;                  // value -> node index
  std::map<std::string, std::vector<int>> consumers;    // value -> node indices
  std::vector<std::vector<std::string>> scopes;         // node -> scope segments (op name dropped)
  std::set<std::string> graph_inputs;                   // non-initializer graph inputs
  // Outer values a node's subgraphs (Loop/If/Scan bodies) read implicitly; listed in `consumers` too.
  std::map<int, std::vector<std::string>> implicit_inputs;

  const onnx::NodeProto& node(int i) const { return graph->node(i); }
  int num_nodes() const { return graph->node_size(); }
  // Explicit inputs followed by implicit (subgraph-captured) ones.
  std::vector<std::string> InputsOf(int i) const;
  // The initializer `value` is or aliases, or "" when it is computed.
  std::string RootOf(const std::string& value) const;
  const TensorMeta* Init(const std::string& value) const;  // via RootOf; nullptr when computed
};

// Step 1 of the reader: validates every initializer's dims (non-negative, product fits int64) and
// builds the index. Errors name the initializer and the offending dim.
[[nodiscard]] Expected<GraphIndex> BuildGraphIndex(const onnx::GraphProto& graph, const std::string& origin);

bool IsFloatType(int32_t onnx_dtype);

// Constant integer vector behind `value` (initializer or Constant node; int64/int32 data); nullopt
// when computed or malformed.
std::optional<std::vector<int64_t>> ConstInts(const GraphIndex& g, const std::string& value);
// Constant float scalar behind `value` (float/double/half data, one element).
std::optional<double> ConstScalar(const GraphIndex& g, const std::string& value);
// Integer attribute `name` of node i, or `fallback`.
int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback);

// Reshape target as a vector: known entries >= -1 (0/-1 keep their ONNX meaning), unknown = -2.
// nullopt when even the rank is unknown.
std::optional<std::vector<int64_t>> ReshapeTarget(const GraphIndex& g, const std::string& shape_value);

// Parameters (onnx_params.cpp).
struct ParamTable {
  std::map<std::string, int64_t> numel;       // parameter value name -> elements
  int64_t total = 0;                          // sum of numel (each named parameter once)
  int64_t shared = 0;                         // parameters read by more than one node
  int64_t aliases = 0;                        // Identity outputs (exporter de-duplicated equal values)
  std::set<std::string> tied_copies;          // initializers equal to a transposed embedding (not counted)
};
ParamTable CountParams(const GraphIndex& g);
bool IsParam(const ParamTable& p, const std::string& value);
// True when initializer `b` [n, m] holds exactly the transpose of initializer `a` [m, n].
bool IsTransposedCopy(const GraphIndex& g, const std::string& a, const std::string& b);

// A MatMul/Gemm with a parameter weight; in/out are the weight's input/output widths.
struct Linear {
  int node = -1;
  std::string weight;         // parameter value name
  int64_t in = 0;
  int64_t out = 0;
  std::string bias;           // bias parameter ("" when none)
};
// The linear at node i, if it is one.
std::optional<Linear> AsLinear(const GraphIndex& g, const ParamTable& p, int i);

}  // namespace onboard::onnx_internal
