// HF names -> modules for kimi_k3's MoonViT tower and projector, with C = 3, P = patch_size,
// hd = hidden_size, I = intermediate_size, mh x mw = merge_kernel_size, D = the text hidden:
//   vision_tower.patch_embed.proj.{weight [hd, C, P, P], bias [hd]}
//   vision_tower.patch_embed.pos_emb.weight [init_pos_emb_height, init_pos_emb_width, hd]
//   vision_tower.encoder.blocks.N.{norm0,norm1}.{weight,bias} [hd]
//   vision_tower.encoder.blocks.N.wqkv.{weight [3 hd, hd], bias [3 hd]}
//   vision_tower.encoder.blocks.N.wo.{weight [hd, hd], bias [hd]}
//   vision_tower.encoder.blocks.N.mlp.fc0.{weight [I, hd], bias [I]}, mlp.fc1.{weight [hd, I], bias [hd]}
//   vision_tower.encoder.final_layernorm.{weight,bias} [hd]
//   mm_projector.pre_norm.{weight,bias} [hd]
//   mm_projector.proj.0.{weight [mh mw hd, mh mw hd], bias}, mm_projector.proj.2.{weight [D, mh mw hd], bias}
// Sources: the vision_tower.* names are Kimi-VL's MoonVitPretrainedModel (modeling_kimi_vl.py: patch_embed
// = MoonVisionPatchEmbed(proj, pos_emb = Learnable2DInterpPosEmb.weight), encoder = MoonVitEncoder(blocks =
// MoonVitEncoderLayer(norm0, norm1, wqkv, wo, mlp = MLP2(fc0, fc1)), final_layernorm)), the same in
// Kimi-K2.5's MoonViT3dPretrainedModel. The projector is Kimi-K2.5's `mm_projector` = PatchMergerMLP
// (pre_norm, proj = Sequential(Linear, GELU, Linear): indices 0 and 2), the prefix the kimi_k3 text mapper
// already skips; Kimi-VL names the same module multi_modal_projector.{pre_norm, linear_1, linear_2}.
// Config (vision_config): depth | num_hidden_layers, num_heads | num_attention_heads, hidden_size,
// intermediate_size, patch_size, merge_kernel_size, out_hidden_size (must equal the text hidden_size),
// init_pos_emb_height / _width (MoonViTConfig's default 64), projector_ln_eps (default 1e-5); top level
// media_placeholder_token_id (required: the flagship's composed config has none, and a guessed id would
// scatter the image over the wrong tokens).
#include <nlohmann/json.hpp>

#include "backends/hf_glm4v_vision.h"
#include "backends/hf_moonvit.h"
#include "parsers/json_fields.h"

namespace onboard {
namespace {

Expected<MoonVitBlock> MapBlock(const MoonVitConfig& v, int64_t i, HfWeightReader& r) {
  const std::string p = "vision_tower.encoder.blocks." + std::to_string(i) + ".";
  MoonVitBlock b;
  ONBOARD_ASSIGN_OR_RETURN(b.norm0_w, r.Read(p + "norm0.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.norm0_b, r.Read(p + "norm0.bias", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.norm1_w, r.Read(p + "norm1.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.norm1_b, r.Read(p + "norm1.bias", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(b.wqkv, r.Linear(p + "wqkv", 3 * v.hidden, v.hidden, true));
  ONBOARD_ASSIGN_OR_RETURN(b.wo, r.Linear(p + "wo", v.hidden, v.hidden, true));
  ONBOARD_ASSIGN_OR_RETURN(b.fc0, r.Linear(p + "mlp.fc0", v.intermediate, v.hidden, true));
  ONBOARD_ASSIGN_OR_RETURN(b.fc1, r.Linear(p + "mlp.fc1", v.hidden, v.intermediate, true));
  return b;
}

}  // namespace

Expected<MoonVitConfig> ReadMoonVitConfig(const HfForwardConfig& c) {
  if (c.layout != HfLayout::kKimiK3)
    return BadInput(c.config_path, "model_type", "a MoonViT image input needs kimi_k3", c.ir.model_type);
  ONBOARD_ASSIGN_OR_RETURN(const nlohmann::json root, ReadVisionConfigRoot(c));
  JsonFields top(root, c.config_path);
  MoonVitConfig v;
  v.media_token = top.Int("media_placeholder_token_id", 0, c.ir.vocab - 1);
  std::optional<JsonFields> vc = top.Sub("vision_config");
  if (!top.ok()) return top.status();
  v.depth = vc->IntOr({"depth", "num_hidden_layers"}, -1, 1, 4096);
  v.hidden = vc->Int("hidden_size", 1, kMaxDim);
  v.heads = vc->IntOr({"num_heads", "num_attention_heads"}, -1, 1, v.hidden);
  v.intermediate = vc->Int("intermediate_size", 1, kMaxDim);
  v.patch = vc->Int("patch_size", 1, 4096);
  v.out_hidden = vc->Int("out_hidden_size", 1, kMaxDim);
  v.pos_h = vc->IntOr({"init_pos_emb_height"}, 64, 1, 4096);
  v.pos_w = vc->IntOr({"init_pos_emb_width"}, 64, 1, 4096);
  v.projector_eps = vc->DoubleOr("projector_ln_eps", 1e-5, 0.0, 1.0);
  const std::vector<int64_t> mk = vc->IntList("merge_kernel_size", 1, 64);
  if (!vc->ok()) return vc->status();
  if (v.depth < 1 || v.heads < 1)
    return BadInput(c.config_path, "vision_config.depth / num_heads", "required (positive)", "absent");
  if (mk.size() != 2)
    return BadInput(c.config_path, "vision_config.merge_kernel_size", "two values [mh, mw]",
                    std::to_string(mk.size()) + " value(s)");
  v.merge_h = mk[0];
  v.merge_w = mk[1];
  ONBOARD_RETURN_IF_ERROR(CheckVisionDims(c, v.hidden, v.heads, v.out_hidden));
  return v;
}

Expected<MoonVitWeights> MapMoonVit(const MoonVitConfig& v, const SafetensorsCheckpoint& ckpt,
                                    torch::ScalarType dtype) {
  HfWeightReader r(ckpt, dtype);
  MoonVitWeights w;
  const int64_t P = v.patch, C = v.in_channels, merged = v.merge_h * v.merge_w * v.hidden;
  // Step 1: the patch Conv2d (flattened over (c, i, j) to a linear over one patch), the position grid.
  ONBOARD_ASSIGN_OR_RETURN(torch::Tensor conv,
                           r.Read("vision_tower.patch_embed.proj.weight", {v.hidden, C, P, P}));
  w.patch.w = conv.reshape({v.hidden, C * P * P});
  ONBOARD_ASSIGN_OR_RETURN(w.patch.b, r.Read("vision_tower.patch_embed.proj.bias", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.pos_emb,
                           r.Read("vision_tower.patch_embed.pos_emb.weight", {v.pos_h, v.pos_w, v.hidden}));
  // Step 2: the blocks and the final LayerNorm.
  for (int64_t i = 0; i < v.depth; ++i) {
    ONBOARD_ASSIGN_OR_RETURN(MoonVitBlock b, MapBlock(v, i, r));
    w.blocks.push_back(std::move(b));
  }
  ONBOARD_ASSIGN_OR_RETURN(w.final_w, r.Read("vision_tower.encoder.final_layernorm.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.final_b, r.Read("vision_tower.encoder.final_layernorm.bias", {v.hidden}));
  // Step 3: the projector.
  ONBOARD_ASSIGN_OR_RETURN(w.pre_norm_w, r.Read("mm_projector.pre_norm.weight", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.pre_norm_b, r.Read("mm_projector.pre_norm.bias", {v.hidden}));
  ONBOARD_ASSIGN_OR_RETURN(w.linear_1, r.Linear("mm_projector.proj.0", merged, merged, true));
  ONBOARD_ASSIGN_OR_RETURN(w.linear_2, r.Linear("mm_projector.proj.2", v.out_hidden, merged, true));
  w.used = r.used();
  return w;
}

}  // namespace onboard
