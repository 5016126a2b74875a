// DUT profile (JSON) and injector decision log (JSON lines) parsing, address helpers.
#include <cctype>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/internal.h"

namespace mrc::check {
namespace detail {

Addr v4_mapped(const wire::Ipv4Addr& a) {
  Addr m{};
  m[10] = 0xFF;
  m[11] = 0xFF;
  for (int i = 0; i < 4; ++i) m[12 + i] = a[i];
  return m;
}

static bool is_v4_mapped(const Addr& a) {
  for (int i = 0; i < 10; ++i)
    if (a[i] != 0) return false;
  return a[10] == 0xFF && a[11] == 0xFF;
}

std::string format_addr(const Addr& a) {
  if (is_v4_mapped(a)) return wire::format_ipv4({a[12], a[13], a[14], a[15]});
  return wire::format_ipv6(a);
}

std::optional<Addr> parse_addr(std::string_view s) {
  if (s.find(':') != std::string_view::npos) return wire::parse_ipv6(s);
  if (auto v4 = wire::parse_ipv4(s)) return v4_mapped(*v4);
  return std::nullopt;
}

bool roce_addrs(const wire::DecodedFrame& f, Addr& src, Addr& dst) {
  if (const wire::Ipv6Header* h = f.roce_ip6()) {
    src = h->src;
    dst = h->dst;
    return true;
  }
  if (f.l3 == 4) {
    src = v4_mapped(f.ip4.src);
    dst = v4_mapped(f.ip4.dst);
    return true;
  }
  return false;
}

std::string hex(uint64_t v, int width) {
  static const char* d = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), d[v & 15]);
    v >>= 4;
  } while (v != 0);
  while (static_cast<int>(s.size()) < width) s.insert(s.begin(), '0');
  return "0x" + s;
}

}  // namespace detail

namespace {

using nlohmann::json;

// Walks a JSON object with a path for error messages.
struct Ctx {
  std::string origin;
  std::string& error;
  bool fail(const std::string& path, const std::string& what) {
    if (error.empty()) error = origin + ": " + path + ": " + what;
    return false;
  }
};

template <typename T>
bool get_uint(Ctx& c, const json& j, const std::string& path, uint64_t max, T& out) {
  if (!j.is_number_integer() && !j.is_number_unsigned())
    return c.fail(path, "expected an integer 0.." + std::to_string(max));
  if (j.is_number_integer() && j.get<int64_t>() < 0)
    return c.fail(path, "expected an integer 0.." + std::to_string(max));
  uint64_t v = j.get<uint64_t>();
  if (v > max) return c.fail(path, "expected an integer 0.." + std::to_string(max));
  out = static_cast<T>(v);
  return true;
}

template <typename T>
bool opt_uint(Ctx& c, const json& obj, const std::string& base, const char* key, uint64_t max,
              std::optional<T>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  T v{};
  if (!get_uint(c, *it, base + "." + key, max, v)) return false;
  out = v;
  return true;
}

bool get_bool(Ctx& c, const json& obj, const std::string& base, const char* key, bool& out) {
  auto it = obj.find(key);
  if (it == obj.end()) return true;
  if (!it->is_boolean()) return c.fail(base + "." + key, "expected true or false");
  out = it->get<bool>();
  return true;
}

bool get_addr(Ctx& c, const json& j, const std::string& path, wire::Ipv6Addr& out) {
  if (!j.is_string()) return c.fail(path, "expected an address string");
  auto a = detail::parse_addr(j.get<std::string>());
  if (!a) return c.fail(path, "not an IPv6 or IPv4 address: '" + j.get<std::string>() + "'");
  out = *a;
  return true;
}

bool parse_qp(Ctx& c, const json& q, const std::string& base, QpProfile& out, bool endpoints) {
  if (!q.is_object()) return c.fail(base, "expected an object");
  static const char* known[] = {"requester", "responder",   "ev_format",     "pmtu",
                                "mpr",       "mpr_dest",    "max_wimm_dest", "timeout",
                                "retry",     "initial_psn", "ev_min_active", "max_cwnd",
                                "evs",       "denied_evs",  "capabilities",  "name",
                                "cc",        "ev_expansion"};
  for (auto it = q.begin(); it != q.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok |= it.key() == k;
    if (!ok) return c.fail(base + "." + it.key(), "unknown field");
  }
  if (endpoints) {
    for (const char* side : {"requester", "responder"}) {
      auto it = q.find(side);
      if (it == q.end()) continue;
      std::string p = base + "." + side;
      if (!it->is_object()) return c.fail(p, "expected an object with addr and qpn");
      if (auto a = it->find("addr"); a != it->end()) {
        wire::Ipv6Addr addr{};
        if (!get_addr(c, *a, p + ".addr", addr)) return false;
        (std::string_view(side) == "requester" ? out.requester_addr : out.responder_addr) = addr;
      }
      std::optional<uint32_t> qpn;
      if (!opt_uint(c, *it, p, "qpn", 0xFFFFFF, qpn)) return false;
      (std::string_view(side) == "requester" ? out.requester_qpn : out.responder_qpn) = qpn;
    }
  }
  if (auto it = q.find("ev_format"); it != q.end()) {
    if (!it->is_string())
      return c.fail(base + ".ev_format", "expected \"udp\", \"stev\" or \"srv6\"");
    auto f = wire::parse_ev_format(it->get<std::string>());
    if (!f) return c.fail(base + ".ev_format", "expected \"udp\", \"stev\" or \"srv6\"");
    out.ev_format = f;
  }
  if (!opt_uint(c, q, base, "pmtu", 4096, out.pmtu)) return false;
  if (out.pmtu && *out.pmtu != 256 && *out.pmtu != 512 && *out.pmtu != 1024 && *out.pmtu != 2048 &&
      *out.pmtu != 4096)
    return c.fail(base + ".pmtu", "expected 256, 512, 1024, 2048 or 4096");
  if (!opt_uint(c, q, base, "mpr", 255, out.mpr)) return false;
  if (!opt_uint(c, q, base, "mpr_dest", 255, out.mpr_dest)) return false;
  if (!opt_uint(c, q, base, "max_wimm_dest", 0xFFFF, out.max_wimm_dest)) return false;
  if (!opt_uint(c, q, base, "timeout", 24, out.timeout)) return false;
  if (!opt_uint(c, q, base, "initial_psn", 0xFFFFFF, out.initial_psn)) return false;
  if (!opt_uint(c, q, base, "ev_min_active", 0xFFFFFFFF, out.ev_min_active)) return false;
  if (!opt_uint(c, q, base, "max_cwnd", UINT64_MAX, out.max_cwnd_bytes)) return false;
  if (auto it = q.find("retry"); it != q.end()) {
    if (!it->is_object())
      return c.fail(base + ".retry", "expected {\"linear\": 0..7, \"exp\": 0..25}");
    if (!opt_uint(c, *it, base + ".retry", "linear", 7, out.retry_linear)) return false;
    if (!opt_uint(c, *it, base + ".retry", "exp", 25, out.retry_exp)) return false;
  }
  // SRv6 EV expansion (MRC-EV-007): the EV format's field widths and the EV profile's fields,
  // under which evs[].compact expands to the outer DA (and SRH segment).
  std::vector<uint32_t> exp_widths;
  std::vector<wire::EvField> exp_fields;
  if (auto it = q.find("ev_expansion"); it != q.end()) {
    const std::string p = base + ".ev_expansion";
    if (!it->is_object())
      return c.fail(p, "expected {\"format_widths\": [...], \"fields\": [...]}");
    for (auto k = it->begin(); k != it->end(); ++k)
      if (k.key() != "format_widths" && k.key() != "fields")
        return c.fail(p + "." + k.key(), "unknown field");
    auto w = it->find("format_widths");
    auto f = it->find("fields");
    if (w == it->end() || !w->is_array() || w->empty())
      return c.fail(p + ".format_widths", "expected a non-empty array of bit widths 1..256");
    if (f == it->end() || !f->is_array())
      return c.fail(p + ".fields",
                    "expected an array of {width, init_val, min_val, max_val, mask}");
    for (size_t i = 0; i < w->size(); ++i) {
      uint32_t x = 0;
      if (!get_uint(c, (*w)[i], p + ".format_widths[" + std::to_string(i) + "]", 256, x))
        return false;
      exp_widths.push_back(x);
    }
    for (size_t i = 0; i < f->size(); ++i) {
      const json& e = (*f)[i];
      const std::string fp = p + ".fields[" + std::to_string(i) + "]";
      if (!e.is_object()) return c.fail(fp, "expected an object");
      wire::EvField ef;
      for (auto k = e.begin(); k != e.end(); ++k) {
        uint32_t* dst = k.key() == "width"      ? &ef.width
                        : k.key() == "init_val" ? &ef.init_val
                        : k.key() == "min_val"  ? &ef.min_val
                        : k.key() == "max_val"  ? &ef.max_val
                        : k.key() == "mask"     ? &ef.mask
                                                : nullptr;
        if (!dst) return c.fail(fp + "." + k.key(), "unknown field");
        if (!get_uint(c, *k, fp + "." + k.key(), 0xFFFFFFFF, *dst)) return false;
      }
      exp_fields.push_back(ef);
    }
    if (std::string err = wire::validate_ev_profile(exp_widths, exp_fields); !err.empty())
      return c.fail(p, err);
  }
  if (auto it = q.find("evs"); it != q.end()) {
    if (!it->is_array()) return c.fail(base + ".evs", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& e = (*it)[i];
      std::string p = base + ".evs[" + std::to_string(i) + "]";
      EvEntry ev;
      if (e.is_object()) {
        auto w = e.find("wev");
        if (w == e.end()) return c.fail(p, "missing wev");
        if (!get_uint(c, *w, p + ".wev", 0xFFFFFFFF, ev.wev)) return false;
        std::optional<uint8_t> port;
        if (!opt_uint(c, e, p, "port", 255, port)) return false;
        ev.port = port.value_or(0);
        for (auto k = e.begin(); k != e.end(); ++k)
          if (k.key() != "wev" && k.key() != "port" && k.key() != "da" && k.key() != "segment" &&
              k.key() != "compact")
            return c.fail(p + "." + k.key(), "unknown field");
        for (const char* key : {"da", "segment"}) {
          auto a = e.find(key);
          if (a == e.end()) continue;
          wire::Ipv6Addr addr{};
          if (!a->is_string() || !wire::parse_ipv6(a->get<std::string>()))
            return c.fail(p + "." + key, "expected an IPv6 address");
          addr = *wire::parse_ipv6(a->get<std::string>());
          (std::string_view(key) == "da" ? ev.da : ev.segment) = addr;
        }
        if (auto k = e.find("compact"); k != e.end()) {
          if (ev.da) return c.fail(p + ".compact", "give either da/segment or compact, not both");
          if (exp_widths.empty())
            return c.fail(p + ".compact", "needs the QP's ev_expansion (format_widths, fields)");
          const std::string h = k->is_string() ? k->get<std::string>() : std::string("?");
          wire::EvBytes compact{};
          bool ok = h.size() % 2 == 0 && h.size() <= 64;
          for (size_t b = 0; ok && b < h.size(); b += 2) {
            const std::string byte = h.substr(b, 2);
            ok = std::isxdigit(static_cast<unsigned char>(byte[0])) &&
                 std::isxdigit(static_cast<unsigned char>(byte[1]));
            if (ok) compact[b / 2] = static_cast<uint8_t>(std::stoul(byte, nullptr, 16));
          }
          if (!ok) return c.fail(p + ".compact", "expected a hex string of at most 32 bytes");
          const wire::EvExpandResult r = wire::expand_ev(exp_widths, exp_fields, compact);
          if (!r.ok) return c.fail(p + ".compact", r.error);
          wire::Ipv6Addr da{}, seg{};
          std::copy(r.expanded.begin(), r.expanded.begin() + 16, da.begin());
          std::copy(r.expanded.begin() + 16, r.expanded.end(), seg.begin());
          ev.da = da;
          uint32_t total = 0;
          for (uint32_t x : exp_widths) total += x;
          if (total > 128) ev.segment = seg;
        }
        if (ev.segment && !ev.da) return c.fail(p + ".segment", "needs da");
      } else if (!get_uint(c, e, p, 0xFFFFFFFF, ev.wev)) {
        return false;
      }
      out.evs.push_back(ev);
    }
  }
  if (auto it = q.find("denied_evs"); it != q.end()) {
    if (!it->is_array()) return c.fail(base + ".denied_evs", "expected an array of WEVs");
    for (size_t i = 0; i < it->size(); ++i) {
      uint32_t w = 0;
      if (!get_uint(c, (*it)[i], base + ".denied_evs[" + std::to_string(i) + "]", 0xFFFFFFFF, w))
        return false;
      out.denied_evs.push_back(w);
    }
  }
  if (auto it = q.find("cc"); it != q.end()) {
    const std::string p = base + ".cc";
    if (!it->is_object())
      return c.fail(p, "expected {\"base_rtt_ns\": ..., \"target_delay_ns\": ...}");
    for (auto k = it->begin(); k != it->end(); ++k)
      if (k.key() != "base_rtt_ns" && k.key() != "target_delay_ns")
        return c.fail(p + "." + k.key(), "unknown field");
    if (!opt_uint(c, *it, p, "base_rtt_ns", UINT32_MAX, out.cc_base_rtt_ns)) return false;
    if (!opt_uint(c, *it, p, "target_delay_ns", UINT32_MAX, out.cc_target_delay_ns)) return false;
  }
  if (auto it = q.find("capabilities"); it != q.end()) {
    std::string p = base + ".capabilities";
    if (!it->is_object()) return c.fail(p, "expected an object");
    for (auto k = it->begin(); k != it->end(); ++k) {
      if (k.key() != "trim_nack" && k.key() != "trim_nack_dest_unsupported" &&
          k.key() != "dynamic_mpr" && k.key() != "svc_time")
        return c.fail(p + "." + k.key(), "unknown capability");
    }
    if (!get_bool(c, *it, p, "trim_nack", out.caps.trim_nack)) return false;
    if (!get_bool(c, *it, p, "trim_nack_dest_unsupported", out.caps.trim_nack_dest_unsupported))
      return false;
    if (!get_bool(c, *it, p, "dynamic_mpr", out.caps.dynamic_mpr)) return false;
    if (!get_bool(c, *it, p, "svc_time", out.caps.svc_time)) return false;
  }
  return true;
}

bool parse_tol(Ctx& c, const json& t, Tolerances& out, std::vector<std::string>& keys) {
  if (!t.is_object()) return c.fail("tolerances", "expected an object");
  struct U {
    const char* key;
    uint64_t* field;
  } u[] = {{"dedup_window_ns", &out.dedup_window_ns},
           {"end_grace_ns", &out.end_grace_ns},
           {"reaction_ns", &out.reaction_ns},
           {"t_ack_max_ns", &out.t_ack_max_ns},
           {"t_skip_ns", &out.t_skip_ns},
           {"t_probe_ns", &out.t_probe_ns},
           {"timer_slack_ns", &out.timer_slack_ns},
           {"decision_lookahead_ns", &out.decision_lookahead_ns},
           {"ep_timeout_ns", &out.ep_timeout_ns},
           {"t_port_ns", &out.t_port_ns},
           {"t_reverse_probe_ns", &out.t_reverse_probe_ns}};
  for (auto it = t.begin(); it != t.end(); ++it) {
    const std::string p = "tolerances." + it.key();
    keys.push_back(it.key());
    bool done = false;
    for (auto& f : u) {
      if (it.key() != f.key) continue;
      if (!get_uint(c, *it, p, UINT64_MAX / 4, *f.field)) return false;
      done = true;
    }
    if (done) continue;
    if (it.key() == "skip_rotation_fraction" || it.key() == "timer_tolerance") {
      if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1)
        return c.fail(p, "expected a number 0..1");
      (it.key() == "timer_tolerance" ? out.timer_tolerance : out.skip_rotation_fraction) =
          it->get<double>();
    } else if (it.key() == "spray_run_max") {
      if (!get_uint(c, *it, p, 1'000'000, out.spray_run_max)) return false;
    } else if (it.key() == "plane_balance_slack") {
      if (!get_uint(c, *it, p, 1'000'000, out.plane_balance_slack)) return false;
    } else {
      return c.fail(p, "unknown tolerance");
    }
  }
  return true;
}

}  // namespace

bool parse_profile(std::string_view text, std::string_view origin, DutProfile& out,
                   std::string& error) {
  error.clear();
  Ctx c{std::string(origin), error};
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    return c.fail("(document)", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) return c.fail("(document)", "expected a JSON object");
  DutProfile p;
  static const char* known[] = {
      "dscp", "ev_stripe", "roce_port",        "nodes",        "captures",
      "qps",  "defaults",  "infer_qps",        "srv6_locator", "tolerances",
      "name", "comment",   "udp_zero_checksum"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok |= it.key() == k;
    if (!ok) return c.fail(it.key(), "unknown field");
  }
  if (auto it = j.find("dscp"); it != j.end()) {
    if (!it->is_object()) return c.fail("dscp", "expected an object");
    struct F {
      const char* k;
      uint8_t* v;
    } fs[] = {{"no_trim", &p.dscp.no_trim},
              {"trimmable", &p.dscp.trimmable},
              {"trimmable_retx", &p.dscp.trimmable_retx},
              {"trimmed", &p.dscp.trimmed},
              {"trimmed_lasthop", &p.dscp.trimmed_lasthop},
              {"control", &p.dscp.control}};
    for (auto k = it->begin(); k != it->end(); ++k) {
      bool done = false;
      for (auto& f : fs)
        if (k.key() == f.k) {
          if (!get_uint(c, *k, "dscp." + k.key(), 63, *f.v)) return false;
          done = true;
        }
      if (!done) return c.fail("dscp." + k.key(), "unknown DSCP class");
    }
  }
  if (auto it = j.find("ev_stripe"); it != j.end()) {
    std::string s = it->is_string() ? it->get<std::string>() : "";
    if (s == "low_in_sport")
      p.stripe = wire::EvStripe::kLowInSport;
    else if (s == "high_in_sport")
      p.stripe = wire::EvStripe::kHighInSport;
    else
      return c.fail("ev_stripe", "expected \"low_in_sport\" or \"high_in_sport\"");
  }
  if (auto it = j.find("roce_port"); it != j.end())
    if (!get_uint(c, *it, "roce_port", 65535, p.roce_port)) return false;
  if (auto it = j.find("infer_qps"); it != j.end()) {
    if (!it->is_boolean()) return c.fail("infer_qps", "expected true or false");
    p.infer_qps = it->get<bool>();
  }
  if (auto it = j.find("udp_zero_checksum"); it != j.end()) {
    if (!it->is_boolean()) return c.fail("udp_zero_checksum", "expected true or false");
    p.udp_zero_checksum = it->get<bool>();
  }
  if (auto it = j.find("srv6_locator"); it != j.end()) {
    wire::Ipv6Addr a{};
    if (!get_addr(c, *it, "srv6_locator", a)) return false;
    p.srv6_locator = std::array<uint8_t, 4>{a[0], a[1], a[2], a[3]};
  }
  if (auto it = j.find("nodes"); it != j.end()) {
    if (!it->is_array()) return c.fail("nodes", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const json& n = (*it)[i];
      std::string b = "nodes[" + std::to_string(i) + "]";
      if (!n.is_object()) return c.fail(b, "expected an object with name and addrs");
      NodeProfile np;
      auto nm = n.find("name");
      if (nm == n.end() || !nm->is_string() || nm->get<std::string>().empty())
        return c.fail(b + ".name", "expected a non-empty string");
      np.name = nm->get<std::string>();
      auto as = n.find("addrs");
      if (as == n.end() || !as->is_array() || as->empty())
        return c.fail(b + ".addrs", "expected a non-empty array of addresses");
      for (size_t k = 0; k < as->size(); ++k) {
        wire::Ipv6Addr a{};
        if (!get_addr(c, (*as)[k], b + ".addrs[" + std::to_string(k) + "]", a)) return false;
        np.addrs.push_back(a);
      }
      p.nodes.push_back(std::move(np));
    }
  }
  if (auto it = j.find("captures"); it != j.end()) {
    if (!it->is_object()) return c.fail("captures", "expected an object: file -> {node, port}");
    for (auto k = it->begin(); k != it->end(); ++k) {
      std::string b = "captures." + k.key();
      CapturePointProfile cp;
      cp.file = k.key();
      if (k->is_string()) {
        cp.node = k->get<std::string>();
      } else if (k->is_object()) {
        auto nd = k->find("node");
        if (nd == k->end() || !nd->is_string()) return c.fail(b + ".node", "expected a node name");
        cp.node = nd->get<std::string>();
        std::optional<uint8_t> port;
        if (!opt_uint(c, *k, b, "port", 255, port)) return false;
        cp.port = port.value_or(0);
        if (auto sd = k->find("side"); sd != k->end()) {
          if (!sd->is_string() || (*sd != "own" && *sd != "link"))
            return c.fail(b + ".side", "expected \"own\" (the node's interface) or \"link\"");
          cp.link_side = *sd == "link";
        }
        for (auto m = k->begin(); m != k->end(); ++m)
          if (m.key() != "node" && m.key() != "port" && m.key() != "side")
            return c.fail(b + "." + m.key(), "unknown field (node, port, side)");
      } else {
        return c.fail(b, "expected a node name or {node, port}");
      }
      p.capture_points.push_back(cp);
    }
  }
  if (auto it = j.find("defaults"); it != j.end())
    if (!parse_qp(c, *it, "defaults", p.defaults, false)) return false;
  if (auto it = j.find("qps"); it != j.end()) {
    if (!it->is_array()) return c.fail("qps", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      QpProfile q = p.defaults;
      q.requester_addr.reset();
      q.responder_addr.reset();
      std::string b = "qps[" + std::to_string(i) + "]";
      if (!parse_qp(c, (*it)[i], b, q, true)) return false;
      if (!q.requester_addr || !q.responder_addr || !q.responder_qpn)
        return c.fail(b, "needs requester.addr, responder.addr and responder.qpn");
      p.qps.push_back(std::move(q));
    }
  }
  if (auto it = j.find("tolerances"); it != j.end())
    if (!parse_tol(c, *it, p.tol, p.tolerances_set)) return false;
  out = std::move(p);
  return true;
}

bool load_profile(const std::string& path, DutProfile& out, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the DUT profile";
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_profile(ss.str(), path, out, error);
}

namespace {

// The decision log is read line by line next to the frames, so the common line is parsed without
// building a JSON document: a flat object whose values are unsigned integers, null or strings
// without escapes or non-ASCII bytes (what injectors write). Anything else, and every line that
// would be an error, goes to the full parser, so results and messages are the full parser's.
struct FlatValue {
  enum Kind : uint8_t { kUint, kNull, kString } kind = kNull;
  uint64_t u = 0;
  std::string_view str;
};

class FlatObject {
 public:
  static constexpr size_t kMaxMembers = 16;

  bool parse(std::string_view line) {
    s_ = line;
    i_ = 0;
    n_ = 0;
    ws();
    if (!eat('{')) return false;
    ws();
    if (eat('}')) return end();
    for (;;) {
      if (n_ == kMaxMembers) return false;
      std::string_view key;
      if (!string(key)) return false;
      for (size_t k = 0; k < n_; ++k)
        if (keys_[k] == key) return false;  // duplicate: the full parser decides
      ws();
      if (!eat(':')) return false;
      ws();
      FlatValue& v = vals_[n_];
      if (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (!number(v.u)) return false;
        v.kind = FlatValue::kUint;
      } else if (s_.substr(i_, 4) == "null") {
        i_ += 4;
        v.kind = FlatValue::kNull;
      } else if (string(v.str)) {
        v.kind = FlatValue::kString;
      } else {
        return false;
      }
      keys_[n_++] = key;
      ws();
      if (eat('}')) return end();
      if (!eat(',')) return false;
      ws();
    }
  }
  const FlatValue* get(std::string_view key) const {
    for (size_t k = 0; k < n_; ++k)
      if (keys_[k] == key) return &vals_[k];
    return nullptr;
  }

 private:
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool eat(char c) {
    if (i_ >= s_.size() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool end() {
    ws();
    return i_ == s_.size();
  }
  bool string(std::string_view& out) {
    if (!eat('"')) return false;
    const size_t start = i_;
    for (; i_ < s_.size(); ++i_) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        out = s_.substr(start, i_ - start);
        ++i_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
    }
    return false;
  }
  // JSON integer without sign, fraction or exponent, that fits in 64 bits.
  bool number(uint64_t& out) {
    const size_t start = i_;
    out = 0;
    for (; i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9'; ++i_) {
      const uint64_t d = static_cast<uint64_t>(s_[i_] - '0');
      if (out > (UINT64_MAX - d) / 10) return false;
      out = out * 10 + d;
    }
    if (i_ - start > 1 && s_[start] == '0') return false;
    return i_ == s_.size() || (s_[i_] != '.' && s_[i_] != 'e' && s_[i_] != 'E');
  }

  std::string_view s_;
  size_t i_ = 0, n_ = 0;
  std::array<std::string_view, kMaxMembers> keys_;
  std::array<FlatValue, kMaxMembers> vals_;
};

DecisionAction action_of(std::string_view a) {
  if (a == "pass") return DecisionAction::kPass;
  if (a == "drop") return DecisionAction::kDrop;
  if (a == "trim") return DecisionAction::kTrim;
  if (a == "delay") return DecisionAction::kDelay;
  if (a == "dup") return DecisionAction::kDup;
  if (a == "corrupt") return DecisionAction::kCorrupt;
  if (a == "ecn") return DecisionAction::kEcn;
  return DecisionAction::kOther;
}

}  // namespace

// False when the line needs the full parser (unusual shape, or an error to report).
bool detail::parse_decision_fast(std::string_view line, Decision& out) {
  FlatObject o;
  if (!o.parse(line)) return false;
  Decision d;
  const FlatValue* t = o.get("t_ns");
  if (!t || t->kind == FlatValue::kString) return false;
  d.t_ns = t->u;
  auto num = [&](const char* k, uint64_t max, auto& dst) {
    const FlatValue* v = o.get(k);
    if (!v || v->kind == FlatValue::kNull) return true;
    if (v->kind != FlatValue::kUint || v->u > max) return false;
    dst = static_cast<uint32_t>(v->u);
    return true;
  };
  if (!num("qpn", 0xFFFFFF, d.qpn) || !num("psn", 0xFFFFFF, d.psn) || !num("ev", 0xFFFFFFFF, d.ev))
    return false;
  if (const FlatValue* v = o.get("opcode"); v && v->kind != FlatValue::kNull) {
    if (v->kind == FlatValue::kString) {
      const std::string str(v->str);
      char* end = nullptr;
      const unsigned long x = std::strtoul(str.c_str(), &end, 0);
      if (str.empty() || *end != '\0' || x > 255) return false;
      d.opcode = static_cast<uint8_t>(x);
    } else {
      if (v->u > 255) return false;
      d.opcode = static_cast<uint8_t>(v->u);
    }
  }
  auto str = [&](const char* k, std::string& dst) {
    if (const FlatValue* v = o.get(k); v && v->kind == FlatValue::kString)
      dst = std::string(v->str);
  };
  str("link", d.link);
  str("dir", d.dir);
  str("src", d.src);
  str("dst", d.dst);
  str("reason", d.reason);
  const FlatValue* a = o.get("action");
  if (!a || a->kind != FlatValue::kString || a->str.empty()) return false;
  d.action = action_of(a->str);
  out = std::move(d);
  return true;
}

bool parse_decision(std::string_view line, Decision& out, std::string& error) {
  error.clear();
  size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
  if (i == line.size()) return false;
  if (detail::parse_decision_fast(line, out)) return true;
  return detail::parse_decision_json(line, out, error);
}

bool detail::parse_decision_json(std::string_view line, Decision& out, std::string& error) {
  error.clear();
  json j;
  try {
    j = json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    error = std::string("invalid JSON: ") + e.what();
    return false;
  }
  if (!j.is_object()) {
    error = "expected a JSON object";
    return false;
  }
  // The injector closes its log with {"summary": {...}} (counters, not a decision).
  if (j.size() == 1 && j.contains("summary") && j["summary"].is_object()) return false;
  Decision d;
  auto num = [&](const char* k, uint64_t max, auto& dst) -> bool {
    auto it = j.find(k);
    if (it == j.end() || it->is_null()) return true;
    if (!(it->is_number_unsigned() || (it->is_number_integer() && it->get<int64_t>() >= 0)) ||
        it->get<uint64_t>() > max) {
      error = std::string("field ") + k + ": expected an integer 0.." + std::to_string(max);
      return false;
    }
    dst = static_cast<std::remove_reference_t<decltype(dst)>>(it->get<uint64_t>());
    return true;
  };
  auto t = j.find("t_ns");
  if (t == j.end()) {
    error = "field t_ns: missing";
    return false;
  }
  if (!num("t_ns", UINT64_MAX, d.t_ns)) return false;
  std::optional<uint32_t> qpn, psn, ev;
  std::optional<uint8_t> opcode;
  uint32_t tmp = 0;
  if (j.contains("qpn") && !j["qpn"].is_null()) {
    if (!num("qpn", 0xFFFFFF, tmp)) return false;
    qpn = tmp;
  }
  if (j.contains("psn") && !j["psn"].is_null()) {
    if (!num("psn", 0xFFFFFF, tmp)) return false;
    psn = tmp;
  }
  if (j.contains("ev") && !j["ev"].is_null()) {
    if (!num("ev", 0xFFFFFFFF, tmp)) return false;
    ev = tmp;
  }
  if (auto o = j.find("opcode"); o != j.end() && !o->is_null()) {
    if (o->is_string()) {
      // "0xdc" or a decimal string
      const std::string s = o->get<std::string>();
      char* end = nullptr;
      unsigned long v = std::strtoul(s.c_str(), &end, 0);
      if (s.empty() || *end != '\0' || v > 255) {
        error = "field opcode: expected 0..255 or a string like \"0xdc\"";
        return false;
      }
      opcode = static_cast<uint8_t>(v);
    } else {
      if (!num("opcode", 255, tmp)) return false;
      opcode = static_cast<uint8_t>(tmp);
    }
  }
  d.qpn = qpn;
  d.psn = psn;
  d.ev = ev;
  d.opcode = opcode;
  auto str = [&](const char* k, std::string& dst) {
    auto it = j.find(k);
    if (it != j.end() && it->is_string()) dst = it->get<std::string>();
  };
  str("link", d.link);
  str("dir", d.dir);
  str("src", d.src);
  str("dst", d.dst);
  str("reason", d.reason);
  std::string action;
  str("action", action);
  if (action == "pass")
    d.action = DecisionAction::kPass;
  else if (action == "drop")
    d.action = DecisionAction::kDrop;
  else if (action == "trim")
    d.action = DecisionAction::kTrim;
  else if (action == "delay")
    d.action = DecisionAction::kDelay;
  else if (action == "dup")
    d.action = DecisionAction::kDup;
  else if (action == "corrupt")
    d.action = DecisionAction::kCorrupt;
  else if (action == "ecn")
    d.action = DecisionAction::kEcn;
  else if (action.empty()) {
    error = "field action: missing";
    return false;
  } else
    d.action = DecisionAction::kOther;
  out = std::move(d);
  return true;
}

}  // namespace mrc::check
