// The sans-I/O policy core: matching, the fault models, and frame surgery.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "fault-injector/faults.h"

namespace mrc::faults {

using wire::Bytes;
using wire::DecodedFrame;
using wire::MutBytes;

// ---------------------------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------------------------
std::string_view direction_name(Direction d) {
  return d == Direction::kAtoB ? "ab" : "ba";
}

std::optional<Direction> parse_direction(std::string_view s) {
  if (s == "ab" || s == "a>b" || s == "a2b") return Direction::kAtoB;
  if (s == "ba" || s == "b>a" || s == "b2a") return Direction::kBtoA;
  return std::nullopt;
}

namespace {
constexpr std::array<std::string_view, kActionCount> kActionNames = {
    "pass", "drop", "trim", "delay", "dup", "corrupt", "ecn"};
constexpr std::array<std::string_view, 12> kTypeNames = {"loss",    "drop", "gilbert", "delay",
                                                         "reorder", "dup",  "corrupt", "trim",
                                                         "ecn",     "rate", "flap",    "blackhole"};
}  // namespace

std::string_view action_name(Action a) {
  return kActionNames[static_cast<size_t>(a)];
}

std::optional<Action> parse_action(std::string_view s) {
  for (size_t i = 0; i < kActionNames.size(); ++i)
    if (kActionNames[i] == s) return static_cast<Action>(i);
  return std::nullopt;
}

std::string_view fault_type_name(FaultType t) {
  return kTypeNames[static_cast<size_t>(t)];
}

std::optional<FaultType> parse_fault_type(std::string_view s) {
  for (size_t i = 0; i < kTypeNames.size(); ++i)
    if (kTypeNames[i] == s) return static_cast<FaultType>(i);
  if (s == "bernoulli") return FaultType::kLoss;
  if (s == "gilbert-elliott" || s == "gilbert_elliott") return FaultType::kGilbert;
  if (s == "duplicate") return FaultType::kDup;
  if (s == "rate-limit" || s == "rate_limit") return FaultType::kRate;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------
namespace {
bool prob_ok(double p) {
  return std::isfinite(p) && p >= 0.0 && p <= 1.0;
}
}  // namespace

std::string validate_rule(const Rule& r) {
  if (!prob_ok(r.p)) return "p must be in [0, 1]";
  if (r.match.from_ns >= r.match.until_ns) return "the time window is empty (from >= until)";
  switch (r.type) {
    case FaultType::kGilbert:
      if (!prob_ok(r.p_good_to_bad) || !prob_ok(r.p_bad_to_good) || !prob_ok(r.loss_good) ||
          !prob_ok(r.loss_bad))
        return "p_gb, p_bg, loss_good and loss_bad must be in [0, 1]";
      if (r.p_good_to_bad + r.p_bad_to_good <= 0.0)
        return "p_gb + p_bg must be > 0 (else the chain never moves)";
      break;
    case FaultType::kDelay:
      if (r.delay_ns == 0 && r.jitter_ns == 0) return "delay_us or jitter_us must be > 0";
      break;
    case FaultType::kReorder:
      if (r.delay_ns == 0) return "delay_us (how long a reordered frame is held) must be > 0";
      break;
    case FaultType::kDup:
      if (r.copies == 0 || r.copies > 16) return "copies must be in [1, 16]";
      break;
    case FaultType::kCorrupt:
      if (r.bits == 0 || r.bits > 64) return "bits must be in [1, 64]";
      break;
    case FaultType::kRate:
      if (!std::isfinite(r.rate_bps) || r.rate_bps < 1000.0) return "rate must be >= 1 kbit/s";
      if (r.queue_bytes == 0) return "queue_bytes must be > 0";
      if (r.overhead_bytes > 1024) return "overhead_bytes must be <= 1024";
      break;
    case FaultType::kFlap:
      if (r.down_for_ns == 0) return "down_for_ms must be > 0";
      if (r.period_ns != 0 && r.down_for_ns >= r.period_ns)
        return "down_for_ms must be shorter than period_ms (else the link never comes up)";
      if (r.period_ns == 0 && r.count > 1) return "count > 1 needs period_ms";
      break;
    default:
      break;
  }
  if (r.match.psn && (r.match.psn->first > wire::kPsnMask || r.match.psn->second > wire::kPsnMask))
    return "PSNs are 24-bit";
  if (r.match.psn && wire::psn_diff(r.match.psn->second, r.match.psn->first) >= (1u << 23))
    return "PSN range must span less than 2^23 (PSN arithmetic)";
  return {};
}

// ---------------------------------------------------------------------------------------------
// Frame surgery
// ---------------------------------------------------------------------------------------------
namespace {

bool is_mrc_data(const DecodedFrame& f) {
  return f.roce && f.op != nullptr && f.op->kind == wire::PacketKind::kMrcData;
}

}  // namespace

bool trim_frame(const DecodedFrame& f, std::vector<std::byte>& out, bool lasthop,
                const wire::WireProfile& profile) {
  out.assign(f.frame.begin(), f.frame.end());
  DecodedFrame g = f;  // same offsets, now over the copy
  g.frame = Bytes(out.data(), out.size());
  const uint8_t dscp = lasthop ? profile.dscp().trimmed_lasthop : profile.dscp().trimmed;
  const size_t n = wire::trim_frame(MutBytes(out.data(), out.size()), g, dscp, profile);
  if (n == 0) return false;
  out.resize(n);
  return true;
}

bool corrupt_frame(MutBytes frame, DecodedFrame& f, uint32_t bits, Prng& rng,
                   bool fix_udp_checksum) {
  if (frame.data() != f.frame.data() || f.error || !f.roce || !f.has_icrc ||
      f.off_payload == 0xFFFF)
    return false;
  const size_t icrc_off = f.off_udp + f.udp.length - wire::kIcrcBytes;
  // The payload is what a flipped bit on the wire most often hits; without one, the extension
  // headers after the BTH (never the BTH: a flipped opcode would make the frame undecodable).
  size_t start = f.off_payload;
  size_t end = f.off_payload + f.payload.size();
  if (start >= end) {
    start = f.off_bth + 12u;
    end = icrc_off;
  }
  if (start >= end) return false;
  const uint64_t nbits = (end - start) * 8;
  bits = static_cast<uint32_t>(std::min<uint64_t>(bits, nbits));
  std::array<uint64_t, 64> chosen{};
  for (uint32_t i = 0; i < bits; ++i) {
    uint64_t b;
    do {
      b = rng.below(nbits);
    } while (std::find(chosen.begin(), chosen.begin() + i, b) != chosen.begin() + i);
    chosen[i] = b;
    frame[start + b / 8] ^= static_cast<std::byte>(0x80u >> (b % 8));
  }
  if (fix_udp_checksum && f.udp.checksum != 0)
    wire::fix_udp_checksum(frame, f, wire::UdpChecksumPolicy::kCompute);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Policy
// ---------------------------------------------------------------------------------------------
namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

// Per (rule, link, direction) state: the random stream and the model's memory.
struct Lane {
  bool init = false;
  Prng rng{1};
  bool ge_bad = false;           // Gilbert-Elliott state
  uint64_t busy_until_ns = 0;    // rate: when the queue is empty again (absolute)
  uint64_t last_release_ns = 0;  // delay with keep_order
};

struct RuleRt {
  Rule rule;
  uint64_t name_hash = 0;
  uint64_t hits = 0;
  std::vector<Lane> lanes;  // [link * 2 + dir]
  bool sorted_lists = false;
};

bool contains_sorted(const std::vector<uint32_t>& v, uint32_t x) {
  return std::binary_search(v.begin(), v.end(), x);
}

void append_num(std::string& s, uint64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void append_double(std::string& s, double v) {
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%g", v);
  s.append(buf, static_cast<size_t>(n));
}

}  // namespace

struct Policy::Impl {
  PolicyConfig cfg;
  uint64_t epoch = 0;
  const wire::WireProfile& profile;
  std::vector<RuleRt> rules;
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> manual_down;  // per link [from, to)
  Stats stats;
  Decision d;
  DecodedFrame f;  // decode of the frame as it currently is (input, then rewritten bytes)
  std::vector<std::byte> scratch;
  Bytes input;

  Impl(PolicyConfig c, uint64_t e, const wire::WireProfile& p)
      : cfg(std::move(c)), epoch(e), profile(p) {}

  void prepare(RuleRt& rt) {
    std::sort(rt.rule.match.evs.begin(), rt.rule.match.evs.end());
    std::sort(rt.rule.match.qpns.begin(), rt.rule.match.qpns.end());
    rt.name_hash = fnv1a(rt.rule.name);
    rt.lanes.assign(cfg.links.size() * 2, Lane{});
  }

  Lane& lane(RuleRt& rt, uint32_t link, Direction dir) {
    Lane& l = rt.lanes[link * 2 + static_cast<uint32_t>(dir)];
    if (!l.init) {
      // Independent stream per (seed, rule name, link, direction): the decisions of one rule on
      // one direction depend only on the frames it saw there.
      uint64_t x = cfg.seed ^ rt.name_hash;
      const uint64_t base = splitmix64(x);
      uint64_t y = base + (static_cast<uint64_t>(link) << 1 | static_cast<uint64_t>(dir));
      l.rng.reseed(splitmix64(y));
      l.init = true;
    }
    return l;
  }

  bool matches_link(const Match& m, uint32_t link, Direction dir) const {
    if (m.dir && *m.dir != dir) return false;
    const LinkInfo& li = cfg.links[link];
    if (!m.links.empty() && std::find(m.links.begin(), m.links.end(), li.name) == m.links.end())
      return false;
    if (!m.planes.empty() &&
        std::find(m.planes.begin(), m.planes.end(), li.plane) == m.planes.end())
      return false;
    return true;
  }

  bool matches(const Match& m, const FrameInfo& fi, uint32_t link, Direction dir,
               uint64_t t_rel) const {
    if (t_rel < m.from_ns || t_rel >= m.until_ns) return false;
    if (!matches_link(m, link, dir)) return false;
    const bool roce_cond =
        !m.evs.empty() || !m.qpns.empty() || m.psn || m.opcodes.any() || m.rtx.has_value();
    if (!fi.roce) return !roce_cond && !m.roce_only;
    if (!m.evs.empty() && !contains_sorted(m.evs, fi.ev)) return false;
    if (!m.qpns.empty() && !contains_sorted(m.qpns, fi.qpn)) return false;
    if (m.psn && !(wire::psn_le(m.psn->first, fi.psn) && wire::psn_le(fi.psn, m.psn->second)))
      return false;
    if (m.opcodes.any() && !m.opcodes.test(fi.opcode)) return false;
    if (m.rtx && *m.rtx != fi.rtx) return false;
    return true;
  }

  static bool flap_scheduled_down(const Rule& r, uint64_t t_rel) {
    if (t_rel < r.down_at_ns) return false;
    const uint64_t since = t_rel - r.down_at_ns;
    if (r.period_ns == 0) return since < r.down_for_ns;
    const uint64_t k = since / r.period_ns;
    if (r.count != 0 && k >= r.count) return false;
    return since - k * r.period_ns < r.down_for_ns;
  }

  void fired(RuleRt& rt, std::string_view clause) {
    ++rt.hits;
    if (!d.rules.empty()) d.rules += ',';
    d.rules += rt.rule.name;
    if (!d.reason.empty()) d.reason += "; ";
    d.reason += rt.rule.name;
    d.reason += ": ";
    d.reason += clause;
  }

  void redecode() { wire::decode_frame(Bytes(d.bytes.data(), d.bytes.size()), f, {}, profile); }

  void ensure_copy() {
    if (d.rewritten) return;
    d.bytes.assign(input.begin(), input.end());
    d.rewritten = true;
    redecode();
  }

  bool trimmable_dscp() const {
    const uint8_t dscp = f.dscp();
    return dscp == profile.dscp().trimmable || dscp == profile.dscp().trimmable_retx;
  }

  // Trims the current frame. Returns false when the frame is not trimmable data.
  bool do_trim(bool lasthop) {
    if (!trim_frame(f, scratch, lasthop, profile)) return false;
    d.bytes.swap(scratch);
    d.rewritten = true;
    redecode();
    return true;
  }

  void finish(uint64_t len, bool dropped) {
    Action a = Action::kPass;
    if (dropped) {
      a = Action::kDrop;
    } else {
      for (Action c :
           {Action::kTrim, Action::kCorrupt, Action::kEcn, Action::kDup, Action::kDelay}) {
        if (d.applied & action_bit(c)) {
          a = c;
          break;
        }
      }
    }
    d.action = a;
    if (dropped) {
      d.applied |= action_bit(Action::kDrop);
      d.out = {};
      d.delay_ns = 0;
      d.copies = 0;
    } else {
      d.out = d.rewritten ? Bytes(d.bytes.data(), d.bytes.size()) : input;
    }
    LinkDirStats& s = stats.links[d.link][static_cast<size_t>(d.dir)];
    ++s.actions[static_cast<size_t>(a)];
    ++s.frames;
    s.bytes += len;
  }
};

Policy::Policy(PolicyConfig config, uint64_t epoch_ns, const wire::WireProfile& profile)
    : impl_(std::make_unique<Impl>(std::move(config), epoch_ns, profile)) {
  Impl& m = *impl_;
  if (m.cfg.links.empty()) throw std::invalid_argument("policy: no links");
  std::vector<Rule> rules = std::move(m.cfg.rules);
  m.cfg.rules.clear();
  m.stats.links.resize(m.cfg.links.size());
  m.manual_down.resize(m.cfg.links.size());
  for (Rule& r : rules) {
    std::string err = add_rule(std::move(r));
    if (!err.empty()) throw std::invalid_argument("policy: " + err);
  }
}

Policy::~Policy() = default;

std::string Policy::add_rule(Rule rule) {
  Impl& m = *impl_;
  if (rule.name.empty()) {
    for (size_t i = m.rules.size() + 1;; ++i) {
      std::string n = "rule" + std::to_string(i);
      if (std::none_of(m.rules.begin(), m.rules.end(),
                       [&](const RuleRt& rt) { return rt.rule.name == n; })) {
        rule.name = n;
        break;
      }
    }
  }
  for (const RuleRt& rt : m.rules)
    if (rt.rule.name == rule.name) return "rule '" + rule.name + "' already exists";
  std::string err = validate_rule(rule);
  if (!err.empty()) return "rule '" + rule.name + "': " + err;
  for (const std::string& l : rule.match.links)
    if (!link_index(l)) return "rule '" + rule.name + "': unknown link '" + l + "'";
  // A link that is down loses every frame, RoCE or not.
  if (rule.type == FaultType::kFlap) rule.match.roce_only = false;
  RuleRt rt;
  rt.rule = std::move(rule);
  m.prepare(rt);
  m.cfg.rules.push_back(rt.rule);
  m.stats.rule_hits.emplace_back(rt.rule.name, 0);
  m.rules.push_back(std::move(rt));
  return {};
}

bool Policy::remove_rule(std::string_view name) {
  Impl& m = *impl_;
  for (size_t i = 0; i < m.rules.size(); ++i) {
    if (m.rules[i].rule.name != name) continue;
    m.rules.erase(m.rules.begin() + static_cast<ptrdiff_t>(i));
    m.cfg.rules.erase(m.cfg.rules.begin() + static_cast<ptrdiff_t>(i));
    m.stats.rule_hits.erase(m.stats.rule_hits.begin() + static_cast<ptrdiff_t>(i));
    return true;
  }
  return false;
}

void Policy::flap_now(uint32_t link, uint64_t t_ns, uint64_t down_ns) {
  if (link >= impl_->manual_down.size() || down_ns == 0) return;
  auto& w = impl_->manual_down[link];
  w.erase(std::remove_if(w.begin(), w.end(), [t_ns](const auto& x) { return x.second <= t_ns; }),
          w.end());
  w.emplace_back(t_ns, t_ns + down_ns);
}

bool Policy::link_down(uint32_t link, Direction dir, uint64_t t_ns) const {
  const Impl& m = *impl_;
  if (link >= m.cfg.links.size()) return false;
  for (const auto& [from, to] : m.manual_down[link])
    if (t_ns >= from && t_ns < to) return true;
  const uint64_t t_rel = t_ns >= m.epoch ? t_ns - m.epoch : 0;
  for (const RuleRt& rt : m.rules) {
    if (rt.rule.type != FaultType::kFlap) continue;
    if (!m.matches_link(rt.rule.match, link, dir)) continue;
    if (Impl::flap_scheduled_down(rt.rule, t_rel)) return true;
  }
  return false;
}

const Decision& Policy::on_frame(Bytes frame, Direction dir, uint32_t link, uint64_t t_ns) {
  Impl& m = *impl_;
  Decision& d = m.d;
  d.t_ns = t_ns;
  d.link = link;
  d.dir = dir;
  d.frame_no = m.stats.frames++;
  d.action = Action::kPass;
  d.applied = 0;
  d.delay_ns = 0;
  d.copies = 0;
  d.rewritten = false;
  d.rules.clear();
  d.reason.clear();
  m.input = frame;

  FrameInfo& fi = d.frame;
  fi = FrameInfo{};
  fi.len = static_cast<uint32_t>(frame.size());
  if (link >= m.cfg.links.size()) {
    // A caller bug, not a network input: pass the frame and say so rather than crash.
    d.reason = "unknown link index";
    d.out = frame;
    return d;
  }

  DecodedFrame& f = m.f;
  wire::decode_frame(frame, f, {}, m.profile);
  if (f.roce && f.op != nullptr) {
    fi.roce = true;
    fi.op = f.op;
    fi.opcode = f.bth.opcode;
    fi.qpn = f.bth.dest_qp;
    fi.psn = f.bth.psn;
    fi.rtx = f.bth.rtx;
    fi.trimmed = f.trimmed;
    fi.kind = f.op->kind;
    const wire::Ipv6Header* ip6 = f.roce_ip6();
    if (ip6) {
      fi.src = wire::format_ipv6(ip6->src);
      fi.dst = wire::format_ipv6(ip6->dst);
    } else if (f.l3 == 4) {
      fi.src = wire::format_ipv4(f.ip4.src);
      fi.dst = wire::format_ipv4(f.ip4.dst);
    }
    const wire::EvFormat fmt = m.cfg.links[link].ev_format.value_or(f.ev_format());
    fi.ev =
        wire::wev_from_carriage(fmt, m.profile.ev_stripe(), f.udp.sport, ip6 ? ip6->flow_label : 0);
  }
  fi.dscp = f.dscp();
  fi.ecn = f.ecn();

  const uint64_t t_rel = t_ns >= m.epoch ? t_ns - m.epoch : 0;
  const size_t len = frame.size();

  // A link that is down loses everything, whatever the other rules say.
  for (const auto& [from, to] : m.manual_down[link]) {
    if (t_ns >= from && t_ns < to) {
      d.reason = "link down (flap now)";
      m.finish(len, true);
      return d;
    }
  }
  for (RuleRt& rt : m.rules) {
    if (rt.rule.type != FaultType::kFlap) continue;
    if (!m.matches(rt.rule.match, fi, link, dir, t_rel)) continue;
    if (Impl::flap_scheduled_down(rt.rule, t_rel)) {
      m.fired(rt, "link down (flap schedule)");
      m.finish(len, true);
      return d;
    }
  }

  bool matched_any = false;
  bool dropped = false;
  uint64_t delay_ns = 0;
  for (RuleRt& rt : m.rules) {
    const Rule& r = rt.rule;
    if (r.type == FaultType::kFlap) continue;
    if (!m.matches(r.match, fi, link, dir, t_rel)) continue;
    if (r.max_hits != 0 && rt.hits >= r.max_hits) continue;
    matched_any = true;
    Lane& ln = m.lane(rt, link, dir);
    switch (r.type) {
      case FaultType::kLoss:
      case FaultType::kDrop:
        if (ln.rng.chance(r.p)) {
          std::string c = r.type == FaultType::kLoss ? "bernoulli p=" : "drop p=";
          append_double(c, r.p);
          m.fired(rt, c);
          dropped = true;
        }
        break;
      case FaultType::kBlackhole:
        m.fired(rt, "blackhole");
        dropped = true;
        break;
      case FaultType::kGilbert: {
        const bool bad = ln.ge_bad;
        const bool lost = ln.rng.chance(bad ? r.loss_bad : r.loss_good);
        // Transition after the loss draw: the state of this frame decided its loss.
        if (bad) {
          if (ln.rng.chance(r.p_bad_to_good)) ln.ge_bad = false;
        } else {
          if (ln.rng.chance(r.p_good_to_bad)) ln.ge_bad = true;
        }
        if (lost) {
          m.fired(rt,
                  bad ? "gilbert-elliott loss in bad state" : "gilbert-elliott loss in good state");
          dropped = true;
        }
        break;
      }
      case FaultType::kDelay: {
        uint64_t extra = r.delay_ns + (r.jitter_ns ? ln.rng.below(r.jitter_ns + 1) : 0);
        uint64_t total = delay_ns + extra;
        if (r.keep_order && t_ns + total < ln.last_release_ns) total = ln.last_release_ns - t_ns;
        if (r.keep_order) ln.last_release_ns = t_ns + total;
        extra = total - delay_ns;
        delay_ns = total;
        if (extra > 0) {
          std::string c = "delay ";
          append_num(c, extra);
          c += " ns";
          m.fired(rt, c);
          d.applied |= action_bit(Action::kDelay);
        }
        break;
      }
      case FaultType::kReorder:
        if (ln.rng.chance(r.p)) {
          delay_ns += r.delay_ns;
          std::string c = "reorder: held ";
          append_num(c, r.delay_ns);
          c += " ns";
          m.fired(rt, c);
          d.applied |= action_bit(Action::kDelay);
        }
        break;
      case FaultType::kDup:
        if (ln.rng.chance(r.p)) {
          d.copies += r.copies;
          std::string c = "duplicate x";
          append_num(c, r.copies);
          m.fired(rt, c);
          d.applied |= action_bit(Action::kDup);
        }
        break;
      case FaultType::kCorrupt:
        if (ln.rng.chance(r.p)) {
          if (f.error || !f.has_icrc) break;  // nothing an ICRC check could catch
          m.ensure_copy();
          if (corrupt_frame(MutBytes(d.bytes.data(), d.bytes.size()), f, r.bits, ln.rng,
                            r.fix_udp_checksum)) {
            m.redecode();
            std::string c = "flipped ";
            append_num(c, r.bits);
            c += r.bits == 1 ? " bit" : " bits";
            m.fired(rt, c);
            d.applied |= action_bit(Action::kCorrupt);
          }
        }
        break;
      case FaultType::kTrim:
        if (ln.rng.chance(r.p)) {
          if (!is_mrc_data(f) || f.trimmed || f.error) break;  // control packets are not trimmed
          if (!m.trimmable_dscp() && r.untrimmable != Untrimmable::kTrimAnyway) {
            if (r.untrimmable == Untrimmable::kDrop) {
              std::string c = "untrimmable DSCP ";
              append_num(c, f.dscp());
              c += ": dropped";
              m.fired(rt, c);
              dropped = true;
            }
            break;
          }
          if (m.do_trim(r.lasthop)) {
            std::string c = "trimmed to ";
            append_num(c, m.d.bytes.size());
            c += r.lasthop ? " B (last hop)" : " B";
            m.fired(rt, c);
            d.applied |= action_bit(Action::kTrim);
          }
        }
        break;
      case FaultType::kEcn:
        if (ln.rng.chance(r.p)) {
          const uint8_t ecn = f.ecn();
          if (f.l3 == 0 || ecn == 0 || ecn == 3) break;  // Not-ECT is never marked; CE stays CE
          m.ensure_copy();
          if (wire::rewrite_dscp_ecn(MutBytes(d.bytes.data(), d.bytes.size()), f, std::nullopt,
                                     uint8_t{3})) {
            m.fired(rt, "ECN CE");
            d.applied |= action_bit(Action::kEcn);
          }
        }
        break;
      case FaultType::kRate: {
        const size_t cur_len = d.rewritten ? d.bytes.size() : len;
        const uint64_t wire_bytes = cur_len + r.overhead_bytes;
        const uint64_t backlog_ns = ln.busy_until_ns > t_ns ? ln.busy_until_ns - t_ns : 0;
        const double backlog_bytes = static_cast<double>(backlog_ns) * r.rate_bps / 8e9;
        if (backlog_bytes + static_cast<double>(wire_bytes) > static_cast<double>(r.queue_bytes)) {
          std::string c = "queue full (";
          append_num(c, static_cast<uint64_t>(backlog_bytes + 0.5));
          c += " B queued + ";
          append_num(c, wire_bytes);
          c += " B > ";
          append_num(c, r.queue_bytes);
          c += " B)";
          // Congestion trimming: the cut header skips the data queue (a switch sends it on a
          // separate priority queue), so it is forwarded at once.
          if (r.overflow == Overflow::kTrim && is_mrc_data(f) && !f.trimmed && !f.error &&
              (m.trimmable_dscp() || r.untrimmable == Untrimmable::kTrimAnyway) &&
              m.do_trim(r.lasthop)) {
            c += ": trimmed";
            m.fired(rt, c);
            d.applied |= action_bit(Action::kTrim);
          } else {
            c += ": tail drop";
            m.fired(rt, c);
            dropped = true;
          }
          break;
        }
        const uint64_t start = std::max(t_ns, ln.busy_until_ns);
        const auto tx_ns =
            static_cast<uint64_t>(std::ceil(static_cast<double>(wire_bytes) * 8e9 / r.rate_bps));
        ln.busy_until_ns = start + tx_ns;
        const uint64_t wait = ln.busy_until_ns - t_ns;
        delay_ns += wait;
        std::string c = "queued ";
        append_num(c, wait);
        c += " ns";
        m.fired(rt, c);
        d.applied |= action_bit(Action::kDelay);
        break;
      }
      case FaultType::kFlap:
        break;
    }
    if (dropped) break;
  }
  d.delay_ns = delay_ns;
  if (!dropped && d.applied == 0 && matched_any && d.reason.empty())
    d.reason = "matched, not fired";
  m.finish(len, dropped);
  return d;
}

const PolicyConfig& Policy::config() const {
  return impl_->cfg;
}

const Stats& Policy::stats() const {
  Impl& m = *impl_;
  for (size_t i = 0; i < m.rules.size(); ++i) m.stats.rule_hits[i].second = m.rules[i].hits;
  return m.stats;
}

uint64_t Policy::seed() const {
  return impl_->cfg.seed;
}
uint64_t Policy::epoch_ns() const {
  return impl_->epoch;
}

std::optional<uint32_t> Policy::link_index(std::string_view name) const {
  const auto& links = impl_->cfg.links;
  for (size_t i = 0; i < links.size(); ++i)
    if (links[i].name == name) return static_cast<uint32_t>(i);
  return std::nullopt;
}

}  // namespace mrc::faults
