// Test harness: two Endpoints joined port-to-port (plane p of A <-> plane p of B) by a loop with
// a manual virtual clock, a fixed one-way delay and a per-frame hook that can drop, mutate or
// duplicate frames. No simulator: the engine is driven exactly as the sans-I/O contract says.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "wire/wire.h"

namespace mrc::engine::testing {

inline wire::Ipv6Addr gid_of(uint8_t node) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[1] = 0x00;
  a[15] = node;
  return a;
}

// ::ffff:10.0.0.<node>: an IPv4 node.
inline wire::Ipv6Addr gid4_of(uint8_t node) {
  wire::Ipv6Addr a{};
  a[10] = 0xFF;
  a[11] = 0xFF;
  a[12] = 10;
  a[15] = node;
  return a;
}

inline EndpointConfig make_config(const std::string& name, uint8_t node, uint8_t nports,
                                  uint64_t seed, wire::EvFormat format = wire::EvFormat::kStev,
                                  bool ipv4 = false) {
  EndpointConfig c;
  c.name = name;
  c.gid = ipv4 ? gid4_of(node) : gid_of(node);
  c.seed = seed;
  c.ev_format = format;
  for (uint8_t p = 1; p <= nports; ++p) {
    PortConfig pc;
    pc.mac = {0x02, 0, 0, 0, node, p};
    pc.next_hop_mac = {0x02, 0, 0, 0, 0xEE, p};
    c.ports.push_back(pc);
  }
  return c;
}

// STEV 16+16, generated: field 0 fixed high byte 0x10 + 8 random bits, field 1 16 random bits.
inline EvProfile make_ev_profile(uint32_t ev_count, uint32_t active_count, uint32_t min_active) {
  EvProfile p;
  p.mode = EvMode::kGenerated;
  p.format_widths = {16, 16};
  p.fields = {wire::EvField{16, 0x1000, 0, 0xFF, 0x00FF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  p.ev_count = ev_count;
  p.active_count = active_count;
  p.ev_min_active = min_active;
  return p;
}

struct Frame {
  std::vector<std::byte> bytes;
  uint8_t port = 0;
  bool a_to_b = true;
  uint64_t sent_ns = 0;
};

// What the hook decides for one frame.
enum class Verdict { kDeliver, kDrop, kDuplicate };

struct QpParams {
  uint32_t path_mtu = 4096;
  uint8_t mpr = 8;
  uint8_t mpr_dest = 8;
  uint16_t max_wimm = 16;
  uint16_t max_wimm_dest = 16;
  uint8_t timeout = 8;  // 262 us
  uint8_t linear_cnt = 7;
  uint8_t exp_cnt = 25;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t cap = kCapDynamicMpr;
  std::string cc = "none";
  uint64_t probe_interval_ns = 16'000;
  wire::EvFormat format = wire::EvFormat::kStev;
  bool ipv4 = false;
  bool sq_sig_all = false;
  EvProfile ev = make_ev_profile(16, 0, 1);
  std::function<void(EndpointConfig&)> tune;  // applied to both endpoints' configuration
};

struct Side {
  std::unique_ptr<Endpoint> ep;
  uint32_t cq = 0;
  uint32_t qpn = 0;
  uint32_t sq_psn = 0;
  std::vector<Event> events;
  std::string jsonl;
};

class Pair {
 public:
  explicit Pair(uint8_t nports = 2, uint64_t seed = 7, QpParams params = {})
      : params_(std::move(params)) {
    EndpointConfig ca = make_config("a", 1, nports, seed, params_.format, params_.ipv4);
    EndpointConfig cb = make_config("b", 2, nports, seed + 1000, params_.format, params_.ipv4);
    ca.probe_interval_ns = cb.probe_interval_ns = params_.probe_interval_ns;
    if (params_.tune) {
      params_.tune(ca);
      params_.tune(cb);
    }
    a.ep = std::make_unique<Endpoint>(ca);
    b.ep = std::make_unique<Endpoint>(cb);
    for (Side* s : {&a, &b}) {
      Side* side = s;
      side->ep->set_event_sink([side, this](const Event& e) {
        side->events.push_back(e);
        append_event_json(side->jsonl, e, side == &a ? "a" : "b");
      });
    }
    setup(a, b);
  }

  Side a, b;
  uint64_t now = 0;
  uint64_t one_way_ns = 2'000;
  std::function<Verdict(Frame&)> hook;
  std::vector<Frame> log;  // every frame put on the wire (before the hook)
  std::string last_error;

  const QpParams& params() const { return params_; }

  void setup(Side& x, Side& y) {
    for (Side* s : {&x, &y}) {
      ASSERT_TRUE(s->ep->create_cq(4096, s->cq).ok());
      QpInitAttr init;
      init.send_cq = s->cq;
      init.recv_cq = s->cq;
      init.cap.max_send_wr = params_.max_send_wr;
      init.cap.max_recv_wr = params_.max_recv_wr;
      init.cap.max_send_sge = 4;
      init.cap.max_recv_sge = 1;
      init.sq_sig_all = params_.sq_sig_all;
      ASSERT_TRUE(s->ep->create_qp(init, s->qpn).ok());
      ASSERT_TRUE(s->ep->add_ev_profile(1, params_.ev).ok());
      CcProfile cc;
      cc.algorithm = params_.cc;
      ASSERT_TRUE(s->ep->add_cc_profile(1, cc).ok());
      s->sq_psn = s->ep->random_psn();
    }
    connect(x, y);
    connect(y, x);
  }

  void connect(Side& s, Side& peer) {
    QpAttr at;
    MrcQpAttr m;
    at.qp_state = QpState::kInit;
    at.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
    m.ev_profile_id = 1;
    m.cc_profile_id = 1;
    Status st = s.ep->modify_qp(s.qpn, at, kQpState | kQpAccessFlags, m,
                                kMrcEvProfileId | kMrcCcProfileId | kMrcHint);
    ASSERT_TRUE(st.ok()) << st.message;
    at.qp_state = QpState::kRtr;
    at.dgid = peer.ep->config().gid;
    at.dest_qp_num = peer.qpn;
    at.rq_psn = peer.sq_psn;
    at.path_mtu = params_.path_mtu;
    m.max_wimm_dest = params_.max_wimm_dest;
    m.mpr_dest = params_.mpr_dest;
    m.cap = params_.cap;
    st = s.ep->modify_qp(s.qpn, at, kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu, m,
                         kMrcMaxWimmDest | kMrcMprDest | kMrcCap);
    ASSERT_TRUE(st.ok()) << st.message;
    at.qp_state = QpState::kRts;
    at.sq_psn = s.sq_psn;
    m.max_wimm = params_.max_wimm;
    m.mpr = params_.mpr;
    m.retry.linear_cnt = params_.linear_cnt;
    m.retry.exp_cnt = params_.exp_cnt;
    m.timeout = params_.timeout;
    st = s.ep->modify_qp(s.qpn, at, kQpState | kQpSqPsn, m,
                         kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout);
    ASSERT_TRUE(st.ok()) << st.message;
  }

  // Drains both endpoints' transmit queues onto the wire.
  void pump() {
    TxPacket pkt;
    for (int round = 0; round < 4; ++round) {
      bool any = false;
      for (Side* s : {&a, &b}) {
        while (s->ep->poll_tx(now, pkt)) {
          any = true;
          Frame f;
          f.bytes = pkt.frame;
          f.port = pkt.port;
          f.a_to_b = s == &a;
          f.sent_ns = now;
          log.push_back(f);
          Verdict v = hook ? hook(f) : Verdict::kDeliver;
          if (v == Verdict::kDrop) continue;
          schedule(f);
          if (v == Verdict::kDuplicate) schedule(f);
        }
      }
      if (!any) break;
    }
  }

  // Runs until `done` holds or nothing is left to do or `limit_ns` of virtual time passed.
  bool run(const std::function<bool()>& done, uint64_t limit_ns = 1'000'000'000) {
    const uint64_t end = now + limit_ns;
    for (uint64_t steps = 0; steps < 50'000'000; ++steps) {
      pump();
      if (done && done()) return true;
      uint64_t t = std::min(a.ep->next_deadline_ns(), b.ep->next_deadline_ns());
      if (!wire_.empty()) t = std::min(t, wire_.begin()->first.first);
      if (t == UINT64_MAX || t > end) return done ? done() : true;
      now = std::max(now, t);
      while (!wire_.empty() && wire_.begin()->first.first <= now) {
        Frame f = std::move(wire_.begin()->second);
        wire_.erase(wire_.begin());
        Side& dst = f.a_to_b ? b : a;
        dst.ep->on_packet(f.bytes, f.port, now);
        pump();  // like the simulator: drain transmit queues after every event
      }
      for (Side* s : {&a, &b})
        if (s->ep->next_deadline_ns() <= now) s->ep->on_timer(now);
    }
    ADD_FAILURE() << "harness step limit";
    return false;
  }

  void run_idle(uint64_t limit_ns = 1'000'000'000) { run(nullptr, limit_ns); }

  std::vector<Wc> poll(Side& s) {
    std::vector<Wc> out;
    Wc buf[64];
    for (;;) {
      const int n = s.ep->poll_cq(s.cq, buf);
      if (n <= 0) break;
      out.insert(out.end(), buf, buf + n);
    }
    return out;
  }

  size_t in_flight() const { return wire_.size(); }

 private:
  void schedule(const Frame& f) { wire_.emplace(std::make_pair(now + one_way_ns, seq_++), f); }
  QpParams params_;
  uint64_t seq_ = 0;
  std::map<std::pair<uint64_t, uint64_t>, Frame> wire_;
};

// A registered buffer with a recognisable pattern.
struct Buffer {
  std::vector<uint8_t> bytes;
  MemoryRegion mr;
  Buffer(Endpoint& ep, size_t n, uint8_t seed,
         uint32_t access = kAccessLocalWrite | kAccessRemoteWrite)
      : bytes(n) {
    for (size_t i = 0; i < n; ++i)
      bytes[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8)) & 0xFF);
    EXPECT_TRUE(ep.register_mr(bytes.data(), n, access, mr).ok());
  }
  uint64_t addr(size_t off = 0) const { return mr.addr + off; }
  Sge sge(size_t off, uint32_t len) const { return Sge{mr.addr + off, len, mr.lkey}; }
};

inline bool decode(const Frame& f, wire::DecodedFrame& d) {
  return wire::decode_frame(wire::as_bytes(f.bytes), d);
}

inline bool is_kind(const Frame& f, wire::PacketKind k) {
  wire::DecodedFrame d;
  return decode(f, d) && d.op != nullptr && d.op->kind == k;
}

// A switch-style trim: set the DSCP with wire::rewrite_dscp_ecn, cut after BTH+METH+TSETH, and
// fix the IPv6 payload length and UDP length the way a trimming switch does.
inline std::vector<std::byte> trim_frame(std::vector<std::byte> v, uint8_t dscp) {
  wire::DecodedFrame d;
  EXPECT_TRUE(wire::decode_frame(wire::as_bytes(v), d));
  EXPECT_TRUE(wire::rewrite_dscp_ecn({v.data(), v.size()}, d, dscp, std::nullopt));
  const size_t keep = size_t{d.off_bth} + wire::mrp0().min_trim_bytes();
  v.resize(keep);
  auto put16 = [&](size_t off, size_t val) {
    v[off] = static_cast<std::byte>((val >> 8) & 0xFF);
    v[off + 1] = static_cast<std::byte>(val & 0xFF);
  };
  EXPECT_EQ(d.l3, 6);
  put16(d.off_l3 + 4, keep - d.off_l3 - 40);
  put16(size_t{d.off_udp} + 4, keep - d.off_udp);
  return v;
}

inline uint32_t wev_of(const wire::DecodedFrame& d, wire::EvFormat format = wire::EvFormat::kStev) {
  const uint32_t fl = d.has_inner_ip6 ? d.inner_ip6.flow_label : d.flow_label();
  return wire::wev_from_carriage(format, wire::mrp0().ev_stripe(), d.udp.sport, fl);
}

inline size_t count_events(const Side& s, EventKind k, std::string_view key = {},
                           std::string_view value = {}) {
  size_t n = 0;
  for (const Event& e : s.events) {
    if (e.kind != k) continue;
    if (!key.empty()) {
      const EventField* f = e.find(key);
      if (f == nullptr || f->type != EventField::Type::kStr || f->s != value) continue;
    }
    ++n;
  }
  return n;
}

}  // namespace mrc::engine::testing
