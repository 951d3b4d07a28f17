// Per-device memory of a plan, worst pipeline stage. Units: bytes.
//
// Legend: t = tp, c = cp, d_s = dp_shard, d = dp_replicate*dp_shard, e = ep, f_e = expert_fsdp, p = pp,
// v = interleave, m = micro-batches, T = micro_batch * seq / c tokens per device, h = hidden, s = seq.
//
// Full fine-tuning, bytes per parameter (mixed-precision Adam):
//   zero 3 (FSDP2):   weights 4 (fp32 sharded) + grads 4 + optimizer 8 (m, v),      / d_s (experts / f_e);
//                     plan.param_dtype bf16 (NeMo AutoModel casts its models to bf16, and torch.optim.Adam
//                     keeps its moments in the parameter's dtype): weights 2 + grads 2 + optimizer 4
//   zero 1:           weights 2 + grads 4 (fp32 main grad) full, optimizer 12 / (d*c)  (Megatron distributed
//                     optimizer: 6 + 12/d, docs/source/distrib_optimizer.md; shards over dp x cp)
//   zero 1, grad_reduce_in_fp32=False: the main-grad buffer is bf16 (Megatron DistributedDataParallel
//                     allocates it in the param dtype): grads 2 instead of 4 (plan.grad_dtype)
//   bf16 Adam moments (plan.optimizer_dtype; Megatron precision-aware optimizer exp_avg(_sq)_dtype,
//                     DeepSeek-V3 report sec. 3.3.3): optimizer (4 + 2 + 2) instead of (4 + 4 + 4), fp32
//                     master; the grads stay as grad_dtype says (Megatron main_grads_dtype defaults to
//                     fp32): Bridge's precision-aware recipes 2 + 2 + 8/(d*c), the report 2 + 4 + 8/(d*c)
//   zero 0 (DDP):     weights 2 + grads 4 + optimizer 12 (master + m + v)           (= 18, Megatron)
//   zero 3, pp > 1, fsdp_pipelining per_step (torch FSDP2 under pipelining): + the gathered stage
//                     2 (bf16 compute copy) x (1 - 1/d_s) + its grads accumulated unsharded in the fp32
//                     reduce dtype 4 (FSDPParam.unsharded_accumulated_grad), on top of the shards
//                     (LoRA: the gathered base at base_dtype bytes, the adapters' grads 4)
//   dense parameters are divided by t, routed-expert parameters by e.
// LoRA: base weights at base_dtype bytes (bf16 2, fp8 1, mxfp4 0.53125), sharded as above, no grads;
//   adapters r * (in + out) per adapted matrix carry the full-fine-tuning bytes: the dense adapters
//   (lora_params_per_rank) / t like dense weights, the routed experts' adapters (one per expert,
//   lora_expert_params_per_rank, core/lora_targets.h) / (e * etp) and / f_e, optimizer as experts.
// Activations per micro-batch (Korthikanti et al. 2022, generalised per block kind):
//   T * sum over the stage's layers of LayerActBytesPerToken (replicated parts / t only with SP,
//   split parts / t, unfused scores H*s*(2+3*dropout)/t only without recompute, routed parts on
//   EP ranks * imbalance / t). In flight: 1 without PP; with PP the peak of Megatron-Core's 1F1B /
//   interleaved schedule replayed per virtual chunk (PeakHeldActivations, pipeline_memory.cpp): stage 0
//   of plain 1F1B holds min(m, p) micro-batches; equal interleaved chunks give x (1 + (p-1)/(p*v)).
// fp8 / MXFP8: GEMM inputs are kept as their 1-byte quantised copies (Transformer Engine).
// A2A buffers: a2a_buffers * T/t * top_k * width * 2 * imbalance.
// MTP layers (last stage): one more decoder layer each (params, activations) + its h x 2h projection
//   and its own fp32 logits; with pp > 1 the last stage also holds a copy of the embedding (vocab x h / t
//   params: Megatron-Core GPTModel builds `embedding` where `pre_process or mtp_process`), except under
//   DualPipe, whose rank 0 holds both ends and shares it (DeepSeek-V3 report sec. 3.2.3).
// RMSNorm recompute (req.recompute_norms; DeepSeek-V3 report sec. 3.2.3, Megatron --recompute-modules
//   layernorm): a block not fully recomputed keeps no norm output: act_norms/2 bytes per token per block
//   fewer (2h at bf16), replicated (/ t with SP).
// SwiGLU of gated routed experts (act_routed = top_k (2w + 6I): 4I = its input, gate and up in bf16,
//   2I = its output, the down-projection's input), per token on an EP rank:
//   fp8_act_input_store (DeepSeek-V3 report sec. 3.3.3; Megatron --activation-func-fp8-input-store):
//     the input kept in fp8: top_k * 2I bytes fewer;
//   MoE selective (Megatron recompute_modules moe_act; the report's "recompute its output"): the
//     output not kept: top_k * I * (2 - 1 with fp8, whose 1-byte copy the fp8 term already counts) fewer.
// Recompute working set (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost", sec. 4:
//   checkpointing costs the kept checkpoints plus the memory of re-running one segment): during its
//   backward a recomputed layer holds again what its policy dropped, so a stage's peak adds, once, the
//   largest (no-recompute - kept) activation bytes per token of its layers, times T. Zero without
//   recompute; under full recompute it is one layer's no-recompute activations less its kept input.
// Workspace: reserved + 2 gathered layers under FSDP (prefetch) + what the loss holds per logit element
//   (held_bytes of PlanRequest::cross_entropy, search/cross_entropy_cost.h: Megatron-Core's 6 B = bf16
//   logits + their fp32 softmax-then-gradient) x T x vocab / t, per head (main + MTP).
// DualPipe (DeepSeek-V3 report sec. 3.2.1, Table 2): rank s holds stages s and p-1-s: both stages'
//   parameters, grads and optimizer state (2x), and p+1 micro-batches of one stage's activations.
// Expert TP (etp): routed experts / (ep*etp); the ETP group's gathered tokens: etp x the dispatch buffer
//   and the routed input copies (RoutedActBytes).
#include <algorithm>

#include "search/cost_model.h"

namespace onboard {

Recompute PolicyFor(const Plan& p, BlockKind kind) {
  auto it = p.recompute.find(BlockKindName(kind));
  if (it != p.recompute.end()) return it->second;
  auto all = p.recompute.find("*");
  return all != p.recompute.end() ? all->second : Recompute::kNone;
}

std::vector<Recompute> KindPolicies(const CostContext& c, const Plan& p) {
  std::vector<Recompute> pol;
  pol.reserve(c.prof.kinds.size());
  for (BlockKind k : c.prof.kinds) pol.push_back(PolicyFor(p, k));
  return pol;
}

double LayerActBytesPerToken(const CostContext& c, const Plan& p, size_t l, double* routed_out,
                             const std::vector<Recompute>* pol) {
  const LayerProfile& lp = c.prof.layers[l];
  const double t = static_cast<double>(p.deg.tp);
  const double rep_div = p.deg.sequence_parallel ? t : 1.0;
  const Recompute mix = pol ? (*pol)[lp.mixer_kind_id] : PolicyFor(p, lp.mixer_kind);
  const Recompute chan = pol ? (*pol)[lp.channel_kind_id] : PolicyFor(p, lp.channel_kind);
  const double h2 = 2 * lp.hidden;
  // Quantised training keeps the quantised GEMM inputs for backward (Transformer Engine saves the
  // column-wise copy) in place of their 2 B bf16 copy: 1 byte saved per input element in fp8 / mxfp8,
  // 2 - 0.5625 in nvfp4 (cost_model.h saved_input_bytes).
  const double quant_saved = c.quantised ? 2.0 - c.saved_input_bytes : 0.0;
  const double norm_kept = c.req->recompute_norms ? 0.0 : lp.act_norms / 2;  // RMSNorm outputs kept per block
  double rep = 0, split = 0, routed = 0;
  if (mix == Recompute::kFull && chan == Recompute::kFull) {
    rep = h2;  // only the layer input is kept
  } else {
    if (mix == Recompute::kFull) {
      rep += h2;
    } else {
      rep += norm_kept + h2 + lp.dropout_mask_bytes / 2;
      split += std::max(0.0, lp.act_mixer - quant_saved * lp.mixer_gemm_inputs);
      if (mix == Recompute::kSelective) split -= lp.act_mixer_selective;
      if (mix == Recompute::kNone) split += lp.scores_bytes_per_key * static_cast<double>(c.prof.seq);
    }
    if (chan == Recompute::kFull) {
      rep += h2;
    } else {
      rep += norm_kept + h2 + lp.dropout_mask_bytes / 2;
      split += std::max(0.0, lp.act_channel - quant_saved * lp.channel_gemm_inputs);
      routed = std::max(0.0, RoutedActBytes(lp, p.deg.etp) - quant_saved * RoutedGemmInputs(lp, p.deg.etp) -
                                 SwiGluBytesDropped(c, lp, chan)) *
               c.req->expert_imbalance / t;
    }
  }
  if (routed_out) *routed_out = routed;
  return rep / rep_div + split / t;
}

bool GatedRoutedExperts(const LayerProfile& lp) {
  const double k = static_cast<double>(lp.top_k);
  return lp.top_k > 0 && lp.act_routed > k * (2 * lp.dispatch_width + 5 * lp.expert_inter);  // 6I, not 4I
}

double SwiGluBytesDropped(const CostContext& c, const LayerProfile& lp, Recompute chan) {
  if (!GatedRoutedExperts(lp)) return 0;
  const double kI = static_cast<double>(lp.top_k) * lp.expert_inter;
  const double input = c.req->fp8_act_input_store ? 2 * kI : 0;
  const double output = chan == Recompute::kSelective ? kI * (c.quantised ? c.saved_input_bytes : 2.0) : 0;
  return input + output;
}

double RoutedActBytes(const LayerProfile& lp, int64_t etp) {
  return lp.act_routed + static_cast<double>(lp.top_k) * 2 * lp.dispatch_width * static_cast<double>(etp - 1);
}

double RoutedGemmInputs(const LayerProfile& lp, int64_t etp) {
  return lp.routed_gemm_inputs +
         static_cast<double>(lp.top_k) * lp.dispatch_width * static_cast<double>(etp - 1);
}

double TokensPerRank(const Plan& p) {
  return static_cast<double>(p.micro_batch * p.seq) / static_cast<double>(std::max<int64_t>(1, p.deg.cp));
}

namespace {

double LoraBytes(const CostContext& c) {
  return DTypeBytes(PrecisionElement(c.req->base_dtype));  // bf16 2, fp8 1, mxfp4 0.53125
}

// Per class of equal layers (ModelProfile::class_first), computed once: parameters on a device,
// kept activation bytes per token, the largest gathered layer and the dispatch buffer.
struct PerClass {
  double dense, expert, lora, lora_expert, act, routed, gathered, dispatch, dropped;
};

std::vector<PerClass> ClassParts(const CostContext& c, const Plan& p, const std::vector<Recompute>& pol) {
  const ParallelDegrees& d = p.deg;
  const ModelProfile& prof = c.prof;
  const double t = static_cast<double>(d.tp),
               ep = static_cast<double>(d.ep * d.etp);  // experts split ep x etp
  const double T = TokensPerRank(p);
  std::vector<PerClass> cls(prof.class_first.size());
  const std::vector<Recompute> none(pol.size(), Recompute::kNone);
  for (size_t k = 0; k < cls.size(); ++k) {
    const LayerProfile& lp = prof.layers[prof.class_first[k]];
    PerClass& x = cls[k];
    x.dense = lp.dense_params / t;
    x.expert = lp.expert_params / ep;
    x.lora = static_cast<double>(p.lora_rank) * lp.lora_params_per_rank / t;
    x.lora_expert = static_cast<double>(p.lora_rank) * lp.lora_expert_params_per_rank / ep;  // like experts
    const CostContext& cl = c.ForLayer(lp);  // bf16 first / last layers: bf16 saved inputs
    x.act = LayerActBytesPerToken(cl, p, prof.class_first[k], &x.routed, &pol);
    double routed_none = 0;
    const double act_none = LayerActBytesPerToken(cl, p, prof.class_first[k], &routed_none, &none);
    x.dropped = std::max(0.0, act_none + routed_none - x.act - x.routed);  // re-held in its backward
    x.gathered = 2 * (lp.dense_params / t + lp.expert_params / ep);
    x.dispatch = lp.top_k > 0
                     ? T / t * static_cast<double>(lp.top_k) * lp.dispatch_width * 2 *
                           c.req->expert_imbalance * static_cast<double>(d.etp)  // ETP: the gathered copies
                     : 0;
  }
  return cls;
}

struct StageParts {
  double dense = 0, expert = 0, lora = 0, lora_expert = 0, largest_layer = 0, dispatch = 0, mtp = 0,
         recompute_working = 0;
  bool last = false;
  std::vector<double> chunk_act;  // activation bytes per token one micro-batch leaves on each chunk
  double offloaded = 0;           // of which in host memory (req.cpu_offload_layers), bytes per token
};

// Step 1: parameters and per-chunk activations of each pipeline stage (dense / t, experts / ep); the
// embedding on the first, the head and the MTP layers (with their own embedding) on the last.
std::vector<StageParts> StageMemoryParts(const CostContext& c, const Plan& p,
                                         const std::vector<int64_t>& starts,
                                         const std::vector<Recompute>& pol) {
  const ParallelDegrees& d = p.deg;
  const ModelProfile& prof = c.prof;
  const double t = static_cast<double>(d.tp), ep = static_cast<double>(d.ep * d.etp);
  const int64_t L = static_cast<int64_t>(prof.layers.size());
  const std::vector<PerClass> cls = ClassParts(c, p, pol);
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  std::vector<StageParts> parts(d.pp);
  for (int64_t s = 0; s < d.pp; ++s) {
    StageParts& sp = parts[s];
    for (size_t ch = 0; ch < starts.size(); ++ch) {
      if (static_cast<int64_t>(ch) % d.pp != s) continue;
      const int64_t end = ch + 1 < starts.size() ? starts[ch + 1] : L;
      sp.chunk_act.push_back(0);
      for (int64_t l = starts[ch]; l < end; ++l) {
        const PerClass& x = cls[prof.layers[l].class_id];
        sp.dense += x.dense;
        sp.expert += x.expert;
        sp.lora += x.lora;
        sp.lora_expert += x.lora_expert;
        sp.chunk_act.back() += x.act + x.routed;
        if (d.pp == 1 && l < c.req->cpu_offload_layers)
          sp.offloaded += x.act + x.routed;  // CheckPlanAgainstModel
        sp.largest_layer = std::max(sp.largest_layer, x.gathered);
        sp.dispatch = std::max(sp.dispatch, x.dispatch);
        sp.recompute_working = std::max(sp.recompute_working, x.dropped);
      }
    }
    const bool first = s == 0;
    sp.last = s == d.pp - 1;
    if (first) sp.dense += (prof.embed_params + prof.vision_params) / t;
    if (sp.last) sp.dense += (prof.head_params + prof.other_params) / t;
    sp.mtp = sp.last ? static_cast<double>(p.mtp_layers) : 0;
    if (sp.mtp > 0 && d.pp > 1 && !dualpipe) sp.dense += prof.embed_params / t;  // the MTP stage's embedding
    if (sp.mtp > 0 && L > 0) {
      const LayerProfile& lp = prof.layers[L - 1];
      sp.dense += sp.mtp * (lp.dense_params + 2 * lp.hidden * lp.hidden) / t;
      sp.expert += sp.mtp * lp.expert_params / ep;
      double routed = 0;
      const double one = LayerActBytesPerToken(c, p, static_cast<size_t>(L - 1), &routed, &pol);
      if (sp.chunk_act.empty()) sp.chunk_act.push_back(0);
      sp.chunk_act.back() += sp.mtp * (one + routed);  // MTP runs after the last chunk's layers
    }
  }
  return parts;
}

// DualPipe: rank s also holds stage p-1-s (parameters 2x, DeepSeek-V3 report Table 2).
StageParts WithMirror(StageParts sp, const StageParts& mirror) {
  sp.dense += mirror.dense;
  sp.expert += mirror.expert;
  sp.lora += mirror.lora;
  sp.lora_expert += mirror.lora_expert;
  sp.largest_layer = std::max(sp.largest_layer, mirror.largest_layer);
  sp.dispatch = std::max(sp.dispatch, mirror.dispatch);
  sp.recompute_working = std::max(sp.recompute_working, mirror.recompute_working);
  sp.mtp += mirror.mtp;
  sp.last = sp.last || mirror.last;
  return sp;
}

// Step 2: weights, grads, optimizer by mode and sharding.
void StateBytes(const CostContext& c, const Plan& p, const StageParts& sp, MemoryBreakdown* mb) {
  const ParallelDegrees& d = p.deg;
  const double t = static_cast<double>(d.tp), ep = static_cast<double>(d.ep * d.etp);
  const double dp = static_cast<double>(d.dp_shard * d.dp_replicate);
  const double ds = static_cast<double>(d.dp_shard), fe = static_cast<double>(d.expert_fsdp);
  const double dense = sp.dense, expert = sp.expert, lora = sp.lora, lora_e = sp.lora_expert;
  const double dense_shard = p.zero_stage >= 3 ? ds : 1.0;
  const double exp_shard = p.zero_stage >= 3 ? fe : 1.0;
  const double cp = static_cast<double>(d.cp);
  const double opt_dense = p.zero_stage >= 1 ? (p.zero_stage >= 3 ? ds : dp * cp) : 1.0;
  const double opt_exp = p.zero_stage >= 1 ? (p.zero_stage >= 3 ? fe : dp * cp * t / ep) : 1.0;
  const double wbytes = p.zero_stage >= 3 ? DTypeBytes(PrecisionElement(p.param_dtype)) : 2.0;
  const double gbytes = GradBytes(p);                                        // main-grad buffer dtype
  const double moments = p.optimizer_dtype == Precision::kBF16 ? 4.0 : 8.0;  // Adam m + v
  const double master =
      p.zero_stage >= 3 ? moments : 4.0 + moments;  // fp32 master lives in `weights` under FSDP2
  if (p.mode == FinetuneMode::kLoRA) {
    const double b = LoraBytes(c);
    mb->weights = b * (dense / dense_shard + expert / exp_shard) + wbytes * lora / dense_shard;
    mb->weights += wbytes * lora_e / exp_shard;  // the routed experts' adapters, sharded like them
    mb->grads = 4 * lora / dense_shard;
    mb->grads += 4 * lora_e / exp_shard;
    mb->optimizer = master * lora / opt_dense;
    mb->optimizer += master * lora_e / opt_exp;
  } else {
    mb->weights = wbytes * (dense / dense_shard + expert / exp_shard);
    mb->grads = gbytes * (dense / dense_shard + expert / exp_shard);
    mb->optimizer = master * (dense / opt_dense + expert / opt_exp);
  }
  // torch FSDP2 under pipelining: the stage stays gathered, its grads accumulate unsharded (fp32).
  if (FsdpGathersOncePerStep(p)) {
    const bool lora_mode = p.mode == FinetuneMode::kLoRA;
    const double gathered_bytes = lora_mode ? LoraBytes(c) : 2.0;
    mb->weights += gathered_bytes * (dense * (1 - 1 / dense_shard) + expert * (1 - 1 / exp_shard));
    mb->grads += 4.0 * (lora_mode ? lora + lora_e : dense + expert);
  }
}

// Step 3: activation bytes per token of the micro-batches in flight on stage s (`mirror`: the chunks of
// DualPipe's second stage on the rank).
double HeldActivations(const Plan& p, int64_t s, const std::vector<double>& chunk_act,
                       const std::vector<double>& mirror_act) {
  const ParallelDegrees& d = p.deg;
  double held = 0;
  for (double a : chunk_act) held += a;  // no PP: one micro-batch
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe) {
    // DualPipe holds p+1 micro-batches of one stage's activations (DeepSeek-V3 report Table 2),
    // here half of them on each of the rank's two stages.
    double mirror = 0;
    for (double a : mirror_act) mirror += a;
    held = (static_cast<double>(d.pp) + 1) / 2 * (held + mirror);
  } else if (d.pp > 1 && static_cast<int64_t>(chunk_act.size()) == d.interleave) {
    held = PeakHeldActivations(d.pp, d.interleave, p.num_micro_batches, s, chunk_act);
  }
  return held;
}

}  // namespace

MemoryBreakdown EstimateMemory(const CostContext& c, const Plan& p, const std::vector<int64_t>& starts,
                               int* stage_out) {
  const ParallelDegrees& d = p.deg;
  const PlanRequest& req = *c.req;
  const double t = static_cast<double>(d.tp);
  const double T = TokensPerRank(p);
  const double cap = req.topology.device.hbm_gib * 1073741824.0;
  const bool dualpipe = p.pipeline_schedule == PipelineSchedule::kDualPipe;
  // Step 1: what each stage holds per device.
  const std::vector<StageParts> parts = StageMemoryParts(c, p, starts, KindPolicies(c, p));
  MemoryBreakdown worst;
  worst.total = -1;
  for (int64_t s = 0; s < d.pp; ++s) {
    const StageParts& mirror = parts[d.pp - 1 - s];
    const StageParts sp = dualpipe ? WithMirror(parts[s], mirror) : parts[s];
    // Steps 2-3: weights, grads, optimizer; the activations in flight and the EP buffers.
    MemoryBreakdown mb;
    StateBytes(c, p, sp, &mb);
    const double held = HeldActivations(p, s, sp.chunk_act, mirror.chunk_act) - sp.offloaded;
    mb.activations = T * (held + sp.recompute_working);  // + the layer being recomputed, once
    mb.offloaded = T * sp.offloaded;
    mb.a2a_buffers = c.k.a2a_buffers * sp.dispatch;
    // Step 4: workspace.
    mb.workspace = req.constraints.reserved_gib * 1073741824.0;
    if ((p.zero_stage >= 3 && (d.dp_shard > 1 || d.expert_fsdp > 1))) mb.workspace += 2 * sp.largest_layer;
    if (sp.last)  // the loss over each head's logits, one head at a time (+ MTP heads)
      mb.workspace += (1 + sp.mtp) * c.loss->Held(d.tp) * T * c.prof.vocab / t;
    mb.total = mb.weights + mb.grads + mb.optimizer + mb.activations + mb.a2a_buffers + mb.workspace;
    mb.capacity = cap;
    mb.margin = req.constraints.memory_margin * cap;
    if (mb.total > worst.total) {
      worst = mb;
      if (stage_out) *stage_out = static_cast<int>(s);
    }
  }
  return worst;
}

}  // namespace onboard
