// Not a fuzzer: splits a runs file ({"runs":[...], "configs":{...}, ...}) into one seed per run,
// OUT_PREFIX-<i>.json, each keeping every other top-level key, so that seeds stay under the fuzzer's
// max_len and each input costs one run. A file without "runs" (a single layout) is copied as is.
// Usage: layout_fuzz_seed IN.json OUT_PREFIX
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: layout_fuzz_seed IN.json OUT_PREFIX\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!in || j.is_discarded()) {
    std::cerr << argv[1] << ": not readable JSON\n";
    return 2;
  }
  const std::string prefix = argv[2];
  auto runs = j.find("runs");
  if (!j.is_object() || runs == j.end() || !runs->is_array()) {
    std::ofstream(prefix + ".json") << j.dump();
    return 0;
  }
  for (size_t i = 0; i < runs->size(); ++i) {
    nlohmann::json one = j;
    one["runs"] = nlohmann::json::array({(*runs)[i]});
    std::ofstream(prefix + "-" + std::to_string(i) + ".json") << one.dump();
  }
  return 0;
}
