#include "wire/tins/tins.h"

#include <tins/ethernetII.h>
#include <tins/exceptions.h>
#include <tins/ip.h>
#include <tins/ipv6.h>
#include <tins/udp.h>

#include <array>
#include <cstring>
#include <stdexcept>

namespace mrc::tins {
namespace {

const wire::WireProfile& profile_or_mrp0(const wire::WireProfile* p) {
  return p ? *p : wire::mrp0();
}

// A DSCP that the profile does not read as trimmed.
uint8_t untrimmed_dscp(const wire::DscpPlan& plan) {
  uint8_t d = plan.no_trim;
  while (d == plan.trimmed || d == plan.trimmed_lasthop) d = static_cast<uint8_t>((d + 1) & 0x3F);
  return d;
}

// decode_frame walks frames, not loose UDP payloads: carry the payload in a minimal raw IPv6/UDP
// packet (to the RoCE port, with the given outer DSCP so trimmed packets are recognised).
struct Wrapped {
  std::vector<std::byte> frame;
  wire::DecodedFrame f;
  size_t payload_off = 0;  // where the UDP payload starts in frame
};

bool wrap_and_decode(wire::Bytes payload, uint8_t dscp, const wire::WireProfile& profile,
                     Wrapped& w, std::string& error) {
  wire::FrameSpec s;
  s.l3 = 6;
  s.ip6.dscp = dscp;
  s.has_udp = true;
  s.udp.dport = wire::kRoceV2Port;
  s.payload = payload;
  w.frame.resize(wire::encoded_size(s, {}, profile));
  std::string why;
  const size_t n = wire::encode_frame(s, w.frame, {}, profile, &why);
  if (n == 0) {
    error = "UDP payload of " + std::to_string(payload.size()) + " bytes cannot be decoded: " + why;
    return false;
  }
  w.frame.resize(n);
  w.payload_off = n - payload.size();
  wire::DecodeOptions o;
  o.link = wire::LinkType::kRawIp;
  wire::decode_frame(w.frame, w.f, o, profile);
  return true;
}

// The codec's description of a decode error, with the offset counted from the UDP payload.
std::string describe_in_payload(const Wrapped& w) {
  wire::DecodeError e = w.f.error;
  if (e.offset >= w.payload_off) e.offset -= static_cast<uint32_t>(w.payload_off);
  return e.describe() + " (offset in the UDP payload)";
}

Tins::PDU* outer_ip(const Tins::PDU* root) {
  for (Tins::PDU* p = const_cast<Tins::PDU*>(root); p; p = p->inner_pdu()) {
    if (p->pdu_type() == Tins::PDU::IP || p->pdu_type() == Tins::PDU::IPv6) return p;
  }
  return nullptr;
}

// DSCP of the outer IP header, as a switch (and the codec's trimmed rule) sees it.
std::optional<uint8_t> outer_dscp(const Tins::PDU* root) {
  const Tins::PDU* ip = outer_ip(root);
  if (!ip) return std::nullopt;
  if (const auto* v4 = Tins::tins_cast<const Tins::IP*>(ip))
    return static_cast<uint8_t>(v4->tos() >> 2);
  return static_cast<uint8_t>(Tins::tins_cast<const Tins::IPv6*>(ip)->traffic_class() >> 2);
}

const Tins::PDU* root_of(const Tins::PDU* p) {
  while (p->parent_pdu()) p = p->parent_pdu();
  return p;
}

Tins::PDU* innermost(Tins::PDU* p) {
  while (p->inner_pdu()) p = p->inner_pdu();
  return p;
}

// Inserts `pdu` right after `parent`, in front of what followed it.
void insert_after(Tins::PDU* parent, Tins::PDU* pdu) {
  Tins::PDU* rest = parent->release_inner_pdu();
  parent->inner_pdu(pdu);
  if (rest) pdu->inner_pdu(rest);
}

std::unique_ptr<Tins::PDU> ext_pdu(wire::HeaderBit bit, const wire::DecodedFrame& f) {
  switch (bit) {
    case wire::kHdrMeth:
      return std::make_unique<Meth>(f.meth);
    case wire::kHdrTseth:
      return std::make_unique<Tseth>(f.tseth);
    case wire::kHdrReth:
      return std::make_unique<Reth>(f.reth);
    case wire::kHdrImm:
      return std::make_unique<ImmDt>(f.immdt);
    case wire::kHdrAeth:
      return std::make_unique<Aeth>(f.aeth);
    case wire::kHdrSeth:
      return std::make_unique<Seth>(f.seth);
    case wire::kHdrCcState:
      return std::make_unique<CcState>(f.cc_state);
    case wire::kHdrNeth:
      return std::make_unique<Neth>(f.neth);
    case wire::kHdrPeth:
      return std::make_unique<Peth>(f.peth);
    case wire::kHdrErth:
      return std::make_unique<Erth>(f.erth);
    case wire::kHdrEeth:
      return std::make_unique<Eeth>(f.eeth);
    default:
      return nullptr;  // IBTA atomic/IETH headers have no PDU: left in the RawPDU
  }
}

ParseResult parse_with_dscp(wire::Bytes payload, uint8_t dscp, const wire::WireProfile& profile) {
  ParseResult r;
  Wrapped w;
  if (!wrap_and_decode(payload, dscp, profile, w, r.error)) return r;
  const wire::DecodedFrame& f = w.f;
  if (!f.roce) {
    r.error = f.error ? describe_in_payload(w) : "no BTH in the UDP payload";
    return r;
  }
  r.pdu = std::make_unique<Bth>(f.bth);
  Tins::PDU* tail = r.pdu.get();
  auto append = [&tail](std::unique_ptr<Tins::PDU> p) {
    Tins::PDU* raw = p.release();
    tail->inner_pdu(raw);
    tail = raw;
  };
  size_t off = f.off_bth + kBthBytes;
  bool whole = true;
  for (wire::HeaderBit bit : profile.header_order()) {
    if (!f.has(bit)) continue;
    auto p = ext_pdu(bit, f);
    if (!p) {
      whole = false;
      break;
    }
    append(std::move(p));
    off += profile.header_size(bit);
  }
  const size_t udp_end = static_cast<size_t>(f.off_udp) + f.udp.length;
  if (f.error || !whole) {
    // Decoding stopped early: keep the bytes it did not walk, so nothing is lost.
    if (off < udp_end) {
      const auto* p = reinterpret_cast<const uint8_t*>(w.frame.data());
      append(std::make_unique<Tins::RawPDU>(p + off, static_cast<uint32_t>(udp_end - off)));
    }
    r.error = f.error ? describe_in_payload(w) : "a header without a libtins PDU follows the BTH";
    return r;
  }
  if (!f.payload.empty()) {
    const auto* p = reinterpret_cast<const uint8_t*>(f.payload.data());
    append(std::make_unique<Tins::RawPDU>(p, static_cast<uint32_t>(f.payload.size())));
  }
  if (f.pad_bytes) append(std::make_unique<Pad>(f.pad_data));
  if (f.has_icrc) append(std::make_unique<Icrc>(f.icrc));
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Codec glue
// ---------------------------------------------------------------------------------------------
namespace detail {

uint32_t ext_header_size(wire::HeaderBit bit) {
  return static_cast<uint32_t>(wire::mrp0().header_size(bit));
}

void encode_ext(wire::HeaderBit bit, const wire::DecodedFrame& f, uint8_t* out, uint32_t size) {
  const size_t need = wire::mrp0().header_size(bit);
  if (size < need) throw Tins::serialization_error();
  wire::mrp0().encode_header(bit, f, wire::MutBytes(reinterpret_cast<std::byte*>(out), need));
}

void decode_ext(wire::HeaderBit bit, wire::Bytes data, wire::DecodedFrame& f) {
  const size_t need = wire::mrp0().header_size(bit);
  if (data.size() < need) throw Tins::malformed_packet();
  wire::mrp0().decode_header(bit, data.first(need), f);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Bth, Pad, Icrc
// ---------------------------------------------------------------------------------------------
Bth::Bth(uint8_t opcode, uint32_t dest_qp, uint32_t psn) {
  h_.opcode = opcode;
  h_.dest_qp = dest_qp;
  h_.psn = psn;
}

Bth::Bth(wire::Bytes data) {
  if (!wire::decode_bth(data, h_)) throw Tins::malformed_packet();
}

std::string_view Bth::opcode_name() const {
  const wire::OpcodeInfo* op = wire::mrp0().opcode_info(h_.opcode);
  return op ? op->name : std::string_view{};
}

void Bth::write_serialization(uint8_t* buffer, uint32_t total_sz) {
  if (!wire::encode_bth(h_, wire::MutBytes(reinterpret_cast<std::byte*>(buffer), total_sz)))
    throw Tins::serialization_error();
}

Pad::Pad(wire::Bytes data)
    : bytes_(reinterpret_cast<const uint8_t*>(data.data()),
             reinterpret_cast<const uint8_t*>(data.data()) + data.size()) {}

void Pad::write_serialization(uint8_t* buffer, uint32_t total_sz) {
  if (total_sz < bytes_.size()) throw Tins::serialization_error();
  if (!bytes_.empty()) std::memcpy(buffer, bytes_.data(), bytes_.size());
}

Icrc::Icrc(wire::Bytes data) {
  if (data.size() < wire::kIcrcBytes) throw Tins::malformed_packet();
  value_ = 0;
  for (size_t i = 0; i < wire::kIcrcBytes; ++i)
    value_ |= static_cast<uint32_t>(data[i]) << (8 * i);  // carried little-endian
}

void Icrc::write_serialization(uint8_t* buffer, uint32_t total_sz) {
  if (total_sz < wire::kIcrcBytes) throw Tins::serialization_error();
  for (size_t i = 0; i < wire::kIcrcBytes; ++i) buffer[i] = static_cast<uint8_t>(value_ >> (8 * i));
}

// ---------------------------------------------------------------------------------------------
// serialize
// ---------------------------------------------------------------------------------------------
std::vector<std::byte> serialize(const Tins::PDU& packet, const SerializeOptions& opts) {
  const wire::WireProfile& profile = profile_or_mrp0(opts.profile);
  std::unique_ptr<Tins::PDU> root(packet.clone());
  auto fail = [](const std::string& why) {
    return std::invalid_argument("mrc::tins::serialize: " + why);
  };

  Bth* bth = root->find_pdu<Bth>();
  Icrc* icrc = bth ? bth->find_pdu<Icrc>() : nullptr;
  uint16_t roce_port = wire::kRoceV2Port;
  if (bth) {
    const auto* udp = Tins::tins_cast<const Tins::UDP*>(bth->parent_pdu());
    if (!udp) throw fail("the Bth must sit directly under a Tins::UDP");
    roce_port = udp->dport();
    if (icrc && icrc->inner_pdu()) throw fail("the Icrc must be the innermost PDU");
    const wire::OpcodeInfo* op = profile.opcode_info(bth->opcode());
    const std::optional<uint8_t> dscp = outer_dscp(root.get());
    const bool trimmed =
        op && op->kind == wire::PacketKind::kMrcData && dscp &&
        (*dscp == profile.dscp().trimmed || *dscp == profile.dscp().trimmed_lasthop);
    if (!trimmed && opts.pad_payload) {
      uint32_t ib_bytes = bth->inner_pdu() ? bth->inner_pdu()->size() : 0;
      if (icrc) ib_bytes -= icrc->size();
      const uint32_t pad = (4 - ib_bytes % 4) % 4;
      if (pad) {
        Tins::PDU* before = icrc ? icrc->parent_pdu() : innermost(root.get());
        insert_after(before, new Pad(std::vector<uint8_t>(pad, 0)));
        bth->pad_count(static_cast<uint8_t>(pad));
      }
    }
    if (!icrc && !trimmed && opts.append_icrc) {
      icrc = new Icrc();
      innermost(root.get())->inner_pdu(icrc);
    }
  }

  const Tins::PDU::serialization_type raw = root->serialize();
  std::vector<std::byte> out(raw.size());
  if (!raw.empty()) std::memcpy(out.data(), raw.data(), raw.size());

  const bool want_icrc = icrc && opts.fix_icrc;
  const bool want_udp =
      opts.udp_checksum != wire::UdpChecksumPolicy::kAsIs && root->find_pdu<Tins::UDP>() != nullptr;
  if (!want_icrc && !want_udp) return out;

  wire::DecodeOptions dopts;
  switch (root->pdu_type()) {
    case Tins::PDU::ETHERNET_II:
      dopts.link = wire::LinkType::kEthernet;
      break;
    case Tins::PDU::IP:
    case Tins::PDU::IPv6:
      dopts.link = wire::LinkType::kRawIp;
      break;
    default:
      throw fail("the outermost PDU must be EthernetII, IP or IPv6 to place ICRC/checksum");
  }
  dopts.roce_port = roce_port;
  // decode_frame keeps the ICRC position even for opcodes the profile does not know, so a
  // mutant opcode gets its ICRC too.
  wire::DecodedFrame f;
  wire::decode_frame(out, f, dopts, profile);
  const std::string why = f.error ? f.error.describe() : "the frame decodes without it";
  // The UDP checksum covers the ICRC bytes: ICRC first, then the checksum.
  if (want_icrc && !(f.roce && f.has_icrc && wire::fix_icrc(out, f)))
    throw fail("cannot place the ICRC: " + why);
  if (want_udp && !(f.has_udp && wire::fix_udp_checksum(out, f, opts.udp_checksum)))
    throw fail("cannot set the UDP checksum: " + why);
  return out;
}

std::vector<std::byte> serialize(const Tins::PDU& packet, wire::UdpChecksumPolicy udp_checksum) {
  SerializeOptions o;
  o.udp_checksum = udp_checksum;
  return serialize(packet, o);
}

// ---------------------------------------------------------------------------------------------
// parse
// ---------------------------------------------------------------------------------------------
ParseResult parse_roce(wire::Bytes udp_payload, const ParseOptions& opts) {
  const wire::WireProfile& profile = profile_or_mrp0(opts.profile);
  const uint8_t dscp =
      opts.trimmed.value_or(false) ? profile.dscp().trimmed : untrimmed_dscp(profile.dscp());
  return parse_with_dscp(udp_payload, dscp, profile);
}

ParseResult parse_roce(const Tins::RawPDU& udp_payload, const ParseOptions& opts) {
  const wire::WireProfile& profile = profile_or_mrp0(opts.profile);
  const auto& bytes = udp_payload.payload();
  const wire::Bytes payload = wire::as_bytes(bytes.data(), bytes.size());
  if (opts.trimmed) return parse_roce(payload, opts);
  const std::optional<uint8_t> dscp = outer_dscp(root_of(&udp_payload));
  return parse_with_dscp(payload, dscp.value_or(untrimmed_dscp(profile.dscp())), profile);
}

std::string expand_roce(Tins::PDU& packet, uint16_t roce_port) {
  for (Tins::PDU* p = &packet; p; p = p->inner_pdu()) {
    auto* udp = Tins::tins_cast<Tins::UDP*>(p);
    if (!udp || udp->dport() != roce_port) continue;
    if (Tins::tins_cast<Bth*>(udp->inner_pdu())) return {};  // already expanded
    const auto* raw = Tins::tins_cast<const Tins::RawPDU*>(udp->inner_pdu());
    if (!raw) return "the UDP datagram to port " + std::to_string(roce_port) + " has no payload";
    ParseResult r = parse_roce(*raw);
    if (r.pdu) udp->inner_pdu(r.pdu.release());  // deletes the RawPDU, after the parse
    return r.error;
  }
  return "no UDP datagram to port " + std::to_string(roce_port);
}

}  // namespace mrc::tins
