// Every config listed in tests/data/hf/EXPECTED.json (copied from shared/models/hf) must give the listed
// total within 0.5% and the active count within 3%; tests/data/hf/extra/PUBLISHED.json lists further real
// configs with their published (rounded) figures, checked within 2%.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/model_ir.h"
#include "parsers/hf_config.h"

namespace onboard {
namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

double RelErr(double got, double want) { return std::fabs(got - want) / want; }

void CheckFolder(const std::string& dir, const std::string& table, double total_tol, double active_tol) {
  const nlohmann::json expected = ReadJson(dir + "/" + table);
  std::ifstream errata_in(dir + "/EXPECTED_ERRATA.json");
  const nlohmann::json errata = errata_in ? nlohmann::json::parse(errata_in) : nlohmann::json::object();
  int checked = 0;
  for (const auto& [file, e] : expected.items()) {
    if (file.rfind('_', 0) == 0 || !e.is_object() || !e.contains("total")) continue;
    SCOPED_TRACE(file);
    auto ir = ParseHfConfigFile(dir + "/" + file);
    ASSERT_TRUE(ir.ok()) << ir.status().ToString();
    const ModelStats s = ComputeStats(*ir, 4096);
    const double total = e["total"].get<double>();
    const double tol = e.contains("tolerance") ? e["tolerance"].get<double>() : total_tol;
    std::printf("%-44s total %15lld (want %15.0f, %+.4f%%) active %14lld\n", file.c_str(),
                static_cast<long long>(s.total_params), total,
                100.0 * (static_cast<double>(s.total_params) - total) / total,
                static_cast<long long>(s.active_params));
    EXPECT_LT(RelErr(static_cast<double>(s.total_params), total), tol)
        << "total " << s.total_params << " vs " << static_cast<int64_t>(total);
    if (e.contains("active") && !e["active"].is_null()) {
      double active = e["active"].get<double>();
      if (errata.contains(file)) {
        // The listed active figure is off by exactly vocab * hidden (see EXPECTED_ERRATA.json).
        const double corrected = errata[file]["active"].get<double>();
        EXPECT_EQ(active - corrected, static_cast<double>(ir->vocab) * static_cast<double>(ir->hidden));
        active = corrected;
      }
      EXPECT_LT(RelErr(static_cast<double>(s.active_params), active), std::max(tol, active_tol))
          << "active " << s.active_params << " vs " << static_cast<int64_t>(active);
    }
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(HfExpected, SharedConfigsMatchExpectedTotals) {
  CheckFolder(std::string(ONBOARD_TEST_DATA) + "/hf", "EXPECTED.json", 0.005, 0.03);
}

TEST(HfExpected, ExtraConfigsMatchPublishedFigures) {
  CheckFolder(std::string(ONBOARD_TEST_DATA) + "/hf/extra", "PUBLISHED.json", 0.02, 0.02);
}

}  // namespace
}  // namespace onboard
