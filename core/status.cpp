// Status, error codes and their exit codes, the BadInput/CheckRange one-line errors, invariant asserts.
#include "core/status.h"

#include <cmath>
#include <sstream>

namespace onboard {

int ExitCodeFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 0;
    case ErrorCode::kBadInput: return 2;
    case ErrorCode::kNotFound: return 2;
    case ErrorCode::kIo: return 3;
    case ErrorCode::kInfeasible: return 4;
    case ErrorCode::kNetwork: return 5;
    case ErrorCode::kBuild: return 6;
    case ErrorCode::kCheckFailed: return 7;
    case ErrorCode::kInternal: return 1;
  }
  return 1;
}

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "ok";
    case ErrorCode::kBadInput: return "bad_input";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kInfeasible: return "infeasible";
    case ErrorCode::kNetwork: return "network";
    case ErrorCode::kBuild: return "build";
    case ErrorCode::kCheckFailed: return "check_failed";
    case ErrorCode::kInternal: return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(ErrorCodeName(code_)) + ": " + message_;
}

namespace {

// Printable ASCII, other bytes as '?', at most `max` of them then "...".
std::string Printable(const std::string& s, size_t max) {
  std::string v;
  for (char c : s.substr(0, max)) v += (c >= 32 && c < 127) ? c : '?';
  if (s.size() > max) v += "...";
  return v;
}

// Control characters (newline, escape, ...) as '?'; the rest (UTF-8 file names) kept.
std::string NoControl(std::string s) {
  for (char& c : s)
    if ((c >= 0 && c < 32) || c == 127) c = '?';
  return s;
}

}  // namespace

Status BadInput(const std::string& file, const std::string& field, const std::string& problem,
                const std::string& value) {
  // Keep the message one line and bounded, whatever bytes the input held: the value, and the field
  // (a JSON path, whose keys come from the input too: "tiers[0].<unknown key>").
  std::ostringstream os;
  os << NoControl(file) << ": field '" << Printable(field, 160) << "': " << NoControl(problem);
  if (!value.empty()) os << " (got " << Printable(value, 80) << ")";
  return Status(ErrorCode::kBadInput, os.str());
}

Status NotFound(const std::string& what) { return Status(ErrorCode::kNotFound, what + ": not found"); }
Status IoError(const std::string& what) { return Status(ErrorCode::kIo, what); }

void ThrowInvariant(const char* file, int line, const char* cond, const std::string& msg) {
  std::ostringstream os;
  os << file << ":" << line << ": invariant '" << cond << "' broken: " << msg;
  throw InvariantError(os.str());
}

Status CheckRange(const std::string& file, const std::string& field, double v, double lo, double hi) {
  if (std::isfinite(v) && v >= lo && v <= hi) return Status::Ok();
  auto num = [](double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  };
  return BadInput(file, field, "must be in [" + num(lo) + ", " + num(hi) + "]", num(v));
}

}  // namespace onboard
