// Dataflow walks inside one layer (see parsers/onnx_layer_walk.h).
#include "parsers/onnx_layer_walk.h"

#include <deque>

namespace onboard::onnx_internal {

const std::string& Op(const Ctx& c, int i) { return c.g.node(i).op_type(); }

int ProducerIn(const Ctx& c, const std::string& v) {
  auto it = c.g.producer.find(v);
  return (it != c.g.producer.end() && c.in_layer.count(it->second)) ? it->second : -1;
}

// Backward BFS from `values` over producers inside the layer; stops at linears (collected), Shape and
// Constant nodes (shape metadata is not data flow).
std::set<int> LinearsUpstream(const Ctx& c, const std::vector<std::string>& values, std::set<int>* visited) {
  std::set<int> found;
  std::deque<int> q;
  for (const auto& v : values)
    if (int n = ProducerIn(c, v); n >= 0) q.push_back(n);
  while (!q.empty() && int(visited->size()) < kMaxSearchNodes) {
    const int n = q.front();
    q.pop_front();
    if (!visited->insert(n).second) continue;
    if (c.linears.count(n)) {
      found.insert(n);
      continue;
    }
    const std::string& op = Op(c, n);
    if (op == "Shape" || op == "Constant" || op == "Size") continue;
    for (const std::string& in : c.g.InputsOf(n))
      if (int m = ProducerIn(c, in); m >= 0 && !visited->count(m)) q.push_back(m);
  }
  return found;
}

// Forward BFS from node `start` over consumers inside the layer; stops at linears (collected) and Shape.
std::set<int> LinearsDownstream(const Ctx& c, int start, std::set<int>* visited) {
  std::set<int> found;
  std::deque<int> q = {start};
  while (!q.empty() && int(visited->size()) < kMaxSearchNodes) {
    const int n = q.front();
    q.pop_front();
    if (!visited->insert(n).second) continue;
    if (n != start && c.linears.count(n)) {
      found.insert(n);
      continue;
    }
    if (Op(c, n) == "Shape") continue;
    for (const std::string& out : c.g.node(n).output()) {
      auto it = c.g.consumers.find(out);
      if (it == c.g.consumers.end()) continue;
      for (int m : it->second)
        if (c.in_layer.count(m) && !visited->count(m)) q.push_back(m);
    }
  }
  return found;
}

// Follows input 0 back through cheap elementwise ops up to `steps` nodes; returns the first node
// whose op is in `targets`, or -1.
int BackTo(const Ctx& c, const std::string& value, const std::set<std::string>& targets, int steps,
           std::vector<int>* path) {
  static const std::set<std::string> kPass = {"Add", "Div", "Mul", "Where", "Cast", "Sub", "Reshape", "Transpose",
                                              "Softmax", "Sigmoid", "Squeeze", "Unsqueeze"};
  std::string v = value;
  for (int s = 0; s < steps; ++s) {
    const int n = ProducerIn(c, v);
    if (n < 0) return -1;
    if (targets.count(Op(c, n))) return n;
    if (!kPass.count(Op(c, n)) || c.g.node(n).input_size() < 1) return -1;
    if (path) path->push_back(n);
    // Where(cond, x, y): the data is input 1; elementwise ops: prefer the non-constant input.
    const onnx::NodeProto& node = c.g.node(n);
    v = node.op_type() == "Where" && node.input_size() > 1 ? node.input(1) : node.input(0);
    if (node.input_size() > 1 && node.op_type() != "Where" && ProducerIn(c, v) < 0) v = node.input(1);
  }
  return -1;
}

bool IsActivationMatMul(const Ctx& c, int n) {
  const onnx::NodeProto& node = c.g.node(n);
  return node.op_type() == "MatMul" && node.input_size() == 2 && !c.linears.count(n);
}

// Step 4 helper: activation family among `nodes`.
Activation FindActivation(const Ctx& c, const std::set<int>& nodes, bool gated) {
  bool gelu = false, silu = false, relu = false;
  for (int n : nodes) {
    const std::string& op = Op(c, n);
    if (op == "Erf" || op == "Gelu" || op == "FastGelu" || op == "BiasGelu" || op == "QuickGelu") gelu = true;
    if (op == "Relu") relu = true;
    if (op == "Silu" || op == "Swish") silu = true;
    if (op == "Sigmoid") {
      // x * sigmoid(x): a Mul reading both the Sigmoid output and the Sigmoid input.
      const std::string& x = c.g.node(n).input(0);
      auto it = c.g.consumers.find(c.g.node(n).output(0));
      if (it != c.g.consumers.end())
        for (int m : it->second) {
          const onnx::NodeProto& mul = c.g.node(m);
          if (mul.op_type() == "Mul" && mul.input_size() == 2 && (mul.input(0) == x || mul.input(1) == x)) silu = true;
        }
    }
  }
  if (silu) return gated ? Activation::kSwiGLU : Activation::kSiLU;
  if (gelu) return gated ? Activation::kGeGLU : Activation::kGELU;
  if (relu) return gated ? Activation::kUnknown : Activation::kReLU2;  // plain ReLU has no IR kind
  return Activation::kUnknown;
}

std::string ScopeKey(const std::vector<std::string>& segs, size_t n) {
  std::string k;
  for (size_t i = 0; i < n && i < segs.size(); ++i) k += "/" + segs[i];
  return k;
}

bool IsIndexed(const std::string& seg) {
  const size_t dot = seg.rfind('.');
  return dot != std::string::npos && dot > 0 && dot + 1 < seg.size() &&
         seg.find_first_not_of("0123456789", dot + 1) == std::string::npos;
}

}  // namespace onboard::onnx_internal
