// RunHfVerify: checkpoint + ids -> logits .npy (+ comparison with a reference) (see hf_verify.h).
#include "backends/hf_verify.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "backends/hf_glm4v_vision.h"
#include "backends/hf_model.h"
#include "backends/hf_npy.h"
#include "parsers/json_fields.h"
#include "parsers/mapped_file.h"

namespace onboard {
namespace {

constexpr uint64_t kMaxIdsBytes = 64u << 20;

// Step 4: element-wise comparison over the rows each sequence has.
Status Compare(const HfVerifyOptions& o, const std::vector<std::vector<int64_t>>& seqs, const std::vector<float>& ours,
               HfVerifyResult* r) {
  ONBOARD_ASSIGN_OR_RETURN(NpyArray ref, ReadNpy(o.reference));
  const std::vector<int64_t> want = {r->batch, r->longest, r->vocab};
  if (ref.shape != want) return BadInput(o.reference, "shape", "expected " + ShapeText(want), ShapeText(ref.shape));
  double ref_max = 0;
  for (size_t b = 0; b < seqs.size(); ++b)
    for (int64_t s = 0; s < int64_t(seqs[b].size()); ++s)
      for (int64_t v = 0; v < r->vocab; ++v) {
        const float x = ref.data[size_t((int64_t(b) * r->longest + s) * r->vocab + v)];
        if (std::isfinite(x)) ref_max = std::max(ref_max, double(std::fabs(x)));
      }
  bool ok = true;
  for (size_t b = 0; b < seqs.size(); ++b) {
    for (int64_t s = 0; s < int64_t(seqs[b].size()); ++s) {
      const size_t row = size_t((int64_t(b) * r->longest + s) * r->vocab);
      int64_t arg_ours = 0, arg_ref = 0;
      for (int64_t v = 0; v < r->vocab; ++v) {
        const double a = ours[row + v], x = ref.data[row + v];
        const double d = std::fabs(a - x);
        if (!(d <= kVerifyAtolFrac * ref_max + kVerifyRtol * std::fabs(x))) ok = false;  // NaN fails too
        r->max_abs = std::isnan(d) ? std::numeric_limits<double>::infinity() : std::max(r->max_abs, d);
        if (ours[row + v] > ours[row + arg_ours]) arg_ours = v;
        if (ref.data[row + v] > ref.data[row + arg_ref]) arg_ref = v;
      }
      ++r->rows;
      r->top1_agree += arg_ours == arg_ref ? 1 : 0;
    }
  }
  r->max_rel = ref_max > 0 ? r->max_abs / ref_max : r->max_abs;
  r->compared = true;
  r->passed = ok;
  return Status::Ok();
}

// How each checkpoint dtype reaches the compute dtype (the decoders of parsers/safetensors_dequant.cpp).
std::string DequantText(const HfWeightDtype& dtype, FloatDtype compute_dtype) {
  const std::string compute = FloatDtypeName(compute_dtype);
  if (dtype.mxfp4) return "MXFP4 (e2m1 pairs x one e8m0 scale per 32 values) -> " + compute;
  const SafetensorsDtype d = dtype.storage;
  if (d == SafetensorsDtype::kF8_E4M3) return "F8_E4M3 x its 128x128 block's weight_scale_inv -> " + compute;
  const bool widening = d == SafetensorsDtype::kBF16 || d == SafetensorsDtype::kF16;
  return std::string(SafetensorsDtypeName(d)) + " -> " + compute + (widening ? " (exact widening)" : "");
}

// Step 5: each plan rank maps the checkpoint on its own and loads only its slice.
void RankBytes(const HfVerifyOptions& o, const HfForwardConfig& c, torch::ScalarType dtype,
               HfVerifyResult* r) {
  if (o.tp * o.fsdp <= 1) return;
  for (const LayerSpec& l : c.ir.layers) {
    const Status st = CheckTpDivides(c, l, o.tp, o.expert_tp);
    if (!st.ok()) {
      r->rank_bytes_error = st.message();
      return;
    }
  }
  const std::vector<int64_t> fsdp_ranks =
      o.fsdp > 1 ? std::vector<int64_t>{0, o.fsdp - 1} : std::vector<int64_t>{0};
  for (int64_t t = 0; t < o.tp; ++t) {
    for (int64_t f : fsdp_ranks) {
      Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(o.checkpoint);
      HfRankSlice s;
      s.layers = o.layers;
      s.tp = o.tp;
      s.tp_rank = t;
      s.expert_tp = o.expert_tp;
      s.fsdp = o.fsdp;
      s.fsdp_rank = f;
      Expected<HfModelWeights> w =
          ck.ok() ? MapHfSlice(c, *ck, s, dtype) : Expected<HfModelWeights>(ck.status());
      if (!w.ok()) {
        r->rank_bytes.clear();
        r->rank_bytes_error = w.status().message();
        return;
      }
      r->rank_bytes.push_back({t, f, ck->touched_bytes()});
    }
  }
}

// GLM-4.5V's image (when given): the vision config, the tower's features for it, tensors read.
struct ImageInput {
  bool present = false;
  Glm4vVisionConfig v;
  torch::Tensor features;
  int64_t tensors = 0;
};

// Step 1b: pixel_values -> vision tower -> features [t*h*w / merge^2, hidden].
Expected<ImageInput> LoadImage(const HfVerifyOptions& o, const HfForwardConfig& c,
                               const SafetensorsCheckpoint& ckpt, torch::ScalarType dtype) {
  ImageInput in;
  if (o.pixel_values.empty()) return in;
  if (c.layout == HfLayout::kKimiK3)  // its text model runs; vision_tower.* / mm_projector.* have no mapper
    return BadInput(c.config_path, "vision_config",
                    "kimi_k3's MoonViT vision weights are not mapped: text-only", o.pixel_values);
  ONBOARD_ASSIGN_OR_RETURN(in.v, ReadGlm4vVisionConfig(c));
  const std::array<int64_t, 3>& g = o.image_grid_thw;
  const int64_t m = in.v.merge;
  if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] % m != 0 || g[2] % m != 0)
    return BadInput("--image-grid-thw", "t,h,w",
                    "positive, h and w multiples of spatial_merge_size " + std::to_string(m),
                    std::to_string(g[0]) + "," + std::to_string(g[1]) + "," + std::to_string(g[2]));
  ONBOARD_ASSIGN_OR_RETURN(NpyArray px, ReadNpy(o.pixel_values));
  const std::vector<int64_t> want = {g[0] * g[1] * g[2],
                                     in.v.in_channels * in.v.temporal_patch * in.v.patch * in.v.patch};
  if (px.shape != want)
    return BadInput(o.pixel_values, "shape",
                    "expected " + ShapeText(want) + " (t*h*w patches x C*T*P*P values)", ShapeText(px.shape));
  ONBOARD_ASSIGN_OR_RETURN(Glm4vVisionWeights vw, MapGlm4vVision(in.v, ckpt, dtype));
  const torch::Tensor pv = torch::from_blob(px.data.data(), {want[0], want[1]}, torch::kFloat).to(dtype);
  in.features = Glm4vVisionForward(in.v, vw, pv, g);
  in.tensors = int64_t(vw.used.size());
  in.present = true;
  return in;
}

// Step 2: one sequence's logits [S, vocab]; with an image, its features and M-RoPE positions.
Expected<torch::Tensor> SequenceLogits(const HfVerifyOptions& o, const HfForwardConfig& c,
                                       const HfModelWeights& w, const ImageInput& img,
                                       const std::vector<int64_t>& ids, size_t b) {
  if (!img.present) return HfForward(c, w, ids);
  const std::string where = o.ids_path + "[" + std::to_string(b) + "]";
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor pos, Glm4vRopeIndex(img.v, ids, o.image_grid_thw, where));
  const HfMrope mrope{pos, img.v.mrope_section};
  return HfForwardEmbeds(c, w, Glm4vInputEmbeds(img.v, w, ids, img.features), &mrope);
}

}  // namespace

Expected<std::vector<std::vector<int64_t>>> ReadInputIds(const std::string& path, int64_t vocab) {
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadFileCapped(path, kMaxIdsBytes, "(document)"));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return BadInput(path, "(document)", "is not valid JSON", text.substr(0, 40));
  if (!j.is_array() || j.empty()) return BadInput(path, "(document)", "must be a non-empty list of token-id lists");
  std::vector<std::vector<int64_t>> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    if (!j[i].is_array() || j[i].empty()) return BadInput(path, at, "must be a non-empty list of token ids", JsonValueText(j[i]));
    std::vector<int64_t> seq;
    for (size_t k = 0; k < j[i].size(); ++k) {
      const nlohmann::json& v = j[i][k];
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
        return BadInput(path, at + "[" + std::to_string(k) + "]", "token id must be an integer in [0, " +
                        std::to_string(vocab) + ")", v.dump());
      seq.push_back(v.get<int64_t>());
    }
    out.push_back(std::move(seq));
  }
  return out;
}

Expected<HfVerifyResult> RunHfVerify(const HfVerifyOptions& o) {
  // Step 1: config, ids, weights.
  ONBOARD_ASSIGN_OR_RETURN(HfForwardConfig c, ReadHfForwardConfig(o.checkpoint));
  ONBOARD_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> seqs, ReadInputIds(o.ids_path, c.ir.vocab));
  ONBOARD_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::Open(o.checkpoint));
  const torch::ScalarType dtype = o.dtype == FloatDtype::kFP64 ? torch::kDouble : torch::kFloat;
  ONBOARD_ASSIGN_OR_RETURN(HfModelWeights w, MapHfWeights(c, ckpt, o.layers, dtype));
  ONBOARD_ASSIGN_OR_RETURN(ImageInput img, LoadImage(o, c, ckpt, dtype));
  HfVerifyResult r;
  r.image_features = img.present ? img.features.size(0) : 0;
  r.vision_tensors = img.tensors;
  r.model_type = c.ir.model_type;
  r.layout = HfLayoutName(c.layout);
  r.batch = int64_t(seqs.size());
  for (const auto& s : seqs) r.longest = std::max<int64_t>(r.longest, int64_t(s.size()));
  r.vocab = c.ir.vocab;
  r.layers_run = int64_t(w.layers.size());
  r.tensors_used = int64_t(w.used.size());
  for (const HfWeightDtype& d : w.dtypes_seen) {
    r.dtypes.push_back(HfWeightDtypeName(d));
    r.dequant.push_back(DequantText(d, o.dtype));
  }

  // Step 2: forward per sequence; NaN past each sequence's end.
  std::vector<float> logits(size_t(r.batch * r.longest * r.vocab), std::numeric_limits<float>::quiet_NaN());
  for (size_t b = 0; b < seqs.size(); ++b) {
    ONBOARD_ASSIGN_OR_RETURN(torch::Tensor out, SequenceLogits(o, c, w, img, seqs[b], b));
    const torch::Tensor l = out.to(torch::kFloat).contiguous();
    std::copy(l.data_ptr<float>(), l.data_ptr<float>() + l.numel(), logits.begin() + int64_t(b) * r.longest * r.vocab);
  }
  r.bytes_touched = ckpt.touched_bytes();
  r.checkpoint_bytes = ckpt.data_bytes();

  // Step 3: the .npy, then the comparison.
  if (!o.logits_out.empty()) ONBOARD_RETURN_IF_ERROR(WriteNpyF32(o.logits_out, {r.batch, r.longest, r.vocab}, logits.data()));
  if (!o.reference.empty()) ONBOARD_RETURN_IF_ERROR(Compare(o, seqs, logits, &r));
  RankBytes(o, c, dtype, &r);
  return r;
}

std::vector<std::string> HfVerifySummary(const HfVerifyResult& r) {
  char buf[512];
  std::vector<std::string> out;
  std::string dts;
  for (const std::string& d : r.dtypes) dts += (dts.empty() ? "" : ",") + d;
  std::snprintf(buf, sizeof(buf), "model      %s (%s layout), %lld layer(s) run", r.model_type.c_str(), r.layout.c_str(),
                static_cast<long long>(r.layers_run));
  out.push_back(buf);
  std::snprintf(buf, sizeof(buf), "weights    %lld tensors (%s), %.3f MB read of %.3f MB in the checkpoint",
                static_cast<long long>(r.tensors_used), dts.c_str(), double(r.bytes_touched) / 1e6,
                double(r.checkpoint_bytes) / 1e6);
  out.push_back(buf);
  if (r.image_features > 0) {
    std::snprintf(buf, sizeof(buf),
                  "image      %lld features from the vision tower (%lld model.visual tensors)",
                  static_cast<long long>(r.image_features), static_cast<long long>(r.vision_tensors));
    out.push_back(buf);
  }
  std::snprintf(buf, sizeof(buf), "logits     [%lld, %lld, %lld] float32", static_cast<long long>(r.batch),
                static_cast<long long>(r.longest), static_cast<long long>(r.vocab));
  out.push_back(buf);
  if (r.compared) {
    std::snprintf(buf, sizeof(buf),
                  "reference  max abs diff %.3g, max rel diff %.3g (of max|ref|), top-1 agreement %lld/%lld -> %s",
                  r.max_abs, r.max_rel, static_cast<long long>(r.top1_agree), static_cast<long long>(r.rows),
                  r.passed ? "PASS" : "FAIL");
    out.push_back(buf);
  }
  return out;
}

}  // namespace onboard
