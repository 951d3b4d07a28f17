// AnalyzeKdaMixer: a layer whose token mixer is a KDA kernel exported as one custom-domain op
// (what a fused kernel's symbolic() emits, e.g. com.onboard::ChunkKDA from
// scripts/export_onnx_fusion_fixtures.py), read into a KDA AttentionSpec.
//
// The op's contract (inputs in order, attributes):
//   inputs      q [B, T, H K], k [B, T, H K], v [B, T, HV V], g [B, T, HV K] (log decay or its
//               pre-activation), beta [B, T, HV]
//   num_heads   H (required, > 0)
//   num_v_heads HV (optional, default H; a multiple of H)
//   head_dim    K (optional; when present it must equal q's width / H)
//   chunk_size  chunk length of the chunked kernel (optional, default the IR's 64)
//
// Step 1  the op: exactly one KDA op in the layer; 5 inputs; num_heads present and > 0.
// Step 2  widths: q, k, v from the widest linear upstream of each input (v may be scaled by beta,
//         whose projection is narrower); K = q.out / H, k.out = q.out, V = v.out / HV.
// Step 3  decay gate: a Softplus on g's path = the original form (-exp(A) softplus(.)), a Sigmoid =
//         the bounded form (lower bound = the negative constant it is scaled by), neither = g is
//         already the log decay; full-rank when g's linear reads the hidden state.
// Step 4  output: o = the one linear downstream of the op; a Sigmoid upstream of o that the op does
//         not read = the output gate; every linear upstream of o is the mixer's, and so is every
//         linear upstream of those (low-rank f_a -> f_b, g_a -> g_b). A depthwise Conv on the q/k/v
//         paths gives the short-conv width (its weight's last dim). A head-wide norm in the layer is
//         the mixer's o_norm (onnx_layer_analysis.cpp Step 2), not a q/k norm.
// A malformed op (Step 1 and the width checks of Step 2) is an error naming the node and field; a
// layer without the op is left to the softmax-attention step. Units: widths and dims in elements.
#include <algorithm>

#include "parsers/onnx_layer_analysis.h"
#include "parsers/onnx_layer_walk.h"

namespace onboard::onnx_internal {
namespace {

constexpr int kKdaInputs = 5;  // q, k, v, g, beta

// The widest linear among `set` (nullptr when empty).
const Linear* Widest(const Ctx& c, const std::set<int>& set) {
  const Linear* w = nullptr;
  for (int n : set)
    if (w == nullptr || c.linears.at(n).out > w->out) w = &c.linears.at(n);
  return w;
}

bool HasOp(const Ctx& c, const std::set<int>& nodes, const std::string& op) {
  return std::any_of(nodes.begin(), nodes.end(), [&](int n) { return Op(c, n) == op; });
}

// Step 3: the decay gate's form and rank from the nodes on g's path.
void ReadGate(const Ctx& c, const std::set<int>& g_nodes, const std::set<int>& g_linears, int64_t hidden,
              AttentionSpec* a) {
  if (HasOp(c, g_nodes, "Softplus")) {
    a->gate_form = GateForm::kOriginal;
  } else if (HasOp(c, g_nodes, "Sigmoid")) {
    a->gate_form = GateForm::kBounded;
    for (int n : g_nodes) {
      if (Op(c, n) != "Mul") continue;
      for (const std::string& in : c.g.node(n).input())
        if (auto v = ConstScalar(c.g, in); v && *v < 0) a->gate_lower_bound = *v;
    }
  }
  a->full_rank_gate =
      std::any_of(g_linears.begin(), g_linears.end(), [&](int n) { return c.linears.at(n).in == hidden; });
}

// Step 4: the short causal conv width from a Conv on the q/k/v paths (weight [C, 1, W]).
int64_t ConvWidth(const Ctx& c, const std::set<int>& qkv_nodes) {
  for (int n : qkv_nodes) {
    if (Op(c, n) != "Conv" || c.g.node(n).input_size() < 2) continue;
    const TensorMeta* w = c.g.Init(c.g.node(n).input(1));
    if (w != nullptr && w->dims.size() == 3) return w->dims.back();
  }
  return 0;
}

// Steps 1-2 for the op at `op`: its attributes and the q/k/v widths into `a`; false with f->error set
// when the op is malformed. `seen`/`ups`: per input, the nodes walked and the linears found upstream.
bool ReadKdaShape(const Ctx& c, int op, std::set<int> (&seen)[kKdaInputs], std::set<int> (&ups)[kKdaInputs],
                  AttentionSpec* a, LayerFacts* f) {
  const onnx::NodeProto& node = c.g.node(op);
  auto fail = [&](const std::string& field, const std::string& problem, const std::string& value) {
    f->error = LayerError{"graph.node[" + node.name() + "]." + field, problem, value};
    return false;
  };
  if (node.input_size() != kKdaInputs)
    return fail("input", "KDA op takes 5 inputs (q, k, v, g, beta)", std::to_string(node.input_size()));
  const int64_t H = IntAttr(node, "num_heads", 0);
  if (H <= 0) return fail("attribute.num_heads", "required and > 0", std::to_string(H));
  const int64_t HV = IntAttr(node, "num_v_heads", H);
  if (HV <= 0 || HV % H != 0)
    return fail("attribute.num_v_heads", "must be a positive multiple of num_heads " + std::to_string(H),
                std::to_string(HV));
  static const char* kNames[kKdaInputs] = {"q", "k", "v", "g", "beta"};
  for (int i = 0; i < kKdaInputs; ++i) {
    ups[i] = LinearsUpstream(c, {node.input(i)}, &seen[i]);
    if (i < 3 && ups[i].empty())
      return fail("input(" + std::to_string(i) + ")", std::string("no projection upstream of ") + kNames[i],
                  node.input(i));
  }
  const Linear& q = *Widest(c, ups[0]);
  const Linear& k = *Widest(c, ups[1]);
  const Linear& v = *Widest(c, ups[2]);
  if (q.out % H != 0)
    return fail("attribute.num_heads", "does not divide the q projection width " + std::to_string(q.out),
                std::to_string(H));
  *a = AttentionSpec{};
  a->kind = MixerKind::kKDA;
  a->num_heads = a->num_kv_heads = H;
  a->num_v_heads = HV;
  a->head_dim = q.out / H;
  if (const int64_t want = IntAttr(node, "head_dim", a->head_dim); want != a->head_dim)
    return fail("attribute.head_dim",
                "disagrees with q width " + std::to_string(q.out) + " / num_heads " + std::to_string(H),
                std::to_string(want));
  if (k.out != q.out)
    return fail("input(1)", "k projection width must equal q's " + std::to_string(q.out),
                std::to_string(k.out));
  if (v.out % HV != 0)
    return fail("attribute.num_v_heads", "does not divide the v projection width " + std::to_string(v.out),
                std::to_string(HV));
  a->v_head_dim = v.out / HV;
  a->chunk_size = IntAttr(node, "chunk_size", a->chunk_size);
  if (a->chunk_size <= 0) return fail("attribute.chunk_size", "must be > 0", std::to_string(a->chunk_size));
  a->qkv_bias = !q.bias.empty() || !k.bias.empty() || !v.bias.empty();
  return true;
}

}  // namespace

bool IsKdaKernelOp(const onnx::NodeProto& node) {
  const bool custom = !node.domain().empty() && node.domain() != "ai.onnx";
  return custom && node.op_type() == "ChunkKDA";
}

bool AnalyzeKdaMixer(const Ctx& c, const LayerNodes& layer, int64_t hidden, std::set<int>* attn_nodes,
                     std::set<int>* attn_linears, LayerFacts* f) {
  const std::string tag = "layer " + std::to_string(layer.index) + ": ";
  // Step 1: the op (one per layer).
  int op = -1;
  for (int n : layer.nodes) {
    if (!IsKdaKernelOp(c.g.node(n))) continue;
    if (op >= 0) {
      f->error =
          LayerError{"graph.node[" + c.g.node(n).name() + "].op_type", "a second KDA kernel op in one layer",
                     c.g.node(op).name() + " and " + c.g.node(n).name()};
      return true;
    }
    op = n;
  }
  if (op < 0) return false;
  const onnx::NodeProto& node = c.g.node(op);
  // Steps 1-2: attributes and widths.
  std::set<int> seen[kKdaInputs], ups[kKdaInputs];
  AttentionSpec& a = f->spec.attn;
  if (!ReadKdaShape(c, op, seen, ups, &a, f)) return true;
  // Step 3: decay gate.
  ReadGate(c, seen[3], ups[3], hidden, &a);
  // Step 4: output projection, output gate, short conv.
  std::set<int> mixer_in;  // every node the op reads through
  for (int i = 0; i < kKdaInputs; ++i) {
    mixer_in.insert(seen[i].begin(), seen[i].end());
    attn_linears->insert(ups[i].begin(), ups[i].end());
  }
  std::set<int> down_seen;
  const std::set<int> o_set = LinearsDownstream(c, op, &down_seen);
  attn_nodes->insert(mixer_in.begin(), mixer_in.end());
  attn_nodes->insert(down_seen.begin(), down_seen.end());
  if (o_set.size() != 1) {
    f->warnings.push_back(tag + "KDA op " + node.name() + ": " + std::to_string(o_set.size()) +
                          " output projections downstream (want 1)");
  } else {
    const Linear& o = c.linears.at(*o_set.begin());
    a.o_bias = !o.bias.empty();
    std::set<int> o_seen;
    const std::set<int> o_ups = LinearsUpstream(c, {c.g.node(o.node).input(0)}, &o_seen);
    attn_linears->insert(o_ups.begin(), o_ups.end());
    attn_linears->insert(o.node);
    attn_nodes->insert(o_seen.begin(), o_seen.end());
    for (int n : o_seen)
      if (Op(c, n) == "Sigmoid" && !mixer_in.count(n)) a.output_gate = true;
  }
  // Low-rank projections (f_b(f_a(h)), g_b(g_a(h))): the linears feeding the mixer's linears are the
  // mixer's too (the walk stops at the first linear of each path).
  for (std::vector<int> todo(attn_linears->begin(), attn_linears->end()); !todo.empty();) {
    const int l = todo.back();
    todo.pop_back();
    std::set<int> l_seen;
    for (int up : LinearsUpstream(c, {c.g.node(l).input(0)}, &l_seen))
      if (attn_linears->insert(up).second) todo.push_back(up);
    attn_nodes->insert(l_seen.begin(), l_seen.end());
  }
  std::set<int> qkv_nodes = seen[0];
  qkv_nodes.insert(seen[1].begin(), seen[1].end());
  qkv_nodes.insert(seen[2].begin(), seen[2].end());
  a.conv_kernel = ConvWidth(c, qkv_nodes);
  f->notes.push_back(tag + "KDA op " + node.name() + ": " + std::to_string(a.num_heads) + " heads x " +
                     std::to_string(a.head_dim) + ", " + std::to_string(a.num_v_heads) + " v heads x " +
                     std::to_string(a.v_head_dim) + ", gate " + GateFormName(a.gate_form) +
                     (a.full_rank_gate ? " full-rank" : " low-rank"));
  return true;
}

}  // namespace onboard::onnx_internal
