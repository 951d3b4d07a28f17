// Bearer-token check (constant-time compare) on every route but /healthz.
#include "serve/http_auth.h"

#include <fstream>
#include <sstream>

namespace onboard::serve {

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  // Walk the longer string entirely; fold the length difference into the result.
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = static_cast<unsigned char>(a.size() != b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

Expected<std::string> LoadToken(const std::string& token_file, const char* env_value) {
  std::string token, source;
  if (!token_file.empty()) {
    std::ifstream in(token_file, std::ios::binary);
    if (!in) return NotFound(token_file);
    std::string first;
    std::getline(in, first);
    token = Trim(first);
    source = token_file;
  } else if (env_value != nullptr) {
    token = Trim(env_value);
    source = "$ONBOARD_TOKEN";
  } else {
    return BadInput("onboard serve", "--token-file", "no API token: pass --token-file F or set ONBOARD_TOKEN");
  }
  if (token.size() < kMinTokenBytes) {
    return BadInput(source, "token", "must be at least " + std::to_string(kMinTokenBytes) + " bytes",
                    std::to_string(token.size()) + " bytes");
  }
  for (unsigned char c : token) {
    if (c < 0x21 || c > 0x7e) {
      return BadInput(source, "token", "must be printable ASCII without spaces", "byte " + std::to_string(c));
    }
  }
  return token;
}

bool IsAuthorized(const httplib::Request& req, const std::string& secret) {
  static const std::string kPrefix = "Bearer ";
  if (!req.has_header("Authorization")) return false;
  const std::string& h = req.get_header_value("Authorization");
  if (h.size() <= kPrefix.size() || h.compare(0, kPrefix.size(), kPrefix) != 0) return false;
  return ConstantTimeEquals(h.substr(kPrefix.size()), secret);
}

}  // namespace onboard::serve
