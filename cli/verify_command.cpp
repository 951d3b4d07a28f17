// `onboard verify CHECKPOINT_DIR --input-ids IDS.json [--layers A-B] --logits-out OUT.npy
//  [--reference REF.npy] [--dtype fp32|fp64] [--pixel-values PV.npy --image-grid-thw T,H,W[;T,H,W...]]
//  [--pixel-values-videos PV.npy --video-grid-thw T,H,W[;T,H,W...]]`: loads the checkpoint's weights
// (mmap, dequantised to the compute dtype), runs the HF-faithful forward on CPU, writes the logits as
// .npy (float32 [batch, longest, vocab], NaN past a shorter sequence's end) and, with --reference,
// prints max abs/rel difference and top-1 agreement. GLM-4.5V with images or videos: the processor's
// pixel_values / pixel_values_videos and image_grid_thw / video_grid_thw, one grid per image or video
// in the processor's order, separated by ';' (backends/hf_glm4v_inputs.h). Exit 0 pass (or no
// reference), 1 mismatch, 2 bad input.
#include <array>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "backends/backend_entry.h"
#include "cli/command_registry.h"
#include "core/float_dtype.h"
#include "cli/layer_range_flag.h"

namespace onboard::cli {
namespace {

struct VerifyCliOptions {
  HfVerifyOptions v;
  std::string layers;
  std::string dtype = "fp32";
  std::string image_grids, video_grids;  // "T,H,W[;T,H,W...]"
};

// `text` = "T,H,W[;T,H,W...]" -> grids; required with its pixels flag and refused without it.
Status ParseGrids(const std::string& flag, const std::string& pixels_flag, const std::string& pixels,
                  const std::string& text, std::vector<std::array<int64_t, 3>>* out) {
  if (pixels.empty() != text.empty())
    return BadInput(flag, "(flag)", pixels_flag + " and " + flag + " go together", text);
  const Status malformed =
      BadInput(flag, "T,H,W[;T,H,W...]", "grids of three comma-separated integers, ';' between grids", text);
  std::istringstream all(text);
  std::string one;
  while (std::getline(all, one, ';')) {
    std::istringstream in(one);
    std::array<int64_t, 3> g{};
    char c1 = 0, c2 = 0;
    if (!(in >> g[0] >> c1 >> g[1] >> c2 >> g[2]) || c1 != ',' || c2 != ',' || !(in >> std::ws).eof())
      return malformed;
    out->push_back(g);
  }
  return !text.empty() && (out->empty() || text.back() == ';') ? malformed : Status::Ok();
}

int RunVerify(VerifyCliOptions o) {
  Expected<FloatDtype> dtype = ParseFloatDtype("--dtype", "dtype", o.dtype);
  if (!dtype.ok()) return ReportError("verify", dtype.status());
  o.v.dtype = *dtype;
  const Status st = ParseLayerRange(o.layers, &o.v.layers);
  if (!st.ok()) return ReportError("verify", st);
  Status gst =
      ParseGrids("--image-grid-thw", "--pixel-values", o.v.pixel_values, o.image_grids, &o.v.image_grid_thw);
  if (gst.ok())
    gst = ParseGrids("--video-grid-thw", "--pixel-values-videos", o.v.pixel_values_videos, o.video_grids,
                     &o.v.video_grid_thw);
  if (!gst.ok()) return ReportError("verify", gst);
  Expected<const BackendEntryPoints*> be = LoadBackend();  // the HF forward runs in LibTorch
  if (!be.ok()) return ReportError("verify", be.status());
  Expected<HfVerifyResult> r = (*be)->run_hf_verify(o.v);
  if (!r.ok()) return ReportError("verify", r.status());
  for (const std::string& line : (*be)->hf_verify_summary(*r)) std::printf("%s\n", line.c_str());
  if (!o.v.logits_out.empty()) std::printf("wrote      %s\n", o.v.logits_out.c_str());
  return r->compared && !r->passed ? 1 : 0;
}

}  // namespace

static OnboardCommand kVerify{
    "verify", "Load a checkpoint's weights, run its forward on CPU, compare logits with a reference", 45,
    [](CLI::App& sub) -> RunFn {
      auto o = std::make_shared<VerifyCliOptions>();
      sub.add_option("checkpoint", o->v.checkpoint, "directory with config.json and safetensors weights")->required();
      sub.add_option("--input-ids", o->v.ids_path, "JSON list of token-id lists")->required();
      sub.add_option("--layers", o->layers, "layer slice A-B (0-based, inclusive): embedding + these + head");
      sub.add_option("--logits-out", o->v.logits_out, "write logits here (.npy float32 [batch, longest, vocab])");
      sub.add_option("--reference", o->v.reference, "reference logits (.npy) to compare with; exit 1 on mismatch");
      sub.add_option("--dtype", o->dtype, "compute dtype: fp32 | fp64")->capture_default_str();
      sub.add_option("--pixel-values", o->v.pixel_values,
                     "GLM-4.5V: the processor's pixel_values, all images (.npy [sum t*h*w, C*T*P*P])");
      sub.add_option(
          "--image-grid-thw", o->image_grids,
          "GLM-4.5V: image_grid_thw, one T,H,W per image in order, ';' between (e.g. \"1,28,42;1,14,14\")");
      sub.add_option("--pixel-values-videos", o->v.pixel_values_videos,
                     "GLM-4.5V: the processor's pixel_values_videos (.npy [sum t*h*w, C*T*P*P]); not with "
                     "--pixel-values");
      sub.add_option("--video-grid-thw", o->video_grids,
                     "GLM-4.5V: video_grid_thw, one T,H,W per video (T = temporal patches), ';' between");
      return [o] { return RunVerify(*o); };
    }};

}  // namespace onboard::cli
