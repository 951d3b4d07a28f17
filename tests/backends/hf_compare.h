// Shared by the HF forward tests: write a test checkpoint, map it, run the backend forward over kIds
// and return the largest |ours - reference| logit difference (hf_reference_forward.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>

#include "backends/hf_model.h"
#include "tests/backends/hf_reference_forward.h"

namespace onboard::hftest {

inline std::string TempDir() {
  std::string t = "/tmp/onboard_hf_XXXXXX";
  return mkdtemp(&t[0]);
}

inline const std::vector<int64_t> kIds = {3, 17, 42, 5, 63, 0, 29};

// fp64 forward vs the fp64 reference: only summation order differs.
constexpr double kF64Tol = 1e-9;
// fp32 forward: ~1e-7 relative per op over a few layers on O(1) logits.
constexpr double kF32Tol = 1e-4;
// A wrong reference must miss the loosest pass tolerance by 10x.
constexpr double kWrongAtLeast = 10 * kF32Tol;

// RefOverrides with one deliberate error set by `f` (the negative references).
inline RefOverrides With(void (*f)(RefOverrides&)) {
  RefOverrides o;
  f(o);
  return o;
}

// Max |ours - reference| over all logits of kIds. `view`: what the reference reads when it is not c
// itself (kimi_k3: its text model's view, hf_test_kimi_k3.h).
inline double MaxDiff(const Checkpoint& c, torch::ScalarType dtype, RefOverrides o = {}, int shards = 1,
                      HfLayerRange range = {}, const Checkpoint* view = nullptr) {
  const std::string dir = TempDir();
  c.Write(dir, shards);
  Expected<HfForwardConfig> cfg = ReadHfForwardConfig(dir);
  EXPECT_TRUE(cfg.ok()) << cfg.status().message();
  Expected<SafetensorsCheckpoint> ck = SafetensorsCheckpoint::Open(dir);
  EXPECT_TRUE(ck.ok()) << ck.status().message();
  if (!cfg.ok() || !ck.ok()) return 1e9;
  Expected<HfModelWeights> w = MapHfWeights(*cfg, *ck, range, dtype);
  EXPECT_TRUE(w.ok()) << w.status().message();
  if (!w.ok()) return 1e9;
  const torch::Tensor ours = HfForward(*cfg, *w, kIds).to(torch::kDouble);
  o.first_layer = range.first;
  o.last_layer = range.last;
  const Mat ref = Reference(view ? *view : c, o).Logits(kIds);
  double m = 0;
  for (size_t t = 0; t < ref.size(); ++t)
    for (size_t v = 0; v < ref[t].size(); ++v)
      m = std::max(m, std::fabs(ours[t][v].item<double>() - ref[t][v]));
  return m;
}

}  // namespace onboard::hftest
