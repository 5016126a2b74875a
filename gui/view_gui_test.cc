// The viewer's widgets and export, headless (QT_QPA_PLATFORM=offscreen): what the images show,
// and what clicks, wheel and the violations list do.
#include <QComboBox>
#include <QImage>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>
#include <cmath>
#include <optional>

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
