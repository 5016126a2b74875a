// EV and CC profiles from TOML files (format in runtime.h and README.md).
#include <toml++/toml.h>

#include <cerrno>
#include <fstream>
#include <set>
#include <sstream>

#include "reference-impl/runtime/runtime.h"

namespace mrc::runtime {
namespace {

std::string where(std::string_view source, const toml::node& n) {
  return std::string(source) + ":" + std::to_string(n.source().begin.line);
}

Status bad(std::string_view source, const toml::node& n, const std::string& key,
           const std::string& why) {
  return Status::Error(EINVAL, where(source, n) + ": '" + key + "': " + why);
}

Status check_keys(std::string_view source, const toml::table& t,
                  const std::set<std::string>& allowed, const std::string& prefix) {
  for (const auto& [k, v] : t) {
    if (!allowed.count(std::string(k.str()))) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return bad(source, v, prefix + std::string(k.str()), "unknown key (known: " + list + ")");
    }
  }
  return Status::Ok();
}

Status get_u32(std::string_view source, const toml::table& t, const std::string& key,
               const std::string& prefix, uint32_t& out) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  const auto* v = n->as_integer();
  if (v == nullptr) return bad(source, *n, prefix + key, "must be an integer");
  const int64_t x = v->get();
  if (x < 0 || x > 0xFFFFFFFFll) return bad(source, *n, prefix + key, "out of range 0..2^32-1");
  out = static_cast<uint32_t>(x);
  return Status::Ok();
}

template <typename T>
Status get_num(std::string_view source, const toml::table& t, const std::string& key,
               const std::string& prefix, T& out, double lo, double hi) {
  const toml::node* n = t.get(key);
  if (n == nullptr) return Status::Ok();
  double x;
  if (const auto* i = n->as_integer())
    x = static_cast<double>(i->get());
  else if (const auto* f = n->as_floating_point())
    x = f->get();
  else
    return bad(source, *n, prefix + key, "must be a number");
  if (x < lo || x > hi)
    return bad(source, *n, prefix + key,
               "out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  out = static_cast<T>(x);
  return Status::Ok();
}

bool parse_hex(std::string_view s, std::vector<uint8_t>& out) {
  if (s.starts_with("0x") || s.starts_with("0X")) s.remove_prefix(2);
  std::string digits;
  for (char c : s)
    if (c != ':' && c != '_' && c != ' ') digits += c;
  if (digits.empty() || digits.size() % 2 != 0) return false;
  out.clear();
  for (size_t i = 0; i < digits.size(); i += 2) {
    unsigned v = 0;
    for (size_t k = 0; k < 2; ++k) {
      const char c = digits[i + k];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        return false;
    }
    out.push_back(static_cast<uint8_t>(v));
  }
  return true;
}

// SRv6 default: 8 (or 16 with an SRH segment) 16-bit format fields, each taken whole from the
// compact EV, so the compact EV is the outer DA (and segment) byte for byte.
void srv6_identity(engine::EvProfile& p, bool with_segment) {
  const size_t n = with_segment ? 16 : 8;
  p.format_widths.assign(n, 16);
  p.fields.assign(n, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF});
}

Status read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(ENOENT, path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return Status::Ok();
}

}  // namespace

Status default_ev_profile(wire::EvFormat format, uint32_t ev_count, engine::EvProfile& out) {
  out = engine::EvProfile{};
  out.mode = engine::EvMode::kGenerated;
  out.ev_count = ev_count;
  out.ev_min_active = 1;
  // Source ports stay in 0xC000..0xFFFF, the range rxe and most stacks draw from.
  const wire::EvField sport{16, 0xC000, 0, 0x3FFF, 0x3FFF};
  const wire::EvField any16{16, 0, 0, 0xFFFF, 0xFFFF};
  switch (format) {
    case wire::EvFormat::kUdp:
      out.format_widths = {16};
      out.fields = {sport};
      return Status::Ok();
    case wire::EvFormat::kStev:
      // WEV[31:16] (field 0) is the flow label under the MRP0 stripe, WEV[15:0] the port.
      out.format_widths = {16, 16};
      out.fields = {any16, sport};
      return Status::Ok();
    case wire::EvFormat::kSrv6:
      return Status::Error(EINVAL,
                           "the srv6 EV format needs --ev-profile FILE: its EVs are fabric paths "
                           "(outer uSID destinations), there is no default");
  }
  return Status::Error(EINVAL, "unknown EV format");
}

Status parse_ev_profile(std::string_view text, std::string_view source, wire::EvFormat format,
                        uint8_t nports, engine::EvProfile& out) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(EINVAL, std::string(source) + ":" + std::to_string(e.source().begin.line) +
                                     ": " + std::string(e.description()));
  }
  if (Status s = check_keys(
          source, root,
          {"mode", "format_widths", "ev_count", "active_count", "ev_min_active", "fields", "evs"},
          "");
      !s.ok())
    return s;
  engine::EvProfile p;
  const std::string mode = root["mode"].value_or(std::string("generated"));
  if (mode == "generated" || mode == "gen")
    p.mode = engine::EvMode::kGenerated;
  else if (mode == "explicit" || mode == "exp")
    p.mode = engine::EvMode::kExplicit;
  else if (mode == "auto")
    p.mode = engine::EvMode::kAuto;
  else
    return bad(source, *root.get("mode"), "mode",
               "must be generated, explicit or auto, not '" + mode + "'");

  const toml::array* evs = root["evs"].as_array();
  bool any_da = false, any_segment = false;
  if (evs != nullptr) {
    for (const toml::node& n : *evs) {
      if (const toml::table* t = n.as_table()) {
        any_da |= t->contains("da");
        any_segment |= t->contains("segment");
      }
    }
  }

  const bool has_widths = root.contains("format_widths");
  const bool has_fields = root.contains("fields");
  if (has_widths != has_fields)
    return Status::Error(EINVAL,
                         std::string(source) + ": give both format_widths and fields, or neither");
  if (has_widths) {
    if (any_da)
      return bad(source, *root.get("format_widths"), "format_widths",
                 "'da' EVs use the built-in SRv6 profile; drop format_widths/fields or give "
                 "'compact' EVs");
    const toml::array* w = root["format_widths"].as_array();
    if (w == nullptr)
      return bad(source, *root.get("format_widths"), "format_widths", "must be an array");
    for (const toml::node& x : *w) {
      const auto* i = x.as_integer();
      if (i == nullptr || i->get() < 1 || i->get() > 256)
        return bad(source, x, "format_widths", "entries must be integers 1..256");
      p.format_widths.push_back(static_cast<uint32_t>(i->get()));
    }
    const toml::array* f = root["fields"].as_array();
    if (f == nullptr)
      return bad(source, *root.get("fields"), "fields", "must be an array of tables");
    size_t idx = 0;
    for (const toml::node& x : *f) {
      const toml::table* t = x.as_table();
      const std::string pre = "fields[" + std::to_string(idx++) + "].";
      if (t == nullptr) return bad(source, x, pre, "must be a table");
      if (Status s =
              check_keys(source, *t, {"width", "init_val", "min_val", "max_val", "mask"}, pre);
          !s.ok())
        return s;
      wire::EvField ef;
      for (auto [key, dst] : {std::pair<const char*, uint32_t*>{"width", &ef.width},
                              {"init_val", &ef.init_val},
                              {"min_val", &ef.min_val},
                              {"max_val", &ef.max_val},
                              {"mask", &ef.mask}}) {
        if (Status s = get_u32(source, *t, key, pre, *dst); !s.ok()) return s;
      }
      p.fields.push_back(ef);
    }
    if (std::string err = wire::validate_ev_profile(p.format_widths, p.fields); !err.empty())
      return Status::Error(EINVAL, std::string(source) + ": " + err);
  } else if (format == wire::EvFormat::kSrv6) {
    srv6_identity(p, any_segment);
  } else {
    engine::EvProfile d;
    if (Status s = default_ev_profile(format, 1, d); !s.ok()) return s;
    p.format_widths = d.format_widths;
    p.fields = d.fields;
  }

  if (Status s = get_u32(source, root, "ev_count", "", p.ev_count); !s.ok()) return s;
  if (Status s = get_u32(source, root, "active_count", "", p.active_count); !s.ok()) return s;
  p.ev_min_active = 1;
  if (Status s = get_u32(source, root, "ev_min_active", "", p.ev_min_active); !s.ok()) return s;

  if (evs != nullptr) {
    size_t idx = 0;
    for (const toml::node& x : *evs) {
      const std::string pre = "evs[" + std::to_string(idx++) + "].";
      const toml::table* t = x.as_table();
      if (t == nullptr) return bad(source, x, pre, "must be a table");
      if (Status s = check_keys(source, *t, {"port", "compact", "da", "segment"}, pre); !s.ok())
        return s;
      engine::EvEntry e;
      uint32_t port = 0;
      if (Status s = get_u32(source, *t, "port", pre, port); !s.ok()) return s;
      if (port < 1 || port > nports)
        return bad(source, x, pre + "port",
                   "must be 1.." + std::to_string(nports) + " (one port per plane interface)");
      e.port = static_cast<uint8_t>(port);
      if (const toml::node* c = t->get("compact")) {
        std::vector<uint8_t> bytes;
        const auto* s = c->as_string();
        if (s == nullptr || !parse_hex(s->get(), bytes) || bytes.size() > e.ev.size())
          return bad(source, *c, pre + "compact", "must be a hex string of at most 32 bytes");
        std::copy(bytes.begin(), bytes.end(), e.ev.begin());
      } else if (const toml::node* d = t->get("da")) {
        if (format != wire::EvFormat::kSrv6)
          return bad(source, *d, pre + "da", "only for the srv6 EV format");
        const auto* s = d->as_string();
        std::optional<wire::Ipv6Addr> a = s ? wire::parse_ipv6(s->get()) : std::nullopt;
        if (!a) return bad(source, *d, pre + "da", "must be an IPv6 address");
        std::copy(a->begin(), a->end(), e.ev.begin());
        if (const toml::node* g = t->get("segment")) {
          const auto* gs = g->as_string();
          std::optional<wire::Ipv6Addr> b = gs ? wire::parse_ipv6(gs->get()) : std::nullopt;
          if (!b) return bad(source, *g, pre + "segment", "must be an IPv6 address");
          std::copy(b->begin(), b->end(), e.ev.begin() + 16);
        } else if (any_segment) {
          return bad(source, x, pre + "segment", "every EV needs a segment when one has it");
        }
      } else {
        return bad(source, x, pre, "needs 'compact' (or 'da' in srv6 format)");
      }
      p.explicit_evs.push_back(e);
    }
  }
  if (p.mode == engine::EvMode::kExplicit) {
    if (p.explicit_evs.empty())
      return Status::Error(EINVAL, std::string(source) + ": mode explicit needs [[evs]] entries");
    if (p.ev_count == 0) p.ev_count = static_cast<uint32_t>(p.explicit_evs.size());
  } else {
    if (!p.explicit_evs.empty())
      return Status::Error(EINVAL, std::string(source) + ": [[evs]] given but mode is " + mode +
                                       " (use mode = \"explicit\")");
    if (p.ev_count == 0) p.ev_count = 4u * nports;
  }
  out = std::move(p);
  return Status::Ok();
}

Status load_ev_profile(const std::string& path, wire::EvFormat format, uint8_t nports,
                       engine::EvProfile& out) {
  std::string text;
  if (Status s = read_file(path, text); !s.ok()) return s;
  return parse_ev_profile(text, path, format, nports, out);
}

Status parse_cc_profile(std::string_view text, std::string_view source, engine::CcProfile& out) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(EINVAL, std::string(source) + ":" + std::to_string(e.source().begin.line) +
                                     ": " + std::string(e.description()));
  }
  if (Status s = check_keys(source, root, {"algorithm", "nscc"}, ""); !s.ok()) return s;
  engine::CcProfile p;
  if (const toml::node* a = root.get("algorithm")) {
    const auto* s = a->as_string();
    if (s == nullptr) return bad(source, *a, "algorithm", "must be a string");
    std::string name = s->get();
    if (name == "nscc") name = std::string(engine::kCcNscc);
    if (name != engine::kCcNscc && name != engine::kCcNone)
      return bad(source, *a, "algorithm", "'" + name + "' is not known (uet-1.0-nscc or none)");
    p.algorithm = name;
  }
  if (const toml::node* n = root.get("nscc")) {
    const toml::table* t = n->as_table();
    if (t == nullptr) return bad(source, *n, "nscc", "must be a table");
    if (Status s = check_keys(source, *t,
                              {"disable_qa", "adjust_bytes_threshold", "adjust_period_threshold",
                               "base_rtt", "eta", "fi", "fi_scale", "gamma", "max_md_jump",
                               "max_cwnd", "qa_gate", "qa_threshold", "target_delay"},
                              "nscc.");
        !s.ok())
      return s;
    engine::NsccConfig& c = p.nscc;
    const std::string pre = "nscc.";
    const double u32 = 4294967295.0;
    Status s;
    if (s = get_num(source, *t, "disable_qa", pre, c.disable_qa, 0, 255); !s.ok()) return s;
    if (s = get_num(source, *t, "adjust_bytes_threshold", pre, c.adjust_bytes_threshold, 0, u32);
        !s.ok())
      return s;
    if (s = get_num(source, *t, "adjust_period_threshold", pre, c.adjust_period_threshold, 0, u32);
        !s.ok())
      return s;
    if (s = get_num(source, *t, "base_rtt", pre, c.base_rtt, 1, u32); !s.ok()) return s;
    if (s = get_num(source, *t, "eta", pre, c.eta, 0, 1e9); !s.ok()) return s;
    if (s = get_num(source, *t, "fi", pre, c.fi, 0, 1e6); !s.ok()) return s;
    if (s = get_num(source, *t, "fi_scale", pre, c.fi_scale, 0, 1e3); !s.ok()) return s;
    if (s = get_num(source, *t, "gamma", pre, c.gamma, 0, 1); !s.ok()) return s;
    if (s = get_num(source, *t, "max_md_jump", pre, c.max_md_jump, 0, 1); !s.ok()) return s;
    if (s = get_num(source, *t, "max_cwnd", pre, c.max_cwnd, 1, u32); !s.ok()) return s;
    if (s = get_num(source, *t, "qa_gate", pre, c.qa_gate, 0, 31); !s.ok()) return s;
    if (s = get_num(source, *t, "qa_threshold", pre, c.qa_threshold, 0, u32); !s.ok()) return s;
    if (s = get_num(source, *t, "target_delay", pre, c.target_delay, 0, u32); !s.ok()) return s;
  }
  out = p;
  return Status::Ok();
}

Status load_cc_profile(const std::string& path, engine::CcProfile& out) {
  std::string text;
  if (Status s = read_file(path, text); !s.ok()) return s;
  return parse_cc_profile(text, path, out);
}

}  // namespace mrc::runtime
