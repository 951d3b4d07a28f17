// The canonical pairwise order: any split of 2^k items into aligned power-of-two blocks, each
// summed first, gives the bits of summing all items at once (what makes probe layouts identical).
#include <gtest/gtest.h>

#include "backends/ordered_sum.h"

namespace onboard::backends {
namespace {

TEST(OrderedSum, AlignedBlocksGiveTheSameBitsAsOneSum) {
  at::manual_seed(11);
  // Values of very different magnitudes, so that the summation order matters in fp32.
  at::Tensor items = at::randn({16, 1000}) * at::pow(10.0, at::randint(-4, 5, {16, 1000}).to(at::kFloat));
  const at::Tensor whole = TreeSumRows(items);
  for (int64_t blocks : {2, 4, 8, 16}) {
    const int64_t per = 16 / blocks;
    std::vector<at::Tensor> partials;
    for (int64_t b = 0; b < blocks; ++b) {
      TreeAccumulator acc;  // one "rank" accumulating its micro-batches
      for (int64_t i = 0; i < per; ++i) acc.Push(items[b * per + i]);
      partials.push_back(acc.Take());
    }
    const at::Tensor combined = TreeSumRows(at::stack(partials));  // the cross-rank sum
    EXPECT_TRUE(at::equal(combined, whole)) << blocks << " blocks";
  }
  // The sequential order is a different rounding (so the equality above is not vacuous).
  at::Tensor seq = items[0].clone();
  for (int64_t i = 1; i < 16; ++i) seq = seq + items[i];
  EXPECT_FALSE(at::equal(seq, whole));
  EXPECT_TRUE(at::allclose(seq, whole, 1e-3, 1e-2));
}

TEST(OrderedSum, EmptyAndSingle) {
  TreeAccumulator acc;
  EXPECT_FALSE(acc.Take().defined());
  acc.Push(at::ones({3}));
  EXPECT_TRUE(at::equal(acc.Take(), at::ones({3})));
  EXPECT_TRUE(acc.empty());
  EXPECT_TRUE(at::equal(TreeSumRows(at::zeros({0, 2})), at::zeros({2})));
  // Three items (not a power of two): (0+1)+2.
  at::Tensor x = at::tensor({1e8f, -1e8f, 1.0f});
  EXPECT_EQ(TreeSumRows(x.view({3, 1})).item<float>(), 1.0f);
}

}  // namespace
}  // namespace onboard::backends
