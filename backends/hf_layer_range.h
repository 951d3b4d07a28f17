// HfLayerRange: which layers of a HF checkpoint a forward runs (embedding + these + final norm +
// head). Torch-free so that `onboard verify`'s options (backends/hf_verify.h) need no LibTorch.
#pragma once

#include <cstdint>

namespace onboard {

// Inclusive 0-based layer range; last < 0 = through the last layer.
struct HfLayerRange {
  int64_t first = 0;
  int64_t last = -1;
};

}  // namespace onboard
