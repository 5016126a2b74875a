// SVG plots for the `mrct sim` summaries. Fixed layout; every number goes through snprintf with
// a fixed format, so the bytes depend only on the data.
#include "reference-impl/svgplot/svgplot.h"

#include "conformance/report_text/report_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace mrc::svgplot {

namespace {

// Plot area inside the kWidth x kHeight canvas; the legend sits to its right.
constexpr double kLeft = 80, kRight = 540, kTop = 40, kBottom = 340;
constexpr double kLegendX = 556;
constexpr int kMaxTicks = 8;
// Matplotlib's tab10, then the same colours dashed.
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kColorCount = sizeof kColors / sizeof kColors[0];

// Text in the SVG goes through the suite's one XML escaping rule (conformance/report_text).
using report_text::xml_escape;

std::string px(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// A tick label: the tick with as many decimals as the step needs.
std::string tick_label(double v, double step) {
  const int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step))), 0, 9);
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  std::string s = b;
  if (s == "-0" || (s.size() > 1 && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos))
    s = s.substr(1);
  return s;
}

struct Axis {
  std::vector<double> ticks;
  double lo = 0, hi = 1;
  double step() const { return ticks.size() > 1 ? ticks[1] - ticks[0] : 1.0; }
};

Axis make_axis(double lo, double hi) {
  Axis a;
  a.ticks = nice_ticks(lo, hi, kMaxTicks);
  a.lo = a.ticks.front();
  a.hi = a.ticks.back();
  return a;
}

double map_x(const Axis& a, double v) {
  return kLeft + (v - a.lo) / (a.hi - a.lo) * (kRight - kLeft);
}
double map_y(const Axis& a, double v) {
  return kBottom - (v - a.lo) / (a.hi - a.lo) * (kBottom - kTop);
}

void header(std::string& o, const std::string& title) {
  o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(kWidth) +
       "\" height=\"" + std::to_string(kHeight) + "\" viewBox=\"0 0 " + std::to_string(kWidth) +
       " " + std::to_string(kHeight) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o += "<title>" + xml_escape(title) + "</title>\n";
  o += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(kWidth) + "\" height=\"" +
       std::to_string(kHeight) + "\" fill=\"white\"/>\n";
  o += "<text x=\"" + px((kLeft + kRight) / 2) + "\" y=\"24\" text-anchor=\"middle\" " +
       "font-size=\"15\">" + xml_escape(title) + "</text>\n";
}

void y_axis(std::string& o, const Axis& y, const std::string& label) {
  for (double t : y.ticks) {
    const std::string py = px(map_y(y, t));
    o += "<line x1=\"" + px(kLeft) + "\" y1=\"" + py + "\" x2=\"" + px(kRight) + "\" y2=\"" + py +
         "\" stroke=\"#dddddd\"/>\n";
    o += "<text x=\"" + px(kLeft - 6) + "\" y=\"" + py + "\" dy=\"4\" text-anchor=\"end\">" +
         tick_label(t, y.step()) + "</text>\n";
  }
  o += "<text transform=\"translate(18," + px((kTop + kBottom) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\">" + xml_escape(label) + "</text>\n";
}

void frame(std::string& o) {
  o += "<rect x=\"" + px(kLeft) + "\" y=\"" + px(kTop) + "\" width=\"" + px(kRight - kLeft) +
       "\" height=\"" + px(kBottom - kTop) + "\" fill=\"none\" stroke=\"black\"/>\n";
}

void legend_entry(std::string& o, size_t i, const std::string& name, bool bar) {
  const double y = kTop + 8 + 18 * static_cast<double>(i);
  const char* color = kColors[i % kColorCount];
  if (bar) {
    o += "<rect x=\"" + px(kLegendX) + "\" y=\"" + px(y - 5) +
         "\" width=\"20\" height=\"10\" fill=\"" + color + "\"/>\n";
  } else {
    o += "<line x1=\"" + px(kLegendX) + "\" y1=\"" + px(y) + "\" x2=\"" + px(kLegendX + 20) +
         "\" y2=\"" + px(y) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" +
         (i >= kColorCount ? " stroke-dasharray=\"5,3\"" : "") + "/>\n";
  }
  o += "<text x=\"" + px(kLegendX + 26) + "\" y=\"" + px(y) + "\" dy=\"4\">" + xml_escape(name) +
       "</text>\n";
}

void no_data(std::string& o) {
  o += "<text x=\"" + px((kLeft + kRight) / 2) + "\" y=\"" + px((kTop + kBottom) / 2) +
       "\" text-anchor=\"middle\" fill=\"#888888\">no data</text>\n";
}

}  // namespace

std::string format_value(double v) {
  if (v == 0) return "0";  // also -0
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  max_ticks = std::max(max_ticks, 2);
  const double raw = (hi - lo) / (max_ticks - 1);
  const int exp10 = static_cast<int>(std::floor(std::log10(raw)));
  // 10^|exp10| is exact for the ranges plotted here; a tick is the integer k x m scaled by it
  // in one operation, so 0.15 comes out as the double nearest 0.15 (3 x 0.05 would not).
  const double scale = std::pow(10.0, std::abs(exp10));
  std::vector<double> ticks;
  for (double m : {1.0, 2.0, 5.0, 10.0, 20.0}) {
    const double step = exp10 < 0 ? m / scale : m * scale;
    const double first = std::floor(lo / step);
    const double last = std::ceil(hi / step);
    if (last - first + 1 > max_ticks) continue;
    for (double k = first; k <= last; k += 1)
      ticks.push_back(exp10 < 0 ? k * m / scale : k * m * scale);
    break;
  }
  return ticks;
}

std::string line_plot(const LinePlot& p) {
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo;
  double y_lo = p.y_from_zero ? 0.0 : x_lo, y_hi = p.y_from_zero ? 0.0 : -x_lo;
  bool any = false;
  for (const Series& s : p.series) {
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      any = true;
      x_lo = std::min(x_lo, s.x[i]);
      x_hi = std::max(x_hi, s.x[i]);
      y_lo = std::min(y_lo, s.y[i]);
      y_hi = std::max(y_hi, s.y[i]);
    }
  }
  if (!any) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  const Axis x = make_axis(x_lo, x_hi);
  const Axis y = make_axis(y_lo, y_hi);

  std::string o;
  header(o, p.title);
  y_axis(o, y, p.y_label);
  for (double t : x.ticks) {
    const std::string pxx = px(map_x(x, t));
    o += "<line x1=\"" + pxx + "\" y1=\"" + px(kTop) + "\" x2=\"" + pxx + "\" y2=\"" + px(kBottom) +
         "\" stroke=\"#eeeeee\"/>\n";
    o += "<text x=\"" + pxx + "\" y=\"" + px(kBottom + 16) + "\" text-anchor=\"middle\">" +
         tick_label(t, x.step()) + "</text>\n";
  }
  o += "<text x=\"" + px((kLeft + kRight) / 2) + "\" y=\"" + px(kBottom + 40) +
       "\" text-anchor=\"middle\">" + xml_escape(p.x_label) + "</text>\n";
  frame(o);
  if (!any) no_data(o);
  for (size_t si = 0; si < p.series.size(); ++si) {
    const Series& s = p.series[si];
    std::string pts, vals;
    double prev_py = 0;
    bool first = true;
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      const double fx = map_x(x, s.x[i]), fy = map_y(y, s.y[i]);
      if (!first) pts += ' ';
      if (!first && p.style == Style::kStep) pts += px(fx) + "," + px(prev_py) + " ";
      pts += px(fx) + "," + px(fy);
      if (!first) vals += ' ';
      vals += format_value(s.x[i]) + "," + format_value(s.y[i]);
      prev_py = fy;
      first = false;
    }
    o += "<polyline fill=\"none\" stroke=\"" + std::string(kColors[si % kColorCount]) +
         "\" stroke-width=\"1.5\"" + (si >= kColorCount ? " stroke-dasharray=\"5,3\"" : "") +
         " data-name=\"" + xml_escape(s.name) + "\" data-values=\"" + vals + "\" points=\"" + pts +
         "\"/>\n";
    legend_entry(o, si, s.name, false);
  }
  o += "</svg>\n";
  return o;
}

std::string bar_plot(const BarPlot& p) {
  double y_hi = 0, y_lo = 0;
  bool any = false;
  for (const BarSeries& s : p.series) {
    for (double v : s.values) {
      if (!std::isfinite(v)) continue;
      any = true;
      y_hi = std::max(y_hi, v);
      y_lo = std::min(y_lo, v);
    }
  }
  if (!any || y_hi == y_lo) y_hi = y_lo + 1;
  const Axis y = make_axis(y_lo, y_hi);
  std::string o;
  header(o, p.title);
  y_axis(o, y, p.y_label);
  frame(o);
  if (!any) no_data(o);
  const size_t nc = std::max<size_t>(p.categories.size(), 1);
  const size_t ns = std::max<size_t>(p.series.size(), 1);
  const double group = (kRight - kLeft) / static_cast<double>(nc);
  const double bar = group * 0.8 / static_cast<double>(ns);
  for (size_t c = 0; c < p.categories.size(); ++c) {
    const double gx = kLeft + group * static_cast<double>(c);
    o += "<text x=\"" + px(gx + group / 2) + "\" y=\"" + px(kBottom + 16) +
         "\" text-anchor=\"middle\">" + xml_escape(p.categories[c]) + "</text>\n";
    for (size_t si = 0; si < p.series.size(); ++si) {
      const BarSeries& s = p.series[si];
      if (c >= s.values.size() || !std::isfinite(s.values[c])) continue;
      const double v = s.values[c];
      const double top = map_y(y, std::max(v, 0.0)), base = map_y(y, std::min(v, 0.0));
      o += "<rect x=\"" + px(gx + group * 0.1 + bar * static_cast<double>(si)) + "\" y=\"" +
           px(top) + "\" width=\"" + px(bar) + "\" height=\"" + px(base - top) + "\" fill=\"" +
           kColors[si % kColorCount] + "\" data-series=\"" + xml_escape(s.name) +
           "\" data-category=\"" + xml_escape(p.categories[c]) + "\" data-value=\"" +
           format_value(v) + "\"/>\n";
    }
  }
  for (size_t si = 0; si < p.series.size(); ++si) legend_entry(o, si, p.series[si].name, true);
  o += "</svg>\n";
  return o;
}

}  // namespace mrc::svgplot
