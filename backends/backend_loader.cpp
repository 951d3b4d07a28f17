// LoadBackend: finds libonboard_backend.so, dlopens it once, and checks its entry table
// (backends/backend_entry.h). Torch-free: linked into the `onboard` binary.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "backends/backend_entry.h"

namespace onboard {
namespace {

namespace fs = std::filesystem;

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return fs::path(buf).parent_path().string();
}

// Step 1: the candidates, in order (see the header).
std::vector<std::string> Candidates() {
  if (const char* env = std::getenv("ONBOARD_BACKEND_LIB"); env != nullptr && *env != 0) return {env};
  const std::string dir = ExeDir();
  std::vector<std::string> c = {dir + "/" + kBackendLibraryName, dir + "/../lib/" + kBackendLibraryName};
#ifdef ONBOARD_BACKEND_BUILD_PATH
  c.push_back(ONBOARD_BACKEND_BUILD_PATH);
#endif
  return c;
}

// Step 2: open and check the first candidate that exists.
Expected<const BackendEntryPoints*> Open() {
  const std::vector<std::string> candidates = Candidates();
  std::string path;
  for (const std::string& c : candidates) {
    std::error_code ec;
    if (fs::exists(c, ec)) {
      path = c;
      break;
    }
  }
  if (path.empty()) {
    const std::string more =
        candidates.size() > 1 ? " and " + std::to_string(candidates.size() - 1) + " more" : "";
    return NotFound("LibTorch backend " + std::string(kBackendLibraryName) + " (looked at " +
                    candidates.front() + more + "; set ONBOARD_BACKEND_LIB)");
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return IoError("LibTorch backend " + path + ": dlopen failed: " + dlerror());
  auto entry = reinterpret_cast<BackendEntryFn>(dlsym(handle, kBackendEntrySymbol));
  if (entry == nullptr)
    return IoError("LibTorch backend " + path + ": no symbol " + kBackendEntrySymbol +
                   " (not an onboard backend)");
  const BackendEntryPoints* table = entry();
  if (table == nullptr || table->abi_version != kBackendAbiVersion)
    return IoError("LibTorch backend " + path + ": ABI version " +
                   std::to_string(table == nullptr ? -1 : table->abi_version) + ", this binary needs " +
                   std::to_string(kBackendAbiVersion) + " (a library from another build)");
  return table;  // the handle stays open for the life of the process
}

}  // namespace

Expected<const BackendEntryPoints*> LoadBackend() {
  static std::once_flag once;
  static Expected<const BackendEntryPoints*> loaded =
      Status(ErrorCode::kInternal, "LibTorch backend: not loaded");
  std::call_once(once, [] { loaded = Open(); });
  return loaded;
}

namespace backend {

Expected<ProbeResult> RunProbeSpec(const ProxySpec& spec, const ProbeConfig& config,
                                   ProbeObserver* observer) {
  Expected<const BackendEntryPoints*> be = LoadBackend();
  if (!be.ok()) return be.status();
  return (*be)->run_probe_spec(spec, config, observer);
}

Status RunProbeWorker(const ProbeWorkerArgs& args) {
  Expected<const BackendEntryPoints*> be = LoadBackend();
  if (!be.ok()) return be.status();
  return (*be)->run_probe_worker(args);
}

Expected<HfVerifyResult> RunHfVerify(const HfVerifyOptions& options) {
  Expected<const BackendEntryPoints*> be = LoadBackend();
  if (!be.ok()) return be.status();
  return (*be)->run_hf_verify(options);
}

Expected<WeightsProbeResult> RunWeightsProbe(const WeightsProbeOptions& options) {
  Expected<const BackendEntryPoints*> be = LoadBackend();
  if (!be.ok()) return be.status();
  return (*be)->run_weights_probe(options);
}

}  // namespace backend
}  // namespace onboard
