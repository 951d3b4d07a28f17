// ProbeStepTail (probe_step_tail.h): incremental reads of steps.jsonl from the last offset.
#include "backends/probe_step_tail.h"

#include <fstream>
#include <iterator>

#include "backends/probe_step_codec.h"

namespace onboard::backends {

Status ProbeStepTail::Poll(std::vector<ProbeStep>* out) {
  // Step 1: the bytes appended since the last call.
  std::ifstream f(path_, std::ios::binary);
  if (!f) return Status::Ok();  // not created yet
  f.seekg(offset_);
  std::string chunk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  offset_ += static_cast<int64_t>(chunk.size());
  pending_ += chunk;
  // Step 2: every complete line, decoded and checked to follow the previous step.
  size_t start = 0;
  for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
    ++line_;
    const std::string where = path_ + ":" + std::to_string(line_);
    Expected<ProbeStep> s = ProbeStepFromLine(pending_.substr(start, nl - start), where);
    if (!s.ok()) return s.status();
    if (s->step != line_ - 1)
      return BadInput(where, "step",
                      "must be " + std::to_string(line_ - 1) + " (records are consecutive steps from 0)",
                      std::to_string(s->step));
    out->push_back(std::move(*s));
  }
  pending_.erase(0, start);  // Step 3: keep the partial last line for the next call
  return Status::Ok();
}

Status ProbeStepTail::Finish(std::vector<ProbeStep>* out) {
  ONBOARD_RETURN_IF_ERROR(Poll(out));
  if (!pending_.empty())
    return BadInput(path_ + ":" + std::to_string(line_ + 1), "json",
                    "record without its newline at the end of the file", pending_);
  return Status::Ok();
}

}  // namespace onboard::backends
