// INTERNAL to backends/ (includes LibTorch). One rank's model in the real-weights probe
// (probe_weights.h has the layout and the adapter maths): the loaded slice of the checkpoint, the
// LoRA adapters on it and the forward of a batch of windows over c10d (TP regions, EP exchange,
// FSDP units). The worker's loop is probe_weights_worker.cpp.
// Shapes: weights [out, in] (this rank's TP shard); A [r, in], B [out, r] whole on every rank;
// activations [b, S, hidden] for the rank's b windows; tokens / targets [b, S]. Units: nats, bytes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/hf_model.h"
#include "backends/probe_data.h"
#include "backends/probe_tp.h"
#include "backends/probe_weights.h"
#include "backends/probe_weights_fsdp.h"

namespace onboard::backends {

// Which of gpt-oss's fused expert parameters an adapter wraps (kNone: a projection's weight).
enum class FusedParam { kNone, kGateUp, kDown };

// One adapted projection. `target` points into the rank's loaded layers; its weight is replaced by
// base + scale x (B A restricted to the shard) before the layer runs.
struct Adapter {
  std::string module;  // "model.layers.0.self_attn.q_proj"
  HfLinear* target = nullptr;
  torch::Tensor base;  // the loaded shard [out_l, in_l] (FSDP: its dim-0 chunk, gathered around use)
  bool cols = false;   // row-parallel (o_proj): the shard holds columns of W, so A's columns
  torch::Tensor a, b;  // [r, in], [out, r], trainable
  size_t layer = 0;    // index into RankModel::w.layers
  // A routed expert's (core/lora_targets.h AdaptsRoutedExperts): under EP only on its owner, its
  // gradient summed over RankModel::expert_dp.
  bool routed = false;
  // gpt-oss's fused experts (probe_weights_fused_adapters.cpp): one adapter per fused parameter in
  // PEFT's ParamWrapper form, A [r*E, in] / B [out, r*E], `target` nullptr; `parameter` its PEFT
  // target_parameters entry ("mlp.experts.gate_up_proj"), `module` its saved key path.
  FusedParam fused = FusedParam::kNone;
  std::string parameter;
  std::vector<torch::Tensor> expert_base;  // per expert e: gate e, up e (kGateUp: 2E) or down e (kDown: E)
};

// Where this rank sits: rank r = d * T + t; EP and FSDP groups are consecutive data ranks.
struct RankPlace {
  int64_t data = 1, data_rank = 0;  // D data ranks (batch split), d
  int64_t tp = 1, tp_rank = 0;
  int64_t ep = 1, ep_rank = 0;      // --ep: routed experts HfExpertRange(E, ep, ep_rank)
  int64_t fsdp = 1, fsdp_rank = 0;  // --fsdp: every frozen tensor's HfFsdpRows chunk
  // The routed experts' FSDP chunk: as fsdp without EP; under EP x FSDP (torchtitan's
  // dp_shard_mod_ep) over the fsdp / ep ranks of the FSDP group with this EP rank (1 when fsdp <= ep).
  int64_t expert_fsdp = 1, expert_fsdp_rank = 0;
  int64_t pp = 1, stage = 0;  // --pp: the stage's layers (PpStageLayers), embedding / head
  int64_t interleave = 1;     // --interleave: model chunks per stage (chunk q = v * pp + stage)
};

// --pp: the decoder layers [first, last] of `stage` when the loaded layers [a, b] are cut into `pp`
// contiguous stages of (b - a + 1) / pp layers (the last ones one more when it does not divide).
// --interleave V: the same over pp * V model chunks, chunk q in place of the stage.
HfLayerRange PpStageLayers(int64_t a, int64_t b, int64_t pp, int64_t stage);

struct RankModel {
  std::optional<SafetensorsCheckpoint> ckpt;  // kept open: F32 weights alias its mapping
  HfForwardConfig c;
  HfModelWeights w;              // the rank's slice (TP shard, own experts, FSDP chunks)
  std::vector<LayerSpec> specs;  // per loaded layer: the shard's spec
  // Local model chunk v's layers are w.layers[chunk_begin[v], chunk_begin[v + 1]) (--interleave;
  // else one chunk: all of them).
  std::vector<size_t> chunk_begin;
  std::vector<Adapter> adapters;
  double scale = 0;  // alpha / r
  RankPlace place;
  uint64_t bytes_read = 0, checkpoint_bytes = 0;
  Group* ep = nullptr;           // EP group when place.ep > 1
  // EP: the stage's ranks of this EP rank (every TP rank, every EP group): the holders of this rank's
  // routed experts, over which their adapters' gradients are summed.
  Group* expert_dp = nullptr;
  std::unique_ptr<HfFsdp> fsdp;  // FSDP units (embed, each layer, head) when place.fsdp > 1
  // EP x FSDP with expert_fsdp > 1: each layer's routed experts, over the expert-data-parallel group.
  std::unique_ptr<HfFsdp> expert_fsdp;
  std::vector<HfExpertStack> expert_stacks;  // gpt-oss under FSDP: per loaded layer, its experts stacked
  std::vector<HfFsdpRun> fsdp_runs;          // per loaded layer: what its autograd function runs
  HfFsdpRun fsdp_head;                       // the final norm + head (the last stage)
  int64_t fsdp_embed = -1;                   // the embedding's unit (the first stage), else -1
  bool frozen = false;                       // adapters off (B A not added) in the next forward
  bool skip_latent_allreduce = false;        // the `no_latent_allreduce` control (probe_weights.h)
};

// Step 3 of the worker: the rank's slice of the checkpoint (its TP rows / columns, EP experts, FSDP
// chunks), specs and adapters. `fault` (WeightsProbeOptions::fault) is the layouts' negative control.
[[nodiscard]] Status LoadRankModel(const WeightsProbeOptions& o, const RankPlace& p, RankModel* m);
// probe_weights_adapters.cpp: the adapters on kLoraTargets of every loaded layer (LoadRankModel's
// step 3), and W_eff = base + scale x (B A) of layer li's (`frozen`: base).
void AddAdapters(const WeightsProbeOptions& o, RankModel* m);
// A LoRA A of `rows` x `in` as PEFT initialises it (kaiming-uniform(a=sqrt(5)) of Linear(in, rows):
// U(+-1/sqrt(in))), in the probe's dtype, from torch's generator (every rank draws the same sequence).
torch::Tensor DrawLoraA(const WeightsProbeOptions& o, int64_t rows, int64_t in);
void ApplyLayerAdapters(RankModel& m, size_t li, bool frozen);
// The one-line caveat when kLoraTargets adapts routed experts this probe leaves frozen (an MoE layer
// with AdaptsRoutedExperts but no expert adapter), else "".
std::string FrozenPlannedExperts(const RankModel& m);
// probe_weights_fused_adapters.cpp: gpt-oss's fused experts as PEFT's target_parameters adapt them.
// The A of layer i's two fused parameters drawn in order (gate_up_proj, then down_proj; `m` nullptr
// or a layer another stage holds: drawn and dropped), their adapters added to m when `li` >= 0.
void AddFusedExpertAdapters(const WeightsProbeOptions& o, RankModel* m, const HfForwardConfig& c, int64_t i,
                            int64_t li);
// W_e = base_e + scale x (PEFT's delta of expert e) on this rank's experts and TP slice (`frozen`:
// base_e). Under FSDP the bases are the experts as bound now (BindStackedExperts).
void ApplyFusedAdapter(RankModel& m, Adapter& ad, bool frozen);
// FSDP (place.fsdp > 1): the units over `group` (the routed experts over `experts` when given: EP x
// FSDP), one all-gather of the shards' row counts per group.
void SetUpFsdp(RankModel* m, TpContext* tp, Group& group, Group* experts);
// Every adapted weight = base + scale x (B A) on this rank's rows / columns (`frozen`: base);
// `chunk` >= 0: only local model chunk `chunk`'s layers.
void ApplyAdapters(RankModel& m, bool frozen, int64_t chunk = -1);
// This rank's summed next-token NLL over the first `counted` windows of b (the rest is padding that
// keeps the EP / FSDP group's collectives in step), times `inv_tokens`.
torch::Tensor BatchLoss(RankModel& m, TpContext& tp, const Batch& b, int64_t counted, double inv_tokens);
// BatchLoss's pieces (a pipeline stage runs some of them, probe_weights_pp.h): the embedding rows of
// the windows [b, S, hidden]; the rank's layers over h (`chunk` >= 0: only local model chunk
// `chunk`'s); the head's summed NLL of the counted windows.
torch::Tensor EmbedRows(RankModel& m, const Batch& b);
torch::Tensor RunLayers(RankModel& m, TpContext& tp, torch::Tensor h, int64_t chunk = -1);
torch::Tensor HeadNll(RankModel& m, const torch::Tensor& h, const Batch& b, int64_t counted,
                      double inv_tokens);

}  // namespace onboard::backends
