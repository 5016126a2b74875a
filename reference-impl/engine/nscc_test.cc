// NSCC quadrants, trim reaction, quick adapt, receiver penalty and window bounds.
#include "reference-impl/engine/nscc.h"

#include <gtest/gtest.h>

namespace mrc::engine {
namespace {

constexpr uint32_t kMtu = 4096;

NsccConfig cfg() {
  NsccConfig c;
  c.base_rtt = 10'000;
  c.target_delay = 8'000;
  c.qa_threshold = 32'000;
  c.max_cwnd = 400'000;
  c.adjust_period_threshold = 10'000;
  c.adjust_bytes_threshold = 16'384;
  return c;
}

CcAckSample ack(uint64_t now, uint64_t bytes, uint64_t rtt, bool ecn) {
  CcAckSample s;
  s.now_ns = now;
  s.newly_acked_bytes = bytes;
  s.rtt_ns = rtt;
  s.ecn = ecn;
  return s;
}

TEST(Nscc, StartsAtMaxWindowAndStaysWithinBounds) {
  Nscc cc(cfg(), kMtu);
  EXPECT_EQ(cc.cwnd_bytes(), 400'000u);
  for (int i = 0; i < 1000; ++i) cc.on_ack(ack(i * 1000, 8192, 10'000, false));
  EXPECT_LE(cc.cwnd_bytes(), 400'000u);
  for (int i = 0; i < 1000; ++i) cc.on_trim(2'000'000 + i * 20'000, 4184, false);
  EXPECT_GE(cc.cwnd_bytes(), kMtu);
}

TEST(Nscc, TrimShrinksByOnePacket) {
  NsccConfig c = cfg();
  c.disable_qa = 1;
  Nscc cc(c, kMtu);
  const uint64_t before = cc.cwnd_bytes();
  cc.on_trim(1000, 4184, false);
  EXPECT_EQ(cc.cwnd_bytes(), before - 4184);
  cc.on_trim(2000, 4184, true);  // last-hop trims count too (no receiver-credit CC in MRC)
  EXPECT_EQ(cc.cwnd_bytes(), before - 2 * 4184);
}

TEST(Nscc, EcnWithHighDelayDecreasesMultiplicativelyOncePerBaseRtt) {
  NsccConfig c = cfg();
  c.disable_qa = 1;
  c.eta = 0;
  Nscc cc(c, kMtu);
  // avg delay 30 us vs target 8 us: factor 1 - 0.8 * 22/30 = 0.413 -> floored at max_md_jump 0.5.
  cc.on_ack(ack(1'000'000, 0, 40'000, true));
  EXPECT_EQ(cc.cwnd_bytes(), 200'000u);
  cc.on_ack(ack(1'005'000, 0, 40'000, true));  // within one base RTT: no second cut
  EXPECT_EQ(cc.cwnd_bytes(), 200'000u);
  cc.on_ack(ack(1'011'000, 0, 40'000, true));
  EXPECT_EQ(cc.cwnd_bytes(), 100'000u);
}

TEST(Nscc, EcnWithLowDelayHolds) {
  NsccConfig c = cfg();
  c.disable_qa = 1;
  c.eta = 0;
  Nscc cc(c, kMtu);
  cc.on_trim(0, 200'000, false);
  const uint64_t w = cc.cwnd_bytes();
  for (int i = 1; i < 100; ++i) cc.on_ack(ack(i * 1'000, 0, 11'000, true));
  EXPECT_EQ(cc.cwnd_bytes(), w);
}

TEST(Nscc, LowDelayGrowsFasterThanDelayAboveTarget) {
  NsccConfig c = cfg();
  c.disable_qa = 1;
  Nscc low(c, kMtu), high(c, kMtu);
  low.on_trim(0, 300'000, false);
  high.on_trim(0, 300'000, false);
  const uint64_t start = low.cwnd_bytes();
  ASSERT_EQ(start, high.cwnd_bytes());
  for (int i = 1; i <= 50; ++i) {
    low.on_ack(ack(i * 2'000, 8192, 14'000, false));   // 4 us queueing < target
    high.on_ack(ack(i * 2'000, 8192, 22'000, false));  // 12 us queueing >= target, no ECN
  }
  EXPECT_GT(high.cwnd_bytes(), start);  // fair increase still grows
  EXPECT_GT(low.cwnd_bytes(), high.cwnd_bytes());
}

TEST(Nscc, DelayFarAboveTargetDecreasesWithoutEcn) {
  // 20 us of queueing (2.5 x target) and no ECN mark: a queue that does not mark (a NIC's own,
  // a last hop with ECN off) still brings the window down, once per base RTT.
  NsccConfig c = cfg();
  c.disable_qa = 1;
  Nscc cc(c, kMtu);
  const uint64_t start = cc.cwnd_bytes();
  for (int i = 1; i <= 50; ++i) cc.on_ack(ack(i * 2'000, 8192, 30'000, false));
  EXPECT_LT(cc.cwnd_bytes(), start / 4);
}

TEST(Nscc, QuickAdaptCutsToWhatWasAchievedOnLargeDelay) {
  Nscc cc(cfg(), kMtu);
  // 20 KB acknowledged over one base RTT, then a 50 us delay sample: above qa_threshold, and
  // achieved < max_cwnd >> 3 = 50 KB, so the window becomes the achieved bytes.
  cc.on_ack(ack(100, 10'000, 10'000, false));
  cc.on_ack(ack(5'000, 10'000, 10'000, false));
  cc.on_ack(ack(9'000, 0, 60'000, false));
  EXPECT_EQ(cc.cwnd_bytes(), 20'000u);
}

TEST(Nscc, ReceiverPenaltyShrinksTheWindow) {
  NsccConfig c = cfg();
  c.disable_qa = 1;
  c.eta = 0;
  Nscc cc(c, kMtu);
  cc.on_trim(0, 100'000, false);
  const uint64_t w = cc.cwnd_bytes();
  CcAckSample s = ack(1000, 12'800, 11'000, true);  // ECN with low delay: the quadrant holds
  s.rcv_cwnd_pen = 64;                              // (64 x 12800) >> 7 = 6400 bytes
  cc.on_ack(s);
  EXPECT_EQ(w - cc.cwnd_bytes(), 6'400u);
}

TEST(Nscc, NoneHasNoWindow) {
  NoCc none;
  EXPECT_EQ(none.cwnd_bytes(), UINT64_MAX);
  EXPECT_EQ(none.name(), "none");
  EXPECT_EQ(make_nscc(cfg(), kMtu)->name(), "uet-1.0-nscc");
}

}  // namespace
}  // namespace mrc::engine
