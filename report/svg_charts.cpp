// Inline SVG charts (see report/svg_charts.h). Layout: W x H pixels, plot area inside fixed margins,
// "nice" ticks (1/2/5 x 10^k), palette chosen for contrast on white.
#include "report/svg_charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace onboard::agent {
namespace {

constexpr int kW = 600, kH = 320;
constexpr int kLeft = 64, kRight = 150, kTop = 34, kBottom = 46;
const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                          "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
const char* Color(size_t i) { return kPalette[i % 10]; }

std::string F(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f", v);
  return b;
}

// Short tick label: 3 significant digits, k/M/G suffixes for large values.
std::string Tick(double v) {
  char b[32];
  double a = std::fabs(v);
  if (a >= 1e9) std::snprintf(b, sizeof(b), "%.3gG", v / 1e9);
  else if (a >= 1e6) std::snprintf(b, sizeof(b), "%.3gM", v / 1e6);
  else if (a >= 1e4) std::snprintf(b, sizeof(b), "%.3gk", v / 1e3);
  else std::snprintf(b, sizeof(b), "%.3g", v);
  return b;
}

struct Axis {
  double lo = 0, hi = 1, step = 0.2;
};

// Nice axis covering [lo, hi] with about 5 ticks.
Axis NiceAxis(double lo, double hi, bool from_zero) {
  if (from_zero) lo = std::min(0.0, lo);
  if (!(hi > lo)) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1 + 1e-12);
  double raw = (hi - lo) / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double norm = raw / mag;
  double step = (norm <= 1 ? 1 : norm <= 2 ? 2 : norm <= 5 ? 5 : 10) * mag;
  return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

class Canvas {
 public:
  Canvas(const std::string& title, int w = kW, int h = kH) : w_(w), h_(h) {
    s_ << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h
       << "\" viewBox=\"0 0 " << w << " " << h << "\" role=\"img\" class=\"chart\">"
       << "<title>" << XmlEscape(title) << "</title>"
       << "<rect x=\"0\" y=\"0\" width=\"" << w << "\" height=\"" << h << "\" fill=\"#ffffff\"/>"
       << "<text x=\"" << w / 2 << "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">"
       << XmlEscape(title) << "</text>";
  }
  std::ostringstream& out() { return s_; }
  int pw() const { return w_ - kLeft - kRight; }
  int ph() const { return h_ - kTop - kBottom; }
  double X(double v, const Axis& a) const { return kLeft + (v - a.lo) / (a.hi - a.lo) * pw(); }
  double Y(double v, const Axis& a) const { return kTop + ph() - (v - a.lo) / (a.hi - a.lo) * ph(); }

  void YAxis(const Axis& a, const std::string& label, bool log10_labels = false) {
    for (double v = a.lo; v <= a.hi + a.step * 1e-6; v += a.step) {
      double y = Y(v, a);
      s_ << "<line x1=\"" << kLeft << "\" y1=\"" << F(y) << "\" x2=\"" << kLeft + pw() << "\" y2=\"" << F(y)
         << "\" stroke=\"#e4e4e4\"/>"
         << "<text x=\"" << kLeft - 6 << "\" y=\"" << F(y + 4) << "\" text-anchor=\"end\" font-size=\"11\">"
         << XmlEscape(log10_labels ? Tick(std::pow(10, v)) : Tick(v)) << "</text>";
    }
    s_ << "<text x=\"14\" y=\"" << kTop + ph() / 2 << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 "
       << kTop + ph() / 2 << ")\">" << XmlEscape(label) << "</text>";
    Frame();
  }
  void XAxis(const Axis& a, const std::string& label) {
    for (double v = a.lo; v <= a.hi + a.step * 1e-6; v += a.step)
      s_ << "<text x=\"" << F(X(v, a)) << "\" y=\"" << kTop + ph() + 16 << "\" text-anchor=\"middle\" font-size=\"11\">"
         << XmlEscape(Tick(v)) << "</text>";
    XLabel(label);
  }
  void XLabel(const std::string& label) {
    s_ << "<text x=\"" << kLeft + pw() / 2 << "\" y=\"" << h_ - 8 << "\" text-anchor=\"middle\" font-size=\"12\">"
       << XmlEscape(label) << "</text>";
  }
  void Frame() {
    s_ << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw() << "\" height=\"" << ph()
       << "\" fill=\"none\" stroke=\"#888\"/>";
  }
  void Legend(const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size() && i < 12; ++i) {
      int y = kTop + 8 + static_cast<int>(i) * 18;
      s_ << "<rect x=\"" << kLeft + pw() + 12 << "\" y=\"" << y - 9 << "\" width=\"12\" height=\"12\" fill=\""
         << Color(i) << "\"/><text x=\"" << kLeft + pw() + 30 << "\" y=\"" << y + 1 << "\" font-size=\"11\">"
         << XmlEscape(names[i].substr(0, 20)) << "</text>";
    }
  }
  std::string Done() {
    s_ << "</svg>";
    return s_.str();
  }
  std::string NoData() {
    s_ << "<text x=\"" << w_ / 2 << "\" y=\"" << h_ / 2 << "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#777\">no data</text>";
    return Done();
  }

 private:
  int w_, h_;
  std::ostringstream s_;
};

}  // namespace

std::string XmlEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string SvgLineChart(const std::string& title, const std::vector<SvgSeries>& series,
                         const std::string& x_label, const std::string& y_label, bool log_y) {
  Canvas c(title);
  auto yv = [&](double v) { return log_y ? std::log10(v) : v; };
  auto usable = [&](double v) { return std::isfinite(v) && (!log_y || v > 0); };
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (usable(s.y[i]) && std::isfinite(s.x[i])) {
        xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
        ylo = std::min(ylo, yv(s.y[i])), yhi = std::max(yhi, yv(s.y[i]));
      }
  if (!std::isfinite(xlo)) return c.NoData();
  Axis ax = NiceAxis(xlo, xhi, false), ay = NiceAxis(ylo, yhi, !log_y && ylo >= 0);
  c.YAxis(ay, y_label + (log_y ? " (log)" : ""), log_y);
  c.XAxis(ax, x_label);
  std::vector<std::string> names;
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    names.push_back(s.name);
    std::ostringstream path;
    bool pen = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.y[i])) {
        pen = false;
        continue;
      }
      path << (pen ? " L" : " M") << F(c.X(s.x[i], ax)) << " " << F(c.Y(yv(s.y[i]), ay));
      pen = true;
      c.out() << "<circle cx=\"" << F(c.X(s.x[i], ax)) << "\" cy=\"" << F(c.Y(yv(s.y[i]), ay)) << "\" r=\"2.5\" fill=\""
              << Color(k) << "\"/>";
    }
    if (!path.str().empty())
      c.out() << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"" << Color(k) << "\" stroke-width=\"2\"/>";
  }
  c.Legend(names);
  return c.Done();
}

std::string SvgGroupedBars(const std::string& title, const std::vector<std::string>& categories,
                           const std::vector<std::string>& series_names,
                           const std::vector<std::vector<double>>& values, const std::string& y_label) {
  Canvas c(title);
  double hi = 0;
  for (const auto& s : values)
    for (double v : s)
      if (std::isfinite(v)) hi = std::max(hi, v);
  if (categories.empty() || values.empty()) return c.NoData();
  Axis ay = NiceAxis(0, hi, true);
  c.YAxis(ay, y_label);
  double slot = static_cast<double>(c.pw()) / categories.size();
  double bw = slot * 0.8 / std::max<size_t>(1, values.size());
  for (size_t s = 0; s < values.size(); ++s)
    for (size_t i = 0; i < categories.size() && i < values[s].size(); ++i) {
      double v = std::isfinite(values[s][i]) ? values[s][i] : 0;
      double x = kLeft + i * slot + slot * 0.1 + s * bw;
      double y = c.Y(v, ay);
      c.out() << "<rect x=\"" << F(x) << "\" y=\"" << F(y) << "\" width=\"" << F(std::max(1.0, bw - 1))
              << "\" height=\"" << F(c.Y(0, ay) - y) << "\" fill=\"" << Color(s) << "\"><title>"
              << XmlEscape(series_names.size() > s ? series_names[s] : "") << " " << XmlEscape(categories[i]) << ": "
              << Tick(v) << "</title></rect>";
    }
  size_t every = std::max<size_t>(1, categories.size() / 16);
  for (size_t i = 0; i < categories.size(); i += every)
    c.out() << "<text x=\"" << F(kLeft + (i + 0.5) * slot) << "\" y=\"" << kTop + c.ph() + 16
            << "\" text-anchor=\"middle\" font-size=\"10\">" << XmlEscape(categories[i]) << "</text>";
  c.Legend(series_names);
  return c.Done();
}

std::string SvgStackedBars(const std::string& title, const std::vector<std::string>& bars,
                           const std::vector<std::string>& stack_names,
                           const std::vector<std::vector<double>>& values, const std::string& y_label,
                           double limit, const std::string& limit_label) {
  Canvas c(title);
  if (bars.empty()) return c.NoData();
  double hi = limit;
  for (const auto& b : values) {
    double sum = 0;
    for (double v : b) sum += std::isfinite(v) && v > 0 ? v : 0;
    hi = std::max(hi, sum);
  }
  Axis ay = NiceAxis(0, hi, true);
  c.YAxis(ay, y_label);
  double slot = static_cast<double>(c.pw()) / bars.size();
  for (size_t b = 0; b < bars.size() && b < values.size(); ++b) {
    double base = 0;
    for (size_t k = 0; k < values[b].size(); ++k) {
      double v = std::isfinite(values[b][k]) && values[b][k] > 0 ? values[b][k] : 0;
      double y1 = c.Y(base + v, ay), y0 = c.Y(base, ay);
      c.out() << "<rect x=\"" << F(kLeft + b * slot + slot * 0.2) << "\" y=\"" << F(y1) << "\" width=\""
              << F(slot * 0.6) << "\" height=\"" << F(y0 - y1) << "\" fill=\"" << Color(k) << "\"><title>"
              << XmlEscape(stack_names.size() > k ? stack_names[k] : "") << ": " << Tick(v) << "</title></rect>";
      base += v;
    }
    c.out() << "<text x=\"" << F(kLeft + (b + 0.5) * slot) << "\" y=\"" << kTop + c.ph() + 16
            << "\" text-anchor=\"middle\" font-size=\"10\">" << XmlEscape(bars[b].substr(0, 24)) << "</text>";
  }
  if (limit > 0) {
    double y = c.Y(limit, ay);
    c.out() << "<line x1=\"" << kLeft << "\" y1=\"" << F(y) << "\" x2=\"" << kLeft + c.pw() << "\" y2=\"" << F(y)
            << "\" stroke=\"#000\" stroke-dasharray=\"6 4\"/><text x=\"" << kLeft + c.pw() - 4 << "\" y=\"" << F(y - 4)
            << "\" text-anchor=\"end\" font-size=\"11\">" << XmlEscape(limit_label) << "</text>";
  }
  c.Legend(stack_names);
  return c.Done();
}

std::string SvgScatter(const std::string& title, const std::vector<SvgPoint>& points,
                       const std::string& x_label, const std::string& y_label) {
  Canvas c(title);
  std::vector<SvgPoint> p;
  for (const auto& q : points)
    if (std::isfinite(q.x) && std::isfinite(q.y)) p.push_back(q);
  if (p.empty()) return c.NoData();
  std::sort(p.begin(), p.end(), [](const SvgPoint& a, const SvgPoint& b) { return a.x < b.x; });
  double xlo = p.front().x, xhi = p.back().x, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& q : p) ylo = std::min(ylo, q.y), yhi = std::max(yhi, q.y);
  Axis ax = NiceAxis(xlo, xhi, false), ay = NiceAxis(ylo, yhi, false);
  c.YAxis(ay, y_label);
  c.XAxis(ax, x_label);
  std::ostringstream path;
  for (size_t i = 0; i < p.size(); ++i) path << (i ? " L" : "M") << F(c.X(p[i].x, ax)) << " " << F(c.Y(p[i].y, ay));
  c.out() << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>";
  for (const auto& q : p)
    c.out() << "<circle cx=\"" << F(c.X(q.x, ax)) << "\" cy=\"" << F(c.Y(q.y, ay)) << "\" r=\"" << (q.highlight ? 7 : 4)
            << "\" fill=\"" << (q.highlight ? "#d62728" : "#1f77b4") << "\"><title>" << XmlEscape(q.label)
            << "</title></circle>";
  c.Legend({"Pareto front", "chosen"});
  c.out() << "<rect x=\"" << kLeft + c.pw() + 12 << "\" y=\"" << kTop + 17 << "\" width=\"12\" height=\"12\" fill=\"#d62728\"/>";
  return c.Done();
}

std::string SvgTimeline(const std::string& title, const std::vector<SvgSpan>& spans) {
  std::vector<std::string> rows;
  for (const auto& s : spans)
    if (std::find(rows.begin(), rows.end(), s.row) == rows.end()) rows.push_back(s.row);
  int h = std::max(kH / 2, kTop + kBottom + 26 * static_cast<int>(rows.size()));
  Canvas c(title, kW, h);
  if (spans.empty()) return c.NoData();
  double end = 0;
  for (const auto& s : spans) end = std::max(end, s.start + s.seconds);
  Axis ax = NiceAxis(0, end, true);
  c.Frame();
  c.XAxis(ax, "seconds since start");
  for (size_t r = 0; r < rows.size(); ++r)
    c.out() << "<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + 26 * r + 17 << "\" text-anchor=\"end\" font-size=\"11\">"
            << XmlEscape(rows[r]) << "</text>";
  for (const auto& s : spans) {
    size_t r = std::find(rows.begin(), rows.end(), s.row) - rows.begin();
    double x0 = c.X(s.start, ax), x1 = c.X(s.start + s.seconds, ax);
    c.out() << "<rect x=\"" << F(x0) << "\" y=\"" << kTop + 26 * r + 5 << "\" width=\"" << F(std::max(2.0, x1 - x0))
            << "\" height=\"18\" fill=\"" << (s.ok ? Color(r) : "#d62728") << "\"><title>" << XmlEscape(s.label)
            << "</title></rect>";
  }
  return c.Done();
}

}  // namespace onboard::agent
