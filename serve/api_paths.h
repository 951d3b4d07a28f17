// Allowed roots: the only directories whose files a client may name (model paths, topology files).
// A requested path is refused with 403 when
//   - it has a ".." component (refused before any file-system access),
//   - it is lexically outside every root, or
//   - its canonical form (symlinks resolved with std::filesystem::canonical) is outside every root
//     (a symlink inside a root that points out of it).
// Relative paths are taken relative to the first root. A missing file inside a root is 404.
#pragma once

#include <string>
#include <vector>

#include "serve/http_errors.h"
#include "core/status.h"

namespace onboard::serve {

class AllowedRoots {
 public:
  // Canonicalises every root; kNotFound / kBadInput naming the root when missing or not a directory.
  [[nodiscard]] static Expected<AllowedRoots> Make(const std::vector<std::string>& roots);
  AllowedRoots() = default;

  // The canonical path of an existing file or directory inside a root, or 400/403/404.
  ApiResult<std::string> Resolve(const std::string& requested, const std::string& field) const;

  bool empty() const { return roots_.empty(); }
  const std::vector<std::string>& roots() const { return roots_; }

 private:
  std::vector<std::string> roots_;  // canonical, absolute
};

}  // namespace onboard::serve
