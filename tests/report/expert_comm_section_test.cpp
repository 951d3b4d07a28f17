// The "Expert communication by probe round" section: one row per round with expert routing
// recorded, and the last round against the first when the loop changed the expert layout.
#include <gtest/gtest.h>

#include "report/report_html.h"
#include "report/report_markdown.h"

namespace onboard::agent {
namespace {

using nlohmann::json;

json CommRound(int n, const std::string& placement, double copies, double exposed_s) {
  return {{"round", n},
          {"expert_comm",
           {{"nodes", 2},
            {"ranks_per_node", 2},
            {"placement", placement},
            {"physical_slots", 0},
            {"overlap", false},
            {"nodes_per_token", 1.5},
            {"cross_node_rows_per_token", 3.0},
            {"cross_node_copies_per_token", copies},
            {"slow_tier_bytes_per_token", 800.0 * copies},
            {"rank_max_over_mean", 1.25},
            {"a2a_exposed_s", exposed_s},
            {"a2a_hidden_s", 0.0}}}};
}

json CommReport(json rounds) { return {{"probe", {{"rounds", std::move(rounds)}}}}; }

TEST(ExpertCommSection, EveryRoundAndTheChangeWhenTheLoopReplaced) {
  const std::string md = RenderMarkdownReport(CommReport({CommRound(1, "contiguous", 2.0, 0.02),
                                                          {{"round", 2}, {"error", "worker exited 1"}},
                                                          CommRound(3, "set", 1.5, 0.015)}));
  EXPECT_NE(md.find("### Expert communication by probe round"), std::string::npos) << md;
  EXPECT_NE(md.find("| 1 | 2 x 2 | contiguous | off | 1.500 | 3.000 | 2.000 | 1600.0 | 1.250 |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| 3 | 2 x 2 | placed by the loop | off |"), std::string::npos) << md;
  EXPECT_NE(md.find("Round 3 against round 1, measured: node-dedup copies/token 2.000 -> 1.500 (0.75x); "
                    "slow-tier bytes/token 1600.0 -> 1200.0 (0.75x)"),
            std::string::npos)
      << md;
  const std::string html = RenderHtmlReport(CommReport({CommRound(1, "contiguous", 2.0, 0.02)}));
  EXPECT_NE(html.find("<h3>Expert communication by probe round</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>contiguous</td>"), std::string::npos);
}

TEST(ExpertCommSection, NoChangeLineWhenTheLayoutStayedAndNothingWithoutRouting) {
  const std::string same = RenderMarkdownReport(
      CommReport({CommRound(1, "contiguous", 2.0, 0.02), CommRound(2, "contiguous", 1.9, 0.02)}));
  EXPECT_NE(same.find("| 2 | 2 x 2 | contiguous |"), std::string::npos) << same;
  EXPECT_EQ(same.find("against round 1"), std::string::npos) << same;
  json r = CommRound(1, "contiguous", 2.0, 0.02);
  r.erase("expert_comm");
  EXPECT_EQ(RenderMarkdownReport(CommReport({r})).find("Expert communication"), std::string::npos);
  EXPECT_EQ(RenderHtmlReport(CommReport({r})).find("Expert communication"), std::string::npos);
}

}  // namespace
}  // namespace onboard::agent
