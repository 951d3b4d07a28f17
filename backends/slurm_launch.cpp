// RunRanksWithSrun: the probe's N ranks as one srun step (see slurm_launch.h).
// srun flags: --ntasks N, --kill-on-bad-exit=1 (a failed task ends the step), --overcommit (more
// tasks than CPUs is fine for a probe), --output DIR/rank%t.log (%t = task id, stderr follows
// stdout), --job-name onboard-probe. srun's own messages go to DIR/srun.log.
#include "backends/slurm_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

namespace onboard::backends {
namespace {

std::string LastLine(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (!line.empty()) last = line;
  return last.empty() ? "(empty)" : last;
}

// Step 1 helper: srun on PATH (or $ONBOARD_SRUN).
std::string FindSrun() {
  if (const char* s = std::getenv("ONBOARD_SRUN")) return s;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(ss, dir, ':');) {
    const std::string p = dir + "/srun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// The task to blame, from srun's "error: ... task N: ..." lines and {"", -1} if none. srun prints them
// in whatever order its tasks ended, so the order is no evidence: a task ended by a signal (Killed,
// Segmentation fault, Aborted) is the cause; a task that exited with an error code after a peer
// vanished (its log ends in "collective failed") is a consequence; otherwise the first line.
std::pair<std::string, int64_t> FirstTaskError(const std::string& path, const std::string& out_dir) {
  std::vector<std::pair<std::string, int64_t>> tasks;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) {
    const size_t t = line.find("task ");
    if (line.find("error:") == std::string::npos || t == std::string::npos) continue;
    try {
      tasks.emplace_back(line, std::stoll(line.substr(t + 5)));
    } catch (const std::exception&) {
      tasks.emplace_back(line, -1);
    }
  }
  if (tasks.empty()) return {"", -1};
  for (const auto& t : tasks)
    if (t.first.find("Exited with exit code") == std::string::npos) return t;  // ended by a signal
  for (const auto& t : tasks)
    if (t.second >= 0 &&
        LastLine(out_dir + "/rank" + std::to_string(t.second) + ".log").find("collective failed") ==
            std::string::npos)
      return t;
  return tasks.front();
}

// The ranks (in order) with no result file: the one to blame when the step failed.
std::string MissingRanks(const SrunLaunch& l) {
  std::string missing;
  for (int64_t r = 0; r < l.ranks; ++r)
    if (access((l.out_dir + "/rank" + std::to_string(r) + ".json").c_str(), F_OK) != 0)
      missing += (missing.empty() ? "" : ",") + std::to_string(r);
  return missing;
}

}  // namespace

std::string SrunMasterAddr() {
  if (const char* a = std::getenv("ONBOARD_PROBE_MASTER_ADDR")) return a;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == 0) return "127.0.0.1";
  return host;
}

namespace {

// SIGTERM to srun (it forwards the signal to every task and ends the step), SIGKILL to its process
// group when it has not exited after `grace_s`; reaps it into `status`.
void StopSrun(pid_t pid, double grace_s, int& status) {
  kill(pid, SIGTERM);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  while (std::chrono::steady_clock::now() < until) {
    if (waitpid(pid, &status, WNOHANG) != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  waitpid(pid, &status, 0);
}

}  // namespace

Status RunRanksWithSrun(const SrunLaunch& l) {
  // Step 1: the command line. bash expands $SLURM_PROCID in each task.
  const std::string srun = FindSrun();
  if (srun.empty()) return NotFound("srun (Slurm client) on PATH: install slurm-client or run with --launcher local");
  const std::string task =
      "exec \"$0\" probe-worker --spec \"$1\" --rank \"$SLURM_PROCID\" --world \"$2\" --master-addr \"$3\" "
      "--master-port \"$4\" --out \"$5/rank$SLURM_PROCID.json\" --steps-out \"$6\"";
  std::vector<std::string> args = {srun,
                                   "--ntasks=" + std::to_string(l.ranks),
                                   "--kill-on-bad-exit=1",
                                   "--overcommit",
                                   "--job-name=onboard-probe",
                                   "--output=" + l.out_dir + "/rank%t.log",
                                   "bash",
                                   "-c",
                                   task,
                                   l.worker,
                                   l.spec_file,
                                   std::to_string(l.ranks),
                                   l.master_addr,
                                   std::to_string(l.master_port),
                                   l.out_dir,
                                   l.steps_file};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Step 2: start srun (its own messages to srun.log), in its own process group.
  const std::string log = l.out_dir + "/srun.log";
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IoError("cannot open " + log);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fd);
  if (pid < 0) return IoError("fork failed for srun");
  // Step 3: wait, stopping the step past the deadline, on cancel or when `poll` fails (SIGTERM lets
  // srun end its tasks).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(l.timeout_s * 1000));
  int status = 0;
  bool timed_out = false;
  bool cancelled = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    cancelled = l.cancelled && l.cancelled();
    timed_out = !cancelled && std::chrono::steady_clock::now() > deadline;
    if (cancelled || timed_out) {
      StopSrun(pid, l.cancel_grace_s, status);
      break;
    }
    if (l.poll) {
      if (Status st = l.poll(); !st.ok()) {
        StopSrun(pid, l.cancel_grace_s, status);
        return st;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (cancelled) {
    return Status(ErrorCode::kInternal, "cancelled: the srun step was stopped (SIGTERM, SIGKILL after " +
                                            std::to_string(l.cancel_grace_s) + " s)");
  }
  // Step 4: verdict.
  const std::string missing = MissingRanks(l);
  const bool ok = !timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0 && missing.empty();
  if (ok) return Status::Ok();
  const auto [error_line, failed_task] = FirstTaskError(log, l.out_dir);
  const std::string first = failed_task >= 0 ? std::to_string(failed_task) : missing.substr(0, missing.find(','));
  std::string msg = timed_out ? "probe timed out after " + std::to_string(l.timeout_s) + " s (--timeout) under srun"
                              : "probe failed under srun (exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")";
  if (failed_task >= 0) msg += ": rank " + first + " failed first";
  if (!missing.empty()) msg += "; ranks without a result: " + missing;
  msg += ". srun: " + (error_line.empty() ? LastLine(log) : error_line);
  if (!first.empty()) msg += ". Last line of " + l.out_dir + "/rank" + first + ".log: " + LastLine(l.out_dir + "/rank" + first + ".log");
  return Status(ErrorCode::kNetwork, msg);
}

}  // namespace onboard::backends
