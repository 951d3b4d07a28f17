// JobNotifier: wakes SSE readers when a job gets a new event.
#include "serve/job_store_notify.h"

namespace onboard::serve {

void JobNotifier::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
  }
  cv_.notify_all();
}

uint64_t JobNotifier::WaitPast(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return generation_ != seen || shutdown_; });
  return generation_;
}

uint64_t JobNotifier::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void JobNotifier::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  cv_.notify_all();
}

bool JobNotifier::shutting_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutdown_;
}

void JobNotifier::StreamOpened() {
  std::lock_guard<std::mutex> lock(mu_);
  ++open_streams_;
}

void JobNotifier::StreamClosed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    --open_streams_;
  }
  cv_.notify_all();
}

bool JobNotifier::WaitStreamsClosed(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return open_streams_ <= 0; });
}

}  // namespace onboard::serve
