// Frame construction and the address/EV parts of frame parsing. Every byte goes through
// mrc::wire; this file only decides header values (MRP0 C.1).
#include <algorithm>
#include <cstring>

#include "reference-impl/engine/endpoint_impl.h"

namespace mrc::engine {
namespace {

bool is_v4_mapped(const wire::Ipv6Addr& a) {
  for (int k = 0; k < 10; ++k)
    if (a[k] != 0) return false;
  return a[10] == 0xFF && a[11] == 0xFF;
}

wire::Ipv4Addr v4_of(const wire::Ipv6Addr& a) {
  return {a[12], a[13], a[14], a[15]};
}

}  // namespace

wire::FrameSpec& Endpoint::Impl::begin_frame(const Route& r, const wire::Ipv6Addr& dst,
                                             uint8_t dscp, uint8_t ecn, uint8_t opcode) {
  wire::FrameSpec& s = spec;
  s = wire::FrameSpec{};
  const PortConfig& pc = cfg.ports[r.port - 1];
  s.has_eth = true;
  s.eth.src = pc.mac;
  s.eth.dst = pc.next_hop_mac;

  const wire::WireParams& wp = prof->params();
  const wire::EvCarriage carriage = wire::carry_wev(wp, cfg.ev_format, r.wev);
  if (ipv4) {
    s.eth.ethertype = wire::kEtherTypeIpv4;
    s.l3 = 4;
    s.ip4.dscp = dscp;
    s.ip4.ecn = ecn;
    s.ip4.ttl = 64;
    s.ip4.protocol = wire::kIpProtoUdp;
    s.ip4.src = ip4;
    s.ip4.dst = v4_of(dst);
  } else {
    s.eth.ethertype = wire::kEtherTypeIpv6;
    s.l3 = 6;
    wire::Ipv6Header inner;
    inner.dscp = dscp;
    inner.ecn = ecn;
    inner.flow_label = carriage.flow_label & 0xFFFFF;
    inner.next_header = wire::kIpProtoUdp;
    inner.hop_limit = 64;
    inner.src = cfg.gid;
    inner.dst = dst;
    if (cfg.ev_format == wire::EvFormat::kSrv6 && r.srv6 != nullptr) {
      // IPv6-in-IPv6: the outer DA is the SRv6 path (expanded EV bytes 0..15), the inner header
      // names the nodes (paper 2.2, MRP0 C.1).
      s.ip6 = inner;
      if (wp.srv6_outer_tc == wire::Srv6OuterTc::kZero) {
        // The switches see DSCP 0 and mark ECN on the outer header the sender left at 0 (not
        // ECT): an open choice of the public sources (docs/wire-format.md section 19).
        s.ip6.dscp = 0;
        s.ip6.ecn = 0;
      }
      s.ip6.next_header = r.srh ? wire::kIpProtoRouting : wire::kIpProtoIpv6;
      s.ip6.src = pc.srv6_source.value_or(cfg.gid);
      std::copy_n(r.srv6->begin(), 16, s.ip6.dst.begin());
      if (r.srh) {
        s.has_srh = true;
        s.srh.next_header = wire::kIpProtoIpv6;
        s.srh.hdr_ext_len = 2;
        s.srh.routing_type = wire::kSrhRoutingType;
        s.srh.segments_left = 1;
        s.srh.last_entry = 0;
        s.srh.segment_count = 1;
        std::copy_n(r.srv6->begin() + 16, 16, s.srh.segments[0].begin());
      }
      s.has_inner_ip6 = true;
      s.inner_ip6 = inner;
    } else {
      // MRP0 gap: an SRv6 node with no EV toward the peer (a connectionless answer to a node
      // it has no QP with) sends plain IPv6 routed by the peer GID.
      s.ip6 = inner;
    }
  }
  s.has_udp = true;
  s.udp.sport = carriage.sport;
  s.udp.dport = prof->roce_port();
  s.roce = true;
  s.bth.opcode = opcode;
  s.op = prof->opcode_info(opcode);
  s.headers = s.op != nullptr ? s.op->headers : 0;
  return s;
}

bool Endpoint::Impl::finish_frame(TxPacket& out, uint8_t port) {
  const size_t n = wire::encoded_size(spec, {}, *prof);
  out.frame.resize(n);
  std::string err;
  const size_t written =
      wire::encode_frame(spec, {out.frame.data(), out.frame.size()}, {}, *prof, &err);
  if (written == 0) {
    // The engine filled the spec itself, so this is a bug; drop the frame and say why.
    Event e = event(EventKind::kDrop, spec.bth.dest_qp);
    e.s("reason", "encode_failed").u("opcode", spec.bth.opcode);
    emit(e);
    out.frame.clear();
    return false;
  }
  out.frame.resize(written);
  out.port = port;
  ++stats.tx_frames;
  return true;
}

uint32_t Endpoint::Impl::wev_of_frame(const wire::DecodedFrame& f) const {
  const uint32_t fl = f.has_inner_ip6 ? f.inner_ip6.flow_label : f.flow_label();
  const wire::EvFormat fmt = ipv4 ? wire::EvFormat::kUdp : cfg.ev_format;
  return wire::wev_from_carriage(prof->params(), fmt, f.udp.sport, fl);
}

wire::Ipv6Addr Endpoint::Impl::frame_src(const wire::DecodedFrame& f) const {
  if (f.l3 == 4) {
    wire::Ipv6Addr a{};
    a[10] = 0xFF;
    a[11] = 0xFF;
    std::copy_n(f.ip4.src.begin(), 4, a.begin() + 12);
    return a;
  }
  const wire::Ipv6Header* h = f.roce_ip6();
  return h != nullptr ? h->src : wire::Ipv6Addr{};
}

bool Endpoint::Impl::frame_src_is(const wire::DecodedFrame& f, const wire::Ipv6Addr& gid) const {
  return frame_src(f) == gid;
}

bool Endpoint::Impl::frame_for_us(const wire::DecodedFrame& f) const {
  if (f.l3 == 4) return ipv4 && f.ip4.dst == ip4;
  const wire::Ipv6Header* h = f.roce_ip6();
  return !ipv4 && h != nullptr && h->dst == cfg.gid;
}

Endpoint::Impl::Impl(const EndpointConfig& c) : cfg(c), rng(c.seed) {
  prof = c.profile != nullptr ? c.profile : &wire::mrp0();
  nports = static_cast<uint8_t>(c.ports.size());
  ipv4 = is_v4_mapped(c.gid);
  if (ipv4) ip4 = v4_of(c.gid);
  for (uint8_t p = 1; p <= nports; ++p) local_port_mask |= 1u << p;
  ep_reply_stranger.configure(c.ep_reply_burst, c.ep_reply_stranger_interval_ns);
  drop_events.configure(c.drop_event_burst, c.drop_event_burst == 0 ? 0 : c.drop_event_interval_ns);
}

}  // namespace mrc::engine
