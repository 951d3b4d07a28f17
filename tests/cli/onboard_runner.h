// Runs the built `onboard` binary (ONBOARD_BINARY_DIR/onboard) for CLI tests and captures one stream.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace onboard::clitest {

struct CliRun {
  int code = -1;       // exit status (-1 when it did not exit normally)
  std::string out;     // the captured stream
};

enum class Capture { kStdout, kStderr, kBoth };

inline CliRun RunOnboard(const std::string& args, Capture capture = Capture::kBoth) {
  const char* redirect = capture == Capture::kStdout   ? " 2>/dev/null"
                         : capture == Capture::kStderr ? " 2>&1 >/dev/null"
                                                       : " 2>&1";
  const std::string cmd = std::string(ONBOARD_BINARY_DIR) + "/onboard " + args + redirect;
  CliRun r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace onboard::clitest
