// Thin RAII layer over the SQLite C API used by the job store: a connection opened in WAL mode with a
// busy timeout, prepared statements with typed bind/column helpers, and a scoped transaction
// (BEGIN IMMEDIATE ... COMMIT, rolled back when not committed). Errors are Status(kIo) naming the
// database file and the SQLite message.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace onboard::serve {

class SqliteDb {
 public:
  // Opens (creating when missing) `path`, sets journal_mode=WAL, synchronous=NORMAL,
  // foreign_keys=ON and a busy timeout of `busy_timeout_ms` milliseconds.
  static Expected<SqliteDb> Open(const std::string& path, int busy_timeout_ms);
  SqliteDb() = default;
  SqliteDb(SqliteDb&& o) noexcept;
  SqliteDb& operator=(SqliteDb&& o) noexcept;
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;
  ~SqliteDb();

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  // Runs one or more statements without results.
  Status Exec(const std::string& sql);
  // "<path>: <what>: <sqlite message>" as kIo.
  Status Error(const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// One prepared statement. Bind indices are 1-based, column indices 0-based (SQLite's convention).
class SqliteStmt {
 public:
  SqliteStmt(SqliteDb& db, const char* sql);
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;
  ~SqliteStmt();

  bool prepared() const { return stmt_ != nullptr; }
  SqliteStmt& Bind(int i, int64_t v);
  SqliteStmt& Bind(int i, const std::string& v);
  SqliteStmt& BindNull(int i);
  // Steps once: true when a row is available, false when done. Errors land in status().
  bool Step();
  // Steps to completion (for statements without rows).
  Status Run();
  const Status& status() const { return status_; }

  int64_t Int(int col) const;
  std::string Text(int col) const;
  bool IsNull(int col) const;

 private:
  SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
  Status status_;
};

// BEGIN IMMEDIATE on construction (takes the write lock up front so the busy timeout applies there,
// not at COMMIT); ROLLBACK on destruction unless Commit() succeeded.
class SqliteTxn {
 public:
  explicit SqliteTxn(SqliteDb& db);
  ~SqliteTxn();
  const Status& begin_status() const { return begin_; }
  Status Commit();

 private:
  SqliteDb& db_;
  Status begin_;
  bool done_ = false;
};

}  // namespace onboard::serve
