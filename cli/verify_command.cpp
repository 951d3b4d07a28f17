// `onboard verify CHECKPOINT_DIR --input-ids IDS.json [--layers A-B] --logits-out OUT.npy
//  [--reference REF.npy] [--dtype fp32|fp64] [--pixel-values PV.npy --image-grid-thw T,H,W]`: loads the
//  checkpoint's weights (mmap, dequantised to the
// compute dtype), runs the HF-faithful forward on CPU, writes the logits as .npy (float32
// [batch, longest, vocab], NaN past a shorter sequence's end) and, with --reference, prints max abs/rel
// difference and top-1 agreement. GLM-4.5V with an image: the processor's pixel_values and
// image_grid_thw (backends/hf_verify.h). Exit 0 pass (or no reference), 1 mismatch, 2 bad input.
#include <cstdio>
#include <memory>
#include <sstream>

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
  std::string grid_thw;  // "T,H,W"
};

// --image-grid-thw "T,H,W" (required with --pixel-values, refused without it).
Status ParseGridThw(const VerifyCliOptions& o, std::array<int64_t, 3>* out) {
  if (o.v.pixel_values.empty() != o.grid_thw.empty())
    return BadInput("--image-grid-thw", "(flag)", "--pixel-values and --image-grid-thw go together",
                    o.grid_thw);
  if (o.grid_thw.empty()) return Status::Ok();
  std::istringstream in(o.grid_thw);
  char c1 = 0, c2 = 0;
  if (!(in >> (*out)[0] >> c1 >> (*out)[1] >> c2 >> (*out)[2]) || c1 != ',' || c2 != ',' || !in.eof())
    return BadInput("--image-grid-thw", "T,H,W", "three comma-separated integers", o.grid_thw);
  return Status::Ok();
}

int RunVerify(VerifyCliOptions o) {
  Expected<FloatDtype> dtype = ParseFloatDtype("--dtype", "dtype", o.dtype);
  if (!dtype.ok()) return ReportError("verify", dtype.status());
  o.v.dtype = *dtype;
  const Status st = ParseLayerRange(o.layers, &o.v.layers);
  if (!st.ok()) return ReportError("verify", st);
  const Status gst = ParseGridThw(o, &o.v.image_grid_thw);
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
                     "GLM-4.5V: one image's processor pixel_values (.npy [t*h*w, C*T*P*P])");
      sub.add_option("--image-grid-thw", o->grid_thw, "GLM-4.5V: that image's image_grid_thw as T,H,W");
      return [o] { return RunVerify(*o); };
    }};

}  // namespace onboard::cli
