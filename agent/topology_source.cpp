// ResolveTopology: a topology from inline JSON, a file, or a name under examples/topologies
// (see agent/topology_source.h).
#include "agent/topology_source.h"

#include <cstdlib>
#include <filesystem>

namespace onboard::agent {
namespace {

namespace fs = std::filesystem;

// Directories that may hold examples/topologies: $ONBOARD_EXAMPLES_DIR, the working directory and
// the executable's directory and its parents (build/ sits inside the source tree).
std::vector<fs::path> ExampleRoots() {
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("ONBOARD_EXAMPLES_DIR"); env && *env) roots.emplace_back(env);
  std::error_code ec;
  roots.push_back(fs::current_path(ec) / "examples");
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      roots.push_back(p / "examples");
  return roots;
}

}  // namespace

Expected<Topology> ResolveTopology(const std::string& spec) {
  size_t first = spec.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && spec[first] == '{') return ParseTopologyJson(spec, "inline topology");
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return LoadTopologyFile(spec);
  if (spec.find('/') == std::string::npos) {
    std::string file = spec.size() > 5 && spec.substr(spec.size() - 5) == ".json" ? spec : spec + ".json";
    for (const auto& root : ExampleRoots()) {
      fs::path p = root / "topologies" / file;
      if (fs::is_regular_file(p, ec)) return LoadTopologyFile(p.string());
    }
  }
  return NotFound(spec + ": topology is not a file, a name under examples/topologies, or inline JSON");
}

}  // namespace onboard::agent
