// Glm4vRopeIndex / Glm4vInputEmbeds: where images and videos enter GLM-4.5V's language model (see
// hf_glm4v_vision.h), after Glm4vModel.get_rope_index and Glm4vModel.forward:
//   a token is a placeholder when it is image_token_id; inside video_start .. video_end (more starts
//   than ends so far, the processor's mm_token_type_ids rule) it is a video frame's, else an image's;
//   the ids are cut into runs of one kind (itertools.groupby): text, image or video;
//   text: three equal rows counting on from the previous run's max + 1 (0 at the start);
//   image: the next image grid, n = t * (h/m) * (w/m) tokens, k = (frame, row, col) row-major over the
//   merged grid: (st + frame, st + row, st + col);
//   video: one temporal patch of the current video (the processor writes begin_of_image, h/m * w/m
//   placeholders, end_of_image and the timestamp as text for each): (st, st + row, st + col); after
//   the video's t patches the next run takes the next video;
//   the text after a group resumes at st + max(t - 1, h/m - 1, w/m - 1) + 1.
// Grids are consumed in order over the whole batch (image_index / video_index are not reset).
// Shapes: positions int64 [3, S]; embeddings [S, hidden]. Units: token positions.
#include <algorithm>

#include "backends/hf_glm4v_vision.h"

namespace onboard {

std::string Glm4vGridsText(const std::vector<std::array<int64_t, 3>>& grids) {
  std::string out;
  for (const std::array<int64_t, 3>& g : grids)
    out += (out.empty() ? "" : ";") + std::to_string(g[0]) + "," + std::to_string(g[1]) + "," +
           std::to_string(g[2]);
  return out;
}

namespace {

// The grid run [i, end) takes: the next image grid, or the current video's next temporal patch
// (t = 1 of its h, w). Errors name the flag, which grid and the counts.
Expected<std::array<int64_t, 3>> NextGlm4vGrid(const Glm4vVisionConfig& v, const Glm4vGrids& g, bool video,
                                               Glm4vGridCursor* at, int64_t i, int64_t len,
                                               const std::string& where) {
  const std::string flag = video ? "--video-grid-thw" : "--image-grid-thw";
  const std::vector<std::array<int64_t, 3>>& list = video ? g.videos : g.images;
  const size_t k = video ? at->video : at->image;
  const std::string run = where + "[" + std::to_string(i) + "]";
  if (k >= list.size())
    return BadInput(flag, "(count)",
                    std::to_string(list.size()) + " grid(s) given, but " + run + " starts one more " +
                        (video ? "video temporal patch" : "image") + " run",
                    std::to_string(len) + " placeholders");
  std::array<int64_t, 3> grid = list[k];
  if (video) grid[0] = 1;
  const int64_t n = grid[0] * (grid[1] / v.merge) * (grid[2] / v.merge);
  if (n != len)
    return BadInput(
        flag, (video ? "video " : "image ") + std::to_string(k) + " (" + Glm4vGridsText({list[k]}) + ")",
        "expected " + std::to_string(n) + " placeholders (t*h*w / merge^2" +
            (video ? " per temporal patch" : "") + ") in the run at " + run,
        std::to_string(len));
  if (!video) {
    ++at->image;
  } else if (++at->frame >= list[k][0]) {
    ++at->video;
    at->frame = 0;
  }
  return grid;
}

}  // namespace

Expected<torch::Tensor> Glm4vRopeIndex(const Glm4vVisionConfig& v, const std::vector<int64_t>& ids,
                                       const Glm4vGrids& grids, Glm4vGridCursor* at,
                                       const std::string& where) {
  const int64_t s = int64_t(ids.size());
  // Step 1: each token's kind: 0 text, 1 image, 2 video (inside video_start .. video_end).
  std::vector<int> kind(size_t(s), 0);
  int64_t depth = 0;
  for (int64_t i = 0; i < s; ++i) {
    depth += ids[size_t(i)] == v.video_start_token_id ? 1 : 0;
    depth -= ids[size_t(i)] == v.video_end_token_id ? 1 : 0;
    if (ids[size_t(i)] == v.image_token_id) kind[size_t(i)] = depth > 0 ? 2 : 1;
  }
  // Step 2: runs of one kind; text counts on, a grid run gets its rows at its start st.
  torch::Tensor pos = torch::zeros({3, s}, torch::kLong);
  auto p = pos.accessor<int64_t, 2>();
  int64_t next = 0;
  for (int64_t i = 0; i < s;) {
    int64_t end = i;
    while (end < s && kind[size_t(end)] == kind[size_t(i)]) ++end;
    if (kind[size_t(i)] == 0) {
      for (; i < end; ++i) p[0][i] = p[1][i] = p[2][i] = next++;
      continue;
    }
    Expected<std::array<int64_t, 3>> grid =
        NextGlm4vGrid(v, grids, kind[size_t(i)] == 2, at, i, end - i, where);
    if (!grid.ok()) return grid.status();
    const std::array<int64_t, 3> g = *grid;
    const int64_t lt = g[0], lh = g[1] / v.merge, lw = g[2] / v.merge, st = next;
    for (int64_t k = 0; k < end - i; ++k) {
      p[0][i + k] = st + k / (lh * lw);
      p[1][i + k] = st + (k / lw) % lh;
      p[2][i + k] = st + k % lw;
    }
    next = st + std::max({lt - 1, lh - 1, lw - 1}) + 1;
    i = end;
  }
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
