// The viewer's widgets and export, headless (QT_QPA_PLATFORM=offscreen): what the images show,
// and what clicks, wheel and the violations list do.
#include <QComboBox>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QPlainTextEdit>
#include <QStatusBar>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTextBrowser>
#include <QTreeWidget>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <set>

#include "gui/main_window.h"
#include "gui/test_capture.h"
#include "gui/view_model.h"
#include "gui/view_render.h"
#ifdef MRC_VIEW_HAVE_FIXTURE
#include "gui/fixture.h"
#endif

using namespace mrc::view;
using namespace mrc::view::testing;

namespace {

int color_distance(QRgb a, const QColor& b) {
  return std::abs(qRed(a) - b.red()) + std::abs(qGreen(a) - b.green()) +
         std::abs(qBlue(a) - b.blue());
}

// Pixels in `r` within `tol` of colour `c`.
int count_color(const QImage& img, const QRect& r, const QColor& c, int tol = 40) {
  int n = 0;
  const QRect rr = r.intersected(img.rect());
  for (int y = rr.top(); y <= rr.bottom(); ++y)
    for (int x = rr.left(); x <= rr.right(); ++x)
      if (color_distance(img.pixel(x, y), c) <= tol) ++n;
  return n;
}

int count_dark(const QImage& img, const QRect& r) {
  int n = 0;
  const QRect rr = r.intersected(img.rect());
  for (int y = rr.top(); y <= rr.bottom(); ++y)
    for (int x = rr.left(); x <= rr.right(); ++x)
      if (qGray(img.pixel(x, y)) < 140) ++n;
  return n;
}

uint64_t lane_marks(const ViewModel& m, const Lane& l, MarkKind k, const ViewState& s) {
  uint64_t n = 0;
  for (uint32_t i : l.frames) {
    const FrameInfo& f = m.frames()[i];
    n += f.kind == k && f.ts_ns >= s.t0 && f.ts_ns <= s.t1;
  }
  return n;
}

// Checks an exported timeline against the model: one row per lane, and in each row the colours
// of the mark kinds the lane has (and none of those it lacks, for retransmissions).
void check_timeline_image(const ViewModel& m, const ViewState& s, const QImage& img) {
  QImage scratch(img.size(), QImage::Format_ARGB32_Premultiplied);
  TimelineLayout L;
  {
    QPainter p(&scratch);
    paint_timeline(p, m, s, scratch.rect(), &L);
  }
  const Flow& f = m.flows()[s.flow];
  QCOMPARE(L.rows.size(), f.lanes.size());
  for (const auto& row : L.rows) {
    const Lane& lane = f.lanes[row.lane];
    const QRect band(L.plot.left(), row.y + 1, L.plot.width(), row.h - 2);
    const QRect label(0, row.y, L.plot.left() - 2, row.h);
    QVERIFY2(
        count_dark(img, label) > 0 || count_color(img, label, lane_color(f, row.lane), 120) > 0,
        qPrintable(QString::fromStdString(lane.label()) + ": no label"));
    for (MarkKind k : {MarkKind::kFirstTx, MarkKind::kRetransmit, MarkKind::kSack}) {
      const bool has = lane_marks(m, lane, k, s) > 0;
      const int px = count_color(img, band, kind_color(k), 30);
      const QString what =
          QString::fromStdString(lane.label() + " " + std::string(mark_kind_name(k)));
      if (has)
        QVERIFY2(px > 0, qPrintable(what + ": expected marks, none drawn"));
      else if (k == MarkKind::kRetransmit)
        QVERIFY2(px == 0, qPrintable(what + ": drawn but none in the model"));
    }
  }
}

}  // namespace

class ViewGuiTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  SyntheticRun run_;

  void open_synthetic(MainWindow& w) {
    LoadOptions o;
    o.capture = run_.capture;
    QString err;
    QVERIFY2(w.open(o, err), qPrintable(err));
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    run_ = write_synthetic_run(tmp_.filePath("run").toStdString());
  }

  void export_writes_an_image_whose_lanes_match_the_model() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    ViewState s = initial_state(m);
    const QString png = tmp_.filePath("timeline.png");
    QString qerr;
    QVERIFY2(export_view(m, s, "timeline", QSize(1200, 500), png, qerr), qPrintable(qerr));
    QImage img(png);
    QVERIFY(!img.isNull());
    QCOMPARE(img.size(), QSize(1200, 500));
    check_timeline_image(m, s, img);
    // Drops and EV state changes show on lane B.
    TimelineLayout L;
    {
      QImage scratch(img.size(), QImage::Format_ARGB32_Premultiplied);
      QPainter p(&scratch);
      paint_timeline(p, m, s, scratch.rect(), &L);
    }
    const Flow& f = m.flows()[s.flow];
    for (const auto& row : L.rows) {
      const QRect band(L.plot.left(), row.y, L.plot.width(), row.h);
      const bool is_b = f.lanes[row.lane].wev == kEvB && !f.lanes[row.lane].control;
      const int drop_px = count_color(img, band, kind_color(MarkKind::kInjectorDrop), 40);
      if (is_b) QVERIFY(drop_px > 0);
      const int bad_px = count_color(img, band, ev_state_color(EvState::kAssumedBad), 6);
      QCOMPARE(bad_px > 0, is_b);  // only EV B was ASSUMED_BAD
    }
    // The other views and SVG export render something too.
    for (const char* v : {"sequence", "series", "all"}) {
      const QString path = tmp_.filePath(QStringLiteral("%1.png").arg(v));
      QVERIFY2(export_view(m, s, v, QSize(1000, 700), path, qerr), qPrintable(qerr));
      QImage i(path);
      QVERIFY(!i.isNull());
      QVERIFY(count_dark(i, i.rect()) > 500);
    }
    const QString svg = tmp_.filePath("t.svg");
    QVERIFY2(export_view(m, s, "timeline", QSize(1000, 500), svg, qerr), qPrintable(qerr));
    QVERIFY(QFileInfo(svg).size() > 1000);
    QVERIFY(!export_view(m, s, "pie", QSize(1000, 500), svg, qerr));
    QVERIFY(qerr.contains("unknown view"));
    QVERIFY(!export_view(m, s, "timeline", QSize(1000, 500), tmp_.filePath("x.unknownext"), qerr));
  }

  void sequence_plot_places_retransmissions_at_their_psn() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    ViewState s = initial_state(m);
    QImage img(1000, 500, QImage::Format_ARGB32_Premultiplied);
    PlotLayout L;
    {
      QPainter p(&img);
      paint_sequence(p, m, s, img.rect(), &L);
    }
    QVERIFY(L.y0 < 0 && L.y1 > 5);  // PSNs 0..5 relative
    // The hit test finds r4 where the plot drew it.
    const FrameInfo& r4 = m.frames()[run_.frame["r4"]];
    const double x = x_of(s, L.plot, r4.ts_ns);
    const double y = L.plot.bottom() - (r4.rel_psn - L.y0) / (L.y1 - L.y0) * L.plot.height();
    QCOMPARE(hit_sequence(m, s, L, QPoint(int(x), int(y))), run_.frame["r4"]);
    QCOMPARE(hit_sequence(m, s, L, QPoint(int(x), L.plot.top() + 1)), kNone);
  }

  // Issue 18, problem 2: endpoint operations are drawn on their plane's lane, and a violation
  // about a gap shades the gap and outlines the lanes it is about.
  void endpoint_lanes_and_a_violations_gap_are_drawn() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    ViewState s = initial_state(m);
    const Flow& f = m.flows()[s.flow];
    const auto render = [&](const ViewState& st, TimelineLayout& L) {
      QImage img(1200, 600, QImage::Format_ARGB32_Premultiplied);
      QPainter p(&img);
      paint_timeline(p, m, st, img.rect(), &L);
      return img;
    };
    TimelineLayout L;
    QImage plain = render(s, L);
    const auto row_rect = [&](uint32_t lane) {
      for (const auto& r : L.rows)
        if (r.lane == lane) return QRect(L.plot.left(), r.y, L.plot.width(), r.h);
      return QRect();
    };
    for (uint8_t plane : {uint8_t{1}, uint8_t{2}}) {
      const QRect r = row_rect(f.endpoint_lane(plane));
      QVERIFY2(!r.isEmpty(), "no endpoint lane row");
      QVERIFY2(count_color(plain, r, kind_color(MarkKind::kEndpointOp), 30) > 4,
               "endpoint operations not drawn");
    }
    const Violation& v = m.violations().back();
    QCOMPARE(v.id, std::string("MRC-TEST-004"));
    const EvidenceFocus fo = m.evidence_focus(v);
    s.highlighted = fo.frames;
    s.focus_lanes = fo.lanes;
    s.focus_intervals = fo.intervals;
    QImage focused = render(s, L);
    // Inside the gap, every lane row is tinted; well before it, none is.
    const QRect ep2 = row_rect(f.endpoint_lane(2));
    const int x_in = int(x_of(s, L.plot, (fo.intervals[0].first + fo.intervals[0].second) / 2));
    const int x_out = int(x_of(s, L.plot, run_.t_ns["d0"])) - 3;
    const QRgb in = focused.pixel(x_in, ep2.center().y() + 3);
    const QRgb out = focused.pixel(x_out, ep2.center().y() + 3);
    QVERIFY2(qRed(in) > qGreen(in) + 15, "the gap is not shaded");
    QVERIFY2(qRed(out) <= qGreen(out) + 5, "shading outside the gap");
    QCOMPARE(plain.pixel(x_in, ep2.center().y() + 3), plain.pixel(x_out, ep2.center().y() + 3));
    // The lanes of plane 2 are outlined, those of plane 1 are not.
    const QRect ep1 = row_rect(f.endpoint_lane(1));
    QVERIFY(count_color(focused, QRect(ep2.left() - 100, ep2.top(), 60, ep2.height()), kFocusEdge,
                        30) > 0);
    QCOMPARE(
        count_color(focused, QRect(ep1.left() - 100, ep1.top(), 60, ep1.height()), kFocusEdge, 30),
        0);
  }

  // Issue 18, acceptance: a real run's MRC-PRB-007 evidence is visible as the gap between EV
  // probes. gui/testdata/prb007-run is cut from a `mrct run` of baseline-srv6 with the
  // sparse-reverse-probe mutant (gui/testdata/README.md): the requester's capture around the
  // report's first gap, every control frame and one data frame in 50, and the checker's report
  // of that run. Opening the directory must find the warning, shade its interval on the
  // plane's endpoint lane and bound it with the responder's EV probes before and after.
  void real_runs_reverse_probe_gap_is_drawn_between_ev_probes() {
    ViewModel m;
    LoadOptions o;
    o.run_dir = MRC_SOURCE_DIR "/gui/testdata/prb007-run";
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const auto& vs = m.violations();
    const auto it = std::find_if(vs.begin(), vs.end(),
                                 [](const Violation& v) { return v.id == "MRC-PRB-007"; });
    QVERIFY2(it != vs.end(), "no MRC-PRB-007 in the run's report");
    QCOMPARE(it->status, std::string("warn"));
    QVERIFY(!it->evidence.empty());
    const Evidence& ev = it->evidence[0];
    QVERIFY2(ev.from_ns.has_value(), "the evidence gives no interval (from_ns)");
    QVERIFY(ev.plane >= 1);
    const EvidenceFocus fo = m.evidence_focus(*it, 0);
    QCOMPARE(fo.intervals.size(), size_t{1});
    QCOMPARE(fo.intervals[0].first, *ev.from_ns);
    QCOMPARE(fo.intervals[0].second, ev.ts_ns);
    QVERIFY(fo.flow != kNone);
    const Flow& f = m.flows()[fo.flow];
    const uint32_t ep = f.endpoint_lane(ev.plane);
    QVERIFY2(ep != kNone, "no endpoint lane on the evidence's plane");
    QVERIFY(std::find(fo.lanes.begin(), fo.lanes.end(), ep) != fo.lanes.end());

    // The gap's bounds: two EV probe requests of the responder on that lane, the one nearest
    // the gap's start and the next, after its end, with no responder request between them.
    std::vector<uint32_t> probes;
    for (uint32_t i : fo.frames)
      if (m.frames()[i].lane == ep) probes.push_back(i);
    QCOMPARE(probes.size(), size_t{2});
    const FrameInfo& a = m.frames()[probes[0]];
    const FrameInfo& b = m.frames()[probes[1]];
    for (uint32_t i : probes) {
      QVERIFY((m.frames()[i].flags & kFlagFromResponder) != 0);
      QVERIFY((m.frames()[i].flags & kFlagEndpointResponse) == 0);
      QVERIFY2(m.describe(i).find("EV probe request") != std::string::npos, m.describe(i).c_str());
    }
    QVERIFY(b.ts_ns > ev.ts_ns);
    QVERIFY2(b.ts_ns - a.ts_ns > 10'000'000, "the probes do not bound a gap over the 10 ms limit");
    for (uint32_t i : f.lanes[ep].frames) {
      const FrameInfo& c = m.frames()[i];
      if (c.ts_ns > a.ts_ns && c.ts_ns < b.ts_ns)
        QVERIFY((c.flags & kFlagFromResponder) == 0 || (c.flags & kFlagEndpointResponse) != 0);
    }

    // Drawn: the interval tinted red on the endpoint lane, not before the first probe; the
    // two probes' marks on the lane.
    ViewState s = initial_state(m);
    s.flow = fo.flow;
    const uint64_t span = b.ts_ns - a.ts_ns;
    s.t0 = a.ts_ns - span / 4;
    s.t1 = b.ts_ns + span / 4;
    s.highlighted = fo.frames;
    s.focus_lanes = fo.lanes;
    s.focus_intervals = fo.intervals;
    const auto render = [&](const ViewState& st, TimelineLayout& L) {
      QImage img(1400, 700, QImage::Format_ARGB32_Premultiplied);
      QPainter p(&img);
      paint_timeline(p, m, st, img.rect(), &L);
      return img;
    };
    TimelineLayout L;
    const QImage img = render(s, L);
    QRect row;
    for (const auto& r : L.rows)
      if (r.lane == ep) row = QRect(L.plot.left(), r.y, L.plot.width(), r.h);
    QVERIFY2(!row.isEmpty(), "the endpoint lane has no row");
    const int y = row.center().y() + 3;
    const int x_in = int(x_of(s, L.plot, (fo.intervals[0].first + fo.intervals[0].second) / 2));
    const int x_out = int(x_of(s, L.plot, a.ts_ns)) - 12;
    QVERIFY(x_out > L.plot.left());
    const QRgb in = img.pixel(x_in, y);
    const QRgb out = img.pixel(x_out, y);
    QVERIFY2(qRed(in) > qGreen(in) + 15, "the gap is not shaded");
    QVERIFY2(qRed(out) <= qGreen(out) + 5, "shading before the gap");
    for (const FrameInfo* fr : {&a, &b}) {
      const int x = int(x_of(s, L.plot, fr->ts_ns));
      QVERIFY2(count_color(img, QRect(x - 4, row.top(), 9, row.height()),
                           kind_color(MarkKind::kEndpointOp), 40) > 0,
               "an EV probe bounding the gap is not drawn on the endpoint lane");
    }
    // The same view without the violation selected has no shading there.
    ViewState plain = s;
    plain.focus_intervals.clear();
    plain.focus_lanes.clear();
    plain.highlighted.clear();
    const QImage none = render(plain, L);
    QVERIFY(qRed(none.pixel(x_in, y)) <= qGreen(none.pixel(x_in, y)) + 5);
  }

  // Issue 18, problem 4: the legend wraps instead of cutting off the EV state colour key.
  void legend_shows_the_ev_state_key_at_a_narrow_width() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const ViewState s = initial_state(m);
    QImage img(800, 500, QImage::Format_ARGB32_Premultiplied);
    TimelineLayout L;
    {
      QPainter p(&img);
      paint_timeline(p, m, s, img.rect(), &L);
    }
    for (EvState st : {EvState::kSkip, EvState::kAssumedBad, EvState::kDenied})
      QVERIFY2(count_color(img, L.legend, ev_state_color(st), 6) >= 100,
               qPrintable(QString::fromUtf8(ev_state_label(st).data()) + " key not drawn"));
  }

  // Issue 18, problem 3: at the default window size the packet pane shows what became of a frame
  // (it was below the fold), scrolls, and its links select the related frame.
  void packet_pane_shows_the_fate_at_the_default_size_and_links() {
    MainWindow w;
    open_synthetic(w);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.size(), QSize(1500, 950));  // the default
    w.controller()->select_frame(run_.frame["d4"], true);
    QTextBrowser* b = w.packet_info();
    for (const char* key : {"fate: dropped after the capture point", "log: drop"}) {
      const QTextCursor c = b->document()->find(QString::fromLatin1(key));
      QVERIFY2(!c.isNull(), key);
      QVERIFY2(b->viewport()->rect().contains(b->cursorRect(c)), key);
    }
    QCOMPARE(b->verticalScrollBarPolicy(), Qt::ScrollBarAsNeeded);
    // r4's original is d4: a click on the link selects it.
    w.controller()->select_frame(run_.frame["r4"], true);
    const QTextCursor link = b->document()->find(QStringLiteral("original: frame"));
    QVERIFY(!link.isNull());
    const QPoint at = b->cursorRect(link).center() - QPoint(8, 0);
    QTest::mouseClick(b->viewport(), Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(w.controller()->state().selected_frame, run_.frame["d4"]);
  }

  // Issue 18, problem 4: a long status (here: a warning naming a deep path) is elided to the
  // width of the bar at the default window size instead of running off it.
  void status_bar_fits_at_the_default_width() {
    const std::string deep = tmp_.filePath(QString(120, 'd')).toStdString();
    QVERIFY(QDir().mkpath(QString::fromStdString(deep)));
    const SyntheticRun r = write_synthetic_run(deep + "/run");
    MainWindow w;
    LoadOptions o;
    o.capture = r.capture;
    QString err;
    QVERIFY2(w.open(o, err), qPrintable(err));
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.width(), 1500);
    const QLabel* l = w.status_label();
    QVERIFY2(w.status_full_text().size() > 250, qPrintable(w.status_full_text()));
    QVERIFY2(l->fontMetrics().horizontalAdvance(l->text()) <= l->width(), qPrintable(l->text()));
    QVERIFY(l->geometry().right() <= w.statusBar()->width());
    QVERIFY(l->toolTip().contains(QStringLiteral("warning")) || l->toolTip().size() > 0);
  }

  // Issue 18, problem 5: hover on the series gives value, EV and time; a click selects the
  // frame of the RTT sample under the pointer.
  void series_hover_and_click() {
    MainWindow w;
    open_synthetic(w);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ViewWidget* sv = w.view(ViewKind::kSeries);
    sv->grab();
    const SeriesLayout SL = sv->series_layout();
    const ViewState& s = w.controller()->state();
    const auto y_at = [](const PlotLayout& L, double v) {
      return int(L.plot.bottom() - (v - L.y0) / (L.y1 - L.y0) * L.plot.height());
    };
    // sack1's sample: 3 us on EV A.
    const QPoint rtt_pt(int(x_of(s, SL.rtt.plot, run_.t_ns["sack1"])), y_at(SL.rtt, 3000));
    QMouseEvent move(QEvent::MouseMove, QPointF(rtt_pt), sv->mapToGlobal(QPointF(rtt_pt)),
                     Qt::NoButton, Qt::NoButton, Qt::NoModifier);
    QApplication::sendEvent(sv, &move);
    const QString hover = w.statusBar()->currentMessage();
    QVERIFY2(hover.contains(QStringLiteral("RTT 3 us")) && hover.contains("EV 0xe0010001") &&
                 hover.contains(QStringLiteral("at +")),
             qPrintable(hover));
    QTest::mouseClick(sv, Qt::LeftButton, Qt::NoModifier, rtt_pt);
    QCOMPARE(s.selected_frame, run_.frame["sack1"]);
    // cwnd panel: the sample in force, with its time.
    const QPoint win_pt(int(x_of(s, SL.window.plot, run_.t_ns["d0"] + 7000)),
                        SL.window.plot.center().y());
    const SeriesHit h = hit_series(*w.model(), s, SL, win_pt);
    QVERIFY2(h.text.contains(QStringLiteral("cwnd 40000 B")), qPrintable(h.text));
    QVERIFY(h.frame != kNone);
    // Goodput panel: a rate and whose it is.
    const SeriesHit g = hit_series(
        *w.model(), s, SL,
        QPoint(int(x_of(s, SL.goodput.plot, run_.t_ns["d3"])), SL.goodput.plot.bottom() - 1));
    QVERIFY2(g.text.contains(QStringLiteral("goodput")) && g.text.contains("/s"),
             qPrintable(g.text));
    QVERIFY(g.frame != kNone);
  }

  // Issue 18, problem 5: 256 EVs on 4 planes get 256 different colours, any two of 12 EVs of a
  // plane can be told apart, and each stays in its plane's hue family.
  void lane_colours_are_distinguishable_and_grouped_by_plane() {
    const auto dist = [](const QColor& a, const QColor& b) {
      return std::abs(a.red() - b.red()) + std::abs(a.green() - b.green()) +
             std::abs(a.blue() - b.blue());
    };
    Flow f;
    for (uint8_t plane = 1; plane <= 4; ++plane)
      for (uint32_t k = 0; k < 64; ++k) {
        Lane l;
        l.plane = plane;
        l.wev = (uint32_t{plane} << 16) | k;
        f.lanes.push_back(l);
      }
    std::set<QRgb> seen;
    for (uint32_t i = 0; i < f.lanes.size(); ++i) {
      const QColor c = lane_color(f, i);
      seen.insert(c.rgb());
      // Nearer in hue to its own plane than to any other.
      const auto hue_d = [](int a, int b) {
        const int d = std::abs(a - b) % 360;
        return std::min(d, 360 - d);
      };
      const int own = hue_d(c.hsvHue(), plane_color(f.lanes[i].plane).hsvHue());
      for (uint8_t q = 1; q <= 4; ++q)
        if (q != f.lanes[i].plane)
          QVERIFY2(own < hue_d(c.hsvHue(), plane_color(q).hsvHue()),
                   qPrintable(QString::number(i)));
    }
    QCOMPARE(seen.size(), size_t{256});
    Flow twelve;
    for (uint32_t k = 0; k < 12; ++k) {
      Lane l;
      l.plane = 1;
      l.wev = k;
      twelve.lanes.push_back(l);
    }
    for (uint32_t i = 0; i < 12; ++i)
      for (uint32_t j = i + 1; j < 12; ++j)
        QVERIFY2(dist(lane_color(twelve, i), lane_color(twelve, j)) >= 40,
                 qPrintable(QStringLiteral("%1 %2").arg(i).arg(j)));
  }

  // Issue 18, problem 5: the EV table sorts, selecting rows filters to those EVs, and one EV
  // (a click on its lane label) is highlighted on every view.
  void ev_table_sorts_filters_and_an_ev_is_highlighted_everywhere() {
    MainWindow w;
    open_synthetic(w);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTableWidget* t = w.ev_table();
    QCOMPARE(t->rowCount(), 3);
    t->sortByColumn(3, Qt::AscendingOrder);  // packets: B (2) first
    QCOMPARE(t->item(0, 0)->text(), QString::fromStdString(format_wev(kEvB)));
    QCOMPARE(t->item(0, 3)->data(Qt::DisplayRole).toInt(), 2);
    t->sortByColumn(10, Qt::DescendingOrder);  // ASSUMED_BAD time: B first
    QCOMPARE(t->item(0, 0)->text(), QString::fromStdString(format_wev(kEvB)));
    QCOMPARE(t->item(0, 10)->data(Qt::DisplayRole).toDouble(), 6.9);
    t->selectRow(0);
    QCOMPARE(w.controller()->state().filter.evs, std::vector<uint32_t>{kEvB});
    t->clearSelection();
    QVERIFY(w.controller()->state().filter.evs.empty());

    // A click on EV C's lane label highlights it on the three views.
    ViewWidget* tl = w.view(ViewKind::kTimeline);
    const Flow& f = w.model()->flows()[w.controller()->state().flow];
    const uint32_t lane_c = f.lane_of(kEvC);
    const auto images = [&] {
      std::vector<QImage> out;
      for (ViewKind k : {ViewKind::kTimeline, ViewKind::kSequence, ViewKind::kSeries})
        out.push_back(w.view(k)->grab().toImage());
      return out;
    };
    const std::vector<QImage> before = images();
    std::optional<TimelineLayout::Row> row;
    for (const auto& r : tl->timeline_layout().rows)
      if (r.lane == lane_c) row = r;
    QVERIFY(row.has_value());
    QTest::mouseClick(tl, Qt::LeftButton, Qt::NoModifier, QPoint(40, row->y + row->h / 2));
    QCOMPARE(w.controller()->state().highlight_lane, lane_c);
    const std::vector<QImage> after = images();
    const QColor c = lane_color(f, lane_c);
    const QRect rects[] = {QRect(0, row->y, 10, row->h), w.view(ViewKind::kSequence)->plot_rect(),
                           w.view(ViewKind::kSeries)->series_layout().goodput.plot};
    for (int v = 0; v < 3; ++v) {
      const int n0 = count_color(before[size_t(v)], rects[v], v == 1 ? c.darker(130) : c, 30);
      const int n1 = count_color(after[size_t(v)], rects[v], v == 1 ? c.darker(130) : c, 30);
      QVERIFY2(n1 > n0 + 10,
               qPrintable(QStringLiteral("view %1: %2 -> %3").arg(v).arg(n0).arg(n1)));
    }
    QTest::mouseClick(tl, Qt::LeftButton, Qt::NoModifier, QPoint(40, row->y + row->h / 2));
    QCOMPARE(w.controller()->state().highlight_lane, kNone);
  }

  // Issue 18, problems 5 and 6: panel titles sit above the data, value labels of neighbouring
  // panels do not overlap.
  void series_titles_and_axis_labels_stay_clear() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const ViewState s = initial_state(m);
    for (int h : {300, 450, 700}) {
      QImage img(1000, h, QImage::Format_ARGB32_Premultiplied);
      SeriesLayout SL;
      {
        QPainter p(&img);
        paint_series(p, m, s, img.rect(), &SL);
      }
      std::vector<QRectF> labels;
      for (const PlotLayout* pl : {&SL.goodput, &SL.rtt, &SL.window}) {
        QVERIFY(!pl->title.isEmpty());
        QVERIFY(!pl->title.intersects(pl->plot));
        // The title's text is drawn in its strip.
        QVERIFY(count_dark(img, pl->title) > 20);
        QVERIFY(!pl->tick_labels.empty());
        labels.insert(labels.end(), pl->tick_labels.begin(), pl->tick_labels.end());
      }
      // A panel's value labels stay in its band (its title strip, its plot, the next strip's
      // first half), so they cannot run into the next panel's.
      const PlotLayout* panels[] = {&SL.goodput, &SL.rtt, &SL.window};
      for (int k = 0; k < 2; ++k)
        for (const QRectF& r : panels[k]->tick_labels)
          QVERIFY2(r.bottom() <= panels[k + 1]->title.top() + panels[k + 1]->title.height() / 2.0,
                   qPrintable(QStringLiteral("height %1 panel %2: label at %3 runs into the next")
                                  .arg(h)
                                  .arg(k)
                                  .arg(r.bottom())));
      for (size_t i = 0; i < labels.size(); ++i)
        for (size_t j = i + 1; j < labels.size(); ++j)
          QVERIFY2(!labels[i].intersects(labels[j]),
                   qPrintable(
                       QStringLiteral("height %1: labels %2 and %3 overlap").arg(h).arg(i).arg(j)));
    }
  }

  // Issue 18, problem 6: filtered to one EV, the cumulative ACK is still the connection's (EV A's
  // only SACK says 3, EV C's later one 5).
  void cumulative_ack_is_the_connections_whatever_the_filter() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    ViewState s = initial_state(m);
    s.filter.evs = {kEvA};
    QImage img(1000, 500, QImage::Format_ARGB32_Premultiplied);
    PlotLayout L;
    {
      QPainter p(&img);
      paint_sequence(p, m, s, img.rect(), &L);
    }
    const auto y_at = [&](double v) {
      return int(L.plot.bottom() - (v - L.y0) / (L.y1 - L.y0) * L.plot.height());
    };
    const int x = int(x_of(s, L.plot, run_.t_ns["sack2"])) + 6;
    const QColor line(0x20, 0x20, 0x20);
    QVERIFY2(count_color(img, QRect(x, y_at(5) - 1, 4, 3), line, 40) > 0, "no cumulative ACK at 5");
    QCOMPARE(count_color(img, QRect(x, y_at(3) - 1, 4, 3), line, 40), 0);
  }

  // Issue 18, problem 6: cwnd / bytes in flight carry a marker on every sample and end at the
  // last one (they were held flat to the right edge).
  void stepwise_series_have_markers_and_stop_at_the_last_sample() {
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const ViewState s = initial_state(m);
    QImage img(1000, 600, QImage::Format_ARGB32_Premultiplied);
    SeriesLayout SL;
    {
      QPainter p(&img);
      paint_series(p, m, s, img.rect(), &SL);
    }
    const Flow& f = m.flows()[s.flow];
    QCOMPARE(f.cwnd.size(), size_t{2});  // 40000 at 7 us, 20000 at 12 us
    // cwnd is the only bluish ink in the panel (bytes in flight is orange, the grid grey).
    const auto bluish = [&](const QRect& r) {
      int n = 0;
      const QRect rr = r.intersected(img.rect());
      for (int y = rr.top(); y <= rr.bottom(); ++y)
        for (int x = rr.left(); x <= rr.right(); ++x) {
          const QRgb px = img.pixel(x, y);
          n += qBlue(px) > qRed(px) + 40;
        }
      return n;
    };
    const QRect& P = SL.window.plot;
    const int x_last = int(x_of(s, P, f.cwnd.back().ts_ns));
    QVERIFY(bluish(QRect(x_last - 20, P.top() + 1, 20, P.height() - 2)) > 0);
    QCOMPARE(bluish(QRect(x_last + 4, P.top() + 1, P.right() - x_last - 5, P.height() - 2)), 0);
    // The marker of the first sample: the line starts there and goes right, so the square's
    // upper left quarter is the marker alone.
    const int x0 = int(x_of(s, P, f.cwnd.front().ts_ns));
    const int y0 = int(P.bottom() - (f.cwnd.front().value - SL.window.y0) /
                                        (SL.window.y1 - SL.window.y0) * P.height());
    QVERIFY(bluish(QRect(x0 - 2, y0 - 2, 2, 2)) >= 2);
  }

  // Issue 18, problem 7: go to, next / previous, arrows after typing a filter, the Kinds menu,
  // the shortcuts in the Help menu.
  void navigation_keys_and_menus() {
    MainWindow w;
    open_synthetic(w);
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ViewController* c = w.controller();
    QString err;
    QVERIFY2(w.go_to(QStringLiteral("psn +4"), err), qPrintable(err));
    QCOMPARE(c->state().selected_frame, run_.frame["d4"]);
    QVERIFY(!w.go_to(QStringLiteral("frame 9999"), err));
    QVERIFY(err.contains(QStringLiteral("1..21")));
    QVERIFY(w.step(NavKind::kRetransmit, true));
    QCOMPARE(c->state().selected_frame, run_.frame["r5"]);
    QVERIFY(w.step(NavKind::kRetransmit, true));
    QCOMPARE(c->state().selected_frame, run_.frame["r4"]);
    QVERIFY(!w.step(NavKind::kRetransmit, true));
    QVERIFY(w.step(NavKind::kTrim, false));
    QCOMPARE(c->state().selected_frame, run_.frame["d5_trimmed"]);
    // The menu's shortcut does it too.
    w.activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(&w));
    w.view(ViewKind::kTimeline)->setFocus();
    QTest::keyClick(w.view(ViewKind::kTimeline), Qt::Key_K);
    QCOMPARE(c->state().selected_frame, run_.frame["nack"]);

    // Typing an EV filter and pressing Return gives the arrow keys back to the views.
    QLineEdit* ev = w.ev_edit();
    ev->setFocus();
    QTest::keyClicks(ev, QString::fromStdString(format_wev(kEvA)));
    QTest::keyClick(ev, Qt::Key_Return);
    QCOMPARE(c->state().filter.evs, std::vector<uint32_t>{kEvA});
    c->zoom(0.25, (c->state().t0 + c->state().t1) / 2);
    const uint64_t t0 = c->state().t0;
    QTest::keyClick(QApplication::focusWidget(), Qt::Key_Right);
    QVERIFY2(c->state().t0 > t0, "Right did not pan after Return in the EV filter");

    // The Kinds menu stays open while entries are toggled.
    QMenu* kinds = w.kinds_menu();
    kinds->popup(w.mapToGlobal(QPoint(100, 100)));
    QVERIFY(QTest::qWaitForWindowExposed(kinds));
    QAction* first = kinds->actions().front();
    QVERIFY(first->isChecked());
    QTest::mouseClick(kinds, Qt::LeftButton, Qt::NoModifier, kinds->actionGeometry(first).center());
    QVERIFY(!first->isChecked());
    QVERIFY2(kinds->isVisible(), "the Kinds menu closed after one toggle");
    QVERIFY((c->state().filter.kinds & kind_bit(MarkKind::kFirstTx)) == 0);
    kinds->hide();

    // The shortcuts are listed in the Help menu's text, from the menus themselves.
    QVERIFY(w.help_menu() != nullptr && !w.help_menu()->actions().isEmpty());
    const QString keys = w.shortcuts_text();
    for (const char* k : {"Ctrl+G", "Next retransmission", "Previous trim", "Next NACK",
                          "Next EV state change", "shift+drag"})
      QVERIFY2(keys.contains(QString::fromLatin1(k)), k);
  }

  // Issue 18, problem 8: a lane's label names its path (T1, uSIDs) from the run's path table,
  // matched by the SRv6 outer destination of its data.
  void lane_labels_name_the_path() {
    using namespace mrc::wire;
    const QString dir = tmp_.filePath("srv6");
    QVERIFY(QDir().mkpath(dir));
    const std::string cap = (dir + "/h1.pcap").toStdString();
    {
      CaptureWriter w;
      QVERIFY(w.open(cap, CaptureFormat::kPcap));
      std::vector<std::byte> payload(256, std::byte{0x5a});
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t wev = k % 2 ? kEvB : kEvA;
        FrameSpec s;
        s.has_eth = true;
        s.eth.src = {0x02, 0, 0, 0, 1, 1};
        s.eth.dst = {0x02, 0, 0, 0, 0xEE, 1};
        s.l3 = 6;
        s.ip6.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        s.ip6.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
        const EvCarriage ev = carry_wev(EvFormat::kStev, mrp0().ev_stripe(), wev);
        s.ip6.flow_label = ev.flow_label;
        s.has_udp = true;
        s.udp.sport = ev.sport;
        s.roce = true;
        s.bth.opcode = 0xC7;
        s.bth.dest_qp = kResponderQpn;
        s.bth.psn = k;
        s.payload = Bytes(payload.data(), payload.size());
        // SRv6: the inner header as sent, the outer destination is the path's uSID list.
        s.inner_ip6 = s.ip6;
        s.has_inner_ip6 = true;
        s.ip6.dst = *parse_ipv6(wev == kEvA ? "fcbb:0:100:201:101:302::" : "fcbb:0:1100:1200::");
        std::vector<std::byte> out(4000);
        std::string err;
        const size_t n = encode_frame(s, MutBytes(out.data(), out.size()), {}, mrp0(), &err);
        QVERIFY2(n > 0, err.c_str());
        QVERIFY(w.write(1'000'000 + k * 1000, Bytes(out.data(), n)));
      }
      QVERIFY(w.close());
    }
    std::ofstream(dir.toStdString() + "/paths.json")
        << R"({"schema": "mrctb-paths/1", "pairs": [{"src": "h1", "dst": "h2", "evs": [)"
           R"({"ev": 1, "plane": 0, "port": 1, "t1": 1, "outer_da": "fcbb:0:100:201:101:302::",)"
           R"( "usids": ["0100", "0201", "0101", "0302"], "hops": ["p1t0s0", "h2"]}]}]})";
    std::ofstream(dir.toStdString() + "/manifest.json")
        << R"({"schema": "mrctb-manifest/1", "view_capture": "h1.pcap", "paths": "paths.json"})";
    ViewModel m;
    LoadOptions o;
    o.run_dir = dir.toStdString();
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    QCOMPARE(m.paths().size(), size_t{1});
    const ViewState s = initial_state(m);
    QVERIFY(s.flow != kNone);
    const Flow& f = m.flows()[s.flow];
    const uint32_t a = f.lane_of(kEvA), b = f.lane_of(kEvB);
    QVERIFY(a != kNone && b != kNone);
    QCOMPARE(lane_label(m, s.flow, a), QStringLiteral("EV 0xe0010001 T1 1: 0100 0201 0101 0302"));
    QCOMPARE(lane_label(m, s.flow, b), QStringLiteral("EV 0xe0010002"));  // not in the table
    // Drawn: the timeline's row carries it, and the label column is wide enough for it.
    QImage img(1400, 400, QImage::Format_ARGB32_Premultiplied);
    TimelineLayout L;
    {
      QPainter p(&img);
      paint_timeline(p, m, s, img.rect(), &L);
    }
    bool found = false;
    for (const auto& r : L.rows)
      if (r.lane == a) {
        found = true;
        QCOMPARE(r.label, lane_label(m, s.flow, a));
        QVERIFY(QFontMetrics(QFont()).horizontalAdvance(r.label) > 0);
        QVERIFY(count_dark(img, QRect(12, r.y, L.plot.left() - 14, r.h)) > 0 ||
                count_color(img, QRect(12, r.y, L.plot.left() - 14, r.h), plane_color(1), 120) > 0);
      }
    QVERIFY(found);
  }

  // Issue 18, problem 8: an EV that carried no data (a backup the event log names) is drawn as
  // idle: greyed label saying so, hatched row.
  void idle_evs_look_idle() {
    const std::string extra = tmp_.filePath("idle-events.jsonl").toStdString();
    // The run's event log plus one line about a backup EV that never carries data.
    std::ofstream(extra) << std::ifstream(run_.events).rdbuf()
                         << "{\"t_ns\":" << run_.t_ns["d0"] + 100
                         << ",\"node\":\"a\",\"kind\":\"ev_state\",\"qpn\":34,\"wev\":"
                         << 0xE0010003u
                         << ",\"port\":1,\"from\":\"DENIED\",\"to\":\"GOOD\","
                            "\"reason\":\"probes_good\"}\n";
    ViewModel m;
    LoadOptions o;
    o.capture = run_.capture;
    o.event_logs = {extra};
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    const ViewState s = initial_state(m);
    const Flow& f = m.flows()[s.flow];
    const uint32_t idle = f.lane_of(0xE0010003u);
    QVERIFY(idle != kNone);
    QImage img(1200, 600, QImage::Format_ARGB32_Premultiplied);
    TimelineLayout L;
    {
      QPainter p(&img);
      paint_timeline(p, m, s, img.rect(), &L);
    }
    for (const auto& r : L.rows) {
      if (f.lanes[r.lane].control || f.lanes[r.lane].endpoint) continue;
      const bool is_idle = r.lane == idle;
      QCOMPARE(r.idle, is_idle);
      QCOMPARE(r.label.contains(QStringLiteral("idle")), is_idle);
      QCOMPARE(lane_label(m, s.flow, r.lane), r.label);
      const int hatch = count_color(img, QRect(L.plot.left(), r.y + 1, L.plot.width(), r.h - 2),
                                    QColor(0xc8, 0xc8, 0xc8), 6);
      QVERIFY2((hatch > 50) == is_idle, qPrintable(r.label + QStringLiteral(" %1").arg(hatch)));
    }
    const auto stats = m.ev_stats(s.flow, 0, UINT64_MAX);
    QCOMPARE(std::count_if(stats.begin(), stats.end(), [](const EvStats& e) { return e.idle; }), 1);
  }

  void selecting_a_violation_selects_its_frame_on_every_view() {
    MainWindow w;
    LoadOptions o;
    o.capture = run_.capture;
    QString err;
    QVERIFY2(w.open(o, err), qPrintable(err));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QCOMPARE(w.violations_tree()->topLevelItemCount(), 3);

    w.select_violation(0, 0);
    const ViewState& s = w.controller()->state();
    QCOMPARE(s.selected_frame, run_.frame["r4"]);
    QCOMPARE(s.highlighted.size(), size_t{2});
    const uint64_t t = run_.t_ns["r4"];
    QVERIFY(s.t0 <= t && t <= s.t1);                     // revealed on the shared time axis
    QVERIFY(w.packet_tree()->topLevelItemCount() >= 6);  // Ethernet, IPv6, UDP, BTH, ...
    QVERIFY(w.packet_tree()->findItems("BTH", Qt::MatchExactly).size() == 1);
    QVERIFY(w.hex_view()->toPlainText().startsWith("0000  02 00 00 00 ee 02"));

    // Evidence from another capture point: the frame nearest in time.
    w.select_violation(0, 1);
    QCOMPARE(w.controller()->state().selected_frame, run_.frame["nack"]);
    // The rule itself: its first evidence with a frame.
    w.select_violation(1, -1);
    QCOMPARE(w.controller()->state().selected_frame, run_.frame["d4"]);

    // The views draw the cursor where the selected frame is.
    for (ViewKind k : {ViewKind::kTimeline, ViewKind::kSequence, ViewKind::kSeries}) {
      ViewWidget* v = w.view(k);
      const QImage img = v->grab().toImage();
      const double x = x_of(w.controller()->state(), v->plot_rect(), run_.t_ns["d4"]);
      const QRect col(int(x) - 1, v->plot_rect().top(), 3, v->plot_rect().height());
      QVERIFY2(count_color(img, col, QColor(0xd0, 0x10, 0x10), 60) > 5, view_kind_name(k));
    }
  }

  void click_zoom_pan_filter_and_select_a_range() {
    MainWindow w;
    LoadOptions o;
    o.capture = run_.capture;
    QString err;
    QVERIFY2(w.open(o, err), qPrintable(err));
    w.resize(1400, 900);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    ViewController* c = w.controller();
    ViewWidget* tl = w.view(ViewKind::kTimeline);
    c->set_range(run_.t_ns["d0"] - 1000, run_.t_ns["sack2"] + 1000);
    tl->grab();  // paint, so the layout is current

    // Click on d3's mark in lane A. (Copies: the layout is rebuilt by every paint.)
    const TimelineLayout L = tl->timeline_layout();
    const Flow& f = w.model()->flows()[c->state().flow];
    std::optional<TimelineLayout::Row> row_a;
    for (const auto& r : L.rows)
      if (!f.lanes[r.lane].control && f.lanes[r.lane].wev == kEvA) row_a = r;
    QVERIFY(row_a.has_value());
    const QPoint at(int(x_of(c->state(), L.plot, run_.t_ns["d3"])), row_a->y + row_a->h / 2);
    QTest::mouseClick(tl, Qt::LeftButton, Qt::NoModifier, at);
    QCOMPARE(c->state().selected_frame, run_.frame["d3"]);
    QVERIFY(w.packet_tree()->topLevelItemCount() > 0);

    // Wheel zooms in around the pointer; the other views follow the shared axis.
    const uint64_t span0 = c->state().t1 - c->state().t0;
    QWheelEvent wheel(QPointF(at), tl->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, 240),
                      Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(tl, &wheel);
    const uint64_t span1 = c->state().t1 - c->state().t0;
    QVERIFY(span1 < span0);
    QVERIFY(c->state().t0 <= run_.t_ns["d3"] && run_.t_ns["d3"] <= c->state().t1);
    // Drag pans.
    const uint64_t t0 = c->state().t0;
    QTest::mousePress(tl, Qt::LeftButton, Qt::NoModifier, at);
    QMouseEvent move(QEvent::MouseMove, QPointF(at + QPoint(200, 0)),
                     tl->mapToGlobal(QPointF(at + QPoint(200, 0))), Qt::NoButton, Qt::LeftButton,
                     Qt::NoModifier);
    QApplication::sendEvent(tl, &move);
    QTest::mouseRelease(tl, Qt::LeftButton, Qt::NoModifier, at + QPoint(200, 0));
    QVERIFY(c->state().t0 < t0);
    QCOMPARE(c->state().selected_frame, run_.frame["d3"]);  // a drag is not a click
    c->fit();

    // Shift+drag selects a range; the statistics follow it.
    tl->grab();
    const QRect plot = tl->plot_rect();
    const int xa = int(x_of(c->state(), plot, run_.t_ns["d0"] - 100));
    const int xb = int(x_of(c->state(), plot, run_.t_ns["d3"] + 100));
    QTest::mousePress(tl, Qt::LeftButton, Qt::ShiftModifier, QPoint(xa, row_a->y));
    QMouseEvent sel(QEvent::MouseMove, QPointF(xb, row_a->y),
                    tl->mapToGlobal(QPointF(xb, row_a->y)), Qt::NoButton, Qt::LeftButton,
                    Qt::ShiftModifier);
    QApplication::sendEvent(tl, &sel);
    QTest::mouseRelease(tl, Qt::LeftButton, Qt::ShiftModifier, QPoint(xb, row_a->y));
    QVERIFY(c->state().has_selection);
    QVERIFY2(w.selection_text()->toPlainText().contains("first transmission     4"),
             qPrintable(w.selection_text()->toPlainText()));

    // Filters: plane 2 leaves lane C and the plane's endpoint operations.
    Filter f2;
    f2.plane = 2;
    w.apply_filter(f2);
    tl->grab();
    QCOMPARE(tl->timeline_layout().rows.size(), size_t{2});
    QCOMPARE(f.lanes[tl->timeline_layout().rows[0].lane].wev, kEvC);
    QVERIFY(f.lanes[tl->timeline_layout().rows[1].lane].endpoint);
    Filter none;
    w.apply_filter(none);
    tl->grab();
    QCOMPARE(tl->timeline_layout().rows.size(), f.lanes.size());

    // The QP selector switches flows.
    QCOMPARE(w.qp_combo()->count(), 2);
    w.qp_combo()->setCurrentIndex(1);
    QCOMPARE(c->state().flow, 1u);
  }

#ifdef MRC_VIEW_HAVE_FIXTURE
  void exported_timeline_of_the_simulated_flap_matches_its_lanes() {
    fixture::FixtureConfig cfg;
    cfg.out_dir = tmp_.filePath("sim").toStdString();
    const fixture::FixtureResult truth = fixture::make_fixture(cfg);
    QVERIFY2(truth.ok, truth.error.c_str());
    ViewModel m;
    LoadOptions o;
    o.capture = truth.requester_capture;
    std::string err;
    QVERIFY2(m.load(o, err), err.c_str());
    ViewState s = initial_state(m);
    const QString png = tmp_.filePath("sim.png");
    QString qerr;
    QVERIFY2(export_view(m, s, "timeline", QSize(1600, 900), png, qerr), qPrintable(qerr));
    QImage img(png);
    QVERIFY(!img.isNull());
    check_timeline_image(m, s, img);
    // Every EV the engine used has its row.
    const Flow& f = m.flows()[s.flow];
    for (const auto& ev : truth.evs)
      if (ev.packets_sent > 0) QVERIFY(f.lane_of(ev.wev) != kNone);
  }
#endif
};

QTEST_MAIN(ViewGuiTest)
#include "view_gui_test.moc"
