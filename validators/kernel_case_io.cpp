// WriteKernelCases: the CUDA harness's inputs and references (see kernel_case_io.h for the layout).
#include "validators/kernel_case_io.h"

#include <filesystem>
#include <fstream>
#include <vector>

#include "validators/reference_dsa.h"
#include "validators/reference_kda.h"

namespace onboard::validators {
namespace {

template <typename T>
Status WriteRaw(const std::string& path, const std::vector<T>& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(T)));
  if (!f) return IoError("cannot write " + path);
  return Status::Ok();
}

std::vector<float> ToFloat(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

Status MakeDir(const std::string& d) {
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  if (ec) return IoError(d + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Status WriteKernelCases(const CheckPlan& plan, uint64_t seed, const std::string& dir) {
  for (const auto& spec : plan.kda) {
    for (int64_t T : {int64_t{1}, spec.chunk_size + 3, 3 * spec.chunk_size + 5}) {
      const int64_t B = 1;
      const std::string d = dir + "/" + spec.name + "/B1_T" + std::to_string(T);
      ONBOARD_RETURN_IF_ERROR(MakeDir(d));
      const KdaInputs in = RandomKdaInputs(spec, B, T, true, ++seed);
      const KdaResult<double> ref = ReferenceKda<double>(spec, in);
      std::ofstream(d + "/meta.txt") << B << " " << T << " 1\n";
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/q.f32", in.q));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/k.f32", in.k));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/v.f32", in.v));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/g.f32", in.g));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/beta.f32", in.beta));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/a_log.f32", in.a_log));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/dt_bias.f32", in.dt_bias));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/h0.f32", in.initial_state));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/o_ref.f32", ToFloat(ref.o)));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/s_ref.f32", ToFloat(ref.final_state)));
    }
  }
  for (const auto& spec : plan.dsa) {
    for (int64_t T : {int64_t{1}, std::min<int64_t>(spec.topk, 64) * 2 + 7}) {
      const int64_t B = 1;
      const std::string d = dir + "/" + spec.name + "/B1_T" + std::to_string(T);
      ONBOARD_RETURN_IF_ERROR(MakeDir(d));
      const DsaInputs in = RandomDsaInputs(spec, B, T, ++seed);
      const DsaReference ref = ReferenceDsa(spec, in);
      std::ofstream(d + "/meta.txt") << B << " " << T << "\n";
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/q.f32", in.q));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/k.f32", in.k));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/v.f32", in.v));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/iq.f32", in.index_q));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/ik.f32", in.index_k));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/iw.f32", in.index_w));
      if (spec.output_gate) ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/gate.f32", in.gate));
      if (spec.sink) ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/sink.f32", in.sink));
      if (spec.v_up_dim > 0) ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/v_up.f32", in.v_up));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/o_ref.f32", ToFloat(ref.o)));
      ONBOARD_RETURN_IF_ERROR(WriteRaw(d + "/idx_ref.i32", ref.indices));
    }
  }
  return Status::Ok();
}

}  // namespace onboard::validators
