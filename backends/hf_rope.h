// Rotary position embeddings as transformers computes them (modeling_rope_utils.py + the models'
// apply_rotary_pos_emb): inverse frequencies per RoPE type, the attention factor that scales cos/sin,
// and rotation of the first/second halves (rotate_half) or of interleaved pairs (DeepSeek).
// Shapes: x [S, H, D] with D = RopeSpec::dim; cos/sin [S, D]. Units: positions in tokens, radians.
#pragma once

#include <vector>

#include <torch/torch.h>

#include "backends/hf_forward_config.h"

namespace onboard {

struct RopeTables {
  torch::Tensor cos;  // [S, D]: cat(freqs, freqs) cosines x attention factor
  torch::Tensor sin;  // [S, D]
};

// inv_freq [D/2] (double) and the factor applied to cos/sin (1 except YaRN's).
torch::Tensor RopeInvFreq(const RopeSpec& r, double* attention_factor);

// Angles in `dtype` as HF does them: inv_freq cast to dtype, times position, cos/sin in dtype.
RopeTables MakeRopeTables(const RopeSpec& r, int64_t seq, torch::ScalarType dtype);

// M-RoPE (glm4v_moe, apply_multimodal_rotary_pos_emb): positions int64 [3, S] (t, h, w rows) and
// mrope_section, the frequencies each row drives (summing to D/2).
struct HfMrope {
  torch::Tensor positions;
  std::vector<int64_t> section;
};

// Tables whose frequency i takes its angle from row 0 for the first section[0] frequencies, row 1 for
// the next section[1], row 2 for the rest: HF splits cat(freqs, freqs) into section * 2 chunks and
// takes chunk j from row j % 3, the same choice on both halves.
RopeTables MakeMropeTables(const RopeSpec& r, const HfMrope& m, torch::ScalarType dtype);

// x * cos + rotate_half(x) * sin over the last dim; `interleave` first regroups pairs (2i, 2i+1)
// into halves (apply_rotary_pos_emb_interleave).
torch::Tensor ApplyRope(const torch::Tensor& x, const RopeTables& t, bool interleave);

}  // namespace onboard
