// ClientConnectionCap (see serve/http_client_cap.h).
#include "serve/http_client_cap.h"

namespace onboard::serve {
namespace {

// The connection served on this thread: which cap counted it, for which address.
struct ThreadConnection {
  ClientConnectionCap* cap = nullptr;
  std::string ip;
};
thread_local ThreadConnection t_connection;

}  // namespace

bool ClientConnectionCap::Admit(const std::string& ip) {
  // Step 1: a later request on a connection already counted.
  if (t_connection.cap == this) return true;
  // Step 2: a first request: count it, unless the address is at its cap.
  std::lock_guard<std::mutex> lock(mu_);
  size_t& n = open_[ip];
  if (n >= max_) {
    if (n == 0) open_.erase(ip);
    return false;
  }
  ++n;
  t_connection = {this, ip};
  return true;
}

void ClientConnectionCap::EndConnection() {
  ThreadConnection done = std::move(t_connection);
  t_connection = {};
  if (done.cap != nullptr) done.cap->Release(done.ip);
}

size_t ClientConnectionCap::Count(const std::string& ip) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(ip);
  return it == open_.end() ? 0 : it->second;
}

void ClientConnectionCap::Release(const std::string& ip) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_.find(ip);
  if (it == open_.end()) return;
  if (--it->second == 0) open_.erase(it);
}

}  // namespace onboard::serve
