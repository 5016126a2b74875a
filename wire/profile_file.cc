// Wire-profile files: every open choice of the public sources as a TOML key (docs/wire-format.md
// section 19). The Lua dissector (wire/wireshark/) and the Scapy layer (wire/scapy/) read the
// same files with their own small readers, so the format stays flat: tables of scalars and one
// array of integers.
#include <toml++/toml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "wire/wire.h"

namespace mrc::wire {

bool WireParams::is_roce_port(uint16_t port) const {
  return std::find(udp_ports.begin(), udp_ports.end(), port) != udp_ports.end();
}

std::string validate_wire_params(const WireParams& p) {
  if (p.name.empty()) return "name: must not be empty";
  if (p.udp_ports.empty()) return "udp.ports: at least one port";
  std::set<uint16_t> seen;
  for (uint16_t port : p.udp_ports) {
    if (port == 0) return "udp.ports: port 0 is not a destination port";
    if (!seen.insert(port).second) return "udp.ports: port " + std::to_string(port) + " twice";
  }
  if (p.eeth_op_shift != 4 && p.eeth_op_shift != 2)
    return "headers.eeth_op_bits: \"5..4\" or \"3..2\"";
  if (p.eeth_sva_bit > 7) return "headers.eeth_sva_bit: a bit number 0..7";
  if (p.eeth_sva_bit == p.eeth_op_shift || p.eeth_sva_bit == p.eeth_op_shift + 1)
    return "headers.eeth_sva_bit: bit " + std::to_string(p.eeth_sva_bit) +
           " overlaps the EETH op bits " + std::to_string(p.eeth_op_shift + 1) + ".." +
           std::to_string(p.eeth_op_shift);
  if (p.cc_type > 15) return "headers.cc_type: a 4-bit value 0..15";
  // BTH (12) is the least a trimmed packet can keep; 64 covers every MRC data header stack.
  if (p.trim_bytes < 12 || p.trim_bytes > 64) return "trim.bytes: 12..64 bytes after UDP";
  for (uint8_t d : {p.dscp.no_trim, p.dscp.trimmable, p.dscp.trimmable_retx, p.dscp.trimmed,
                    p.dscp.trimmed_lasthop, p.dscp.control})
    if (d > 63) return "dscp: values are 6-bit (0..63)";
  return {};
}

namespace {

struct Reader {
  std::string_view origin;
  std::string& error;

  bool fail(const toml::node& n, const std::string& key, const std::string& why) {
    error =
        std::string(origin) + ":" + std::to_string(n.source().begin.line) + ": " + key + ": " + why;
    return false;
  }
  bool keys(const toml::table& t, std::initializer_list<const char*> allowed,
            const std::string& prefix) {
    for (const auto& [k, v] : t) {
      const std::string key(k.str());
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; })) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        return fail(v, prefix + key, "unknown key (known: " + list + ")");
      }
    }
    return true;
  }
  template <typename T>
  bool uint(const toml::table& t, const char* key, const std::string& prefix, int64_t hi, T& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto* v = n->as_integer();
    if (v == nullptr || v->get() < 0 || v->get() > hi)
      return fail(*n, prefix + key, "expected an integer 0.." + std::to_string(hi));
    out = static_cast<T>(v->get());
    return true;
  }
  bool boolean(const toml::table& t, const char* key, const std::string& prefix, bool& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto* v = n->as_boolean();
    if (v == nullptr) return fail(*n, prefix + key, "expected true or false");
    out = v->get();
    return true;
  }
  // A string key with a fixed set of values.
  template <typename T>
  bool choice(const toml::table& t, const char* key, const std::string& prefix,
              std::initializer_list<std::pair<const char*, T>> values, T& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto* v = n->as_string();
    std::string list;
    for (const auto& [name, val] : values) {
      list += (list.empty() ? "" : " or ") + std::string("\"") + name + "\"";
      if (v != nullptr && v->get() == name) {
        out = val;
        return true;
      }
    }
    return fail(*n, prefix + key, "expected " + list);
  }
  const toml::table* table(const toml::table& root, const char* key) {
    const toml::node* n = root.get(key);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) {
      fail(*n, key, "expected a table ([" + std::string(key) + "])");
      return nullptr;
    }
    return n->as_table();
  }
};

}  // namespace

bool parse_wire_params(std::string_view text, std::string_view origin, WireParams& out,
                       std::string& error) {
  toml::table root;
  try {
    root = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    error = std::string(origin) + ":" + std::to_string(e.source().begin.line) +
            ": not TOML: " + std::string(e.description());
    return false;
  }
  Reader r{origin, error};
  WireParams p;
  if (!r.keys(root, {"name", "udp", "ev", "headers", "trim", "srv6", "dscp"}, "")) return false;
  if (const toml::node* n = root.get("name")) {
    const auto* v = n->as_string();
    if (v == nullptr || v->get().empty()) return r.fail(*n, "name", "expected a non-empty string");
    p.name = v->get();
  }
  const toml::table* udp = r.table(root, "udp");
  if (!error.empty()) return false;
  if (udp) {
    if (!r.keys(*udp, {"ports"}, "udp.")) return false;
    if (const toml::node* n = udp->get("ports")) {
      const auto* arr = n->as_array();
      if (arr == nullptr || arr->empty())
        return r.fail(*n, "udp.ports", "expected a non-empty array of ports 1..65535");
      p.udp_ports.clear();
      for (const toml::node& e : *arr) {
        const auto* v = e.as_integer();
        if (v == nullptr || v->get() < 1 || v->get() > 65535)
          return r.fail(*n, "udp.ports", "expected a non-empty array of ports 1..65535");
        p.udp_ports.push_back(static_cast<uint16_t>(v->get()));
      }
    }
  }
  const toml::table* ev = r.table(root, "ev");
  if (!error.empty()) return false;
  if (ev) {
    if (!r.keys(*ev, {"stripe", "ecmp_flow_label"}, "ev.")) return false;
    if (!r.choice<EvStripe>(
            *ev, "stripe", "ev.",
            {{"low_in_sport", EvStripe::kLowInSport}, {"high_in_sport", EvStripe::kHighInSport}},
            p.ev_stripe) ||
        !r.choice<EcmpFlowLabel>(*ev, "ecmp_flow_label", "ev.",
                                 {{"zero", EcmpFlowLabel::kZero}, {"ev", EcmpFlowLabel::kEv}},
                                 p.ecmp_flow_label))
      return false;
  }
  const toml::table* hdr = r.table(root, "headers");
  if (!error.empty()) return false;
  if (hdr) {
    if (!r.keys(*hdr, {"eeth_op_bits", "eeth_sva_bit", "sva", "cc_type"}, "headers.")) return false;
    if (!r.choice<uint8_t>(*hdr, "eeth_op_bits", "headers.", {{"5..4", 4}, {"3..2", 2}},
                           p.eeth_op_shift) ||
        !r.uint(*hdr, "eeth_sva_bit", "headers.", 7, p.eeth_sva_bit) ||
        !r.boolean(*hdr, "sva", "headers.", p.sva) ||
        !r.uint(*hdr, "cc_type", "headers.", 15, p.cc_type))
      return false;
  }
  const toml::table* trim = r.table(root, "trim");
  if (!error.empty()) return false;
  if (trim) {
    if (!r.keys(*trim, {"bytes"}, "trim.") || !r.uint(*trim, "bytes", "trim.", 65535, p.trim_bytes))
      return false;
  }
  const toml::table* srv6 = r.table(root, "srv6");
  if (!error.empty()) return false;
  if (srv6) {
    if (!r.keys(*srv6, {"outer_traffic_class", "wev_carriage"}, "srv6.")) return false;
    if (!r.choice<Srv6OuterTc>(*srv6, "outer_traffic_class", "srv6.",
                               {{"copy", Srv6OuterTc::kCopy}, {"zero", Srv6OuterTc::kZero}},
                               p.srv6_outer_tc) ||
        !r.choice<Srv6WevCarriage>(*srv6, "wev_carriage", "srv6.",
                                   {{"sport_and_flow_label", Srv6WevCarriage::kSportAndFlowLabel},
                                    {"none", Srv6WevCarriage::kNone}},
                                   p.srv6_wev))
      return false;
  }
  const toml::table* dscp = r.table(root, "dscp");
  if (!error.empty()) return false;
  if (dscp) {
    if (!r.keys(*dscp,
                {"no_trim", "trimmable", "trimmable_retx", "trimmed", "trimmed_lasthop", "control"},
                "dscp."))
      return false;
    if (!r.uint(*dscp, "no_trim", "dscp.", 63, p.dscp.no_trim) ||
        !r.uint(*dscp, "trimmable", "dscp.", 63, p.dscp.trimmable) ||
        !r.uint(*dscp, "trimmable_retx", "dscp.", 63, p.dscp.trimmable_retx) ||
        !r.uint(*dscp, "trimmed", "dscp.", 63, p.dscp.trimmed) ||
        !r.uint(*dscp, "trimmed_lasthop", "dscp.", 63, p.dscp.trimmed_lasthop) ||
        !r.uint(*dscp, "control", "dscp.", 63, p.dscp.control))
      return false;
  }
  if (std::string why = validate_wire_params(p); !why.empty()) {
    error = std::string(origin) + ": " + why;
    return false;
  }
  out = std::move(p);
  return true;
}

bool load_wire_params(const std::string& path, WireParams& out, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open the wire profile";
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_wire_params(ss.str(), path, out, error);
}

std::string format_wire_params(const WireParams& p,
                               const std::vector<std::pair<std::string, std::string>>& comments) {
  auto note = [&](const std::string& key, const char* fallback) {
    for (const auto& [k, v] : comments)
      if (k == key) return "  # " + v;
    return std::string("  # ") + fallback;
  };
  auto q = [](std::string_view s) { return "\"" + std::string(s) + "\""; };
  std::string ports;
  for (uint16_t port : p.udp_ports) ports += (ports.empty() ? "" : ", ") + std::to_string(port);
  std::ostringstream o;
  o << "# MRC wire profile: the open choices of the public sources (docs/wire-format.md "
       "section 19).\n"
    << "name = " << q(p.name) << note("name", "shown in reports") << "\n\n"
    << "[udp]\n"
    << "ports = [" << ports << "]"
    << note("udp.ports", "MRC destination ports; the first is sent to (MRP0 4791, others 4971)")
    << "\n\n"
    << "[ev]\n"
    << "stripe = " << q(p.ev_stripe == EvStripe::kLowInSport ? "low_in_sport" : "high_in_sport")
    << note("ev.stripe", "EV half in the UDP source port: low_in_sport (MRP0) or high_in_sport")
    << "\n"
    << "ecmp_flow_label = " << q(p.ecmp_flow_label == EcmpFlowLabel::kZero ? "zero" : "ev")
    << note("ev.ecmp_flow_label", "UDP EV format over IPv6: flow label zero (MRP0) or ev") << "\n\n"
    << "[headers]\n"
    << "eeth_op_bits = " << q(p.eeth_op_shift == 4 ? "5..4" : "3..2")
    << note("headers.eeth_op_bits", "EETH byte 1 op position: 5..4 (MRP0) or 3..2") << "\n"
    << "eeth_sva_bit = " << int{p.eeth_sva_bit}
    << note("headers.eeth_sva_bit", "EETH byte 1 bit of SVA (MRP0 3)") << "\n"
    << "sva = " << (p.sva ? "true" : "false")
    << note("headers.sva", "service time signalled with SVA (MRP0 true)") << "\n"
    << "cc_type = " << int{p.cc_type}
    << note("headers.cc_type", "SETH/NETH cc_type for NSCC: 0 (MRP0) or 2") << "\n\n"
    << "[trim]\n"
    << "bytes = " << p.trim_bytes
    << note("trim.bytes", "bytes after UDP a trimmed packet keeps (MRP0 20)") << "\n\n"
    << "[srv6]\n"
    << "outer_traffic_class = " << q(p.srv6_outer_tc == Srv6OuterTc::kCopy ? "copy" : "zero")
    << note("srv6.outer_traffic_class", "copy the inner DSCP/ECN (MRP0) or zero") << "\n"
    << "wev_carriage = "
    << q(p.srv6_wev == Srv6WevCarriage::kSportAndFlowLabel ? "sport_and_flow_label" : "none")
    << note("srv6.wev_carriage", "WEV also in sport/flow labels (MRP0) or none") << "\n\n"
    << "[dscp]\n"
    << "no_trim = " << int{p.dscp.no_trim} << "\n"
    << "trimmable = " << int{p.dscp.trimmable} << "\n"
    << "trimmable_retx = " << int{p.dscp.trimmable_retx} << "\n"
    << "trimmed = " << int{p.dscp.trimmed} << "\n"
    << "trimmed_lasthop = " << int{p.dscp.trimmed_lasthop} << "\n"
    << "control = " << int{p.dscp.control} << "\n";
  return o.str();
}

std::unique_ptr<WireProfile> open_wire_profile(const std::string& name_or_path,
                                               std::string& error) {
  const bool is_file =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".toml") == 0);
  if (!is_file) {
    if (const WireProfile* p = find_profile(name_or_path)) return make_profile(p->params());
    std::string names;
    for (const std::string& n : profile_names()) names += (names.empty() ? "" : ", ") + n;
    error = "unknown wire profile '" + name_or_path + "' (known: " + names +
            "; a profile file is a path or ends in .toml)";
    return nullptr;
  }
  WireParams p;
  if (!load_wire_params(name_or_path, p, error)) return nullptr;
  return make_profile(p);
}

}  // namespace mrc::wire
