// GraphIndex: producers, consumers, initializers, constants and node scopes of one ONNX graph, plus
// small constant folders (ConstInts, ConstScalar, ReshapeTarget) the structure recovery reads.
#include <cmath>
#include <cstring>

#include "parsers/onnx_graph.h"

namespace onboard::onnx_internal {
namespace {

constexpr int kMaxAliasDepth = 64;        // Identity chain length followed
constexpr int64_t kMaxConstInts = 1 << 16;  // constants read as shape vectors are small

std::vector<std::string> ScopeOf(const std::string& node_name) {
  std::vector<std::string> segs;
  if (node_name.empty() || node_name[0] != '/') return segs;
  size_t start = 1;
  while (start <= node_name.size()) {
    size_t slash = node_name.find('/', start);
    if (slash == std::string::npos) break;  // the last segment is the op name
    if (slash > start) segs.push_back(node_name.substr(start, slash - start));
    start = slash + 1;
  }
  return segs;
}

int64_t ElementCount(const onnx::TensorProto& t, bool* ok) {
  int64_t n = 1;
  *ok = true;
  for (int64_t d : t.dims()) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) {
      *ok = false;
      return 0;
    }
  }
  return n;
}

const onnx::TensorProto* ConstantTensor(const GraphIndex& g, const std::string& value) {
  auto c = g.constants.find(value);
  if (c != g.constants.end()) return c->second;
  const TensorMeta* m = g.Init(value);
  return (m && !m->external) ? m->proto : nullptr;
}

const onnx::NodeProto* Producer(const GraphIndex& g, const std::string& value) {
  auto it = g.producer.find(value);
  return it == g.producer.end() ? nullptr : &g.node(it->second);
}

constexpr int kMaxSubgraphDepth = 8;

// Values a subgraph reads that none of its own nodes (or inputs/initializers) define.
void CollectCaptured(const onnx::GraphProto& body, int depth, std::set<std::string>* out) {
  if (depth > kMaxSubgraphDepth) return;
  std::set<std::string> defined;
  for (const auto& v : body.input()) defined.insert(v.name());
  for (const auto& t : body.initializer()) defined.insert(t.name());
  for (const auto& n : body.node())
    for (const auto& o : n.output()) defined.insert(o);
  std::set<std::string> inner;
  for (const auto& n : body.node()) {
    for (const auto& i : n.input())
      if (!i.empty()) inner.insert(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectCaptured(a.g(), depth + 1, &inner);
      for (const auto& sg : a.graphs()) CollectCaptured(sg, depth + 1, &inner);
    }
  }
  for (const auto& v : inner)
    if (!defined.count(v)) out->insert(v);
}

}  // namespace

std::vector<std::string> GraphIndex::InputsOf(int i) const {
  std::vector<std::string> in(node(i).input().begin(), node(i).input().end());
  auto it = implicit_inputs.find(i);
  if (it != implicit_inputs.end()) in.insert(in.end(), it->second.begin(), it->second.end());
  return in;
}

bool IsFloatType(int32_t t) {
  using T = onnx::TensorProto;
  return t == T::FLOAT || t == T::FLOAT16 || t == T::DOUBLE || t == T::BFLOAT16 || (t >= 17 && t <= 20);
}

std::string GraphIndex::RootOf(const std::string& value) const {
  std::string v = value;
  for (int depth = 0; depth < kMaxAliasDepth; ++depth) {
    if (initializers.count(v)) return v;
    auto p = producer.find(v);
    if (p == producer.end()) return "";
    const onnx::NodeProto& n = node(p->second);
    if (n.op_type() != "Identity" || n.input_size() < 1) return "";
    v = n.input(0);
  }
  return "";
}

const TensorMeta* GraphIndex::Init(const std::string& value) const {
  const std::string r = RootOf(value);
  if (r.empty()) return nullptr;
  return &initializers.at(r);
}

Expected<GraphIndex> BuildGraphIndex(const onnx::GraphProto& graph, const std::string& origin) {
  GraphIndex g;
  g.origin = origin;
  g.graph = &graph;
  // Step 1: initializers, dims checked before anything multiplies them.
  for (const onnx::TensorProto& t : graph.initializer()) {
    bool ok = true;
    TensorMeta m;
    m.numel = ElementCount(t, &ok);
    if (!ok) {
      std::string dims;
      for (int64_t d : t.dims()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
      return BadInput(origin, "initializer '" + t.name() + "'.dims", "negative or overflowing dimension",
                      "[" + dims + "]");
    }
    m.dims.assign(t.dims().begin(), t.dims().end());
    m.dtype = t.data_type();
    m.external = t.data_location() == onnx::TensorProto::EXTERNAL;
    m.proto = &t;
    g.initializers[t.name()] = std::move(m);
  }
  for (const onnx::ValueInfoProto& in : graph.input())
    if (!g.initializers.count(in.name())) g.graph_inputs.insert(in.name());
  // Step 2: producers, consumers, Constant outputs, scopes.
  g.scopes.reserve(size_t(graph.node_size()));
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto& n = graph.node(i);
    for (const std::string& out : n.output())
      if (!out.empty()) g.producer[out] = i;
    for (const std::string& in : n.input())
      if (!in.empty()) g.consumers[in].push_back(i);
    std::set<std::string> captured;
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.has_g()) CollectCaptured(a.g(), 1, &captured);
      for (const auto& sg : a.graphs()) CollectCaptured(sg, 1, &captured);
    }
    for (const std::string& v : captured) {
      g.implicit_inputs[i].push_back(v);
      g.consumers[v].push_back(i);
    }
    if (n.op_type() == "Constant" && n.output_size() == 1) {
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) g.constants[n.output(0)] = &a.t();
    }
    g.scopes.push_back(ScopeOf(n.name()));
  }
  return g;
}

std::optional<std::vector<int64_t>> ConstInts(const GraphIndex& g, const std::string& value) {
  // Constant nodes may carry value_int / value_ints instead of a tensor.
  if (const onnx::NodeProto* p = Producer(g, value); p && p->op_type() == "Constant") {
    for (const onnx::AttributeProto& a : p->attribute()) {
      if (a.name() == "value_int") return std::vector<int64_t>{a.i()};
      if (a.name() == "value_ints") return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    }
  }
  const onnx::TensorProto* t = ConstantTensor(g, value);
  if (t == nullptr) return std::nullopt;
  bool ok = true;
  const int64_t n = ElementCount(*t, &ok);
  if (!ok || n > kMaxConstInts) return std::nullopt;
  std::vector<int64_t> out;
  if (t->data_type() == onnx::TensorProto::INT64) {
    if (t->int64_data_size() == n) return std::vector<int64_t>(t->int64_data().begin(), t->int64_data().end());
    if (int64_t(t->raw_data().size()) != n * 8) return std::nullopt;
    out.resize(size_t(n));
    if (n > 0) std::memcpy(out.data(), t->raw_data().data(), size_t(n) * 8);  // little-endian host
    return out;
  }
  if (t->data_type() == onnx::TensorProto::INT32) {
    if (t->int32_data_size() == n) return std::vector<int64_t>(t->int32_data().begin(), t->int32_data().end());
    if (int64_t(t->raw_data().size()) != n * 4) return std::nullopt;
    for (int64_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, t->raw_data().data() + 4 * i, 4);
      out.push_back(v);
    }
    return out;
  }
  return std::nullopt;
}

std::optional<double> ConstScalar(const GraphIndex& g, const std::string& value) {
  if (const onnx::NodeProto* p = Producer(g, value); p && p->op_type() == "Constant") {
    for (const onnx::AttributeProto& a : p->attribute())
      if (a.name() == "value_float") return double(a.f());
  }
  const onnx::TensorProto* t = ConstantTensor(g, value);
  if (t == nullptr) return std::nullopt;
  bool ok = true;
  if (ElementCount(*t, &ok) != 1 || !ok) return std::nullopt;
  const std::string& raw = t->raw_data();
  switch (t->data_type()) {
    case onnx::TensorProto::FLOAT: {
      if (t->float_data_size() == 1) return double(t->float_data(0));
      if (raw.size() != 4) return std::nullopt;
      float f;
      std::memcpy(&f, raw.data(), 4);
      return double(f);
    }
    case onnx::TensorProto::DOUBLE: {
      if (t->double_data_size() == 1) return t->double_data(0);
      if (raw.size() != 8) return std::nullopt;
      double d;
      std::memcpy(&d, raw.data(), 8);
      return d;
    }
    case onnx::TensorProto::INT64: {
      auto v = ConstInts(g, value);
      return v && v->size() == 1 ? std::optional<double>(double((*v)[0])) : std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

int64_t IntAttr(const onnx::NodeProto& n, const std::string& name, int64_t fallback) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return a.i();
  return fallback;
}

std::optional<std::vector<int64_t>> ReshapeTarget(const GraphIndex& g, const std::string& shape_value) {
  if (auto c = ConstInts(g, shape_value)) return c;
  const onnx::NodeProto* p = Producer(g, shape_value);
  if (p == nullptr || p->op_type() != "Concat") return std::nullopt;
  // Concat of 1-element pieces: constants, or Unsqueeze(scalar) whose value may be computed.
  std::vector<int64_t> out;
  for (const std::string& part : p->input()) {
    if (auto c = ConstInts(g, part)) {
      out.insert(out.end(), c->begin(), c->end());
      continue;
    }
    const onnx::NodeProto* u = Producer(g, part);
    if (u == nullptr || u->op_type() != "Unsqueeze" || u->input_size() < 1) return std::nullopt;
    auto scalar = ConstInts(g, u->input(0));
    out.push_back(scalar && scalar->size() == 1 ? (*scalar)[0] : -2);
    if (out.size() > 64) return std::nullopt;
  }
  return out;
}

}  // namespace onboard::onnx_internal
