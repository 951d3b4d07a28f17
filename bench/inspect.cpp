// bench_inspect: `onboard inspect` on the flagship config (examples/flagship/config.json) against a raw
// nlohmann::json parse of the same bytes, measured in the same run.
//   baseline  nlohmann::json::parse of the text (what any reader pays)
//   load      ParseHfConfigText: parse + typed field reads + family reader + vision tower
//   inspect   load + ComputeStats(seq 4096) + SummarizeLayers + ModelStatsToJson (all inspect computes)
// Units: microseconds per run (median of N). Target: inspect well under 10 ms (interactive).
// Usage: bench_inspect [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/model_json.h"
#include "parsers/hf_config.h"

namespace {

double MedianUs(const std::function<void()>& fn, int reps) {
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const std::string path = std::string(ONBOARD_SOURCE_DIR) + "/examples/flagship/config.json";
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "bench_inspect: cannot read %s\n", path.c_str());
    return 2;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  size_t sink = 0;
  const double base = MedianUs([&] { sink += nlohmann::json::parse(text).size(); }, reps);
  const double load = MedianUs([&] {
    auto ir = onboard::ParseHfConfigText(text, path);
    sink += ir.ok() ? ir->layers.size() : 0;
  }, reps);
  const double full = MedianUs([&] {
    auto ir = onboard::ParseHfConfigText(text, path);
    if (!ir.ok()) return;
    const onboard::ModelStats s = onboard::ComputeStats(*ir, 4096);
    sink += onboard::SummarizeLayers(*ir).size();
    sink += onboard::ModelStatsToJson(*ir, s).dump().size();
  }, reps);
  std::printf("bench_inspect: flagship config.json (%zu bytes), median of %d runs\n", text.size(), reps);
  std::printf("%-10s %12s %10s\n", "stage", "us/run", "x baseline");
  std::printf("%-10s %12.1f %10.2f\n", "json", base, 1.0);
  std::printf("%-10s %12.1f %10.2f\n", "load", load, load / base);
  std::printf("%-10s %12.1f %10.2f\n", "inspect", full, full / base);
  std::printf("target: inspect < 10000 us -> %s (sink %zu)\n", full < 10000 ? "met" : "MISSED", sink);
  return 0;
}
