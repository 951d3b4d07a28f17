// Training probe: a scaled-down proxy of a model, trained for real across N processes on this
// machine (or several, torchrun-style) with the planned layout (FSDP sharding + expert
// parallelism) over LibTorch c10d. This header is torch-free on purpose: agent code includes it.
//
// Entry points:
//   ProxyFromModel(model)        -> ProxySpec (same block pattern, scaled to fit this machine)
//   RunProbe(model, config)      -> ProbeResult (launches worker processes, gathers their JSON)
//   RunProbeWorker(args)         -> one rank's training loop (the hidden `onboard probe-worker`)
//   ProbeResultToJson / FormatProbeResult
//
// Units: seconds (s), bytes, tokens, FLOPs; loss in nats per predicted token; lr dimensionless.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "backends/probe_coactivation.h"
#include "core/float_dtype.h"
#include "core/model_ir.h"
#include "core/plan.h"
#include "core/probe_kernel.h"
#include "core/probe_task.h"
#include "core/status.h"
#include "validators/probe_observations.h"  // ObservationThresholds (issue 10)

namespace onboard {

// ---- Proxy model ----

// One proxy layer: token mixer + channel mixer.
enum class ProxyMixer { kKDA, kMLA };   // kMLA: gated MLA, with the DSA indexer when index_topk > 0
enum class ProxyChannel { kDense, kMoE };

struct ProxyLayer {
  ProxyMixer mixer = ProxyMixer::kKDA;
  ProxyChannel channel = ProxyChannel::kMoE;
};

// The proxy's vision tower (backends/proxy_vision.h), scaled down from ModelIR::vision: it exists
// in the layout only for the image task (backends/probe_image.h). blocks == 0: the model has none.
struct ProxyVision {
  int64_t blocks = 0;   // pre-norm ViT blocks (the model's depth, capped at 2)
  int64_t hidden = 32;  // tower width dv
  int64_t heads = 2;    // attention heads (hidden % heads == 0)
  int64_t inter = 64;   // MLP width of each block (the model's intermediate/hidden ratio x hidden)
  int64_t patch = 2;    // pixels per patch side
  int64_t merge = 2;    // patches merged per side into one LM token (the model's merge_kernel_size)
  int64_t image = 8;    // pixels per image side: 2 x 2 merged tokens by default
  std::string source;   // the model's tower it was scaled from ("moonvit: depth 27, hidden 1152, ...")
};

// Dimensions of the proxy. Defaults: a 4-layer KDA,KDA,KDA,MLA proxy (~0.3M parameters) whose
// probe step takes tens of milliseconds on one CPU core.
struct ProxySpec {
  std::string source_model;          // ModelIR::name it was derived from
  std::vector<ProxyLayer> layers;    // in order; empty = invalid
  int64_t vocab = 256;               // byte-level tokens (task symbols are a subset)
  int64_t hidden = 64;
  // KDA
  int64_t kda_heads = 2;
  int64_t kda_head_dim = 16;         // key == value head dim
  int64_t conv_kernel = 4;           // short causal depthwise conv width
  double gate_lower_bound = -5.0;    // bounded gate: g = lb * sigmoid(...), lb < 0
  int64_t chunk = 16;                // chunk length of the chunked KDA form
  int64_t gate_rank = 16;            // low-rank output gate width
  // MLA (+ DSA indexer)
  int64_t mla_heads = 2;
  int64_t q_lora_rank = 32;          // 0 = full-rank q projection
  int64_t kv_lora_rank = 32;
  int64_t qk_nope_dim = 16;
  int64_t qk_rope_dim = 8;  // decoupled rope dims of q and the shared key (even when rope)
  // Rotary positions on the rope dims (RoPE, half-split pairs, angle t * rope_theta^(-2i/qk_rope_dim)
  // at token t): set when the source model's softmax attention uses RoPE. false = NoPE: the dims
  // are kept as extra, unrotated key dims (the flagship / Kimi-Linear MLA, mla_use_nope).
  bool rope = false;
  double rope_theta = 10000.0;
  int64_t v_head_dim = 16;
  bool mla_output_gate = true;
  int64_t index_heads = 2;           // DSA lightning indexer heads (0 = no indexer: dense MLA)
  int64_t index_head_dim = 16;
  int64_t index_topk = 8;            // keys kept per query by the indexer
  // Weight of the indexer's KL loss (DeepSeek-V3.2 sparse stage, backends/README.md): per MLA
  // layer, coefficient * sum over queries t of KL(p_t || softmax(I_t)) over the selected keys S_t
  // (p = main attention summed over heads, L1-normalised, detached) / global counted tokens, added
  // to the LM loss; the indexer sees a detached input, so only this loss trains it.
  // 0 = indexer frozen (no KL gradient); >= 0, finite.
  double indexer_kl_weight = 1.0;
  // MoE
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t num_shared = 1;
  int64_t expert_inter = 32;         // routed expert FFN width
  int64_t shared_inter = 64;         // each shared expert's FFN width
  int64_t latent_dim = 32;           // routed experts run at this width (0 = hidden: no latent MoE)
  bool latent_norm = true;
  RouterActivation router = RouterActivation::kSigmoid;
  bool renormalize = true;
  double routed_scaling = 1.0;
  // Aux-loss-free load balancing (DeepSeek-V3's e_score_correction_bias; set when the model has
  // one): a per-expert bias, added to the router scores for the top-k choice only (gate weights use
  // the raw scores), moved after every optimizer step by balance_rate * sign(mean load - load) from
  // the global token counts. balance_rate is per step, dimensionless (score units); DeepSeek-V3
  // used 1e-3 over long training; a probe of tens of steps needs a faster rate (measured: flagship
  // proxy, 2 ranks, 40 steps: whole-probe max/mean 3.78 at 0, 3.78 at 0.01, 2.04 at 0.02, 1.79 at 0.03).
  bool balance_bias = false;
  double balance_rate = 2e-2;
  // Dense MLP (SwiGLU)
  int64_t mlp_inter = 128;
  ProxyVision vision;                // the vision tower (issue 12 item 6); blocks 0 = none
  std::vector<std::string> notes;    // what was mapped or dropped ("GQA mixer mapped to MLA")

  int64_t num_layers() const { return static_cast<int64_t>(layers.size()); }
  Status Validate() const;           // names every field and value that is out of range
  std::string PatternString() const; // "K K K M | dense,moe,moe,moe"
};

// Scales a model down to a proxy with the same structure: the first 4*blocks layers' mixer
// kinds (KDA / GDN / linear -> KDA; MLA / DSA / softmax kinds -> MLA), the dense-first layers,
// latent MoE with shared experts and the router activation. blocks >= 1 (4 layers per block).
ProxySpec ProxyFromModel(const ModelIR& model, int64_t blocks = 1);

// The proxy as a ModelIR (for ComputeStats / the cost model's EvaluatePlan).
ModelIR ProxyToModelIR(const ProxySpec& spec);

// Parameter counts of the proxy as built (not an estimate).
struct ProxyParamCounts {
  int64_t total = 0;
  int64_t expert = 0;                // routed experts, all of them
  int64_t lora = 0;                  // adapters (mode lora)
  int64_t trainable = 0;
};

// ---- Probe configuration ----

// ProbeTask (copy, text, lookup, image): core/probe_task.h; kLookup: probe_lookup.h; kImage: probe_image.h

struct ProbeConfig {
  int64_t ranks = 1;                 // processes
  int64_t ep = 0;                    // expert-parallel degree (0 = ranks); divides ranks and experts
  int64_t fsdp = 0;                  // FSDP shard degree of non-expert params (0 = ranks); divides ranks
  // Defaults (steps, lr, warmup, seq, batch, base_steps) are the full-mode recipe that learns the
  // copy task within budget on every listed config (backends/README.md "Probe defaults");
  // DefaultProbeConfig(mode) gives each mode's recipe (LoRA: a higher lr on the adapters).
  int64_t steps = 400;
  FinetuneMode mode = FinetuneMode::kFull;
  int64_t lora_rank = 4;
  double lora_alpha = -1;            // adapter scale = alpha / rank; <= 0: DefaultLoraAlpha(rank)
  double lr = 1e-2;                  // peak learning rate
  int64_t warmup = 20;               // linear warm-up steps, then cosine to min_lr_ratio * lr
  double min_lr_ratio = 0.1;
  double clip = 1.0;                 // global grad-norm clip (0 = off)
  double weight_decay = 0.0;         // AdamW decoupled decay on matrices (not norms)
  double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;
  uint64_t seed = 1234;
  int64_t seq = 16;    // tokens per sequence (copy task: (seq-1)/2 = 7 copied symbols)
  int64_t batch = 32;  // global sequences per step; split evenly over ranks
  // Sequences per micro-batch on each rank (0 = batch/ranks: one micro-step per step). Each rank
  // runs batch/(ranks*micro_batch) micro-steps and accumulates their gradients (Megatron's
  // micro-batch size / gradient accumulation). Rank r's micro-step i takes global micro-batch
  // i*ranks + r. Every gradient is summed over micro-batches in the canonical pairwise order of
  // backends/ordered_sum.h, so for a fixed micro_batch the curve is bit-identical for every
  // power-of-two ranks / fsdp / ep layout when batch/micro_batch is a power of two.
  int64_t micro_batch = 0;
  ProbeTask task = ProbeTask::kCopy;
  int64_t copy_symbols = 32;         // copy task alphabet size (>= (seq-1)/2: symbols are distinct)
  std::string text_file;             // task == kText: byte-level tokens from this file
  // Compute dtype (core/float_dtype.h): fp32 (default) or fp64. With the default micro_batch, sharded
  // and 1-process fp32 curves agree to ~1e-7 until a near-tie top-k decision (MoE router, DSA indexer)
  // flips on a 1e-7 summation-order difference; fix micro_batch across layouts for exact agreement.
  FloatDtype dtype = FloatDtype::kFP32;
  std::vector<int64_t> expert_placement;  // expert -> EP rank; empty = contiguous blocks
  double timeout_s = 300;            // whole probe; a rank that hangs or dies fails the probe
  double collective_timeout_s = 30;  // c10d/Gloo timeout on each collective
  std::string out_dir;               // per-rank logs and JSON; empty = a temp dir
  std::string worker_binary;         // `onboard` binary for the workers; empty = this executable
  std::string launcher = "local";    // "local": fork/exec here | "slurm": one srun step (backends/slurm_launch.h)
  int64_t threads_per_rank = 1;      // intra-op threads in each worker
  // Where each rank's tensors live: "cpu" (default) or "cuda" (rank r on cuda:(local rank % GPUs);
  // several ranks need ONBOARD_PROBE_BACKEND=nccl: Gloo's all-to-all takes CPU tensors). With
  // "cuda" the KDA layers run the LibTorch-ops form (the generated kernel here is the CPU one).
  std::string device = "cpu";
  // Fault injection for tests: rank `die_rank` SIGKILLs itself at step `die_step` (-1 = off).
  int64_t die_rank = -1;
  int64_t die_step = -1;
  // Convergence criteria (validators/convergence.h): final loss < converge_fraction * start.
  double converge_fraction = 0.6;
  // LoRA base phase: full training of the base for this many steps on a related source task before
  // the `steps` recorded adapter steps (backends/README.md); -1 = ceil(0.6 * steps), 0 = none.
  int64_t base_steps = -1;
  // KDA forward: generated (codegen's CPU kernel, torch-ops fallback with a logged reason) | torch.
  ProbeKernel kda_kernel = ProbeKernel::kGenerated;
  // DSA core (indexer + top-k + attention over the selected keys) of the MLA layers that have an
  // indexer: torch (LibTorch ops, the default) | generated (codegen's fused CPU DSA kernel as the
  // forward, LibTorch-ops recompute as the backward; torch ops with a logged reason where it cannot
  // serve: tp > 1, not fp32, not CPU). backends/dsa_generated.h.
  ProbeKernel dsa_kernel = ProbeKernel::kTorch;
  // Negative control (backends/probe_controls.h): "" (none) | kControlNoLookback |
  // kControlRandomRouter | kControlFrozenLora. A control run must fail the learning verdict.
  std::string control;
  // ---- Tensor parallelism (issue 17; backends/probe_tp.h) ----
  // Megatron-style TP degree: groups of tp consecutive ranks split the attention heads (KDA, MLA,
  // DSA indexer), the dense / shared-expert MLP widths and the vocabulary; each TP group is one
  // data-parallel rank. 0 or 1 = no TP.
  int64_t tp = 1;
  int64_t tp_degree() const { return tp > 1 ? tp : 1; }
  // Megatron sequence parallelism over the TP group (needs tp > 1 and seq % tp == 0): outside the
  // column ... row-parallel regions (norms, residuals) each TP rank holds seq/tp tokens; a region
  // all-gathers its input along the sequence and reduce-scatters its output (probe_tp.h).
  bool sequence_parallel = false;
  // Expert tensor parallelism (Megatron --expert-tensor-parallel-size): 0 or 1 = each TP rank
  // holds the routed experts whole (replicated over TP); = tp: every routed expert's FFN width is
  // split over the TP group (column / row parallel). Other values are refused.
  int64_t etp = 0;
  int64_t etp_degree() const { return etp > 1 ? etp : 1; }
  // ---- end tensor parallelism ----
  // ---- Pipeline parallelism (issue 17, backends/probe_pipeline.h) ----
  // pp stages; each rank holds `interleave` virtual stages (model chunk c*pp + s on stage s,
  // Megatron's interleaved 1F1B; 1 = plain 1F1B). The micro-steps of a data rank are the
  // schedule's micro-batches.
  int64_t pp = 1;
  int64_t interleave = 1;
  // First proxy layer of each model chunk (pp*interleave entries, ascending, first 0); empty =
  // balanced (backends/probe_pipeline_schedule.h). The embedding goes with chunk 0, the head with the last.
  std::vector<int64_t> stage_layer_starts;
  // Fault injection for tests (never set by the CLI): kPipeFaultSwapBackward = stage 0 runs its
  // first two backward ops on each other's micro-batches (the schedule check is skipped), so the
  // exactness test must fail.
  std::string pp_fault;
  int64_t pp_degree() const { return pp > 0 ? pp : 1; }
  // ---- end pipeline parallelism ----
  // ---- Rank order (the one home of it): pp outermost, then the data ranks, then tp innermost ----
  // rank r = (s * D + d) * T + t, T = tp_degree(), D = data_ranks() = ranks / (tp * pp): pipeline
  // stage s, data rank d (the FSDP / EP / micro-batch layout runs over the D data ranks of one
  // (stage, TP rank)), TP rank t (tp consecutive ranks, as in Megatron). ep, fsdp and the
  // micro-batches count data ranks, not ranks.
  int64_t data_ranks() const { return ranks / (tp_degree() * pp_degree()); }
  int64_t stage_ranks() const { return ranks / pp_degree(); }  // ranks of one stage: D * T
  int64_t stage_of(int64_t r) const { return r / stage_ranks(); }
  int64_t data_rank_of(int64_t r) const { return (r / tp_degree()) % data_ranks(); }
  int64_t tp_rank_of(int64_t r) const { return r % tp_degree(); }
  // ---- end rank order ----
  // ---- Recompute per block kind (issue 17; backends/probe_recompute.cpp) ----
  // Block kind as the plan names it (Plan::recompute keys: "KDA", "MLA", "DSA", "MoE", "MLP";
  // "*" = every kind not named) -> policy. A kind absent, with no "*", recomputes "full" (FSDP +
  // full activation checkpointing per layer, the probe's behaviour before policies existed).
  std::map<std::string, Recompute> recompute;
  Recompute recompute_for(const std::string& kind) const;
  // Issue 18 (expert communication): which ranks share a node (consecutive global ranks, this many
  // per node; 0 = all on one node), so a localhost probe acts as nodes x ranks_per_node and measures
  // its slow-tier (cross-node) traffic (backends/probe_coactivation.h).
  int64_t ranks_per_node = 0;
  // Node-limited routing (DeepSeek-V3): each token's top-k experts come from at most this many
  // nodes: the nodes with the highest sum of their top max(1, top_k / M) selection scores, then the
  // top-k inside them. Nodes = where the placement puts each expert (ranks_per_node); 0 = off. It
  // changes the routing, so curves are compared against the same run without it.
  int64_t max_route_nodes = 0;
  int64_t nodes() const { return ranks_per_node > 0 ? ranks / ranks_per_node : 1; }
  int64_t node_of(int64_t rank) const { return ranks_per_node > 0 ? rank / ranks_per_node : 0; }
  // Redundant experts (DeepSeek EPLB's phy2log; backends/probe_replicas.h): physical slot p sits on
  // EP rank p / (size / ep) and holds logical expert expert_phy2log[p]; a logical expert has one or
  // two copies. Empty = none (expert_placement). Overrides expert_placement when set.
  std::vector<int64_t> expert_phy2log;
  // Fault injection for tests: true = each source's log2phy sends a replicated expert's tokens to
  // the physical slot after the right one (a wrong map; the curve must then change).
  bool fault_log2phy = false;
  // Communication-computation overlap (issue 18; backends/proxy_moe.cpp): the EP dispatch and
  // combine all-to-alls are posted asynchronously; the shared expert's up-projection runs while
  // the dispatch is in flight and its down-projection (with its TP all-reduce) while the combine
  // is (Megatron's --moe-shared-expert-overlap). false = each is waited as soon as it is posted.
  // The same ops are built in the same order either way: the curve is bit-identical.
  bool moe_overlap = false;
  // EP dispatch (issue 18; names as the plan's ep_dispatcher): "alltoall" = one all-to-all, a row
  // per (token, expert rank); "deepep" = node-deduplicated (backends/probe_node_dedup.h): a token
  // crosses to each remote node once, to the rank there with its sender's local index, which
  // forwards it inside the node; the combine sums per node there and comes back the same way.
  // deepep needs >= 2 nodes in every EP group, each holding the same number of its ranks, and no
  // moe_overlap. Same maths; the combine's per-node sums reorder a token's top-k sum: bit-exact for top_k = 2
  // (two-term sums commute), ~1e-6 relative for top_k = 4 (tests/backends/probe_node_dedup_test.cpp).
  std::string ep_dispatcher = "alltoall";
  // Node of each EP rank of world rank r's EP group (node_of of its world ranks), in EP rank order.
  std::vector<int64_t> ep_group_nodes(int64_t r) const;
  Status Validate(const ProxySpec& spec) const;  // names every factor ("ep=3 must divide ranks=4")
  int64_t ep_degree() const { return ep > 0 ? ep : data_ranks(); }
  int64_t fsdp_degree() const { return fsdp > 0 ? fsdp : data_ranks(); }
  int64_t micro_batch_size() const { return micro_batch > 0 ? micro_batch : batch / data_ranks(); }
  int64_t micro_steps() const { return batch / (data_ranks() * micro_batch_size()); }  // per data rank / step
  // ---- Observation thresholds (issue 10) ----
  // What the probe's own report judges divergence, comm share and expert balance against. One
  // home: validators/probe_observations.h. `onboard probe` runs the defaults; `onboard run` passes
  // the run's (agent::Thresholds, agent/probe_recipe.cpp), so its probe.txt and its rules agree.
  // Read by the launcher (FinishProbeResult), not sent to the workers.
  ObservationThresholds thresholds;
  // ---- end observation thresholds ----
  // ---- Lookup task (issue 12; backends/probe_lookup.h) ----
  // task == kLookup: keys x keys table cells, each holding one of `values` symbols (16 x 16 cells
  // of 16 values by default). Measured (backends/README.md "Lookup task"): on the 2-layer proxy the
  // random_router control slows this task down but does not stop it; on the routed-memory proxy with
  // RouterControlProbeConfig (probe_schedule.h) the router converges and random routing does not.
  int64_t lookup_keys = 16;
  int64_t lookup_values = 16;
  // ---- end lookup task ----
  // ---- Kernel loss parity (issue 12; backends/probe_loss_parity.h, validators/loss_parity.h) ----
  // > 0: after the probe the launcher trains the parity proxy (this spec's KDA layers on dense
  // MLPs, 1 rank, full mode) for this many steps twice, once with the generated KDA kernel (with
  // this config's control, so perturbed_kda_gate perturbs it) and once on the LibTorch reference
  // ops, and compares the two loss curves (ProbeResult::loss_parity). 0 = off.
  int64_t loss_parity_steps = 0;
  // ---- end kernel loss parity ----
};

inline constexpr const char* kPipeFaultSwapBackward = "swap_backward";

// Recompute per block kind (backends/probe_recompute.cpp): the plan's kind names of proxy layer
// `layer` ("KDA" | "MLA" | "DSA"; "MoE" | "MLP"), the `--recompute KIND=POLICY,...` list (kinds
// case-insensitive, canonicalised) and the check of ProbeConfig::recompute's keys.
std::string ProxyMixerKind(const ProxySpec& spec, size_t layer);
std::string ProxyChannelKind(const ProxySpec& spec, size_t layer);
Expected<Recompute> ParseRecomputePolicy(const std::string& text, const std::string& where,
                                         const std::string& field);
Status ParseRecomputeList(const std::string& text, std::map<std::string, Recompute>* out);
Status ValidateRecompute(const ProbeConfig& config);

inline constexpr const char* kControlNoLookback = "no_lookback";
inline constexpr const char* kControlRandomRouter = "random_router";
inline constexpr const char* kControlFrozenLora = "frozen_lora";
inline constexpr const char* kControlPerturbedKdaGate = "perturbed_kda_gate";  // issue 12
inline constexpr const char* kControlPerturbedDsaTopk = "perturbed_dsa_topk";  // issue 12 (DSA parity)
inline constexpr const char* kControlNoImage = "no_image";  // issue 12 item 6: blank images (probe_image.h)

// The tuned defaults of `mode` (backends/probe_schedule.cpp): ProbeConfig's own defaults for full
// training; for LoRA the adapter phase's steps and learning rate and the base phase's length.
ProbeConfig DefaultProbeConfig(FinetuneMode mode);

// ---- Results ----

// Seconds spent waiting on each collective kind during one step (this rank, or max over ranks).
struct CollectiveTimes {
  double all_gather_s = 0;           // FSDP parameter all-gathers (forward + backward re-gather)
  double reduce_scatter_s = 0;       // FSDP gradient reduce-scatters
  double all_to_all_s = 0;  // EP dispatch + combine (incl. the count exchange): host blocked (exposed)
  // Asynchronous EP all-to-alls (ProbeConfig::moe_overlap): seconds the collective was in flight
  // while the host computed (post returned -> wait entered, or completed if sooner); not in total().
  double all_to_all_hidden_s = 0;
  double all_reduce_s = 0;           // grad-norm / loss / replica gradient all-reduces
  // Tensor parallelism (backends/probe_tp.h), over the TP group only:
  double tp_all_reduce_s = 0;  // row-parallel outputs, input grads, CE sums, partial grads
  double tp_all_gather_s = 0;  // CE max logit, the accuracy's full logits; SP region inputs
  double tp_reduce_scatter_s = 0;  // sequence parallelism: region outputs, input grads
  double tp_total() const { return tp_all_reduce_s + tp_all_gather_s + tp_reduce_scatter_s; }
  // ---- pipeline parallelism: point-to-point between stages (backends/probe_pipeline.h) ----
  double pp_send_s = 0;  // posting activation / gradient sends + waiting for them to complete
  double pp_recv_s = 0;  // blocked in receives (includes waiting for the other stage: bubble)
  double pp_total() const { return pp_send_s + pp_recv_s; }
  // ---- end pipeline parallelism ----
  double total() const {
    return all_gather_s + reduce_scatter_s + all_to_all_s + all_reduce_s + tp_total() + pp_total();
  }
};

struct ProbeStep {
  int64_t step = 0;
  double loss = 0;                   // global mean over predicted tokens, nats
  double grad_norm = 0;              // global L2 norm before clipping
  double lr = 0;
  // Exact-match accuracy of the step's counted targets (copy: the copied half), fraction in [0, 1];
  // NaN when the worker did not record it.
  double accuracy = 0;
  double step_s = 0;                 // wall time of the step (max over ranks)
  double tokens_per_s = 0;           // global tokens / step_s
  CollectiveTimes comm;              // max over ranks
  double compute_s = 0;              // step_s - comm.total() on the slowest rank
  int64_t peak_rss_bytes = 0;        // max over ranks of the RSS high-water mark (getrusage)
  // Max over ranks of the step's live-tensor high-water mark: bytes of live CPU tensor storages
  // (tracking allocator, backends/tensor_memory_compat.h), not RSS; 0 = not measured (CUDA).
  int64_t live_peak_bytes = 0;
  // expert_load[l][e]: tokens routed to expert e in MoE layer l (global, forward pass only).
  std::vector<std::vector<int64_t>> expert_load;
  // indexer_kl[l]: DSA indexer KL(main attention || indexer) of the l-th MLA layer with an indexer,
  // nats per counted token of the global batch (what ProxySpec::indexer_kl_weight multiplies).
  std::vector<double> indexer_kl;
  // ---- pipeline parallelism (pp > 1; else 0) ----
  // Bubble: idle share of the rank's pipeline span (first op start until every stage is done: sends
  // completed, then a world barrier) not spent in its forward/backward ops, from steady_clock timestamps; max
  // over ranks. pp_bubble_by_rank: each rank's.
  double pp_bubble = 0;
  std::vector<double> pp_bubble_by_rank;
  // ---- end pipeline parallelism ----
};

// Comparison of the measurement with the cost model (search/planner.h EvaluatePlan) for the same
// proxy layout on a topology of this machine (measured GEMM FLOP/s and loopback bandwidth).
// One collective kind measured beside the cost model's term for it (backends/probe_comparison.cpp
// holds the table of kinds: one row per kind, so new kinds slot in there).
struct CollectiveComparison {
  std::string kind;        // "fsdp_ag_rs", "ep_a2a", "all_reduce", ...
  std::string term;        // cost-model time term it is set beside ("comm.fsdp")
  double measured_s = 0;   // per step: mean over the steps after the first, max over ranks
  double predicted_s = 0;  // the term's total (exposed + overlapped) seconds per step
  double ratio = 0;        // measured / predicted (0 when nothing predicted)
};

// The memory model's per-rank breakdown (search/memory_model.cpp) for the probe's layout, in the
// probe's dtype, beside the measured live-tensor peak.
struct MemoryComparison {
  double weights = 0, grads = 0, optimizer = 0, activations = 0, a2a_buffers = 0, workspace = 0;
  double predicted = 0;    // sum of the above
  double measured = 0;     // max over ranks and steps of the live-tensor peak
  double ratio = 0;        // measured / predicted
  std::string dtype_note;  // how bf16 model terms were converted to the probe's dtype
};

struct ProbePrediction {
  bool available = false;
  std::vector<CollectiveComparison> collectives;
  MemoryComparison memory;
  std::string topology;              // how the topology was obtained
  double step_s = 0;                 // predicted
  double memory_bytes = 0;           // predicted per-rank peak
  double comm_s = 0;                 // predicted exposed communication
  std::vector<std::string> notes;
  // Pipeline bubble share of the step the cost model gives for this layout (search/cost_model.cpp:
  // bubble = (pp-1)/v * t_mb, share = bubble / (m * t_mb + bubble) = (pp-1) / (v*m + pp - 1)); 0 = no
  // pipeline.
  double pp_bubble = 0;
};

// Kernel loss parity of one generated kernel against its reference ops (validators/loss_parity.h).
struct ProbeLossParity {
  std::string kernel;  // "kda"
  std::string proxy;   // the parity proxy's pattern ("K K | dense,dense")
  bool pass = false;
  int64_t steps = 0;
  double max_rel = 0;  // max over steps of |generated - reference| / |reference|
  int64_t worst_step = -1;
  double tolerance = 0;  // relative, per step
  std::string message;   // one line with the numbers
  // Forward calls of the KDA core in the generated run, rank 0 (a generated run whose kernel fell
  // back to the torch ops compares torch with torch; the report says so).
  int64_t generated_kernel_calls = 0;
  int64_t torch_op_calls = 0;
  std::vector<double> generated, reference;  // the two loss curves, nats
};

// How often this probe's KDA core ran each implementation (rank 0, forward calls; backward
// always differentiates the torch ops): shows what ProbeConfig::kda_kernel really ran.
struct KdaCalls {
  int64_t generated = 0;
  int64_t torch = 0;
  std::string fallback_reason;  // why a generated request ran torch ops ("" = none)
};

struct ProbeResult {
  ProxySpec spec;
  ProbeConfig config;
  ProxyParamCounts params;
  std::vector<ProbeStep> steps;
  std::string task_floor;            // "copy task: floor 0 nats; no-copy baseline ln(32)=3.47 nats"
  double floor_nats = 0;             // known floor (NaN for text)
  double baseline_nats = 0;          // no-learning loss: unigram entropy of the targets
  // Skill metric (copy: exact-match accuracy on the copied half, mean of the last steps; NaN when
  // the task has none) and the learning bar it was judged by (validators/learning_verdict.h).
  std::string skill_metric;          // "copy_accuracy" | "" (text)
  double skill = 0;
  double skill_target = 0;           // min accuracy
  double final_loss = 0;             // mean of the last steps' losses
  double loss_target = 0;            // max loss for "converged"
  // Text task (backends/probe_text_split.h; NaN for copy): the loss on the held-out split, which no
  // step trained on, and its baselines there: unigram (= baseline_nats) and the best interpolated
  // bigram, which the held-out loss must be below (skill_metric "held_out_loss").
  double held_out_loss = std::numeric_limits<double>::quiet_NaN();
  double bigram_nats = std::numeric_limits<double>::quiet_NaN();
  // Copy task (issue 12): the final weights' held-out evaluation (backends/probe_data.h
  // kCopyEvalSequences), which the verdict judges; held_out_loss is its loss. last_steps_accuracy:
  // the mean of the last LearningCriteria::window training steps' accuracies, shown beside it.
  double held_out_accuracy = std::numeric_limits<double>::quiet_NaN();
  int64_t held_out_tokens = 0;  // counted targets of the held-out evaluation
  double last_steps_accuracy = std::numeric_limits<double>::quiet_NaN();
  ProbePrediction prediction;
  int64_t baseline_rss_bytes = 0;    // max over ranks of RSS before the model was built (runtime)
  std::vector<int64_t> rank_live_peak_bytes;  // per rank: max over steps of its live-tensor peak
  std::string backend;               // c10d backend of the world group: "gloo" | "nccl" | "local"
  std::string torch_version;         // LibTorch the workers were built against
  // Validator verdicts (validators/convergence.h, validators/probe_checks.h), one line each.
  // "converged" | "not_learned" | "diverged" | "nan" | "plateau" | "not_converged"
  std::string convergence;
  std::vector<std::string> checks;   // human-readable lines, first = convergence
  std::string out_dir;
  double wall_s = 0;
  // Expert co-activation and tier traffic over the recorded steps, summed over ranks (issue 18).
  ProbeCoactivation coactivation;
  // Kernel loss parity (issue 12): one entry per generated kernel compared; empty = not run
  // (ProbeConfig::loss_parity_steps = 0, or the proxy has no KDA layer).
  std::vector<ProbeLossParity> loss_parity;
  KdaCalls kda_calls;  // what the KDA layers of this probe ran (issue 12)
};

// What a caller sees of a running probe. OnStep: rank 0's record of each recorded step, in order
// (steps 0, 1, ...; not the LoRA base phase), called on the launcher's thread as the step ends
// (read from <out_dir>/steps.jsonl). Its loss, grad_norm, lr and accuracy are the global values
// (the same as ProbeResult::steps); step_s, comm, compute_s, peak_rss_bytes, expert_load and
// indexer_kl are rank 0's own (the result merges the ranks). cancelled(): polled while the workers
// run; once true the launcher sends them SIGTERM, SIGKILL after kProbeCancelGraceS, and returns a
// "cancelled" error.
class ProbeObserver {
 public:
  virtual ~ProbeObserver() = default;
  virtual void OnStep(const ProbeStep& /*step*/) {}
  virtual bool cancelled() const { return false; }
};
inline constexpr double kProbeCancelGraceS = 2.0;  // seconds between SIGTERM and SIGKILL on cancel

// Launches config.ranks worker processes (fork/exec `<worker_binary> probe-worker ...`), a TCPStore
// on loopback (free port) for rendezvous, watches them, and gathers their JSON. A rank that exits
// non-zero or is killed ends the probe: the others are killed and the error names the rank and why.
// Errors: bad config (kBadInput), a rank died / timed out (kNetwork), workers missing (kNotFound).
// Each worker gets a parent-death signal (SIGKILL): it cannot outlive the launching thread.
Expected<ProbeResult> RunProbe(const ModelIR& model, const ProbeConfig& config, ProbeObserver* observer = nullptr);
// Same, from an explicit proxy spec.
Expected<ProbeResult> RunProbeSpec(const ProxySpec& spec, const ProbeConfig& config,
                                   ProbeObserver* observer = nullptr);

// One rank. Rendezvous: master_addr/master_port (TCPStore client; rank 0 serves when
// serve_store). Writes `<out_dir>/rank<r>.json` on success.
struct ProbeWorkerArgs {
  std::string spec_file;             // JSON written by RunProbe: {"spec":..., "config":...}
  int64_t rank = 0;
  int64_t world = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 0;
  bool serve_store = false;          // rank 0 hosts the TCPStore (torchrun-style launch)
  std::string out_file;              // result JSON of this rank
  // Rank 0 only: its record of each recorded step, one ProbeStep line (backends/probe_step_codec.h)
  // appended and flushed per step; the launcher follows it for ProbeObserver::OnStep. Empty = none.
  std::string steps_file;
};
Status RunProbeWorker(const ProbeWorkerArgs& args);

// JSON (de)serialisation used between launcher and workers and by `--json`.
std::string ProbeSpecConfigToJson(const ProxySpec& spec, const ProbeConfig& config);
Status ProbeSpecConfigFromJson(const std::string& text, ProxySpec* spec, ProbeConfig* config);
std::string ProbeResultToJson(const ProbeResult& result);
// The prediction's measured-beside-predicted part: {collectives: [{kind, term, measured_s, predicted_s,
// ratio}], pp_bubble, memory: {per-term bytes, predicted_bytes, measured_live_peak_bytes, ratio,
// dtype_note}}.
nlohmann::json PredictionComparisonToJson(const ProbePrediction& prediction);
// The measured pipeline bubble: the mean over the steps after the first of each step's max-over-ranks
// idle share of the pipeline span (0 without a pipeline).
double MeasuredPpBubble(const ProbeResult& result);
// The EP all-to-all per step, seconds, mean over the steps after the first of each step's max over
// ranks: exposed (the host blocked on it; without ProbeConfig::moe_overlap all of it) and hidden
// (in flight under compute) (issue 18).
struct MeasuredExpertAllToAll {
  double exposed_s = 0, hidden_s = 0;
};
MeasuredExpertAllToAll MeasuredExpertExchange(const ProbeResult& result);
// A round's expert communication (issue 18), report.json's "expert_comm": {nodes, ranks_per_node,
// placement ("contiguous" | "set"), physical_slots (replicas; 0 = none), overlap, the co-activation's
// per-token tier traffic over all MoE layers (TotalTraffic: nodes_per_token,
// cross_node_rows_per_token, cross_node_copies_per_token, slow_tier_bytes_per_token,
// rank_max_over_mean), a2a_exposed_s, a2a_hidden_s}; null without MoE routing.
nlohmann::json ExpertCommToJson(const ProbeResult& result);
nlohmann::json LossParityToJson(const ProbeLossParity& parity);  // one kernel's, with both curves
std::string FormatProbeResult(const ProbeResult& result);   // the `onboard probe` text report

}  // namespace onboard
