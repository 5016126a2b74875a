#include "gui/view_render.h"

#include <QFileInfo>
#include <QFontMetrics>
#include <QImage>
#include <QPainterPath>
#include <QPolygonF>
#include <QSvgGenerator>
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

namespace mrc::view {
namespace {

constexpr int kLabelWidth = 150;
constexpr int kRulerHeight = 20;
constexpr int kLegendHeight = 20;
constexpr int kAxisWidth = 70;
constexpr int kCaptionHeight = 22;

const QColor kGrid(0xe6, 0xe6, 0xe6);
const QColor kAxisText(0x44, 0x44, 0x44);
const QColor kSelection(0x33, 0x88, 0xff, 40);
const QColor kCursor(0xd0, 0x10, 0x10);
const QColor kIdleHatch(0xc8, 0xc8, 0xc8);

// 1-2-5 steps so that ticks are at least `min_px` apart.
double nice_step(double span, double px, double min_px) {
  if (span <= 0 || px <= 0) return 1;
  const double raw = span * min_px / px;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) return m * mag;
  return 10 * mag;
}

void set_font_px(QPainter& p, int px, bool bold = false) {
  QFont f = p.font();
  f.setPixelSize(std::max(6, px));
  f.setBold(bold);
  p.setFont(f);
}

QRect draw_caption(QPainter& p, const ViewState& s, QRect area) {
  if (s.caption.isEmpty()) return area;
  set_font_px(p, 13, true);
  p.setPen(Qt::black);
  p.drawText(QRect(area.left() + 6, area.top(), area.width() - 12, kCaptionHeight),
             Qt::AlignVCenter | Qt::AlignLeft, s.caption);
  area.setTop(area.top() + kCaptionHeight);
  return area;
}

// Time ticks: grid lines over `plot`, labels (relative to the first frame) in `label_rect`.
void draw_time_axis(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& plot,
                    const QRect& label_rect, bool labels) {
  const uint64_t origin = m.first_ns();
  const double span = static_cast<double>(s.t1 - s.t0);
  const double step = std::max(1.0, nice_step(span, plot.width(), 90));
  const double rel0 = static_cast<double>(s.t0 - std::min(s.t0, origin));
  double tick = std::ceil(rel0 / step) * step;
  set_font_px(p, 10);
  for (int guard = 0; guard < 1000; ++guard, tick += step) {
    const uint64_t t = origin + static_cast<uint64_t>(tick);
    if (t > s.t1) break;
    const double x = x_of(s, plot, t);
    p.setPen(kGrid);
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    if (labels) {
      p.setPen(kAxisText);
      p.drawLine(QPointF(x, label_rect.bottom() - 3), QPointF(x, label_rect.bottom()));
      const QString txt = QString::fromStdString(format_time_ns(static_cast<uint64_t>(tick)));
      p.drawText(QRectF(x - 45, label_rect.top(), 90, label_rect.height() - 3), Qt::AlignCenter,
                 txt);
    }
  }
}

// The glyph of a mark kind, used on lanes and in the legend. (x, top, h): the row.
// NACK reasons as one letter next to the mark: Trimmed, trimmed at the Last hop, Resource
// (NO_BITMAP, NO_PKT_BUFFER, NO_RESOURCE, PSN_OOR_WINDOW), Unexpected event, ? otherwise.
char nack_letter(uint8_t code) {
  switch (code) {
    case 0x01:
      return 'T';
    case 0x02:
      return 'L';
    case 0x06:
    case 0x07:
    case 0x0A:
    case 0x0B:
      return 'R';
    case 0x19:
      return 'U';
    default:
      return '?';
  }
}

void draw_glyph(QPainter& p, MarkKind k, double x, double top, double h, bool last_hop = false,
                int nack_code = -1) {
  const QColor c = kind_color(k);
  // Vertical bars are filled rectangles: the raster engine fills them much faster than it strokes
  // lines wider than one pixel.
  const auto bar = [&](double w, double y0, double y1) {
    // x is a pixel centre: a 1 px bar is that pixel, a 2 px bar adds the one to its right.
    p.fillRect(QRectF(x - 0.5 - std::floor((w - 1) / 2), y0, w, y1 - y0), c);
  };
  if (h < 8) {
    // Thin rows: one short bar per mark, colour says the kind.
    bar(k == MarkKind::kEvState || k == MarkKind::kRetransmit ? 2 : 1, top, top + h);
    return;
  }
  const double cy = top + h * 0.45;
  const double r = std::min(4.0, h * 0.22);
  switch (k) {
    case MarkKind::kFirstTx:
      bar(1, top + 2, top + h * 0.55);
      break;
    case MarkKind::kRetransmit:
      bar(2, top + 1, top + h * 0.68);
      break;
    case MarkKind::kSack:
      bar(1, top + h * 0.62, top + h - 1);
      break;
    case MarkKind::kAck:
      bar(1, top + h * 0.3, top + h - 2);
      break;
    case MarkKind::kTrimmed: {
      p.setPen(Qt::NoPen);
      p.setBrush(last_hop ? c.lighter(140) : c);
      QPolygonF d;
      d << QPointF(x, cy - r - 1) << QPointF(x + r + 1, cy) << QPointF(x, cy + r + 1)
        << QPointF(x - r - 1, cy);
      p.drawPolygon(d);
      p.setBrush(Qt::NoBrush);
      break;
    }
    case MarkKind::kInjectorDrop:
      p.setPen(QPen(c, 2));
      p.drawLine(QPointF(x - r, cy - r), QPointF(x + r, cy + r));
      p.drawLine(QPointF(x - r, cy + r), QPointF(x + r, cy - r));
      break;
    case MarkKind::kNack: {
      p.setPen(Qt::NoPen);
      p.setBrush(c);
      const double b = top + h - 1;
      QPolygonF t;
      t << QPointF(x - r - 1, b) << QPointF(x + r + 1, b) << QPointF(x, b - 2 * r - 1);
      p.drawPolygon(t);
      p.setBrush(Qt::NoBrush);
      if (nack_code >= 0 && h >= 14) {
        set_font_px(p, 9, true);
        p.setPen(c);
        p.drawText(QPointF(x + r + 2, b),
                   QString(QChar(nack_letter(static_cast<uint8_t>(nack_code)))));
      }
      break;
    }
    case MarkKind::kProbe:
      p.setPen(QPen(c, 1.5));
      p.drawEllipse(QPointF(x, cy), r, r);
      break;
    case MarkKind::kEvState:
      bar(2, top, top + h);
      break;
    case MarkKind::kOther:
      bar(1, top + 3, top + h - 3);
      break;
    case MarkKind::kEndpointOp: {
      // Request: open square in the upper half; response (last_hop carries it): filled, lower.
      const double a = std::max(2.0, r - 0.5);
      if (last_hop) {
        p.fillRect(QRectF(x - a, top + h * 0.72 - a, 2 * a, 2 * a), c);
      } else {
        p.setPen(QPen(c, 1.5));
        p.setBrush(Qt::NoBrush);
        p.drawRect(QRectF(x - a, top + h * 0.3 - a, 2 * a, 2 * a));
      }
      break;
    }
  }
}

QString lane_name(const Lane& l) {
  return l.control ? QStringLiteral("ACKs, feedback drops") : QString::fromStdString(l.label());
}

bool lane_idle(const Lane& l) {
  return !l.control && !l.endpoint && l.counts[static_cast<size_t>(MarkKind::kFirstTx)] == 0 &&
         l.counts[static_cast<size_t>(MarkKind::kRetransmit)] == 0 &&
         l.counts[static_cast<size_t>(MarkKind::kTrimmed)] == 0;
}

void draw_no_flow(QPainter& p, const QRect& area, const ViewModel& m) {
  set_font_px(p, 13);
  p.setPen(kAxisText);
  const QString msg =
      m.capture_path().empty() ? QStringLiteral("No capture loaded")
      : m.frames().empty()
          ? QStringLiteral("%1 holds no frames").arg(QString::fromStdString(m.capture_path()))
          : QStringLiteral("No QP with RoCE traffic in this capture (%1 frames)")
                .arg(m.frames().size());
  p.drawText(area, Qt::AlignCenter, msg);
}

// Value axis with a few labelled ticks.
void draw_value_axis(QPainter& p, PlotLayout& L, const QString& unit, double (*fmt_scale)(double),
                     int decimals) {
  set_font_px(p, 10);
  const double span = L.y1 - L.y0;
  const double step = nice_step(span, L.plot.height(), 28);
  double v = std::ceil(L.y0 / step) * step;
  for (int guard = 0; guard < 200 && v <= L.y1 + step * 1e-9; ++guard, v += step) {
    const double y = L.plot.bottom() - (v - L.y0) / span * L.plot.height();
    p.setPen(kGrid);
    p.drawLine(QPointF(L.plot.left(), y), QPointF(L.plot.right(), y));
    p.setPen(kAxisText);
    const double shown = fmt_scale ? fmt_scale(v) : v;
    const QRectF box(L.plot.left() - kAxisWidth + 14, y - 7, kAxisWidth - 18, 14);
    p.drawText(box, Qt::AlignRight | Qt::AlignVCenter, QString::number(shown, 'f', decimals));
    L.tick_labels.push_back(box);
  }
  p.save();
  p.translate(L.plot.left() - kAxisWidth + 8, L.plot.center().y());
  p.rotate(-90);
  p.drawText(QRectF(-L.plot.height() / 2.0, -6, L.plot.height(), 12), Qt::AlignCenter, unit);
  p.restore();
}

double y_of(const PlotLayout& L, double v) {
  return L.plot.bottom() - (v - L.y0) / (L.y1 - L.y0) * L.plot.height();
}

void draw_cursor_and_selection(QPainter& p, const ViewModel& m, const ViewState& s,
                               const QRect& plot) {
  if (s.has_selection && s.sel_to > s.sel_from) {
    const double x0 = std::max<double>(plot.left(), x_of(s, plot, s.sel_from));
    const double x1 = std::min<double>(plot.right(), x_of(s, plot, s.sel_to));
    if (x1 > x0) p.fillRect(QRectF(x0, plot.top(), x1 - x0, plot.height()), kSelection);
  }
  if (s.selected_frame < m.frames().size()) {
    const uint64_t t = m.frames()[s.selected_frame].ts_ns;
    if (t >= s.t0 && t <= s.t1) {
      const double x = std::floor(x_of(s, plot, t)) + 0.5;
      p.setPen(QPen(kCursor, 1, Qt::DashLine));
      p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    }
  }
}

// The selected violation's intervals: a shaded band with solid edges (at least 3 px wide, so a
// short gap stays visible when zoomed out).
void draw_focus(QPainter& p, const ViewState& s, const QRect& plot) {
  for (const auto& [from, to] : s.focus_intervals) {
    if (to < s.t0 || from > s.t1) continue;
    double x0 = x_of(s, plot, std::max(from, s.t0)), x1 = x_of(s, plot, std::min(to, s.t1));
    if (x1 - x0 < 3) {
      const double c = (x0 + x1) / 2;
      x0 = c - 1.5;
      x1 = c + 1.5;
    }
    p.fillRect(QRectF(x0, plot.top(), x1 - x0, plot.height()), kFocusBand);
    p.setPen(QPen(kFocusEdge, 1));
    if (from >= s.t0) p.drawLine(QPointF(x0, plot.top()), QPointF(x0, plot.bottom()));
    if (to <= s.t1) p.drawLine(QPointF(x1, plot.top()), QPointF(x1, plot.bottom()));
  }
}

// One-pixel cosmetic pens take the raster engine's fast stroker; wider or non-cosmetic pens go
// through the general one, which costs ~10x on long polylines.
QPen cosmetic(const QColor& c) {
  QPen pen(c, 1);
  pen.setCosmetic(true);
  return pen;
}

}  // namespace

const char* view_kind_name(ViewKind k) {
  switch (k) {
    case ViewKind::kTimeline:
      return "timeline";
    case ViewKind::kSequence:
      return "sequence";
    case ViewKind::kSeries:
      return "series";
  }
  return "?";
}

QColor plane_color(uint8_t plane) {
  static const QColor kPlanes[] = {
      QColor(0x88, 0x88, 0x88), QColor(0x1f, 0x77, 0xb4), QColor(0xe0, 0x7b, 0x00),
      QColor(0x2c, 0xa0, 0x2c), QColor(0x94, 0x67, 0xbd), QColor(0x8c, 0x56, 0x4b),
      QColor(0xe3, 0x77, 0xc2), QColor(0x17, 0xbe, 0xcf), QColor(0xbc, 0xbd, 0x22)};
  return kPlanes[plane < 9 ? plane : 1 + (plane - 1) % 8];
}

QColor kind_color(MarkKind k) {
  switch (k) {
    case MarkKind::kFirstTx:
      return QColor(0x4a, 0x6f, 0xa5);
    case MarkKind::kRetransmit:
      return QColor(0xf0, 0x8c, 0x00);
    case MarkKind::kTrimmed:
      return QColor(0x8e, 0x44, 0xad);
    case MarkKind::kInjectorDrop:
      return QColor(0xd6, 0x27, 0x28);
    case MarkKind::kSack:
      return QColor(0x2c, 0xa0, 0x2c);
    case MarkKind::kNack:
      return QColor(0xb0, 0x1c, 0x50);
    case MarkKind::kProbe:
      return QColor(0x10, 0xa8, 0xb8);
    case MarkKind::kEvState:
      return QColor(0x20, 0x20, 0x20);
    case MarkKind::kAck:
      return QColor(0x60, 0x90, 0x60);
    case MarkKind::kOther:
      return QColor(0x99, 0x99, 0x99);
    case MarkKind::kEndpointOp:
      return QColor(0x00, 0x6d, 0x77);
  }
  return Qt::black;
}

QColor ev_state_color(EvState s) {
  switch (s) {
    case EvState::kSkip:
      return QColor(0xff, 0xf0, 0xb0);
    case EvState::kAssumedBad:
      return QColor(0xf8, 0xc8, 0xc8);
    case EvState::kDenied:
      return QColor(0xd0, 0xd0, 0xd0);
    case EvState::kGood:
    case EvState::kUnknown:
      break;
  }
  return QColor(0, 0, 0, 0);
}

QColor lane_color(const Flow& flow, uint32_t lane) {
  if (lane >= flow.lanes.size()) return Qt::gray;
  const Lane& l = flow.lanes[lane];
  if (l.control) return Qt::darkGray;
  // k-th EV of its plane. Hue stays within -30..+30 degrees of the plane's colour (the group).
  // Eight hue slots times four brightness tiers, in an order that puts each new colour as far as
  // possible from those before it (so the first dozen EVs of a plane are told apart), then a
  // second saturation tier: 64 distinct colours per plane, 256 over four planes.
  uint32_t k = 0;
  for (uint32_t i = 0; i < lane; ++i)
    if (!flow.lanes[i].control && flow.lanes[i].plane == l.plane) ++k;
  static constexpr std::array<std::pair<int, int>, 32> kOrder = {
      {{0, 0}, {7, 2}, {7, 3}, {4, 0}, {0, 3}, {2, 2}, {7, 0}, {4, 1}, {4, 2}, {0, 2}, {2, 0},
       {7, 1}, {0, 1}, {4, 3}, {6, 2}, {2, 1}, {1, 2}, {3, 2}, {5, 2}, {2, 3}, {6, 0}, {1, 0},
       {5, 0}, {6, 1}, {3, 0}, {1, 1}, {5, 1}, {1, 3}, {6, 3}, {3, 1}, {5, 3}, {3, 3}}};
  static constexpr int kValue[4] = {200, 130, 245, 95};
  static constexpr int kSat[2] = {235, 120};
  const QColor base = plane_color(l.plane);
  const int h0 = base.hsvHue() < 0 ? 0 : base.hsvHue();
  const auto [slot, tier] = kOrder[k % 32];
  const int h = (h0 + (slot * 60) / 7 - 30 + static_cast<int>((k / 64) % 4) * 2 + 360) % 360;
  const int v = kValue[tier];
  const int sat = kSat[(k / 32) % 2];
  return QColor::fromHsv(h, l.plane == 0 ? sat / 4 : sat, v);
}

QString lane_label(const ViewModel& m, uint32_t flow, uint32_t lane) {
  if (flow >= m.flows().size() || lane >= m.flows()[flow].lanes.size()) return {};
  const Lane& l = m.flows()[flow].lanes[lane];
  QString t = lane_name(l);
  if (const PathEntry* p = m.lane_path(flow, lane)) {
    t += QStringLiteral(" T1 %1").arg(p->t1);
    QStringList usids;
    for (const auto& u : p->usids) usids << QString::fromStdString(u);
    if (!usids.isEmpty()) t += QStringLiteral(": ") + usids.join(' ');
  }
  if (lane_idle(l)) t += QStringLiteral(" (idle)");
  return t;
}

// Differences are taken in integers first: capture clocks are ~1.7e18 ns since the epoch, where
// a double only resolves 256 ns.
double x_of(const ViewState& s, const QRect& plot, uint64_t t) {
  const double span = std::max<double>(1, static_cast<double>(s.t1 - s.t0));
  const double dt = t >= s.t0 ? static_cast<double>(t - s.t0) : -static_cast<double>(s.t0 - t);
  return plot.left() + dt * plot.width() / span;
}

uint64_t t_of(const ViewState& s, const QRect& plot, double x) {
  const double span = static_cast<double>(s.t1 - s.t0);
  const double dt = (x - plot.left()) * span / std::max(1, plot.width());
  if (dt < 0) {
    const auto back = static_cast<uint64_t>(-dt);
    return back > s.t0 ? 0 : s.t0 - back;
  }
  return s.t0 + static_cast<uint64_t>(dt);
}

ViewState initial_state(const ViewModel& m) {
  ViewState s;
  s.flow = m.busiest_flow();
  s.t0 = m.first_ns();
  s.t1 = std::max(m.last_ns(), m.first_ns() + 1);
  if (s.flow != kNone) {
    const Flow& f = m.flows()[s.flow];
    s.t0 = std::min(s.t0, f.first_ns);
    for (const ExtMark& e : f.ext) s.t1 = std::max(s.t1, e.ts_ns);
  }
  // A little air on both sides so the first and last marks are not on the border.
  const uint64_t pad = std::max<uint64_t>(1, (s.t1 - s.t0) / 100);
  s.t0 = s.t0 > pad ? s.t0 - pad : 0;
  s.t1 += pad;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Timeline
// ---------------------------------------------------------------------------------------------
void paint_timeline(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area0,
                    TimelineLayout* out) {
  TimelineLayout L;
  p.save();
  p.fillRect(area0, Qt::white);
  QRect area = draw_caption(p, s, area0);
  if (s.flow >= m.flows().size() || s.t1 <= s.t0) {
    draw_no_flow(p, area, m);
    p.restore();
    if (out) *out = L;
    return;
  }
  const Flow& flow = m.flows()[s.flow];
  const auto& frames = m.frames();
  // Legend: glyphs with the flow's totals, then the EV state colours; it wraps onto as many
  // lines as the width needs, so no entry is cut off.
  struct LegendItem {
    bool state = false;
    MarkKind kind = MarkKind::kOther;
    EvState ev = EvState::kUnknown;
    QString text;
    double width = 0;
  };
  std::vector<LegendItem> legend;
  set_font_px(p, 10);
  {
    const QFontMetrics fm(p.font());
    for (size_t k = 0; k < kMarkKindCount; ++k) {
      const auto kind = static_cast<MarkKind>(k);
      if ((kind == MarkKind::kOther || kind == MarkKind::kAck || kind == MarkKind::kEndpointOp) &&
          flow.counts[k] == 0)
        continue;
      QString t = QStringLiteral("%1 (%2)")
                      .arg(QString::fromUtf8(mark_kind_label(kind).data(),
                                             static_cast<int>(mark_kind_label(kind).size())))
                      .arg(flow.counts[k]);
      if (kind == MarkKind::kNack)
        t += QStringLiteral(" T/L/R/U: trimmed, last hop, resource, unexpected");
      if (kind == MarkKind::kEndpointOp) t += QStringLiteral(": open = request, filled = response");
      legend.push_back({false, kind, EvState::kUnknown, t, 18.0 + fm.horizontalAdvance(t)});
    }
    for (EvState st : {EvState::kSkip, EvState::kAssumedBad, EvState::kDenied}) {
      const QString t =
          QString::fromUtf8(ev_state_label(st).data(), static_cast<int>(ev_state_label(st).size()));
      legend.push_back({true, MarkKind::kOther, st, t, 24.0 + fm.horizontalAdvance(t)});
    }
  }
  const double legend_w = std::max(100, area.width() - 8);
  int legend_lines = 1;
  {
    double w = 0;
    for (const LegendItem& it : legend) {
      if (w > 0 && w + it.width > legend_w) {
        ++legend_lines;
        w = 0;
      }
      w += it.width;
    }
  }
  const int legend_h = std::max(kLegendHeight, legend_lines * 14 + 6);
  // Lane labels name the path when the run has a path table: a wider label column.
  const int label_w = m.paths().empty() ? kLabelWidth : kLabelWidth + 110;
  L.plot = QRect(area.left() + label_w, area.top() + kRulerHeight,
                 std::max(10, area.width() - label_w - 10),
                 std::max(10, area.height() - kRulerHeight - legend_h - 6));
  L.legend = QRect(area.left() + 4, L.plot.bottom() + 4, area.width() - 8, legend_h);

  // Visible lanes, grouped by plane (lanes are sorted by plane already).
  std::vector<uint32_t> lanes;
  for (uint32_t i = 0; i < flow.lanes.size(); ++i)
    if (s.filter.lane_visible(flow.lanes[i])) lanes.push_back(i);
  int headers = 0;
  for (size_t k = 0; k < lanes.size(); ++k) {
    const Lane& l = flow.lanes[lanes[k]];
    if (k == 0 || l.plane != flow.lanes[lanes[k - 1]].plane || l.control) ++headers;
  }
  const int header_h = 15;
  const int avail = L.plot.height() - headers * header_h;
  const int row_h = lanes.empty() ? 0 : std::clamp(avail / static_cast<int>(lanes.size()), 3, 30);
  int y = L.plot.top();
  for (size_t k = 0; k < lanes.size(); ++k) {
    const Lane& l = flow.lanes[lanes[k]];
    if (k == 0 || l.plane != flow.lanes[lanes[k - 1]].plane || l.control) {
      L.plane_headers.push_back({l.control ? uint8_t{255} : l.plane, y});
      y += header_h;
    }
    L.rows.push_back({lanes[k], y, row_h, lane_label(m, s.flow, lanes[k]), lane_idle(l)});
    y += row_h;
  }

  draw_time_axis(p, m, s, QRect(L.plot.left(), L.plot.top(), L.plot.width(), y - L.plot.top()),
                 QRect(L.plot.left(), area.top(), L.plot.width(), kRulerHeight), true);

  // Plane headers.
  for (const auto& h : L.plane_headers) {
    const QColor c = h.plane == 255 ? QColor(Qt::darkGray) : plane_color(h.plane);
    QColor bg = c;
    bg.setAlpha(28);
    p.fillRect(QRect(area.left(), h.y, L.plot.right() - area.left(), header_h), bg);
    set_font_px(p, 11, true);
    p.setPen(c.darker(130));
    uint32_t n = 0;
    for (const auto& r : L.rows)
      if (!flow.lanes[r.lane].control && !flow.lanes[r.lane].endpoint &&
          flow.lanes[r.lane].plane == h.plane)
        ++n;
    const QString t = h.plane == 255 ? QStringLiteral("Reverse path")
                      : h.plane == 0 ? QStringLiteral("Plane ? (%1 EVs)").arg(n)
                                     : QStringLiteral("Plane %1 (%2 EVs)").arg(h.plane).arg(n);
    p.drawText(QRect(area.left() + 4, h.y, label_w + 200, header_h), Qt::AlignVCenter, t);
  }

  const double x_lo = L.plot.left() - 6, x_hi = L.plot.right() + 6;
  for (size_t r = 0; r < L.rows.size(); ++r) {
    const auto& row = L.rows[r];
    const Lane& lane = flow.lanes[row.lane];
    // Background: zebra, then EV states; an idle EV (no data ever) is hatched, so a backup path
    // does not look like a healthy active one.
    if (r % 2)
      p.fillRect(QRect(L.plot.left(), row.y, L.plot.width(), row.h), QColor(0xf6, 0xf6, 0xf6));
    if (row.idle)
      p.fillRect(QRect(L.plot.left(), row.y, L.plot.width(), row.h),
                 QBrush(kIdleHatch, Qt::BDiagPattern));
    if (row.lane == s.highlight_lane) {
      QColor c = lane_color(flow, row.lane);
      c.setAlpha(45);
      p.fillRect(QRect(area.left(), row.y, L.plot.right() - area.left(), row.h), c);
      p.fillRect(QRect(area.left() + 2, row.y, 6, row.h), lane_color(flow, row.lane));
    }
    for (const EvSpan& sp : lane.states) {
      if (sp.until_ns < s.t0 || sp.from_ns > s.t1) continue;
      const QColor c = ev_state_color(sp.state);
      if (c.alpha() == 0) continue;
      const double a = std::max(x_lo, x_of(s, L.plot, sp.from_ns));
      const double b =
          std::min(x_hi, sp.until_ns == UINT64_MAX ? x_hi : x_of(s, L.plot, sp.until_ns));
      if (b > a) p.fillRect(QRectF(a, row.y + 0.5, b - a, row.h - 1), c);
    }
    // Label.
    if (row.h >= 6) {
      const int font_px = std::min(11, row.h - 1);
      set_font_px(p, font_px);
      p.setPen(lane.control ? QColor(Qt::darkGray)
               : row.idle   ? QColor(0x99, 0x99, 0x99)
                            : plane_color(lane.plane).darker(120));
      const QRect box(area.left() + 12, row.y, label_w - 14, row.h);
      if (row.h >= 2 * font_px + 4) {
        p.drawText(box, Qt::AlignVCenter | Qt::AlignLeft | Qt::TextWordWrap, row.label);
      } else {
        p.drawText(box, Qt::AlignVCenter | Qt::AlignLeft,
                   QFontMetrics(p.font()).elidedText(row.label, Qt::ElideRight, box.width()));
      }
    }
    p.setClipRect(QRectF(x_lo, row.y, x_hi - x_lo, row.h));
    // Frames: one glyph per kind per pixel column.
    std::array<int, kMarkKindCount> last_x;
    last_x.fill(INT32_MIN);
    for (size_t q = m.lower_bound(lane.frames, s.t0); q < lane.frames.size(); ++q) {
      const FrameInfo& f = frames[lane.frames[q]];
      if (f.ts_ns > s.t1) break;
      if (!s.filter.frame_visible(f)) continue;
      // Pixel centres keep 1 px marks crisp under antialiasing.
      const double x = std::floor(x_of(s, L.plot, f.ts_ns)) + 0.5;
      const int xi = static_cast<int>(x);
      int& lx = last_x[static_cast<size_t>(f.kind)];
      if (xi == lx) continue;
      lx = xi;
      const uint16_t variant =
          f.kind == MarkKind::kEndpointOp ? kFlagEndpointResponse : kFlagTrimmedLastHop;
      draw_glyph(p, f.kind, x, row.y, row.h, (f.flags & variant) != 0,
                 f.kind == MarkKind::kNack ? f.code : -1);
    }
    // Log marks.
    for (uint32_t e : lane.ext) {
      const ExtMark& em = flow.ext[e];
      if (em.ts_ns < s.t0 || em.ts_ns > s.t1 || !s.filter.ext_visible(em, lane)) continue;
      const double x = std::floor(x_of(s, L.plot, em.ts_ns)) + 0.5;
      const int xi = static_cast<int>(x);
      int& lx = last_x[static_cast<size_t>(em.kind)];
      if (xi == lx) continue;
      lx = xi;
      draw_glyph(p, em.kind, x, row.y, row.h);
    }
    p.setClipping(false);
  }

  // QP state changes across all lanes; labels only where they do not run into each other.
  double label_end = -1e9;
  for (const auto& [t, text] : flow.qp_events) {
    if (t < s.t0 || t > s.t1) continue;
    const double x = x_of(s, L.plot, t);
    p.setPen(QPen(Qt::black, 1, Qt::DotLine));
    p.drawLine(QPointF(x, L.plot.top()), QPointF(x, y));
    set_font_px(p, 9);
    const QString label = QString::fromStdString("QP " + text);
    if (x > label_end) {
      p.drawText(QPointF(x + 2, L.plot.top() - 2), label);
      label_end = x + 4 + QFontMetrics(p.font()).horizontalAdvance(label);
    }
  }

  // Violation evidence and the selected frame.
  const auto row_of = [&](uint32_t lane) -> const TimelineLayout::Row* {
    for (const auto& r : L.rows)
      if (r.lane == lane) return &r;
    return nullptr;
  };
  draw_focus(p, s, QRect(L.plot.left(), L.plot.top(), L.plot.width(), y - L.plot.top()));
  for (uint32_t lane : s.focus_lanes)
    if (const auto* r = row_of(lane)) {
      p.setPen(QPen(kFocusEdge, 2));
      p.setBrush(Qt::NoBrush);
      p.drawRect(QRectF(area.left() + 2, r->y + 1, L.plot.right() - area.left() - 2, r->h - 2));
    }
  for (uint32_t h : s.highlighted) {
    if (h >= frames.size() || frames[h].flow != s.flow) continue;
    const FrameInfo& f = frames[h];
    if (f.ts_ns < s.t0 || f.ts_ns > s.t1) continue;
    const double x = x_of(s, L.plot, f.ts_ns);
    p.setPen(QPen(kCursor, 1.5));
    p.drawLine(QPointF(x, area.top() + 2), QPointF(x, L.plot.top() - 2));
    if (const auto* r = row_of(f.lane)) p.drawEllipse(QPointF(x, r->y + r->h / 2.0), 5, 5);
  }
  draw_cursor_and_selection(p, m, s,
                            QRect(L.plot.left(), L.plot.top(), L.plot.width(), y - L.plot.top()));
  if (s.selected_frame < frames.size() && frames[s.selected_frame].flow == s.flow) {
    const FrameInfo& f = frames[s.selected_frame];
    if (const auto* r = row_of(f.lane); r && f.ts_ns >= s.t0 && f.ts_ns <= s.t1) {
      p.setPen(QPen(kCursor, 2));
      p.drawEllipse(QPointF(x_of(s, L.plot, f.ts_ns), r->y + r->h / 2.0), 7, 7);
    }
  }

  // Legend (laid out above).
  set_font_px(p, 10);
  double lx = L.legend.left();
  double ly = L.legend.top();
  const double lh = 14;
  for (const LegendItem& it : legend) {
    if (lx > L.legend.left() && lx + it.width > L.legend.left() + legend_w) {
      lx = L.legend.left();
      ly += lh;
    }
    if (it.state) {
      p.fillRect(QRectF(lx, ly + 1, 14, 11), ev_state_color(it.ev));
      p.setPen(kAxisText);
      p.drawText(QPointF(lx + 17, ly + 11), it.text);
    } else {
      draw_glyph(p, it.kind, lx + 5, ly, lh);
      p.setPen(kAxisText);
      p.drawText(QPointF(lx + 12, ly + 11), it.text);
    }
    lx += it.width;
  }
  p.restore();
  if (out) *out = std::move(L);
}

uint32_t hit_timeline(const ViewModel& m, const ViewState& s, const TimelineLayout& L, QPoint pt,
                      int tol) {
  if (s.flow >= m.flows().size() || !L.plot.contains(pt.x(), L.plot.top())) return kNone;
  const Flow& flow = m.flows()[s.flow];
  for (const auto& row : L.rows) {
    if (pt.y() < row.y || pt.y() >= row.y + row.h) continue;
    const Lane& lane = flow.lanes[row.lane];
    const uint64_t lo = t_of(s, L.plot, pt.x() - tol), hi = t_of(s, L.plot, pt.x() + tol);
    uint32_t best = kNone;
    double best_d = tol + 1;
    for (size_t q = m.lower_bound(lane.frames, lo); q < lane.frames.size(); ++q) {
      const FrameInfo& f = m.frames()[lane.frames[q]];
      if (f.ts_ns > hi) break;
      if (!s.filter.frame_visible(f)) continue;
      const double d = std::abs(x_of(s, L.plot, f.ts_ns) - pt.x());
      if (d < best_d) {
        best_d = d;
        best = lane.frames[q];
      }
    }
    // Log marks that point at a frame (a drop matched to the send it dropped).
    for (uint32_t e : lane.ext) {
      const ExtMark& em = flow.ext[e];
      if (em.frame == kNone || em.ts_ns < lo || em.ts_ns > hi) continue;
      const double d = std::abs(x_of(s, L.plot, em.ts_ns) - pt.x());
      if (d < best_d) {
        best_d = d;
        best = em.frame;
      }
    }
    return best;
  }
  return kNone;
}

// ---------------------------------------------------------------------------------------------
// Sequence plot
// ---------------------------------------------------------------------------------------------
void paint_sequence(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area0,
                    PlotLayout* out) {
  PlotLayout L;
  p.save();
  p.fillRect(area0, Qt::white);
  QRect area = draw_caption(p, s, area0);
  if (s.flow >= m.flows().size() || s.t1 <= s.t0) {
    draw_no_flow(p, area, m);
    p.restore();
    if (out) *out = L;
    return;
  }
  const Flow& flow = m.flows()[s.flow];
  const auto& frames = m.frames();
  const int legend_h = 18;
  L.plot = QRect(area.left() + kAxisWidth, area.top() + legend_h + 4,
                 std::max(10, area.width() - kAxisWidth - 10),
                 std::max(10, area.height() - legend_h - 4 - kRulerHeight));

  const auto lane_ok = [&](uint32_t lane) {
    return lane == kNone || s.filter.lane_visible(flow.lanes[lane]);
  };
  // PSN range of what is visible.
  double lo = INFINITY, hi = -INFINITY;
  const size_t first = m.lower_bound(flow.frames, s.t0);
  for (size_t q = first; q < flow.frames.size(); ++q) {
    const FrameInfo& f = frames[flow.frames[q]];
    if (f.ts_ns > s.t1) break;
    // Endpoint operations have no PSN of this QP.
    if (f.kind == MarkKind::kProbe || f.kind == MarkKind::kAck || f.kind == MarkKind::kEndpointOp ||
        !lane_ok(f.lane) || !s.filter.frame_visible(f))
      continue;
    lo = std::min(lo, static_cast<double>(f.rel_psn));
    hi = std::max(hi, static_cast<double>(f.rel_psn));
  }
  for (const ExtMark& e : flow.ext) {
    if (!e.has_psn || e.ts_ns < s.t0 || e.ts_ns > s.t1) continue;
    lo = std::min(lo, static_cast<double>(e.rel_psn));
    hi = std::max(hi, static_cast<double>(e.rel_psn));
  }
  if (!(lo <= hi)) {
    lo = flow.min_rel_psn;
    hi = flow.max_rel_psn;
  }
  const double pad = std::max(2.0, (hi - lo) * 0.04);
  L.y0 = lo - pad;
  L.y1 = hi + pad;

  draw_time_axis(p, m, s, L.plot,
                 QRect(L.plot.left(), L.plot.bottom() + 2, L.plot.width(), kRulerHeight), true);
  draw_value_axis(p, L, QStringLiteral("PSN - 0x%1").arg(flow.first_psn, 6, 16, QChar('0')),
                  nullptr, 0);
  p.setPen(QColor(0xbb, 0xbb, 0xbb));
  p.drawRect(L.plot);
  p.setClipRect(L.plot);

  // SACK coverage (bitmap runs) and the cumulative ACK line, under the data. The cumulative ACK
  // is the connection's, from the SACKs of every EV, whatever the filters: one EV's SACKs alone
  // would draw a stall that did not happen. The coverage bars follow the filters.
  const bool show_cover = (s.filter.kinds & kind_bit(MarkKind::kSack)) != 0;
  {
    const auto& sacks = flow.sacks;
    const auto it =
        std::lower_bound(sacks.begin(), sacks.end(), s.t0,
                         [&](const SackInfo& a, uint64_t t) { return frames[a.frame].ts_ns < t; });
    QPolygonF cack;
    int last_col = INT32_MIN;
    int cover_col = INT32_MIN;
    QColor cover = kind_color(MarkKind::kSack);
    cover.setAlpha(110);
    p.setPen(QPen(cover, 2));
    for (auto sk = it; sk != sacks.end(); ++sk) {
      const FrameInfo& f = frames[sk->frame];
      if (f.ts_ns > s.t1) break;
      const double x = x_of(s, L.plot, f.ts_ns);
      const int col = static_cast<int>(x);
      const double yc = y_of(L, sk->rel_cack);
      if (col != last_col) {
        if (!cack.isEmpty()) cack << QPointF(x, cack.back().y());
        cack << QPointF(x, yc);
        last_col = col;
      } else if (!cack.isEmpty()) {
        cack.back().setY(std::min(cack.back().y(), yc));
      }
      if (show_cover && lane_ok(f.lane) && sk->bitmap != 0 && col != cover_col) {
        cover_col = col;
        int i = 0;
        while (i < 64) {
          if (((sk->bitmap >> i) & 1u) == 0) {
            ++i;
            continue;
          }
          int j = i;
          while (j + 1 < 64 && ((sk->bitmap >> (j + 1)) & 1u)) ++j;
          const double ya = y_of(L, sk->rel_base + i - 0.4), yb = y_of(L, sk->rel_base + j + 0.4);
          p.fillRect(QRectF(x - 1, yb, 2, ya - yb), cover);
          i = j + 1;
        }
      }
    }
    if (!cack.isEmpty()) {
      cack << QPointF(x_of(s, L.plot, std::min(s.t1, flow.last_ns)), cack.back().y());
      p.setPen(cosmetic(QColor(0x20, 0x20, 0x20)));
      p.drawPolyline(cack);
    }
  }

  // Data, retransmissions, trims, NACKs. First transmissions: per plane, one vertical span per
  // pixel column; the rest one glyph per pixel.
  struct Column {
    int x = INT32_MIN;
    double ymin = 0, ymax = 0;
  };
  std::array<Column, 9> col{};  // plane 0..8
  const auto flush = [&](uint8_t plane) {
    Column& c = col[std::min<uint8_t>(plane, 8)];
    if (c.x == INT32_MIN) return;
    p.fillRect(QRectF(c.x, c.ymin - 1, 2, std::max(2.0, c.ymax - c.ymin + 2)), plane_color(plane));
    c.x = INT32_MIN;
  };
  QPoint last_rtx(INT32_MIN, 0), last_trim(INT32_MIN, 0), last_nack(INT32_MIN, 0);
  for (size_t q = first; q < flow.frames.size(); ++q) {
    const FrameInfo& f = frames[flow.frames[q]];
    if (f.ts_ns > s.t1) break;
    if (!lane_ok(f.lane) || !s.filter.frame_visible(f)) continue;
    if (f.kind != MarkKind::kFirstTx && f.kind != MarkKind::kRetransmit &&
        f.kind != MarkKind::kTrimmed && f.kind != MarkKind::kNack)
      continue;
    const double x = x_of(s, L.plot, f.ts_ns);
    const double y = y_of(L, f.rel_psn);
    const QPoint pix(static_cast<int>(x), static_cast<int>(y));
    switch (f.kind) {
      case MarkKind::kFirstTx: {
        Column& c = col[std::min<uint8_t>(f.plane, 8)];
        if (c.x != pix.x()) {
          flush(f.plane);
          c.x = pix.x();
          c.ymin = c.ymax = y;
        } else {
          c.ymin = std::min(c.ymin, y);
          c.ymax = std::max(c.ymax, y);
        }
        break;
      }
      case MarkKind::kRetransmit:
        if (pix == last_rtx) break;
        last_rtx = pix;
        p.setPen(QPen(plane_color(f.plane).darker(150), 1.5));
        p.drawEllipse(QPointF(x, y), 3.5, 3.5);
        break;
      case MarkKind::kTrimmed:
        if (pix == last_trim) break;
        last_trim = pix;
        draw_glyph(p, MarkKind::kTrimmed, x, y - 6, 14, (f.flags & kFlagTrimmedLastHop) != 0);
        break;
      case MarkKind::kNack: {
        if (pix == last_nack) break;
        last_nack = pix;
        p.setPen(Qt::NoPen);
        p.setBrush(kind_color(MarkKind::kNack));
        QPolygonF t;
        t << QPointF(x - 4, y - 7) << QPointF(x + 4, y - 7) << QPointF(x, y - 1);
        p.drawPolygon(t);
        p.setBrush(Qt::NoBrush);
        break;
      }
      default:
        break;
    }
  }
  for (uint8_t pl = 0; pl < col.size(); ++pl) flush(pl);
  // Drops and trims from the decision log.
  for (const ExtMark& e : flow.ext) {
    if (!e.has_psn || e.ts_ns < s.t0 || e.ts_ns > s.t1) continue;
    if (e.lane != kNone && !s.filter.ext_visible(e, flow.lanes[e.lane])) continue;
    const double x = x_of(s, L.plot, e.ts_ns);
    draw_glyph(p, e.kind, x, y_of(L, e.rel_psn) - 8, 18);
  }
  // The highlighted EV: its data ringed in its lane colour, one ring per pixel.
  if (s.highlight_lane < flow.lanes.size()) {
    const Lane& hl = flow.lanes[s.highlight_lane];
    p.setPen(QPen(lane_color(flow, s.highlight_lane).darker(130), 1.5));
    p.setBrush(Qt::NoBrush);
    QPoint last(INT32_MIN, 0);
    for (size_t q = m.lower_bound(hl.frames, s.t0); q < hl.frames.size(); ++q) {
      const FrameInfo& f = frames[hl.frames[q]];
      if (f.ts_ns > s.t1) break;
      if (f.kind != MarkKind::kFirstTx && f.kind != MarkKind::kRetransmit &&
          f.kind != MarkKind::kTrimmed)
        continue;
      const QPointF c(x_of(s, L.plot, f.ts_ns), y_of(L, f.rel_psn));
      const QPoint pix = c.toPoint();
      if (std::abs(pix.x() - last.x()) < 2 && std::abs(pix.y() - last.y()) < 2) continue;
      last = pix;
      p.drawEllipse(c, 3, 3);
    }
  }
  draw_focus(p, s, L.plot);
  for (uint32_t h : s.highlighted) {
    if (h >= frames.size() || frames[h].flow != s.flow) continue;
    const FrameInfo& f = frames[h];
    if (f.ts_ns < s.t0 || f.ts_ns > s.t1 || f.kind == MarkKind::kEndpointOp) continue;
    p.setPen(QPen(kCursor, 1.5));
    p.drawEllipse(QPointF(x_of(s, L.plot, f.ts_ns), y_of(L, f.rel_psn)), 6, 6);
  }
  draw_cursor_and_selection(p, m, s, L.plot);
  if (s.selected_frame < frames.size() && frames[s.selected_frame].flow == s.flow) {
    const FrameInfo& f = frames[s.selected_frame];
    if (f.ts_ns >= s.t0 && f.ts_ns <= s.t1 && f.kind != MarkKind::kProbe &&
        f.kind != MarkKind::kAck) {
      p.setPen(QPen(kCursor, 2));
      p.drawEllipse(QPointF(x_of(s, L.plot, f.ts_ns), y_of(L, f.rel_psn)), 8, 8);
    }
  }
  p.setClipping(false);

  // Legend.
  set_font_px(p, 10);
  const QFontMetrics fm(p.font());
  double lx = L.plot.left();
  const double ly = area.top() + 3;
  const auto text = [&](const QString& t) {
    p.setPen(kAxisText);
    p.drawText(QPointF(lx + 14, ly + 11), t);
    lx += 24 + fm.horizontalAdvance(t);
  };
  for (uint8_t pl : flow.planes) {
    p.setPen(QPen(plane_color(pl), 2));
    p.drawLine(QPointF(lx + 5, ly + 2), QPointF(lx + 5, ly + 12));
    text(QStringLiteral("plane %1 data").arg(pl));
  }
  p.setPen(QPen(QColor(0x60, 0x60, 0x60), 1.5));
  p.drawEllipse(QPointF(lx + 5, ly + 7), 3.5, 3.5);
  text(QStringLiteral("retransmission"));
  draw_glyph(p, MarkKind::kTrimmed, lx + 5, ly, 14);
  text(QStringLiteral("trimmed"));
  draw_glyph(p, MarkKind::kInjectorDrop, lx + 5, ly, 14);
  text(QStringLiteral("dropped by injector"));
  draw_glyph(p, MarkKind::kNack, lx + 5, ly, 14);
  text(QStringLiteral("NACK"));
  QColor cover = kind_color(MarkKind::kSack);
  cover.setAlpha(110);
  p.setPen(QPen(cover, 2));
  p.drawLine(QPointF(lx + 5, ly + 2), QPointF(lx + 5, ly + 12));
  text(QStringLiteral("SACK bitmap coverage"));
  p.setPen(QPen(QColor(0x20, 0x20, 0x20), 1.3));
  p.drawLine(QPointF(lx, ly + 7), QPointF(lx + 10, ly + 7));
  text(QStringLiteral("cumulative ACK"));
  p.restore();
  if (out) *out = L;
}

uint32_t hit_sequence(const ViewModel& m, const ViewState& s, const PlotLayout& L, QPoint pt,
                      int tol) {
  if (s.flow >= m.flows().size() || !L.plot.contains(pt)) return kNone;
  const Flow& flow = m.flows()[s.flow];
  const uint64_t lo = t_of(s, L.plot, pt.x() - tol), hi = t_of(s, L.plot, pt.x() + tol);
  uint32_t best = kNone;
  double best_d = tol * tol * 2 + 1;
  size_t steps = 0;
  for (size_t q = m.lower_bound(flow.frames, lo); q < flow.frames.size() && steps < 200'000;
       ++q, ++steps) {
    const FrameInfo& f = m.frames()[flow.frames[q]];
    if (f.ts_ns > hi) break;
    if (f.kind == MarkKind::kProbe || f.kind == MarkKind::kAck) continue;
    if (f.lane != kNone && !s.filter.lane_visible(flow.lanes[f.lane])) continue;
    if (!s.filter.frame_visible(f)) continue;
    const double dx = x_of(s, L.plot, f.ts_ns) - pt.x();
    const double dy = y_of(L, f.rel_psn) - pt.y();
    const double d = dx * dx + dy * dy;
    if (d < best_d) {
      best_d = d;
      best = flow.frames[q];
    }
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// Series
// ---------------------------------------------------------------------------------------------
namespace {
double to_gbps(double v) {
  return v / 1e9;
}
double to_us(double v) {
  return v / 1e3;
}
double to_kb(double v) {
  return v / 1e3;
}

// The title sits in its own strip above the plot, never on the data.
void panel_title(QPainter& p, const PlotLayout& L, const QString& t) {
  set_font_px(p, 11, true);
  p.setPen(QColor(0x30, 0x30, 0x30));
  p.drawText(L.title, Qt::AlignLeft | Qt::AlignVCenter,
             QFontMetrics(p.font()).elidedText(t, Qt::ElideRight, L.title.width()));
}
}  // namespace

void paint_series(QPainter& p, const ViewModel& m, const ViewState& s, const QRect& area0,
                  SeriesLayout* out) {
  SeriesLayout SL;
  p.save();
  p.fillRect(area0, Qt::white);
  QRect area = draw_caption(p, s, area0);
  if (s.flow >= m.flows().size() || s.t1 <= s.t0) {
    draw_no_flow(p, area, m);
    p.restore();
    if (out) *out = SL;
    return;
  }
  const Flow& flow = m.flows()[s.flow];
  // Each panel: a title strip, then the plot. The strip also keeps the value labels of
  // neighbouring panels apart (a label reaches 7 px beyond its plot).
  const int title_h = 16;
  const int legend_h = 16;
  const int x0 = area.left() + kAxisWidth;
  const int w = std::max(10, area.width() - kAxisWidth - 10);
  const int total_h = std::max(30, area.height() - kRulerHeight - legend_h - 3 * title_h);
  const int h_good = total_h * 4 / 10, h_rtt = total_h * 3 / 10, h_win = total_h - h_good - h_rtt;
  int top = area.top() + legend_h;
  for (PlotLayout* pl : {&SL.goodput, &SL.rtt, &SL.window}) {
    const int h = pl == &SL.goodput ? h_good : pl == &SL.rtt ? h_rtt : h_win;
    pl->title = QRect(x0 + 2, top, w - 4, title_h);
    pl->plot = QRect(x0, top + title_h, w, h);
    top += title_h + h;
  }

  std::vector<uint32_t> lanes;
  for (uint32_t i = 0; i < flow.lanes.size(); ++i)
    if (!flow.lanes[i].control && !flow.lanes[i].endpoint && s.filter.lane_visible(flow.lanes[i]))
      lanes.push_back(i);  // endpoint lanes carry no goodput and no RTT

  // --- goodput: moving average over `window`, sampled every 2 px.
  const uint64_t span = s.t1 - s.t0;
  const uint64_t window =
      s.goodput_window_ns ? s.goodput_window_ns : std::max<uint64_t>(1000, span / 40);
  const int cols = std::max(2, w / 2);
  std::vector<std::vector<double>> per_lane(lanes.size(), std::vector<double>(cols));
  std::vector<double> total(cols);
  double gmax = 0;
  const auto data_lanes =
      static_cast<size_t>(std::count_if(flow.lanes.begin(), flow.lanes.end(),
                                        [](const Lane& l) { return !l.control && !l.endpoint; }));
  for (int c = 0; c < cols; ++c) {
    const uint64_t t = t_of(s, SL.goodput.plot, x0 + c * 2.0);
    double sum = 0;
    for (size_t k = 0; k < lanes.size(); ++k) {
      per_lane[k][c] = m.goodput_bps(flow, lanes[k], t, window);
      sum += per_lane[k][c];
    }
    // The total follows the filter: with every lane shown it is the flow's goodput.
    total[c] = lanes.size() == data_lanes ? m.goodput_bps(flow, kNone, t, window) : sum;
    gmax = std::max(gmax, total[c]);
  }
  SL.goodput.y0 = 0;
  SL.goodput.y1 = gmax > 0 ? gmax * 1.1 : 1e9;
  draw_time_axis(p, m, s, SL.goodput.plot, QRect(), false);
  draw_value_axis(p, SL.goodput, QStringLiteral("Gb/s"), to_gbps, gmax * 1.1 < 2e9 ? 2 : 1);
  p.setClipRect(SL.goodput.plot);
  for (size_t k = 0; k < lanes.size(); ++k) {
    QPolygonF line;
    for (int c = 0; c < cols; ++c) line << QPointF(x0 + c * 2.0, y_of(SL.goodput, per_lane[k][c]));
    p.setPen(cosmetic(lane_color(flow, lanes[k])));
    p.drawPolyline(line);
  }
  for (size_t k = 0; k < lanes.size(); ++k) {
    if (lanes[k] != s.highlight_lane) continue;  // drawn again on top, thick
    QPolygonF line;
    for (int c = 0; c < cols; ++c) line << QPointF(x0 + c * 2.0, y_of(SL.goodput, per_lane[k][c]));
    p.setPen(QPen(lane_color(flow, lanes[k]), 3));
    p.drawPolyline(line);
  }
  QPolygonF tline;
  for (int c = 0; c < cols; ++c) tline << QPointF(x0 + c * 2.0, y_of(SL.goodput, total[c]));
  p.setPen(QPen(Qt::black, 2));
  p.drawPolyline(tline);
  draw_focus(p, s, SL.goodput.plot);
  draw_cursor_and_selection(p, m, s, SL.goodput.plot);
  p.setClipping(false);
  p.setPen(QColor(0xbb, 0xbb, 0xbb));
  p.drawRect(SL.goodput.plot);
  panel_title(p, SL.goodput,
              QStringLiteral("goodput per EV and total (moving average over %1)")
                  .arg(QString::fromStdString(format_time_ns(window))));

  // Lane legend above the goodput panel.
  {
    set_font_px(p, 9);
    const QFontMetrics fm(p.font());
    double lx = x0;
    const double ly = area.top() + 1;
    p.setPen(QPen(Qt::black, 2));
    p.drawLine(QPointF(lx, ly + 7), QPointF(lx + 10, ly + 7));
    p.setPen(kAxisText);
    p.drawText(QPointF(lx + 13, ly + 11), QStringLiteral("total"));
    lx += 22 + fm.horizontalAdvance(QStringLiteral("total"));
    for (uint32_t l : lanes) {
      const QString t = QString::fromStdString(format_wev(flow.lanes[l].wev));
      if (lx + fm.horizontalAdvance(t) + 20 > x0 + w) break;
      p.setPen(QPen(lane_color(flow, l), 2));
      p.drawLine(QPointF(lx, ly + 7), QPointF(lx + 10, ly + 7));
      p.setPen(kAxisText);
      p.drawText(QPointF(lx + 13, ly + 11), t);
      lx += 20 + fm.horizontalAdvance(t);
    }
  }

  // --- RTT samples.
  double rmax = 0;
  for (uint32_t l : lanes) {
    const auto& rtt = flow.lanes[l].rtt;
    auto it = std::lower_bound(rtt.begin(), rtt.end(), s.t0,
                               [](const RttSample& r, uint64_t t) { return r.ts_ns < t; });
    for (; it != rtt.end() && it->ts_ns <= s.t1; ++it)
      rmax = std::max(rmax, static_cast<double>(it->rtt_ns));
  }
  SL.rtt.y0 = 0;
  SL.rtt.y1 = rmax > 0 ? rmax * 1.1 : 1000;
  draw_time_axis(p, m, s, SL.rtt.plot, QRect(), false);
  draw_value_axis(p, SL.rtt, QStringLiteral("RTT us"), to_us, SL.rtt.y1 < 10'000 ? 1 : 0);
  p.setClipRect(SL.rtt.plot);
  for (uint32_t l : lanes) {
    const auto& rtt = flow.lanes[l].rtt;
    auto it = std::lower_bound(rtt.begin(), rtt.end(), s.t0,
                               [](const RttSample& r, uint64_t t) { return r.ts_ns < t; });
    const bool hl = l == s.highlight_lane;
    p.setPen(hl ? QPen(Qt::black, 1) : QPen(Qt::NoPen));
    p.setBrush(lane_color(flow, l));
    const double r = hl ? 3.5 : 2.2;
    QPoint last(INT32_MIN, 0);
    for (; it != rtt.end() && it->ts_ns <= s.t1; ++it) {
      const QPointF pt(x_of(s, SL.rtt.plot, it->ts_ns),
                       y_of(SL.rtt, static_cast<double>(it->rtt_ns)));
      const QPoint pix = pt.toPoint();
      if (pix == last) continue;
      last = pix;
      p.drawEllipse(pt, r, r);
    }
  }
  p.setBrush(Qt::NoBrush);
  draw_focus(p, s, SL.rtt.plot);
  draw_cursor_and_selection(p, m, s, SL.rtt.plot);
  p.setClipping(false);
  p.setPen(QColor(0xbb, 0xbb, 0xbb));
  p.drawRect(SL.rtt.plot);
  panel_title(p, SL.rtt,
              rmax > 0 ? QStringLiteral("RTT samples per EV, at the capture point")
                       : QStringLiteral("RTT samples per EV: none in view"));

  // --- cwnd and bytes in flight (event log).
  const auto step_max = [&](const std::vector<SeriesPoint>& v) {
    double mx = 0;
    for (const SeriesPoint& sp : v)
      if (sp.ts_ns <= s.t1) mx = std::max(mx, sp.value);
    return mx;
  };
  const double wmax = std::max(step_max(flow.cwnd), step_max(flow.bytes_in_flight));
  SL.window.y0 = 0;
  SL.window.y1 = wmax > 0 ? wmax * 1.1 : 1e5;
  draw_time_axis(p, m, s, SL.window.plot,
                 QRect(SL.window.plot.left(), SL.window.plot.bottom() + 2, w, kRulerHeight), true);
  draw_value_axis(p, SL.window, QStringLiteral("kB"), to_kb, 0);
  p.setClipRect(SL.window.plot);
  const auto step_line = [&](const std::vector<SeriesPoint>& v, const QColor& c) {
    if (v.empty()) return;
    auto it = std::lower_bound(v.begin(), v.end(), s.t0,
                               [](const SeriesPoint& a, uint64_t t) { return a.ts_ns < t; });
    if (it != v.begin()) --it;
    QPolygonF line;
    int last_col = INT32_MIN;
    for (; it != v.end(); ++it) {
      const double x =
          std::max<double>(SL.window.plot.left() - 2, x_of(s, SL.window.plot, it->ts_ns));
      const double y = y_of(SL.window, it->value);
      const int col = static_cast<int>(x);
      if (!line.isEmpty() && col == last_col) {
        // Keep the column's extremes visible: a vertical stroke covers them.
        line << QPointF(x, y);
        continue;
      }
      if (!line.isEmpty()) line << QPointF(x, line.back().y());
      line << QPointF(x, y);
      last_col = col;
      if (it->ts_ns > s.t1) break;
    }
    // The line ends at the last sample: nothing is known after it.
    p.setPen(cosmetic(c));
    p.drawPolyline(line);
    // A marker on every sample (one per pixel column), so a long flat stretch reads as "no new
    // sample" rather than "constant".
    auto m0 = std::lower_bound(v.begin(), v.end(), s.t0,
                               [](const SeriesPoint& a, uint64_t t) { return a.ts_ns < t; });
    int last_mark = INT32_MIN;
    for (; m0 != v.end() && m0->ts_ns <= s.t1; ++m0) {
      const double x = x_of(s, SL.window.plot, m0->ts_ns);
      if (static_cast<int>(x) == last_mark) continue;
      last_mark = static_cast<int>(x);
      p.fillRect(QRectF(x - 2, y_of(SL.window, m0->value) - 2, 4, 4), c);
    }
  };
  step_line(flow.bytes_in_flight, QColor(0xe0, 0x7b, 0x00));
  step_line(flow.cwnd, QColor(0x1f, 0x4e, 0x9a));
  draw_focus(p, s, SL.window.plot);
  draw_cursor_and_selection(p, m, s, SL.window.plot);
  p.setClipping(false);
  p.setPen(QColor(0xbb, 0xbb, 0xbb));
  p.drawRect(SL.window.plot);
  if (flow.cwnd.empty() && flow.bytes_in_flight.empty()) {
    panel_title(p, SL.window, QStringLiteral("cwnd / bytes in flight: no event log for this QP"));
  } else {
    panel_title(p, SL.window,
                QStringLiteral("cwnd (blue) and bytes in flight (orange), from the event log"));
  }
  p.restore();
  if (out) *out = SL;
}

SeriesHit hit_series(const ViewModel& m, const ViewState& s, const SeriesLayout& SL, QPoint pt) {
  SeriesHit hit;
  if (s.flow >= m.flows().size()) return hit;
  const Flow& flow = m.flows()[s.flow];
  const PlotLayout* panel = nullptr;
  for (const PlotLayout* pl : {&SL.goodput, &SL.rtt, &SL.window})
    if (pl->plot.contains(pt)) panel = pl;
  if (!panel) return hit;
  const uint64_t t = t_of(s, panel->plot, pt.x());
  const QString at = QStringLiteral("+%1").arg(
      QString::fromStdString(format_time_ns(t - std::min(t, m.first_ns()))));
  const auto ev_name = [&](uint32_t lane) {
    return QString::fromStdString(flow.lanes[lane].label());
  };
  const auto near_frame = [&](uint32_t lane, uint64_t ts) {
    const std::vector<uint32_t>& list = lane == kNone ? flow.frames : flow.lanes[lane].frames;
    if (list.empty()) return kNone;
    size_t q = m.lower_bound(list, ts);
    if (q == list.size()) return list.back();
    if (q > 0 && ts - m.frames()[list[q - 1]].ts_ns <= m.frames()[list[q]].ts_ns - ts) --q;
    return list[q];
  };
  std::vector<uint32_t> lanes;
  for (uint32_t i = 0; i < flow.lanes.size(); ++i)
    if (!flow.lanes[i].control && !flow.lanes[i].endpoint && s.filter.lane_visible(flow.lanes[i]))
      lanes.push_back(i);
  if (panel == &SL.rtt) {
    // The nearest sample within 8 px.
    double best = 8 * 8 + 1;
    const RttSample* bs = nullptr;
    const uint64_t lo = t_of(s, panel->plot, pt.x() - 8), hi = t_of(s, panel->plot, pt.x() + 8);
    for (uint32_t l : lanes) {
      const auto& rtt = flow.lanes[l].rtt;
      auto it = std::lower_bound(rtt.begin(), rtt.end(), lo,
                                 [](const RttSample& r, uint64_t v) { return r.ts_ns < v; });
      for (; it != rtt.end() && it->ts_ns <= hi; ++it) {
        const double dx = x_of(s, panel->plot, it->ts_ns) - pt.x();
        const double dy = y_of(*panel, static_cast<double>(it->rtt_ns)) - pt.y();
        if (dx * dx + dy * dy < best) {
          best = dx * dx + dy * dy;
          bs = &*it;
          hit.lane = l;
        }
      }
    }
    if (bs) {
      hit.frame = bs->frame;
      hit.text = QStringLiteral("RTT %1, %2, at +%3 (frame %4)")
                     .arg(QString::fromStdString(format_time_ns(bs->rtt_ns)), ev_name(hit.lane),
                          QString::fromStdString(
                              format_time_ns(bs->ts_ns - std::min(bs->ts_ns, m.first_ns()))))
                     .arg(bs->frame + 1);
    } else {
      hit.text = QStringLiteral("t = %1: no RTT sample here").arg(at);
    }
    return hit;
  }
  if (panel == &SL.goodput) {
    const uint64_t span = s.t1 - s.t0;
    const uint64_t window =
        s.goodput_window_ns ? s.goodput_window_ns : std::max<uint64_t>(1000, span / 40);
    const double total = m.goodput_bps(flow, kNone, t, window);
    // The EV whose line is nearest the pointer.
    double best = 1e18;
    double best_v = 0;
    for (uint32_t l : lanes) {
      const double v = m.goodput_bps(flow, l, t, window);
      const double d = std::abs(y_of(*panel, v) - pt.y());
      if (d < best) {
        best = d;
        best_v = v;
        hit.lane = l;
      }
    }
    const double d_total = std::abs(y_of(*panel, total) - pt.y());
    if (hit.lane == kNone || d_total < best) {
      hit.lane = kNone;
      hit.text = QStringLiteral("goodput %1 (total) at %2")
                     .arg(QString::fromStdString(format_rate(total)), at);
    } else {
      hit.text = QStringLiteral("goodput %1, %2, at %3 (total %4)")
                     .arg(QString::fromStdString(format_rate(best_v)), ev_name(hit.lane), at,
                          QString::fromStdString(format_rate(total)));
    }
    hit.frame = near_frame(hit.lane, t);
    return hit;
  }
  // cwnd / bytes in flight: the last sample at or before t.
  const auto value_at = [&](const std::vector<SeriesPoint>& v) -> std::optional<SeriesPoint> {
    auto it = std::upper_bound(v.begin(), v.end(), t,
                               [](uint64_t x, const SeriesPoint& a) { return x < a.ts_ns; });
    if (it == v.begin()) return std::nullopt;
    return *(it - 1);
  };
  const auto cw = value_at(flow.cwnd), bif = value_at(flow.bytes_in_flight);
  QStringList parts;
  const auto sample_text = [&](const char* name, const SeriesPoint& sp) {
    return QStringLiteral("%1 %2 B (sample at +%3)")
        .arg(QLatin1String(name))
        .arg(static_cast<qulonglong>(sp.value))
        .arg(QString::fromStdString(format_time_ns(sp.ts_ns - std::min(sp.ts_ns, m.first_ns()))));
  };
  if (cw) parts << sample_text("cwnd", *cw);
  if (bif) parts << sample_text("bytes in flight", *bif);
  hit.text = parts.isEmpty() ? QStringLiteral("t = %1: no cwnd sample yet").arg(at)
                             : QStringLiteral("%1: %2").arg(at, parts.join(QStringLiteral(", ")));
  hit.frame = near_frame(kNone, t);
  return hit;
}

void paint_view(ViewKind k, QPainter& p, const ViewModel& m, const ViewState& s,
                const QRect& area) {
  switch (k) {
    case ViewKind::kTimeline:
      paint_timeline(p, m, s, area);
      break;
    case ViewKind::kSequence:
      paint_sequence(p, m, s, area);
      break;
    case ViewKind::kSeries:
      paint_series(p, m, s, area);
      break;
  }
}

bool export_view(const ViewModel& m, const ViewState& s, const std::string& view, QSize size,
                 const QString& path, QString& error) {
  std::vector<std::pair<ViewKind, double>> parts;
  if (view == "timeline")
    parts = {{ViewKind::kTimeline, 1.0}};
  else if (view == "sequence")
    parts = {{ViewKind::kSequence, 1.0}};
  else if (view == "series")
    parts = {{ViewKind::kSeries, 1.0}};
  else if (view == "all")
    parts = {{ViewKind::kTimeline, 0.42}, {ViewKind::kSequence, 0.29}, {ViewKind::kSeries, 0.29}};
  else {
    error = QStringLiteral("unknown view '%1' (timeline, sequence, series, all)")
                .arg(QString::fromStdString(view));
    return false;
  }
  if (size.width() < 200 || size.height() < 150 || size.width() > 20000 || size.height() > 20000) {
    error = QStringLiteral("image size %1x%2 out of range (200x150 .. 20000x20000)")
                .arg(size.width())
                .arg(size.height());
    return false;
  }
  const auto paint_all = [&](QPainter& p) {
    p.setRenderHint(QPainter::Antialiasing, true);
    p.setRenderHint(QPainter::TextAntialiasing, true);
    int y = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int h = i + 1 == parts.size() ? size.height() - y
                                          : static_cast<int>(size.height() * parts[i].second);
      ViewState vs = s;
      if (i > 0) vs.caption.clear();  // one caption, on top
      paint_view(parts[i].first, p, m, vs, QRect(0, y, size.width(), h));
      y += h;
    }
  };
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == "svg") {
    QSvgGenerator gen;
    gen.setFileName(path);
    gen.setSize(size);
    gen.setViewBox(QRect(QPoint(0, 0), size));
    gen.setTitle(s.caption);
    QPainter p;
    if (!p.begin(&gen)) {
      error = QStringLiteral("%1: cannot write SVG").arg(path);
      return false;
    }
    paint_all(p);
    p.end();
    return true;
  }
  QImage img(size, QImage::Format_ARGB32_Premultiplied);
  img.fill(Qt::white);
  {
    QPainter p(&img);
    paint_all(p);
  }
  if (!img.save(path)) {
    error =
        QStringLiteral("%1: cannot write image (unknown extension or unwritable path)").arg(path);
    return false;
  }
  return true;
}

}  // namespace mrc::view
