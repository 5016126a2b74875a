// The go-back-N RoCEv2 RC baseline: delivers exactly, and recovers the way RC does (NAK on the
// first out-of-sequence PSN, rewind and resend everything after it, local ACK timeout, retry
// exhaustion), so that the benchmark compares MRC with the real thing.
#include <gtest/gtest.h>

#include <set>

#include "reference-impl/sim/engine_harness.h"
#include "reference-impl/sim/gbn_model.h"
#include "reference-impl/sim/sim_test_util.h"

namespace mrc::sim {
namespace {

using harness::GbnPair;
using harness::GbnPairConfig;
using harness::GbnTransfer;

GbnPairConfig base_config() {
  GbnPairConfig c;
  c.planes = 2;
  c.paths = 4;
  c.node.port = 1;
  c.node.timeout_ns = 16'384;
  c.node.retry_cnt = 7;
  return c;
}

TEST(GbnModel, CleanTransferIsExactOnOnePath) {
  GbnPair p(base_config());
  GbnTransfer t(p, 0, 2 << 20, 3);
  t.post(4);
  ASSERT_TRUE(p.run([&] { return t.all_completed(); }, 5'000'000)) << p.error();
  EXPECT_EQ(t.completed(GbnStatus::kSuccess), 4u);
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(p.a().stats().data_packets_sent, 512u);
  EXPECT_EQ(p.a().stats().retransmitted_packets, 0u);
  EXPECT_EQ(p.b().stats().bytes_placed, 2u << 20);
  // One QP, one path: sport 0xC000 % 4 = 0 on plane 1, nothing anywhere else.
  Fabric& f = p.fabric();
  for (uint8_t pl = 1; pl <= 2; ++pl) {
    for (uint32_t m = 0; m < 4; ++m) {
      const uint64_t frames = p.sim().link_stats(f.leaf_to_spine(p.id_a(), pl, m)).frames_out;
      if (pl == 1 && m == 0)
        EXPECT_EQ(frames, 512u);
      else
        EXPECT_EQ(frames, 0u) << "plane " << int{pl} << " path " << m;
    }
  }
  // One 100 Gb/s port: 2 MiB takes at least 168 us of serialization.
  EXPECT_GT(p.sim().now_ns(), 168'000u);
}

TEST(GbnModel, OneLostPacketIsNakedAndEverythingAfterItIsResent) {
  GbnPair p(base_config());
  GbnTransfer t(p, 0, 1 << 20, 5);
  const uint32_t victim = wire::psn_add(p.a().initial_psn(p.qpn_a(0)), 40);
  p.sim().add_fault(p.fabric().uplink(p.id_a(), 1), Fault::drop().only_psn(victim).at_most(1));
  t.post(1);
  ASSERT_TRUE(p.run([&] { return t.all_completed(); }, 5'000'000)) << p.error();
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(p.b().stats().naks_sent, 1u);
  EXPECT_EQ(p.a().stats().naks_rx, 1u);
  EXPECT_EQ(p.a().stats().go_backs, 1u);
  EXPECT_EQ(p.a().stats().timeouts, 0u);
  // Go-back-N: every packet sent between the loss and the NAK is dropped by the responder and
  // sent again, not just the lost one.
  const uint64_t oos = p.b().stats().out_of_sequence_rx;
  EXPECT_GT(oos, 5u);
  EXPECT_EQ(p.a().stats().retransmitted_packets, oos + 1);
  EXPECT_EQ(p.b().stats().bytes_placed, 1u << 20);
}

TEST(GbnModel, TailLossWaitsForTheLocalAckTimeoutAndResendsFromTheLastAck) {
  GbnPairConfig c = base_config();
  c.node.ack_req_every = 4;  // ACKs after packets 3, 7 and 11 of the 16
  GbnPair p(c);
  GbnTransfer t(p, 0, 64 << 10, 7);
  const uint32_t last = wire::psn_add(p.a().initial_psn(p.qpn_a(0)), 15);
  p.sim().add_fault(p.fabric().uplink(p.id_a(), 1), Fault::drop().only_psn(last).at_most(1));
  t.post(1);
  ASSERT_TRUE(p.run([&] { return t.all_completed(); }, 5'000'000)) << p.error();
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(p.a().stats().timeouts, 1u);
  // Back to the oldest unacknowledged PSN (12): 12..14 again, which the responder had, and 15.
  EXPECT_EQ(p.a().stats().retransmitted_packets, 4u);
  EXPECT_EQ(p.b().stats().duplicates_rx, 3u);
  EXPECT_GT(p.sim().now_ns(), 16'384u);
}

TEST(GbnModel, FailedPathExhaustsTheRetriesAndErrorsTheQp) {
  GbnPairConfig c = base_config();
  c.node.retry_cnt = 3;
  GbnPair p(c);
  GbnTransfer t(p, 0, 1 << 20, 9);
  p.fabric().fail_path(1, 0xC000 % 4, 20'000);
  t.post(2);
  ASSERT_TRUE(p.run([&] { return t.all_completed(); }, 5'000'000)) << p.error();
  EXPECT_EQ(t.completed(GbnStatus::kRetryExceeded), 1u);
  EXPECT_EQ(t.completed(GbnStatus::kFlushed), 1u);
  EXPECT_TRUE(p.a().qp_in_error(p.qpn_a(0)));
  EXPECT_EQ(p.a().stats().timeouts, 4u);  // retry_cnt + 1
  // RC has no other path: nothing went anywhere but the failed one.
  for (uint32_t m = 1; m < 4; ++m)
    EXPECT_EQ(p.sim().link_stats(p.fabric().leaf_to_spine(p.id_a(), 1, m)).frames_in, 0u);
  // Four timeouts of T after the last acknowledged progress, which came within one ACK interval
  // (16 packets, 5.4 us) plus one RTT of the failure; the run stops within a 2 us slice after.
  EXPECT_GE(p.sim().now_ns(), 20'000u - 8'000u + 4 * 16'384u);
  EXPECT_LE(p.sim().now_ns(), 20'000u + 8'000u + 4 * 16'384u);
}

TEST(GbnModel, RandomLossIsRecoveredExactly) {
  GbnPair p(base_config());
  GbnTransfer t(p, 0, 2 << 20, 11);
  p.sim().add_fault(p.fabric().uplink(p.id_a(), 1), Fault::drop().with_probability(0.01));
  p.sim().add_fault(p.fabric().uplink(p.id_b(), 1), Fault::drop().with_probability(0.01));
  t.post(8);
  ASSERT_TRUE(p.run([&] { return t.all_completed(); }, 50'000'000)) << p.error();
  EXPECT_EQ(t.completed(GbnStatus::kSuccess), 8u);
  EXPECT_TRUE(t.exact());
  EXPECT_GT(p.a().stats().go_backs, 0u);
  EXPECT_GT(p.a().stats().retransmitted_packets, p.sim().decisions().size());
}

}  // namespace
}  // namespace mrc::sim
