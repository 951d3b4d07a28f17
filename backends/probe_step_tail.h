// Reading rank 0's steps.jsonl while the probe runs (torch-free). The worker appends one
// ProbeStep record per line (probe_step_codec.h) and flushes it after each step; the reader
// returns each complete line once, in order. A last line without its '\n' is still being
// written: it waits for the next Poll. A complete line that does not decode, or a step that does
// not follow the previous one (0, 1, 2, ...), is refused, naming the file and line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/probe.h"
#include "core/status.h"

namespace onboard::backends {

class ProbeStepTail {
 public:
  explicit ProbeStepTail(std::string path) : path_(std::move(path)) {}
  // Appends the steps completed since the last call to `out`. A file that does not exist yet has
  // no steps.
  Status Poll(std::vector<ProbeStep>* out);
  // Poll after the writer has finished: a partial line left at the end is refused.
  Status Finish(std::vector<ProbeStep>* out);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int64_t offset_ = 0;   // bytes of the file consumed (complete lines + pending_)
  std::string pending_;  // the partial last line so far
  int64_t line_ = 0;     // complete lines read
};

}  // namespace onboard::backends
