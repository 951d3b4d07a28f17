// MeasureThisMachine (probe_report.h): this host as a Topology for the cost model, from three
// quick measurements taken with the probe's own settings:
//   GEMM rate:  fp32 256x256x256 matmuls with threads_per_rank threads, FLOP/s = 2*n^3 / time;
//   loopback:   a TCP socket pair on 127.0.0.1 moving 32 MiB one way, GB/s = bytes / time;
//   latency:    1-byte ping-pong on the same pair, half the round-trip time.
// Ranks oversubscribing the cores get their share of the GEMM rate. Memory per "device" = this host's MemAvailable / ranks.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <torch/torch.h>
#include <vector>

#include "backends/probe_report.h"

namespace onboard::backends {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

double GemmGflops(int64_t threads) {
  const int saved = at::get_num_threads();
  at::set_num_threads(static_cast<int>(threads));
  const int64_t n = 256;
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::matmul(a, b);  // warm-up
  int reps = 0;
  auto t0 = Clock::now();
  while (Seconds(t0) < 0.15 || reps < 3) {
    at::matmul(a, b);
    ++reps;
  }
  const double s = Seconds(t0);
  at::set_num_threads(saved);
  return 2.0 * n * n * n * reps / s / 1e9;
}

// Connected loopback TCP pair (client, server side); {-1,-1} on failure.
std::pair<int, int> LoopbackPair() {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (ls < 0 || bind(ls, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(ls, 1) != 0 ||
      getsockname(ls, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (ls >= 0) close(ls);
    return {-1, -1};
  }
  int c = socket(AF_INET, SOCK_STREAM, 0);
  if (c < 0 || connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(ls);
    if (c >= 0) close(c);
    return {-1, -1};
  }
  int s = accept(ls, nullptr, nullptr);
  close(ls);
  int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (s >= 0) setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return {c, s};
}

void LoopbackRates(double* gbps, double* latency_us) {
  *gbps = 5.0;  // fallbacks when sockets are unavailable
  *latency_us = 20.0;
  auto [c, s] = LoopbackPair();
  if (c < 0 || s < 0) return;
  const size_t total = 32u << 20, chunk = 1u << 20;
  std::thread reader([fd = s, total] {
    std::vector<char> buf(1u << 20);
    size_t got = 0;
    while (got < total) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    char ack = 1;
    (void)!write(fd, &ack, 1);
    for (int i = 0; i < 200; ++i) {  // ping-pong
      if (read(fd, &ack, 1) != 1 || write(fd, &ack, 1) != 1) break;
    }
  });
  std::vector<char> data(chunk, 7);
  auto t0 = Clock::now();
  for (size_t sent = 0; sent < total; sent += chunk) (void)!write(c, data.data(), chunk);
  char ack = 0;
  (void)!read(c, &ack, 1);
  const double s_bw = Seconds(t0);
  t0 = Clock::now();
  int rounds = 0;
  for (; rounds < 200; ++rounds)
    if (write(c, &ack, 1) != 1 || read(c, &ack, 1) != 1) break;
  const double s_lat = Seconds(t0);
  reader.join();
  close(c);
  close(s);
  if (s_bw > 0) *gbps = static_cast<double>(total) / s_bw / 1e9;
  if (rounds > 0) *latency_us = s_lat / rounds / 2.0 * 1e6;
}

double MemAvailableGib() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (f >> key >> kb) {
    if (key == "MemAvailable:") return kb / 1048576.0;
    f.ignore(1 << 10, '\n');
  }
  return 8.0;
}

}  // namespace

Topology MeasureThisMachine(int64_t ranks, int64_t threads_per_rank) {
  // Ranks share the host's cores: each gets at most cores / (ranks * threads) of the measured rate.
  const double cores = std::max(1u, std::thread::hardware_concurrency());
  const double share = std::min(1.0, cores / static_cast<double>(ranks * threads_per_rank));
  const double gflops = GemmGflops(threads_per_rank) * share;
  double gbps = 0, lat = 0;
  LoopbackRates(&gbps, &lat);
  Topology t = LocalhostTopology(ranks, gflops, gbps, lat, MemAvailableGib() / static_cast<double>(ranks));
  return t;
}

}  // namespace onboard::backends
