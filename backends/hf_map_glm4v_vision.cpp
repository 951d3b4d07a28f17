// HF names -> modules for GLM-4.5V's vision tower (glm4v_moe; Glm4vVisionModel's checkpoint layout),
// with C = in_channels, T = temporal_patch_size, P = patch_size, m = spatial_merge_size:
//   model.visual.patch_embed.proj.{weight [hidden, C, T, P, P], bias [hidden]}
//   model.visual.post_conv_layernorm.weight [hidden]
//   model.visual.embeddings.position_embedding.weight [(image_size/P)^2, hidden]
//   model.visual.blocks.N.{norm1,norm2}.weight [hidden]
//   model.visual.blocks.N.attn.qkv.{weight [3 hidden, hidden], bias when attention_bias}
//   model.visual.blocks.N.attn.proj.weight [hidden, hidden]
//   model.visual.blocks.N.mlp.{gate,up}_proj.weight [out_hidden, hidden], down_proj [hidden, out_hidden]
//   model.visual.post_layernorm.weight [hidden]
//   model.visual.downsample.{weight [out_hidden, hidden, m, m], bias [out_hidden]}
//   model.visual.merger.proj.weight [out_hidden, out_hidden]
//   model.visual.merger.post_projection_norm.{weight, bias} [out_hidden]
//   model.visual.merger.{gate,up}_proj.weight [intermediate, out_hidden], down_proj [out_hidden,
//   intermediate]
#include <nlohmann/json.hpp>

#include "backends/hf_glm4v_vision.h"
#include "parsers/hf_config.h"
#include "parsers/json_fields.h"
#include "parsers/mapped_file.h"

namespace onboard {
namespace {

// The reader is rooted at "model.visual.": it is asked for "model.X".
Expected<Glm4vVisionBlock> MapBlock(const Glm4vVisionConfig& v, int64_t i, HfWeightReader& r) {
  const std::string p = "model.blocks." + std::to_string(i) + ".";
  Glm4vVisionBlock b;
  ONBOARD_ASSIGN_OR_RETURN(b.norm1, r.Read(p + "norm1.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.norm2, r.Read(p + "norm2.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.qkv, r.Linear(p + "attn.qkv", 3 * v.hidden, v.hidden, v.qkv_bias));
  ONBOARD_ASSIGN_OR_RETURN(b.proj, r.Linear(p + "attn.proj", v.hidden, v.hidden, false));
  ONBOARD_ASSIGN_OR_RETURN(b.mlp, r.Mlp(p + "mlp", v.hidden, v.out_hidden));
  return b;
}

}  // namespace

Expected<nlohmann::json> ReadVisionConfigRoot(const HfForwardConfig& c) {
  ONBOARD_ASSIGN_OR_RETURN(std::string text, ReadFileCapped(c.config_path, kHfConfigMaxBytes, "(document)"));
  nlohmann::json root = nlohmann::json::parse(text, nullptr, false);
  if (root.is_discarded() || !root.contains("vision_config"))
    return BadInput(c.config_path, "vision_config", "required for an image input");
  return root;
}

Status CheckVisionDims(const HfForwardConfig& c, int64_t hidden, int64_t heads, int64_t out_hidden) {
  if (hidden % heads != 0 || (hidden / heads) % 4 != 0)
    return BadInput(c.config_path, "vision_config.num_heads", "head_dim must divide by 4 (2D RoPE)",
                    std::to_string(heads));
  if (out_hidden != c.ir.hidden)
    return BadInput(c.config_path, "vision_config.out_hidden_size",
                    "must equal the text hidden_size " + std::to_string(c.ir.hidden),
                    std::to_string(out_hidden));
  return Status::Ok();
}

Expected<Glm4vVisionConfig> ReadGlm4vVisionConfig(const HfForwardConfig& c) {
  if (c.ir.model_type != "glm4v_moe")
    return BadInput(c.config_path, "model_type", "an image input needs glm4v_moe (GLM-4.5V)",
                    c.ir.model_type);
  ONBOARD_ASSIGN_OR_RETURN(const nlohmann::json root, ReadVisionConfigRoot(c));
  JsonFields top(root, c.config_path);
  Glm4vVisionConfig v;
  v.image_token_id = top.Int("image_token_id", 0, c.ir.vocab - 1);
  v.video_start_token_id = top.IntOr({"video_start_token_id"}, -1, -1, INT64_MAX);
  v.video_end_token_id = top.IntOr({"video_end_token_id"}, -1, -1, INT64_MAX);
  std::optional<JsonFields> vc = top.Sub("vision_config"), tc = top.Sub("text_config");
  if (!top.ok()) return top.status();
  v.depth = vc->Int("depth", 1, 4096);
  v.hidden = vc->Int("hidden_size", 1, kMaxDim);
  v.heads = vc->Int("num_heads", 1, v.hidden);
  v.patch = vc->Int("patch_size", 1, 4096);
  v.temporal_patch = vc->IntOr({"temporal_patch_size"}, 2, 1, 64);
  v.in_channels = vc->IntOr({"in_channels"}, 3, 1, 64);
  v.merge = vc->IntOr({"spatial_merge_size"}, 2, 1, 64);
  v.out_hidden = vc->Int("out_hidden_size", 1, kMaxDim);
  v.intermediate = vc->Int("intermediate_size", 1, kMaxDim);
  v.image_size = vc->Int("image_size", 1, 1 << 20);
  v.eps = vc->DoubleOr("rms_norm_eps", 1e-5, 0.0, 1.0);
  v.qkv_bias = vc->BoolOr("attention_bias", false);
  if (!vc->ok()) return vc->status();
  ONBOARD_RETURN_IF_ERROR(CheckVisionDims(c, v.hidden, v.heads, v.out_hidden));
  std::optional<JsonFields> rope = tc ? tc->Sub("rope_scaling") : std::nullopt;
  if (rope && !rope->Has("mrope_section")) rope.reset();
  if (!rope && tc) rope = tc->Sub("rope_parameters");
  if (rope) v.mrope_section = rope->IntList("mrope_section", 0, kMaxDim);
  if (tc && !tc->ok()) return tc->status();
  int64_t sum = 0;
  for (int64_t s : v.mrope_section) sum += s;
  if (v.mrope_section.size() != 3 || 2 * sum != c.rope.dim)
    return BadInput(
        c.config_path, "text_config.rope_scaling.mrope_section",
        "needs 3 sections summing to " + std::to_string(c.rope.dim / 2) + " (the rotary dims / 2)",
        std::to_string(sum));
  return v;
}

Expected<Glm4vVisionWeights> MapGlm4vVision(const Glm4vVisionConfig& v, const SafetensorsCheckpoint& ckpt,
                                            torch::ScalarType dtype) {
  HfWeightReader r(ckpt, dtype);
  r.SetRoot("model.visual.");
  Glm4vVisionWeights w;
  const int64_t patch_in = v.in_channels * v.temporal_patch * v.patch * v.patch,
                side = v.image_size / v.patch;
  const int64_t m = v.merge;
  // Step 1: patch embedding (the Conv3d kernel flattened to a linear over one patch), positions.
  ONBOARD_ASSIGN_OR_RETURN(
      torch::Tensor conv,
      r.Read("model.patch_embed.proj.weight", {v.hidden, v.in_channels, v.temporal_patch, v.patch, v.patch}));
  w.patch.w = conv.reshape({v.hidden, patch_in});
  ONBOARD_ASSIGN_OR_RETURN(w.patch.b, r.Read("model.patch_embed.proj.bias", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.post_conv_norm, r.Read("model.post_conv_layernorm.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.pos_embed,
                           r.Read("model.embeddings.position_embedding.weight", {side * side, v.hidden}));
  // Step 2: the blocks.
  for (int64_t i = 0; i < v.depth; ++i) {
    ONBOARD_ASSIGN_OR_RETURN(Glm4vVisionBlock b, MapBlock(v, i, r));
    w.blocks.push_back(std::move(b));
  }
  // Step 3: post norm, downsample conv (flattened over (c, i, j)), merger.
  ONBOARD_ASSIGN_OR_RETURN(w.post_norm, r.Read("model.post_layernorm.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor down,
                           r.Read("model.downsample.weight", {v.out_hidden, v.hidden, m, m}));
  w.downsample.w = down.reshape({v.out_hidden, v.hidden * m * m});
  ONBOARD_ASSIGN_OR_RETURN(w.downsample.b, r.Read("model.downsample.bias", {v.out_hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.merger_proj, r.Linear("model.merger.proj", v.out_hidden, v.out_hidden, false));
  ONBOARD_ASSIGN_OR_RETURN(w.merger_ln_w, r.Read("model.merger.post_projection_norm.weight", {v.out_hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.merger_ln_b, r.Read("model.merger.post_projection_norm.bias", {v.out_hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.merger_mlp, r.Mlp("model.merger", v.out_hidden, v.intermediate));
  w.used = r.used();
  return w;
}

}  // namespace onboard
