#include "wire/samples.h"

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <stdexcept>

namespace mrc::wire::samples {

std::string_view carrier_name(Carrier c) {
  switch (c) {
    case Carrier::kUdp4:
      return "udp4";
    case Carrier::kUdp6:
      return "udp6";
    case Carrier::kStev:
      return "stev";
    case Carrier::kSrv6:
      return "srv6";
    case Carrier::kSrv6Srh:
      return "srv6-srh";
  }
  return "?";
}

std::vector<Carrier> all_carriers() {
  return {Carrier::kUdp4, Carrier::kUdp6, Carrier::kStev, Carrier::kSrv6, Carrier::kSrv6Srh};
}

EvFormat ev_format_of(Carrier c) {
  switch (c) {
    case Carrier::kUdp4:
    case Carrier::kUdp6:
      return EvFormat::kUdp;
    case Carrier::kStev:
      return EvFormat::kStev;
    case Carrier::kSrv6:
    case Carrier::kSrv6Srh:
      return EvFormat::kSrv6;
  }
  return EvFormat::kUdp;
}

const Node& requestor() {
  static const Node n{
      {0x02, 0x00, 0x00, 0x00, 0x01, 0x01}, {192, 0, 2, 1}, *parse_ipv6("fd00:100::1"), 0x000011};
  return n;
}

const Node& responder() {
  static const Node n{
      {0x02, 0x00, 0x00, 0x00, 0x02, 0x01}, {192, 0, 2, 2}, *parse_ipv6("fd00:200::1"), 0x000022};
  return n;
}

const std::vector<std::byte>& pattern(size_t len, uint8_t seed) {
  static std::map<std::pair<size_t, uint8_t>, std::vector<std::byte>> cache;
  auto& v = cache[{len, seed}];
  if (v.size() != len) {
    v.resize(len);
    for (size_t i = 0; i < len; ++i) v[i] = static_cast<std::byte>((seed + i * 31) % 251);
  }
  return v;
}

FrameSpec base_spec(Carrier c, const Node& from, const Node& to, uint32_t wev,
                    const WireProfile& profile) {
  FrameSpec s;
  s.has_eth = true;
  s.eth.src = from.mac;
  s.eth.dst = to.mac;
  const EvFormat fmt = ev_format_of(c);
  const EvCarriage ev = carry_wev(profile.params(), fmt, wev);
  if (c == Carrier::kUdp4) {
    s.l3 = 4;
    s.ip4.src = from.ip4;
    s.ip4.dst = to.ip4;
  } else {
    s.l3 = 6;
    s.ip6.src = from.gid;
    s.ip6.dst = to.gid;
    s.ip6.flow_label = ev.flow_label;
  }
  if (c == Carrier::kSrv6 || c == Carrier::kSrv6Srh) {
    // Outer DA: locator fcbb:0000 then uSIDs T0-up, T1, T0-down, destination (path from the WEV).
    s.inner_ip6 = s.ip6;
    s.has_inner_ip6 = true;
    Ipv6Addr da = *parse_ipv6("fcbb:0::");
    const uint16_t plane = static_cast<uint16_t>(wev & 0x7);
    const uint16_t usids[4] = {static_cast<uint16_t>(0x0100 | plane),
                               static_cast<uint16_t>(0x0200 | plane),
                               static_cast<uint16_t>(0x0300 | plane), 0x0e01};
    for (int i = 0; i < 4; ++i) {
      da[4 + 2 * i] = static_cast<uint8_t>(usids[i] >> 8);
      da[5 + 2 * i] = static_cast<uint8_t>(usids[i]);
    }
    s.ip6.dst = da;
    s.ip6.hop_limit = 64;
    if (c == Carrier::kSrv6Srh) {
      s.has_srh = true;
      s.srh.segment_count = 1;
      s.srh.segments_left = 1;
      s.srh.segments[0] = *parse_ipv6("fcbb:1:e02::");
    }
  }
  s.has_udp = true;
  s.udp.sport = ev.sport;
  s.udp.dport = profile.roce_port();
  s.roce = true;
  s.bth.pkey = 0xFFFF;
  return s;
}

namespace {

// The profile the samples are built under (all_samples' argument).
const WireProfile* g_profile = nullptr;
const WireProfile& cur() {
  return g_profile ? *g_profile : mrp0();
}

void add(std::vector<Sample>& out, const std::string& name, const FrameSpec& spec,
         const EncodeOptions& o = {}) {
  const WireProfile& profile = g_profile ? *g_profile : mrp0();
  FrameSpec s = spec;
  // A trimming switch writes its DSCP on the outer header whatever the sender put there.
  if (s.has_inner_ip6 && profile.params().srv6_outer_tc == Srv6OuterTc::kZero && !s.trimmed) {
    s.ip6.dscp = 0;
    s.ip6.ecn = 0;
  }
  if (s.trimmed && profile.min_trim_bytes() != 20) {
    // Another trim size: trim the whole packet the way a switch would.
    // Sent trimmable (a trimmed DSCP would make the decoder read it as trimmed already).
    FrameSpec full = s;
    full.trimmed = false;
    full.headers = 0;
    full.ip4.dscp = full.ip6.dscp = full.inner_ip6.dscp = profile.dscp().trimmable;
    full.payload = Bytes(pattern(256, 7).data(), 256);
    std::vector<std::byte> bytes = encode_frame(full, o, profile);
    DecodedFrame d;
    if (bytes.empty() || !decode_frame(as_bytes(bytes), d, {}, profile)) return;
    const size_t n = trim_frame({bytes.data(), bytes.size()}, d, s.dscp(), profile);
    if (n == 0) return;
    bytes.resize(n);
    out.push_back({name, std::move(bytes)});
    return;
  }
  auto bytes = encode_frame(s, o, profile);
  if (bytes.empty()) return;
  out.push_back({name, std::move(bytes)});
}

// One packet of each MRP0 type, data in both directions' roles.
void add_mrc(std::vector<Sample>& out, Carrier c) {
  const Node& rq = requestor();
  const Node& rs = responder();
  const DscpPlan& dscp = cur().dscp();
  const std::string prefix = std::string(carrier_name(c)) + "/";
  const uint32_t wev = 0x0003a5c1;
  const uint64_t va = 0x00007f0000100000ull;
  const uint32_t pmtu = 1024;

  auto data = [&](uint8_t opcode, uint32_t psn, size_t len, uint32_t offset_pkts) {
    FrameSpec s = base_spec(c, rq, rs, wev, cur());
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.trimmable;
    s.ip6.ecn = s.ip4.ecn = s.inner_ip6.ecn = 2;  // ECT(0), same TC in both headers
    s.bth.opcode = opcode;
    s.bth.dest_qp = rs.qpn;
    s.bth.psn = psn;
    s.bth.ts = true;
    const OpcodeInfo* op = mrp0().opcode_info(opcode);
    s.bth.ack_req =
        op->position == MessagePosition::kLast || op->position == MessagePosition::kOnly;
    s.meth = {3, 41};
    s.tseth = {0x1234, false, 0, 1};
    s.reth = {va + offset_pkts * pmtu, 0xabc001, static_cast<uint32_t>(3 * pmtu - 5)};
    s.immdt.imm = 0xdeadbeef;
    s.payload = Bytes(pattern(len, static_cast<uint8_t>(psn)).data(), len);
    return s;
  };
  add(out, prefix + "WRITE_FIRST", data(0xC6, 1000, pmtu, 0));
  add(out, prefix + "WRITE_MIDDLE", data(0xC7, 1001, pmtu, 1));
  add(out, prefix + "WRITE_LAST", data(0xC8, 1002, pmtu - 5, 2));
  add(out, prefix + "WRITE_LAST_IMM", data(0xC9, 1003, pmtu - 5, 2));
  {
    FrameSpec s = data(0xCA, 1004, 77, 0);
    s.reth.dma_len = 77;
    add(out, prefix + "WRITE_ONLY", s);
    FrameSpec z = data(0xCA, 1005, 0, 0);
    z.reth.dma_len = 0;
    add(out, prefix + "WRITE_ONLY/zero-length", z);
  }
  {
    FrameSpec s = data(0xCB, 1006, 8, 0);
    s.reth.dma_len = 8;
    s.bth.se = true;
    add(out, prefix + "WRITE_ONLY_IMM", s);
  }
  {
    FrameSpec s = data(0xC7, 1001, pmtu, 1);
    s.bth.rtx = true;
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.trimmable_retx;
    add(out, prefix + "WRITE_MIDDLE/retransmission", s);
  }
  {
    // A trimmed packet: as a switch leaves it, BTH+METH+TSETH and nothing else.
    FrameSpec s = data(0xC7, 1007, 0, 1);
    // The injector rewrites both headers (rewrite_dscp_ecn); a switch would touch the outer.
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.trimmed;
    s.trimmed = true;
    s.headers = kHdrMeth | kHdrTseth;
    add(out, prefix + "WRITE_MIDDLE/trimmed", s);
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.trimmed_lasthop;
    add(out, prefix + "WRITE_MIDDLE/trimmed-lasthop", s);
  }
  auto control = [&](uint8_t opcode) {
    FrameSpec s = base_spec(c, rs, rq, 0x00051e07, cur());
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.control;
    s.bth.opcode = opcode;
    s.bth.dest_qp = rq.qpn;
    return s;
  };
  {
    FrameSpec s = control(0xDC);
    s.bth.psn = 1001;
    s.seth.m = 1;
    s.seth.ack_psn_offset = 2;
    s.seth.entropy = wev;
    s.seth.spdcid = static_cast<uint16_t>(rs.qpn);
    s.seth.dpdcid = static_cast<uint16_t>(rq.qpn);
    s.seth.port_status = 0xFF;
    s.seth.psv = true;
    s.seth.cack_psn = 1001;
    s.seth.sack_offset = 2;
    s.seth.sack_bitmap = 0x5;
    s.seth.cc_type = cur().params().cc_type;
    s.cc_state = {0x1234, false, 2, false, 0, 13};
    add(out, prefix + "SACK", s);
    FrameSpec pr = s;
    pr.seth.pr = true;
    pr.seth.ack_psn_offset = 7;  // probe_id
    pr.seth.m = 0;
    add(out, prefix + "SACK/probe-response", pr);
  }
  {
    FrameSpec s = control(0xDD);
    s.bth.psn = 1007;
    s.neth.nack_code = 0x01;
    s.neth.entropy = wev;
    s.neth.spdcid = static_cast<uint16_t>(rs.qpn);
    s.neth.dpdcid = static_cast<uint16_t>(rq.qpn);
    s.neth.nack_psn = 1007;
    s.neth.ts_echo = 0x1234;
    s.neth.cc_type = cur().params().cc_type;
    add(out, prefix + "NACK", s);
  }
  {
    FrameSpec s = control(0xD1);
    s.bth.psn = 1006;
    s.aeth = {0x1F, 41};
    add(out, prefix + "TRANSPORT_ACK", s);
  }
  {
    FrameSpec s = base_spec(c, rq, rs, wev, cur());
    s.ip6.dscp = s.ip4.dscp = s.inner_ip6.dscp = dscp.trimmable;
    s.ip6.ecn = s.ip4.ecn = s.inner_ip6.ecn = 2;  // ECT(0)
    s.bth.opcode = 0xDE;
    s.bth.dest_qp = rs.qpn;
    s.bth.psn = 0;
    s.bth.ack_req = true;
    s.peth.probe_id = 7;
    s.peth.spdcid = static_cast<uint16_t>(rq.qpn);
    s.peth.dpdcid = static_cast<uint16_t>(rs.qpn);
    s.peth.ts16 = 0x2222;
    add(out, prefix + "RELIABILITY_PROBE", s);
  }
  {
    FrameSpec s = base_spec(c, rq, rs, wev, cur());
    s.bth.opcode = 0xD8;
    s.bth.dest_qp = kEndpointOpQpn;
    s.bth.psn = 0x0042;
    s.erth.op = static_cast<uint8_t>(EndpointOp::kEvProbe);
    s.erth.ts16 = 0x3333;
    add(out, prefix + "ENDPOINT_REQUEST/ev-probe", s);
    s.erth.op = static_cast<uint8_t>(EndpointOp::kPortStatusUpdate);
    s.erth.port_status_mask = 0x1FE;
    s.bth.psn = 0x0043;
    add(out, prefix + "ENDPOINT_REQUEST/port-status", s);
  }
  {
    FrameSpec s = control(0xD9);
    s.bth.dest_qp = kEndpointOpQpn;
    s.bth.psn = 0x0042;
    s.eeth.op = static_cast<uint8_t>(EndpointOp::kEvProbe);
    // The request's ts16 0x3333 plus 13 ticks of service time, flagged by SVA; a profile
    // without SVA (WireParams::sva false) cannot say the time was added, so it echoes ts16.
    const bool sva = cur().params().sva;
    s.eeth.sva = sva;
    s.eeth.entropy = wev;
    s.eeth.port_status_mask = 0x1FE;
    s.eeth.ts_echo = sva ? 0x3340 : 0x3333;
    s.eeth.svc_time = sva ? 0x0D : 0;
    add(out, prefix + "ENDPOINT_RESPONSE", s);
  }
}

void add_ibta(std::vector<Sample>& out) {
  const Node& rq = requestor();
  const Node& rs = responder();
  auto rc = [&](Carrier c, uint8_t opcode, uint32_t psn, size_t len) {
    FrameSpec s = base_spec(c, rq, rs, 0xc0de, cur());
    s.ip6.flow_label = 0;
    s.bth.opcode = opcode;
    s.bth.dest_qp = rs.qpn;
    s.bth.psn = psn;
    s.reth = {0x1000, 0x77, static_cast<uint32_t>(len)};
    s.immdt.imm = 0x01020304;
    s.payload = Bytes(pattern(len, 9).data(), len);
    return s;
  };
  for (Carrier c : {Carrier::kUdp4, Carrier::kUdp6}) {
    const std::string p = std::string(carrier_name(c)) + "/";
    add(out, p + "RC_WRITE_FIRST", rc(c, 0x06, 10, 1024));
    add(out, p + "RC_WRITE_MIDDLE", rc(c, 0x07, 11, 1024));
    add(out, p + "RC_WRITE_LAST_IMM", rc(c, 0x09, 12, 13));
    add(out, p + "RC_WRITE_ONLY", rc(c, 0x0A, 13, 64));
    add(out, p + "RC_WRITE_ONLY_IMM", rc(c, 0x0B, 14, 3));
    add(out, p + "RC_SEND_ONLY", rc(c, 0x04, 15, 20));
    add(out, p + "RC_READ_REQUEST", rc(c, 0x0C, 16, 0));
    FrameSpec ack = base_spec(c, rs, rq, 0xc0df, cur());
    ack.ip6.flow_label = 0;
    ack.bth.opcode = 0x11;
    ack.bth.dest_qp = rq.qpn;
    ack.bth.psn = 14;
    ack.aeth = {0x1F, 5};
    add(out, p + "RC_ACKNOWLEDGE", ack);
  }
}

}  // namespace

std::vector<Sample> all_samples(const WireProfile& profile) {
  // Not thread-safe, like the profile registry: samples are built once per process.
  g_profile = &profile;
  std::vector<Sample> out;
  for (Carrier c : all_carriers()) add_mrc(out, c);
  {
    // VLAN-tagged STEV data packet.
    FrameSpec s = base_spec(Carrier::kStev, requestor(), responder(), 0x00120034, cur());
    s.eth.has_vlan = true;
    s.eth.vlan_tci = 0x2064;
    s.bth.opcode = 0xCA;
    s.bth.dest_qp = responder().qpn;
    s.bth.psn = 77;
    s.bth.ts = true;
    s.bth.ack_req = true;
    s.reth = {0x2000, 1, 5};
    s.payload = Bytes(pattern(5, 1).data(), 5);
    add(out, "stev/WRITE_ONLY/vlan", s);
    // Computed (non-zero) UDP checksum is legal too.
    EncodeOptions o;
    o.udp_checksum = UdpChecksumPolicy::kCompute;
    s.eth.has_vlan = false;
    add(out, "stev/WRITE_ONLY/udp-checksum", s, o);
  }
  add_ibta(out);
  {
    // Not RoCE: a UDP datagram to another port, and an ARP frame.
    FrameSpec s = base_spec(Carrier::kUdp6, requestor(), responder(), 0);
    s.roce = false;
    s.udp.sport = 5353;
    s.udp.dport = 5353;
    s.payload = Bytes(pattern(12, 3).data(), 12);
    add(out, "udp6/not-roce", s);
    std::vector<std::byte> arp(42);
    for (size_t i = 0; i < 6; ++i) arp[i] = std::byte{0xFF};
    for (size_t i = 0; i < 6; ++i) arp[6 + i] = static_cast<std::byte>(requestor().mac[i]);
    arp[12] = std::byte{0x08};
    arp[13] = std::byte{0x06};
    out.push_back({"arp", arp});
  }
  g_profile = nullptr;
  return out;
}

PipeFeed::PipeFeed(std::span<const std::byte> bytes) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe: " + std::string(std::strerror(errno)));
  read_fd_ = fds[0];
  ::signal(SIGPIPE, SIG_IGN);
  writer_ = std::thread([bytes, fd = fds[1]] {
    size_t off = 0;
    while (off < bytes.size()) {
      const ssize_t n = ::write(fd, bytes.data() + off, bytes.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // the reader stopped early
      off += static_cast<size_t>(n);
    }
    ::close(fd);
  });
}

PipeFeed::~PipeFeed() {
  ::close(read_fd_);
  writer_.join();
}

std::string PipeFeed::path() const {
  return "/proc/self/fd/" + std::to_string(read_fd_);
}

}  // namespace mrc::wire::samples
