// bench_api: throughput and latency of GET /v1/jobs/{id} (one SQLite read through the reader pool,
// JSON rendering, bearer auth) under a bounded loopback load, against GET /healthz (no store, no
// auth) measured in the same run on the same server.
// Load: 4 client threads x 2,000 requests each, keep-alive connections, 127.0.0.1 only.
// Units: requests/s, microseconds.
#include <algorithm>
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

constexpr int kThreads = 4;
constexpr int kRequestsPerThread = 2000;
const char* kToken = "bench-token-0123456789abcdef";

struct Load {
  double req_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  int failures = 0;
};

Load Measure(int port, const std::string& path) {
  std::vector<std::vector<double>> lat(kThreads);
  std::vector<int> failures(kThreads, 0);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      httplib::Client c("127.0.0.1", port);
      c.set_keep_alive(true);
      c.set_bearer_token_auth(kToken);
      lat[t].reserve(kRequestsPerThread);
      for (int i = 0; i < kRequestsPerThread; ++i) {
        auto s = std::chrono::steady_clock::now();
        auto res = c.Get(path.c_str());
        auto e = std::chrono::steady_clock::now();
        if (!res || res->status != 200) ++failures[t];
        lat[t].push_back(std::chrono::duration<double, std::micro>(e - s).count());
      }
    });
  }
  for (auto& th : threads) th.join();
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<double> all = onboard::bench::MergeSorted(lat);
  Load l;
  l.req_per_s = static_cast<double>(all.size()) / wall_s;
  l.p50_us = all[all.size() / 2];
  l.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  for (int f : failures) l.failures += f;
  return l;
}

}  // namespace

int main() {
  std::string dir = (std::filesystem::temp_directory_path() / ("onboard-bench-api-" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  auto store = JobStore::Open(dir + "/bench.db");
  if (!store.ok()) {
    std::fprintf(stderr, "bench_api: %s\n", store.status().ToString().c_str());
    return 1;
  }
  // One finished job with a realistic request, 50 events and reports.
  auto job = (*store)->Create(
      R"({"model":{"path":"/models/kimi/config.json"},"topology":"h200-1024","options":{"mode":"lora","seq":8192}})");
  if (!job.ok() || !(*store)->MarkRunning(job->id).ok()) return 1;
  for (int i = 0; i < 50; ++i) {
    if (!(*store)->AppendEvent(job->id, "stage_progress", R"({"stage":"probe","done":3,"total":12})").ok()) return 1;
  }
  if (!(*store)->Finish(job->id, JobState::kSucceeded, R"({"summary":"ok","rounds":2})", Status::Ok(),
                        {"{}", "# r\n", "<html></html>"}).ok()) {
    return 1;
  }
  JobNotifier notifier;
  // The bench submits no jobs; the runner only satisfies the queue's contract.
  JobQueue queue(**store, notifier, [](JobContext&) -> Expected<JobOutput> { return NotFound("bench runner"); },
                 {4, 1});
  ServerConfig cfg;
  cfg.port = 0;
  cfg.token = kToken;
  cfg.http_threads = 8;
  ApiServer server(cfg, AllowedRoots(), **store, queue, notifier, 1);
  if (!server.Bind().ok() || !queue.Start().ok()) return 1;
  std::thread serve([&] { server.Serve(); });

  Measure(server.port(), "/healthz");  // warm-up (connections, reader pool)
  Load base = Measure(server.port(), "/healthz");
  Load get = Measure(server.port(), "/v1/jobs/" + job->id);

  std::printf("bench_api: %d client threads x %d requests, keep-alive, 127.0.0.1\n", kThreads, kRequestsPerThread);
  std::printf("%-28s %10s %10s %10s %9s %10s\n", "endpoint", "req/s", "p50 us", "p99 us", "failed", "rps ratio");
  std::printf("%-28s %10.0f %10.1f %10.1f %9d %10.2f\n", "GET /healthz (baseline)", base.req_per_s, base.p50_us,
              base.p99_us, base.failures, 1.0);
  std::printf("%-28s %10.0f %10.1f %10.1f %9d %10.2f\n", "GET /v1/jobs/{id}", get.req_per_s, get.p50_us, get.p99_us,
              get.failures, get.req_per_s / base.req_per_s);
  std::printf("no target in the issue; the ratio is the cost of auth + one indexed SQLite read + JSON per request\n");

  server.Stop();
  serve.join();
  queue.Shutdown(std::chrono::milliseconds(0));
  std::filesystem::remove_all(dir);
  return base.failures + get.failures == 0 ? 0 : 1;
}
