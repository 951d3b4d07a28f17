// Plan: a parallel layout of one model on one topology, as data. Applying a plan is one short
// function per consumer (backends/apply_plan, exports in search/plan_export).
// Units: seconds, bytes, tokens.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard {

enum class Recompute { kNone, kSelective, kFull };
const char* RecomputeName(Recompute r);

enum class FinetuneMode { kFull, kLoRA };

struct ParallelDegrees {
  int64_t dp_replicate = 1;     // HSDP replicas (pure DP when dp_shard == 1)
  int64_t dp_shard = 1;         // FSDP shard degree
  int64_t tp = 1;               // tensor parallel
  int64_t pp = 1;               // pipeline stages
  int64_t ep = 1;               // expert parallel; carved out of dp_shard * tp
  int64_t expert_fsdp = 1;      // FSDP degree of expert weights inside one EP group ((dp_shard*tp)/ep)
  int64_t interleave = 1;       // virtual pipeline chunks per stage
  bool sequence_parallel = false;
  int64_t world() const { return dp_replicate * dp_shard * tp * pp; }
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
  std::string base_dtype = "bf16";              // frozen base precision in LoRA: bf16 | fp8 | mxfp4
  std::string compute_dtype = "bf16";
  std::vector<int64_t> stage_layer_starts;      // first layer of each pipeline (virtual) stage (pp*interleave entries)
  int64_t zero_stage = 3;       // 0: replicated optimizer (DDP); 1: optimizer sharded over dp (ZeRO-1);
                                // 3: FSDP, weights+grads+optimizer sharded over dp_shard (default)
};

// Checks the plan's internal arithmetic and its fit to a model with `num_experts`, `num_heads`
// and `world` devices. Messages name every factor: "ep=48 must divide dp_shard*tp=64".
Status ValidatePlan(const Plan& p, int64_t world, int64_t num_experts, int64_t num_heads,
                    int64_t num_layers);

}  // namespace onboard
