// Connection and body limits of the HTTP API (issue 11), on top of cpp-httplib 0.11:
//   - ElasticTaskQueue: `core` connection threads, plus one more thread per connection while all are
//     busy, up to `max`: idle or slow connections (each holds a thread in httplib's model until
//     kIdleBeforeRequestS passes) cannot make /healthz or anyone else wait in a queue;
//     threads started for a burst stay (idle, waiting) until shutdown;
//   - PostWithBodyLimit: POST routes read their body through a content reader and answer 413 as
//     soon as more than `max_body` bytes arrived, whatever the framing (Content-Length or chunked);
//     a declared Content-Length over the limit is refused on the header (ApiServer's pre-routing);
//     after the limit up to kDrainAfterLimitBytes more are read and dropped (a lingering close).
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>

namespace onboard::serve {

inline constexpr int kIdleBeforeRequestS = 2;  // seconds a connection may stay silent before a request
inline constexpr int kListenBacklog = 1024;    // pending connections the kernel queues (httplib: 5)
inline constexpr size_t kDrainAfterLimitBytes = size_t{8} << 20;  // bytes read and dropped after a 413

class ElasticTaskQueue : public httplib::TaskQueue {
 public:
  ElasticTaskQueue(size_t core, size_t max);
  ~ElasticTaskQueue() override;
  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void Work();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::list<std::thread> threads_;
  size_t max_ = 0;
  size_t idle_ = 0;
  bool stop_ = false;
};

// Makes a write to a peer that closed (a client gone mid-stream, a server that answered 413 mid-upload)
// an error return instead of a SIGPIPE that ends the process. Process-wide: Debian's libcpp-httplib
// is built with CPPHTTPLIB_SEND_FLAGS 0, so MSG_NOSIGNAL cannot be asked per call. Idempotent.
void IgnoreBrokenPipes();

using PlainHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

// Registers `handler` for POST `pattern`; the handler sees the whole body in req.body.
void PostWithBodyLimit(httplib::Server& server, const std::string& pattern, size_t max_body, PlainHandler handler);

}  // namespace onboard::serve
