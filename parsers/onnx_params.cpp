// Parameter table of an ONNX graph and the linears (MatMul/Gemm with a weight operand).
//
// Counting rule (checked against the fixtures' PyTorch parameter counts):
//   - every weight initializer counts once, however many nodes read it (tied weights are one tensor);
//   - every Identity output over a weight counts again: torch.onnx de-duplicates *distinct* parameters
//     that hold equal values (all-ones norms, deep-copied layers) into one initializer and keeps each
//     parameter's name as an Identity output, so each alias is a parameter of its own;
//   - a constant-folded transposed copy of the token embedding (tied LM head) is not counted
//     (IsTransposedCopy, applied by the model step);
//   - external-data initializers count from their declared dims; their data is never read.
#include <cstring>

#include "parsers/onnx_graph.h"

namespace onboard::onnx_internal {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Registered buffers that exporters keep as initializers but that are not trained parameters.
bool IsBufferName(const std::string& name) {
  static const char* kBuffers[] = {"inv_freq", "position_ids", "cos_cached", "sin_cached", "_float_tensor",
                                   "masked_bias"};
  for (const char* b : kBuffers)
    if (EndsWith(name, b)) return true;
  return false;
}

// Integer weights of quantized graphs (read by a dequantizing op).
bool FeedsDequantizer(const GraphIndex& g, const std::string& name) {
  auto it = g.consumers.find(name);
  if (it == g.consumers.end()) return false;
  for (int i : it->second) {
    const onnx::NodeProto& n = g.node(i);
    if ((n.op_type() == "DequantizeLinear" && n.input(0) == name) ||
        ((n.op_type() == "MatMulNBits" || n.op_type() == "MatMulInteger") && n.input_size() > 1 && n.input(1) == name))
      return true;
  }
  return false;
}

int ElementBytes(int32_t dtype) {
  using T = onnx::TensorProto;
  switch (dtype) {
    case T::FLOAT: case T::INT32: case T::UINT32: return 4;
    case T::DOUBLE: case T::INT64: case T::UINT64: return 8;
    case T::FLOAT16: case T::BFLOAT16: case T::INT16: case T::UINT16: return 2;
    case T::INT8: case T::UINT8: case T::BOOL: return 1;
    default: return (dtype >= 17 && dtype <= 20) ? 1 : 0;
  }
}

// Raw element bytes of an inline initializer, or nullptr when not available as raw bytes.
const std::string* RawBytes(const TensorMeta& m) {
  if (m.external || m.proto == nullptr) return nullptr;
  const int eb = ElementBytes(m.dtype);
  if (eb == 0 || int64_t(m.proto->raw_data().size()) != m.numel * eb) return nullptr;
  return &m.proto->raw_data();
}

}  // namespace

ParamTable CountParams(const GraphIndex& g) {
  ParamTable p;
  for (const auto& [name, m] : g.initializers) {
    const bool weight = (IsFloatType(m.dtype) && !m.dims.empty() && !IsBufferName(name)) || FeedsDequantizer(g, name);
    if (weight) p.numel[name] = m.numel;
  }
  for (int i = 0; i < g.num_nodes(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "Identity" || n.input_size() != 1 || n.output_size() != 1) continue;
    const std::string root = g.RootOf(n.input(0));
    if (root.empty() || !p.numel.count(root) || p.numel.count(n.output(0))) continue;
    p.numel[n.output(0)] = p.numel[root];
    ++p.aliases;
  }
  for (const auto& [name, n] : p.numel) {
    p.total += n;
    auto c = g.consumers.find(name);
    if (c != g.consumers.end() && c->second.size() > 1) ++p.shared;
  }
  return p;
}

bool IsParam(const ParamTable& p, const std::string& value) { return p.numel.count(value) > 0; }

bool IsTransposedCopy(const GraphIndex& g, const std::string& a, const std::string& b) {
  auto ia = g.initializers.find(a), ib = g.initializers.find(b);
  if (ia == g.initializers.end() || ib == g.initializers.end() || a == b) return false;
  const TensorMeta &ma = ia->second, &mb = ib->second;
  if (ma.dims.size() != 2 || mb.dims.size() != 2 || ma.dims[0] != mb.dims[1] || ma.dims[1] != mb.dims[0] ||
      ma.dtype != mb.dtype)
    return false;
  const std::string* ra = RawBytes(ma);
  const std::string* rb = RawBytes(mb);
  if (ra == nullptr || rb == nullptr) return false;
  const int64_t rows = ma.dims[0], cols = ma.dims[1];
  const size_t eb = size_t(ElementBytes(ma.dtype));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (std::memcmp(ra->data() + size_t(r * cols + c) * eb, rb->data() + size_t(c * rows + r) * eb, eb) != 0)
        return false;
  return true;
}

std::optional<Linear> AsLinear(const GraphIndex& g, const ParamTable& p, int i) {
  const onnx::NodeProto& n = g.node(i);
  const std::string& op = n.op_type();
  if ((op != "MatMul" && op != "Gemm" && op != "MatMulNBits") || n.input_size() < 2 || n.output_size() < 1)
    return std::nullopt;
  Linear l;
  l.node = i;
  std::string w = n.input(1);
  bool transposed = op == "Gemm" && IntAttr(n, "transB", 0) != 0;
  if (!IsParam(p, w)) {
    // x @ Transpose(W): the weight is read through a Transpose node (tied heads, some exporters).
    auto it = g.producer.find(w);
    if (it == g.producer.end()) return std::nullopt;
    const onnx::NodeProto& t = g.node(it->second);
    if (t.op_type() != "Transpose" || t.input_size() != 1 || !IsParam(p, t.input(0))) return std::nullopt;
    w = t.input(0);
    transposed = !transposed;
  }
  l.weight = w;
  if (op == "MatMulNBits") {
    l.in = IntAttr(n, "K", 0);
    l.out = IntAttr(n, "N", 0);
  } else {
    const TensorMeta* m = g.Init(w);
    if (m == nullptr || m->dims.size() != 2) return std::nullopt;
    l.in = transposed ? m->dims[1] : m->dims[0];
    l.out = transposed ? m->dims[0] : m->dims[1];
  }
  // Bias: Gemm's C, or the single Add reading the product with a 1-D parameter of width `out`.
  if (op == "Gemm" && n.input_size() > 2 && IsParam(p, n.input(2))) {
    l.bias = n.input(2);
  } else if (auto c = g.consumers.find(n.output(0)); c != g.consumers.end() && c->second.size() == 1) {
    const onnx::NodeProto& add = g.node(c->second[0]);
    if (add.op_type() == "Add" && add.input_size() == 2) {
      const std::string& other = add.input(0) == n.output(0) ? add.input(1) : add.input(0);
      const TensorMeta* m = IsParam(p, other) ? g.Init(other) : nullptr;
      if (m && m->dims.size() == 1 && m->numel == l.out) l.bias = other;
    }
  }
  return l;
}

}  // namespace onboard::onnx_internal
