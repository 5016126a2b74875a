// Injector configuration: TOML or JSON files, and single rules as JSON (control socket, --rule).
//
// Both formats go through one parser that works on a JSON tree. A TOML file is converted to
// that tree first, remembering the source line of every value, so errors in either format name
// the file, the line (TOML, and JSON syntax errors) and the key.
#include <toml++/toml.h>

// GCC 12 at -O3 reports a false -Wrestrict inside std::operator+(const char*, std::string&&)
// (GCC bug 105329); the error messages below are built that way.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "fault-injector/faults.h"

namespace mrc::faults {

namespace {

using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// TOML -> JSON with line numbers
// ---------------------------------------------------------------------------------------------
std::string ptr_escape(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

bool toml_to_json(const toml::node& node, const std::string& ptr, json& out,
                  std::map<std::string, int>& lines, std::string& unsupported) {
  lines[ptr] = static_cast<int>(node.source().begin.line);
  if (const toml::table* t = node.as_table()) {
    out = json::object();
    for (const auto& [k, v] : *t) {
      json child;
      const std::string key(k.str());
      if (!toml_to_json(v, ptr + "/" + ptr_escape(key), child, lines, unsupported)) return false;
      out[key] = std::move(child);
    }
    return true;
  }
  if (const toml::array* a = node.as_array()) {
    out = json::array();
    for (size_t i = 0; i < a->size(); ++i) {
      json child;
      if (!toml_to_json(*a->get(i), ptr + "/" + std::to_string(i), child, lines, unsupported))
        return false;
      out.push_back(std::move(child));
    }
    return true;
  }
  if (auto v = node.value_exact<int64_t>()) {
    out = *v;
    return true;
  }
  if (auto v = node.value_exact<double>()) {
    out = *v;
    return true;
  }
  if (auto v = node.value_exact<bool>()) {
    out = *v;
    return true;
  }
  if (auto v = node.value_exact<std::string>()) {
    out = *v;
    return true;
  }
  unsupported = ptr;  // dates and times
  return false;
}

// ---------------------------------------------------------------------------------------------
// The parser over a JSON tree
// ---------------------------------------------------------------------------------------------
std::string type_of(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "a table";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a float";
    default:
      return "a value";
  }
}

struct Ctx {
  std::string file;
  std::map<std::string, int> lines;  // JSON pointer -> source line (TOML only)
  std::string* error = nullptr;

  int line_of(std::string ptr) const {
    for (;;) {
      auto it = lines.find(ptr);
      if (it != lines.end() && it->second > 0) return it->second;
      const size_t slash = ptr.rfind('/');
      if (slash == std::string::npos) return 0;
      ptr.resize(slash);
    }
  }

  bool fail(const std::string& ptr, const std::string& msg) const {
    if (error) {
      std::string e = file;
      const int line = line_of(ptr);
      if (line > 0) e += ":" + std::to_string(line);
      *error = e.empty() ? msg : e + ": " + msg;
    }
    return false;
  }
};

// Reads keys of one table, tracking where it is for error messages.
struct Table {
  const json& j;
  std::string ptr;
  std::string where;  // "rule[2] (\"trim5\")"
  const Ctx& ctx;

  bool has(const char* key) const { return j.contains(key); }
  std::string kptr(const char* key) const { return ptr + "/" + ptr_escape(key); }
  bool bad(const char* key, const std::string& msg) const {
    return ctx.fail(kptr(key), where + (where.empty() ? "" : ": ") + "key '" + key + "': " + msg);
  }
  bool bad_type(const char* key, const char* want) const {
    return bad(key, std::string("expected ") + want + ", got " + type_of(j.at(key)));
  }

  bool get_string(const char* key, std::string& out) const {
    if (!has(key)) return true;
    if (!j.at(key).is_string()) return bad_type(key, "a string");
    out = j.at(key).get<std::string>();
    return true;
  }
  bool get_bool(const char* key, bool& out) const {
    if (!has(key)) return true;
    if (!j.at(key).is_boolean()) return bad_type(key, "a boolean");
    out = j.at(key).get<bool>();
    return true;
  }
  bool get_number(const char* key, double& out) const {
    if (!has(key)) return true;
    if (!j.at(key).is_number()) return bad_type(key, "a number");
    out = j.at(key).get<double>();
    if (!std::isfinite(out)) return bad(key, "must be finite");
    return true;
  }
  bool get_prob(const char* key, double& out) const {
    if (!get_number(key, out)) return false;
    if (has(key) && (out < 0.0 || out > 1.0)) return bad(key, "must be in [0, 1]");
    return true;
  }
  static bool to_uint(const json& v, uint64_t& out) {
    if (v.is_number_unsigned()) {
      out = v.get<uint64_t>();
      return true;
    }
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      if (x < 0) return false;
      out = static_cast<uint64_t>(x);
      return true;
    }
    if (v.is_string()) {
      // JSON has no hex literals: "0x1234" is accepted for EVs, QPNs and the like.
      const std::string s = v.get<std::string>();
      if (s.empty()) return false;
      size_t idx = 0;
      try {
        out = std::stoull(s, &idx, 0);
      } catch (...) {
        return false;
      }
      return idx == s.size();
    }
    return false;
  }
  bool get_uint(const char* key, uint64_t& out, uint64_t max = kForever) const {
    if (!has(key)) return true;
    if (!to_uint(j.at(key), out))
      return bad(key, "expected a non-negative integer, got " + type_of(j.at(key)));
    if (out > max) return bad(key, "must be <= " + std::to_string(max));
    return true;
  }
  // A duration in the key's unit (from its name), integer or float, to ns.
  bool get_duration(const char* key, double unit_ns, uint64_t& out) const {
    double v = 0;
    if (!has(key)) return true;
    if (!get_number(key, v)) return false;
    if (v < 0) return bad(key, "must be >= 0");
    const double ns = std::round(v * unit_ns);
    if (ns >= 1.8e19) return bad(key, "too large");
    out = static_cast<uint64_t>(ns);
    return true;
  }
  // A scalar or an array of unsigned integers.
  bool get_u32_list(const char* key, std::vector<uint32_t>& out, uint64_t max) const {
    if (!has(key)) return true;
    const json& v = j.at(key);
    auto one = [&](const json& e, size_t idx) {
      uint64_t x = 0;
      std::string where_idx = v.is_array() ? "[" + std::to_string(idx) + "]" : "";
      if (!to_uint(e, x))
        return bad(key,
                   "element" + where_idx + ": expected a non-negative integer, got " + type_of(e));
      if (x > max)
        return bad(key, "element" + where_idx + ": " + std::to_string(x) + " exceeds " +
                            std::to_string(max));
      out.push_back(static_cast<uint32_t>(x));
      return true;
    };
    if (v.is_array()) {
      if (v.empty()) return bad(key, "must not be empty (leave the key out to match any)");
      for (size_t i = 0; i < v.size(); ++i)
        if (!one(v[i], i)) return false;
      return true;
    }
    return one(v, 0);
  }
  bool check_keys(const std::set<std::string>& allowed, const std::string& context) const {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (allowed.count(it.key())) continue;
      std::string valid;
      for (const auto& k : allowed) valid += (valid.empty() ? "" : ", ") + k;
      return ctx.fail(ptr + "/" + ptr_escape(it.key()), where + (where.empty() ? "" : ": ") +
                                                            "unknown key '" + it.key() + "'" +
                                                            context + " (valid: " + valid + ")");
    }
    return true;
  }
};

const std::set<std::string> kMatchKeys = {"dir",     "link",     "plane",    "ev",
                                          "qpn",     "psn",      "opcode",   "rtx",
                                          "from_ms", "until_ms", "roce_only"};

std::set<std::string> keys_for(FaultType t) {
  std::set<std::string> k = {"name", "type"};
  auto add = [&k](std::initializer_list<const char*> l) {
    for (const char* s : l) k.insert(s);
  };
  if (t != FaultType::kFlap) {
    k.insert(kMatchKeys.begin(), kMatchKeys.end());
    k.insert("max_hits");
  } else {
    add({"dir", "link", "plane"});
  }
  switch (t) {
    case FaultType::kLoss:
    case FaultType::kDrop:
    case FaultType::kEcn:
      add({"p"});
      break;
    case FaultType::kGilbert:
      add({"p_gb", "p_bg", "loss_good", "loss_bad"});
      break;
    case FaultType::kDelay:
      add({"delay_us", "jitter_us", "keep_order"});
      break;
    case FaultType::kReorder:
      add({"p", "delay_us"});
      break;
    case FaultType::kDup:
      add({"p", "copies"});
      break;
    case FaultType::kCorrupt:
      add({"p", "bits", "fix_udp_checksum"});
      break;
    case FaultType::kTrim:
      add({"p", "lasthop", "untrimmable"});
      break;
    case FaultType::kRate:
      add({"rate_bps", "rate_mbps", "rate_gbps", "queue_bytes", "overflow", "lasthop",
           "untrimmable", "overhead_bytes"});
      break;
    case FaultType::kFlap:
      add({"down_at_ms", "down_for_ms", "period_ms", "count"});
      break;
    case FaultType::kBlackhole:
      break;
  }
  return k;
}

bool parse_rule(const json& j, const std::string& ptr, const std::string& where0, const Ctx& ctx,
                Rule& r) {
  if (!j.is_object()) return ctx.fail(ptr, where0 + ": expected a table, got " + type_of(j));
  std::string where = where0;
  if (j.contains("name") && j.at("name").is_string())
    where += " (\"" + j.at("name").get<std::string>() + "\")";
  Table t{j, ptr, where, ctx};
  if (!t.get_string("name", r.name)) return false;
  if (!t.has("type")) {
    std::string names;
    for (size_t i = 0; i <= static_cast<size_t>(FaultType::kBlackhole); ++i)
      names +=
          (names.empty() ? "" : ", ") + std::string(fault_type_name(static_cast<FaultType>(i)));
    return ctx.fail(ptr, where + ": missing key 'type' (one of " + names + ")");
  }
  std::string type_s;
  if (!t.get_string("type", type_s)) return false;
  auto type = parse_fault_type(type_s);
  if (!type) return t.bad("type", "unknown fault type '" + type_s + "'");
  r.type = *type;
  if (!t.check_keys(keys_for(r.type), " for type '" + std::string(fault_type_name(r.type)) + "'"))
    return false;

  auto require = [&](const char* key) {
    if (t.has(key)) return true;
    return ctx.fail(ptr, where + ": type '" + type_s + "' needs key '" + key + "'");
  };

  // Match.
  Match& m = r.match;
  if (t.has("dir")) {
    std::string s;
    if (!t.get_string("dir", s)) return false;
    if (s != "both") {
      auto d = parse_direction(s);
      if (!d) return t.bad("dir", "expected \"ab\", \"ba\" or \"both\", got \"" + s + "\"");
      m.dir = d;
    }
  }
  if (t.has("link")) {
    const json& v = j.at("link");
    if (v.is_string()) {
      m.links.push_back(v.get<std::string>());
    } else if (v.is_array() && !v.empty()) {
      for (const json& e : v) {
        if (!e.is_string()) return t.bad("link", "expected link names (strings)");
        m.links.push_back(e.get<std::string>());
      }
    } else {
      return t.bad("link", "expected a link name or a non-empty array of them");
    }
  }
  {
    std::vector<uint32_t> planes;
    if (!t.get_u32_list("plane", planes, 255)) return false;
    for (uint32_t p : planes) m.planes.push_back(static_cast<int>(p));
  }
  if (!t.get_u32_list("ev", m.evs, 0xFFFFFFFFu)) return false;
  if (!t.get_u32_list("qpn", m.qpns, 0xFFFFFF)) return false;
  if (t.has("psn")) {
    std::vector<uint32_t> psn;
    if (!t.get_u32_list("psn", psn, wire::kPsnMask)) return false;
    if (psn.size() == 1) psn.push_back(psn[0]);
    if (psn.size() != 2) return t.bad("psn", "expected one PSN or [first, last]");
    if (wire::psn_diff(psn[1], psn[0]) >= (1u << 23))
      return t.bad("psn", "range must span less than 2^23 PSNs (first before last)");
    m.psn = std::make_pair(psn[0], psn[1]);
  }
  if (t.has("opcode")) {
    const json& v = j.at("opcode");
    std::vector<json> items;
    if (v.is_array()) {
      if (v.empty()) return t.bad("opcode", "must not be empty");
      items.assign(v.begin(), v.end());
    } else {
      items.push_back(v);
    }
    for (const json& e : items) {
      std::string s;
      if (e.is_string())
        s = e.get<std::string>();
      else if (e.is_number_integer() || e.is_number_unsigned())
        s = std::to_string(e.get<int64_t>());
      else
        return t.bad("opcode", "expected opcode names or numbers, got " + type_of(e));
      if (!parse_opcodes(s, m.opcodes))
        return t.bad("opcode", "unknown opcode or kind '" + s +
                                   "' (names like WRITE_MIDDLE, numbers, or data, ack, sack, "
                                   "nack, probe, endpoint, control, rc)");
    }
  }
  if (t.has("rtx")) {
    bool b = false;
    if (!t.get_bool("rtx", b)) return false;
    m.rtx = b;
  }
  if (!t.get_duration("from_ms", 1e6, m.from_ns)) return false;
  if (!t.get_duration("until_ms", 1e6, m.until_ns)) return false;
  if (t.has("until_ms") && m.until_ns <= m.from_ns)
    return t.bad("until_ms", "must be later than from_ms");
  if (!t.get_bool("roce_only", m.roce_only)) return false;

  // Model parameters.
  const bool p_required = r.type == FaultType::kLoss || r.type == FaultType::kReorder ||
                          r.type == FaultType::kDup || r.type == FaultType::kCorrupt;
  if (p_required && !require("p")) return false;
  if (!t.get_prob("p", r.p)) return false;
  if (!t.get_uint("max_hits", r.max_hits)) return false;
  switch (r.type) {
    case FaultType::kGilbert:
      if (!require("p_gb") || !require("p_bg")) return false;
      if (!t.get_prob("p_gb", r.p_good_to_bad) || !t.get_prob("p_bg", r.p_bad_to_good) ||
          !t.get_prob("loss_good", r.loss_good) || !t.get_prob("loss_bad", r.loss_bad))
        return false;
      break;
    case FaultType::kDelay:
      if (!t.has("delay_us") && !t.has("jitter_us"))
        return ctx.fail(ptr, where + ": type 'delay' needs key 'delay_us' or 'jitter_us'");
      if (!t.get_duration("delay_us", 1e3, r.delay_ns) ||
          !t.get_duration("jitter_us", 1e3, r.jitter_ns) || !t.get_bool("keep_order", r.keep_order))
        return false;
      break;
    case FaultType::kReorder:
      if (!require("delay_us") || !t.get_duration("delay_us", 1e3, r.delay_ns)) return false;
      break;
    case FaultType::kDup: {
      uint64_t c = r.copies;
      if (!t.get_uint("copies", c, 16)) return false;
      if (c == 0) return t.bad("copies", "must be in [1, 16]");
      r.copies = static_cast<uint32_t>(c);
      break;
    }
    case FaultType::kCorrupt: {
      uint64_t b = r.bits;
      if (!t.get_uint("bits", b, 64)) return false;
      if (b == 0) return t.bad("bits", "must be in [1, 64]");
      r.bits = static_cast<uint32_t>(b);
      if (!t.get_bool("fix_udp_checksum", r.fix_udp_checksum)) return false;
      break;
    }
    case FaultType::kTrim:
    case FaultType::kRate: {
      if (!t.get_bool("lasthop", r.lasthop)) return false;
      if (t.has("untrimmable")) {
        std::string s;
        if (!t.get_string("untrimmable", s)) return false;
        if (s == "drop")
          r.untrimmable = Untrimmable::kDrop;
        else if (s == "pass")
          r.untrimmable = Untrimmable::kPass;
        else if (s == "trim")
          r.untrimmable = Untrimmable::kTrimAnyway;
        else
          return t.bad("untrimmable", "expected \"drop\", \"pass\" or \"trim\", got \"" + s + "\"");
      }
      if (r.type == FaultType::kTrim) break;
      int rates = t.has("rate_bps") + t.has("rate_mbps") + t.has("rate_gbps");
      if (rates != 1)
        return ctx.fail(
            ptr, where + ": type 'rate' needs exactly one of rate_bps, rate_mbps, rate_gbps");
      double v = 0;
      const char* rk =
          t.has("rate_bps") ? "rate_bps" : (t.has("rate_mbps") ? "rate_mbps" : "rate_gbps");
      if (!t.get_number(rk, v)) return false;
      r.rate_bps = v * (t.has("rate_bps") ? 1.0 : (t.has("rate_mbps") ? 1e6 : 1e9));
      if (r.rate_bps < 1000.0) return t.bad(rk, "must be at least 1 kbit/s");
      if (!require("queue_bytes") || !t.get_uint("queue_bytes", r.queue_bytes)) return false;
      if (r.queue_bytes == 0) return t.bad("queue_bytes", "must be > 0");
      uint64_t oh = r.overhead_bytes;
      if (!t.get_uint("overhead_bytes", oh, 1024)) return false;
      r.overhead_bytes = static_cast<uint32_t>(oh);
      if (t.has("overflow")) {
        std::string s;
        if (!t.get_string("overflow", s)) return false;
        if (s == "drop")
          r.overflow = Overflow::kDrop;
        else if (s == "trim")
          r.overflow = Overflow::kTrim;
        else
          return t.bad("overflow", "expected \"drop\" or \"trim\", got \"" + s + "\"");
      }
      break;
    }
    case FaultType::kFlap:
      if (!require("down_for_ms")) return false;
      if (!t.get_duration("down_at_ms", 1e6, r.down_at_ns) ||
          !t.get_duration("down_for_ms", 1e6, r.down_for_ns) ||
          !t.get_duration("period_ms", 1e6, r.period_ns) || !t.get_uint("count", r.count))
        return false;
      if (r.period_ns != 0 && !t.has("count")) r.count = 0;  // periodic without count: forever
      break;
    default:
      break;
  }
  const std::string err = validate_rule(r);
  if (!err.empty()) return ctx.fail(ptr, where + ": " + err);
  return true;
}

bool parse_root(const json& root, Ctx& ctx, InjectorConfig& out) {
  if (!root.is_object()) return ctx.fail("", "the top level must be a table/object");
  Table t{root, "", "", ctx};
  if (!t.check_keys(
          {"seed", "log", "log_pass", "control", "profile", "link", "links", "rule", "rules"}, ""))
    return false;
  InjectorConfig c;
  if (!t.get_uint("seed", c.policy.seed)) return false;
  if (!t.get_string("log", c.log_path) || !t.get_bool("log_pass", c.log_pass) ||
      !t.get_string("control", c.control_path) || !t.get_string("profile", c.profile))
    return false;
  if (!wire::find_profile(c.profile)) {
    // A profile file (a path or *.toml): loaded and registered under its name.
    std::string why;
    std::unique_ptr<wire::WireProfile> wp = wire::open_wire_profile(c.profile, why);
    if (!wp) return t.bad("profile", why);
    c.profile = std::string(wp->name());
    wire::register_profile(std::move(wp));
  }

  auto array_of = [&](const char* a, const char* b, const json*& arr, std::string& ptr) {
    arr = nullptr;
    for (const char* k : {a, b}) {
      if (!root.contains(k)) continue;
      std::string key_ptr = "/";
      key_ptr += k;
      if (arr) {
        std::string msg = "both '";
        msg += a;
        msg += "' and '";
        msg += b;
        msg += "' given";
        return ctx.fail(key_ptr, msg);
      }
      if (!root.at(k).is_array()) {
        std::string msg = "expected an array of tables ([[";
        msg += a;
        msg += "]])";
        return t.bad(k, msg);
      }
      arr = &root.at(k);
      ptr = key_ptr;
    }
    return true;
  };
  const json* links = nullptr;
  std::string links_ptr;
  if (!array_of("link", "links", links, links_ptr)) return false;
  if (links) {
    for (size_t i = 0; i < links->size(); ++i) {
      const json& lj = (*links)[i];
      const std::string ptr = links_ptr + "/" + std::to_string(i);
      const std::string where = "link[" + std::to_string(i) + "]";
      if (!lj.is_object()) return ctx.fail(ptr, where + ": expected a table, got " + type_of(lj));
      Table lt{lj, ptr, where, ctx};
      if (!lt.check_keys({"name", "a", "b", "plane", "pcap_a", "pcap_b", "ev_format"}, ""))
        return false;
      LinkInfo li;
      if (!lt.has("name")) return ctx.fail(ptr, where + ": missing key 'name'");
      if (!lt.get_string("name", li.name) || !lt.get_string("a", li.iface_a) ||
          !lt.get_string("b", li.iface_b) || !lt.get_string("pcap_a", li.pcap_a) ||
          !lt.get_string("pcap_b", li.pcap_b))
        return false;
      if (li.name.empty()) return lt.bad("name", "must not be empty");
      if (lt.has("ev_format")) {
        std::string f;
        if (!lt.get_string("ev_format", f)) return false;
        li.ev_format = wire::parse_ev_format(f);
        if (!li.ev_format) return lt.bad("ev_format", "expected \"udp\", \"stev\" or \"srv6\"");
      }
      if (lt.has("plane")) {
        uint64_t p = 0;
        if (!lt.get_uint("plane", p, 255)) return false;
        li.plane = static_cast<int>(p);
      }
      for (const LinkInfo& o : c.policy.links)
        if (o.name == li.name) return lt.bad("name", "duplicate link name '" + li.name + "'");
      c.policy.links.push_back(std::move(li));
    }
  }
  const json* rules = nullptr;
  std::string rules_ptr;
  if (!array_of("rule", "rules", rules, rules_ptr)) return false;
  if (rules) {
    for (size_t i = 0; i < rules->size(); ++i) {
      Rule r;
      const std::string ptr = rules_ptr + "/" + std::to_string(i);
      if (!parse_rule((*rules)[i], ptr, "rule[" + std::to_string(i) + "]", ctx, r)) return false;
      if (r.name.empty()) r.name = "rule" + std::to_string(i + 1);
      for (const Rule& o : c.policy.rules)
        if (o.name == r.name)
          return ctx.fail(ptr,
                          "rule[" + std::to_string(i) + "]: duplicate rule name '" + r.name + "'");
      for (const std::string& l : r.match.links) {
        const bool known = std::any_of(c.policy.links.begin(), c.policy.links.end(),
                                       [&](const LinkInfo& li) { return li.name == l; });
        if (!known)
          return ctx.fail(ptr + "/link", "rule[" + std::to_string(i) + "] (\"" + r.name +
                                             "\"): key 'link': no link named '" + l + "'");
      }
      c.policy.rules.push_back(std::move(r));
    }
  }
  out = std::move(c);
  return true;
}

std::string json_syntax_error(const std::string& file, const json::parse_error& e) {
  // nlohmann says "[json.exception.parse_error.101] parse error at line 3, column 7: ...".
  std::string what = e.what();
  const size_t at = what.find("] ");
  if (at != std::string::npos) what = what.substr(at + 2);
  return file + ": " + what;
}

}  // namespace

bool parse_opcodes(std::string_view s, std::bitset<256>& out, const wire::WireProfile& profile) {
  std::string lower;
  for (char c : s) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  using wire::PacketKind;
  auto kinds = [&](std::initializer_list<PacketKind> ks) {
    for (int op = 0; op < 256; ++op) {
      const wire::OpcodeInfo* info = profile.opcode_info(static_cast<uint8_t>(op));
      if (info && std::find(ks.begin(), ks.end(), info->kind) != ks.end())
        out.set(static_cast<size_t>(op));
    }
    return true;
  };
  if (lower == "data") return kinds({PacketKind::kMrcData});
  if (lower == "ack") return kinds({PacketKind::kMrcTransportAck});
  if (lower == "sack") return kinds({PacketKind::kMrcSack});
  if (lower == "nack") return kinds({PacketKind::kMrcNack});
  if (lower == "probe") return kinds({PacketKind::kMrcProbe});
  if (lower == "endpoint")
    return kinds({PacketKind::kMrcEndpointRequest, PacketKind::kMrcEndpointResponse});
  if (lower == "control")
    return kinds({PacketKind::kMrcTransportAck, PacketKind::kMrcSack, PacketKind::kMrcNack,
                  PacketKind::kMrcProbe, PacketKind::kMrcEndpointRequest,
                  PacketKind::kMrcEndpointResponse});
  if (lower == "rc")
    return kinds({PacketKind::kRcData, PacketKind::kRcReadResponse, PacketKind::kRcAck,
                  PacketKind::kRcAtomic});
  if (!s.empty() && std::isdigit(static_cast<unsigned char>(s[0]))) {
    size_t idx = 0;
    unsigned long v = 0;
    try {
      v = std::stoul(std::string(s), &idx, 0);
    } catch (...) {
      return false;
    }
    if (idx != s.size() || v > 255) return false;
    out.set(v);
    return true;
  }
  for (int op = 0; op < 256; ++op) {
    const wire::OpcodeInfo* info = profile.opcode_info(static_cast<uint8_t>(op));
    if (!info) continue;
    std::string name;
    for (char c : info->name)
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (name == lower) {
      out.set(static_cast<size_t>(op));
      return true;
    }
  }
  return false;
}

bool parse_config(std::string_view text, std::string_view file_name, ConfigFormat format,
                  InjectorConfig& out, std::string* error) {
  Ctx ctx;
  ctx.file = std::string(file_name);
  ctx.error = error;
  if (format == ConfigFormat::kAuto) {
    const std::string_view f = file_name;
    if (f.size() >= 5 && f.substr(f.size() - 5) == ".json") {
      format = ConfigFormat::kJson;
    } else if (f.size() >= 5 && f.substr(f.size() - 5) == ".toml") {
      format = ConfigFormat::kToml;
    } else {
      const size_t first = text.find_first_not_of(" \t\r\n");
      format = first != std::string_view::npos && text[first] == '{' ? ConfigFormat::kJson
                                                                     : ConfigFormat::kToml;
    }
  }
  json root;
  if (format == ConfigFormat::kJson) {
    try {
      root = json::parse(text);
    } catch (const json::parse_error& e) {
      if (error) *error = json_syntax_error(ctx.file, e);
      return false;
    }
  } else {
    toml::table tbl;
    try {
      tbl = toml::parse(text, file_name);
    } catch (const toml::parse_error& e) {
      if (error)
        *error = ctx.file + ":" + std::to_string(e.source().begin.line) +
                 ": TOML syntax error: " + std::string(e.description());
      return false;
    }
    std::string unsupported;
    if (!toml_to_json(tbl, "", root, ctx.lines, unsupported))
      return ctx.fail(unsupported,
                      "unsupported TOML value type (dates and times are not used) at " +
                          (unsupported.empty() ? std::string("/") : unsupported));
  }
  return parse_root(root, ctx, out);
}

bool load_config(const std::string& path, InjectorConfig& out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = path + ": cannot open";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path, ConfigFormat::kAuto, out, error);
}

bool parse_rule_json(std::string_view text, Rule& out, std::string* error) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    if (error) *error = json_syntax_error("rule", e);
    return false;
  }
  Ctx ctx;  // no file: errors read "rule: key 'p': ..."
  ctx.error = error;
  Rule r;
  if (!parse_rule(j, "", "rule", ctx, r)) return false;
  out = std::move(r);
  return true;
}

std::string rule_to_json(const Rule& r) {
  json j;
  j["name"] = r.name;
  j["type"] = std::string(fault_type_name(r.type));
  const Match& m = r.match;
  if (m.dir) j["dir"] = std::string(direction_name(*m.dir));
  if (!m.links.empty()) j["link"] = m.links;
  if (!m.planes.empty()) j["plane"] = m.planes;
  if (!m.evs.empty()) j["ev"] = m.evs;
  if (!m.qpns.empty()) j["qpn"] = m.qpns;
  if (m.psn) j["psn"] = {m.psn->first, m.psn->second};
  if (m.opcodes.any()) {
    json ops = json::array();
    for (size_t i = 0; i < 256; ++i)
      if (m.opcodes.test(i)) ops.push_back(i);
    j["opcode"] = ops;
  }
  if (m.rtx) j["rtx"] = *m.rtx;
  if (r.type != FaultType::kFlap) {
    if (m.from_ns != 0) j["from_ms"] = static_cast<double>(m.from_ns) / 1e6;
    if (m.until_ns != kForever) j["until_ms"] = static_cast<double>(m.until_ns) / 1e6;
    if (!m.roce_only) j["roce_only"] = false;
    if (r.max_hits) j["max_hits"] = r.max_hits;
  }
  switch (r.type) {
    case FaultType::kLoss:
    case FaultType::kDrop:
    case FaultType::kEcn:
      j["p"] = r.p;
      break;
    case FaultType::kGilbert:
      j["p_gb"] = r.p_good_to_bad;
      j["p_bg"] = r.p_bad_to_good;
      j["loss_good"] = r.loss_good;
      j["loss_bad"] = r.loss_bad;
      break;
    case FaultType::kDelay:
      j["delay_us"] = static_cast<double>(r.delay_ns) / 1e3;
      j["jitter_us"] = static_cast<double>(r.jitter_ns) / 1e3;
      j["keep_order"] = r.keep_order;
      break;
    case FaultType::kReorder:
      j["p"] = r.p;
      j["delay_us"] = static_cast<double>(r.delay_ns) / 1e3;
      break;
    case FaultType::kDup:
      j["p"] = r.p;
      j["copies"] = r.copies;
      break;
    case FaultType::kCorrupt:
      j["p"] = r.p;
      j["bits"] = r.bits;
      j["fix_udp_checksum"] = r.fix_udp_checksum;
      break;
    case FaultType::kTrim:
    case FaultType::kRate:
      if (r.type == FaultType::kTrim) j["p"] = r.p;
      j["lasthop"] = r.lasthop;
      j["untrimmable"] = r.untrimmable == Untrimmable::kDrop
                             ? "drop"
                             : (r.untrimmable == Untrimmable::kPass ? "pass" : "trim");
      if (r.type == FaultType::kRate) {
        j["rate_bps"] = r.rate_bps;
        j["queue_bytes"] = r.queue_bytes;
        j["overflow"] = r.overflow == Overflow::kDrop ? "drop" : "trim";
        j["overhead_bytes"] = r.overhead_bytes;
      }
      break;
    case FaultType::kFlap:
      j["down_at_ms"] = static_cast<double>(r.down_at_ns) / 1e6;
      j["down_for_ms"] = static_cast<double>(r.down_for_ns) / 1e6;
      j["period_ms"] = static_cast<double>(r.period_ns) / 1e6;
      j["count"] = r.count;
      break;
    case FaultType::kBlackhole:
      break;
  }
  return j.dump();
}

}  // namespace mrc::faults
