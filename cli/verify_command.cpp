// `onboard verify CHECKPOINT_DIR --input-ids IDS.json [--layers A-B] --logits-out OUT.npy
//  [--reference REF.npy] [--dtype fp32|fp64]`: loads the checkpoint's weights (mmap, dequantised to the
// compute dtype), runs the HF-faithful forward on CPU, writes the logits as .npy (float32
// [batch, longest, vocab], NaN past a shorter sequence's end) and, with --reference, prints max abs/rel
// difference and top-1 agreement. Exit 0 pass (or no reference), 1 mismatch, 2 bad input.
#include <cstdio>
#include <memory>

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
};

int RunVerify(VerifyCliOptions o) {
  Expected<FloatDtype> dtype = ParseFloatDtype("--dtype", "dtype", o.dtype);
  if (!dtype.ok()) return ReportError("verify", dtype.status());
  o.v.dtype = *dtype;
  const Status st = ParseLayerRange(o.layers, &o.v.layers);
  if (!st.ok()) return ReportError("verify", st);
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
      return [o] { return RunVerify(*o); };
    }};

}  // namespace onboard::cli
