#include "gui/view_widgets.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>

namespace mrc::view {

namespace {
constexpr uint64_t kMinSpanNs = 50;
uint64_t shift(uint64_t t, int64_t d);
}  // namespace

ViewController::ViewController(QObject* parent) : QObject(parent) {}

void ViewController::set_model(std::shared_ptr<const ViewModel> model) {
  model_ = std::move(model);
  state_ = model_ ? initial_state(*model_) : ViewState{};
  min_t_ = state_.t0;
  max_t_ = std::max(state_.t1, state_.t0 + 1);
  emit flow_changed(state_.flow);
  emit changed();
}

void ViewController::set_range(uint64_t t0, uint64_t t1) {
  if (t1 < t0) std::swap(t0, t1);
  // Never zoom out beyond the capture (plus its margin), never below kMinSpanNs.
  const uint64_t full = max_t_ - min_t_;
  uint64_t span = std::clamp<uint64_t>(t1 - t0, kMinSpanNs, std::max<uint64_t>(full, kMinSpanNs));
  if (t0 < min_t_) t0 = min_t_;
  if (t0 + span > max_t_) t0 = max_t_ > span ? std::max(min_t_, max_t_ - span) : min_t_;
  if (t0 == state_.t0 && t0 + span == state_.t1) return;
  state_.t0 = t0;
  state_.t1 = t0 + span;
  emit changed();
}

// Arithmetic on offsets from t0, in integers: absolute capture times do not fit a double's
// mantissa to the nanosecond.
namespace {
uint64_t shift(uint64_t t, int64_t d) {
  if (d < 0) return t > static_cast<uint64_t>(-d) ? t - static_cast<uint64_t>(-d) : 0;
  return t + static_cast<uint64_t>(d);
}
}  // namespace

void ViewController::zoom(double factor, uint64_t anchor) {
  anchor = std::clamp(anchor, state_.t0, state_.t1);
  const double span = static_cast<double>(state_.t1 - state_.t0);
  const double left = static_cast<double>(anchor - state_.t0) * factor;
  const uint64_t new_span = std::max<uint64_t>(kMinSpanNs, static_cast<uint64_t>(span * factor));
  const uint64_t t0 = shift(anchor, -static_cast<int64_t>(left));
  set_range(t0, t0 + new_span);
}

void ViewController::pan(double fraction) {
  const uint64_t span = state_.t1 - state_.t0;
  const uint64_t t0 = shift(state_.t0, static_cast<int64_t>(static_cast<double>(span) * fraction));
  set_range(t0, t0 + span);
}

void ViewController::fit() {
  set_range(min_t_, max_t_);
}

void ViewController::set_flow(uint32_t flow) {
  if (flow == state_.flow) return;
  state_.flow = flow;
  state_.highlight_lane = kNone;  // lane indices are per flow
  emit flow_changed(flow);
  emit changed();
}

void ViewController::set_filter(const Filter& filter) {
  state_.filter = filter;
  emit changed();
  emit selection_changed();
}

void ViewController::select_frame(uint32_t frame, bool reveal) {
  if (!model_) return;
  const auto& frames = model_->frames();
  if (frame != kNone && frame >= frames.size()) return;
  state_.selected_frame = frame;
  if (frame != kNone) {
    const FrameInfo& f = frames[frame];
    if (f.flow != kNone && f.flow != state_.flow) {
      state_.flow = f.flow;
      emit flow_changed(f.flow);
    }
    if (reveal) {
      // Centre the frame; keep the zoom unless it shows more than 1/20 of the capture, in which
      // case zoom in so that the frame's neighbours can be told apart.
      uint64_t span = state_.t1 - state_.t0;
      span = std::min<uint64_t>(span, std::max<uint64_t>((max_t_ - min_t_) / 20, 2000));
      const uint64_t t0 = f.ts_ns > span / 2 ? f.ts_ns - span / 2 : 0;
      state_.t0 = std::max(min_t_, t0);
      state_.t1 = state_.t0 + span;
    }
  }
  emit frame_selected(frame);
  emit changed();
}

void ViewController::set_selection(uint64_t a, uint64_t b) {
  if (b < a) std::swap(a, b);
  state_.has_selection = true;
  state_.sel_from = a;
  state_.sel_to = b;
  emit selection_changed();
  emit changed();
}

void ViewController::clear_selection() {
  if (!state_.has_selection) return;
  state_.has_selection = false;
  emit selection_changed();
  emit changed();
}

void ViewController::set_highlighted(std::vector<uint32_t> frames) {
  state_.highlighted = std::move(frames);
  state_.focus_lanes.clear();
  state_.focus_intervals.clear();
  emit changed();
}

void ViewController::set_focus(std::vector<uint32_t> frames, std::vector<uint32_t> lanes,
                               std::vector<std::pair<uint64_t, uint64_t>> intervals) {
  state_.highlighted = std::move(frames);
  state_.focus_lanes = std::move(lanes);
  state_.focus_intervals = std::move(intervals);
  emit changed();
}

void ViewController::set_highlight_lane(uint32_t lane) {
  if (lane == state_.highlight_lane) return;
  state_.highlight_lane = lane;
  emit changed();
}

void ViewController::set_goodput_window(uint64_t ns) {
  state_.goodput_window_ns = ns;
  emit changed();
}

// ---------------------------------------------------------------------------------------------
ViewWidget::ViewWidget(ViewController* controller, ViewKind kind, QWidget* parent)
    : QWidget(parent), c_(controller), kind_(kind) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAttribute(Qt::WA_OpaquePaintEvent);
  connect(c_, &ViewController::changed, this, qOverload<>(&QWidget::update));
}

QSize ViewWidget::sizeHint() const {
  return kind_ == ViewKind::kTimeline ? QSize(1000, 380) : QSize(1000, 300);
}
QSize ViewWidget::minimumSizeHint() const {
  return QSize(400, 160);
}

QRect ViewWidget::plot_rect() const {
  switch (kind_) {
    case ViewKind::kTimeline:
      return timeline_.plot;
    case ViewKind::kSequence:
      return sequence_.plot;
    case ViewKind::kSeries:
      return series_.goodput.plot;
  }
  return rect();
}

uint32_t ViewWidget::frame_at(QPoint pt) const {
  const ViewModel* m = c_->model();
  if (!m) return kNone;
  switch (kind_) {
    case ViewKind::kTimeline:
      return hit_timeline(*m, c_->state(), timeline_, pt);
    case ViewKind::kSequence:
      return hit_sequence(*m, c_->state(), sequence_, pt);
    case ViewKind::kSeries:
      return hit_series(*m, c_->state(), series_, pt).frame;
  }
  return kNone;
}

void ViewWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing, true);
  const ViewModel* m = c_->model();
  if (!m) {
    p.fillRect(rect(), Qt::white);
    p.setPen(Qt::darkGray);
    p.drawText(rect(), Qt::AlignCenter, tr("Open a capture (File > Open)"));
    return;
  }
  switch (kind_) {
    case ViewKind::kTimeline:
      paint_timeline(p, *m, c_->state(), rect(), &timeline_);
      break;
    case ViewKind::kSequence:
      paint_sequence(p, *m, c_->state(), rect(), &sequence_);
      break;
    case ViewKind::kSeries:
      paint_series(p, *m, c_->state(), rect(), &series_);
      break;
  }
}

void ViewWidget::wheelEvent(QWheelEvent* e) {
  const QRect plot = plot_rect();
  if (plot.width() <= 0) return;
  const double steps = e->angleDelta().y() / 120.0;
  if (e->modifiers() & Qt::ShiftModifier) {
    c_->pan(-steps * 0.15);
  } else {
    const uint64_t anchor = t_of(c_->state(), plot, e->position().x());
    c_->zoom(std::pow(0.8, steps), anchor);
  }
  e->accept();
}

void ViewWidget::mousePressEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  press_pos_ = e->position().toPoint();
  press_t0_ = c_->state().t0;
  press_t1_ = c_->state().t1;
  moved_ = false;
  drag_ = (e->modifiers() & Qt::ShiftModifier) ? Drag::kSelect : Drag::kPan;
}

void ViewWidget::mouseMoveEvent(QMouseEvent* e) {
  const QPoint pos = e->position().toPoint();
  const QRect plot = plot_rect();
  if (drag_ == Drag::kIdle) {
    const ViewModel* m = c_->model();
    if (m && kind_ == ViewKind::kTimeline && pos.x() < plot.left()) {
      // Over a lane label: the whole label (it may be elided) and what a click does.
      for (const auto& row : timeline_.rows)
        if (pos.y() >= row.y && pos.y() < row.y + row.h)
          emit hover_text(row.label + tr("   (click: highlight this EV on every view)"));
      return;
    }
    if (m && plot.width() > 0 && pos.x() >= plot.left() && pos.x() <= plot.right()) {
      const uint64_t t = t_of(c_->state(), plot, pos.x());
      QString text = QStringLiteral("t = +%1").arg(
          QString::fromStdString(format_time_ns(t - std::min(t, m->first_ns()))));
      if (kind_ == ViewKind::kTimeline && c_->state().flow < m->flows().size()) {
        const Flow& f = m->flows()[c_->state().flow];
        for (const auto& row : timeline_.rows) {
          if (pos.y() < row.y || pos.y() >= row.y + row.h) continue;
          const Lane& l = f.lanes[row.lane];
          text += QStringLiteral("   %1").arg(QString::fromStdString(l.label()));
          for (const EvSpan& sp : l.states)
            if (t >= sp.from_ns && t < sp.until_ns)
              text += QStringLiteral(" (%1)").arg(
                  QString::fromUtf8(ev_state_label(sp.state).data(),
                                    static_cast<int>(ev_state_label(sp.state).size())));
          // Log marks under the pointer: state changes with their reason, drops with their link.
          const uint64_t lo = t_of(c_->state(), plot, pos.x() - 4);
          const uint64_t hi = t_of(c_->state(), plot, pos.x() + 4);
          for (uint32_t ei : l.ext) {
            const ExtMark& em = f.ext[ei];
            if (em.ts_ns >= lo && em.ts_ns <= hi)
              text += QStringLiteral("   [%1 at +%2]")
                          .arg(QString::fromStdString(em.text),
                               QString::fromStdString(
                                   format_time_ns(em.ts_ns - std::min(em.ts_ns, m->first_ns()))));
          }
        }
      }
      if (kind_ == ViewKind::kSeries) {
        // Value, EV and time of what is under the pointer.
        emit hover_text(hit_series(*m, c_->state(), series_, pos).text);
        return;
      }
      const uint32_t fr = frame_at(pos);
      if (fr != kNone)
        text += QStringLiteral("   frame %1: %2")
                    .arg(fr + 1)
                    .arg(QString::fromStdString(m->summary(fr)).trimmed());
      emit hover_text(text);
    }
    return;
  }
  if ((pos - press_pos_).manhattanLength() > 3) moved_ = true;
  if (!moved_ || plot.width() <= 0) return;
  if (drag_ == Drag::kPan) {
    const double span = static_cast<double>(press_t1_ - press_t0_);
    const double dt = (pos.x() - press_pos_.x()) * span / plot.width();
    const uint64_t t0 = shift(press_t0_, -static_cast<int64_t>(dt));
    c_->set_range(t0, t0 + (press_t1_ - press_t0_));
  } else {
    ViewState at_press = c_->state();
    at_press.t0 = press_t0_;
    at_press.t1 = press_t1_;
    c_->set_selection(t_of(at_press, plot, press_pos_.x()), t_of(at_press, plot, pos.x()));
  }
}

void ViewWidget::mouseReleaseEvent(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  if (!moved_ && drag_ != Drag::kIdle && kind_ == ViewKind::kTimeline &&
      e->position().x() < timeline_.plot.left()) {
    // A click on a lane label toggles the EV's highlight.
    const int y = e->position().toPoint().y();
    for (const auto& row : timeline_.rows)
      if (y >= row.y && y < row.y + row.h)
        c_->set_highlight_lane(c_->state().highlight_lane == row.lane ? kNone : row.lane);
    drag_ = Drag::kIdle;
    return;
  }
  if (!moved_ && drag_ != Drag::kIdle) {
    const uint32_t fr = frame_at(e->position().toPoint());
    if (fr != kNone) c_->select_frame(fr, false);
  }
  drag_ = Drag::kIdle;
}

void ViewWidget::mouseDoubleClickEvent(QMouseEvent*) {
  c_->fit();
}

void ViewWidget::keyPressEvent(QKeyEvent* e) {
  const uint64_t mid = (c_->state().t0 + c_->state().t1) / 2;
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      c_->zoom(0.5, mid);
      break;
    case Qt::Key_Minus:
      c_->zoom(2.0, mid);
      break;
    case Qt::Key_Left:
      c_->pan(-0.2);
      break;
    case Qt::Key_Right:
      c_->pan(0.2);
      break;
    case Qt::Key_Home:
      c_->fit();
      break;
    case Qt::Key_Escape:
      c_->clear_selection();
      break;
    default:
      QWidget::keyPressEvent(e);
      return;
  }
  e->accept();
}

}  // namespace mrc::view
