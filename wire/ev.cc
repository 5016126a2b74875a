// EV carriage in UDP/IPv6 headers, the OCP EV expansion algorithm, and RFC 9800 uSID shifting.
#include <bit>
#include <string>

#include "wire/wire.h"

namespace mrc::wire {

std::string_view ev_format_name(EvFormat f) {
  switch (f) {
    case EvFormat::kUdp:
      return "udp";
    case EvFormat::kStev:
      return "stev";
    case EvFormat::kSrv6:
      return "srv6";
  }
  return "?";
}

std::optional<EvFormat> parse_ev_format(std::string_view s) {
  if (s == "udp" || s == "UDP") return EvFormat::kUdp;
  if (s == "stev" || s == "STEV") return EvFormat::kStev;
  if (s == "srv6" || s == "SRV6" || s == "SRv6") return EvFormat::kSrv6;
  return std::nullopt;
}

EvCarriage carry_wev(EvFormat format, EvStripe stripe, uint32_t wev) {
  EvCarriage c;
  if (format == EvFormat::kUdp) {
    // UDP mode carries 16 bits; the flow label stays 0 so ECMP hashes only the port.
    c.sport = static_cast<uint16_t>(wev);
    return c;
  }
  const uint16_t lo = static_cast<uint16_t>(wev);
  const uint16_t hi = static_cast<uint16_t>(wev >> 16);
  c.sport = stripe == EvStripe::kLowInSport ? lo : hi;
  c.flow_label = stripe == EvStripe::kLowInSport ? hi : lo;  // FL[19:16] stay 0
  return c;
}

uint32_t wev_from_carriage(EvFormat format, EvStripe stripe, uint16_t sport, uint32_t flow_label) {
  if (format == EvFormat::kUdp) return sport;
  const uint32_t fl16 = flow_label & 0xFFFF;
  return stripe == EvStripe::kLowInSport ? (fl16 << 16 | sport)
                                         : (static_cast<uint32_t>(sport) << 16 | fl16);
}

EvCarriage carry_wev(const WireParams& p, EvFormat format, uint32_t wev) {
  if (format == EvFormat::kSrv6 && p.srv6_wev == Srv6WevCarriage::kNone) return {};
  EvCarriage c = carry_wev(format, p.ev_stripe, wev);
  if (format == EvFormat::kUdp && p.ecmp_flow_label == EcmpFlowLabel::kEv)
    c.flow_label = static_cast<uint16_t>(wev);  // the 16-bit EV in both; FL[19:16] = 0
  return c;
}

uint32_t wev_from_carriage(const WireParams& p, EvFormat format, uint16_t sport,
                           uint32_t flow_label) {
  if (format == EvFormat::kSrv6 && p.srv6_wev == Srv6WevCarriage::kNone) return 0;
  return wev_from_carriage(format, p.ev_stripe, sport, flow_label);
}

namespace {

// Bit b of a 256-bit big-endian stream (b = 0 is the MSB of byte 0).
bool get_bit(const EvBytes& e, unsigned b) {
  return (e[b / 8] >> (7 - b % 8)) & 1;
}
void set_bit(EvBytes& e, unsigned b) {
  e[b / 8] |= static_cast<uint8_t>(1u << (7 - b % 8));
}

// Deposits the low bits of x into the set bits of mask, LSB first (x86 PDEP semantics).
uint32_t pdep(uint32_t x, uint32_t mask) {
  uint32_t out = 0;
  for (uint32_t bit = 1; mask != 0; bit <<= 1) {
    const uint32_t lowest = mask & (~mask + 1);
    if (x & bit) out |= lowest;
    mask &= mask - 1;
  }
  return out;
}

uint64_t width_limit(uint32_t width) {
  return width >= 32 ? (1ull << 32) : (1ull << width);
}

}  // namespace

std::string validate_ev_profile(std::span<const uint32_t> format_widths,
                                std::span<const EvField> fields) {
  uint64_t fmt_total = 0;
  for (size_t j = 0; j < format_widths.size(); ++j) {
    if (format_widths[j] == 0) return "format field " + std::to_string(j) + ": width 0";
    fmt_total += format_widths[j];
  }
  if (fmt_total > 256) return "format width " + std::to_string(fmt_total) + " exceeds 256 bits";
  if (fields.size() > format_widths.size())
    return "profile has " + std::to_string(fields.size()) + " fields but the format only " +
           std::to_string(format_widths.size());
  uint64_t total = 0;
  for (size_t j = 0; j < fields.size(); ++j) {
    const EvField& f = fields[j];
    const std::string at = "field " + std::to_string(j) + ": ";
    if (f.width == 0 || f.width > 32)
      return at + "width " + std::to_string(f.width) + " not in 1..32";
    if (f.width > format_widths[j])
      return at + "width " + std::to_string(f.width) + " exceeds format field width " +
             std::to_string(format_widths[j]);
    if (f.init_val >= width_limit(f.width)) return at + "init_val does not fit the width";
    if (f.mask >= width_limit(f.width)) return at + "mask does not fit the width";
    if (f.mask != 0) {
      const int k = std::popcount(f.mask);
      if (f.max_val >= width_limit(static_cast<uint32_t>(k)))
        return at + "max_val exceeds 2^popcount(mask)-1";
      if (f.min_val > f.max_val) return at + "min_val > max_val";
    }
    total += f.width;
  }
  if (total > fmt_total) return "profile widths exceed the format width";
  return {};
}

EvExpandResult expand_ev(std::span<const uint32_t> format_widths, std::span<const EvField> fields,
                         const EvBytes& compact) {
  EvExpandResult r;
  if (std::string err = validate_ev_profile(format_widths, fields); !err.empty()) {
    r.error = err;
    return r;
  }
  unsigned src = 0, dst = 0;
  for (size_t j = 0; j < fields.size(); ++j) {
    const EvField& f = fields[j];
    uint32_t v = f.init_val;
    if (f.mask != 0) {
      const unsigned k = static_cast<unsigned>(std::popcount(f.mask));
      uint32_t x = 0;
      for (unsigned i = 0; i < k; ++i) x = (x << 1) | (get_bit(compact, src + i) ? 1u : 0u);
      v = (v & ~f.mask) | pdep(x, f.mask);
      src += k;
    }
    // Right-aligned big-endian field of format width; high bits beyond 32 stay zero.
    const uint32_t fw = format_widths[j];
    for (unsigned i = 0; i < 32 && i < fw; ++i) {
      if ((v >> i) & 1) set_bit(r.expanded, dst + fw - 1 - i);
    }
    dst += fw;
  }
  for (unsigned b = src; b < 256; ++b) {
    if (get_bit(compact, b)) {
      r.error = "compact EV has bit " + std::to_string(b) + " set beyond the " +
                std::to_string(src) + " bits the profile consumes";
      r.expanded = {};
      return r;
    }
  }
  r.ok = true;
  return r;
}

namespace {
__extension__ typedef unsigned __int128 u128;
u128 to_u128(const Ipv6Addr& a) {
  u128 v = 0;
  for (uint8_t b : a) v = (v << 8) | b;
  return v;
}
void from_u128(Ipv6Addr& a, u128 v) {
  for (int i = 15; i >= 0; --i) {
    a[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
    v >>= 8;
  }
}
u128 low_mask(unsigned bits) {
  return bits >= 128 ? ~u128{0} : ((u128{1} << bits) - 1);
}
}  // namespace

bool usid_shift(Ipv6Addr& da, unsigned lbl_bits, unsigned nfl_bits) {
  if (lbl_bits + nfl_bits >= 128 || nfl_bits == 0) return false;
  const u128 v = to_u128(da);
  const unsigned arg_bits = 128 - lbl_bits - nfl_bits;
  const u128 arg = v & low_mask(arg_bits);
  if (arg == 0) return false;
  const u128 block = v & ~low_mask(128 - lbl_bits);
  from_u128(da, block | (arg << nfl_bits));
  return true;
}

uint32_t usid_active(const Ipv6Addr& da, unsigned lbl_bits, unsigned nfl_bits) {
  if (lbl_bits + nfl_bits > 128 || nfl_bits == 0 || nfl_bits > 32) return 0;
  const u128 v = to_u128(da);
  return static_cast<uint32_t>((v >> (128 - lbl_bits - nfl_bits)) & low_mask(nfl_bits));
}

}  // namespace mrc::wire
