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
namespace {

// Step 3 (no TopK): a dense MLP, gated when two linears read the hidden state; width = their output.
void AnalyzeDenseMlp(const Ctx& c, const std::vector<const Linear*>& channel,
                     const std::set<int>& channel_nodes, int64_t hidden, const std::string& tag,
                     LayerFacts* f) {
  MlpSpec& m = f->spec.mlp;
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
  if (channel.empty()) f->warnings.push_back(tag + "no MLP linears found");
  f->notes.push_back(tag + "dense MLP, " + std::to_string(channel.size()) + " linears, width " +
                     std::to_string(m.intermediate));
}

// Step 3 (MoE): top_k from the TopK, the router = linear upstream of it (nullptr when none is found).
const Linear* ReadRouter(const Ctx& c, const onnx::NodeProto& tk, const std::string& tag, LayerFacts* f) {
  MoESpec& moe = f->spec.moe;
  if (tk.input_size() > 1) {
    auto k = ConstInts(c.g, tk.input(1));
    if (k && k->size() == 1) moe.top_k = (*k)[0];
  } else {
    moe.top_k = IntAttr(tk, "k", 0);
  }
  const int router_node = BackTo(c, tk.input(0), {"MatMul", "Gemm"}, 6);
  const Linear* router = router_node >= 0 && c.linears.count(router_node) ? &c.linears.at(router_node) : nullptr;
  moe.router = BackTo(c, tk.input(0), {"Sigmoid"}, 6) >= 0 ? RouterActivation::kSigmoid : RouterActivation::kSoftmax;
  if (router) moe.router_bias = !router->bias.empty();
  f->notes.push_back(
      tag + "MoE: TopK k=" + std::to_string(moe.top_k) + ", " + RouterActivationName(moe.router) + " router" +
      (router ? " [" + std::to_string(router->in) + "x" + std::to_string(router->out) + "]" : ""));
  return router;
}

using LinearGroups = std::map<std::string, std::vector<const Linear*>>;

// Step 3 (MoE): experts = linears under an indexed scope below the layer ("mlp/experts.3/..."); the
// other non-router linears, grouped by their scope two levels below the layer, = shared experts.
void GroupExperts(const GraphIndex& g, const LayerNodes& layer, const std::vector<const Linear*>& channel,
                  const Linear* router, LinearGroups* experts, LinearGroups* shared) {
  for (const Linear* l : channel) {
    if (l == router) continue;
    const auto& segs = g.scopes[size_t(l->node)];
    std::string key;
    for (size_t i = layer.depth + 1; i < segs.size(); ++i)
      if (IsIndexed(segs[i])) {
        key = ScopeKey(segs, i + 1);
        break;
      }
    if (!key.empty())
      (*experts)[key].push_back(l);
    else
      (*shared)[ScopeKey(segs, std::min(segs.size(), layer.depth + 3))].push_back(l);
  }
}

// Steps 3-4 (MoE): the routed experts' width, bias and gating from the first expert; activation over
// the nodes under indexed scopes.
void FillRoutedExperts(const Ctx& c, const LayerNodes& layer, const std::set<int>& channel_nodes,
                       const LinearGroups& experts, int64_t hidden, MoESpec* moe) {
  std::set<int> expert_nodes;
  for (int n : channel_nodes) {
    const auto& segs = c.g.scopes[size_t(n)];
    for (size_t i = layer.depth + 1; i < segs.size(); ++i)
      if (IsIndexed(segs[i])) expert_nodes.insert(n);
  }
  if (experts.empty()) return;
  const auto& first = experts.begin()->second;
  int ups = 0;
  for (const Linear* l : first) {
    if (l->in == hidden) {
      ++ups;
      moe->expert_intermediate = l->out;
    }
    moe->expert_bias = moe->expert_bias || !l->bias.empty();
  }
  moe->gated = ups >= 2;
  moe->act = FindActivation(c, expert_nodes, moe->gated);
}

// Step 3 (MoE): each shared group reading the hidden state is a shared expert; a [hidden, 1] one gates it.
void FillSharedExperts(const LinearGroups& shared, int64_t hidden, MoESpec* moe) {
  for (const auto& [key, ls] : shared) {
    int64_t width = 0;
    for (const Linear* l : ls)
      if (l->in == hidden && l->out > 1) width = l->out;
    if (width > 0) {
      ++moe->num_shared;
      moe->shared_intermediate = width;
    } else {
      moe->shared_gate = true;  // a [hidden, 1] linear gating the shared expert
    }
  }
}

}  // namespace

void AnalyzeChannel(const Ctx& c, const LayerNodes& layer, const std::set<int>& attn_nodes,
                    const std::set<int>& attn_linears, int64_t hidden, LayerFacts* facts) {
  LayerFacts& f = *facts;
  const std::string tag = "layer " + std::to_string(layer.index) + ": ";
  // Step 3a: the channel = the linears and nodes attention did not claim; a TopK among them = MoE.
  std::vector<const Linear*> channel;
  for (const auto& [n, l] : c.linears)
    if (!attn_linears.count(n)) channel.push_back(&l);
  std::set<int> channel_nodes;
  for (int n : layer.nodes)
    if (!attn_nodes.count(n)) channel_nodes.insert(n);
  int topk = -1;
  for (int n : channel_nodes)
    if (Op(c, n) == "TopK") topk = n;
  // Step 3b: no TopK -> dense MLP (and its activation, Step 4).
  if (topk < 0) {
    AnalyzeDenseMlp(c, channel, channel_nodes, hidden, tag, &f);
    return;
  }
  // Step 3c: MoE: top_k and the router.
  f.spec.channel = ChannelKind::kMoE;
  MoESpec& moe = f.spec.moe;
  const Linear* router = ReadRouter(c, c.g.node(topk), tag, &f);
  // Step 3d: routed experts by indexed scope, the rest shared; the router's width wins over the scopes.
  LinearGroups experts, shared;
  GroupExperts(c.g, layer, channel, router, &experts, &shared);
  moe.num_experts = int64_t(experts.size());
  if (router && router->out != moe.num_experts) {
    f.warnings.push_back(tag + "router width " + std::to_string(router->out) + " but " +
                         std::to_string(experts.size()) + " expert scopes; using the router width");
    moe.num_experts = router->out;
  }
  // Step 3e + Step 4: the routed experts' width, gating and activation.
  FillRoutedExperts(c, layer, channel_nodes, experts, hidden, &moe);
  // Step 3f: shared experts and their gate.
  FillSharedExperts(shared, hidden, &moe);
}

}  // namespace onboard::onnx_internal
