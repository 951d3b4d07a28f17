// CompileCuda: write <name>.cu, run nvcc -cubin (and -ptx) for the kernel's sm arch.
#include "codegen/cuda_compiler.h"
#include "codegen/shell_command.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace onboard::codegen {
namespace {

namespace fs = std::filesystem;

bool IsExecutable(const fs::path& p) {
  std::error_code ec;
  const auto st = fs::status(p, ec);
  return !ec && fs::is_regular_file(st) &&
         (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
}

}  // namespace

std::optional<std::string> FindNvcc() {
  const char* env = std::getenv("ONBOARD_NVCC");
  if (env != nullptr && *env != '\0') {
    if (IsExecutable(env)) return std::string(env);
    return std::nullopt;
  }
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      const size_t end = p.find(':', start);
      const std::string dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
      if (!dir.empty() && IsExecutable(fs::path(dir) / "nvcc")) return (fs::path(dir) / "nvcc").string();
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (IsExecutable("/usr/local/cuda/bin/nvcc")) return std::string("/usr/local/cuda/bin/nvcc");
  return std::nullopt;
}

Expected<CudaBuildResult> CompileCuda(const GeneratedKernel& kernel, const std::string& out_dir,
                                      bool want_ptx) {
  if (kernel.target != KernelTarget::kCuda) {
    return BadInput(kernel.name, "target", "CompileCuda needs a CUDA kernel", "cpu");
  }
  ONBOARD_ASSERT(IsValidKernelIdentifier(kernel.name), "kernel name is not an identifier");
  const auto nvcc = FindNvcc();
  if (!nvcc) return NotFound("nvcc (set ONBOARD_NVCC or put CUDA's bin on PATH)");
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return IoError(out_dir + ": " + ec.message());
  CudaBuildResult r;
  const std::string arch = "sm_" + std::to_string(kernel.cuda_arch);
  r.cu_path = (fs::path(out_dir) / kernel.FileName()).string();
  r.cubin_path = (fs::path(out_dir) / (kernel.name + "." + arch + ".cubin")).string();
  {
    std::ofstream f(r.cu_path, std::ios::binary);
    f << kernel.source;
    if (!f) return IoError("cannot write " + r.cu_path);
  }
  // A cubin built from the same source (sidecar <cubin>.hash) is reused.
  const std::string stamp = kernel.content_hash + (want_ptx ? " ptx" : "");
  const std::string stamp_path = r.cubin_path + ".hash";
  {
    std::ifstream f(stamp_path);
    std::string old;
    std::getline(f, old);
    if (old == stamp && fs::exists(r.cubin_path)) {
      if (want_ptx) r.ptx_path = (fs::path(out_dir) / (kernel.name + "." + arch + ".ptx")).string();
      r.cached = true;
      return r;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string log;
  const std::string base = ShellQuote(*nvcc) + " -std=c++17 -O3 -arch=" + arch + " ";
  std::string cmd = base + "-cubin " + ShellQuote(r.cu_path) + " -o " + ShellQuote(r.cubin_path);
  int rc = RunCapture(cmd, &log);
  if (rc == 0 && want_ptx) {
    r.ptx_path = (fs::path(out_dir) / (kernel.name + "." + arch + ".ptx")).string();
    cmd = base + "-ptx " + ShellQuote(r.cu_path) + " -o " + ShellQuote(r.ptx_path);
    rc = RunCapture(cmd, &log);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rc != 0) {
    const std::string tail = log.size() > 3000 ? log.substr(log.size() - 3000) : log;
    return Status(ErrorCode::kBuild, "nvcc " + kernel.name + " failed (" + cmd + "):\n" + tail);
  }
  std::ofstream(stamp_path) << stamp << "\n";
  return r;
}

}  // namespace onboard::codegen
