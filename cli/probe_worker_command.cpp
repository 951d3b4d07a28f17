// `onboard probe-worker` (hidden): one rank of `onboard probe`, started by the launcher
// (backends/probe_launcher.cpp) or torchrun-style on several machines: without --spec flags the
// rendezvous comes from MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE and rank 0 hosts the store.
#include <cstdlib>
#include <iostream>
#include <memory>

#include "backends/backend_entry.h"
#include "cli/command_registry.h"

namespace onboard::cli {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  try {
    return std::stoll(v);
  } catch (const std::exception&) {
    return -1;
  }
}

int RunWorker(ProbeWorkerArgs a, bool torchrun) {
  if (torchrun) {  // torchrun variables; rank 0 serves the store
    a.rank = EnvInt("RANK", a.rank);
    a.world = EnvInt("WORLD_SIZE", a.world);
    a.master_port = EnvInt("MASTER_PORT", a.master_port);
    if (const char* addr = std::getenv("MASTER_ADDR")) a.master_addr = addr;
    a.serve_store = a.rank == 0;
  }
  if (a.rank < 0 || a.world < 1 || a.rank >= a.world)
    return ReportError("probe-worker", BadInput("probe-worker", "rank", "must be in [0, world=" +
                                                std::to_string(a.world) + ")", std::to_string(a.rank)));
  if (a.master_port <= 0 || a.master_port > 65535)
    return ReportError("probe-worker", BadInput("probe-worker", "master_port", "must be in [1, 65535]",
                                                std::to_string(a.master_port)));
  try {
    Status st = backend::RunProbeWorker(a);
    if (!st.ok()) return ReportError("probe-worker rank " + std::to_string(a.rank), st);
  } catch (const std::exception& e) {  // c10d errors (peer gone, timeout) arrive as exceptions
    std::string what = e.what();  // c10::Error appends a backtrace: keep the first line
    what = what.substr(0, what.find('\n'));
    std::cerr << "onboard probe-worker rank " << a.rank << ": collective failed: " << what << "\n";
    return ExitCodeFor(ErrorCode::kNetwork);
  }
  return 0;
}

OnboardCommand kProbeWorker{
    "probe-worker", "", 1000,  // empty help: hidden from --help
    [](CLI::App& sub) -> RunFn {
      auto a = std::make_shared<ProbeWorkerArgs>();
      auto torchrun = std::make_shared<bool>(false);
      sub.add_option("--spec", a->spec_file, "probe_spec.json written by the launcher")->required();
      sub.add_option("--rank", a->rank);
      sub.add_option("--world", a->world);
      sub.add_option("--master-addr", a->master_addr);
      sub.add_option("--master-port", a->master_port);
      sub.add_option("--out", a->out_file);
      sub.add_option("--steps-out", a->steps_file, "rank 0: append one ProbeStep JSON line per step here");
      sub.add_flag("--torchrun", *torchrun, "take RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT from the environment");
      return [a, torchrun] { return RunWorker(*a, *torchrun); };
    }};

}  // namespace
}  // namespace onboard::cli
