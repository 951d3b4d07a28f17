// ApiServer: the cpp-httplib server of `onboard serve`.
//   - authentication (pre-routing): every route but GET /healthz needs the bearer token; a refused
//     request is answered before its body is read, with Connection: close;
//   - body limit: a declared Content-Length over `max_body` is a 413 on the header; any body
//     (chunked too) is a 413 as soon as more than `max_body` bytes arrived (serve/http_limits.h);
//   - connections: backlog kListenBacklog, silent connections dropped after kIdleBeforeRequestS,
//     connection threads grow while all are busy (ElasticTaskQueue), so /healthz is never queued;
//     at most max_client_connections per client address, 429 over it (serve/http_client_cap.h);
//   - errors: every >= 400 response without a body gets {"error": {"code", "message"}}; a throwing
//     handler is a 500 with that body;
//   - routes: serve/api_routes.h; contract: serve/http_openapi.cpp.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include "serve/api_paths.h"
#include "serve/api_routes.h"
#include "serve/http_client_cap.h"
#include "serve/http_sse.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/job_store_notify.h"

namespace onboard::serve {

inline constexpr int kMaxConnectionThreads = 1024;  // hard cap on concurrent connections served

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0 = any free port (see ApiServer::port())
  std::string token;                    // bearer secret (LoadToken)
  size_t max_body = 16u << 20;          // bytes; larger bodies -> 413
  int http_threads = 32;                // resident connection threads (each SSE follower holds one);
                                        // more start while all are busy, up to kMaxConnectionThreads
  int plan_threads = 2;                 // search threads per POST /v1/plan
  int max_client_connections = kDefaultMaxClientConnections;  // per client address (429 over it)
  SseOptions sse;
  Status Validate() const;
};

class ApiServer {
 public:
  ApiServer(ServerConfig config, AllowedRoots roots, JobStore& store, JobQueue& queue, JobNotifier& notifier,
            int workers);
  ~ApiServer();

  // Binds the listening socket; kNetwork naming host:port on failure.
  [[nodiscard]] Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); returns false when the listener failed.
  bool Serve();
  // Stops accepting, wakes SSE followers, returns once the listener is closed (callable from any thread).
  void Stop();
  bool stopping() const { return stopping_; }

 private:
  void Install();
  void ConfigureTransport();
  void InstallGate();
  void InstallErrorBodies();
  void InstallRoutes();
  void RaiseBacklog();

  ServerConfig config_;
  AllowedRoots roots_;
  JobQueue& queue_;
  JobNotifier& notifier_;
  ApiContext ctx_;
  ClientConnectionCap client_cap_;  // before server_: outlives every connection thread
  httplib::Server server_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
};

}  // namespace onboard::serve
