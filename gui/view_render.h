// Drawing the three views with QPainter, for the widgets and for headless export alike.
//
// Every painter walks only what is visible: per lane (or per flow) a binary search finds the
// first frame at t0, the walk stops at t1, and marks that would land on a pixel column already
// drawn for the same kind are skipped, so the number of draw calls is bounded by the pixels, not
// by the frames.
#pragma once

#include <QColor>
#include <QPainter>
#include <QRect>
#include <QSize>
#include <QString>
#include <cstdint>
#include <string>
#include <vector>

#include "gui/view_model.h"

namespace mrc::view {

enum class ViewKind { kTimeline, kSequence, kSeries };
const char* view_kind_name(ViewKind k);

// What is shown: shared by all views (one time axis, one selection).
struct ViewState {
  uint32_t flow = kNone;
  uint64_t t0 = 0, t1 = 0;  // visible range, absolute ns
  Filter filter;
  uint32_t selected_frame = kNone;
  std::vector<uint32_t> highlighted;  // frames named by the selected violation
  // The rest of the selected violation's evidence (ViewModel::evidence_focus): lanes outlined,
  // intervals shaded on every view.
  std::vector<uint32_t> focus_lanes;
  std::vector<std::pair<uint64_t, uint64_t>> focus_intervals;
  bool has_selection = false;  // a time range picked with shift+drag
  uint64_t sel_from = 0, sel_to = 0;
  uint64_t goodput_window_ns = 0;   // moving-average window; 0: 1/40 of the visible span
  uint32_t highlight_lane = kNone;  // one EV emphasised on every view (lane index in `flow`)
  QString caption;                  // drawn above the view when not empty (exports)
};

// Where things landed, for hit tests and for tests that check what was drawn.
struct TimelineLayout {
  QRect plot;  // the mark area (time axis above, labels left, legend below)
  struct Row {
    uint32_t lane = kNone;
    int y = 0, h = 0;
    QString label;  // as drawn: "EV 0xe0010002", the path's T1 and uSIDs, "idle"
    bool idle = false;
  };
  std::vector<Row> rows;
  struct Header {
    uint8_t plane = 0;
    int y = 0;
  };
  std::vector<Header> plane_headers;
  QRect legend;
};

struct PlotLayout {
  QRect plot;
  double y0 = 0, y1 = 1;            // value range on the y axis (bottom, top)
  QRect title;                      // the panel's title, above the plot (series)
  std::vector<QRectF> tick_labels;  // value axis labels as drawn
};

struct SeriesLayout {
  PlotLayout goodput, rtt, window;
};

QColor plane_color(uint8_t plane);
QColor kind_color(MarkKind k);
QColor lane_color(const Flow& flow, uint32_t lane);
QColor ev_state_color(EvState s);                      // lane background; transparent for GOOD
inline const QColor kFocusBand(0xd0, 0x20, 0x20, 40);  // a violation's interval
inline const QColor kFocusEdge(0xc0, 0x10, 0x10);      // its bounds and its lanes' outline

// Fits the state to the model: busiest flow, whole capture.
ViewState initial_state(const ViewModel& model);

void paint_timeline(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area,
                    TimelineLayout* layout = nullptr);
void paint_sequence(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area,
                    PlotLayout* layout = nullptr);
void paint_series(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area,
                  SeriesLayout* layout = nullptr);
void paint_view(ViewKind k, QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area);

// Frame under a point, within `tol` pixels; kNone when nothing is there.
uint32_t hit_timeline(const ViewModel& m, const ViewState& s, const TimelineLayout& l, QPoint pt,
                      int tol = 4);
uint32_t hit_sequence(const ViewModel& m, const ViewState& s, const PlotLayout& l, QPoint pt,
                      int tol = 5);
// What the series view shows under a point: the value(s), the EV and the time, and the frame a
// click selects (the RTT sample's acknowledgement, else the lane's frame nearest in time).
struct SeriesHit {
  QString text;
  uint32_t frame = kNone;
  uint32_t lane = kNone;
};
SeriesHit hit_series(const ViewModel& m, const ViewState& s, const SeriesLayout& l, QPoint pt);
// The lane label: "EV 0xe0010002", with the path's T1 and uSID list when the run has a path
// table; "(idle)" for an EV that carried no data.
QString lane_label(const ViewModel& m, uint32_t flow, uint32_t lane);

// x <-> time on a plot rectangle.
double x_of(const ViewState& s, const QRect& plot, uint64_t t);
uint64_t t_of(const ViewState& s, const QRect& plot, double x);

// Renders one view ("timeline", "sequence", "series") or "all" (the three stacked) into a PNG
// (or any raster format Qt writes, by extension) or an SVG. Needs a QGuiApplication (the
// offscreen platform is enough). False with `error` set on failure.
bool export_view(const ViewModel& m, const ViewState& s, const std::string& view, QSize size,
                 const QString& path, QString& error);

}  // namespace mrc::view
