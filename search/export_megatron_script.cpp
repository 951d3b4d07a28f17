// RenderMegatronScript / ParseMegatronScript: a MegatronArgs as a bash script and back.
// Script layout (what the parser reads; everything else is comments or shell):
//   NNODES=<n>            GPUS_PER_NODE=<g>
//   export NAME=VALUE     (environment)
//   ARGS=(                one flag per line: --flag [token ...]; tokens quoted '...' or "..."
//   )
// Placeholders: "${NAME}" stays as the text ${NAME}; "${NAME:-default}" reads as `default`.
#include <algorithm>
#include <sstream>

#include "search/export_megatron.h"

namespace onboard {
namespace {

bool NeedsQuotes(const std::string& t) {
  return t.find_first_of("|*()[]+ ;&<>$'\"") != std::string::npos;
}

std::string Quote(const std::string& t) {
  if (t.find("${") != std::string::npos) return "\"" + t + "\"";
  return NeedsQuotes(t) ? "'" + t + "'" : t;
}

// Splits one ARGS line into shell words (single/double quotes, no escapes needed by the writer).
std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (char ch : line) {
    if (quote) {
      if (ch == quote) quote = 0;
      else cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\\') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else if (ch == '#' && !in_word) {
      break;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (in_word) out.push_back(cur);
  return out;
}

// ${NAME:-default} -> default (what bash gives when NAME is unset).
std::string Resolve(const std::string& t) {
  if (t.rfind("${", 0) == 0 && t.back() == '}') {
    const size_t d = t.find(":-");
    if (d != std::string::npos) return t.substr(d + 2, t.size() - d - 3);
  }
  return t;
}

void Bullets(std::ostringstream& os, const char* title, const std::vector<std::string>& items) {
  if (items.empty()) return;
  os << "# " << title << "\n";
  for (const std::string& s : items) os << "#   - " << s << "\n";
}

}  // namespace

std::string RenderMegatronScript(const MegatronExport& e, const std::string& title, const std::string& target,
                                 const std::string& entry) {
  std::ostringstream os;
  os << "#!/usr/bin/env bash\n";
  os << "# " << title << " launch for this plan, written by `onboard plan --export`.\n";
  os << "# Target: " << target << ".\n";
  os << "# Source it (`source THIS`) to get ARGS and the environment; run it to launch on one node with torchrun\n";
  os << "# (plan.torchrun.sh / plan.sbatch launch it on every node).\n";
  Bullets(os, "NOT SUPPORTED by this engine (the script refuses to run; ONBOARD_FORCE=1 overrides):", e.caveats.unsupported);
  Bullets(os, "Exported differently from the plan:", e.caveats.approximations);
  Bullets(os, "You must supply:", e.caveats.user_supplies);
  os << "NNODES=" << e.args.shape.nnodes << "\n";
  os << "GPUS_PER_NODE=" << e.args.shape.gpus_per_node << "\n";
  for (const auto& [k, v] : e.args.env) os << "export " << k << "=" << v << "\n";
  os << "ONBOARD_UNSUPPORTED=" << e.caveats.unsupported.size() << "\n";
  os << "ARGS=(\n";
  for (const auto& [flag, value] : e.args.flags) {
    os << "  " << flag;
    std::istringstream vs(value);
    std::string tok;
    while (vs >> tok) os << " " << Quote(tok);
    os << "\n";
  }
  os << ")\n";
  os << "# onboard_launch TORCHRUN_ARGS...: refuses what the engine cannot do, then starts the ranks.\n";
  os << "onboard_launch() {\n";
  os << "  if [[ \"$ONBOARD_UNSUPPORTED\" != 0 && \"${ONBOARD_FORCE:-0}\" != 1 ]]; then\n";
  os << "    echo \"onboard: this plan uses what " << title << " does not support (see the header); not launching\" >&2\n";
  os << "    exit 3\n";
  os << "  fi\n";
  os << "  exec torchrun \"$@\" \"" << entry << "\" \"${ARGS[@]}\"\n";
  os << "}\n";
  os << "if [[ \"${BASH_SOURCE[0]}\" == \"$0\" ]]; then\n";
  os << "  set -euo pipefail\n";
  os << "  onboard_launch --nnodes \"$NNODES\" --nproc-per-node \"$GPUS_PER_NODE\"\n";
  os << "fi\n";
  return os.str();
}

Expected<MegatronArgs> ParseMegatronScript(const std::string& text, const std::string& origin) {
  MegatronArgs a;
  std::istringstream is(text);
  std::string line;
  bool in_args = false;
  int line_no = 0;
  while (std::getline(is, line)) {
    ++line_no;
    if (in_args) {
      if (line == ")") { in_args = false; continue; }
      std::vector<std::string> w = Words(line);
      if (w.empty()) continue;
      if (w[0].rfind("--", 0) != 0)
        return BadInput(origin, "ARGS line " + std::to_string(line_no), "expected a --flag", line);
      std::string value;
      for (size_t i = 1; i < w.size(); ++i) value += (i > 1 ? " " : "") + Resolve(w[i]);
      a.Add(w[0], value);
    } else if (line == "ARGS=(") {
      in_args = true;
    } else if (line.rfind("NNODES=", 0) == 0 || line.rfind("GPUS_PER_NODE=", 0) == 0) {
      const size_t eq = line.find('=');
      int64_t v = 0;
      try { v = std::stoll(line.substr(eq + 1)); } catch (const std::exception&) { v = 0; }
      if (v <= 0) return BadInput(origin, line.substr(0, eq), "must be a positive integer", line.substr(eq + 1));
      (line[0] == 'N' ? a.shape.nnodes : a.shape.gpus_per_node) = v;
    } else if (line.rfind("export ", 0) == 0) {
      const size_t eq = line.find('=');
      if (eq != std::string::npos) a.env[line.substr(7, eq - 7)] = line.substr(eq + 1);
    }
  }
  if (in_args) return BadInput(origin, "ARGS", "no closing ')'", "");
  if (a.flags.empty()) return BadInput(origin, "ARGS", "no ARGS=( ... ) block", "");
  return a;
}

}  // namespace onboard
