// `onboard serve`: the onboarding job service (HTTP API over a SQLite job store).
//
//   onboard serve [--port 8080] [--host 127.0.0.1] [--db onboard.db] [--allowed-root DIR ...]
//                 [--token-file F | env ONBOARD_TOKEN] [--max-body BYTES] [--queue N] [--workers N]
//                 [--max-client-connections N]
//
// Step 1: validate flags, load the token, canonicalise the allowed roots.
// Step 2: open the store (jobs left running by a crash become `interrupted`); end their leftover
//         probe workers (serve/leftover_workers.h).
// Step 3: start the queue (re-queues jobs left queued) and bind; print "listening on http://H:P".
// Step 4: serve until SIGTERM/SIGINT; then stop accepting, give running jobs --grace seconds, cancel
//         the rest (stored as `interrupted`, retryable) and exit 0.
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "serve/api_job_runner.h"
#include "cli/command_registry.h"
#include "serve/http_auth.h"
#include "serve/http_server.h"
#include "serve/job_queue.h"
#include "serve/job_store.h"
#include "serve/leftover_workers.h"

namespace onboard::cli {
namespace {

// Self-pipe for SIGTERM/SIGINT: written by the async-signal-safe handler, read by the signal thread.
int g_signal_pipe[2] = {-1, -1};

void OnStopSignal(int sig) {
  const unsigned char b = static_cast<unsigned char>(sig);
  ssize_t n = write(g_signal_pipe[1], &b, 1);
  (void)n;
}

Status InstallStopSignals() {
  if (pipe(g_signal_pipe) != 0) return IoError("onboard serve: cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  if (sigaction(SIGTERM, &sa, nullptr) != 0 || sigaction(SIGINT, &sa, nullptr) != 0) {
    return IoError("onboard serve: cannot install the SIGTERM/SIGINT handler");
  }
  return Status::Ok();
}

// Blocks until a stop signal (returns it) or WakeStopSignalWaiter (returns 0).
int WaitStopSignal() {
  unsigned char b = 0;
  while (read(g_signal_pipe[0], &b, 1) < 0 && errno == EINTR) {
  }
  return b;
}

void WakeStopSignalWaiter() { OnStopSignal(0); }

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string db = "onboard.db";
  std::vector<std::string> allowed_roots;
  std::string token_file;
  size_t max_body = 16u << 20;
  size_t queue = 64;
  int workers = 1;
  double grace_s = 10;
  int http_threads = 32;
  int max_client_connections = onboard::serve::kDefaultMaxClientConnections;
};

int RunServe(const ServeOptions& o) {
  using namespace onboard::serve;
  // Step 1: configuration.
  auto token = LoadToken(o.token_file, std::getenv("ONBOARD_TOKEN"));
  if (!token.ok()) return ReportError("serve", token.status());
  auto roots = AllowedRoots::Make(o.allowed_roots);
  if (!roots.ok()) return ReportError("serve", roots.status());
  ServerConfig config;
  config.host = o.host;
  config.port = o.port;
  config.token = *token;
  config.max_body = o.max_body;
  config.http_threads = o.http_threads;
  config.max_client_connections = o.max_client_connections;
  if (Status st = config.Validate(); !st.ok()) return ReportError("serve", st);
  JobQueueOptions qopts{o.queue, o.workers};
  if (Status st = qopts.Validate(); !st.ok()) return ReportError("serve", st);
  if (!(o.grace_s >= 0 && o.grace_s <= 86400)) {
    return ReportError("serve", BadInput("onboard serve", "--grace", "must be in [0, 86400] seconds", std::to_string(o.grace_s)));
  }

  // Signals: a handler (whichever thread takes the signal, e.g. one of the BLAS pool started
  // before main) only writes the signal number to a pipe; the signal thread below acts on it.
  if (Status st = InstallStopSignals(); !st.ok()) return ReportError("serve", st);

  // Step 2: the store.
  auto store = JobStore::Open(o.db);
  if (!store.ok()) return ReportError("serve", store.status());
  std::string jobs_dir = o.db + ".jobs";
  std::error_code ec;
  std::filesystem::create_directories(jobs_dir, ec);
  if (ec) return ReportError("serve", IoError(jobs_dir + ": cannot create: " + ec.message()));
  const size_t leftovers = EndLeftoverWorkers(jobs_dir).size();

  // Step 3: queue + server.
  JobNotifier notifier;
  JobQueue queue(**store, notifier, MakeOnboardingRunner(jobs_dir), qopts);
  ApiServer server(config, std::move(roots).value(), **store, queue, notifier, o.workers);
  if (Status st = server.Bind(); !st.ok()) return ReportError("serve", st);
  if (Status st = queue.Start(); !st.ok()) return ReportError("serve", st);

  std::atomic<int> got_signal{0};
  std::thread signals([&] {
    int sig = WaitStopSignal();
    if (sig == SIGTERM || sig == SIGINT) {
      got_signal = sig;
      server.Stop();
    }
  });

  std::cout << "onboard serve: listening on http://" << o.host << ":" << server.port() << " (db " << o.db
            << ", " << (*store)->recovered().size() << " job(s) recovered as interrupted, " << queue.queued()
            << " queued, " << leftovers << " leftover probe worker(s) ended)" << std::endl;
  bool served = server.Serve();

  // Step 4: shutdown.
  WakeStopSignalWaiter();
  signals.join();
  auto grace = std::chrono::milliseconds(static_cast<int64_t>(o.grace_s * 1000));
  std::cout << "onboard serve: stopping (" << queue.running() << " running job(s), grace " << o.grace_s << " s)"
            << std::endl;
  bool clean = queue.Shutdown(grace);
  if (!clean) {
    std::cerr << "onboard serve: a job ignored cancellation; it is stored as interrupted\n";
    std::_Exit(0);  // its worker thread is detached and must not outlive the store
  }
  if (!served && got_signal == 0) {
    return ReportError("serve", Status(ErrorCode::kNetwork, "listener on " + o.host + " failed"));
  }
  std::cout << "onboard serve: stopped" << std::endl;
  return 0;
}

OnboardCommand kServe{"serve", "Run the onboarding job service (HTTP API, SQLite job store)", 80,
                      [](CLI::App& sub) -> RunFn {
                        auto o = std::make_shared<ServeOptions>();
                        sub.add_option("--port", o->port, "TCP port (0 = any free port)")->capture_default_str();
                        sub.add_option("--host", o->host, "Address to listen on")->capture_default_str();
                        sub.add_option("--db", o->db, "SQLite job store (created when missing)")->capture_default_str();
                        sub.add_option("--allowed-root", o->allowed_roots,
                                       "Directory whose files clients may name as model/topology paths (repeatable)");
                        sub.add_option("--token-file", o->token_file,
                                       "File holding the bearer token (default: $ONBOARD_TOKEN)");
                        sub.add_option("--max-body", o->max_body, "Largest request body, bytes")->capture_default_str();
                        sub.add_option("--queue", o->queue, "Queued jobs before 429")->capture_default_str();
                        sub.add_option("--workers", o->workers, "Jobs run concurrently")->capture_default_str();
                        sub.add_option("--grace", o->grace_s,
                                       "Seconds running jobs get to finish on SIGTERM before being interrupted")
                            ->capture_default_str();
                        sub.add_option("--http-threads", o->http_threads,
                                       "Connection threads (each SSE follower holds one)")
                            ->capture_default_str();
                        sub.add_option("--max-client-connections", o->max_client_connections,
                                       "Connections one client address may hold open; over it: 429")
                            ->capture_default_str();
                        return [o] { return RunServe(*o); };
                      }};

}  // namespace
}  // namespace onboard::cli
