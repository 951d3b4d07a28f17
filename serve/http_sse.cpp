// Server-sent events for /v1/jobs/{id}/events: stored events after Last-Event-ID, then live ones.
#include "serve/http_sse.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

namespace onboard::serve {

std::string FormatSseEvent(const JobEvent& e) {
  std::ostringstream os;
  os << "id: " << e.seq << "\n";
  os << "event: " << e.type << "\n";
  std::string data = "{\"seq\":" + std::to_string(e.seq) + ",\"type\":" + nlohmann::json(e.type).dump() +
                     ",\"ts_ms\":" + std::to_string(e.ts_ms) + ",\"data\":" + e.data_json + "}";
  // SSE data may not contain raw newlines: one "data:" line per line (clients re-join with '\n').
  std::istringstream lines(data);
  for (std::string line; std::getline(lines, line);) os << "data: " << line << "\n";
  os << "\n";
  return os.str();
}

namespace {

struct FollowState {
  int64_t last_seq = 0;
  uint64_t generation = 0;
  bool started = false;
};

}  // namespace

void StreamJobEvents(httplib::Response& res, JobStore& store, JobNotifier& notifier, const std::string& id,
                     int64_t after_seq, SseOptions options) {
  auto state = std::make_shared<FollowState>();
  state->last_seq = after_seq;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  notifier.StreamOpened();
  res.set_chunked_content_provider(
      "text/event-stream",
      [&store, &notifier, id, options, state](size_t /*offset*/, httplib::DataSink& sink) {
        auto write = [&sink](const std::string& s) { return sink.write(s.data(), s.size()); };
        if (!state->started) {
          state->started = true;
          state->generation = notifier.generation();
          return write("retry: 2000\n\n");
        }
        // Step 1: read the state first, then the events: the terminal event is committed together
        // with the terminal state, so a terminal state here means the events read next are complete.
        auto job = store.Get(id);
        if (!job.ok()) return false;
        auto events = store.EventsAfter(id, state->last_seq, options.batch);
        if (!events.ok()) return false;
        // Step 2: send what is new.
        std::string out;
        for (const auto& e : *events) {
          out += FormatSseEvent(e);
          state->last_seq = e.seq;
        }
        if (!out.empty() && !write(out)) return false;
        if (static_cast<int64_t>(events->size()) == options.batch) return true;  // more to replay
        // Step 3: finished job, everything sent: close the stream.
        if (IsTerminal(job->state)) {
          nlohmann::json end = {{"state", JobStateName(job->state)}, {"last_seq", state->last_seq}};
          write("event: end\ndata: " + end.dump() + "\n\n");
          sink.done();
          return true;
        }
        if (notifier.shutting_down()) {
          write("event: shutdown\ndata: {}\n\n");
          sink.done();
          return true;
        }
        // Step 4: wait for the next change (or send a keepalive comment).
        uint64_t seen = state->generation;
        state->generation = notifier.WaitPast(seen, options.keepalive);
        if (state->generation == seen && !notifier.shutting_down()) return write(": keepalive\n\n");
        return true;
      },
      [&notifier](bool /*success*/) { notifier.StreamClosed(); });
}

}  // namespace onboard::serve
