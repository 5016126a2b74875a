// The completion ring of device mode (cq_ring.h): completions in order across the wrap, a full
// ring refusing more, and neither side believing an impossible index the other wrote, nor
// mapping a memfd the other could shrink under it.
#include "reference-impl/provider/cq_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <vector>

namespace {

using softmrc::cq_ring::Consumer;
using softmrc::cq_ring::Header;
using softmrc::cq_ring::Producer;

ibv_wc wc_of(uint64_t id) {
  ibv_wc wc{};
  wc.wr_id = id;
  wc.byte_len = static_cast<uint32_t>(id * 3);
  return wc;
}

// The device's header as the other side sees it through its own mapping.
Header* shared_header(const Producer& p) {
  void* m = mmap(nullptr, softmrc::cq_ring::bytes_for(p.slots()), PROT_READ | PROT_WRITE,
                 MAP_SHARED, p.fd(), 0);
  return m == MAP_FAILED ? nullptr : static_cast<Header*>(m);
}

TEST(CqRing, SlotsArePowersOfTwoCoveringTheCq) {
  EXPECT_EQ(softmrc::cq_ring::slots_for(1), 1u);
  EXPECT_EQ(softmrc::cq_ring::slots_for(5), 8u);
  EXPECT_EQ(softmrc::cq_ring::slots_for(64), 64u);
  EXPECT_EQ(softmrc::cq_ring::slots_for(0), 0u);
  EXPECT_EQ(softmrc::cq_ring::slots_for(-3), 0u);
  EXPECT_EQ(softmrc::cq_ring::slots_for((1 << 20) + 1), 0u);
}

TEST(CqRing, CompletionsArriveInOrderAcrossTheWrap) {
  Producer p;
  ASSERT_TRUE(p.create(8));
  Consumer c;
  ASSERT_TRUE(c.attach(dup(p.fd()), 8));
  ibv_wc out[8];
  EXPECT_EQ(c.poll(8, out), 0);
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 50; ++round) {
    const int burst = 1 + round % 8;
    for (int i = 0; i < burst; ++i) ASSERT_TRUE(p.push(wc_of(next_in++)));
    int got = 0;
    while (got < burst) {
      const int n = c.poll(3, out);  // fewer than there are: the rest stay for the next poll
      ASSERT_GT(n, 0);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(out[i].wr_id, next_out);
        EXPECT_EQ(out[i].byte_len, next_out * 3);
        ++next_out;
      }
      got += n;
    }
    EXPECT_EQ(p.pending(), 0);
  }
}

TEST(CqRing, AFullRingTakesNothingMoreUntilPolled) {
  Producer p;
  ASSERT_TRUE(p.create(4));
  Consumer c;
  ASSERT_TRUE(c.attach(dup(p.fd()), 4));
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(p.push(wc_of(i)));
  EXPECT_FALSE(p.push(wc_of(99)));
  ibv_wc out[4];
  ASSERT_EQ(c.poll(1, out), 1);
  EXPECT_EQ(out[0].wr_id, 0u);
  EXPECT_TRUE(p.push(wc_of(4)));
  ASSERT_EQ(c.poll(4, out), 4);
  EXPECT_EQ(out[3].wr_id, 4u);  // 99 was never written over a slot the consumer had not taken
}

TEST(CqRing, TheDeviceRefusesAnImpossibleConsumerIndex) {
  Producer p;
  ASSERT_TRUE(p.create(4));
  Header* h = shared_header(p);
  ASSERT_NE(h, nullptr);
  ASSERT_TRUE(p.push(wc_of(0)));
  // A consumer claiming more than was produced, or so far behind that the ring would hold
  // more than its slots: the device writes nothing rather than a slot it was not given.
  h->consumed.store(5);
  EXPECT_EQ(p.pending(), -1);
  EXPECT_FALSE(p.push(wc_of(1)));
  h->consumed.store(UINT64_MAX - 10);
  EXPECT_EQ(p.pending(), -1);
  EXPECT_FALSE(p.push(wc_of(1)));
  h->consumed.store(1);
  EXPECT_EQ(p.pending(), 0);
  EXPECT_TRUE(p.push(wc_of(1)));
  munmap(h, softmrc::cq_ring::bytes_for(4));
}

TEST(CqRing, TheLibraryRefusesAnImpossibleProducerIndex) {
  Producer p;
  ASSERT_TRUE(p.create(4));
  Consumer c;
  ASSERT_TRUE(c.attach(dup(p.fd()), 4));
  Header* h = shared_header(p);
  ASSERT_NE(h, nullptr);
  ibv_wc out[8];
  h->produced.store(5);  // five completions in four slots
  errno = 0;
  EXPECT_EQ(c.poll(8, out), -1);
  EXPECT_EQ(errno, EPROTO);
  h->produced.store(UINT64_MAX);  // "behind" the consumer
  EXPECT_EQ(c.poll(8, out), -1);
  h->produced.store(4);
  EXPECT_EQ(c.poll(8, out), 4);
  munmap(h, softmrc::cq_ring::bytes_for(4));
}

TEST(CqRing, TheLibraryMapsOnlyASealedRingOfTheAnnouncedSize) {
  Producer p;
  ASSERT_TRUE(p.create(8));
  Consumer wrong_slots;
  EXPECT_FALSE(wrong_slots.attach(dup(p.fd()), 16));
  EXPECT_EQ(errno, EPROTO);
  Consumer not_pow2;
  EXPECT_FALSE(not_pow2.attach(dup(p.fd()), 6));
  // The right size and a valid header, but the sender could still shrink it under the
  // mapping (SIGBUS).
  const int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(softmrc::cq_ring::bytes_for(8))), 0);
  char header[softmrc::cq_ring::kSlotsOffset];
  ASSERT_EQ(pread(p.fd(), header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  ASSERT_EQ(pwrite(fd, header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  Consumer unsealed;
  EXPECT_FALSE(unsealed.attach(fd, 8));
  EXPECT_EQ(errno, EPROTO);
  // Sealed and of the right size, but not a ring (no header).
  const int fd2 = memfd_create("blank", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd2, 0);
  ASSERT_EQ(ftruncate(fd2, static_cast<off_t>(softmrc::cq_ring::bytes_for(8))), 0);
  ASSERT_EQ(fcntl(fd2, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
  Consumer blank;
  EXPECT_FALSE(blank.attach(fd2, 8));
  // The device's own memfd cannot be shrunk by the application either.
  EXPECT_NE(ftruncate(p.fd(), 64), 0);
}

}  // namespace
