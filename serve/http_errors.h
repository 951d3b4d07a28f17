// JSON responses and errors for the HTTP API. Every error body is
//   {"error": {"code": "<snake_case>", "message": "<one line>"}}
// with the HTTP status chosen by the caller or mapped from a Status (HttpStatusFor).
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "core/status.h"

namespace onboard::serve {

struct HttpError {
  int status = 500;
  std::string code;              // "bad_request", "unauthorized", "forbidden", "not_found", ...
  std::string message;
};

// A value or the HTTP error explaining why there is none (API-layer counterpart of Expected).
template <typename T>
class ApiResult {
 public:
  ApiResult(T v) : value_(std::move(v)) {}        // NOLINT: implicit by design
  ApiResult(HttpError e) : error_(std::move(e)) {} // NOLINT
  bool ok() const { return value_.has_value(); }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  const HttpError& error() const { return error_; }

 private:
  std::optional<T> value_;
  HttpError error_;
};

// kBadInput -> 400, kNotFound -> 404, kInfeasible -> 422, kNetwork -> 502, others -> 500.
int HttpStatusFor(ErrorCode code);
// The error code string used for an HTTP status that has no Status behind it.
const char* HttpErrorCodeFor(int http_status);
HttpError ErrorFromStatus(const Status& st);

void SendJson(httplib::Response& res, int http_status, const nlohmann::json& body);
void SendError(httplib::Response& res, const HttpError& e);
void SendError(httplib::Response& res, int http_status, const std::string& code, const std::string& message);

// Parses a JSON object body; a 400 naming the byte offset otherwise.
ApiResult<nlohmann::json> ParseJsonObject(const std::string& body, const std::string& what);

}  // namespace onboard::serve
