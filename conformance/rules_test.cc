// Proof that every rule can pass and can fail: crafted traces, each a conforming exchange with
// exactly one deviation. A failing trace must trigger its rule and no other error-level rule.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "conformance/fixtures.h"
#include "conformance/internal.h"

namespace mrc::check {
namespace {

using fixtures::DataPkt;
using fixtures::Fate;
using fixtures::kUs;
using fixtures::SackPkt;
using fixtures::Session;
using fixtures::Trace;
using wire::MessagePosition;

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------
void clean_base(Session& s) {
  s.write(3000);       // FIRST MIDDLE LAST
  s.write(100, true);  // ONLY_IMM
  s.write(2048);       // FIRST LAST
  s.write(0);          // ONLY, zero length
}

// Keeps the trace going past the end grace, so that pending obligations are judged.
void tail(Session& s) {
  s.advance(300 * kUs);
  s.write(1024);
}

// A data packet with A=1 that gets no answer at the responder's port 1, and SACKs in which the
// responder reports its port 1 down, sent after that packet or (down_first) before it.
void unanswered_and_port_down(Trace& t, bool down_first) {
  Session s(t);
  t.points[1].port = 1;
  t.points[1].port_on_command_line = true;
  clean_base(s);
  auto report_down = [&] {
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.psv = true;
      k.port_status = 0b10;
      return true;
    });
    s.advance(20 * kUs);
  };
  if (down_first) report_down();
  s.write(
      1024, false, {}, [](size_t, SackPkt&) { return false; }, false);
  if (!down_first) report_down();
  s.advance(100 * kUs);
  tail(s);
}

// After the clean base, a SACK M=10 retires the EV of the next packet; returns that EV.
uint32_t retire_by_sack_m10(Session& s) {
  clean_base(s);
  uint32_t e = 0;
  s.write(
      1024, false, [&](size_t, DataPkt& p, Fate&) { e = p.wev; },
      [](size_t, SackPkt& k) {
        k.m = 2;
        return true;
      });
  return e;
}

// The requester sends on the retired EV again, then on the others.
void bad_ev_reused(Trace& t, size_t n_evs) {
  Session s(t, n_evs);
  const uint32_t e = retire_by_sack_m10(s);
  s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
  s.write(4096);
  tail(s);
}

// Responder SACK for `psn` shortly after now (the time the packet arrives).
void sack_soon(Session& s, uint32_t psn, uint8_t m = 0) {
  const uint64_t saved = s.now;
  s.now += s.one_way + kUs;
  s.sack(psn, m);
  s.now = saved;
}

// The NACK for the packet just sent, at its arrival; the requester reacts one RTT later.
void nack_soon(Session& s, uint32_t psn, uint8_t code, uint32_t entropy, uint8_t m = 0) {
  const uint64_t saved = s.now;
  s.now += s.one_way + kUs;
  s.nack(psn, code, entropy, m);
  s.now = saved;
}

// Retransmits `psn` (not on `not_ev`), has it SACKed, then the transport ACK.
void retx_and_ack(Session& s, uint32_t psn, uint32_t not_ev,
                  const std::function<void(DataPkt&)>& mut = {}) {
  s.retransmit(psn, not_ev, Fate::kDeliver, mut);
  sack_soon(s, psn);
  s.advance(s.gap);
  if (s.cack() >= psn) s.tack(s.cack());
  s.advance(s.gap);
}

// A single data packet of a fresh one-packet message with A=1.
DataPkt only_pkt(Session& s, uint32_t len = 1024) {
  DataPkt p;
  p.psn = s.next_psn++;
  p.pos = MessagePosition::kOnly;
  p.msn = s.msn++;
  p.rqmsn = s.rqmsn;
  p.va = s.va;
  s.va += len + 4096;
  p.dma_len = len;
  p.len = len;
  p.wev = s.next_ev();
  p.ack = true;
  p.seed = static_cast<uint8_t>(p.psn);
  return p;
}

// SRv6 frames: inner header between the node GIDs, outer DA a uSID path, seen at h1, at a
// switch after one shift and at h2 after three.
struct Srv6 {
  Trace& t;
  uint32_t psn = 1000;
  uint16_t msn = 0;
  uint64_t now = 1'000'000;
  std::string bad_da;      // outer DA seen at the switch, when a test wants a wrong shift
  uint32_t rsp_point = 2;  // where the responder's packets are captured as they leave
  wire::FrameSpec last_sack;
  // Optional shapes of the data packets: an SRH whose Segment List[0] is `segment`, either
  // fresh (SL 1, DA = the container; `outer_da` replaces it) or with the container used up (SL 0,
  // DA = the segment); another inner DA; and the UDP checksum.
  std::string segment, outer_da, inner_da;
  bool exhausted = false;
  enum class Csum { kZero, kCompute, kOverOuter } csum = Csum::kZero;
  explicit Srv6(Trace& tr) : t(tr) {
    t.points = {
        {"h1-eth0.pcapng", "h1", 0}, {"s1-eth1.pcapng", "", 0}, {"h2-eth0.pcapng", "h2", 0}};
  }
  static wire::Ipv6Addr a(const char* s) { return *wire::parse_ipv6(s); }
  wire::FrameSpec spec(bool from_req, uint32_t wev, uint8_t dscp) const {
    wire::FrameSpec s;
    s.has_eth = true;
    s.l3 = 6;
    s.has_inner_ip6 = true;
    const auto c = wire::carry_wev(wire::EvFormat::kSrv6, wire::EvStripe::kLowInSport, wev);
    s.inner_ip6.src = a(from_req ? "fd00::1" : "fd00::2");
    s.inner_ip6.dst = a(from_req ? "fd00::2" : "fd00::1");
    s.inner_ip6.flow_label = c.flow_label;
    s.inner_ip6.dscp = dscp;
    s.ip6 = s.inner_ip6;
    s.ip6.src = a(from_req ? "fd01::1" : "fd01::2");
    s.ip6.dst = a(from_req ? "fcbb:0:101:201:301:e02::" : "fcbb:0:102:202:302:e01::");
    s.ip6.hop_limit = 64;
    s.has_udp = true;
    s.udp.sport = c.sport;
    s.udp.dport = wire::kRoceV2Port;
    s.roce = true;
    return s;
  }
  // Adds the frame as seen at h1/s1/h2 (sender first), shifting the DA on the way.
  void emit(const wire::FrameSpec& s, bool from_req) {
    const uint32_t order[3] = {from_req ? 0u : rsp_point, 1u, from_req ? 2u : 0u};
    wire::FrameSpec cur = s;
    for (int hop = 0; hop < 3; ++hop) {
      if (hop == 1) {
        wire::usid_shift(cur.ip6.dst);
        cur.ip6.hop_limit -= 1;
        if (!bad_da.empty() && from_req) cur.ip6.dst = a(bad_da.c_str());
      }
      if (hop == 2) {
        wire::FrameSpec fix = cur;
        fix.ip6.dst = s.ip6.dst;
        for (int k = 0; k < 3; ++k) wire::usid_shift(fix.ip6.dst);
        fix.ip6.hop_limit = static_cast<uint8_t>(s.ip6.hop_limit - 3);
        cur = fix;
      }
      t.add(order[hop], now + static_cast<uint64_t>(hop) * 2 * kUs, encode(cur));
    }
  }
  std::vector<std::byte> encode(const wire::FrameSpec& s) const {
    wire::EncodeOptions eo;
    if (csum == Csum::kCompute) eo.udp_checksum = wire::UdpChecksumPolicy::kCompute;
    std::vector<std::byte> b = wire::encode_frame(s, eo);
    if (csum == Csum::kOverOuter && s.roce && s.bth.opcode != 0xDC) {
      // The mistake of §11.3: the pseudo-header taken from the outer header.
      wire::DecodedFrame d;
      EXPECT_TRUE(wire::decode_frame(wire::as_bytes(b), d));
      d.has_inner_ip6 = false;
      d.has_srh = false;
      const uint16_t c = wire::compute_udp_checksum(d).value_or(0);
      b[d.off_udp + 6] = std::byte(c >> 8);
      b[d.off_udp + 7] = std::byte(c & 0xFF);
    }
    return b;
  }
  void message() {
    const uint32_t wev = 3 + psn % 5;
    wire::FrameSpec d = spec(true, wev, 4);
    d.ip6.ecn = d.inner_ip6.ecn = 2;
    d.bth.opcode = 0xCA;
    d.bth.dest_qp = 0x202;
    d.bth.psn = psn;
    d.bth.ack_req = true;
    d.bth.ts = true;
    d.meth = {0, msn};
    d.tseth.ts16 = static_cast<uint16_t>(now / 128);
    d.reth = {0x100000 + 8192ull * msn, 0xabc001, 64};
    static const std::vector<std::byte> pay(64, std::byte{7});
    d.payload = wire::as_bytes(pay);
    if (!inner_da.empty()) d.inner_ip6.dst = a(inner_da.c_str());
    if (!outer_da.empty()) d.ip6.dst = a(outer_da.c_str());
    if (!segment.empty()) {
      d.has_srh = true;
      d.srh.segments[0] = a(segment.c_str());
      if (exhausted) {
        d.srh.segments_left = 0;
        d.ip6.dst = d.srh.segments[0];
      }
    }
    emit(d, true);
    now += 7 * kUs;
    wire::FrameSpec k = spec(false, 0x9001, 46);
    k.bth.opcode = 0xDC;
    k.bth.dest_qp = 0x101;
    k.bth.psn = psn;
    k.seth.cack_psn = psn;
    k.seth.entropy = wev;
    k.seth.spdcid = 0x202;
    k.seth.dpdcid = 0x101;
    k.seth.sack_offset = 1;
    emit(k, false);
    last_sack = k;
    now += 10 * kUs;
    ++psn;
    ++msn;
  }
  // The responder sends its last SACK again, byte for byte, out of capture point `point`.
  void resend_sack(uint32_t point) {
    const uint32_t saved = rsp_point;
    rsp_point = point;
    emit(last_sack, false);
    rsp_point = saved;
    now += 10 * kUs;
  }
};

std::string srv6_profile(const char* locator) {
  return fixtures::profile(
      std::string(R"({"srv6_locator": ")") + locator + R"(", "captures": null})",
      R"({"ev_format": "srv6", "evs": null, "timeout": null})");
}

// ---------------------------------------------------------------------------------------------
// Per-plane EVs, port status, reverse EV probes, CC-002
// ---------------------------------------------------------------------------------------------
// EVs 0x50100.. on two planes: `per_plane[0]` EVs on port 1, then `per_plane[1]` on port 2.
std::string two_plane_evs(int on_port1, int on_port2) {
  // Appends only: GCC 12 at -O3 warns (-Wrestrict) on "literal" + std::string temporaries.
  std::string evs = "[";
  for (int i = 0; i < on_port1 + on_port2; ++i) {
    if (i) evs += ",";
    evs += R"({"wev": )";
    evs += std::to_string(0x50100 + i);
    evs += R"(, "port": )";
    evs += i < on_port1 ? "1}" : "2}";
  }
  evs += "]";
  return evs;
}

// Two planes in the profile; the captures carry no port (MRC-EV-005 has no say).
void two_planes(Trace& t, int on_port1, int on_port2, const std::string& extra_tol = "") {
  t.points = {{"h1-eth0.pcapng", "h1", 0}, {"h2-eth0.pcapng", "h2", 0}};
  std::string top = R"({"captures": null, "tolerances": {"end_grace_ns": 200000,
      "reaction_ns": 2000, "t_ack_max_ns": 50000, "t_probe_ns": 500000, "t_skip_ns": 2000000,
      "dedup_window_ns": 1000000, "ep_timeout_ns": 1000000, "decision_lookahead_ns": 100000,
      "t_port_ns": 20000)";
  top += extra_tol;
  top += "}}";
  std::string qp = R"({"evs": )";
  qp += two_plane_evs(on_port1, on_port2);
  qp += "}";
  t.profile = fixtures::profile(top, qp);
}

// `n` packets of new data, four per message.
void stream(Session& s, int n) {
  for (int i = 0; i < n; i += 4) s.write(4096);
}

// The responder's node tells the requester's which of its ports are usable.
void port_update(Session& s, uint16_t req_id, uint32_t mask) {
  Session::EpOpts o;
  o.op = 0;
  o.reverse = true;
  o.port_status_mask = mask;
  s.ep_probe(req_id, 0x9003, o);
  s.advance(20 * kUs);
}

// The requester leaves out EVs 0x50100+first .. +last.
void avoid_range(Session& s, int first, int last, bool on) {
  for (int i = first; i <= last; ++i) {
    if (on)
      s.avoid.insert(0x50100u + static_cast<uint32_t>(i));
    else
      s.avoid.erase(0x50100u + static_cast<uint32_t>(i));
  }
}

// A requester whose data the responder answers from the start, with reverse EV probes on
// plane 1 every `probe_every` messages (0: none). Both captures are on port 1.
void reverse_probes(Trace& t, int probe_every) {
  t.points = {{"h1-eth0.pcapng", "h1", 1}, {"h2-eth0.pcapng", "h2", 1}};
  t.profile = fixtures::profile(
      R"({"captures": {"h1-eth0.pcapng": {"node": "h1", "port": 1},
                       "h2-eth0.pcapng": {"node": "h2", "port": 1}},
          "tolerances": {"end_grace_ns": 200000, "reaction_ns": 2000, "t_ack_max_ns": 50000,
          "t_probe_ns": 500000, "t_skip_ns": 2000000, "dedup_window_ns": 1000000,
          "ep_timeout_ns": 1000000, "decision_lookahead_ns": 100000,
          "t_reverse_probe_ns": 100000}})");
  Session s(t);
  uint16_t id = 100;
  for (int m = 0; m < 60; ++m) {
    s.write(1024);
    if (probe_every > 0 && m % probe_every == 0) {
      Session::EpOpts o;
      o.reverse = true;
      s.ep_probe(id++, 0x9100u + static_cast<uint32_t>(m % 4), o);
    }
  }
  tail(s);
}

// CC profile numbers that make a CE-echoing SACK one RTT (7 us) after its trigger count as
// congested: delay 6 us >= target 2 us + reaction 2 us.
void cc_profile(Trace& t) {
  t.profile = fixtures::profile("{}", R"({"cc": {"base_rtt_ns": 1000, "target_delay_ns": 2000}})");
}

// A burst of `n` packets of which only the last is SACKed (its A=1 needs an answer).
void burst(Session& s, int n) {
  s.write(static_cast<uint32_t>(n) * s.pmtu, false, {},
          [n](size_t i, SackPkt&) { return i + 1 == static_cast<size_t>(n); });
}

// SRv6 EVs 3..7 expanded from compact uSIDs under a 32-bit locator field and four 16-bit
// uSID fields: compact 0101020103010e02 -> fcbb:0:101:201:301:e02:: (the DA Srv6 sends).
std::string srv6_expansion_profile(const std::string& wev5_compact) {
  std::string qp = R"({"ev_format": "srv6", "timeout": null, "evs": [)";
  for (int w = 3; w <= 7; ++w) {
    if (w > 3) qp += ",";
    qp += R"({"wev": )";
    qp += std::to_string(w);
    qp += R"(, "port": 1, "compact": ")";
    qp += w == 5 ? wev5_compact : std::string("0101020103010e02");
    qp += "\"}";
  }
  qp += R"(], "ev_expansion": {"format_widths": [32, 16, 16, 16, 16, 16, 16],
            "fields": [{"width": 32, "init_val": 4240113664},
                       {"width": 16, "mask": 65535}, {"width": 16, "mask": 65535},
                       {"width": 16, "mask": 65535}, {"width": 16, "mask": 65535}]}})";
  return fixtures::profile(R"({"srv6_locator": "fcbb::", "captures": null})", qp);
}

// ---------------------------------------------------------------------------------------------
// Scenarios
// ---------------------------------------------------------------------------------------------
struct Scenario {
  std::string name;
  std::string expect;  // rule that must fail (error) or warn (warning); "" = fully conforming
  std::function<void(Trace&)> build;
};

std::vector<Scenario> scenarios() {
  std::vector<Scenario> v;
  auto add = [&](std::string name, std::string expect, std::function<void(Trace&)> b) {
    v.push_back({std::move(name), std::move(expect), std::move(b)});
  };

  // A conforming exchange that exercises CE echo and SKIP, a trim with its NACK and
  // retransmission, a loss recovered by timeout (with the injector's decision), EV retirement,
  // a reliability probe bringing the EV back, and an endpoint EV probe.
  add("clean", "", [](Trace& t) {
    Session s(t);
    clean_base(s);
    // ECN: the responder echoes CE (M=01); the requester skips that EV for a rotation.
    s.write(2048, false, [](size_t i, DataPkt&, Fate& f) {
      if (i == 0) f = Fate::kCe;
    });
    s.write(4096);
    // Trim: NACK TRIMMED, retransmission on another EV.
    uint32_t trimmed = 0, trimmed_ev = 0;
    s.write(2048, false, [&](size_t i, DataPkt& p, Fate& f) {
      if (i == 1) {
        f = Fate::kTrim;
        trimmed = p.psn;
        trimmed_ev = p.wev;
      }
    });
    s.nack(trimmed, 0x01, trimmed_ev);
    s.advance(5 * kUs);
    s.avoid.insert(trimmed_ev);
    retx_and_ack(s, trimmed, trimmed_ev);
    s.write(3072);
    s.avoid.erase(trimmed_ev);
    // Loss without trim: timeout retransmission, EV retired until a probe succeeds.
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    s.decision(s.now + 1 * kUs, "drop", p.psn, 0xCA, p.wev);
    s.advance(40 * kUs);
    s.avoid.insert(p.wev);
    retx_and_ack(s, p.psn, p.wev);
    s.write(2048);
    s.probe(1, p.wev, true, 0);
    s.advance(20 * kUs);
    s.avoid.erase(p.wev);
    s.write(4096);
    s.ep_probe(7, 0x00050105);
    s.advance(20 * kUs);
    s.write(1024, true);
    tail(s);
  });
  // A QP the responder fails with UNEXP_EVENT: the requester goes quiet (data already on its
  // way within the reaction time is allowed).
  add("clean-fatal", "", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    nack_soon(s, p.psn, 0x19, p.wev);
    s.advance(s.one_way * 2 + kUs + 1 * kUs);  // NACK reached the requester 1 us ago
    DataPkt q = only_pkt(s);
    s.send(q);
    sack_soon(s, q.psn);
    s.advance(400 * kUs);
    s.ep_probe(9, 0x00050101);
  });
  add("clean-srv6", "", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    for (int i = 0; i < 6; ++i) x.message();
  });
  // A node with a capture per port sends the same SACK twice through different ports, after the
  // first one arrived: two packets, not one seen upstream of where it was already seen.
  add("srv6-same-sack-other-port", "", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    t.points.push_back({"h2-eth1.pcapng", "h2", 1});
    x.message();
    x.message();
    x.resend_sack(3);
    x.message();
  });

  // ------------------------------------------------------------------------------- framing
  add("icrc", "MRC-FRM-001", [](Trace& t) {
    Session s(t);
    clean_base(s);
    SackPkt k;
    k.cack = s.cack();
    k.ack_off = 0;
    k.entropy = s.rx_wev[k.cack];
    k.rcvd_bytes = static_cast<uint32_t>((s.rx_nominal + 255) / 256);
    auto f = s.sack_frame(k);
    f[14 + 40 + 8 + 40] ^= std::byte{0x11};  // CC_STATE.ts_echo: covered by the ICRC
    t.add(1, s.now, f);
    t.add(0, s.now + s.one_way, f);
    s.advance(s.gap);
    tail(s);
  });
  add("udp-port", "MRC-FRM-002", [](Trace& t) {
    Session s(t);
    clean_base(s);
    auto f = s.data_frame(only_pkt(s), s.now);
    s.next_psn--;  // not a RoCE packet: the PSN was not consumed
    s.msn--;
    f[14 + 40 + 3] = std::byte{0xB8};  // dport 4791 -> 4792
    t.add(0, s.now, f);
    s.advance(s.gap);
    tail(s);
  });
  add("unknown-opcode", "MRC-FRM-003", [](Trace& t) {
    Session s(t);
    clean_base(s);
    auto f = s.tack_frame(s.cack());
    f[14 + 40 + 8] = std::byte{0xE5};
    wire::DecodedFrame d;
    wire::decode_frame(wire::as_bytes(f), d);
    ASSERT_TRUE(wire::fix_icrc(wire::MutBytes(f.data(), f.size()), d));  // only the opcode is wrong
    t.add(1, s.now, f);
    s.advance(s.gap);
    tail(s);
  });
  add("read-opcode", "MRC-FRM-004", [](Trace& t) {
    Session s(t);
    clean_base(s);
    wire::FrameSpec r;
    r.has_eth = true;
    r.l3 = 6;
    r.ip6.src = s.req;
    r.ip6.dst = s.rsp;
    r.has_udp = true;
    r.udp.sport = 0x0100;
    r.roce = true;
    r.bth.opcode = 0x0C;  // RC RDMA READ request
    r.bth.dest_qp = s.rsp_qpn;
    r.bth.psn = 5000;
    r.reth = {0x1000, 0xabc001, 4096};
    t.add(0, s.now, wire::encode_frame(r));
    s.advance(s.gap);
    tail(s);
  });
  add("pkey", "MRC-FRM-005", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.pkey = 0x7FFF; });
    tail(s);
  });
  add("pad", "MRC-FRM-006", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(2047, false, [](size_t i, DataPkt& p, Fate&) {
      if (i == 1) p.pad = 0;
    });
    tail(s);
  });
  add("truncated-sack", "MRC-FRM-007", [](Trace& t) {
    Session s(t);
    clean_base(s);
    SackPkt k;
    k.cack = s.cack();
    k.entropy = s.rx_wev[k.cack];
    auto f = s.sack_frame(k);
    f.resize(f.size() - 8);
    const uint16_t ipl = static_cast<uint16_t>(f.size() - 14 - 40);
    f[14 + 4] = std::byte(ipl >> 8);
    f[14 + 5] = std::byte(ipl & 0xFF);
    f[14 + 40 + 4] = std::byte(ipl >> 8);
    f[14 + 40 + 5] = std::byte(ipl & 0xFF);
    t.add(1, s.now, f);
    s.advance(s.gap);
    tail(s);
  });
  add("reserved-bit", "MRC-FRM-008", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.rsvd_bit = true; });
    tail(s);
  });
  add("srv6-locator", "MRC-FRM-009", [](Trace& t) {
    t.profile = srv6_profile("fcbc::");
    Srv6 x(t);
    for (int i = 0; i < 3; ++i) x.message();
  });
  // SRH: a fresh one (DA in the locator, SL 1) and one whose container is used up (SL 0, DA
  // loaded from Segment List[0], another block); UDP checksums computed as §11.3 says.
  add("srv6-srh-and-checksums", "", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    x.csum = Srv6::Csum::kCompute;
    x.segment = "fcbc:0:501:601::";
    x.message();
    x.message();
    x.exhausted = true;
    x.message();
    x.message();
  });
  // An SRH with Segments Left 1 (nothing loaded from the list yet) and a DA of another block.
  add("srv6-srh-locator", "MRC-FRM-009", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    x.segment = "fcbc:0:501:601::";
    x.message();
    x.outer_da = "fcbc:0:101:201:301:e02::";
    x.message();
    x.outer_da.clear();
    x.message();
  });
  // Data to one of h2's port addresses instead of its GID.
  add("srv6-inner-da", "MRC-FRM-012", [](Trace& t) {
    t.profile = fixtures::profile(
        R"({"srv6_locator": "fcbb::", "captures": null, "nodes": [
             {"name": "h1", "addrs": ["fd00::1", "fd01::1"]},
             {"name": "h2", "addrs": ["fd00::2", "fd01::2"]}]})",
        R"({"ev_format": "srv6", "evs": null, "timeout": null})");
    Srv6 x(t);
    x.message();
    x.inner_da = "fd01::2";
    x.message();
    x.inner_da.clear();
    x.message();
  });
  // A UDP checksum over the outer header: it verifies nowhere (§11.3).
  add("srv6-udp-checksum", "MRC-FRM-013", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    x.message();
    x.csum = Srv6::Csum::kOverOuter;
    x.message();
    x.csum = Srv6::Csum::kCompute;
    x.message();
  });
  add("srv6-shift", "MRC-FRM-010", [](Trace& t) {
    t.profile = srv6_profile("fcbb::");
    Srv6 x(t);
    x.message();
    x.bad_da = "fcbb:0:999::";
    x.message();
    x.bad_da.clear();
    x.message();
  });
  add("trim-too-short", "MRC-FRM-011", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p;
    s.write(2048, false, [&](size_t i, DataPkt& q, Fate& f) {
      if (i == 0) {
        p = q;
        f = Fate::kDrop;  // replaced by the short trimmed copy below
      }
    });
    auto f = s.data_frame(p, s.now, true);
    f.resize(f.size() - 4);  // BTH+METH only: TSETH cut
    const uint16_t ipl = static_cast<uint16_t>(f.size() - 14 - 40);
    f[14 + 4] = std::byte(ipl >> 8);
    f[14 + 5] = std::byte(ipl & 0xFF);
    f[14 + 40 + 4] = std::byte(ipl >> 8);
    f[14 + 40 + 5] = std::byte(ipl & 0xFF);
    t.add(1, s.now, f);
    tail(s);
  });

  // ------------------------------------------------------------------------------- EVs
  add("no-spray", "MRC-EV-001", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.evs = {0x00050101};
    s.write(20 * 1024);
    tail(s);
  });
  add("flow-label-high-bits", "MRC-EV-003", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.fl_high = 1; });
    tail(s);
  });
  add("ev-outside-profile", "MRC-EV-004", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.wev = 0x00050777; });
    tail(s);
  });
  add("ev-wrong-port", "MRC-EV-005", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.wev = 0x00050300; });
    tail(s);
  });
  add("ev-denied", "MRC-EV-006", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"denied_evs": [327943]})");  // 0x00050107
    Session s(t);
    clean_base(s);
    s.write(8192);
    tail(s);
  });
  add("skip-ignored", "MRC-EV-008", [](Trace& t) {
    Session s(t);
    clean_base(s);
    uint32_t e = 0;
    s.write(1024, false, [&](size_t, DataPkt& p, Fate& f) {
      f = Fate::kCe;
      e = p.wev;
    });
    s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
    tail(s);
  });
  add("bad-ev-reused", "MRC-EV-009", [](Trace& t) { bad_ev_reused(t, 8); });
  // Two EVs: retiring one leaves one, which is the floor (active / 4, at least 1), not below it.
  add("bad-ev-reused-two-evs", "MRC-EV-009", [](Trace& t) { bad_ev_reused(t, 2); });
  add("bad-ev-not-probed", "MRC-EV-010", [](Trace& t) {
    Session s(t);
    const uint32_t e = retire_by_sack_m10(s);
    s.avoid.insert(e);
    for (int i = 0; i < 10; ++i) {
      s.write(1024);
      s.advance(60 * kUs);
    }
  });
  add("retx-same-ev", "MRC-EV-013", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    nack_soon(s, p.psn, 0x07, p.wev);
    s.advance(12 * kUs);
    retx_and_ack(s, p.psn, 0, [&](DataPkt& q) { q.wev = p.wev; });
    tail(s);
  });

  // ------------------------------------------------------------------------------- requester
  add("opcode-sequence", "MRC-REQ-001", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt first = only_pkt(s, 2048);
    first.pos = MessagePosition::kFirst;
    first.len = 1024;
    first.ack = false;
    s.send(first);
    sack_soon(s, first.psn);
    s.advance(s.gap);
    s.write(1024);  // starts a new message while the previous one never ended
    tail(s);
  });
  add("va-progression", "MRC-REQ-002", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(3000, false, [](size_t i, DataPkt& p, Fate&) {
      if (i == 1) p.va += 8;
    });
    tail(s);
  });
  add("msn-not-incremented", "MRC-REQ-003", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false,
            [&](size_t, DataPkt& p, Fate&) { p.msn = static_cast<uint16_t>(s.msn - 1); });
    tail(s);
  });
  add("rtx-on-new-psn", "MRC-REQ-004", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.rtx = true; });
    tail(s);
  });
  add("retx-content-changed", "MRC-REQ-005", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    nack_soon(s, p.psn, 0x07, p.wev);
    s.advance(12 * kUs);
    retx_and_ack(s, p.psn, p.wev, [](DataPkt& q) { q.seed ^= 0x55; });
    tail(s);
  });
  add("no-ack-on-last", "MRC-REQ-006", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(2048, false, [](size_t i, DataPkt& p, Fate&) {
      if (i == 1) p.ack = false;
    });
    tail(s);
  });
  add("retx-dscp-on-first", "MRC-REQ-007", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.dscp = s.dscp.trimmable_retx; });
    tail(s);
  });
  add("mpr-window", "MRC-REQ-008", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"mpr": 1, "mpr_dest": 1})");
    Session s(t);
    uint32_t oor = 0, oor_ev = 0;
    s.write(
        140 * 1024, false,
        [&](size_t i, DataPkt& p, Fate&) {
          if (i == 130) {
            oor = p.psn;
            oor_ev = p.wev;
          }
        },
        [&](size_t i, SackPkt&) {
          if (i == 130) s.nack(oor, 0x0B, oor_ev);  // responder: beyond its window
          return i == 0 || i == 139;
        });
    tail(s);
  });
  // A transport ACK moves the window like a SACK's cack: the same 140 packets stay within it.
  add("mpr-window-moved-by-tack", "", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"mpr": 1, "mpr_dest": 1})");
    Session s(t);
    uint32_t acked = 0;
    s.write(
        140 * 1024, false,
        [&](size_t i, DataPkt& p, Fate&) {
          if (i == 20) acked = p.psn;
        },
        [&](size_t i, SackPkt&) {
          if (i == 20) s.tack(acked, 0x1F);
          return i == 0 || i == 139;
        });
    tail(s);
  });
  add("wimm-exceeded", "MRC-REQ-009", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"max_wimm_dest": 2})");
    Session s(t);
    clean_base(s);
    for (int i = 0; i < 3; ++i) s.write(100, true, {}, {}, false);
    s.tack(s.cack());
    tail(s);
  });
  add("no-tseth", "MRC-REQ-010", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.ts = false; });
    tail(s);
  });
  add("nack-not-retransmitted", "MRC-REQ-011", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    s.received.erase(p.psn);  // the responder had no buffer for it
    nack_soon(s, p.psn, 0x07, p.wev);
    s.advance(s.gap);
    tail(s);
  });
  add("data-after-fatal", "MRC-REQ-012", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    nack_soon(s, p.psn, 0x19, p.wev);
    s.advance(40 * kUs);
    s.write(1024);
  });
  // A NACK UNEXP_EVENT and a NAK about PSNs never sent (stale or spoofed: a QPN and peer GID
  // are easy to learn) end nothing: a requester that checks them keeps sending, and conforms.
  add("fatal-nack-for-a-psn-never-sent", "", [](Trace& t) {
    Session s(t);
    clean_base(s);
    const uint32_t never = s.next_psn + 1000;
    s.nack(never, 0x19, 0x1234);
    s.advance(5 * kUs);
    s.tack(never + 1, 0x63);
    s.advance(s.one_way + 5 * kUs);
    s.write(2048);
    tail(s);
  });
  add("early-timeout", "MRC-REQ-013", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    s.advance(12 * kUs);  // T = 32.768 us
    retx_and_ack(s, p.psn, p.wev);
    tail(s);
  });
  // The timer resends a trimmed packet just as its NACK arrives; the requester reads the NACK
  // after that copy left and resends again: the NACK is the evidence, not an early timer.
  add("nack-read-after-the-timer", "", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kTrim);
    s.advance(30 * kUs);
    s.nack(p.psn, 0x01, p.wev);  // reaches the requester one_way later
    s.advance(s.one_way + kUs);
    s.retransmit(p.psn, p.wev, Fate::kDrop);
    s.advance(10 * kUs);
    retx_and_ack(s, p.psn, p.wev);
    tail(s);
  });
  add("retry-budget", "MRC-REQ-014", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"retry": {"linear": 1, "exp": 1}})");
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    uint32_t last_ev = p.wev;
    for (int k = 0; k < 2; ++k) {
      s.advance(40 * kUs);
      s.avoid.insert(last_ev);
      s.retransmit(p.psn, last_ev, Fate::kDrop);
      last_ev = s.sent[p.psn].wev;
    }
    s.advance(40 * kUs);
    s.avoid.insert(last_ev);
    retx_and_ack(s, p.psn, last_ev);
    s.write(1024);
  });
  add("drop-not-retransmitted", "MRC-REQ-015", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    s.decision(s.now + kUs, "drop", p.psn, 0xCA, p.wev);
    s.advance(s.gap);
    tail(s);
  });

  // ------------------------------------------------------------------------------- responder
  add("sack-psn", "MRC-RSP-001", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.psn = static_cast<int>(k.cack + 1);
      return true;
    });
    tail(s);
  });
  add("cack-decreases", "MRC-RSP-002", [](Trace& t) {
    Session s(t);
    clean_base(s);
    const uint32_t old = s.cack();
    s.write(2048);
    s.sack(old, 0, [&](SackPkt& k) {
      k.cack = old;
      k.ack_off = 0;
      k.entropy = s.rx_wev[old];
      k.bitmap = 0;
      k.ooo = 0;
    });
    s.advance(s.gap);
    tail(s);
  });
  add("sack-of-lost-psn", "MRC-RSP-003", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    s.received.insert(p.psn);  // the responder claims it
    const uint64_t saved = s.now;
    s.now += s.one_way + kUs;
    s.sack(p.psn, 0, [&](SackPkt& k) { k.entropy = p.wev; });
    s.now = saved + s.gap;
    tail(s);
  });
  add("sack-entropy", "MRC-RSP-004", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.entropy ^= 0x1;
      return true;
    });
    tail(s);
  });
  add("sack-m-invalid", "MRC-RSP-005", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.m = 3;
      return true;
    });
    tail(s);
  });
  add("ce-not-echoed", "MRC-RSP-006", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(
        3072, false,
        [](size_t i, DataPkt&, Fate& f) {
          if (i == 0) f = Fate::kCe;
        },
        [](size_t i, SackPkt&) { return i != 0; });
    for (int i = 0; i < 40; ++i) s.write(1024);
  });
  add("rcvd-bytes-decrease", "MRC-RSP-007", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.rcvd_bytes = 0;
      return true;
    });
    tail(s);
  });
  add("sack-mpr-without-dynamic", "MRC-RSP-008", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.mpr = 4;
      return true;
    });
    tail(s);
  });
  add("ack-request-ignored", "MRC-RSP-009", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(
        1024, false, {}, [](size_t, SackPkt&) { return false; }, false);
    s.advance(100 * kUs);
    tail(s);
  });
  // The responder loses the port the packet came in on before it answers, and says so.
  add("ack-lost-with-port", "", [](Trace& t) { unanswered_and_port_down(t, false); });
  // Down before the packet arrived (a report can only lag): the packet is still owed an answer.
  add("ack-ignored-port-down-before", "MRC-RSP-009",
      [](Trace& t) { unanswered_and_port_down(t, true); });
  add("tack-syndrome", "MRC-RSP-010", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, {}, false);
    s.tack(s.cack(), 0x00);
    s.advance(s.gap);
    tail(s);
  });
  add("tack-covers-lost-psn", "MRC-RSP-010", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p, Fate::kDrop);
    s.advance(s.gap);
    s.tack(p.psn);  // "placed" a PSN that never arrived
    s.advance(s.gap);
    tail(s);
  });
  add("sack-dscp", "MRC-RSP-011", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.dscp = 0;
      return true;
    });
    tail(s);
  });
  add("nack-code", "MRC-RSP-012", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(1024);
    s.nack(s.cack(), 0x05, s.rx_wev[s.cack()]);
    s.advance(s.gap);
    tail(s);
  });
  add("trim-not-nacked", "MRC-RSP-013", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.write(2048, false, [](size_t i, DataPkt&, Fate& f) {
      if (i == 0) f = Fate::kTrim;
    });
    tail(s);
  });
  add("oor-nack-in-window", "MRC-RSP-014", [](Trace& t) {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    s.received.erase(p.psn);
    nack_soon(s, p.psn, 0x0B, p.wev);
    s.advance(12 * kUs);
    retx_and_ack(s, p.psn, p.wev);
    tail(s);
  });

  // ------------------------------------------------------------------------------- probes
  add("probe-psn", "MRC-PRB-001", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.probe(3, 0x00050101, true, 0, 5);
    s.advance(20 * kUs);
    tail(s);
  });
  add("probe-unanswered", "MRC-PRB-002", [](Trace& t) {
    Session s(t);
    clean_base(s);
    s.probe(3, 0x00050101, false);
    s.advance(20 * kUs);
    tail(s);
  });
  // The same, seen only at the requester with no injector log: the probe or its answer may have
  // been lost on the way, so the missing answer proves nothing.
  add("probe-unanswered-upstream-only", "", [](Trace& t) {
    t.points = {{"h1-eth0.pcapng", "h1", 1}, {"x-eth0.pcapng", "", 0}};
    Session s(t);
    clean_base(s);
    s.probe(3, 0x00050101, false);
    s.advance(20 * kUs);
    tail(s);
  });
  add("ep-dest-qp", "MRC-PRB-003", [](Trace& t) {
    Session s(t);
    clean_base(s);
    Session::EpOpts o;
    o.dest_qp = 3;
    s.ep_probe(11, 0x00050102, o);
    s.advance(20 * kUs);
    tail(s);
  });
  add("ep-two-responses", "MRC-PRB-004", [](Trace& t) {
    Session s(t);
    clean_base(s);
    Session::EpOpts o;
    o.responses = 2;
    s.ep_probe(11, 0x00050102, o);
    s.advance(20 * kUs);
    tail(s);
  });
  add("ep-req-id-reuse", "MRC-PRB-005", [](Trace& t) {
    Session s(t);
    clean_base(s);
    Session::EpOpts o;
    o.responses = 0;
    s.ep_probe(11, 0x00050102, o);
    s.advance(20 * kUs);
    s.ep_probe(11, 0x00050103);
    s.advance(20 * kUs);
    tail(s);
  });
  add("ep-response-dscp", "MRC-PRB-006", [](Trace& t) {
    Session s(t);
    clean_base(s);
    Session::EpOpts o;
    o.rsp_dscp = 0;
    s.ep_probe(11, 0x00050102, o);
    s.advance(20 * kUs);
    tail(s);
  });
  add("ep-entropy", "MRC-PRB-008", [](Trace& t) {
    Session s(t);
    clean_base(s);
    Session::EpOpts o;
    o.entropy = 0x00050104;
    s.ep_probe(11, 0x00050102, o);
    s.advance(20 * kUs);
    tail(s);
  });

  // ------------------------------------------------------------------------------- CC
  add("cwnd-exceeded", "MRC-CC-001", [](Trace& t) {
    t.profile = fixtures::profile("{}", R"({"max_cwnd": 4096})");
    Session s(t);
    s.write(8192, false, {}, [](size_t i, SackPkt&) { return i == 7; });
    tail(s);
  });

  // ------------------------------------------------- per-plane EVs, port status, reverse probes
  add("srv6-da-expansion", "", [](Trace& t) {
    t.profile = srv6_expansion_profile("0101020103010e02");
    Srv6 x(t);
    for (int i = 0; i < 6; ++i) x.message();
  });
  add("srv6-da-not-expansion", "MRC-EV-007", [](Trace& t) {
    // WEV 5 expands to another T1 uSID (0202): the packets on it carry the wrong path.
    t.profile = srv6_expansion_profile("0101020203010e02");
    Srv6 x(t);
    for (int i = 0; i < 6; ++i) x.message();
  });
  add("port-status-obeyed", "", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    clean_base(s);
    port_update(s, 20, 0b010);  // port 2 down
    avoid_range(s, 4, 7, true);
    stream(s, 24);
    // SACKs repeat it; then port 2 comes back and plane 2 carries data again.
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.psv = true;
      k.port_status = 0b01;
      return true;
    });
    s.advance(30 * kUs);  // data already queued within t_port of a signal is allowed
    port_update(s, 21, 0b110);
    avoid_range(s, 4, 7, false);
    stream(s, 24);
    tail(s);
  });
  // Plane 2 reported down leaves one usable EV: a long run on it is not a spraying fault.
  add("spray-on-the-only-ev-up", "", [](Trace& t) {
    two_planes(t, 1, 7);
    Session s(t);
    clean_base(s);
    port_update(s, 20, 0b010);  // port 2 down
    avoid_range(s, 1, 7, true);
    s.advance(30 * kUs);
    stream(s, 32);
    tail(s);
  });
  add("port-status-ignored", "MRC-EV-012", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    clean_base(s);
    port_update(s, 20, 0b010);
    s.advance(30 * kUs);
    stream(s, 16);  // still on plane 2
    tail(s);
  });
  add("sack-port-status-ignored", "MRC-EV-012", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    clean_base(s);
    s.write(1024, false, {}, [](size_t, SackPkt& k) {
      k.psv = true;
      k.port_status = 0b01;
      return true;
    });
    s.advance(30 * kUs);
    stream(s, 16);
    tail(s);
  });
  add("planes-balanced", "", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    stream(s, 600);
    tail(s);
  });
  add("planes-unbalanced", "MRC-EV-002", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    avoid_range(s, 6, 7, true);  // plane 1 uses 4 EVs, plane 2 only 2
    stream(s, 600);
    tail(s);
  });
  add("replacement-same-plane", "", [](Trace& t) {
    two_planes(t, 4, 4);  // per plane: three active EVs and one backup
    Session s(t);
    avoid_range(s, 3, 3, true);
    avoid_range(s, 7, 7, true);
    stream(s, 300);
    avoid_range(s, 0, 0, true);  // EV 0x50100 (plane 1) retired, backup 0x50103 (plane 1)
    avoid_range(s, 3, 3, false);
    stream(s, 540);
    tail(s);
  });
  add("replacement-other-plane", "MRC-EV-011", [](Trace& t) {
    two_planes(t, 4, 4);
    Session s(t);
    avoid_range(s, 3, 3, true);
    avoid_range(s, 7, 7, true);
    stream(s, 300);
    avoid_range(s, 0, 0, true);  // EV 0x50100 (plane 1) retired, replaced by 0x50107 (plane 2)
    avoid_range(s, 7, 7, false);
    stream(s, 540);
    tail(s);
  });
  add("reverse-probes", "", [](Trace& t) { reverse_probes(t, 3); });
  add("reverse-probes-missing", "MRC-PRB-007", [](Trace& t) { reverse_probes(t, 0); });
  add("cc-no-growth-on-ecn", "", [](Trace& t) {
    cc_profile(t);
    Session s(t);
    clean_base(s);
    s.write(2048, false, [](size_t, DataPkt&, Fate& f) { f = Fate::kCe; });
    s.write(1024);  // a SACK without CE: growth is allowed after it
    burst(s, 6);
    tail(s);
  });
  add("cc-growth-on-ecn", "MRC-CC-002", [](Trace& t) {
    cc_profile(t);
    Session s(t);
    clean_base(s);
    s.write(2048, false, [](size_t, DataPkt&, Fate& f) { f = Fate::kCe; });
    burst(s, 6);
    tail(s);
  });
  return v;
}

std::string failing_summary(const Report& r) {
  std::string s;
  for (const auto& rr : r.results) {
    if (rr.status != Status::kFail && rr.status != Status::kWarn) continue;
    s += std::string(status_name(rr.status)) + " " + std::string(rr.rule->id) + ":";
    for (const auto& e : rr.evidence)
      s += "\n    frame " + std::to_string(e.frame) + ": " + e.message;
    s += "\n";
  }
  return s;
}

void PrintTo(const Scenario& s, std::ostream* os) {
  *os << s.name << " -> " << (s.expect.empty() ? "clean" : s.expect);
}

class RuleScenario : public ::testing::TestWithParam<Scenario> {};

TEST_P(RuleScenario, TriggersExactlyItsRule) {
  const Scenario& sc = GetParam();
  Trace t;
  sc.build(t);
  const Report r = fixtures::run(t);
  const auto fails = fixtures::with_status(r, Status::kFail, true);
  const RuleInfo* want = sc.expect.empty() ? nullptr : find_rule(sc.expect);
  if (!want) {
    ASSERT_TRUE(sc.expect.empty()) << "unknown rule " << sc.expect;
    EXPECT_TRUE(fails.empty()) << failing_summary(r);
    EXPECT_EQ(r.count(Status::kWarn), 0u) << failing_summary(r);
    EXPECT_EQ(r.exit_code(), 0);
  } else if (want->severity == Severity::kError) {
    EXPECT_EQ(fails, std::set<std::string>{sc.expect}) << failing_summary(r);
    EXPECT_EQ(r.exit_code(), 1);
  } else {
    EXPECT_TRUE(fails.empty()) << failing_summary(r);
    EXPECT_EQ(r.result(sc.expect)->status, Status::kWarn) << failing_summary(r);
    EXPECT_EQ(r.exit_code(), 0);
    EXPECT_EQ(r.exit_code(true), 1);
  }
  if (want) {
    const RuleResult* rr = r.result(sc.expect);
    ASSERT_FALSE(rr->evidence.empty());
    EXPECT_FALSE(rr->evidence[0].message.empty());
  }
}

// The same trace through files (pcapng per capture point, profile, decision log) gives the
// same statuses as the in-memory run.
TEST_P(RuleScenario, FilesGiveTheSameVerdicts) {
  const Scenario& sc = GetParam();
  Trace t;
  sc.build(t);
  const Report a = fixtures::run(t);
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_" + sc.name;
  const Report b = fixtures::run_files(t, dir);
  ASSERT_EQ(a.results.size(), b.results.size());
  for (size_t i = 0; i < a.results.size(); ++i)
    EXPECT_EQ(status_name(a.results[i].status), status_name(b.results[i].status))
        << a.results[i].rule->id << "\nfiles:\n"
        << failing_summary(b);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(All, RuleScenario, ::testing::ValuesIn(scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& i) {
                           std::string n = i.param.name;
                           for (char& c : n)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

// Every catalogued rule has a scenario where it passes and one where it fails (or warns). A rule
// without an evaluator (never pass) fails this test.
TEST(RuleCoverage, EveryRuleCanPassAndFail) {
  std::map<std::string, std::set<Status>> seen;
  for (const auto& sc : scenarios()) {
    Trace t;
    sc.build(t);
    const Report r = fixtures::run(t);
    for (const auto& rr : r.results) seen[std::string(rr.rule->id)].insert(rr.status);
  }
  for (const auto& rule : rule_catalogue()) {
    const auto& st = seen[std::string(rule.id)];
    EXPECT_TRUE(rule.implemented) << rule.id << " has no evaluator";
    EXPECT_TRUE(st.count(Status::kPass)) << rule.id << " never passes in any scenario";
    const Status bad = rule.severity == Severity::kError ? Status::kFail : Status::kWarn;
    EXPECT_TRUE(st.count(bad)) << rule.id << " never fails in any scenario";
  }
}

// The conforming scenarios of the per-plane, reverse-probe and CC-002 rules judge their rule
// (pass, not merely not-applicable), and the other scenarios leave them alone.
TEST(RuleCoverage, PlaneAndCcScenariosJudgeTheirRule) {
  const std::map<std::string, std::string> passes = {
      {"srv6-da-expansion", "MRC-EV-007"}, {"port-status-obeyed", "MRC-EV-012"},
      {"planes-balanced", "MRC-EV-002"},   {"replacement-same-plane", "MRC-EV-011"},
      {"reverse-probes", "MRC-PRB-007"},   {"cc-no-growth-on-ecn", "MRC-CC-002"}};
  size_t found = 0;
  for (const auto& sc : scenarios()) {
    auto it = passes.find(sc.name);
    if (it == passes.end()) continue;
    ++found;
    Trace t;
    sc.build(t);
    const Report r = fixtures::run(t);
    const RuleResult* rr = r.result(it->second);
    EXPECT_EQ(status_name(rr->status), "pass") << sc.name << ": " << rr->reason;
    EXPECT_GT(rr->checked, 0u) << sc.name;
  }
  EXPECT_EQ(found, passes.size());
}

TEST(RuleCoverage, CleanTraceJudgesMostRules) {
  Trace t;
  scenarios()[0].build(t);
  const Report r = fixtures::run(t);
  const auto pass = fixtures::with_status(r, Status::kPass);
  // The clean trace is meant to exercise nearly everything; list what it leaves unjudged.
  std::string na;
  for (const auto& rr : r.results)
    if (rr.status == Status::kNotApplicable)
      na += std::string(rr.rule->id) + " (" + rr.reason + ") ";
  EXPECT_GE(pass.size(), 45u) << "not applicable: " << na;
}

// MRC-FRM-012 and -013 beyond their scenarios: an inner DA inside the locator, evidence that
// names the outer-header checksum, and zero checksums refused when the profile says so.
TEST(Srv6Framing, InnerDaAndChecksumDetails) {
  Trace in_loc;
  in_loc.profile = srv6_profile("fcbb::");
  {
    Srv6 x(in_loc);
    x.inner_da = "fcbb:0:101:201:301:e02::";
    x.message();
  }
  const Report a = fixtures::run(in_loc);
  ASSERT_EQ(a.result("MRC-FRM-012")->status, Status::kFail);
  EXPECT_NE(a.result("MRC-FRM-012")->evidence[0].message.find("inside the SRv6 locator"),
            std::string::npos);

  Trace outer;
  outer.profile = srv6_profile("fcbb::");
  {
    Srv6 x(outer);
    x.csum = Srv6::Csum::kOverOuter;
    x.message();
  }
  const Report b = fixtures::run(outer);
  ASSERT_EQ(b.result("MRC-FRM-013")->status, Status::kFail);
  EXPECT_NE(b.result("MRC-FRM-013")->evidence[0].message.find("checksum over the outer header"),
            std::string::npos)
      << b.result("MRC-FRM-013")->evidence[0].message;

  Trace zero;
  auto prof = nlohmann::json::parse(srv6_profile("fcbb::"));
  prof["udp_zero_checksum"] = false;
  zero.profile = prof.dump();
  {
    Srv6 x(zero);
    x.message();
  }
  const Report c = fixtures::run(zero);
  ASSERT_EQ(c.result("MRC-FRM-013")->status, Status::kFail);
  EXPECT_NE(c.result("MRC-FRM-013")->evidence[0].message.find("udp_zero_checksum false"),
            std::string::npos);
  // The SRH with its container used up judges the locator (pass), not skips it.
  Trace srh;
  srh.profile = srv6_profile("fcbb::");
  {
    Srv6 x(srh);
    x.segment = "fcbc:0:501:601::";
    x.exhausted = true;
    x.message();
  }
  const Report d = fixtures::run(srh);
  EXPECT_EQ(d.result("MRC-FRM-009")->status, Status::kPass);
  EXPECT_GT(d.result("MRC-FRM-009")->checked, 0u);
}

// Peers that react within microseconds and a trace of a few hundred: a NACK the requester never
// answers, 300 us before the trace ends. The software preset's 5 ms end grace leaves it
// unjudged; the hardware preset (100 us) and the auto preset (derived from the 6 us RTTs here)
// judge it. Tolerance keys the profile sets still win over any preset.
TEST(TolerancePresets, HardwareJudgesWhatSoftwareLeavesOpen) {
  Trace t;
  {
    Session s(t);
    clean_base(s);
    DataPkt p = only_pkt(s);
    s.send(p);
    s.received.erase(p.psn);
    nack_soon(s, p.psn, 0x07, p.wev);
    s.advance(s.gap);
    tail(s);
  }
  t.profile = fixtures::profile(R"({"tolerances": null})");
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_presets";
  CheckOptions o;
  const Report sw = fixtures::run_files(t, dir, &o);
  EXPECT_EQ(sw.tolerances.preset, "software");
  EXPECT_EQ(sw.tolerances.values.end_grace_ns, 5'000'000u);
  EXPECT_TRUE(fixtures::with_status(sw, Status::kFail).empty()) << failing_summary(sw);

  o.tolerances = TolerancePreset::kHardware;
  Report hw;
  std::string e;
  ASSERT_TRUE(check_files(o, hw, e)) << e;
  EXPECT_EQ(hw.tolerances.preset, "hardware");
  EXPECT_EQ(hw.tolerances.values.end_grace_ns, 100'000u);
  EXPECT_EQ(fixtures::with_status(hw, Status::kFail), std::set<std::string>{"MRC-REQ-011"})
      << failing_summary(hw);

  o.tolerances = TolerancePreset::kAuto;
  Report au;
  ASSERT_TRUE(check_files(o, au, e)) << e;
  EXPECT_EQ(au.tolerances.preset, "auto");
  EXPECT_NE(au.tolerances.derivation.find("RTT sample(s)"), std::string::npos)
      << au.tolerances.derivation;
  EXPECT_LT(au.tolerances.values.reaction_ns, 20'000u);
  EXPECT_GE(au.tolerances.values.reaction_ns, 5'000u);
  EXPECT_EQ(fixtures::with_status(au, Status::kFail), std::set<std::string>{"MRC-REQ-011"})
      << failing_summary(au) << au.tolerances.derivation;

  auto prof = nlohmann::json::parse(t.profile);
  prof["tolerances"] = {{"end_grace_ns", 5'000'000}};
  std::ofstream(o.profile_path) << prof.dump();
  o.tolerances = TolerancePreset::kHardware;
  Report mixed;
  ASSERT_TRUE(check_files(o, mixed, e)) << e;
  EXPECT_EQ(mixed.tolerances.values.end_grace_ns, 5'000'000u);
  EXPECT_EQ(mixed.tolerances.values.reaction_ns, 5'000u);
  EXPECT_EQ(mixed.tolerances.from_profile, std::vector<std::string>{"end_grace_ns"});
  EXPECT_TRUE(fixtures::with_status(mixed, Status::kFail).empty()) << failing_summary(mixed);
  std::filesystem::remove_all(dir);
}

// Evidence text gives times relative to the capture start ("t=+0.000123 s"), never epoch
// nanoseconds next to relative seconds.
TEST(Evidence, TimesAreRelative) {
  size_t seen = 0;
  for (const auto& sc : scenarios()) {
    Trace t;
    sc.build(t);
    const Report r = fixtures::run(t);
    for (const auto& rr : r.results)
      for (const auto& ev : rr.evidence) {
        for (size_t p = ev.message.find("t="); p != std::string::npos;
             p = ev.message.find("t=", p + 2)) {
          ++seen;
          EXPECT_EQ(ev.message.compare(p, 3, "t=+"), 0) << sc.name << ": " << ev.message;
        }
      }
  }
  EXPECT_GT(seen, 3u);
}

TEST(RuleSelection, DeselectedRulesReportNotRun) {
  Trace t;
  for (const auto& sc : scenarios())
    if (sc.name == "pkey") sc.build(t);
  RuleSelection sel;
  sel.skip = {"MRC-FRM-005"};
  const Report r = fixtures::run(t, sel);
  EXPECT_EQ(r.result("MRC-FRM-005")->status, Status::kNotRun);
  EXPECT_EQ(r.result("MRC-FRM-005")->reason, "deselected");
  EXPECT_EQ(r.exit_code(), 0);
  sel.skip.clear();
  sel.only = {"MRC-REQ"};
  const Report q = fixtures::run(t, sel);
  EXPECT_EQ(q.result("MRC-FRM-005")->status, Status::kNotRun);
  EXPECT_EQ(q.result("MRC-REQ-001")->status, Status::kPass);
}

// ---------------------------------------------------------------------------------------------
// EV rules on traces like the reference endpoint's on a software fabric: per-port captures with
// one time stamp per send burst, and EVs the requester retired on its own evidence.
// ---------------------------------------------------------------------------------------------

// A 48-packet message sent in one burst (all frames stamped alike) on port-1 EVs and the one
// port-2 EV in turn, after `run` packets on one port-1 EV; port 2 has its own capture, which
// the merge puts after port 1's frames of the same time.
Report per_port_burst(uint32_t run) {
  Trace t;
  Session s(t);
  t.points.push_back({"h1-eth1.pcapng", "h1", 2});
  clean_base(s);
  std::vector<size_t> port2;
  s.gap = 0;
  s.write(48 * 1024, false, [&](size_t i, DataPkt& p, Fate&) {
    if (i < run)
      p.wev = 0x00050100;
    else
      p.wev = i % 2 ? 0x00050300 : 0x00050101;
    if (p.wev == 0x00050300) port2.push_back(t.frames.size());  // the frame send() adds
  });
  s.gap = 10 * kUs;
  std::vector<Trace::Frame> moved;
  for (auto it = port2.rbegin(); it != port2.rend(); ++it) {
    Trace::Frame f = t.frames[*it];
    f.point = 2;
    moved.insert(moved.begin(), f);
    t.frames.erase(t.frames.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  for (auto& f : moved) t.frames.push_back(std::move(f));  // same time: sorted after port 1
  tail(s);
  return fixtures::run(t);
}

TEST(EvRules, PerPortCapturesAreJudgedInPsnOrder) {
  // Merged by time, port 1 shows 24 packets in a row on 0x00050101; in PSN order it alternates.
  const Report ok = per_port_burst(0);
  EXPECT_TRUE(fixtures::with_status(ok, Status::kFail, true).empty()) << failing_summary(ok);
  EXPECT_EQ(ok.result("MRC-EV-001")->status, Status::kPass);
  EXPECT_EQ(ok.result("MRC-EV-005")->status, Status::kPass);
  // A real run in PSN order still fails with the same capture layout.
  const Report bad = per_port_burst(24);
  EXPECT_EQ(fixtures::with_status(bad, Status::kFail, true), std::set<std::string>{"MRC-EV-001"})
      << failing_summary(bad);
}

// The requester retired every EV but `a` on its own evidence (it probes them, the answers do not
// yet satisfy it) and carries on over `a` alone: a retransmission after a NACK on `a` has no
// other EV to go to. Without `retired` it keeps the others (no probes) and uses them again
// right after the retransmission.
Report down_to_one_ev(bool retired) {
  Trace t;
  Session s(t);
  clean_base(s);
  const uint32_t a = s.evs[0];
  for (size_t k = 1; k < s.evs.size(); ++k) {
    s.avoid.insert(s.evs[k]);
    if (retired) s.probe(static_cast<uint16_t>(k), s.evs[k]);
    s.advance(2 * kUs);
  }
  DataPkt p = only_pkt(s);
  p.wev = a;
  s.send(p);
  nack_soon(s, p.psn, 0x07, a);
  s.advance(12 * kUs);
  retx_and_ack(s, p.psn, 0, [&](DataPkt& q) { q.wev = a; });
  if (!retired) s.avoid.clear();
  for (int i = 0; i < 6; ++i) s.write(1024);
  tail(s);
  return fixtures::run(t);
}

TEST(EvRules, RetransmissionOnTheOnlyUsableEvIsNotANackedEvViolation) {
  const Report ok = down_to_one_ev(true);
  EXPECT_TRUE(fixtures::with_status(ok, Status::kFail, true).empty()) << failing_summary(ok);
  EXPECT_EQ(ok.result("MRC-EV-013")->status, Status::kPass);
  EXPECT_EQ(ok.result("MRC-EV-013")->excused, 1u);
  // Data on another EV right after shows one was usable: the same retransmission fails.
  const Report bad = down_to_one_ev(false);
  EXPECT_EQ(fixtures::with_status(bad, Status::kFail, true), std::set<std::string>{"MRC-EV-013"})
      << failing_summary(bad);
}

// A packet on `e` is lost while SACKs for the later ones keep coming; the requester
// retransmits it `wait_ns` later on another EV and then sends new data on `e` again.
Report retx_after_sack_gap(uint64_t wait_ns) {
  Trace t;
  Session s(t);
  clean_base(s);
  uint32_t e = 0, lost = 0;
  s.gap = 2 * kUs;
  s.write(
      4096, false,
      [&](size_t i, DataPkt& p, Fate& f) {
        if (i != 0) return;
        f = Fate::kDrop;
        e = p.wev;
        lost = p.psn;
      },
      {}, false);
  s.gap = 10 * kUs;
  s.advance(wait_ns);
  retx_and_ack(s, lost, e);
  s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
  s.write(4096);
  tail(s);
  return fixtures::run(t);
}

TEST(EvRules, ALossRetiresItsEvWhetherTheTimerOrTheSackGapFoundIt) {
  // Timeout 5: T = 32.8 us. A retransmission a whole T later is the timeout, which retires `e`.
  const Report timer = retx_after_sack_gap(40 * kUs);
  EXPECT_EQ(fixtures::with_status(timer, Status::kFail, true), std::set<std::string>{"MRC-EV-009"})
      << failing_summary(timer);
  // Soon after the SACKs it is the requester acting on the gap: the packet was lost all the
  // same, and an untrimmed loss retires its EV (PAPER section 2.1).
  const Report gap = retx_after_sack_gap(2 * kUs);
  EXPECT_EQ(fixtures::with_status(gap, Status::kFail, true), std::set<std::string>{"MRC-EV-009"})
      << failing_summary(gap);
}

}  // namespace
}  // namespace mrc::check

namespace mrc::check {
namespace {

// One data packet's ts16 goes back about 1 ms on the requester's port 1.
Trace ts16_back_trace(const char* side) {
  Trace t;
  t.profile = fixtures::profile(
      std::string(R"({"captures": {"h1-eth0.pcapng": {"node": "h1", "port": 1, "side": ")") + side +
          R"("}}})",
      "{}");
  Session s(t);
  clean_base(s);
  s.write(3000, false, [&](size_t i, DataPkt& p, Fate&) {
    if (i == 1) p.ts16 = static_cast<int>((s.ts16_at(s.now) - 8000) & 0xFFFF);
  });
  tail(s);
  return t;
}

// A capture at the far end of the requester's link (an emulated link can reorder across CPUs)
// shows its frames but not its send order: MRC-REQ-010 is judged on its own interface only.
TEST(ReqRules, Ts16OrderIsJudgedOnTheRequestersOwnInterfaceOnly) {
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_ts16_side";
  const Report own = fixtures::run_files(ts16_back_trace("own"), dir + "_own");
  EXPECT_EQ(fixtures::with_status(own, Status::kFail, true), std::set<std::string>{"MRC-REQ-010"});
  const Report link = fixtures::run_files(ts16_back_trace("link"), dir + "_link");
  // TSETH presence is still judged there; the order is not.
  EXPECT_EQ(link.result("MRC-REQ-010")->status, Status::kPass);
  EXPECT_TRUE(fixtures::with_status(link, Status::kFail, true).empty());
}

// Two EVs. The requester uses e once too early after e's SKIP signal (MRC-EV-008), then keeps
// to f for a long run while e is still in SKIP on its side: the episode was judged, not ended,
// so that run is no spraying failure (MRC-EV-001). Released at the violation, e read as usable.
TEST(EvRules, ASkipEpisodeJudgedEarlyStillExemptsTheRunOnTheOtherEv) {
  Trace t;
  Session s(t, 2);
  clean_base(s);
  const uint32_t e = s.evs[0], f = s.evs[1];
  s.write(1024, false, [&](size_t, DataPkt& p, Fate& fate) {
    fate = Fate::kCe;
    p.wev = e;
  });
  s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
  s.write(24 * 1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = f; });
  tail(s);
  const Report r = fixtures::run(t);
  EXPECT_EQ(fixtures::with_status(r, Status::kFail, true), std::set<std::string>{"MRC-EV-008"})
      << failing_summary(r);
}

// A message of `len` bytes sent 2 us apart whose first `n` packets all go on the EV of the first
// (returned in `e`) and are lost; no transport ACK. Returns their PSNs; the gap is back to 10 us.
std::vector<uint32_t> lose_first_on_one_ev(Session& s, uint32_t len, size_t n, uint32_t& e) {
  std::vector<uint32_t> lost;
  s.gap = 2 * kUs;
  s.write(
      len, false,
      [&](size_t i, DataPkt& p, Fate& f) {
        if (i == 0) e = p.wev;
        if (i >= n) return;
        p.wev = e;
        f = Fate::kDrop;
        lost.push_back(p.psn);
      },
      {}, false);
  s.gap = 10 * kUs;
  return lost;
}

// Two packets on `e` are lost. The requester resends the first (it retires `e`) and, well past
// the reaction time, the second, then new data on `e` right behind it: `e` has been retired since
// the first resend, and the second loss does not restart the reaction time. (A requester that
// resends what it had in flight on `e` in every burst would otherwise always be excused.)
TEST(EvRules, ALaterLossOnARetiredEvDoesNotRestartItsReactionTime) {
  Trace t;
  Session s(t);
  clean_base(s);
  uint32_t e = 0;
  const std::vector<uint32_t> lost = lose_first_on_one_ev(s, 4096, 2, e);
  s.advance(6 * kUs);  // the SACKs for the later PSNs are in
  retx_and_ack(s, lost[0], e);
  s.advance(200 * kUs);
  s.retransmit(lost[1], e);
  sack_soon(s, lost[1]);
  s.advance(kUs);  // within the reaction time (2 us here) of this resend, not of the first
  s.gap = kUs;
  s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
  s.gap = 10 * kUs;
  s.avoid.insert(e);  // only that packet uses e
  s.write(4096);
  tail(s);
  const Report r = fixtures::run(t);
  EXPECT_EQ(fixtures::with_status(r, Status::kFail, true), std::set<std::string>{"MRC-EV-009"})
      << failing_summary(r);
}

// The first packet of a `len`-byte message on `e` is lost; a probe (on `e`, or on another EV) is
// answered; the requester resends the packet well before T = 32.8 us and then sends new data on
// `e`. `wait_ns`: from the end of the message to the probe; `resend_ns`: from the probe to the
// resend.
Report lost_probed_resent(uint32_t len, bool probe_on_e, uint64_t wait_ns,
                          uint64_t resend_ns = 8 * kUs) {
  Trace t;
  Session s(t);
  clean_base(s);
  uint32_t e = 0;
  const uint32_t lost = lose_first_on_one_ev(s, len, 1, e)[0];
  s.advance(wait_ns);
  uint32_t probed = e;
  while (!probe_on_e && probed == e) probed = s.next_ev();
  s.probe(1, probed);  // answered 7 us later
  s.advance(resend_ns);
  retx_and_ack(s, lost, e);
  s.write(1024, false, [&](size_t, DataPkt& p, Fate&) { p.wev = e; });
  s.write(4096);
  tail(s);
  return fixtures::run(t);
}

// A probe on `e` is answered after the loss and before the resend for the SACK gap (the
// requester's probing brought `e` back). The loss retired `e` when the gap showed, and that
// answer ended it: new data on `e` after the resend is no violation.
TEST(EvRules, AProbeAnswerAfterTheLossEndsTheRetirementItCaused) {
  const Report r = lost_probed_resent(4096, true, 4 * kUs);  // the later PSNs' SACKs are in
  EXPECT_TRUE(fixtures::with_status(r, Status::kFail, true).empty()) << failing_summary(r);
}

// The same, but the resend comes more than T after the lost copy (its congestion window held
// it: the reference under a busy loop, the one packet in flight lost too, resent 11 ms late).
// The probe on `e` after the SACKs showed the gap says the requester retired `e` then, and the
// answer ended it. A probe on another EV says nothing of the kind: the late resend is `e`'s
// timeout, and new data on `e` after it is a violation.
TEST(EvRules, AResendHeldPastTAfterTheEvWasProbedBackEndsNoRetirement) {
  const Report probed_back = lost_probed_resent(4096, true, 4 * kUs, 40 * kUs);
  EXPECT_TRUE(fixtures::with_status(probed_back, Status::kFail, true).empty())
      << failing_summary(probed_back);
  const Report other = lost_probed_resent(4096, false, 4 * kUs, 40 * kUs);
  EXPECT_EQ(fixtures::with_status(other, Status::kFail, true), std::set<std::string>{"MRC-EV-009"})
      << failing_summary(other);
}

// The only packet of a message is lost, so no later PSN is SACKed; a probe on another EV is
// answered and the requester resends soon after. Nothing shows a gap, so the resend is not read
// as a loss that retires `e`, and new data on `e` right after is no violation.
TEST(EvRules, AResendAfterOnlyAProbeAnswerRetiresNothing) {
  const Report r = lost_probed_resent(1024, false, 1 * kUs);
  EXPECT_TRUE(fixtures::with_status(r, Status::kFail, true).empty()) << failing_summary(r);
}

// MRC-PRB-007's evidence says which gap it is about (issue 18: the viewer shades it): from_ns is
// the gap's start (before its end, ts_ns) and port the plane without reverse EV probes.
TEST(PrbRules, AMissingReverseProbeGapCarriesItsIntervalAndPort) {
  fixtures::Trace t;
  reverse_probes(t, 0);
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_prb007_gap";
  const Report r = fixtures::run_files(t, dir);
  const RuleResult* rr = r.result("MRC-PRB-007");
  ASSERT_NE(rr, nullptr);
  ASSERT_FALSE(rr->evidence.empty());
  for (const Evidence& e : rr->evidence) {
    EXPECT_EQ(e.port, 1);
    EXPECT_GT(e.from_ns, 0u);
    EXPECT_LT(e.from_ns, e.ts_ns);
    EXPECT_GE(e.ts_ns - e.from_ns, 100000u);  // beyond t_reverse_probe_ns
  }
}

// A probe seen at a capture of the responder's link (`side`), then `action` in the injector's
// log for a probe of the flow 1 us after it was seen there; no answer.
Trace probe_after_capture(const char* side, const char* action) {
  Trace t;
  t.profile = fixtures::profile(
      std::string(R"({"captures": {"h2-eth0.pcapng": {"node": "h2", "port": 1, "side": ")") + side +
          R"("}}})",
      "{}");
  Session s(t);
  clean_base(s);
  s.probe(3, 0x00050101, false);
  s.decision(s.now + s.one_way + 1 * kUs, action, 0, 0xDE, 0x00050101);
  s.advance(20 * kUs);
  tail(s);
  return t;
}

// The switch end of the responder's cable is upstream of the injector's relay: a probe seen there
// and then dropped by the injector never reached the responder, so its missing answer is no
// MRC-PRB-002 failure. Seen on the responder's own interface, or passed by the injector, the
// missing answer fails.
TEST(ProbeRules, AProbeDroppedAfterALinkSideCaptureIsNotUnanswered) {
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_probe_drop";
  const Report link = fixtures::run_files(probe_after_capture("link", "drop"), dir + "_link");
  EXPECT_NE(link.result("MRC-PRB-002")->status, Status::kFail) << failing_summary(link);
  const Report own = fixtures::run_files(probe_after_capture("own", "drop"), dir + "_own");
  EXPECT_EQ(own.result("MRC-PRB-002")->status, Status::kFail) << failing_summary(own);
  const Report passed = fixtures::run_files(probe_after_capture("link", "pass"), dir + "_pass");
  EXPECT_EQ(passed.result("MRC-PRB-002")->status, Status::kFail) << failing_summary(passed);
}

// The responder (h2) captured on both its ports, each capture marked `side` ("own": its own
// interface; "link": the switch end of its cable).
Trace two_port_responder(const char* side) {
  Trace t;
  t.points.push_back({"h1-eth0.pcapng", "h1", 1});
  t.points.push_back({"h2-eth0.pcapng", "h2", 1});
  t.points.push_back({"h2-eth1.pcapng", "h2", 2});
  const std::string sd = side;
  t.profile = fixtures::profile(
      R"({"captures": {"h2-eth0.pcapng": {"node": "h2", "port": 1, "side": ")" + sd +
          R"("}, "h2-eth1.pcapng": {"node": "h2", "port": 2, "side": ")" + sd + R"("}}})",
      "{}");
  return t;
}

// The responder answers a message with a SACK and a transport ACK on port 2, then repeats its
// previous (lower) cack_psn, rcvd_bytes and transport ACK PSN on port 1, after which it is seen
// (`cross`); without `cross`, the repeat follows on port 2. Port 1's own sequence never goes back.
Trace answers_across_ports(const char* side, bool cross) {
  Trace t = two_port_responder(side);
  Session s(t);
  clean_base(s);
  s.write(1024);  // its SACK and transport ACK on port 1, cack c1
  const uint32_t c1 = s.cack();
  const uint32_t rb1 = static_cast<uint32_t>((s.rx_nominal + 255) / 256);
  s.rsp_point = 2;
  s.write(1024);  // on port 2, cack c1 + 1
  s.rsp_point = cross ? 1 : 2;
  s.sack(c1, 0, [&](SackPkt& k) {
    k.cack = c1;
    k.ack_off = 0;
    k.entropy = s.rx_wev[c1];
    k.bitmap = 0;
    k.ooo = 0;
    k.rcvd_bytes = rb1;
  });
  s.tack(c1);
  s.advance(s.gap);
  s.rsp_point = 1;
  tail(s);
  return t;
}

// R24, R28 and R31 order a responder's answers as it transmits them. Its own interfaces' captures
// show that order across its ports; the captures at the switch end of its cables show it per port
// only (two planes' links can let a later answer of one port pass an earlier one of the other).
// So answers that cross between ports fail MRC-RSP-002, 007 and 010 at own-interface captures and
// not at link-side ones, and going back on one port fails at both.
TEST(ResponderRules, AnswerOrderIsPerPortAtLinkSideCaptures) {
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_rsp_order";
  const Report link = fixtures::run_files(answers_across_ports("link", true), dir + "_link");
  EXPECT_TRUE(fixtures::with_status(link, Status::kFail).empty()) << failing_summary(link);
  EXPECT_TRUE(fixtures::with_status(link, Status::kWarn).empty()) << failing_summary(link);
  EXPECT_EQ(link.result("MRC-RSP-002")->status, Status::kPass);
  const Report own = fixtures::run_files(answers_across_ports("own", true), dir + "_own");
  EXPECT_EQ(own.result("MRC-RSP-002")->status, Status::kFail) << failing_summary(own);
  EXPECT_EQ(own.result("MRC-RSP-007")->status, Status::kWarn) << failing_summary(own);
  EXPECT_EQ(own.result("MRC-RSP-010")->status, Status::kFail) << failing_summary(own);
  const Report same = fixtures::run_files(answers_across_ports("link", false), dir + "_same");
  EXPECT_EQ(same.result("MRC-RSP-002")->status, Status::kFail) << failing_summary(same);
  EXPECT_EQ(same.result("MRC-RSP-007")->status, Status::kWarn) << failing_summary(same);
  EXPECT_EQ(same.result("MRC-RSP-010")->status, Status::kFail) << failing_summary(same);
}

// A data packet with A=1 seen at the responder's capture (`side`) and never answered; the
// injector's log then has `action` for `what`: "sack" (a SACK with cack_psn just above the
// packet's PSN: the packet filled the hole below it), "data" (the packet itself), each 2 us after
// the packet was seen, or "sack-late" (that SACK, after the answer was due).
Trace unanswered_then_logged(const char* side, const char* action, const std::string& what) {
  Trace t;
  t.profile = fixtures::profile(
      std::string(R"({"captures": {"h2-eth0.pcapng": {"node": "h2", "port": 1, "side": ")") + side +
          R"("}}})",
      "{}");
  Session s(t);
  clean_base(s);
  const uint32_t p = s.next_psn;
  uint32_t ev = 0;
  s.write(
      1024, false, [&](size_t, DataPkt& d, Fate&) { ev = d.wev; },
      [](size_t, SackPkt&) { return false; }, false);
  const uint64_t arrived = s.now - s.gap + s.one_way;
  if (what == "data")
    s.decision(arrived + 2 * kUs, action, p, 0xCA, ev);
  else
    s.decision(arrived + (what == "sack" ? 2 * kUs : 80 * kUs), action, p + 1, 0xDC, 0x9001);
  s.advance(100 * kUs);
  tail(s);
  return t;
}

// The switch end of the responder's cable sees arrivals before the injector's relay and answers
// after it: an A=1 packet seen there whose answer (or the packet itself) the injector then dropped
// is no MRC-RSP-009 failure. At the responder's own interface, with the drop passed, or with the
// SACK dropped only after the answer was due (T_ack_max 50 us here), the missing answer fails.
TEST(ResponderRules, AnAnswerDroppedBeforeALinkSideCaptureIsNotMissing) {
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_rsp009_link";
  struct Case {
    const char* side;
    const char* action;
    const char* what;
    bool fails;
  };
  for (const Case& c : {Case{"link", "drop", "sack", false}, Case{"link", "drop", "data", false},
                        Case{"own", "drop", "sack", true}, Case{"link", "pass", "sack", true},
                        Case{"link", "drop", "sack-late", true}}) {
    const std::string name = std::string(c.side) + "_" + c.action + "_" + c.what;
    const Report r =
        fixtures::run_files(unanswered_then_logged(c.side, c.action, c.what), dir + "_" + name);
    EXPECT_EQ(r.result("MRC-RSP-009")->status == Status::kFail, c.fails)
        << name << ": " << failing_summary(r);
  }
}

}  // namespace
}  // namespace mrc::check
