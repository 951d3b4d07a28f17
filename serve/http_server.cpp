// ApiServer: binds the listener, installs the routes and limits, serves until shutdown.
#include "serve/http_server.h"

#include <sys/socket.h>

#include <chrono>
#include <exception>

#include "serve/http_auth.h"
#include "serve/http_errors.h"
#include "serve/http_openapi.h"

namespace onboard::serve {

namespace {
// Longest wait in Stop() for open SSE streams to send `event: shutdown` and end cleanly.
constexpr std::chrono::milliseconds kStreamDrain{3000};

// True when a Content-Length header value is absent or a number <= max_body.
bool DeclaredLengthFits(const std::string& value, size_t max_body) {
  if (value.empty()) return true;
  if (value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos) return false;
  return std::stoull(value) <= max_body;
}
}  // namespace

Status ServerConfig::Validate() const {
  if (host.empty()) return BadInput("onboard serve", "--host", "must not be empty");
  if (port < 0 || port > 65535) return BadInput("onboard serve", "--port", "must be in [0, 65535]", std::to_string(port));
  if (token.size() < kMinTokenBytes) return BadInput("onboard serve", "token", "missing or too short");
  if (max_body < 1024 || max_body > (size_t{1} << 31)) {
    return BadInput("onboard serve", "--max-body", "must be in [1024, 2^31] bytes", std::to_string(max_body));
  }
  if (max_client_connections < 1 || max_client_connections > kMaxConnectionThreads) {
    return BadInput("onboard serve", "--max-client-connections", "must be in [1, 1024]",
                    std::to_string(max_client_connections));
  }
  if (http_threads < 2 || http_threads > 1024) {
    return BadInput("onboard serve", "http_threads", "must be in [2, 1024]", std::to_string(http_threads));
  }
  return Status::Ok();
}

ApiServer::ApiServer(ServerConfig config, AllowedRoots roots, JobStore& store, JobQueue& queue,
                     JobNotifier& notifier, int workers)
    : config_(std::move(config)),
      roots_(std::move(roots)),
      queue_(queue),
      notifier_(notifier),
      ctx_{store, queue, notifier, roots_, config_.sse, workers, config_.plan_threads, config_.max_body},
      client_cap_(static_cast<size_t>(config_.max_client_connections)) {
  ONBOARD_ASSERT(config_.Validate().ok(), config_.Validate().message());
  Install();
}

ApiServer::~ApiServer() { Stop(); }

// Installs the server's handlers, in this order: transport settings, the pre-routing gate (Steps 0
// and 1), JSON error bodies (Step 2), the routes (Step 3).
void ApiServer::Install() {
  IgnoreBrokenPipes();  // a client closing an SSE stream must not kill the server
  ConfigureTransport();
  InstallGate();
  InstallErrorBodies();
  InstallRoutes();
}

// Worker threads, body cap, keep-alive and the listening socket's options.
void ApiServer::ConfigureTransport() {
  const int threads = config_.http_threads;
  server_.new_task_queue = [threads] {
    return new ElasticTaskQueue(static_cast<size_t>(threads), static_cast<size_t>(kMaxConnectionThreads));
  };
  server_.set_payload_max_length(config_.max_body);
  server_.set_keep_alive_max_count(10000);
  server_.set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server
  // bind the same port silently instead of failing.
  server_.set_socket_options([this](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
    listen_fd_ = sock;  // Bind() raises its backlog
  });
  server_.set_keep_alive_timeout(kIdleBeforeRequestS);  // also the wait for a first request line
  server_.set_read_timeout(30, 0);
  server_.set_write_timeout(30, 0);
}

// Steps 0 and 1: the per-client connection cap, then authentication and the declared body size,
// before routing and before any body is read.
void ApiServer::InstallGate() {
  const std::string token = config_.token;
  const size_t max_body = config_.max_body;
  server_.set_pre_routing_handler([this, token, max_body](const httplib::Request& req,
                                                          httplib::Response& res) {
    // Step 0: a client over its connection cap, whatever the route.
    if (!client_cap_.Admit(req.remote_addr)) {
      res.set_header("Retry-After", std::to_string(kRetryAfterCapS));
      res.set_header("Connection", "close");
      SendError(res, 429, "too_many_connections",
                "more than --max-client-connections (" + std::to_string(config_.max_client_connections) +
                    ") connections from " + req.remote_addr);
      return httplib::Server::HandlerResponse::Handled;
    }
    // Step 1: authentication (not for /healthz); then a declared body over --max-body is refused
    // on the header, before a byte of it is read.
    if (req.path == "/healthz") return httplib::Server::HandlerResponse::Unhandled;
    if (IsAuthorized(req, token)) {
      const std::string length = req.get_header_value("Content-Length");
      if (DeclaredLengthFits(length, max_body)) return httplib::Server::HandlerResponse::Unhandled;
      res.set_header("Connection", "close");
      SendError(res, 413, "payload_too_large",
                "Content-Length " + length.substr(0, 20) + " exceeds --max-body (" + std::to_string(max_body) + " bytes)");
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");  // the unread body must not be parsed as the next request
    SendError(res, 401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer <token>)");
    return httplib::Server::HandlerResponse::Handled;
  });
}

// Step 2: JSON bodies for every error httplib produces itself (404 route, 413 body, 400 parse),
// and for exceptions.
void ApiServer::InstallErrorBodies() {
  server_.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req,
                                                                      httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404: message = "no route for " + req.method + " " + req.path; break;
      case 413: message = "request body exceeds --max-body"; break;
      default: message = std::string("HTTP ") + std::to_string(res.status);
    }
    SendError(res, res.status, HttpErrorCodeFor(res.status), message);
    return httplib::Server::HandlerResponse::Handled;
  }));
  server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, 500, "internal", "internal error: " + what);
  });
}

// Step 3: the routes.
void ApiServer::InstallRoutes() {
  server_.Get("/healthz", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200,
             {{"status", stopping_ ? "stopping" : "ok"},
              {"queued", queue_.queued()},
              {"running", queue_.running()},
              {"capacity", queue_.capacity()},
              {"workers", ctx_.workers}});
  });
  server_.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, OpenApiDocument());
  });
  RegisterJobRoutes(server_, ctx_);
  RegisterPlanRoute(server_, ctx_);
}

Status ApiServer::Bind() {
  if (config_.port == 0) {
    port_ = server_.bind_to_any_port(config_.host);
    if (port_ <= 0) return Status(ErrorCode::kNetwork, "cannot bind " + config_.host + ":0");
    RaiseBacklog();
    return Status::Ok();
  }
  if (!server_.bind_to_port(config_.host, config_.port)) {
    return Status(ErrorCode::kNetwork,
                  "cannot bind " + config_.host + ":" + std::to_string(config_.port) + " (in use or not permitted)");
  }
  port_ = config_.port;
  RaiseBacklog();
  return Status::Ok();
}

void ApiServer::RaiseBacklog() {
  // httplib listens with a backlog of 5; listen() again on the bound socket only raises it.
  if (listen_fd_ >= 0) ::listen(listen_fd_, kListenBacklog);
}

bool ApiServer::Serve() { return server_.listen_after_bind(); }

void ApiServer::Stop() {
  stopping_ = true;
  notifier_.Shutdown();  // SSE followers stop waiting, send `event: shutdown` and their last chunk
  (void)notifier_.WaitStreamsClosed(kStreamDrain);
  server_.stop();
}

}  // namespace onboard::serve
