// AmalgamatedKernelHeader: inline the embedded project headers a kernel header includes, once each.
#include "codegen/kernel_headers.h"

#include <set>
#include <sstream>

#include "core/status.h"

namespace onboard::codegen {
namespace {

const std::string* FindHeader(const std::string& path) {
  for (const auto& [name, text] : EmbeddedKernelHeaders()) {
    if (name == path) return &text;
  }
  return nullptr;
}

// The X of a line `#include "X"`, or "" for any other line.
std::string QuotedInclude(const std::string& line) {
  const std::string kDirective = "#include \"";
  if (line.rfind(kDirective, 0) != 0) return "";
  const size_t end = line.find('"', kDirective.size());
  return end == std::string::npos ? "" : line.substr(kDirective.size(), end - kDirective.size());
}

void Append(const std::string& path, std::set<std::string>& done, std::string& out) {
  if (!done.insert(path).second) return;
  const std::string* text = FindHeader(path);
  ONBOARD_ASSERT(text != nullptr, "kernel header not embedded: " + path);
  out += "// ---- " + path + " ----\n";
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "#pragma once") continue;
    const std::string inc = QuotedInclude(line);
    if (!inc.empty() && FindHeader(inc) != nullptr) {
      Append(inc, done, out);
      continue;
    }
    out += line;
    out += '\n';
  }
}

}  // namespace

std::string AmalgamatedKernelHeader(const std::string& path) {
  std::set<std::string> done;
  std::string out;
  Append(path, done, out);
  return out;
}

}  // namespace onboard::codegen
