// Plan: a parallel layout of one model on one topology, as data. Applying a plan is one short
// function per consumer (backends/apply_plan, exports in search/plan_export).
// Units: seconds, bytes, tokens.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/precision.h"  // Precision: the plan's dtype fields (one parse/print home)
#include "core/status.h"

namespace onboard {

enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);  // "none" | "selective" | "full"
// The one parser of a recompute policy (RecomputeName's spelling); else kBadInput naming origin, field,
// value.
[[nodiscard]] Expected<Recompute> ParseRecompute(const std::string& origin, const std::string& field,
                                                 const std::string& value);

enum class FinetuneMode { kFull, kLoRA };
const char* FinetuneModeName(FinetuneMode m);  // "full" | "lora"
// The one parser of a fine-tuning mode (FinetuneModeName's spelling); else kBadInput naming origin,
// field and value ("must be full or lora").
[[nodiscard]] Expected<FinetuneMode> ParseFinetuneMode(const std::string& origin, const std::string& field,
                                                       const std::string& value);

// How softmax attention exchanges K/V between context-parallel ranks (Megatron --cp-comm-type).
enum class CpComm { kRing, kAllGather };   // ring: cp-1 p2p steps overlapped with attention; all-gather: KV once
const char* CpCommName(CpComm c);

// CUDA graphs: none (eager launches), layers (attention + MoE router/preprocess captured per layer,
// Megatron cuda_graph_scope=[attn, moe_router, moe_preprocess]), full (whole iteration captured).
enum class CudaGraph { kNone, kLayers, kFull };
const char* CudaGraphName(CudaGraph g);

// MoE token dispatcher: all-to-all (NCCL, bf16, every top-k copy sent), or DeepEP / HybridEP (fp8
// dispatch, a token crosses to a remote node once and is forwarded over NVLink there).
enum class EpDispatcher { kAllToAll, kDeepEP, kHybridEP };
const char* EpDispatcherName(EpDispatcher d);

// How FSDP (zero 3) meets pipelining, by implementation. per_micro_batch: Megatron-FSDP
// (optim_grads_params) gathers the weights before each micro-batch's forward and backward and
// reduce-scatters the grads after every backward (megatron_fsdp.py: grad_reduce_every_bprop), with or
// without PP. per_step: torch FSDP2 under torch.distributed.pipelining (torchtitan, NeMo AutoModel):
// the stage stays gathered across micro-batches (torchtitan fsdp_reshard_after_forward "default": not
// resharded when PP is on) and its grads accumulate unsharded in the reduce dtype until the last
// backward (pipelining stage.py: set_requires_gradient_sync(last_backward); FSDPParam
// to_accumulated_grad_if_needed), one all-gather and one reduce-scatter per step. Without PP both
// gather and reduce-scatter per micro-batch.
enum class FsdpPipelining { kPerMicroBatch, kPerStep };
const char* FsdpPipeliningName(FsdpPipelining f);
[[nodiscard]] Expected<FsdpPipelining> ParseFsdpPipelining(const std::string& origin,
                                                           const std::string& field,
                                                           const std::string& value);

// Pipeline schedule (issue 13): Megatron-Core 1F1B (interleaved when interleave > 1), or DualPipe
// (DeepSeek-V3 report sec. 3.2.1: micro-batches fed from both ends, each rank holds stages s and
// p-1-s, a forward and a backward chunk overlapped so EP all-to-all and PP sends hide).
enum class PipelineSchedule { k1F1B, kDualPipe };
const char* PipelineScheduleName(PipelineSchedule s);

struct ParallelDegrees {
  int64_t dp_replicate = 1;     // HSDP replicas (pure DP when dp_shard == 1)
  int64_t dp_shard = 1;         // FSDP shard degree
  int64_t tp = 1;               // tensor parallel
  int64_t pp = 1;               // pipeline stages
  int64_t ep = 1;               // expert parallel; carved out of dp_shard * cp * tp (MoE parallel folding)
  int64_t expert_fsdp = 1;      // FSDP degree of expert weights inside one EP group ((dp_shard*cp*tp)/ep)
  int64_t interleave = 1;       // virtual pipeline chunks per stage
  bool sequence_parallel = false;
  int64_t cp = 1;               // (last, so positional initialisers keep their meaning)
                                // context parallel: each sequence split over cp ranks (ring/all-gather KV,
                                // KDA state hand-off, DSA indexer); rank order tp, cp, dp_shard, dp_replicate, pp
  int64_t etp = 1;              // expert tensor parallel (issue 13): each routed expert's FFN split over etp
                                // ranks; ep * etp * expert_fsdp = dp_shard * cp * tp (Megatron MoE folding)
  int64_t world() const { return dp_replicate * dp_shard * cp * tp * pp; }
};

struct Plan {
  ParallelDegrees deg;
  int64_t micro_batch = 1;      // sequences per micro-batch
  int64_t num_micro_batches = 1;// per step per pipeline
  int64_t seq = 4096;           // tokens per sequence
  int64_t global_batch = 0;     // sequences per optimizer step
  std::map<std::string, Recompute> recompute;   // block kind ("KDA","MLA","DSA","MoE","MLP",...) -> policy
  FinetuneMode mode = FinetuneMode::kFull;
  int64_t lora_rank = 0;
  Precision base_dtype = Precision::kBF16;      // frozen base precision in LoRA: bf16 | fp8 | mxfp4
  Precision compute_dtype = Precision::kBF16;   // bf16 | fp16 | fp8 (per-tensor) | mxfp8 (1x32 block scales)
  CpComm cp_comm = CpComm::kRing;               // with deg.cp > 1
  Precision optimizer_dtype = Precision::kFP32;  // Adam moments m, v: fp32 | bf16 (Megatron exp_avg_dtype;
                                                 // fp32 master); the grads: grad_dtype alone
  Precision grad_dtype = Precision::kFP32;      // Megatron main-grad buffer and its DP reduction: fp32 | bf16
                                                // (grad_reduce_in_fp32=False / main_grads_dtype bf16)
  Precision param_dtype = Precision::kFP32;     // FSDP2's sharded parameters, the optimizer's master copy:
                                                // fp32 | bf16 (NeMo AutoModel casts its models to bf16);
                                                // zero_stage 3 only
  int64_t mtp_layers = 0;                       // multi-token-prediction layers trained (on the last stage)
  // Decoder layers at the start / the end of the model whose GEMMs run in bf16 under a quantised
  // compute_dtype (fp8 | mxfp8 | nvfp4): Megatron-Core first_last_layers_bf16 with
  // num_layers_at_start_in_bf16 / num_layers_at_end_in_bf16 (fp8_utils.py is_first_last_bf16_layer,
  // fp4_utils.py get_fp4_context: global layer numbers, so pipeline stages need no care; MTP layers stay
  // quantised). 0, 0: every layer quantised.
  int64_t bf16_layers_first = 0;
  int64_t bf16_layers_last = 0;
  CudaGraph cuda_graph = CudaGraph::kNone;
  EpDispatcher ep_dispatcher = EpDispatcher::kAllToAll;
  // issue 13 (cost model): schedule and TP communication overlap.
  PipelineSchedule pipeline_schedule = PipelineSchedule::k1F1B;
  bool tp_comm_overlap = false;                 // TE userbuffers: TP all-gather / reduce-scatter pipelined
                                                // with the GEMMs they feed (Megatron --tp-comm-overlap)
  std::vector<int64_t> stage_layer_starts;      // first layer of each pipeline (virtual) stage (pp*interleave entries)
  int64_t zero_stage = 3;       // 0: replicated optimizer (DDP); 1: optimizer sharded over dp (ZeRO-1);
                                // 3: FSDP, weights+grads+optimizer sharded over dp_shard (default)
  FsdpPipelining fsdp_pipelining = FsdpPipelining::kPerMicroBatch;  // zero 3 with pp > 1 (above)
};

// Whether the plan's FSDP gathers its stage and reduce-scatters its grads once per step (zero 3,
// pp > 1, fsdp_pipelining per_step) rather than every micro-batch: the one test the time model, the
// memory model and the exports share.
bool FsdpGathersOncePerStep(const Plan& p);

// Checks the plan's internal arithmetic and its fit to a model with `num_experts`, `num_heads`
// and `world` devices. Messages name every factor: "ep=48 must divide dp_shard*tp=64".
Status ValidatePlan(const Plan& p, int64_t world, int64_t num_experts, int64_t num_heads,
                    int64_t num_layers);
// The bf16 first / last layers alone (ValidatePlan runs it): a quantised compute_dtype, counts within
// num_layers, and for fp8 / mxfp8 each <= num_layers / pp (Megatron-Core's bound).
[[nodiscard]] Status CheckBf16Layers(const Plan& p, int64_t num_layers);
// Whether decoder layer `layer` (0-based) of `num_layers` is one of the first `first` or the last `last`
// (Megatron-Core fp8_utils.py is_first_last_bf16_layer).
inline bool IsBf16EndLayer(int64_t layer, int64_t num_layers, int64_t first, int64_t last) {
  return layer < first || layer >= num_layers - last;
}

}  // namespace onboard
