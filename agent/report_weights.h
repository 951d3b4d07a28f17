// report.json's "weights" section: what `onboard run` loaded from a checkpoint directory's safetensors
// (stage "weights", agent/orchestrator_stages.cpp) and how its logits compared.
// Shape: {"loaded": false, "reason"} for a config-only model or a load that failed; else
//   {"loaded": true, model_type, layout, layers_run, tensors, dtypes, compute_dtype, dequant[],
//    bytes_read, checkpoint_bytes (bytes), tp, fsdp, ranks[{tp_rank, fsdp_rank, bytes_read}] (or
//    ranks_error), check: {ours, reference, rtol, atol_frac, max_abs, max_rel, top1_agree, rows, verdict}}.
// The tolerance is backends/hf_verify.h's (kVerifyRtol, kVerifyAtolFrac), its one home.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/orchestrator_state.h"

namespace onboard::agent {

nlohmann::json WeightsSection(const RunState& st);

}  // namespace onboard::agent
