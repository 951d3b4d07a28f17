// Running the toolchain (system C++ compiler, nvcc) from the kernel builders.
#pragma once

#include <string>

namespace onboard::codegen {

// Shell-quotes one argument (single quotes; embedded quotes escaped).
std::string ShellQuote(const std::string& s);

// Runs `cmd` through the shell with stderr folded into stdout; appends the output to *output and
// returns the raw pclose status (-1 when the shell could not be started).
int RunCapture(const std::string& cmd, std::string* output);

}  // namespace onboard::codegen
