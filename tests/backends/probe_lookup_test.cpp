// The lookup task (backends/probe_lookup.h): a fixed table, its no-learning baseline, the sequences
// the data generates, and the config's checks. The task's real probe with and without the router
// is measured in backends/README.md "Lookup task" (minutes, not a unit test).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/probe_data.h"
#include "backends/probe_lookup.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using backends::LookupTable;
using backends::LookupUnigramNats;

TEST(ProbeLookup, TableIsFixedAndItsBaselineIsTheValueEntropy) {
  const std::vector<int64_t> t = LookupTable(16, 16);
  ASSERT_EQ(t.size(), 256u);
  EXPECT_EQ(t, LookupTable(16, 16));  // the task, not the run
  EXPECT_NE(t, LookupTable(16, 15));
  for (int64_t y : t) EXPECT_TRUE(y >= 0 && y < 16);
  const double h = LookupUnigramNats(t, 16);
  EXPECT_LE(h, std::log(16.0));
  EXPECT_GT(h, std::log(16.0) - 0.1);                           // near-uniform values
  EXPECT_NEAR(LookupUnigramNats({3, 3, 3, 3}, 4), 0.0, 1e-12);  // one value: nothing to learn
  EXPECT_NEAR(LookupUnigramNats({0, 1, 0, 1}, 4), std::log(2.0), 1e-12);
}

// Every counted target is Y[a][b] of the two tokens before it; nothing else is counted.
TEST(ProbeLookup, SequencesCountOnlyTheTableValues) {
  ProbeConfig c = testing_probe::SmallConfig(1, "");
  c.task = ProbeTask::kLookup;
  const backends::ProbeData data(testing_probe::SmallSpec(), c);
  ASSERT_TRUE(data.status().ok()) << data.status().ToString();
  EXPECT_EQ(data.CountedTokensPerStep(), c.batch * backends::LookupTriples(c.seq));
  const std::vector<int64_t> table = LookupTable(c.lookup_keys, c.lookup_values);
  const backends::Batch b = data.Get(3, 0, 4);
  int64_t counted = 0;
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t t = 0; t < c.seq; ++t) {
      if (b.mask[i][t].item<float>() == 0.0f) continue;
      ++counted;
      const int64_t a = b.tokens[i][t - 1].item<int64_t>() - 'A', k = b.tokens[i][t].item<int64_t>() - 'a';
      ASSERT_TRUE(a >= 0 && a < c.lookup_keys && k >= 0 && k < c.lookup_keys) << i << "," << t;
      EXPECT_EQ(b.targets[i][t].item<int64_t>(), 128 + table[static_cast<size_t>(a * c.lookup_keys + k)]);
    }
  EXPECT_EQ(counted, 4 * backends::LookupTriples(c.seq));
}

TEST(ProbeLookup, BadSizesAndLoraAreRefusedWithTheField) {
  ProbeConfig c = testing_probe::SmallConfig(1, "");
  c.task = ProbeTask::kLookup;
  c.lookup_keys = 27;
  Status st = c.Validate(testing_probe::SmallSpec());
  EXPECT_NE(st.message().find("lookup_keys"), std::string::npos) << st.message();
  c.lookup_keys = 16;
  c.lookup_values = 1;
  st = c.Validate(testing_probe::SmallSpec());
  EXPECT_NE(st.message().find("lookup_values"), std::string::npos) << st.message();
  c.lookup_values = 16;
  c.mode = FinetuneMode::kLoRA;
  st = c.Validate(testing_probe::SmallSpec());
  EXPECT_NE(st.message().find("mode full only"), std::string::npos) << st.message();
  c.mode = FinetuneMode::kFull;
  EXPECT_TRUE(c.Validate(testing_probe::SmallSpec()).ok());
  // The task survives the launcher -> worker JSON.
  ProxySpec spec;
  ProbeConfig back;
  c.lookup_keys = 9;
  ASSERT_TRUE(
      ProbeSpecConfigFromJson(ProbeSpecConfigToJson(testing_probe::SmallSpec(), c), &spec, &back).ok());
  EXPECT_EQ(back.task, ProbeTask::kLookup);
  EXPECT_EQ(back.lookup_keys, 9);
}

}  // namespace
}  // namespace onboard
