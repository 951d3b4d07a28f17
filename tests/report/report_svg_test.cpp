// SVG charts and the HTML renderer: escaping, gaps for non-finite values, "no data" panels.
#include <gtest/gtest.h>

#include <cmath>

#include "report/report_html.h"
#include "report/svg_charts.h"

namespace onboard::agent {
namespace {

size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgCharts, LineChartSkipsNonFinitePointsAndEscapesText) {
  SvgSeries s{"loss <round 1>", {1, 2, 3, 4}, {3.0, NAN, 2.0, 1.0}};
  std::string svg = SvgLineChart("Loss & co", {s}, "step", "nats");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("Loss &amp; co"), std::string::npos);
  EXPECT_NE(svg.find("loss &lt;round 1&gt;"), std::string::npos);
  EXPECT_EQ(Count(svg, "<circle"), 3u);          // the NaN point is a gap
  EXPECT_EQ(Count(svg, " M"), 2u);               // two path segments around it
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(SvgCharts, EmptyDataGivesANoDataPanel) {
  EXPECT_NE(SvgLineChart("x", {}, "a", "b").find("no data"), std::string::npos);
  EXPECT_NE(SvgScatter("x", {}, "a", "b").find("no data"), std::string::npos);
  EXPECT_NE(SvgTimeline("x", {}).find("no data"), std::string::npos);
  EXPECT_NE(SvgStackedBars("x", {}, {}, {}, "GiB").find("no data"), std::string::npos);
}

TEST(SvgCharts, BarsAndTimelineDrawOneRectPerValue) {
  std::string bars = SvgGroupedBars("load", {"r0", "r1"}, {"before", "after"}, {{10, 2}, {6, 6}}, "tokens");
  EXPECT_EQ(Count(bars, "<rect") - 2 /*background, frame*/ - 2 /*legend*/, 4u);
  std::string stacked = SvgStackedBars("mem", {"chosen"}, {"w", "g"}, {{1.0, 2.0}}, "GiB", 4.0, "usable");
  EXPECT_NE(stacked.find("stroke-dasharray"), std::string::npos);
  std::string tl = SvgTimeline("t", {{"parse", 0, 1, true, ""}, {"plan", 1, 3, true, ""}, {"probe", 4, 2, false, ""}});
  EXPECT_NE(tl.find("#d62728"), std::string::npos);  // the failed stage is red
}

TEST(ReportHtml, SelfContainedAndEscaped) {
  nlohmann::json r = {{"model", {{"name", "<evil>&"}}},
                      {"decisions", {{{"round", 1}, {"rule", "probe_diverged"}, {"action", "lower <lr>"}}}}};
  std::string html = RenderHtmlReport(r);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<evil>"), std::string::npos);
  EXPECT_NE(html.find("&lt;evil&gt;&amp;"), std::string::npos);
  EXPECT_NE(html.find("lower &lt;lr&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

// The probe loss chart draws each round's no-learning baseline as a flat line beside its curve,
// and the verdict column carries the skill metric; a round without baselines gets no line.
TEST(ReportHtml, LossChartDrawsTheNoLearningBaseline) {
  nlohmann::json round = {{"round", 1},
                          {"loss", {5.5, 3.4, 0.2}},
                          {"grad_norm", {1, 1, 1}},
                          {"convergence", "converged"},
                          {"baselines", {{"no_learning_nats", 3.4657}}},
                          {"skill", {{"metric", "copy_accuracy"}, {"value", 0.973}}}};
  nlohmann::json r = {{"probe", {{"rounds", {round}}}}};
  std::string html = RenderHtmlReport(r);
  EXPECT_NE(html.find("round 1 baseline"), std::string::npos);
  EXPECT_NE(html.find("converged (copy_accuracy 97.3%)"), std::string::npos);
  round.erase("baselines");
  r = {{"probe", {{"rounds", {round}}}}};
  EXPECT_EQ(RenderHtmlReport(r).find("round 1 baseline"), std::string::npos);
}

}  // namespace
}  // namespace onboard::agent
