// FindOnnxFusions: the fusable chains of an exported graph (patterns and the blocking rule in
// parsers/onnx_fusion_patterns.h).
#include "parsers/onnx_fusion_patterns.h"

#include <map>
#include <set>

#include "parsers/mapped_file.h"
#include "parsers/onnx_graph.h"
#include "parsers/onnx_layer_analysis.h"
#include "parsers/onnx_model.h"

namespace onboard {
namespace {

using namespace onnx_internal;

constexpr int kMaxChain = 6;        // elementwise steps walked between the ops of one pattern
constexpr int kMaxFeedsWalk = 200;  // nodes visited downstream of a norm's linears (NormFeedsOf)

struct Finder {
  const GraphIndex& g;
  const ParamTable& p;
  std::map<int, int64_t> layer_of;  // node -> layer position
  std::set<std::string> outputs;    // graph outputs

  const std::string& Op(int n) const { return g.node(n).op_type(); }
  int Producer(const std::string& v) const {
    auto it = g.producer.find(v);
    return it == g.producer.end() ? -1 : it->second;
  }
  std::vector<int> Readers(const std::string& v) const {
    std::vector<int> out;
    auto it = g.consumers.find(v);
    if (it == g.consumers.end()) return out;
    for (int c : it->second)
      if (Op(c) != "Shape" && Op(c) != "Size") out.push_back(c);
    return out;
  }
  int64_t LayerOf(int n) const {
    auto it = layer_of.find(n);
    return it == layer_of.end() ? -1 : it->second;
  }
  bool IsLinear(int n) const { return AsLinear(g, p, n).has_value(); }
  // An Add with a parameter operand (a norm's or linear's bias), not a residual add of two activations.
  bool IsBiasAdd(int n) const {
    for (const std::string& in : g.node(n).input())
      if (IsParam(p, in)) return true;
    return false;
  }
  bool IsActivationMatMul(int n) const {
    return Op(n) == "MatMul" && g.node(n).input_size() == 2 && !IsLinear(n);
  }

  // "" when `v` is read only by nodes in `allowed` and is no graph output; else the blocker.
  std::string Blocker(const std::string& v, const std::set<int>& allowed) const {
    if (outputs.count(v)) return "value " + v + " is a graph output";
    for (int r : Readers(v))
      if (!allowed.count(r))
        return "value " + v + " is also read by node " + g.node(r).name() + " (" + Op(r) + ")";
    return "";
  }
  // The single reader of `v` (ignoring metadata readers), or -1.
  int OnlyReader(const std::string& v) const {
    const std::vector<int> r = Readers(v);
    return r.size() == 1 ? r[0] : -1;
  }
};

GraphFusionMatch Match(const Finder& f, GraphPattern pat, const std::vector<int>& chain, int64_t layer,
                       const std::vector<std::string>& kept, const std::vector<std::set<int>>& allowed) {
  GraphFusionMatch m;
  m.pattern = pat;
  m.layer = layer;
  for (int n : chain) m.nodes.push_back(f.g.node(n).name());
  m.intermediates = static_cast<int64_t>(kept.size());
  for (size_t i = 0; i < kept.size() && m.fusable; ++i) {
    m.blocker = f.Blocker(kept[i], allowed[i]);
    m.fusable = m.blocker.empty();
  }
  return m;
}

// Step 1b: what the linears reading one norm feed (rule in the header).
NormFeeds NormFeedsOf(const Finder& f, const std::set<int>& linears) {
  static const std::set<std::string> kChannelOps = {"Sigmoid", "Silu", "Swish",   "Gelu", "Erf",
                                                    "Relu",    "Tanh", "Softmax", "TopK"};
  std::set<std::string> reached;  // values computed from the linears' outputs
  std::vector<int> stack(linears.rbegin(), linears.rend());
  std::set<int> seen;
  bool channel = false;
  while (!stack.empty() && static_cast<int>(seen.size()) < kMaxFeedsWalk) {
    const int n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    const onnx::NodeProto& node = f.g.node(n);
    if (!linears.count(n)) {
      channel = channel || kChannelOps.count(node.op_type()) > 0;
      if (f.IsLinear(n)) continue;  // the next projection ends the branch
    }
    for (const std::string& out : node.output()) {
      reached.insert(out);
      for (int r : f.Readers(out)) {
        // Checked as each value arrives, so a meeting point is seen whichever branch reaches it last.
        const onnx::NodeProto& rn = f.g.node(r);
        int from_linears = 0;
        for (const std::string& in : rn.input()) from_linears += reached.count(in) > 0;
        const bool custom = !rn.domain().empty() && rn.domain() != "ai.onnx";
        if (from_linears >= 2 && (custom || f.IsActivationMatMul(r))) return NormFeeds::kMixer;
        stack.push_back(r);
      }
    }
  }
  return channel ? NormFeeds::kChannel : NormFeeds::kUnknown;
}

// Step 1: norm -> linears. `n` is the node whose output a linear reads.
void NormLinear(const Finder& f, int n, std::vector<GraphFusionMatch>* out) {
  const onnx::NodeProto& node = f.g.node(n);
  bool norm = IsNormNode(f.g, n) && f.Op(n) != "Sqrt";
  // RMSNorm tail: Mul [by the weight] <- Mul/Div <- ... <- Sqrt over ReduceMean, within kMaxChain steps.
  std::vector<int> stack = {n};
  std::set<int> seen;
  while (!norm && !stack.empty() && static_cast<int>(seen.size()) < kMaxChain) {
    const int m = stack.back();
    stack.pop_back();
    if (!seen.insert(m).second) continue;
    if (IsNormNode(f.g, m)) norm = true;
    const std::string& op = f.Op(m);
    if (op == "Add" ? !f.IsBiasAdd(m)
                    : op != "Mul" && op != "Div" && op != "Cast" && op != "Reciprocal" && op != "Sqrt")
      continue;
    for (const std::string& in : f.g.node(m).input())
      if (int q = f.Producer(in); q >= 0) stack.push_back(q);
  }
  if (!norm || f.Op(n) == "Sqrt") return;
  std::set<int> linears;
  for (int r : f.Readers(node.output(0)))
    if (f.IsLinear(r)) linears.insert(r);
  if (linears.empty()) return;
  std::vector<int> chain = {n};
  chain.insert(chain.end(), linears.begin(), linears.end());
  out->push_back(
      Match(f, GraphPattern::kNormLinear, chain, f.LayerOf(*linears.begin()), {node.output(0)}, {linears}));
  out->back().feeds = NormFeedsOf(f, linears);
}

// Step 2: SiLU(gate) * up. `s` is a Sigmoid (or a Silu/Swish op).
void SiluMul(const Finder& f, int s, std::vector<GraphFusionMatch>* out) {
  const onnx::NodeProto& sig = f.g.node(s);
  const std::string& x = sig.input(0);
  int silu = s;  // the node whose output is SiLU(x)
  if (f.Op(s) == "Sigmoid") {
    silu = -1;
    for (int r : f.Readers(sig.output(0))) {
      const onnx::NodeProto& m = f.g.node(r);
      if (m.op_type() == "Mul" && m.input_size() == 2 && (m.input(0) == x || m.input(1) == x)) silu = r;
    }
    if (silu < 0) return;  // not SiLU (a plain sigmoid gate: Step 4)
  }
  const int gate = f.Producer(x);
  if (gate < 0 || !f.IsLinear(gate)) return;
  int prod = -1;
  std::string up;
  for (int r : f.Readers(f.g.node(silu).output(0))) {
    const onnx::NodeProto& m = f.g.node(r);
    if (m.op_type() != "Mul" || m.input_size() != 2) continue;
    const std::string& other = m.input(0) == f.g.node(silu).output(0) ? m.input(1) : m.input(0);
    if (int u = f.Producer(other); u >= 0 && f.IsLinear(u)) {
      prod = r;
      up = other;
    }
  }
  if (prod < 0) return;
  std::vector<int> chain = {gate, s};
  if (silu != s) chain.push_back(silu);
  chain.push_back(f.Producer(up));
  chain.push_back(prod);
  std::vector<std::string> kept = {x};
  std::vector<std::set<int>> allowed = {{s, silu}};
  if (silu != s) {
    kept.push_back(sig.output(0));
    allowed.push_back({silu});
  }
  kept.push_back(f.g.node(silu).output(0));
  allowed.push_back({prod});
  kept.push_back(up);
  allowed.push_back({prod});
  out->push_back(Match(f, GraphPattern::kSiluMul, chain, f.LayerOf(s), kept, allowed));
}

// Step 3: scores -> softmax -> PV. `s` is a Softmax.
void SoftmaxAttention(const Finder& f, int s, std::vector<GraphFusionMatch>* out) {
  static const std::set<std::string> kScoreOps = {"Div", "Mul", "Add", "Where", "Cast", "Sub"};
  std::vector<int> back;  // Softmax's producers back to the QK^T MatMul
  std::string v = f.g.node(s).input(0);
  int qk = -1;
  for (int step = 0; step < kMaxChain && qk < 0; ++step) {
    const int n = f.Producer(v);
    if (n < 0) return;
    if (f.IsActivationMatMul(n)) {
      qk = n;
      break;
    }
    if (!kScoreOps.count(f.Op(n))) return;
    back.push_back(n);
    // The score operand: Where(cond, x, y) -> x; others: the input that is itself computed from a MatMul
    // chain.
    const onnx::NodeProto& node = f.g.node(n);
    auto on_path = [&](const std::string& in) {
      const int q = f.Producer(in);
      return q >= 0 && (f.IsActivationMatMul(q) || kScoreOps.count(f.Op(q)));
    };
    v = node.op_type() == "Where" ? node.input(1) : node.input(0);
    if (node.op_type() != "Where" && node.input_size() > 1 && !on_path(v)) v = node.input(1);
  }
  if (qk < 0) return;
  // The P.V MatMul among the probabilities' readers (directly or through one Cast).
  const std::string& probs = f.g.node(s).output(0);
  int pv_reader = -1, pv = -1;
  for (int r : f.Readers(probs)) {
    const int mm = f.Op(r) == "Cast" ? f.OnlyReader(f.g.node(r).output(0)) : r;
    if (mm >= 0 && f.IsActivationMatMul(mm)) {
      pv_reader = r;
      pv = mm;
    }
  }
  std::vector<int> chain = {qk};
  chain.insert(chain.end(), back.rbegin(), back.rend());
  chain.push_back(s);
  std::vector<std::string> kept;
  std::vector<std::set<int>> allowed;
  for (size_t i = 0; i + 1 < chain.size(); ++i) {
    kept.push_back(f.g.node(chain[i]).output(0));
    allowed.push_back({chain[i + 1]});
  }
  kept.push_back(probs);
  allowed.push_back({pv_reader});
  if (pv >= 0) chain.push_back(pv);
  GraphFusionMatch m = Match(f, GraphPattern::kSoftmaxAttention, chain, f.LayerOf(s), kept, allowed);
  if (pv < 0) {
    m.fusable = false;
    m.blocker = "softmax output " + probs + " feeds no P.V MatMul";
  }
  out->push_back(m);
}

// Step 4: a sigmoid feeding a custom-domain kernel (KDA / gated DeltaNet beta).
void SigmoidIntoKernel(const Finder& f, int s, std::vector<GraphFusionMatch>* out) {
  static const std::set<std::string> kPass = {"Cast", "Reshape", "Unsqueeze", "Transpose"};
  std::vector<int> chain = {s};
  std::vector<std::string> kept;
  std::vector<std::set<int>> allowed;
  std::string v = f.g.node(s).output(0);
  for (int step = 0; step < kMaxChain; ++step) {
    const std::vector<int> readers = f.Readers(v);
    int kernel = -1, pass = -1;
    for (int r : readers) {
      const std::string& dom = f.g.node(r).domain();
      if (!dom.empty() && dom != "ai.onnx")
        kernel = r;
      else if (kPass.count(f.Op(r)))
        pass = r;
    }
    const int next = kernel >= 0 ? kernel : pass;
    if (next < 0) return;  // no kernel downstream: not this pattern
    kept.push_back(v);
    allowed.push_back({next});
    chain.push_back(next);
    if (kernel >= 0) {
      out->push_back(Match(f, GraphPattern::kSigmoidIntoKernel, chain, f.LayerOf(s), kept, allowed));
      return;
    }
    v = f.g.node(pass).output(0);
  }
}

}  // namespace

const char* GraphPatternName(GraphPattern p) {
  switch (p) {
    case GraphPattern::kNormLinear:
      return "norm+linear";
    case GraphPattern::kSiluMul:
      return "silu*mul";
    case GraphPattern::kSoftmaxAttention:
      return "softmax(QK^T)V";
    case GraphPattern::kSigmoidIntoKernel:
      return "sigmoid->kernel";
  }
  return "?";
}

Expected<std::vector<GraphFusionMatch>> FindOnnxFusionsInBytes(const std::string& bytes,
                                                               const std::string& origin) {
  if (bytes.size() > kOnnxMaxFileBytes || bytes.size() > size_t(INT32_MAX))
    return BadInput(origin, "(file)",
                    "exceeds the ONNX size cap of " + std::to_string(kOnnxMaxFileBytes) + " bytes",
                    std::to_string(bytes.size()));
  onnx::ModelProto model;
  if (!model.ParseFromArray(bytes.data(), int(bytes.size())))
    return BadInput(origin, "(protobuf)", "not a valid ONNX ModelProto (truncated or corrupt)",
                    std::to_string(bytes.size()) + " bytes");
  if (!model.has_graph()) return BadInput(origin, "graph", "ModelProto has no graph");
  ONBOARD_ASSIGN_OR_RETURN(GraphIndex g, BuildGraphIndex(model.graph(), origin));
  const ParamTable p = CountParams(g);
  Finder f{g, p, {}, {}};
  const std::vector<LayerNodes> layers = FindLayers(g);
  for (size_t i = 0; i < layers.size(); ++i)
    for (int n : layers[i].nodes) f.layer_of[n] = static_cast<int64_t>(i);
  for (const auto& o : model.graph().output()) f.outputs.insert(o.name());
  std::vector<GraphFusionMatch> out;
  for (int n = 0; n < g.num_nodes(); ++n) {
    const std::string& op = f.Op(n);
    if (g.node(n).output_size() < 1) continue;
    if (op == "Softmax") SoftmaxAttention(f, n, &out);
    if (op == "Sigmoid" || op == "Silu" || op == "Swish") SiluMul(f, n, &out);
    if (op == "Sigmoid") SigmoidIntoKernel(f, n, &out);
    if (op == "Mul" || op == "Div" || (op == "Add" && f.IsBiasAdd(n)) || op == "LayerNormalization" ||
        op == "SimplifiedLayerNormalization" || op == "RMSNormalization")
      NormLinear(f, n, &out);
  }
  return out;
}

Expected<std::vector<GraphFusionMatch>> FindOnnxFusionsInFile(const std::string& path) {
  ONBOARD_ASSIGN_OR_RETURN(std::string bytes, ReadFileCapped(path, kOnnxMaxFileBytes, "(file)"));
  return FindOnnxFusionsInBytes(bytes, path);
}

}  // namespace onboard
