// Thin RAII wrappers over the SQLite C API (connection, statement, bind, step).
#include "serve/job_store_sqlite.h"

#include <utility>

namespace onboard::serve {

Expected<SqliteDb> SqliteDb::Open(const std::string& path, int busy_timeout_ms) {
  SqliteDb db;
  db.path_ = path;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db.db_, flags, nullptr) != SQLITE_OK) {
    Status st = db.Error("open");
    return st;
  }
  sqlite3_extended_result_codes(db.db_, 1);
  sqlite3_busy_timeout(db.db_, busy_timeout_ms);
  // Step 1: WAL so readers never block the writer; NORMAL sync is durable across process crashes
  // (only an OS crash can lose the last transactions).
  ONBOARD_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode=WAL"));
  ONBOARD_RETURN_IF_ERROR(db.Exec("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON"));
  // Step 2: make sure the file really is a database (a text file fails here, not later).
  ONBOARD_RETURN_IF_ERROR(db.Exec("SELECT count(*) FROM sqlite_master"));
  return db;
}

SqliteDb::SqliteDb(SqliteDb&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }

SqliteDb& SqliteDb::operator=(SqliteDb&& o) noexcept {
  if (this != &o) {
    if (db_) sqlite3_close_v2(db_);
    db_ = o.db_;
    path_ = std::move(o.path_);
    o.db_ = nullptr;
  }
  return *this;
}

SqliteDb::~SqliteDb() {
  if (db_) sqlite3_close_v2(db_);
}

Status SqliteDb::Exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return IoError(path_ + ": " + sql.substr(0, 60) + ": " + msg);
  }
  return Status::Ok();
}

Status SqliteDb::Error(const std::string& what) const {
  const char* msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
  return IoError(path_ + ": " + what + ": " + msg);
}

SqliteStmt::SqliteStmt(SqliteDb& db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &stmt_, nullptr) != SQLITE_OK) {
    status_ = db.Error(std::string("prepare ") + std::string(sql).substr(0, 60));
    stmt_ = nullptr;
  }
}

SqliteStmt::~SqliteStmt() { sqlite3_finalize(stmt_); }

SqliteStmt& SqliteStmt::Bind(int i, int64_t v) {
  if (stmt_) sqlite3_bind_int64(stmt_, i, v);
  return *this;
}

SqliteStmt& SqliteStmt::Bind(int i, const std::string& v) {
  if (stmt_) sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}

SqliteStmt& SqliteStmt::BindNull(int i) {
  if (stmt_) sqlite3_bind_null(stmt_, i);
  return *this;
}

bool SqliteStmt::Step() {
  if (!stmt_ || !status_.ok()) return false;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) status_ = db_.Error("step");
  return false;
}

Status SqliteStmt::Run() {
  while (Step()) {
  }
  return status_;
}

int64_t SqliteStmt::Int(int col) const { return sqlite3_column_int64(stmt_, col); }

std::string SqliteStmt::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

bool SqliteStmt::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

SqliteTxn::SqliteTxn(SqliteDb& db) : db_(db) { begin_ = db_.Exec("BEGIN IMMEDIATE"); }

SqliteTxn::~SqliteTxn() {
  if (begin_.ok() && !done_) (void)db_.Exec("ROLLBACK");
}

Status SqliteTxn::Commit() {
  ONBOARD_RETURN_IF_ERROR(begin_);
  Status st = db_.Exec("COMMIT");
  if (st.ok()) done_ = true;
  return st;
}

}  // namespace onboard::serve
