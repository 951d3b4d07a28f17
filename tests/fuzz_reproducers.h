// The saved inputs of a fuzz regressions folder (parsers/fuzz/regressions, search/fuzz/regressions),
// named <target>-<what>, for the tests that replay them (tests/parsers/fuzz_regressions_test.cpp,
// tests/search/input_files_test.cpp).
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace onboard::test {

struct Reproducer {
  std::string name;    // file name
  std::string target;  // the name up to its first '-': which fuzz target found it
  std::string bytes;
};

inline std::vector<Reproducer> ReadReproducers(const std::filesystem::path& dir) {
  std::vector<Reproducer> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    Reproducer r;
    r.name = entry.path().filename().string();
    r.target = r.name.substr(0, r.name.find('-'));
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    r.bytes = ss.str();
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace onboard::test
