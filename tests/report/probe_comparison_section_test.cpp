// The "Probe: measured beside predicted" section: rows and ratios from the last compared round.
#include <gtest/gtest.h>

#include "report/report_html.h"
#include "report/report_markdown.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

json Round(int n, double tp_measured_s) {
  return {
      {"round", n},
      {"config", {{"ranks", 4}}},
      {"predicted", {{"topology", "measured loopback"}}},
      {"measured", {{"pp_bubble", 0.2}}},
      {"comparison",
       {{"collectives",
         {{{"kind", "tp"}, {"term", "comm.tp"}, {"measured_s", tp_measured_s}, {"predicted_s", 0.1}}}},
        {"pp_bubble", 0.25},
        {"memory", {{"measured_live_peak_bytes", 30.0 * 1048576}, {"predicted_bytes", 24.0 * 1048576}}}}}};
}

json Report(json rounds) { return {{"probe", {{"rounds", std::move(rounds)}}}}; }

TEST(ProbeComparisonSection, LastComparedRoundWithRatios) {
  // Round 2 failed: the section shows round 1's comparison, with measured / predicted per row.
  const std::string md =
      RenderMarkdownReport(Report({Round(1, 0.3), {{"round", 2}, {"error", "worker exited 1"}}}));
  EXPECT_NE(md.find("### Probe: measured beside predicted"), std::string::npos);
  EXPECT_NE(md.find("Round 1 on 4 ranks"), std::string::npos);
  EXPECT_NE(md.find("| tp | comm.tp |"), std::string::npos);
  EXPECT_NE(md.find("| 3.00x |"), std::string::npos);  // 0.3 s measured / 0.1 s predicted
  EXPECT_NE(md.find("| pipeline bubble | bubble share | 20.0% | 25.0% | 0.80x |"), std::string::npos);
  EXPECT_NE(md.find("| live-tensor peak per rank | memory model | 30 MiB | 24 MiB | 1.25x |"),
            std::string::npos)
      << md;
  // A later compared round replaces it.
  const std::string md2 = RenderMarkdownReport(Report({Round(1, 0.3), Round(2, 0.05)}));
  EXPECT_NE(md2.find("Round 2 on 4 ranks"), std::string::npos);
  EXPECT_NE(md2.find("| 0.50x |"), std::string::npos);
  EXPECT_EQ(md2.find("| 3.00x |"), std::string::npos);
  const std::string html = RenderHtmlReport(Report({Round(1, 0.3)}));
  EXPECT_NE(html.find("<h3>Probe: measured beside predicted</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>1.25x</td>"), std::string::npos);
}

TEST(ProbeComparisonSection, NothingDrawnWithoutAComparison) {
  json r = Round(1, 0.3);
  r.erase("comparison");
  EXPECT_EQ(RenderMarkdownReport(Report({r})).find("measured beside predicted"), std::string::npos);
  EXPECT_EQ(RenderHtmlReport(Report({r})).find("measured beside predicted"), std::string::npos);
}

}  // namespace
}  // namespace onboard::agent
