// The queue's production runner: runs agent::RunOnboarding for a job, events -> store -> SSE.
#include "serve/api_job_runner.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "serve/api_job_request.h"
#include "agent/orchestrator.h"

namespace onboard::serve {

namespace {

// Forwards orchestrator events into the job's event stream.
class StoreEventSink : public agent::EventSink {
 public:
  explicit StoreEventSink(JobContext& ctx) : ctx_(ctx) {}
  void OnEvent(const nlohmann::json& event) override {
    std::string type = event.is_object() ? event.value("type", std::string("event")) : "event";
    (void)ctx_.Emit(type, event);  // a full disk must not abort the run; the outcome is still stored
  }

 private:
  JobContext& ctx_;
};

std::string ReadArtifact(const agent::RunResult& r, const std::string& name) {
  auto it = r.artifacts.find(name);
  std::string path = it != r.artifacts.end() ? it->second : (std::filesystem::path(r.out_dir) / name).string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

JobRunner MakeOnboardingRunner(std::string jobs_dir) {
  return [jobs_dir](JobContext& ctx) -> Expected<JobOutput> {
    // One directory per attempt: processes left over from a killed attempt never share files with a retry.
    std::string out_dir =
        (std::filesystem::path(jobs_dir) / ctx.id() / ("attempt-" + std::to_string(ctx.attempt()))).string();
    ONBOARD_ASSIGN_OR_RETURN(agent::RunRequest req, ToRunRequest(ctx.request(), out_dir));
    StoreEventSink sink(ctx);
    Expected<agent::RunResult> result = agent::RunOnboarding(req, sink, ctx.cancel_token());
    if (!result.ok()) return result.status();
    JobOutput out;
    out.summary = {{"summary", result->summary},
                   {"rounds", result->rounds},
                   {"decisions", result->decisions},
                   {"converged", result->converged},
                   {"out_dir", result->out_dir},
                   {"artifacts", result->artifacts}};
    out.reports.json = result->report.dump(2);
    out.reports.md = ReadArtifact(*result, "report.md");
    out.reports.html = ReadArtifact(*result, "report.html");
    return out;
  };
}

}  // namespace onboard::serve
