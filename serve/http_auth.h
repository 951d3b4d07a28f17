// Bearer-token authentication for the HTTP API: every route except GET /healthz needs
//   Authorization: Bearer <token>
// The token comes from --token-file (first line, surrounding whitespace trimmed) or $ONBOARD_TOKEN.
// Comparison is constant-time in the length of the presented token and the secret.
#pragma once

#include <httplib.h>

#include <string>

#include "core/status.h"

namespace onboard::serve {

// Shortest token `onboard serve` accepts (bytes).
constexpr size_t kMinTokenBytes = 16;

// True when a == b; the time taken depends only on the lengths, never on where they differ.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// Reads the token from `token_file` when non-empty, else from `env_value` (pass getenv's result or
// ""). kBadInput naming the source when missing, too short or containing control characters.
[[nodiscard]] Expected<std::string> LoadToken(const std::string& token_file, const char* env_value);

// True when the request carries "Authorization: Bearer <secret>".
bool IsAuthorized(const httplib::Request& req, const std::string& secret);

}  // namespace onboard::serve
