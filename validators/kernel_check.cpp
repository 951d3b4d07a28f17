// CheckKernels: plan (model specs scaled down + odd-shape variants) -> generate -> build -> run on
// fresh random inputs with NaN-poisoned outputs -> compare with the hand-written references.
// Units: errors are relative L2 norms ||out - ref|| / ||ref||; tolerances likewise.
#include "validators/kernel_check.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <type_traits>

#include "codegen/cpu_kernel_loader.h"
#include "validators/kernel_check_cuda.h"
#include "validators/kernel_prologue_check.h"
#include "validators/reference_dsa.h"
#include "validators/reference_kda.h"

namespace onboard::validators {
namespace {

using codegen::DsaSpec;
using codegen::KdaSpec;

constexpr double kTolChunkVsF32 = 1e-4;  // chunked fp32 kernel vs the fp32 recurrence
constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// ||got - ref|| / ||ref|| over positions where ref is finite; NaN/Inf positions must coincide.
template <typename Ref>
KernelErrStats RelL2(const std::vector<float>& got, const std::vector<Ref>& ref) {
  KernelErrStats e;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const bool rf = std::isfinite(static_cast<double>(ref[i]));
    const bool gf = std::isfinite(got[i]);
    if (rf != gf) {
      e.nonfinite_match = false;
      continue;
    }
    if (!rf) continue;
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  e.rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

}  // namespace

KernelErrStats CompareKernelOutput(const std::vector<float>& got, const std::vector<double>& ref) {
  return RelL2(got, ref);
}
KernelErrStats CompareKernelOutput(const std::vector<float>& got, const std::vector<float>& ref) {
  return RelL2(got, ref);
}

KernelCheckRow KdaCheckRow(const std::string& kernel, const std::string& shape, const std::string& against,
                           double tol, const KernelErrStats& out, const KernelErrStats& state) {
  KernelCheckRow r;
  r.kernel = kernel;
  r.shape = shape;
  r.against = against;
  r.tol = tol;
  r.rel_err = out.rel;
  r.state_err = state.rel;
  r.nonfinite_match = out.nonfinite_match && state.nonfinite_match;
  r.pass = r.nonfinite_match && r.rel_err < r.tol && r.state_err < r.tol;
  return r;
}

std::string KdaCheckShape(const KdaSpec& s, int64_t B, int64_t T, bool state) {
  std::ostringstream os;
  os << "B=" << B << " T=" << T << " H=" << s.num_heads << " HV=" << s.num_v_heads << " K=" << s.head_dim
     << " V=" << s.v_head_dim << " C=" << s.chunk_size << (state ? " +S0" : "");
  return os.str();
}

std::string DsaCheckShape(const DsaSpec& s, int64_t B, int64_t T) {
  std::ostringstream os;
  os << "B=" << B << " T=" << T << " HQ=" << s.num_heads << " HKV=" << s.num_kv_heads << " D=" << s.head_dim
     << " DV=" << s.v_head_dim << " HI=" << s.index_heads << " k=" << s.topk;
  return os.str();
}

// The odd-shape token counts for a chunk size: T = 1, T < C, T % C != 0, several chunks.
std::vector<int64_t> KdaCheckLengths(int64_t C) { return {1, std::max<int64_t>(2, C / 2 - 1), C + 3, 3 * C + 5}; }
// For top-k: T = 1, T < k, T > k.
std::vector<int64_t> DsaCheckLengths(int64_t topk) {
  return {1, std::max<int64_t>(2, std::min<int64_t>(topk - 3, 40)), std::min<int64_t>(topk, 64) * 2 + 7};
}

namespace {

template <typename Spec>  // KdaSpec | DsaSpec
void AddUnique(std::vector<Spec>* v, Spec s) {
  s.name = s.DefaultName();
  for (const auto& e : *v) if (e.name == s.name) return;
  v->push_back(s);
}

// Each spec's fn(spec) (an Expected of one T or of a vector of T), appended to *out in spec order.
template <typename Spec, typename Fn, typename T>
Status AppendEach(const std::vector<Spec>& specs, Fn fn, std::vector<T>* out) {
  for (const Spec& spec : specs) {
    auto got = fn(spec);
    if (!got.ok()) return got.status();
    if constexpr (std::is_same_v<std::decay_t<decltype(*got)>, T>) {
      out->push_back(std::move(*got));
    } else {
      for (auto& x : *got) out->push_back(std::move(x));
    }
  }
  return Status::Ok();
}

// A generated CPU kernel loaded for its check, with the seed of its cases (each case takes ++seed).
struct LoadedKernel {
  codegen::GeneratedKernel gen;
  std::shared_ptr<codegen::CpuKernelLibrary> lib;
  uint64_t seed = 0;  // options seed ^ hash(kernel name)
};

Expected<LoadedKernel> LoadForCheck(Expected<codegen::GeneratedKernel> generated, uint64_t seed) {
  ONBOARD_ASSIGN_OR_RETURN(codegen::GeneratedKernel gen, std::move(generated));
  ONBOARD_ASSIGN_OR_RETURN(std::shared_ptr<codegen::CpuKernelLibrary> lib, codegen::LoadCpuKernel(gen));
  const uint64_t first = seed ^ std::hash<std::string>{}(gen.name);
  return LoadedKernel{std::move(gen), std::move(lib), first};
}

// A kernel entry point's return code: 0, or kInternal naming the kernel.
Status KernelReturn(const std::string& kernel, int rc) {
  if (rc != 0) return Status(ErrorCode::kInternal, kernel + " returned " + std::to_string(rc));
  return Status::Ok();
}

Status WriteText(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) return IoError("cannot write " + path);
  return Status::Ok();
}

}  // namespace

Expected<CheckPlan> KernelCheckPlan(const ModelIR& model) {
  ONBOARD_ASSIGN_OR_RETURN(codegen::ModelKernelSpecs specs, codegen::KernelSpecsForModel(model));
  CheckPlan plan;
  for (KdaSpec s : specs.kda) {
    // The model's block with heads capped (grouping ratio kept, at most 4 value heads).
    const int64_t ratio = s.num_v_heads / s.num_heads;
    s.num_heads = std::min<int64_t>(s.num_heads, ratio > 1 ? 1 : 2);
    s.num_v_heads = s.num_heads * std::min<int64_t>(ratio, 4);
    AddUnique(&plan.kda, s);
    // Odd-shape variants: head dim 64 with the model's gate; head dim 100, grouped values, other gate.
    KdaSpec d64 = s;
    d64.num_heads = 2;
    d64.num_v_heads = 2;
    d64.head_dim = d64.v_head_dim = 64;
    d64.chunk_size = 16;
    AddUnique(&plan.kda, d64);
    KdaSpec d100 = s;
    d100.num_heads = 1;
    d100.num_v_heads = 2;
    d100.head_dim = d100.v_head_dim = 100;
    d100.chunk_size = 32;
    d100.gate_form = s.gate_form == GateForm::kBounded ? GateForm::kOriginal : GateForm::kBounded;
    if (d100.gate_form == GateForm::kBounded) d100.gate_lower_bound = -5.0;
    AddUnique(&plan.kda, d100);
  }
  for (DsaSpec s : specs.dsa) {
    // The model's block with heads capped; the model's top-k (T < k) and a small top-k (selection).
    s.num_heads = std::min<int64_t>(s.num_heads, 4);
    s.num_kv_heads = std::min<int64_t>(s.num_kv_heads, s.num_heads);
    while (s.num_heads % s.num_kv_heads != 0) --s.num_kv_heads;
    s.index_heads = std::min<int64_t>(s.index_heads, 4);
    AddUnique(&plan.dsa, s);
    DsaSpec small = s;
    small.topk = 16;
    small.block = 8;
    AddUnique(&plan.dsa, small);
    // Odd head dims, GQA, gate and sink.
    DsaSpec d100 = small;
    d100.num_heads = 4;
    d100.num_kv_heads = 2;
    d100.head_dim = d100.v_head_dim = 100;
    d100.index_head_dim = 64;
    d100.softmax_scale = 0;
    d100.output_gate = true;
    d100.sink = true;
    AddUnique(&plan.dsa, d100);
    DsaSpec d64 = d100;
    d64.head_dim = d64.v_head_dim = 64;
    d64.topk = 24;
    d64.output_gate = false;
    AddUnique(&plan.dsa, d64);
  }
  return plan;
}

Expected<std::vector<KernelCheckRow>> CheckKdaKernel(const KdaSpec& spec, const KernelCheckOptions& opt) {
  ONBOARD_ASSIGN_OR_RETURN(LoadedKernel k, LoadForCheck(codegen::GenerateKda(spec, {}), opt.seed));
  std::vector<KernelCheckRow> rows;
  for (int64_t T : KdaCheckLengths(spec.chunk_size)) {
    const int64_t B = T == 1 ? 2 : 1;
    const bool with_state = T != 1;
    const KdaInputs in = RandomKdaInputs(spec, B, T, with_state, ++k.seed);
    const KdaResult<double> ref = ReferenceKda<double>(spec, in);
    const KdaResult<float> ref32 = ReferenceKda<float>(spec, in);
    // Poison the outputs so anything the kernel fails to write shows up as NaN.
    std::vector<float> o(ref.o.size(), kPoison), st(ref.final_state.size(), kPoison);
    const int rc =
        k.lib->kda_fwd(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), in.a_log.data(),
                       in.dt_bias.data(), with_state ? in.initial_state.data() : nullptr, o.data(), st.data(),
                       B, T, opt.num_threads);
    ONBOARD_RETURN_IF_ERROR(KernelReturn(k.gen.name, rc));
    const std::string shape = KdaCheckShape(spec, B, T, with_state);
    for (int which = 0; which < 2; ++which) {
      const KernelErrStats eo = which == 0 ? CompareKernelOutput(o, ref.o) : CompareKernelOutput(o, ref32.o);
      const KernelErrStats es = which == 0 ? CompareKernelOutput(st, ref.final_state)
                                           : CompareKernelOutput(st, ref32.final_state);
      rows.push_back(KdaCheckRow(k.gen.name, shape, which == 0 ? "fp64 recurrence" : "fp32 recurrence",
                                 which == 0 ? kKernelTolF32VsF64 : kTolChunkVsF32, eo, es));
    }
  }
  return rows;
}

Expected<std::vector<KernelCheckRow>> CheckDsaKernel(const DsaSpec& spec, const KernelCheckOptions& opt) {
  ONBOARD_ASSIGN_OR_RETURN(LoadedKernel k, LoadForCheck(codegen::GenerateDsa(spec, {}), opt.seed));
  std::vector<KernelCheckRow> rows;
  for (int64_t T : DsaCheckLengths(spec.topk)) {
    const int64_t B = T == 1 ? 2 : 1;
    const DsaInputs in = RandomDsaInputs(spec, B, T, ++k.seed);
    const DsaReference ref = ReferenceDsa(spec, in);
    std::vector<float> o(ref.o.size(), kPoison);
    std::vector<int32_t> idx(ref.indices.size(), -7);
    const int rc = k.lib->dsa_fwd(
        in.q.data(), in.k.data(), in.v.data(), in.index_q.data(), in.index_k.data(), in.index_w.data(),
        spec.output_gate ? in.gate.data() : nullptr, spec.sink ? in.sink.data() : nullptr,
        spec.v_up_dim > 0 ? in.v_up.data() : nullptr, o.data(), idx.data(), B, T, opt.num_threads);
    ONBOARD_RETURN_IF_ERROR(KernelReturn(k.gen.name, rc));
    int64_t mismatched = 0;
    for (size_t i = 0; i < idx.size(); ++i) mismatched += idx[i] != ref.indices[i];
    const KernelErrStats eo = CompareKernelOutput(o, ref.o);
    KernelCheckRow r;
    r.kernel = k.gen.name;
    r.shape = DsaCheckShape(spec, B, T);
    r.against = "fp64 dense over selected";
    r.tol = kKernelTolF32VsF64;
    r.rel_err = eo.rel;
    r.nonfinite_match = eo.nonfinite_match;
    r.note = "index mismatch " + std::to_string(mismatched) + "/" + std::to_string(idx.size());
    r.pass = r.nonfinite_match && mismatched == 0 && r.rel_err < r.tol;
    rows.push_back(r);
  }
  return rows;
}

namespace {

// Step 2 of CheckKernels: --out; CUDA: check variants join the kernels; sources and manifests to --out.
Status WriteKernelSources(const CheckPlan& plan, const KernelCheckOptions& opt, bool cuda,
                          KernelCheckReport& report) {
  if (!opt.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.out_dir, ec);
    if (ec) return IoError("--out " + opt.out_dir + ": " + ec.message());
  }
  if (cuda) {
    const auto kda = [&](const KdaSpec& s) { return codegen::GenerateKda(s, opt.target); };
    const auto dsa = [&](const DsaSpec& s) { return codegen::GenerateDsa(s, opt.target); };
    ONBOARD_RETURN_IF_ERROR(AppendEach(plan.kda, kda, &report.kernels));
    ONBOARD_RETURN_IF_ERROR(AppendEach(plan.dsa, dsa, &report.kernels));
  }
  for (const auto& g : report.kernels) {
    if (opt.out_dir.empty()) continue;
    ONBOARD_RETURN_IF_ERROR(WriteText(opt.out_dir + "/" + g.FileName(), g.source));
    ONBOARD_RETURN_IF_ERROR(WriteText(opt.out_dir + "/" + g.name + ".json", g.ManifestJson()));
  }
  return Status::Ok();
}

// Steps 3-4 of CheckKernels, CPU: numerics, then the fused KDA prologue.
Status RunCpuChecks(const CheckPlan& plan, const KernelCheckOptions& opt, KernelCheckReport& report) {
  // Step 3: CPU numerics.
  const auto kda = [&](const KdaSpec& s) { return CheckKdaKernel(s, opt); };
  const auto dsa = [&](const DsaSpec& s) { return CheckDsaKernel(s, opt); };
  ONBOARD_RETURN_IF_ERROR(AppendEach(plan.kda, kda, &report.rows));
  ONBOARD_RETURN_IF_ERROR(AppendEach(plan.dsa, dsa, &report.rows));
  // Step 4: the fused KDA prologue against the unfused sequence (both gate forms).
  ONBOARD_ASSIGN_OR_RETURN(auto fused, CheckKdaPrologueFusionForPlan(plan.kda, opt.seed, CpuKdaRunner(opt.num_threads)));
  for (auto& r : fused) report.rows.push_back(std::move(r));
  return Status::Ok();
}

}  // namespace

Expected<KernelCheckReport> CheckKernels(const ModelIR& model, const KernelCheckOptions& opt) {
  ONBOARD_RETURN_IF_ERROR(opt.target.Validate());
  KernelCheckReport report;
  const bool cuda = opt.target.target == codegen::KernelTarget::kCuda;
  // Step 1: the model's own kernels (full dims) for the target.
  ONBOARD_ASSIGN_OR_RETURN(report.kernels, codegen::GenerateKernels(model, opt.target));
  if (report.kernels.empty()) {
    report.notes.push_back("model has no KDA or DSA attention layers: nothing to generate");
    return report;
  }
  ONBOARD_ASSIGN_OR_RETURN(CheckPlan plan, KernelCheckPlan(model));
  // Step 2: write sources and manifests (CUDA: model and check variants).
  ONBOARD_RETURN_IF_ERROR(WriteKernelSources(plan, opt, cuda, report));
  // Step 3: CUDA: nvcc, cases, emulation (kernel_check_cuda.cpp); CPU: numerics (Steps 3-4 in RunCpuChecks).
  if (cuda)
    ONBOARD_RETURN_IF_ERROR(FinishCudaKernelCheck(model, plan, opt, report));
  else if (opt.run_checks)
    ONBOARD_RETURN_IF_ERROR(RunCpuChecks(plan, opt, report));
  // Step 5: the verdict, one fold for both targets: every row passed.
  for (const auto& r : report.rows) report.all_pass = report.all_pass && r.pass;
  return report;
}

std::string FormatKernelTable(const KernelCheckReport& report) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof(line), "%-50s %-48s %-25s %11s %11s %8s %s\n", "kernel", "shape", "vs",
                "rel_err", "state_err", "tol", "result");
  if (!report.rows.empty()) os << line;
  for (const auto& r : report.rows) {
    char rel[32], st[32], tol[32];
    if (std::isnan(r.rel_err)) std::snprintf(rel, sizeof(rel), "-");
    else std::snprintf(rel, sizeof(rel), "%.3e", r.rel_err);
    if (r.state_err < 0 || std::isnan(r.state_err)) std::snprintf(st, sizeof(st), "-");
    else std::snprintf(st, sizeof(st), "%.3e", r.state_err);
    if (r.tol > 0) std::snprintf(tol, sizeof(tol), "%.0e", r.tol);
    else std::snprintf(tol, sizeof(tol), "-");
    std::string result = r.pass ? "pass" : "FAIL";
    if (!r.nonfinite_match) result += " (NaN/Inf positions differ)";
    if (!r.note.empty()) result += "  " + r.note;
    std::snprintf(line, sizeof(line), "%-50s %-48s %-25s %11s %11s %8s %s\n", r.kernel.c_str(),
                  r.shape.c_str(), r.against.c_str(), rel, st, tol, result.c_str());
    os << line;
  }
  for (const auto& n : report.notes) os << "note: " << n << "\n";
  return os.str();
}

}  // namespace onboard::validators
