// Vision towers of multimodal configs (vision_config), counted exactly per the modeling code:
//   glm4v   (Glm4vMoe / GLM-4.5V): Conv3d patch embed (+bias), RMSNorm post-conv, learned positions
//           ((image_size/patch)^2), blocks [2 RMSNorm, qkv (+bias if attention_bias), proj, SwiGLU MLP
//           of width out_hidden_size], post RMSNorm, Conv2d downsample (merge x merge, +bias) to
//           out_hidden, merger [proj, LayerNorm, gate/up/down of width intermediate_size].
//           Trap: the blocks' MLP is out_hidden_size wide; intermediate_size sizes only the merger.
//   moonvit (Kimi-VL / flagship): Conv2d patch embed (+bias), learned 2D positions
//           (init_pos_emb_height x width), blocks [2 LayerNorm, wqkv (+bias), wo (+bias), GELU MLP fc0/fc1
//           (+bias)], final LayerNorm, projector [LayerNorm, Linear(h*m^2, h*m^2), Linear(h*m^2, out)].
//   qwen3_vl (Qwen3-VL / Qwen3-VL-MoE): Conv3d patch embed (+bias), learned positions
//           (num_position_embeddings), blocks [2 LayerNorm, qkv (+bias), proj (+bias), GELU MLP fc1/fc2
//           (+bias)], merger [LayerNorm(h), fc1 (h*m^2)^2, fc2 -> out] and one deepstack merger per
//           deepstack_visual_indexes entry (LayerNorm over h*m^2).
// Anything else: a ViT estimate (LayerNorm blocks, 4h^2 attention, 2hI MLP) with a warning.
#include "parsers/hf_families.h"

namespace onboard {
namespace {

using Num = long double;

int64_t Clamp(Num x) { return x > 9.0e18L ? INT64_MAX : static_cast<int64_t>(x); }

// Step 1 of ReadVisionTower: the tower's kind and shape fields (kinds folded to glm4v / qwen3_vl).
void ReadTowerShape(JsonFields& v, const ModelIR& ir, VisionTower& t) {
  t.kind = v.StrOr("model_type", "");
  if (t.kind == "glm4v_moe" || t.kind == "glm4v") t.kind = "glm4v";
  if (t.kind.rfind("qwen3_vl", 0) == 0) t.kind = "qwen3_vl";
  t.depth = v.IntOr({"depth", "num_hidden_layers"}, 0, 1, kMaxLayers);
  if (t.depth == 0) v.Fail("depth", "required field missing", "");
  t.hidden = v.Int("hidden_size", 1, kMaxDim);
  t.intermediate = v.IntOr({"intermediate_size"}, 4 * t.hidden, 1, kMaxDim);
  t.heads = v.IntOr({"num_heads", "num_attention_heads"}, 1, 1, kMaxCount);
  t.patch = v.IntOr({"patch_size"}, 14, 1, 100000);
  t.in_channels = v.IntOr({"in_channels", "in_chans", "num_channels"}, 3, 1, 1024);
  t.temporal_patch = v.IntOr({"temporal_patch_size"}, 1, 1, 1024);
  t.merge = v.IntOr({"spatial_merge_size"}, 2, 1, 1024);
  const std::vector<int64_t> mk = v.IntList("merge_kernel_size", 1, 1024);
  if (!mk.empty() && (mk.size() != 2 || mk[0] != mk[1])) {  // the tower and the probes merge square blocks
    std::string shown;
    for (int64_t m : mk) shown += (shown.empty() ? "[" : ", ") + std::to_string(m);
    v.Fail("merge_kernel_size", "must be two equal sizes [m, m] (square patch merge)", shown + "]");
  }
  if (!mk.empty()) t.merge = mk[0];
  t.out_hidden = v.IntOr({"out_hidden_size"}, ir.hidden, 1, kMaxDim);
}

Num PatchInputs(const VisionTower& t) {
  return static_cast<Num>(t.in_channels) * t.temporal_patch * t.patch * t.patch;
}

// glm4v parameters; sets t.intermediate to the blocks' MLP width (out_hidden_size).
Num Glm4vParams(JsonFields& v, VisionTower& t) {
  const Num h = t.hidden, I = t.intermediate, out = t.out_hidden, m2 = t.merge * t.merge;
  const int64_t image = v.IntOr({"image_size"}, 336, 1, 1 << 20);
  const bool qkv_bias = v.BoolOr("attention_bias", false);
  const Num grid = static_cast<Num>(image / t.patch);
  Num p = 0;
  p += PatchInputs(t) * h + h;  // patch_embed Conv3d + bias
  p += h;                       // post_conv_layernorm
  p += grid * grid * h;         // position embedding
  Num block = 0;
  block += 2 * h;                               // norm1, norm2
  block += h * 3 * h + (qkv_bias ? 3 * h : 0);  // qkv
  block += h * h;                               // proj
  block += 3 * h * out;                         // gate/up/down at out_hidden_size width
  p += block * t.depth;
  p += h;                                  // post_layernorm
  p += h * out * m2 + out;                 // downsample Conv2d + bias
  p += out * out + 2 * out + 3 * out * I;  // merger: proj, LayerNorm, gate/up/down
  t.intermediate = t.out_hidden;           // VisionTower::intermediate is the blocks' MLP width
  return p;
}

Num MoonvitParams(JsonFields& v, const VisionTower& t) {
  const Num h = t.hidden, I = t.intermediate, out = t.out_hidden, m2 = t.merge * t.merge;
  const Num ph = v.IntOr({"init_pos_emb_height"}, 64, 1, 1 << 16);
  const Num pw = v.IntOr({"init_pos_emb_width"}, 64, 1, 1 << 16);
  Num p = 0;
  p += static_cast<Num>(t.in_channels) * t.patch * t.patch * h + h;  // patch_embed Conv2d + bias
  p += ph * pw * h;                                                  // 2D position embedding
  Num block = 0;
  block += 4 * h;              // norm0, norm1 (LayerNorm weight + bias)
  block += h * 3 * h + 3 * h;  // wqkv + bias
  block += h * h + h;          // wo + bias
  block += 2 * h * I + I + h;  // fc0, fc1 + biases
  p += block * t.depth;
  p += 2 * h;  // final_layernorm
  const Num hm = h * m2;
  p += 2 * h;           // projector pre_norm
  p += hm * hm + hm;    // linear_1
  p += hm * out + out;  // linear_2
  return p;
}

Num Qwen3VlParams(JsonFields& v, const VisionTower& t) {
  const Num h = t.hidden, I = t.intermediate, out = t.out_hidden, m2 = t.merge * t.merge;
  const Num pos = v.IntOr({"num_position_embeddings"}, 2304, 0, kMaxDim);
  const Num deepstack = static_cast<Num>(v.IntList("deepstack_visual_indexes", 0, kMaxLayers).size());
  Num p = 0;
  p += PatchInputs(t) * h + h;  // patch_embed Conv3d + bias
  p += pos * h;                 // pos_embed
  Num block = 0;
  block += 4 * h;              // norm1, norm2 (LayerNorm)
  block += h * 3 * h + 3 * h;  // qkv + bias
  block += h * h + h;          // proj + bias
  block += 2 * h * I + I + h;  // linear_fc1, linear_fc2 + biases
  p += block * t.depth;
  const Num hm = h * m2;
  const Num merger = hm * hm + hm + hm * out + out;  // linear_fc1, linear_fc2 (+ biases)
  p += 2 * h + merger;                               // main merger (norm over h)
  p += deepstack * (2 * hm + merger);                // deepstack mergers (norm over h * m^2)
  return p;
}

// Unknown kind: a ViT estimate, recorded as a guess.
Num GenericVitParams(HfContext& c, const VisionTower& t) {
  const Num h = t.hidden, I = t.intermediate, out = t.out_hidden, m2 = t.merge * t.merge;
  Guess(c, "vision_config.model_type '" + t.kind + "' unknown: vision tower estimated as a ViT (" +
               std::to_string(t.depth) + " blocks of width " + std::to_string(t.hidden) + ")");
  Num p = 0;
  p += PatchInputs(t) * h + h;
  p += (4 * h + 4 * h * h + 4 * h + 2 * h * I + I + h) * t.depth;
  p += h * m2 * out + out;
  return p;
}

}  // namespace

Status ReadVisionTower(HfContext& c) {
  if (!c.vision) return Status::Ok();
  JsonFields& v = *c.vision;
  VisionTower t;
  // Step 1: kind and shape; stop at the first bad field.
  ReadTowerShape(v, c.ir, t);
  if (!v.ok()) return v.status();

  // Step 2: parameter count per the kind's modeling code.
  Num p = 0;
  if (t.kind == "glm4v") {
    p = Glm4vParams(v, t);
  } else if (t.kind == "moonvit") {
    p = MoonvitParams(v, t);
  } else if (t.kind == "qwen3_vl") {
    p = Qwen3VlParams(v, t);
  } else {
    p = GenericVitParams(c, t);
  }

  // Step 3: int64 count (overflow is bad input), then record the tower.
  t.params = Clamp(p);
  if (t.params == INT64_MAX) v.Fail("hidden_size", "vision tower parameter count overflows int64", std::to_string(t.hidden));
  c.ir.vision = t;
  return v.status();
}

}  // namespace onboard
