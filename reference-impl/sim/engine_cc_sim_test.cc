// The reference engine under its own congestion, on the simulator: incast, start-up, a slow path
// among fast ones. A golden peer must not read queueing or reordering as path failure: no EV is
// retired without a fault, a packet is resent about once per real loss, and NSCC keeps the
// bottleneck queue bounded (issue 17: the viewer fixture resent 1,641 packets on SACK-gap
// evidence for 86 losses and had every EV but one retired at once, before any fault).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "reference-impl/sim/engine_harness.h"

namespace mrc::sim {
namespace {

namespace eng = mrc::engine;
using eng::EventKind;
using harness::events_of;
using harness::Harness;
using harness::HarnessConfig;
using harness::QpConfig;
using harness::Transfer;

// A fabric as MRC runs on: 100 Gb/s NIC ports, switch queues that ECN-mark from 64 KB, and
// deep buffers (4 MB) so that the test sees how far the queue grows rather than where a trim
// or a drop cut it.
HarnessConfig fabric_config(uint64_t seed, uint32_t nodes) {
  HarnessConfig hc;
  hc.seed = seed;
  hc.nodes = nodes;
  hc.planes = 2;
  hc.paths = 4;
  for (LinkConfig* l : {&hc.host_link, &hc.fabric_link}) {
    l->queue_bytes = 4u << 20;
    l->ecn_threshold_bytes = 64u << 10;
  }
  return hc;
}

// NSCC for 100 Gb/s ports: max_cwnd = 1.5 x link rate x unloaded RTT (~8 us), as UET sizes it.
QpConfig nscc_qp() {
  QpConfig qc;
  qc.cc = std::string(eng::kCcNscc);
  qc.nscc.base_rtt = 8'000;
  qc.nscc.max_cwnd = 150'000;
  qc.timeout = 8;  // 262 us
  qc.ev = harness::generated_ev_profile(16, 0, 4);
  return qc;
}

std::string describe(const eng::QpStats& s) {
  std::ostringstream o;
  o << "sent=" << s.data_packets_sent << " rtx=" << s.retransmits << " (timeout=" << s.rtx_timeout
    << " nack=" << s.rtx_nack << " sack_gap=" << s.rtx_sack_gap << " ack_wait=" << s.rtx_ack_wait
    << ") ev bad=" << s.ev_assumed_bad << " refused=" << s.ev_demotions_refused;
  return o.str();
}

size_t retirements(Harness& h, size_t node) {
  return events_of(h.node(node), EventKind::kEvState, "to", "ASSUMED_BAD").size();
}

// Largest number of a QP's EVs ASSUMED_BAD at the same time, from the event log.
size_t max_simultaneously_bad(Harness& h, size_t node) {
  std::vector<uint64_t> bad;
  size_t most = 0;
  for (const eng::Event& e : h.node(node).events) {
    if (e.kind != EventKind::kEvState) continue;
    const eng::EventField* wev = e.find("wev");
    const eng::EventField* to = e.find("to");
    if (wev == nullptr || to == nullptr) continue;
    std::erase(bad, wev->u);
    if (to->s == "ASSUMED_BAD") bad.push_back(wev->u);
    most = std::max(most, bad.size());
  }
  return most;
}

// `senders` nodes write `bytes` each to node 0 at once, over NSCC; returns the harness after the
// run. Samples the receiver's downlink backlog every 2 us into `backlog`.
struct IncastRun {
  std::unique_ptr<Harness> h;
  std::vector<std::unique_ptr<Transfer>> transfers;
  std::vector<std::pair<uint64_t, uint64_t>> backlog;  // (t_ns, bytes queued on node 0's downlinks)
  bool completed = false;
};

IncastRun run_incast(const HarnessConfig& hc, uint32_t senders, size_t bytes, const QpConfig& qc) {
  IncastRun r;
  r.h = std::make_unique<Harness>(hc);
  Harness& h = *r.h;
  for (uint32_t i = 1; i <= senders; ++i) h.connect(i, 0, 1, qc);
  if (!h.ok()) return r;
  for (uint32_t i = 0; i < senders; ++i) {
    r.transfers.push_back(std::make_unique<Transfer>(h, i, bytes, static_cast<uint8_t>(i + 1)));
    r.transfers.back()->post(4);
  }
  std::vector<LinkId> down;
  for (uint8_t p = 1; p <= h.config().planes; ++p)
    down.push_back(h.fabric().downlink(h.node(0).id, p));
  r.completed = h.run(
      [&] {
        uint64_t q = 0;
        for (LinkId l : down) q = std::max(q, h.sim().backlog_bytes(l));
        r.backlog.emplace_back(h.sim().now_ns(), q);
        return std::all_of(r.transfers.begin(), r.transfers.end(),
                           [](const auto& t) { return t->all_completed(); });
      },
      200'000'000);
  return r;
}

class EngineCcIncast : public ::testing::TestWithParam<uint32_t> {};

TEST_P(EngineCcIncast, NoEvRetiredNoLossAndTheBottleneckQueueStaysBounded) {
  const uint32_t senders = GetParam();
  IncastRun r = run_incast(fabric_config(senders, senders + 1), senders,
                           senders <= 8 ? (2u << 20) : (1u << 20), nscc_qp());
  Harness& h = *r.h;
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_TRUE(r.completed) << "incast did not complete";
  for (uint32_t i = 0; i < senders; ++i) {
    EXPECT_TRUE(r.transfers[i]->exact()) << "sender " << i + 1;
    const eng::QpStats s = h.qp_stats(i + 1, h.conn(i).qpn_a);
    // Deep buffers: nothing is lost, so nothing may be resent and no EV retired.
    EXPECT_EQ(s.retransmits, 0u) << "sender " << i + 1 << ": " << describe(s);
    EXPECT_EQ(retirements(h, i + 1), 0u) << "sender " << i + 1 << ": " << describe(s);
  }
  // Queueing delay at the bottleneck (node 0's downlinks, 100 Gb/s each). Every sender starts
  // at max_cwnd (UET), so N x 150 KB arrive in the first RTT and take up to ~200 us to drain;
  // from 400 us on, NSCC must hold the queue under 64 us (the ECN threshold is 5 us).
  uint64_t worst_after_startup = 0;
  for (const auto& [t, q] : r.backlog)
    if (t >= 400'000) worst_after_startup = std::max(worst_after_startup, q);
  const double worst_us = static_cast<double>(worst_after_startup) * 8 / 100e3;
  EXPECT_LE(worst_us, 64.0) << "bottleneck queue " << worst_after_startup << " bytes";
  RecordProperty("bottleneck_queue_us_after_startup", std::to_string(worst_us));
}

INSTANTIATE_TEST_SUITE_P(Fanin, EngineCcIncast, ::testing::Values(8u, 32u),
                         [](const ::testing::TestParamInfo<uint32_t>& p) {
                           return std::to_string(p.param) + "to1";
                         });

TEST(EngineCc, StartUpOvershootIsCongestionNotFailure) {
  // max_cwnd eight times the BDP (the 1.2 MB default on 100 Gb/s ports) and 8 senders: the first
  // RTT puts 9.6 MB towards one NIC through switch buffers of 256 KB that trim on overflow. That
  // is congestion: the trims are NACKed and resent once each, nothing is found lost by SACK gap
  // or timeout, no EV is retired, and the queue drains.
  HarnessConfig hc = fabric_config(8, 9);
  for (LinkConfig* l : {&hc.host_link, &hc.fabric_link}) {
    l->queue_bytes = 256u << 10;
    l->trim_on_overflow = true;
  }
  QpConfig qc = nscc_qp();
  qc.nscc.max_cwnd = 1'200'000;
  IncastRun r = run_incast(hc, 8, 2u << 20, qc);
  Harness& h = *r.h;
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_TRUE(r.completed);
  uint64_t trims = 0;
  for (LinkId l : h.fabric().all_links()) trims += h.sim().link_stats(l).trim_congestion;
  EXPECT_GT(trims, 0u) << "the start-up burst should overflow the buffers";
  uint64_t rtx = 0;
  for (uint32_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(r.transfers[i]->exact());
    const eng::QpStats s = h.qp_stats(i + 1, h.conn(i).qpn_a);
    EXPECT_EQ(s.rtx_sack_gap + s.rtx_timeout, 0u) << "sender " << i + 1 << ": " << describe(s);
    EXPECT_EQ(retirements(h, i + 1), 0u) << "sender " << i + 1 << ": " << describe(s);
    EXPECT_LE(max_simultaneously_bad(h, i + 1), 16u - 4u) << "below the ev_min_active floor";
    rtx += s.retransmits;
  }
  EXPECT_LE(static_cast<double>(rtx), 1.1 * static_cast<double>(trims));
}

TEST(EngineCc, OneSlowPathAmongManyIsReorderingNotLoss) {
  // Path 0 of plane 1 carries its packets 30 us later than the seven others (a longer or more
  // loaded route, FIFO): a packet on it is overtaken by ~100 packets sent after it. That is
  // reordering; nothing is lost, so nothing may be resent and no EV retired.
  HarnessConfig hc = fabric_config(5, 2);
  Harness h(hc);
  QpConfig qc = nscc_qp();
  h.connect(0, 1, 1, qc);
  ASSERT_TRUE(h.ok()) << h.error();
  h.sim().add_fault(h.fabric().spine_to_leaf(h.node(1).id, 1, 0),
                    Fault::delay(30'000, 30'000).named("slow path"));
  Transfer t(h, 0, 16u << 20, 1);
  t.post(8);
  ASSERT_TRUE(h.run([&] { return t.all_completed(); }, 100'000'000)) << h.error();
  EXPECT_TRUE(t.exact());
  const eng::QpStats s = h.qp_stats(0, t.conn().qpn_a);
  EXPECT_EQ(s.retransmits, 0u) << describe(s);
  EXPECT_EQ(retirements(h, 0), 0u) << describe(s);
}

}  // namespace
}  // namespace mrc::sim
