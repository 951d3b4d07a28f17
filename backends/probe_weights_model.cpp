// One rank's model in the real-weights probe (probe_weights_model.h): loading its slice (the LoRA
// adapters: probe_weights_adapters.cpp), and the forward of its windows (TP regions between f and g, the EP
// exchange of the MoE channel, FSDP units gathered around use). Shapes and units: see the header.
#include "backends/probe_weights_model.h"

#include <algorithm>
#include <cmath>

#include "backends/hf_moe_ep.h"
#include "backends/probe_pipeline_schedule.h"

namespace onboard::backends {
namespace {

// Step 2 helper: the layouts' checks against the checkpoint (kBadInput naming the flag and factor).
Status CheckLayout(const WeightsProbeOptions& o, const HfForwardConfig& c, int64_t last) {
  const int64_t n = int64_t(c.ir.layers.size());
  for (int64_t i = o.layers.first; o.tp > 1 && i <= last && i < n; ++i) {
    const LayerSpec& l = c.ir.layers[size_t(i)];
    ONBOARD_RETURN_IF_ERROR(CheckTpDivides(c, l, o.tp));
  }
  if (o.pp > last - o.layers.first + 1)
    return BadInput(c.config_path, "--pp",
                    "must be <= the layers loaded (" + std::to_string(last - o.layers.first + 1) + ")",
                    std::to_string(o.pp));
  // --interleave: the proxy probe's rule (one home): a layer per model chunk, M a multiple of P.
  const std::vector<std::string> pipe =
      PipelineLayoutProblems(o.pp, o.interleave, last - o.layers.first + 1, o.microbatches(), {});
  if (!pipe.empty())
    return BadInput(c.config_path, "--interleave", pipe.front(), std::to_string(o.interleave));
  const int64_t E = HfRoutedExperts(c);
  if (o.ep > 1 && (E == 0 || E % o.ep != 0))
    return BadInput(c.config_path, "--ep",
                    "must divide the routed experts (num_experts=" + std::to_string(E) + ")",
                    std::to_string(o.ep));
  // gpt-oss's fused experts are FSDP-chunked by expert (HfExpertStack): every rank of the group needs one.
  const int64_t group = o.ep > 1 ? (o.fsdp % o.ep == 0 ? o.fsdp / o.ep : 1) : o.fsdp, own = E / o.ep;
  if (group > 1 && c.layout == HfLayout::kGptOss && HfFsdpRows(own, group, group - 1).len == 0)
    return BadInput(c.config_path, "--fsdp",
                    "gpt-oss's experts are FSDP-chunked by expert: " + std::to_string(own) +
                        " experts per group leave a rank of " + std::to_string(group) + " none",
                    std::to_string(o.fsdp));
  return Status::Ok();
}

// The MoE rows of each layer moved by one EP group (the `wrong_expert_range` control: this rank loaded
// the next rank's experts but serves them as its own).
void ShiftExperts(RankModel* m) {
  const int64_t el = HfRoutedExperts(m->c) / m->place.ep;
  for (HfLayerWeights& l : m->w.layers)
    if (l.moe)
      std::rotate(l.experts.experts.begin(), l.experts.experts.begin() + el, l.experts.experts.end());
}

// Step 2 helper: the slices of the rank's model chunks (one unless --interleave) as one model: the
// layers in chunk order, the embedding / head from the chunk that has them.
Expected<HfModelWeights> MapChunks(const HfForwardConfig& c, const SafetensorsCheckpoint& ckpt,
                                   const std::vector<HfRankSlice>& slices, torch::ScalarType dtype) {
  HfModelWeights all;
  for (const HfRankSlice& s : slices) {
    ONBOARD_ASSIGN_OR_RETURN(HfModelWeights w, MapHfSlice(c, ckpt, s, dtype));
    if (w.embed.defined()) all.embed = w.embed;
    if (w.lm_head.defined()) all.lm_head = w.lm_head;
    if (w.final_norm.defined()) all.final_norm = w.final_norm;
    for (HfLayerWeights& l : w.layers) all.layers.push_back(std::move(l));
    all.used.insert(all.used.end(), w.used.begin(), w.used.end());
    for (const HfWeightDtype& d : w.dtypes_seen)
      if (std::find(all.dtypes_seen.begin(), all.dtypes_seen.end(), d) == all.dtypes_seen.end())
        all.dtypes_seen.push_back(d);
  }
  return all;
}

// Step 2 helper: the slices of the rank's model chunks, `s` with each chunk's layers (--pp: stage s
// holds chunks v * P + s, v < V, Megatron's order; the embedding on chunk 0, the head on the last).
// The controls: `wrong_stage_layers` loads the next stage's chunks, `wrong_chunk_order` the chunks
// s * V + v (the contiguous order: the same as Megatron's when V = 1).
std::vector<HfRankSlice> ChunkSlices(const WeightsProbeOptions& o, const RankPlace& p, int64_t last,
                                     const HfRankSlice& s) {
  if (p.pp == 1) return {s};
  const int64_t V = p.interleave, own = o.fault == "wrong_stage_layers" ? (p.stage + 1) % p.pp : p.stage;
  std::vector<HfRankSlice> out;
  for (int64_t v = 0; v < V; ++v) {
    const int64_t q = o.fault == "wrong_chunk_order" ? own * V + v : v * p.pp + own;
    HfRankSlice c = s;
    c.layers = PpStageLayers(o.layers.first, last, p.pp * V, q);
    c.embedding = p.stage == 0 && v == 0;
    c.head = p.stage == p.pp - 1 && v == V - 1;
    out.push_back(c);
  }
  return out;
}

// The `wrong_kda_heads` control: each KDA layer's A_log and dt_bias replaced by the next TP rank's
// heads' (read from a second mapping of that rank's slice, after this rank's bytes were counted).
Status ShiftKdaGates(std::vector<HfRankSlice> own, torch::ScalarType dtype, RankModel* m) {
  for (HfRankSlice& next : own) {
    next.tp_rank = (next.tp_rank + 1) % next.tp;
    next.embedding = next.head = false;
  }
  ONBOARD_ASSIGN_OR_RETURN(HfModelWeights w, MapChunks(m->c, *m->ckpt, own, dtype));
  for (size_t i = 0; i < m->w.layers.size(); ++i) {
    HfAttentionWeights& a = m->w.layers[i].attn;
    if (!a.dt_bias.defined()) continue;
    a.a_log = w.layers[i].attn.a_log;
    a.dt_bias = w.layers[i].attn.dt_bias;
  }
  return Status::Ok();
}

// The channel's output on x (the TP region's input): `partial` is this TP rank's share, summed over TP
// by the caller's g (TpReduceOut); `whole` (undefined but for the latent MoE under TP) is computed in
// full on every TP rank and added as is.
struct ChannelOut {
  torch::Tensor partial, whole;
};
ChannelOut Channel(const RankModel& m, const TpContext& tp, const HfLayerWeights& lw, const LayerSpec& l,
                   const torch::Tensor& x) {
  if (!lw.moe) return {HfMlp(m.c, x, lw.mlp), {}};
  const HfMoeWeights& w = lw.experts;
  // Step 1: the routed experts' weighted sum (kimi_k3: at the latent width); under TP this rank's
  // partial sum (its slice of every expert, or its experts).
  const torch::Tensor routed =
      m.ep != nullptr ? HfMoeEpRouted(m.c, l.moe, w, x, *m.ep) : HfMoeRouted(m.c, l.moe, w, x);
  const torch::Tensor shared = HfSharedExperts(m.c, w, x);
  // Step 2: latent MoE under TP (Megatron's layout: latent projections and norm replicated): the norm
  // needs the whole sum, so the partials are all-reduced at the latent width first (TpSum: identity
  // backward, as every rank's norm and up-projection then see the whole gradient); only the shared
  // experts' row-parallel partials go through g. `no_latent_allreduce` (the negative control) norms
  // each rank's partial sum instead.
  if (w.latent_up.w.defined() && tp.active() && !m.skip_latent_allreduce)
    return {shared, HfLatentOut(m.c, w, TpSum(&tp, routed))};
  // Step 3: otherwise the ranks' outputs sum to the channel (HfMoe's ops in HfMoe's order).
  const torch::Tensor out = HfLatentOut(m.c, w, routed);
  return {shared.defined() ? out + shared : out, {}};
}

// Decoder layer li over the rank's windows h [b, S, hidden], one window at a time (the HF decoder,
// TP regions between f and g).
torch::Tensor LayerForward(const RankModel& m, const TpContext& tp, size_t li, const torch::Tensor& h) {
  const double eps = m.c.rms_eps;
  const HfLayerWeights& lw = m.w.layers[li];
  const LayerSpec& l = m.specs[li];
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < h.size(0); ++i) {
    torch::Tensor x = h[i];
    x = x + TpReduceOut(&tp, HfAttention(m.c, l, lw.attn, TpCopyIn(&tp, HfRmsNorm(x, lw.input_norm, eps))));
    const ChannelOut ch = Channel(m, tp, lw, l, TpCopyIn(&tp, HfRmsNorm(x, lw.post_norm, eps)));
    if (ch.partial.defined()) x = x + TpReduceOut(&tp, ch.partial);
    if (ch.whole.defined()) x = x + ch.whole;
    out.push_back(x);
  }
  return torch::stack(out);
}

// Final norm + head over the windows h [b, S, hidden] -> logits [b, S, vocab], one window at a time.
torch::Tensor HeadLogits(const RankModel& m, const torch::Tensor& h) {
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < h.size(0); ++i)
    out.push_back(torch::matmul(HfRmsNorm(h[i], m.w.final_norm, m.c.rms_eps), m.w.lm_head.t()));
  return torch::stack(out);
}

}  // namespace

Status LoadRankModel(const WeightsProbeOptions& o, const RankPlace& p, RankModel* m) {
  // Step 1: config, checkpoint, the layouts' checks.
  ONBOARD_ASSIGN_OR_RETURN(m->c, ReadHfForwardConfig(o.checkpoint));
  ONBOARD_ASSIGN_OR_RETURN(m->ckpt, SafetensorsCheckpoint::Open(o.checkpoint));
  const SafetensorsCheckpoint& ckpt = *m->ckpt;
  if (m->c.ir.vocab < 256)
    return BadInput(m->c.config_path, "vocab_size", "--text feeds bytes as token ids: needs >= 256",
                    std::to_string(m->c.ir.vocab));
  const int64_t n = int64_t(m->c.ir.layers.size()), last = o.layers.last < 0 ? n - 1 : o.layers.last;
  ONBOARD_RETURN_IF_ERROR(CheckLayout(o, m->c, last));
  // Step 2: the slice this rank owns (the controls load another rank's experts / FSDP chunk).
  HfRankSlice s;
  s.layers = o.layers;
  s.tp = p.tp;
  s.tp_rank = p.tp_rank;
  if (p.ep > 1) {
    const int64_t own = o.fault == "wrong_expert_range" ? (p.ep_rank + 1) % p.ep : p.ep_rank;
    const HfExpertSpan span = HfExpertRange(HfRoutedExperts(m->c), p.ep, own);
    s.expert_begin = span.begin;
    s.expert_end = span.end;
  }
  s.fsdp = p.fsdp;
  s.fsdp_rank = o.fault == "wrong_fsdp_chunk" ? (p.fsdp_rank + 1) % p.fsdp : p.fsdp_rank;
  s.expert_fsdp = p.expert_fsdp;
  s.expert_fsdp_rank =
      o.fault == "wrong_expert_chunk" ? (p.expert_fsdp_rank + 1) % p.expert_fsdp : p.expert_fsdp_rank;
  const torch::ScalarType dtype = o.fp64 ? torch::kDouble : torch::kFloat;
  const std::vector<HfRankSlice> slices = ChunkSlices(o, p, last, s);
  ONBOARD_ASSIGN_OR_RETURN(m->w, MapChunks(m->c, ckpt, slices, dtype));
  m->chunk_begin = {0};
  for (const HfRankSlice& c : slices)
    m->chunk_begin.push_back(m->chunk_begin.back() + size_t(c.layers.last - c.layers.first + 1));
  m->place = p;
  m->skip_latent_allreduce = o.fault == "no_latent_allreduce";
  if (p.ep > 1 && o.fault == "wrong_expert_range") ShiftExperts(m);
  m->bytes_read = ckpt.touched_bytes();
  if (p.tp > 1 && o.fault == "wrong_kda_heads") ONBOARD_RETURN_IF_ERROR(ShiftKdaGates(slices, dtype, m));
  m->checkpoint_bytes = ckpt.data_bytes();
  // Step 3: per-layer specs and the adapters.
  for (const HfLayerWeights& l : m->w.layers)
    m->specs.push_back(HfTpLocalSpec(m->c.ir.layers[size_t(l.index)], p.tp));
  m->scale = o.lora_alpha / double(o.lora_rank);
  AddAdapters(o, m);
  return Status::Ok();
}

void SetUpFsdp(RankModel* m, TpContext* tp, Group& group, Group* experts) {
  m->fsdp = std::make_unique<HfFsdp>(group);
  HfFsdp* f = m->fsdp.get();
  // Step 1: units: the embedding (first stage), each layer (an adapted weight's slot is its adapter's
  // base; under EP the routed experts only over `experts`, else not at all: their owner holds them
  // whole), the head (last stage). Every rank of a group is on the same stage: the same units.
  // gpt-oss: the routed experts as stacks (HfExpertStack: its fused experts are chunked by expert).
  const bool ep = m->place.ep > 1, stacked = m->c.layout == HfLayout::kGptOss;
  if (m->place.stage == 0) m->fsdp_embed = int64_t(f->AddUnit({&m->w.embed}));
  m->fsdp_runs.resize(m->w.layers.size());
  m->expert_stacks.resize(m->w.layers.size());
  if (experts != nullptr) m->expert_fsdp = std::make_unique<HfFsdp>(*experts);
  const int64_t e0 = HfExpertRange(HfRoutedExperts(m->c), m->place.ep, m->place.ep_rank).begin;
  for (size_t li = 0; li < m->w.layers.size(); ++li) {
    HfLayerWeights& l = m->w.layers[li];
    std::vector<torch::Tensor*> slots = HfLayerTensors(l, /*routed=*/!ep && !stacked);
    if (stacked) m->expert_stacks[li] = StackOwnedExperts(l, e0);
    std::vector<torch::Tensor*> routed =
        stacked ? HfExpertStackSlots(m->expert_stacks[li]) : HfRoutedExpertTensors(l);
    for (Adapter& ad : m->adapters)
      if (ad.layer == li && ad.target != nullptr)  // a fused adapter's bases are the bound experts
        for (std::vector<torch::Tensor*>* v : {&slots, &routed})
          std::replace(v->begin(), v->end(), &ad.target->w, &ad.base);
    if (!ep && stacked) slots.insert(slots.end(), routed.begin(), routed.end());  // else already in
    m->fsdp_runs[li].units.push_back({f, f->AddUnit(slots)});
    if (m->expert_fsdp && !routed.empty())
      m->fsdp_runs[li].units.push_back({m->expert_fsdp.get(), m->expert_fsdp->AddUnit(routed)});
    if (stacked) BindStackedExperts(l, m->expert_stacks[li]);
  }
  if (m->place.stage == m->place.pp - 1)
    m->fsdp_head.units.push_back({f, f->AddUnit({&m->w.final_norm, &m->w.lm_head})});
  f->Finish();
  if (m->expert_fsdp) m->expert_fsdp->Finish();
  // Step 2: what each unit runs (the embedding runs outside autograd: no gradient reaches it).
  for (size_t li = 0; li < m->w.layers.size(); ++li) {
    HfFsdpRun& r = m->fsdp_runs[li];
    r.run = [m, tp, li](const torch::Tensor& h) {
      // The experts bound first: gpt-oss's fused adapters add their deltas to the bound views.
      if (m->expert_stacks[li].n > 0) BindStackedExperts(m->w.layers[li], m->expert_stacks[li]);
      ApplyLayerAdapters(*m, li, m->frozen);
      return LayerForward(*m, *tp, li, h);
    };
    r.release = [m, li] {
      for (Adapter& ad : m->adapters)
        if (ad.layer == li && ad.target != nullptr) ad.target->w = ad.base;
      if (m->expert_stacks[li].n > 0) BindStackedExperts(m->w.layers[li], m->expert_stacks[li]);
    };
    for (Adapter& ad : m->adapters)
      if (ad.layer == li) r.params.insert(r.params.end(), {ad.a, ad.b});
  }
  m->fsdp_head.run = [m](const torch::Tensor& h) { return HeadLogits(*m, h); };
}

torch::Tensor EmbedRows(RankModel& m, const Batch& b) {
  // FSDP: the embedding gathered for the lookup, released.
  if (m.fsdp) m.fsdp->Gather(size_t(m.fsdp_embed));
  torch::Tensor h =
      m.w.embed.index_select(0, b.tokens.flatten()).view({b.tokens.size(0), b.tokens.size(1), -1});
  if (m.fsdp) m.fsdp->Release(size_t(m.fsdp_embed));
  return h;
}

torch::Tensor RunLayers(RankModel& m, TpContext& tp, torch::Tensor h, int64_t chunk) {
  // FSDP: each layer an autograd unit gathered around use.
  const size_t begin = chunk < 0 ? 0 : m.chunk_begin[size_t(chunk)];
  const size_t end = chunk < 0 ? m.w.layers.size() : m.chunk_begin[size_t(chunk) + 1];
  for (size_t li = begin; li < end; ++li)
    h = m.fsdp ? HfFsdpUnit(m.fsdp_runs[li], h) : LayerForward(m, tp, li, h);
  return h;
}

torch::Tensor HeadNll(RankModel& m, const torch::Tensor& h, const Batch& b, int64_t counted,
                      double inv_tokens) {
  const torch::Tensor logits = m.fsdp ? HfFsdpUnit(m.fsdp_head, h) : HeadLogits(m, h);
  // The summed NLL of the counted windows, window by window.
  torch::Tensor sum = torch::zeros({}, logits.options());
  for (int64_t i = 0; i < counted; ++i)
    sum = sum + torch::nn::functional::cross_entropy(
                    logits[i], b.targets[i],
                    torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  return sum * inv_tokens;
}

torch::Tensor BatchLoss(RankModel& m, TpContext& tp, const Batch& b, int64_t counted, double inv_tokens) {
  return HeadNll(m, RunLayers(m, tp, EmbedRows(m, b)), b, counted, inv_tokens);
}

HfLayerRange PpStageLayers(int64_t a, int64_t b, int64_t pp, int64_t stage) {
  const int64_t n = b - a + 1;
  return {a + stage * n / pp, a + (stage + 1) * n / pp - 1};
}

}  // namespace onboard::backends
