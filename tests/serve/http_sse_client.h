// A small server-sent-events reader over httplib::Client for the service tests and the e2e test:
// collects frames (id, event, data) until the server closes the stream.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace onboard::serve::testing {

struct SseFrame {
  std::string id;
  std::string event;
  std::string data;
};

// Parses complete frames out of `buffer` (frames end with a blank line); leaves a partial tail.
inline std::vector<SseFrame> TakeSseFrames(std::string& buffer) {
  std::vector<SseFrame> out;
  size_t end;
  while ((end = buffer.find("\n\n")) != std::string::npos) {
    std::string frame = buffer.substr(0, end);
    buffer.erase(0, end + 2);
    SseFrame f;
    bool any = false;
    std::istringstream lines(frame);
    for (std::string line; std::getline(lines, line);) {
      if (line.empty() || line[0] == ':') continue;  // comment / keepalive
      size_t colon = line.find(':');
      std::string field = line.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (field == "id") f.id = value;
      else if (field == "event") f.event = value;
      else if (field == "data") f.data += (f.data.empty() ? "" : "\n") + value;
      else continue;
      any = true;
    }
    if (any && (!f.event.empty() || !f.data.empty())) out.push_back(f);
  }
  return out;
}

// GET `path` as an event stream until the server ends it; `status` receives the HTTP status.
inline std::vector<SseFrame> ReadEventStream(httplib::Client& client, const std::string& path,
                                             const httplib::Headers& headers, int* status) {
  std::string buffer;
  std::vector<SseFrame> frames;
  auto res = client.Get(
      path, headers,
      [&](const httplib::Response& r) {
        *status = r.status;
        return true;
      },
      [&](const char* data, size_t n) {
        buffer.append(data, n);
        for (auto& f : TakeSseFrames(buffer)) frames.push_back(std::move(f));
        return true;
      });
  if (!res) *status = -1;
  return frames;
}

}  // namespace onboard::serve::testing
