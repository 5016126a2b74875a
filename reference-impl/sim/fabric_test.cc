// The multi-plane fabric (EV -> path pinning, failures, routing) and whole-run determinism.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "reference-impl/sim/sim.h"
#include "reference-impl/sim/sim_test_util.h"

namespace mrc::sim {
namespace {

using testing::Carrier;
using testing::data_frame;
using testing::GeneratorNode;
using testing::ser_ns;
using testing::SinkNode;

FabricConfig small_fabric(uint8_t planes, uint32_t paths) {
  FabricConfig c;
  c.planes = planes;
  c.paths = paths;
  c.host_link.rate_bps = 100'000'000'000;
  c.host_link.prop_delay_ns = 300;
  c.fabric_link.rate_bps = 400'000'000'000;
  c.fabric_link.prop_delay_ns = 700;
  return c;
}

// Frame i: EV i % evs, port 1 + (i / evs) % planes, PSN i.
GeneratorNode::Make spray(uint32_t evs, uint8_t planes, Carrier c = Carrier::kUdp6) {
  return [=](uint64_t i, uint8_t& port) {
    port = static_cast<uint8_t>(1 + (i / evs) % planes);
    return data_frame(static_cast<uint32_t>(i), static_cast<uint32_t>(i % evs), 200, c);
  };
}

TEST(Fabric, BuildsPlanesTimesPathsWithNamedLinks) {
  Simulator sim;
  SinkNode a, b, c;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const NodeId nc = sim.add_node("c", c);
  Fabric fab(sim, small_fabric(2, 4), {na, nb, nc});
  // Per plane: 2 host links per node + 2 fabric links per node and path.
  EXPECT_EQ(sim.link_count(), 2u * (3 * 2 + 3 * 4 * 2));
  EXPECT_EQ(sim.switch_count(), 2u * (4 + 3));
  EXPECT_EQ(sim.link_name(fab.uplink(na, 1)), "a.p1.up");
  EXPECT_EQ(sim.link_name(fab.downlink(nc, 2)), "c.p2.down");
  EXPECT_EQ(sim.link_name(fab.leaf_to_spine(nb, 2, 3)), "p2.b>s3");
  EXPECT_EQ(sim.link_name(fab.spine_to_leaf(na, 1, 0)), "p1.s0>a");
  EXPECT_TRUE(sim.link_config(fab.downlink(na, 1)).last_hop);
  EXPECT_FALSE(sim.link_config(fab.uplink(na, 1)).last_hop);
  EXPECT_EQ(fab.path_links(1, 2).size(), 6u);
  EXPECT_EQ(fab.plane_links(2).size(), 6u + 24u);
  EXPECT_EQ(fab.all_links().size(), sim.link_count());
  EXPECT_THROW(fab.uplink(na, 3), std::out_of_range);
  EXPECT_THROW(fab.leaf_to_spine(na, 1, 4), std::out_of_range);
}

TEST(Fabric, EachEvTakesOnePathAndEachPortItsPlane) {
  constexpr uint32_t kEvs = 16;
  constexpr uint8_t kPlanes = 2;
  constexpr uint32_t kPaths = 4;
  constexpr uint64_t kFrames = 16 * 2 * 10;
  Simulator sim;
  GeneratorNode a(kFrames, 0, 100, spray(kEvs, kPlanes));
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  Fabric fab(sim, small_fabric(kPlanes, kPaths), {na, nb});
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), kFrames);
  std::map<std::pair<uint8_t, uint32_t>, uint64_t> want;  // (plane, path) -> frames
  for (uint64_t i = 0; i < kFrames; ++i) {
    const uint8_t plane = static_cast<uint8_t>(1 + (i / kEvs) % kPlanes);
    want[{plane, static_cast<uint32_t>(i % kEvs) % kPaths}]++;
  }
  for (uint8_t pl = 1; pl <= kPlanes; ++pl) {
    for (uint32_t m = 0; m < kPaths; ++m) {
      EXPECT_EQ(sim.link_stats(fab.leaf_to_spine(na, pl, m)).frames_out, (want[{pl, m}]));
      EXPECT_EQ(sim.link_stats(fab.spine_to_leaf(nb, pl, m)).frames_out, (want[{pl, m}]));
      EXPECT_EQ(sim.link_stats(fab.leaf_to_spine(nb, pl, m)).frames_in, 0u);
    }
  }
  for (const auto& g : b.got) {
    // Frame psn went out on port 1 + (psn / 16) % 2 and must arrive on the same plane.
    EXPECT_EQ(g.port, 1 + (g.psn / kEvs) % kPlanes);
  }
}

TEST(Fabric, DeliveryTimeIsFourStoreAndForwardHops) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const FabricConfig cfg = small_fabric(1, 2);
  Fabric fab(sim, cfg, {na, nb});
  const auto f = data_frame(1, 1, 1000);
  a.send_at(10, 1, f);
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 1u);
  const uint64_t host = ser_ns(f.size(), cfg.host_link.rate_bps) + cfg.host_link.prop_delay_ns;
  const uint64_t core = ser_ns(f.size(), cfg.fabric_link.rate_bps) + cfg.fabric_link.prop_delay_ns;
  EXPECT_EQ(b.got[0].t_ns, 10 + 2 * host + 2 * core);
}

TEST(Fabric, FlowHashPinsEveryEvToOnePathAndUsesThemAll) {
  SimConfig sc;
  sc.log_pass = true;  // one "pass" record per link crossed: the route of every frame
  Simulator sim(sc);
  GeneratorNode a(64 * 4, 0, 100, spray(64, 1, Carrier::kStev));
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  FabricConfig cfg = small_fabric(1, 4);
  cfg.select = PathSelect::kFlowHash;
  Fabric fab(sim, cfg, {na, nb});
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 256u);
  std::map<uint32_t, std::set<std::string>> spine_links_of_ev;
  std::set<std::string> used;
  for (const auto& d : sim.decisions()) {
    if (d.link_name.rfind("p1.a>s", 0) == 0) {
      spine_links_of_ev[d.ev].insert(d.link_name);
      used.insert(d.link_name);
    }
  }
  ASSERT_EQ(spine_links_of_ev.size(), 64u);
  for (const auto& [ev, links] : spine_links_of_ev) EXPECT_EQ(links.size(), 1u) << "EV " << ev;
  EXPECT_EQ(used.size(), 4u);
}

TEST(Fabric, FailedPathLosesOnlyItsEvs) {
  Simulator sim;
  GeneratorNode a(16 * 2 * 8, 0, 100, spray(16, 2));
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  Fabric fab(sim, small_fabric(2, 4), {na, nb});
  fab.fail_path(1, 2, 0);
  sim.run_until_idle();
  std::set<uint32_t> got;
  for (const auto& g : b.got) got.insert(g.psn);
  for (uint32_t i = 0; i < 16 * 2 * 8; ++i) {
    const bool lost = (1 + (i / 16) % 2) == 1 && (i % 16) % 4 == 2;
    EXPECT_EQ(got.count(i) == 0, lost) << "psn " << i;
  }
  for (const auto& d : sim.decisions()) {
    EXPECT_EQ(d.link_name, "p1.a>s2");
    EXPECT_EQ(d.reason, "link_down");
    EXPECT_EQ(d.ev % 4, 2u);
  }
  EXPECT_EQ(sim.decisions().size(), 8u * 4u);  // 4 EVs of plane 1, 8 rounds
}

TEST(Fabric, FailedPlaneRecoversAfterRepair) {
  Simulator sim;
  GeneratorNode a(200, 0, 1000, [](uint64_t i, uint8_t& port) {
    port = static_cast<uint8_t>(1 + i % 2);
    return data_frame(static_cast<uint32_t>(i), static_cast<uint32_t>(i % 7), 100);
  });
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  Fabric fab(sim, small_fabric(2, 4), {na, nb});
  fab.fail_plane(2, 50'000, 100'000);
  sim.run_until_idle();
  std::set<uint32_t> got;
  for (const auto& g : b.got) got.insert(g.psn);
  // Frame i leaves at i us and is on some plane-2 link during its whole transit (switches
  // forward at once), so it is lost iff [i us, i us + transit) meets the outage [50, 100) us.
  const FabricConfig cfg = small_fabric(2, 4);
  const uint64_t size = data_frame(0, 0, 100).size();
  const uint64_t transit =
      2 * (ser_ns(size, cfg.host_link.rate_bps) + cfg.host_link.prop_delay_ns) +
      2 * (ser_ns(size, cfg.fabric_link.rate_bps) + cfg.fabric_link.prop_delay_ns);
  size_t lost_count = 0;
  for (uint32_t i = 0; i < 200; ++i) {
    const uint64_t t = i * 1000ull;
    const bool lost = i % 2 == 1 && t + transit > 50'000 && t < 100'000;
    lost_count += lost;
    EXPECT_EQ(got.count(i) == 0, lost) << "psn " << i;
  }
  EXPECT_GT(lost_count, 20u);
  EXPECT_EQ(b.got.size(), 200 - lost_count);
}

std::vector<std::byte> retarget(std::vector<std::byte> frame, const wire::Ipv6Addr& dst) {
  wire::DecodedFrame f = testing::decode(frame);
  f.ip6.dst = dst;
  return wire::encode_frame(f);
}

TEST(Fabric, RoutesByDestinationAddressAmongManyNodes) {
  const wire::Ipv6Addr b_addr = wire::samples::responder().gid;
  const wire::Ipv6Addr c_addr = *wire::parse_ipv6("fd00:300::1");
  const wire::Ipv6Addr nowhere = *wire::parse_ipv6("fd00:999::1");
  Simulator sim;
  ScriptedNode a;
  SinkNode b, c;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const NodeId nc = sim.add_node("c", c);
  sim.set_node_address(nb, b_addr);
  sim.set_node_address(nc, c_addr);
  Fabric fab(sim, small_fabric(2, 2), {na, nb, nc});
  for (uint32_t i = 0; i < 6; ++i) {
    const wire::Ipv6Addr& dst = i % 3 == 0 ? b_addr : (i % 3 == 1 ? c_addr : nowhere);
    a.send_at(i * 1000, static_cast<uint8_t>(1 + i % 2), retarget(data_frame(i, i, 64), dst));
  }
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 2u);
  ASSERT_EQ(c.got.size(), 2u);
  EXPECT_EQ(b.got[0].psn, 0u);
  EXPECT_EQ(b.got[1].psn, 3u);
  EXPECT_EQ(c.got[0].psn, 1u);
  EXPECT_EQ(c.got[1].psn, 4u);
  size_t no_route = 0;
  for (const auto& d : sim.decisions()) {
    EXPECT_EQ(d.reason, "no_route");
    EXPECT_EQ(d.dir, "a>?");
    ++no_route;
  }
  EXPECT_EQ(no_route, 2u);
}

TEST(Fabric, Srv6FramesPinByWevAndRouteByInnerDestination) {
  Simulator sim;
  GeneratorNode a(40, 0, 500, spray(8, 1, Carrier::kSrv6Srh));
  SinkNode b(true);
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  sim.set_node_address(nb, wire::samples::responder().gid);
  Fabric fab(sim, small_fabric(1, 4), {na, nb});
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 40u);
  for (uint32_t m = 0; m < 4; ++m) {
    EXPECT_EQ(sim.link_stats(fab.leaf_to_spine(na, 1, m)).frames_out, 10u);
  }
  for (const auto& f : b.frames) EXPECT_TRUE(testing::decode(f, true).icrc_ok);
}

// ---------------------------------------------------------------------------------------------
// Determinism
// ---------------------------------------------------------------------------------------------
struct RunOutput {
  std::vector<std::vector<char>> pcaps;
  std::vector<char> decisions;
  uint64_t events = 0;
  std::map<std::string, uint64_t> counts;
};

// Two nodes, 2 planes x 4 paths; the core is slower than the hosts so queues fill (ECN, trim,
// tail drop) on top of random drops, bursts, delays, duplicates, corruption and a path failure.
// b acknowledges every frame it gets.
RunOutput run_scenario(uint64_t seed, testing::TempDir& dir, const std::string& tag) {
  SimConfig sc;
  sc.seed = seed;
  Simulator sim(sc);
  // ~440 Gb/s offered into two 100 Gb/s ports whose planes carry 4 x 20 Gb/s each.
  GeneratorNode a(3000, 0, 20, [](uint64_t i, uint8_t& port) {
    port = static_cast<uint8_t>(1 + (i / 16) % 2);
    return data_frame(static_cast<uint32_t>(i), static_cast<uint32_t>(i % 16), 1000);
  });
  ScriptedNode b(false);
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  b.set_on_receive([&](const ScriptedNode::Arrival& arr, wire::Bytes frame) {
    const PacketInfo info = inspect_frame(frame);
    b.send_at(arr.t_ns + 200, arr.port, testing::ack_frame(info.psn, info.wev));
  });
  FabricConfig cfg = small_fabric(2, 4);
  cfg.fabric_link.rate_bps = 20'000'000'000;
  cfg.fabric_link.queue_bytes = 16 * 1024;
  cfg.fabric_link.ecn_threshold_bytes = 4 * 1024;
  cfg.fabric_link.trim_on_overflow = true;
  Fabric fab(sim, cfg, {na, nb});
  sim.add_fault(fab.uplink(na, 1), Fault::drop().with_probability(0.02));
  sim.add_fault(fab.uplink(na, 1), Fault::duplicate().with_probability(0.01));
  sim.add_fault(fab.uplink(na, 2), Fault::drop().in_bursts({0.005, 0.3, 0.0, 1.0}));
  sim.add_fault(fab.leaf_to_spine(na, 1, 2), Fault::delay(0, 5000).with_probability(0.05));
  sim.add_fault(fab.spine_to_leaf(nb, 2, 1), Fault::corrupt().with_probability(0.02));
  sim.add_fault(fab.downlink(nb, 2), Fault::trim().with_probability(0.05));
  sim.add_fault(fab.downlink(nb, 1), Fault::mark_ecn().with_probability(0.1));
  sim.add_fault(fab.uplink(nb, 1), Fault::drop().with_probability(0.03));
  fab.fail_path(2, 3, 40'000, 90'000);

  std::vector<std::string> files = {dir.file(tag + "-a.pcap"), dir.file(tag + "-b.pcap"),
                                    dir.file(tag + "-core.pcap")};
  EXPECT_TRUE(sim.capture_node(na, 0, files[0]));
  EXPECT_TRUE(sim.capture_node(nb, 0, files[1], wire::CaptureFormat::kPcapng));
  EXPECT_TRUE(sim.capture_link(fab.spine_to_leaf(nb, 1, 0), files[2]));
  const RunResult r = sim.run_until_idle();
  EXPECT_EQ(r.status, RunStatus::kIdle);
  EXPECT_TRUE(sim.close_captures()) << sim.error();
  const std::string log = dir.file(tag + ".jsonl");
  EXPECT_TRUE(sim.write_decisions(log));

  RunOutput out;
  for (const auto& f : files) out.pcaps.push_back(testing::read_file(f));
  out.decisions = testing::read_file(log);
  out.events = sim.events_dispatched();
  for (const auto& d : sim.decisions()) {
    out.counts[std::string(action_name(d.action)) +
               (d.reason.rfind("queue", 0) == 0 ? "/queue" : "")]++;
  }
  return out;
}

TEST(Determinism, SameSeedSameBytesDifferentSeedDifferentDecisions) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  const RunOutput r1 = run_scenario(7, dir, "s7a");
  const RunOutput r2 = run_scenario(7, dir, "s7b");
  const RunOutput r3 = run_scenario(8, dir, "s8");

  // The scenario exercises every kind of decision, so the comparison means something.
  for (const char* kind :
       {"drop", "dup", "delay", "corrupt", "trim", "ecn", "ecn/queue", "trim/queue"}) {
    EXPECT_GT(r1.counts.count(kind) ? r1.counts.at(kind) : 0, 0u) << kind;
  }
  ASSERT_EQ(r1.pcaps.size(), 3u);
  for (size_t i = 0; i < r1.pcaps.size(); ++i) {
    EXPECT_GT(r1.pcaps[i].size(), 10'000u) << i;
    EXPECT_TRUE(r1.pcaps[i] == r2.pcaps[i]) << "capture " << i << " differs under the same seed";
  }
  EXPECT_FALSE(r1.decisions.empty());
  EXPECT_TRUE(r1.decisions == r2.decisions);
  EXPECT_EQ(r1.events, r2.events);

  EXPECT_FALSE(r1.decisions == r3.decisions);
  EXPECT_FALSE(r1.pcaps[1] == r3.pcaps[1]);
}

}  // namespace
}  // namespace mrc::sim
