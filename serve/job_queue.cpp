// JobQueue: bounded admission, worker threads, cancel, retry and graceful shutdown.
#include "serve/job_queue.h"

#include <algorithm>
#include <iostream>

#include "serve/job_store_notify.h"

namespace onboard::serve {

Status JobContext::Emit(const std::string& type, const nlohmann::json& data) {
  auto seq = store_.AppendEvent(id_, type, data.dump());
  notifier_.Notify();
  return seq.ok() ? Status::Ok() : seq.status();
}

Status JobQueueOptions::Validate() const {
  if (capacity < 1 || capacity > 100000) {
    return BadInput("serve options", "queue", "must be in [1, 100000]", std::to_string(capacity));
  }
  if (workers < 1 || workers > 256) {
    return BadInput("serve options", "workers", "must be in [1, 256]", std::to_string(workers));
  }
  return Status::Ok();
}

JobQueue::JobQueue(JobStore& store, JobNotifier& notifier, JobRunner runner, JobQueueOptions options)
    : store_(store), notifier_(notifier), runner_(std::move(runner)), options_(options) {
  ONBOARD_ASSERT(static_cast<bool>(runner_), "JobQueue needs a runner");
  ONBOARD_ASSERT(options_.Validate().ok(), options_.Validate().message());
}

JobQueue::~JobQueue() { Shutdown(std::chrono::milliseconds(0)); }

Status JobQueue::Start() {
  ONBOARD_ASSIGN_OR_RETURN(std::vector<std::string> queued, store_.IdsInState(JobState::kQueued));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ONBOARD_ASSERT(!started_, "JobQueue::Start called twice");
    started_ = true;
    for (const auto& id : queued) {
      if (pending_.size() < options_.capacity) {
        pending_.push_back(id);
        continue;
      }
      Status why(ErrorCode::kInternal, "queue full at server start-up; POST /v1/jobs/{id}/retry");
      ONBOARD_RETURN_IF_ERROR(store_.Finish(id, JobState::kInterrupted, "", why, {}));
    }
    for (int i = 0; i < options_.workers; ++i) {
      ++live_workers_;
      workers_.emplace_back([this] { WorkerLoop(); });
    }
  }
  cv_.notify_all();
  return Status::Ok();
}

Expected<Admitted> JobQueue::Submit(const std::string& request_json) {
  Admitted out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Admitted{Admission::kShuttingDown, {}};
    if (pending_.size() >= options_.capacity) return Admitted{Admission::kQueueFull, {}};
    ONBOARD_ASSIGN_OR_RETURN(out.job, store_.Create(request_json));
    pending_.push_back(out.job.id);
  }
  cv_.notify_one();
  notifier_.Notify();
  return out;
}

Expected<Admitted> JobQueue::Retry(const std::string& id) {
  Admitted out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Admitted{Admission::kShuttingDown, {}};
    ONBOARD_ASSIGN_OR_RETURN(JobRecord job, store_.Get(id));
    if (!IsRetryable(job.state)) {
      return BadInput("job " + id, "state", "only failed, cancelled or interrupted jobs can be retried",
                      JobStateName(job.state));
    }
    if (pending_.size() >= options_.capacity) return Admitted{Admission::kQueueFull, {}};
    ONBOARD_RETURN_IF_ERROR(store_.Requeue(id));
    pending_.push_back(id);
    ONBOARD_ASSIGN_OR_RETURN(out.job, store_.Get(id));
  }
  cv_.notify_one();
  notifier_.Notify();
  return out;
}

Expected<JobRecord> JobQueue::Cancel(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(pending_.begin(), pending_.end(), id);
    if (it != pending_.end()) {
      pending_.erase(it);
      Status why(ErrorCode::kInternal, "cancelled before it started");
      ONBOARD_RETURN_IF_ERROR(store_.Finish(id, JobState::kCancelled, "", why, {}));
    } else if (auto r = running_.find(id); r != running_.end()) {
      if (r->second->cancel.Cancel()) {
        (void)store_.AppendEvent(id, "cancel_requested", R"({"state":"running"})");
      }
    } else {
      ONBOARD_ASSIGN_OR_RETURN(JobRecord job, store_.Get(id));
      return BadInput("job " + id, "state", "job is not queued or running", JobStateName(job.state));
    }
  }
  notifier_.Notify();
  return store_.Get(id);
}

void JobQueue::WorkerLoop() {
  for (;;) {
    std::string id;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (stopping_) break;  // queued jobs stay queued in the store; the next start re-queues them
      id = pending_.front();
      pending_.pop_front();
      running_[id] = std::make_shared<Running>();
    }
    RunOne(id);
  }
  std::lock_guard<std::mutex> lock(mu_);
  --live_workers_;
  workers_done_.notify_all();
}

void JobQueue::RunOne(const std::string& id) {
  std::shared_ptr<Running> flags;
  {
    std::lock_guard<std::mutex> lock(mu_);
    flags = running_.at(id);
  }
  const int64_t t0 = NowMs();
  // Step 1: queued -> running.
  Status st = store_.MarkRunning(id);
  auto job = st.ok() ? store_.Get(id) : Expected<JobRecord>(st);
  notifier_.Notify();
  Expected<JobOutput> out = Status(ErrorCode::kInternal, "not run");
  if (job.ok()) {
    // Step 2: run it; a throwing runner is a failed job, never a dead worker.
    nlohmann::json request = nlohmann::json::parse(job->request_json, nullptr, /*allow_exceptions=*/false);
    JobContext ctx(id, job->attempts, std::move(request), store_, notifier_, flags->cancel);
    try {
      out = runner_(ctx);
    } catch (const std::exception& e) {
      out = Status(ErrorCode::kInternal, std::string("runner threw: ") + e.what());
    }
  } else {
    std::cerr << "onboard serve: job " << id << " could not start: " << job.status().ToString() << "\n";
  }
  // Step 3: store the outcome.
  if (job.ok()) {
    JobState state = out.ok() ? JobState::kSucceeded : JobState::kFailed;
    Status error = out.ok() ? Status::Ok() : out.status();
    if (flags->by_shutdown.load()) {
      state = JobState::kInterrupted;
      error = Status(ErrorCode::kInternal, "server shut down while this job was running; POST /v1/jobs/{id}/retry");
    } else if (flags->cancel.cancelled()) {
      state = JobState::kCancelled;
      error = Status(ErrorCode::kInternal, "cancelled by POST /v1/jobs/{id}/cancel");
    }
    std::string summary = out.ok() ? out->summary.dump() : "";
    JobReports reports = out.ok() ? out->reports : JobReports{};
    Status fin = store_.Finish(id, state, summary, error, reports);
    if (!fin.ok()) std::cerr << "onboard serve: job " << id << ": " << fin.ToString() << "\n";
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(id);
    ++finished_runs_;
    run_ms_total_ += NowMs() - t0;
  }
  workers_done_.notify_all();
  notifier_.Notify();
}

bool JobQueue::Shutdown(std::chrono::milliseconds grace, std::chrono::milliseconds hard_wait) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!started_ || stopping_) {
    bool clean = workers_.empty();
    lock.unlock();
    return clean;
  }
  stopping_ = true;
  cv_.notify_all();
  // Step 1: give running jobs the grace period to finish on their own.
  workers_done_.wait_for(lock, grace, [&] { return running_.empty(); });
  // Step 2: cancel the rest; RunOne stores them as interrupted.
  for (auto& [id, r] : running_) {
    r->by_shutdown = true;
    r->cancel.Cancel();
  }
  bool clean = workers_done_.wait_for(lock, hard_wait, [&] { return live_workers_ == 0; });
  std::vector<std::string> stuck;
  for (auto& [id, r] : running_) stuck.push_back(id);
  lock.unlock();
  for (const auto& id : stuck) {
    Status why(ErrorCode::kInternal, "runner did not stop within the shutdown deadline");
    (void)store_.Finish(id, JobState::kInterrupted, "", why, {});
  }
  for (auto& t : workers_) {
    if (clean) t.join();
    else t.detach();  // only when a runner ignores cancellation; the process is about to exit
  }
  workers_.clear();
  notifier_.Notify();
  return clean;
}

size_t JobQueue::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

size_t JobQueue::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.size();
}

int64_t JobQueue::RetryAfterSeconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t mean_s = finished_runs_ ? run_ms_total_ / finished_runs_ / 1000 : 5;
  return std::clamp<int64_t>(mean_s, 1, 60);
}

}  // namespace onboard::serve
