// Frame decode and encode: Ethernet (+VLAN), IPv4, IPv6 (+SRH, +IPv6-in-IPv6), UDP, BTH and
// the profile's extension headers. Bounds-checked, allocation-free on decode.
#include <cstring>
#include <string>

#include "wire/wire.h"

namespace mrc::wire {
namespace {

inline uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline uint32_t rd24(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) << 16 | static_cast<uint32_t>(p[1]) << 8 | p[2];
}
inline uint32_t rd32(const uint8_t* p) {
  return static_cast<uint32_t>(rd16(p)) << 16 | rd16(p + 2);
}
inline void wr16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void wr24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v);
}

bool fail(DecodedFrame& f, DecodeErrorCode code, Layer layer, size_t offset, size_t need,
          size_t have, uint32_t value = 0) {
  f.error.code = code;
  f.error.layer = layer;
  f.error.offset = static_cast<uint32_t>(offset);
  f.error.need = static_cast<uint32_t>(need);
  f.error.have = static_cast<uint32_t>(have);
  f.error.value = value;
  return false;
}

void decode_ipv6(const uint8_t* p, Ipv6Header& h) {
  const uint32_t w = rd32(p);
  const uint8_t tc = static_cast<uint8_t>(w >> 20);
  h.dscp = tc >> 2;
  h.ecn = tc & 3;
  h.flow_label = w & 0xFFFFF;
  h.payload_length = rd16(p + 4);
  h.next_header = p[6];
  h.hop_limit = p[7];
  std::memcpy(h.src.data(), p + 8, 16);
  std::memcpy(h.dst.data(), p + 24, 16);
}

void encode_ipv6(uint8_t* p, const Ipv6Header& h) {
  const uint32_t tc = static_cast<uint32_t>((h.dscp & 0x3F) << 2 | (h.ecn & 3));
  const uint32_t w = 6u << 28 | tc << 20 | (h.flow_label & 0xFFFFF);
  wr16(p, w >> 16);
  wr16(p + 2, w);
  wr16(p + 4, h.payload_length);
  p[6] = h.next_header;
  p[7] = h.hop_limit;
  std::memcpy(p + 8, h.src.data(), 16);
  std::memcpy(p + 24, h.dst.data(), 16);
}

bool is_data(const OpcodeInfo* op) {
  return op && (op->kind == PacketKind::kMrcData);
}

}  // namespace

bool decode_bth(Bytes in, Bth& bth) {
  if (in.size() < kBthBytes) return false;
  const uint8_t* b = reinterpret_cast<const uint8_t*>(in.data());
  bth.opcode = b[0];
  bth.se = b[1] >> 7;
  bth.mig_req = (b[1] >> 6) & 1;
  bth.pad_count = (b[1] >> 4) & 3;
  bth.tver = b[1] & 0xF;
  bth.pkey = rd16(b + 2);
  bth.variant = b[4];
  bth.dest_qp = rd24(b + 5);
  bth.ack_req = b[8] >> 7;
  bth.rsvd_b8_6 = (b[8] >> 6) & 1;
  bth.rtx = (b[8] >> 5) & 1;
  bth.ts = (b[8] >> 4) & 1;
  bth.rsvd_b8_lo = b[8] & 0xF;
  bth.psn = rd24(b + 9);
  return true;
}

bool encode_bth(const Bth& b, MutBytes out) {
  if (out.size() < kBthBytes) return false;
  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  p[0] = b.opcode;
  p[1] = static_cast<uint8_t>((b.se ? 0x80 : 0) | (b.mig_req ? 0x40 : 0) | (b.pad_count & 3) << 4 |
                              (b.tver & 0xF));
  wr16(p + 2, b.pkey);
  p[4] = b.variant;
  wr24(p + 5, b.dest_qp);
  p[8] = static_cast<uint8_t>((b.ack_req ? 0x80 : 0) | (b.rsvd_b8_6 ? 0x40 : 0) |
                              (b.rtx ? 0x20 : 0) | (b.ts ? 0x10 : 0) | (b.rsvd_b8_lo & 0xF));
  wr24(p + 9, b.psn);
  return true;
}

uint32_t header_stack(const WireProfile& profile, const Bth& bth) {
  const OpcodeInfo* op = profile.opcode_info(bth.opcode);
  if (!op) return 0;
  return op->headers | (op->kind == PacketKind::kMrcData && bth.ts ? kHdrTseth : 0u);
}

std::string_view layer_name(Layer l) {
  switch (l) {
    case Layer::kFrame:
      return "frame";
    case Layer::kEthernet:
      return "Ethernet";
    case Layer::kVlan:
      return "VLAN";
    case Layer::kIpv4:
      return "IPv4";
    case Layer::kIpv6:
      return "IPv6";
    case Layer::kSrh:
      return "SRH";
    case Layer::kInnerIpv6:
      return "inner IPv6";
    case Layer::kUdp:
      return "UDP";
    case Layer::kBth:
      return "BTH";
    case Layer::kMeth:
      return "METH";
    case Layer::kTseth:
      return "TSETH";
    case Layer::kReth:
      return "RETH";
    case Layer::kImmDt:
      return "ImmDt";
    case Layer::kAeth:
      return "AETH";
    case Layer::kSeth:
      return "SETH";
    case Layer::kCcState:
      return "CC_STATE";
    case Layer::kNeth:
      return "NETH";
    case Layer::kPeth:
      return "PETH";
    case Layer::kErth:
      return "ERTH";
    case Layer::kEeth:
      return "EETH";
    case Layer::kAtomicEth:
      return "AtomicETH";
    case Layer::kAtomicAckEth:
      return "AtomicAckETH";
    case Layer::kIeth:
      return "IETH";
    case Layer::kPayload:
      return "payload";
    case Layer::kIcrc:
      return "ICRC";
  }
  return "?";
}

std::string_view decode_error_name(DecodeErrorCode c) {
  switch (c) {
    case DecodeErrorCode::kOk:
      return "ok";
    case DecodeErrorCode::kTruncated:
      return "truncated";
    case DecodeErrorCode::kBadVersion:
      return "bad IP version";
    case DecodeErrorCode::kBadLength:
      return "bad length";
    case DecodeErrorCode::kBadHeaderLength:
      return "bad header length";
    case DecodeErrorCode::kUnknownOpcode:
      return "unknown opcode";
    case DecodeErrorCode::kBadPad:
      return "bad pad count";
    case DecodeErrorCode::kTooManySegments:
      return "too many SRH segments";
  }
  return "?";
}

std::string DecodeError::describe() const {
  const std::string at = std::string(layer_name(layer)) + " at offset " + std::to_string(offset);
  switch (code) {
    case DecodeErrorCode::kOk:
      return "ok";
    case DecodeErrorCode::kTruncated:
      return "truncated " + at + ": need " + std::to_string(need) + " bytes, have " +
             std::to_string(have);
    case DecodeErrorCode::kBadVersion:
      return "bad version " + std::to_string(value) + " in " + at;
    case DecodeErrorCode::kBadLength:
      return "bad length in " + at + ": length field says " + std::to_string(need) + " bytes, " +
             std::to_string(have) + " present";
    case DecodeErrorCode::kBadHeaderLength:
      return "bad header length " + std::to_string(value) + " in " + at;
    case DecodeErrorCode::kUnknownOpcode: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "0x%02X", value);
      return "unknown opcode " + std::string(buf) + " in " + at;
    }
    case DecodeErrorCode::kBadPad:
      return "pad count " + std::to_string(value) + " exceeds the payload in " + at;
    case DecodeErrorCode::kTooManySegments:
      return "SRH with " + std::to_string(value) + " segments (max " +
             std::to_string(kMaxSrhSegments) + ") in " + at;
  }
  return "?";
}

static Layer layer_of(HeaderBit h) {
  switch (h) {
    case kHdrMeth:
      return Layer::kMeth;
    case kHdrTseth:
      return Layer::kTseth;
    case kHdrReth:
      return Layer::kReth;
    case kHdrImm:
      return Layer::kImmDt;
    case kHdrAeth:
      return Layer::kAeth;
    case kHdrSeth:
      return Layer::kSeth;
    case kHdrCcState:
      return Layer::kCcState;
    case kHdrNeth:
      return Layer::kNeth;
    case kHdrPeth:
      return Layer::kPeth;
    case kHdrErth:
      return Layer::kErth;
    case kHdrEeth:
      return Layer::kEeth;
    case kHdrAtomicEth:
      return Layer::kAtomicEth;
    case kHdrAtomicAckEth:
      return Layer::kAtomicAckEth;
    case kHdrIeth:
      return Layer::kIeth;
  }
  return Layer::kFrame;
}

DecodeLayout::DecodeLayout(const WireProfile& p) : profile(&p) {
  const std::span<const HeaderBit> order = p.header_order();
  if (order.size() > kMaxHeaders) return;
  for (unsigned opcode = 0; opcode < 256; ++opcode) {
    const OpcodeInfo* op = p.opcode_info(static_cast<uint8_t>(opcode));
    ops[opcode] = op;
    if (!op) continue;
    for (int ts = 0; ts < 2; ++ts) {
      // What decode_frame()'s walk of header_order() finds for this opcode (header_stack()).
      const uint32_t stack =
          op->headers | (op->kind == PacketKind::kMrcData && ts ? kHdrTseth : 0u);
      Stack& st = stacks[opcode][static_cast<size_t>(ts)];
      for (HeaderBit h : order) {
        if (!(stack & h)) continue;
        const size_t sz = p.header_size(h);
        if (sz > 0xFF) return;  // not usable: the walk asks the profile
        st.bits[st.n] = h;
        st.bytes[st.n] = static_cast<uint8_t>(sz);
        ++st.n;
      }
    }
  }
  for (uint16_t port : p.params().udp_ports) roce_ports[port >> 6] |= uint64_t{1} << (port & 63);
  dscp = &p.dscp();
  usable = true;
}

bool decode_frame(Bytes frame, DecodedFrame& f, const DecodeOptions& opts,
                  const WireProfile& profile) {
  const DecodeLayout* layout = opts.layout ? opts.layout->for_profile(profile) : nullptr;
  // Reset presence state only; values of absent headers are never read.
  f.frame = frame;
  f.error = DecodeError{};
  f.has_eth = false;
  f.l3 = 0;
  f.has_srh = false;
  f.has_inner_ip6 = false;
  f.has_udp = false;
  f.roce = false;
  f.op = nullptr;
  f.headers = 0;
  f.payload = {};
  f.pad_bytes = 0;
  f.pad_data = {};
  f.trailer = {};
  f.has_icrc = false;
  f.icrc_checked = false;
  f.icrc_ok = false;
  f.trimmed = false;
  f.off_l3 = f.off_srh = f.off_inner = f.off_udp = f.off_bth = f.off_payload = 0xFFFF;
  f.ip4.options = {};
  f.srh.tlvs = {};

  const uint8_t* p = reinterpret_cast<const uint8_t*>(frame.data());
  const size_t n = frame.size();
  if (n > 0xFFFF) return fail(f, DecodeErrorCode::kBadLength, Layer::kFrame, 0, 0xFFFF, n);
  size_t off = 0;
  uint16_t ethertype = 0;

  if (opts.link == LinkType::kEthernet) {
    if (n < 14) return fail(f, DecodeErrorCode::kTruncated, Layer::kEthernet, 0, 14, n);
    f.has_eth = true;
    std::memcpy(f.eth.dst.data(), p, 6);
    std::memcpy(f.eth.src.data(), p + 6, 6);
    ethertype = rd16(p + 12);
    off = 14;
    f.eth.has_vlan = false;
    if (ethertype == kEtherTypeVlan) {
      if (n < 18) return fail(f, DecodeErrorCode::kTruncated, Layer::kVlan, 14, 4, n - 14);
      f.eth.has_vlan = true;
      f.eth.vlan_tci = rd16(p + 14);
      ethertype = rd16(p + 16);
      off = 18;
    }
    f.eth.ethertype = ethertype;
  } else {
    if (n < 1) return fail(f, DecodeErrorCode::kTruncated, Layer::kFrame, 0, 1, 0);
    ethertype = (p[0] >> 4) == 4 ? kEtherTypeIpv4 : kEtherTypeIpv6;
  }

  size_t ip_end = n;  // end of the outer IP packet
  uint8_t next = 0;   // protocol after the current header
  if (ethertype == kEtherTypeIpv4) {
    f.off_l3 = static_cast<uint16_t>(off);
    if (n - off < 20) return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv4, off, 20, n - off);
    const uint8_t* ip = p + off;
    if ((ip[0] >> 4) != 4)
      return fail(f, DecodeErrorCode::kBadVersion, Layer::kIpv4, off, 0, 0, ip[0] >> 4);
    Ipv4Header& h = f.ip4;
    h.ihl = ip[0] & 0xF;
    if (h.ihl < 5)
      return fail(f, DecodeErrorCode::kBadHeaderLength, Layer::kIpv4, off, 0, 0, h.ihl);
    const size_t hl = static_cast<size_t>(h.ihl) * 4;
    if (n - off < hl) return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv4, off, hl, n - off);
    h.dscp = ip[1] >> 2;
    h.ecn = ip[1] & 3;
    h.total_length = rd16(ip + 2);
    h.id = rd16(ip + 4);
    h.flags_frag = rd16(ip + 6);
    h.ttl = ip[8];
    h.protocol = ip[9];
    h.checksum = rd16(ip + 10);
    std::memcpy(h.src.data(), ip + 12, 4);
    std::memcpy(h.dst.data(), ip + 16, 4);
    h.options = Bytes(frame.data() + off + 20, hl - 20);
    f.l3 = 4;
    if (h.total_length < hl)
      return fail(f, DecodeErrorCode::kBadLength, Layer::kIpv4, off, h.total_length, hl);
    if (h.total_length > n - off)
      return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv4, off, h.total_length, n - off);
    ip_end = off + h.total_length;
    f.trailer = Bytes(frame.data() + ip_end, n - ip_end);
    off += hl;
    // A fragment carries no complete UDP datagram: list it as IP and stop.
    if ((h.flags_frag & 0x3FFF) != 0) {
      f.payload = Bytes(frame.data() + off, ip_end - off);
      return true;
    }
    next = h.protocol;
  } else if (ethertype == kEtherTypeIpv6) {
    f.off_l3 = static_cast<uint16_t>(off);
    if (n - off < 40) return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv6, off, 40, n - off);
    if ((p[off] >> 4) != 6)
      return fail(f, DecodeErrorCode::kBadVersion, Layer::kIpv6, off, 0, 0, p[off] >> 4);
    decode_ipv6(p + off, f.ip6);
    f.l3 = 6;
    if (f.ip6.payload_length > n - off - 40)
      return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv6, off, 40 + f.ip6.payload_length,
                  n - off);
    ip_end = off + 40 + f.ip6.payload_length;
    f.trailer = Bytes(frame.data() + ip_end, n - ip_end);
    next = f.ip6.next_header;
    off += 40;
    // Extension headers: hop-by-hop and destination options are skipped, a routing header is
    // decoded (SRH), IPv6-in-IPv6 descends once into the inner header (SRv6 mode).
    for (int guard = 0; guard < 8; ++guard) {
      if (next == 0 || next == 60) {
        if (ip_end - off < 8)
          return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv6, off, 8, ip_end - off);
        const size_t len = (static_cast<size_t>(p[off + 1]) + 1) * 8;
        if (ip_end - off < len)
          return fail(f, DecodeErrorCode::kTruncated, Layer::kIpv6, off, len, ip_end - off);
        next = p[off];
        off += len;
      } else if (next == kIpProtoRouting && !f.has_srh && !f.has_inner_ip6) {
        f.off_srh = static_cast<uint16_t>(off);
        if (ip_end - off < 8)
          return fail(f, DecodeErrorCode::kTruncated, Layer::kSrh, off, 8, ip_end - off);
        const uint8_t* r = p + off;
        Srh& s = f.srh;
        s.next_header = r[0];
        s.hdr_ext_len = r[1];
        s.routing_type = r[2];
        s.segments_left = r[3];
        s.last_entry = r[4];
        s.flags = r[5];
        s.tag = rd16(r + 6);
        const size_t len = (static_cast<size_t>(s.hdr_ext_len) + 1) * 8;
        if (ip_end - off < len)
          return fail(f, DecodeErrorCode::kTruncated, Layer::kSrh, off, len, ip_end - off);
        s.segment_count = 0;
        if (s.routing_type == kSrhRoutingType) {
          const size_t count = static_cast<size_t>(s.last_entry) + 1;
          if (count > kMaxSrhSegments)
            return fail(f, DecodeErrorCode::kTooManySegments, Layer::kSrh, off, 0, 0,
                        static_cast<uint32_t>(count));
          if (8 + 16 * count > len)
            return fail(f, DecodeErrorCode::kBadHeaderLength, Layer::kSrh, off, 8 + 16 * count, len,
                        s.hdr_ext_len);
          for (size_t i = 0; i < count; ++i) std::memcpy(s.segments[i].data(), r + 8 + 16 * i, 16);
          s.segment_count = static_cast<uint8_t>(count);
          s.tlvs = Bytes(frame.data() + off + 8 + 16 * count, len - 8 - 16 * count);
        } else {
          s.tlvs = Bytes(frame.data() + off + 8, len - 8);
        }
        f.has_srh = true;
        next = s.next_header;
        off += len;
      } else if (next == kIpProtoIpv6 && !f.has_inner_ip6) {
        f.off_inner = static_cast<uint16_t>(off);
        if (ip_end - off < 40)
          return fail(f, DecodeErrorCode::kTruncated, Layer::kInnerIpv6, off, 40, ip_end - off);
        if ((p[off] >> 4) != 6)
          return fail(f, DecodeErrorCode::kBadVersion, Layer::kInnerIpv6, off, 0, 0, p[off] >> 4);
        decode_ipv6(p + off, f.inner_ip6);
        f.has_inner_ip6 = true;
        if (f.inner_ip6.payload_length != ip_end - off - 40)
          return fail(f, DecodeErrorCode::kBadLength, Layer::kInnerIpv6, off,
                      40 + f.inner_ip6.payload_length, ip_end - off);
        next = f.inner_ip6.next_header;
        off += 40;
      } else {
        break;
      }
    }
  } else {
    f.payload = Bytes(frame.data() + off, n - off);
    return true;  // not IP: listed, not an error
  }

  if (next != kIpProtoUdp) {
    f.payload = Bytes(frame.data() + off, ip_end - off);
    return true;
  }
  f.off_udp = static_cast<uint16_t>(off);
  if (ip_end - off < 8)
    return fail(f, DecodeErrorCode::kTruncated, Layer::kUdp, off, 8, ip_end - off);
  const uint8_t* u = p + off;
  f.udp.sport = rd16(u);
  f.udp.dport = rd16(u + 2);
  f.udp.length = rd16(u + 4);
  f.udp.checksum = rd16(u + 6);
  f.has_udp = true;
  if (f.udp.length < 8 || f.udp.length != ip_end - off)
    return fail(f, DecodeErrorCode::kBadLength, Layer::kUdp, off, f.udp.length, ip_end - off);
  const bool roce_port = opts.roce_port != 0 ? f.udp.dport == opts.roce_port
                         : layout            ? layout->is_roce_port(f.udp.dport)
                                             : profile.is_roce_port(f.udp.dport);
  if (!roce_port) {
    f.payload = Bytes(frame.data() + off + 8, f.udp.length - 8);
    return true;
  }

  // RoCE: BTH, extension headers, payload, pad, ICRC.
  const size_t udp_end = off + f.udp.length;
  off += 8;
  f.off_bth = static_cast<uint16_t>(off);
  if (udp_end - off < 12)
    return fail(f, DecodeErrorCode::kTruncated, Layer::kBth, off, 12, udp_end - off);
  decode_bth(Bytes(frame.data() + off, 12), f.bth);
  const Bth& bth = f.bth;
  f.roce = true;
  off += 12;

  f.op = layout ? layout->ops[bth.opcode] : profile.opcode_info(bth.opcode);
  if (!f.op) {
    // The headers are unknown, but the ICRC still sits at the end of the UDP payload: keep it
    // so that a mutant opcode can be judged (and crafted) on its ICRC too.
    if (udp_end - off >= kIcrcBytes) {
      const uint8_t* ic = p + udp_end - kIcrcBytes;
      f.icrc = static_cast<uint32_t>(ic[0]) | static_cast<uint32_t>(ic[1]) << 8 |
               static_cast<uint32_t>(ic[2]) << 16 | static_cast<uint32_t>(ic[3]) << 24;
      f.has_icrc = true;
      if (opts.verify_icrc) {
        f.icrc_checked = true;
        f.icrc_ok = verify_icrc(f);
      }
    }
    return fail(f, DecodeErrorCode::kUnknownOpcode, Layer::kBth, f.off_bth, 0, 0, bth.opcode);
  }

  const uint8_t dscp = f.dscp();
  const DscpPlan& plan = layout ? *layout->dscp : profile.dscp();
  f.trimmed = is_data(f.op) && (dscp == plan.trimmed || dscp == plan.trimmed_lasthop);
  // header_stack(profile, bth), with the opcode looked up once.
  const bool with_tseth = f.op->kind == PacketKind::kMrcData && bth.ts;
  const uint32_t stack = f.op->headers | (with_tseth ? kHdrTseth : 0u);
  // A trimmed packet has no ICRC: every byte after the BTH is headers or (cut) payload.
  const size_t body_end =
      f.trimmed ? udp_end : udp_end - std::min<size_t>(kIcrcBytes, udp_end - off);
  if (!f.trimmed && udp_end - off < kIcrcBytes)
    return fail(f, DecodeErrorCode::kTruncated, Layer::kIcrc, off, kIcrcBytes, udp_end - off);
  // In the profile's order, stopping after the last header present (data packets' headers come
  // first in MRP0's order): a branch per header of the order mispredicted as packet kinds
  // alternate.
  // One header of the stack: false when the walk ends there (the trim cut it, or `truncated`).
  // Inlined: it runs for every header of every frame.
  bool truncated = false;
  const auto take = [&](HeaderBit h, size_t sz) __attribute__((always_inline)) {
    if (body_end - off < sz) {
      truncated = !f.trimmed;  // else the trim cut here
      if (truncated) fail(f, DecodeErrorCode::kTruncated, layer_of(h), off, sz, body_end - off);
      return false;
    }
    profile.decode_header(h, Bytes(frame.data() + off, sz), f);
    f.headers |= h;
    off += sz;
    return true;
  };
  if (layout) {
    // The same walk, its headers and sizes read from the layout.
    const DecodeLayout::Stack& st = layout->stacks[bth.opcode][with_tseth ? 1 : 0];
    for (size_t i = 0; i < st.n; ++i)
      if (!take(st.bits[i], st.bytes[i])) break;
  } else {
    uint32_t left = stack;
    for (HeaderBit h : profile.header_order()) {
      if (left == 0) break;
      if (!(left & h)) continue;
      left &= ~static_cast<uint32_t>(h);
      if (!take(h, profile.header_size(h))) break;
    }
  }
  if (truncated) return false;
  f.off_payload = static_cast<uint16_t>(off);
  size_t payload_len = body_end - off;
  if (!f.trimmed) {
    if (bth.pad_count > payload_len)
      return fail(f, DecodeErrorCode::kBadPad, Layer::kPayload, off, bth.pad_count, payload_len,
                  bth.pad_count);
    f.pad_bytes = bth.pad_count;
    payload_len -= bth.pad_count;
    f.pad_data = Bytes(frame.data() + off + payload_len, bth.pad_count);
    const uint8_t* ic = p + body_end;
    f.icrc = static_cast<uint32_t>(ic[0]) | static_cast<uint32_t>(ic[1]) << 8 |
             static_cast<uint32_t>(ic[2]) << 16 | static_cast<uint32_t>(ic[3]) << 24;
    f.has_icrc = true;
  }
  f.payload = Bytes(frame.data() + off, payload_len);
  if (opts.verify_icrc && f.has_icrc) {
    f.icrc_checked = true;
    f.icrc_ok = verify_icrc(f);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Encode
// ---------------------------------------------------------------------------------------------
namespace {

uint32_t effective_stack(const FrameSpec& s, const WireProfile& profile) {
  if (s.headers) return s.headers;
  return header_stack(profile, s.bth);
}

size_t pad_of(const FrameSpec& s, const EncodeOptions& o) {
  if (s.trimmed) return 0;
  if (o.pad_payload) return (4 - s.payload.size() % 4) % 4;
  return s.pad_bytes;
}

size_t srh_len(const Srh& s) {
  return 8 + 16 * static_cast<size_t>(s.segment_count) + s.tlvs.size();
}

}  // namespace

size_t encoded_size(const FrameSpec& s, const EncodeOptions& o, const WireProfile& profile) {
  size_t n = s.has_eth ? (s.eth.has_vlan ? 18 : 14) : 0;
  if (s.l3 == 4) n += 20 + s.ip4.options.size();
  if (s.l3 == 6) n += 40;
  if (s.l3 == 6 && s.has_srh) n += srh_len(s.srh);
  if (s.l3 == 6 && s.has_inner_ip6) n += 40;
  if (s.l3 == 0) return n + s.payload.size();
  if (s.has_udp) n += 8;
  if (s.has_udp && s.roce) {
    n += 12;
    const uint32_t stack = effective_stack(s, profile);
    for (HeaderBit h : profile.header_order())
      if (stack & h) n += profile.header_size(h);
    n += s.payload.size() + pad_of(s, o) + (s.trimmed ? 0 : kIcrcBytes);
  } else {
    n += s.payload.size();
  }
  return n + s.trailer.size();
}

size_t encode_frame(const FrameSpec& s, MutBytes out, const EncodeOptions& o,
                    const WireProfile& profile, std::string* error) {
  auto err = [error](const char* what) -> size_t {
    if (error) *error = what;
    return 0;
  };
  if (s.l3 != 4 && s.l3 != 6 && !(s.l3 == 0 && s.has_eth && !s.has_udp))
    return err("l3 must be 4 or 6 (or 0 for a non-IP Ethernet frame)");
  if ((s.has_srh || s.has_inner_ip6) && s.l3 != 6) return err("SRH / IPv6-in-IPv6 need l3 = 6");
  if (s.has_srh && s.srh.segment_count > kMaxSrhSegments) return err("too many SRH segments");
  if (s.has_srh && s.srh.tlvs.size() % 8 != 0) return err("SRH TLVs must be a multiple of 8 bytes");
  if (s.roce && !s.has_udp) return err("a RoCE packet needs UDP");
  if (s.roce && !profile.opcode_info(s.bth.opcode)) return err("opcode not in the wire profile");
  if (s.l3 == 4 && s.ip4.options.size() % 4 != 0)
    return err("IPv4 options must be a multiple of 4 bytes");
  const size_t total = encoded_size(s, o, profile);
  if (total > out.size()) return err("output buffer too small");
  if (total > 0xFFFF) return err("frame larger than 65535 bytes");

  uint8_t* p = reinterpret_cast<uint8_t*>(out.data());
  size_t off = 0;
  if (s.has_eth) {
    std::memcpy(p, s.eth.dst.data(), 6);
    std::memcpy(p + 6, s.eth.src.data(), 6);
    off = 12;
    if (s.eth.has_vlan) {
      wr16(p + 12, kEtherTypeVlan);
      wr16(p + 14, s.eth.vlan_tci);
      off = 16;
    }
    const uint16_t et = o.fix_lengths && s.l3 != 0 ? (s.l3 == 4 ? kEtherTypeIpv4 : kEtherTypeIpv6)
                                                   : s.eth.ethertype;
    wr16(p + off, et);
    off += 2;
  }
  if (s.l3 == 0) {
    if (!s.payload.empty()) std::memcpy(p + off, s.payload.data(), s.payload.size());
    return off + s.payload.size();
  }
  const size_t l3_off = off;
  const size_t ip_end = total - s.trailer.size();
  if (s.l3 == 4) {
    const Ipv4Header& h = s.ip4;
    const size_t hl = 20 + h.options.size();
    p[off] = static_cast<uint8_t>(0x40 | (o.fix_lengths ? hl / 4 : h.ihl));
    p[off + 1] = static_cast<uint8_t>((h.dscp & 0x3F) << 2 | (h.ecn & 3));
    wr16(p + off + 2, o.fix_lengths ? static_cast<uint32_t>(ip_end - l3_off) : h.total_length);
    wr16(p + off + 4, h.id);
    wr16(p + off + 6, h.flags_frag);
    p[off + 8] = h.ttl;
    p[off + 9] = o.fix_lengths && s.has_udp ? kIpProtoUdp : h.protocol;
    wr16(p + off + 10, 0);
    std::memcpy(p + off + 12, h.src.data(), 4);
    std::memcpy(p + off + 16, h.dst.data(), 4);
    if (!h.options.empty()) std::memcpy(p + off + 20, h.options.data(), h.options.size());
    const uint16_t csum =
        o.fix_ip_checksum ? internet_checksum(Bytes(out.data() + off, hl)) : h.checksum;
    wr16(p + off + 10, csum);
    off += hl;
  } else {
    Ipv6Header h = s.ip6;
    if (o.fix_lengths) {
      h.payload_length = static_cast<uint16_t>(ip_end - l3_off - 40);
      h.next_header =
          s.has_srh ? kIpProtoRouting
                    : (s.has_inner_ip6 ? kIpProtoIpv6 : (s.has_udp ? kIpProtoUdp : h.next_header));
    }
    encode_ipv6(p + off, h);
    off += 40;
    if (s.has_srh) {
      const Srh& r = s.srh;
      p[off] = o.fix_lengths
                   ? (s.has_inner_ip6 ? kIpProtoIpv6 : (s.has_udp ? kIpProtoUdp : r.next_header))
                   : r.next_header;
      const size_t len = srh_len(r);
      p[off + 1] = o.fix_lengths ? static_cast<uint8_t>(len / 8 - 1) : r.hdr_ext_len;
      p[off + 2] = r.routing_type;
      p[off + 3] = r.segments_left;
      p[off + 4] = o.fix_lengths && r.segment_count ? static_cast<uint8_t>(r.segment_count - 1)
                                                    : r.last_entry;
      p[off + 5] = r.flags;
      wr16(p + off + 6, r.tag);
      for (size_t i = 0; i < r.segment_count; ++i)
        std::memcpy(p + off + 8 + 16 * i, r.segments[i].data(), 16);
      if (!r.tlvs.empty())
        std::memcpy(p + off + 8 + 16 * r.segment_count, r.tlvs.data(), r.tlvs.size());
      off += len;
    }
    if (s.has_inner_ip6) {
      Ipv6Header in = s.inner_ip6;
      if (o.fix_lengths) {
        in.payload_length = static_cast<uint16_t>(ip_end - off - 40);
        if (s.has_udp) in.next_header = kIpProtoUdp;
      }
      encode_ipv6(p + off, in);
      off += 40;
    }
  }

  if (s.has_udp) {
    const size_t udp_off = off;
    wr16(p + off, s.udp.sport);
    wr16(p + off + 2, s.udp.dport);
    wr16(p + off + 4, o.fix_lengths ? static_cast<uint32_t>(ip_end - udp_off) : s.udp.length);
    wr16(p + off + 6, o.udp_checksum == UdpChecksumPolicy::kAsIs ? s.udp.checksum : 0);
    off += 8;
    if (s.roce) {
      const Bth& b = s.bth;
      const size_t pad = pad_of(s, o);
      const uint8_t pad_count = static_cast<uint8_t>(o.fix_lengths ? pad : b.pad_count);
      Bth wire_bth = b;
      wire_bth.pad_count = pad_count;
      encode_bth(wire_bth, MutBytes(out.data() + off, 12));
      off += 12;
      const uint32_t stack = effective_stack(s, profile);
      for (HeaderBit h : profile.header_order()) {
        if (!(stack & h)) continue;
        const size_t sz = profile.header_size(h);
        profile.encode_header(h, s, MutBytes(out.data() + off, sz));
        off += sz;
      }
      if (!s.payload.empty()) std::memcpy(p + off, s.payload.data(), s.payload.size());
      off += s.payload.size();
      if (pad) {
        if (!o.pad_payload && s.pad_data.size() == pad)
          std::memcpy(p + off, s.pad_data.data(), pad);
        else
          std::memset(p + off, 0, pad);
        off += pad;
      }
      if (!s.trimmed) {
        const uint32_t v = s.icrc;
        for (int i = 0; i < 4; ++i)
          p[off + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
        off += kIcrcBytes;
      }
    } else if (!s.payload.empty()) {
      std::memcpy(p + off, s.payload.data(), s.payload.size());
      off += s.payload.size();
    }
  } else if (!s.payload.empty()) {
    // IP payload that is not UDP (or an IPv4 fragment): carried as is.
    std::memcpy(p + off, s.payload.data(), s.payload.size());
    off += s.payload.size();
  }
  if (!s.trailer.empty()) std::memcpy(p + off, s.trailer.data(), s.trailer.size());
  off += s.trailer.size();

  // Checksums that cover what was just written: decode the frame back to locate its layers.
  if (s.has_udp &&
      (o.udp_checksum == UdpChecksumPolicy::kCompute || (s.roce && o.fix_icrc && !s.trimmed))) {
    DecodedFrame d;
    DecodeOptions dopts;
    dopts.link = s.has_eth ? LinkType::kEthernet : LinkType::kRawIp;
    dopts.roce_port = s.udp.dport;
    decode_frame(Bytes(out.data(), off), d, dopts, profile);
    if (s.roce && o.fix_icrc && !s.trimmed && !fix_icrc(MutBytes(out.data(), off), d))
      return err("could not place the ICRC");
    if (o.udp_checksum == UdpChecksumPolicy::kCompute &&
        !fix_udp_checksum(MutBytes(out.data(), off), d, o.udp_checksum))
      return err("could not compute the UDP checksum");
  }
  return off;
}

std::vector<std::byte> encode_frame(const FrameSpec& spec, const EncodeOptions& opts,
                                    const WireProfile& profile) {
  std::vector<std::byte> out(encoded_size(spec, opts, profile));
  const size_t n = encode_frame(spec, MutBytes(out.data(), out.size()), opts, profile);
  out.resize(n);
  return out;
}

// ---------------------------------------------------------------------------------------------
// In-place rewrites
// ---------------------------------------------------------------------------------------------
bool restamp_wev(MutBytes frame, DecodedFrame& f, EvFormat format, EvStripe stripe, uint32_t wev) {
  if (frame.data() != f.frame.data() || !f.has_udp) return false;
  uint8_t* p = reinterpret_cast<uint8_t*>(frame.data());
  const EvCarriage c = carry_wev(format, stripe, wev);
  wr16(p + f.off_udp, c.sport);
  f.udp.sport = c.sport;
  auto set_fl = [p](size_t off, Ipv6Header& h, uint32_t fl) {
    p[off + 1] = static_cast<uint8_t>((p[off + 1] & 0xF0) | ((fl >> 16) & 0x0F));
    wr16(p + off + 2, fl & 0xFFFF);
    h.flow_label = fl & 0xFFFFF;
  };
  if (f.l3 == 6) set_fl(f.off_l3, f.ip6, c.flow_label);
  if (f.has_inner_ip6) set_fl(f.off_inner, f.inner_ip6, c.flow_label);
  // The source port is covered by the ICRC and the UDP checksum; the flow label is not. The
  // UDP checksum also covers the ICRC, so the ICRC is fixed first.
  if (f.roce && f.has_icrc) {
    fix_icrc(frame, f);
    const uint8_t* ic = p + f.off_udp + f.udp.length - kIcrcBytes;
    f.icrc = static_cast<uint32_t>(ic[0]) | static_cast<uint32_t>(ic[1]) << 8 |
             static_cast<uint32_t>(ic[2]) << 16 | static_cast<uint32_t>(ic[3]) << 24;
  }
  if (f.udp.checksum != 0) {
    fix_udp_checksum(frame, f, UdpChecksumPolicy::kCompute);
    f.udp.checksum = rd16(p + f.off_udp + 6);
  }
  return true;
}

bool rewrite_dscp_ecn(MutBytes frame, DecodedFrame& f, std::optional<uint8_t> dscp,
                      std::optional<uint8_t> ecn) {
  if (frame.data() != f.frame.data() || f.l3 == 0) return false;
  uint8_t* p = reinterpret_cast<uint8_t*>(frame.data());
  auto tc_of = [&](uint8_t old_dscp, uint8_t old_ecn) {
    return static_cast<uint8_t>((dscp.value_or(old_dscp) & 0x3F) << 2 |
                                (ecn.value_or(old_ecn) & 3));
  };
  auto set_v6 = [&](size_t off, Ipv6Header& h) {
    const uint8_t tc = tc_of(h.dscp, h.ecn);
    p[off] = static_cast<uint8_t>(0x60 | tc >> 4);
    p[off + 1] = static_cast<uint8_t>((tc & 0x0F) << 4 | (p[off + 1] & 0x0F));
    h.dscp = tc >> 2;
    h.ecn = tc & 3;
  };
  if (f.l3 == 4) {
    const uint8_t tos = tc_of(f.ip4.dscp, f.ip4.ecn);
    p[f.off_l3 + 1] = tos;
    f.ip4.dscp = tos >> 2;
    f.ip4.ecn = tos & 3;
    const size_t hl = static_cast<size_t>(f.ip4.ihl) * 4;
    wr16(p + f.off_l3 + 10, 0);
    const uint16_t c = internet_checksum(Bytes(frame.data() + f.off_l3, hl));
    wr16(p + f.off_l3 + 10, c);
    f.ip4.checksum = c;
  } else {
    set_v6(f.off_l3, f.ip6);
    if (f.has_inner_ip6) set_v6(f.off_inner, f.inner_ip6);
  }
  return true;  // TOS/TC are masked in the ICRC: no ICRC change
}

size_t trim_frame(MutBytes frame, const DecodedFrame& f, uint8_t dscp, const WireProfile& profile,
                  std::string* error) {
  auto fail_with = [error](const char* why) -> size_t {
    if (error) *error = why;
    return 0;
  };
  if (frame.data() != f.frame.data())
    return fail_with("trim: the decoded frame is not this buffer");
  if (f.error || !f.roce || !f.op || f.op->kind != PacketKind::kMrcData)
    return fail_with("trim: not an MRC data packet");
  if (f.trimmed) return fail_with("trim: already trimmed");
  const size_t cut = size_t{f.off_bth} + profile.min_trim_bytes();
  const size_t ip_end = size_t{f.off_udp} + f.udp.length;
  if (cut >= ip_end) return fail_with("trim: packet is not longer than the trimmed size");
  uint8_t* p = reinterpret_cast<uint8_t*>(frame.data());
  wr16(p + f.off_udp + 4, static_cast<uint32_t>(cut - f.off_udp));
  if (f.l3 == 4) {
    wr16(p + f.off_l3 + 2, static_cast<uint32_t>(cut - f.off_l3));
  } else {
    wr16(p + f.off_l3 + 4, static_cast<uint32_t>(cut - f.off_l3 - 40));
    if (f.has_inner_ip6) wr16(p + f.off_inner + 4, static_cast<uint32_t>(cut - f.off_inner - 40));
  }
  // Offsets are unchanged by the cut, so the decoded view still locates the headers; the DSCP
  // rewrite also redoes the IPv4 checksum over the new total length.
  DecodedFrame g = f;
  g.frame = Bytes(frame.data(), cut);
  rewrite_dscp_ecn(MutBytes(frame.data(), cut), g, dscp, std::nullopt);
  if (f.udp.checksum != 0) {
    DecodedFrame h;
    DecodeOptions o;
    o.link = f.has_eth ? LinkType::kEthernet : LinkType::kRawIp;
    o.roce_port = f.udp.dport;
    decode_frame(Bytes(frame.data(), cut), h, o, profile);
    fix_udp_checksum(MutBytes(frame.data(), cut), h, UdpChecksumPolicy::kCompute);
  }
  return cut;
}

uint32_t wev_of(const DecodedFrame& f, EvFormat format, EvStripe stripe) {
  const Ipv6Header* ip = f.roce_ip6();
  return wev_from_carriage(format, stripe, f.udp.sport, ip ? ip->flow_label : 0);
}

}  // namespace mrc::wire
