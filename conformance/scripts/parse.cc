// The script parser: header block, then one statement per line. Every error names the line and
// column of the offending token and says what was expected there.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>

#include "conformance/scripts/internal.h"

namespace mrc::scripts {

std::string ParseError::format() const {
  return file + ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column) + ": " + message;
}

namespace {

struct Token {
  std::string_view text;
  uint32_t column = 0;  // 1-based
};

// Splits a line into whitespace-separated tokens; '#' starts a comment.
std::vector<Token> tokenize(std::string_view line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    if (i >= line.size() || line[i] == '#') break;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' &&
           line[i] != '#')
      ++i;
    out.push_back({line.substr(start, i - start), static_cast<uint32_t>(start + 1)});
  }
  return out;
}

class LineParser {
 public:
  LineParser(std::string_view file, uint32_t line, ParseError& err)
      : file_(file), line_(line), err_(err) {}

  bool fail(uint32_t column, std::string msg) {
    err_.file = std::string(file_);
    err_.pos = {line_, column};
    err_.message = std::move(msg);
    return false;
  }
  SourcePos at(uint32_t column) const { return {line_, column}; }

  // Integer literal: decimal, 0x hex, 0b binary, with optional '_' separators.
  bool number(std::string_view s, uint32_t column, uint64_t& v) {
    std::string digits;
    for (char c : s)
      if (c != '_') digits.push_back(c);
    int base = 10;
    std::string_view d = digits;
    if (d.size() > 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'X')) {
      base = 16;
      d.remove_prefix(2);
    } else if (d.size() > 2 && d[0] == '0' && (d[1] == 'b' || d[1] == 'B')) {
      base = 2;
      d.remove_prefix(2);
    }
    auto [p, ec] = std::from_chars(d.data(), d.data() + d.size(), v, base);
    if (d.empty() || ec != std::errc() || p != d.data() + d.size())
      return fail(column,
                  "expected a number (decimal, 0x hex or 0b binary), got '" + std::string(s) + "'");
    return true;
  }

  // Duration: NUMBER followed by ns, us, ms or s.
  bool duration(std::string_view s, uint32_t column, uint64_t& ns) {
    static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
        {"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};
    if (s == "0") {  // zero needs no unit
      ns = 0;
      return true;
    }
    for (const auto& [unit, mult] : kUnits) {
      if (s.size() > unit.size() && s.ends_with(unit)) {
        const std::string_view num = s.substr(0, s.size() - unit.size());
        if (unit == "s" && (num.ends_with("m") || num.ends_with("u") || num.ends_with("n")))
          continue;
        double v = 0;
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
        if (ec != std::errc() || p != num.data() + num.size() || v < 0)
          return fail(column,
                      "expected a duration such as 500us, 2ms or 1s, got '" + std::string(s) + "'");
        // Found by script_fuzz: a huge number would overflow the conversion (undefined).
        const double total = v * static_cast<double>(mult) + 0.5;
        if (!(total < 1.8e19))
          return fail(column, "duration '" + std::string(s) + "' is too long (at most 1.8e10 s)");
        ns = static_cast<uint64_t>(total);
        return true;
      }
    }
    return fail(column,
                "expected a duration with a unit (ns, us, ms, s), got '" + std::string(s) + "'");
  }

  // Expression: term (('+'|'-') term)*; term = number | $var | named constant.
  bool expr(std::string_view s, uint32_t column, Expr& out) {
    out = Expr{};
    out.pos = at(column);
    if (s.empty()) return fail(column, "expected a value after '='");
    size_t i = 0;
    bool negative = false;
    if (s[0] == '-') {
      negative = true;
      i = 1;
    }
    while (true) {
      size_t j = i;
      while (j < s.size() && s[j] != '+' && s[j] != '-') ++j;
      const std::string_view t = s.substr(i, j - i);
      const uint32_t col = column + static_cast<uint32_t>(i);
      Expr::Term term;
      term.negative = negative;
      term.pos = at(col);
      if (t.empty()) return fail(col, "expected a number, $variable or constant name");
      if (t[0] == '$') {
        if (t.size() < 2 || !std::all_of(t.begin() + 1, t.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
            }))
          return fail(col, "expected a variable name ($ then letters, digits, '_'), got '" +
                               std::string(t) + "'");
        term.is_var = true;
        term.var = std::string(t.substr(1));
      } else if (std::isdigit(static_cast<unsigned char>(t[0]))) {
        if (!number(t, col, term.value)) return false;
      } else if (auto c = named_constant(t)) {
        term.value = *c;
      } else {
        return fail(col, "expected a number, $variable or constant name (" + constant_names_hint() +
                             "), got '" + std::string(t) + "'");
      }
      out.terms.push_back(std::move(term));
      if (j >= s.size()) break;
      negative = s[j] == '-';
      i = j + 1;
      if (i >= s.size())
        return fail(column + static_cast<uint32_t>(j),
                    "expected a term after '" + std::string(1, s[j]) + "'");
    }
    return true;
  }

  // Matcher: '*' | '!'EXPR | EXPR | EXPR..EXPR
  bool matcher(std::string_view s, uint32_t column, Matcher& m) {
    if (s == "*") {
      m.kind = Matcher::Kind::kAny;
      return true;
    }
    if (s.starts_with("!")) {
      m.kind = Matcher::Kind::kNot;
      return expr(s.substr(1), column + 1, m.lo);
    }
    const size_t dots = s.find("..");
    if (dots != std::string_view::npos) {
      m.kind = Matcher::Kind::kRange;
      if (!expr(s.substr(0, dots), column, m.lo)) return false;
      return expr(s.substr(dots + 2), column + static_cast<uint32_t>(dots + 2), m.hi);
    }
    m.kind = Matcher::Kind::kExact;
    return expr(s, column, m.lo);
  }

  // +T or +T1..T2 (window relative to the previous event).
  bool window(const Token& t, Statement& st) {
    std::string_view s = t.text.substr(1);
    st.has_window = true;
    const size_t dots = s.find("..");
    if (dots == std::string_view::npos) {
      if (!duration(s, t.column + 1, st.window_lo_ns)) return false;
      st.window_hi_ns = st.window_lo_ns;
      return true;
    }
    if (!duration(s.substr(0, dots), t.column + 1, st.window_lo_ns)) return false;
    if (!duration(s.substr(dots + 2), t.column + 3 + static_cast<uint32_t>(dots), st.window_hi_ns))
      return false;
    if (st.window_hi_ns < st.window_lo_ns)
      return fail(t.column, "expected a window +LO..HI with LO <= HI");
    return true;
  }

  bool fields(const std::vector<Token>& toks, size_t from, Statement& st, bool allow_flags) {
    for (size_t i = from; i < toks.size(); ++i) {
      const Token& t = toks[i];
      const size_t eq = t.text.find('=');
      if (eq == std::string_view::npos || t.text.substr(eq).starts_with("=.")) {
        if (allow_flags && is_send_flag(t.text)) {
          st.flags.emplace_back(t.text);
          continue;
        }
        return fail(t.column, std::string("expected FIELD=VALUE") +
                                  (allow_flags ? " or a flag (bad_icrc, trim, trim_lasthop)" : "") +
                                  ", got '" + std::string(t.text) + "'");
      }
      FieldArg f;
      f.name = std::string(t.text.substr(0, eq));
      f.pos = at(t.column);
      f.text = std::string(t.text.substr(eq + 1));
      const uint32_t vcol = t.column + static_cast<uint32_t>(eq + 1);
      if (!known_field(st.verb, f.name))
        return fail(t.column, "unknown field '" + f.name + "' for " +
                                  std::string(verb_name(st.verb)) +
                                  "; expected one of: " + fields_hint(st.verb));
      if (text_field(f.name)) {
        if (f.text.empty()) return fail(vcol, "expected a value after '" + f.name + "='");
      } else if (!matcher(f.text, vcol, f.m)) {
        return false;
      }
      if ((st.verb == Verb::kSend || st.verb == Verb::kPostWrite) &&
          f.m.kind != Matcher::Kind::kExact && !text_field(f.name))
        return fail(vcol, "expected a single value: ranges, '*' and '!' are for expectations");
      st.fields.push_back(std::move(f));
    }
    return true;
  }

  bool statement(const std::vector<Token>& toks, Statement& st) {
    size_t i = 0;
    if (toks[0].text.starts_with("+")) {
      if (!window(toks[0], st)) return false;
      ++i;
      if (i >= toks.size())
        return fail(toks[0].column + static_cast<uint32_t>(toks[0].text.size()),
                    "expected a statement after the timing window");
    }
    const Token& v = toks[i];
    auto need = [&](size_t k, std::string_view what) {
      if (k < toks.size()) return true;
      const Token& last = toks.back();
      return fail(last.column + static_cast<uint32_t>(last.text.size()),
                  "expected " + std::string(what));
    };
    if (v.text == "send") {
      st.verb = Verb::kSend;
      if (!need(i + 1, "an opcode name (e.g. WRITE_ONLY) or 'raw' after 'send'")) return false;
      const Token& op = toks[i + 1];
      st.opcode = std::string(op.text);
      if (st.opcode != "raw" && !opcode_by_name(st.opcode))
        return fail(op.column, "expected an opcode name (" + opcode_names_hint() +
                                   ") or 'raw', got '" + st.opcode + "'");
      if (st.opcode == "raw") {
        if (toks.size() != i + 3 || !toks[i + 2].text.starts_with("hex="))
          return fail(op.column + 4,
                      "expected 'send raw hex=HEXBYTES' (one token, the whole frame)");
        FieldArg f;
        f.name = "hex";
        f.pos = at(toks[i + 2].column);
        f.text = std::string(toks[i + 2].text.substr(4));
        std::vector<std::byte> bytes;
        std::string why;
        if (!parse_hex(f.text, bytes, why)) return fail(toks[i + 2].column + 4, why);
        st.fields.push_back(std::move(f));
        return true;
      }
      return fields(toks, i + 2, st, true);
    }
    if (v.text == "wait") {
      st.verb = Verb::kWait;
      if (st.has_window) return fail(toks[0].column, "'wait' takes no timing window");
      if (!need(i + 1, "a duration after 'wait' (e.g. wait 2ms)")) return false;
      if (toks.size() > i + 2)
        return fail(toks[i + 2].column, "expected end of line after 'wait T'");
      return duration(toks[i + 1].text, toks[i + 1].column, st.duration_ns);
    }
    if (v.text == "post") {
      st.verb = Verb::kPostWrite;
      if (!need(i + 1, "'write' after 'post'")) return false;
      if (toks[i + 1].text != "write")
        return fail(toks[i + 1].column,
                    "expected 'write' after 'post', got '" + std::string(toks[i + 1].text) + "'");
      if (!fields(toks, i + 2, st, false)) return false;
      if (!has_field(st, "len")) return fail(v.column, "expected 'len=N' in 'post write'");
      return true;
    }
    if (v.text == "expect") {
      if (!need(i + 1,
                "an opcode name, 'any', 'nothing', 'completion', 'no' or 'memory' after 'expect'"))
        return false;
      const Token& what = toks[i + 1];
      if (what.text == "nothing") {
        st.verb = Verb::kExpectNothing;
        if (st.has_window) return fail(toks[0].column, "'expect nothing' takes no timing window");
        if (toks.size() != i + 4 || toks[i + 2].text != "for")
          return fail(what.column + 8, "expected 'expect nothing for T' (e.g. for 2ms)");
        return duration(toks[i + 3].text, toks[i + 3].column, st.duration_ns);
      }
      if (what.text == "completion") {
        st.verb = Verb::kExpectCompletion;
        return fields(toks, i + 2, st, false);
      }
      if (what.text == "no") {
        st.verb = Verb::kExpectNoCompletion;
        if (toks.size() != i + 3 || toks[i + 2].text != "completion")
          return fail(what.column + 3, "expected 'expect no completion'");
        return true;
      }
      if (what.text == "memory") {
        st.verb = Verb::kExpectMemory;
        if (!fields(toks, i + 2, st, false)) return false;
        if (!has_field(st, "at") || !has_field(st, "len") ||
            (has_field(st, "fill") == has_field(st, "hex")))
          return fail(what.column, "expected 'expect memory at=VA len=N' and one of fill=, hex=");
        for (const FieldArg& f : st.fields) {
          if (f.name == "hex") {
            std::vector<std::byte> b;
            std::string why;
            if (!parse_hex(f.text, b, why)) return fail(f.pos.column + 4, why);
          }
          if (f.name == "fill" && !valid_fill(f.text))
            return fail(f.pos.column + 5,
                        "expected fill=inc:N, fill=byte:N or fill=zero, got '" + f.text + "'");
        }
        return true;
      }
      st.verb = Verb::kExpect;
      st.opcode = std::string(what.text);
      if (st.opcode != "any" && !opcode_by_name(st.opcode))
        return fail(what.column, "expected an opcode name (" + opcode_names_hint() +
                                     "), 'any', 'nothing', 'completion', 'no' or 'memory', got '" +
                                     st.opcode + "'");
      return fields(toks, i + 2, st, false);
    }
    return fail(v.column, "expected a statement (send, expect, wait, post) or a header key (" +
                              header_keys_hint() + "), got '" + std::string(v.text) + "'");
  }

  // Header line: KEY VALUE...
  bool header(const std::vector<Token>& toks, Setup& s, bool& handled) {
    handled = true;
    const std::string_view k = toks[0].text;
    auto one = [&](std::string_view what) -> const Token* {
      if (toks.size() != 2) {
        const uint32_t col =
            toks.size() < 2 ? toks[0].column + static_cast<uint32_t>(k.size()) : toks[2].column;
        fail(col, "expected one value after '" + std::string(k) + "': " + std::string(what));
        return nullptr;
      }
      return &toks[1];
    };
    auto num = [&](uint64_t lo, uint64_t hi, uint64_t& v) {
      const Token* t = one(std::to_string(lo) + ".." + std::to_string(hi));
      if (!t || !number(t->text, t->column, v)) return false;
      if (v < lo || v > hi)
        return fail(t->column, "expected " + std::string(k) + " in " + std::to_string(lo) + ".." +
                                   std::to_string(hi) + ", got " + std::string(t->text));
      return true;
    };
    uint64_t v = 0;
    if (k == "role") {
      const Token* t = one("responder or requester");
      if (!t) return false;
      if (t->text == "responder")
        s.role = Role::kResponder;
      else if (t->text == "requester")
        s.role = Role::kRequester;
      else
        return fail(t->column,
                    "expected 'responder' or 'requester' (the role of the "
                    "implementation under test), got '" +
                        std::string(t->text) + "'");
      return true;
    }
    if (k == "rules" || k == "tags" || k == "ignore" || k == "mutants") {
      if (toks.size() < 2)
        return fail(toks[0].column + static_cast<uint32_t>(k.size()),
                    "expected at least one value after '" + std::string(k) + "'");
      for (size_t i = 1; i < toks.size(); ++i) {
        const std::string t(toks[i].text);
        if (k == "rules" && !t.starts_with("MRC-"))
          return fail(toks[i].column, "expected a rule ID such as MRC-RSP-001, got '" + t + "'");
        if (k == "ignore" && !opcode_by_name(t))
          return fail(toks[i].column, "expected an opcode name to ignore (" + opcode_names_hint() +
                                          "), got '" + t + "'");
        if (k == "mutants" && !runtime::parse_mutant(t))
          return fail(toks[i].column,
                      "expected a mutant name (mrct endpoint --list-mutants), got '" + t + "'");
        (k == "rules"    ? s.rules
         : k == "tags"   ? s.tags
         : k == "ignore" ? s.ignore
                         : s.mutants)
            .push_back(t);
      }
      return true;
    }
    if (k == "description") {
      std::string d;
      for (size_t i = 1; i < toks.size(); ++i) d += (i > 1 ? " " : "") + std::string(toks[i].text);
      s.description = d;
      return true;
    }
    if (k == "format") {
      const Token* t = one("udp or stev");
      if (!t) return false;
      if (t->text == "udp")
        s.format = wire::EvFormat::kUdp;
      else if (t->text == "stev")
        s.format = wire::EvFormat::kStev;
      else
        return fail(t->column,
                    "expected 'udp' or 'stev' (scripts play on one link: no SRv6), "
                    "got '" +
                        std::string(t->text) + "'");
      return true;
    }
    if (k == "planes") return num(1, 4, v) && (s.planes = static_cast<uint8_t>(v), true);
    if (k == "mtu") {
      if (!num(256, 4096, v)) return false;
      if (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096)
        return fail(toks[1].column, "expected mtu 256, 512, 1024, 2048 or 4096");
      s.mtu = static_cast<uint32_t>(v);
      return true;
    }
    if (k == "mr_bytes")
      return num(64, 1u << 26, v) && (s.mr_bytes = static_cast<uint32_t>(v), true);
    if (k == "mr_fill") return num(0, 255, v) && (s.mr_fill = static_cast<uint8_t>(v), true);
    if (k == "tester_qpn")
      return num(3, 0xFFFFFF, v) && (s.tester_qpn = static_cast<uint32_t>(v), true);
    if (k == "tester_psn")
      return num(0, 0xFFFFFF, v) && (s.tester_psn = static_cast<uint32_t>(v), true);
    if (k == "dut_psn") return num(0, 0xFFFFFF, v) && (s.dut_psn = static_cast<uint32_t>(v), true);
    if (k == "tester_va") return num(0, UINT64_MAX, v) && (s.tester_va = v, true);
    if (k == "tester_rkey")
      return num(0, 0xFFFFFFFF, v) && (s.tester_rkey = static_cast<uint32_t>(v), true);
    if (k == "mpr") return num(1, 255, v) && (s.mpr = static_cast<uint8_t>(v), true);
    if (k == "dynamic_mpr") return num(0, 1, v) && (s.dynamic_mpr = v != 0, true);
    if (k == "max_wimm") return num(1, 1024, v) && (s.max_wimm = static_cast<uint16_t>(v), true);
    if (k == "ack_trigger")
      return num(1, 1u << 24, v) && (s.ack_trigger_bytes = static_cast<uint32_t>(v), true);
    if (k == "ack_min_add")
      return num(1, 1u << 24, v) && (s.ack_min_add_bytes = static_cast<uint32_t>(v), true);
    if (k == "timeout") return num(1, 24, v) && (s.timeout = static_cast<uint8_t>(v), true);
    if (k == "retry") {
      if (toks.size() != 3)
        return fail(toks[0].column, "expected 'retry LINEAR EXP' (0..7 and 0..25)");
      uint64_t l = 0, e = 0;
      if (!number(toks[1].text, toks[1].column, l) || !number(toks[2].text, toks[2].column, e))
        return false;
      if (l > 7) return fail(toks[1].column, "expected linear retries 0..7");
      if (e > 25) return fail(toks[2].column, "expected exponential retries 0..25");
      s.retry_linear = static_cast<uint8_t>(l);
      s.retry_exp = static_cast<uint8_t>(e);
      return true;
    }
    if (k == "recv_wqes") return num(0, 256, v) && (s.recv_wqes = static_cast<uint32_t>(v), true);
    if (k == "svc_time") return num(0, 1, v) && (s.svc_time = v != 0, true);
    if (k == "trim_nack") return num(0, 1, v) && (s.trim_nack = v != 0, true);
    auto dur = [&](uint64_t& out) {
      const Token* t = one("a duration such as 2ms");
      return t && duration(t->text, t->column, out);
    };
    if (k == "reverse_probe") return dur(s.reverse_probe_ns);
    if (k == "window") return dur(s.default_window_ns);
    if (k == "bound") return dur(s.bound_ns);
    if (k == "tolerance") return dur(s.wire_tolerance_ns);
    handled = false;
    return true;
  }

 private:
  std::string_view file_;
  uint32_t line_;
  ParseError& err_;
};

std::string trim_copy(std::string_view s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return std::string(s.substr(a, b - a));
}

}  // namespace

bool has_field(const Statement& st, std::string_view name) {
  return std::any_of(st.fields.begin(), st.fields.end(),
                     [&](const FieldArg& f) { return f.name == name; });
}

bool parse_hex(std::string_view s, std::vector<std::byte>& out, std::string& why) {
  out.clear();
  std::string digits;
  for (char c : s)
    if (c != ':' && c != '_') digits.push_back(c);
  if (digits.empty() || digits.size() % 2 != 0) {
    why = "expected an even number of hex digits (':' and '_' may separate bytes)";
    return false;
  }
  for (size_t i = 0; i < digits.size(); i += 2) {
    uint8_t b = 0;
    auto [p, ec] = std::from_chars(digits.data() + i, digits.data() + i + 2, b, 16);
    if (ec != std::errc() || p != digits.data() + i + 2) {
      why = "expected hex digits, got '" + digits.substr(i, 2) + "'";
      return false;
    }
    out.push_back(std::byte{b});
  }
  return true;
}

bool valid_fill(std::string_view s) {
  if (s == "zero") return true;
  for (std::string_view p : {"inc:", "byte:"}) {
    if (s.starts_with(p)) {
      std::string_view n = s.substr(p.size());
      uint64_t v = 0;
      int base = 10;
      if (n.starts_with("0x")) {
        base = 16;
        n.remove_prefix(2);
      }
      auto [q, ec] = std::from_chars(n.data(), n.data() + n.size(), v, base);
      return !n.empty() && ec == std::errc() && q == n.data() + n.size() && v <= 255;
    }
  }
  return false;
}

uint8_t fill_byte(std::string_view fill, size_t k) {
  if (fill == "zero") return 0;
  const bool inc = fill.starts_with("inc:");
  std::string_view n = fill.substr(inc ? 4 : 5);
  int base = 10;
  if (n.starts_with("0x")) {
    base = 16;
    n.remove_prefix(2);
  }
  uint64_t v = 0;
  std::from_chars(n.data(), n.data() + n.size(), v, base);
  return static_cast<uint8_t>(inc ? v + k : v);
}

bool parse_script(std::string_view text, std::string_view path, Script& out, ParseError& err) {
  out = Script{};
  out.path = std::string(path);
  std::string_view base = path;
  if (const size_t slash = base.rfind('/'); slash != std::string_view::npos)
    base.remove_prefix(slash + 1);
  if (base.ends_with(".mrcs")) base.remove_suffix(5);
  out.name = std::string(base);
  if (text.find('\0') != std::string_view::npos) {
    err = {std::string(path), {1, 1}, "expected text, found a NUL byte"};
    return false;
  }
  uint32_t line_no = 0;
  size_t pos = 0;
  bool in_body = false;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.size() > 65536) {
      err = {std::string(path), {line_no, 1}, "expected a line shorter than 64 KiB"};
      return false;
    }
    const std::vector<Token> toks = tokenize(line);
    if (toks.empty()) {
      if (nl == text.size()) break;
      continue;
    }
    LineParser lp(path, line_no, err);
    bool handled = false;
    const bool statement_word = toks[0].text == "send" || toks[0].text == "expect" ||
                                toks[0].text == "wait" || toks[0].text == "post" ||
                                toks[0].text.starts_with("+");
    if (!statement_word) {
      if (!lp.header(toks, out.setup, handled)) return false;
      if (handled && in_body) {
        err = {std::string(path),
               {line_no, toks[0].column},
               "expected a statement: header keys ('" + std::string(toks[0].text) +
                   "') come before the first statement"};
        return false;
      }
      if (handled) {
        if (nl == text.size()) break;
        continue;
      }
    }
    in_body = true;
    Statement st;
    st.pos = {line_no, toks[0].column};
    st.text = trim_copy(line.substr(0, line.find('#')));
    if (!lp.statement(toks, st)) return false;
    out.statements.push_back(std::move(st));
    if (out.statements.size() > 100000) {
      err = {std::string(path), {line_no, 1}, "expected at most 100000 statements"};
      return false;
    }
    if (nl == text.size()) break;
  }
  if (out.statements.empty()) {
    err = {std::string(path),
           {line_no == 0 ? 1 : line_no, 1},
           "expected at least one statement (send, expect, wait, post)"};
    return false;
  }
  if (out.setup.rules.empty()) {
    err = {std::string(path),
           {1, 1},
           "expected a 'rules MRC-...' header line (every script "
           "is traced to the rules it tests)"};
    return false;
  }
  return true;
}

bool load_script(const std::string& path, Script& out, ParseError& err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = {path, {0, 0}, "cannot open the script"};
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    err = {path, {0, 0}, "read error"};
    return false;
  }
  return parse_script(ss.str(), path, out, err);
}

}  // namespace mrc::scripts
