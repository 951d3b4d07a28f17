// JobStore: jobs, events and reports in SQLite (WAL, one transaction per write, versioned schema).
#include "serve/job_store.h"

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace onboard::serve {

namespace {

// Schema v1. Migrations are appended to kMigrations; entry i brings user_version i to i+1.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  cursor         INTEGER PRIMARY KEY AUTOINCREMENT,
  id             TEXT NOT NULL UNIQUE,
  state          TEXT NOT NULL,
  request_json   TEXT NOT NULL,
  result_json    TEXT NOT NULL DEFAULT '',
  error_code     TEXT NOT NULL DEFAULT '',
  error_message  TEXT NOT NULL DEFAULT '',
  created_ms     INTEGER NOT NULL,
  started_ms     INTEGER NOT NULL DEFAULT 0,
  finished_ms    INTEGER NOT NULL DEFAULT 0,
  attempts       INTEGER NOT NULL DEFAULT 0,
  last_event_seq INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_by_state ON jobs(state, cursor);
CREATE TABLE events (
  job_id    TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  seq       INTEGER NOT NULL,
  type      TEXT NOT NULL,
  data_json TEXT NOT NULL,
  ts_ms     INTEGER NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE reports (
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  format TEXT NOT NULL,
  body   TEXT NOT NULL,
  PRIMARY KEY (job_id, format)
) WITHOUT ROWID;
)sql",
};
constexpr int kNumMigrations = sizeof(kMigrations) / sizeof(kMigrations[0]);
static_assert(kNumMigrations == kJobStoreSchemaVersion, "one migration per schema version");

const char* const kJobColumns =
    "id, state, request_json, result_json, error_code, error_message, created_ms, started_ms, "
    "finished_ms, attempts, last_event_seq, cursor, "
    "(SELECT group_concat(format, ',') FROM reports r WHERE r.job_id = jobs.id)";

JobRecord ReadJob(const SqliteStmt& s) {
  JobRecord j;
  j.id = s.Text(0);
  j.state = ParseJobState(s.Text(1)).value_or(JobState::kFailed);
  j.request_json = s.Text(2);
  j.result_json = s.Text(3);
  j.error_code = s.Text(4);
  j.error_message = s.Text(5);
  j.created_ms = s.Int(6);
  j.started_ms = s.Int(7);
  j.finished_ms = s.Int(8);
  j.attempts = s.Int(9);
  j.last_event_seq = s.Int(10);
  j.cursor = s.Int(11);
  std::stringstream formats(s.Text(12));
  for (std::string f; std::getline(formats, f, ',');) j.report_formats.push_back(f);
  return j;
}

std::string NewJobId() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[24];
  std::snprintf(buf, sizeof(buf), "j-%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

int64_t NowMs() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

const char* JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued: return "queued";
    case JobState::kRunning: return "running";
    case JobState::kSucceeded: return "succeeded";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
    case JobState::kInterrupted: return "interrupted";
  }
  return "failed";
}

std::optional<JobState> ParseJobState(const std::string& s) {
  for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                      JobState::kCancelled, JobState::kInterrupted}) {
    if (s == JobStateName(st)) return st;
  }
  return std::nullopt;
}

bool IsTerminal(JobState s) { return s != JobState::kQueued && s != JobState::kRunning; }

bool IsRetryable(JobState s) {
  return s == JobState::kFailed || s == JobState::kCancelled || s == JobState::kInterrupted;
}

// Borrowed reader connection, returned to the pool on scope exit.
class JobStore::ReaderLease {
 public:
  explicit ReaderLease(JobStore& store) : store_(store), db_(store.AcquireReader()) {}
  ~ReaderLease() {
    if (db_) store_.ReleaseReader(db_);
  }
  SqliteDb* get() const { return db_; }

 private:
  JobStore& store_;
  SqliteDb* db_;
};

Expected<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path, int busy_timeout_ms) {
  std::unique_ptr<JobStore> store(new JobStore());
  store->path_ = path;
  store->busy_timeout_ms_ = busy_timeout_ms;
  auto db = SqliteDb::Open(path, busy_timeout_ms);
  if (!db.ok()) {
    // A file that exists but is not SQLite is bad input (exit 2), not an I/O failure.
    if (db.status().message().find("file is not a database") != std::string::npos) {
      return BadInput(path, "--db", "is not an SQLite database; pass a new path or an onboard job store");
    }
    return db.status();
  }
  store->writer_ = std::move(db).value();
  ONBOARD_RETURN_IF_ERROR(store->Migrate());
  ONBOARD_RETURN_IF_ERROR(store->RecoverRunning());
  return store;
}

Status JobStore::Migrate() {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  SqliteStmt ver(writer_, "PRAGMA user_version");
  if (!ver.Step()) return ver.status().ok() ? writer_.Error("read user_version") : ver.status();
  int64_t version = ver.Int(0);
  if (version > kJobStoreSchemaVersion) {
    return BadInput(path_, "user_version",
                    "database was written by a newer onboard (this binary knows schema v" +
                        std::to_string(kJobStoreSchemaVersion) + ")",
                    std::to_string(version));
  }
  for (int64_t v = version; v < kJobStoreSchemaVersion; ++v) {
    ONBOARD_RETURN_IF_ERROR(writer_.Exec(kMigrations[v]));
  }
  ONBOARD_RETURN_IF_ERROR(writer_.Exec("PRAGMA user_version = " + std::to_string(kJobStoreSchemaVersion)));
  return txn.Commit();
}

Status JobStore::RecoverRunning() {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  std::vector<std::string> ids;
  {
    SqliteStmt q(writer_, "SELECT id FROM jobs WHERE state = 'running' ORDER BY cursor");
    while (q.Step()) ids.push_back(q.Text(0));
    ONBOARD_RETURN_IF_ERROR(q.status());
  }
  const int64_t now = NowMs();
  const std::string message = "the server stopped while this job was running; POST /v1/jobs/{id}/retry";
  for (const auto& id : ids) {
    SqliteStmt u(writer_,
                 "UPDATE jobs SET state = 'interrupted', error_code = 'interrupted', error_message = ?, "
                 "finished_ms = ? WHERE id = ?");
    ONBOARD_RETURN_IF_ERROR(u.Bind(1, message).Bind(2, now).Bind(3, id).Run());
    nlohmann::json data = {{"state", "interrupted"}, {"error", {{"code", "interrupted"}, {"message", message}}}};
    ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, "interrupted", data.dump(), now));
    (void)seq;
  }
  ONBOARD_RETURN_IF_ERROR(txn.Commit());
  recovered_ = ids;
  return Status::Ok();
}

Expected<int64_t> JobStore::AppendEventLocked(const std::string& id, const std::string& type,
                                              const std::string& data_json, int64_t now_ms) {
  SqliteStmt u(writer_, "UPDATE jobs SET last_event_seq = last_event_seq + 1 WHERE id = ? RETURNING last_event_seq");
  u.Bind(1, id);
  if (!u.Step()) {
    if (!u.status().ok()) return u.status();
    return NotFound("job " + id);
  }
  int64_t seq = u.Int(0);
  ONBOARD_RETURN_IF_ERROR(u.Run());
  SqliteStmt ins(writer_, "INSERT INTO events (job_id, seq, type, data_json, ts_ms) VALUES (?, ?, ?, ?, ?)");
  ONBOARD_RETURN_IF_ERROR(ins.Bind(1, id).Bind(2, seq).Bind(3, type).Bind(4, data_json).Bind(5, now_ms).Run());
  return seq;
}

Expected<JobRecord> JobStore::Create(const std::string& request_json) {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  const int64_t now = NowMs();
  std::string id = NewJobId();
  {
    SqliteStmt ins(writer_, "INSERT INTO jobs (id, state, request_json, created_ms) VALUES (?, 'queued', ?, ?)");
    ONBOARD_RETURN_IF_ERROR(ins.Bind(1, id).Bind(2, request_json).Bind(3, now).Run());
  }
  ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, "queued", R"({"state":"queued"})", now));
  (void)seq;
  ONBOARD_RETURN_IF_ERROR(txn.Commit());
  return GetWith(writer_, id);
}

Status JobStore::MarkRunning(const std::string& id) {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  ONBOARD_ASSIGN_OR_RETURN(JobRecord job, GetWith(writer_, id));
  if (job.state != JobState::kQueued) {
    return BadInput("job " + id, "state", "only a queued job can start", JobStateName(job.state));
  }
  const int64_t now = NowMs();
  SqliteStmt u(writer_,
               "UPDATE jobs SET state = 'running', started_ms = ?, attempts = attempts + 1 WHERE id = ?");
  ONBOARD_RETURN_IF_ERROR(u.Bind(1, now).Bind(2, id).Run());
  nlohmann::json data = {{"state", "running"}, {"attempt", job.attempts + 1}};
  ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, "started", data.dump(), now));
  (void)seq;
  return txn.Commit();
}

Status JobStore::Finish(const std::string& id, JobState state, const std::string& result_json,
                        const Status& error, const JobReports& reports) {
  ONBOARD_ASSERT(IsTerminal(state), std::string("Finish with non-terminal state ") + JobStateName(state));
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  ONBOARD_ASSIGN_OR_RETURN(JobRecord job, GetWith(writer_, id));
  if (IsTerminal(job.state)) {
    return BadInput("job " + id, "state", "job already finished", JobStateName(job.state));
  }
  std::string code;
  if (state == JobState::kCancelled || state == JobState::kInterrupted) code = JobStateName(state);
  if (!error.ok()) code = code.empty() ? ErrorCodeName(error.code()) : code;
  const int64_t now = NowMs();
  {
    SqliteStmt u(writer_,
                 "UPDATE jobs SET state = ?, result_json = ?, error_code = ?, error_message = ?, "
                 "finished_ms = ? WHERE id = ?");
    ONBOARD_RETURN_IF_ERROR(u.Bind(1, std::string(JobStateName(state)))
                                .Bind(2, result_json)
                                .Bind(3, code)
                                .Bind(4, error.message())
                                .Bind(5, now)
                                .Bind(6, id)
                                .Run());
  }
  for (const auto& [format, body] : {std::pair<std::string, const std::string*>{"json", &reports.json},
                                     {"md", &reports.md},
                                     {"html", &reports.html}}) {
    if (body->empty()) continue;
    SqliteStmt ins(writer_, "INSERT OR REPLACE INTO reports (job_id, format, body) VALUES (?, ?, ?)");
    ONBOARD_RETURN_IF_ERROR(ins.Bind(1, id).Bind(2, format).Bind(3, *body).Run());
  }
  nlohmann::json data = {{"state", JobStateName(state)}};
  if (!code.empty()) data["error"] = {{"code", code}, {"message", error.message()}};
  ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, JobStateName(state), data.dump(), now));
  (void)seq;
  return txn.Commit();
}

Status JobStore::Requeue(const std::string& id) {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  ONBOARD_ASSIGN_OR_RETURN(JobRecord job, GetWith(writer_, id));
  if (!IsRetryable(job.state)) {
    return BadInput("job " + id, "state", "only failed, cancelled or interrupted jobs can be retried",
                    JobStateName(job.state));
  }
  const int64_t now = NowMs();
  {
    SqliteStmt u(writer_,
                 "UPDATE jobs SET state = 'queued', result_json = '', error_code = '', error_message = '', "
                 "started_ms = 0, finished_ms = 0 WHERE id = ?");
    ONBOARD_RETURN_IF_ERROR(u.Bind(1, id).Run());
    SqliteStmt d(writer_, "DELETE FROM reports WHERE job_id = ?");
    ONBOARD_RETURN_IF_ERROR(d.Bind(1, id).Run());
  }
  nlohmann::json data = {{"state", "queued"}, {"previous_state", JobStateName(job.state)}};
  ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, "retry", data.dump(), now));
  (void)seq;
  return txn.Commit();
}

Expected<int64_t> JobStore::AppendEvent(const std::string& id, const std::string& type,
                                        const std::string& data_json) {
  std::lock_guard<std::mutex> lock(write_mu_);
  SqliteTxn txn(writer_);
  ONBOARD_RETURN_IF_ERROR(txn.begin_status());
  ONBOARD_ASSIGN_OR_RETURN(int64_t seq, AppendEventLocked(id, type, data_json, NowMs()));
  ONBOARD_RETURN_IF_ERROR(txn.Commit());
  return seq;
}

Expected<JobRecord> JobStore::GetWith(SqliteDb& db, const std::string& id) {
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?";
  SqliteStmt q(db, sql.c_str());
  q.Bind(1, id);
  if (!q.Step()) {
    if (!q.status().ok()) return q.status();
    return NotFound("job " + id);
  }
  return ReadJob(q);
}

Expected<JobRecord> JobStore::Get(const std::string& id) {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  return GetWith(*r.get(), id);
}

Expected<JobPage> JobStore::List(int64_t limit, int64_t before, std::optional<JobState> state) {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteDb& db = *r.get();
  // One read transaction so the page and the total agree.
  ONBOARD_RETURN_IF_ERROR(db.Exec("BEGIN"));
  JobPage page;
  std::string filter = " WHERE (?1 IS NULL OR state = ?1)";
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs" + filter +
                    " AND (?2 = 0 OR cursor < ?2) ORDER BY cursor DESC LIMIT ?3";
  std::string csql = "SELECT count(*) FROM jobs" + filter;
  Status st;
  {
    SqliteStmt q(db, sql.c_str());
    if (state) q.Bind(1, std::string(JobStateName(*state))); else q.BindNull(1);
    q.Bind(2, before).Bind(3, limit + 1);
    while (q.Step()) page.jobs.push_back(ReadJob(q));
    st = q.status();
  }
  if (st.ok()) {
    SqliteStmt c(db, csql.c_str());
    if (state) c.Bind(1, std::string(JobStateName(*state))); else c.BindNull(1);
    if (c.Step()) page.total = c.Int(0);
    st = c.status();
  }
  (void)db.Exec("COMMIT");
  ONBOARD_RETURN_IF_ERROR(st);
  if (static_cast<int64_t>(page.jobs.size()) > limit) {
    page.jobs.pop_back();
    page.next_cursor = page.jobs.back().cursor;
  }
  return page;
}

Expected<std::vector<std::string>> JobStore::IdsInState(JobState state) {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteStmt q(*r.get(), "SELECT id FROM jobs WHERE state = ? ORDER BY cursor");
  q.Bind(1, std::string(JobStateName(state)));
  std::vector<std::string> ids;
  while (q.Step()) ids.push_back(q.Text(0));
  ONBOARD_RETURN_IF_ERROR(q.status());
  return ids;
}

Expected<std::vector<JobEvent>> JobStore::EventsAfter(const std::string& id, int64_t after_seq,
                                                      int64_t limit) {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteStmt q(*r.get(),
               "SELECT seq, type, data_json, ts_ms FROM events WHERE job_id = ? AND seq > ? "
               "ORDER BY seq LIMIT ?");
  q.Bind(1, id).Bind(2, after_seq).Bind(3, limit);
  std::vector<JobEvent> out;
  while (q.Step()) out.push_back({q.Int(0), q.Text(1), q.Text(2), q.Int(3)});
  ONBOARD_RETURN_IF_ERROR(q.status());
  return out;
}

Expected<std::string> JobStore::Report(const std::string& id, const std::string& format) {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteStmt q(*r.get(), "SELECT body FROM reports WHERE job_id = ? AND format = ?");
  q.Bind(1, id).Bind(2, format);
  if (!q.Step()) {
    ONBOARD_RETURN_IF_ERROR(q.status());
    return NotFound("report." + format + " of job " + id);
  }
  return q.Text(0);
}

Expected<int64_t> JobStore::CountJobs() {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteStmt q(*r.get(), "SELECT count(*) FROM jobs");
  if (!q.Step()) return q.status().ok() ? writer_.Error("count jobs") : q.status();
  return q.Int(0);
}

Expected<int64_t> JobStore::CountEvents() {
  ReaderLease r(*this);
  if (!r.get()) return writer_.Error("open reader");
  SqliteStmt q(*r.get(), "SELECT count(*) FROM events");
  if (!q.Step()) return q.status().ok() ? writer_.Error("count events") : q.status();
  return q.Int(0);
}

SqliteDb* JobStore::AcquireReader() {
  {
    std::lock_guard<std::mutex> lock(readers_mu_);
    if (!idle_readers_.empty()) {
      SqliteDb* db = idle_readers_.back().release();
      idle_readers_.pop_back();
      return db;
    }
  }
  auto db = SqliteDb::Open(path_, busy_timeout_ms_);
  if (!db.ok()) return nullptr;
  return new SqliteDb(std::move(db).value());
}

void JobStore::ReleaseReader(SqliteDb* db) {
  std::lock_guard<std::mutex> lock(readers_mu_);
  idle_readers_.emplace_back(db);
}

}  // namespace onboard::serve
