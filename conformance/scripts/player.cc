// The player: runs a parsed script against a Target, statement by statement, and stops at the
// first failed expectation (like packetdrill: later expectations would judge a connection that
// has already diverged).
#include <chrono>
#include <deque>

#include "conformance/scripts/internal.h"

namespace mrc::scripts {

std::string_view outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPass:
      return "pass";
    case Outcome::kFail:
      return "fail";
    case Outcome::kNotRun:
      return "not-run";
    case Outcome::kUnsupported:
      return "unsupported";
  }
  return "?";
}

namespace {

std::string fmt_us(int64_t ns) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%+.3f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string hex_of(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

class Player {
 public:
  Player(const Script& s, Target& t, const PlayOptions& o, ScriptResult& r)
      : script_(s), target_(t), opts_(o), res_(r) {}

  void run() {
    const auto wall0 = std::chrono::steady_clock::now();
    res_.statements.resize(script_.statements.size());
    for (size_t i = 0; i < script_.statements.size(); ++i) {
      res_.statements[i].st = &script_.statements[i];
      res_.statements[i].line = script_.statements[i].pos.line;
      res_.statements[i].text = script_.statements[i].text;
    }
    std::string err;
    if (!opts_.pcap_path.empty() && !pcap_.open(opts_.pcap_path, wire::CaptureFormat::kPcapng)) {
      res_.outcome = Outcome::kFail;
      res_.error = opts_.pcap_path + ": " + pcap_.error();
      return;
    }
    if (!target_.start(script_.setup, b_, err)) {
      res_.outcome = Outcome::kFail;
      res_.error = script_.path + ": setup of " + target_.name() + " failed: " + err;
      if (const std::string why = target_.unsupported_reason(); !why.empty()) {
        res_.outcome = Outcome::kUnsupported;
        res_.error = script_.path + ": " + target_.name() + " does not support it: " + why;
      }
      finish(wall0);
      return;
    }
    vars_ = b_.vars;
    t0_ = prev_ = last_sent_ns_ = target_.now_ns();
    res_.outcome = Outcome::kPass;
    for (size_t i = 0; i < script_.statements.size(); ++i) {
      const Statement& st = script_.statements[i];
      StatementResult& sr = res_.statements[i];
      std::string why;
      const bool ok = step(st, sr, why);
      sr.t_ns = (target_.now_ns() > t0_ ? target_.now_ns() - t0_ : 0);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      if (ok && wall * 1e9 > static_cast<double>(script_.setup.bound_ns)) {
        why = "the script ran past its bound of " +
              std::to_string(script_.setup.bound_ns / 1'000'000) + " ms (wall clock)";
      }
      if (!why.empty()) {
        sr.outcome = Outcome::kFail;
        sr.detail = why;
        res_.outcome = Outcome::kFail;
        const uint32_t col = fail_column_ != 0 ? fail_column_ : st.pos.column;
        res_.error = script_.path + ":" + std::to_string(st.pos.line) + ":" + std::to_string(col) +
                     ": " + why;
        // A request the implementation cannot serve (e.g. `post write` on a responder-only
        // harness) makes the script unsupported there, not failed.
        if (const std::string u = target_.unsupported_reason(); !u.empty()) {
          sr.outcome = Outcome::kNotRun;
          res_.outcome = Outcome::kUnsupported;
          res_.error = script_.path + ":" + std::to_string(st.pos.line) + ": " + target_.name() +
                       " does not support it: " + u;
        }
        break;
      }
      sr.outcome = Outcome::kPass;
    }
    // Whatever the implementation sent after the last statement still goes into the capture.
    TargetFrame f;
    while (target_.next_frame(target_.now_ns(), f)) record(f, false);
    finish(wall0);
  }

 private:
  void finish(std::chrono::steady_clock::time_point wall0) {
    target_.stop();
    if (!opts_.pcap_path.empty() && !pcap_.close() && res_.error.empty()) {
      res_.outcome = Outcome::kFail;
      res_.error = opts_.pcap_path + ": " + pcap_.error();
    }
    res_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  }

  void record(const TargetFrame& f, bool from_tester) {
    if (opts_.pcap_path.empty()) return;
    const std::string comment =
        std::string(from_tester ? "tester -> implementation" : "implementation -> tester") +
        ", plane " + std::to_string(f.plane);
    pcap_.write(f.t_ns, wire::as_bytes(f.bytes), 0, comment);
  }

  bool ignored(const wire::DecodedFrame& d) const {
    if (!d.roce || d.op == nullptr) return false;
    for (const std::string& n : script_.setup.ignore)
      if (d.op->name == n) return true;
    return false;
  }

  // The next frame from the implementation that the script does not ignore, by `deadline`.
  bool fetch(uint64_t deadline, TargetFrame& out) {
    while (true) {
      if (!pending_.empty()) {
        if (pending_.front().t_ns > deadline) return false;
        out = std::move(pending_.front());
        pending_.pop_front();
        return true;
      }
      TargetFrame f;
      if (!target_.next_frame(deadline, f)) return false;
      record(f, false);
      wire::DecodedFrame d;
      wire::decode_frame(wire::as_bytes(f.bytes), d);
      if (ignored(d)) continue;
      out = std::move(f);
      return true;
    }
  }

  // Lets time pass to `until`, keeping what arrives meanwhile for later expectations.
  void pass_time(uint64_t until) {
    TargetFrame f;
    while (target_.now_ns() < until && target_.next_frame(until, f)) {
      record(f, false);
      wire::DecodedFrame d;
      wire::decode_frame(wire::as_bytes(f.bytes), d);
      if (!ignored(d)) pending_.push_back(std::move(f));
    }
  }

  std::string summary(const TargetFrame& f) const {
    wire::DecodedFrame d;
    wire::DecodeOptions o;
    o.verify_icrc = true;
    wire::decode_frame(wire::as_bytes(f.bytes), d, o);
    std::string s =
        fmt_us(static_cast<int64_t>(f.t_ns - t0_)) + " plane " + std::to_string(f.plane) + ": ";
    wire::append_summary(s, d);
    return s;
  }

  bool eval_field(const FieldArg& a, const Expr& e, bool psn, uint64_t& v, std::string& why) {
    if (!eval(e, vars_, psn, v, why)) {
      why = a.name + " (column " + std::to_string(e.pos.column) + "): " + why;
      return false;
    }
    return true;
  }

  // Judges one value against a matcher; captures into an unbound lone variable.
  bool judge(const FieldArg& a, uint64_t value, bool psn, std::string& why) {
    const Matcher& m = a.m;
    const bool ts = ts_field(a.name);
    uint64_t lo = 0, hi = 0;
    switch (m.kind) {
      case Matcher::Kind::kAny:
        return true;
      case Matcher::Kind::kExact:
        if (m.lo.lone_var() && !vars_.count(m.lo.terms[0].var)) {
          vars_[m.lo.terms[0].var] = value;
          return true;
        }
        if (!eval_field(a, m.lo, psn, lo, why)) return false;
        if (ts) lo &= 0xFFFF;
        if (value == lo) return true;
        why = a.name + " is " + std::to_string(value) + " (" + hex_of(value) + "), expected " +
              a.text + " = " + std::to_string(lo) + " (" + hex_of(lo) + ")";
        return false;
      case Matcher::Kind::kNot:
        if (!eval_field(a, m.lo, psn, lo, why)) return false;
        if (ts) lo &= 0xFFFF;
        if (value != lo) return true;
        why = a.name + " is " + std::to_string(value) + ", expected anything but that";
        return false;
      case Matcher::Kind::kRange: {
        if (!eval_field(a, m.lo, psn, lo, why) || !eval_field(a, m.hi, psn, hi, why)) return false;
        // 16-bit timestamps wrap: the range runs forward from lo to hi mod 2^16.
        const bool in =
            psn ? wire::psn_le(static_cast<uint32_t>(lo), static_cast<uint32_t>(value)) &&
                      wire::psn_le(static_cast<uint32_t>(value), static_cast<uint32_t>(hi))
            : ts ? ((value - lo) & 0xFFFF) <= ((hi - lo) & 0xFFFF)
                 : lo <= value && value <= hi;
        if (in) return true;
        why = a.name + " is " + std::to_string(value) + " (" + hex_of(value) + "), expected " +
              a.text + " = " + std::to_string(lo) + ".." + std::to_string(hi);
        return false;
      }
    }
    return false;
  }

  void window(const Statement& st, uint64_t& lo, uint64_t& hi) const {
    const uint64_t wlo = st.has_window ? st.window_lo_ns : 0;
    const uint64_t whi = st.has_window ? st.window_hi_ns : script_.setup.default_window_ns;
    lo = prev_ + wlo > opts_.tolerance_ns ? prev_ + wlo - opts_.tolerance_ns : 0;
    hi = prev_ + whi + opts_.tolerance_ns;
  }

  bool step(const Statement& st, StatementResult& sr, std::string& why) {
    switch (st.verb) {
      case Verb::kSend:
        return do_send(st, sr, why);
      case Verb::kWait:
        pass_time(prev_ + st.duration_ns);
        prev_ += st.duration_ns;
        return true;
      case Verb::kExpect:
        return do_expect(st, sr, why);
      case Verb::kExpectNothing: {
        TargetFrame f;
        if (fetch(prev_ + st.duration_ns, f)) {
          sr.frames.push_back(summary(f));
          why = "expected nothing for " + std::to_string(st.duration_ns / 1000) +
                " us, got a frame at " + fmt_us(static_cast<int64_t>(f.t_ns - prev_)) + ": " +
                summary(f);
          return true;
        }
        prev_ += st.duration_ns;
        return true;
      }
      case Verb::kExpectCompletion:
        return do_completion(st, sr, why);
      case Verb::kExpectNoCompletion: {
        for (const Completion& c : target_.poll_completions()) completions_.push_back(c);
        if (!completions_.empty()) {
          const Completion& c = completions_.front();
          why = "expected no completion, got one: status " + std::to_string(c.status) + " len " +
                std::to_string(c.byte_len) + " imm " + std::to_string(c.imm);
        }
        return true;
      }
      case Verb::kExpectMemory:
        return do_memory(st, sr, why);
      case Verb::kPostWrite:
        return do_post(st, why);
    }
    return true;
  }

  bool do_send(const Statement& st, StatementResult& sr, std::string& why) {
    SendValues v;
    for (const FieldArg& a : st.fields) {
      if (a.name == "fill") {
        v.fill = a.text;
        if (!valid_fill(a.text)) {
          why = "fill: expected inc:N, byte:N or zero, got '" + a.text + "'";
          return true;
        }
        continue;
      }
      if (a.name == "payload") {
        if (!parse_hex(a.text, v.payload, why)) {
          why = "payload: " + why;
          return true;
        }
        v.has_payload = true;
        continue;
      }
      if (a.name == "hex") continue;
      uint64_t x = 0;
      if (!eval_field(a, a.m.lo, psn_field(a.name), x, why)) return true;
      v.fields.emplace_back(a.name, x);
    }
    if (st.has_window) pass_time(prev_ + st.window_lo_ns);
    std::vector<std::byte> frame;
    uint8_t plane = 1;
    if (!build_frame(st, v, script_.setup, b_, frame, plane, why)) return true;
    TargetFrame f;
    f.bytes = frame;
    f.plane = plane;
    f.t_ns = target_.now_ns();
    last_sent_ns_ = f.t_ns;  // before the frame leaves: $svc_max stays an upper bound
    record(f, true);
    sr.frames.push_back(summary(f));
    if (!target_.inject(frame, plane, why)) {
      why = "inject: " + why;
      return true;
    }
    prev_ = target_.now_ns();
    return true;
  }

  bool do_expect(const Statement& st, StatementResult& sr, std::string& why) {
    uint64_t lo = 0, hi = 0;
    window(st, lo, hi);
    TargetFrame f;
    if (!fetch(hi, f)) {
      why = "expected " + st.opcode + " within " + fmt_us(static_cast<int64_t>(hi - prev_)) +
            ", nothing arrived";
      return true;
    }
    sr.frames.push_back(summary(f));
    if (f.t_ns < lo) {
      why = "expected " + st.opcode + " no earlier than " +
            fmt_us(static_cast<int64_t>(lo - prev_)) + ", a frame arrived at " +
            fmt_us(static_cast<int64_t>(f.t_ns - prev_)) + ": " + summary(f);
      return true;
    }
    wire::DecodedFrame d;
    wire::decode_frame(wire::as_bytes(f.bytes), d);
    if (st.opcode != "any") {
      const uint8_t want = *opcode_by_name(st.opcode);
      if (!d.roce || d.bth.opcode != want) {
        why = "expected " + st.opcode + ", got " + summary(f);
        return true;
      }
    }
    // $svc_max: the longest service time the implementation can have spent on the tester's
    // last frame before sending this one, in the 128 ns ticks of ts_echo / svc_time (rounded
    // up). 0 on the virtual clock when the answer is immediate; on real time it bounds what
    // SVA=1 may add to an echoed ts16.
    const uint64_t since = f.t_ns > last_sent_ns_ ? f.t_ns - last_sent_ns_ : 0;
    vars_["svc_max"] = (since + 127) / 128;
    const FrameCtx ctx{script_.setup.format, f.plane};
    for (const FieldArg& a : st.fields) {
      const std::optional<uint64_t> v = get_field(a.name, d, ctx);
      if (!v) {
        why = "expected field " + a.name + ", the frame has no such header: " + summary(f);
        return true;
      }
      if (!judge(a, *v, psn_field(a.name), why)) {
        fail_column_ = a.pos.column;
        why += " in " + summary(f);
        return true;
      }
    }
    prev_ = f.t_ns;
    return true;
  }

  bool do_completion(const Statement& st, StatementResult& sr, std::string& why) {
    uint64_t lo = 0, hi = 0;
    window(st, lo, hi);
    while (true) {
      for (const Completion& c : target_.poll_completions()) completions_.push_back(c);
      if (!completions_.empty()) break;
      if (target_.now_ns() >= hi) {
        why = "expected a completion within " + fmt_us(static_cast<int64_t>(hi - prev_)) +
              ", none came";
        return true;
      }
      // Frames keep flowing while we wait (they stay queued for later expectations).
      pass_time(std::min(hi, target_.now_ns() + 50'000));
    }
    const Completion c = completions_.front();
    completions_.pop_front();
    sr.frames.push_back("completion wr_id " + std::to_string(c.wr_id) + " status " +
                        std::to_string(c.status) + " opcode " + std::to_string(c.opcode) + " len " +
                        std::to_string(c.byte_len) + " imm " + std::to_string(c.imm));
    for (const FieldArg& a : st.fields) {
      uint64_t v = 0;
      if (a.name == "wr_id") v = c.wr_id;
      if (a.name == "status") v = c.status;
      if (a.name == "opcode") v = c.opcode;
      if (a.name == "len") v = c.byte_len;
      if (a.name == "imm") v = c.imm;
      if (a.name == "with_imm") v = c.with_imm;
      if (a.name == "qpn") v = c.qpn;
      if (!judge(a, v, false, why)) {
        why = "completion " + why;
        return true;
      }
    }
    prev_ = std::max(prev_, target_.now_ns());
    return true;
  }

  bool do_memory(const Statement& st, StatementResult& sr, std::string& why) {
    uint64_t at = 0, len = 0;
    std::string fill;
    std::vector<std::byte> want;
    for (const FieldArg& a : st.fields) {
      if (a.name == "at" && !eval_field(a, a.m.lo, false, at, why)) return true;
      if (a.name == "len" && !eval_field(a, a.m.lo, false, len, why)) return true;
      if (a.name == "fill") fill = a.text;
      if (a.name == "hex") parse_hex(a.text, want, why);
    }
    if (!fill.empty()) {
      if (len > (1u << 26)) {
        why = "len " + std::to_string(len) + " is larger than any region a script sets up";
        return true;
      }
      want.resize(len);
      for (size_t k = 0; k < len; ++k) want[k] = std::byte{fill_byte(fill, k)};
    } else if (want.size() != len) {
      why = "hex= has " + std::to_string(want.size()) + " bytes, len=" + std::to_string(len);
      return true;
    }
    std::vector<std::byte> got;
    if (!target_.read_memory(at, len, got, why)) return true;
    for (size_t k = 0; k < len; ++k) {
      if (got[k] != want[k]) {
        why = "memory at " + hex_of(at + k) + " (byte " + std::to_string(k) + ") is " +
              hex_of(std::to_integer<uint64_t>(got[k])) + ", expected " +
              hex_of(std::to_integer<uint64_t>(want[k]));
        sr.frames.push_back("memory " + hex_of(at) + " +" + std::to_string(len));
        return true;
      }
    }
    return true;
  }

  bool do_post(const Statement& st, std::string& why) {
    uint64_t len = 0, wr_id = ++wr_seq_, va = script_.setup.tester_va,
             rkey = script_.setup.tester_rkey;
    std::optional<uint32_t> imm;
    uint8_t seed = 0;
    for (const FieldArg& a : st.fields) {
      uint64_t x = 0;
      if (a.name == "fill") {
        seed = fill_byte(a.text, 0);
        continue;
      }
      if (!eval_field(a, a.m.lo, false, x, why)) return true;
      if (a.name == "len") len = x;
      if (a.name == "wr_id") wr_id = x;
      if (a.name == "va") va = x;
      if (a.name == "rkey") rkey = x;
      if (a.name == "imm") imm = static_cast<uint32_t>(x);
    }
    // The WR may leave before the request returns (a real implementation answers over a pipe):
    // later windows count from when it was posted.
    const uint64_t posted_ns = target_.now_ns();
    if (!target_.post_write(wr_id, static_cast<uint32_t>(len), imm, va, static_cast<uint32_t>(rkey),
                            seed, why)) {
      why = "post write: " + why;
      return true;
    }
    prev_ = posted_ns;
    return true;
  }

  const Script& script_;
  Target& target_;
  const PlayOptions& opts_;
  ScriptResult& res_;
  Bindings b_;
  std::map<std::string, uint64_t> vars_;
  uint64_t t0_ = 0, prev_ = 0;
  uint64_t last_sent_ns_ = 0;  // when the tester's last frame was injected
  uint64_t wr_seq_ = 0;
  uint32_t fail_column_ = 0;  // the field that failed, for file:line:column
  std::deque<TargetFrame> pending_;
  std::deque<Completion> completions_;
  wire::CaptureWriter pcap_;
};

}  // namespace

ScriptResult play(const Script& script, Target& target, const PlayOptions& opts) {
  ScriptResult r;
  r.script = script.name;
  r.path = script.path;
  r.target = target.name();
  r.rules = script.setup.rules;
  r.tags = script.setup.tags;
  Player p(script, target, opts, r);
  p.run();
  return r;
}

}  // namespace mrc::scripts
