// CancelToken: the one cooperative-cancellation flag of the project. The service (serve/job_queue)
// sets it on POST /v1/jobs/{id}/cancel or shutdown, the loop (agent/) checks it between stages, and
// the probe launcher (backends/probe_launcher.cpp, through ProbeObserver::cancelled) reads it while it
// watches the workers. Set from any thread; never reset.
#pragma once

#include <atomic>

namespace onboard {

class CancelToken {
 public:
  // Returns true when this call set it (false when it was already cancelled).
  bool Cancel() { return !flag_.exchange(true, std::memory_order_relaxed); }
  bool cancelled() const { return flag_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace onboard
