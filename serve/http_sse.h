// Server-sent events for GET /v1/jobs/{id}/events: replays the stored events after `after_seq` (from
// Last-Event-ID or ?after=), then follows live ones until the job reaches a terminal state, then
// sends `event: end` and closes. Each event:
//   id: <seq>
//   event: <type>
//   data: {"seq":<seq>,"type":"<type>","ts_ms":<unix ms>,"data":<event JSON>}
// A comment line (": keepalive") goes out when nothing happened for `keepalive`, which also notices
// clients that went away. Followers wake through JobNotifier, never by polling the store in a loop.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "serve/job_store.h"
#include "serve/job_store_notify.h"

namespace onboard::serve {

struct SseOptions {
  std::chrono::milliseconds keepalive{15000};
  int64_t batch = 256;  // events read from the store per round trip
};

// Formats one stored event as an SSE frame (ends with a blank line).
std::string FormatSseEvent(const JobEvent& e);

// Installs a chunked text/event-stream provider on `res`. The job must exist (checked by the caller).
void StreamJobEvents(httplib::Response& res, JobStore& store, JobNotifier& notifier, const std::string& id,
                     int64_t after_seq, SseOptions options = {});

}  // namespace onboard::serve
