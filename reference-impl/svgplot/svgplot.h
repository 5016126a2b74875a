// mrc_svgplot: small, dependency-free SVG plots (line, step/CDF and grouped bar charts) for
// the per-run summaries of `mrct sim` (docs/simulation.md, "Summary"). Output is a pure
// function of the input (fixed layout, fixed number formatting, no clock, no locale), so two
// runs of one seed write identical files.
//
// Every series also carries its data in data coordinates: a line plot's polyline has
// `data-name` and `data-values="x,y x,y ..."` (the values as given, %.9g), a bar has
// `data-series`, `data-category` and `data-value`, so a test or a script reads back what was
// plotted without inverting the pixel mapping.
#pragma once

#include <string>
#include <vector>

namespace mrc::svgplot {

struct Series {
  std::string name;
  std::vector<double> x, y;  // same length; non-finite points are left out
};

enum class Style : unsigned char {
  kLine,  // points joined by straight segments
  kStep,  // each y holds until the next x (an empirical CDF drawn with x sorted)
};

struct LinePlot {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  Style style = Style::kLine;
  bool y_from_zero = true;  // the y axis starts at 0 (or below, for negative data)
};

struct BarSeries {
  std::string name;
  std::vector<double> values;  // one per category; non-finite values draw no bar
};

struct BarPlot {
  std::string title, y_label;
  std::vector<std::string> categories;
  std::vector<BarSeries> series;  // grouped side by side within each category
};

inline constexpr int kWidth = 720, kHeight = 400;

// The SVG documents (UTF-8, with XML declaration). Text is XML-escaped. A plot without any
// finite point still has its axes and says "no data".
std::string line_plot(const LinePlot& p);
std::string bar_plot(const BarPlot& p);

// Tick positions covering [lo, hi] with a step of 1, 2 or 5 x 10^k, at most `max_ticks` of
// them; the first tick is <= lo and the last >= hi. lo == hi gets a unit-wide range around it.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// %.9g with "-0" printed as "0": the form of every data value in the output.
std::string format_value(double v);

}  // namespace mrc::svgplot
