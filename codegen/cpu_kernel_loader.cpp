// LoadCpuKernel: write source -> compile to <cache>/<name>-<hash>.so (atomic rename) -> dlopen -> dlsym.
#include "codegen/cpu_kernel_loader.h"
#include "codegen/shell_command.h"

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

namespace onboard::codegen {
namespace {

namespace fs = std::filesystem;

// -march=native: Highway (codegen/kernels/cpu_simd.h) then uses the machine's widest vectors.
// $ONBOARD_KERNEL_MARCH overrides it, e.g. znver3 (or "x86-64-v3 -mpclmul -maes": Highway 1.0's AVX2
// target needs AES and PCLMUL, which plain x86-64-v3 lacks) to build for an AVX2-only machine.
// -fno-gnu-unique: inline variables (the CUDA emulation runtime's globals) stay private to each
// kernel library; as STB_GNU_UNIQUE symbols the dynamic linker would share one copy between every
// library loaded in the process, and two emulated kernels would then switch fibers on each other's
// scheduler state.
std::string Flags() {
  const char* march = std::getenv("ONBOARD_KERNEL_MARCH");
  const std::string arch = (march != nullptr && *march != '\0') ? march : "native";
  return "-std=c++17 -O3 -march=" + arch + " -fPIC -shared -pthread -fno-gnu-unique -w";
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

std::string Compiler() { return EnvOr("ONBOARD_CXX", EnvOr("CXX", "c++")); }

std::string Tail(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(s.size() - n); }

}  // namespace

CpuKernelLibrary::~CpuKernelLibrary() {
  if (handle != nullptr) dlclose(handle);
}

std::string KernelCacheDir() {
  const char* explicit_dir = std::getenv("ONBOARD_KERNEL_CACHE");
  if (explicit_dir != nullptr && *explicit_dir != '\0') return explicit_dir;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/onboard/kernels";
  return EnvOr("HOME", "/tmp") + "/.cache/onboard/kernels";
}

void* CpuKernelLibrary::Symbol(const char* symbol) const {
  return handle == nullptr ? nullptr : dlsym(handle, symbol);
}

Expected<std::shared_ptr<CpuKernelLibrary>> BuildKernelLibrary(const std::string& name,
                                                               const std::string& source) {
  ONBOARD_ASSERT(IsValidKernelIdentifier(name), "kernel name is not an identifier");
  // Step 1: the cache key covers source, compiler and flags.
  const std::string compiler = Compiler();
  const std::string flags = Flags();
  const std::string key = ContentHash(source + "\n" + compiler + " " + flags);
  const fs::path dir = KernelCacheDir();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("kernel cache " + dir.string() + ": " + ec.message());
  const fs::path so = dir / (name + "-" + key + ".so");
  auto lib = std::make_shared<CpuKernelLibrary>();
  lib->name = name;
  lib->so_path = so.string();
  lib->cache_hit = fs::exists(so);
  // Step 2: compile into a unique temporary, then rename (concurrent test processes may race).
  if (!lib->cache_hit) {
    const std::string stem = name + "-" + key + "." + std::to_string(getpid());
    const fs::path src = dir / (stem + ".cpp");
    const fs::path tmp = dir / (stem + ".so.tmp");
    {
      std::ofstream f(src, std::ios::binary);
      f << source;
      if (!f) return IoError("cannot write " + src.string());
    }
    const auto t0 = std::chrono::steady_clock::now();
    std::string log;
    const std::string cmd =
        ShellQuote(compiler) + " " + flags + " " + ShellQuote(src.string()) + " -o " + ShellQuote(tmp.string());
    const int rc = RunCapture(cmd, &log);
    lib->compile_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != 0) {
      fs::remove(tmp, ec);
      return Status(ErrorCode::kBuild, "compiling " + name + " (" + cmd + ") failed:\n" +
                                           Tail(log, 2000));
    }
    fs::rename(tmp, so, ec);
    fs::remove(src, ec);
    if (!fs::exists(so)) return IoError("compiled kernel vanished: " + so.string());
  }
  // Step 3: load and check the ABI version and name.
  lib->handle = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == nullptr) {
    return Status(ErrorCode::kBuild, "dlopen " + so.string() + ": " + dlerror());
  }
  auto version = reinterpret_cast<onboard_abi_version_fn>(lib->Symbol("onboard_kernel_abi_version"));
  auto name_fn = reinterpret_cast<onboard_kernel_name_fn>(lib->Symbol("onboard_kernel_name"));
  if (version == nullptr || name_fn == nullptr || version() != ONBOARD_KERNEL_ABI_VERSION ||
      name != name_fn()) {
    return Status(ErrorCode::kBuild, so.string() + ": not an ABI v" +
                                         std::to_string(ONBOARD_KERNEL_ABI_VERSION) + " library of kernel " +
                                         name);
  }
  auto simd = reinterpret_cast<onboard_kernel_name_fn>(lib->Symbol("onboard_kernel_simd_target"));
  lib->simd_target = simd != nullptr ? simd() : "";
  return lib;
}

Expected<std::shared_ptr<CpuKernelLibrary>> LoadCpuKernel(const GeneratedKernel& kernel) {
  if (kernel.target != KernelTarget::kCpu) {
    return BadInput(kernel.name, "target", "LoadCpuKernel needs a CPU kernel", "cuda");
  }
  ONBOARD_ASSIGN_OR_RETURN(auto lib, BuildKernelLibrary(kernel.name, kernel.source));
  // Step 4: resolve the entry points of this op.
  const std::string& so = lib->so_path;
  auto sym = [&](const char* symbol) { return lib->Symbol(symbol); };
  lib->kda_fwd = reinterpret_cast<onboard_kda_fwd_fn>(sym("onboard_kda_fwd"));
  lib->dsa_fwd = reinterpret_cast<onboard_dsa_fwd_fn>(sym("onboard_dsa_fwd"));
  lib->dsa_index = reinterpret_cast<onboard_dsa_index_fn>(sym("onboard_dsa_index"));
  lib->dsa_attn = reinterpret_cast<onboard_dsa_attn_fn>(sym("onboard_dsa_attn"));
  const bool ok = kernel.op == "kda" ? lib->kda_fwd != nullptr
                                     : (lib->dsa_fwd && lib->dsa_index && lib->dsa_attn);
  if (!ok) return Status(ErrorCode::kBuild, so + ": missing entry points for " + kernel.op);
  return lib;
}

}  // namespace onboard::codegen
