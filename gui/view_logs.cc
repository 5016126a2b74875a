// The run's other artifacts, folded into the capture index: endpoint event log, injector
// decision log, checker report; and finding them in a directory.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "gui/view_model_impl.h"

namespace mrc::view {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool read_file(const std::string& path, std::string& out, std::string& error,
               size_t limit = SIZE_MAX) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = path + ": cannot open";
    return false;
  }
  std::ostringstream ss;
  if (limit == SIZE_MAX) {
    ss << f.rdbuf();
    out = ss.str();
  } else {
    out.resize(limit);
    f.read(out.data(), static_cast<std::streamsize>(limit));
    out.resize(static_cast<size_t>(f.gcount()));
  }
  return true;
}

std::string first_line(const std::string& text) {
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string::npos) e = text.size();
    std::string line = text.substr(p, e - p);
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
    p = e + 1;
  }
  return {};
}

// Typed field access that never throws: absent or mistyped fields give nullopt.
std::optional<uint64_t> get_u64(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number_unsigned()) {
    if (it != o.end() && it->is_number_integer() && it->get<int64_t>() >= 0)
      return static_cast<uint64_t>(it->get<int64_t>());
    return std::nullopt;
  }
  return it->get<uint64_t>();
}
std::optional<double> get_num(const json& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
std::string get_str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Calls fn(line_no, object) for each JSON-object line; bad lines become warnings.
template <typename Fn>
void for_each_json_line(ViewModel::Impl& m, const std::string& path, Fn fn) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    m.warn(path + ": cannot open");
    return;
  }
  std::string line;
  uint64_t no = 0, bad = 0;
  while (std::getline(f, line)) {
    ++no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json o = json::parse(line, nullptr, false);
    if (o.is_discarded() || !o.is_object()) {
      if (++bad <= 5) m.warn(path + ":" + std::to_string(no) + ": not a JSON object, skipped");
      continue;
    }
    fn(no, o);
  }
  if (bad > 5) m.warn(path + ": " + std::to_string(bad) + " bad lines in all");
}

struct EventRec {
  uint64_t t_ns = 0;
  std::string node;
  std::string kind;
  uint32_t qpn = 0;
  std::optional<uint64_t> wev, port, psn, attempt;
  std::optional<double> cwnd, bytes_in_flight;
  std::string from, to, reason, cause;
  uint64_t line = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Artifact detection
// ---------------------------------------------------------------------------------------------
Artifacts detect_artifacts(const std::string& dir) {
  Artifacts a;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> reports;
  for (const fs::path& p : files) {
    const std::string ext = p.extension().string();
    std::string text, err;
    if (ext == ".jsonl" || ext == ".ndjson") {
      if (!read_file(p.string(), text, err, 1 << 16)) continue;
      const json o = json::parse(first_line(text), nullptr, false);
      if (o.is_discarded() || !o.is_object()) continue;
      if (o.contains("t_ns") && o.contains("kind") && o.contains("node"))
        a.event_logs.push_back(p.string());
      else if (o.contains("t_ns") && o.contains("action") && o.contains("link"))
        a.decision_logs.push_back(p.string());
    } else if (ext == ".json") {
      if (fs::file_size(p, ec) > (256u << 20) || ec) continue;
      if (!read_file(p.string(), text, err)) continue;
      const json o = json::parse(text, nullptr, false);
      if (!o.is_discarded() && o.is_object() && o.contains("rules") && o["rules"].is_array() &&
          (o.contains("verdict") || get_str(o, "tool") == "mrct check"))
        reports.push_back(p.string());
    }
  }
  // Prefer a file called report.json when a directory holds several reports.
  for (const auto& r : reports)
    if (fs::path(r).filename() == "report.json") a.report = r;
  if (a.report.empty() && !reports.empty()) a.report = reports.front();
  return a;
}

// ---------------------------------------------------------------------------------------------
// Event log
// ---------------------------------------------------------------------------------------------
void ViewModel::Impl::apply_event_log(const std::string& path) {
  std::vector<EventRec> recs;
  for_each_json_line(*this, path, [&](uint64_t line, const json& o) {
    EventRec r;
    r.line = line;
    const auto t = get_u64(o, "t_ns");
    const auto q = get_u64(o, "qpn");
    r.kind = get_str(o, "kind");
    r.node = get_str(o, "node");
    if (!t || r.kind.empty()) {
      if (recs.size() < 5)
        warn(path + ":" + std::to_string(line) + ": event without t_ns/kind, skipped");
      return;
    }
    r.t_ns = *t;
    r.qpn = q ? static_cast<uint32_t>(*q) : 0;
    r.wev = get_u64(o, "wev");
    r.port = get_u64(o, "port");
    r.psn = get_u64(o, "psn");
    r.attempt = get_u64(o, "attempt");
    r.cwnd = get_num(o, "cwnd");
    r.bytes_in_flight = get_num(o, "bytes_in_flight");
    r.from = get_str(o, "from");
    r.to = get_str(o, "to");
    r.reason = get_str(o, "reason");
    r.cause = get_str(o, "cause");
    recs.push_back(std::move(r));
  });
  stats.events += recs.size();

  // Events name the node and its local QPN. A requester's local QPN is the DestQP of the
  // feedback it receives (Flow::requester_qpn); pick the flow whose EVs the events mention.
  std::map<std::pair<std::string, uint32_t>, std::vector<size_t>> groups;
  for (size_t i = 0; i < recs.size(); ++i) groups[{recs[i].node, recs[i].qpn}].push_back(i);
  for (const auto& [key, idx] : groups) {
    std::set<uint32_t> wevs;
    for (size_t i : idx) {
      const EventRec& r = recs[i];
      if (r.wev && (r.kind == "ev_state" || r.kind == "retransmit" || r.kind == "probe" ||
                    r.kind == "nack_rx"))
        wevs.insert(static_cast<uint32_t>(*r.wev));
    }
    uint32_t best = kNone;
    if (wevs.empty()) {
      // A fault-free run's requester logs no EV event at all, only QP states, completions and
      // cwnd samples; bytes in flight say it sends, and its QPN is the DestQP of the feedback it
      // receives. Tie it by that alone, and only when one flow has that QPN (every host of a
      // scenario may use the same QPN); a pure responder (nothing in flight) ties to nothing.
      bool sends = false;
      for (size_t i : idx)
        sends |= recs[i].kind == "cwnd" && recs[i].bytes_in_flight && *recs[i].bytes_in_flight > 0;
      if (!sends) continue;
      size_t matches = 0;
      for (uint32_t fi = 0; fi < flows.size(); ++fi)
        if (flows[fi].requester_qpn && *flows[fi].requester_qpn == key.second) {
          best = fi;
          ++matches;
        }
      if (matches != 1) continue;
    } else {
      size_t best_score = 0;
      bool any_qp_match = false;
      for (const Flow& f : flows) any_qp_match |= f.requester_qpn && *f.requester_qpn == key.second;
      for (uint32_t fi = 0; fi < flows.size(); ++fi) {
        const Flow& f = flows[fi];
        if (any_qp_match && !(f.requester_qpn && *f.requester_qpn == key.second)) continue;
        size_t score = 0;
        for (const Lane& l : f.lanes)
          if (!l.control && wevs.count(l.wev)) ++score;
        if (score > best_score) {
          best_score = score;
          best = fi;
        }
      }
    }
    if (best == kNone) {
      warn(path + ": events of node '" + key.first + "' QP " + std::to_string(key.second) +
           " match no flow of the capture");
      continue;
    }
    Flow& f = flows[best];
    if (f.requester_node.empty()) f.requester_node = key.first;
    for (size_t i : idx) {
      const EventRec& r = recs[i];
      if (r.kind == "ev_state" && r.wev) {
        const uint32_t lane = lane_for(f, best, static_cast<uint32_t>(*r.wev), true);
        if (r.port && *r.port > 0 && *r.port < 256) {
          f.lanes[lane].plane = static_cast<uint8_t>(*r.port);
          f.lanes[lane].plane_source = "event log";
        }
        ExtMark m;
        m.ts_ns = r.t_ns;
        m.kind = MarkKind::kEvState;
        m.lane = lane;
        m.to_state = parse_ev_state(r.to);
        m.text = r.from + " -> " + r.to + (r.reason.empty() ? "" : " (" + r.reason + ")");
        f.ext.push_back(std::move(m));
      } else if (r.kind == "cwnd") {
        if (r.cwnd) f.cwnd.push_back({r.t_ns, *r.cwnd});
        if (r.bytes_in_flight) f.bytes_in_flight.push_back({r.t_ns, *r.bytes_in_flight});
      } else if (r.kind == "retransmit" && r.psn) {
        RtxEvent e;
        e.ts_ns = r.t_ns;
        e.psn = static_cast<uint32_t>(*r.psn);
        e.wev = r.wev ? static_cast<uint32_t>(*r.wev) : 0;
        e.cause = r.cause;
        e.attempt = r.attempt.value_or(0);
        rtx_events[best].push_back(std::move(e));
      } else if (r.kind == "qp_state") {
        f.qp_events.emplace_back(
            r.t_ns, r.from + " -> " + r.to + (r.reason.empty() ? "" : " (" + r.reason + ")"));
      } else if (r.kind == "probe" && r.wev && r.port && *r.port > 0 && *r.port < 256) {
        const uint32_t lane = f.lane_of(static_cast<uint32_t>(*r.wev));
        if (lane != kNone && f.lanes[lane].plane_source != "event log") {
          f.lanes[lane].plane = static_cast<uint8_t>(*r.port);
          f.lanes[lane].plane_source = "event log";
        }
      }
    }
    const auto by_t = [](const SeriesPoint& a, const SeriesPoint& b) { return a.ts_ns < b.ts_ns; };
    std::stable_sort(f.cwnd.begin(), f.cwnd.end(), by_t);
    std::stable_sort(f.bytes_in_flight.begin(), f.bytes_in_flight.end(), by_t);
  }
  // Retransmit events carry the port of the EV too; use them for lanes the ev_state lines miss.
  for (const EventRec& r : recs) {
    if (r.kind != "retransmit" || !r.wev || !r.port || *r.port == 0 || *r.port > 255) continue;
    for (Flow& f : flows) {
      if (f.requester_node != r.node) continue;
      const uint32_t lane = f.lane_of(static_cast<uint32_t>(*r.wev));
      if (lane != kNone && f.lanes[lane].plane_source != "event log") {
        f.lanes[lane].plane = static_cast<uint8_t>(*r.port);
        f.lanes[lane].plane_source = "event log";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Decision log
// ---------------------------------------------------------------------------------------------
void ViewModel::Impl::apply_decision_log(const std::string& path) {
  const wire::WireProfile& profile = *wire_profile;
  for_each_json_line(*this, path, [&](uint64_t line, const json& o) {
    const auto t = get_u64(o, "t_ns");
    const std::string action = get_str(o, "action");
    if (!t || action.empty()) {
      warn(path + ":" + std::to_string(line) + ": decision without t_ns/action, skipped");
      return;
    }
    ++stats.decisions;
    const bool drop = action == "drop" || action == "corrupt";
    const bool trim = action == "trim";
    if (!drop && !trim) return;
    const auto qpn = get_u64(o, "qpn");
    const auto psn = get_u64(o, "psn");
    const auto opcode = get_u64(o, "opcode");
    const auto ev = get_u64(o, "ev");
    if (!qpn || !opcode) return;  // not a RoCE packet: no flow to show it on
    const wire::OpcodeInfo* op = profile.opcode_info(static_cast<uint8_t>(*opcode));
    const wire::PacketKind kind = op ? op->kind : wire::PacketKind::kUnknown;
    const bool forward = kind == wire::PacketKind::kMrcData || kind == wire::PacketKind::kRcData ||
                         kind == wire::PacketKind::kMrcProbe;
    const std::string reason = get_str(o, "reason");
    const std::string link = get_str(o, "link");
    const std::string dir = get_str(o, "dir");

    uint32_t fi = kNone, lane = kNone;
    if (forward) {
      // Data: DestQP is the responder's QPN. Prefer the flow that has the EV as a lane.
      for (uint32_t c = 0; c < flows.size(); ++c) {
        if (flows[c].responder_qpn != *qpn) continue;
        const uint32_t l = ev ? flows[c].lane_of(static_cast<uint32_t>(*ev)) : kNone;
        if (fi == kNone || (l != kNone && lane == kNone)) {
          fi = c;
          lane = l;
        }
      }
      if (fi != kNone && lane == kNone && ev)
        lane = lane_for(flows[fi], fi, static_cast<uint32_t>(*ev), true);
    } else {
      // Feedback: DestQP is the requester's QPN; the EV is the feedback's own (reverse) EV.
      const std::string from_node = dir.substr(0, dir.find('>'));
      for (uint32_t c = 0; c < flows.size(); ++c) {
        if (!flows[c].requester_qpn || *flows[c].requester_qpn != *qpn) continue;
        // dir is "<src node>><dst node>": feedback goes to the requester.
        const bool node_match =
            !flows[c].requester_node.empty() && dir.size() > flows[c].requester_node.size() &&
            dir.substr(dir.size() - flows[c].requester_node.size()) == flows[c].requester_node;
        if (fi == kNone || node_match) fi = c;
      }
      (void)from_node;
    }
    if (fi == kNone) return;
    Flow& f = flows[fi];
    ExtMark m;
    m.ts_ns = *t;
    m.kind = trim ? MarkKind::kTrimmed : MarkKind::kInjectorDrop;
    m.lane = lane;  // kNone: control lane
    std::string what = op ? std::string(op->name) : "opcode " + std::to_string(*opcode);
    m.text = action + " " + what + (reason.empty() ? "" : " " + reason) +
             (link.empty() ? "" : " on " + link);
    if (psn && forward && kind != wire::PacketKind::kMrcProbe) {
      m.has_psn = true;
      m.psn = static_cast<uint32_t>(*psn);
      m.rel_psn = rel_psn(f, m.psn);
    }
    if (!forward && ev) m.text += " (EV " + format_wev(static_cast<uint32_t>(*ev)) + ")";

    // The frame the decision acted on, when the capture point is before the injector: the last
    // send of that PSN on that EV at or before the decision.
    if (lane != kNone && m.has_psn) {
      Lane& l = f.lanes[lane];
      size_t p = std::upper_bound(l.frames.begin(), l.frames.end(), *t,
                                  [&](uint64_t tv, uint32_t i) { return tv < frames[i].ts_ns; }) -
                 l.frames.begin();
      for (size_t steps = 0; p > 0 && steps < 1024; --p, ++steps) {
        FrameInfo& c = frames[l.frames[p - 1]];
        if (c.psn != m.psn || (c.kind != MarkKind::kFirstTx && c.kind != MarkKind::kRetransmit))
          continue;
        if (c.flags & (kFlagDroppedLater | kFlagTrimmedLater)) break;
        c.flags |= trim ? kFlagTrimmedLater : kFlagDroppedLater;
        m.frame = l.frames[p - 1];
        m.rel_psn = c.rel_psn;
        break;
      }
      if (trim && m.frame == kNone) {
        // Capture point after the trim: the trimmed frame itself is in the capture, already a
        // mark; link the decision to it instead of adding a second one.
        size_t q = std::lower_bound(l.frames.begin(), l.frames.end(), *t,
                                    [&](uint32_t i, uint64_t tv) { return frames[i].ts_ns < tv; }) -
                   l.frames.begin();
        for (size_t steps = 0; q < l.frames.size() && steps < 1024; ++q, ++steps) {
          const FrameInfo& c = frames[l.frames[q]];
          if (c.kind == MarkKind::kTrimmed && c.psn == m.psn) {
            m.frame = l.frames[q];
            m.kind = MarkKind::kOther;  // a note on the frame, not a mark of its own
            break;
          }
        }
        if (m.kind == MarkKind::kOther) {
          notes_on_frames.push_back({m.frame, m.text});
          return;
        }
      }
    }
    f.ext.push_back(std::move(m));
  });
}

// ---------------------------------------------------------------------------------------------
// Checker report
// ---------------------------------------------------------------------------------------------
bool ViewModel::Impl::apply_report(const std::string& path, bool explicit_file,
                                   std::string& error) {
  std::string text, err;
  const auto fail = [&](const std::string& msg) {
    if (explicit_file) {
      error = msg;
      return false;
    }
    warn(msg + " (report ignored)");
    return true;
  };
  if (!read_file(path, text, err)) return fail(err);
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return fail(path + ": not valid JSON");
  if (!j.is_object() || !j.contains("rules") || !j["rules"].is_array())
    return fail(path + ": not a checker report (no \"rules\" array)");
  std::error_code ec;
  const fs::path cap(opts.capture);
  size_t rule_no = 0;
  for (const json& r : j["rules"]) {
    ++rule_no;
    if (!r.is_object()) {
      warn(path + ": rules[" + std::to_string(rule_no - 1) + "] is not an object, skipped");
      continue;
    }
    const std::string status = get_str(r, "status");
    if (status != "fail" && status != "warn") continue;
    Violation v;
    v.id = get_str(r, "id");
    v.status = status;
    v.severity = get_str(r, "severity");
    v.statement = get_str(r, "statement");
    v.count = get_u64(r, "count").value_or(0);
    if (r.contains("evidence") && r["evidence"].is_array()) {
      for (const json& e : r["evidence"]) {
        if (!e.is_object()) continue;
        Evidence ev;
        ev.file = get_str(e, "file");
        ev.frame_no = get_u64(e, "frame");
        ev.ts_ns = get_u64(e, "ts_ns").value_or(0);
        ev.message = get_str(e, "message");
        ev.from_ns = get_u64(e, "from_ns");
        if (ev.from_ns && *ev.from_ns > ev.ts_ns) ev.from_ns.reset();
        ev.plane = static_cast<uint8_t>(std::min<uint64_t>(get_u64(e, "port").value_or(0), 255));
        if (const auto w = get_u64(e, "wev")) ev.wev = static_cast<uint32_t>(*w);
        // The frame in the opened capture: by number when the evidence names this file, else
        // the frame nearest its time (captures of one run share the clock).
        bool same_file = false;
        if (!ev.file.empty()) {
          const fs::path ef(ev.file);
          same_file = fs::exists(ef, ec) && fs::exists(cap, ec) ? fs::equivalent(ef, cap, ec)
                                                                : ef.filename() == cap.filename();
          if (!same_file && ef.is_relative()) {
            const fs::path rel = fs::path(path).parent_path() / ef;
            same_file = fs::exists(rel, ec) && fs::exists(cap, ec) && fs::equivalent(rel, cap, ec);
          }
        }
        if (same_file && ev.frame_no && *ev.frame_no >= 1 && *ev.frame_no <= frames.size()) {
          ev.frame = static_cast<uint32_t>(*ev.frame_no - 1);
        } else if (ev.ts_ns != 0 && !frames.empty()) {
          size_t lo = 0, hi = frames.size();
          while (lo < hi) {
            const size_t mid = (lo + hi) / 2;
            if (frames[mid].ts_ns < ev.ts_ns)
              lo = mid + 1;
            else
              hi = mid;
          }
          if (lo == frames.size())
            lo = frames.size() - 1;
          else if (lo > 0 && ev.ts_ns - frames[lo - 1].ts_ns <= frames[lo].ts_ns - ev.ts_ns)
            --lo;
          ev.frame = static_cast<uint32_t>(lo);
          ev.by_time = true;
        }
        v.evidence.push_back(std::move(ev));
      }
    }
    violations.push_back(std::move(v));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Path table (paths.json)
// ---------------------------------------------------------------------------------------------
std::string PathEntry::text() const {
  std::string s = src + "->" + dst + " EV " + std::to_string(ev) + ": plane " +
                  std::to_string(plane) + " (port " + std::to_string(plane) + ")";
  if (t1 >= 0) s += ", T1 " + std::to_string(t1);
  if (!usids.empty()) {
    s += ", uSIDs";
    for (const auto& u : usids) s += " " + u;
  }
  if (!hops.empty()) {
    s += ", via";
    for (const auto& h : hops) s += " " + h;
  }
  return s;
}

void ViewModel::Impl::apply_paths(const std::string& path) {
  std::string text, err;
  if (!read_file(path, text, err)) {
    warn(err);
    return;
  }
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("pairs") || !j["pairs"].is_array()) {
    warn(path + ": not a path table (no \"pairs\" array), ignored");
    return;
  }
  for (const json& pr : j["pairs"]) {
    if (!pr.is_object() || !pr.contains("evs") || !pr["evs"].is_array()) continue;
    for (const json& e : pr["evs"]) {
      if (!e.is_object()) continue;
      PathEntry p;
      p.src = get_str(pr, "src");
      p.dst = get_str(pr, "dst");
      p.ev = static_cast<uint32_t>(get_u64(e, "ev").value_or(0));
      // The table's planes are 0-based; its "port" (= plane + 1) is the numbering the checker,
      // the event log and the viewer use.
      p.plane = static_cast<uint8_t>(std::min<uint64_t>(
          get_u64(e, "port").value_or(get_u64(e, "plane").value_or(0) + 1), 255));
      if (const auto t = get_u64(e, "t1")) p.t1 = static_cast<int>(*t);
      p.outer_da = get_str(e, "outer_da");
      p.egress = get_str(e, "egress");
      for (const char* key : {"usids", "hops"}) {
        if (!e.contains(key) || !e[key].is_array()) continue;
        for (const json& x : e[key])
          if (x.is_string()) (key[0] == 'u' ? p.usids : p.hops).push_back(x.get<std::string>());
      }
      paths.push_back(std::move(p));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Run directories
// ---------------------------------------------------------------------------------------------
namespace {

bool is_capture_name(const fs::path& p) {
  const std::string e = p.extension().string();
  return e == ".pcap" || e == ".pcapng" || e == ".cap";
}

std::vector<std::string> captures_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_regular_file(ec) && is_capture_name(it->path()) && it->file_size(ec) > 24)
      out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool is_scenario_run(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "manifest.json", ec) ||
         fs::is_regular_file(dir / "result.json", ec);
}

std::string rel_to(const fs::path& base, const std::string& p) {
  std::error_code ec;
  const fs::path r = fs::relative(p, base, ec);
  return ec || r.empty() ? p : r.string();
}

}  // namespace

bool is_run_dir(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_directory(path, ec);
}

bool resolve_run_dir(const std::string& dir_in, RunDir& out, std::string& error) {
  out = RunDir{};
  std::error_code ec;
  fs::path dir(dir_in);
  if (!fs::is_directory(dir, ec)) {
    error = dir_in + ": not a directory";
    return false;
  }
  // A suite: one scenario run per subdirectory. Open its first run that did not pass.
  if (!is_scenario_run(dir)) {
    std::vector<fs::path> runs;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec) && is_scenario_run(it->path())) runs.push_back(it->path());
    std::sort(runs.begin(), runs.end());
    if (!runs.empty()) {
      fs::path pick = runs.front();
      for (const fs::path& r : runs) {
        std::string text, err;
        if (!read_file((r / "result.json").string(), text, err)) continue;
        const json j = json::parse(text, nullptr, false);
        if (j.is_object() && get_str(j, "verdict") != "pass") {
          pick = r;
          break;
        }
      }
      std::vector<std::string> names;
      for (const fs::path& r : runs) names.push_back(r.filename().string());
      if (!resolve_run_dir(pick.string(), out, error)) return false;
      out.suite = dir.string();
      out.runs = names;
      out.found.insert(out.found.begin(), "suite: " + std::to_string(runs.size()) +
                                              " scenario runs, opened " + pick.filename().string() +
                                              " (the first that did not pass, else the first)");
      return true;
    }
  }
  out.dir = dir.string();
  const auto add_found = [&](const std::string& what, const std::vector<std::string>& files) {
    std::string line = what + ":";
    for (const auto& f : files) line += " " + rel_to(dir, f);
    out.found.push_back(line);
  };
  const auto exists = [&](const std::string& p) { return fs::is_regular_file(p, ec); };

  const fs::path manifest = dir / "manifest.json";
  if (fs::is_regular_file(manifest, ec)) {
    std::string text, err;
    if (!read_file(manifest.string(), text, err)) {
      error = err;
      return false;
    }
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      error = manifest.string() + ": not valid JSON";
      return false;
    }
    out.manifest = manifest.string();
    const auto file = [&](const json& v) {
      return v.is_string() && !v.get<std::string>().empty() ? (dir / v.get<std::string>()).string()
                                                            : std::string();
    };
    const auto listed = [&](const char* key, const char* what) {
      const std::string p = j.contains(key) ? file(j[key]) : std::string();
      if (p.empty()) {
        out.missing.push_back(std::string(what) + ": none (manifest.json lists none)");
        return std::string();
      }
      if (!exists(p)) {
        out.missing.push_back(std::string(what) + ": " + rel_to(dir, p) +
                              " listed in manifest.json but absent");
        return std::string();
      }
      return p;
    };
    const auto listed_many = [&](const char* key, const char* what) {
      std::vector<std::string> v;
      if (j.contains(key) && j[key].is_array())
        for (const json& x : j[key]) {
          const std::string p = file(x.is_object() && x.contains("path") ? x["path"] : x);
          if (p.empty()) continue;
          if (exists(p))
            v.push_back(p);
          else
            out.missing.push_back(std::string(what) + ": " + rel_to(dir, p) +
                                  " listed in manifest.json but absent");
        }
      if (v.empty() && (!j.contains(key) || !j[key].is_array() || j[key].empty()))
        out.missing.push_back(std::string(what) + ": none (manifest.json lists none)");
      return v;
    };
    // The requester's merged capture first, then its own capture points, then the others.
    const std::string view = j.contains("view_capture") ? file(j["view_capture"]) : std::string();
    if (!view.empty() && exists(view)) out.captures.push_back(view);
    if (j.contains("captures") && j["captures"].is_array()) {
      std::vector<std::string> req, other;
      for (const json& c : j["captures"]) {
        const std::string p = file(c.is_object() && c.contains("path") ? c["path"] : c);
        if (p.empty() || !exists(p)) continue;
        (c.is_object() && get_str(c, "role") == "requester" ? req : other).push_back(p);
      }
      out.captures.insert(out.captures.end(), req.begin(), req.end());
      out.captures.insert(out.captures.end(), other.begin(), other.end());
    }
    out.event_logs = listed_many("event_logs", "event logs");
    out.decision_logs = listed_many("decision_logs", "decision log");
    out.report = listed("report", "checker report");
    out.paths = listed("paths", "path table");
  } else {
    // No manifest (a run of an older `mrct run`): the places `mrct run` writes to.
    for (const char* sub : {"view", "captures"}) {
      const auto caps = captures_in(dir / sub);
      if (std::string(sub) == "captures") {
        // The requester's (the client's node: endpoints/<node>-client.*) capture points first.
        std::vector<std::string> clients;
        for (fs::directory_iterator it(dir / "endpoints", ec), end; !ec && it != end;
             it.increment(ec)) {
          const std::string n = it->path().filename().string();
          const size_t c = n.find("-client.");
          if (c != std::string::npos) clients.push_back(n.substr(0, c) + "-");
        }
        std::vector<std::string> req, other;
        for (const auto& c : caps) {
          const std::string n = fs::path(c).filename().string();
          bool mine = false;
          for (const auto& pre : clients) mine = mine || n.rfind(pre, 0) == 0;
          (mine ? req : other).push_back(c);
        }
        out.captures.insert(out.captures.end(), req.begin(), req.end());
        out.captures.insert(out.captures.end(), other.begin(), other.end());
      } else {
        out.captures.insert(out.captures.end(), caps.begin(), caps.end());
      }
    }
    for (const auto& c : captures_in(dir)) out.captures.push_back(c);
    const Artifacts top = detect_artifacts(dir.string());
    const Artifacts eps = detect_artifacts((dir / "endpoints").string());
    const Artifacts chk = detect_artifacts((dir / "check").string());
    out.event_logs = eps.event_logs;
    out.event_logs.insert(out.event_logs.end(), top.event_logs.begin(), top.event_logs.end());
    out.decision_logs = top.decision_logs;
    out.report = !chk.report.empty() ? chk.report : top.report;
    if (exists((dir / "paths.json").string())) out.paths = (dir / "paths.json").string();
    if (out.event_logs.empty())
      out.missing.push_back("event logs: none (looked in endpoints/ and the run directory)");
    if (out.decision_logs.empty())
      out.missing.push_back(
          "decision log: none (looked for decisions.jsonl-like logs in the run "
          "directory; a run without an injector has none)");
    if (out.report.empty())
      out.missing.push_back("checker report: none (looked in check/ and the run directory)");
    if (out.paths.empty()) out.missing.push_back("path table: none (looked for paths.json)");
  }
  if (out.captures.empty()) {
    error = dir_in + ": no capture in this run directory (looked in " +
            (out.manifest.empty() ? std::string("view/, captures/ and the directory itself")
                                  : std::string("manifest.json")) +
            "; a run with --keep-captures failed/none drops them when it passes)";
    return false;
  }
  out.capture = out.captures.front();
  out.found.insert(out.found.begin(), std::string("run: ") + dir.string() +
                                          (out.manifest.empty() ? " (no manifest.json: searched)"
                                                                : " (manifest.json)"));
  add_found("capture", {out.capture});
  if (out.captures.size() > 1)
    out.found.push_back("other captures: " + std::to_string(out.captures.size() - 1) +
                        " (open one with File > Open capture)");
  if (!out.event_logs.empty()) add_found("event logs", out.event_logs);
  if (!out.decision_logs.empty()) add_found("decision log", out.decision_logs);
  if (!out.report.empty()) add_found("checker report", {out.report});
  if (!out.paths.empty()) add_found("path table", {out.paths});
  return true;
}

}  // namespace mrc::view
