// Start-up sweep of `onboard serve`: probe workers left running by an interrupted server (its jobs
// are now stored `interrupted`) are found in /proc and ended, so they stop using CPU and memory.
// A leftover is a live process whose argv[1] is "probe-worker" and whose --spec file lies under the
// server's jobs directory (resolved against the process's own working directory).
#pragma once

#include <string>
#include <vector>

namespace onboard::serve {

// SIGKILLs every leftover worker of `jobs_dir`; returns their pids.
std::vector<int> EndLeftoverWorkers(const std::string& jobs_dir);

}  // namespace onboard::serve
