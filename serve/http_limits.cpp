// ElasticTaskQueue and PostWithBodyLimit (see serve/http_limits.h).
#include "serve/http_limits.h"

#include <signal.h>

#include "serve/http_client_cap.h"
#include "serve/http_errors.h"

namespace onboard::serve {

ElasticTaskQueue::ElasticTaskQueue(size_t core, size_t max) : max_(std::max(core, max)) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < core; ++i) threads_.emplace_back([this] { Work(); });
}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(fn));
  // Step 1: every thread busy and room to grow -> one more thread, so nothing waits behind them.
  if (idle_ < jobs_.size() && threads_.size() < max_) threads_.emplace_back([this] { Work(); });
  cv_.notify_one();
}

void ElasticTaskQueue::shutdown() {
  std::list<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

void ElasticTaskQueue::Work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;  // stopping, nothing left
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();                                  // one connection, accept to close
    ClientConnectionCap::EndConnection();  // its per-client slot, if its first request took one
  }
}

void IgnoreBrokenPipes() { signal(SIGPIPE, SIG_IGN); }

void PostWithBodyLimit(httplib::Server& server, const std::string& pattern, size_t max_body, PlainHandler handler) {
  server.Post(pattern, [max_body, handler](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& read) {
    std::string body;
    bool over = false;
    size_t discarded = 0;
    bool complete = read([&](const char* data, size_t n) {
      if (over || body.size() + n > max_body) {
        // Past the limit nothing more is buffered. The rest is read and dropped (up to
        // kDrainAfterLimitBytes) so that the client finishes its upload and reads the 413: closing
        // on unread bytes makes the kernel reset the connection, and the client would see only
        // a broken pipe.
        over = true;
        discarded += n;
        return discarded <= kDrainAfterLimitBytes;
      }
      body.append(data, n);
      return true;
    });
    if (over || !complete) {
      res.set_header("Connection", "close");  // the unread rest must not be parsed as a request
      if (over) return SendError(res, 413, "payload_too_large", "request body exceeds --max-body (" +
                                                                    std::to_string(max_body) + " bytes)");
      return SendError(res, 400, "bad_request", "request body could not be read");
    }
    httplib::Request full = req;
    full.body = std::move(body);
    handler(full, res);
  });
}

}  // namespace onboard::serve
