// Simulator core: timing, queues, link state, timers, the run API, captures, determinism.
#include "reference-impl/sim/sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "reference-impl/sim/sim_test_util.h"

namespace mrc::sim {
namespace {

using testing::data_frame;
using testing::decode;
using testing::GeneratorNode;
using testing::ser_ns;
using testing::SinkNode;

constexpr uint64_t k10G = 10'000'000'000;
constexpr uint64_t k1G = 1'000'000'000;

LinkConfig link_cfg(uint64_t rate_bps, uint64_t prop_ns, uint64_t queue_bytes = 1u << 20) {
  LinkConfig c;
  c.rate_bps = rate_bps;
  c.prop_delay_ns = prop_ns;
  c.queue_bytes = queue_bytes;
  return c;
}

TEST(Rng, SameSeedSameSequenceAndUniformStaysInRange) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  for (int i = 0; i < 10000; ++i) {
    EXPECT_LT(a.uniform(7), 7u);
    const double u = a.unit();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_EQ(a.uniform(0), 0u);
}

TEST(Rng, DerivedSeedsDependOnEveryInput) {
  const uint64_t s = derive_seed(1, "a>b", 0);
  EXPECT_EQ(s, derive_seed(1, "a>b", 0));
  EXPECT_NE(s, derive_seed(2, "a>b", 0));
  EXPECT_NE(s, derive_seed(1, "a>c", 0));
  EXPECT_NE(s, derive_seed(1, "a>b", 1));
}

TEST(Sim, DeliveryTimeIsSerializationPlusPropagation) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const LinkId ab = sim.cable(na, 1, nb, 1, link_cfg(k10G, 1000)).first;
  const auto frame = data_frame(1, 1, 1000);
  const uint64_t s = frame.size();
  a.send_at(100, 1, frame);
  // Three back to back at t=1e6: each finishes when the cumulative bits are out.
  for (uint32_t k = 0; k < 3; ++k) a.send_at(1'000'000, 1, data_frame(2 + k, 1, 1000));
  ASSERT_EQ(sim.run_until_idle().status, RunStatus::kIdle);
  ASSERT_EQ(b.got.size(), 4u);
  EXPECT_EQ(b.got[0].t_ns, 100 + ser_ns(s, k10G) + 1000);
  for (uint64_t k = 1; k <= 3; ++k) {
    EXPECT_EQ(b.got[k].t_ns, 1'000'000 + ser_ns(k * s, k10G) + 1000) << "frame " << k;
    EXPECT_EQ(b.got[k].psn, 1 + k);
  }
  EXPECT_EQ(b.got[0].port, 1);
  const LinkStats& st = sim.link_stats(ab);
  EXPECT_EQ(st.frames_in, 4u);
  EXPECT_EQ(st.frames_out, 4u);
  EXPECT_EQ(st.bytes_out, 4 * s);
  EXPECT_EQ(st.drops(), 0u);
  EXPECT_EQ(sim.node_stats(na).frames_tx, 4u);
  EXPECT_EQ(sim.node_stats(nb).frames_rx, 4u);
  EXPECT_EQ(sim.link_name(ab), "a.p1>b");
  EXPECT_EQ(sim.find_link("b.p1>a"), ab + 1);
  EXPECT_EQ(sim.find_link("nope"), kNone);
}

TEST(Sim, LongBusyPeriodDoesNotAccumulateRounding) {
  // 1000 frames of 4184 B at 100 Gb/s: 334.72 ns each. Per-frame rounding would be off by
  // 280 ns at the end; exact accounting ends at ceil(1000 * 334.72) = 334720 ns.
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  sim.cable(na, 1, nb, 1, link_cfg(100 * k1G, 0, 1u << 30));
  const auto frame = data_frame(1, 1, 4096);
  ASSERT_EQ(frame.size(), 14u + 4184u);  // C.10 plus the Ethernet header
  for (int i = 0; i < 1000; ++i) a.send_at(0, 1, frame);
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 1000u);
  EXPECT_EQ(b.got.back().t_ns, ser_ns(1000 * frame.size(), 100 * k1G));
  EXPECT_EQ(b.got[0].t_ns, ser_ns(frame.size(), 100 * k1G));
}

TEST(Sim, InfiniteRateLinkOnlyAddsPropagation) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  sim.cable(sim.add_node("a", a), 1, sim.add_node("b", b), 1, link_cfg(0, 777));
  a.send_at(5, 1, data_frame(1, 1, 4000));
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 1u);
  EXPECT_EQ(b.got[0].t_ns, 5u + 777u);
}

TEST(Sim, QueueOverflowTailDrops) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const auto probe = data_frame(0, 1, 500);
  const uint64_t s = probe.size();
  // Room for 10.5 frames behind the one in service: 10 fit.
  const LinkId ab = sim.cable(na, 1, nb, 1, link_cfg(k1G, 100, 10 * s + s / 2)).first;
  for (uint32_t i = 0; i < 50; ++i) a.send_at(0, 1, data_frame(i, 1, 500));
  sim.run_until_idle();
  const LinkStats& st = sim.link_stats(ab);
  EXPECT_EQ(st.frames_in, 50u);
  EXPECT_EQ(st.frames_out, 11u);
  EXPECT_EQ(st.drop_queue, 39u);
  EXPECT_EQ(st.drops(), 39u);
  EXPECT_EQ(st.max_backlog_bytes, 10 * s);
  ASSERT_EQ(b.got.size(), 11u);
  for (uint32_t i = 0; i < 11; ++i) EXPECT_EQ(b.got[i].psn, i);
  ASSERT_EQ(sim.decisions().size(), 39u);
  for (uint32_t i = 0; i < 39; ++i) {
    const Decision& d = sim.decisions()[i];
    EXPECT_EQ(d.action, Action::kDrop);
    EXPECT_EQ(d.reason, "queue_full");
    EXPECT_EQ(d.psn, 11 + i);
    EXPECT_EQ(d.link_name, "a.p1>b");
    EXPECT_EQ(d.dir, "a>b");
    EXPECT_EQ(d.t_ns, 0u);
  }
  // The last frame leaves after 11 serializations.
  EXPECT_EQ(b.got.back().t_ns, ser_ns(11 * s, k1G) + 100);
}

TEST(Sim, EcnMarksFramesArrivingToADeepQueue) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b(true);
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const uint64_t s = data_frame(0, 1, 500).size();
  LinkConfig c = link_cfg(k1G, 100);
  c.ecn_threshold_bytes = 3 * s;
  const LinkId ab = sim.cable(na, 1, nb, 1, c).first;
  for (uint32_t i = 0; i < 10; ++i) a.send_at(0, 1, data_frame(i, 1, 500));
  // A Not-ECT frame is never marked.
  a.send_at(0, 1, data_frame(10, 1, 500, testing::Carrier::kUdp6, std::nullopt, 0));
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 11u);
  // Frame k arrives to a backlog of (k - 1) frames (frame 0 is in service).
  for (uint32_t k = 0; k < 10; ++k) {
    EXPECT_EQ(b.got[k].ecn, k >= 4 ? 3 : 2) << "frame " << k;
  }
  EXPECT_EQ(b.got[10].ecn, 0);
  EXPECT_EQ(sim.link_stats(ab).ecn_congestion, 6u);
  for (const auto& d : sim.decisions()) EXPECT_EQ(d.action, Action::kEcn);
  // CE marking keeps the ICRC valid: the traffic class is masked out of it.
  for (const auto& f : b.frames) EXPECT_TRUE(decode(f, true).icrc_ok);
}

TEST(Sim, CongestionTrimsAndForwardsHeadersFirst) {
  for (bool last_hop : {false, true}) {
    Simulator sim;
    ScriptedNode a;
    SinkNode b(true);
    const NodeId na = sim.add_node("a", a);
    const NodeId nb = sim.add_node("b", b);
    const uint64_t s = data_frame(0, 1, 1000).size();
    LinkConfig c = link_cfg(k1G, 100, 2 * s);
    c.trim_on_overflow = true;
    c.last_hop = last_hop;
    const LinkId ab = sim.cable(na, 1, nb, 1, c).first;
    for (uint32_t i = 0; i < 10; ++i) a.send_at(0, 1, data_frame(i, 1, 1000));
    // A control frame is not trimmable: it is tail-dropped.
    a.send_at(0, 1, testing::ack_frame(99, 1));
    sim.run_until_idle();
    const LinkStats& st = sim.link_stats(ab);
    EXPECT_EQ(st.trim_congestion, 7u);
    EXPECT_EQ(st.drop_queue, 1u);
    ASSERT_EQ(b.got.size(), 10u);
    // Frame 0 was in service, then the trimmed headers (priority), then the queued 1 and 2.
    std::vector<uint32_t> order;
    for (const auto& g : b.got) order.push_back(g.psn);
    EXPECT_EQ(order, (std::vector<uint32_t>{0, 3, 4, 5, 6, 7, 8, 9, 1, 2}));
    const uint8_t want =
        last_hop ? wire::mrp0().dscp().trimmed_lasthop : wire::mrp0().dscp().trimmed;
    for (size_t i = 1; i <= 7; ++i) {
      EXPECT_TRUE(b.got[i].trimmed);
      EXPECT_EQ(b.got[i].dscp, want);
      wire::DecodedFrame f = decode(b.frames[i]);
      EXPECT_FALSE(f.error) << f.error.describe();
      EXPECT_TRUE(f.payload.empty());
    }
    EXPECT_FALSE(b.got[0].trimmed);
    EXPECT_FALSE(b.got[8].trimmed);
  }
}

TEST(Sim, LinkDownDropsArrivalsQueueAndInFlightFrames) {
  Simulator sim;
  GeneratorNode a(100, 0, 1000, [](uint64_t i, uint8_t&) {
    return data_frame(static_cast<uint32_t>(i), 1, 256);
  });
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const LinkId ab = sim.cable(na, 1, nb, 1, link_cfg(k10G, 1000)).first;
  const uint64_t s = data_frame(0, 1, 256).size();
  ASSERT_LT(ser_ns(s, k10G), 500u);
  // Frame 20 left at 20000 + ser and is on the wire at 20500: lost. Frames 21..50 find the link
  // down. Frame 51 (t = 51000) crosses again.
  sim.link_down_between(ab, 20'500, 50'500);
  bool down_seen = false, up_seen = false;
  sim.at(30'000, [&] { down_seen = !sim.link_is_up(ab); });
  sim.at(60'000, [&] { up_seen = sim.link_is_up(ab); });
  sim.run_until_idle();
  EXPECT_TRUE(down_seen);
  EXPECT_TRUE(up_seen);
  std::set<uint32_t> got;
  for (const auto& g : b.got) got.insert(g.psn);
  std::set<uint32_t> want;
  for (uint32_t i = 0; i < 100; ++i) {
    if (i < 20 || i > 50) want.insert(i);
  }
  EXPECT_EQ(got, want);
  const LinkStats& st = sim.link_stats(ab);
  EXPECT_EQ(st.drop_link_down, 31u);
  size_t in_flight = 0, at_ingress = 0;
  for (const auto& d : sim.decisions()) {
    EXPECT_EQ(d.action, Action::kDrop);
    if (d.reason == "link_down (in flight)") {
      ++in_flight;
      EXPECT_EQ(d.psn, 20u);
      EXPECT_EQ(d.t_ns, 20'000 + ser_ns(s, k10G) + 1000);
    } else {
      EXPECT_EQ(d.reason, "link_down");
      ++at_ingress;
    }
  }
  EXPECT_EQ(in_flight, 1u);
  EXPECT_EQ(at_ingress, 30u);
}

TEST(Sim, LinkDownFlushesTheQueue) {
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const LinkId ab = sim.cable(na, 1, nb, 1, link_cfg(k1G, 0)).first;
  const uint64_t s = data_frame(0, 1, 1000).size();
  for (uint32_t i = 0; i < 10; ++i) a.send_at(0, 1, data_frame(i, 1, 1000));
  // Down in the middle of frame 2's serialization: frames 0 and 1 are through.
  sim.link_down_between(ab, ser_ns(2 * s, k1G) + 1, kForever);
  sim.run_until_idle();
  ASSERT_EQ(b.got.size(), 2u);
  EXPECT_EQ(sim.link_stats(ab).drop_link_down, 8u);
  EXPECT_EQ(sim.backlog_bytes(ab), 0u);
  size_t queued = 0;
  for (const auto& d : sim.decisions()) queued += d.reason == "link_down (queued)";
  EXPECT_EQ(queued, 8u);
}

// A node that asks for timers at given times and records when they fire.
class TimerNode final : public Node {
 public:
  explicit TimerNode(std::vector<uint64_t> deadlines) : deadlines_(std::move(deadlines)) {}
  void on_packet(std::span<const std::byte>, uint8_t, uint64_t) override {}
  void on_timer(uint64_t now_ns) override {
    fired.push_back(now_ns);
    while (next_ < deadlines_.size() && deadlines_[next_] <= now_ns) ++next_;
  }
  bool poll_tx(uint64_t, TxFrame&) override { return false; }
  uint64_t next_deadline_ns() const override {
    return next_ < deadlines_.size() ? deadlines_[next_] : kNoDeadline;
  }
  void replace(std::vector<uint64_t> d) {
    deadlines_ = std::move(d);
    next_ = 0;
  }
  std::vector<uint64_t> fired;

 private:
  std::vector<uint64_t> deadlines_;
  size_t next_ = 0;
};

TEST(Sim, TimersFireAtTheDeadlineAndFollowChanges) {
  Simulator sim;
  TimerNode t({50, 1000, 1000, 5000});
  const NodeId n = sim.add_node("t", t);
  // At 2000 the node is told to want 3000 instead of 5000: the 5000 timer must not fire.
  sim.at(2000, [&] {
    t.replace({3000});
    sim.wake(n);
  });
  EXPECT_EQ(sim.run_until_idle().status, RunStatus::kIdle);
  EXPECT_EQ(t.fired, (std::vector<uint64_t>{50, 1000, 3000}));
}

TEST(Sim, ReplyPathAndNodeToNodeRoundTrip) {
  Simulator sim;
  ScriptedNode a;
  ScriptedNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  sim.cable(na, 1, nb, 1, link_cfg(k10G, 1000));
  b.set_on_receive([&](const ScriptedNode::Arrival& arr, wire::Bytes frame) {
    const PacketInfo info = inspect_frame(frame);
    b.send_at(arr.t_ns + 500, arr.port, testing::ack_frame(info.psn, 7));
  });
  const auto f = data_frame(9, 1, 100);
  a.send_at(0, 1, f);
  sim.run_until_idle();
  ASSERT_EQ(a.arrivals().size(), 1u);
  const uint64_t ack_size = testing::ack_frame(9, 7).size();
  EXPECT_EQ(a.arrivals()[0].t_ns,
            ser_ns(f.size(), k10G) + 1000 + 500 + ser_ns(ack_size, k10G) + 1000);
  EXPECT_EQ(inspect_frame(wire::as_bytes(a.arrivals()[0].frame)).psn, 9u);
}

TEST(Sim, RunApiReportsWhyItStopped) {
  Simulator sim;
  GeneratorNode a(1000, 0, 100,
                  [](uint64_t i, uint8_t&) { return data_frame(static_cast<uint32_t>(i), 1, 64); });
  SinkNode b;
  sim.cable(sim.add_node("a", a), 1, sim.add_node("b", b), 1, link_cfg(k10G, 10));

  RunResult r = sim.run_until(5'000);
  EXPECT_EQ(r.status, RunStatus::kTimeReached);
  EXPECT_EQ(r.now_ns, 5'000u);
  EXPECT_EQ(sim.now_ns(), 5'000u);
  EXPECT_EQ(a.sent(), 51u);  // t = 0, 100, ..., 5000

  r = sim.run_until_idle(10);
  EXPECT_EQ(r.status, RunStatus::kEventLimit);
  EXPECT_EQ(r.events, 10u);

  sim.at(20'000, [&] { sim.stop(); });
  r = sim.run_until_idle();
  EXPECT_EQ(r.status, RunStatus::kStopped);
  EXPECT_EQ(r.now_ns, 20'000u);

  r = sim.run_until_idle();
  EXPECT_EQ(r.status, RunStatus::kIdle);
  EXPECT_EQ(b.got.size(), 1000u);
  EXPECT_GT(sim.events_dispatched(), 3000u);  // >= 3 per frame (send, tx done, arrival)

  // The clock never goes backwards; run_until in the past is a no-op.
  const uint64_t t = sim.now_ns();
  r = sim.run_until(10);
  EXPECT_EQ(r.now_ns, t);
}

TEST(Sim, NodeWithADeadlineStuckInThePastIsReported) {
  struct Stuck final : Node {
    void on_packet(std::span<const std::byte>, uint8_t, uint64_t) override {}
    void on_timer(uint64_t) override {}
    bool poll_tx(uint64_t, TxFrame&) override { return false; }
    uint64_t next_deadline_ns() const override { return 0; }
  } stuck;
  Simulator sim;
  sim.add_node("stuck", stuck);
  sim.at(10, [] {});
  const RunResult r = sim.run_until_idle();
  EXPECT_EQ(r.status, RunStatus::kError);
  EXPECT_NE(r.error.find("stuck"), std::string::npos) << r.error;
}

TEST(Sim, FramesOnUnconnectedPortsAreCounted) {
  Simulator sim;
  ScriptedNode a;
  const NodeId na = sim.add_node("a", a);
  a.send_at(0, 3, data_frame(1, 1, 10));
  sim.run_until_idle();
  EXPECT_EQ(sim.node_stats(na).tx_unconnected, 1u);
}

TEST(Sim, RejectsDuplicateNamesAndBadPorts) {
  Simulator sim;
  ScriptedNode a, b;
  const NodeId na = sim.add_node("a", a);
  EXPECT_THROW(sim.add_node("a", b), std::invalid_argument);
  LinkConfig c;
  c.name = "x";
  const LinkId l = sim.add_link(c);
  EXPECT_THROW(sim.add_link(c), std::invalid_argument);
  EXPECT_THROW(sim.connect_port(na, 0, l), std::invalid_argument);
  EXPECT_THROW(sim.connect_port(na, 1, 99), std::out_of_range);
  EXPECT_THROW(sim.add_fault(l, Fault::drop().with_probability(1.5)), std::invalid_argument);
  EXPECT_THROW(sim.add_fault(l, Fault::delay(10, 5)), std::invalid_argument);
}

// Anything shaped like the engine's Endpoint plugs in through EndpointNode.
struct FakeEndpoint {
  struct Tx {
    std::vector<std::byte> frame;
    uint8_t port = 0;
  };
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) {
    rx.push_back({now_ns, port, frame.size()});
  }
  void on_timer(uint64_t now_ns) { timers.push_back(now_ns); }
  bool poll_tx(uint64_t now_ns, Tx& out) {
    if (sent || now_ns < 100) return false;
    sent = true;
    out.frame = data_frame(1, 1, 64);
    out.port = 2;
    return true;
  }
  uint64_t next_deadline_ns() const { return sent ? UINT64_MAX : 100; }
  struct Rx {
    uint64_t t;
    uint8_t port;
    size_t size;
  };
  std::vector<Rx> rx;
  std::vector<uint64_t> timers;
  bool sent = false;
};

TEST(Sim, EndpointAdapterDrivesAnEndpointShapedType) {
  FakeEndpoint ea, eb;
  EndpointNode<FakeEndpoint> a(ea), b(eb);
  Simulator sim;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  sim.cable(na, 2, nb, 2, link_cfg(0, 50));
  sim.run_until_idle();
  EXPECT_EQ(ea.timers, (std::vector<uint64_t>{100}));
  ASSERT_EQ(eb.rx.size(), 1u);
  EXPECT_EQ(eb.rx[0].t, 150u);
  EXPECT_EQ(eb.rx[0].port, 2);
  ASSERT_EQ(ea.rx.size(), 1u);
}

TEST(Sim, CapturesHoldEveryCrossingWithNanosecondTimes) {
  testing::TempDir dir;
  ASSERT_TRUE(dir.ok());
  Simulator sim;
  ScriptedNode a;
  SinkNode b;
  const NodeId na = sim.add_node("a", a);
  const NodeId nb = sim.add_node("b", b);
  const LinkId ab = sim.cable(na, 1, nb, 1, link_cfg(k10G, 1234)).first;
  const std::string link_path = dir.file("ab.pcap");
  const std::string node_path = dir.file("a-p1.pcapng");
  ASSERT_TRUE(sim.capture_link(ab, link_path));
  ASSERT_TRUE(sim.capture_node(na, 1, node_path, wire::CaptureFormat::kPcapng));
  sim.add_fault(ab, Fault::drop().only_psn(3));
  for (uint32_t i = 0; i < 5; ++i) a.send_at(1 + i * 10'000, 1, data_frame(i, 1, 200));
  sim.run_until_idle();
  ASSERT_TRUE(sim.close_captures()) << sim.error();

  wire::CaptureReader r;
  ASSERT_TRUE(r.open(link_path)) << r.error();
  wire::CaptureRecord rec;
  std::vector<uint64_t> times;
  std::vector<uint32_t> psns;
  while (r.next(rec)) {
    times.push_back(rec.ts_ns);
    psns.push_back(inspect_frame(rec.data).psn);
  }
  EXPECT_TRUE(r.error().empty()) << r.error();
  ASSERT_EQ(times.size(), 4u);  // the dropped frame never crossed
  EXPECT_EQ(psns, (std::vector<uint32_t>{0, 1, 2, 4}));
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(times[i], b.got[i].t_ns);

  wire::CaptureReader rn;
  ASSERT_TRUE(rn.open(node_path)) << rn.error();
  EXPECT_TRUE(rn.is_pcapng());
  size_t n = 0;
  while (rn.next(rec)) {
    EXPECT_EQ(rec.ts_ns, 1 + n * 10'000);  // stamped when handed to the port
    ++n;
  }
  EXPECT_EQ(n, 5u);
}

}  // namespace
}  // namespace mrc::sim
