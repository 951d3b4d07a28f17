// HfVerify: load a HF checkpoint, run the forward on CPU for given token ids, write the logits as
// .npy and compare them with a reference (`onboard verify`, cli/verify_command.cpp).
//
// Logits file: float32 [batch, longest, vocab]; rows past a shorter sequence's end are NaN.
// Pass rule (one home, kVerifyRtol / kVerifyAtolFrac): every compared element satisfies
//   |ours - ref| <= kVerifyAtolFrac * max|ref| + kVerifyRtol * |ref|.
// Reported: max abs difference, max relative difference (max abs / max|ref|), top-1 agreement.
// Units: token ids; logits dimensionless; bytes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/hf_layer_range.h"
#include "core/float_dtype.h"
#include "core/status.h"

namespace onboard {

constexpr double kVerifyRtol = 1e-3;      // fp32 against a reference forward of the same checkpoint
constexpr double kVerifyAtolFrac = 1e-3;  // of the reference's largest |logit|

struct HfVerifyOptions {
  std::string checkpoint;       // directory: config.json + safetensors
  std::string ids_path;         // JSON list of token-id lists
  std::string logits_out;       // .npy to write ("" = do not write)
  std::string reference;        // .npy to compare with ("" = no comparison)
  HfLayerRange layers;          // layer slice (embedding + these layers + final norm + head)
  FloatDtype dtype = FloatDtype::kFP32;  // compute dtype (core/float_dtype.h): fp32 or fp64
  // Bytes each plan rank reads (HfRankSlice): TP ranks x FSDP ranks 0 and last (torch.chunk: the
  // largest and the smallest chunk); 1 x 1 = just the forward's load.
  int64_t tp = 1, fsdp = 1;
  bool expert_tp = true;  // routed experts split by TP (plan etp > 1), else EP folded over TP
  // GLM-4.5V (glm4v_moe): the processor's pixel_values (.npy [sum t*h*w, C*T*P*P], images in
  // image_grid_thw order) or pixel_values_videos with video_grid_thw (hf_glm4v_inputs.h); the batch's
  // image_token_id placeholders take the features in order and every sequence gets get_rope_index's
  // M-RoPE t/h/w positions.
  std::string pixel_values, pixel_values_videos;  // "" = none
  std::vector<std::array<int64_t, 3>> image_grid_thw, video_grid_thw;
};

struct HfRankBytes {
  int64_t tp_rank = 0, fsdp_rank = 0;
  uint64_t bytes = 0;  // distinct checkpoint bytes the rank read from its own mapping
};

struct HfVerifyResult {
  std::string model_type;
  std::string layout;
  int64_t batch = 0, longest = 0, vocab = 0;
  int64_t layers_run = 0;
  int64_t tensors_used = 0;
  uint64_t bytes_touched = 0;   // bytes of the tensors the forward read
  uint64_t checkpoint_bytes = 0;
  std::vector<std::string> dtypes;      // HfWeightDtypeName of each checkpoint dtype read
  std::vector<std::string> dequant;     // per checkpoint dtype read: how it became the compute dtype
  std::vector<HfRankBytes> rank_bytes;  // with tp * fsdp > 1
  std::string rank_bytes_error;         // why rank_bytes is empty (tp does not divide the heads, ...)
  int64_t image_features = 0;           // rows the vision tower produced for images (0 = none)
  int64_t video_features = 0;           // rows it produced for videos (0 = none)
  int64_t vision_tensors = 0;           // model.visual.* tensors read
  bool compared = false;
  double max_abs = 0, max_rel = 0;
  int64_t rows = 0, top1_agree = 0;
  bool passed = false;
};

// IDS.json -> sequences; each id in [0, vocab). Errors name the file and "[i][j]".
[[nodiscard]] Expected<std::vector<std::vector<int64_t>>> ReadInputIds(const std::string& path, int64_t vocab);

[[nodiscard]] Expected<HfVerifyResult> RunHfVerify(const HfVerifyOptions& o);

// "verify: qwen3 (llama layout), 2 x 7 tokens, ..., PASS" lines for the terminal.
std::vector<std::string> HfVerifySummary(const HfVerifyResult& r);

}  // namespace onboard
