// The interactive side of the viewer: one controller holds the shared state (QP, time range,
// filters, selected frame, selection range); three widgets draw it with the painters of
// view_render.h and turn mouse and keys into controller calls.
//
// Mouse: wheel zooms around the pointer, drag pans, shift+drag selects a time range, click
// selects the frame under the pointer (on the series: the nearest RTT sample's frame, else the
// nearest frame in time), a click on a lane label highlights that EV everywhere, double-click
// fits. Keys: +/- zoom, arrows pan, Home fits, Esc clears the range selection.
#pragma once

#include <QWidget>
#include <memory>

#include "gui/view_model.h"
#include "gui/view_render.h"

namespace mrc::view {

class ViewController : public QObject {
  Q_OBJECT

 public:
  explicit ViewController(QObject* parent = nullptr);

  void set_model(std::shared_ptr<const ViewModel> model);  // resets the state to fit
  const ViewModel* model() const { return model_.get(); }
  const ViewState& state() const { return state_; }

  void set_range(uint64_t t0, uint64_t t1);
  void zoom(double factor, uint64_t anchor_ns);  // factor < 1 zooms in
  void pan(double fraction);                     // of the visible span; > 0 moves right
  void fit();
  void set_flow(uint32_t flow);
  void set_filter(const Filter& filter);
  // Selects a frame (switching QP when it belongs to another); `reveal` centres it in view.
  void select_frame(uint32_t frame, bool reveal);
  void set_selection(uint64_t a, uint64_t b);
  void clear_selection();
  void set_highlighted(std::vector<uint32_t> frames);
  // A violation's whole evidence: frames ringed, lanes outlined, intervals shaded.
  void set_focus(std::vector<uint32_t> frames, std::vector<uint32_t> lanes,
                 std::vector<std::pair<uint64_t, uint64_t>> intervals);
  void set_goodput_window(uint64_t ns);
  // Emphasises one EV (lane of the current flow) on every view; kNone clears.
  void set_highlight_lane(uint32_t lane);

 signals:
  void changed();
  void flow_changed(uint32_t flow);
  void frame_selected(uint32_t frame);
  void selection_changed();

 private:
  std::shared_ptr<const ViewModel> model_;
  ViewState state_;
  uint64_t min_t_ = 0, max_t_ = 1;
};

class ViewWidget : public QWidget {
  Q_OBJECT

 public:
  ViewWidget(ViewController* controller, ViewKind kind, QWidget* parent = nullptr);
  ViewKind kind() const { return kind_; }
  // The area marks are drawn in (time axis mapping), after the last paint.
  QRect plot_rect() const;
  const TimelineLayout& timeline_layout() const { return timeline_; }
  const PlotLayout& sequence_layout() const { return sequence_; }
  const SeriesLayout& series_layout() const { return series_; }
  uint32_t frame_at(QPoint pt) const;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 signals:
  void hover_text(const QString& text);

 protected:
  void paintEvent(QPaintEvent* e) override;
  void wheelEvent(QWheelEvent* e) override;
  void mousePressEvent(QMouseEvent* e) override;
  void mouseMoveEvent(QMouseEvent* e) override;
  void mouseReleaseEvent(QMouseEvent* e) override;
  void mouseDoubleClickEvent(QMouseEvent* e) override;
  void keyPressEvent(QKeyEvent* e) override;

 private:
  enum class Drag { kIdle, kPan, kSelect };
  ViewController* c_;
  ViewKind kind_;
  TimelineLayout timeline_;
  PlotLayout sequence_;
  SeriesLayout series_;
  Drag drag_ = Drag::kIdle;
  QPoint press_pos_;
  uint64_t press_t0_ = 0, press_t1_ = 0;
  bool moved_ = false;
};

}  // namespace mrc::view
