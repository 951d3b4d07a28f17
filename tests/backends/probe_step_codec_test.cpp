// The strict ProbeStep codec (backends/probe_step_codec.h) and the steps.jsonl reader
// (backends/probe_step_tail.h): round trip, and each kind of refusal fails with the field named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "backends/probe_step_codec.h"
#include "backends/probe_step_tail.h"
#include "tests/backends/probe_test_util.h"

namespace onboard {
namespace {

using backends::ProbeStepFromJson;
using backends::ProbeStepFromLine;
using backends::ProbeStepTail;
using backends::ProbeStepToJson;
using backends::ProbeStepToLine;
using nlohmann::json;

// Every field set to a value no default has; loss and one KL entry not finite.
ProbeStep FullStep(int64_t step) {
  ProbeStep s;
  s.step = step;
  s.loss = std::numeric_limits<double>::quiet_NaN();
  s.grad_norm = 0.1234567890123456789;
  s.lr = 3e-3 / 7;
  s.accuracy = 0.3125;
  s.step_s = 0.0171;
  s.tokens_per_s = 12345.678;
  s.comm.all_gather_s = 1e-4;
  s.comm.reduce_scatter_s = 2e-4;
  s.comm.all_to_all_s = 3.5e-4;
  s.comm.all_to_all_hidden_s = 1.5e-4;  // overlap (issue 18)
  s.comm.all_reduce_s = 4e-5;
  s.compute_s = 0.0161;
  s.peak_rss_bytes = 123456789012;
  s.live_peak_bytes = 98765432;
  s.expert_load = {{1, 2, 3, 0}, {7, 0, 0, 9}};
  s.indexer_kl = {0.25, std::numeric_limits<double>::infinity()};
  s.comm.pp_send_s = 5e-5;  // pipeline parallelism (issue 17)
  s.comm.pp_recv_s = 6e-5;
  s.pp_bubble = 0.375;
  s.pp_bubble_by_rank = {0.375, 0.125};
  return s;
}

// Same bits, NaN == NaN.
bool Same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// A valid record with one change applied; the decoder must refuse it.
std::string Refusal(const std::function<void(json&)>& change) {
  json j = ProbeStepToJson(FullStep(3));
  change(j);
  Expected<ProbeStep> s = ProbeStepFromLine(j.dump(), "steps.jsonl:4");
  if (s.ok()) return "ACCEPTED";
  EXPECT_EQ(s.status().code(), ErrorCode::kBadInput);
  return s.status().message();
}

TEST(ProbeStepCodec, RoundTripKeepsEveryField) {
  const ProbeStep a = FullStep(5);
  const std::string line = ProbeStepToLine(a);
  ASSERT_EQ(line.back(), '\n');
  ASSERT_EQ(line.find('\n'), line.size() - 1) << "one record, one line";
  Expected<ProbeStep> b = ProbeStepFromLine(line.substr(0, line.size() - 1), "x");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->step, a.step);
  EXPECT_TRUE(Same(b->loss, a.loss));
  EXPECT_EQ(b->grad_norm, a.grad_norm);
  EXPECT_EQ(b->lr, a.lr);
  EXPECT_EQ(b->accuracy, a.accuracy);
  EXPECT_EQ(b->step_s, a.step_s);
  EXPECT_EQ(b->tokens_per_s, a.tokens_per_s);
  EXPECT_EQ(b->comm.all_gather_s, a.comm.all_gather_s);
  EXPECT_EQ(b->comm.reduce_scatter_s, a.comm.reduce_scatter_s);
  EXPECT_EQ(b->comm.all_to_all_s, a.comm.all_to_all_s);
  EXPECT_EQ(b->comm.all_to_all_hidden_s, a.comm.all_to_all_hidden_s);
  EXPECT_EQ(b->comm.all_reduce_s, a.comm.all_reduce_s);
  EXPECT_EQ(b->compute_s, a.compute_s);
  EXPECT_EQ(b->peak_rss_bytes, a.peak_rss_bytes);
  EXPECT_EQ(b->live_peak_bytes, a.live_peak_bytes);
  EXPECT_EQ(b->expert_load, a.expert_load);
  ASSERT_EQ(b->indexer_kl.size(), 2u);
  EXPECT_EQ(b->indexer_kl[0], 0.25);
  EXPECT_TRUE(std::isnan(b->indexer_kl[1])) << "non-finite is written as null, read as NaN";
  EXPECT_EQ(b->comm.pp_send_s, a.comm.pp_send_s);
  EXPECT_EQ(b->comm.pp_recv_s, a.comm.pp_recv_s);
  EXPECT_EQ(b->pp_bubble, a.pp_bubble);
  EXPECT_EQ(b->pp_bubble_by_rank, a.pp_bubble_by_rank);
  // The written keys are exactly the documented ones.
  json j = ProbeStepToJson(a);
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys,
            (std::vector<std::string>{"accuracy", "comm", "compute_s", "expert_load", "grad_norm",
                                      "indexer_kl", "live_peak_bytes", "loss", "lr", "peak_rss_bytes",
                                      "pp_bubble", "pp_bubble_by_rank", "step", "step_s", "tokens_per_s"}));
}

TEST(ProbeStepCodec, UnknownKeyIsRefused) {
  std::string m = Refusal([](json& j) { j["learning_rate"] = 1e-3; });
  EXPECT_NE(m.find("steps.jsonl:4"), std::string::npos) << m;
  EXPECT_NE(m.find("learning_rate"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown key"), std::string::npos) << m;
  m = Refusal([](json& j) { j["comm"]["p2p_s"] = 0.0; });
  EXPECT_NE(m.find("comm.p2p_s"), std::string::npos) << m;
}

TEST(ProbeStepCodec, WrongTypeIsRefused) {
  std::string m = Refusal([](json& j) { j["loss"] = "2.5"; });
  EXPECT_NE(m.find("'loss'"), std::string::npos) << m;
  EXPECT_NE(m.find("\"2.5\""), std::string::npos) << m;
  m = Refusal([](json& j) { j["step"] = 1.5; });
  EXPECT_NE(m.find("'step'"), std::string::npos) << m;
  EXPECT_NE(m.find("integer"), std::string::npos) << m;
  m = Refusal([](json& j) { j["lr"] = nullptr; });  // only the documented fields may be null
  EXPECT_NE(m.find("'lr'"), std::string::npos) << m;
  m = Refusal([](json& j) { j["expert_load"][1][2] = -4; });
  EXPECT_NE(m.find("expert_load[1][2]"), std::string::npos) << m;
  EXPECT_NE(m.find("-4"), std::string::npos) << m;
  m = Refusal([](json& j) { j["comm"] = 0.5; });
  EXPECT_NE(m.find("'comm'"), std::string::npos) << m;
  m = Refusal([](json& j) { j["indexer_kl"] = {"x"}; });
  EXPECT_NE(m.find("indexer_kl[0]"), std::string::npos) << m;
  m = Refusal([](json& j) { j = json::array(); });
  EXPECT_NE(m.find("'record'"), std::string::npos) << m;
}

TEST(ProbeStepCodec, MissingFieldIsRefused) {
  std::string m = Refusal([](json& j) { j.erase("accuracy"); });
  EXPECT_NE(m.find("'accuracy'"), std::string::npos) << m;
  EXPECT_NE(m.find("missing"), std::string::npos) << m;
  m = Refusal([](json& j) { j["comm"].erase("all_to_all_s"); });
  EXPECT_NE(m.find("comm.all_to_all_s"), std::string::npos) << m;
}

TEST(ProbeStepCodec, TextThatIsNotJsonIsRefused) {
  Expected<ProbeStep> s = ProbeStepFromLine("rank 0 step 3 loss 4.1", "steps.jsonl:4");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("steps.jsonl:4"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("rank 0 step 3"), std::string::npos) << s.status().message();
}

class ProbeStepTailTest : public ::testing::Test {
 protected:
  void SetUp() override { std::remove(path_.c_str()); }
  void TearDown() override { std::remove(path_.c_str()); }
  void Append(const std::string& text) {
    std::ofstream f(path_, std::ios::app | std::ios::binary);
    f << text << std::flush;
  }
  const std::string path_ = testing_probe::TempDir("tail") + ".jsonl";
};

TEST_F(ProbeStepTailTest, PartialLastLineWaitsForItsNewline) {
  ProbeStepTail tail(path_);
  std::vector<ProbeStep> got;
  ASSERT_TRUE(tail.Poll(&got).ok()) << "no file yet: no steps";
  EXPECT_TRUE(got.empty());
  const std::string third = ProbeStepToLine(FullStep(2));
  Append(ProbeStepToLine(FullStep(0)) + ProbeStepToLine(FullStep(1)) + third.substr(0, 40));
  ASSERT_TRUE(tail.Poll(&got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].step, 0);
  EXPECT_EQ(got[1].step, 1);
  ASSERT_TRUE(tail.Poll(&got).ok());
  EXPECT_EQ(got.size(), 2u) << "the partial line is not a step yet";
  Append(third.substr(40));
  ASSERT_TRUE(tail.Finish(&got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].step, 2);
  EXPECT_EQ(got[2].expert_load, FullStep(2).expert_load);
}

TEST_F(ProbeStepTailTest, MalformedCompleteLineIsRefusedWithItsLine) {
  ProbeStepTail tail(path_);
  std::vector<ProbeStep> got;
  json bad = ProbeStepToJson(FullStep(1));
  bad["step_s"] = "slow";
  Append(ProbeStepToLine(FullStep(0)) + bad.dump() + "\n");
  Status st = tail.Poll(&got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path_ + ":2"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("step_s"), std::string::npos) << st.message();
  EXPECT_EQ(got.size(), 1u) << "the good line before it was delivered";
}

TEST_F(ProbeStepTailTest, PartialLineAtTheEndAndStepGapsAreRefused) {
  ProbeStepTail tail(path_);
  std::vector<ProbeStep> got;
  const std::string line = ProbeStepToLine(FullStep(0));
  Append(line.substr(0, line.size() - 1));  // the writer stopped before the newline
  Status st = tail.Finish(&got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path_ + ":1"), std::string::npos) << st.message();
  std::remove(path_.c_str());
  ProbeStepTail gap(path_);
  Append(ProbeStepToLine(FullStep(0)) + ProbeStepToLine(FullStep(2)));
  st = gap.Poll(&got);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(":2: field 'step'"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace onboard
