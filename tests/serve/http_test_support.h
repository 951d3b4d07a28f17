// Shared helpers of the service tests (tests/serve/job_store_*_test.cpp, http_*_test.cpp): a temp
// directory and a runner whose jobs wait at a gate, so tests can hold a job in `running`.
#pragma once

#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>

#include "serve/job_queue.h"

namespace onboard::serve::testing {

struct TempDir {
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "onboard-h7-XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

// Jobs block at the gate until Open() or their cancel flag; each emits "gate_wait" first and returns
// a summary naming the job. A request {"fail": "msg"} fails with kBadInput; {"throw": true} throws.
class Gate {
 public:
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  // Blocks until `n` jobs are waiting at the gate (or 30 s pass).
  bool WaitForWaiters(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return waiting_ >= n; });
  }
  JobRunner Runner() {
    return [this](JobContext& ctx) -> Expected<JobOutput> {
      if (ctx.request().contains("throw")) throw std::runtime_error("runner exploded");
      if (ctx.request().contains("fail")) {
        return BadInput("request", "fail", ctx.request()["fail"].get<std::string>());
      }
      (void)ctx.Emit("gate_wait", {{"job", ctx.id()}});
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.notify_all();
      while (!open_ && !ctx.cancelled()) cv_.wait_for(lock, std::chrono::milliseconds(5));
      --waiting_;
      if (ctx.cancelled()) return Status(ErrorCode::kInternal, "cancelled");
      JobOutput out;
      out.summary = {{"job", ctx.id()}};
      out.reports.json = "{\"job\":\"" + ctx.id() + "\"}";
      out.reports.md = "# " + ctx.id() + "\n";
      out.reports.html = "<html><body>" + ctx.id() + "</body></html>";
      return out;
    };
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
  int waiting_ = 0;
};

}  // namespace onboard::serve::testing
