// One reader per Hugging Face model family (model_type). Each fills HfContext::ir from the config's
// text part following the family's modeling code in transformers (or the model's remote code):
// which layers are MoE, which attention each layer has, which projections carry biases.
// The table from model_type to reader is in hf_config.cpp.
#pragma once

#include "parsers/hf_common.h"

namespace onboard {

// hf_softmax_families.cpp
Status ReadLlamaFamily(HfContext& c);     // llama, mistral, qwen2, qwen3 (dense GQA + SwiGLU)
Status ReadMixtral(HfContext& c);         // mixtral: every layer MoE, softmax router
Status ReadQwenMoE(HfContext& c);         // qwen2_moe, qwen3_moe, qwen3_vl_moe text
Status ReadGlm4MoE(HfContext& c);         // glm4_moe, glm4v_moe text
Status ReadGptOss(HfContext& c);          // gpt_oss: sliding/full layer_types, sinks, biases
Status ReadMiniMaxM2(HfContext& c);       // minimax_m2: full attention, per-layer qk norm, MoE
Status ReadGeneric(HfContext& c);         // unknown model_type: generic fields, with warnings

// hf_mla_families.cpp
AttentionSpec ReadMlaAttention(HfContext& c);  // MLA fields (+ DSA when index_* present)
Status ReadDeepSeek(HfContext& c);        // deepseek_v2, deepseek_v3, deepseek_v32 (DSA), kimi_k2

// hf_hybrid_families.cpp
Status ReadKimiLinear(HfContext& c);      // kimi_linear, kimi_k3: KDA + (gated) MLA/DSA, latent MoE
Status ReadQwen3Next(HfContext& c);       // qwen3_next: gated DeltaNet + gated attention
Status ReadMiniMaxLightning(HfContext& c);// minimax (MiniMax-01): lightning + softmax attention

// hf_vision.cpp: vision towers (glm4v, moonvit, qwen3_vl); generic ViT count otherwise.
Status ReadVisionTower(HfContext& c);

}  // namespace onboard
