// INTERNAL to backends/ (includes LibTorch). Expert parallelism of a Hugging Face MoE channel (the
// real-weights probe's `--ep E`, probe_weights.h): each of the EP group's ranks holds only the routed
// experts HfExpertRange(E, ep, ep_rank) gives it (MapHfSlice reads no other expert's bytes), and the
// tokens routed to an expert go to its owner and back over c10d (EpAllToAll, ep_all_to_all.h).
// Values: the same ops as HfMoe (hf_moe.cpp) on the same rows: an expert runs once per source rank
// over that source's tokens (ascending), exactly HfMoe's input on a single process, and each token's
// weighted expert outputs are added in ascending expert order into zeros, as HfMoe does (the shared
// expert then runs on the source, in the caller). So the output has HfMoeRouted's bits.
// Shapes: x [T, hidden] (one sequence of this rank); routing [T, k]; rows exchanged [pairs, hidden].
#pragma once

#include <torch/torch.h>

#include "backends/c10d_compat.h"
#include "backends/hf_model.h"

namespace onboard::backends {

// x: this rank's tokens; w: the layer's weights with only this rank's routed experts loaded (the
// others empty); `ep`: the EP group (rank ep.rank() owns HfExpertRange(m.num_experts, ep.size(),
// ep.rank())). Every rank of the group must call it the same number of times. Returns HfMoeRouted's
// value for x (the routed experts' weighted sum at the latent width, this TP rank's partial under TP);
// the caller adds HfLatentOut and HfSharedExperts as HfMoe does.
torch::Tensor HfMoeEpRouted(const HfForwardConfig& c, const MoESpec& m, const HfMoeWeights& w,
                            const torch::Tensor& x, Group& ep);

}  // namespace onboard::backends
