// Two error channels (see core/README.md):
//  - recoverable errors (bad input, I/O, network, search) travel as Status / Expected<T>;
//  - broken invariants throw InvariantError with file:line via ONBOARD_ASSERT.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace onboard {

// Error classes; ExitCodeFor() maps each to the process exit code the CLI returns.
enum class ErrorCode {
  kOk = 0,
  kBadInput,     // malformed or out-of-range user input (exit 2)
  kNotFound,     // a named file / job / topology does not exist (exit 2)
  kIo,           // read/write failure on something that should exist (exit 3)
  kInfeasible,   // search: nothing fits (exit 4)
  kNetwork,      // rendezvous / collective / HTTP failure (exit 5)
  kBuild,        // compiler or loader failure (exit 6)
  kCheckFailed,  // a numerical / convergence check failed (exit 7)
  kInternal,     // should not happen (exit 1)
};

int ExitCodeFor(ErrorCode code);
const char* ErrorCodeName(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "bad_input: <message>"
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

// Helpers for the common one-line input error: "<file>: field '<field>': <problem> (got <value>)".
Status BadInput(const std::string& file, const std::string& field, const std::string& problem,
                const std::string& value = "");
// "<file>: field '<field>': must be in [lo, hi] (got v)" unless lo <= v <= hi and v is finite.
Status CheckRange(const std::string& file, const std::string& field, double v, double lo, double hi);
Status NotFound(const std::string& what);
Status IoError(const std::string& what);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {          // NOLINT
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "Expected built from Ok status");
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() &;
  const T& value() const&;
  T&& value() &&;
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

// Thrown by ONBOARD_ASSERT: a broken invariant (a bug), never bad user input.
class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void ThrowInvariant(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace onboard

#define ONBOARD_ASSERT(cond, msg)                                         \
  do {                                                                    \
    if (!(cond)) ::onboard::ThrowInvariant(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)

// Early-return helpers.
#define ONBOARD_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::onboard::Status _st = (expr);            \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define ONBOARD_CONCAT_INNER(a, b) a##b
#define ONBOARD_CONCAT(a, b) ONBOARD_CONCAT_INNER(a, b)
#define ONBOARD_ASSIGN_OR_RETURN(lhs, expr) \
  ONBOARD_ASSIGN_OR_RETURN_IMPL(ONBOARD_CONCAT(_exp_, __LINE__), lhs, expr)
#define ONBOARD_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

namespace onboard {
template <typename T>
T& Expected<T>::value() & {
  ONBOARD_ASSERT(ok(), "value() on error: " + std::get<Status>(v_).ToString());
  return std::get<T>(v_);
}
template <typename T>
const T& Expected<T>::value() const& {
  ONBOARD_ASSERT(ok(), "value() on error: " + std::get<Status>(v_).ToString());
  return std::get<T>(v_);
}
template <typename T>
T&& Expected<T>::value() && {
  ONBOARD_ASSERT(ok(), "value() on error: " + std::get<Status>(v_).ToString());
  return std::move(std::get<T>(v_));
}
}  // namespace onboard
