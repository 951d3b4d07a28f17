// Subcommand registry for the `onboard` binary. Each cli/<name>_command.cpp registers one
// subcommand with a static OnboardCommand object:
//
//   static onboard::cli::OnboardCommand kInspect{"inspect", "Describe a model", 10,
//       [](CLI::App& sub) -> onboard::cli::RunFn { auto opts = ...; sub.add_option(...);
//                                                  return [opts] { return RunInspect(*opts); }; }};
//
// The RunFn returns the process exit code (0 ok, 2 bad input; see core/status.h ExitCodeFor).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"

namespace onboard::cli {

using RunFn = std::function<int()>;
using SetupFn = std::function<RunFn(CLI::App&)>;

struct CommandEntry {
  std::string name;
  std::string help;
  int order;        // position in --help
  SetupFn setup;
};

std::vector<CommandEntry>& Registry();

struct OnboardCommand {
  OnboardCommand(std::string name, std::string help, int order, SetupFn setup);
};

// Prints "onboard <cmd>: <status message>" to stderr and returns the exit code for it.
int ReportError(const std::string& command, const Status& st);

}  // namespace onboard::cli
