// ApiServer: binds the listener, installs the routes and limits, serves until shutdown.
#include "serve/http_server.h"

#include <sys/socket.h>

#include <exception>

#include "serve/http_auth.h"
#include "serve/http_errors.h"
#include "serve/http_openapi.h"

namespace onboard::serve {

Status ServerConfig::Validate() const {
  if (host.empty()) return BadInput("onboard serve", "--host", "must not be empty");
  if (port < 0 || port > 65535) return BadInput("onboard serve", "--port", "must be in [0, 65535]", std::to_string(port));
  if (token.size() < kMinTokenBytes) return BadInput("onboard serve", "token", "missing or too short");
  if (max_body < 1024 || max_body > (size_t{1} << 31)) {
    return BadInput("onboard serve", "--max-body", "must be in [1024, 2^31] bytes", std::to_string(max_body));
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
      ctx_{store, queue, notifier, roots_, config_.sse, workers, config_.plan_threads} {
  ONBOARD_ASSERT(config_.Validate().ok(), config_.Validate().message());
  Install();
}

ApiServer::~ApiServer() { Stop(); }

void ApiServer::Install() {
  const int threads = config_.http_threads;
  server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  server_.set_payload_max_length(config_.max_body);
  server_.set_keep_alive_max_count(10000);
  server_.set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server
  // bind the same port silently instead of failing.
  server_.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
  });
  server_.set_read_timeout(30, 0);
  server_.set_write_timeout(30, 0);

  // Step 1: authentication before routing (and before any body is read).
  const std::string token = config_.token;
  server_.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/healthz") return httplib::Server::HandlerResponse::Unhandled;
    if (IsAuthorized(req, token)) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    res.set_header("Connection", "close");  // the unread body must not be parsed as the next request
    SendError(res, 401, "unauthorized", "missing or invalid bearer token (Authorization: Bearer <token>)");
    return httplib::Server::HandlerResponse::Handled;
  });

  // Step 2: JSON bodies for every error httplib produces itself (404 route, 413 body, 400 parse).
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

  // Step 3: routes.
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
    return Status::Ok();
  }
  if (!server_.bind_to_port(config_.host, config_.port)) {
    return Status(ErrorCode::kNetwork,
                  "cannot bind " + config_.host + ":" + std::to_string(config_.port) + " (in use or not permitted)");
  }
  port_ = config_.port;
  return Status::Ok();
}

bool ApiServer::Serve() { return server_.listen_after_bind(); }

void ApiServer::Stop() {
  stopping_ = true;
  notifier_.Shutdown();  // SSE followers stop waiting and close their streams
  server_.stop();
}

}  // namespace onboard::serve
