// Randomness, packet inspection, packet surgery, fault rules and the decision-log format.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "reference-impl/sim/sim.h"

namespace mrc::sim {

// ---------------------------------------------------------------------------------------------
// Rng
// ---------------------------------------------------------------------------------------------
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void Rng::reseed(uint64_t seed) {
  uint64_t sm = seed;
  for (uint64_t& w : s_) w = splitmix64(sm);
}

static inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

uint64_t Rng::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

uint64_t Rng::uniform(uint64_t n) {
  if (n == 0) return 0;
  // Rejection keeps every residue equally likely; the loop almost never repeats.
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    uint64_t x = next();
    if (x >= threshold) return x % n;
  }
}

double Rng::unit() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

uint64_t derive_seed(uint64_t master, std::string_view label, uint64_t index) {
  // FNV-1a of the label: std::hash is not specified to be stable across libraries.
  uint64_t h = 0xCBF29CE484222325ull;
  for (char c : label) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  uint64_t state = master;
  uint64_t a = splitmix64(state);
  state ^= h;
  uint64_t b = splitmix64(state);
  state ^= index * 0xD1B54A32D192ED03ull;
  return a ^ rotl(b, 17) ^ splitmix64(state);
}

// ---------------------------------------------------------------------------------------------
// Inspection
// ---------------------------------------------------------------------------------------------
wire::Ipv6Addr ipv4_mapped(const wire::Ipv4Addr& a) {
  wire::Ipv6Addr m{};
  m[10] = 0xFF;
  m[11] = 0xFF;
  std::copy(a.begin(), a.end(), m.begin() + 12);
  return m;
}

PacketInfo inspect_frame(wire::Bytes frame, const wire::WireProfile& profile) {
  PacketInfo info;
  wire::DecodedFrame f;
  info.decoded_ok = wire::decode_frame(frame, f, {}, profile);
  info.l3 = f.l3;
  info.dscp = f.dscp();
  info.ecn = f.ecn();
  info.flow_label = f.flow_label();
  if (f.has_udp) info.sport = f.udp.sport;
  if (f.roce) {
    info.roce = true;
    info.opcode = f.bth.opcode;
    info.qpn = f.bth.dest_qp;
    info.psn = f.bth.psn;
    info.kind = f.op != nullptr ? f.op->kind : wire::PacketKind::kUnknown;
    info.wev =
        wire::wev_from_carriage(f.ev_format(), profile.ev_stripe(), f.udp.sport, f.flow_label());
  }
  if (const wire::Ipv6Header* ip6 = f.roce_ip6()) {
    info.has_dst = true;
    info.dst = ip6->dst;
  } else if (f.l3 == 4) {
    info.has_dst = true;
    info.dst = ipv4_mapped(f.ip4.dst);
  }
  return info;
}

// ---------------------------------------------------------------------------------------------
// Packet surgery
// ---------------------------------------------------------------------------------------------
namespace {

constexpr uint16_t kAbsent = 0xFFFF;

}  // namespace

bool trim_frame(std::vector<std::byte>& frame, uint8_t dscp, const wire::WireProfile& profile,
                std::string* error) {
  wire::DecodedFrame f;
  wire::decode_frame(wire::as_bytes(frame), f, {}, profile);
  const size_t n =
      wire::trim_frame(wire::MutBytes(frame.data(), frame.size()), f, dscp, profile, error);
  if (n == 0) return false;
  frame.resize(n);
  return true;
}

std::optional<size_t> corrupt_frame(std::vector<std::byte>& frame, uint64_t bit_index,
                                    const wire::WireProfile& profile) {
  wire::DecodedFrame f;
  wire::decode_frame(wire::as_bytes(frame), f, {}, profile);
  size_t begin = 0;
  size_t end = 0;
  bool skip_bth4 = false;
  const size_t icrc_end = frame.size() >= wire::kIcrcBytes ? frame.size() - wire::kIcrcBytes : 0;
  if (f.roce && f.off_bth != kAbsent) {
    if (f.off_payload != kAbsent && !f.payload.empty()) {
      begin = f.off_payload;
      end = begin + f.payload.size();
    } else if (size_t{f.off_bth} + 12 < icrc_end) {
      begin = size_t{f.off_bth} + 12;
      end = icrc_end;
    } else {
      begin = f.off_bth;
      end = std::min(icrc_end, size_t{f.off_bth} + 12);
      skip_bth4 = end > begin + 4;
    }
  } else if (frame.size() > 14) {
    begin = 14;
    end = frame.size();
  }
  if (end <= begin) return std::nullopt;
  uint64_t bits = (end - begin) * 8;
  if (skip_bth4) bits -= 8;
  if (bits == 0) return std::nullopt;
  uint64_t bit = bit_index % bits;
  size_t off = begin + bit / 8;
  if (skip_bth4 && off >= size_t{f.off_bth} + 4) off += 1;  // byte 4 is masked out of the ICRC
  if (off >= end) return std::nullopt;
  frame[off] ^= static_cast<std::byte>(1u << (bit % 8));
  return off;
}

bool set_ecn(std::vector<std::byte>& frame, uint8_t ecn, const wire::WireProfile& profile) {
  wire::DecodedFrame f;
  wire::decode_frame(wire::as_bytes(frame), f, {}, profile);
  if (f.l3 == 0) return false;
  return wire::rewrite_dscp_ecn(wire::MutBytes(frame.data(), frame.size()), f, std::nullopt, ecn);
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------
std::string_view action_name(Action a) {
  switch (a) {
    case Action::kPass:
      return "pass";
    case Action::kDrop:
      return "drop";
    case Action::kTrim:
      return "trim";
    case Action::kDelay:
      return "delay";
    case Action::kDup:
      return "dup";
    case Action::kCorrupt:
      return "corrupt";
    case Action::kEcn:
      return "ecn";
  }
  return "?";
}

bool PacketMatch::matches(const PacketInfo& info, uint64_t now_ns) const {
  if (now_ns < from_ns || now_ns >= until_ns) return false;
  if (!info.roce) {
    // Frames without a BTH have no EV/PSN/QPN/opcode to compare.
    return !roce_only && !ev && !psn && !qpn && !opcode && !kind;
  }
  if (ev && *ev != info.wev) return false;
  if (psn && *psn != info.psn) return false;
  if (qpn && *qpn != info.qpn) return false;
  if (opcode && *opcode != info.opcode) return false;
  if (kind && *kind != info.kind) return false;
  return true;
}

Fault Fault::trim(bool lasthop) {
  Fault f;
  f.action = Action::kTrim;
  f.trim_lasthop = lasthop;
  return f;
}

Fault Fault::mark_ecn() {
  Fault f;
  f.action = Action::kEcn;
  return f;
}

Fault Fault::delay(uint64_t min_ns, uint64_t max_ns) {
  Fault f;
  f.action = Action::kDelay;
  f.delay_min_ns = min_ns;
  f.delay_max_ns = max_ns;
  return f;
}

Fault Fault::duplicate(uint32_t n) {
  Fault f;
  f.action = Action::kDup;
  f.copies = n;
  return f;
}

Fault Fault::corrupt() {
  Fault f;
  f.action = Action::kCorrupt;
  return f;
}

Fault& Fault::at_indices(std::vector<uint64_t> idx) {
  trigger = Trigger::kIndex;
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  indices = std::move(idx);
  return *this;
}

namespace {
std::string fmt_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

std::string Fault::describe() const {
  std::string s(action_name(action));
  switch (action) {
    case Action::kDelay:
      s += " " + std::to_string(delay_min_ns) + ".." + std::to_string(delay_max_ns) + "ns";
      break;
    case Action::kDup:
      s += " x" + std::to_string(copies);
      break;
    case Action::kTrim:
      s += trim_lasthop ? " lasthop" : "";
      break;
    default:
      break;
  }
  switch (trigger) {
    case Trigger::kAlways:
      break;
    case Trigger::kIndex: {
      s += " index";
      for (size_t i = 0; i < indices.size() && i < 8; ++i) {
        s += (i == 0 ? "=" : ",") + std::to_string(indices[i]);
      }
      if (indices.size() > 8) s += ",...";
      break;
    }
    case Trigger::kBernoulli:
      s += " bernoulli p=" + fmt_double(probability);
      break;
    case Trigger::kGilbertElliott:
      s += " gilbert-elliott p=" + fmt_double(burst.p_good_to_bad) +
           " r=" + fmt_double(burst.p_bad_to_good) + " loss_good=" + fmt_double(burst.loss_good) +
           " loss_bad=" + fmt_double(burst.loss_bad);
      break;
  }
  if (match.ev) s += " ev=" + std::to_string(*match.ev);
  if (match.psn) s += " psn=" + std::to_string(*match.psn);
  if (match.qpn) s += " qpn=" + std::to_string(*match.qpn);
  if (match.opcode) s += " opcode=" + std::to_string(*match.opcode);
  if (match.from_ns != 0 || match.until_ns != kForever) {
    s += " during=" + std::to_string(match.from_ns) + ".." +
         (match.until_ns == kForever ? std::string("inf") : std::to_string(match.until_ns));
  }
  if (max_hits != kForever) s += " at_most=" + std::to_string(max_hits);
  return s;
}

std::string Fault::validate() const {
  auto prob_ok = [](double p) { return p >= 0.0 && p <= 1.0; };  // false for NaN
  if (trigger == Trigger::kBernoulli && !prob_ok(probability)) {
    return "fault '" + describe() + "': probability must be in [0, 1]";
  }
  if (trigger == Trigger::kGilbertElliott &&
      !(prob_ok(burst.p_good_to_bad) && prob_ok(burst.p_bad_to_good) && prob_ok(burst.loss_good) &&
        prob_ok(burst.loss_bad))) {
    return "fault '" + describe() + "': Gilbert-Elliott probabilities must be in [0, 1]";
  }
  if (trigger == Trigger::kIndex && indices.empty()) {
    return "fault '" + describe() + "': index trigger without indices";
  }
  if (action == Action::kDelay && delay_max_ns < delay_min_ns) {
    return "fault '" + describe() + "': delay_max_ns < delay_min_ns";
  }
  if (action == Action::kDup && (copies == 0 || copies > 64)) {
    return "fault '" + describe() + "': copies must be in 1..64";
  }
  if (match.until_ns <= match.from_ns) {
    return "fault '" + describe() + "': empty time window";
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// Decision log
// ---------------------------------------------------------------------------------------------
namespace {
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}
}  // namespace

std::string decision_json(const Decision& d) {
  std::string out;
  out.reserve(160);
  out += "{\"t_ns\":" + std::to_string(d.t_ns) + ",\"link\":";
  append_json_string(out, d.link_name);
  out += ",\"dir\":";
  append_json_string(out, d.dir);
  out += ",\"action\":";
  append_json_string(out, action_name(d.action));
  if (d.roce) {
    out += ",\"qpn\":" + std::to_string(d.qpn) + ",\"psn\":" + std::to_string(d.psn) +
           ",\"opcode\":" + std::to_string(d.opcode) + ",\"ev\":" + std::to_string(d.ev);
  } else {
    out += ",\"qpn\":null,\"psn\":null,\"opcode\":null,\"ev\":null";
  }
  out += ",\"reason\":";
  append_json_string(out, d.reason);
  out += ",\"seed\":" + std::to_string(d.seed) + "}";
  return out;
}

}  // namespace mrc::sim
