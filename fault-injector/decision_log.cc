// The decision log: JSON lines, one per frame the injector touched, then a summary line.
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <vector>

#include "fault-injector/faults.h"

namespace mrc::faults {

namespace {

void append_u64(std::string& s, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void append_str(std::string& s, std::string_view v) {
  s += '"';
  for (char c : v) {
    switch (c) {
      case '"':
        s += "\\\"";
        break;
      case '\\':
        s += "\\\\";
        break;
      case '\n':
        s += "\\n";
        break;
      case '\r':
        s += "\\r";
        break;
      case '\t':
        s += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          s += buf;
        } else {
          s += c;
        }
    }
  }
  s += '"';
}

void key(std::string& s, const char* k) {
  if (s.back() != '{') s += ',';
  s += '"';
  s += k;
  s += "\":";
}

}  // namespace

bool should_log(const Decision& d, bool log_pass) {
  if (d.action != Action::kPass) return true;
  return log_pass && d.frame.roce;
}

void append_decision_json(std::string& out, const Decision& d, std::string_view link_name,
                          uint64_t seed) {
  out += '{';
  key(out, "t_ns");
  append_u64(out, d.t_ns);
  key(out, "link");
  append_str(out, link_name);
  key(out, "dir");
  append_str(out, direction_name(d.dir));
  key(out, "action");
  append_str(out, action_name(d.action));
  const FrameInfo& f = d.frame;
  key(out, "qpn");
  if (f.roce)
    append_u64(out, f.qpn);
  else
    out += "null";
  key(out, "psn");
  if (f.roce)
    append_u64(out, f.psn);
  else
    out += "null";
  key(out, "opcode");
  if (f.roce)
    append_u64(out, f.opcode);
  else
    out += "null";
  key(out, "ev");
  if (f.roce)
    append_u64(out, f.ev);
  else
    out += "null";
  if (!f.src.empty()) {
    key(out, "src");
    append_str(out, f.src);
    key(out, "dst");
    append_str(out, f.dst);
  }
  key(out, "reason");
  append_str(out, d.reason);
  key(out, "seed");
  append_u64(out, seed);
  key(out, "frame");
  append_u64(out, d.frame_no);
  key(out, "len");
  append_u64(out, f.len);
  if (f.roce && f.op) {
    key(out, "op");
    append_str(out, f.op->name);
  }
  if (f.roce && f.rtx) {
    key(out, "rtx");
    out += "true";
  }
  if (!d.rules.empty()) {
    key(out, "rules");
    append_str(out, d.rules);
  }
  if (d.delay_ns) {
    key(out, "delay_ns");
    append_u64(out, d.delay_ns);
  }
  if (d.copies) {
    key(out, "copies");
    append_u64(out, d.copies);
  }
  if (d.rewritten && d.action != Action::kDrop) {
    key(out, "out_len");
    append_u64(out, d.bytes.size());
  }
  // More than one effect (e.g. ECN-marked and delayed): list them all.
  if ((d.applied & (d.applied - 1)) != 0) {
    key(out, "actions");
    out += '[';
    bool first = true;
    for (size_t a = 0; a < kActionCount; ++a) {
      if (!(d.applied & (1u << a))) continue;
      if (!first) out += ',';
      first = false;
      append_str(out, action_name(static_cast<Action>(a)));
    }
    out += ']';
  }
  out += '}';
}

void append_summary_json(std::string& out, const Policy& policy) {
  const Stats& s = policy.stats();
  const auto& links = policy.config().links;
  out += "{\"summary\":{";
  out += "\"seed\":";
  append_u64(out, policy.seed());
  out += ",\"frames\":";
  append_u64(out, s.frames);
  out += ",\"links\":{";
  for (size_t l = 0; l < links.size(); ++l) {
    if (l) out += ',';
    append_str(out, links[l].name);
    out += ":{";
    for (size_t dir = 0; dir < 2; ++dir) {
      if (dir) out += ',';
      append_str(out, direction_name(static_cast<Direction>(dir)));
      out += ":{";
      const LinkDirStats& ld = s.links[l][dir];
      out += "\"frames\":";
      append_u64(out, ld.frames);
      out += ",\"bytes\":";
      append_u64(out, ld.bytes);
      for (size_t a = 0; a < kActionCount; ++a) {
        out += ',';
        append_str(out, action_name(static_cast<Action>(a)));
        out += ':';
        append_u64(out, ld.actions[a]);
      }
      out += '}';
    }
    out += '}';
  }
  out += "},\"rules\":{";
  for (size_t i = 0; i < s.rule_hits.size(); ++i) {
    if (i) out += ',';
    append_str(out, s.rule_hits[i].first);
    out += ':';
    append_u64(out, s.rule_hits[i].second);
  }
  out += "}}}";
}

struct DecisionLog::Impl {
  FILE* file = nullptr;
  bool is_stdout = false;
  bool log_pass = true;
  std::string path;
  std::string tmp_path;
  std::string line;
  std::string error;
  uint64_t lines = 0;
  bool failed = false;
  std::vector<char> buf;  // stdio buffer; must outlive the FILE
};

DecisionLog::DecisionLog() : impl_(std::make_unique<Impl>()) {}

DecisionLog::~DecisionLog() {
  if (impl_->file && !impl_->is_stdout) {
    // Not closed: a run that ended abnormally. Keep what was written under the final name so
    // the decisions taken so far are not lost.
    std::fclose(impl_->file);
    std::rename(impl_->tmp_path.c_str(), impl_->path.c_str());
  }
}

bool DecisionLog::open(const std::string& path, bool log_pass, std::string* error) {
  Impl& m = *impl_;
  m.log_pass = log_pass;
  m.path = path;
  if (path == "-") {
    m.file = stdout;
    m.is_stdout = true;
    return true;
  }
  m.tmp_path = path + ".tmp";
  m.file = std::fopen(m.tmp_path.c_str(), "w");
  if (!m.file) {
    m.error = m.tmp_path + ": " + std::strerror(errno);
    if (error) *error = m.error;
    return false;
  }
  m.buf.resize(1 << 16);
  std::setvbuf(m.file, m.buf.data(), _IOFBF, m.buf.size());
  return true;
}

bool DecisionLog::is_open() const {
  return impl_->file != nullptr;
}

void DecisionLog::write(const Decision& d, const Policy& policy) {
  Impl& m = *impl_;
  if (!m.file || !should_log(d, m.log_pass)) return;
  m.line.clear();
  const auto& links = policy.config().links;
  append_decision_json(m.line, d, d.link < links.size() ? links[d.link].name : "?", policy.seed());
  m.line += '\n';
  if (std::fwrite(m.line.data(), 1, m.line.size(), m.file) != m.line.size() && !m.failed) {
    m.failed = true;
    m.error = m.path + ": write failed: " + std::strerror(errno);
  }
  ++m.lines;
}

bool DecisionLog::close(const Policy* policy) {
  Impl& m = *impl_;
  if (!m.file) return !m.failed;
  if (policy) {
    m.line.clear();
    append_summary_json(m.line, *policy);
    m.line += '\n';
    if (std::fwrite(m.line.data(), 1, m.line.size(), m.file) != m.line.size() && !m.failed) {
      m.failed = true;
      m.error = m.path + ": write failed: " + std::strerror(errno);
    }
  }
  if (m.is_stdout) {
    std::fflush(m.file);
  } else {
    if (std::fclose(m.file) != 0 && !m.failed) {
      m.failed = true;
      m.error = m.path + ": close failed: " + std::strerror(errno);
    }
    if (std::rename(m.tmp_path.c_str(), m.path.c_str()) != 0 && !m.failed) {
      m.failed = true;
      m.error = m.path + ": rename failed: " + std::strerror(errno);
    }
  }
  m.file = nullptr;
  return !m.failed;
}

uint64_t DecisionLog::lines() const {
  return impl_->lines;
}
const std::string& DecisionLog::error() const {
  return impl_->error;
}

}  // namespace mrc::faults
