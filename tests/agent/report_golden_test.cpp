// Golden files for the deterministic parts of the reports of a fixed input: the tiny
// flagship-shaped model on the tiny topology, plan only (no probe, no kernels: their numbers
// depend on the host). Timings are stripped. Regenerate with ONBOARD_REGEN_GOLDEN=1.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "agent/report_json.h"
#include "report/report_markdown.h"
#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

const std::string kGoldenDir = std::string(ONBOARD_TEST_DATA) + "/reports";

std::string ReadFile(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

void CompareOrRegen(const std::string& name, const std::string& actual) {
  std::string path = kGoldenDir + "/" + name;
  const char* regen = std::getenv("ONBOARD_REGEN_GOLDEN");
  if (regen && std::string(regen) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    GTEST_SKIP() << "regenerated " << path;
  }
  ASSERT_TRUE(fs::exists(path)) << path << " missing: run with ONBOARD_REGEN_GOLDEN=1";
  std::string expected = ReadFile(path);
  if (expected != actual) {
    std::string got = path + ".actual";
    std::ofstream(got, std::ios::binary) << actual;
    FAIL() << name << " differs from the golden file; actual output written to " << got
           << " (diff it; regenerate with ONBOARD_REGEN_GOLDEN=1 if the change is intended)";
  }
}

nlohmann::json RunFixedInput() {
  std::string out = testing::FreshDir("golden");
  NullEventSink sink;
  auto res = RunOnboarding(testing::TinyRequest(out, /*probe=*/false, /*kernels=*/false), sink, CancelToken{});
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  fs::remove_all(out);
  return res.ok() ? res->report : nlohmann::json();
}

TEST(ReportGolden, JsonAndMarkdownOfTheTinyModel) {
  nlohmann::json stripped = StripNondeterministic(RunFixedInput());
  ASSERT_TRUE(stripped.is_object());
  // Stripping removes every wall-clock field.
  for (const auto& s : stripped["timeline"]) EXPECT_FALSE(s.contains("seconds"));
  CompareOrRegen("tiny_kimi.report.json", stripped.dump(2) + "\n");
  CompareOrRegen("tiny_kimi.report.md", RenderMarkdownReport(stripped));
}

TEST(ReportMarkdown, RendersEverySectionAndToleratesMissingFields) {
  std::string md = RenderMarkdownReport(nlohmann::json::object());
  for (const char* h : {"# Onboarding report", "## Model", "## Module templates", "## Kernels", "## Probe evidence",
                        "## Agent decisions", "## Stage timeline"})
    EXPECT_NE(md.find(h), std::string::npos) << h;
}

}  // namespace
}  // namespace onboard::agent
