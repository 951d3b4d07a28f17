// Number formatting for the reports (see report/report_format.h).
#include "report/report_format.h"

#include <cmath>
#include <cstdio>

#include "report/svg_charts.h"

namespace onboard::agent {
namespace {
bool Num(const nlohmann::json& v, double& out) {
  if (!v.is_number()) return false;
  out = v.get<double>();
  return std::isfinite(out);
}
std::string Str(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : "-"; }
}  // namespace

std::string FmtSig(const nlohmann::json& v, int digits) {
  double d;
  if (!Num(v, d)) return Str(v);
  char b[48];
  std::snprintf(b, sizeof(b), "%.*g", digits, d);
  return b;
}

std::string FmtFixed(const nlohmann::json& v, int decimals) {
  double d;
  if (!Num(v, d)) return Str(v);
  char b[48];
  std::snprintf(b, sizeof(b), "%.*f", decimals, d);
  return b;
}

std::string FmtGiB(const nlohmann::json& bytes) {
  double d;
  if (!Num(bytes, d)) return "-";
  char b[48];
  if (std::fabs(d) < 1024.0 * 1024 * 1024) std::snprintf(b, sizeof(b), "%.1f MiB", d / (1024.0 * 1024));
  else std::snprintf(b, sizeof(b), "%.1f GiB", d / (1024.0 * 1024 * 1024));
  return b;
}

std::string FmtPct(const nlohmann::json& fraction) {
  double d;
  if (!Num(fraction, d)) return "-";
  char b[48];
  std::snprintf(b, sizeof(b), "%.1f%%", d * 100);
  return b;
}

std::string FmtCount(const nlohmann::json& n) {
  double d;
  if (!Num(n, d)) return "-";
  char b[48];
  double a = std::fabs(d);
  if (a >= 1e12) std::snprintf(b, sizeof(b), "%.2fT", d / 1e12);
  else if (a >= 1e9) std::snprintf(b, sizeof(b), "%.1fB", d / 1e9);
  else if (a >= 1e6) std::snprintf(b, sizeof(b), "%.1fM", d / 1e6);
  else if (a >= 1e3) std::snprintf(b, sizeof(b), "%.1fk", d / 1e3);
  else std::snprintf(b, sizeof(b), "%.0f", d);
  return b;
}

std::string FmtSeconds(const nlohmann::json& s) {
  double d;
  if (!Num(s, d)) return "-";
  char b[48];
  if (std::fabs(d) < 1) std::snprintf(b, sizeof(b), "%.0f ms", d * 1000);
  else std::snprintf(b, sizeof(b), "%.2f s", d);
  return b;
}

std::string JsonStr(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

std::string CompactJson(const nlohmann::json& j, size_t max_array) {
  if (j.is_number_float()) return FmtSig(j, 4);
  if (j.is_string()) return j.get<std::string>();
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size() && i < max_array; ++i) s += (i ? ", " : "") + CompactJson(j[i], max_array);
    if (j.size() > max_array) s += ", ... (" + std::to_string(j.size()) + ")";
    return s + "]";
  }
  if (j.is_object()) {
    std::string s;
    for (const auto& [k, v] : j.items()) s += (s.empty() ? "" : "; ") + k + "=" + CompactJson(v, max_array);
    return s;
  }
  return j.dump();
}

const nlohmann::json& JsonAt(const nlohmann::json& j, const char* key) {
  static const nlohmann::json kNull;
  return j.is_object() && j.contains(key) ? j[key] : kNull;
}

bool AnyProbeKernelRecord(const nlohmann::json& r) {
  for (const auto& pr : JsonAt(JsonAt(r, "probe"), "rounds"))
    if (!JsonAt(pr, "loss_parity").empty() || JsonAt(pr, "kda_calls").is_object()) return true;
  return false;
}

bool JsonTrue(const nlohmann::json& j) { return j.is_boolean() && j.get<bool>(); }

void MarkdownTable(std::ostringstream& o, const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows) {
  o << "|";
  for (const std::string& h : header) o << " " << h << " |";
  o << "\n|";
  for (size_t i = 0; i < header.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& row : rows) {
    o << "|";
    for (const std::string& c : row) o << " " << c << " |";
    o << "\n";
  }
  o << "\n";
}

void HtmlTable(std::ostringstream& o, const std::vector<std::string>& header,
               const std::vector<std::vector<std::string>>& rows) {
  o << "<table><tr>";
  for (const std::string& h : header) o << "<th>" << XmlEscape(h) << "</th>";
  o << "</tr>";
  for (const auto& row : rows) {
    o << "<tr>";
    for (const std::string& c : row) o << "<td>" << XmlEscape(c) << "</td>";
    o << "</tr>";
  }
  o << "</table>";
}

}  // namespace onboard::agent
