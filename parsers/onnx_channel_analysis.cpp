// AnalyzeChannel: the channel half of a layer (dense MLP or MoE) from the linears attention left.
//
// Step 3  A TopK among the layer's non-attention nodes makes it MoE: router = linear upstream of the
//         TopK (Sigmoid on the way = sigmoid router), top_k = TopK's k, experts = linears grouped by an
//         indexed scope below the layer ("mlp/experts.5/..."), linears outside those = shared experts
//         (a [hidden, 1] one = the shared-expert gate). Otherwise a dense MLP, gated when two linears
//         read the hidden state; width = their output.
// Step 4  activation over the channel (or expert) nodes: FindActivation.
#include "parsers/onnx_layer_analysis.h"
#include "parsers/onnx_layer_walk.h"

namespace onboard::onnx_internal {

void AnalyzeChannel(const Ctx& c, const LayerNodes& layer, const std::set<int>& attn_nodes,
                    const std::set<int>& attn_linears, int64_t hidden, LayerFacts* facts) {
  LayerFacts& f = *facts;
  LayerSpec& spec = f.spec;
  const GraphIndex& g = c.g;
  const std::string tag = "layer " + std::to_string(layer.index) + ": ";
  std::vector<const Linear*> channel;
  for (const auto& [n, l] : c.linears)
    if (!attn_linears.count(n)) channel.push_back(&l);
  std::set<int> channel_nodes;
  for (int n : layer.nodes)
    if (!attn_nodes.count(n)) channel_nodes.insert(n);
  int topk = -1;
  for (int n : channel_nodes)
    if (Op(c, n) == "TopK") topk = n;
  if (topk < 0) {
    MlpSpec& m = spec.mlp;
    int ups = 0;
    for (const Linear* l : channel) {
      if (l->in == hidden && l->out != hidden) {
        ++ups;
        m.intermediate = l->out;
      }
      m.bias = m.bias || !l->bias.empty();
    }
    m.gated = ups >= 2;
    m.act = FindActivation(c, channel_nodes, m.gated);
    if (channel.empty()) f.warnings.push_back(tag + "no MLP linears found");
    f.notes.push_back(tag + "dense MLP, " + std::to_string(channel.size()) + " linears, width " +
                      std::to_string(m.intermediate));
    return;
  }
  spec.channel = ChannelKind::kMoE;
  MoESpec& moe = spec.moe;
  const onnx::NodeProto& tk = g.node(topk);
  if (tk.input_size() > 1) {
    auto k = ConstInts(g, tk.input(1));
    if (k && k->size() == 1) moe.top_k = (*k)[0];
  } else {
    moe.top_k = IntAttr(tk, "k", 0);
  }
  const int router_node = BackTo(c, tk.input(0), {"MatMul", "Gemm"}, 6);
  const Linear* router = router_node >= 0 && c.linears.count(router_node) ? &c.linears.at(router_node) : nullptr;
  moe.router = BackTo(c, tk.input(0), {"Sigmoid"}, 6) >= 0 ? RouterActivation::kSigmoid : RouterActivation::kSoftmax;
  if (router) moe.router_bias = !router->bias.empty();
  f.notes.push_back(tag + "MoE: TopK k=" + std::to_string(moe.top_k) + ", " + RouterActivationName(moe.router) +
                    " router" + (router ? " [" + std::to_string(router->in) + "x" + std::to_string(router->out) + "]" : ""));
  // Experts: linears under an indexed scope below the layer ("mlp/experts.3/...").
  std::map<std::string, std::vector<const Linear*>> experts;
  std::map<std::string, std::vector<const Linear*>> shared;
  for (const Linear* l : channel) {
    if (l == router) continue;
    const auto& segs = g.scopes[size_t(l->node)];
    std::string key;
    for (size_t i = layer.depth + 1; i < segs.size(); ++i)
      if (IsIndexed(segs[i])) {
        key = ScopeKey(segs, i + 1);
        break;
      }
    if (!key.empty()) experts[key].push_back(l);
    else shared[ScopeKey(segs, std::min(segs.size(), layer.depth + 3))].push_back(l);
  }
  moe.num_experts = int64_t(experts.size());
  if (router && router->out != moe.num_experts) {
    f.warnings.push_back(tag + "router width " + std::to_string(router->out) + " but " +
                         std::to_string(experts.size()) + " expert scopes; using the router width");
    moe.num_experts = router->out;
  }
  std::set<int> expert_nodes;
  for (int n : channel_nodes) {
    const auto& segs = g.scopes[size_t(n)];
    for (size_t i = layer.depth + 1; i < segs.size(); ++i)
      if (IsIndexed(segs[i])) expert_nodes.insert(n);
  }
  if (!experts.empty()) {
    const auto& first = experts.begin()->second;
    int ups = 0;
    for (const Linear* l : first) {
      if (l->in == hidden) {
        ++ups;
        moe.expert_intermediate = l->out;
      }
      moe.expert_bias = moe.expert_bias || !l->bias.empty();
    }
    moe.gated = ups >= 2;
    moe.act = FindActivation(c, expert_nodes, moe.gated);
  }
  for (const auto& [key, ls] : shared) {
    int64_t width = 0;
    for (const Linear* l : ls)
      if (l->in == hidden && l->out > 1) width = l->out;
    if (width > 0) {
      ++moe.num_shared;
      moe.shared_intermediate = width;
    } else {
      moe.shared_gate = true;  // a [hidden, 1] linear gating the shared expert
    }
  }
}

}  // namespace onboard::onnx_internal
