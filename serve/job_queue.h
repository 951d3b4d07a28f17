// JobQueue: a bounded FIFO of queued job ids and a pool of worker threads that run them.
//
// The runner is injected (JobRunner): `onboard serve` passes the onboarding loop
// (serve/api_job_runner.h -> agent::RunOnboarding); tests pass any real function. A worker:
//   Step 1: pops an id, marks it running in the store (attempt+1, "started" event);
//   Step 2: calls the runner with a JobContext (request JSON, Emit -> store + wake SSE followers,
//           a cancel flag);
//   Step 3: stores the outcome in one transaction: succeeded (summary + reports), failed (error),
//           cancelled (POST /cancel), or interrupted (cancelled by server shutdown; retryable).
// Capacity counts queued jobs only (running ones hold a worker, not a slot). Submit/Retry check the
// capacity and write the store under one lock, so a refused request writes nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve/job_store.h"
#include "serve/job_store_notify.h"
#include "core/cancel_token.h"
#include "core/status.h"

namespace onboard::serve {

// What a runner sees of its job.
class JobContext {
 public:
  JobContext(std::string id, int64_t attempt, nlohmann::json request, JobStore& store, JobNotifier& notifier,
             const CancelToken& cancel)
      : id_(std::move(id)), attempt_(attempt), request_(std::move(request)), store_(store), notifier_(notifier),
        cancel_(cancel) {}
  const std::string& id() const { return id_; }
  int64_t attempt() const { return attempt_; }  // 1 for the first run, +1 per retry
  const nlohmann::json& request() const { return request_; }
  // Stores one event (type + JSON data) and wakes SSE followers. Thread-safe.
  Status Emit(const std::string& type, const nlohmann::json& data);
  bool cancelled() const { return cancel_.cancelled(); }
  // The job's token: the runner passes it on (to the loop and the probe launcher), never copies it.
  const CancelToken& cancel_token() const { return cancel_; }

 private:
  std::string id_;
  int64_t attempt_ = 1;
  nlohmann::json request_;
  JobStore& store_;
  JobNotifier& notifier_;
  const CancelToken& cancel_;
};

struct JobOutput {
  nlohmann::json summary = nlohmann::json::object();  // stored as result_json, shown by GET /v1/jobs/{id}
  JobReports reports;                                 // report.{json,md,html}
};

using JobRunner = std::function<Expected<JobOutput>(JobContext&)>;

struct JobQueueOptions {
  size_t capacity = 64;          // queued (not yet running) jobs; more -> kQueueFull
  int workers = 1;               // jobs run concurrently
  Status Validate() const;
};

enum class Admission { kAccepted, kQueueFull, kShuttingDown };

struct Admitted {
  Admission admission = Admission::kAccepted;
  JobRecord job;                 // valid when kAccepted
};

class JobQueue {
 public:
  JobQueue(JobStore& store, JobNotifier& notifier, JobRunner runner, JobQueueOptions options);
  ~JobQueue();  // Shutdown(0 s)
  JobQueue(const JobQueue&) = delete;
  JobQueue& operator=(const JobQueue&) = delete;

  // Re-queues the store's `queued` jobs (left by a previous server) and starts the workers. Jobs that
  // do not fit in the capacity are finished as interrupted (retryable).
  [[nodiscard]] Status Start();
  // Creates a queued job and enqueues it.
  [[nodiscard]] Expected<Admitted> Submit(const std::string& request_json);
  // failed|cancelled|interrupted -> queued. kBadInput when the job is in another state.
  [[nodiscard]] Expected<Admitted> Retry(const std::string& id);
  // queued: removed and finished as cancelled; running: cancel flag set (the worker finishes it as
  // cancelled when the runner returns). kBadInput when the job already finished.
  [[nodiscard]] Expected<JobRecord> Cancel(const std::string& id);
  // Stops taking jobs, lets running jobs finish for up to `grace`, then cancels the rest; they are
  // stored as interrupted. Waits up to `grace + hard_wait` for workers; returns false when some runner
  // ignored its cancel flag (its job is then marked interrupted here and its thread detached).
  bool Shutdown(std::chrono::milliseconds grace, std::chrono::milliseconds hard_wait = std::chrono::seconds(10));

  size_t queued() const;
  size_t running() const;
  size_t capacity() const { return options_.capacity; }
  // Retry-After hint for a full queue, seconds (mean run time so far, clamped to [1, 60]).
  int64_t RetryAfterSeconds() const;

 private:
  struct Running {
    CancelToken cancel;
    std::atomic<bool> by_shutdown{false};
  };
  void WorkerLoop();
  void RunOne(const std::string& id);

  JobStore& store_;
  JobNotifier& notifier_;
  JobRunner runner_;
  JobQueueOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pending_;
  std::map<std::string, std::shared_ptr<Running>> running_;
  bool stopping_ = false;
  bool started_ = false;
  std::vector<std::thread> workers_;
  std::atomic<int> live_workers_{0};
  std::condition_variable workers_done_;
  int64_t finished_runs_ = 0;
  int64_t run_ms_total_ = 0;
};

}  // namespace onboard::serve
