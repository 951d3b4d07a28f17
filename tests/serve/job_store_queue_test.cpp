// JobQueue over a real JobStore: bounded admission (a refused submit writes nothing), workers,
// cancel of queued and running jobs, failures and retry, and shutdown marking running jobs
// interrupted while queued jobs survive to the next start.
#include <gtest/gtest.h>

#include <thread>

#include "serve/job_queue.h"
#include "tests/serve/http_test_support.h"

namespace onboard::serve {
namespace {

using testing::Gate;
using testing::TempDir;

// Polls the store until the job is in `want` (bounded: 30 s), returning the last state seen.
JobState WaitForState(JobStore& store, const std::string& id, JobState want) {
  JobState last = JobState::kQueued;
  for (int i = 0; i < 6000; ++i) {
    auto j = store.Get(id);
    if (j.ok()) last = j->state;
    if (last == want) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return last;
}

struct QueueFixture {
  explicit QueueFixture(JobQueueOptions opts) {
    auto s = JobStore::Open(dir.path + "/q.db");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    store = std::move(s).value();
    queue = std::make_unique<JobQueue>(*store, notifier, gate.Runner(), opts);
    EXPECT_TRUE(queue->Start().ok());
  }
  std::string Submit(const std::string& body = "{}") {
    auto a = queue->Submit(body);
    EXPECT_TRUE(a.ok());
    EXPECT_EQ(a->admission, Admission::kAccepted);
    return a->job.id;
  }
  TempDir dir;
  Gate gate;
  JobNotifier notifier;
  std::unique_ptr<JobStore> store;
  std::unique_ptr<JobQueue> queue;
};

TEST(JobQueueTest, RunsJobsToSuccessWithReports) {
  QueueFixture f({8, 2});
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(f.Submit());
  ASSERT_TRUE(f.gate.WaitForWaiters(2));  // two workers -> two jobs at the gate
  EXPECT_EQ(f.queue->running(), 2u);
  f.gate.Open();
  for (const auto& id : ids) {
    ASSERT_EQ(WaitForState(*f.store, id, JobState::kSucceeded), JobState::kSucceeded);
    auto md = f.store->Report(id, "md");
    ASSERT_TRUE(md.ok());
    EXPECT_EQ(*md, "# " + id + "\n");
    auto events = f.store->EventsAfter(id, 0, 100);
    ASSERT_TRUE(events.ok());
    std::vector<std::string> types;
    for (const auto& e : *events) types.push_back(e.type);
    EXPECT_EQ(types, (std::vector<std::string>{"queued", "started", "gate_wait", "succeeded"}));
  }
}

TEST(JobQueueTest, FullQueueRefusesWithoutWriting) {
  QueueFixture f({1, 1});
  std::string running = f.Submit();
  ASSERT_TRUE(f.gate.WaitForWaiters(1));
  std::string queued = f.Submit();
  auto jobs_before = f.store->CountJobs();
  auto events_before = f.store->CountEvents();
  auto refused = f.queue->Submit("{}");
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->admission, Admission::kQueueFull);
  EXPECT_EQ(*f.store->CountJobs(), *jobs_before);
  EXPECT_EQ(*f.store->CountEvents(), *events_before);
  f.gate.Open();
  EXPECT_EQ(WaitForState(*f.store, running, JobState::kSucceeded), JobState::kSucceeded);
  EXPECT_EQ(WaitForState(*f.store, queued, JobState::kSucceeded), JobState::kSucceeded);
}

TEST(JobQueueTest, CancelQueuedAndRunningJobs) {
  QueueFixture f({4, 1});
  std::string running = f.Submit();
  ASSERT_TRUE(f.gate.WaitForWaiters(1));
  std::string queued = f.Submit();
  auto c1 = f.queue->Cancel(queued);
  ASSERT_TRUE(c1.ok());
  EXPECT_EQ(c1->state, JobState::kCancelled);
  EXPECT_EQ(f.queue->queued(), 0u);
  auto c2 = f.queue->Cancel(running);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(WaitForState(*f.store, running, JobState::kCancelled), JobState::kCancelled);
  auto j = f.store->Get(running);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->error_code, "cancelled");
  auto again = f.queue->Cancel(running);
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), ErrorCode::kBadInput);
  // A cancelled job can be retried and then succeeds.
  auto r = f.queue->Retry(running);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->admission, Admission::kAccepted);
  f.gate.Open();
  EXPECT_EQ(WaitForState(*f.store, running, JobState::kSucceeded), JobState::kSucceeded);
}

TEST(JobQueueTest, FailingAndThrowingRunnersFailTheJobNotTheWorker) {
  QueueFixture f({4, 1});
  f.gate.Open();
  std::string bad = f.Submit(R"({"fail":"no such layer"})");
  std::string boom = f.Submit(R"({"throw":true})");
  std::string good = f.Submit();
  EXPECT_EQ(WaitForState(*f.store, bad, JobState::kFailed), JobState::kFailed);
  EXPECT_EQ(WaitForState(*f.store, boom, JobState::kFailed), JobState::kFailed);
  EXPECT_EQ(WaitForState(*f.store, good, JobState::kSucceeded), JobState::kSucceeded);
  auto j = f.store->Get(bad);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->error_code, "bad_input");
  EXPECT_NE(j->error_message.find("no such layer"), std::string::npos);
  j = f.store->Get(boom);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->error_code, "internal");
  EXPECT_NE(j->error_message.find("runner exploded"), std::string::npos);
  auto retry = f.queue->Retry(good);
  ASSERT_FALSE(retry.ok());
  EXPECT_EQ(retry.status().code(), ErrorCode::kBadInput) << "a succeeded job is not retryable";
}

TEST(JobQueueTest, ShutdownInterruptsRunningJobsAndKeepsQueuedOnesForTheNextStart) {
  TempDir dir;
  std::string db = dir.path + "/q.db";
  std::string running, queued;
  {
    auto store = JobStore::Open(db);
    ASSERT_TRUE(store.ok());
    Gate gate;
    JobNotifier notifier;
    JobQueue queue(**store, notifier, gate.Runner(), {4, 1});
    ASSERT_TRUE(queue.Start().ok());
    running = queue.Submit("{}")->job.id;
    ASSERT_TRUE(gate.WaitForWaiters(1));
    queued = queue.Submit("{}")->job.id;
    EXPECT_TRUE(queue.Shutdown(std::chrono::milliseconds(0)));
    auto after = queue.Submit("{}");
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->admission, Admission::kShuttingDown);
    EXPECT_EQ((*store)->Get(running)->state, JobState::kInterrupted);
    EXPECT_EQ((*store)->Get(queued)->state, JobState::kQueued);
  }
  auto store = JobStore::Open(db);
  ASSERT_TRUE(store.ok());
  Gate gate;
  gate.Open();
  JobNotifier notifier;
  JobQueue queue(**store, notifier, gate.Runner(), {4, 1});
  ASSERT_TRUE(queue.Start().ok());
  EXPECT_EQ(WaitForState(**store, queued, JobState::kSucceeded), JobState::kSucceeded);
  auto r = queue.Retry(running);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(WaitForState(**store, running, JobState::kSucceeded), JobState::kSucceeded);
  EXPECT_EQ((*store)->Get(running)->attempts, 2);
}

}  // namespace
}  // namespace onboard::serve
