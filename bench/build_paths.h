// Paths of the build the bench runs from: the build folder (the parent of bench/ beside this
// executable) and the `onboard` binary in it, the probe benches' default worker.
#pragma once

#include <unistd.h>

#include <string>

namespace onboard::bench {

// The build folder: /proc/self/exe up to its "/bench/" component.
inline std::string BuildDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  buf[n > 0 ? n : 0] = 0;
  const std::string self = buf;
  return self.substr(0, self.rfind("/bench/"));
}

// `arg` when given (non-empty), else the build's own `onboard`.
inline std::string WorkerOr(const char* arg) {
  return arg != nullptr && *arg != '\0' ? std::string(arg) : BuildDir() + "/onboard";
}

}  // namespace onboard::bench
