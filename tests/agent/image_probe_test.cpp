// The image probe of `onboard run` (issue 12 item 6; agent/orchestrator_image.cpp): a model with a
// vision tower gets one extra probe in round 1 on the image task, and report.json / report.md /
// report.html carry its verdict, its loss against the no-image baseline (ln 8) and its accuracy; a
// probe that did not learn is a failing verdict. A text-only model gets no image probe and no section.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "orchestrator_test_support.h"

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool TimelineHas(const nlohmann::json& report, const std::string& stage) {
  for (const auto& s : report["timeline"])
    if (s.value("stage", "") == stage) return true;
  return false;
}

// One round of the tiny run (2 ranks, 8 steps), with or without the vision tower.
RunResult RunTiny(const std::string& name, const std::string& model) {
  RunRequest req = testing::TinyRequest(testing::FreshDir(name), /*probe=*/true, /*kernels=*/false);
  req.model_path = model;
  req.max_rounds = 1;
  NullEventSink sink;
  Expected<RunResult> res = RunOnboarding(req, sink, CancelToken{});
  EXPECT_TRUE(res.ok()) << res.status().ToString();
  return res.ok() ? *res : RunResult{};
}

// 8 image steps cannot reach the 90% accuracy bar: the report must say the image path did not learn.
TEST(ImageProbe, MultimodalRunReportsTheImageVerdictAndAShortProbeFailsIt) {
  const RunResult res = RunTiny("image_mm", testing::TinyModel());
  const nlohmann::json& r = res.report;
  ASSERT_TRUE(r.contains("image_probe")) << r.dump(1).substr(0, 2000);
  const nlohmann::json& im = r["image_probe"];
  ASSERT_FALSE(im.contains("error")) << im.dump();
  EXPECT_NEAR(im["no_image_baseline_nats"].get<double>(), std::log(8.0), 1e-9);
  EXPECT_TRUE(im["final_loss"].is_number()) << im.dump();
  EXPECT_TRUE(im["image_accuracy"].is_number()) << im.dump();
  EXPECT_EQ(im["config"]["steps"], 8);
  EXPECT_NE(im["vision_tower"].get<std::string>().find("moonvit"), std::string::npos) << im.dump();
  EXPECT_NE(im["verdict"].get<std::string>(), "converged") << im.dump();
  EXPECT_FALSE(im["learned"].get<bool>());
  EXPECT_FALSE(r["outcome"]["image_learned"].get<bool>());
  EXPECT_TRUE(TimelineHas(r, "image_probe"));
  EXPECT_TRUE(fs::exists(fs::path(res.out_dir) / "probe" / "image" / "probe.json"));
  const std::string md = ReadText(res.artifacts.at("report.md"));
  EXPECT_NE(md.find("### Image probe (vision tower)"), std::string::npos);
  EXPECT_NE(md.find("| verdict | **FAIL: " + im["verdict"].get<std::string>() + "** |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("| no-image baseline | ln 8 = 2.079 nats |"), std::string::npos) << md;
  EXPECT_NE(md.find("| image accuracy | "), std::string::npos) << md;
  EXPECT_NE(md.find("Image path (vision tower): **NOT learned**"), std::string::npos) << md;
  const std::string html = ReadText(res.artifacts.at("report.html"));
  EXPECT_NE(html.find("<h3>Image probe (vision tower)</h3>"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"bad\"><th>verdict</th>"), std::string::npos);
  fs::remove_all(res.out_dir);
}

TEST(ImageProbe, TextOnlyModelHasNoImageProbeOrSection) {
  const RunResult res =
      RunTiny("image_text", std::string(ONBOARD_TEST_DATA) + "/agent/tiny_kimi_text.config.json");
  const nlohmann::json& r = res.report;
  ASSERT_EQ(res.rounds, 1);  // the text probe ran
  EXPECT_FALSE(r.contains("image_probe"));
  EXPECT_FALSE(r["outcome"].contains("image_learned"));
  EXPECT_FALSE(TimelineHas(r, "image_probe"));
  const std::string md = ReadText(res.artifacts.at("report.md"));
  EXPECT_EQ(md.find("Image probe"), std::string::npos);
  EXPECT_EQ(md.find("Image path"), std::string::npos);
  EXPECT_EQ(ReadText(res.artifacts.at("report.html")).find("Image probe"), std::string::npos);
  fs::remove_all(res.out_dir);
}

}  // namespace
}  // namespace onboard::agent
