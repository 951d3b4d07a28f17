// ApiServer: the cpp-httplib server of `onboard serve`.
//   - authentication (pre-routing): every route but GET /healthz needs the bearer token; a refused
//     request is answered before its body is read, with Connection: close;
//   - body limit: bodies over `max_body` bytes are refused with 413 before any handler runs;
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
#include "serve/http_sse.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/job_store_notify.h"

namespace onboard::serve {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0 = any free port (see ApiServer::port())
  std::string token;                    // bearer secret (LoadToken)
  size_t max_body = 16u << 20;          // bytes; larger bodies -> 413
  int http_threads = 32;                // connection threads (each SSE follower holds one)
  int plan_threads = 2;                 // search threads per POST /v1/plan
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

  ServerConfig config_;
  AllowedRoots roots_;
  JobQueue& queue_;
  JobNotifier& notifier_;
  ApiContext ctx_;
  httplib::Server server_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
};

}  // namespace onboard::serve
