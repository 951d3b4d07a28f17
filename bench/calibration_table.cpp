// bench_calibration_table: the cost model against every measured run of
// tests/data/measured_training_runs.json (predicted vs measured tokens/s per GPU, error per run,
// mean/max), and the time to build the table. Same table as tests/search/measured_runs_test.cpp.
#include <chrono>
#include <cstdio>
#include <string>

#include "search/calibration_table.h"

using namespace onboard;

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : std::string(ONBOARD_SOURCE_DIR) + "/tests/data/measured_training_runs.json";
  const auto t0 = std::chrono::steady_clock::now();
  auto runs = LoadLayoutFile(path);
  if (!runs.ok()) {
    std::fprintf(stderr, "bench_calibration_table: %s\n", runs.status().ToString().c_str());
    return 2;
  }
  auto t = BuildCalibrationTable(*runs);
  if (!t.ok()) {
    std::fprintf(stderr, "bench_calibration_table: %s\n", t.status().ToString().c_str());
    return 1;
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fputs(t->text.c_str(), stdout);
  std::printf("targets: mean |error| <= 10%% (%.2fx), max <= 20%% (%.2fx); built in %.3f s\n", t->mean_abs_err / 0.10,
              t->max_abs_err / 0.20, wall);
  // The same runs with the framework fusion chains costed unfused (search/fusion_cost.h): nothing fitted.
  auto u = BuildCalibrationTable(*runs, /*unfused_framework=*/true);
  if (!u.ok()) {
    std::fprintf(stderr, "bench_calibration_table: %s\n", u.status().ToString().c_str());
    return 1;
  }
  std::printf("fusion chains fused (the default): mean |error| %.1f%%, max %.1f%%, within 20%%: %d of %d\n",
              100 * t->mean_abs_err, 100 * t->max_abs_err, t->within_20, t->evaluated);
  std::printf("fusion chains unfused:             mean |error| %.1f%%, max %.1f%%, within 20%%: %d of %d\n",
              100 * u->mean_abs_err, 100 * u->max_abs_err, u->within_20, u->evaluated);
  return 0;
}
