// Glm4vRopeIndex / Glm4vInputEmbeds: where one image enters GLM-4.5V's language model (see
// hf_glm4v_vision.h), after Glm4vModel.get_rope_index and Glm4vModel.forward:
//   text tokens: three equal rows counting on from the previous group's max + 1 (0 at the start);
//   the image's n = t * (h/m) * (w/m) placeholders, k = (frame, row, col) in row-major order over the
//   merged grid: (st + frame, st + row, st + col) with st the group's start;
//   text after the image resumes at st + max(t - 1, h/m - 1, w/m - 1) + 1.
// Shapes: positions int64 [3, S]; embeddings [S, hidden]. Units: token positions.
#include <algorithm>

#include "backends/hf_glm4v_vision.h"

namespace onboard {

Expected<torch::Tensor> Glm4vRopeIndex(const Glm4vVisionConfig& v, const std::vector<int64_t>& ids,
                                       const std::array<int64_t, 3>& thw, const std::string& where) {
  const int64_t s = int64_t(ids.size()), lt = thw[0], lh = thw[1] / v.merge, lw = thw[2] / v.merge;
  const int64_t n = lt * lh * lw;
  // Step 1: the placeholders form one run of n tokens; no video markers.
  int64_t first = -1, count = 0;
  for (int64_t i = 0; i < s; ++i) {
    if (ids[size_t(i)] == v.video_start_token_id)
      return BadInput(where, "[" + std::to_string(i) + "]",
                      "video inputs are not supported (video_start_token_id)",
                      std::to_string(ids[size_t(i)]));
    if (ids[size_t(i)] != v.image_token_id) continue;
    if (first >= 0 && ids[size_t(i - 1)] != v.image_token_id)
      return BadInput(where, "[" + std::to_string(i) + "]",
                      "one image per sequence: a second run of image_token_id");
    if (first < 0) first = i;
    ++count;
  }
  torch::Tensor pos = torch::arange(s, torch::kLong).unsqueeze(0).repeat({3, 1});
  if (count == 0) return pos;
  if (count != n)
    return BadInput(where, "image_token_id",
                    "expected " + std::to_string(n) + " placeholders (t*h*w / merge^2 of the image grid)",
                    std::to_string(count));
  // Step 2: the image group's rows, then the text after it.
  auto p = pos.accessor<int64_t, 2>();
  for (int64_t k = 0; k < n; ++k) {
    p[0][first + k] = first + k / (lh * lw);
    p[1][first + k] = first + (k / lw) % lh;
    p[2][first + k] = first + k % lw;
  }
  const int64_t next = first + std::max({lt - 1, lh - 1, lw - 1}) + 1;
  for (int64_t i = first + n; i < s; ++i)
    for (int64_t r = 0; r < 3; ++r) p[r][i] = next + (i - first - n);
  return pos;
}

torch::Tensor Glm4vInputEmbeds(const Glm4vVisionConfig& v, const HfModelWeights& w,
                               const std::vector<int64_t>& ids, const torch::Tensor& features) {
  const torch::Tensor idx = torch::tensor(ids, torch::kLong);
  torch::Tensor h = w.embed.index_select(0, idx).clone();
  const torch::Tensor rows = (idx == v.image_token_id).nonzero().squeeze(1);
  if (rows.numel() > 0) h.index_copy_(0, rows, features.to(h.scalar_type()));
  return h;
}

}  // namespace onboard
