// RunCapture: run a toolchain command (system C++ compiler, nvcc) through the shell and capture its output.
#include "codegen/shell_command.h"

#include <array>
#include <cstdio>

namespace onboard::codegen {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

int RunCapture(const std::string& cmd, std::string* output) {
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) output->append(buf.data(), n);
  return pclose(pipe);
}

}  // namespace onboard::codegen
