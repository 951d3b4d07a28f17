// Internal interface of the analytical cost model (search/cost_model.cpp: step time, built from
// search/layer_time.h per layer and search/stage_time.h per stage,
// search/memory_model.cpp: memory, search/collectives.cpp: alpha-beta collectives on tiers,
// search/pipeline_split.cpp: balanced stage split). Public entry points are in search/planner.h.
//
// Units: seconds, bytes, FLOPs, FLOP/s, tokens. T = tokens per micro-batch = micro_batch * seq.
#pragma once

#include <memory>

#include <string>
#include <vector>

#include "search/cross_entropy_cost.h"
#include "search/expert_host_ops.h"
#include "search/model_profile.h"
#include "search/planner.h"

namespace onboard {

// Physical constants of the model (documented in search/README.md). Not per-run factors: each is
// a datasheet/paper figure or one global efficiency calibrated on tests/data/measured_training_runs.json
// (marked "calibrated"). Units in each comment.
struct CostConstants {
  // GEMMs (fraction of the dtype's dense peak).
  double gemm_eff_max = 0.80;        // best achieved fraction of bf16 peak for large GEMMs (cuBLAS, Megatron 2021 MFU)
  double gemm_dim0 = 64;             // efficiency halves-ish when a GEMM dim is this small: eff = max/(1+d0/m+d0/n+d0/k)
  double fp8_gemm_eff = 0.80;        // achieved fraction of the fp8/MXFP8 peak relative to bf16's (TE fp8 GEMMs run
                                     // ~1.6x bf16, not 2x, at LLM shapes; calibrated)
  double nvfp4_gemm_eff = 3.55 / 6;  // the same for the NVFP4 peak (TE NVFP4BlockScaling GEMMs): TE's own
                                     // GEMM benchmark, B300, a 5B model's 12 GEMMs pre-quantized, NVFP4 3.55x
                                     // bf16 at 6x its peak (TE@d0067d0 docs/features/low_precision_training/
                                     // speedups.rst); measured, not calibrated on a training run
  double grouped_gemm_eff = 0.90;    // grouped (per-expert) GEMM vs one dense GEMM of the same shape: per-expert
                                     // tile tails and launch (CUTLASS/TE grouped GEMM; calibrated)
  double gemm_tile_m = 128;          // M tile of grouped GEMMs: per-expert tokens are padded to it (tokens)
  // Attention cores (fraction of bf16 peak).
  double flash_attn_eff = 0.45;      // fused softmax attention forward (FlashAttention-2/3, cuDNN; calibrated: 0.55
                                     // before the Blackwell runs, which reach a lower share of their higher peak)
  double sparse_attn_eff = 0.40;     // DSA top-k attention + indexer
  double linear_attn_eff = 0.35;     // chunked KDA / gated DeltaNet / linear attention kernels
  double attn_bwd_ratio = 2.5;       // fused attention backward / forward (recomputes P inside; FlashAttention-2)
  // Memory-bound kernels.
  double hbm_eff = 0.90;             // achieved fraction of HBM bandwidth for elementwise kernels (STREAM on H100/B200
                                     // reaches ~0.9; calibrated)
  double elementwise_passes = 2.0;   // HBM bytes moved by elementwise ops per byte of saved activation (fwd)
  double unfused_score_passes = 8.0; // HBM bytes per score element fwd: write QK^T, read+write softmax, read for AV
  double unfused_dropout_passes = 5.0;  // + with dropout: write 1 B mask, write+read dropped probs (Korthikanti 2022)
  double kda_selective_share = 0.5;  // KDA selective recompute redoes the conv + gates: half the mixer's elementwise work
  double lora_gemm_eff = 0.5;        // LoRA adapter GEMMs (rank r << h) reach half the big-GEMM efficiency
  double lora_bwd_ratio = 2.0;       // adapter backward / forward FLOPs: the adapters train, so backward is
                                     // dh = dy B, dB = dy^T h, dx = dh A, dA = dh^T x: twice y = (x A^T) B^T
  // MoE token handling (memory-bound; Megatron-Core MoE token dispatcher, TE fused permute).
  double permute_passes = 4.0;       // HBM bytes per dispatched element fwd: permute read+write, unpermute read+write
  double sort_chunks_passes = 4.0;   // HBM bytes per dispatched element fwd, all-to-all dispatcher, > 1 local
                                     // expert: sort_chunks_by_idxs r+w after the dispatch a2a, unsort r+w
                                     // before the combine (Megatron-Core MoEAlltoAllTokenDispatcher; DeepEP /
                                     // HybridEP hand tokens over already grouped: none)
  double router_passes = 12.0;       // HBM bytes per (token, expert) score fwd: fp32 logits write, softmax/sigmoid
                                     // read+write, top-k read (4 B each)
  // Eager elementwise passes Megatron-Core runs outside its fused kernels for some model features
  // (gpt-oss), HBM bytes per element (2 B per bf16 access), counted from Megatron-LM@d98e8a64dd:
  double rope_unfused_fwd_bytes = 20.0;  // per Q/K element beyond TE's fused RoPE (read + write): the unfused
                                         // t*cos, rotate_half (neg, cat), *sin, add, cat make ~12 accesses
                                         // for 2: 10 x 2 B (rope_utils.py: mscale != 1 -> unfused)
  double rope_unfused_bwd_bytes = 16.0;  // their autograd twins: ~10 accesses for 2 fused: 8 x 2 B
  double clamp_fwd_bytes = 16.0;  // per routed copy x I: clamp(gate) r+w, clamp(up) r+w, cat of both r+w:
                                  // 8 accesses per I (fused_bias_geglu.py weighted_bias_quick_geglu_impl)
  double clamp_bwd_bytes = 20.0;  // two clamp backwards (grad, input, out: 3 each) + the chunk's cat r+w:
                                  // 10 accesses per I
  double expert_bias_fwd_bytes = 12.0;       // per routed copy x fc2 width, bf16 router probs: b*p written,
                                             // t + bp (r, r, w), torch.cat r+w (experts.py _apply_bias)
  double expert_bias_bwd_bytes = 12.0;       // dbias = sum(dy p) and dprob = sum(dy b): each r + w + reduce r
  double expert_bias_fp32_fwd_bytes = 28.0;  // fp32 probs (HybridEP casts them, token_dispatcher.py): bp 4,
                                             // t + bp 2+4+4, cat 4+4, .to(bf16) 4+2
  double expert_bias_fp32_bwd_bytes = 36.0;  // .to 2+4, dbias and dprob 12 each in fp32, dt back to bf16 4+2
  // Context-parallel ring attention (Transformer Engine AttnFuncWithCPAndKVP2P).
  double cp_correction_passes = 3.0;  // HBM passes per output element per ring step fwd, x 2 B (bf16): read
                                      // the running output, read the step's, write the rescaled sum (TE
                                      // flash_attn_fwd_out_correction with the step's LSE); bwd accumulates
                                      // dQ per step and dK,dV per hop the same way (2x, as elementwise)
  // fp8 / MXFP8 quantisation of GEMM inputs (TE: row-wise + column-wise copies).
  double fp8_quant_bytes = 4.0;      // HBM bytes per GEMM input element per pass: read 2 B, write 2 x 1 B (+ scales)
  // NVFP4 (TE NVFP4BlockScaling, TransformerEngine@d0067d0 pytorch/csrc/quantizer.cpp
  // NVFP4Quantizer::quantize_impl): an amax pass over the bf16 input first (nvte_hadamard_transform_amax
  // with RHT for inputs and grads, nvte_compute_amax_with_config for weights: read 2 B), then one fused
  // cast writing the row-wise and the RHT'd column-wise copies (nvte_quantize_with_hadamard_transform:
  // read 2 B, write 2 x (0.5 B + one e4m3 scale per 16 elements)).
  double nvfp4_quant_bytes = 2.0 + 2.0 + 2 * (0.5 + 1.0 / 16);  // = 5.125 B per element per pass
  double fp8_dispatch_bytes = 1.0;   // bytes per element of the EP dispatch in fp8 (DeepEP / HybridEP)
  double combine_bytes = 2.0;        // bytes per element of the EP combine (bf16)
  // Host-side launch overheads (eager PyTorch), seconds per layer per micro-batch, fwd+bwd.
  double launch_s_per_layer = 2.0e-3;   // host time to launch one decoder layer's ~100-200 kernels at
                                        // ~5-10 us each; exposed only where it exceeds the GPU time
                                        // (the host runs ahead otherwise); 0 under full-iteration graphs
  double launch_s_per_kernel = 1.0e-5;  // one more eager launch (the upper end of the ~5-10 us above):
                                        // charged per kernel an unfused KDA prologue / DSA indexer adds,
                                        // and per expert GEMM / quantise of eager grouped GEMMs
  double moe_sync_s_per_layer = 2.0e-3;  // per MoE layer forward: the dispatcher's device-to-host sync of
                                         // token counts stalls the GPU while the host launches what follows
                                         // (removed by full-iteration graphs; calibrated). Its mechanism
                                         // is not established: drop-and-pad runs, which never sync, need
                                         // it as much (search/README.md, thirteenth pass)
  double tp_overlap_sm_tax = 0.10;  // tp_comm_overlap: the GEMM a TP collective overlaps loses this share of
                                    // the overlapped time: TE userbuffers pipeline the reduce-scatter on
                                    // 16-32 of 132-148 SMs (PipelineOverlapCfg num_sm in Megatron-Bridge's
                                    // userbuffers_* configs), the all-gather ring exchange on copy
                                    // engines (0 SMs): ~0.1 of the pair (derived, not calibrated)
  double a2a_overlap_sm_tax = 0.20;  // overlapped EP comm slows compute by the SMs it occupies:
                                     // DeepEP normal kernels use 24 SMs of 132 (H100) / 148 (B200),
                                     // plus the memory traffic they share (calibrated)
  // Memory.
  double a2a_buffers = 4.0;          // dispatch+combine send/recv buffers, in units of one dispatch volume
};

// Everything derived once per request; shared read-only by search threads.
struct CostContext {
  const PlanRequest* req = nullptr;
  ModelProfile prof;
  CostConstants k;
  double peak_flops = 0;             // FLOP/s per device of GEMMs at the compute dtype (fp8 peak for
                                     // fp8/mxfp8, fp4 peak for nvfp4)
  double attn_peak_flops = 0;        // FLOP/s per device of attention cores (bf16: TE runs them in bf16)
                                     // Both are the datasheet peak x SustainedTensorRate (<= 1).
  double datasheet_peak_flops = 0;   // the datasheet peak at the compute dtype (MFU's denominator)
  bool quantised = false;            // GEMM inputs quantised (fp8 per-tensor, MXFP8 or NVFP4)
  double quant_bytes = 0;            // HBM bytes per GEMM input element per quantise pass (0: bf16)
  double saved_input_bytes = 0;      // bytes per GEMM input element TE saves for backward in the
                                     // quantised copy (fp8 / mxfp8 1, nvfp4 0.5625; 0: bf16 saves none)
  double quantised_gemm_eff = 1;     // k.fp8_gemm_eff or k.nvfp4_gemm_eff (1: bf16)
  std::string gemm_share_note;       // copied into every estimate's notes when that share is not
                                     // calibrated (nvfp4); built once here, not per searched plan
  bool host_fed = true;              // an accelerator fed by a host launch queue (launch / sync stalls);
                                     // false on the CPU backend (LocalhostTopology): ops run on the host
                                     // thread and the measured matmul rate already includes their overhead
  double hbm_bps = 0;                // bytes/s per device
  double exp_per_s = 0;              // softmax exponentials/s on the SFUs (0 = no figure: not charged)
  bool per_expert_launches = false;  // grouped GEMMs launch per expert (hardware catalog: NVIDIA + TE)
  double host_link_bps = 0;          // device <-> host memory, bytes/s one way (CPU offloading)
  ExpertHostOps expert_ops;          // host ops per local expert of TE GroupedLinear at the GEMM dtype TE
                                     // runs (bf16 where the device has no fp8): expert_host_ops.h
  const CrossEntropyCost* loss = nullptr;  // the loss over the logits (PlanRequest::cross_entropy)
  double base_weight_bytes = 2;      // bytes per frozen base parameter (LoRA) / working weight
  int64_t global_batch_target = 0;   // sequences per step requested (0 = 4M tokens)
  // The same context with bf16 GEMMs (peak, share, quantisation, saved inputs, per-expert ops), over the
  // same profile: the layers marked bf16_gemms (PlanRequest::bf16_layers_first / last) are costed with
  // it. Null when no layer is marked.
  std::shared_ptr<const CostContext> bf16_twin;
  const CostContext& ForLayer(const LayerProfile& lp) const {
    return lp.bf16_gemms && bf16_twin ? *bf16_twin : *this;
  }
};

CostContext MakeCostContext(const PlanRequest& req);
// Share (0, 1] of its datasheet tensor peak `dev` sustains under matmul load (cost_model.cpp).
double SustainedTensorRate(const DeviceType& dev, double gemm_eff_max);

// --- hardware_catalog.cpp ---
// Softmax exponentials per second (SFU MUFU.EX2) of a catalog device, by name or alias; 0 if unknown.
double SoftmaxExpsPerSecond(const std::string& device);
// Whether the device's MoE grouped GEMMs launch one GEMM per local expert (NVIDIA under TE: true).
bool PerExpertGemmLaunches(const std::string& device);
// Device <-> host memory bandwidth one way, achieved, bytes/s (PCIe or NVLink-C2C); 0 if unknown.
double HostLinkBytesPerSecond(const std::string& device);
// Best measured bf16 matmul of a catalog device (MAMF), FLOP/s; 0 if unknown or not measured.
double MeasuredMatmulFlops(const std::string& device);

// --- collectives.cpp ---
// kRingP2P: an all-gather-shaped pass made of send/recv to the next rank (Transformer Engine's CP ring,
// AttnFuncWithCPAndKVP2P): every step waits for its slowest hop, one link of the slowest tier crossed.
enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kP2P, kRingP2P };
struct CommCost {
  double seconds = 0;
  std::string tier;                  // slowest tier crossed
};
// `bytes`: all-reduce / p2p / all-to-all: bytes each rank holds/sends; all-gather / reduce-scatter:
// the full (gathered) size. Group of n ranks with stride `stride` in the rank order (tp innermost).
// `beyond_first_tier` scales all-to-all traffic on tiers past the first (group-limited routing:
// a token reaches at most topk_groups nodes, so top_k copies become topk_groups across nodes).
CommCost CollectiveCost(const Topology& t, const CostCalibration& cal, Collective kind, int64_t n,
                        int64_t stride, double bytes, double beyond_first_tier = 1.0);

// --- pipeline_split.cpp ---
// Contiguous split of per-layer costs into `chunks` parts minimising the largest part.
// Returns the first layer index of each chunk (chunks entries; layers >= chunks).
std::vector<int64_t> BalancedSplit(const std::vector<double>& layer_cost, int64_t chunks);

// --- pipeline_memory.cpp ---
// Peak of the activations one stage holds under Megatron-Core's (interleaved) 1F1B schedule, given
// what one micro-batch leaves on each of the stage's v virtual chunks (same unit in and out).
double PeakHeldActivations(int64_t p, int64_t v, int64_t m, int64_t stage,
                           const std::vector<double>& chunk_bytes);

// --- memory_model.cpp ---
struct StageMemoryInput {
  std::vector<int64_t> layers;       // layers on this device's stage (all virtual chunks)
  int64_t stage = 0;                 // 0-based pipeline stage
  bool first = false, last = false;  // holds embeddings / head
};
// Memory of the worst pipeline stage; `stage_out` = that stage's index.
MemoryBreakdown EstimateMemory(const CostContext& c, const Plan& p, const std::vector<int64_t>& chunk_starts,
                               int* stage_out);
// Activation bytes per token of layer `l` kept under plan p's recompute and TP/SP (dense part),
// and the routed-expert part per token on an EP rank.
// `pol` = KindPolicies(c, p) (looked up once per plan), or null to look the layer's kinds up in p.
double LayerActBytesPerToken(const CostContext& c, const Plan& p, size_t l, double* routed_out,
                             const std::vector<Recompute>* pol = nullptr);
// Plan p's policy for block kind `kind`: p.recompute[BlockKindName(kind)], else p.recompute["*"], else none.
Recompute PolicyFor(const Plan& p, BlockKind kind);
// PolicyFor of every ModelProfile::kinds entry, indexed like it (LayerProfile::*_kind_id).
std::vector<Recompute> KindPolicies(const CostContext& c, const Plan& p);
// Routed-expert bytes kept, and GEMM input elements, per token under expert TP: the dispatched
// tokens are all-gathered over the etp ranks (etp copies of the w-wide input, top_k per token), each
// rank keeping 1/etp of the expert width: act_routed + top_k*2*w*(etp-1), routed_gemm_inputs +
// top_k*w*(etp-1).
double RoutedActBytes(const LayerProfile& lp, int64_t etp);
// Routed experts with a SwiGLU (gated) FFN: act_routed holds top_k * 6I for it, not 4I.
bool GatedRoutedExperts(const LayerProfile& lp);
// Routed bytes per token the SwiGLU storage options drop (memory_model.cpp header): the fp8 input
// store (req.fp8_act_input_store) and, under MoE selective recompute, the output.
double SwiGluBytesDropped(const CostContext& c, const LayerProfile& lp, Recompute chan);
double RoutedGemmInputs(const LayerProfile& lp, int64_t etp);
// Tokens of one micro-batch on one device: micro_batch * seq / cp.
double TokensPerRank(const Plan& p);
// Bytes per element of the main-grad buffer the weight-grad GEMMs accumulate into and the DP sync
// reduces (Megatron DDP: fp32; bf16 with grad_reduce_in_fp32=False: Plan::grad_dtype).
inline double GradBytes(const Plan& p) { return p.grad_dtype == Precision::kBF16 ? 2.0 : 4.0; }

// --- cost_model.cpp ---
// Full estimate (time terms + memory). Assumes ValidatePlan passed.
PlanEstimate EstimatePlan(const CostContext& c, const Plan& p);
// Memory only (cheap; used to prune before costing time).
MemoryBreakdown EstimatePlanMemory(const CostContext& c, const Plan& p);
// Stage split the time model uses (balanced by per-layer time unless the plan fixes it).
std::vector<int64_t> PlanStageStarts(const CostContext& c, const Plan& p);
// Extra forward seconds per micro-batch on the whole model if every block of `kind` used `level`.
double RecomputeSeconds(const CostContext& c, const Plan& p, BlockKind kind, Recompute level);
// Plan-level checks beyond ValidatePlan that need the model (heads per kind, layers, batch).
Status CheckPlanAgainstModel(const CostContext& c, const Plan& p);

}  // namespace onboard
