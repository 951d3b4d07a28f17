// Shared helpers for the export tests: the fixed plans of tests/data/exports/cases.json.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "parsers/load_model.h"
#include "search/export_megatron.h"
#include "search/plan_export.h"
#include "search/plan_request_checks.h"
#include "search_test_util.h"

namespace onboard::test {

struct ExportCase {
  std::string name;
  ModelIR model;
  Plan plan;
};

inline Recompute ParseRecompute(const std::string& s) {
  return s == "full" ? Recompute::kFull : s == "selective" ? Recompute::kSelective : Recompute::kNone;
}

inline std::vector<ExportCase> ExportCases() {
  const std::string dir = std::string(ONBOARD_TEST_DATA);
  const nlohmann::json j = nlohmann::json::parse(ReadText(dir + "/exports/cases.json"));
  std::vector<ExportCase> out;
  for (const auto& c : j.at("cases")) {
    ExportCase e;
    e.name = c.at("name");
    auto m = LoadModel(dir + "/" + c.at("config").get<std::string>());
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) e.model = *m;
    Plan& p = e.plan;
    p.mode = c.at("mode") == "lora" ? FinetuneMode::kLoRA : FinetuneMode::kFull;
    p.lora_rank = c.value("lora_rank", 0);
    p.deg.dp_replicate = c.at("dp_replicate");
    p.deg.dp_shard = c.at("dp_shard");
    p.deg.tp = c.at("tp");
    p.deg.pp = c.at("pp");
    p.deg.interleave = c.at("interleave");
    p.deg.ep = c.at("ep");
    p.deg.expert_fsdp = c.at("expert_fsdp");
    p.deg.sequence_parallel = c.at("sequence_parallel");
    p.micro_batch = c.at("micro_batch");
    p.num_micro_batches = c.at("num_micro_batches");
    p.global_batch = c.at("global_batch");
    p.seq = c.at("seq");
    p.zero_stage = c.at("zero_stage");
    for (const auto& [k, v] : c.at("recompute").items()) p.recompute[k] = ParseRecompute(v.get<std::string>());
    auto disp =
        ParseEpDispatcher("cases.json", "ep_dispatcher", c.value("ep_dispatcher", std::string("alltoall")));
    EXPECT_TRUE(disp.ok()) << disp.status().ToString();
    if (disp.ok()) p.ep_dispatcher = *disp;
    auto compute = ParsePrecision("cases.json", "compute_dtype",
                                  c.value("compute_dtype", std::string("bf16")), PrecisionUse::kCompute);
    EXPECT_TRUE(compute.ok()) << compute.status().ToString();
    if (compute.ok()) p.compute_dtype = *compute;
    p.bf16_layers_first = c.value("bf16_layers_first", 0);
    p.bf16_layers_last = c.value("bf16_layers_last", 0);
    if (c.contains("stage_layer_starts")) p.stage_layer_starts = c.at("stage_layer_starts").get<std::vector<int64_t>>();
    out.push_back(std::move(e));
  }
  return out;
}

inline ExportCase FindCase(const std::string& name) {
  for (ExportCase& c : ExportCases())
    if (c.name == name) return c;
  ADD_FAILURE() << "no export case " << name;
  return {};
}

// tests/data/exports/<name>/<file> (a Megatron-style script: plan.megatron.sh, plan.mindspeed.sh) read back.
inline MegatronArgs GoldenArgs(const std::string& name, const std::string& file) {
  const std::string path = std::string(ONBOARD_TEST_DATA) + "/exports/" + name + "/" + file;
  auto a = ParseMegatronScript(ReadText(path), path);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : MegatronArgs{};
}

// Replaces (or adds, at the end) one flag of an argument list.
inline void SetFlag(MegatronArgs* a, const std::string& flag, const std::string& value = "") {
  a->Remove(flag);
  a->Add(flag, value);
}

}  // namespace onboard::test
