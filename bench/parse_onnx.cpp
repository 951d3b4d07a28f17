// bench_parse_onnx: structure recovery on the largest ONNX fixture (mixtral_moe_tiny.onnx, 17 MB)
// against raw protobuf ParseFromString of the same bytes, measured in the same run.
//   baseline  onnx::ModelProto::ParseFromString (wire decode only)
//   full      AnalyzeOnnxBytes: decode + GraphIndex + parameters + layers + head (what LoadModel runs)
// The ratio full/baseline is the cost of structure recovery on top of decoding.
// Units: milliseconds per parse (median of N), MB/s = file bytes / time. Usage: bench_parse_onnx [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "parsers/onnx_model.h"

namespace {

double MedianMs(const std::function<void()>& fn, int reps) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  const std::string path = std::string(ONBOARD_SOURCE_DIR) + "/tests/data/onnx/mixtral_moe_tiny.onnx";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: not found\n", path.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  const double mb = double(bytes.size()) / 1e6;

  bool ok = true;
  const double base = MedianMs(
      [&] {
        onnx::ModelProto m;
        ok = ok && m.ParseFromString(bytes);
      },
      reps);
  int64_t params = 0;
  const double full = MedianMs(
      [&] {
        auto info = onboard::AnalyzeOnnxBytes(bytes, path);
        ok = ok && info.ok();
        if (info.ok()) params = info->unique_params;
      },
      reps);
  if (!ok) {
    std::fprintf(stderr, "parse failed\n");
    return 1;
  }
  std::printf("mixtral_moe_tiny.onnx: %.1f MB, %lld parameters, median of %d runs\n", mb, (long long)params, reps);
  std::printf("%-44s %10s %10s %8s\n", "what", "ms/parse", "MB/s", "ratio");
  std::printf("%-44s %10.2f %10.1f %8.2f\n", "protobuf ParseFromString (baseline)", base, mb / (base / 1e3), 1.0);
  std::printf("%-44s %10.2f %10.1f %8.2f\n", "AnalyzeOnnxBytes (decode + structure)", full, mb / (full / 1e3),
              full / base);
  std::printf("%-44s %10.2f %10s %8.2f\n", "  of which structure recovery", full - base, "-", (full - base) / base);
  return 0;
}
