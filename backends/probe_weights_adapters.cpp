// The real-weights probe's LoRA adapters on one rank (probe_weights_model.h): which projections
// kLoraTargets (core/lora_targets.h) adapts in each loaded layer (LayerTargets: q/k/v/o, the dense MLP,
// the shared experts, or every routed expert of an MoE layer without one), their A / B drawn the same
// on every rank, and W_eff = W + scale x B A on this rank's TP rows / columns.
// Shapes: A [r, in], B [out, r] over the whole weight (its header shape); the base is this rank's
// slice (TP rows or columns, an FSDP dim-0 chunk).
#include <cmath>

#include "backends/probe_weights_model.h"
#include "core/lora_targets.h"

namespace onboard::backends {
namespace {

// One projection LoRA adapts in decoder layer i: its split-rule name ("model.layers.N.mlp.gate_proj"),
// its whole shape in the checkpoint's header, and (a loaded layer) the weights it adapts: nullptr for
// a routed expert this rank does not hold (EP: its A is drawn and dropped). `routed`: a routed
// expert's projection (AdaptsRoutedExperts).
struct Target {
  std::string name;
  int64_t out = 0, in = 0;
  HfLinear* lin = nullptr;
  bool routed = false;
};

// The header entry of "model.X"'s weight (the checkpoint's root in place of "model.").
const TensorInfo* HeaderWeight(const RankModel& m, const std::string& name) {
  return m.ckpt->inventory().Find(m.c.weights_root + name.substr(std::string("model.").size()) + ".weight");
}

// A routed expert's gate / up / down projections as checkpoints name them: transformers' Qwen /
// DeepSeek / GLM names, Mixtral's (and Kimi's) w1 / w3 / w2.
constexpr const char* kExpertProjections[][3] = {{"gate_proj", "up_proj", "down_proj"}, {"w1", "w3", "w2"}};

// Step 3 helper: layer i's routed experts as targets, expert by expert (gate, up, down), under the
// prefix (HfRoutedExpertPrefixes) and names the header has for expert 0. A layer without per-expert
// weights is an internal error (gpt-oss's fused experts never get here: AddFusedExpertAdapters).
void AddRoutedTargets(const RankModel& m, const LayerSpec& spec, HfLayerWeights* l,
                      std::vector<Target>* out) {
  const std::string p = HfLayerPrefix(spec);
  for (const std::string& prefix : HfRoutedExpertPrefixes())
    for (const auto& names : kExpertProjections) {
      if (HeaderWeight(m, p + prefix + "0." + names[0]) == nullptr) continue;
      for (int64_t e = 0; e < spec.moe.num_experts; ++e) {
        HfMlpWeights* x = l != nullptr ? &l->experts.experts[size_t(e)] : nullptr;
        HfLinear* lins[3] = {x ? &x->gate : nullptr, x ? &x->up : nullptr, x ? &x->down : nullptr};
        for (int k = 0; k < 3; ++k) {
          const std::string name = p + prefix + std::to_string(e) + "." + names[k];
          const TensorInfo* info = HeaderWeight(m, name);
          ONBOARD_ASSERT(info != nullptr && info->shape.size() == 2,
                         "routed expert weight not in the header: " + name);
          HfLinear* lin = lins[k] != nullptr && lins[k]->w.defined() ? lins[k] : nullptr;
          out->push_back({name, info->shape[0], info->shape[1], lin, true});
        }
      }
      return;
    }
  ONBOARD_ASSERT(false, "no per-expert weights for the routed experts of " + p);
}

// Step 3 helper: the projections of layer i that kLoraTargets (core/lora_targets.h) adapts, in the
// order their A are drawn on every rank: q/k/v/o_proj where the mixer has them, then the dense MLP's
// gate/up/down_proj, or the shared experts' (the checkpoint's prefix: HfSharedExpertPrefixes), or, in
// an MoE layer without a shared expert (AdaptsRoutedExperts), every routed expert's (one adapter per
// expert). `l`: the loaded layer, or nullptr for a layer another stage holds (only the names and
// shapes then).
std::vector<Target> LayerTargets(const RankModel& m, int64_t i, HfLayerWeights* l) {
  const LayerSpec& spec = m.c.ir.layers[size_t(i)];
  const std::string p = HfLayerPrefix(spec);
  std::vector<Target> out;
  auto add = [&](const std::string& name, HfLinear* lin) {
    if (l != nullptr && !lin->w.defined()) return;
    const TensorInfo* info = HeaderWeight(m, name);
    if (l == nullptr && (info == nullptr || info->shape.size() != 2)) return;
    ONBOARD_ASSERT(info != nullptr && info->shape.size() == 2, "adapted weight not in the header: " + name);
    out.push_back({name, info->shape[0], info->shape[1], lin});
  };
  HfLayerWeights none;  // the pointers' source when l is nullptr (never dereferenced for weights)
  HfLayerWeights& w = l != nullptr ? *l : none;
  using Named = std::pair<const char*, HfLinear*>;
  const Named attn[] = {
      {"q_proj", &w.attn.q}, {"k_proj", &w.attn.k}, {"v_proj", &w.attn.v}, {"o_proj", &w.attn.o}};
  for (const auto& [name, lin] : attn)
    if (kLoraTargets.attention) add(p + "self_attn." + name, lin);
  // The FFN: the dense layer's MLP, the MoE layer's shared experts (found by their prefix), or its
  // routed experts.
  std::string ffn;
  HfMlpWeights* mlp = nullptr;
  if (spec.channel != ChannelKind::kMoE && kLoraTargets.dense_mlp) {
    ffn = p + "mlp.";
    mlp = &w.mlp;
  } else if (spec.channel == ChannelKind::kMoE && spec.moe.num_shared > 0 && kLoraTargets.shared_experts) {
    for (const std::string& s : HfSharedExpertPrefixes())
      if (ffn.empty() && HeaderWeight(m, p + s + "gate_proj") != nullptr) ffn = p + s;
    mlp = &w.experts.shared;
  } else if (spec.channel == ChannelKind::kMoE && AdaptsRoutedExperts(spec.moe.num_shared) &&
             m.c.layout != HfLayout::kGptOss) {  // gpt-oss: fused parameters (AddFusedExpertAdapters)
    AddRoutedTargets(m, spec, l, &out);
  }
  if (ffn.empty()) return out;
  const Named fc[] = {{"gate_proj", &mlp->gate}, {"up_proj", &mlp->up}, {"down_proj", &mlp->down}};
  for (const auto& [name, lin] : fc) add(ffn + name, lin);
  return out;
}

// Step 3 helper: draws (and drops) the A of layer i's targets, a layer another stage holds.
void DropLayerA(const WeightsProbeOptions& o, const RankModel& m, int64_t i) {
  for (const Target& t : LayerTargets(m, i, nullptr)) (void)DrawLoraA(o, o.lora_rank, t.in);
  AddFusedExpertAdapters(o, nullptr, m.c, i, -1);
}

// Step 3 helper: adapters on the targets of loaded layer li.
void AddLayerAdapters(const WeightsProbeOptions& o, RankModel* m, size_t li) {
  HfLayerWeights& l = m->w.layers[li];
  for (const Target& t : LayerTargets(*m, l.index, &l)) {
    // A and B cover the whole weight: its shape in the checkpoint's header.
    torch::Tensor a = DrawLoraA(o, o.lora_rank, t.in);
    if (t.lin == nullptr) continue;  // a routed expert another EP rank holds: its A drawn and dropped
    Adapter ad;
    // The module as the checkpoint names it; the split rule reads the "model.layers.N." name.
    ad.module = m->c.weights_root + t.name.substr(std::string("model.").size());
    ad.target = t.lin;
    ad.base = t.lin->w;
    ad.layer = li;
    ad.routed = t.routed;
    ad.cols = HfTpSplitOf(t.name + ".weight") == HfTpSplit::kCols;
    ad.a = a.requires_grad_(true);
    ad.b = torch::zeros({t.out, o.lora_rank}, ad.base.options()).requires_grad_(true);
    m->adapters.push_back(std::move(ad));
  }
  AddFusedExpertAdapters(o, m, m->c, l.index, int64_t(li));  // gpt-oss's fused experts, after the rest
}

}  // namespace

torch::Tensor DrawLoraA(const WeightsProbeOptions& o, int64_t rows, int64_t in) {
  const auto dtype = o.fp64 ? torch::kDouble : torch::kFloat;
  return (torch::rand({rows, in}, dtype) * 2 - 1).mul_(1.0 / std::sqrt(double(in)));
}

// Adapters on the LayerTargets of every loaded layer (q/k/v/o_proj of GQA, MLA with a
// full-rank q, KDA; the dense MLP; the shared experts, or the routed experts this rank holds); A ~
// U(+-1/sqrt(in)) (PEFT's kaiming-uniform bound), B = 0. With FSDP the base is a dim-0 chunk: the whole shape
// is the chunk's with the rows of the TP shard.
void AddAdapters(const WeightsProbeOptions& o, RankModel* m) {
  torch::manual_seed(o.seed);  // the same A on every rank
  // Layer by layer from the first of the range (the loaded layers ascend): a layer this pipeline
  // stage does not hold (an earlier stage's, or between its interleaved chunks) has its A drawn and
  // dropped, so that every A has the one-rank run's values.
  size_t li = 0;
  for (int64_t i = o.layers.first; li < m->w.layers.size(); ++i) {
    if (m->w.layers[li].index == i)
      AddLayerAdapters(o, m, li++);
    else
      DropLayerA(o, *m, i);
  }
}

// Every loaded MoE layer whose routed experts kLoraTargets adapts (AdaptsRoutedExperts) has an expert
// adapter (per expert, or gpt-oss's fused ones); the caveat names the first that has none.
std::string FrozenPlannedExperts(const RankModel& m) {
  for (size_t li = 0; li < m.w.layers.size(); ++li) {
    const LayerSpec& l = m.c.ir.layers[size_t(m.w.layers[li].index)];
    if (l.channel != ChannelKind::kMoE || !AdaptsRoutedExperts(l.moe.num_shared)) continue;
    bool adapted = false;
    for (const Adapter& ad : m.adapters)
      adapted |= ad.layer == li && (ad.routed || ad.fused != FusedParam::kNone);
    // Under EP a rank may hold none of a layer's experts' adapters only if it holds none of its experts.
    bool held = false;
    for (const HfMlpWeights& x : m.w.layers[li].experts.experts) held |= x.down.w.defined();
    if (!adapted && held)
      return "the routed experts of " + HfLayerPrefix(l).substr(0, HfLayerPrefix(l).size() - 1) +
             " stay frozen here although core/lora_targets.h and the exports adapt them";
  }
  return "";
}

void ApplyLayerAdapters(RankModel& m, size_t li, bool frozen) {
  for (Adapter& ad : m.adapters) {
    if (ad.layer != li) continue;
    if (ad.fused != FusedParam::kNone) {
      ApplyFusedAdapter(m, ad, frozen);
      continue;
    }
    if (frozen) {
      ad.target->w = ad.base;
      continue;
    }
    const int64_t t = m.place.tp_rank;
    const torch::Tensor delta =
        ad.cols ? torch::matmul(ad.b, ad.a.narrow(1, t * ad.base.size(1), ad.base.size(1)))
                : torch::matmul(ad.b.narrow(0, t * ad.base.size(0), ad.base.size(0)), ad.a);
    ad.target->w = ad.base + m.scale * delta;
  }
}

void ApplyAdapters(RankModel& m, bool frozen, int64_t chunk) {
  const size_t begin = chunk < 0 ? 0 : m.chunk_begin[size_t(chunk)];
  const size_t end = chunk < 0 ? m.w.layers.size() : m.chunk_begin[size_t(chunk) + 1];
  for (size_t li = begin; li < end; ++li) ApplyLayerAdapters(m, li, frozen);
}

}  // namespace onboard::backends
