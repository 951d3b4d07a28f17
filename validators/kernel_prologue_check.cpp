// CheckKdaPrologueFusion: the fused KDA prologue (gate activation, q/k L2 norm, beta sigmoid inside the
// kernel) against the unfused sequence (those steps as separate fp32 passes, then the kernel).
// Units: errors are relative L2 norms ||a - b|| / ||b||.
#include "validators/kernel_prologue_check.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>

#include "codegen/cpu_kernel_loader.h"
#include "validators/cuda_emulation_loader.h"
#include "codegen/kernel_generator.h"

namespace onboard::validators {
namespace {

using codegen::KdaSpec;

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

KernelCheckRow Row(const std::string& kernel, const std::string& shape, const std::string& against,
                   const KdaRun& got, const std::vector<float>& ref_o, const std::vector<float>& ref_s) {
  return KdaCheckRow(kernel, shape, against, kKernelTolF32VsF64, CompareKernelOutput(got.o, ref_o),
                     CompareKernelOutput(got.state, ref_s));
}

std::vector<float> ToFloat(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

KdaSpec UnfusedKdaSpec(const KdaSpec& fused) {
  KdaSpec u = fused;
  u.gate_form = GateForm::kNone;
  u.normalize_qk = false;
  u.beta_sigmoid = false;
  u.name = u.DefaultName();
  return u;
}

KdaInputs UnfusedKdaPrologue(const KdaSpec& s, const KdaInputs& in) {
  const int64_t BT = in.batch * in.seq, H = s.num_heads, HV = s.num_v_heads, K = s.head_dim;
  KdaInputs out = in;
  // Step 1: gate activation -> log decay per channel.
  for (int64_t bt = 0; bt < BT; ++bt)
    for (int64_t hv = 0; hv < HV; ++hv)
      for (int64_t d = 0; d < K; ++d) {
        const int64_t i = (bt * HV + hv) * K + d;
        const float bias = in.dt_bias.empty() ? 0.0f : in.dt_bias[hv * K + d];
        out.g[i] = KdaLogDecay<float>(s.gate_form, s.gate_lower_bound, in.a_log[hv], bias, in.g[i]);
      }
  // Step 2: q/k L2 norm per head row (eps 1e-6, as inside the kernel).
  for (auto* x : {&out.q, &out.k}) {
    if (!s.normalize_qk) break;
    for (int64_t row = 0; row < BT * H; ++row) {
      float ss = 0;
      for (int64_t d = 0; d < K; ++d) ss += (*x)[row * K + d] * (*x)[row * K + d];
      const float inv = 1.0f / std::sqrt(ss + 1e-6f);
      for (int64_t d = 0; d < K; ++d) (*x)[row * K + d] *= inv;
    }
  }
  // Step 3: beta sigmoid.
  if (s.beta_sigmoid) {
    for (float& b : out.beta) b = 1.0f / (1.0f + std::exp(-b));
  }
  out.a_log.assign(HV, 0.0f);
  out.dt_bias.clear();
  return out;
}

Expected<std::vector<KernelCheckRow>> CheckKdaPrologueFusion(const KdaSpec& fused,
                                                             const std::vector<int64_t>& lengths, uint64_t seed,
                                                             const KdaRunner& run, const std::string& suffix,
                                                             const std::string& note) {
  if (fused.gate_form == GateForm::kNone) {
    return BadInput("kda spec", "gate_form", "the prologue check needs a gate to fuse", "none");
  }
  const KdaSpec unfused = UnfusedKdaSpec(fused);
  std::vector<KernelCheckRow> rows;
  for (int64_t T : lengths) {
    const int64_t B = T == 1 ? 2 : 1;
    const bool with_state = T != 1;
    const KdaInputs in = RandomKdaInputs(fused, B, T, with_state, ++seed);
    const KdaInputs pre = UnfusedKdaPrologue(fused, in);
    ONBOARD_ASSIGN_OR_RETURN(KdaRun f, run(fused, in));
    ONBOARD_ASSIGN_OR_RETURN(KdaRun u, run(unfused, pre));
    const KdaResult<double> ref = ReferenceKda<double>(fused, in);
    const std::string shape = KdaCheckShape(fused, B, T, with_state);
    const std::string name = fused.DefaultName();
    rows.push_back(Row(name, shape, "unfused prologue" + suffix, f, u.o, u.state));
    rows.push_back(Row(name, shape, "fp64 recurrence" + suffix, f, ToFloat(ref.o), ToFloat(ref.final_state)));
    rows[rows.size() - 2].note = rows.back().note = note;
  }
  return rows;
}

Expected<std::vector<KernelCheckRow>> CheckKdaPrologueFusionForPlan(const std::vector<KdaSpec>& plan,
                                                                    uint64_t seed, const KdaRunner& run,
                                                                    const std::string& suffix,
                                                                    const std::string& note) {
  std::vector<KernelCheckRow> rows;
  for (GateForm form : {GateForm::kOriginal, GateForm::kBounded}) {
    for (KdaSpec s : plan) {
      if (s.gate_form != form) continue;
      s.beta_sigmoid = true;
      s.name = s.DefaultName();
      ONBOARD_ASSIGN_OR_RETURN(auto r, CheckKdaPrologueFusion(s, KdaCheckLengths(s.chunk_size),
                                                              seed ^ std::hash<std::string>{}(s.name), run, suffix, note));
      rows.insert(rows.end(), r.begin(), r.end());
      break;
    }
  }
  return rows;
}

KdaRunner CpuKdaRunner(int64_t num_threads) {
  auto libs = std::make_shared<std::map<std::string, std::shared_ptr<codegen::CpuKernelLibrary>>>();
  return [libs, num_threads](const KdaSpec& spec, const KdaInputs& in) -> Expected<KdaRun> {
    std::shared_ptr<codegen::CpuKernelLibrary>& lib = (*libs)[spec.DefaultName()];
    if (lib == nullptr) {
      ONBOARD_ASSIGN_OR_RETURN(codegen::GeneratedKernel gen, codegen::GenerateKda(spec, {}));
      ONBOARD_ASSIGN_OR_RETURN(lib, codegen::LoadCpuKernel(gen));
    }
    const int64_t HV = spec.num_v_heads, K = spec.head_dim, V = spec.v_head_dim;
    KdaRun r;
    r.o.assign(in.batch * in.seq * HV * V, kPoison);
    r.state.assign(in.batch * HV * K * V, kPoison);
    const int rc = lib->kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                                in.a_log.data(), in.dt_bias.empty() ? nullptr : in.dt_bias.data(),
                                in.initial_state.empty() ? nullptr : in.initial_state.data(), r.o.data(),
                                r.state.data(), in.batch, in.seq, num_threads);
    if (rc != 0) return Status(ErrorCode::kInternal, lib->name + " returned " + std::to_string(rc));
    return r;
  };
}

KdaRunner EmulatedCudaKdaRunner(int cuda_arch) {
  auto kernels = std::make_shared<std::map<std::string, EmulatedCudaKernel>>();
  return [kernels, cuda_arch](const KdaSpec& spec, const KdaInputs& in) -> Expected<KdaRun> {
    auto it = kernels->find(spec.DefaultName());
    if (it == kernels->end()) {
      const codegen::TargetOptions target{codegen::KernelTarget::kCuda, cuda_arch};
      ONBOARD_ASSIGN_OR_RETURN(codegen::GeneratedKernel gen, codegen::GenerateKda(spec, target));
      ONBOARD_ASSIGN_OR_RETURN(EmulatedCudaKernel emu, LoadEmulatedCudaKernel(gen));
      it = kernels->emplace(spec.DefaultName(), std::move(emu)).first;
    }
    const EmulatedCudaKernel& emu = it->second;
    const int64_t HV = spec.num_v_heads, K = spec.head_dim, V = spec.v_head_dim;
    KdaRun r;
    r.o.assign(in.batch * in.seq * HV * V, kPoison);
    r.state.assign(in.batch * HV * K * V, kPoison);
    std::vector<unsigned char> ws(emu.workspace_bytes(in.batch, in.seq) + 8, 0xA5);
    void* wsp = ws.data() + (8 - reinterpret_cast<uintptr_t>(ws.data()) % 8) % 8;
    emu.configure(0);
    const int rc = emu.kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(),
                               in.a_log.data(), in.dt_bias.empty() ? nullptr : in.dt_bias.data(),
                               in.initial_state.empty() ? nullptr : in.initial_state.data(), r.o.data(),
                               r.state.data(), wsp, in.batch, in.seq, nullptr);
    if (rc != 0) {
      return Status(ErrorCode::kInternal, spec.DefaultName() + " [CUDA emulated] failed: " + emu.message());
    }
    return r;
  };
}

}  // namespace onboard::validators
