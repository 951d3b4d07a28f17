// Runs the real `onboard serve` binary as a child process for the end-to-end tests and the API
// benchmark: loopback only, `--port 0` (the server prints the port it bound), a temp database,
// output captured in a log file.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "serve/http_limits.h"

namespace onboard::serve::testing {

// An HTTP client of the server under test, with its bearer token.
inline std::unique_ptr<httplib::Client> AuthedClient(int port, const std::string& token,
                                                     time_t read_timeout_s) {
  IgnoreBrokenPipes();  // a server that answers early (413) must not kill the test with SIGPIPE
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_bearer_token_auth(token);
  c->set_read_timeout(read_timeout_s, 0);
  return c;
}

// A job on the tiny model (config.json under the allowed root): plan, no kernels, one probe round of
// `probe_steps` steps on 2 ranks (`timeout_s` > 0 sets the probe's timeout).
inline nlohmann::json TinyProbeJob(const std::string& topology_path, int64_t probe_steps,
                                   double timeout_s = 0) {
  nlohmann::json probe = {{"enabled", true}, {"ranks", 2}, {"steps", probe_steps}, {"seq", 16}};
  if (timeout_s > 0) probe["timeout_s"] = timeout_s;
  return {
      {"model", {{"path", "config.json"}}},
      {"topology", {{"path", topology_path}}},
      {"options",
       {{"mode", "lora"}, {"seq", 1024}, {"max_rounds", 1}, {"generate_kernels", false}, {"probe", probe}}}};
}

class ServeProcess {
 public:
  // `args` follow `onboard serve`; returns false (with log()) when the server did not come up.
  // `cwd` (optional): the server's working directory.
  bool Start(const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
             const std::string& cwd = "") {
    log_path_ = log_path;
    pid_ = fork();
    if (pid_ == 0) {
      if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
      FILE* out = freopen(log_path.c_str(), "w", stdout);
      (void)out;
      dup2(fileno(stdout), fileno(stderr));
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      static std::string serve = "serve";
      argv.push_back(serve.data());
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    // Wait (bounded) for "listening on http://127.0.0.1:<port>".
    static const std::regex kListening(R"(listening on http://[0-9.]+:([0-9]+))");
    for (int i = 0; i < 3000 && pid_ > 0; ++i) {
      std::smatch m;
      std::string text = log();
      if (std::regex_search(text, m, kListening)) {
        port_ = std::stoi(m[1]);
        return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Sends `sig` and waits (bounded: 60 s, then SIGKILL) for the process; returns its wait status.
  int Stop(int sig) {
    if (pid_ <= 0) return exit_status_;
    kill(pid_, sig);
    int status = 0;
    for (int i = 0; i < 6000; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        exit_status_ = status;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_status_ = status;
    return status;
  }

  ~ServeProcess() { Stop(SIGKILL); }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    std::ifstream in(log_path_);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_status_ = -1;
  std::string log_path_;
};

// Pids of live processes whose command line holds "probe-worker" and `needle` (zombies excluded).
inline std::vector<pid_t> ProbeWorkerPids(const std::string& needle) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream cmd(e.path() / "cmdline", std::ios::binary);
    std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.find("probe-worker") == std::string::npos || args.find(needle) == std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z') continue;
    out.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return out;
}

// Polls `pred` every 50 ms for up to `seconds`; true once it holds.
template <typename Pred>
bool WaitFor(double seconds, Pred pred) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

}  // namespace onboard::serve::testing
