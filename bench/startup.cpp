// bench_startup: process start-up of the `onboard` commands that never train, against a trivial
// process start measured in the same run, and against a command that loads the LibTorch backend.
//   baseline   /bin/true (fork + exec + exit: what any process pays)
//   --version  `onboard --version`
//   inspect    `onboard inspect examples/flagship/config.json`
//   plan       `onboard plan` of the tiny test model on the tiny test topology (tests/data/agent/)
//   backend    `onboard verify` of a missing checkpoint: it dlopens libonboard_backend.so (LibTorch)
//              first, then fails on the path (what every command paid when the binary linked LibTorch)
// Units: milliseconds of wall time per run, median of N (stdout/stderr to /dev/null).
// Target (issue 10): --version, inspect and plan in milliseconds, i.e. near the baseline, far below
// the backend row. Usage: bench_startup [N] [ONBOARD_BINARY]
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

extern char** environ;

namespace {

// One run of argv; returns wall milliseconds, or -1 when the process could not be started.
double RunOnceMs(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double MedianMs(const std::vector<std::string>& argv, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back(RunOnceMs(argv));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  const std::string src = ONBOARD_SOURCE_DIR;
  const std::string bin = argc > 2 ? argv[2] : std::string(ONBOARD_BINARY_DIR) + "/onboard";
  if (access(bin.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "bench_startup: no executable %s (build the onboard target)\n", bin.c_str());
    return 2;
  }
  struct Row {
    const char* name;
    std::vector<std::string> argv;
  };
  const std::vector<Row> rows = {
      {"baseline: /bin/true", {"/bin/true"}},
      {"onboard --version", {bin, "--version"}},
      {"onboard inspect (flagship)", {bin, "inspect", src + "/examples/flagship/config.json"}},
      {"onboard plan (tiny model, tiny topology)",
       {bin, "plan", src + "/tests/data/agent/tiny_kimi.config.json", "--topology",
        src + "/tests/data/agent/tiny_2x4.topology.json"}},
      {"onboard verify (loads the LibTorch backend)",
       {bin, "verify", "/nonexistent", "--input-ids", "/nonexistent.json"}},
  };
  std::vector<double> ms;
  for (const Row& r : rows) ms.push_back(MedianMs(r.argv, reps));
  std::printf("| command | median ms (N=%d) | vs baseline | vs backend load |\n|---|---|---|---|\n", reps);
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("| %s | %.1f | %.1fx | %.3fx |\n", rows[i].name, ms[i], ms[i] / ms[0], ms[i] / ms.back());
  return 0;
}
