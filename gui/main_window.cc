#include "gui/main_window.h"

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QDockWidget>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHeaderView>
#include <QInputDialog>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMouseEvent>
#include <QPlainTextEdit>
#include <QRegularExpression>
#include <QSplitter>
#include <QStatusBar>
#include <QTableWidget>
#include <QTextBrowser>
#include <QToolBar>
#include <QToolButton>
#include <QTreeWidget>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <set>

namespace mrc::view {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}
QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<int>(s.size()));
}

QString hex_dump(wire::Bytes b) {
  QString out;
  out.reserve(static_cast<int>(b.size() * 4 + 64));
  char line[100];
  for (size_t off = 0; off < b.size(); off += 16) {
    int n = std::snprintf(line, sizeof line, "%04zx  ", off);
    for (size_t i = 0; i < 16; ++i) {
      if (off + i < b.size())
        n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "%02x ",
                           static_cast<unsigned>(b[off + i]));
      else
        n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), "   ");
      if (i == 7) line[n++] = ' ';
    }
    line[n++] = ' ';
    for (size_t i = 0; i < 16 && off + i < b.size(); ++i) {
      const auto c = static_cast<unsigned char>(b[off + i]);
      line[n++] = (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
    }
    line[n] = 0;
    out += QString::fromLatin1(line);
    out += '\n';
  }
  return out;
}

// "  BTH: opcode 0xc7 (WRITE_MIDDLE) se 0 ... psn 13045987" -> node "BTH" with (key, value)
// children. Lines that are not "key value" pairs keep their text as one child.
void add_field_line(QTreeWidget* tree, QTreeWidgetItem*& last_top, const QString& raw) {
  const QString line = raw.trimmed();
  if (line.isEmpty()) return;
  const int colon = line.indexOf(QLatin1String(": "));
  const QString name = colon > 0 ? line.left(colon) : line;
  const QString rest = colon > 0 ? line.mid(colon + 2) : QString();
  const bool nested = raw.startsWith(QLatin1String("    ")) && last_top != nullptr;
  auto* item = nested ? new QTreeWidgetItem(last_top) : new QTreeWidgetItem(tree);
  item->setText(0, name);
  item->setText(1, rest);
  if (!nested) last_top = item;
  QStringList tok = rest.split(' ', Qt::SkipEmptyParts);
  QList<QPair<QString, QString>> pairs;
  int i = 0;
  if (tok.size() >= 3 && tok[1] == QLatin1String(">")) {  // "src > dst"
    pairs.append({QStringLiteral("src"), tok[0]});
    pairs.append({QStringLiteral("dst"), tok[2]});
    i = 3;
  }
  bool ok = !rest.contains(',');
  for (; ok && i < tok.size();) {
    if (i + 1 >= tok.size()) {
      ok = false;
      break;
    }
    QString value = tok[i + 1];
    int j = i + 2;
    while (j < tok.size() && tok[j].startsWith('(')) value += ' ' + tok[j++];
    pairs.append({tok[i], value});
    i = j;
  }
  if (!ok || pairs.size() < 2) return;
  for (const auto& [k, v] : pairs) {
    auto* child = new QTreeWidgetItem(item);
    child->setText(0, k);
    child->setText(1, v);
  }
}

// A menu of checkable entries (the Kinds filter) that stays open while entries are toggled.
class StickyMenu : public QMenu {
 public:
  using QMenu::QMenu;

 protected:
  void mouseReleaseEvent(QMouseEvent* e) override {
    QAction* a = actionAt(e->position().toPoint());
    if (a && a->isCheckable() && a->isEnabled()) {
      a->trigger();
      e->accept();
      return;
    }
    QMenu::mouseReleaseEvent(e);
  }
  void keyPressEvent(QKeyEvent* e) override {
    QAction* a = activeAction();
    if (a && a->isCheckable() && a->isEnabled() &&
        (e->key() == Qt::Key_Space || e->key() == Qt::Key_Return || e->key() == Qt::Key_Enter)) {
      a->trigger();
      e->accept();
      return;
    }
    QMenu::keyPressEvent(e);
  }
};

QString html_escape(const QString& s) {
  return s.toHtmlEscaped();
}

}  // namespace

// A label that shows as much of its text as fits, with an ellipsis, instead of overflowing (or
// widening the window past the screen); the whole text is in full_text() and the tooltip.
class ElidedLabel : public QLabel {
 public:
  void set_full_text(const QString& t) {
    full_ = t;
    refresh();
  }
  const QString& full_text() const { return full_; }

 protected:
  void resizeEvent(QResizeEvent* e) override {
    QLabel::resizeEvent(e);
    refresh();
  }

 private:
  void refresh() {
    setText(fontMetrics().elidedText(full_, Qt::ElideRight, std::max(0, width() - 4)));
  }
  QString full_;
};

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  controller_ = new ViewController(this);
  build_ui();
  connect(controller_, &ViewController::frame_selected, this, &MainWindow::update_packet_pane);
  connect(controller_, &ViewController::selection_changed, this,
          &MainWindow::update_selection_stats);
  connect(controller_, &ViewController::changed, this, [this] {
    if (!controller_->state().has_selection) update_selection_stats();
  });
  connect(controller_, &ViewController::flow_changed, this, [this](uint32_t flow) {
    if (populating_) return;
    for (int i = 0; i < qp_combo_->count(); ++i) {
      if (qp_combo_->itemData(i).toUInt() == flow && qp_combo_->currentIndex() != i) {
        populating_ = true;
        qp_combo_->setCurrentIndex(i);
        populating_ = false;
      }
    }
    update_opcode_combo();
    update_selection_stats();
    update_ev_table();
  });
}

MainWindow::~MainWindow() = default;

ViewWidget* MainWindow::view(ViewKind k) const {
  switch (k) {
    case ViewKind::kTimeline:
      return timeline_;
    case ViewKind::kSequence:
      return sequence_;
    case ViewKind::kSeries:
      return series_;
  }
  return nullptr;
}

void MainWindow::build_ui() {
  setWindowTitle(tr("MRC viewer"));
  resize(1500, 950);

  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("&Open capture..."), QKeySequence::Open, this, &MainWindow::open_dialog);
  file->addAction(tr("Open run &directory..."), this, &MainWindow::open_dir_dialog);
  file->addAction(tr("&Export views..."), QKeySequence(tr("Ctrl+E")), this,
                  &MainWindow::export_dialog);
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* viewm = menuBar()->addMenu(tr("&View"));
  viewm->addAction(tr("&Fit whole capture"), QKeySequence(Qt::Key_Home), controller_,
                   &ViewController::fit);
  viewm->addAction(tr("Zoom &in"), QKeySequence::ZoomIn, this, [this] {
    controller_->zoom(0.5, (controller_->state().t0 + controller_->state().t1) / 2);
  });
  viewm->addAction(tr("Zoom &out"), QKeySequence::ZoomOut, this, [this] {
    controller_->zoom(2.0, (controller_->state().t0 + controller_->state().t1) / 2);
  });
  viewm->addAction(tr("&Clear range selection"), controller_, &ViewController::clear_selection);
  viewm->addAction(tr("Clear EV &highlight"), this,
                   [this] { controller_->set_highlight_lane(kNone); });

  // Navigation: go to a frame / time / PSN; next and previous of a kind. Letter shortcuts do not
  // fire while a text field has the focus (it takes the letters), so typing a filter is safe.
  QMenu* go = menuBar()->addMenu(tr("&Go"));
  go->addAction(tr("&Go to frame / time / PSN..."), QKeySequence(tr("Ctrl+G")), this,
                &MainWindow::go_to_dialog);
  go->addSeparator();
  const std::pair<NavKind, Qt::Key> nav[] = {{NavKind::kRetransmit, Qt::Key_R},
                                             {NavKind::kTrim, Qt::Key_T},
                                             {NavKind::kNack, Qt::Key_K},
                                             {NavKind::kStateChange, Qt::Key_S},
                                             {NavKind::kDrop, Qt::Key_D}};
  for (const auto& [kind, key] : nav) {
    const QString name = qs(nav_kind_label(kind));
    go->addAction(tr("Next %1").arg(name), QKeySequence(key), this,
                  [this, k = kind] { step(k, true); });
    go->addAction(tr("Previous %1").arg(name), QKeySequence(Qt::SHIFT | key), this,
                  [this, k = kind] { step(k, false); });
  }
  help_menu_ = menuBar()->addMenu(tr("&Help"));
  help_menu_->addAction(tr("&Keyboard and mouse"), QKeySequence::HelpContents, this, [this] {
    QMessageBox::information(this, tr("Keyboard and mouse"), shortcuts_text());
  });

  QToolBar* tb = addToolBar(tr("Filters"));
  tb->setObjectName("filters");
  tb->addWidget(new QLabel(tr(" QP ")));
  qp_combo_ = new QComboBox;
  qp_combo_->setMinimumContentsLength(36);
  qp_combo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  tb->addWidget(qp_combo_);
  connect(qp_combo_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this](int i) {
    if (populating_ || i < 0) return;
    controller_->set_flow(qp_combo_->itemData(i).toUInt());
  });
  tb->addWidget(new QLabel(tr("  Plane ")));
  plane_combo_ = new QComboBox;
  tb->addWidget(plane_combo_);
  tb->addWidget(new QLabel(tr("  EVs ")));
  ev_edit_ = new QLineEdit;
  ev_edit_->setPlaceholderText(tr("all (or 0xe0010004, 0xe0020001)"));
  ev_edit_->setMinimumWidth(200);
  tb->addWidget(ev_edit_);
  tb->addWidget(new QLabel(tr("  Opcode ")));
  opcode_combo_ = new QComboBox;
  tb->addWidget(opcode_combo_);
  kinds_button_ = new QToolButton;
  kinds_button_->setText(tr("Kinds"));
  kinds_button_->setPopupMode(QToolButton::InstantPopup);
  auto* kinds_menu = new StickyMenu(kinds_button_);
  for (size_t k = 0; k < kMarkKindCount; ++k) {
    QAction* a = kinds_menu->addAction(qs(mark_kind_label(static_cast<MarkKind>(k))));
    a->setCheckable(true);
    a->setChecked(true);
    a->setData(static_cast<int>(k));
    connect(a, &QAction::toggled, this, &MainWindow::filters_changed);
  }
  kinds_button_->setMenu(kinds_menu);
  tb->addWidget(new QLabel(tr("  ")));
  tb->addWidget(kinds_button_);
  tb->addWidget(new QLabel(tr("  Goodput avg (us, 0 = auto) ")));
  window_spin_ = new QDoubleSpinBox;
  window_spin_->setRange(0, 1e7);
  window_spin_->setDecimals(1);
  window_spin_->setValue(0);
  tb->addWidget(window_spin_);
  connect(window_spin_, qOverload<double>(&QDoubleSpinBox::valueChanged), this,
          [this](double us) { controller_->set_goodput_window(static_cast<uint64_t>(us * 1000)); });
  connect(plane_combo_, qOverload<int>(&QComboBox::currentIndexChanged), this,
          &MainWindow::filters_changed);
  connect(opcode_combo_, qOverload<int>(&QComboBox::currentIndexChanged), this,
          &MainWindow::filters_changed);
  connect(ev_edit_, &QLineEdit::editingFinished, this, &MainWindow::filters_changed);
  // Return applies the EV filter and gives the keys back to the views (arrows pan, not move the
  // text cursor).
  connect(ev_edit_, &QLineEdit::returnPressed, this, [this] { timeline_->setFocus(); });

  timeline_ = new ViewWidget(controller_, ViewKind::kTimeline);
  sequence_ = new ViewWidget(controller_, ViewKind::kSequence);
  series_ = new ViewWidget(controller_, ViewKind::kSeries);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(timeline_);
  split->addWidget(sequence_);
  split->addWidget(series_);
  split->setStretchFactor(0, 4);
  split->setStretchFactor(1, 3);
  split->setStretchFactor(2, 3);
  setCentralWidget(split);

  status_ = new ElidedLabel;
  // Ignored width: a long status elides instead of widening the window past the screen.
  status_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  status_->setMinimumWidth(1);
  statusBar()->addWidget(status_, 1);
  auto* loaded = new QToolButton;
  loaded->setText(tr("Loaded..."));
  loaded->setToolTip(tr("What was loaded, and what was looked for and is missing"));
  connect(loaded, &QToolButton::clicked, this,
          [this] { QMessageBox::information(this, tr("Loaded"), loaded_text()); });
  statusBar()->addPermanentWidget(loaded);
  for (ViewWidget* w : {timeline_, sequence_, series_})
    connect(w, &ViewWidget::hover_text, statusBar(), [this](const QString& t) {
      statusBar()->showMessage(statusBar()->fontMetrics().elidedText(
          t, Qt::ElideRight, std::max(50, statusBar()->width() - 120)));
    });

  const QFont mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  violations_ = new QTreeWidget;
  violations_->setHeaderLabels({tr("Rule / evidence"), tr("Statement / message")});
  violations_->header()->setStretchLastSection(true);
  violations_->setColumnWidth(0, 210);
  connect(violations_, &QTreeWidget::currentItemChanged, this,
          [this](QTreeWidgetItem* cur, QTreeWidgetItem*) { on_violation(cur); });
  auto* vdock = new QDockWidget(tr("Violations (checker report)"), this);
  vdock->setObjectName("violations");
  vdock->setWidget(violations_);
  addDockWidget(Qt::RightDockWidgetArea, vdock);

  auto* packet = new QSplitter(Qt::Vertical);
  // What the index knows, its fate first; scrolls, and links to related frames.
  packet_info_ = new QTextBrowser;
  packet_info_->setOpenLinks(false);
  packet_info_->setOpenExternalLinks(false);
  packet_info_->setFont(mono);
  connect(packet_info_, &QTextBrowser::anchorClicked, this, [this](const QUrl& u) {
    bool ok = false;
    const uint32_t n = u.path().toUInt(&ok);
    if (u.scheme() == QLatin1String("frame") && ok && n > 0) controller_->select_frame(n - 1, true);
  });
  packet_tree_ = new QTreeWidget;
  packet_tree_->setHeaderLabels({tr("Field"), tr("Value")});
  packet_tree_->setColumnWidth(0, 140);
  hex_ = new QPlainTextEdit;
  hex_->setReadOnly(true);
  hex_->setFont(mono);
  hex_->setLineWrapMode(QPlainTextEdit::NoWrap);
  packet->addWidget(packet_info_);
  packet->addWidget(packet_tree_);
  packet->addWidget(hex_);
  packet->setStretchFactor(0, 3);
  packet->setStretchFactor(1, 3);
  packet->setStretchFactor(2, 1);
  auto* pdock = new QDockWidget(tr("Packet"), this);
  pdock->setObjectName("packet");
  pdock->setWidget(packet);
  addDockWidget(Qt::RightDockWidgetArea, pdock);

  selection_text_ = new QPlainTextEdit;
  selection_text_->setReadOnly(true);
  selection_text_->setFont(mono);
  // Statistics follow the EV / plane filter but not the display filters (kinds, opcode).
  auto* sdock = new QDockWidget(tr("Statistics (visible range, or shift+drag; all kinds)"), this);
  sdock->setObjectName("selection");
  sdock->setWidget(selection_text_);
  addDockWidget(Qt::RightDockWidgetArea, sdock);

  // Per-EV figures over the whole capture; sortable; selecting rows filters to those EVs, a
  // double-click highlights the EV on every view.
  ev_table_ = new QTableWidget;
  ev_table_->setColumnCount(11);
  ev_table_->setHorizontalHeaderLabels({tr("EV"), tr("plane"), tr("path"), tr("packets"),
                                        tr("retx"), tr("drops"), tr("trims"), tr("RTT p50 us"),
                                        tr("RTT p99 us"), tr("SKIP us"), tr("ASSUMED_BAD us")});
  ev_table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  ev_table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  ev_table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  ev_table_->setSortingEnabled(true);
  ev_table_->verticalHeader()->setVisible(false);
  connect(ev_table_, &QTableWidget::itemSelectionChanged, this,
          &MainWindow::ev_table_selection_changed);
  connect(ev_table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    const uint32_t lane = ev_table_->item(row, 0)->data(Qt::UserRole + 1).toUInt();
    controller_->set_highlight_lane(controller_->state().highlight_lane == lane ? kNone : lane);
  });
  auto* edock = new QDockWidget(tr("EVs (whole capture; select to filter, double-click to "
                                   "highlight)"),
                                this);
  edock->setObjectName("evs");
  ev_dock_ = edock;
  edock->setWidget(ev_table_);
  addDockWidget(Qt::RightDockWidgetArea, edock);
  tabifyDockWidget(sdock, edock);
  sdock->raise();
  resizeDocks({vdock, pdock, sdock}, {420, 420, 420}, Qt::Horizontal);
  resizeDocks({vdock, pdock, sdock}, {180, 480, 200}, Qt::Vertical);
}

bool MainWindow::open(const LoadOptions& opts, QString& error) {
  auto m = std::make_shared<ViewModel>();
  std::string err;
  QApplication::setOverrideCursor(Qt::WaitCursor);
  const bool ok = m->load(opts, err);
  QApplication::restoreOverrideCursor();
  if (!ok) {
    error = qs(err);
    return false;
  }
  model_ = std::move(m);
  populate();
  return true;
}

void MainWindow::populate() {
  populating_ = true;
  const ViewModel& m = *model_;
  setWindowTitle(tr("MRC viewer - %1").arg(qs(m.capture_path())));
  qp_combo_->clear();
  for (uint32_t i = 0; i < m.flows().size(); ++i) {
    const Flow& f = m.flows()[i];
    qp_combo_->addItem(
        QStringLiteral("#%1 %2 (%3 frames)").arg(i).arg(qs(f.label())).arg(f.frames.size()), i);
  }
  std::set<uint8_t> planes;
  for (const Flow& f : m.flows())
    for (uint8_t p : f.planes) planes.insert(p);
  plane_combo_->clear();
  plane_combo_->addItem(tr("all"), 0);
  for (uint8_t p : planes) plane_combo_->addItem(tr("plane %1").arg(p), p);
  ev_edit_->clear();

  violations_->clear();
  for (size_t r = 0; r < m.violations().size(); ++r) {
    const Violation& v = m.violations()[r];
    auto* item = new QTreeWidgetItem(violations_);
    item->setText(
        0, QStringLiteral("[%1] %2 (%3)").arg(qs(v.status).toUpper(), qs(v.id)).arg(v.count));
    item->setText(1, qs(v.statement));
    item->setToolTip(1, qs(v.statement));
    item->setData(0, Qt::UserRole, static_cast<int>(r));
    item->setData(0, Qt::UserRole + 1, -1);
    item->setForeground(0,
                        v.status == "fail" ? QColor(0xb0, 0x10, 0x10) : QColor(0xa0, 0x60, 0x00));
    for (size_t e = 0; e < v.evidence.size(); ++e) {
      const Evidence& ev = v.evidence[e];
      auto* child = new QTreeWidgetItem(item);
      QString where = ev.frame_no ? QStringLiteral("%1 frame %2")
                                        .arg(QFileInfo(qs(ev.file)).fileName())
                                        .arg(*ev.frame_no)
                                  : QStringLiteral("(log)");
      if (ev.frame != kNone && ev.by_time)
        where += tr(" ~ frame %1 here (by time)").arg(ev.frame + 1);
      child->setText(0, where);
      child->setText(1, qs(ev.message));
      child->setToolTip(1, qs(ev.message));
      child->setData(0, Qt::UserRole, static_cast<int>(r));
      child->setData(0, Qt::UserRole + 1, static_cast<int>(e));
    }
  }
  if (m.violations().empty()) {
    auto* item = new QTreeWidgetItem(violations_);
    item->setText(0, m.options().report.empty() ? tr("no checker report loaded")
                                                : tr("the report has no failed or warned rule"));
    item->setData(0, Qt::UserRole, -1);
  }
  violations_->expandAll();

  const LoadStats& st = m.stats();
  QString status = tr("%1 frames (%2 RoCE) indexed in %3 ms, logs %4 ms; %5 QP flows")
                       .arg(st.frames)
                       .arg(st.roce_frames)
                       .arg(st.index_ms, 0, 'f', 0)
                       .arg(st.logs_ms, 0, 'f', 0)
                       .arg(m.flows().size());
  QStringList arts;
  if (!m.options().event_logs.empty())
    arts << tr("%1 event log(s)").arg(m.options().event_logs.size());
  if (!m.options().decision_logs.empty())
    arts << tr("%1 decision log(s)").arg(m.options().decision_logs.size());
  if (!m.options().report.empty()) arts << tr("report");
  if (!m.paths().empty()) arts << tr("path table (%1 paths)").arg(m.paths().size());
  if (!arts.isEmpty()) status += QStringLiteral("; ") + arts.join(QStringLiteral(", "));
  if (!m.run().dir.empty() && !m.run().missing.empty())
    status += tr("; missing: %1").arg(m.run().missing.size());
  if (!m.warnings().empty())
    status +=
        tr("; %1 warning(s), first: %2").arg(m.warnings().size()).arg(qs(m.warnings().front()));
  status_->set_full_text(status);
  status_->setToolTip(qs([&] {
    // What was loaded, what was looked for and not found, then the warnings.
    std::string all;
    for (const auto& f : m.run().found) all += "loaded " + f + "\n";
    for (const auto& f : m.run().missing) all += "missing " + f + "\n";
    for (const auto& w : m.warnings()) all += w + "\n";
    return all;
  }()));
  populating_ = false;

  controller_->set_model(model_);
  update_opcode_combo();
  update_packet_pane(kNone);
  update_selection_stats();
  update_ev_table();
}

void MainWindow::show_ev_table() {
  ev_dock_->raise();
}

QLabel* MainWindow::status_label() const {
  return status_;
}
QString MainWindow::status_full_text() const {
  return status_->full_text();
}
QMenu* MainWindow::kinds_menu() const {
  return kinds_button_->menu();
}

QString MainWindow::shortcuts_text() const {
  // From the menus themselves, so the list cannot drift from what the keys do.
  QStringList lines;
  lines << tr("Menus:");
  for (QAction* top : menuBar()->actions()) {
    if (!top->menu()) continue;
    for (QAction* a : top->menu()->actions())
      if (!a->shortcut().isEmpty())
        lines << QStringLiteral("  %1\t%2")
                     .arg(a->shortcut().toString(QKeySequence::NativeText), a->text().remove('&'));
  }
  lines << tr("In the views:") << tr("  wheel\tzoom around the pointer") << tr("  shift+wheel\tpan")
        << tr("  drag\tpan") << tr("  shift+drag\tselect a time range")
        << tr("  click\tselect the frame under the pointer (series: nearest sample / frame)")
        << tr("  click a lane label\thighlight that EV on every view (again: clear)")
        << tr("  double-click\tfit the whole capture") << tr("  + / -\tzoom in / out")
        << tr("  Left / Right\tpan") << tr("  Home\tfit") << tr("  Esc\tclear the range selection")
        << tr("In the EV table:") << tr("  select rows\tfilter to those EVs")
        << tr("  double-click\thighlight the EV") << tr("  click a header\tsort");
  return lines.join('\n');
}

bool MainWindow::go_to(const QString& spec, QString& error) {
  if (!model_) {
    error = tr("nothing loaded");
    return false;
  }
  std::string err;
  const auto t = model_->go_to(controller_->state().flow, spec.toStdString(), err);
  if (!t) {
    error = qs(err);
    return false;
  }
  controller_->select_frame(t->frame, true);
  if (isVisible()) statusBar()->showMessage(tr("went to %1").arg(qs(t->what)), 5000);
  return true;
}

bool MainWindow::step(NavKind kind, bool forward) {
  if (!model_) return false;
  const ViewState& s = controller_->state();
  uint64_t ts = forward ? s.t0 : s.t1;
  uint32_t frame = kNone;
  if (s.selected_frame < model_->frames().size()) {
    ts = model_->frames()[s.selected_frame].ts_ns;
    frame = s.selected_frame;
  } else if (!forward) {
    frame = UINT32_MAX - 1;  // after every frame of the instant
  }
  const auto t = model_->navigate(s.flow, kind, forward, ts, frame, s.filter);
  if (!t) {
    if (isVisible())
      statusBar()->showMessage(
          tr("no %1 %2").arg(forward ? tr("later") : tr("earlier"), qs(nav_kind_label(kind))),
          5000);
    return false;
  }
  if (t->frame != kNone) {
    controller_->select_frame(t->frame, true);
  } else {
    // A log entry without a frame: centre it, select the frame nearest to it.
    const uint64_t span = s.t1 - s.t0;
    controller_->set_range(t->ts_ns > span / 2 ? t->ts_ns - span / 2 : 0, t->ts_ns + span / 2);
    controller_->select_frame(model_->frame_near(t->ts_ns), false);
  }
  if (isVisible()) statusBar()->showMessage(qs(t->what), 5000);
  return true;
}

void MainWindow::go_to_dialog() {
  bool ok = false;
  const QString spec =
      QInputDialog::getText(this, tr("Go to"),
                            tr("Frame number (123), time after the first frame (+1.5ms) or PSN "
                               "(psn 0x1234, psn +5):"),
                            QLineEdit::Normal, QString(), &ok);
  if (!ok || spec.trimmed().isEmpty()) return;
  QString err;
  if (!go_to(spec, err)) QMessageBox::warning(this, tr("Go to"), err);
}

void MainWindow::update_ev_table() {
  const QSignalBlocker block(ev_table_);
  ev_table_->setSortingEnabled(false);
  ev_table_->setRowCount(0);
  if (!model_) return;
  const uint32_t flow = controller_->state().flow;
  if (flow >= model_->flows().size()) return;
  const Flow& f = model_->flows()[flow];
  const auto rows = model_->ev_stats(flow, 0, UINT64_MAX);
  ev_table_->setRowCount(static_cast<int>(rows.size()));
  const auto num = [](double v) {
    auto* it = new QTableWidgetItem;
    it->setData(Qt::DisplayRole, v);
    it->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
    return it;
  };
  const auto us = [](uint64_t ns) { return std::round(static_cast<double>(ns) / 100.0) / 10.0; };
  for (size_t r = 0; r < rows.size(); ++r) {
    const EvStats& e = rows[r];
    const int row = static_cast<int>(r);
    auto* ev = new QTableWidgetItem(qs(format_wev(e.wev)));
    ev->setData(Qt::UserRole, e.wev);
    ev->setData(Qt::UserRole + 1, e.lane);
    ev->setData(Qt::DecorationRole, lane_color(f, e.lane));
    ev_table_->setItem(row, 0, ev);
    ev_table_->setItem(row, 1, num(e.plane));
    QString path;
    if (const PathEntry* p = model_->lane_path(flow, e.lane)) {
      QStringList usids;
      for (const auto& u : p->usids) usids << qs(u);
      path = QStringLiteral("T1 %1: %2").arg(p->t1).arg(usids.join(' '));
    }
    if (e.idle) path += path.isEmpty() ? tr("idle") : tr(" (idle)");
    ev_table_->setItem(row, 2, new QTableWidgetItem(path));
    ev_table_->setItem(row, 3, num(static_cast<double>(e.packets)));
    ev_table_->setItem(row, 4, num(static_cast<double>(e.retransmissions)));
    ev_table_->setItem(row, 5, num(static_cast<double>(e.drops)));
    ev_table_->setItem(row, 6, num(static_cast<double>(e.trims)));
    ev_table_->setItem(row, 7, num(us(e.rtt_p50_ns)));
    ev_table_->setItem(row, 8, num(us(e.rtt_p99_ns)));
    ev_table_->setItem(row, 9, num(us(e.skip_ns)));
    ev_table_->setItem(row, 10, num(us(e.assumed_bad_ns)));
    if (e.idle)
      for (int c = 0; c < ev_table_->columnCount(); ++c)
        ev_table_->item(row, c)->setForeground(QColor(0x99, 0x99, 0x99));
  }
  ev_table_->setSortingEnabled(true);
  ev_table_->resizeColumnsToContents();
}

void MainWindow::ev_table_selection_changed() {
  if (!model_) return;
  QStringList evs;
  for (const QModelIndex& i : ev_table_->selectionModel()->selectedRows(0))
    evs << qs(format_wev(ev_table_->item(i.row(), 0)->data(Qt::UserRole).toUInt()));
  ev_edit_->setText(evs.join(QStringLiteral(", ")));
  filters_changed();
}

void MainWindow::update_opcode_combo() {
  if (!model_) return;
  const bool was = populating_;
  populating_ = true;
  const QVariant keep = opcode_combo_->currentData();
  opcode_combo_->clear();
  opcode_combo_->addItem(tr("all"), -1);
  const uint32_t flow = controller_->state().flow;
  if (flow < model_->flows().size()) {
    std::set<uint8_t> ops;
    for (uint32_t i : model_->flows()[flow].frames) ops.insert(model_->frames()[i].opcode);
    for (uint8_t op : ops) {
      const wire::OpcodeInfo* info = wire::mrp0().opcode_info(op);
      opcode_combo_->addItem(QStringLiteral("0x%1 %2")
                                 .arg(op, 2, 16, QChar('0'))
                                 .arg(info ? qs(info->name) : QString()),
                             op);
    }
  }
  const int idx = opcode_combo_->findData(keep);
  opcode_combo_->setCurrentIndex(idx >= 0 ? idx : 0);
  populating_ = was;
}

void MainWindow::filters_changed() {
  if (populating_ || !model_) return;
  Filter f;
  f.plane = static_cast<uint8_t>(plane_combo_->currentData().toUInt());
  const int op = opcode_combo_->currentData().toInt();
  if (op >= 0) f.opcode = static_cast<uint8_t>(op);
  for (const QString& t :
       ev_edit_->text().split(QRegularExpression(QStringLiteral("[,\\s]+")), Qt::SkipEmptyParts)) {
    bool ok = false;
    const uint32_t v = t.toUInt(&ok, 0);
    if (ok) f.evs.push_back(v);
  }
  f.kinds = 0;
  for (QAction* a : kinds_button_->menu()->actions())
    if (a->isChecked()) f.kinds |= 1u << a->data().toInt();
  controller_->set_filter(f);
}

void MainWindow::apply_filter(const Filter& f) {
  populating_ = true;
  const int pi = plane_combo_->findData(f.plane);
  if (pi >= 0) plane_combo_->setCurrentIndex(pi);
  QStringList evs;
  for (uint32_t e : f.evs) evs << qs(format_wev(e));
  ev_edit_->setText(evs.join(QStringLiteral(", ")));
  if (f.opcode) {
    const int oi = opcode_combo_->findData(*f.opcode);
    if (oi >= 0) opcode_combo_->setCurrentIndex(oi);
  }
  for (QAction* a : kinds_button_->menu()->actions())
    a->setChecked((f.kinds >> a->data().toInt()) & 1u);
  populating_ = false;
  controller_->set_filter(f);
}

void MainWindow::update_packet_pane(uint32_t frame) {
  packet_tree_->clear();
  if (!model_ || frame == kNone || frame >= model_->frames().size()) {
    packet_info_->setPlainText(tr("Click a mark to see its frame."));
    hex_->clear();
    return;
  }
  const ViewModel& m = *model_;
  // Summary, then what the index knows: kind and fate first (bold when it is not a plain
  // delivery), links to related frames and the SACK's coverage before flow and lane details.
  QString html = QStringLiteral("<div style='white-space:pre-wrap'>");
  html += QStringLiteral("<b>%1</b><br>").arg(html_escape(qs(m.summary(frame)).trimmed()));
  QString links;
  for (const RelatedFrame& r : m.related(frame))
    links += QStringLiteral("%1<a href='frame:%2'>%3: frame %2</a>")
                 .arg(links.isEmpty() ? QString() : QStringLiteral(", "))
                 .arg(r.frame + 1)
                 .arg(html_escape(qs(r.role)));
  const QString coverage = qs(m.sack_coverage(frame));
  bool placed = false;
  const auto place_links = [&] {
    if (placed) return;
    placed = true;
    if (!links.isEmpty()) html += QStringLiteral("related: %1<br>").arg(links);
    if (!coverage.isEmpty()) html += html_escape(coverage) + QStringLiteral("<br>");
  };
  for (const QString& line : qs(m.describe(frame)).split('\n', Qt::SkipEmptyParts)) {
    if (line.startsWith(QLatin1String("flow:"))) place_links();
    const bool key =
        line.startsWith(QLatin1String("fate:")) || line.startsWith(QLatin1String("not counted")) ||
        line.startsWith(QLatin1String("log:")) || line.startsWith(QLatin1String("kind:"));
    html += key ? QStringLiteral("<b>%1</b><br>").arg(html_escape(line))
                : html_escape(line) + QStringLiteral("<br>");
  }
  place_links();
  html += QStringLiteral("</div>");
  packet_info_->setHtml(html);
  QTreeWidgetItem* last_top = nullptr;
  for (const QString& line : qs(m.field_tree(frame)).split('\n', Qt::SkipEmptyParts))
    add_field_line(packet_tree_, last_top, line);
  packet_tree_->expandAll();
  hex_->setPlainText(hex_dump(m.frame_bytes(frame)));
}

void MainWindow::update_selection_stats() {
  if (!model_) {
    selection_text_->clear();
    return;
  }
  const ViewState& s = controller_->state();
  const uint64_t a = s.has_selection ? s.sel_from : s.t0;
  const uint64_t b = s.has_selection ? s.sel_to : s.t1;
  const SelectionStats st = model_->selection_stats(s.flow, a, b, s.filter);
  QString head = s.has_selection ? tr("Selected range") : tr("Visible range");
  head += QStringLiteral(" +%1 .. +%2\n")
              .arg(qs(format_time_ns(a - std::min(a, model_->first_ns()))),
                   qs(format_time_ns(b - std::min(b, model_->first_ns()))));
  selection_text_->setPlainText(head + qs(st.to_text()));
}

void MainWindow::select_violation(int rule, int evidence) {
  for (int i = 0; i < violations_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* top = violations_->topLevelItem(i);
    if (top->data(0, Qt::UserRole).toInt() != rule) continue;
    QTreeWidgetItem* target = top;
    if (evidence >= 0 && evidence < top->childCount()) target = top->child(evidence);
    violations_->setCurrentItem(target);
    return;
  }
}

void MainWindow::on_violation(QTreeWidgetItem* item) {
  if (!item || !model_) return;
  const int r = item->data(0, Qt::UserRole).toInt();
  if (r < 0 || static_cast<size_t>(r) >= model_->violations().size()) return;
  const Violation& v = model_->violations()[static_cast<size_t>(r)];
  int e = item->data(0, Qt::UserRole + 1).toInt();
  // The whole evidence (one line of it when an evidence line is selected): its frames, the lanes
  // it is about, its intervals; the flow it lives in.
  EvidenceFocus focus = model_->evidence_focus(v);
  if (focus.flow != kNone && focus.flow != controller_->state().flow)
    controller_->set_flow(focus.flow);
  controller_->set_focus(focus.frames, focus.lanes, focus.intervals);
  const EvidenceFocus one = e >= 0 ? model_->evidence_focus(v, e) : focus;
  if (!one.intervals.empty()) {
    // Bring the (selected evidence's) interval into view with room for what bounds it.
    const auto [from, to] = one.intervals.front();
    const uint64_t pad = std::max<uint64_t>((to - from) / 2, 1000);
    const ViewState& st = controller_->state();
    if (from < st.t0 || to > st.t1) controller_->set_range(from > pad ? from - pad : 0, to + pad);
  }
  if (e < 0) {
    // The rule itself: jump to its first evidence that names a frame.
    for (size_t k = 0; k < v.evidence.size(); ++k)
      if (v.evidence[k].frame != kNone) {
        e = static_cast<int>(k);
        break;
      }
  }
  if (e >= 0 && static_cast<size_t>(e) < v.evidence.size() &&
      v.evidence[static_cast<size_t>(e)].frame != kNone)
    controller_->select_frame(v.evidence[static_cast<size_t>(e)].frame, one.intervals.empty());
}

void MainWindow::open_dialog() {
  const QString path = QFileDialog::getOpenFileName(
      this, tr("Open capture"), QString(), tr("Captures (*.pcap *.pcapng *.cap);;All files (*)"));
  if (path.isEmpty()) return;
  LoadOptions o;
  o.capture = path.toStdString();
  QString err;
  if (!open(o, err)) QMessageBox::warning(this, tr("Cannot open"), err);
}

QString MainWindow::loaded_text() const {
  if (!model_) return tr("nothing loaded");
  const ViewModel& m = *model_;
  QStringList lines;
  if (!m.run().dir.empty()) {
    for (const auto& f : m.run().found) lines << tr("loaded %1").arg(qs(f));
    for (const auto& f : m.run().missing) lines << tr("missing %1").arg(qs(f));
  } else {
    lines << tr("capture: %1").arg(qs(m.capture_path()));
    for (const auto& f : m.options().event_logs) lines << tr("event log: %1").arg(qs(f));
    for (const auto& f : m.options().decision_logs) lines << tr("decision log: %1").arg(qs(f));
    lines << (m.options().report.empty() ? tr("checker report: none found")
                                         : tr("checker report: %1").arg(qs(m.options().report)));
  }
  for (const auto& w : m.warnings()) lines << tr("warning: %1").arg(qs(w));
  return lines.join(QLatin1Char('\n'));
}

void MainWindow::open_dir_dialog() {
  const QString dir = QFileDialog::getExistingDirectory(this, tr("Open run directory"));
  if (dir.isEmpty()) return;
  // A run of `mrct run` / `mrct suite`: its manifest (or its usual places) says what to load.
  LoadOptions o;
  o.run_dir = dir.toStdString();
  QString err;
  if (!open(o, err)) QMessageBox::warning(this, tr("Cannot open"), err);
}

void MainWindow::export_dialog() {
  if (!model_) return;
  const QString path = QFileDialog::getSaveFileName(
      this, tr("Export views"), QStringLiteral("mrc-view.png"), tr("PNG (*.png);;SVG (*.svg)"));
  if (path.isEmpty()) return;
  ViewState s = controller_->state();
  s.caption = QStringLiteral("%1 - %2").arg(
      QFileInfo(qs(model_->capture_path())).fileName(),
      s.flow < model_->flows().size() ? qs(model_->flows()[s.flow].label()) : QString());
  QString err;
  if (!export_view(*model_, s, "all", QSize(1600, 1500), path, err))
    QMessageBox::warning(this, tr("Export failed"), err);
}

}  // namespace mrc::view
