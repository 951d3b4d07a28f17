// The one error body of the API, {"error": {"code", "message"}}, and Status -> HTTP status.
#include "serve/http_errors.h"

namespace onboard::serve {

int HttpStatusFor(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return 200;
    case ErrorCode::kBadInput: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kInfeasible: return 422;
    case ErrorCode::kNetwork: return 502;
    case ErrorCode::kIo:
    case ErrorCode::kBuild:
    case ErrorCode::kCheckFailed:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

const char* HttpErrorCodeFor(int http_status) {
  switch (http_status) {
    case 400: return "bad_request";
    case 401: return "unauthorized";
    case 403: return "forbidden";
    case 404: return "not_found";
    case 405: return "method_not_allowed";
    case 409: return "conflict";
    case 413: return "payload_too_large";
    case 414: return "uri_too_long";
    case 415: return "unsupported_media_type";
    case 422: return "unprocessable";
    case 429: return "queue_full";
    case 503: return "unavailable";
    default: return http_status >= 500 ? "internal" : "error";
  }
}

HttpError ErrorFromStatus(const Status& st) {
  int http = HttpStatusFor(st.code());
  std::string code = st.code() == ErrorCode::kBadInput ? "bad_request" : ErrorCodeName(st.code());
  return HttpError{http, code, st.message()};
}

void SendJson(httplib::Response& res, int http_status, const nlohmann::json& body) {
  res.status = http_status;
  // Replace invalid UTF-8 (from user-supplied names) instead of throwing.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
}

void SendError(httplib::Response& res, const HttpError& e) {
  SendJson(res, e.status, {{"error", {{"code", e.code}, {"message", e.message}}}});
}

void SendError(httplib::Response& res, int http_status, const std::string& code, const std::string& message) {
  SendError(res, HttpError{http_status, code, message});
}

ApiResult<nlohmann::json> ParseJsonObject(const std::string& body, const std::string& what) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::parse_error& e) {
    return HttpError{400, "bad_request", what + ": body is not valid JSON (byte " + std::to_string(e.byte) + ")"};
  }
  if (!j.is_object()) {
    return HttpError{400, "bad_request", what + ": body must be a JSON object (got " + std::string(j.type_name()) + ")"};
  }
  return j;
}

}  // namespace onboard::serve
