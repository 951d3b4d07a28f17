// The FLOP count a Megatron-Core training loop reports ("TFLOP/s/GPU" in its logs and in the tables
// quoted from them), so that a source that publishes only that rate can be read as tokens/s:
// tokens/s/GPU = TFLOP/s/GPU * 1e12 / (FLOPs per token by the source's count).
//
// Units: FLOPs per token (forward + backward, no recompute), at sequence length `seq` (tokens).
#pragma once

#include <cstdint>
#include <string>

#include "core/model_ir.h"
#include "core/status.h"

namespace onboard {

// Names of the counts this file knows, as a layout file's `tflops_count.formula` spells them.
inline constexpr const char* kMegatronCoreV09Count = "megatron-core-v0.9";

// FLOPs per token by Megatron-Core v0.9's num_floating_point_operations (NVIDIA/Megatron-LM@core_v0.9.0
// megatron/training/training.py, lines 98-144): 12 * seq-independent matmuls with GQA, the top-k routed
// experts, SwiGLU's 3/2, the full (not causal-halved) s/h attention term and the logits over the vocab
// padded to 128 * tp (make_vocab_size_divisible_by's default). That count describes uniform decoders of
// softmax GQA/MHA attention with dense or routed MLPs and no shared experts; other models are an error
// (its arguments cannot express them), naming the first layer that differs.
[[nodiscard]] Expected<double> MegatronCoreV09FlopsPerToken(const ModelIR& m, int64_t seq, int64_t tp);

// The count named `formula` (kMegatronCoreV09Count), or an error naming it.
[[nodiscard]] Expected<double> ReportedFlopsPerToken(const std::string& formula, const ModelIR& m,
                                                     int64_t seq, int64_t tp);

}  // namespace onboard
