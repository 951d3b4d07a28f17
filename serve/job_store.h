// JobStore: onboarding jobs, their event streams and their reports in one SQLite file.
//
// Durability contract (see agent/README.md, "Service"):
//  - WAL mode, busy timeout, every write in one BEGIN IMMEDIATE transaction;
//  - the schema is versioned with PRAGMA user_version (kJobStoreSchemaVersion); a newer file is refused;
//  - Open() turns every job left `running` (the previous server died mid-job) into `interrupted`,
//    appending an "interrupted" event, so it can be retried;
//  - a job's state change and the event announcing it are written in the same transaction, so a
//    reader that sees a terminal state and then reads events has seen every event of that job.
// Thread-safe: one writer connection behind a mutex, a small pool of reader connections.
// Units: timestamps are Unix milliseconds; event sequence numbers start at 1 per job.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serve/job_store_sqlite.h"
#include "core/status.h"

namespace onboard::serve {

constexpr int kJobStoreSchemaVersion = 1;

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled, kInterrupted };
const char* JobStateName(JobState s);                      // "queued", "running", ...
std::optional<JobState> ParseJobState(const std::string& s);
bool IsTerminal(JobState s);                               // everything but queued / running
bool IsRetryable(JobState s);                              // failed, cancelled, interrupted

struct JobRecord {
  std::string id;                // "j-" + 16 hex digits
  JobState state = JobState::kQueued;
  std::string request_json;      // the normalised submission (see api_job_request.h)
  std::string result_json;       // summary written by the runner on success ("" otherwise)
  std::string error_code;        // ErrorCodeName or "cancelled"/"interrupted" ("" when none)
  std::string error_message;
  int64_t created_ms = 0;
  int64_t started_ms = 0;        // 0 = never started
  int64_t finished_ms = 0;       // 0 = not finished
  int64_t attempts = 0;          // times it entered `running`
  int64_t last_event_seq = 0;    // highest event seq stored for this job
  int64_t cursor = 0;            // insertion order; list pagination key
  std::vector<std::string> report_formats;  // formats stored: "json", "md", "html"
};

struct JobEvent {
  int64_t seq = 0;
  std::string type;              // "queued", "started", "stage", ..., "succeeded", "failed", ...
  std::string data_json;         // a JSON value
  int64_t ts_ms = 0;
};

struct JobReports {
  std::string json, md, html;    // empty = not produced
};

struct JobPage {
  std::vector<JobRecord> jobs;
  int64_t next_cursor = 0;       // pass back as `before` for the next page; 0 = no more
  int64_t total = 0;             // jobs matching the filter
};

class JobStore {
 public:
  // Opens or creates the database at `path`; migrates the schema and recovers interrupted jobs.
  [[nodiscard]] static Expected<std::unique_ptr<JobStore>> Open(const std::string& path,
                                                                int busy_timeout_ms = 5000);

  // Inserts a queued job with a fresh id and a "queued" event.
  [[nodiscard]] Expected<JobRecord> Create(const std::string& request_json);
  // queued -> running (attempts+1, "started" event). kBadInput when the job is not queued.
  [[nodiscard]] Status MarkRunning(const std::string& id);
  // running|queued -> terminal state, with result/error, reports and the final event (type = state
  // name, data = {"state", "error"?}) in one transaction.
  [[nodiscard]] Status Finish(const std::string& id, JobState state, const std::string& result_json,
                              const Status& error, const JobReports& reports);
  // failed|cancelled|interrupted -> queued ("retry" event). kBadInput naming the state otherwise.
  [[nodiscard]] Status Requeue(const std::string& id);
  // Appends an event; returns its seq.
  [[nodiscard]] Expected<int64_t> AppendEvent(const std::string& id, const std::string& type,
                                              const std::string& data_json);

  [[nodiscard]] Expected<JobRecord> Get(const std::string& id);
  // Newest first. `before` = cursor from the previous page (0 = start); `state` filters when set.
  [[nodiscard]] Expected<JobPage> List(int64_t limit, int64_t before, std::optional<JobState> state);
  // Jobs in `state`, oldest first (server start-up re-enqueues queued jobs with this).
  [[nodiscard]] Expected<std::vector<std::string>> IdsInState(JobState state);
  // Events with seq > after_seq, oldest first, at most `limit`.
  [[nodiscard]] Expected<std::vector<JobEvent>> EventsAfter(const std::string& id, int64_t after_seq,
                                                            int64_t limit);
  // One stored report: format "json" | "md" | "html". kNotFound when absent.
  [[nodiscard]] Expected<std::string> Report(const std::string& id, const std::string& format);

  // Row counts (tests assert that refused requests leave the store unchanged).
  [[nodiscard]] Expected<int64_t> CountJobs();
  [[nodiscard]] Expected<int64_t> CountEvents();

  // Jobs found `running` by Open() and turned into `interrupted`.
  const std::vector<std::string>& recovered() const { return recovered_; }
  const std::string& path() const { return path_; }

 private:
  JobStore() = default;
  Status Migrate();
  Status RecoverRunning();
  // Inside an open write transaction: appends one event, bumps last_event_seq, returns the seq.
  Expected<int64_t> AppendEventLocked(const std::string& id, const std::string& type,
                                      const std::string& data_json, int64_t now_ms);
  Expected<JobRecord> GetWith(SqliteDb& db, const std::string& id);

  // Reader pool: borrow a connection for one read.
  class ReaderLease;
  SqliteDb* AcquireReader();
  void ReleaseReader(SqliteDb* db);

  std::string path_;
  int busy_timeout_ms_ = 5000;
  std::mutex write_mu_;
  SqliteDb writer_;
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<SqliteDb>> idle_readers_;
  std::vector<std::string> recovered_;
};

// Unix time in milliseconds.
int64_t NowMs();

}  // namespace onboard::serve
