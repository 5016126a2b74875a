#include "wire/tins/tins.h"

#include <gtest/gtest.h>
#include <tins/ethernetII.h>
#include <tins/exceptions.h>
#include <tins/ip.h>
#include <tins/ipv6.h>
#include <tins/rawpdu.h>
#include <tins/udp.h>

#include <functional>
#include <ostream>
#include <set>
#include <stdexcept>
#include <tuple>
#include <typeinfo>

#include "wire/samples.h"

namespace mrc::wire::samples {
// Readable parameters in gtest output (found by argument-dependent lookup).
void PrintTo(Carrier c, std::ostream* os) {
  *os << carrier_name(c);
}
}  // namespace mrc::wire::samples

namespace mrc::tins {
namespace {

namespace w = mrc::wire;
using w::samples::Carrier;

// ---------------------------------------------------------------------------------------------
// Field-wise views of the wire structs, so EXPECT_EQ names the header that differs.
// ---------------------------------------------------------------------------------------------
auto fields(const w::Bth& b) {
  return std::tie(b.opcode, b.se, b.mig_req, b.pad_count, b.tver, b.pkey, b.variant, b.dest_qp,
                  b.ack_req, b.rsvd_b8_6, b.rtx, b.ts, b.rsvd_b8_lo, b.psn);
}
auto fields(const w::Meth& m) {
  return std::tie(m.rqmsn, m.msn);
}
auto fields(const w::Tseth& t) {
  return std::tie(t.ts16, t.tsr, t.reserved, t.ftype);
}
auto fields(const w::Reth& r) {
  return std::tie(r.va, r.rkey, r.dma_len);
}
auto fields(const w::ImmDt& i) {
  return std::tie(i.imm);
}
auto fields(const w::Aeth& a) {
  return std::tie(a.syndrome, a.msn);
}
auto fields(const w::Seth& s) {
  return std::tie(s.byte0, s.m, s.pr, s.rsvd_b1, s.ack_psn_offset, s.entropy, s.spdcid, s.dpdcid,
                  s.port_status, s.cack_psn, s.cc_type, s.psv, s.sva, s.cc_flags_rsvd, s.mpr,
                  s.sack_offset, s.sack_bitmap);
}
auto fields(const w::CcState& c) {
  return std::tie(c.ts_echo, c.rsvd_bit, c.ooo_count, c.rc, c.rcv_cwnd_pen, c.rcvd_bytes);
}
auto fields(const w::Neth& n) {
  return std::tie(n.reserved0, n.nack_code, n.vendor_code, n.entropy, n.spdcid, n.dpdcid,
                  n.reserved12, n.nack_psn, n.cc_type, n.psv, n.sva, n.cc_flags_rsvd, n.m,
                  n.reserved17, n.ts_echo);
}
auto fields(const w::Peth& p) {
  return std::tie(p.reserved0, p.vendor, p.probe_id, p.reserved6, p.spdcid, p.dpdcid, p.ts16, p.tsr,
                  p.reserved_tsr, p.ftype);
}
auto fields(const w::Erth& e) {
  return std::tie(e.reserved0, e.rsvd_b1, e.op, e.reserved2, e.vendor, e.port_status_mask,
                  e.reserved8, e.ts16, e.tsr, e.reserved_tsr, e.ftype);
}
auto fields(const w::Eeth& e) {
  return std::tie(e.reserved0, e.rsvd_b1, e.op, e.sva, e.status, e.vendor, e.entropy,
                  e.port_status_mask, e.reserved12, e.ts_echo, e.svc_time, e.reserved32);
}
auto fields(const w::Ipv6Header& h) {
  return std::tie(h.dscp, h.ecn, h.flow_label, h.next_header, h.hop_limit, h.src, h.dst);
}

std::vector<uint8_t> to_u8(w::Bytes b) {
  const auto* p = reinterpret_cast<const uint8_t*>(b.data());
  return {p, p + b.size()};
}

// Offsets where two frames differ (and every offset past the shorter one).
std::vector<size_t> diff_offsets(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  std::vector<size_t> out;
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    if (i >= a.size() || i >= b.size() || a[i] != b[i]) out.push_back(i);
  return out;
}

::testing::AssertionResult same_bytes(const std::vector<std::byte>& got,
                                      const std::vector<std::byte>& want) {
  const auto d = diff_offsets(got, want);
  if (d.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "frames differ: " << got.size() << " vs " << want.size() << " bytes, " << d.size()
         << " offsets differ, first at " << d.front();
}

// ---------------------------------------------------------------------------------------------
// Crafting with libtins from a FrameSpec: outer layers with libtins' own PDUs, the MRC stack
// with ours, every field through its setter.
// ---------------------------------------------------------------------------------------------
Tins::IPv6 ipv6_of(const w::Ipv6Header& h) {
  Tins::IPv6 ip(Tins::IPv6Address(h.dst.data()), Tins::IPv6Address(h.src.data()));
  ip.traffic_class(static_cast<uint8_t>(h.dscp << 2 | h.ecn));
  ip.flow_label(h.flow_label);
  ip.hop_limit(h.hop_limit);
  return ip;
}

Tins::EthernetII craft_outer(const w::FrameSpec& s) {
  Tins::EthernetII eth(Tins::HWAddress<6>(s.eth.dst.data()), Tins::HWAddress<6>(s.eth.src.data()));
  const Tins::UDP udp(s.udp.dport, s.udp.sport);
  if (s.l3 == 4) {
    Tins::IP ip(Tins::IPv4Address(w::format_ipv4(s.ip4.dst)),
                Tins::IPv4Address(w::format_ipv4(s.ip4.src)));
    ip.tos(static_cast<uint8_t>(s.ip4.dscp << 2 | s.ip4.ecn));
    ip.id(s.ip4.id);
    ip.flags(static_cast<Tins::IP::Flags>(s.ip4.flags_frag >> 13));
    ip.fragment_offset(s.ip4.flags_frag & 0x1FFF);
    ip.ttl(s.ip4.ttl);
    return eth / ip / udp;
  }
  Tins::IPv6 outer = ipv6_of(s.ip6);
  if (s.has_srh) {
    // libtins 4.0 has no SRH type: the routing header goes in as raw extension-header data
    // (RFC 8754, after the next-header and length bytes that libtins writes itself).
    std::vector<uint8_t> d = {s.srh.routing_type,
                              s.srh.segments_left,
                              static_cast<uint8_t>(s.srh.segment_count - 1),
                              s.srh.flags,
                              static_cast<uint8_t>(s.srh.tag >> 8),
                              static_cast<uint8_t>(s.srh.tag)};
    for (size_t i = 0; i < s.srh.segment_count; ++i)
      d.insert(d.end(), s.srh.segments[i].begin(), s.srh.segments[i].end());
    outer.add_header(Tins::IPv6::ext_header(Tins::IPv6::ROUTING, d.size(), d.data()));
  }
  if (s.has_inner_ip6) return eth / outer / ipv6_of(s.inner_ip6) / udp;
  return eth / outer / udp;
}

Bth make_pdu(const w::Bth& v) {
  Bth p;
  p.opcode(v.opcode);
  p.se(v.se);
  p.mig_req(v.mig_req);
  p.tver(v.tver);
  p.pkey(v.pkey);
  p.variant(v.variant);
  p.dest_qp(v.dest_qp);
  p.ack_req(v.ack_req);
  p.rsvd_b8_6(v.rsvd_b8_6);
  p.rtx(v.rtx);
  p.ts(v.ts);
  p.rsvd_b8_lo(v.rsvd_b8_lo);
  p.psn(v.psn);
  return p;  // pad_count: serialize() sets it from the payload
}
Meth make_pdu(const w::Meth& v) {
  Meth p;
  p.rqmsn(v.rqmsn);
  p.msn(v.msn);
  return p;
}
Tseth make_pdu(const w::Tseth& v) {
  Tseth p;
  p.ts16(v.ts16);
  p.tsr(v.tsr);
  p.reserved(v.reserved);
  p.ftype(v.ftype);
  return p;
}
Reth make_pdu(const w::Reth& v) {
  Reth p;
  p.va(v.va);
  p.rkey(v.rkey);
  p.dma_len(v.dma_len);
  return p;
}
ImmDt make_pdu(const w::ImmDt& v) {
  ImmDt p;
  p.imm(v.imm);
  return p;
}
Aeth make_pdu(const w::Aeth& v) {
  Aeth p;
  p.syndrome(v.syndrome);
  p.msn(v.msn);
  return p;
}
Seth make_pdu(const w::Seth& v) {
  Seth p;
  p.byte0(v.byte0);
  p.m(v.m);
  p.pr(v.pr);
  p.rsvd_b1(v.rsvd_b1);
  p.ack_psn_offset(v.ack_psn_offset);
  p.entropy(v.entropy);
  p.spdcid(v.spdcid);
  p.dpdcid(v.dpdcid);
  p.port_status(v.port_status);
  p.cack_psn(v.cack_psn);
  p.cc_type(v.cc_type);
  p.psv(v.psv);
  p.sva(v.sva);
  p.cc_flags_rsvd(v.cc_flags_rsvd);
  p.mpr(v.mpr);
  p.sack_offset(v.sack_offset);
  p.sack_bitmap(v.sack_bitmap);
  return p;
}
CcState make_pdu(const w::CcState& v) {
  CcState p;
  p.ts_echo(v.ts_echo);
  p.rsvd_bit(v.rsvd_bit);
  p.ooo_count(v.ooo_count);
  p.rc(v.rc);
  p.rcv_cwnd_pen(v.rcv_cwnd_pen);
  p.rcvd_bytes(v.rcvd_bytes);
  return p;
}
Neth make_pdu(const w::Neth& v) {
  Neth p;
  p.reserved0(v.reserved0);
  p.nack_code(v.nack_code);
  p.vendor_code(v.vendor_code);
  p.entropy(v.entropy);
  p.spdcid(v.spdcid);
  p.dpdcid(v.dpdcid);
  p.reserved12(v.reserved12);
  p.nack_psn(v.nack_psn);
  p.cc_type(v.cc_type);
  p.psv(v.psv);
  p.sva(v.sva);
  p.cc_flags_rsvd(v.cc_flags_rsvd);
  p.m(v.m);
  p.reserved17(v.reserved17);
  p.ts_echo(v.ts_echo);
  return p;
}
Peth make_pdu(const w::Peth& v) {
  Peth p;
  p.reserved0(v.reserved0);
  p.vendor(v.vendor);
  p.probe_id(v.probe_id);
  p.reserved6(v.reserved6);
  p.spdcid(v.spdcid);
  p.dpdcid(v.dpdcid);
  p.ts16(v.ts16);
  p.tsr(v.tsr);
  p.reserved_tsr(v.reserved_tsr);
  p.ftype(v.ftype);
  return p;
}
Erth make_pdu(const w::Erth& v) {
  Erth p;
  p.reserved0(v.reserved0);
  p.rsvd_b1(v.rsvd_b1);
  p.op(v.op);
  p.reserved2(v.reserved2);
  p.vendor(v.vendor);
  p.port_status_mask(v.port_status_mask);
  p.reserved8(v.reserved8);
  p.ts16(v.ts16);
  p.tsr(v.tsr);
  p.reserved_tsr(v.reserved_tsr);
  p.ftype(v.ftype);
  return p;
}
Eeth make_pdu(const w::Eeth& v) {
  Eeth p;
  p.reserved0(v.reserved0);
  p.rsvd_b1(v.rsvd_b1);
  p.op(v.op);
  p.sva(v.sva);
  p.status(v.status);
  p.vendor(v.vendor);
  p.entropy(v.entropy);
  p.port_status_mask(v.port_status_mask);
  p.reserved12(v.reserved12);
  p.ts_echo(v.ts_echo);
  p.svc_time(v.svc_time);
  p.reserved32(v.reserved32);
  return p;
}

// The extension headers a spec carries: explicit, or the opcode's stack (+TSETH on data, TS=1).
uint32_t stack_of(const w::FrameSpec& s) {
  return s.headers ? s.headers : w::header_stack(w::mrp0(), s.bth);
}

Tins::EthernetII craft(const w::FrameSpec& s) {
  Tins::EthernetII pkt = craft_outer(s);
  pkt /= make_pdu(s.bth);
  const uint32_t stack = stack_of(s);
  for (w::HeaderBit bit : w::mrp0().header_order()) {
    if (!(stack & bit)) continue;
    switch (bit) {
      case w::kHdrMeth:
        pkt /= make_pdu(s.meth);
        break;
      case w::kHdrTseth:
        pkt /= make_pdu(s.tseth);
        break;
      case w::kHdrReth:
        pkt /= make_pdu(s.reth);
        break;
      case w::kHdrImm:
        pkt /= make_pdu(s.immdt);
        break;
      case w::kHdrAeth:
        pkt /= make_pdu(s.aeth);
        break;
      case w::kHdrSeth:
        pkt /= make_pdu(s.seth);
        break;
      case w::kHdrCcState:
        pkt /= make_pdu(s.cc_state);
        break;
      case w::kHdrNeth:
        pkt /= make_pdu(s.neth);
        break;
      case w::kHdrPeth:
        pkt /= make_pdu(s.peth);
        break;
      case w::kHdrErth:
        pkt /= make_pdu(s.erth);
        break;
      case w::kHdrEeth:
        pkt /= make_pdu(s.eeth);
        break;
      default:
        ADD_FAILURE() << "no PDU for header bit " << bit;
    }
  }
  if (!s.payload.empty()) pkt /= Tins::RawPDU(to_u8(s.payload));
  return pkt;
}

// ---------------------------------------------------------------------------------------------
// One case per MRP0 packet type, with distinctive values in every field the type carries.
// ---------------------------------------------------------------------------------------------
struct Case {
  std::string name;
  std::function<void(w::FrameSpec&)> fill;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

const w::DscpPlan& plan() {
  return w::mrp0().dscp();
}

void set_dscp(w::FrameSpec& s, uint8_t dscp, uint8_t ecn = 0) {
  s.ip4.dscp = s.ip6.dscp = s.inner_ip6.dscp = dscp;
  s.ip4.ecn = s.ip6.ecn = s.inner_ip6.ecn = ecn;
}

w::Bytes payload(size_t len, uint8_t seed) {
  const auto& v = w::samples::pattern(len, seed);
  return {v.data(), v.size()};
}

void data(w::FrameSpec& s, uint8_t opcode, size_t len) {
  set_dscp(s, plan().trimmable, 2);
  s.bth.opcode = opcode;
  s.bth.dest_qp = 0x00A022;
  s.bth.psn = 0xABCDE1;
  s.bth.ts = true;
  s.bth.pkey = 0xFFFF;
  s.meth = {0x0103, 0x0229};
  s.tseth = {0x1234, true, 0, 1};
  s.reth = {0x00007f0000100000ull, 0xabc001, 3067};
  s.immdt.imm = 0xdeadbeef;
  s.payload = payload(len, opcode);
}

void control(w::FrameSpec& s, uint8_t opcode) {
  set_dscp(s, plan().control);
  s.bth.opcode = opcode;
  s.bth.dest_qp = 0x000011;
  s.bth.psn = 0x0203E9;
}

std::vector<Case> cases() {
  return {
      {"WRITE_FIRST", [](w::FrameSpec& s) { data(s, 0xC6, 1024); }},
      {"WRITE_MIDDLE_retransmission",
       [](w::FrameSpec& s) {
         data(s, 0xC7, 1024);
         s.bth.rtx = true;
         set_dscp(s, plan().trimmable_retx, 1);
       }},
      {"WRITE_LAST_no_TSETH",
       [](w::FrameSpec& s) {
         data(s, 0xC8, 1019);  // pad 1
         s.bth.ts = false;
         s.bth.ack_req = true;
       }},
      {"WRITE_LAST_IMM",
       [](w::FrameSpec& s) {
         data(s, 0xC9, 13);  // pad 3
         s.bth.ack_req = true;
         s.bth.se = true;
       }},
      {"WRITE_ONLY",
       [](w::FrameSpec& s) {
         data(s, 0xCA, 77);  // pad 3
         s.reth.dma_len = 77;
         s.bth.ack_req = true;
         s.bth.variant = 0xC0;  // FECN/BECN region: masked in the ICRC, carried as set
       }},
      {"WRITE_ONLY_zero_length",
       [](w::FrameSpec& s) {
         data(s, 0xCA, 0);
         s.reth.dma_len = 0;
       }},
      {"WRITE_ONLY_IMM",
       [](w::FrameSpec& s) {
         data(s, 0xCB, 8);
         s.reth.dma_len = 8;
         s.bth.se = true;
         s.tseth.ftype = 3;
       }},
      {"WRITE_MIDDLE_trimmed",
       [](w::FrameSpec& s) {
         data(s, 0xC7, 0);
         set_dscp(s, plan().trimmed);
         s.trimmed = true;
         s.headers = w::kHdrMeth | w::kHdrTseth;
       }},
      {"TRANSPORT_ACK",
       [](w::FrameSpec& s) {
         control(s, 0xD1);
         s.aeth = {0x1F, 0x00A041};
       }},
      {"SACK",
       [](w::FrameSpec& s) {
         control(s, 0xDC);
         s.seth.m = 2;
         s.seth.ack_psn_offset = -3;
         s.seth.entropy = 0x0003a5c1;
         s.seth.spdcid = 0x0022;
         s.seth.dpdcid = 0x0011;
         s.seth.port_status = 0xFE;
         s.seth.cack_psn = 0x0203E6;
         s.seth.cc_type = 0x5;
         s.seth.psv = true;
         s.seth.sva = true;
         s.seth.mpr = 0x21;
         s.seth.sack_offset = 2;
         s.seth.sack_bitmap = 0x8000'0000'0000'0005ull;
         s.cc_state = {0x1234, false, 0x1ABC, true, 0x55, 0x00C0DE};
       }},
      {"SACK_probe_response",
       [](w::FrameSpec& s) {
         control(s, 0xDC);
         s.seth.pr = true;
         s.seth.ack_psn_offset = 7;  // probe id
         s.seth.entropy = 0x0003a5c1;
         s.seth.cack_psn = 0x0203E6;
         s.seth.sack_offset = 1;
         s.cc_state = {0x4321, false, 0, false, 0, 13};
       }},
      {"NACK",
       [](w::FrameSpec& s) {
         control(s, 0xDD);
         s.neth.nack_code = static_cast<uint8_t>(w::NackCode::kTrimmedLastHop);
         s.neth.vendor_code = 0x5A;
         s.neth.entropy = 0x0003a5c1;
         s.neth.spdcid = 0x0022;
         s.neth.dpdcid = 0x0011;
         s.neth.nack_psn = 0x0203E7;
         s.neth.cc_type = 0x3;
         s.neth.psv = true;
         s.neth.sva = false;
         s.neth.m = 1;
         s.neth.ts_echo = 0x1234;
       }},
      {"RELIABILITY_PROBE",
       [](w::FrameSpec& s) {
         set_dscp(s, plan().trimmable);
         s.bth.opcode = 0xDE;
         s.bth.dest_qp = 0x000022;
         s.bth.ack_req = true;
         s.peth.vendor = 0x7E;
         s.peth.probe_id = 0x0107;
         s.peth.spdcid = 0x0011;
         s.peth.dpdcid = 0x0022;
         s.peth.ts16 = 0x2222;
         s.peth.tsr = true;
         s.peth.ftype = 2;
       }},
      {"ENDPOINT_REQUEST",
       [](w::FrameSpec& s) {
         s.bth.opcode = 0xD8;
         s.bth.dest_qp = w::kEndpointOpQpn;
         s.bth.psn = 0x000042;
         s.erth.op = static_cast<uint8_t>(w::EndpointOp::kPortStatusUpdate);
         s.erth.vendor = 0x11;
         s.erth.port_status_mask = 0x000001FE;
         s.erth.ts16 = 0x3333;
         s.erth.tsr = true;
       }},
      {"ENDPOINT_RESPONSE",
       [](w::FrameSpec& s) {
         control(s, 0xD9);
         s.bth.dest_qp = w::kEndpointOpQpn;
         s.bth.psn = 0x000042;
         s.eeth.op = static_cast<uint8_t>(w::EndpointOp::kEvProbe);
         s.eeth.sva = true;
         s.eeth.status = 0x01;
         s.eeth.vendor = 0x22;
         s.eeth.entropy = 0x0003a5c1;
         s.eeth.port_status_mask = 0x000001FE;
         s.eeth.ts_echo = 0x3340;
         s.eeth.svc_time = 0x000D;
       }},
  };
}

const Case& case_named(std::string_view name) {
  static const std::vector<Case> all = cases();
  for (const Case& k : all)
    if (k.name == name) return k;
  throw std::logic_error("no case " + std::string(name));
}

w::FrameSpec spec_for(Carrier c, const Case& k) {
  w::FrameSpec s =
      w::samples::base_spec(c, w::samples::requestor(), w::samples::responder(), 0x0003a5c1);
  k.fill(s);
  return s;
}

size_t pad_of(const w::FrameSpec& s) {
  return s.trimmed ? 0 : (4 - s.payload.size() % 4) % 4;
}

// The UDP payload of a libtins-parsed frame (libtins 4.0 always leaves it a RawPDU).
const Tins::RawPDU& udp_payload(const Tins::PDU& pkt) {
  const auto* udp = pkt.find_pdu<Tins::UDP>();
  if (!udp) throw std::runtime_error("no UDP");
  const auto* raw = Tins::tins_cast<const Tins::RawPDU*>(udp->inner_pdu());
  if (!raw) throw std::runtime_error("UDP payload is not a RawPDU");
  return *raw;
}

// True when p is a P; then its header must equal `want`.
template <class P, class H>
bool match(const Tins::PDU* p, const H& want, w::HeaderBit bit, uint32_t& seen) {
  const auto* x = Tins::tins_cast<const P*>(p);
  if (!x) return false;
  EXPECT_EQ(fields(x->header()), fields(want)) << "in " << typeid(P).name();
  EXPECT_FALSE(seen & bit) << "header twice";
  seen |= bit;
  return true;
}

// Walks a parsed chain and checks each PDU against the decoded frame.
void expect_chain_matches(const Tins::PDU* p, const w::DecodedFrame& d) {
  const auto* bth = Tins::tins_cast<const Bth*>(p);
  ASSERT_NE(bth, nullptr) << "chain does not start with a Bth";
  EXPECT_EQ(fields(bth->header()), fields(d.bth));
  p = p->inner_pdu();
  uint32_t seen = 0;
  for (; p && p->pdu_type() != Tins::PDU::RAW && p->pdu_type() != Pad::pdu_flag &&
         p->pdu_type() != Icrc::pdu_flag;
       p = p->inner_pdu()) {
    const bool known =
        match<Meth>(p, d.meth, w::kHdrMeth, seen) || match<Tseth>(p, d.tseth, w::kHdrTseth, seen) ||
        match<Reth>(p, d.reth, w::kHdrReth, seen) || match<ImmDt>(p, d.immdt, w::kHdrImm, seen) ||
        match<Aeth>(p, d.aeth, w::kHdrAeth, seen) || match<Seth>(p, d.seth, w::kHdrSeth, seen) ||
        match<CcState>(p, d.cc_state, w::kHdrCcState, seen) ||
        match<Neth>(p, d.neth, w::kHdrNeth, seen) || match<Peth>(p, d.peth, w::kHdrPeth, seen) ||
        match<Erth>(p, d.erth, w::kHdrErth, seen) || match<Eeth>(p, d.eeth, w::kHdrEeth, seen);
    if (!known) ADD_FAILURE() << "unexpected PDU type " << p->pdu_type();
  }
  EXPECT_EQ(seen, d.headers);
  if (!d.payload.empty()) {
    const auto* raw = Tins::tins_cast<const Tins::RawPDU*>(p);
    ASSERT_NE(raw, nullptr) << "payload missing";
    EXPECT_EQ(raw->payload(), to_u8(d.payload));
    p = p->inner_pdu();
  }
  if (d.pad_bytes) {
    const auto* pad = Tins::tins_cast<const Pad*>(p);
    ASSERT_NE(pad, nullptr) << "pad missing";
    EXPECT_EQ(pad->bytes(), to_u8(d.pad_data));
    p = p->inner_pdu();
  }
  if (d.has_icrc) {
    const auto* icrc = Tins::tins_cast<const Icrc*>(p);
    ASSERT_NE(icrc, nullptr) << "ICRC missing";
    EXPECT_EQ(icrc->value(), d.icrc);
    p = p->inner_pdu();
  }
  EXPECT_EQ(p, nullptr) << "unexpected PDUs after the ICRC";
}

// ---------------------------------------------------------------------------------------------
// Every MRP0 packet type in every carrier
// ---------------------------------------------------------------------------------------------
class CraftTest : public ::testing::TestWithParam<std::tuple<Carrier, Case>> {};

TEST_P(CraftTest, DecodesMatchesCodecAndParsesBack) {
  const auto& [carrier, k] = GetParam();
  const w::FrameSpec spec = spec_for(carrier, k);
  const std::vector<std::byte> bytes = serialize(craft(spec));

  // (1) The codec decodes what libtins wrote, every field as set, ICRC valid.
  w::DecodedFrame d;
  w::DecodeOptions o;
  o.verify_icrc = true;
  ASSERT_TRUE(w::decode_frame(bytes, d, o)) << d.error.describe();
  ASSERT_TRUE(d.roce);
  ASSERT_NE(d.op, nullptr);
  EXPECT_EQ(d.eth.src, spec.eth.src);
  EXPECT_EQ(d.eth.dst, spec.eth.dst);
  EXPECT_EQ(d.l3, spec.l3);
  if (spec.l3 == 4) {
    EXPECT_EQ(d.ip4.src, spec.ip4.src);
    EXPECT_EQ(d.ip4.dst, spec.ip4.dst);
    EXPECT_EQ(d.ip4.dscp, spec.ip4.dscp);
    EXPECT_EQ(d.ip4.ecn, spec.ip4.ecn);
    EXPECT_EQ(d.ip4.ttl, spec.ip4.ttl);
    EXPECT_EQ(d.ip4.flags_frag, spec.ip4.flags_frag);
  } else {
    w::Ipv6Header want = spec.ip6;
    want.next_header =
        spec.has_srh ? w::kIpProtoRouting : (spec.has_inner_ip6 ? w::kIpProtoIpv6 : w::kIpProtoUdp);
    EXPECT_EQ(fields(d.ip6), fields(want));
  }
  EXPECT_EQ(d.has_srh, spec.has_srh);
  if (spec.has_srh) {
    EXPECT_EQ(d.srh.segment_count, spec.srh.segment_count);
    EXPECT_EQ(d.srh.segments_left, spec.srh.segments_left);
    EXPECT_EQ(d.srh.segments[0], spec.srh.segments[0]);
    EXPECT_EQ(d.srh.next_header, w::kIpProtoIpv6);
  }
  EXPECT_EQ(d.has_inner_ip6, spec.has_inner_ip6);
  if (spec.has_inner_ip6) {
    EXPECT_EQ(fields(d.inner_ip6), fields(spec.inner_ip6));
  }
  EXPECT_EQ(d.ev_format(), w::samples::ev_format_of(carrier));
  EXPECT_EQ(d.udp.sport, spec.udp.sport);
  EXPECT_EQ(d.udp.dport, w::kRoceV2Port);
  EXPECT_EQ(d.udp.checksum, 0);  // MRP0 default policy
  w::Bth want_bth = spec.bth;
  want_bth.pad_count = static_cast<uint8_t>(pad_of(spec));
  EXPECT_EQ(fields(d.bth), fields(want_bth));
  EXPECT_EQ(d.headers, stack_of(spec));
  if (d.has(w::kHdrMeth)) {
    EXPECT_EQ(fields(d.meth), fields(spec.meth));
  }
  if (d.has(w::kHdrTseth)) {
    EXPECT_EQ(fields(d.tseth), fields(spec.tseth));
  }
  if (d.has(w::kHdrReth)) {
    EXPECT_EQ(fields(d.reth), fields(spec.reth));
  }
  if (d.has(w::kHdrImm)) {
    EXPECT_EQ(fields(d.immdt), fields(spec.immdt));
  }
  if (d.has(w::kHdrAeth)) {
    EXPECT_EQ(fields(d.aeth), fields(spec.aeth));
  }
  if (d.has(w::kHdrSeth)) {
    EXPECT_EQ(fields(d.seth), fields(spec.seth));
  }
  if (d.has(w::kHdrCcState)) {
    EXPECT_EQ(fields(d.cc_state), fields(spec.cc_state));
  }
  if (d.has(w::kHdrNeth)) {
    EXPECT_EQ(fields(d.neth), fields(spec.neth));
  }
  if (d.has(w::kHdrPeth)) {
    EXPECT_EQ(fields(d.peth), fields(spec.peth));
  }
  if (d.has(w::kHdrErth)) {
    EXPECT_EQ(fields(d.erth), fields(spec.erth));
  }
  if (d.has(w::kHdrEeth)) {
    EXPECT_EQ(fields(d.eeth), fields(spec.eeth));
  }
  EXPECT_EQ(to_u8(d.payload), to_u8(spec.payload));
  EXPECT_EQ(d.pad_bytes, pad_of(spec));
  EXPECT_EQ(d.trimmed, spec.trimmed);
  EXPECT_EQ(d.has_icrc, !spec.trimmed);
  if (!spec.trimmed) {
    EXPECT_TRUE(d.icrc_ok) << "ICRC does not verify";
  }

  // (2) Byte-identical to the codec's own encoding of the same values.
  EXPECT_TRUE(same_bytes(bytes, w::encode_frame(spec)));

  // (3) libtins parses the frame; parse_roce turns its UDP payload back into our PDUs.
  Tins::EthernetII parsed(reinterpret_cast<const uint8_t*>(bytes.data()),
                          static_cast<uint32_t>(bytes.size()));
  const ParseResult r = parse_roce(udp_payload(parsed));
  ASSERT_TRUE(r.ok()) << r.error;
  expect_chain_matches(r.pdu.get(), d);
  // In place, then serialized again: the same frame.
  ASSERT_EQ(expand_roce(parsed), "");
  ASSERT_NE(parsed.find_pdu<Bth>(), nullptr);
  EXPECT_EQ(parsed.rfind_pdu<Bth>().psn(), spec.bth.psn);
  EXPECT_TRUE(same_bytes(serialize(parsed), bytes));
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Carrier, Case>>& info) {
  std::string n = std::string(w::samples::carrier_name(std::get<0>(info.param))) + "_" +
                  std::get<1>(info.param).name;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AllTypesAllCarriers, CraftTest,
                         ::testing::Combine(::testing::ValuesIn(w::samples::all_carriers()),
                                            ::testing::ValuesIn(cases())),
                         case_name);

// ---------------------------------------------------------------------------------------------
// Scapy-style crafting, as a tool would write it
// ---------------------------------------------------------------------------------------------
TEST(TinsPdu, ScapyStyleChain) {
  const std::string payload = "hello";
  Bth bth(w::Opcode::kWriteOnly, 0x22, 5);
  bth.ts(true);
  bth.ack_req(true);
  const auto pkt = Tins::EthernetII() / Tins::IPv6("fd00:200::1", "fd00:100::1") /
                   Tins::UDP(w::kRoceV2Port, 0xC001) / bth / Meth(0, 41) / Tseth(0x1234) /
                   Reth(0x1000, 7, 5) / Tins::RawPDU(payload);
  EXPECT_EQ(pkt.rfind_pdu<Bth>().psn(), 5u);
  EXPECT_EQ(pkt.rfind_pdu<Bth>().opcode_name(), "WRITE_ONLY");
  EXPECT_EQ(pkt.rfind_pdu<Meth>().msn(), 41);
  EXPECT_EQ(pkt.rfind_pdu<Reth>().rkey(), 7u);
  EXPECT_EQ(pkt.find_pdu<Icrc>(), nullptr);  // serialize() adds it, on its own copy

  const auto bytes = serialize(pkt);
  w::DecodedFrame d;
  w::DecodeOptions o;
  o.verify_icrc = true;
  ASSERT_TRUE(w::decode_frame(bytes, d, o)) << d.error.describe();
  EXPECT_EQ(d.op->name, "WRITE_ONLY");
  EXPECT_EQ(d.bth.pad_count, 3);
  EXPECT_EQ(d.pad_bytes, 3);
  EXPECT_EQ(d.meth.msn, 41);
  EXPECT_EQ(d.tseth.ts16, 0x1234);
  EXPECT_EQ(d.reth.dma_len, 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(d.payload.data()), d.payload.size()),
            payload);
  EXPECT_TRUE(d.icrc_ok);
  // Clones keep type and values (find_pdu and tins_cast rely on pdu_type()).
  std::unique_ptr<Tins::PDU> copy(pkt.rfind_pdu<Reth>().clone());
  ASSERT_NE(Tins::tins_cast<Reth*>(copy.get()), nullptr);
  EXPECT_EQ(Tins::tins_cast<Reth*>(copy.get())->va(), 0x1000u);
}

// A mutant that sends an IBTA READ over the MRC QP still gets a correct ICRC.
TEST(TinsPdu, IbtaOpcodeGetsIcrc) {
  auto pkt = Tins::EthernetII() / Tins::IP("192.0.2.2", "192.0.2.1") /
             Tins::UDP(w::kRoceV2Port, 0xC001) / Bth(w::Opcode::kRcReadRequest, 0x22, 9) /
             Reth(0x2000, 1, 4096);
  const auto bytes = serialize(pkt);
  w::DecodedFrame d;
  w::DecodeOptions o;
  o.verify_icrc = true;
  ASSERT_TRUE(w::decode_frame(bytes, d, o)) << d.error.describe();
  EXPECT_EQ(d.op->kind, w::PacketKind::kRcData);
  EXPECT_EQ(d.reth.dma_len, 4096u);
  EXPECT_TRUE(d.icrc_ok);
}

// ---------------------------------------------------------------------------------------------
// Negative tests: the comparisons above can fail
// ---------------------------------------------------------------------------------------------
// Offsets of the BTH PSN bytes and the ICRC in an encoded frame.
std::set<size_t> psn_and_icrc_offsets(const std::vector<std::byte>& frame) {
  w::DecodedFrame d;
  EXPECT_TRUE(w::decode_frame(frame, d));
  const size_t icrc = static_cast<size_t>(d.off_udp) + d.udp.length - w::kIcrcBytes;
  return {d.off_bth + 9u, d.off_bth + 10u, d.off_bth + 11u, icrc, icrc + 1, icrc + 2, icrc + 3};
}

TEST(TinsNegative, WrongPsnChangesExactlyPsnAndIcrc) {
  for (Carrier c : w::samples::all_carriers()) {
    SCOPED_TRACE(std::string(w::samples::carrier_name(c)));
    const w::FrameSpec spec = spec_for(c, case_named("SACK"));
    const auto want = w::encode_frame(spec);
    w::FrameSpec wrong = spec;
    wrong.bth.psn = w::psn_add(spec.bth.psn, 1);
    const auto got = serialize(craft(wrong));
    EXPECT_FALSE(same_bytes(got, want));
    const auto diff = diff_offsets(got, want);
    const auto allowed = psn_and_icrc_offsets(want);
    EXPECT_FALSE(diff.empty());
    for (size_t off : diff) EXPECT_TRUE(allowed.count(off)) << "unexpected difference at " << off;
    w::DecodedFrame d;
    ASSERT_TRUE(w::decode_frame(got, d));
    EXPECT_NE(fields(d.bth), fields(spec.bth));
  }
}

TEST(TinsNegative, WrongExtensionFieldIsCaught) {
  const w::FrameSpec spec = spec_for(Carrier::kStev, case_named("NACK"));
  w::FrameSpec wrong = spec;
  wrong.neth.nack_psn ^= 0x10;
  const auto got = serialize(craft(wrong));
  EXPECT_FALSE(same_bytes(got, w::encode_frame(spec)));
  w::DecodedFrame d;
  ASSERT_TRUE(w::decode_frame(got, d));
  EXPECT_NE(fields(d.neth), fields(spec.neth));
  EXPECT_EQ(fields(d.neth), fields(wrong.neth));
}

TEST(TinsNegative, CorruptedOrUnfixedIcrcDoesNotVerify) {
  const w::FrameSpec spec = spec_for(Carrier::kSrv6, case_named("WRITE_ONLY"));
  auto bytes = serialize(craft(spec));
  w::DecodedFrame d;
  w::DecodeOptions o;
  o.verify_icrc = true;
  ASSERT_TRUE(w::decode_frame(bytes, d, o));
  ASSERT_TRUE(d.icrc_ok);
  const size_t at = d.off_payload;
  bytes[at] ^= std::byte{0x01};
  ASSERT_TRUE(w::decode_frame(bytes, d, o));
  EXPECT_FALSE(d.icrc_ok) << "a flipped payload bit must break the ICRC";

  SerializeOptions no_fix;
  no_fix.fix_icrc = false;
  const auto raw = serialize(craft(spec), no_fix);
  ASSERT_TRUE(w::decode_frame(raw, d, o));
  EXPECT_EQ(d.icrc, 0u);
  EXPECT_FALSE(d.icrc_ok);
  EXPECT_FALSE(same_bytes(raw, w::encode_frame(spec)));
}

// The ICRC as carried is little-endian: Icrc::value() must mean the same number as the codec's
// DecodedFrame::icrc in both directions.
TEST(TinsNegative, IcrcValueByteOrder) {
  const w::FrameSpec spec = spec_for(Carrier::kUdp4, case_named("TRANSPORT_ACK"));
  SerializeOptions keep;
  keep.fix_icrc = false;
  const auto bytes = serialize(craft(spec) / Icrc(0x11223344), keep);
  w::DecodedFrame d;
  w::DecodeOptions o;
  o.verify_icrc = true;
  ASSERT_TRUE(w::decode_frame(bytes, d, o));
  EXPECT_EQ(d.icrc, 0x11223344u);
  EXPECT_FALSE(d.icrc_ok);
  const std::vector<std::byte> le = {std::byte{0x44}, std::byte{0x33}, std::byte{0x22},
                                     std::byte{0x11}};
  EXPECT_EQ(Icrc(w::Bytes(le)).value(), 0x11223344u);
  // With the fix, the value set is overwritten by the correct one.
  const auto fixed = serialize(craft(spec) / Icrc(0x11223344));
  ASSERT_TRUE(w::decode_frame(fixed, d, o));
  EXPECT_TRUE(d.icrc_ok);
  EXPECT_TRUE(same_bytes(fixed, w::encode_frame(spec)));
}

// ---------------------------------------------------------------------------------------------
// UDP checksum: zero, computed after the ICRC, or libtins' stale value
// ---------------------------------------------------------------------------------------------
TEST(TinsChecksum, PoliciesInEveryCarrier) {
  for (Carrier c : w::samples::all_carriers()) {
    SCOPED_TRACE(std::string(w::samples::carrier_name(c)));
    const w::FrameSpec spec = spec_for(c, case_named("WRITE_ONLY"));
    const auto pkt = craft(spec);

    const auto zero = serialize(pkt, w::UdpChecksumPolicy::kZero);
    w::DecodedFrame dz;
    ASSERT_TRUE(w::decode_frame(zero, dz));
    EXPECT_EQ(dz.udp.checksum, 0);

    const auto computed = serialize(pkt, w::UdpChecksumPolicy::kCompute);
    w::DecodedFrame dc;
    w::DecodeOptions o;
    o.verify_icrc = true;
    ASSERT_TRUE(w::decode_frame(computed, dc, o));
    EXPECT_TRUE(dc.icrc_ok);
    EXPECT_NE(dc.udp.checksum, 0);
    const auto want_csum = w::compute_udp_checksum(dc);
    ASSERT_TRUE(want_csum.has_value());
    EXPECT_EQ(dc.udp.checksum, *want_csum);
    w::EncodeOptions eo;
    eo.udp_checksum = w::UdpChecksumPolicy::kCompute;
    EXPECT_TRUE(same_bytes(computed, w::encode_frame(spec, eo)));
    // The ICRC does not cover the UDP checksum: the same ICRC under both policies.
    EXPECT_EQ(dc.icrc, dz.icrc);

    // libtins summed the datagram while the ICRC was still zero: its checksum is stale.
    const auto as_is = serialize(pkt, w::UdpChecksumPolicy::kAsIs);
    w::DecodedFrame da;
    ASSERT_TRUE(w::decode_frame(as_is, da, o));
    EXPECT_TRUE(da.icrc_ok);
    EXPECT_NE(da.udp.checksum, 0);
    EXPECT_NE(da.udp.checksum, dc.udp.checksum);
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing: malformed input gives an error naming header and offset, never a crash
// ---------------------------------------------------------------------------------------------
std::vector<std::byte> roce_payload_of(const std::vector<std::byte>& frame) {
  w::DecodedFrame d;
  EXPECT_TRUE(w::decode_frame(frame, d));
  const auto* p = frame.data() + d.off_bth;
  return {p, frame.data() + d.off_udp + d.udp.length};
}

TEST(TinsParse, ShorterThanBth) {
  const std::vector<std::byte> five(5, std::byte{0xCA});
  const ParseResult r = parse_roce(w::Bytes(five));
  EXPECT_EQ(r.pdu, nullptr);
  EXPECT_NE(r.error.find("truncated BTH at offset 0"), std::string::npos) << r.error;
}

TEST(TinsParse, TruncatedRethKeepsTheRest) {
  const w::FrameSpec spec = spec_for(Carrier::kStev, case_named("WRITE_LAST_no_TSETH"));
  auto p = roce_payload_of(w::encode_frame(spec));
  // BTH(12) METH(4) and only 9 bytes of what follows: 5 for the RETH once the ICRC is set aside.
  p.resize(12 + 4 + 9);
  const ParseResult r = parse_roce(w::Bytes(p));
  ASSERT_NE(r.pdu, nullptr);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error.find("truncated RETH at offset 16: need 16 bytes, have 5"), std::string::npos)
      << r.error;
  const auto* meth = Tins::tins_cast<const Meth*>(r.pdu->inner_pdu());
  ASSERT_NE(meth, nullptr);
  EXPECT_EQ(fields(meth->header()), fields(spec.meth));
  const auto* rest = Tins::tins_cast<const Tins::RawPDU*>(meth->inner_pdu());
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->payload().size(), 9u);
}

TEST(TinsParse, UnknownOpcode) {
  auto p = roce_payload_of(w::encode_frame(spec_for(Carrier::kUdp4, case_named("TRANSPORT_ACK"))));
  p[0] = std::byte{0xEE};
  const ParseResult r = parse_roce(w::Bytes(p));
  ASSERT_NE(r.pdu, nullptr);
  EXPECT_NE(r.error.find("unknown opcode 0xEE in BTH at offset 0"), std::string::npos) << r.error;
  EXPECT_EQ(Tins::tins_cast<const Bth*>(r.pdu.get())->opcode(), 0xEE);
  const auto* rest = Tins::tins_cast<const Tins::RawPDU*>(r.pdu->inner_pdu());
  ASSERT_NE(rest, nullptr);
  EXPECT_EQ(rest->payload().size(), p.size() - kBthBytes);
}

TEST(TinsParse, TrimmedFromOptionOrChain) {
  const w::FrameSpec spec = spec_for(Carrier::kUdp6, case_named("WRITE_MIDDLE_trimmed"));
  ASSERT_TRUE(spec.trimmed);
  const auto frame = w::encode_frame(spec);
  const auto p = roce_payload_of(frame);
  ASSERT_EQ(p.size(), 12u + 4 + 4);
  // Loose bytes: without the hint, 20 bytes read as an untrimmed packet whose ICRC eats TSETH.
  const ParseResult loose = parse_roce(w::Bytes(p));
  EXPECT_FALSE(loose.ok());
  ParseOptions trimmed;
  trimmed.trimmed = true;
  const ParseResult r = parse_roce(w::Bytes(p), trimmed);
  ASSERT_TRUE(r.ok()) << r.error;
  EXPECT_NE(r.pdu->find_pdu<Tseth>(), nullptr);
  EXPECT_EQ(r.pdu->find_pdu<Icrc>(), nullptr);
  // In a chain, the outer DSCP says it.
  Tins::EthernetII parsed(reinterpret_cast<const uint8_t*>(frame.data()),
                          static_cast<uint32_t>(frame.size()));
  const ParseResult c = parse_roce(udp_payload(parsed));
  ASSERT_TRUE(c.ok()) << c.error;
  EXPECT_EQ(c.pdu->rfind_pdu<Tseth>().ts16(), spec.tseth.ts16);
}

// Network-facing: every prefix and every single-byte corruption of every RoCE sample's UDP
// payload parses without throwing, and a null chain always comes with a reason.
TEST(TinsParse, MalformedPayloadsNeverThrow) {
  size_t parsed = 0, partial = 0;
  for (const auto& sample : w::samples::all_samples()) {
    w::DecodedFrame d;
    if (!w::decode_frame(sample.frame, d) || !d.roce) continue;
    const auto payload = roce_payload_of(sample.frame);
    auto check = [&](w::Bytes b) {
      ParseResult r;
      EXPECT_NO_THROW(r = parse_roce(b)) << sample.name;
      if (!r.pdu) {
        EXPECT_FALSE(r.error.empty()) << sample.name;
      }
      (r.ok() ? parsed : partial)++;
    };
    for (size_t n = 0; n <= payload.size(); n += (n < 96 ? 1 : 97))
      check(w::Bytes(payload).first(n));
    for (size_t i = 0; i < std::min<size_t>(payload.size(), 64); ++i) {
      auto bad = payload;
      bad[i] ^= std::byte{0xA5};
      check(w::Bytes(bad));
    }
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(partial, 0u);
  // Too large to carry in one frame: an error, not a crash.
  const std::vector<std::byte> huge(70000);
  const ParseResult r = parse_roce(w::Bytes(huge));
  EXPECT_EQ(r.pdu, nullptr);
  EXPECT_NE(r.error.find("70000 bytes"), std::string::npos) << r.error;
}

TEST(TinsParse, BufferConstructorsRejectShortInput) {
  const std::vector<std::byte> three(3);
  EXPECT_THROW(Meth{w::Bytes(three)}, Tins::malformed_packet);
  EXPECT_THROW(Seth{w::Bytes(three)}, Tins::malformed_packet);
  EXPECT_THROW(Icrc{w::Bytes(three)}, Tins::malformed_packet);
  const std::vector<std::byte> eleven(11);
  EXPECT_THROW(Bth{w::Bytes(eleven)}, Tins::malformed_packet);
  // And accept exact input: a BTH and a RETH cut from a codec frame.
  const w::FrameSpec spec = spec_for(Carrier::kStev, case_named("WRITE_ONLY"));
  const auto p = roce_payload_of(w::encode_frame(spec));
  const Bth bth{w::Bytes(p).first(kBthBytes)};
  w::Bth want = spec.bth;
  want.pad_count = 3;
  EXPECT_EQ(fields(bth.header()), fields(want));
  const Reth reth{w::Bytes(p).subspan(kBthBytes + 4 + 4)};
  EXPECT_EQ(fields(reth.header()), fields(spec.reth));
}

TEST(TinsParse, EveryRoceSampleRoundTrips) {
  size_t checked = 0;
  for (const auto& sample : w::samples::all_samples()) {
    w::DecodedFrame d;
    if (!w::decode_frame(sample.frame, d) || !d.roce) continue;
    SCOPED_TRACE(sample.name);
    Tins::EthernetII parsed(reinterpret_cast<const uint8_t*>(sample.frame.data()),
                            static_cast<uint32_t>(sample.frame.size()));
    ASSERT_EQ(expand_roce(parsed), "");
    SerializeOptions o;
    o.udp_checksum = d.udp.checksum ? w::UdpChecksumPolicy::kCompute : w::UdpChecksumPolicy::kZero;
    EXPECT_TRUE(same_bytes(serialize(parsed, o), sample.frame));
    ++checked;
  }
  EXPECT_GT(checked, 5u * 16);
}

TEST(TinsSerialize, RejectsChainsWithoutRoomForTheIcrc) {
  EXPECT_THROW(serialize(Tins::EthernetII() / Tins::IPv6() / Bth(0xCA, 1, 1)),
               std::invalid_argument);
  EXPECT_THROW(serialize(Tins::EthernetII() / Tins::IPv6() / Tins::UDP(w::kRoceV2Port, 1) /
                         Bth(0xD1, 1, 1) / Aeth(0x1F, 0) / Icrc() / Tins::RawPDU("x")),
               std::invalid_argument);
}

}  // namespace
}  // namespace mrc::tins
