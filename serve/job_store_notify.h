// JobNotifier: wakes SSE followers when any job's events or state change. A generation counter
// plus one condition variable: followers remember the generation they last saw, re-read the store
// when it moves, and stop when the server shuts down.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace onboard::serve {

class JobNotifier {
 public:
  void Notify();
  // Blocks until the generation differs from `seen`, `timeout` passes or Shutdown(); returns the
  // current generation.
  uint64_t WaitPast(uint64_t seen, std::chrono::milliseconds timeout);
  uint64_t generation() const;
  void Shutdown();
  bool shutting_down() const;
  // Open SSE streams: counted so Stop() can let them send `event: shutdown` and their final chunk
  // before the listener closes (httplib stops writing chunked bodies once it is stopped).
  void StreamOpened();
  void StreamClosed();
  // Blocks until no stream is open or `timeout` passes; true when none is open.
  bool WaitStreamsClosed(std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  bool shutdown_ = false;
  int64_t open_streams_ = 0;
};

}  // namespace onboard::serve
