// Number formatting shared by the Markdown and HTML reports (report/report_markdown.cpp,
// report/report_html.cpp). All functions accept JSON values so missing/null fields print "-".
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace onboard::agent {

std::string FmtSig(const nlohmann::json& v, int digits = 3);     // 3 significant digits
std::string FmtFixed(const nlohmann::json& v, int decimals);     // fixed decimals
std::string FmtGiB(const nlohmann::json& bytes);                 // "12.3 GiB"
std::string FmtPct(const nlohmann::json& fraction);              // 0.423 -> "42.3%"
std::string FmtCount(const nlohmann::json& n);                   // 2.8e12 -> "2.80T", 4.8e10 -> "48.0B"
std::string FmtSeconds(const nlohmann::json& s);                 // "1.23 s", "45 ms"
std::string JsonStr(const nlohmann::json& j, const char* key);
const nlohmann::json& JsonAt(const nlohmann::json& j, const char* key);  // field or null
bool JsonTrue(const nlohmann::json& j);                                 // a JSON true   // string field or "" (non-strings dumped)
// True when some probe round of report JSON `r` recorded loss parity or KDA calls (both reports'
// "Kernels in the probe" section is drawn only then).
bool AnyProbeKernelRecord(const nlohmann::json& r);
// A compact one-line rendering of an "observed"/"changed" object: key=value, arrays shortened.
std::string CompactJson(const nlohmann::json& j, size_t max_array = 8);
// A table of text cells: Markdown (header, separator, rows; then a blank line) and HTML (escaped).
void MarkdownTable(std::ostringstream& o, const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows);
void HtmlTable(std::ostringstream& o, const std::vector<std::string>& header,
               const std::vector<std::vector<std::string>>& rows);

}  // namespace onboard::agent
