// `onboard`: one binary, one subcommand per pipeline stage (see cli/*_command.cpp).
#include <algorithm>
#include <iostream>
#include <map>

#include "cli/command_registry.h"

namespace onboard::cli {

std::vector<CommandEntry>& Registry() {
  static std::vector<CommandEntry> entries;
  return entries;
}

OnboardCommand::OnboardCommand(std::string name, std::string help, int order, SetupFn setup) {
  Registry().push_back({std::move(name), std::move(help), order, std::move(setup)});
}

int ReportError(const std::string& command, const Status& st) {
  std::cerr << "onboard " << command << ": " << st.message() << "\n";
  return ExitCodeFor(st.code());
}

}  // namespace onboard::cli

int main(int argc, char** argv) {
  using namespace onboard::cli;
  CLI::App app{"onboard: take a new large model from checkpoint to a verified training layout"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "onboard 0.1");

  auto entries = Registry();
  std::sort(entries.begin(), entries.end(),
            [](const CommandEntry& a, const CommandEntry& b) { return a.order < b.order; });
  std::map<CLI::App*, RunFn> runs;
  for (auto& e : entries) {
    CLI::App* sub = app.add_subcommand(e.name, e.help);
    runs[sub] = e.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage errors are bad input
  }
  for (auto& [sub, run] : runs) {
    if (sub->parsed()) {
      try {
        return run();
      } catch (const onboard::InvariantError& e) {
        std::cerr << "onboard " << sub->get_name() << ": internal error: " << e.what() << "\n";
        return 1;
      } catch (const std::exception& e) {
        std::cerr << "onboard " << sub->get_name() << ": error: " << e.what() << "\n";
        return 1;
      }
    }
  }
  return 2;
}
