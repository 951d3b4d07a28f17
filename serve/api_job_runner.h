// The production JobRunner of `onboard serve`: runs one stored job through the onboarding loop
// (agent::RunOnboarding). Events from the loop are stored as job events (type = the event's "type",
// data = the whole event object); the job's CancelToken is the loop's (no copying thread); on success the
// report JSON comes from RunResult::report and the Markdown/HTML forms from the run's artifacts
// ("report.md", "report.html"). Artifacts of job <id> go to <jobs_dir>/<id>/attempt-<n>/.
#pragma once

#include <string>

#include "serve/job_queue.h"

namespace onboard::serve {

JobRunner MakeOnboardingRunner(std::string jobs_dir);

}  // namespace onboard::serve
