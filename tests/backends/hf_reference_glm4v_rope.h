// Independent reference for GLM-4.5V's get_rope_index over a batch (tests only; shares no code with
// backends/), written after the loop of transformers' Glm4vModel.get_rope_index:
//   a video_check flag set by video_start_token_id and cleared by video_end_token_id marks
//   image_token_id as "video" inside, "image" outside; everything else is "text";
//   groupby over the types; st = the last group's max + 1 (0 for the first group);
//   image: image_grid_thw[image_index] -> (st + t, st + h, st + w) over (t, h/m, w/m); image_index += 1;
//   video: llm_grid_t = video_frame_num (1 after any text or image group), (st + t_idx, st + h, st + w);
//   video_group_index += 1, and at video_grid_thw[video_index][0] the next video; video_frame_num += 1;
//   text: st + 0 .. len - 1 on all three rows.
// image_index / video_index run over the whole batch. Two negative controls (RopeRefOptions).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace onboard::hftest {

struct RopeRefOptions {
  bool image_restarts = false;  // wrong: a sequence's later images start at its first image's st
  bool frame_t_index = false;   // wrong: a video's temporal patch k gets t = st + k (HF: st for each)
};

struct RopeRefTokens {
  int64_t image, video_start, video_end, merge;
};

using Positions = std::vector<std::array<int64_t, 3>>;

inline std::vector<Positions> RefRopeIndex(const std::vector<std::vector<int64_t>>& batch,
                                           const std::vector<std::array<int64_t, 3>>& image_grid_thw,
                                           const std::vector<std::array<int64_t, 3>>& video_grid_thw,
                                           RopeRefTokens tok, RopeRefOptions o = {}) {
  enum Type { kText, kImage, kVideo };
  size_t image_index = 0, video_index = 0;
  int64_t video_group_index = 0;
  std::vector<Positions> out;
  for (const std::vector<int64_t>& ids : batch) {
    std::vector<Type> types;
    bool video_check = false;
    for (int64_t token : ids) {
      if (token == tok.video_start) video_check = true;
      if (token == tok.video_end) video_check = false;
      types.push_back(token != tok.image ? kText : video_check ? kVideo : kImage);
    }
    Positions pos;
    int64_t last_max = -1, first_image_st = -1, video_frame_num = 1;
    for (size_t start = 0; start < ids.size();) {
      size_t end = start;
      while (end < ids.size() && types[end] == types[start]) ++end;
      int64_t st = pos.empty() ? 0 : last_max + 1;
      const size_t group_begin = pos.size();
      if (types[start] == kImage) {
        const std::array<int64_t, 3> g = image_grid_thw.at(image_index);
        if (o.image_restarts && first_image_st >= 0) st = first_image_st;
        if (first_image_st < 0) first_image_st = st;
        for (int64_t t = 0; t < g[0]; ++t)
          for (int64_t h = 0; h < g[1] / tok.merge; ++h)
            for (int64_t w = 0; w < g[2] / tok.merge; ++w) pos.push_back({st + t, st + h, st + w});
        ++image_index;
        video_frame_num = 1;
      } else if (types[start] == kVideo) {
        const std::array<int64_t, 3> g = video_grid_thw.at(video_index);
        const int64_t shift = o.frame_t_index ? video_group_index : 0;
        for (int64_t t_idx = 0; t_idx < video_frame_num; ++t_idx)
          for (int64_t h = 0; h < g[1] / tok.merge; ++h)
            for (int64_t w = 0; w < g[2] / tok.merge; ++w)
              pos.push_back({st + t_idx + shift, st + h, st + w});
        if (++video_group_index >= g[0]) {
          ++video_index;
          video_group_index = 0;
        }
        ++video_frame_num;
      } else {
        for (size_t k = 0; k < end - start; ++k)
          pos.push_back({st + int64_t(k), st + int64_t(k), st + int64_t(k)});
        video_frame_num = 1;
      }
      last_max = -1;
      for (size_t k = group_begin; k < pos.size(); ++k)
        last_max = std::max({last_max, pos[k][0], pos[k][1], pos[k][2]});
      start = end;
    }
    out.push_back(pos);
  }
  return out;
}

}  // namespace onboard::hftest
