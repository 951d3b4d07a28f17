// Plan arithmetic checks. Every message names each factor involved.
#include "core/plan.h"

#include <algorithm>
#include <string>

#include "core/block_kind.h"
#include "core/enum_names.h"

namespace onboard {

const char* RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "none";
}

const char* CpCommName(CpComm c) { return c == CpComm::kAllGather ? "allgather" : "ring"; }

const char* CudaGraphName(CudaGraph g) {
  return g == CudaGraph::kFull ? "full" : g == CudaGraph::kLayers ? "layers" : "none";
}

const char* EpDispatcherName(EpDispatcher d) {
  return d == EpDispatcher::kDeepEP ? "deepep" : d == EpDispatcher::kHybridEP ? "hybridep" : "alltoall";
}

const char* FsdpPipeliningName(FsdpPipelining f) {
  return f == FsdpPipelining::kPerStep ? "per_step" : "per_micro_batch";
}

bool FsdpGathersOncePerStep(const Plan& p) {
  return p.zero_stage >= 3 && p.deg.pp > 1 && p.fsdp_pipelining == FsdpPipelining::kPerStep;
}

Expected<FsdpPipelining> ParseFsdpPipelining(const std::string& origin, const std::string& field,
                                             const std::string& value) {
  return ParseByName(origin, field, value, {FsdpPipelining::kPerMicroBatch, FsdpPipelining::kPerStep},
                     FsdpPipeliningName);
}

const char* PipelineScheduleName(PipelineSchedule s) {
  return s == PipelineSchedule::kDualPipe ? "dualpipe" : "1f1b";
}

Expected<Recompute> ParseRecompute(const std::string& origin, const std::string& field,
                                   const std::string& value) {
  return ParseByName(origin, field, value, {Recompute::kNone, Recompute::kSelective, Recompute::kFull},
                     RecomputeName);
}

const char* FinetuneModeName(FinetuneMode m) { return m == FinetuneMode::kLoRA ? "lora" : "full"; }

Expected<FinetuneMode> ParseFinetuneMode(const std::string& origin, const std::string& field,
                                         const std::string& value) {
  return ParseByName(origin, field, value, {FinetuneMode::kFull, FinetuneMode::kLoRA}, FinetuneModeName);
}

namespace {
Status Bad(const std::string& msg) { return Status(ErrorCode::kBadInput, msg); }
std::string S(int64_t v) { return std::to_string(v); }

// Each degree >= 1, their product = the device count, tp divides the heads.
Status CheckDegrees(const ParallelDegrees& d, int64_t world, int64_t num_heads) {
  if (d.dp_replicate < 1 || d.dp_shard < 1 || d.cp < 1 || d.tp < 1 || d.pp < 1 || d.ep < 1 ||
      d.expert_fsdp < 1 || d.interleave < 1 || d.etp < 1)
    return Bad("every degree must be >= 1: dp_replicate=" + S(d.dp_replicate) + " dp_shard=" + S(d.dp_shard) +
               " cp=" + S(d.cp) + " tp=" + S(d.tp) + " pp=" + S(d.pp) + " ep=" + S(d.ep) +
               " expert_fsdp=" + S(d.expert_fsdp) + " interleave=" + S(d.interleave) + " etp=" + S(d.etp));
  if (d.world() != world)
    return Bad("dp_replicate*dp_shard*cp*tp*pp=" + S(d.dp_replicate) + "*" + S(d.dp_shard) + "*" + S(d.cp) +
               "*" + S(d.tp) + "*" + S(d.pp) + "=" + S(d.world()) + " must equal the device count " + S(world));
  if (num_heads > 0 && num_heads % d.tp != 0)
    return Bad("tp=" + S(d.tp) + " must divide attention heads=" + S(num_heads));
  return Status::Ok();
}

// ep (x etp) divides dp_shard*cp*tp and the experts, expert_fsdp fills the rest; no ep/etp without experts.
Status CheckExpertDegrees(const ParallelDegrees& d, int64_t num_experts) {
  const int64_t ep_space = d.dp_shard * d.cp * d.tp;
  if (num_experts > 0) {
    const std::string eps = d.etp == 1 ? "ep=" + S(d.ep) : "ep*etp=" + S(d.ep) + "*" + S(d.etp);
    if (ep_space % (d.ep * d.etp) != 0)
      return Bad(eps + " must divide dp_shard*cp*tp=" + S(d.dp_shard) + "*" + S(d.cp) + "*" + S(d.tp) + "=" +
                 S(ep_space));
    if (num_experts % d.ep != 0)
      return Bad("ep=" + S(d.ep) + " must divide experts=" + S(num_experts));
    if (d.expert_fsdp * d.ep * d.etp != ep_space)
      return Bad("expert_fsdp=" + S(d.expert_fsdp) + " must equal dp_shard*cp*tp/" +
                 (d.etp == 1 ? "ep" : "(ep*etp)") + "=" + S(ep_space) + "/" + S(d.ep * d.etp) + "=" +
                 S(ep_space / (d.ep * d.etp)));
  } else if (d.ep != 1 || d.etp != 1) {
    return Bad(std::string(d.ep != 1 ? "ep=" + S(d.ep) : "etp=" + S(d.etp)) +
               " needs a model with routed experts (experts=0)");
  }
  return Status::Ok();
}

// Pipeline schedule (DualPipe, interleave) against pp, the layers and the micro-batches; the global batch.
Status CheckSchedule(const Plan& p, int64_t num_layers) {
  const ParallelDegrees& d = p.deg;
  if (p.pipeline_schedule == PipelineSchedule::kDualPipe) {  // DualPipe: two stages per rank, both ends
    if (d.pp < 2 || d.pp % 2 != 0)
      return Bad("pipeline_schedule=dualpipe needs an even pp >= 2 (pp=" + S(d.pp) + ")");
    if (d.interleave != 1)
      return Bad("pipeline_schedule=dualpipe needs interleave=1 (interleave=" + S(d.interleave) + ")");
    if (p.num_micro_batches < 2 * d.pp)
      return Bad("pipeline_schedule=dualpipe needs num_micro_batches=" + S(p.num_micro_batches) +
                 " >= 2*pp=" + S(2 * d.pp));
  }
  // An even split needs a decoder layer a chunk; explicit boundaries may leave a chunk without one (an
  // embedding- or loss-only chunk, as Megatron's layouts and account_for_*_in_pipeline_split build).
  if (num_layers > 0 && d.pp * d.interleave > num_layers && p.stage_layer_starts.empty())
    return Bad("pp*interleave=" + S(d.pp) + "*" + S(d.interleave) + " exceeds layers=" + S(num_layers));
  if (d.interleave > 1 && d.pp == 1)
    return Bad("interleave=" + S(d.interleave) + " needs pp > 1 (pp=1)");
  if (p.micro_batch < 1 || p.num_micro_batches < 1)
    return Bad("micro_batch=" + S(p.micro_batch) + " and num_micro_batches=" + S(p.num_micro_batches) +
               " must be >= 1");
  if (d.interleave > 1 && p.num_micro_batches % d.pp != 0)
    return Bad("interleaved schedule needs num_micro_batches=" + S(p.num_micro_batches) +
               " divisible by pp=" + S(d.pp));
  const int64_t dp = d.dp_replicate * d.dp_shard;
  if (p.global_batch > 0 && p.global_batch != p.micro_batch * p.num_micro_batches * dp)
    return Bad("global_batch=" + S(p.global_batch) + " must equal micro_batch*num_micro_batches*dp=" +
               S(p.micro_batch) + "*" + S(p.num_micro_batches) + "*" + S(dp));
  return Status::Ok();
}

// seq (and its split over cp), the dtypes by use, MTP layers, sequence parallelism, the LoRA rank.
Status CheckSequenceAndDtypes(const Plan& p) {
  const ParallelDegrees& d = p.deg;
  if (p.seq < 1) return Bad("seq=" + S(p.seq) + " must be >= 1");
  if (d.cp > 1 && p.seq % (2 * d.cp) != 0)
    return Bad("cp=" + S(d.cp) + " needs seq=" + S(p.seq) + " divisible by 2*cp=" + S(2 * d.cp) +
               " (load-balanced causal split)");
  ONBOARD_RETURN_IF_ERROR(
      CheckPrecisionUse("plan", "optimizer_dtype", p.optimizer_dtype, PrecisionUse::kOptimizerState));
  ONBOARD_RETURN_IF_ERROR(CheckPrecisionUse("plan", "grad_dtype", p.grad_dtype, PrecisionUse::kGrads));
  ONBOARD_RETURN_IF_ERROR(
      CheckPrecisionUse("plan", "param_dtype", p.param_dtype, PrecisionUse::kOptimizerState));
  if (p.param_dtype != Precision::kFP32 && p.zero_stage != 3)
    return Bad(std::string("param_dtype=") + PrecisionName(p.param_dtype) +
               " needs zero_stage=3 (FSDP2's sharded " +
               "parameters; Megatron keeps an fp32 master), got zero_stage=" + S(p.zero_stage));
  if (p.fsdp_pipelining != FsdpPipelining::kPerMicroBatch && p.zero_stage != 3)
    return Bad(std::string("fsdp_pipelining=") + FsdpPipeliningName(p.fsdp_pipelining) +
               " needs zero_stage=3 (it says how FSDP meets pipelining), got zero_stage=" + S(p.zero_stage));
  if (p.mtp_layers < 0 || p.mtp_layers > 16) return Bad("mtp_layers=" + S(p.mtp_layers) + " must be in [0, 16]");
  if (d.sequence_parallel && d.tp == 1) return Bad("sequence_parallel needs tp > 1 (tp=1)");
  if (p.mode == FinetuneMode::kLoRA && p.lora_rank < 1)
    return Bad("lora_rank=" + S(p.lora_rank) + " must be >= 1 in LoRA mode");
  ONBOARD_RETURN_IF_ERROR(CheckPrecisionUse("plan", "base_dtype", p.base_dtype, PrecisionUse::kFrozenBase));
  ONBOARD_RETURN_IF_ERROR(
      CheckPrecisionUse("plan", "compute_dtype", p.compute_dtype, PrecisionUse::kCompute));
  return Status::Ok();
}

// Recompute keys name block kinds; explicit stage boundaries: one per chunk, from 0, not decreasing.
Status CheckRecomputeAndStages(const Plan& p, int64_t num_layers) {
  const ParallelDegrees& d = p.deg;
  for (const auto& [kind, policy] : p.recompute)  // a key naming no block kind would feed nothing
    if (kind != "*" && !ParseBlockKind(kind))
      return Bad("recompute key '" + kind + "' is not a block kind (" + BlockKindList() + " or *)");
  if (!p.stage_layer_starts.empty()) {
    if (static_cast<int64_t>(p.stage_layer_starts.size()) != d.pp * d.interleave)
      return Bad("stage_layer_starts has " + S(p.stage_layer_starts.size()) + " entries, needs pp*interleave=" +
                 S(d.pp * d.interleave));
    int64_t prev = -1;
    for (int64_t s : p.stage_layer_starts) {
      if (s < std::max<int64_t>(prev, 0) || (num_layers > 0 && s > num_layers))
        return Bad("stage_layer_starts must not decrease within [0, layers=" + S(num_layers) +
                   "] (equal entries = a chunk without decoder layers), got " + S(s) + " after " + S(prev));
      prev = s;
    }
    if (p.stage_layer_starts[0] != 0) return Bad("stage_layer_starts[0]=" + S(p.stage_layer_starts[0]) + " must be 0");
  }
  return Status::Ok();
}

}  // namespace

// bf16 first / last layers (Plan::bf16_layers_first): a quantised compute_dtype, counts within the model,
// and for fp8 / mxfp8 Megatron-Core's own bound, each count <= num_layers / pp (transformer_config.py
// __post_init__: "must be between 0 and number of layers per pipeline stage"; fp4 has no such check).
Status CheckBf16Layers(const Plan& p, int64_t num_layers) {
  const int64_t a = p.bf16_layers_first, b = p.bf16_layers_last;
  if (a == 0 && b == 0) return Status::Ok();
  const std::string what = "bf16_layers_first=" + S(a) + " bf16_layers_last=" + S(b);
  if (a < 0 || b < 0) return Bad(what + ": counts must be >= 0");
  if (!QuantisedGemmInputs(p.compute_dtype))
    return Bad(what + " needs a quantised compute_dtype (fp8 | mxfp8 | nvfp4), got " +
               PrecisionName(p.compute_dtype));
  if (num_layers > 0 && a + b > num_layers)
    return Bad(what + ": together more than the model's " + S(num_layers) + " layers");
  const int64_t per_stage = num_layers > 0 ? num_layers / p.deg.pp : 0;
  if (PrecisionElement(p.compute_dtype) == DType::kFP8 && num_layers > 0 && std::max(a, b) > per_stage)
    return Bad(what + ": each must be <= layers / pp = " + S(num_layers) + " / " + S(p.deg.pp) +
               " (Megatron-Core's check for fp8 recipes)");
  return Status::Ok();
}

Status ValidatePlan(const Plan& p, int64_t world, int64_t num_experts, int64_t num_heads,
                    int64_t num_layers) {
  // Step 1: the degrees against the device count, the heads and the experts.
  ONBOARD_RETURN_IF_ERROR(CheckDegrees(p.deg, world, num_heads));
  ONBOARD_RETURN_IF_ERROR(CheckExpertDegrees(p.deg, num_experts));
  // Step 2: the pipeline schedule and the batch.
  ONBOARD_RETURN_IF_ERROR(CheckSchedule(p, num_layers));
  // Step 3: sequence, dtypes, MTP, sequence parallelism, LoRA; the bf16 first / last layers.
  ONBOARD_RETURN_IF_ERROR(CheckSequenceAndDtypes(p));
  ONBOARD_RETURN_IF_ERROR(CheckBf16Layers(p, num_layers));
  // Step 4: recompute keys and explicit stage boundaries.
  return CheckRecomputeAndStages(p, num_layers);
}

}  // namespace onboard
