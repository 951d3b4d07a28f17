// ClientConnectionCap: at most `max_per_client` connections per client address are served at once.
//   - A connection counts from its first request (the pre-routing handler calls Admit) until it
//     closes (the connection thread calls EndConnection when httplib is done with the socket).
//     Connections that never send a request line are not counted; they are dropped after
//     kIdleBeforeRequestS (serve/http_limits.h).
//   - A request on a connection over the cap is answered 429 with Connection: close, so one client
//     cannot hold every connection thread (keep-alive, SSE followers) while others wait. httplib
//     0.11 does not close on that header itself: the client does, or the idle timeout does.
//   - State per connection is thread-local: httplib serves one connection on one thread from
//     accept to close (serve/http_limits.h, ElasticTaskQueue).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace onboard::serve {

inline constexpr int kDefaultMaxClientConnections = 64;  // connections per client address
inline constexpr int kRetryAfterCapS = 1;                // Retry-After of a 429 over the cap

class ClientConnectionCap {
 public:
  explicit ClientConnectionCap(size_t max_per_client) : max_(max_per_client) {}

  // True when this thread's connection is (or now becomes) one of `ip`'s counted connections.
  bool Admit(const std::string& ip);
  // Called on the connection's thread after it closed: releases its slot, if it had one.
  static void EndConnection();
  // Connections of `ip` counted now.
  size_t Count(const std::string& ip) const;

 private:
  void Release(const std::string& ip);

  const size_t max_;
  mutable std::mutex mu_;
  std::map<std::string, size_t> open_;
};

}  // namespace onboard::serve
