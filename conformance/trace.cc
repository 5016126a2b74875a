// Trace assembly: captures from several points merged on time, attribution of each capture to
// a node, injector decision logs interleaved with the frames; and `mrct check` end to end.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <unordered_map>

#include "conformance/internal.h"

namespace mrc::check {
namespace detail {

namespace {

std::string basename_of(const std::string& path) {
  const size_t s = path.find_last_of('/');
  return s == std::string::npos ? path : path.substr(s + 1);
}

bool regular_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// A host's own interface sees every RoCE frame with the host as source or destination, and the
// frames it sends carry a higher hop limit than those that crossed routers to reach it. A capture
// on a link between switches shows several hosts and is left unattributed.
std::optional<Addr> guess_capture_node(const std::string& path, const DutProfile& prof,
                                       std::string& how) {
  // A pipe cannot be read twice: what this read would be lost to the check.
  if (!regular_file(path)) return std::nullopt;
  wire::CaptureReader rd;
  if (!rd.open(path)) return std::nullopt;
  wire::CaptureRecord rec;
  wire::DecodedFrame f;
  wire::DecodeOptions opt;
  const std::unique_ptr<wire::WireProfile> wp = wire::make_profile(prof.wire_params());
  std::vector<Addr> common;
  bool first = true;
  std::unordered_map<Addr, int, AddrHash> max_hl;  // per source
  int n = 0;
  while (n < 2000 && rd.next(rec)) {
    opt.link = rec.link;
    wire::decode_frame(rec.data, f, opt, *wp);
    if (!f.roce) continue;
    Addr s{}, d{};
    if (!roce_addrs(f, s, d)) continue;
    ++n;
    const int hl = f.l3 == 6 ? f.ip6.hop_limit : f.ip4.ttl;
    auto [it, fresh] = max_hl.try_emplace(s, hl);
    if (!fresh) it->second = std::max(it->second, hl);
    if (first) {
      common = {s, d};
      first = false;
    } else {
      common.erase(std::remove_if(common.begin(), common.end(),
                                  [&](const Addr& a) { return a != s && a != d; }),
                   common.end());
    }
    if (common.empty()) return std::nullopt;
  }
  if (n == 0) return std::nullopt;
  for (const Addr& x : common) {
    auto mine = max_hl.find(x);
    if (mine == max_hl.end()) continue;
    int others = -1;
    for (const auto& [a, hl] : max_hl)
      if (a != x) others = std::max(others, hl);
    if (others >= 0 && mine->second > others) {
      how = "hop limit";
      return x;
    }
  }
  return std::nullopt;
}

}  // namespace detail

CaptureInput parse_capture_arg(std::string_view arg) {
  CaptureInput in;
  const size_t at = arg.rfind('@');
  if (at == std::string_view::npos || at == 0) {
    in.path = std::string(arg);
    return in;
  }
  in.path = std::string(arg.substr(0, at));
  std::string_view node = arg.substr(at + 1);
  // "node:port" (a node name never holds ':' unless it is an IPv6 address, which has several).
  const size_t colon = node.rfind(':');
  if (colon != std::string_view::npos && node.find(':') == colon) {
    const std::string_view port = node.substr(colon + 1);
    if (!port.empty() && port.size() <= 3 &&
        std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      const int v = std::stoi(std::string(port));
      if (v <= 255) {
        in.port = static_cast<uint8_t>(v);
        node = node.substr(0, colon);
      }
    }
  }
  in.node = std::string(node);
  return in;
}

namespace {

struct DecisionStream {
  std::string path;
  std::ifstream in;
  uint64_t line_no = 0;
  bool has = false;
  Decision next;
};

// Reads the next decision; false with `error` set on a malformed line.
bool advance(DecisionStream& s, std::string& error) {
  std::string line;
  s.has = false;
  while (std::getline(s.in, line)) {
    ++s.line_no;
    std::string e;
    Decision d;
    if (parse_decision(line, d, e)) {
      s.next = std::move(d);
      s.has = true;
      return true;
    }
    if (!e.empty()) {
      error = s.path + ":" + std::to_string(s.line_no) + ": " + e;
      return false;
    }
  }
  return true;
}

struct Source {
  std::unique_ptr<wire::CaptureReader> rd;
  wire::CaptureRecord rec;
  bool has = false;
  uint64_t frame_no = 0;
  // check_files() reads one record ahead (a record's bytes stay valid while the reader is open)
  // so that the checker can prefetch for it while it judges `rec`.
  wire::CaptureRecord ahead;
  bool has_ahead = false;
};

// Opens the captures and attributes each to a node. False on an unreadable file.
bool open_sources(const CheckOptions& opts, const DutProfile& prof, std::vector<Source>& src,
                  std::vector<PointInfo>& pts, std::string& error) {
  for (const auto& c : opts.captures) {
    Source s;
    s.rd = std::make_unique<wire::CaptureReader>();
    if (!s.rd->open(c.path)) {
      error = s.rd->error().empty() ? c.path + ": cannot open" : s.rd->error();
      return false;
    }
    PointInfo pi;
    pi.path = c.path;
    pi.port = c.port;
    const std::string base = detail::basename_of(c.path);
    for (const auto& cp : prof.capture_points)
      if (base == cp.file || c.path == cp.file || detail::ends_with(c.path, "/" + cp.file))
        pi.link_side = cp.link_side;
    if (!c.node.empty()) {
      pi.node = c.node;
      pi.attribution = "option";
    } else {
      for (const auto& cp : prof.capture_points) {
        if (base == cp.file || c.path == cp.file || detail::ends_with(c.path, "/" + cp.file)) {
          pi.node = cp.node;
          if (pi.port == 0) pi.port = cp.port;
          pi.attribution = "profile";
        }
      }
      if (pi.node.empty()) {
        for (const auto& n : prof.nodes)
          if (base.size() > n.name.size() + 1 && base.compare(0, n.name.size(), n.name) == 0 &&
              base[n.name.size()] == '-') {
            pi.node = n.name;
            pi.attribution = "file name";
          }
      }
      if (pi.node.empty()) {
        std::string how;
        if (auto a = detail::guess_capture_node(c.path, prof, how)) {
          pi.node_addr = *a;
          pi.node = detail::format_addr(*a);
          pi.attribution = how;
        }
      }
    }
    src.push_back(std::move(s));
    pts.push_back(std::move(pi));
  }
  return true;
}

}  // namespace

namespace detail {

bool prepare_profile(const CheckOptions& opts, DutProfile& prof, ProfileOrigin& origin,
                     std::string& error) {
  std::string& wire_origin = origin.wire;
  std::vector<std::string>& wire_notes = origin.wire_notes;
  std::string& derivation = origin.derivation;
  if (!opts.profile_path.empty() && !load_profile(opts.profile_path, prof, error)) return false;
  // The wire profile: given, detected from the captures, or the DUT profile's (MRP0 fields).
  wire_origin = opts.profile_path.empty() ? "default" : "DUT profile";
  if (opts.wire_profile == "auto") {
    std::vector<std::string> paths;
    for (const auto& c : opts.captures) {
      if (!detail::regular_file(c.path)) {
        error = c.path +
                ": --profile-variant auto reads the captures twice (detect, then check); "
                "give a file, not a pipe";
        return false;
      }
      paths.push_back(c.path);
    }
    VariantGuess g;
    if (!detect_variant(paths, g, error)) return false;
    if (g.mrc_frames == 0) {
      wire_origin = "auto: nothing detected (no MRC frame), MRP0 used";
    } else {
      prof.use_wire_params(g.params);
      wire_origin = "detected by mrct detect from " + std::to_string(g.mrc_frames) + " MRC frames";
      for (const auto& c : g.confidence) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%.2f", c.confidence);
        wire_notes.push_back("wire profile (detected): " + c.key + " = " + c.value +
                             ", confidence " + buf + " (" + c.evidence + ")");
      }
    }
  } else if (!opts.wire_profile.empty()) {
    std::unique_ptr<wire::WireProfile> wp = wire::open_wire_profile(opts.wire_profile, error);
    if (!wp) return false;
    prof.use_wire_params(wp->params());
    wire_origin = "--profile-variant " + opts.wire_profile;
  }
  Tolerances preset = preset_tolerances(opts.tolerances);
  if (opts.tolerances == TolerancePreset::kAuto) {
    for (const auto& c : opts.captures)
      if (!detail::regular_file(c.path)) {
        error = "--tolerances auto reads the captures twice, and " + c.path +
                " is not a regular file (a pipe or device); write it to a file first";
        return false;
      }
    if (!derive_tolerances(opts, prof, preset, derivation, error)) return false;
  }
  detail::apply_preset(preset, prof);
  for (const auto& id : opts.rules.only)
    if (!find_rule(id) &&
        std::none_of(rule_catalogue().begin(), rule_catalogue().end(),
                     [&](const RuleInfo& r) { return r.id.substr(0, id.size()) == id; })) {
      error = "unknown rule or prefix '" + id + "' (see mrct rules)";
      return false;
    }
  return true;
}

void add_profile_notes(const CheckOptions& opts, const DutProfile& prof,
                       const ProfileOrigin& origin, Report& report) {
  const std::string& wire_origin = origin.wire;
  const std::vector<std::string>& wire_notes = origin.wire_notes;
  report.wire_profile = prof.wire_params().name;
  report.wire_profile_origin = wire_origin;
  if (!opts.wire_profile.empty()) {
    const wire::WireParams wp = prof.wire_params();
    std::string ports;
    for (uint16_t port : wp.udp_ports) ports += (ports.empty() ? "" : ",") + std::to_string(port);
    report.notes.insert(
        report.notes.begin(),
        "wire profile " + wp.name + " (" + wire_origin + "): UDP " + ports + ", " +
            (wp.ev_stripe == wire::EvStripe::kLowInSport ? "low_in_sport" : "high_in_sport"));
    report.notes.insert(report.notes.begin() + 1, wire_notes.begin(), wire_notes.end());
  }
  report.decision_logs = opts.decision_logs;
  report.fail_on_warn = opts.fail_on_warn;
  report.tolerances.preset = std::string(tolerance_preset_name(opts.tolerances));
  report.tolerances.values = prof.tol;
  report.tolerances.from_profile = prof.tolerances_set;
  report.tolerances.derivation = origin.derivation;
}

}  // namespace detail

namespace {

double clock_s(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Seconds since the kernel started this process (field 22 of /proc/self/stat, in clock ticks
// since boot: 10 ms steps); -1 when it cannot be read.
double process_age_s() {
  std::ifstream f("/proc/self/stat");
  std::string stat;
  std::getline(f, stat);
  const size_t close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return -1;
  size_t field = 2, at = close + 1;
  unsigned long long start_ticks = 0;
  while (at < stat.size()) {
    while (at < stat.size() && stat[at] == ' ') ++at;
    const size_t end = stat.find(' ', at);
    if (++field == 22) {
      start_ticks = std::strtoull(stat.c_str() + at, nullptr, 10);
      break;
    }
    if (end == std::string::npos) return -1;
    at = end;
  }
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (field != 22 || hz <= 0) return -1;
  return clock_s(CLOCK_BOOTTIME) - static_cast<double>(start_ticks) / static_cast<double>(hz);
}

}  // namespace

CheckTimings::CheckTimings()
    : wall0_(clock_s(CLOCK_MONOTONIC)),
      cpu0_(clock_s(CLOCK_PROCESS_CPUTIME_ID)),
      thread_cpu0_(clock_s(CLOCK_THREAD_CPUTIME_ID)) {
  // What the process spent before the check began: loading, relocation, static constructors,
  // option parsing (the CPU since exec, on this thread alone then).
  phases.push_back(
      {"start-up (exec to check)", std::max(0.0, process_age_s()), cpu0_, thread_cpu0_});
}

void CheckTimings::mark(std::string name) {
  const double wall = clock_s(CLOCK_MONOTONIC), cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID),
               thread_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
  phases.push_back({std::move(name), wall - wall0_, cpu - cpu0_, thread_cpu - thread_cpu0_});
  wall0_ = wall;
  cpu0_ = cpu;
  thread_cpu0_ = thread_cpu;
}

void CheckTimings::print(std::ostream& err) const {
  char line[160];
  std::snprintf(line, sizeof line, "%-32s %9s %9s %11s %11s", "phase", "wall ms", "CPU ms",
                "main thr ms", "others ms");
  err << "mrct check: timings: " << line << "\n";
  Phase total{"total", 0, 0, 0};
  auto row = [&](const Phase& p) {
    std::snprintf(line, sizeof line, "%-32s %9.1f %9.1f %11.1f %11.1f", p.name.c_str(),
                  p.wall_s * 1e3, p.cpu_s * 1e3, p.thread_cpu_s * 1e3,
                  std::max(0.0, p.cpu_s - p.thread_cpu_s) * 1e3);
    err << "mrct check: timings: " << line << "\n";
  };
  for (const Phase& p : phases) {
    row(p);
    total.wall_s += p.wall_s;
    total.cpu_s += p.cpu_s;
    total.thread_cpu_s += p.thread_cpu_s;
  }
  row(total);
}

bool check_files(const CheckOptions& opts, Report& report, std::string& error) {
  return check_files(opts, report, error, nullptr);
}

bool check_files(const CheckOptions& opts, Report& report, std::string& error,
                 CheckTimings* timings) {
  auto mark = [timings](const char* name) {
    if (timings) timings->mark(name);
  };
  error.clear();
  DutProfile prof;
  if (opts.captures.empty()) {
    error = "no capture files given";
    return false;
  }
  detail::ProfileOrigin origin;
  if (!detail::prepare_profile(opts, prof, origin, error)) return false;
  mark("profile");
  const uint64_t lookahead = prof.tol.decision_lookahead_ns;
  // The pipelined checker keeps each frame's bytes until it has judged them: a mapped file's
  // records stay valid while its reader is open, a pipe's chunk does not.
  const bool files =
      std::all_of(opts.captures.begin(), opts.captures.end(),
                  [](const CaptureInput& c) { return detail::regular_file(c.path); });
  Checker ck(prof, opts.rules, opts.max_evidence, files ? opts.jobs : 1);
  std::vector<Source> src;
  std::vector<PointInfo> pts;
  if (!open_sources(opts, prof, src, pts, error)) return false;
  for (auto& p : pts) ck.add_point(p);

  std::vector<std::unique_ptr<DecisionStream>> logs;
  for (const auto& path : opts.decision_logs) {
    auto s = std::make_unique<DecisionStream>();
    s->path = path;
    s->in.open(path);
    if (!s->in) {
      error = path + ": cannot open the decision log";
      return false;
    }
    if (!advance(*s, error)) return false;
    logs.push_back(std::move(s));
  }

  std::vector<std::string> read_errors(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    src[i].has = src[i].rd->next(src[i].rec);
    if (src[i].has) src[i].has_ahead = src[i].rd->next(src[i].ahead);
    if (!src[i].has || !src[i].has_ahead) read_errors[i] = src[i].rd->error();
  }
  // The injector logs a delayed frame when it leaves its queue, stamped with its arrival, so a
  // log is in time order only within kDecisionReorderNs: decisions are read that far ahead of the
  // frames and applied in time order (ties in file order).
  constexpr uint64_t kDecisionReorderNs = 100'000'000;
  // The heap orders small handles; the decisions themselves (strings inside) stay in slots that
  // are reused once applied.
  struct Pending {
    uint64_t t_ns, seq;
    size_t slot;
  };
  auto later = [](const Pending& a, const Pending& b) {
    return a.t_ns != b.t_ns ? a.t_ns > b.t_ns : a.seq > b.seq;
  };
  std::vector<Pending> pending;
  std::vector<Decision> slots;
  std::vector<size_t> free_slots;
  uint64_t seq = 0;
  // The earliest time of a decision not read yet (UINT64_MAX: none), so that a frame that reads
  // none costs one comparison.
  uint64_t next_unread = 0;
  auto read_decisions = [&](uint64_t horizon) -> bool {
    next_unread = UINT64_MAX;
    for (auto& l : logs) {
      while (l->has && l->next.t_ns <= horizon) {
        size_t slot = slots.size();
        if (!free_slots.empty()) {
          slot = free_slots.back();
          free_slots.pop_back();
          slots[slot] = std::move(l->next);
        } else {
          slots.push_back(std::move(l->next));
        }
        pending.push_back({slots[slot].t_ns, seq++, slot});
        std::push_heap(pending.begin(), pending.end(), later);
        if (!advance(*l, error)) return false;
      }
      if (l->has) next_unread = std::min(next_unread, l->next.t_ns);
    }
    return true;
  };
  auto apply_decisions = [&](uint64_t until) {
    while (!pending.empty() && pending.front().t_ns <= until) {
      std::pop_heap(pending.begin(), pending.end(), later);
      const size_t slot = pending.back().slot;
      ck.on_decision(slots[slot]);
      free_slots.push_back(slot);
      pending.pop_back();
    }
  };
  mark("open captures, decision logs");
  uint64_t last_ts = 0;
  for (;;) {
    size_t pick = src.size();
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i].has && (pick == src.size() || src[i].rec.ts_ns < src[pick].rec.ts_ns)) pick = i;
    if (pick == src.size()) break;
    Source& s = src[pick];
    const uint64_t horizon = s.rec.ts_ns + lookahead + kDecisionReorderNs;
    if (next_unread <= horizon && !read_decisions(horizon)) return false;
    apply_decisions(s.rec.ts_ns + lookahead);
    last_ts = std::max(last_ts, s.rec.ts_ns);
    if (s.has_ahead) ck.prefetch(s.ahead.data, s.ahead.link);
    ck.on_frame(static_cast<uint32_t>(pick), ++s.frame_no, s.rec.ts_ns, s.rec.data, s.rec.link,
                s.rec.orig_len);
    s.has = s.has_ahead;
    if (s.has) {
      std::swap(s.rec, s.ahead);
      s.has_ahead = s.rd->next(s.ahead);
      if (!s.has_ahead) read_errors[pick] = s.rd->error();
    }
  }
  if (!read_decisions(UINT64_MAX)) return false;
  apply_decisions(UINT64_MAX);
  mark("frames (read, hand over)");
  report = ck.finish(last_ts);
  mark("finish (drain, obligations)");
  for (size_t i = 0; i < src.size() && i < report.captures.size(); ++i) {
    report.captures[i].pcapng = src[i].rd->is_pcapng();
    report.captures[i].error = read_errors[i];
    if (!read_errors[i].empty())
      report.notes.push_back("capture " + opts.captures[i].path + " ends early: " + read_errors[i] +
                             " (" + std::to_string(src[i].frame_no) +
                             " frames before it were judged)");
    if (report.captures[i].node.empty())
      report.notes.push_back(
          "capture " + opts.captures[i].path +
          " is not attributed to a node; rules that need the requester's or the "
          "responder's own capture are not judged from it (name it "
          "<node>-<iface>.pcap with the node in the profile, or pass path@node)");
  }
  detail::add_profile_notes(opts, prof, origin, report);
  mark("notes");
  return true;
}

bool write_annotated(const CheckOptions& opts, const Report& r, const std::string& path,
                     std::string& error) {
  std::map<std::pair<uint32_t, uint64_t>, std::string> comments;
  for (const auto& a : r.annotations) {
    std::string& c = comments[{a.capture, a.frame}];
    if (!c.empty()) c += "\n";
    c += a.text;
  }
  std::vector<Source> src;
  for (const auto& c : opts.captures) {
    Source s;
    s.rd = std::make_unique<wire::CaptureReader>();
    if (!s.rd->open(c.path)) {
      error = s.rd->error();
      return false;
    }
    s.has = s.rd->next(s.rec);
    src.push_back(std::move(s));
  }
  wire::CaptureWriter w;
  const wire::LinkType link =
      !src.empty() && src[0].has ? src[0].rec.link : wire::LinkType::kEthernet;
  if (!w.open(path, wire::CaptureFormat::kPcapng, link)) {
    error = w.error();
    return false;
  }
  uint64_t skipped = 0;
  for (;;) {
    size_t pick = src.size();
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i].has && (pick == src.size() || src[i].rec.ts_ns < src[pick].rec.ts_ns)) pick = i;
    if (pick == src.size()) break;
    Source& s = src[pick];
    ++s.frame_no;
    if (s.rec.link == link) {
      auto it = comments.find({static_cast<uint32_t>(pick), s.frame_no});
      std::string text;
      if (it != comments.end()) {
        text = "[" + opts.captures[pick].path + " frame " + std::to_string(s.frame_no) + "]\n" +
               it->second;
      }
      if (!w.write(s.rec.ts_ns, s.rec.data, s.rec.orig_len, text)) {
        error = w.error();
        return false;
      }
    } else {
      ++skipped;
    }
    s.has = s.rd->next(s.rec);
  }
  if (!w.close()) {
    error = w.error();
    return false;
  }
  if (skipped) error = std::to_string(skipped) + " frames with another link type were left out";
  return true;
}

namespace detail {

bool write_report_to(const std::string& path, std::ostream& out, std::ostream& err,
                     void (*fn)(const Report&, std::ostream&), const Report& r) {
  if (path == "-") {
    fn(r, out);
    return true;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      err << "mrct check: cannot write " << path << "\n";
      return false;
    }
    fn(r, f);
    f.flush();
    if (!f) {
      err << "mrct check: write error on " << path << "\n";
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err << "mrct check: cannot rename " << tmp << " to " << path << "\n";
    return false;
  }
  return true;
}

}  // namespace detail

int run_check(const CheckOptions& opts, std::ostream& out, std::ostream& err) {
  Report r;
  std::string error;
  if (!opts.annotated_out.empty()) {
    for (const auto& c : opts.captures) {
      if (!detail::regular_file(c.path)) {
        err << "mrct check: --annotate reads the captures a second time, and " << c.path
            << " is not a regular file (a pipe or device); write it to a file first\n";
        return 2;
      }
    }
  }
  std::optional<CheckTimings> timings;
  if (opts.timings) timings.emplace();
  auto mark = [&timings](const char* name) {
    if (timings) timings->mark(name);
  };
  if (!check_files(opts, r, error, timings ? &*timings : nullptr)) {
    err << "mrct check: " << error << "\n";
    return kExitUsage;
  }
  mark("teardown (checker, readers)");
  if (!opts.json_out.empty() && !detail::write_report_to(opts.json_out, out, err, write_json, r))
    return 2;
  if (!opts.junit_out.empty() && !detail::write_report_to(opts.junit_out, out, err, write_junit, r))
    return 2;
  if (!opts.markdown_out.empty() &&
      !detail::write_report_to(opts.markdown_out, out, err, write_markdown, r))
    return 2;
  mark("reports (JSON, JUnit, Markdown)");
  if (!opts.annotated_out.empty()) {
    std::string e;
    if (!write_annotated(opts, r, opts.annotated_out, e)) {
      err << "mrct check: annotated capture: " << e << "\n";
      return 2;
    }
    if (!e.empty()) err << "mrct check: annotated capture: " << e << "\n";
    mark("annotated capture");
  }
  for (const auto& n : r.notes) err << "mrct check: note: " << n << "\n";
  if (!opts.quiet && opts.json_out != "-") write_human(r, out);
  const int code = r.exit_code();
  if (timings) {
    r = Report();  // what the process would free on its way out
    mark("summary, report freed");
    timings->print(err);
  }
  return code;
}

}  // namespace mrc::check
