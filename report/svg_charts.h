// Inline SVG charts for the HTML report: no scripts, no external resources, fixed sizes.
// Every function returns one <svg> element (with a <title> for accessibility); empty data gives a
// small "no data" panel rather than an empty string. Values are plotted in the units given.
#pragma once

#include <string>
#include <vector>

namespace onboard::agent {

struct SvgSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;            // non-finite points are skipped (gaps)
};

// Lines with markers; legend top-right. log_y plots log10 (values <= 0 skipped).
std::string SvgLineChart(const std::string& title, const std::vector<SvgSeries>& series,
                         const std::string& x_label, const std::string& y_label, bool log_y = false);

// Grouped bars: values[s][c] is series s at category c.
std::string SvgGroupedBars(const std::string& title, const std::vector<std::string>& categories,
                           const std::vector<std::string>& series_names,
                           const std::vector<std::vector<double>>& values, const std::string& y_label);

// Stacked bars: values[b][k] is stack k of bar b; `limit` > 0 draws a dashed capacity line.
std::string SvgStackedBars(const std::string& title, const std::vector<std::string>& bars,
                           const std::vector<std::string>& stack_names,
                           const std::vector<std::vector<double>>& values, const std::string& y_label,
                           double limit = 0, const std::string& limit_label = "");

struct SvgPoint {
  double x = 0, y = 0;
  std::string label;
  bool highlight = false;
};
// Scatter with the points joined in x order (a Pareto front); highlighted points drawn larger.
std::string SvgScatter(const std::string& title, const std::vector<SvgPoint>& points,
                       const std::string& x_label, const std::string& y_label);

struct SvgSpan {
  std::string row;                  // stage name; one row per distinct name, in first-seen order
  double start = 0, seconds = 0;
  bool ok = true;
  std::string label;                // tooltip
};
std::string SvgTimeline(const std::string& title, const std::vector<SvgSpan>& spans);

std::string XmlEscape(const std::string& s);

}  // namespace onboard::agent
