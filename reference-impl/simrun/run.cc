// The run: a multi-plane Clos on mrc::sim, one reference engine endpoint per host, a QP pair
// per flow, results.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "reference-impl/engine/engine.h"
#include "reference-impl/sim/engine_harness.h"
#include "reference-impl/sim/gbn_model.h"
#include "reference-impl/sim/sim.h"
#include "reference-impl/simrun/simrun.h"

namespace mrc::simrun {

namespace eng = mrc::engine;
using sim::LinkId;
using sim::NodeId;

namespace {

wire::Ipv6Addr host_gid(uint32_t index) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[12] = 0x01;
  a[13] = static_cast<uint8_t>((index + 1) >> 16);
  a[14] = static_cast<uint8_t>((index + 1) >> 8);
  a[15] = static_cast<uint8_t>(index + 1);
  return a;
}

uint64_t mix64(uint64_t x) {
  uint64_t s = x;
  return sim::splitmix64(s);
}

// Link classes, for the queue figures.
enum LinkClass : uint8_t { kHostUp, kLeafUp, kSpineDown, kHostDown, kClasses };
constexpr const char* kClassNames[kClasses] = {"host_up", "leaf_up", "spine_down", "host_down"};

// Per plane: leaves with hosts_per_leaf hosts each, spines, one cable leaf<->spine.
class ClosFabric {
 public:
  ClosFabric(sim::Simulator& s, const Topology& t, const std::vector<NodeId>& hosts,
             const std::vector<double>& cable_rate)
      : sim_(s), t_(t), leaves_(t.leaves()) {
    NodeId max_id = 0;
    for (NodeId n : hosts) max_id = std::max(max_id, n);
    host_of_node_.assign(max_id + 1, UINT32_MAX);
    for (uint32_t h = 0; h < hosts.size(); ++h) host_of_node_[hosts[h]] = h;
    const uint32_t P = t.planes, L = leaves_, S = t.spines, H = t.hosts;
    up_.assign(size_t{P} * H, sim::kNone);
    down_.assign(size_t{P} * H, sim::kNone);
    l2s_.assign(size_t{P} * L * S, sim::kNone);
    s2l_.assign(size_t{P} * L * S, sim::kNone);
    for (uint32_t p = 0; p < P; ++p) hash_seed_.push_back(sim::derive_seed(s.seed(), "ecmp", p));
    auto cfg = [&](uint64_t rate, uint64_t delay, std::string name, bool last_hop) {
      sim::LinkConfig c;
      c.name = std::move(name);
      c.rate_bps = rate;
      c.prop_delay_ns = delay;
      c.queue_bytes = t.queue_bytes;
      c.ecn_threshold_bytes = t.ecn_threshold_bytes;
      c.trim_on_overflow = t.trim;
      c.priority_trimmed = true;
      c.last_hop = last_hop;
      return c;
    };
    for (uint32_t p = 0; p < P; ++p) {
      const std::string pn = "p" + std::to_string(p + 1);
      std::vector<sim::SwitchId> leaf_sw, spine_sw;
      for (uint32_t l = 0; l < L; ++l) {
        leaf_sw.push_back(
            sim_.add_switch(pn + ".leaf" + std::to_string(l),
                            [this, p, l](const sim::Packet& pk) { return route_leaf(p, l, pk); }));
      }
      for (uint32_t m = 0; m < S; ++m) {
        spine_sw.push_back(
            sim_.add_switch(pn + ".spine" + std::to_string(m),
                            [this, p, m](const sim::Packet& pk) { return route_spine(p, m, pk); }));
      }
      for (uint32_t h = 0; h < H; ++h) {
        const uint32_t l = h / t.hosts_per_leaf;
        const std::string hn = "h" + std::to_string(h);
        const LinkId u = sim_.add_link(cfg(t.host_rate_bps, t.host_delay_ns,
                                           pn + "." + hn + ">leaf" + std::to_string(l), false));
        sim_.connect_port(hosts[h], static_cast<uint8_t>(p + 1), u);
        sim_.link_to_switch(u, leaf_sw[l]);
        const LinkId d = sim_.add_link(cfg(t.host_rate_bps, t.host_delay_ns,
                                           pn + ".leaf" + std::to_string(l) + ">" + hn, true));
        sim_.link_to_node(d, hosts[h], static_cast<uint8_t>(p + 1));
        up_[size_t{p} * H + h] = u;
        down_[size_t{p} * H + h] = d;
        class_.resize(std::max<size_t>(class_.size(), d + 1), kHostUp);
        class_[u] = kHostUp;
        class_[d] = kHostDown;
      }
      for (uint32_t l = 0; l < L; ++l) {
        for (uint32_t m = 0; m < S; ++m) {
          const size_t c = cable(p, l, m);
          const uint64_t rate = static_cast<uint64_t>(
              std::llround(static_cast<double>(t.fabric_rate_bps) * cable_rate[c]));
          const std::string ln = "leaf" + std::to_string(l), sn = "spine" + std::to_string(m);
          const LinkId a =
              sim_.add_link(cfg(rate, t.fabric_delay_ns, pn + "." + ln + ">" + sn, false));
          sim_.link_to_switch(a, spine_sw[m]);
          const LinkId b =
              sim_.add_link(cfg(rate, t.fabric_delay_ns, pn + "." + sn + ">" + ln, false));
          sim_.link_to_switch(b, leaf_sw[l]);
          l2s_[c] = a;
          s2l_[c] = b;
          class_.resize(std::max<size_t>(class_.size(), b + 1), kHostUp);
          class_[a] = kLeafUp;
          class_[b] = kSpineDown;
        }
      }
    }
  }
  ClosFabric(const ClosFabric&) = delete;
  ClosFabric& operator=(const ClosFabric&) = delete;

  size_t cable(uint32_t p, uint32_t l, uint32_t m) const {
    return (size_t{p} * leaves_ + l) * t_.spines + m;
  }
  LinkId l2s(size_t c) const { return l2s_[c]; }
  LinkId s2l(size_t c) const { return s2l_[c]; }
  LinkId up(uint32_t p, uint32_t h) const { return up_[size_t{p} * t_.hosts + h]; }
  LinkId down(uint32_t p, uint32_t h) const { return down_[size_t{p} * t_.hosts + h]; }
  LinkClass link_class(LinkId l) const { return l < class_.size() ? class_[l] : kHostUp; }

 private:
  uint32_t host_of(NodeId n) const {
    return n < host_of_node_.size() ? host_of_node_[n] : UINT32_MAX;
  }
  LinkId route_leaf(uint32_t p, uint32_t l, const sim::Packet& pk) const {
    const uint32_t h = host_of(pk.dst_node);
    if (h == UINT32_MAX) return sim::kNone;
    if (h / t_.hosts_per_leaf == l) return down_[size_t{p} * t_.hosts + h];
    // ECMP: the EV (UDP source port, flow label) and the leaf pick the spine.
    const uint64_t key = (uint64_t{pk.info.sport} << 20) ^ pk.info.flow_label ^ (uint64_t{l} << 40);
    const uint32_t m = static_cast<uint32_t>(mix64(hash_seed_[p] ^ key) % t_.spines);
    return l2s_[cable(p, l, m)];
  }
  LinkId route_spine(uint32_t p, uint32_t m, const sim::Packet& pk) const {
    const uint32_t h = host_of(pk.dst_node);
    if (h == UINT32_MAX) return sim::kNone;
    return s2l_[cable(p, h / t_.hosts_per_leaf, m)];
  }

  sim::Simulator& sim_;
  const Topology& t_;
  uint32_t leaves_;
  std::vector<uint32_t> host_of_node_;
  std::vector<uint64_t> hash_seed_;
  std::vector<LinkId> up_, down_, l2s_, s2l_;
  std::vector<LinkClass> class_;
};

// The goodput time series: bytes placed per bin, in total and per plane.
struct Series {
  uint64_t bin_ns = 0;
  std::vector<uint64_t>* total = nullptr;
  std::vector<std::vector<uint64_t>>* planes = nullptr;
  void add(uint8_t port, uint64_t now_ns, uint64_t bytes) {
    const size_t k = static_cast<size_t>(now_ns / bin_ns);
    if (total->size() <= k) total->resize(k + 1, 0);
    (*total)[k] += bytes;
    if (port >= 1 && port <= planes->size()) {
      std::vector<uint64_t>& p = (*planes)[port - 1u];
      if (p.size() <= k) p.resize(k + 1, 0);
      p[k] += bytes;
    }
  }
};

// Between the simulator and a host's NIC when the time series is on: after each received frame,
// the bytes the host's transport placed since the previous frame go to the frame's bin and plane
// (placement happens only on receive, so the delta belongs to that frame).
class TapNode final : public sim::Node {
 public:
  TapNode(sim::Node& inner, std::function<uint64_t()> placed, Series& series)
      : inner_(inner), placed_(std::move(placed)), series_(series) {}
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override {
    inner_.on_packet(frame, port, now_ns);
    const uint64_t now_placed = placed_();
    if (now_placed > last_) series_.add(port, now_ns, now_placed - last_);
    last_ = now_placed;
  }
  void on_timer(uint64_t now_ns) override { inner_.on_timer(now_ns); }
  bool poll_tx(uint64_t now_ns, sim::TxFrame& out) override { return inner_.poll_tx(now_ns, out); }
  uint64_t next_deadline_ns() const override { return inner_.next_deadline_ns(); }

 private:
  sim::Node& inner_;
  std::function<uint64_t()> placed_;
  Series& series_;
  uint64_t last_ = 0;
};

struct Host {
  std::unique_ptr<eng::Endpoint> ep;  // transports mrc and spray
  std::unique_ptr<sim::EndpointNode<eng::Endpoint>> adapter;
  std::unique_ptr<sim::GbnEndpoint> gbn;  // transport rc
  uint32_t rkey = 0;                      // rc: the buffer's rkey
  std::unique_ptr<sim::harness::NicNode> nic;
  std::unique_ptr<TapNode> tap;
  std::vector<uint32_t> rx_qpns;  // responder QPs (time series)
  NodeId id = sim::kNone;
  uint32_t cq = 0;
  eng::MemoryRegion mr{};
};

struct FlowState {
  uint32_t qpn_src = 0, qpn_dst = 0;
  bool done = false, error = false;
  uint64_t done_ns = 0;
};

uint64_t percentile_u64(std::vector<uint64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(idx, v.size() - 1)];
}
double percentile_d(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t idx = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
  return v[std::min(idx, v.size() - 1)];
}

uint64_t peak_rss_kb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_maxrss);
}

}  // namespace

RunResult run(const Topology& topo, const Workload& wl, const RunConfig& cfg,
              std::ostream* progress_out) {
  RunResult r;
  const auto wall0 = std::chrono::steady_clock::now();
  if (std::string p = validate_topology(topo); !p.empty()) {
    r.error = p;
    return r;
  }
  if (wl.nodes > topo.hosts) {
    r.error = "the workload has " + std::to_string(wl.nodes) + " nodes, the topology " +
              std::to_string(topo.hosts) + " hosts";
    return r;
  }
  if (cfg.cc != "nscc" && cfg.cc != "none") {
    r.error = "cc must be nscc or none, got '" + cfg.cc + "'";
    return r;
  }
  if (cfg.mtu != 1024 && cfg.mtu != 2048 && cfg.mtu != 4096) {
    r.error = "mtu must be 1024, 2048 or 4096";
    return r;
  }
  if (cfg.transport != "mrc" && cfg.transport != "rc" && cfg.transport != "spray") {
    r.error = "transport must be mrc, rc or spray, got '" + cfg.transport + "'";
    return r;
  }
  const bool rc_transport = cfg.transport == "rc";
  Series series{cfg.timeseries_ns, &r.ts_bytes, &r.ts_plane_bytes};
  r.ts_plane_bytes.resize(cfg.timeseries_ns > 0 ? topo.planes : 0);
  const uint32_t H = topo.hosts, P = topo.planes;

  // Cable rates: degraded cables (htsim's -failed, and explicit 'rate' failures).
  const size_t cables = size_t{P} * topo.leaves() * topo.spines;
  std::vector<double> cable_rate(cables, 1.0);
  {
    sim::Rng rng(sim::derive_seed(cfg.seed, "degraded", topo.random_degraded));
    uint32_t picked = 0;
    while (picked < topo.random_degraded) {
      const size_t c = rng.uniform(cables);
      if (cable_rate[c] != 1.0) continue;
      cable_rate[c] = topo.random_degraded_fraction;
      ++picked;
    }
  }
  for (const Failure& f : topo.failures) {
    if (f.down) continue;
    for (uint32_t l = 0; l < topo.leaves(); ++l) {
      if (f.leaf >= 0 && f.leaf != l) continue;
      for (uint32_t m = 0; m < topo.spines; ++m) {
        if (f.spine >= 0 && f.spine != m) continue;
        cable_rate[(size_t{f.plane - 1u} * topo.leaves() + l) * topo.spines + m] = f.rate_fraction;
      }
    }
  }

  sim::SimConfig sc;
  sc.seed = cfg.seed;
  sc.keep_decisions = false;
  sim::Simulator s(sc);

  std::vector<FlowState> fs(wl.flows.size());
  std::vector<Host> hosts(H);
  uint64_t completed = 0;
  // One buffer for every flow's source and destination: a WRITE of offset o copies the bytes
  // at o onto themselves, so the engine does all its copying without gigabytes of memory.
  uint64_t max_bytes = 1;
  for (const Flow& f : wl.flows) max_bytes = std::max(max_bytes, f.bytes);
  std::vector<uint8_t> buffer(max_bytes);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = static_cast<uint8_t>(i * 131);

  // The engine's view of the path: unloaded RTT of an MTU frame (4 hops each way, or 2 within a
  // leaf; the NSCC base RTT takes the longer one).
  const uint64_t frame_bits = (uint64_t{cfg.mtu} + 100) * 8;
  const uint64_t ser_host = frame_bits * 1'000'000'000 / topo.host_rate_bps;
  const uint64_t ser_fab = frame_bits * 1'000'000'000 / topo.fabric_rate_bps;
  const uint64_t one_way =
      2 * (topo.host_delay_ns + ser_host) + 2 * (topo.fabric_delay_ns + ser_fab);
  const uint64_t base_rtt_ns = one_way + 2 * topo.host_delay_ns + 2 * topo.fabric_delay_ns;

  uint8_t timeout = cfg.timeout;
  if (timeout == 0) {
    const uint64_t queue_ns = topo.ecn_threshold_bytes * 8 * 1'000'000'000 /
                              std::min(topo.host_rate_bps, topo.fabric_rate_bps);
    const uint64_t want_ns = 2 * base_rtt_ns + 4 * queue_ns;
    timeout = 1;
    while (timeout < 31 && (uint64_t{1024} << timeout) < want_ns) ++timeout;
  }
  r.timeout = timeout;
  // rc: no congestion control, so the window is what bounds a QP: twice the unloaded BDP of a
  // host link, at least 8 packets.
  r.rc_window_psns = cfg.rc_window_psns;
  if (rc_transport && r.rc_window_psns == 0) {
    const uint64_t bdp = topo.host_rate_bps / 8 * base_rtt_ns / 1'000'000'000;
    r.rc_window_psns = static_cast<uint32_t>(std::max<uint64_t>(8, 2 * bdp / cfg.mtu + 1));
  }

  std::vector<NodeId> ids;
  for (uint32_t h = 0; h < H; ++h) {
    Host& x = hosts[h];
    if (rc_transport) {
      sim::GbnConfig g;
      g.name = "h" + std::to_string(h);
      g.gid = host_gid(h);
      g.port = 1;
      g.mac = {0x02, static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h), 0, 0, 1};
      g.next_hop_mac = {0x02, 0, 0, 0, 0xEE, 1};
      g.path_mtu = cfg.mtu;
      g.window_psns = r.rc_window_psns;
      g.timeout_ns = uint64_t{1024} << timeout;
      g.seed = cfg.seed * 1'000'003 + h + 1;
      x.gbn = std::make_unique<sim::GbnEndpoint>(g);
      x.rkey = x.gbn->register_region(buffer.data(), buffer.size());
      x.nic = std::make_unique<sim::harness::NicNode>(*x.gbn);
      sim::Node* top = x.nic.get();
      if (cfg.timeseries_ns > 0) {
        x.tap = std::make_unique<TapNode>(
            *x.nic, [&x] { return x.gbn->stats().bytes_placed; }, series);
        top = x.tap.get();
      }
      x.id = s.add_node(g.name, *top);
      s.set_node_address(x.id, g.gid);
      ids.push_back(x.id);
      continue;
    }
    eng::EndpointConfig ec;
    ec.name = "h" + std::to_string(h);
    ec.gid = host_gid(h);
    ec.seed = cfg.seed * 1'000'003 + h + 1;
    ec.ev_format = wire::EvFormat::kStev;
    // spray: no SACK-gap retirement, and (ev_min_active below) no demotion at all.
    if (cfg.transport == "spray") ec.retire_ev_on_sack_gap = false;
    for (uint32_t p = 1; p <= P; ++p) {
      eng::PortConfig pc;
      pc.mac = {0x02, static_cast<uint8_t>(h >> 8), static_cast<uint8_t>(h), 0,
                0,    static_cast<uint8_t>(p)};
      pc.next_hop_mac = {0x02, 0, 0, 0, 0xEE, static_cast<uint8_t>(p)};
      ec.ports.push_back(pc);
    }
    x.ep = std::make_unique<eng::Endpoint>(ec);
    x.adapter = std::make_unique<sim::EndpointNode<eng::Endpoint>>(*x.ep);
    x.nic = std::make_unique<sim::harness::NicNode>(*x.adapter);
    sim::Node* top = x.nic.get();
    if (cfg.timeseries_ns > 0) {
      x.tap = std::make_unique<TapNode>(
          *x.nic,
          [&x] {
            uint64_t placed = 0;
            eng::QpStats st;
            for (uint32_t q : x.rx_qpns)
              if (x.ep->qp_stats(q, st).ok()) placed += st.data_bytes_placed;
            return placed;
          },
          series);
      top = x.tap.get();
    }
    x.id = s.add_node(ec.name, *top);
    s.set_node_address(x.id, ec.gid);
    ids.push_back(x.id);
    eng::Status st = x.ep->create_cq(4096, x.cq);
    if (st.ok())
      st = x.ep->register_mr(buffer.data(), buffer.size(),
                             eng::kAccessLocalWrite | eng::kAccessRemoteWrite, x.mr);
    eng::CcProfile cc;
    cc.algorithm = cfg.cc == "nscc" ? std::string(eng::kCcNscc) : std::string(eng::kCcNone);
    cc.nscc.base_rtt = static_cast<uint32_t>(base_rtt_ns);
    if (st.ok())
      st = x.ep->add_ev_profile(
          1, sim::harness::generated_ev_profile(
                 cfg.evs, 0, cfg.transport == "spray" ? eng::kEvMinActiveAll : 1));
    if (st.ok()) st = x.ep->add_cc_profile(2, cc);
    if (!st.ok()) {
      r.error = "host " + std::to_string(h) + ": " + st.message;
      return r;
    }
    x.ep->set_event_sink([&fs, &completed, &r](const eng::Event& e) {
      if (e.kind == eng::EventKind::kCompletion) {
        const eng::EventField* side = e.find("side");
        if (side == nullptr || side->type != eng::EventField::Type::kStr || side->s != "send")
          return;
        const eng::EventField* w = e.find("wr_id");
        if (w == nullptr || w->u == 0 || w->u > fs.size()) return;
        FlowState& f = fs[w->u - 1];
        if (f.done) return;
        f.done = true;
        f.done_ns = e.t_ns;
        const eng::EventField* status = e.find("status");
        f.error = status != nullptr && status->type == eng::EventField::Type::kStr &&
                  status->s != "IBV_WC_SUCCESS";
        ++completed;
      } else if (e.kind == eng::EventKind::kEvState) {
        const eng::EventField* to = e.find("to");
        if (to != nullptr && to->type == eng::EventField::Type::kStr && to->s == "ASSUMED_BAD")
          ++r.ev_retirements;
      }
    });
  }
  ClosFabric fabric(s, topo, ids, cable_rate);
  for (uint32_t h = 0; h < H; ++h) {
    std::vector<LinkId> up;
    for (uint32_t p = 0; p < P; ++p) up.push_back(fabric.up(p, h));
    sim::LinkConfig hl;
    hl.rate_bps = topo.host_rate_bps;
    hosts[h].nic->attach(s, std::move(up), 2 * (uint64_t{cfg.mtu} + 100),
                         sim::harness::nic_recheck_ns(hl));
  }
  for (size_t c = 0; c < cables; ++c) {
    if (cable_rate[c] != 1.0) r.degraded.push_back(s.link_name(fabric.l2s(c)));
  }
  // Timed failures.
  for (const Failure& f : topo.failures) {
    if (!f.down) continue;
    const uint32_t p = f.plane - 1u;
    for (uint32_t l = 0; l < topo.leaves(); ++l) {
      if (f.leaf >= 0 && f.leaf != l) continue;
      for (uint32_t m = 0; m < topo.spines; ++m) {
        if (f.spine >= 0 && f.spine != m) continue;
        const size_t c = fabric.cable(p, l, m);
        s.link_down_between(fabric.l2s(c), f.from_ns, f.until_ns);
        s.link_down_between(fabric.s2l(c), f.from_ns, f.until_ns);
      }
      // A leaf (or a plane) failing takes its host links with it; a spine failure does not.
      if (f.spine < 0) {
        for (uint32_t h = l * topo.hosts_per_leaf; h < (l + 1) * topo.hosts_per_leaf; ++h) {
          s.link_down_between(fabric.up(p, h), f.from_ns, f.until_ns);
          s.link_down_between(fabric.down(p, h), f.from_ns, f.until_ns);
        }
      }
    }
  }

  // QPs: one pair per flow, brought up to RTS at once.
  auto bring_up = [&](uint32_t h, uint32_t qpn, uint32_t peer, uint32_t peer_qpn, uint32_t sq_psn,
                      uint32_t peer_sq_psn) -> std::string {
    eng::Endpoint& ep = *hosts[h].ep;
    eng::QpAttr at;
    eng::MrcQpAttr m;
    at.qp_state = eng::QpState::kInit;
    at.qp_access_flags = eng::kAccessLocalWrite | eng::kAccessRemoteWrite;
    m.ev_profile_id = 1;
    m.cc_profile_id = 2;
    eng::Status st = ep.modify_qp(qpn, at, eng::kQpState | eng::kQpAccessFlags, m,
                                  eng::kMrcEvProfileId | eng::kMrcCcProfileId | eng::kMrcHint);
    if (!st.ok()) return "modify_qp INIT: " + st.message;
    at.qp_state = eng::QpState::kRtr;
    at.dgid = host_gid(peer);
    at.dest_qp_num = peer_qpn;
    at.rq_psn = peer_sq_psn;
    at.path_mtu = cfg.mtu;
    m.max_wimm_dest = 16;
    m.mpr_dest = 8;
    st = ep.modify_qp(
        qpn, at, eng::kQpState | eng::kQpAv | eng::kQpDestQpn | eng::kQpRqPsn | eng::kQpPathMtu, m,
        eng::kMrcMaxWimmDest | eng::kMrcMprDest | eng::kMrcCap);
    if (!st.ok()) return "modify_qp RTR: " + st.message;
    at.qp_state = eng::QpState::kRts;
    at.sq_psn = sq_psn;
    m.max_wimm = 16;
    m.mpr = 8;
    m.retry.linear_cnt = 7;
    m.retry.exp_cnt = eng::kUnlimitedExpRetry;
    m.timeout = timeout;
    st = ep.modify_qp(qpn, at, eng::kQpState | eng::kQpSqPsn, m,
                      eng::kMrcMaxWimm | eng::kMrcMpr | eng::kMrcRetryCnt | eng::kMrcTimeout);
    if (!st.ok()) return "modify_qp RTS: " + st.message;
    return {};
  };
  for (size_t i = 0; i < wl.flows.size() && rc_transport; ++i) {
    // rc: one plane and one UDP source port per QP pair, hashed from the seed and the flow.
    const Flow& f = wl.flows[i];
    const uint64_t pick = mix64(sim::derive_seed(cfg.seed, "rc-path", f.id) ^ i);
    const uint8_t plane = static_cast<uint8_t>(1 + pick % P);
    const uint16_t sport = static_cast<uint16_t>(0xC000 | ((pick >> 32) & 0x3FFF));
    sim::GbnEndpoint& a = *hosts[f.src].gbn;
    sim::GbnEndpoint& b = *hosts[f.dst].gbn;
    const uint32_t qa = a.create_qp(sport, plane);
    const uint32_t qb = b.create_qp(sport, plane);
    a.connect(qa, host_gid(f.dst), qb, b.initial_psn(qb));
    b.connect(qb, host_gid(f.src), qa, a.initial_psn(qa));
    fs[i].qpn_src = qa;
    fs[i].qpn_dst = qb;
    s.at(f.start_ns, [&, i] {
      const Flow& fl = wl.flows[i];
      Host& src = hosts[fl.src];
      if (!src.gbn->post_write(fs[i].qpn_src, i + 1, buffer.data(), static_cast<uint32_t>(fl.bytes),
                               reinterpret_cast<uintptr_t>(buffer.data()), hosts[fl.dst].rkey) &&
          r.error.empty())
        r.error = "flow " + std::to_string(fl.id) + ": post_write refused";
      s.wake(src.id);
    });
  }
  for (size_t i = 0; i < wl.flows.size() && !rc_transport; ++i) {
    const Flow& f = wl.flows[i];
    uint32_t q[2] = {0, 0};
    uint32_t psn[2] = {0, 0};
    const uint32_t end[2] = {f.src, f.dst};
    for (int k = 0; k < 2; ++k) {
      Host& x = hosts[end[k]];
      eng::QpInitAttr init;
      init.send_cq = x.cq;
      init.recv_cq = x.cq;
      init.cap.max_send_wr = 64;
      init.cap.max_recv_wr = 16;
      init.cap.max_send_sge = 1;
      init.cap.max_recv_sge = 1;
      eng::Status st = x.ep->create_qp(init, q[k]);
      if (!st.ok()) {
        r.error = "flow " + std::to_string(f.id) + ": create_qp: " + st.message;
        return r;
      }
      psn[k] = x.ep->random_psn();
    }
    std::string e = bring_up(f.src, q[0], f.dst, q[1], psn[0], psn[1]);
    if (e.empty()) e = bring_up(f.dst, q[1], f.src, q[0], psn[1], psn[0]);
    if (!e.empty()) {
      r.error = "flow " + std::to_string(f.id) + ": " + e;
      return r;
    }
    fs[i].qpn_src = q[0];
    fs[i].qpn_dst = q[1];
    hosts[f.dst].rx_qpns.push_back(q[1]);
    s.at(f.start_ns, [&, i] {
      const Flow& fl = wl.flows[i];
      Host& src = hosts[fl.src];
      const eng::Sge sge{reinterpret_cast<uintptr_t>(buffer.data()),
                         static_cast<uint32_t>(fl.bytes), src.mr.lkey};
      eng::Status st = src.ep->post_write(fs[i].qpn_src, i + 1, {&sge, 1},
                                          reinterpret_cast<uintptr_t>(buffer.data()),
                                          hosts[fl.dst].mr.rkey, std::nullopt, true);
      if (!st.ok() && r.error.empty())
        r.error = "flow " + std::to_string(fl.id) + ": " + st.message;
      s.wake(src.id);
    });
  }

  // Run in slices until every flow completed or the end time.
  auto last_print = std::chrono::steady_clock::now();
  eng::Wc wcs[64];
  while (s.now_ns() < cfg.end_ns && completed < wl.flows.size() && r.error.empty()) {
    const sim::RunResult rr = s.run_until(std::min(cfg.end_ns, s.now_ns() + cfg.slice_ns));
    if (rr.status == sim::RunStatus::kError) {
      r.error = "simulator: " + rr.error;
      break;
    }
    for (Host& x : hosts) {
      if (x.gbn) {
        sim::GbnCompletion c;
        while (x.gbn->poll(c)) {
          if (c.wr_id == 0 || c.wr_id > fs.size() || fs[c.wr_id - 1].done) continue;
          FlowState& f = fs[c.wr_id - 1];
          f.done = true;
          f.done_ns = c.t_ns;
          f.error = c.status != sim::GbnStatus::kSuccess;
          ++completed;
        }
        continue;
      }
      while (x.ep->poll_cq(x.cq, wcs) > 0) {
      }
    }
    if (cfg.progress && progress_out != nullptr) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_print >= std::chrono::seconds(1)) {
        last_print = now;
        const double pct = 100.0 * static_cast<double>(completed) /
                           static_cast<double>(std::max<size_t>(wl.flows.size(), 1));
        char line[200];
        std::snprintf(line, sizeof line,
                      "mrct sim: t=%.1f us, %llu/%zu flows (%.1f%%), %.2f M events, %.1f s wall",
                      static_cast<double>(s.now_ns()) / 1e3,
                      static_cast<unsigned long long>(completed), wl.flows.size(), pct,
                      static_cast<double>(s.events_dispatched()) / 1e6,
                      std::chrono::duration<double>(now - wall0).count());
        *progress_out << line << std::endl;
      }
    }
  }
  r.sim_end_ns = s.now_ns();
  r.events = s.events_dispatched();

  // Per flow.
  for (size_t i = 0; i < wl.flows.size(); ++i) {
    const Flow& f = wl.flows[i];
    FlowResult fr;
    fr.flow = f;
    fr.done = fs[i].done;
    fr.error = fs[i].error;
    if (fr.done) fr.fct_ns = fs[i].done_ns - std::min(fs[i].done_ns, f.start_ns);
    const bool same_leaf = f.src / topo.hosts_per_leaf == f.dst / topo.hosts_per_leaf;
    const uint64_t frames = (f.bytes + cfg.mtu - 1) / cfg.mtu;
    const uint64_t wire_bits = (f.bytes + frames * 100) * 8;
    const uint64_t rtt =
        same_leaf ? 2 * (2 * topo.host_delay_ns + ser_host) + ser_host : base_rtt_ns;
    // The host sends on every plane at once.
    fr.ideal_fct_ns = wire_bits * 1'000'000'000 / (topo.host_rate_bps * P) + rtt;
    if (fr.done)
      fr.slowdown = static_cast<double>(fr.fct_ns) / static_cast<double>(fr.ideal_fct_ns);
    if (rc_transport) {
      fr.retransmits = hosts[f.src].gbn->retransmitted_packets(fs[i].qpn_src);
      fr.bytes_placed = hosts[f.dst].gbn->bytes_placed(fs[i].qpn_dst);
      r.flows.push_back(fr);
      continue;
    }
    eng::QpStats st;
    if (hosts[f.src].ep->qp_stats(fs[i].qpn_src, st).ok()) {
      fr.retransmits = st.retransmits;
      r.data_packets_sent += st.data_packets_sent;
      r.retransmits += st.retransmits;
      r.rtx_timeout += st.rtx_timeout;
      r.rtx_nack += st.rtx_nack;
      r.rtx_sack_gap += st.rtx_sack_gap;
      r.rtx_ack_wait += st.rtx_ack_wait;
    }
    eng::QpStats sd;
    if (hosts[f.dst].ep->qp_stats(fs[i].qpn_dst, sd).ok()) {
      fr.bytes_placed = sd.data_bytes_placed;
      r.trimmed_rx += sd.trimmed_rx;
      r.ce_rx += sd.ce_rx;
    }
    r.flows.push_back(fr);
  }

  for (const Host& x : hosts) {
    if (!x.gbn) continue;
    const sim::GbnStats& g = x.gbn->stats();
    r.data_packets_sent += g.data_packets_sent;
    r.retransmits += g.retransmitted_packets;
    r.rc_go_backs += g.go_backs;
    r.rc_timeouts += g.timeouts;
  }
  if (cfg.timeseries_ns > 0) {
    // Every series covers the whole run, so bins line up across runs of one configuration.
    const size_t bins =
        static_cast<size_t>((r.sim_end_ns + cfg.timeseries_ns - 1) / cfg.timeseries_ns);
    r.ts_bytes.resize(std::max(bins, r.ts_bytes.size()), 0);
    for (std::vector<uint64_t>& p : r.ts_plane_bytes) p.resize(r.ts_bytes.size(), 0);
  }

  // Queues per link class.
  r.queues.resize(kClasses);
  std::vector<double> sum(kClasses, 0);
  for (uint8_t c = 0; c < kClasses; ++c) r.queues[c].name = kClassNames[c];
  for (LinkId l = 0; l < s.link_count(); ++l) {
    ClassQueue& q = r.queues[fabric.link_class(l)];
    const sim::LinkStats& ls = s.link_stats(l);
    ++q.links;
    q.max_backlog_bytes = std::max(q.max_backlog_bytes, ls.max_backlog_bytes);
    sum[fabric.link_class(l)] += static_cast<double>(ls.max_backlog_bytes);
    q.drops += ls.drops();
    q.trims += ls.trim_congestion + ls.trim_fault;
    q.ecn_marks += ls.ecn_congestion + ls.ecn_fault;
  }
  for (uint8_t c = 0; c < kClasses; ++c) {
    if (r.queues[c].links > 0)
      r.queues[c].mean_max_backlog_bytes = sum[c] / static_cast<double>(r.queues[c].links);
  }
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  r.peak_rss_kb = peak_rss_kb();
  return r;
}

std::string result_json(const Topology& topo, const Workload& wl, const RunConfig& cfg,
                        const RunResult& r, bool perf) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["tool"] = "mrct sim";
  j["seed"] = cfg.seed;
  j["topology"] = {{"tiers", topo.tiers},
                   {"hosts", topo.hosts},
                   {"planes", topo.planes},
                   {"hosts_per_leaf", topo.hosts_per_leaf},
                   {"leaves_per_plane", topo.leaves()},
                   {"spines_per_plane", topo.spines},
                   {"host_rate_bps", topo.host_rate_bps},
                   {"fabric_rate_bps", topo.fabric_rate_bps},
                   {"host_delay_ns", topo.host_delay_ns},
                   {"fabric_delay_ns", topo.fabric_delay_ns},
                   {"queue_bytes", topo.queue_bytes},
                   {"ecn_threshold_bytes", topo.ecn_threshold_bytes},
                   {"trim", topo.trim},
                   {"degraded_links", r.degraded},
                   {"timed_failures", topo.failures.size()}};
  j["engine"] = {{"transport", cfg.transport},
                 {"mtu", cfg.mtu},
                 {"cc", cfg.cc},
                 {"evs_per_qp", cfg.evs},
                 {"timeout", r.timeout},
                 {"timeout_ns", (uint64_t{1024} << r.timeout)}};
  if (cfg.transport == "rc") {
    // No congestion control and no EVs: a fixed window on one path.
    j["engine"]["cc"] = "none";
    j["engine"]["evs_per_qp"] = 1;
    j["engine"]["rc_window_psns"] = r.rc_window_psns;
  }
  std::vector<uint64_t> fct;
  std::vector<double> slow;
  uint64_t bytes_done = 0, done = 0, errors = 0, last_done_ns = 0, first_start = UINT64_MAX;
  for (const FlowResult& f : r.flows) {
    first_start = std::min(first_start, f.flow.start_ns);
    if (!f.done) continue;
    ++done;
    errors += f.error;
    fct.push_back(f.fct_ns);
    slow.push_back(f.slowdown);
    bytes_done += f.flow.bytes;
    last_done_ns = std::max(last_done_ns, f.flow.start_ns + f.fct_ns);
  }
  const double span_ns =
      done == 0 ? 0 : static_cast<double>(last_done_ns - std::min(first_start, last_done_ns));
  ordered_json sum;
  sum["flows"] = r.flows.size();
  sum["completed"] = done;
  sum["completed_with_error"] = errors;
  sum["sim_end_ns"] = r.sim_end_ns;
  sum["fct_ns"] = {{"p50", percentile_u64(fct, 0.50)},
                   {"p90", percentile_u64(fct, 0.90)},
                   {"p99", percentile_u64(fct, 0.99)},
                   {"max", percentile_u64(fct, 1.0)}};
  sum["slowdown"] = {{"p50", percentile_d(slow, 0.50)},
                     {"p90", percentile_d(slow, 0.90)},
                     {"p99", percentile_d(slow, 0.99)},
                     {"max", percentile_d(slow, 1.0)}};
  sum["goodput_gbps"] = span_ns > 0 ? static_cast<double>(bytes_done) * 8 / span_ns : 0.0;
  sum["data_packets_sent"] = r.data_packets_sent;
  sum["retransmits"] = {{"total", r.retransmits},
                        {"timeout", r.rtx_timeout},
                        {"nack", r.rtx_nack},
                        {"sack_gap", r.rtx_sack_gap},
                        {"ack_wait", r.rtx_ack_wait}};
  sum["trimmed_rx"] = r.trimmed_rx;
  sum["ce_rx"] = r.ce_rx;
  sum["ev_retirements"] = r.ev_retirements;
  if (cfg.transport == "rc") sum["rc"] = {{"go_backs", r.rc_go_backs}, {"timeouts", r.rc_timeouts}};
  sum["events"] = r.events;
  ordered_json qs = ordered_json::array();
  for (const ClassQueue& q : r.queues) {
    qs.push_back({{"class", q.name},
                  {"links", q.links},
                  {"max_backlog_bytes", q.max_backlog_bytes},
                  {"mean_max_backlog_bytes", q.mean_max_backlog_bytes},
                  {"drops", q.drops},
                  {"trims", q.trims},
                  {"ecn_marks", q.ecn_marks}});
  }
  sum["queues"] = qs;
  j["summary"] = sum;
  ordered_json flows = ordered_json::array();
  for (const FlowResult& f : r.flows) {
    const double gbps = f.done && f.fct_ns > 0
                            ? static_cast<double>(f.flow.bytes) * 8 / static_cast<double>(f.fct_ns)
                            : 0.0;
    flows.push_back({{"id", f.flow.id},
                     {"src", f.flow.src},
                     {"dst", f.flow.dst},
                     {"bytes", f.flow.bytes},
                     {"start_ns", f.flow.start_ns},
                     {"done", f.done},
                     {"error", f.error},
                     {"fct_ns", f.fct_ns},
                     {"ideal_fct_ns", f.ideal_fct_ns},
                     {"slowdown", f.slowdown},
                     {"goodput_gbps", gbps},
                     {"retransmits", f.retransmits},
                     {"bytes_placed", f.bytes_placed}});
  }
  j["flows"] = flows;
  if (cfg.timeseries_ns > 0) {
    j["timeseries"] = {
        {"bin_ns", cfg.timeseries_ns}, {"bytes", r.ts_bytes}, {"plane_bytes", r.ts_plane_bytes}};
  }
  if (perf) {
    j["perf"] = {{"events", r.events},
                 {"wall_s", r.wall_s},
                 {"events_per_s", r.wall_s > 0 ? static_cast<double>(r.events) / r.wall_s : 0.0},
                 {"peak_rss_mb", static_cast<double>(r.peak_rss_kb) / 1024.0}};
  }
  (void)wl;
  return j.dump(2) + "\n";
}

}  // namespace mrc::simrun
