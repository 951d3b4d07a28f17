// JobStore on a real SQLite file in a temp dir: lifecycle, events, reports, pagination, schema
// versioning and crash recovery (a job left running comes back interrupted and can be requeued).
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "serve/job_store.h"

namespace onboard::serve {
namespace {

namespace fs = std::filesystem;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "onboard-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    db_ = dir_ + "/jobs.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<JobStore> Open() {
    auto s = JobStore::Open(db_);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }

  std::string dir_, db_;
};

TEST_F(JobStoreTest, LifecycleEventsAndReports) {
  auto store = Open();
  ASSERT_TRUE(store);
  auto job = store->Create(R"({"model":"m"})");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->state, JobState::kQueued);
  EXPECT_EQ(job->request_json, R"({"model":"m"})");
  EXPECT_EQ(job->last_event_seq, 1);  // "queued"
  ASSERT_TRUE(store->MarkRunning(job->id).ok());
  EXPECT_FALSE(store->MarkRunning(job->id).ok()) << "a running job cannot start twice";
  auto seq = store->AppendEvent(job->id, "stage_started", R"({"stage":"parse"})");
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 3);
  JobReports reports{R"({"ok":true})", "# report\n", "<html></html>"};
  ASSERT_TRUE(store->Finish(job->id, JobState::kSucceeded, R"({"summary":"done"})", Status::Ok(), reports).ok());
  EXPECT_FALSE(store->Finish(job->id, JobState::kFailed, "", Status::Ok(), {}).ok()) << "finished twice";

  auto got = store->Get(job->id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::kSucceeded);
  EXPECT_EQ(got->attempts, 1);
  EXPECT_GT(got->finished_ms, 0);
  EXPECT_EQ(got->result_json, R"({"summary":"done"})");
  EXPECT_EQ(got->report_formats.size(), 3u);
  auto events = store->EventsAfter(job->id, 0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[0].type, "queued");
  EXPECT_EQ((*events)[1].type, "started");
  EXPECT_EQ((*events)[2].type, "stage_started");
  EXPECT_EQ((*events)[3].type, "succeeded");
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq, static_cast<int64_t>(i + 1));
  auto tail = store->EventsAfter(job->id, 2, 100);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->size(), 2u);
  auto md = store->Report(job->id, "md");
  ASSERT_TRUE(md.ok());
  EXPECT_EQ(*md, "# report\n");
  EXPECT_EQ(store->Report(job->id, "pdf").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store->Get("j-0000000000000000").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(store->AppendEvent("j-0000000000000000", "x", "{}").status().code(), ErrorCode::kNotFound);
}

TEST_F(JobStoreTest, ListPaginatesNewestFirstAndFilters) {
  auto store = Open();
  ASSERT_TRUE(store);
  std::vector<std::string> ids;
  for (int i = 0; i < 7; ++i) {
    auto j = store->Create("{\"n\":" + std::to_string(i) + "}");
    ASSERT_TRUE(j.ok());
    ids.push_back(j->id);
  }
  ASSERT_TRUE(store->MarkRunning(ids[2]).ok());
  std::vector<std::string> seen;
  int64_t before = 0;
  for (int page = 0; page < 10; ++page) {
    auto p = store->List(3, before, std::nullopt);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->total, 7);
    for (const auto& j : p->jobs) seen.push_back(j.id);
    if (p->next_cursor == 0) break;
    before = p->next_cursor;
  }
  ASSERT_EQ(seen.size(), 7u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(seen[i], ids[6 - i]);
  auto running = store->List(10, 0, JobState::kRunning);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->jobs.size(), 1u);
  EXPECT_EQ(running->jobs[0].id, ids[2]);
  EXPECT_EQ(running->total, 1);
  auto queued = store->IdsInState(JobState::kQueued);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->size(), 6u);
  EXPECT_EQ(queued->front(), ids[0]);
}

TEST_F(JobStoreTest, RunningJobComesBackInterruptedAfterCrashAndCanBeRequeued) {
  std::string id;
  {
    auto store = Open();
    ASSERT_TRUE(store);
    auto j = store->Create("{}");
    ASSERT_TRUE(j.ok());
    id = j->id;
    ASSERT_TRUE(store->MarkRunning(id).ok());
    ASSERT_TRUE(store->AppendEvent(id, "stage_started", R"({"stage":"plan"})").ok());
    EXPECT_TRUE(store->recovered().empty());
  }  // closed without finishing: what a crashed server leaves behind
  auto store = Open();
  ASSERT_TRUE(store);
  ASSERT_EQ(store->recovered().size(), 1u);
  EXPECT_EQ(store->recovered()[0], id);
  auto j = store->Get(id);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->state, JobState::kInterrupted);
  EXPECT_EQ(j->error_code, "interrupted");
  auto events = store->EventsAfter(id, 0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().type, "interrupted");
  // Retry path: interrupted -> queued -> running -> succeeded; attempts count both runs.
  ASSERT_TRUE(store->Requeue(id).ok());
  EXPECT_FALSE(store->Requeue(id).ok()) << "a queued job is not retryable";
  ASSERT_TRUE(store->MarkRunning(id).ok());
  ASSERT_TRUE(store->Finish(id, JobState::kSucceeded, "{}", Status::Ok(), {}).ok());
  j = store->Get(id);
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->state, JobState::kSucceeded);
  EXPECT_EQ(j->attempts, 2);
  EXPECT_TRUE(j->error_code.empty());
  // A third open recovers nothing.
  store.reset();
  store = Open();
  ASSERT_TRUE(store);
  EXPECT_TRUE(store->recovered().empty());
}

TEST_F(JobStoreTest, SchemaIsVersionedAndNewerFilesAreRefused) {
  { ASSERT_TRUE(Open()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(st, 0), kJobStoreSchemaVersion);
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = JobStore::Open(db_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(s.status().message().find("user_version"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("99"), std::string::npos);
}

TEST_F(JobStoreTest, NonDatabaseFileIsAnErrorNotACrash) {
  std::ofstream(db_) << "this is not a database, just text that is long enough to have a header......\n";
  auto s = JobStore::Open(db_);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), ErrorCode::kBadInput);
  EXPECT_NE(s.status().message().find(db_), std::string::npos) << s.status().message();
}

TEST_F(JobStoreTest, ConcurrentWritersAndReadersKeepPerJobSequencesDense) {
  auto store = Open();
  ASSERT_TRUE(store);
  auto j = store->Create("{}");
  ASSERT_TRUE(j.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        EXPECT_TRUE(store->AppendEvent(j->id, "log", "{}").ok());
        EXPECT_TRUE(store->Get(j->id).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  auto events = store->EventsAfter(j->id, 0, 1000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 201u);
  for (size_t i = 0; i < events->size(); ++i) EXPECT_EQ((*events)[i].seq, static_cast<int64_t>(i + 1));
  auto n = store->CountEvents();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 201);
}

}  // namespace
}  // namespace onboard::serve
