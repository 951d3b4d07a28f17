// Exports of a Plan: torchtitan job-config TOML and Megatron-LM arguments.
#include "search/plan_export.h"

#include <sstream>

namespace onboard {
namespace {

// One policy for frameworks that take a single recompute setting: the strongest one used.
Recompute Strongest(const Plan& p) {
  Recompute r = Recompute::kNone;
  for (const auto& [k, v] : p.recompute)
    if (static_cast<int>(v) > static_cast<int>(r)) r = v;
  return r;
}

}  // namespace

std::string ToTorchtitanToml(const Plan& p) {
  std::ostringstream os;
  os << "[parallelism]\n";
  os << "data_parallel_replicate_degree = " << p.deg.dp_replicate << "\n";
  os << "data_parallel_shard_degree = " << p.deg.dp_shard << "\n";
  os << "tensor_parallel_degree = " << p.deg.tp << "\n";
  os << "enable_async_tensor_parallel = false\n";
  os << "pipeline_parallel_degree = " << p.deg.pp << "\n";
  if (p.deg.pp > 1) {
    os << "pipeline_parallel_schedule = \"" << (p.deg.interleave > 1 ? "Interleaved1F1B" : "1F1B") << "\"\n";
    os << "pipeline_parallel_microbatch_size = " << p.micro_batch << "\n";
  }
  os << "expert_parallel_degree = " << p.deg.ep << "\n";
  os << "expert_tensor_parallel_degree = 1\n";
  os << "\n[activation_checkpoint]\n";
  const Recompute r = Strongest(p);
  os << "mode = \"" << (r == Recompute::kFull ? "full" : r == Recompute::kSelective ? "selective" : "none") << "\"\n";
  if (r == Recompute::kSelective) os << "selective_ac_option = \"op\"\n";
  os << "# per block kind:";
  for (const auto& [k, v] : p.recompute) os << " " << k << "=" << RecomputeName(v);
  os << "\n\n[training]\n";
  os << "seq_len = " << p.seq << "\n";
  os << "local_batch_size = " << p.micro_batch * p.num_micro_batches << "\n";
  os << "global_batch_size = " << p.global_batch << "\n";
  os << "mixed_precision_param = \"" << (p.compute_dtype == "fp16" ? "float16" : "bfloat16") << "\"\n";
  if (p.mode == FinetuneMode::kLoRA)
    os << "# LoRA: rank " << p.lora_rank << ", frozen base in " << p.base_dtype
       << " (adapters on attention and dense/shared MLP projections)\n";
  return os.str();
}

std::string ToMegatronArgs(const Plan& p) {
  std::ostringstream os;
  os << "--tensor-model-parallel-size " << p.deg.tp;
  os << " --pipeline-model-parallel-size " << p.deg.pp;
  if (p.deg.interleave > 1) os << " --num-virtual-stages-per-pipeline-rank " << p.deg.interleave;
  if (p.deg.ep > 1) os << " --expert-model-parallel-size " << p.deg.ep << " --expert-tensor-parallel-size 1";
  if (p.deg.sequence_parallel) os << " --sequence-parallel";
  os << " --micro-batch-size " << p.micro_batch << " --global-batch-size " << p.global_batch;
  os << " --seq-length " << p.seq;
  if (p.zero_stage >= 1) os << " --use-distributed-optimizer";
  if (p.zero_stage >= 3) os << " --use-torch-fsdp2";
  const Recompute r = Strongest(p);
  if (r == Recompute::kFull) os << " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  else if (r == Recompute::kSelective) os << " --recompute-granularity selective";
  os << (p.compute_dtype == "fp16" ? " --fp16" : " --bf16");
  if (p.compute_dtype == "fp8") os << " --fp8-format hybrid";
  return os.str();
}

}  // namespace onboard
