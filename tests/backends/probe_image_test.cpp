// The probe's vision tower and image task (issue 12 item 6; backends/proxy_vision.h,
// backends/probe_image.h): the flagship's proxy carries a scaled-down tower, each image-task answer
// is its region's colour, a small proxy learns the answers from the image, and the no_image control
// (blank images, same answers) must fail the learning verdict at the no-image baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/probe_data.h"
#include "backends/probe_image.h"
#include "backends/proxy_model.h"
#include "parsers/hf_config.h"
#include "tests/backends/probe_copy_learner.h"

namespace onboard {
namespace {

using backends::ImageTokens;
using testing_probe::TempDir;

ProxySpec ImageSpec() {
  ProxySpec s = testing_probe::CopyLearnerSpec();
  s.source_model = "image-learner-proxy";
  s.vision.blocks = 1;
  return s;
}

ProbeConfig ImageConfig(const std::string& name) {
  ProbeConfig c = testing_probe::SmallConfig(1, TempDir("image-" + name));
  c.task = ProbeTask::kImage;
  c.steps = 200;
  c.seq = 16;
  c.batch = 32;
  c.lr = 1e-2;
  c.warmup = 10;
  return c;
}

TEST(ImageTask, FlagshipProxyCarriesItsVisionTowerScaledDown) {
  Expected<ModelIR> m = ParseHfConfigFile(std::string(ONBOARD_SOURCE_DIR) + "/examples/flagship/config.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_TRUE(m->vision.has_value());
  const ProxySpec s = ProxyFromModel(*m);
  EXPECT_GE(s.vision.blocks, 1);
  EXPECT_EQ(s.vision.merge, m->vision->merge);  // the 2x2 patch merge is kept
  EXPECT_NE(s.vision.source.find("moonvit"), std::string::npos) << s.vision.source;
  EXPECT_TRUE(s.Validate().ok()) << s.Validate().ToString();
  // The tower is in the embed unit for the image task only.
  ProbeConfig image = ImageConfig("layout"), copy = image;
  copy.task = ProbeTask::kCopy;
  const auto with = backends::BuildLayout(s, image), without = backends::BuildLayout(s, copy);
  EXPECT_GT(with.front().dense.numel, without.front().dense.numel);
  EXPECT_EQ(with.back().dense.numel, without.back().dense.numel);
}

TEST(ImageTask, EachAnswerIsItsRegionsColour) {
  const ProxySpec s = ImageSpec();
  const ProbeConfig c = ImageConfig("data");
  backends::ProbeData data(s, c);
  ASSERT_TRUE(data.status().ok()) << data.status().ToString();
  const backends::Batch b = data.Get(3, 0, 4);
  const int64_t M = ImageTokens(s.vision), S = s.vision.image, side = s.vision.patch * s.vision.merge;
  ASSERT_EQ(b.images.sizes(), (std::vector<int64_t>{4, S, S, 3}));
  EXPECT_EQ(data.CountedTokensPerStep(), c.batch * M);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t r = 0; r < M; ++r) {
      // The region's mean pixel per channel decides the colour (noise 0.5 over side^2 pixels).
      const int64_t y0 = (r / (S / side)) * side, x0 = (r % (S / side)) * side;
      at::Tensor mean = b.images[i].narrow(0, y0, side).narrow(1, x0, side).mean(at::IntArrayRef{0, 1});
      int64_t colour = 0;
      for (int64_t k = 0; k < 3; ++k) colour |= (mean[k].item<float>() > 0 ? 1 : 0) << k;
      EXPECT_EQ(b.targets[i][M + r].item<int64_t>(), 'a' + colour) << "sequence " << i << " region " << r;
      EXPECT_EQ(b.mask[i][M + r].item<float>(), 1.0f);
    }
  EXPECT_EQ(b.mask.sum().item<float>(), static_cast<float>(4 * M));  // only the answers count
  // The same sequence from the same (seed, step, index), on any split of the batch.
  EXPECT_TRUE(at::equal(data.Get(3, 2, 1).images[0], b.images[2]));
}

TEST(ImageTask, SmallProxyLearnsTheColoursFromTheImage) {
  Expected<ProbeResult> r = RunProbeSpec(ImageSpec(), ImageConfig("normal"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->convergence, "converged") << FormatProbeResult(*r);
  EXPECT_NEAR(r->baseline_nats, std::log(8.0), 1e-12);
  EXPECT_LT(r->final_loss, 0.5 * r->baseline_nats);  // image-conditioned answers below no-image
  EXPECT_EQ(r->skill_metric, "image_accuracy");
}

TEST(ImageTask, NoImageControlStaysAtTheNoImageBaseline) {
  ProbeConfig c = ImageConfig("noimage");
  c.control = kControlNoImage;
  Expected<ProbeResult> r = RunProbeSpec(ImageSpec(), c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->convergence, "converged") << FormatProbeResult(*r);
  EXPECT_GT(r->final_loss, 0.9 * r->baseline_nats) << FormatProbeResult(*r);
  EXPECT_LT(r->skill, 0.3);  // chance is 1/8
}

TEST(ImageTask, RefusedWhereItCannotRun) {
  ProxySpec s = testing_probe::CopyLearnerSpec();  // no vision tower
  ProbeConfig c = ImageConfig("refused");
  Status st = c.Validate(s);
  EXPECT_EQ(st.code(), ErrorCode::kBadInput);
  EXPECT_NE(st.message().find("vision tower"), std::string::npos) << st.message();
  c.task = ProbeTask::kCopy;
  c.control = kControlNoImage;
  st = c.Validate(ImageSpec());
  EXPECT_NE(st.message().find("no_image needs task image"), std::string::npos) << st.message();
  c = ImageConfig("short");
  c.seq = 8;  // 4 placeholders + BOS + 4 answers need seq >= 9
  st = c.Validate(ImageSpec());
  EXPECT_NE(st.message().find("seq"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
