// Shared by the real-weights probe tests (probe_weights_test.cpp, probe_weights_layout_test.cpp): a
// test checkpoint written to a temp dir, and the probe's options on the repository's prose text.
#pragma once

#include <string>

#include "backends/probe_weights.h"
#include "tests/backends/hf_compare.h"
#include "tests/backends/hf_test_checkpoint.h"

namespace onboard::hftest {

inline std::string WriteCheckpoint(const Checkpoint& c) {
  const std::string dir = TempDir();
  c.Write(dir);
  return dir;
}

// `ranks` processes, 30 steps of 8 windows x 32 bytes, LoRA r 4 / alpha 8, lr 1e-2 (3 warm-up steps).
inline WeightsProbeOptions ProbeWeightsOptions(const std::string& ckpt, int64_t ranks) {
  WeightsProbeOptions o;
  o.checkpoint = ckpt;
  o.text_file = std::string(ONBOARD_TEST_DATA) + "/text/readme_prose.txt";
  o.ranks = ranks;
  o.steps = 30;
  o.seq = 32;
  o.batch = 8;
  o.lora_rank = 4;
  o.lora_alpha = 8;
  o.lr = 1e-2;
  o.warmup = 3;
  o.out_dir = TempDir();
  o.worker_binary = std::string(ONBOARD_BINARY_DIR) + "/onboard";
  o.timeout_s = 120;
  return o;
}

}  // namespace onboard::hftest
