// Layer-slice probe on real weights (issue 16, `onboard probe CKPT_DIR --weights [--layers A-B] --text
// FILE --mode lora --ranks N [--tp T]`): every rank loads the checkpoint's real embedding, the chosen
// decoder layers and the head (MapHfSlice: mmap, only its own TP rows / columns), trains LoRA adapters on
// kLoraTargets (core/lora_targets.h: q/k/v/o_proj where the family has them, the dense MLP, the shared
// experts, or each routed expert where an MoE layer has no shared expert; gpt-oss's fused experts as
// PEFT's target_parameters: probe_weights_fused_adapters.cpp) over c10d, and the held-out loss of
// the text must fall below the frozen model's own (the no-learning baseline: adapters at B = 0 compute
// exactly the loaded checkpoint). The adapters are written in PEFT's format (hf_peft_adapter.h).
//
// Layout: rank r = d * T + t (TP innermost, as ProbeConfig's rank order): D = ranks / T data ranks split
// the global batch; the T ranks of one data rank split attention heads / query groups and MLP (shared and
// routed-expert) widths in Megatron's column / row layout (hf_tp_slice.cpp), with the row-parallel
// outputs all-reduced over the TP group (probe_tp.h's f / g). Embedding, norms and head are replicated.
// `--ep E` (MoE checkpoints): groups of E consecutive data ranks (same TP rank) split the routed experts
// (rank d % E loads HfExpertRange(experts, E, d % E) only); each MoE layer sends a token's rows to its
// experts' owners and back (hf_moe_ep.h, all-to-all); a routed expert's adapter lives on its owners, its
// gradient summed over them (the expert-data-parallel ranks). `--fsdp F`: groups of F consecutive data ranks
// each load only their dim-0 chunk of every frozen tensor (HfFsdpRows) and all-gather a unit (embedding,
// one layer, head) just before it runs, releasing it after (probe_weights_fsdp.h). EP x FSDP (ep divides
// fsdp or fsdp divides ep): the non-expert weights chunked over the FSDP group, the routed experts owned
// by their EP rank and chunked over the expert-data-parallel ranks of the FSDP group (fsdp / ep of them,
// torchtitan's dp_shard_mod_ep; 1 when fsdp <= ep: whole on the owner). `--pp P`: rank r = (s * D + d)
// * T + t (D = ranks / (T * P)); stage s loads only its contiguous share of the layers (the embedding
// on stage 0, the final norm + head on the last); activations go forward and their gradients back over
// c10d send / recv in 1F1B order over `micro_batch`-window micro-batches (probe_weights_pp.h, the
// measured bubble beside (P-1)/(M+P-1)); the EP / FSDP groups are a stage's own data ranks. `--pp P
// --interleave V` (Megatron's virtual pipeline): the layers cut into P*V contiguous model chunks, chunk q
// on stage q % P (stage s holds chunks s, P + s, ...: only their layers), run in the interleaved 1F1B
// order (M a multiple of P). All compute the one-rank run's function: the held-out losses agree.
// LoRA (PEFT, no rslora): W_eff = W + (alpha / r) B A, A ~ U(+-1/sqrt(in)) seeded, B = 0; every rank holds
// the whole A and B and uses the rows (column-parallel) / columns (row-parallel) of its shard, so the
// world sum of the ranks' gradients (each loss scaled by 1 / D) is the gradient of the global mean loss.
// Optimizer: AdamW (no decay), linear warm-up then cosine, global grad-norm clip 1.
// Tokens: the text file's bytes as token ids (vocab must be >= 256); the split and the held-out
// windows are the text probe's (probe_text_split.h). The byte unigram / bigram entropies are
// reported for context; the verdict is against the frozen model.
// Verdict (one home, kWeightsProbeMinFall): learned when held-out loss after training <
// (1 - kWeightsProbeMinFall) x the frozen model's held-out loss (both finite).
// Units: nats per target token; bytes; seconds.
// Torch-free: the CLI and agent include it through backends/backend_entry.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/hf_layer_range.h"
#include "core/lora_targets.h"
#include "core/status.h"

namespace onboard {

// The held-out loss must fall by at least this share of the frozen model's: with the fixed held-out
// windows both numbers are deterministic, so any fall is learning; 1% keeps a rounding-level
// difference from counting.
inline constexpr double kWeightsProbeMinFall = 0.01;

struct WeightsProbeOptions {
  std::string checkpoint;  // directory: config.json + safetensors
  HfLayerRange layers;     // decoder layers loaded (embedding + these + final norm + head)
  std::string text_file;   // bytes = token ids
  int64_t ranks = 2;       // processes
  int64_t tp = 1;          // TP degree; divides ranks
  int64_t ep = 1;    // EP degree over the data ranks: each loads routed experts E/ep (divides ranks/tp, E)
  int64_t fsdp = 1;  // FSDP degree over the data ranks: each loads 1/fsdp of every frozen tensor's rows
  int64_t pp = 1;    // pipeline stages (outermost): each loads its contiguous share of the layers
  int64_t interleave = 1;  // model chunks per stage (virtual pipeline): chunk q = v * pp + stage
  int64_t steps = 40;
  int64_t seq = 32;   // tokens per window
  int64_t batch = 8;  // global windows per step; divides by ranks / tp
  // Windows per micro-batch per data rank (0 = batch / data ranks: one micro-batch); the adapters'
  // gradients accumulate over microbatches() = batch / (data ranks x micro_batch); --pp runs them 1F1B.
  int64_t micro_batch = 0;
  int64_t data_ranks() const { return ranks / (tp * pp); }
  int64_t microbatches() const { return micro_batch > 0 ? batch / (data_ranks() * micro_batch) : 1; }
  int64_t lora_rank = 4;
  double lora_alpha = DefaultLoraAlpha(lora_rank);  // core/lora_targets.h: 2 x lora_rank
  double lr = 1e-2;                         // peak, AdamW on the adapters
  int64_t warmup = 4;
  uint64_t seed = 1234;
  bool fp64 = false;  // compute dtype fp64 instead of fp32
  // Negative control: "frozen_lora" = the adapters get no update (must not pass).
  std::string control;
  // Layout negative controls (spec JSON only): "wrong_stage_layers" = each stage loads the next
  // stage's layers; "wrong_chunk_order" = under --interleave each stage loads the chunks s * V + v
  // (the contiguous order) instead of Megatron's v * P + s; "wrong_expert_range" = each EP rank loads the
  // next rank's experts and serves them as its own; "wrong_fsdp_chunk" = each FSDP rank loads the next rank's
  // chunk; "wrong_expert_chunk" = under EP x FSDP each rank loads the next expert-FSDP rank's chunk of its
  // experts; "wrong_kda_heads" = each TP rank's KDA decay gate (A_log, dt_bias) is the next TP rank's heads';
  // "no_latent_allreduce" = under TP each rank norms and up-projects its partial latent MoE sum (kimi_k3)
  // instead of the all-reduced one. Each must move the held-out loss off the one-rank run's.
  std::string fault;
  std::string out_dir;        // rank logs + JSON, the PEFT adapter in <out_dir>/adapter; "" = a temp dir
  std::string worker_binary;  // `onboard` for the workers; "" = this executable
  double timeout_s = 300;
  double collective_timeout_s = 60;
  Status Validate() const;  // names the flag and value
};

struct WeightsProbeResult {
  WeightsProbeOptions options;
  std::string model_type;
  int64_t layers_first = 0, layers_last = 0;  // the decoder layers run (inclusive)
  int64_t tensors_used = 0;                   // checkpoint tensors rank 0 read
  std::vector<std::string> dtypes;            // checkpoint dtypes read
  std::vector<uint64_t> rank_bytes;           // distinct checkpoint bytes each rank read
  uint64_t checkpoint_bytes = 0;
  std::vector<std::string> targets;  // adapted module names ("model.layers.0.self_attn.q_proj")
  int64_t lora_params = 0;
  std::string caveat;  // routed experts kLoraTargets adapts that this probe leaves frozen ("" when none)
  std::vector<double> train_loss;  // per step, global mean
  double held_out_frozen = 0;      // frozen model (adapters B = 0): the no-learning baseline
  double held_out_final = 0;       // after the adapter steps
  int64_t held_out_windows = 0;
  double unigram_nats = 0, bigram_nats = 0;  // byte baselines of the held-out split (context only)
  // --pp: the bubble per stage measured on its first rank (mean over the steps after the first), and
  // (P - 1) / (V M + P - 1) for M micro-batches and V chunks per stage; the decoder layers each stage
  // loaded (its first rank's, ascending).
  std::vector<double> pp_bubble_by_stage;
  std::vector<std::vector<int64_t>> pp_stage_layers;
  double pp_bubble_theory = 0;
  bool learned = false;
  std::string verdict;      // one line
  std::string adapter_dir;  // PEFT export (rank 0)
  std::string out_dir;
  double wall_s = 0;
};

// Launches the ranks (probe_launch.h), merges their JSON, judges. Errors: bad options or checkpoint
// (kBadInput, the worker's message: a missing tensor is named with its expected shape), a rank died.
[[nodiscard]] Expected<WeightsProbeResult> RunWeightsProbe(const WeightsProbeOptions& o);

// (P - 1) / (V M + P - 1): the 1F1B bubble share of a step with P stages of equal time, M
// micro-batches, V model chunks per stage (interleaved: each stage's V chunk passes shrink the bubble).
double PpBubbleTheory(int64_t stages, int64_t microbatches, int64_t interleave = 1);

// The `onboard probe --weights` text report.
std::string FormatWeightsProbe(const WeightsProbeResult& r);
// The result as one JSON document; RunWeightsProbe also writes it to <out_dir>/weights_probe.json
// (what `onboard probe --weights --json` prints).
std::string WeightsProbeToJson(const WeightsProbeResult& r);

}  // namespace onboard
