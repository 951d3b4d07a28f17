// Shared helpers for tests/search: the flagship model, shipped topologies, published runs.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "parsers/load_model.h"
#include "search/layout_file.h"
#include "search/planner.h"

namespace onboard::test {

inline Topology ShippedTopology(const std::string& name) {
  auto t = LoadTopologyFile(std::string(ONBOARD_SOURCE_DIR) + "/examples/topologies/" + name + ".json");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : Topology{};
}

inline ModelIR Flagship() {
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/flagship.config.json");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : ModelIR{};
}

// A Hugging Face config of tests/data/hf/ (NAME.config.json) as a ModelIR.
inline ModelIR HfModel(const std::string& name) {
  auto m = LoadModel(std::string(ONBOARD_TEST_DATA) + "/hf/" + name + ".config.json");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : ModelIR{};
}

inline PlanRequest SeedRequest(FinetuneMode mode) {
  PlanRequest req;
  req.model = Flagship();
  req.topology = ShippedTopology("atlas-950-superpod-128");
  req.mode = mode;
  req.lora_rank = 16;
  req.seq = 4096;
  return req;
}

// A tests/data/hf/ model on `devices` of a known device type (TopologyForHardware, 400 Gb/s NICs),
// seq 4096.
inline PlanRequest HfRequestOn(const std::string& model, const std::string& hardware, int64_t devices) {
  PlanRequest req;
  req.model = HfModel(model);
  auto t = TopologyForHardware(hardware, devices, 400, "test");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (t.ok()) req.topology = *t;
  req.seq = 4096;
  return req;
}

inline std::vector<LayoutRun> PublishedRuns() {
  auto runs = LoadLayoutFile(std::string(ONBOARD_TEST_DATA) + "/published_runs.json");
  EXPECT_TRUE(runs.ok()) << runs.status().ToString();
  return runs.ok() ? *runs : std::vector<LayoutRun>{};
}

// A plan with the given degrees; global_batch = micro_batch * micro-batches * dp.
inline Plan MakePlan(const ParallelDegrees& deg, int64_t seq, int64_t micro_batch, int64_t micro_batches) {
  Plan p;
  p.deg = deg;
  p.seq = seq;
  p.micro_batch = micro_batch;
  p.num_micro_batches = micro_batches;
  p.global_batch = micro_batch * micro_batches * deg.dp_replicate * deg.dp_shard;
  return p;
}

// The time term `name` of an estimate, or null when the estimate has none.
inline const TimeTerm* Term(const PlanEstimate& e, const std::string& name) {
  for (const TimeTerm& t : e.time_terms)
    if (t.name == name) return &t;
  return nullptr;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace onboard::test
