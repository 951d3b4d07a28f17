// RunProbe: start N worker processes (fork/exec `<onboard> probe-worker`), host their TCPStore on
// loopback (free port), watch them, and merge their JSON into one ProbeResult.
// Failure handling: a rank that exits non-zero or is killed ends the probe at once: the launcher
// SIGKILLs the other ranks (its own children, by pid) and reports which rank died, how, and the
// last line of its log. A probe past config.timeout_s is killed and reported as hung. A cancel
// (ProbeObserver::cancelled) sends SIGTERM, then SIGKILL after kProbeCancelGraceS. Every worker has
// PR_SET_PDEATHSIG(SIGKILL), so a killed launcher (or server) takes its workers with it.
// Progress: rank 0 appends each recorded step to <out>/steps.jsonl; while the ranks run (local or
// srun) the launcher reads the new lines every 20 ms (probe_step_tail.h) and calls
// ProbeObserver::OnStep for each; a record the codec refuses stops the probe with that error.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <torch/cuda.h>

#include "backends/c10d_compat.h"
#include "backends/c10d_store.h"
#include "backends/probe_loss_parity.h"
#include "backends/probe_launch.h"
#include "backends/probe_report.h"
#include "backends/probe_step_tail.h"
#include "backends/slurm_launch.h"

namespace onboard {
namespace {

using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string LastLine(const std::string& path) {
  std::string text = ReadFile(path), last, line;
  std::istringstream is(text);
  while (std::getline(is, line))
    if (!line.empty()) last = line;
  return last.empty() ? "(empty log)" : last;
}

std::string HowExited(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = 0;
  return buf;
}

// Cancel: SIGTERM to every live rank, then SIGKILL to those still alive after the grace period.
void TerminateRanks(const std::vector<pid_t>& pids, std::vector<bool>& done) {
  for (size_t r = 0; r < pids.size(); ++r)
    if (!done[r]) kill(pids[r], SIGTERM);
  const auto grace_end = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(kProbeCancelGraceS * 1000));
  for (;;) {
    bool all = true;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) != 0) done[r] = true;
      else all = false;
    }
    if (all) return;
    if (std::chrono::steady_clock::now() > grace_end) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (size_t r = 0; r < pids.size(); ++r)
    if (!done[r]) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], nullptr, 0);
      done[r] = true;
    }
}

Status Cancelled() {
  return Status(ErrorCode::kInternal, "cancelled: probe workers stopped (SIGTERM, SIGKILL after " +
                                          std::to_string(kProbeCancelGraceS) + " s)");
}

// Rank 0's new step records (steps.jsonl) to the observer, in order; `finished`: the ranks are done,
// so a partial last line is refused. Without an observer nobody follows the steps.
Status DeliverSteps(backends::ProbeStepTail& tail, ProbeObserver* observer, bool finished) {
  if (observer == nullptr) return Status::Ok();
  std::vector<ProbeStep> steps;
  Status st = finished ? tail.Finish(&steps) : tail.Poll(&steps);
  for (const ProbeStep& s : steps) observer->OnStep(s);  // the good lines before a bad one, too
  return st;
}

// Step 3 helper: watches the children until all exit 0, one fails, the deadline passes, the
// observer cancels or rank 0 writes a step record the codec refuses.
Status Watch(std::vector<pid_t>& pids, const ProbeConfig& cfg, const std::string& dir,
             ProbeObserver* observer, backends::ProbeStepTail& tail) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(cfg.timeout_s * 1000));
  std::vector<bool> done(pids.size(), false);
  size_t remaining = pids.size();
  auto kill_rest = [&]() {
    for (size_t r = 0; r < pids.size(); ++r)
      if (!done[r]) {
        kill(pids[r], SIGKILL);
        int st = 0;
        waitpid(pids[r], &st, 0);
        done[r] = true;
      }
  };
  while (remaining > 0) {
    if (observer != nullptr && observer->cancelled()) {
      TerminateRanks(pids, done);
      return Cancelled();
    }
    if (Status st = DeliverSteps(tail, observer, false); !st.ok()) {
      kill_rest();
      return st;
    }
    for (size_t r = 0; r < pids.size(); ++r) {
      if (done[r]) continue;
      int st = 0;
      pid_t got = waitpid(pids[r], &st, WNOHANG);
      if (got == 0) continue;
      done[r] = true;
      --remaining;
      if (got < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        kill_rest();
        const std::string log = dir + "/rank" + std::to_string(r) + ".log";
        // A rank that refused its input (exit 2: a bad checkpoint, spec or text file) is bad input.
        const bool bad_input =
            got > 0 && WIFEXITED(st) && WEXITSTATUS(st) == ExitCodeFor(ErrorCode::kBadInput);
        return Status(bad_input ? ErrorCode::kBadInput : ErrorCode::kNetwork,
                      "probe failed: rank " + std::to_string(r) + " " +
                          (got < 0 ? std::string("could not be waited for") : HowExited(st)) +
                          "; the other ranks were stopped. Last line of " + log + ": " + LastLine(log));
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::string hung;
      for (size_t r = 0; r < pids.size(); ++r)
        if (!done[r]) hung += (hung.empty() ? "" : ",") + std::to_string(r);
      kill_rest();
      return Status(ErrorCode::kNetwork, "probe timed out after " + std::to_string(cfg.timeout_s) +
                                             " s (--timeout): ranks " + hung +
                                             " still running (hung?); logs in " + dir);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return Status::Ok();
}

}  // namespace

Expected<ProbeResult> RunProbe(const ModelIR& model, const ProbeConfig& config, ProbeObserver* observer) {
  return RunProbeSpec(ProxyFromModel(model), config, observer);
}

namespace backends {

Status PrepareProbeOutDir(ProbeConfig* cfg) {
  if (cfg->out_dir.empty()) {
    char tmpl[] = "/tmp/onboard-probe-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return IoError("cannot create a temp dir for the probe");
    cfg->out_dir = tmpl;
  } else if (mkdir(cfg->out_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return BadInput(cfg->out_dir, "out", "cannot create directory", strerror(errno));
  }
  return Status::Ok();
}

Status LaunchProbeRanks(const ProbeConfig& cfg, const std::string& spec_file, ProbeObserver* observer) {
  const std::string worker = cfg.worker_binary.empty() ? SelfExe() : cfg.worker_binary;
  if (worker.empty() || access(worker.c_str(), X_OK) != 0)
    return NotFound("probe worker binary '" + worker + "' (build the `onboard` target)");
  for (int64_t r = 0; r < cfg.ranks; ++r) {
    std::remove((cfg.out_dir + "/rank" + std::to_string(r) + ".json").c_str());
  }
  const std::string steps_file = cfg.out_dir + "/steps.jsonl";  // rank 0's records, followed for OnStep
  std::remove(steps_file.c_str());
  backends::ProbeStepTail tail(steps_file);

  // Step 2: rendezvous store on a free loopback port, hosted here so no rank owns it.
  std::unique_ptr<backends::Rendezvous> store;
  try {
    store = std::make_unique<backends::Rendezvous>("127.0.0.1", 0, true, cfg.collective_timeout_s);
  } catch (const std::exception& e) {
    return Status(ErrorCode::kNetwork, std::string("cannot start the probe TCPStore: ") + e.what());
  }
  const std::string port = std::to_string(store->port());

  // Step 3: fork/exec the ranks; each writes rank<r>.log (stdout+stderr) and rank<r>.json, rank 0
  // also steps.jsonl.
  // With --launcher slurm one srun step starts them instead (backends/slurm_launch.cpp).
  std::vector<pid_t> pids;
  const bool local = cfg.launcher != "slurm";
  if (!local)
    ONBOARD_RETURN_IF_ERROR(backends::RunRanksWithSrun(
        {worker, spec_file, cfg.out_dir, steps_file, backends::SrunMasterAddr(), store->port(), cfg.ranks,
         cfg.timeout_s, [observer] { return observer != nullptr && observer->cancelled(); },
         kProbeCancelGraceS, [&tail, observer] { return DeliverSteps(tail, observer, false); }}));
  for (int64_t r = 0; local && r < cfg.ranks; ++r) {
    const std::string rs = std::to_string(r);
    std::vector<std::string> args = {worker, "probe-worker", "--spec", spec_file, "--rank", rs,
                                     "--world", std::to_string(cfg.ranks), "--master-addr",
                                     "127.0.0.1", "--master-port", port, "--out",
                                     cfg.out_dir + "/rank" + rs + ".json"};
    if (r == 0) args.insert(args.end(), {"--steps-out", steps_file});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = cfg.out_dir + "/rank" + rs + ".log";
    const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return IoError("cannot open " + log);
    const pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0) {
      // Dies with the launching thread; if the launcher is already gone, stop now.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != launcher) _exit(1);
      sigset_t none;  // a launcher thread may block signals; the worker must still take SIGTERM
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      dup2(fd, 1);
      dup2(fd, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fd);
    if (pid < 0) {
      for (pid_t p : pids) { kill(p, SIGKILL); waitpid(p, nullptr, 0); }
      return IoError("fork failed for probe rank " + rs);
    }
    pids.push_back(pid);
  }
  if (local) ONBOARD_RETURN_IF_ERROR(Watch(pids, cfg, cfg.out_dir, observer, tail));
  ONBOARD_RETURN_IF_ERROR(DeliverSteps(tail, observer, true));  // the last steps, whole lines only

  return Status::Ok();
}

}  // namespace backends

Expected<ProbeResult> RunProbeSpec(const ProxySpec& spec, const ProbeConfig& config_in,
                                   ProbeObserver* observer) {
  const auto t0 = std::chrono::steady_clock::now();
  ProbeConfig cfg = config_in;
  ONBOARD_RETURN_IF_ERROR(cfg.Validate(spec));
  if (cfg.launcher != "local" && cfg.launcher != "slurm")
    return BadInput("probe", "launcher", "must be local or slurm", cfg.launcher);
  if (cfg.device == "cuda" && !torch::cuda::is_available())
    return BadInput(
        "probe", "device",
        "no CUDA device visible to this LibTorch (backends compiled: " + backends::CompiledBackends() + ")",
        "cuda");
  // Step 1: output folder, spec file; Steps 2-3 (store, ranks) in LaunchProbeRanks.
  ONBOARD_RETURN_IF_ERROR(backends::PrepareProbeOutDir(&cfg));
  const std::string spec_file = cfg.out_dir + "/probe_spec.json";
  {
    std::ofstream f(spec_file);
    f << ProbeSpecConfigToJson(spec, cfg);
    if (!f) return IoError("cannot write " + spec_file);
  }
  ONBOARD_RETURN_IF_ERROR(backends::LaunchProbeRanks(cfg, spec_file, observer));

  // Step 4: merge the ranks' JSON.
  std::vector<backends::RankFile> ranks;
  for (int64_t r = 0; r < cfg.ranks; ++r) {
    const std::string path = cfg.out_dir + "/rank" + std::to_string(r) + ".json";
    try {
      ranks.push_back({path, json::parse(ReadFile(path))});
    } catch (const std::exception& e) {
      return Status(ErrorCode::kInternal, "probe rank " + std::to_string(r) + " wrote no valid result " +
                                              path + ": " + e.what());
    }
  }
  ProbeResult result;
  result.spec = spec;
  result.config = cfg;
  result.out_dir = cfg.out_dir;
  ONBOARD_RETURN_IF_ERROR(backends::MergeRankResults(ranks, &result));
  backends::FinishProbeResult(&result);
  // Step 5: kernel loss parity (issue 12), when asked for: two more runs per generated kernel family
  // (the KDA layers, the MLA+DSA layers).
  Expected<std::vector<ProbeLossParity>> parity = backends::RunLossParity(spec, cfg, observer);
  if (!parity.ok()) return parity.status();
  for (ProbeLossParity& p : *parity) {
    result.checks.push_back(p.message);
    result.loss_parity.push_back(std::move(p));
  }
  if (parity->empty() && cfg.loss_parity_steps > 0)
    result.checks.push_back(
        "loss parity: not run (no KDA layer with kda_kernel generated, no MLA+DSA layer with dsa_kernel "
        "generated: no generated kernel in the probe)");
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace onboard
