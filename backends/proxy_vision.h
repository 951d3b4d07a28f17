// INTERNAL to backends/ (includes LibTorch). The proxy's vision tower (issue 12 item 6), scaled
// down from the model's (ModelIR::vision, e.g. the flagship's MoonViT): patch embedding with a
// learned position embedding, pre-norm ViT blocks (bidirectional attention + GELU MLP), the
// spatial merge (merge x merge neighbouring patches concatenated, as Kimi-VL / Qwen2-VL do) and the
// two-layer projector into the LM's hidden width. It lives in the embed unit (FSDP-sharded with the
// token embedding) and only for the image task (probe_image.h), so other tasks' layouts, parameter
// counts and curves are unchanged.
//
// Legend: images [b, S, S, 3] float pixels, S = ProxyVision::image; patches P = (S / patch)^2 of
// patch*patch*3 values; tower states [b, P, dv], dv = ProxyVision::hidden; merged tokens
// M = P / merge^2 of merge^2 * dv values; output [b, M, D], D = ProxySpec::hidden.
#pragma once

#include <torch/torch.h>

#include "backends/proxy_model.h"
#include "backends/proxy_weights.h"

namespace onboard::backends {

// Adds the tower's weights to the embed unit (names "v_*"; every weight trains in mode full).
void AddVisionTower(UnitLayout& embed, const ProxySpec& spec);

// The tower on `images`: the M image embeddings that replace the sequence's first M tokens.
at::Tensor VisionForward(const ProxySpec& spec, const Weights& W, const at::Tensor& images);

}  // namespace onboard::backends
