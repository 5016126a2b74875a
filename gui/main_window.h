// The viewer window: the three views on one time axis, QP selector and filters in the toolbar,
// the checker's violations, the packet pane (what the index knows, field tree, hex) and the
// statistics of the selected time range in docks.
#pragma once

#include <QMainWindow>
#include <memory>

#include "gui/view_model.h"
#include "gui/view_widgets.h"

class QComboBox;
class QLabel;
class QMenu;
class QTableWidget;
class QTextBrowser;
class QLineEdit;
class QPlainTextEdit;
class QToolButton;
class QTreeWidget;
class QTreeWidgetItem;
class QDoubleSpinBox;
class QDockWidget;

namespace mrc::view {

class ElidedLabel;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Loads a capture and its artifacts (on this thread). False with `error` set on failure; the
  // window then keeps what it showed before.
  bool open(const LoadOptions& opts, QString& error);
  // Applies the command line's filters after open().
  void apply_filter(const Filter& filter);

  ViewController* controller() const { return controller_; }
  ViewWidget* view(ViewKind k) const;
  const ViewModel* model() const { return model_.get(); }
  QTreeWidget* violations_tree() const { return violations_; }
  QTreeWidget* packet_tree() const { return packet_tree_; }
  QPlainTextEdit* hex_view() const { return hex_; }
  QPlainTextEdit* selection_text() const { return selection_text_; }
  QComboBox* qp_combo() const { return qp_combo_; }
  QLabel* status_label() const;
  QString status_full_text() const;  // the status line before eliding
  // What the index knows about the selected frame, its fate first, with links to related frames
  // ("frame:N" anchors); scrolls.
  QTextBrowser* packet_info() const { return packet_info_; }
  QTableWidget* ev_table() const { return ev_table_; }
  void show_ev_table();  // raises its tab over the statistics
  QLineEdit* ev_edit() const { return ev_edit_; }
  QMenu* kinds_menu() const;
  QMenu* help_menu() const { return help_menu_; }
  QString shortcuts_text() const;
  // Go to a frame / time / PSN (ViewModel::go_to) and select it; false with `error` set.
  bool go_to(const QString& spec, QString& error);
  // Selects the next (previous) frame or log entry of a kind after the selected frame (or the
  // visible range's start); false when there is none.
  bool step(NavKind kind, bool forward);
  // What was loaded from where, and what was looked for and is missing (File > What was loaded).
  QString loaded_text() const;
  // Selects evidence `evidence` of violation `rule` as a click in the list would (-1: the rule).
  void select_violation(int rule, int evidence);

 private:
  void build_ui();
  void populate();
  void update_packet_pane(uint32_t frame);
  void update_selection_stats();
  void update_opcode_combo();
  void filters_changed();
  void on_violation(QTreeWidgetItem* item);
  void open_dialog();
  void open_dir_dialog();
  void export_dialog();
  void go_to_dialog();
  void update_ev_table();
  void ev_table_selection_changed();

  std::shared_ptr<ViewModel> model_;
  ViewController* controller_ = nullptr;
  ViewWidget* timeline_ = nullptr;
  ViewWidget* sequence_ = nullptr;
  ViewWidget* series_ = nullptr;
  QComboBox* qp_combo_ = nullptr;
  QComboBox* plane_combo_ = nullptr;
  QComboBox* opcode_combo_ = nullptr;
  QLineEdit* ev_edit_ = nullptr;
  QToolButton* kinds_button_ = nullptr;
  QDoubleSpinBox* window_spin_ = nullptr;
  QTreeWidget* violations_ = nullptr;
  QTextBrowser* packet_info_ = nullptr;
  QTableWidget* ev_table_ = nullptr;
  QDockWidget* ev_dock_ = nullptr;
  QMenu* help_menu_ = nullptr;
  QTreeWidget* packet_tree_ = nullptr;
  QPlainTextEdit* hex_ = nullptr;
  QPlainTextEdit* selection_text_ = nullptr;
  ElidedLabel* status_ = nullptr;
  bool populating_ = false;
};

}  // namespace mrc::view
