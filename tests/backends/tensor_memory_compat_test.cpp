// The tracking allocator counts live tensor bytes (not RSS): a tensor's bytes appear when it is
// made and go when it dies; the peak holds the high-water mark until reset. FreeStorage /
// RefillStorage drop and restore a buffer's bytes under views that keep their shape.
#include <gtest/gtest.h>

#include "backends/tensor_memory_compat.h"

namespace onboard::backends {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(LiveTensorCounter, CountsLiveBytesAndPeak) {
  ASSERT_TRUE(InstallLiveTensorCounter());
  const int64_t before = LiveTensorBytes();
  ResetLiveTensorPeak();
  {
    at::Tensor a = at::empty({kMiB / 4}, at::kFloat);  // 1 MiB
    EXPECT_EQ(LiveTensorBytes() - before, kMiB);
    at::Tensor b = at::empty({kMiB / 2}, at::kFloat);  // 2 MiB more
    EXPECT_EQ(LiveTensorBytes() - before, 3 * kMiB);
  }
  EXPECT_EQ(LiveTensorBytes(), before);                 // both freed
  EXPECT_EQ(LiveTensorPeakBytes() - before, 3 * kMiB);  // the high-water mark stays
  ResetLiveTensorPeak();
  EXPECT_EQ(LiveTensorPeakBytes(), before);
  // A view costs nothing; its base's bytes live as long as the view does.
  at::Tensor v = at::zeros({kMiB / 4}, at::kFloat).narrow(0, 0, 16);
  EXPECT_EQ(LiveTensorBytes() - before, kMiB);
}

TEST(LiveTensorCounter, FreeAndRefillStorageUnderAView) {
  ASSERT_TRUE(InstallLiveTensorCounter());
  at::Tensor buf = at::arange(kMiB / 4, at::kFloat);
  at::Tensor view = buf.narrow(0, 8, 4);  // what autograd would have saved
  const int64_t live = LiveTensorBytes();
  FreeStorage(buf);
  EXPECT_EQ(LiveTensorBytes(), live - kMiB);
  EXPECT_EQ(view.sizes(), (at::IntArrayRef{4}));
  RefillStorage(buf, at::arange(kMiB / 4, at::kFloat) * 2);
  EXPECT_EQ(LiveTensorBytes(), live);
  EXPECT_EQ(view[0].item<float>(), 16.0f);                           // the view sees the new bytes
  EXPECT_ANY_THROW(RefillStorage(buf, at::zeros({8}, at::kFloat)));  // not freed, other size
}

}  // namespace
}  // namespace onboard::backends
