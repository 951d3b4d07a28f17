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

// Names of the shipped topologies (file stems), for error messages.
std::string ShippedNames() {
  std::string names;
  std::error_code ec;
  for (const auto& root : ExampleRoots()) {
    for (const auto& e : fs::directory_iterator(root / "topologies", ec)) {
      if (e.path().extension() == ".json") names += (names.empty() ? "" : ", ") + e.path().stem().string();
    }
    if (!names.empty()) break;
  }
  return names.empty() ? "(none found)" : names;
}

}  // namespace

Expected<std::string> ShippedTopologyPath(const std::string& name) {
  const bool plain = !name.empty() && name[0] != '.' && name.find('/') == std::string::npos &&
                     name.find('\0') == std::string::npos;
  if (plain) {
    std::string file = name.size() > 5 && name.substr(name.size() - 5) == ".json" ? name : name + ".json";
    std::error_code ec;
    for (const auto& root : ExampleRoots()) {
      fs::path p = root / "topologies" / file;
      if (fs::is_regular_file(p, ec)) return fs::canonical(p, ec).string();
    }
  }
  return NotFound("topology '" + name.substr(0, 80) + "': not a shipped topology (shipped: " + ShippedNames() +
                  "); name a file as {\"path\": ...}");
}

Expected<Topology> ResolveTopology(const std::string& spec) {
  size_t first = spec.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && spec[first] == '{') return ParseTopologyJson(spec, "inline topology");
  std::error_code ec;
  if (fs::is_regular_file(spec, ec)) return LoadTopologyFile(spec);
  if (auto shipped = ShippedTopologyPath(spec); shipped.ok()) return LoadTopologyFile(*shipped);
  return NotFound(spec + ": topology is not a file, a name under examples/topologies, or inline JSON");
}

}  // namespace onboard::agent
