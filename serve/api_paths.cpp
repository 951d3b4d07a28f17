// Allowed roots: a request path must canonicalise (symlinks resolved) inside one of them.
#include "serve/api_paths.h"

#include <filesystem>
#include <system_error>

namespace onboard::serve {

namespace fs = std::filesystem;

namespace {

// True when `path` equals `root` or lies below it, compared component by component (so /data2 is
// not inside /data).
bool IsUnder(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

bool UnderAny(const fs::path& path, const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    if (IsUnder(path, fs::path(r))) return true;
  }
  return false;
}

}  // namespace

Expected<AllowedRoots> AllowedRoots::Make(const std::vector<std::string>& roots) {
  AllowedRoots out;
  for (const auto& r : roots) {
    std::error_code ec;
    fs::path canon = fs::canonical(r, ec);
    if (ec) return NotFound("--allowed-root " + r);
    if (!fs::is_directory(canon, ec)) {
      return BadInput("onboard serve", "--allowed-root", "must be a directory", r);
    }
    out.roots_.push_back(canon.string());
  }
  return out;
}

ApiResult<std::string> AllowedRoots::Resolve(const std::string& requested, const std::string& field) const {
  if (requested.empty() || requested.find('\0') != std::string::npos || requested.size() > 4096) {
    return HttpError{400, "bad_request", "field '" + field + "': must be a non-empty path under 4096 bytes"};
  }
  if (roots_.empty()) {
    return HttpError{403, "forbidden",
                     "field '" + field + "': this server has no --allowed-root; send the model in the body"};
  }
  fs::path p(requested);
  // Step 1: no ".." anywhere, before touching the file system.
  for (const auto& part : p) {
    if (part == "..") {
      return HttpError{403, "forbidden", "field '" + field + "': '..' is not allowed in paths (got " + requested + ")"};
    }
  }
  // Step 2: lexically inside a root.
  if (p.is_relative()) p = fs::path(roots_.front()) / p;
  p = p.lexically_normal();
  if (!UnderAny(p, roots_)) {
    return HttpError{403, "forbidden", "field '" + field + "': path is outside the allowed roots (got " + requested + ")"};
  }
  // Step 3: canonical form (symlinks resolved) still inside a root.
  std::error_code ec;
  fs::path canon = fs::canonical(p, ec);
  if (ec) {
    return HttpError{404, "not_found", "field '" + field + "': no such file (got " + requested + ")"};
  }
  if (!UnderAny(canon, roots_)) {
    return HttpError{403, "forbidden",
                     "field '" + field + "': path resolves outside the allowed roots through a symlink (got " +
                         requested + ")"};
  }
  return canon.string();
}

}  // namespace onboard::serve
