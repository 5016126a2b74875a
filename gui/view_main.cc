#include "gui/view_main.h"

#include <CLI/CLI.hpp>
#include <QApplication>
#include <QGuiApplication>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "gui/main_window.h"
#include "gui/view_model.h"
#include "gui/view_render.h"

namespace mrc::view {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;

// "150us", "1.5ms", "2s", "800ns", "1200" (ns).
std::optional<uint64_t> parse_time(const std::string& s) {
  return parse_duration_ns(s);
}

struct Args {
  std::string capture;
  std::vector<std::string> events, decisions;
  std::string report, artifacts, wire_profile;
  bool no_detect = false;
  std::string qp;
  std::string export_path;
  std::string view = "timeline";
  std::string size = "1600x900";
  std::string from, to;
  int plane = 0;
  std::string evs, kinds;
  int opcode = -1;
  bool list = false;
  bool stats = false;
  std::string caption;
  bool no_caption = false;
  std::string select_frame;
  std::string go_to;
  std::string highlight;
  bool ev_table = false;
  std::string screenshot;
  int violation = -1;
};

bool build_filter(const Args& a, Filter& f, std::string& error) {
  f.plane = static_cast<uint8_t>(a.plane);
  if (a.opcode >= 0) f.opcode = static_cast<uint8_t>(a.opcode);
  size_t p = 0;
  while (p < a.evs.size()) {
    size_t e = a.evs.find(',', p);
    if (e == std::string::npos) e = a.evs.size();
    const std::string tok = a.evs.substr(p, e - p);
    p = e + 1;
    if (tok.empty()) continue;
    char* end = nullptr;
    const unsigned long v = std::strtoul(tok.c_str(), &end, 0);
    if (!end || *end != 0) {
      error = "--ev: '" + tok + "' is not a number (use 0xe0010004 or decimal)";
      return false;
    }
    f.evs.push_back(static_cast<uint32_t>(v));
  }
  if (!a.kinds.empty()) {
    f.kinds = 0;
    p = 0;
    while (p < a.kinds.size()) {
      size_t e = a.kinds.find(',', p);
      if (e == std::string::npos) e = a.kinds.size();
      const std::string tok = a.kinds.substr(p, e - p);
      p = e + 1;
      if (tok.empty()) continue;
      const auto k = parse_mark_kind(tok);
      if (!k) {
        error = "--kinds: unknown kind '" + tok +
                "' (first_tx, retransmit, trimmed, injector_drop, "
                "sack, nack, probe, ev_state, ack, other, endpoint_op)";
        return false;
      }
      f.kinds |= kind_bit(*k);
    }
  }
  return true;
}

bool apply_range(const Args& a, const ViewModel& m, ViewState& s, std::string& error) {
  if (!a.from.empty()) {
    const auto t = parse_time(a.from);
    if (!t) {
      error = "--from: '" + a.from + "' is not a time (e.g. 150us, 1.2ms, 2s, 800ns)";
      return false;
    }
    s.t0 = m.first_ns() + *t;
  }
  if (!a.to.empty()) {
    const auto t = parse_time(a.to);
    if (!t) {
      error = "--to: '" + a.to + "' is not a time (e.g. 150us, 1.2ms, 2s, 800ns)";
      return false;
    }
    s.t1 = m.first_ns() + *t;
  }
  if (s.t1 <= s.t0) {
    error = "--from/--to: the range is empty";
    return false;
  }
  return true;
}

// kB from /proc/self/status, -1 when absent.
long proc_status_kb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') v = std::atol(line + n + 1);
  std::fclose(f);
  return v;
}

void print_stats(const ViewModel& m) {
  const LoadStats& st = m.stats();
  std::fprintf(stderr,
               "mrct view: memory: resident %ld kB (index and heap %ld kB, file pages %ld kB), "
               "peak %ld kB\n",
               proc_status_kb("VmRSS"), proc_status_kb("RssAnon"), proc_status_kb("RssFile"),
               proc_status_kb("VmHWM"));
  std::fprintf(
      stderr,
      "mrct view: %s: %llu frames (%llu RoCE, %llu decode errors), %.1f MB; index %.0f ms, "
      "logs %.0f ms, total %.0f ms; %zu flows\n",
      m.capture_path().c_str(), static_cast<unsigned long long>(st.frames),
      static_cast<unsigned long long>(st.roce_frames),
      static_cast<unsigned long long>(st.decode_errors), st.file_bytes / 1e6, st.index_ms,
      st.logs_ms, st.total_ms, m.flows().size());
}

}  // namespace

int view_main(int argc, char** argv) {
  Args a;
  CLI::App app{"Per-path timelines of an MRC capture: one lane per EV, sequence plot, series"};
  app.name(argc > 0 && argv[0] ? argv[0] : "mrct view");
  app.add_option("capture", a.capture,
                 "Capture file (pcap or pcapng), or a run directory of `mrct run` / `mrct suite` "
                 "(its manifest.json, or its captures/, view/, endpoints/, check/ and paths.json)");
  app.add_option("--events", a.events, "Endpoint event log(s), JSON lines (default: detected)");
  app.add_option("--profile", a.wire_profile,
                 "Wire profile: MRP0 or a profile file (TOML, docs/wire-format.md section 19)");
  app.add_option("--decisions", a.decisions,
                 "Injector decision log(s), JSON lines (default: detected)");
  app.add_option("--report", a.report, "Checker report JSON (default: detected)");
  app.add_option("--artifacts", a.artifacts,
                 "Directory of the run's logs and report (besides the capture's own)");
  app.add_flag("--no-detect", a.no_detect, "Do not look for logs and report next to the capture");
  app.add_option("--qp", a.qp,
                 "QP to show: a QPN of either side, or #N for the N-th flow (default: busiest)");
  app.add_option("--export", a.export_path,
                 "Render without a display into this PNG/SVG file and exit");
  app.add_option("--view", a.view, "View to export: timeline, sequence, series or all")
      ->check(CLI::IsMember({"timeline", "sequence", "series", "all"}));
  app.add_option("--size", a.size, "Export size WxH in pixels");
  app.add_option("--from", a.from,
                 "Start of the visible range after the first frame (150us, 1.2ms, ...)");
  app.add_option("--to", a.to, "End of the visible range after the first frame");
  app.add_option("--plane", a.plane, "Only this plane (1-based)")->check(CLI::Range(0, 255));
  app.add_option("--ev", a.evs, "Only these EVs (comma-separated WEVs, e.g. 0xe0010004)");
  app.add_option("--kinds", a.kinds,
                 "Only these mark kinds (comma-separated: first_tx, retransmit, trimmed, "
                 "injector_drop, sack, nack, probe, ev_state, ack, other, endpoint_op)");
  app.add_option("--opcode", a.opcode, "Only frames with this BTH opcode")
      ->check(CLI::Range(0, 255));
  app.add_option("--select", a.select_frame, "Select this frame number (1-based) at start");
  app.add_option("--goto", a.go_to,
                 "Go to a frame, time or PSN at start, as Go > Go to: 123, +1.5ms, psn 0x1234, "
                 "psn +5");
  app.add_option("--highlight", a.highlight,
                 "Highlight this EV (WEV, e.g. 0xe0010004) on every view at start");
  app.add_flag("--ev-table", a.ev_table, "Show the EV table (instead of the statistics) at start");
  app.add_option("--violation", a.violation,
                 "Select the N-th violation of the report (0-based) at start");
  app.add_option("--screenshot", a.screenshot,
                 "Open the window (offscreen unless a platform is set), save it as an image, exit");
  app.add_option("--caption", a.caption, "Caption of the exported image (default: file and QP)");
  app.add_flag("--no-caption", a.no_caption, "No caption on the exported image");
  app.add_flag("--list", a.list, "Print the QP flows and lanes of the capture and exit");
  app.add_flag("--stats", a.stats, "Print load time and sizes to stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  const bool headless = !a.export_path.empty() || a.list;
  if ((headless) && a.capture.empty()) {
    std::cerr << app.get_name() << ": --export and --list need a capture file\n";
    return kExitUsage;
  }
  Filter filter;
  std::string error;
  if (!build_filter(a, filter, error)) {
    std::cerr << app.get_name() << ": " << error << "\n";
    return kExitUsage;
  }
  int width = 0, height = 0;
  if (std::sscanf(a.size.c_str(), "%dx%d", &width, &height) != 2) {
    std::cerr << app.get_name() << ": --size: '" << a.size << "' is not WxH (e.g. 1600x900)\n";
    return kExitUsage;
  }

  LoadOptions opts;
  if (is_run_dir(a.capture))
    opts.run_dir = a.capture;
  else
    opts.capture = a.capture;
  opts.event_logs = a.events;
  opts.decision_logs = a.decisions;
  opts.report = a.report;
  opts.detect = !a.no_detect;
  opts.artifacts_dir = a.artifacts;
  opts.wire_profile = a.wire_profile;

  if (headless) {
    ViewModel m;
    if (!m.load(opts, error)) {
      std::cerr << app.get_name() << ": " << error << "\n";
      return kExitUsage;
    }
    if (a.stats) print_stats(m);
    for (const std::string& w : m.warnings())
      std::cerr << app.get_name() << ": warning: " << w << "\n";
    if (a.list) {
      for (const std::string& f : m.run().found) std::printf("loaded %s\n", f.c_str());
      for (const std::string& f : m.run().missing) std::printf("missing %s\n", f.c_str());
    }
    ViewState s = initial_state(m);
    if (!a.qp.empty()) {
      s.flow = m.find_flow(a.qp);
      if (s.flow == kNone) {
        std::cerr << app.get_name() << ": --qp " << a.qp << ": no such QP in " << a.capture << "\n";
        return kExitUsage;
      }
    }
    if (a.list) {
      for (uint32_t i = 0; i < m.flows().size(); ++i) {
        const Flow& f = m.flows()[i];
        std::printf("#%u %s: %zu frames, %zu lanes", i, f.label().c_str(), f.frames.size(),
                    f.lanes.size());
        for (size_t k = 0; k < kMarkKindCount; ++k)
          if (f.counts[k])
            std::printf(", %s %llu", std::string(mark_kind_name(static_cast<MarkKind>(k))).c_str(),
                        static_cast<unsigned long long>(f.counts[k]));
        std::printf("\n");
        for (const Lane& l : f.lanes)
          std::printf("  plane %u %s: %zu frames\n", l.plane, l.label().c_str(), l.frames.size());
      }
      for (const Violation& v : m.violations())
        std::printf("violation %s [%s]: %zu evidence\n", v.id.c_str(), v.status.c_str(),
                    v.evidence.size());
      if (a.export_path.empty()) return kExitOk;
    }
    if (!apply_range(a, m, s, error)) {
      std::cerr << app.get_name() << ": " << error << "\n";
      return kExitUsage;
    }
    s.filter = filter;
    if (a.violation >= 0) {
      if (static_cast<size_t>(a.violation) >= m.violations().size()) {
        std::cerr << app.get_name() << ": --violation " << a.violation << ": the report has "
                  << m.violations().size() << " failed or warned rule(s)\n";
        return kExitUsage;
      }
      // The violation's whole evidence, as selecting it in the window shows it.
      const EvidenceFocus focus = m.evidence_focus(m.violations()[a.violation]);
      if (focus.flow != kNone) s.flow = focus.flow;
      s.highlighted = focus.frames;
      s.focus_lanes = focus.lanes;
      s.focus_intervals = focus.intervals;
      if (!focus.intervals.empty() && a.from.empty() && a.to.empty()) {
        const auto [from, to] = focus.intervals.front();
        const uint64_t pad = std::max<uint64_t>((to - from) / 2, 1000);
        s.t0 = from > pad ? from - pad : 0;
        s.t1 = to + pad;
      }
    }
    if (!a.select_frame.empty()) {
      const unsigned long n = std::strtoul(a.select_frame.c_str(), nullptr, 10);
      if (n >= 1 && n <= m.frames().size()) s.selected_frame = static_cast<uint32_t>(n - 1);
    }
    // Offscreen unless the caller picked a platform: export must work without a display.
    if (std::getenv("QT_QPA_PLATFORM") == nullptr) setenv("QT_QPA_PLATFORM", "offscreen", 1);
    static int qargc = 1;
    static char qname[] = "mrct-view";
    static char* qargv[] = {qname, nullptr};
    QGuiApplication qapp(qargc, qargv);
    if (!a.no_caption) {
      std::string cap = a.caption;
      if (cap.empty()) {
        const size_t slash = a.capture.find_last_of('/');
        cap = (slash == std::string::npos ? a.capture : a.capture.substr(slash + 1));
        if (s.flow != kNone) cap += " - " + m.flows()[s.flow].label();
      }
      s.caption = QString::fromStdString(cap);
    }
    QString qerr;
    if (!export_view(m, s, a.view, QSize(width, height), QString::fromStdString(a.export_path),
                     qerr)) {
      std::cerr << app.get_name() << ": " << qerr.toStdString() << "\n";
      return kExitUsage;
    }
    return kExitOk;
  }

  if (!a.screenshot.empty() && std::getenv("QT_QPA_PLATFORM") == nullptr)
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  static int qargc = 1;
  static char qname[] = "mrct-view";
  static char* qargv[] = {qname, nullptr};
  QApplication qapp(qargc, qargv);
  MainWindow w;
  if (!a.screenshot.empty()) w.resize(width, height);
  if (!a.capture.empty()) {
    QString qerr;
    if (!w.open(opts, qerr)) {
      std::cerr << app.get_name() << ": " << qerr.toStdString() << "\n";
      return kExitUsage;
    }
    if (a.stats) print_stats(*w.model());
    if (!a.qp.empty()) {
      const uint32_t f = w.model()->find_flow(a.qp);
      if (f == kNone) {
        std::cerr << app.get_name() << ": --qp " << a.qp << ": no such QP in " << a.capture << "\n";
        return kExitUsage;
      }
      w.controller()->set_flow(f);
    }
    w.apply_filter(filter);
    ViewState s = w.controller()->state();
    if (!a.from.empty() || !a.to.empty()) {
      if (!apply_range(a, *w.model(), s, error)) {
        std::cerr << app.get_name() << ": " << error << "\n";
        return kExitUsage;
      }
      w.controller()->set_range(s.t0, s.t1);
    }
    if (!a.select_frame.empty()) {
      const unsigned long n = std::strtoul(a.select_frame.c_str(), nullptr, 10);
      // With an explicit range, keep it; otherwise bring the frame into view.
      if (n >= 1 && n <= w.model()->frames().size())
        w.controller()->select_frame(static_cast<uint32_t>(n - 1), a.from.empty() && a.to.empty());
    }
  }
  if (a.violation >= 0) w.select_violation(a.violation, -1);
  if (!a.go_to.empty()) {
    QString qerr;
    if (!w.go_to(QString::fromStdString(a.go_to), qerr)) {
      std::cerr << app.get_name() << ": --goto: " << qerr.toStdString() << "\n";
      return kExitUsage;
    }
  }
  if (!a.highlight.empty()) {
    const ViewModel* m = w.model();
    const uint32_t flow = w.controller()->state().flow;
    char* end = nullptr;
    const unsigned long wev = std::strtoul(a.highlight.c_str(), &end, 0);
    const uint32_t lane = m && flow < m->flows().size() && end && *end == 0
                              ? m->flows()[flow].lane_of(static_cast<uint32_t>(wev))
                              : kNone;
    if (lane == kNone) {
      std::cerr << app.get_name() << ": --highlight " << a.highlight
                << ": no such EV in the shown QP\n";
      return kExitUsage;
    }
    w.controller()->set_highlight_lane(lane);
  }
  if (a.ev_table) w.show_ev_table();
  w.show();
  if (!a.screenshot.empty()) {
    int rc = kExitOk;
    QTimer::singleShot(0, &w, [&] {
      if (!w.grab().save(QString::fromStdString(a.screenshot))) {
        std::cerr << app.get_name() << ": " << a.screenshot << ": cannot write image\n";
        rc = kExitUsage;
      }
      qapp.quit();
    });
    qapp.exec();
    return rc;
  }
  return qapp.exec();
}

}  // namespace mrc::view
