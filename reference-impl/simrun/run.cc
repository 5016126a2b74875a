// The run: a multi-plane Clos on mrc::sim, one reference engine endpoint per host, a QP pair
// per flow, results.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
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

// Link classes, for the queue figures. With 3 tiers leaf_up / spine_down are the leaf <->
// aggregation links.
enum LinkClass : uint8_t { kHostUp, kLeafUp, kSpineDown, kHostDown, kAggUp, kCoreDown, kClasses };
constexpr const char* kClassNames[kClasses] = {"host_up",   "leaf_up", "spine_down",
                                               "host_down", "agg_up",  "core_down"};

// Cable numbering, shared by the rates (built before the fabric) and the fabric: the leaf <->
// spine (aggregation) cables of every plane first, (plane, leaf, spine of the pod), then the
// aggregation <-> core cables, (plane, aggregation switch, its j-th core). With 2 tiers the
// first part is the numbering the 2-tier fabric always had.
struct Cables {
  explicit Cables(const Topology& topo)
      : t(topo),
        L(topo.leaves()),
        LP(topo.pod_leaves()),
        A(topo.spines),
        G(topo.pods() * topo.spines),
        U(topo.tiers == 3 ? topo.cores / topo.spines : 0),
        leaf_count(size_t{topo.planes} * L * A),
        count(leaf_count + size_t{topo.planes} * G * U) {}
  size_t leaf(uint32_t p, uint32_t l, uint32_t a) const { return (size_t{p} * L + l) * A + a; }
  size_t core(uint32_t p, uint32_t g, uint32_t j) const {
    return leaf_count + (size_t{p} * G + g) * U + j;
  }
  // The cables a failure names (docs/simulation.md, `fail` lines); validate_topology has
  // checked that the switches named exist and are wired to each other.
  std::vector<size_t> of(const Failure& f) const {
    std::vector<size_t> out;
    const uint32_t p = f.plane - 1u;
    const uint32_t pods = t.pods();
    if (f.leaf >= 0 && f.spine >= 0) {
      out.push_back(leaf(p, static_cast<uint32_t>(f.leaf), static_cast<uint32_t>(f.spine) % A));
    } else if (f.spine >= 0 && f.core >= 0) {
      out.push_back(core(p, static_cast<uint32_t>(f.spine), static_cast<uint32_t>(f.core) / A));
    } else if (f.leaf >= 0) {
      for (uint32_t a = 0; a < A; ++a) out.push_back(leaf(p, static_cast<uint32_t>(f.leaf), a));
    } else if (f.spine >= 0) {
      const uint32_t g = static_cast<uint32_t>(f.spine), q = g / A;
      for (uint32_t l = q * LP; l < (q + 1) * LP; ++l) out.push_back(leaf(p, l, g % A));
      for (uint32_t j = 0; j < U; ++j) out.push_back(core(p, g, j));
    } else if (f.core >= 0) {
      const uint32_t c = static_cast<uint32_t>(f.core);
      for (uint32_t q = 0; q < pods; ++q) out.push_back(core(p, q * A + c % A, c / A));
    } else {
      for (uint32_t l = 0; l < L; ++l)
        for (uint32_t a = 0; a < A; ++a) out.push_back(leaf(p, l, a));
      for (uint32_t g = 0; g < G; ++g)
        for (uint32_t j = 0; j < U; ++j) out.push_back(core(p, g, j));
    }
    return out;
  }

  const Topology& t;
  uint32_t L, LP, A, G, U;
  size_t leaf_count, count;
};

// The path a pinned EV names (routing srv6, pinned_ev_check), or -1 for a frame whose EV is not
// pinned (it is hashed).
int64_t pinned_path(const sim::Packet& pk, uint32_t paths) {
  if ((pk.info.wev & kPinnedTag) == 0) return -1;
  return static_cast<int64_t>((pk.info.wev & 0xFFFFu) % paths);
}

// Per plane: leaves with hosts_per_leaf hosts each; 2 tiers: spines, one cable leaf <-> spine;
// 3 tiers: pods of leaves_per_pod leaves and `spines` aggregation switches (one cable from every
// leaf to every aggregation switch of its pod), and cores: aggregation switch a of a pod (a in
// 0..spines-1) has one cable to each core c with c mod spines = a (htsim's fat-tree wiring).
class ClosFabric {
 public:
  ClosFabric(sim::Simulator& s, const Topology& t, const std::vector<NodeId>& hosts,
             const std::vector<double>& cable_rate)
      : sim_(s), t_(t), k_(t), pinned_(t.routing == Routing::kSrv6) {
    NodeId max_id = 0;
    for (NodeId n : hosts) max_id = std::max(max_id, n);
    host_of_node_.assign(max_id + 1, UINT32_MAX);
    for (uint32_t h = 0; h < hosts.size(); ++h) host_of_node_[hosts[h]] = h;
    const uint32_t P = t.planes, L = k_.L, A = k_.A, G = k_.G, U = k_.U, H = t.hosts;
    up_.assign(size_t{P} * H, sim::kNone);
    down_.assign(size_t{P} * H, sim::kNone);
    cable_up_.assign(k_.count, sim::kNone);
    cable_down_.assign(k_.count, sim::kNone);
    // One hash seed per plane and tier: the switches of a tier hash alike, the tiers differently
    // (as real fabrics seed their switches' hashes), so a leaf's choice does not decide the
    // aggregation switch's.
    for (uint32_t p = 0; p < P; ++p) {
      hash_seed_.push_back(sim::derive_seed(s.seed(), "ecmp", p));
      agg_seed_.push_back(sim::derive_seed(s.seed(), "ecmp-agg", p));
    }
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
    auto set_class = [&](LinkId id, LinkClass c) {
      class_.resize(std::max<size_t>(class_.size(), id + 1), kHostUp);
      class_[id] = c;
    };
    const bool three = t.tiers == 3;
    auto agg_name = [&](uint32_t g) {
      return (three ? "agg" : "spine") + std::to_string(three ? g : g % A);
    };
    for (uint32_t p = 0; p < P; ++p) {
      const std::string pn = "p" + std::to_string(p + 1);
      std::vector<sim::SwitchId> leaf_sw, agg_sw, core_sw;
      for (uint32_t l = 0; l < L; ++l) {
        leaf_sw.push_back(
            sim_.add_switch(pn + ".leaf" + std::to_string(l),
                            [this, p, l](const sim::Packet& pk) { return route_leaf(p, l, pk); }));
      }
      for (uint32_t g = 0; g < G; ++g) {
        agg_sw.push_back(
            sim_.add_switch(pn + "." + agg_name(g),
                            [this, p, g](const sim::Packet& pk) { return route_agg(p, g, pk); }));
      }
      for (uint32_t c = 0; c < t.cores && three; ++c) {
        core_sw.push_back(
            sim_.add_switch(pn + ".core" + std::to_string(c),
                            [this, p, c](const sim::Packet& pk) { return route_core(p, c, pk); }));
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
        set_class(u, kHostUp);
        set_class(d, kHostDown);
      }
      auto add_cable = [&](size_t c, const std::string& lower, const std::string& upper,
                           sim::SwitchId lower_sw, sim::SwitchId upper_sw, LinkClass up_class,
                           LinkClass down_class) {
        const uint64_t rate = static_cast<uint64_t>(
            std::llround(static_cast<double>(t.fabric_rate_bps) * cable_rate[c]));
        const LinkId a =
            sim_.add_link(cfg(rate, t.fabric_delay_ns, pn + "." + lower + ">" + upper, false));
        sim_.link_to_switch(a, upper_sw);
        const LinkId b =
            sim_.add_link(cfg(rate, t.fabric_delay_ns, pn + "." + upper + ">" + lower, false));
        sim_.link_to_switch(b, lower_sw);
        cable_up_[c] = a;
        cable_down_[c] = b;
        set_class(a, up_class);
        set_class(b, down_class);
      };
      for (uint32_t l = 0; l < L; ++l) {
        const uint32_t q = l / k_.LP;
        for (uint32_t a = 0; a < A; ++a) {
          const uint32_t g = q * A + a;
          add_cable(k_.leaf(p, l, a), "leaf" + std::to_string(l), agg_name(g), leaf_sw[l],
                    agg_sw[g], kLeafUp, kSpineDown);
        }
      }
      for (uint32_t g = 0; g < G; ++g) {
        for (uint32_t j = 0; j < U; ++j) {
          const uint32_t c = g % A + A * j;
          add_cable(k_.core(p, g, j), agg_name(g), "core" + std::to_string(c), agg_sw[g],
                    core_sw[c], kAggUp, kCoreDown);
        }
      }
    }
  }
  ClosFabric(const ClosFabric&) = delete;
  ClosFabric& operator=(const ClosFabric&) = delete;

  const Cables& cables() const { return k_; }
  LinkId cable_up(size_t c) const { return cable_up_[c]; }
  LinkId cable_down(size_t c) const { return cable_down_[c]; }
  LinkId up(uint32_t p, uint32_t h) const { return up_[size_t{p} * t_.hosts + h]; }
  LinkId down(uint32_t p, uint32_t h) const { return down_[size_t{p} * t_.hosts + h]; }
  LinkClass link_class(LinkId l) const { return l < class_.size() ? class_[l] : kHostUp; }

 private:
  uint32_t host_of(NodeId n) const {
    return n < host_of_node_.size() ? host_of_node_[n] : UINT32_MAX;
  }
  // ECMP: the EV (UDP source port, flow label), the switch and the tier's seed pick the uplink.
  static uint32_t ecmp(uint64_t seed, uint32_t sw, const sim::Packet& pk, uint32_t n) {
    const uint64_t key =
        (uint64_t{pk.info.sport} << 20) ^ pk.info.flow_label ^ (uint64_t{sw} << 40);
    return static_cast<uint32_t>(mix64(seed ^ key) % n);
  }
  LinkId route_leaf(uint32_t p, uint32_t l, const sim::Packet& pk) const {
    const uint32_t h = host_of(pk.dst_node);
    if (h == UINT32_MAX) return sim::kNone;
    if (h / t_.hosts_per_leaf == l) return down_[size_t{p} * t_.hosts + h];
    const int64_t path = pinned_ ? pinned_path(pk, t_.paths()) : -1;
    const uint32_t a =
        path >= 0 ? static_cast<uint32_t>(path) % k_.A : ecmp(hash_seed_[p], l, pk, k_.A);
    return cable_up_[k_.leaf(p, l, a)];
  }
  LinkId route_agg(uint32_t p, uint32_t g, const sim::Packet& pk) const {
    const uint32_t h = host_of(pk.dst_node);
    if (h == UINT32_MAX) return sim::kNone;
    const uint32_t lh = h / t_.hosts_per_leaf;
    if (lh / k_.LP == g / k_.A) return cable_down_[k_.leaf(p, lh, g % k_.A)];
    if (k_.U == 0) return sim::kNone;
    // Up to a core: with a pinned EV the core is the path (this switch is path mod A, the one
    // wired to it), so j = path / A.
    const int64_t path = pinned_ ? pinned_path(pk, t_.paths()) : -1;
    const uint32_t j =
        path >= 0 ? static_cast<uint32_t>(path) / k_.A % k_.U : ecmp(agg_seed_[p], g, pk, k_.U);
    return cable_up_[k_.core(p, g, j)];
  }
  LinkId route_core(uint32_t p, uint32_t c, const sim::Packet& pk) const {
    const uint32_t h = host_of(pk.dst_node);
    if (h == UINT32_MAX) return sim::kNone;
    const uint32_t q = h / t_.hosts_per_leaf / k_.LP;
    return cable_down_[k_.core(p, q * k_.A + c % k_.A, c / k_.A)];
  }

  sim::Simulator& sim_;
  const Topology& t_;
  Cables k_;
  bool pinned_;
  std::vector<uint32_t> host_of_node_;
  std::vector<uint64_t> hash_seed_, agg_seed_;
  std::vector<LinkId> up_, down_, cable_up_, cable_down_;
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

// routing srv6: EV i on plane i % P names path (first + i / P) % paths (pinned_ev_check). The
// profile's fields copy the compact EV to the wire unchanged (16 + 16 bits, STEV).
eng::EvProfile pinned_ev_profile(const Topology& t, uint32_t evs, uint32_t host) {
  eng::EvProfile prof;
  prof.mode = eng::EvMode::kExplicit;
  prof.format_widths = {16, 16};
  prof.fields = {wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  prof.ev_count = evs;
  prof.active_count = 0;
  prof.ev_min_active = 1;
  const uint32_t P = t.planes, paths = t.paths();
  const uint32_t first = static_cast<uint32_t>(uint64_t{host} * ((evs + P - 1) / P) % paths);
  for (uint32_t i = 0; i < evs; ++i) {
    const uint32_t plane = i % P, path = (first + i / P) % paths, round = i / (P * paths);
    const uint32_t wev = kPinnedTag | ((round * P + plane) << 16) | path;
    eng::EvEntry e;
    e.ev[0] = static_cast<uint8_t>(wev >> 24);
    e.ev[1] = static_cast<uint8_t>(wev >> 16);
    e.ev[2] = static_cast<uint8_t>(wev >> 8);
    e.ev[3] = static_cast<uint8_t>(wev);
    e.port = static_cast<uint8_t>(plane + 1);
    prof.explicit_evs.push_back(e);
  }
  return prof;
}

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

void add_to_bin(std::vector<uint64_t>& bins, uint64_t k, uint64_t n) {
  if (bins.size() <= k) bins.resize(static_cast<size_t>(k) + 1, 0);
  bins[static_cast<size_t>(k)] += n;
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
  const bool pinned = topo.routing == Routing::kSrv6;
  if (pinned) {
    if (std::string p = pinned_ev_check(topo, cfg.evs); !p.empty()) {
      r.error = p;
      return r;
    }
  }
  const uint32_t H = topo.hosts, P = topo.planes;

  // Cable rates: degraded cables (htsim's -failed, and explicit 'rate' failures). htsim's
  // -failed degrades cables of the top tier: leaf-spine, or aggregation-core with 3 tiers.
  const Cables cables(topo);
  std::vector<double> cable_rate(cables.count, 1.0);
  {
    sim::Rng rng(sim::derive_seed(cfg.seed, "degraded", topo.random_degraded));
    const size_t first = topo.tiers == 3 ? cables.leaf_count : 0;
    const size_t n = topo.tiers == 3 ? cables.count - cables.leaf_count : cables.leaf_count;
    uint32_t picked = 0;
    while (picked < topo.random_degraded) {
      const size_t c = first + rng.uniform(n);
      if (cable_rate[c] != 1.0) continue;
      cable_rate[c] = topo.random_degraded_fraction;
      ++picked;
    }
  }
  for (const Failure& f : topo.failures) {
    if (f.down) continue;
    for (size_t c : cables.of(f)) cable_rate[c] = f.rate_fraction;
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

  // The engine's view of the path: unloaded RTT of an MTU frame through `fabric_hops` fabric
  // links each way (2 host links plus 2 (2 tiers) or 4 (3 tiers, between pods) fabric links;
  // 0 within a leaf, 2 within a pod). The NSCC base RTT takes the longest.
  const uint64_t frame_bits = (uint64_t{cfg.mtu} + 100) * 8;
  const uint64_t ser_host = frame_bits * 1'000'000'000 / topo.host_rate_bps;
  const uint64_t ser_fab = frame_bits * 1'000'000'000 / topo.fabric_rate_bps;
  auto unloaded_rtt = [&](uint64_t fabric_hops) {
    const uint64_t one_way =
        2 * (topo.host_delay_ns + ser_host) + fabric_hops * (topo.fabric_delay_ns + ser_fab);
    return one_way + 2 * topo.host_delay_ns + fabric_hops * topo.fabric_delay_ns;
  };
  const uint64_t max_fabric_hops = 2 * (uint64_t{topo.tiers} - 1);
  const uint64_t base_rtt_ns = unloaded_rtt(max_fabric_hops);

  uint8_t timeout = cfg.timeout;
  if (timeout == 0) {
    const uint64_t queue_ns = topo.ecn_threshold_bytes * 8 * 1'000'000'000 /
                              std::min(topo.host_rate_bps, topo.fabric_rate_bps);
    const uint64_t want_ns = 2 * base_rtt_ns + (2 + max_fabric_hops) * queue_ns;
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

  std::map<std::pair<uint64_t, uint64_t>, uint64_t> retired_paths;  // (plane, path) -> count
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
    if (st.ok()) {
      // spray: every EV stays in the rotation (no retirement), pinned or hashed.
      eng::EvProfile prof = pinned ? pinned_ev_profile(topo, cfg.evs, h)
                                   : sim::harness::generated_ev_profile(cfg.evs, 0, 1);
      if (cfg.transport == "spray") prof.ev_min_active = eng::kEvMinActiveAll;
      st = x.ep->add_ev_profile(1, prof);
    }
    if (st.ok()) st = x.ep->add_cc_profile(2, cc);
    if (!st.ok()) {
      r.error = "host " + std::to_string(h) + ": " + st.message;
      return r;
    }
    x.ep->set_event_sink([&fs, &completed, &r, &retired_paths, pinned,
                          bin_ns = cfg.timeseries_ns](const eng::Event& e) {
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
      } else if (e.kind == eng::EventKind::kRetransmit && bin_ns > 0) {
        // "retry_exceeded" reports the end of a QP's retries, not a packet sent again.
        const eng::EventField* cause = e.find("cause");
        if (cause == nullptr || cause->s != "retry_exceeded")
          add_to_bin(r.ts_retransmits, e.t_ns / bin_ns, 1);
      } else if (e.kind == eng::EventKind::kEvState) {
        const eng::EventField* to = e.find("to");
        if (to != nullptr && to->type == eng::EventField::Type::kStr && to->s == "ASSUMED_BAD") {
          ++r.ev_retirements;
          if (bin_ns > 0) add_to_bin(r.ts_ev_retirements, e.t_ns / bin_ns, 1);
          const eng::EventField* wev = e.find("wev");
          const eng::EventField* port = e.find("port");
          if (pinned && wev != nullptr && port != nullptr && (wev->u & kPinnedTag) != 0)
            ++retired_paths[{port->u, wev->u & 0xFFFFu}];
        }
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
  for (size_t c = 0; c < cables.count; ++c) {
    if (cable_rate[c] != 1.0) r.degraded.push_back(s.link_name(fabric.cable_up(c)));
  }
  // Timed failures.
  for (const Failure& f : topo.failures) {
    if (!f.down) continue;
    const uint32_t p = f.plane - 1u;
    for (size_t c : cables.of(f)) {
      s.link_down_between(fabric.cable_up(c), f.from_ns, f.until_ns);
      s.link_down_between(fabric.cable_down(c), f.from_ns, f.until_ns);
    }
    // A leaf (or a plane) failing takes its host links with it; a switch above does not.
    if (f.spine < 0 && f.core < 0) {
      for (uint32_t l = 0; l < topo.leaves(); ++l) {
        if (f.leaf >= 0 && f.leaf != l) continue;
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

  // Time series of the queues (and of rc's retransmissions, which raise no events): a sample at
  // the start of every bin. The samples change nothing in the simulation; their events are left
  // out of the event count.
  const uint8_t classes = topo.tiers == 3 ? kClasses : kHostDown + 1;
  uint64_t sampler_events = 0, rc_rtx_seen = 0;
  auto rc_rtx_total = [&] {
    uint64_t n = 0;
    for (const Host& x : hosts)
      if (x.gbn) n += x.gbn->stats().retransmitted_packets;
    return n;
  };
  std::function<void()> sample;
  if (cfg.timeseries_ns > 0) {
    r.ts_queue_max_bytes.resize(classes);
    sample = [&] {
      ++sampler_events;
      const uint64_t now = s.now_ns();
      const size_t k = static_cast<size_t>(now / cfg.timeseries_ns);
      for (std::vector<uint64_t>& q : r.ts_queue_max_bytes) q.resize(k + 1, 0);
      for (LinkId l = 0; l < s.link_count(); ++l) {
        uint64_t& m = r.ts_queue_max_bytes[fabric.link_class(l)][k];
        m = std::max(m, s.backlog_bytes(l));
      }
      if (rc_transport && k > 0) {
        const uint64_t n = rc_rtx_total();
        add_to_bin(r.ts_retransmits, k - 1, n - rc_rtx_seen);
        rc_rtx_seen = n;
      }
      if (now + cfg.timeseries_ns < cfg.end_ns) s.at(now + cfg.timeseries_ns, sample);
    };
    s.at(0, sample);
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
  r.events = s.events_dispatched() - sampler_events;

  // Per flow.
  for (size_t i = 0; i < wl.flows.size(); ++i) {
    const Flow& f = wl.flows[i];
    FlowResult fr;
    fr.flow = f;
    fr.done = fs[i].done;
    fr.error = fs[i].error;
    if (fr.done) fr.fct_ns = fs[i].done_ns - std::min(fs[i].done_ns, f.start_ns);
    const uint32_t src_leaf = f.src / topo.hosts_per_leaf, dst_leaf = f.dst / topo.hosts_per_leaf;
    const bool same_leaf = src_leaf == dst_leaf;
    const bool same_pod = src_leaf / topo.pod_leaves() == dst_leaf / topo.pod_leaves();
    const uint64_t frames = (f.bytes + cfg.mtu - 1) / cfg.mtu;
    const uint64_t wire_bits = (f.bytes + frames * 100) * 8;
    const uint64_t rtt = same_leaf  ? 2 * (2 * topo.host_delay_ns + ser_host) + ser_host
                         : same_pod ? unloaded_rtt(2)
                                    : base_rtt_ns;
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
    if (rc_transport && r.sim_end_ns > 0)  // what the last sample did not see
      add_to_bin(r.ts_retransmits, (r.sim_end_ns - 1) / cfg.timeseries_ns,
                 rc_rtx_total() - rc_rtx_seen);
    r.ts_retransmits.resize(r.ts_bytes.size(), 0);
    r.ts_ev_retirements.resize(r.ts_bytes.size(), 0);
    for (std::vector<uint64_t>& q : r.ts_queue_max_bytes) q.resize(r.ts_bytes.size(), 0);
  }

  for (const auto& [key, n] : retired_paths) {
    r.retired_by_path.emplace_back("p" + std::to_string(key.first) +
                                       (topo.tiers == 3 ? ".core" : ".spine") +
                                       std::to_string(key.second),
                                   n);
  }
  if (cfg.keep_link_frames) {
    for (LinkId l = 0; l < s.link_count(); ++l)
      r.link_frames.emplace_back(s.link_name(l), s.link_stats(l).frames_out);
  }

  // Queues per link class (the core tier's classes with 3 tiers only).
  r.queues.resize(classes);
  std::vector<double> sum(kClasses, 0);
  for (uint8_t c = 0; c < classes; ++c) r.queues[c].name = kClassNames[c];
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
  for (uint8_t c = 0; c < classes; ++c) {
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
                   {"routing", topo.routing == Routing::kSrv6 ? "srv6" : "ecmp"},
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
  if (topo.tiers == 3) {
    j["topology"]["pods_per_plane"] = topo.pods();
    j["topology"]["leaves_per_pod"] = topo.leaves_per_pod;
    j["topology"]["aggs_per_pod"] = topo.spines;
    j["topology"]["cores_per_plane"] = topo.cores;
  }
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
  if (topo.routing == Routing::kSrv6) {
    ordered_json by_path = ordered_json::object();
    for (const auto& [path, n] : r.retired_by_path) by_path[path] = n;
    sum["ev_retirements_by_path"] = by_path;
  }
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
    ordered_json qmax = ordered_json::object();
    for (size_t c = 0; c < r.ts_queue_max_bytes.size() && c < r.queues.size(); ++c)
      qmax[r.queues[c].name] = r.ts_queue_max_bytes[c];
    j["timeseries"] = {{"bin_ns", cfg.timeseries_ns},           {"bytes", r.ts_bytes},
                       {"plane_bytes", r.ts_plane_bytes},       {"retransmits", r.ts_retransmits},
                       {"ev_retirements", r.ts_ev_retirements}, {"queue_max_bytes", qmax}};
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
