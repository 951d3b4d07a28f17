#include <gtest/gtest.h>
#include <cmath>
#include <cstdlib>
#include "tests/backends/probe_test_util.h"
namespace onboard {
TEST(Scratch, Variants) {
  if (!std::getenv("SCRATCH")) GTEST_SKIP();
  for (int variant = 0; variant < 1; ++variant) {
    ProxySpec s = testing_probe::SmallSpec();
    
    if (variant == 2) { s.index_topk = 0; for (auto& l : s.layers) l.channel = ProxyChannel::kDense; }
    for (uint64_t seed : {1234u, 3u, 5u, 7u, 8u}) {
      auto c1 = testing_probe::SmallConfig(1, "/tmp/h5/s1"); c1.seed = seed; c1.clip = variant == 0 ? 1.0 : 0.0;
      auto c2 = testing_probe::SmallConfig(2, "/tmp/h5/s2"); c2.seed = seed; c2.adam_eps = c1.adam_eps; c2.clip = c1.clip;
      auto a = RunProbeSpec(s, c1); auto b = RunProbeSpec(s, c2);
      ASSERT_TRUE(a.ok() && b.ok());
      double mx = 0; int at = -1;
      for (size_t i = 0; i < a->steps.size(); ++i) { double d = std::abs(a->steps[i].loss - b->steps[i].loss) / a->steps[i].loss; if (d > mx) { mx = d; at = (int)i; } }
      printf("variant %d seed %d max rel %.3g at step %d\n", variant, (int)seed, mx, at);
    }
  }
}
}
