// EndLeftoverWorkers (see serve/leftover_workers.h).
#include "serve/leftover_workers.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace onboard::serve {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> Argv(const fs::path& proc) {
  std::ifstream in(proc / "cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  size_t start = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\0') {
      args.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  }
  return args;
}

bool Under(const fs::path& p, const fs::path& root) {
  auto it = p.begin();
  for (const auto& part : root) {
    if (part.empty()) continue;
    if (it == p.end() || *it != part) return false;
    ++it;
  }
  return true;
}

}  // namespace

std::vector<int> EndLeftoverWorkers(const std::string& jobs_dir) {
  std::vector<int> ended;
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(jobs_dir, ec);
  if (ec) return ended;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    if (pid == getpid()) continue;
    std::vector<std::string> args = Argv(e.path());
    if (args.size() < 2 || args[1] != "probe-worker") continue;
    for (size_t i = 2; i + 1 < args.size(); ++i) {
      if (args[i] != "--spec") continue;
      std::error_code cwd_ec;
      fs::path spec = args[i + 1];
      if (spec.is_relative()) spec = fs::read_symlink(e.path() / "cwd", cwd_ec) / spec;
      if (!cwd_ec && Under(fs::weakly_canonical(spec, cwd_ec), root) && kill(pid, SIGKILL) == 0) ended.push_back(pid);
      break;
    }
  }
  return ended;
}

}  // namespace onboard::serve
