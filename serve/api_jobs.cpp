// Job routes: submit, list, get, events (SSE), reports, cancel, retry.
#include <charconv>
#include <optional>

#include "serve/api_job_request.h"
#include "serve/api_routes.h"
#include "serve/http_errors.h"

namespace onboard::serve {

using nlohmann::json;

namespace {

// "j-" + 16 lowercase hex digits (JobStore ids); anything else is a 404 without touching the store.
bool IsJobId(const std::string& s) {
  if (s.size() != 18 || s.compare(0, 2, "j-") != 0) return false;
  for (size_t i = 2; i < s.size(); ++i) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::optional<int64_t> ParseNonNegative(const std::string& s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

// The body is always parsed as JSON; only types that cannot be JSON are refused. (curl -d sends
// application/x-www-form-urlencoded unless told otherwise, so that one is accepted.)
bool IsJsonContentType(const httplib::Request& req) {
  if (!req.has_header("Content-Type")) return true;
  std::string ct = req.get_header_value("Content-Type");
  return ct.rfind("multipart/", 0) != 0 && ct.rfind("image/", 0) != 0 && ct.rfind("application/octet-stream", 0) != 0;
}

// Loads the job named by the first regex group, or sends 404 and returns nullopt.
std::optional<JobRecord> LoadJob(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  std::string id = req.matches[1];
  if (!IsJobId(id)) {
    SendError(res, 404, "not_found", "job " + id.substr(0, 40) + ": not found");
    return std::nullopt;
  }
  auto job = ctx.store.Get(id);
  if (!job.ok()) {
    SendError(res, ErrorFromStatus(job.status()));
    return std::nullopt;
  }
  return std::move(job).value();
}

void SendAdmission(ApiContext& ctx, httplib::Response& res, const Expected<Admitted>& a, int ok_status) {
  if (!a.ok()) return SendError(res, ErrorFromStatus(a.status()));
  switch (a->admission) {
    case Admission::kAccepted:
      res.set_header("Location", "/v1/jobs/" + a->job.id);
      return SendJson(res, ok_status, JobToJson(a->job));
    case Admission::kQueueFull:
      res.set_header("Retry-After", std::to_string(ctx.queue.RetryAfterSeconds()));
      return SendError(res, 429, "queue_full",
                       "the job queue is full (" + std::to_string(ctx.queue.capacity()) + " queued); retry later");
    case Admission::kShuttingDown:
      res.set_header("Retry-After", "10");
      return SendError(res, 503, "unavailable", "the server is shutting down");
  }
}

void Submit(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  if (!IsJsonContentType(req)) {
    return SendError(res, 415, "unsupported_media_type", "POST /v1/jobs takes application/json");
  }
  auto body = ParseJsonObject(req.body, "POST /v1/jobs");
  if (!body.ok()) return SendError(res, body.error());
  auto normalized = ParseJobSubmission(body.value(), ctx.roots);
  if (!normalized.ok()) return SendError(res, normalized.error());
  SendAdmission(ctx, res, ctx.queue.Submit(normalized.value().dump()), 202);
}

void List(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  int64_t limit = 50, before = 0;
  std::optional<JobState> state;
  if (req.has_param("limit")) {
    auto v = ParseNonNegative(req.get_param_value("limit"));
    if (!v || *v < 1 || *v > 500) return SendError(res, 400, "bad_request", "query 'limit': must be an integer in [1, 500]");
    limit = *v;
  }
  if (req.has_param("before")) {
    auto v = ParseNonNegative(req.get_param_value("before"));
    if (!v) return SendError(res, 400, "bad_request", "query 'before': must be a non-negative integer (a next_cursor)");
    before = *v;
  }
  if (req.has_param("state")) {
    state = ParseJobState(req.get_param_value("state"));
    if (!state) return SendError(res, 400, "bad_request", "query 'state': unknown job state");
  }
  auto page = ctx.store.List(limit, before, state);
  if (!page.ok()) return SendError(res, ErrorFromStatus(page.status()));
  json jobs = json::array();
  for (const auto& j : page->jobs) jobs.push_back(JobToJson(j));
  json body = {{"jobs", jobs}, {"total", page->total}};
  body["next_cursor"] = page->next_cursor ? json(page->next_cursor) : json(nullptr);
  SendJson(res, 200, body);
}

void Events(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto job = LoadJob(ctx, req, res);
  if (!job) return;
  int64_t after = 0;
  std::string raw = req.has_header("Last-Event-ID") ? req.get_header_value("Last-Event-ID")
                    : req.has_param("after")        ? req.get_param_value("after")
                                                    : "";
  if (!raw.empty()) {
    auto v = ParseNonNegative(raw);
    if (!v) return SendError(res, 400, "bad_request", "Last-Event-ID / after: must be a non-negative integer");
    after = *v;
  }
  StreamJobEvents(res, ctx.store, ctx.notifier, job->id, after, ctx.sse);
}

void Report(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto job = LoadJob(ctx, req, res);
  if (!job) return;
  std::string format = req.matches[2];
  if (!IsTerminal(job->state)) {
    return SendError(res, 409, "conflict",
                     "job " + job->id + " is " + JobStateName(job->state) + "; its report exists once it succeeds");
  }
  auto body = ctx.store.Report(job->id, format);
  if (!body.ok()) {
    std::string why = job->state == JobState::kSucceeded ? "the run produced no report." + format
                                                         : "job " + job->id + " " + JobStateName(job->state) +
                                                               " without a report";
    return SendError(res, 404, "not_found", why);
  }
  const char* type = format == "json" ? "application/json"
                     : format == "md" ? "text/markdown; charset=utf-8"
                                      : "text/html; charset=utf-8";
  res.status = 200;
  res.set_content(std::move(body).value(), type);
}

void Cancel(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto job = LoadJob(ctx, req, res);
  if (!job) return;
  if (IsTerminal(job->state)) {
    return SendError(res, 409, "conflict", "job " + job->id + " already " + JobStateName(job->state));
  }
  auto after = ctx.queue.Cancel(job->id);
  if (!after.ok()) {
    HttpError e = ErrorFromStatus(after.status());
    if (after.status().code() == ErrorCode::kBadInput) e = {409, "conflict", after.status().message()};
    return SendError(res, e);
  }
  SendJson(res, 202, JobToJson(*after));
}

void Retry(ApiContext& ctx, const httplib::Request& req, httplib::Response& res) {
  auto job = LoadJob(ctx, req, res);
  if (!job) return;
  if (!IsRetryable(job->state)) {
    return SendError(res, 409, "conflict",
                     "job " + job->id + " is " + JobStateName(job->state) +
                         "; only failed, cancelled or interrupted jobs can be retried");
  }
  auto a = ctx.queue.Retry(job->id);
  if (!a.ok() && a.status().code() == ErrorCode::kBadInput) {
    return SendError(res, 409, "conflict", a.status().message());
  }
  SendAdmission(ctx, res, a, 202);
}

}  // namespace

json JobToJson(const JobRecord& job) {
  json request = json::parse(job.request_json, nullptr, /*allow_exceptions=*/false);
  json j = {{"id", job.id},
            {"state", JobStateName(job.state)},
            {"created_ms", job.created_ms},
            {"started_ms", job.started_ms},
            {"finished_ms", job.finished_ms},
            {"attempts", job.attempts},
            {"last_event_seq", job.last_event_seq},
            {"request", request.is_discarded() ? json(nullptr) : PublicRequestView(request)}};
  json result = job.result_json.empty() ? json(nullptr)
                                        : json::parse(job.result_json, nullptr, /*allow_exceptions=*/false);
  j["result"] = result.is_discarded() ? json(nullptr) : result;
  j["error"] = job.error_code.empty() ? json(nullptr)
                                      : json{{"code", job.error_code}, {"message", job.error_message}};
  json reports = json::object();
  for (const auto& f : job.report_formats) reports[f] = "/v1/jobs/" + job.id + "/report." + f;
  j["reports"] = reports;
  j["links"] = {{"self", "/v1/jobs/" + job.id},
                {"events", "/v1/jobs/" + job.id + "/events"},
                {"cancel", "/v1/jobs/" + job.id + "/cancel"},
                {"retry", "/v1/jobs/" + job.id + "/retry"}};
  return j;
}

const std::vector<RouteDecl>& JobRouteDecls() {
  static const std::vector<RouteDecl> kDecls = {
      {"post", "/v1/jobs", {202, 400, 403, 404, 415, 429, 503}},
      {"get", "/v1/jobs", {200, 400}},
      {"get", "/v1/jobs/{id}", {200, 404}},
      {"get", "/v1/jobs/{id}/events", {200, 400, 404}},
      {"get", "/v1/jobs/{id}/report.json", {200, 404, 409}},
      {"get", "/v1/jobs/{id}/report.md", {200, 404, 409}},
      {"get", "/v1/jobs/{id}/report.html", {200, 404, 409}},
      {"post", "/v1/jobs/{id}/cancel", {202, 404, 409}},
      {"post", "/v1/jobs/{id}/retry", {202, 404, 409, 429, 503}},
  };
  return kDecls;
}

void RegisterJobRoutes(httplib::Server& server, ApiContext& ctx) {
  ApiContext* c = &ctx;
  PostWithBodyLimit(server, "/v1/jobs", c->max_body, [c](const httplib::Request& q, httplib::Response& r) { Submit(*c, q, r); });
  server.Get("/v1/jobs", [c](const httplib::Request& q, httplib::Response& r) { List(*c, q, r); });
  server.Get(R"(/v1/jobs/([^/]+))", [c](const httplib::Request& q, httplib::Response& r) {
    if (auto job = LoadJob(*c, q, r)) SendJson(r, 200, JobToJson(*job));
  });
  server.Get(R"(/v1/jobs/([^/]+)/events)", [c](const httplib::Request& q, httplib::Response& r) { Events(*c, q, r); });
  server.Get(R"(/v1/jobs/([^/]+)/report\.(json|md|html))",
             [c](const httplib::Request& q, httplib::Response& r) { Report(*c, q, r); });
  PostWithBodyLimit(server, R"(/v1/jobs/([^/]+)/cancel)", c->max_body,
                    [c](const httplib::Request& q, httplib::Response& r) { Cancel(*c, q, r); });
  PostWithBodyLimit(server, R"(/v1/jobs/([^/]+)/retry)", c->max_body,
                    [c](const httplib::Request& q, httplib::Response& r) { Retry(*c, q, r); });
}

}  // namespace onboard::serve
