// AnalyzeLayer: one layer's attention, norms and channel (dense MLP or MoE) from graph structure.
//
// Step 0  the layer's linears (by node) and the parameters its nodes read.
// Step 1b a KDA kernel op (onnx_kda_mixer.cpp) makes the mixer KDA; Step 1 is then skipped.
// Step 1  attention: a Softmax whose input is (through Add/Div/Mul/Where/Cast) a MatMul of two
//         activations = scores. Projections: linears upstream of the scores/values = q,k,v (one = fused
//         qkv); the first linear downstream of the Softmax = o. head_dim from the Reshape that splits q
//         into heads (last dim), else from the 1/sqrt(d) scale constant; heads = o.in / head_dim.
// Step 2  norms: LayerNormalization-family ops, or ReduceMean -> (Add eps) -> Sqrt patterns; mean-
//         centred (Sub of a ReduceMean) = LayerNorm, else RMSNorm; width from the weight read in scope.
// Steps 3-4 channel and activation: onnx_channel_analysis.cpp.
#include "parsers/onnx_layer_analysis.h"
#include "parsers/onnx_layer_walk.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>

namespace onboard::onnx_internal {
namespace {

struct NormInstance {
  std::string scope;
  bool layer_norm = false;
  int64_t width = 0;
  bool bias = false;
};

// Step 2: norm instances among the layer's nodes.
std::vector<NormInstance> FindNorms(const Ctx& c, const std::vector<int>& nodes) {
  std::vector<NormInstance> out;
  std::map<std::string, size_t> by_scope;
  for (int n : nodes) {
    const onnx::NodeProto& node = c.g.node(n);
    const std::string& op = node.op_type();
    const bool fused = op == "LayerNormalization" || op == "SimplifiedLayerNormalization" ||
                       op == "RMSNormalization" || op == "SkipLayerNormalization" ||
                       op == "SkipSimplifiedLayerNormalization";
    const bool decomposed = op == "Sqrt" && BackTo(c, node.input(0), {"ReduceMean"}, 3) >= 0;
    if (!fused && !decomposed) continue;
    NormInstance ni;
    ni.scope = ScopeKey(c.g.scopes[size_t(n)], c.g.scopes[size_t(n)].size()) + (fused ? "#" + node.name() : "");
    ni.layer_norm = op == "LayerNormalization" || op == "SkipLayerNormalization";
    if (fused) {
      const int w = op.rfind("Skip", 0) == 0 ? 2 : 1;
      if (node.input_size() > w && IsParam(c.p, node.input(w))) ni.width = c.p.numel.at(node.input(w));
      if (ni.layer_norm && node.input_size() > w + 1 && IsParam(c.p, node.input(w + 1))) ni.bias = true;
    }
    by_scope[ni.scope] = out.size();
    out.push_back(ni);
  }
  // Decomposed norms: mean-centring, weight (Mul) and bias (Add) read in the same scope.
  for (int n : nodes) {
    const onnx::NodeProto& node = c.g.node(n);
    auto it = by_scope.find(ScopeKey(c.g.scopes[size_t(n)], c.g.scopes[size_t(n)].size()));
    if (it == by_scope.end()) continue;
    NormInstance& ni = out[it->second];
    if (node.op_type() == "Sub" && node.input_size() == 2) {
      const int src = ProducerIn(c, node.input(1));
      if (src >= 0 && Op(c, src) == "ReduceMean") ni.layer_norm = true;
    }
    for (const std::string& in : node.input()) {
      if (!IsParam(c.p, in)) continue;
      const TensorMeta* m = c.g.Init(in);
      if (m == nullptr || m->dims.size() != 1) continue;
      if (node.op_type() == "Mul") ni.width = m->numel;
      if (node.op_type() == "Add") ni.bias = true;
    }
  }
  return out;
}

// Step 1: the Softmax whose input is a MatMul of two activations (the scores); -1/-1 when none.
struct Scores {
  int softmax = -1;
  int score = -1;
};

Scores FindScores(const Ctx& c, const LayerNodes& layer) {
  for (int n : layer.nodes) {
    if (Op(c, n) != "Softmax") continue;
    const int m = BackTo(c, c.g.node(n).input(0), {"MatMul"}, 5);
    if (m >= 0 && IsActivationMatMul(c, m)) return Scores{n, m};
  }
  return Scores{};
}

// Step 1: head_dim from the Reshape that splits q into heads (last dim); 0 when none is found.
int64_t HeadDimFromReshape(const Ctx& c, const Linear& q, const Linear& o, bool fused, const std::string& tag,
                           LayerFacts* f) {
  const GraphIndex& g = c.g;
  int64_t hd = 0;
  std::set<int> seen;
  std::deque<int> bfs = {q.node};
  while (!bfs.empty() && hd == 0 && seen.size() < 64) {
    const int n = bfs.front();
    bfs.pop_front();
    if (!seen.insert(n).second) continue;
    const onnx::NodeProto& node = g.node(n);
    if (node.op_type() == "Reshape" && node.input_size() == 2) {
      auto t = ReshapeTarget(g, node.input(1));
      if (t && !t->empty() && t->back() > 0)
        hd = t->back();
      else if (t && t->size() >= 2 && t->back() == -1 && (*t)[t->size() - 2] > 0)
        hd = (fused ? o.in : q.out) / (*t)[t->size() - 2];
      if (hd > 0) f->notes.push_back(tag + "head_dim " + std::to_string(hd) + " from Reshape " + node.name());
      continue;
    }
    for (const std::string& out : node.output())
      if (auto it = g.consumers.find(out); it != g.consumers.end())
        for (int m : it->second)
          if (c.in_layer.count(m) && Op(c, m) != "Shape") bfs.push_back(m);
  }
  return hd;
}

// A Div or Mul by a positive finite constant on the score path, as a multiplier.
std::optional<double> ScaleOf(const GraphIndex& g, int n) {
  const onnx::NodeProto& node = g.node(n);
  if ((node.op_type() != "Div" && node.op_type() != "Mul") || node.input_size() != 2) return std::nullopt;
  auto v = ConstScalar(g, node.input(1));
  if (!v || *v <= 0 || !std::isfinite(*v)) return std::nullopt;
  return node.op_type() == "Div" ? 1.0 / *v : *v;  // as a multiplier
}

// Step 1: head_dim from the 1/sqrt(d) scale constant; 0 when none is found.
// The scale sits on the score path: q -> (Div|Mul) -> scores, or scores -> (Div|Mul) -> Softmax.
// torch >= 2.1 SDPA exports scale q and k each by d^-1/4; then the k path holds the same Mul.
int64_t HeadDimFromScale(const Ctx& c, const Scores& s, const Linear& o, const std::string& tag,
                         LayerFacts* f) {
  const GraphIndex& g = c.g;
  std::vector<int> scale_path, k_path;
  BackTo(c, g.node(s.softmax).input(0), {"MatMul"}, 5, &scale_path);
  BackTo(c, g.node(s.score).input(0), {"MatMul", "Gemm"}, 8, &scale_path);
  BackTo(c, g.node(s.score).input(1), {"MatMul", "Gemm"}, 8, &k_path);
  for (int n : scale_path) {
    auto m = ScaleOf(g, n);
    if (!m) continue;
    bool split = false;  // the same multiplier on the k side: scale = m^2
    for (int k : k_path)
      if (auto mk = ScaleOf(g, k); mk && std::fabs(*mk - *m) < 1e-6 * *m) split = true;
    const double scale = split ? (*m) * (*m) : *m;
    const double d2 = 1.0 / (scale * scale);
    const int64_t d = std::llround(d2);
    if (d > 1 && d < (int64_t(1) << 20) && std::fabs(d2 - double(d)) < 1e-3 * d2 && o.in % d == 0) {
      f->notes.push_back(tag + "head_dim " + std::to_string(d) + " from scale constant in " +
                         g.node(n).name());
      return d;
    }
  }
  return 0;
}

// Step 1: heads, kv heads, kind and biases from the projections and head_dim (one head when hd is unusable).
void FillAttention(const Linear& o, const Linear& q, const std::vector<const Linear*>& kv, bool fused,
                   int64_t hd, const std::string& tag, LayerFacts* f) {
  AttentionSpec& a = f->spec.attn;
  if (hd <= 0 || o.in % hd != 0) {
    f->warnings.push_back(tag + "head_dim not recoverable; assumed one head");
    hd = std::max<int64_t>(o.in, 1);
  }
  a.head_dim = hd;
  a.num_heads = o.in / hd;
  int64_t kv_width = 0;
  if (fused) {
    kv_width = (q.out - o.in) / 2;
  } else if (!kv.empty()) {
    kv_width = kv.front()->out;
  }
  a.num_kv_heads = kv_width > 0 && kv_width % hd == 0 ? kv_width / hd : a.num_heads;
  a.kind = a.num_kv_heads == a.num_heads ? MixerKind::kMHA : MixerKind::kGQA;
  a.qkv_bias =
      !q.bias.empty() || std::any_of(kv.begin(), kv.end(), [](const Linear* l) { return !l->bias.empty(); });
  a.o_bias = !o.bias.empty();
  f->notes.push_back(tag + (fused ? "fused qkv " : "separate q/k/v ") + "width " + std::to_string(q.out) +
                     ", o in " + std::to_string(o.in) + " -> " + std::to_string(a.num_heads) + " heads, " +
                     std::to_string(a.num_kv_heads) + " kv heads");
}

// Step 1: projections around the scores (q,k,v upstream, o downstream), then head_dim and heads.
void AnalyzeSoftmaxAttention(const Ctx& c, const Scores& s, const std::string& tag, std::set<int>* attn_nodes,
                             std::set<int>* attn_linears, LayerFacts* f) {
  const GraphIndex& g = c.g;
  const std::set<int> o_set = LinearsDownstream(c, s.softmax, attn_nodes);
  std::string value_in;
  for (int n : *attn_nodes)
    if (IsActivationMatMul(c, n) && n != s.score) value_in = g.node(n).input(1);
  // Separate searches: q and k/v may share nodes (fused qkv) and each must see them.
  std::set<int> q_seen, kv_seen;
  std::set<int> q_set = LinearsUpstream(c, {g.node(s.score).input(0)}, &q_seen);
  std::set<int> kv_set = LinearsUpstream(c, {g.node(s.score).input(1), value_in}, &kv_seen);
  attn_nodes->insert(q_seen.begin(), q_seen.end());
  attn_nodes->insert(kv_seen.begin(), kv_seen.end());
  *attn_linears = o_set;
  attn_linears->insert(q_set.begin(), q_set.end());
  attn_linears->insert(kv_set.begin(), kv_set.end());
  if (o_set.size() != 1 || q_set.empty()) {
    f->warnings.push_back(tag + "attention projections not recognised (" + std::to_string(o_set.size()) +
                          " output, " + std::to_string(q_set.size()) + " query linears)");
    return;
  }
  const Linear& o = c.linears.at(*o_set.begin());
  const bool fused = q_set.size() == 1 && (kv_set.empty() || kv_set == q_set);
  // q: the query-side linear whose width is heads*dv (= o.in); k/v: the others.
  const Linear* q = &c.linears.at(*q_set.begin());
  for (int n : q_set)
    if (c.linears.at(n).out == o.in) q = &c.linears.at(n);
  std::vector<const Linear*> kv;
  for (int n : kv_set)
    if (n != q->node) kv.push_back(&c.linears.at(n));
  // head_dim: Reshape after q (last dim), else the 1/sqrt(d) scale.
  int64_t hd = HeadDimFromReshape(c, *q, o, fused, tag, f);
  if (hd <= 0) hd = HeadDimFromScale(c, s, o, tag, f);
  FillAttention(o, *q, kv, fused, hd, tag, f);
}

// Step 2: norms (layer width = hidden; head_dim width inside attention = qk-norm, inside a KDA
// mixer = its per-head o_norm, which the IR's KDA formula counts).
void CountNorms(const Ctx& c, const LayerNodes& layer, int64_t hidden, bool kda, LayerSpec* spec) {
  spec->norms = 0;
  for (const NormInstance& ni : FindNorms(c, layer.nodes)) {
    if (kda && ni.width > 0 && ni.width == spec->attn.v_head_dim && ni.width != hidden) continue;
    if (ni.width > 0 && ni.width == spec->attn.head_dim && ni.width != hidden) {
      spec->attn.qk_norm = true;
      continue;
    }
    ++spec->norms;
    spec->norm_bias = spec->norm_bias || (ni.layer_norm && ni.bias);
  }
}

}  // namespace

LayerFacts AnalyzeLayer(const GraphIndex& g, const ParamTable& p, const LayerNodes& layer, int64_t hidden) {
  LayerFacts f;
  // Step 0: the layer's linears and the parameters its nodes read.
  Ctx c{g, p, std::set<int>(layer.nodes.begin(), layer.nodes.end()), {}};
  for (int n : layer.nodes) {
    if (auto l = AsLinear(g, p, n)) c.linears[n] = *l;
    for (const std::string& in : g.node(n).input())
      if (IsParam(p, in)) f.params.insert(in);
  }
  const std::string tag = "layer " + std::to_string(layer.index) + ": ";
  f.spec.index = layer.index;

  // Step 1b: a KDA kernel op makes the mixer KDA (read by AnalyzeKdaMixer); Step 1 is then skipped.
  std::set<int> attn_nodes, attn_linears;
  const bool kda = AnalyzeKdaMixer(c, layer, hidden, &attn_nodes, &attn_linears, &f);
  if (f.error) return f;
  // Step 1: softmax attention.
  if (!kda) {
    const Scores s = FindScores(c, layer);
    if (s.softmax < 0)
      f.warnings.push_back(tag + "no softmax attention found (Softmax over a MatMul of two activations)");
    else
      AnalyzeSoftmaxAttention(c, s, tag, &attn_nodes, &attn_linears, &f);
  }
  // Step 2: norms.
  CountNorms(c, layer, hidden, kda, &f.spec);
  // Steps 3-4: channel.
  AnalyzeChannel(c, layer, attn_nodes, attn_linears, hidden, &f);
  return f;
}

}  // namespace onboard::onnx_internal
