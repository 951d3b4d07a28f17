// CheckKdaKernelEmulated / CheckDsaKernelEmulated: generate CUDA -> build under CPU emulation of the CUDA
// model (not a GPU) -> run forward and reversed on NaN-poisoned outputs -> compare with the fp64
// references. Units: errors are relative L2 norms; workspace in bytes.
#include "validators/cuda_emulation_check.h"

#include <cstring>
#include <limits>
#include <string>

#include "validators/cuda_emulation_loader.h"
#include "codegen/kernel_generator.h"
#include "validators/kernel_prologue_check.h"
#include "validators/reference_dsa.h"
#include "validators/reference_kda.h"

namespace onboard::validators {
namespace {

using codegen::DsaSpec;
using codegen::KdaSpec;

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();
constexpr const char* kAgainst = "fp64 ref [CUDA emulated]";

// An operand as the kernel takes it: fp32 values, or (bf16 kernels) the values rounded to bf16 in place
// plus their bit patterns.
struct Operand {
  std::vector<float>* values;
  std::vector<uint16_t> bits;
};

uint16_t Bf16Bits(float f) {  // round to nearest even (inputs are finite)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

Operand MakeOperand(std::vector<float>* v, bool bf16) {
  Operand o{v, {}};
  if (!bf16) return o;
  o.bits.resize(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    o.bits[i] = Bf16Bits((*v)[i]);
    const uint32_t u = uint32_t(o.bits[i]) << 16;
    std::memcpy(&(*v)[i], &u, 4);
  }
  return o;
}

const void* Ptr(const Operand& o) {
  if (o.values->empty()) return nullptr;
  return o.bits.empty() ? static_cast<const void*>(o.values->data()) : o.bits.data();
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// A kernel-written buffer of n elements followed by kGuard elements of the same poison: writes past
// the end (an overrun the poisoned outputs alone would not show) leave the guard changed.
constexpr size_t kGuard = 64;
template <typename T>
std::vector<T> Guarded(size_t n, T poison) { return std::vector<T>(n + kGuard, poison); }
template <typename T>
bool GuardIntact(const std::vector<T>& v, T poison) {
  for (size_t i = v.size() - kGuard; i < v.size(); ++i) {
    if (std::memcmp(&v[i], &poison, sizeof(T)) != 0) return false;
  }
  return true;
}
template <typename T>
std::vector<T> Body(const std::vector<T>& v) { return std::vector<T>(v.begin(), v.end() - kGuard); }
constexpr unsigned char kWsPoison = 0xA5;

// A fresh poisoned workspace of `bytes` (+ guard); returns the 8-byte-aligned pointer the kernel gets.
void* NewWorkspace(std::vector<unsigned char>* ws, size_t bytes) {
  *ws = Guarded(bytes + 8, kWsPoison);
  return ws->data() + (8 - reinterpret_cast<uintptr_t>(ws->data()) % 8) % 8;
}

// The note's verdicts on the reversed pass and the guard zones.
std::string PassNote(bool reverse_pass, bool same, bool guards) {
  return std::string("reversed order ") + (!reverse_pass ? "not run" : same ? "bit-identical" : "DIFFERS (race)") +
         (guards ? "" : "; WRITE PAST THE END of an output or the workspace");
}

// A row for a case whose launch failed (divergent barrier, bad launch configuration...).
KernelCheckRow LaunchFailure(const std::string& kernel, const std::string& shape, int rc, const char* msg) {
  KernelCheckRow r;
  r.kernel = kernel;
  r.shape = shape;
  r.against = kAgainst;
  r.rel_err = std::numeric_limits<double>::quiet_NaN();
  r.tol = kKernelTolF32VsF64;
  r.pass = false;
  r.note = "CUDA emulation: launch failed (cudaError " + std::to_string(rc) + "): " + msg;
  return r;
}

}  // namespace

Expected<std::vector<KernelCheckRow>> CheckKdaKernelEmulated(const KdaSpec& spec,
                                                             const CudaEmulationCheckOptions& opt) {
  const codegen::TargetOptions target{codegen::KernelTarget::kCuda, opt.cuda_arch};
  ONBOARD_ASSIGN_OR_RETURN(codegen::GeneratedKernel gen, codegen::GenerateKda(spec, target));
  ONBOARD_ASSIGN_OR_RETURN(EmulatedCudaKernel emu, LoadEmulatedCudaKernel(gen));
  const bool bf16 = spec.dtype == DType::kBF16;
  std::vector<KernelCheckRow> rows;
  uint64_t seed = opt.seed ^ std::hash<std::string>{}(gen.name);
  const std::vector<int64_t> lengths = opt.lengths.empty() ? KdaCheckLengths(spec.chunk_size) : opt.lengths;
  for (int64_t T : lengths) {
    // Batch indexing: B = 2 at T = 1 and at the longest of the odd shapes.
    const int64_t B = T == 1 || (opt.lengths.empty() && T == lengths.back()) ? 2 : 1;
    const bool with_state = T != 1;
    KdaInputs in = RandomKdaInputs(spec, B, T, with_state, ++seed);
    const Operand q = MakeOperand(&in.q, bf16), k = MakeOperand(&in.k, bf16), v = MakeOperand(&in.v, bf16),
                  g = MakeOperand(&in.g, bf16), beta = MakeOperand(&in.beta, bf16);
    const KdaResult<double> ref = ReferenceKda<double>(spec, in);
    const std::string shape = KdaCheckShape(spec, B, T, with_state) + (bf16 ? " bf16" : "");
    const size_t ws_bytes = emu.workspace_bytes(B, T);
    std::vector<float> o[2], st[2];
    std::vector<unsigned char> ws;
    int rc = 0;
    bool guards = true;
    for (int pass = 0; pass < (opt.reverse_pass ? 2 : 1) && rc == 0; ++pass) {
      o[pass] = Guarded(ref.o.size(), kPoison);
      st[pass] = Guarded(ref.final_state.size(), kPoison);
      void* wsp = NewWorkspace(&ws, ws_bytes);
      emu.configure(pass);
      rc = emu.kda_fwd(Ptr(q), Ptr(k), Ptr(v), Ptr(g), Ptr(beta), in.a_log.data(), in.dt_bias.data(),
                       with_state ? in.initial_state.data() : nullptr, o[pass].data(), st[pass].data(), wsp,
                       B, T, nullptr);
      guards = guards && GuardIntact(o[pass], kPoison) && GuardIntact(st[pass], kPoison) &&
               GuardIntact(ws, kWsPoison);
      o[pass] = Body(o[pass]);
      st[pass] = Body(st[pass]);
    }
    if (rc != 0) {
      rows.push_back(LaunchFailure(gen.name, shape, rc, emu.message()));
      continue;
    }
    const KernelErrStats eo = CompareKernelOutput(o[0], ref.o);
    const KernelErrStats es = CompareKernelOutput(st[0], ref.final_state);
    KernelCheckRow r = KdaCheckRow(gen.name, shape, kAgainst, kKernelTolF32VsF64, eo, es);
    const bool same = !opt.reverse_pass || (SameBits(o[0], o[1]) && SameBits(st[0], st[1]));
    r.pass = r.pass && same && guards;
    r.note = "CPU emulation, not a GPU run; " + PassNote(opt.reverse_pass, same, guards);
    rows.push_back(r);
  }
  return rows;
}

Expected<std::vector<KernelCheckRow>> CheckDsaKernelEmulated(const DsaSpec& spec,
                                                             const CudaEmulationCheckOptions& opt) {
  const codegen::TargetOptions target{codegen::KernelTarget::kCuda, opt.cuda_arch};
  ONBOARD_ASSIGN_OR_RETURN(codegen::GeneratedKernel gen, codegen::GenerateDsa(spec, target));
  return CheckGeneratedDsaKernelEmulated(spec, gen, opt);
}

Expected<std::vector<KernelCheckRow>> CheckGeneratedDsaKernelEmulated(const DsaSpec& spec,
                                                                      const codegen::GeneratedKernel& gen,
                                                                      const CudaEmulationCheckOptions& opt) {
  ONBOARD_ASSIGN_OR_RETURN(EmulatedCudaKernel emu, LoadEmulatedCudaKernel(gen));
  const bool bf16 = spec.dtype == DType::kBF16;
  std::vector<int64_t> lengths = opt.lengths.empty() ? DsaCheckLengths(spec.topk) : opt.lengths;
  if (opt.lengths.empty() && opt.long_dsa_case && spec.topk <= 64) lengths.push_back(300);
  std::vector<KernelCheckRow> rows;
  uint64_t seed = opt.seed ^ std::hash<std::string>{}(gen.name);
  for (size_t li = 0; li < lengths.size(); ++li) {
    const int64_t T = lengths[li];
    const int64_t B = T == 1 || (opt.lengths.empty() && li + 1 == lengths.size()) ? 2 : 1;
    DsaInputs in = RandomDsaInputs(spec, B, T, ++seed);
    // The last length with T > k: every third query and the last one score all keys 0 -> pure ties
    // at the k-th (and an overrun of the last query's selection would hit the guard); every fourth
    // key scores 0 for every query -> ties at the k-th mixed with larger scores at later indices
    // (a tie rule that keeps one tie too many then pushes a larger key out).
    const bool ties = li + 1 == lengths.size() && T > spec.topk;
    if (ties) {
      const int64_t w = spec.index_heads * spec.index_head_dim;
      for (int64_t bt = 0; bt < B * T; bt += 3) std::fill_n(in.index_q.begin() + bt * w, w, 0.0f);
      std::fill_n(in.index_q.end() - w, w, 0.0f);
      for (int64_t bt = 1; bt < B * T; bt += 4)
        std::fill_n(in.index_k.begin() + bt * spec.index_head_dim, spec.index_head_dim, 0.0f);
    }
    const Operand q = MakeOperand(&in.q, bf16), k = MakeOperand(&in.k, bf16), v = MakeOperand(&in.v, bf16),
                  iq = MakeOperand(&in.index_q, bf16), ik = MakeOperand(&in.index_k, bf16),
                  iw = MakeOperand(&in.index_w, bf16), gate = MakeOperand(&in.gate, bf16);
    const DsaReference ref = ReferenceDsa(spec, in);
    const std::string shape = DsaCheckShape(spec, B, T) + (ties ? " ties" : "") + (bf16 ? " bf16" : "");
    // One pass: no global workspace (the scores stay in shared memory) and ONE launch per forward.
    const size_t ws_bytes = emu.workspace_bytes(B, T);
    std::vector<float> o[2];
    std::vector<int32_t> idx[2];
    int rc = 0;
    bool guards = true;
    int64_t launches = 0;
    for (int pass = 0; pass < (opt.reverse_pass ? 2 : 1) && rc == 0; ++pass) {
      o[pass] = Guarded(ref.o.size(), kPoison);
      idx[pass] = Guarded<int32_t>(ref.indices.size(), -7);
      emu.configure(pass);
      int64_t before[4], after[4];
      emu.stats(before);
      rc = emu.dsa_fwd(Ptr(q), Ptr(k), Ptr(v), Ptr(iq), Ptr(ik), Ptr(iw), Ptr(gate),
                       spec.sink ? in.sink.data() : nullptr, spec.v_up_dim > 0 ? in.v_up.data() : nullptr,
                       o[pass].data(), idx[pass].data(), nullptr, B, T, nullptr);
      emu.stats(after);
      launches = after[0] - before[0];
      guards = guards && GuardIntact(o[pass], kPoison) && GuardIntact<int32_t>(idx[pass], -7);
      o[pass] = Body(o[pass]);
      idx[pass] = Body(idx[pass]);
    }
    if (rc != 0) {
      rows.push_back(LaunchFailure(gen.name, shape, rc, emu.message()));
      continue;
    }
    int64_t mismatched = 0;
    for (size_t i = 0; i < idx[0].size(); ++i) mismatched += idx[0][i] != ref.indices[i];
    const KernelErrStats eo = CompareKernelOutput(o[0], ref.o);
    const bool same = !opt.reverse_pass || (SameBits(o[0], o[1]) && SameBits(idx[0], idx[1]));
    const bool one_pass = ws_bytes == 0 && launches == 1;
    KernelCheckRow r;
    r.kernel = gen.name;
    r.shape = shape;
    r.against = kAgainst;
    r.tol = kKernelTolF32VsF64;
    r.rel_err = eo.rel;
    r.nonfinite_match = eo.nonfinite_match;
    r.pass = r.nonfinite_match && mismatched == 0 && r.rel_err < r.tol && same && one_pass && guards;
    r.note = "index mismatch " + std::to_string(mismatched) + "/" + std::to_string(idx[0].size()) +
             "; one pass: " + std::to_string(launches) + " launch, workspace " + std::to_string(ws_bytes) +
             " B" + (one_pass ? "" : " (BAD: want 1 launch, 0 B)") + "; " +
             PassNote(opt.reverse_pass, same, guards) + "; CPU emulation, not a GPU run";
    rows.push_back(r);
  }
  return rows;
}

namespace {

Expected<std::vector<KernelCheckRow>> CheckEmulated(const KdaSpec& s, const CudaEmulationCheckOptions& o) {
  return CheckKdaKernelEmulated(s, o);
}
Expected<std::vector<KernelCheckRow>> CheckEmulated(const DsaSpec& s, const CudaEmulationCheckOptions& o) {
  return CheckDsaKernelEmulated(s, o);
}

// Step 1: the model's kernels at full size, a few tokens, one pass. Step 2: the plan's kernels, the
// first one also in bf16.
template <typename Spec>
Status CheckSpecs(const std::vector<Spec>& full, const std::vector<Spec>& plan,
                  const CudaEmulationCheckOptions& opt, std::vector<KernelCheckRow>* rows) {
  CudaEmulationCheckOptions short_run = opt;
  short_run.lengths = {5};
  short_run.reverse_pass = false;
  std::vector<std::pair<Spec, const CudaEmulationCheckOptions*>> jobs;
  for (Spec s : full) {
    s.name = s.DefaultName();
    jobs.emplace_back(s, &short_run);
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    jobs.emplace_back(plan[i], &opt);
    if (i > 0) continue;
    Spec b = plan[i];
    b.dtype = DType::kBF16;
    b.name = b.DefaultName();
    jobs.emplace_back(b, &opt);
  }
  for (const auto& [spec, o] : jobs) {
    ONBOARD_ASSIGN_OR_RETURN(auto r, CheckEmulated(spec, *o));
    rows->insert(rows->end(), r.begin(), r.end());
  }
  return Status::Ok();
}

}  // namespace

Expected<std::vector<KernelCheckRow>> CheckModelKernelsEmulated(const ModelIR& model,
                                                                const CudaEmulationCheckOptions& opt) {
  ONBOARD_ASSIGN_OR_RETURN(CheckPlan plan, KernelCheckPlan(model));
  // Paths of the CUDA kernels the CPU plan does not reach: KDA gate "none" with K != V and grouped
  // values; DSA with more than 16 query heads per KV head (several head groups per block, the last
  // one partial) and D != DV.
  if (!plan.kda.empty()) {
    KdaSpec s;
    s.num_heads = 2;
    s.num_v_heads = 4;
    s.head_dim = 32;
    s.v_head_dim = 48;
    s.chunk_size = 8;
    s.gate_form = GateForm::kNone;
    s.name = s.DefaultName();
    plan.kda.push_back(s);
  }
  if (!plan.dsa.empty()) {
    DsaSpec s;
    s.num_heads = 40;
    s.num_kv_heads = 2;
    s.head_dim = 32;
    s.v_head_dim = 48;
    s.index_heads = 2;
    s.index_head_dim = 16;
    s.topk = 16;
    s.block = 8;
    s.output_gate = true;
    s.sink = true;
    s.name = s.DefaultName();
    plan.dsa.push_back(s);
  }
  ONBOARD_ASSIGN_OR_RETURN(codegen::ModelKernelSpecs full, codegen::KernelSpecsForModel(model));
  std::vector<KernelCheckRow> rows;
  ONBOARD_RETURN_IF_ERROR(CheckSpecs(full.kda, plan.kda, opt, &rows));
  ONBOARD_RETURN_IF_ERROR(CheckSpecs(full.dsa, plan.dsa, opt, &rows));
  // The fused KDA prologue against the unfused sequence, both gate forms, under emulation.
  ONBOARD_ASSIGN_OR_RETURN(auto fused, CheckKdaPrologueFusionForPlan(plan.kda, opt.seed,
                                                                     EmulatedCudaKdaRunner(opt.cuda_arch),
                                                                     " [CUDA emulated]",
                                                                     "fused prologue; CPU emulation, not a GPU run"));
  rows.insert(rows.end(), fused.begin(), fused.end());
  return rows;
}

}  // namespace onboard::validators
