#include "gui/fixture.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <tuple>

#include "reference-impl/engine/engine.h"
#include "reference-impl/sim/sim.h"
#include "wire/wire.h"

namespace mrc::view::fixture {
namespace {

namespace eng = mrc::engine;
namespace sim = mrc::sim;

wire::Ipv6Addr gid_of(uint8_t node) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[15] = node;
  return a;
}

eng::EndpointConfig endpoint_config(const std::string& name, uint8_t node, uint8_t planes,
                                    uint64_t seed) {
  eng::EndpointConfig c;
  c.name = name;
  c.gid = gid_of(node);
  c.seed = seed;
  c.ev_format = wire::EvFormat::kStev;
  for (uint8_t p = 1; p <= planes; ++p) {
    eng::PortConfig pc;
    // MACs ascend with the port so that a viewer without an event log can still tell planes
    // apart by source MAC.
    pc.mac = {0x02, 0, 0, 0, node, p};
    pc.next_hop_mac = {0x02, 0, 0, 0, 0xEE, p};
    c.ports.push_back(pc);
  }
  return c;
}

// Explicit STEV EVs, easy to read in a trace: WEV = 0xE0 << 24 | plane << 16 | k. `paths` EVs
// per plane form the rotation, the rest the plane's backup set.
eng::EvProfile ev_profile(const FixtureConfig& cfg, std::vector<EvTruth>& truth) {
  eng::EvProfile p;
  p.mode = eng::EvMode::kExplicit;
  p.format_widths = {16, 16};
  p.fields = {wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  const uint32_t per_plane = cfg.paths + cfg.backup_evs_per_plane;
  for (uint8_t plane = 1; plane <= cfg.planes; ++plane) {
    for (uint32_t k = 0; k < per_plane; ++k) {
      const uint32_t wev = (0xE0u << 24) | (uint32_t{plane} << 16) | k;
      eng::EvEntry e;
      e.port = plane;
      e.ev[0] = static_cast<uint8_t>(wev >> 24);
      e.ev[1] = static_cast<uint8_t>(wev >> 16);
      e.ev[2] = static_cast<uint8_t>(wev >> 8);
      e.ev[3] = static_cast<uint8_t>(wev);
      p.explicit_evs.push_back(e);
      EvTruth t;
      t.wev = wev;
      t.plane = plane;
      t.path = wev % cfg.paths;
      truth.push_back(t);
    }
  }
  p.ev_count = static_cast<uint32_t>(p.explicit_evs.size());
  p.active_count = cfg.paths * cfg.planes;
  // The floor the API examples use (a quarter of the EVs): loss evidence never retires the QP
  // down to a single path.
  p.ev_min_active = std::max<uint32_t>(1, p.ev_count / 4);
  return p;
}

void check(const eng::Status& st, const char* what) {
  if (!st.ok()) throw std::runtime_error(std::string(what) + ": " + st.message);
}

struct Side {
  std::unique_ptr<eng::Endpoint> ep;
  uint32_t cq = 0;
  uint32_t qpn = 0;
  uint32_t sq_psn = 0;
  std::string events;
  uint64_t ev_state_events = 0;
};

void connect(const FixtureConfig& cfg, Side& s, const Side& peer) {
  eng::QpAttr at;
  eng::MrcQpAttr m;
  at.qp_state = eng::QpState::kInit;
  at.qp_access_flags = eng::kAccessLocalWrite | eng::kAccessRemoteWrite;
  m.ev_profile_id = 1;
  m.cc_profile_id = 1;
  check(s.ep->modify_qp(s.qpn, at, eng::kQpState | eng::kQpAccessFlags, m,
                        eng::kMrcEvProfileId | eng::kMrcCcProfileId | eng::kMrcHint),
        "modify_qp INIT");
  at.qp_state = eng::QpState::kRtr;
  at.dgid = peer.ep->config().gid;
  at.dest_qp_num = peer.qpn;
  at.rq_psn = peer.sq_psn;
  at.path_mtu = cfg.path_mtu;
  m.max_wimm_dest = 64;
  m.mpr_dest = 32;
  m.cap = eng::kCapDynamicMpr;
  check(
      s.ep->modify_qp(
          s.qpn, at, eng::kQpState | eng::kQpAv | eng::kQpDestQpn | eng::kQpRqPsn | eng::kQpPathMtu,
          m, eng::kMrcMaxWimmDest | eng::kMrcMprDest | eng::kMrcCap),
      "modify_qp RTR");
  at.qp_state = eng::QpState::kRts;
  at.sq_psn = s.sq_psn;
  m.max_wimm = 64;
  m.mpr = 32;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = eng::kUnlimitedExpRetry;
  m.timeout = 8;  // 262 us: above the worst queueing delay of the fabric (see queue_bytes)
  check(s.ep->modify_qp(s.qpn, at, eng::kQpState | eng::kQpSqPsn, m,
                        eng::kMrcMaxWimm | eng::kMrcMpr | eng::kMrcRetryCnt | eng::kMrcTimeout),
        "modify_qp RTS");
}

bool write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

uint64_t count_frames(const std::string& path) {
  wire::CaptureReader r;
  if (!r.open(path)) throw std::runtime_error(r.error());
  wire::CaptureRecord rec;
  uint64_t n = 0;
  while (r.next(rec)) ++n;
  if (!r.error().empty()) throw std::runtime_error(r.error());
  return n;
}

}  // namespace

FixtureResult make_fixture(const FixtureConfig& cfg) {
  FixtureResult res;
  try {
    if (cfg.out_dir.empty()) throw std::runtime_error("fixture: out_dir is empty");
    if (cfg.planes == 0 || cfg.paths == 0) throw std::runtime_error("fixture: no planes/paths");
    std::filesystem::create_directories(cfg.out_dir);
    const std::string ext = cfg.pcapng ? ".pcapng" : ".pcap";
    const auto file = [&](const std::string& name) {
      return (std::filesystem::path(cfg.out_dir) / name).string();
    };
    res.requester_capture = file("a" + ext);
    res.responder_capture = file("b" + ext);
    res.requester_events = cfg.event_logs ? file("a-events.jsonl") : "";
    res.responder_events = cfg.event_logs ? file("b-events.jsonl") : "";
    res.decisions = file("decisions.jsonl");
    res.summary = file("fixture.json");

    Side a, b;
    eng::EndpointConfig ca = endpoint_config("a", 1, cfg.planes, cfg.seed);
    eng::EndpointConfig cb = endpoint_config("b", 2, cfg.planes, cfg.seed + 1000);
    ca.sack_gap_threshold = cb.sack_gap_threshold = cfg.sack_gap_threshold;
    ca.probe_interval_ns = cb.probe_interval_ns = cfg.probe_interval_ns;
    a.ep = std::make_unique<eng::Endpoint>(ca);
    b.ep = std::make_unique<eng::Endpoint>(cb);
    eng::EvProfile evp = ev_profile(cfg, res.evs);
    for (auto [side, name] : {std::pair{&a, "a"}, std::pair{&b, "b"}}) {
      Side* s = side;
      const std::string node = name;
      if (cfg.event_logs) {
        s->ep->set_event_sink([s, node](const eng::Event& e) {
          eng::append_event_json(s->events, e, node);
          if (e.kind == eng::EventKind::kEvState) ++s->ev_state_events;
        });
      }
      check(s->ep->create_cq(1u << 16, s->cq), "create_cq");
      eng::QpInitAttr init;
      init.send_cq = s->cq;
      init.recv_cq = s->cq;
      init.cap.max_send_wr = std::max<uint32_t>(256, cfg.messages + 1);
      init.cap.max_recv_wr = 256;
      check(s->ep->create_qp(init, s->qpn), "create_qp");
      check(s->ep->add_ev_profile(1, evp), "add_ev_profile");
      eng::CcProfile cc;  // NSCC, so that the event log has a cwnd to plot
      // A window near the fabric's BDP keeps the NIC queue (and so the RTT) under the ACK
      // timeout; the default 1.2 MB would queue ~380 us at 25 Gb/s.
      cc.nscc.max_cwnd = 300'000;
      check(s->ep->add_cc_profile(1, cc), "add_cc_profile");
      s->sq_psn = s->ep->random_psn();
    }
    connect(cfg, a, b);
    connect(cfg, b, a);
    res.requester_qpn = a.qpn;
    res.responder_qpn = b.qpn;
    res.initial_psn = a.sq_psn;

    std::vector<uint8_t> src(cfg.message_bytes), dst(cfg.message_bytes);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
    eng::MemoryRegion src_mr, dst_mr;
    check(a.ep->register_mr(src.data(), src.size(), eng::kAccessLocalWrite, src_mr), "register_mr");
    check(b.ep->register_mr(dst.data(), dst.size(),
                            eng::kAccessLocalWrite | eng::kAccessRemoteWrite, dst_mr),
          "register_mr");

    sim::SimConfig sc;
    sc.seed = cfg.seed;
    sim::Simulator s(sc);
    sim::EndpointNode<eng::Endpoint> node_a(*a.ep), node_b(*b.ep);
    const sim::NodeId na = s.add_node("a", node_a);
    const sim::NodeId nb = s.add_node("b", node_b);
    s.set_node_address(na, a.ep->config().gid);
    s.set_node_address(nb, b.ep->config().gid);
    sim::FabricConfig fc;
    fc.planes = cfg.planes;
    fc.paths = cfg.paths;
    fc.host_link.rate_bps = cfg.link_rate_bps;
    fc.host_link.prop_delay_ns = 500;
    // The uplink is the NIC's own transmit queue (deep); the fabric has shallow switch buffers.
    fc.host_link.queue_bytes = 4u << 20;
    fc.fabric_link.queue_bytes = 200'000;
    fc.fabric_link.rate_bps = cfg.link_rate_bps;
    fc.fabric_link.prop_delay_ns = 1'000;
    // Pin the requester's EVs to paths: in each plane its rotation takes paths 0, 1, ... in WEV
    // order and the backup set follows, so the flap path carries exactly one active EV. (The
    // engine draws which EVs are active, so this is read back after the QP is connected.)
    std::map<uint32_t, uint32_t> path_of_wev;
    {
      std::vector<eng::EvInfo> infos;
      check(a.ep->ev_info(a.qpn, infos), "ev_info");
      std::sort(infos.begin(), infos.end(), [](const eng::EvInfo& x, const eng::EvInfo& y) {
        return std::tie(x.port, y.active, x.wev) < std::tie(y.port, x.active, y.wev);
      });
      std::map<uint8_t, uint32_t> next_path;
      for (const auto& info : infos) path_of_wev[info.wev] = next_path[info.port]++ % cfg.paths;
      for (auto& t_ev : res.evs)
        t_ev.path = path_of_wev.count(t_ev.wev) ? path_of_wev[t_ev.wev] : 0;
    }
    fc.select = sim::PathSelect::kCustom;
    fc.custom_select = [path_of_wev](const sim::Packet& pk, uint32_t paths) {
      auto it = path_of_wev.find(pk.info.wev);
      return it != path_of_wev.end() ? it->second : pk.info.wev % paths;
    };
    sim::Fabric fabric(s, fc, {na, nb});
    if (cfg.flap) {
      if (cfg.flap_plane < 1 || cfg.flap_plane > cfg.planes || cfg.flap_path >= cfg.paths)
        throw std::runtime_error("fixture: flap plane/path out of range");
      fabric.fail_path(cfg.flap_plane, cfg.flap_path, cfg.flap_from_ns, cfg.flap_until_ns);
    }
    if (cfg.trim_probability > 0) {
      if (cfg.trim_plane < 1 || cfg.trim_plane > cfg.planes || cfg.trim_path >= cfg.paths)
        throw std::runtime_error("fixture: trim plane/path out of range");
      s.add_fault(fabric.spine_to_leaf(nb, cfg.trim_plane, cfg.trim_path),
                  sim::Fault::trim()
                      .only_kind(wire::PacketKind::kMrcData)
                      .with_probability(cfg.trim_probability)
                      .named("trim p=" + std::to_string(cfg.trim_probability)));
    }
    const auto format = cfg.pcapng ? wire::CaptureFormat::kPcapng : wire::CaptureFormat::kPcap;
    if (!s.capture_node(na, 0, res.requester_capture, format) ||
        !s.capture_node(nb, 0, res.responder_capture, format))
      throw std::runtime_error("capture: " + s.error());

    for (uint32_t m = 0; m < cfg.messages; ++m) {
      const eng::Sge sge{src_mr.addr, cfg.message_bytes, src_mr.lkey};
      check(a.ep->post_write(a.qpn, m, {&sge, 1}, dst_mr.addr, dst_mr.rkey, std::nullopt, true),
            "post_write");
    }
    s.wake(na);

    // Run in slices until every write completed, then a little longer so the last ACKs and
    // probes show up in the captures.
    std::vector<eng::Wc> wcs(256);
    uint64_t t = 0;
    bool done = false;
    uint64_t tail_until = 0;
    while (t < cfg.max_time_ns) {
      t += 20'000;
      const sim::RunResult rr = s.run_until(t);
      if (rr.status == sim::RunStatus::kError) throw std::runtime_error("sim: " + rr.error);
      for (;;) {
        const int n = a.ep->poll_cq(a.cq, wcs);
        if (n <= 0) break;
        res.completions += static_cast<uint64_t>(n);
      }
      while (b.ep->poll_cq(b.cq, wcs) > 0) {
      }
      if (!done && res.completions >= cfg.messages) {
        done = true;
        tail_until = std::max(t + 40'000, cfg.flap ? cfg.flap_until_ns + 100'000 : 0);
      }
      if (done && t >= tail_until) break;
    }
    if (!done)
      throw std::runtime_error("fixture: only " + std::to_string(res.completions) + " of " +
                               std::to_string(cfg.messages) + " writes completed by " +
                               std::to_string(cfg.max_time_ns) + " ns");
    res.end_ns = s.now_ns();
    if (!s.close_captures()) throw std::runtime_error("capture: " + s.error());
    if (!s.write_decisions(res.decisions)) throw std::runtime_error("cannot write decisions");
    if (cfg.event_logs && (!write_text(res.requester_events, a.events) ||
                           !write_text(res.responder_events, b.events)))
      throw std::runtime_error("cannot write event logs");
    res.ev_state_events = a.ev_state_events;

    eng::QpStats qa, qb;
    check(a.ep->qp_stats(a.qpn, qa), "qp_stats");
    check(b.ep->qp_stats(b.qpn, qb), "qp_stats");
    res.data_packets_sent = qa.data_packets_sent;
    res.retransmits = qa.retransmits;
    res.probes_sent = qa.probes_sent;
    res.sacks_rx = qa.sacks_rx;
    res.nacks_rx = qa.nacks_rx;
    res.acks_rx = qa.acks_rx;
    res.trimmed_rx = qb.trimmed_rx;
    res.sacks_sent = qb.sacks_sent;
    res.nacks_sent = qb.nacks_sent;
    std::vector<eng::EvInfo> infos;
    check(a.ep->ev_info(a.qpn, infos), "ev_info");
    for (const auto& info : infos) {
      for (auto& t_ev : res.evs) {
        if (t_ev.wev != info.wev) continue;
        t_ev.packets_sent = info.packets_sent;
        t_ev.final_state = std::string(eng::ev_state_name(info.state));
        t_ev.active = info.active;
      }
    }
    for (sim::LinkId l : fabric.all_links()) {
      const sim::LinkStats& ls = s.link_stats(l);
      res.trims += ls.trim_fault;
      res.drops_link_down += ls.drop_link_down;
      res.max_queue_bytes = std::max(res.max_queue_bytes, ls.max_backlog_bytes);
    }
    for (const sim::Decision& d : s.decisions()) {
      if (d.action == sim::Action::kDrop) {
        ++res.decisions_drop;
        if (d.roce && d.qpn != wire::kEndpointOpQpn) ++res.decisions_drop_qp;
        const wire::OpcodeInfo* op = wire::mrp0().opcode_info(d.opcode);
        if (d.roce && op && op->kind == wire::PacketKind::kMrcData &&
            d.reason.rfind("link_down", 0) == 0)
          ++res.data_drops_link_down;
      }
      if (d.action == sim::Action::kTrim) ++res.decisions_trim;
    }
    res.requester_frames = count_frames(res.requester_capture);
    res.responder_frames = count_frames(res.responder_capture);

    nlohmann::ordered_json j;
    j["tool"] = "mrct-view-fixture";
    j["seed"] = cfg.seed;
    j["planes"] = cfg.planes;
    j["paths"] = cfg.paths;
    j["messages"] = cfg.messages;
    j["message_bytes"] = cfg.message_bytes;
    j["path_mtu"] = cfg.path_mtu;
    j["flap"] = cfg.flap ? nlohmann::ordered_json{{"plane", cfg.flap_plane},
                                                  {"path", cfg.flap_path},
                                                  {"from_ns", cfg.flap_from_ns},
                                                  {"until_ns", cfg.flap_until_ns}}
                         : nlohmann::ordered_json(nullptr);
    j["trim"] = {
        {"plane", cfg.trim_plane}, {"path", cfg.trim_path}, {"probability", cfg.trim_probability}};
    j["requester_qpn"] = res.requester_qpn;
    j["responder_qpn"] = res.responder_qpn;
    j["initial_psn"] = res.initial_psn;
    j["requester_frames"] = res.requester_frames;
    j["responder_frames"] = res.responder_frames;
    j["data_packets_sent"] = res.data_packets_sent;
    j["retransmits"] = res.retransmits;
    j["probes_sent"] = res.probes_sent;
    j["sacks_rx"] = res.sacks_rx;
    j["nacks_rx"] = res.nacks_rx;
    j["trimmed_rx"] = res.trimmed_rx;
    j["trims"] = res.trims;
    j["drops_link_down"] = res.drops_link_down;
    j["data_drops_link_down"] = res.data_drops_link_down;
    j["max_queue_bytes"] = res.max_queue_bytes;
    j["completions"] = res.completions;
    j["end_ns"] = res.end_ns;
    nlohmann::ordered_json evs = nlohmann::ordered_json::array();
    for (const auto& e : res.evs) {
      evs.push_back({{"wev", e.wev},
                     {"plane", e.plane},
                     {"path", e.path},
                     {"packets_sent", e.packets_sent},
                     {"state", e.final_state},
                     {"active", e.active}});
    }
    j["evs"] = evs;
    if (!write_text(res.summary, j.dump(2) + "\n"))
      throw std::runtime_error("cannot write summary");
    res.ok = true;
  } catch (const std::exception& e) {
    res.ok = false;
    res.error = e.what();
  }
  return res;
}

}  // namespace mrc::view::fixture
