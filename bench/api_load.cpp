// bench_api_load: issue 11's slow-client target. 50 client threads, each sending GET /v1/jobs/{id}
// on a fresh connection per request for 5 s (so the listen backlog and the accept path are loaded),
// while 40 idle connections that never send a byte are held open (re-opened as soon as the server
// drops one). Baseline: the same load without the idle connections, same run, same server.
// Target (issue 11): p99 < 100 ms with the 40 idle connections. Units: requests/s, milliseconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>
#include <vector>

#include "bench/latency_samples.h"
#include "serve/http_server.h"

using namespace onboard;
using namespace onboard::serve;

namespace {

constexpr int kThreads = 50;
constexpr double kSeconds = 5.0;
constexpr int kIdle = 40;
constexpr double kTargetP99Ms = 100.0;
const char* kToken = "bench-token-0123456789abcdef";

struct Load {
  double req_per_s = 0, p50_ms = 0, p99_ms = 0, max_ms = 0;
  size_t requests = 0;
  int failures = 0;
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Holds `n` silent connections open until `stop`; one the server closes is opened again.
void HoldIdle(int port, int n, const std::atomic<bool>& stop) {
  std::vector<int> fds(n, -1);
  while (!stop) {
    for (int& fd : fds) {
      if (fd >= 0) {
        pollfd p{fd, POLLIN, 0};
        char b;
        if (poll(&p, 1, 0) > 0 && recv(fd, &b, 1, MSG_DONTWAIT) <= 0) {
          close(fd);
          fd = -1;
        }
      }
      if (fd < 0) fd = Connect(port);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
}

Load Measure(int port, const std::string& path) {
  std::vector<std::vector<double>> lat(kThreads);
  std::vector<int> failures(kThreads, 0);
  const auto t0 = std::chrono::steady_clock::now();
  const auto end = t0 + std::chrono::milliseconds(static_cast<int64_t>(kSeconds * 1000));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (std::chrono::steady_clock::now() < end) {
        httplib::Client c("127.0.0.1", port);  // a fresh connection per request
        c.set_bearer_token_auth(kToken);
        c.set_connection_timeout(10, 0);
        auto s = std::chrono::steady_clock::now();
        auto res = c.Get(path.c_str());
        auto e = std::chrono::steady_clock::now();
        if (!res || res->status != 200) ++failures[t];
        lat[t].push_back(std::chrono::duration<double, std::milli>(e - s).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double> all = onboard::bench::MergeSorted(lat);
  Load l;
  l.requests = all.size();
  l.req_per_s = static_cast<double>(all.size()) / wall_s;
  l.p50_ms = all[all.size() / 2];
  l.p99_ms = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  l.max_ms = all.back();
  for (int f : failures) l.failures += f;
  return l;
}

void Row(const char* name, const Load& l, const Load& base) {
  std::printf("%-34s %9zu %9.0f %8.2f %8.2f %8.1f %7d %9.2f\n", name, l.requests, l.req_per_s, l.p50_ms, l.p99_ms,
              l.max_ms, l.failures, l.p99_ms / base.p99_ms);
}

}  // namespace

int main() {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("onboard-bench-load-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  auto store = JobStore::Open(dir + "/bench.db");
  if (!store.ok()) return 1;
  auto job = (*store)->Create(R"({"model":{"path":"/models/kimi/config.json"},"topology":"h200-16x8","options":{}})");
  if (!job.ok() || !(*store)->MarkRunning(job->id).ok()) return 1;
  if (!(*store)->Finish(job->id, JobState::kSucceeded, R"({"summary":"ok"})", Status::Ok(), {"{}", "# r\n", "<p/>"}).ok())
    return 1;
  JobNotifier notifier;
  JobQueue queue(**store, notifier, [](JobContext&) -> Expected<JobOutput> { return NotFound("bench runner"); },
                 {4, 1});
  ServerConfig cfg;  // defaults of `onboard serve` (32 resident connection threads)
  cfg.port = 0;
  cfg.token = kToken;
  ApiServer server(cfg, AllowedRoots(), **store, queue, notifier, 1);
  if (!server.Bind().ok() || !queue.Start().ok()) return 1;
  std::thread serve([&] { server.Serve(); });
  const std::string path = "/v1/jobs/" + job->id;

  Load base = Measure(server.port(), path);
  std::atomic<bool> stop{false};
  std::thread idle([&] { HoldIdle(server.port(), kIdle, stop); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Load loaded = Measure(server.port(), path);
  stop = true;
  idle.join();

  std::printf("bench_api_load: %d threads x %.0f s, GET /v1/jobs/{id}, a fresh connection per request, 127.0.0.1\n",
              kThreads, kSeconds);
  std::printf("%-34s %9s %9s %8s %8s %8s %7s %9s\n", "case", "requests", "req/s", "p50 ms", "p99 ms", "max ms",
              "failed", "p99 ratio");
  Row("no idle connections (baseline)", base, base);
  Row("40 idle connections held open", loaded, base);
  const bool pass = loaded.p99_ms < kTargetP99Ms && loaded.failures == 0;
  std::printf("target (issue 11): p99 < %.0f ms with %d idle connections: %s\n", kTargetP99Ms, kIdle,
              pass ? "PASS" : "FAIL");

  server.Stop();
  serve.join();
  queue.Shutdown(std::chrono::milliseconds(0));
  std::filesystem::remove_all(dir);
  return pass ? 0 : 1;
}
