// LoadEmulatedCudaKernel: prefix the .cu text with the emulation runtime, build it like a CPU kernel
// (BuildKernelLibrary: cached .so, dlopen), resolve the CUDA ABI entry points.
#include "validators/cuda_emulation_loader.h"

namespace onboard::validators {

using codegen::GeneratedKernel;
using codegen::KernelTarget;

const std::string& CudaEmulationSource() {
  const auto& files = EmbeddedEmulationRuntime();
  ONBOARD_ASSERT(files.size() == 1 && files[0].first == "validators/cuda_emulation_runtime.h",
                 "the build embeds validators/cuda_emulation_runtime.h alone (validators/CMakeLists.txt)");
  return files[0].second;
}

std::string CudaEmulationTranslationUnit(const GeneratedKernel& kernel) {
  std::string tu = "// CPU emulation build of " + kernel.FileName() + " (not a GPU run)\n";
  tu += "#define ONBOARD_CUDA_EMULATION 1\n";
  tu += "#define ONBOARD_EMU_ARCH " + std::to_string(kernel.cuda_arch) + "\n";
  return tu + CudaEmulationSource() + kernel.source;
}

Expected<EmulatedCudaKernel> LoadEmulatedCudaKernel(const GeneratedKernel& kernel) {
  if (kernel.target != KernelTarget::kCuda) {
    return BadInput(kernel.name, "target", "CUDA emulation needs a CUDA kernel", "cpu");
  }
  EmulatedCudaKernel k;
  ONBOARD_ASSIGN_OR_RETURN(k.lib,
                           codegen::BuildKernelLibrary(kernel.name, CudaEmulationTranslationUnit(kernel)));
  auto sym = [&](const char* s) { return k.lib->Symbol(s); };
  if (kernel.op == "kda") {
    k.workspace_bytes = reinterpret_cast<onboard_cuda_workspace_bytes_fn>(sym("onboard_kda_cuda_workspace_bytes"));
    k.kda_fwd = reinterpret_cast<onboard_kda_fwd_cuda_fn>(sym("onboard_kda_fwd_cuda"));
  } else {
    k.workspace_bytes = reinterpret_cast<onboard_cuda_workspace_bytes_fn>(sym("onboard_dsa_cuda_workspace_bytes"));
    k.dsa_fwd = reinterpret_cast<onboard_dsa_fwd_cuda_fn>(sym("onboard_dsa_fwd_cuda"));
  }
  k.message = reinterpret_cast<onboard_cuda_emulation_message_fn>(sym("onboard_cuda_emulation_message"));
  k.configure = reinterpret_cast<onboard_cuda_emulation_configure_fn>(sym("onboard_cuda_emulation_configure"));
  k.stats = reinterpret_cast<onboard_cuda_emulation_stats_fn>(sym("onboard_cuda_emulation_stats"));
  if (k.workspace_bytes == nullptr || (k.kda_fwd == nullptr && k.dsa_fwd == nullptr) ||
      k.message == nullptr || k.configure == nullptr || k.stats == nullptr) {
    return Status(ErrorCode::kBuild, k.lib->so_path + ": missing CUDA entry points for " + kernel.op);
  }
  return k;
}

}  // namespace onboard::validators
