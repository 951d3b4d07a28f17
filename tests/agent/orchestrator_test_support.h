// Shared set-up for the orchestrator/report tests: the tiny flagship-shaped model and topology in
// tests/data/agent, the `onboard` binary as probe worker, and a fresh output directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "agent/orchestrator.h"

namespace onboard::agent::testing {

inline std::string TinyModel() { return std::string(ONBOARD_TEST_DATA) + "/agent/tiny_kimi.config.json"; }
inline std::string TinyTopology() { return std::string(ONBOARD_TEST_DATA) + "/agent/tiny_2x4.topology.json"; }
inline std::string OnboardBinary() { return std::string(ONBOARD_BINARY_DIR) + "/onboard"; }

inline std::string FreshDir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::temp_directory_path() / ("onboard_agent_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

// Tiny run: short probes (2 ranks, 8 steps), LoRA, seq 4096 plan on the tiny topology.
inline RunRequest TinyRequest(const std::string& out, bool probe, bool kernels) {
  RunRequest r;
  r.model_path = TinyModel();
  r.topology = TinyTopology();
  r.mode = FinetuneMode::kLoRA;
  r.lora_rank = 8;
  r.seq = 4096;
  r.out_dir = out;
  r.probe.enabled = probe;
  r.probe.ranks = 2;
  r.probe.steps = 8;
  r.probe.worker_binary = OnboardBinary();
  r.probe.timeout_s = 120;
  r.generate_kernels = kernels;
  r.max_rounds = 2;
  r.threads = 2;
  return r;
}

}  // namespace onboard::agent::testing
