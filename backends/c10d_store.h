// INTERNAL to backends/, torch-free part of the c10d wrapper (c10d_compat.h): the rendezvous
// store handle and the per-kind collective clock, so the launcher compiles without LibTorch headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/probe.h"

namespace onboard::backends {

// Seconds waited on collectives by this process, per kind (ProbeConfig's CollectiveTimes).
CollectiveTimes& CommClock();

// Opaque store handle (c10d::Store).
struct StoreHandle;
// Rendezvous store: TCPStore on host:port. is_server with port 0 picks a free port (see port()).
class Rendezvous {
 public:
  Rendezvous(const std::string& host, int64_t port, bool is_server, double timeout_s);
  ~Rendezvous();
  int64_t port() const;
  StoreHandle* handle() const { return store_.get(); }
  void Set(const std::string& key, const std::string& value);
  std::string Get(const std::string& key);   // waits up to the timeout

 private:
  std::unique_ptr<StoreHandle> store_;
};

}  // namespace onboard::backends
