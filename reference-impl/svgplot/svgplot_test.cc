#include "reference-impl/svgplot/svgplot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mrc::svgplot {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(SvgPlot, NiceTicksCoverTheRangeWithRoundSteps) {
  EXPECT_EQ(nice_ticks(0, 97, 8), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(3, 7, 8), (std::vector<double>{3, 4, 5, 6, 7}));
  EXPECT_EQ(nice_ticks(0.12, 0.31, 8), (std::vector<double>{0.1, 0.15, 0.2, 0.25, 0.3, 0.35}));
  const std::vector<double> one = nice_ticks(5, 5, 8);  // a single value: a unit around it
  ASSERT_GE(one.size(), 2u);
  EXPECT_LE(one.front(), 4.5);
  EXPECT_GE(one.back(), 5.5);
  const std::vector<double> big = nice_ticks(0, 1.23e9, 8);
  EXPECT_LE(big.size(), 8u);
  EXPECT_GE(big.back(), 1.23e9);
}

TEST(SvgPlot, FormatValueIsShortAndExact) {
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(-0.0), "0");
  EXPECT_EQ(format_value(1234567), "1234567");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(123456789012.0), "1.23456789e+11");
}

TEST(SvgPlot, LinePlotCarriesTheDataAndMapsItToTheAxes) {
  LinePlot p;
  p.title = "goodput <a & b>";
  p.x_label = "time (us)";
  p.y_label = "Gb/s";
  p.series.push_back({"all", {0, 50, 100}, {0, 0.5, 1}});
  p.series.push_back({"plane 1", {0, std::numeric_limits<double>::quiet_NaN(), 100}, {1, 2, 0}});
  const std::string svg = line_plot(p);
  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg ", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_NE(svg.find("<title>goodput &lt;a &amp; b&gt;</title>"), std::string::npos);
  EXPECT_EQ(svg.find("<a &"), std::string::npos);
  EXPECT_NE(svg.find("data-name=\"all\" data-values=\"0,0 50,0.5 100,1\""), std::string::npos);
  // The NaN point is left out of both the data and the drawing.
  EXPECT_NE(svg.find("data-name=\"plane 1\" data-values=\"0,1 100,0\""), std::string::npos);
  // x 0..100 spans the plot area (80..540 px) and y 0..1 340..40 px: the left-out point's y of
  // 2 does not widen the axis.
  EXPECT_NE(svg.find("points=\"80.00,340.00 310.00,190.00 540.00,40.00\""), std::string::npos)
      << svg;
  EXPECT_EQ(count(svg, "<polyline"), 2u);
}

TEST(SvgPlot, StepStyleHoldsEachValueUntilTheNextX) {
  LinePlot p;
  p.style = Style::kStep;
  p.series.push_back({"cdf", {0, 100}, {0.5, 1}});
  const std::string svg = line_plot(p);
  // (0, 0.5) then horizontally to x = 100 at 0.5, then up to 1.
  EXPECT_NE(svg.find("points=\"80.00,190.00 540.00,190.00 540.00,40.00\""), std::string::npos)
      << svg;
}

TEST(SvgPlot, EmptyPlotSaysNoData) {
  LinePlot p;
  p.series.push_back({"nothing", {}, {}});
  EXPECT_NE(line_plot(p).find(">no data</text>"), std::string::npos);
  EXPECT_NE(bar_plot(BarPlot{}).find(">no data</text>"), std::string::npos);
  p.series[0] = {"one", {1}, {2}};
  EXPECT_EQ(line_plot(p).find(">no data</text>"), std::string::npos);
}

TEST(SvgPlot, BarPlotGroupsSeriesPerCategory) {
  BarPlot b;
  b.title = "queues";
  b.categories = {"host_up", "leaf_up"};
  b.series.push_back({"max", {100, 50}});
  b.series.push_back({"mean", {20, std::numeric_limits<double>::infinity()}});
  const std::string svg = bar_plot(b);
  EXPECT_EQ(count(svg, "data-value="), 3u);  // the infinite bar is not drawn
  EXPECT_NE(svg.find("data-series=\"max\" data-category=\"host_up\" data-value=\"100\""),
            std::string::npos);
  EXPECT_NE(svg.find("data-series=\"mean\" data-category=\"host_up\" data-value=\"20\""),
            std::string::npos);
  // y 0..100 over 300 px: the bar of 100 is 300 px high, the bar of 50 150 px.
  EXPECT_NE(svg.find("height=\"300.00\" fill=\"#1f77b4\" data-series=\"max\""), std::string::npos);
  EXPECT_NE(svg.find("height=\"150.00\" fill=\"#1f77b4\" data-series=\"max\""), std::string::npos);
}

TEST(SvgPlot, SameInputSameBytes) {
  LinePlot p;
  p.series.push_back({"a", {1, 2, 3}, {3.14159, 2.71828, 1.41421}});
  EXPECT_EQ(line_plot(p), line_plot(p));
}

}  // namespace
}  // namespace mrc::svgplot
