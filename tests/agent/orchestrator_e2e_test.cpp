// The whole loop on the tiny flagship-shaped model, nothing mocked: parse, templates, plan,
// kernels (generated, built and checked), probe rounds over c10d/Gloo, rules, reports.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "agent/orchestrator.h"
#include "backends/probe.h"
#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;
using testing::TinyRequest;

// Probe steps of the negative-control runs below: each perturbation changes step 0's loss, so
// the kernel loss parity (min(kLossParitySteps, steps) steps) fails at once; what is under test
// is the loop's fallback, not learning (FullLoop runs the full 8 steps).
constexpr int64_t kNegativeControlSteps = 3;

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(OrchestratorE2E, FullLoopWritesEveryArtifactAndTracesEveryDecision) {
  ASSERT_TRUE(fs::exists(testing::OnboardBinary())) << "build the onboard binary first (probe workers)";
  std::string out = FreshDir("full");
  CollectingEventSink sink;
  CancelToken cancel;
  auto res = RunOnboarding(TinyRequest(out, /*probe=*/true, /*kernels=*/true), sink, cancel);
  ASSERT_TRUE(res.ok()) << res.status().ToString();

  // Artifacts.
  for (const char* f : {"plan.json", "plan.torchtitan.toml", "plan.megatron.txt", "templates.json", "trace.json",
                        "report.json", "report.md", "report.html", "probe/round1/probe.json"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  ASSERT_TRUE(fs::is_directory(fs::path(out) / "kernels"));
  size_t kernel_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(out) / "kernels")) kernel_files += e.is_regular_file();
  EXPECT_GE(kernel_files, 8u);  // KDA + DSA, CPU + CUDA, source + manifest each
  EXPECT_TRUE(fs::exists(fs::path(out) / "kernels/cpu") && fs::exists(fs::path(out) / "kernels/cuda"));
  EXPECT_GE(res->rounds, 1);
  EXPECT_LE(res->rounds, 2);

  // Report content matches the run.
  nlohmann::json rep = ReadJson(out + "/report.json");
  ASSERT_FALSE(rep.is_discarded());
  EXPECT_EQ(rep["schema"], "onboard.report/1");
  EXPECT_EQ(rep["probe"]["rounds"].size(), static_cast<size_t>(res->rounds));
  EXPECT_FALSE(rep["probe"]["rounds"][0]["loss"].empty());
  // Round 1 checked the generated KDA and DSA kernels' loss parity against the reference ops (issue
  // 12): over the round's 8 steps, and both hold (the perturbed-gate and broken top-k tests below
  // are their negatives).
  const nlohmann::json& parity = rep["probe"]["rounds"][0]["loss_parity"];
  ASSERT_EQ(parity.size(), 2u) << rep["probe"]["rounds"][0].dump();
  EXPECT_EQ(parity[0]["kernel"], "kda");
  EXPECT_EQ(parity[1]["kernel"], "dsa");
  for (const auto& p : parity) {
    EXPECT_TRUE(p["pass"].get<bool>()) << p.dump();
    EXPECT_EQ(p["steps"], 8);
  }
  EXPECT_GT(rep["probe"]["rounds"][0]["kda_calls"]["generated"].get<int64_t>(), 0);
  EXPECT_GT(ReadJson(out + "/probe/round1/rank0.json")["dsa_calls"]["generated"].get<int64_t>(), 0);
  EXPECT_TRUE(rep["kernels"]["ran"].get<bool>());
  EXPECT_GT(rep["kernels"]["total"].get<int>(), 0);
  EXPECT_EQ(rep["templates"]["unknown"], 0);
  EXPECT_TRUE(rep["plan"]["chosen"]["summary"].is_string());
  // Issue 17: the probe's measured collectives, bubble and live-tensor peak beside the cost model's
  // prediction for the probe's own layout, in report.json and report.md.
  const nlohmann::json& cmp = rep["probe"]["rounds"][0]["comparison"];
  ASSERT_TRUE(cmp.is_object()) << rep["probe"]["rounds"][0].dump();
  EXPECT_FALSE(cmp["collectives"].empty());
  EXPECT_GT(cmp["memory"]["predicted_bytes"].get<double>(), 0);
  EXPECT_GT(cmp["memory"]["measured_live_peak_bytes"].get<double>(), 0);
  {
    std::ifstream md(out + "/report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("### Probe: measured beside predicted"), std::string::npos);
    EXPECT_NE(text.find("| live-tensor peak per rank | memory model |"), std::string::npos);
    // Issue 18: the round's measured expert communication (2 ranks, one node: nothing crosses).
    EXPECT_NE(text.find("### Expert communication by probe round"), std::string::npos);
    EXPECT_NE(text.find("| 1 | 1 x 2 | contiguous | off | 1.000 | 0.000 | 0.000 | 0.0 |"), std::string::npos)
        << text;
  }
  const nlohmann::json& ec = rep["probe"]["rounds"][0]["expert_comm"];
  ASSERT_TRUE(ec.is_object()) << rep["probe"]["rounds"][0].dump();
  EXPECT_EQ(ec["nodes"], 1);
  EXPECT_GT(ec["a2a_exposed_s"].get<double>(), 0);  // ep = 2: the exchange ran

  // Events: ordered, typed, timestamped; every decision in the trace was also an event.
  auto events = sink.events();
  ASSERT_GE(events.size(), 10u);
  EXPECT_EQ(events.front()["type"], "stage_started");
  EXPECT_EQ(events.front()["stage"], "parse");
  EXPECT_EQ(events.back()["type"], "finished");
  EXPECT_TRUE(events.back()["ok"].get<bool>());
  std::set<std::string> stages;
  int decision_events = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_TRUE(events[i].contains("ts"));
    EXPECT_EQ(events[i]["seq"].get<size_t>(), i);
    if (events[i]["type"] == "stage_finished") stages.insert(events[i]["stage"].get<std::string>());
    if (events[i]["type"] == "decision") ++decision_events;
  }
  for (const char* s : {"parse", "templates", "plan", "kernels", "probe", "validate", "report"})
    EXPECT_TRUE(stages.count(s)) << s;
  // Probe progress comes from ProbeObserver::OnStep: one event per recorded step of round 1, in
  // order, with the step's loss as the result has it.
  nlohmann::json probe1 = ReadJson(out + "/probe/round1/probe.json");
  ASSERT_FALSE(probe1.is_discarded());
  std::vector<std::string> progress;
  for (const auto& e : events)
    if (e["type"] == "stage_progress" && e["stage"] == "probe" && e["round"] == 1 &&
        e["message"].get<std::string>().rfind("step ", 0) == 0) {
      EXPECT_EQ(e["done"].get<size_t>(), progress.size() + 1);
      progress.push_back(e["message"].get<std::string>());
    }
  ASSERT_EQ(progress.size(), probe1["steps"].size());
  char last[64];
  std::snprintf(last, sizeof last, "step %zu loss %.6f", progress.size() - 1,
                probe1["steps"].back()["loss"].get<double>());
  EXPECT_EQ(progress.back(), last);
  nlohmann::json trace = ReadJson(out + "/trace.json");
  EXPECT_EQ(trace["decisions"].size(), static_cast<size_t>(decision_events));
  EXPECT_EQ(res->decisions, decision_events);
  EXPECT_GE(trace["observations"].size(), 1u);  // also when no rule fired
  fs::remove_all(out);
}

// Issue 12, the negative of round 1's loss parity: with the perturbed KDA gate control, the parity
// fails, the kernel-fallback rule fires, and round 2 runs on the reference ops: its probe ran no
// generated kernel (what the fallback changes, not only reports).
TEST(OrchestratorE2E, PerturbedKdaGateFailsRound1ParityAndRound2RunsOnTheReferenceOps) {
  std::string out = FreshDir("parity");
  RunRequest r = TinyRequest(out, /*probe=*/true, /*kernels=*/false);
  r.probe.control = onboard::kControlPerturbedKdaGate;
  r.probe.steps = kNegativeControlSteps;
  CollectingEventSink sink;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rounds, 2);
  nlohmann::json rep = ReadJson(out + "/report.json");
  ASSERT_EQ(rep["probe"]["rounds"].size(), 2u);
  const nlohmann::json& r1 = rep["probe"]["rounds"][0];
  const nlohmann::json& r2 = rep["probe"]["rounds"][1];
  ASSERT_EQ(r1["loss_parity"].size(), 2u) << r1.dump();  // kda, then dsa (which holds)
  EXPECT_EQ(r1["loss_parity"][0]["kernel"], "kda");
  EXPECT_FALSE(r1["loss_parity"][0]["pass"].get<bool>()) << r1["loss_parity"][0]["message"];
  EXPECT_TRUE(r1["loss_parity"][1]["pass"].get<bool>()) << r1["loss_parity"][1]["message"];
  EXPECT_EQ(r1["config"]["kda_kernel"], "generated");
  EXPECT_GT(r1["kda_calls"]["generated"].get<int64_t>(), 0);
  bool fell_back = false;
  for (const auto& d : rep["decisions"])
    fell_back = fell_back || (d["rule"] == "kernel_check_failed" && d["round"] == 1 &&
                              d["changed"].contains("kda_loss_parity"));
  EXPECT_TRUE(fell_back) << rep["decisions"].dump();
  EXPECT_EQ(r2["config"]["kda_kernel"], "torch");
  EXPECT_EQ(r2["config"]["control"], "");  // the perturbation lived in the generated kernel
  EXPECT_EQ(r2["kda_calls"]["generated"].get<int64_t>(), 0);
  EXPECT_GT(r2["kda_calls"]["torch"].get<int64_t>(), 0);
  EXPECT_TRUE(r2["loss_parity"].empty());
  std::ifstream md(out + "/report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Kernels in the probe"), std::string::npos);
  EXPECT_NE(text.find("**FAIL** (kda"), std::string::npos);
  fs::remove_all(out);
}

// The same for DSA: with the broken top-k control (the generated DSA kernel keeps half the keys),
// round 1's DSA loss parity fails, the kernel-fallback rule fires for dsa_loss_parity, and round 2
// runs the DSA cores on the reference ops (no generated DSA call) while KDA stays generated.
TEST(OrchestratorE2E, PerturbedDsaTopkFailsRound1ParityAndRound2RunsOnTheReferenceOps) {
  std::string out = FreshDir("dsaparity");
  RunRequest r = TinyRequest(out, /*probe=*/true, /*kernels=*/false);
  r.probe.control = onboard::kControlPerturbedDsaTopk;
  r.probe.steps = kNegativeControlSteps;
  CollectingEventSink sink;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->rounds, 2);
  nlohmann::json rep = ReadJson(out + "/report.json");
  ASSERT_EQ(rep["probe"]["rounds"].size(), 2u);
  const nlohmann::json& r1 = rep["probe"]["rounds"][0];
  const nlohmann::json& r2 = rep["probe"]["rounds"][1];
  ASSERT_EQ(r1["loss_parity"].size(), 2u) << r1.dump();
  EXPECT_TRUE(r1["loss_parity"][0]["pass"].get<bool>()) << r1["loss_parity"][0]["message"];  // kda
  EXPECT_EQ(r1["loss_parity"][1]["kernel"], "dsa");
  EXPECT_FALSE(r1["loss_parity"][1]["pass"].get<bool>()) << r1["loss_parity"][1]["message"];
  EXPECT_EQ(r1["config"]["dsa_kernel"], "generated");
  // What the DSA cores ran: each rank's result file (rank 0's here).
  const nlohmann::json dsa1 = ReadJson(out + "/probe/round1/rank0.json")["dsa_calls"];
  const nlohmann::json dsa2 = ReadJson(out + "/probe/round2/rank0.json")["dsa_calls"];
  EXPECT_GT(dsa1["generated"].get<int64_t>(), 0) << dsa1.dump();
  bool fell_back = false;
  for (const auto& d : rep["decisions"])
    fell_back =
        fell_back || (d["rule"] == "kernel_check_failed" && d["round"] == 1 &&
                      d["changed"].contains("dsa_loss_parity") && !d["changed"].contains("kda_loss_parity"));
  EXPECT_TRUE(fell_back) << rep["decisions"].dump();
  EXPECT_EQ(r2["config"]["dsa_kernel"], "torch");
  EXPECT_EQ(r2["config"]["kda_kernel"], "generated");
  EXPECT_EQ(r2["config"]["control"], "");  // the broken top-k lived in the generated kernel
  EXPECT_EQ(dsa2["generated"].get<int64_t>(), 0) << dsa2.dump();
  EXPECT_GT(dsa2["torch"].get<int64_t>(), 0) << dsa2.dump();
  EXPECT_GT(r2["kda_calls"]["generated"].get<int64_t>(), 0);
  EXPECT_TRUE(r2["loss_parity"].empty());
  std::ifstream md(out + "/report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("**FAIL** (dsa"), std::string::npos);
  EXPECT_NE(text.find("| 2 | generated | "), std::string::npos);    // round 2: KDA generated ...
  EXPECT_NE(text.find(" | torch | not run |"), std::string::npos);  // ... DSA on the torch ops
  fs::remove_all(out);
}

TEST(OrchestratorE2E, InMemoryConfigAndInlineTopology) {
  std::string out = FreshDir("inmem");
  RunRequest r = TinyRequest(out, false, false);
  std::ifstream m(testing::TinyModel()), t(testing::TinyTopology());
  r.model_bytes.assign(std::istreambuf_iterator<char>(m), {});
  r.model_path.clear();
  r.topology.assign(std::istreambuf_iterator<char>(t), {});
  r.model_name = "tiny-in-memory";
  NullEventSink sink;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->report["model"]["name"], "tiny-in-memory");
  EXPECT_EQ(res->report["request"]["topology"], "(inline JSON)");
  EXPECT_EQ(res->rounds, 0);
  fs::remove_all(out);
}

TEST(OrchestratorE2E, BadInputNamesTheFieldAndEmitsAFailedFinish) {
  CollectingEventSink sink;
  RunRequest r = TinyRequest(FreshDir("bad"), false, false);
  r.max_rounds = 0;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_FALSE(res.ok());
  EXPECT_EQ(res.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(res.status().message().find("max_rounds"), std::string::npos);
  ASSERT_FALSE(sink.events().empty());
  EXPECT_FALSE(sink.events().back()["ok"].get<bool>());

  r = TinyRequest(FreshDir("bad2"), false, false);
  r.topology = "no-such-topology";
  res = RunOnboarding(r, sink, CancelToken{});
  EXPECT_EQ(res.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(res.status().message().find("no-such-topology"), std::string::npos);

  r = TinyRequest(FreshDir("bad3"), false, false);
  r.model_path = "/nonexistent/config.json";
  EXPECT_FALSE(RunOnboarding(r, sink, CancelToken{}).ok());
  fs::remove_all(FreshDir("bad"));
  fs::remove_all(FreshDir("bad2"));
  fs::remove_all(FreshDir("bad3"));
}

// Cancels as soon as the first plan is done.
class CancelAfterPlan : public EventSink {
 public:
  explicit CancelAfterPlan(CancelToken& t) : token_(t) {}
  void OnEvent(const nlohmann::json& e) override {
    if (e["type"] == "stage_finished" && e["stage"] == "plan") token_.Cancel();
    last_ = e;
  }
  nlohmann::json last_;

 private:
  CancelToken& token_;
};

TEST(OrchestratorE2E, CancelStopsBetweenStages) {
  std::string out = FreshDir("cancel");
  CancelToken token;
  CancelAfterPlan sink(token);
  auto res = RunOnboarding(TinyRequest(out, true, true), sink, token);
  ASSERT_FALSE(res.ok());
  EXPECT_TRUE(IsCancelled(res.status())) << res.status().ToString();
  EXPECT_TRUE(sink.last_["cancelled"].get<bool>());
  EXPECT_FALSE(fs::exists(fs::path(out) / "probe"));
  fs::remove_all(out);
}

TEST(OrchestratorE2E, UnknownModuleIsFlaggedAndTheRunGoesOn) {
  std::string out = FreshDir("unknown");
  std::string over = out + ".override.json";
  std::ofstream(over) << R"({"disable":["kda-chunked"]})";
  RunRequest r = TinyRequest(out, false, false);
  r.templates_override = over;
  NullEventSink sink;
  auto res = RunOnboarding(r, sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_EQ(res->report["outcome"]["unknown_modules"], 1);
  std::ifstream md(out + "/report.md");
  std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("**UNKNOWN**"), std::string::npos);
  EXPECT_NE(text.find("no template for mixer kind 'KDA'"), std::string::npos);
  fs::remove_all(out);
  fs::remove(over);
}

// report.md links every engine export with a path relative to the run folder; each link must open
// the export file this run wrote (same bytes), and no export may be left out of the list.
TEST(OrchestratorE2E, MarkdownReportLinksEveryExportRelativeToTheRunFolder) {
  std::string out = FreshDir("links");
  NullEventSink sink;
  auto res = RunOnboarding(TinyRequest(out, false, false), sink, CancelToken{});
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  std::ifstream md(out + "/report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), {});
  std::set<std::string> linked;
  for (size_t at = text.find("](exports/"); at != std::string::npos; at = text.find("](exports/", at + 1)) {
    const size_t end = text.find(')', at);
    ASSERT_NE(end, std::string::npos);
    const std::string rel = text.substr(at + 2, end - at - 2);
    ASSERT_FALSE(fs::path(rel).is_absolute()) << rel;
    ASSERT_TRUE(fs::is_regular_file(fs::path(out) / rel)) << rel << " does not open from the run folder";
    linked.insert(rel);
  }
  std::set<std::string> written;
  for (const auto& e : fs::directory_iterator(fs::path(out) / "exports"))
    written.insert("exports/" + e.path().filename().string());
  EXPECT_EQ(linked, written);
  EXPECT_TRUE(linked.count("exports/plan.megatron.sh") && linked.count("exports/plan.mindspeed.sh") &&
              linked.count("exports/plan_megatron_bridge.py") && linked.count("exports/plan.sbatch"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace onboard::agent
