// The kernel receive filter's program, run by the kernel on crafted frames (BPF_PROG_TEST_RUN):
// what it refuses, what it must never refuse, its counters and its sampling.
#include <gtest/gtest.h>

#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "reference-impl/runtime/sys.h"
#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::runtime {
namespace {

namespace ws = wire::samples;

std::vector<std::byte> sample(const std::string& name) {
  for (const ws::Sample& s : ws::all_samples())
    if (s.name == name) return s.frame;
  ADD_FAILURE() << "no sample " << name;
  return {};
}

// The STEV sample with another QPN and PSN (BTH at 62: QPN bytes 67..69, PSN 71..73).
std::vector<std::byte> with(std::vector<std::byte> f, uint32_t qpn, uint32_t psn) {
  for (int i = 0; i < 3; ++i) {
    f[67 + i] = static_cast<std::byte>(qpn >> (16 - 8 * i));
    f[71 + i] = static_cast<std::byte>(psn >> (16 - 8 * i));
  }
  return f;
}

class RxFilterTest : public ::testing::Test {
 protected:
  // gap: the sample gap; the default never lets a refusable frame through.
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max() / 2;
  // Buckets of `burst` frames, then one per gap (kNever: none).
  void make(uint64_t gap_ns = kNever, uint64_t ep_gap_ns = kNever, uint32_t burst = 1) {
    std::string why;
    RxFilter::Gaps gaps;
    gaps.reply_ns = gap_ns;
    gaps.ep_peer_ns = gaps.ep_stranger_ns = ep_gap_ns;
    gaps.reply_burst = gaps.ep_burst = burst;
    filter_ = RxFilter::create(wire::mrp0(), gaps, why);
    if (!filter_) GTEST_SKIP() << "no eBPF here: " << why;
    if (filter_->run_on(sample("stev/WRITE_ONLY")) == -EPERM) GTEST_SKIP() << "no test run";
  }
  void gate(uint32_t cack, uint32_t window = 512) {
    engine::RxGate g;
    g.qpn = qpn_;
    g.peer_gid = ws::requestor().gid;
    g.rcv_cack = cack;
    g.rcv_window = window;
    gates_ = {g};
    filter_->publish(gates_);
  }
  bool accepted(const std::vector<std::byte>& f) {
    const int64_t r = filter_->run_on(f);
    EXPECT_GE(r, 0);
    return r > 0;
  }
  bool data_accepted(uint32_t psn) { return accepted(with(data_, qpn_, psn)); }

  std::unique_ptr<RxFilter> filter_;
  std::vector<engine::RxGate> gates_;
  std::vector<std::byte> data_ = sample("stev/WRITE_ONLY");
  uint32_t qpn_ = ws::responder().qpn;
};

TEST_F(RxFilterTest, RefusesDuplicatesAndPsnsBeyondTwiceTheWindowOnly) {
  make();
  gate(1000, 512);
  EXPECT_TRUE(data_accepted(999));   // refusable, but the QP's bucket lets its one frame through
  EXPECT_TRUE(data_accepted(1001));  // the next PSN
  EXPECT_TRUE(data_accepted(1000 + 1024));        // the edge: twice the window
  EXPECT_FALSE(data_accepted(1000 + 1025));       // beyond it
  EXPECT_FALSE(data_accepted(1000 + (1 << 21)));  // what the psn-ahead flood sends
  EXPECT_FALSE(data_accepted(1000));              // the cumulative PSN itself
  EXPECT_FALSE(data_accepted(999));
  EXPECT_FALSE(data_accepted((1000 - (1 << 23)) & 0xFFFFFF));  // 2^23 back: a duplicate
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.duplicates, 3u);
  EXPECT_EQ(c.out_of_window, 2u);
  EXPECT_EQ(c.sampled, 1u);
  // The cumulative PSN moves on: 1001 is now a duplicate, 2000 + 1024 in the window.
  gate(2000, 512);
  EXPECT_FALSE(data_accepted(1001));
  EXPECT_TRUE(data_accepted(2000 + 1024));
  EXPECT_TRUE(data_accepted(2001));
  // Across the PSN wrap.
  gate(0xFFFFF0, 512);
  EXPECT_TRUE(data_accepted(5));
  EXPECT_FALSE(data_accepted(0xFFFFF0));
  EXPECT_FALSE(data_accepted(0xFFFFF0 + 1025 - 0x1000000));
}

TEST_F(RxFilterTest, PassesWhatItCannotJudge) {
  make();
  gate(1000, 512);
  // Another QP, another source, a QP no longer published.
  EXPECT_TRUE(accepted(with(data_, qpn_ + 1, 5)));
  std::vector<std::byte> f = with(data_, qpn_, 5);
  f[22 + 15] ^= std::byte{1};
  EXPECT_TRUE(accepted(f));
  // Not a data packet (a SACK at the same QPN and an old PSN).
  EXPECT_TRUE(accepted(with(sample("stev/SACK"), qpn_, 5)));
  // Trimmed data packets: NACKed whatever their PSN.
  EXPECT_TRUE(accepted(with(sample("stev/WRITE_MIDDLE/trimmed"), qpn_, 5)));
  EXPECT_TRUE(accepted(with(sample("stev/WRITE_MIDDLE/trimmed-lasthop"), qpn_, 5)));
  // Too short for a BTH: the engine counts the decode error.
  std::vector<std::byte> shortf = with(data_, qpn_, 5);
  shortf.resize(73);
  EXPECT_TRUE(accepted(shortf));
  // Outer SRv6 header: the engine decodes the inner packet.
  EXPECT_TRUE(accepted(sample("srv6-srh/WRITE_ONLY")));
  EXPECT_EQ(filter_->counts().duplicates + filter_->counts().out_of_window, 0u);
  // What the classic filter refused is still refused: not UDP, UDP to another port.
  std::vector<std::byte> tcp = data_;
  tcp[20] = std::byte{6};
  EXPECT_FALSE(accepted(tcp));
  std::vector<std::byte> other = data_;
  other[56] = std::byte{0x30};
  EXPECT_FALSE(accepted(other));
  // No gates: nothing refused.
  gates_.clear();
  filter_->publish(gates_);
  EXPECT_TRUE(data_accepted(5));
}

TEST_F(RxFilterTest, LetsOneRefusableFramePerGapThrough) {
  make(3'600'000'000'000ull);  // one per hour: the first only
  gate(1000, 512);
  EXPECT_TRUE(data_accepted(900));
  EXPECT_FALSE(data_accepted(900));
  EXPECT_FALSE(data_accepted(1000 + (1 << 21)));
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.sampled, 1u);
  EXPECT_EQ(c.duplicates + c.out_of_window, 2u);
}

TEST_F(RxFilterTest, GapZeroRefusesNothing) {
  make(0);
  gate(1000, 512);
  EXPECT_TRUE(data_accepted(900));
  EXPECT_TRUE(data_accepted(1000 + (1 << 21)));
  EXPECT_EQ(filter_->counts().sampled, 2u);
}

// The endpoint-request samples come from the requestor: with a gate (a QP) toward it, it is a
// peer; from another source address, a stranger.
std::vector<std::byte> from(std::vector<std::byte> f, uint8_t last_gid_byte) {
  f[22 + 15] = static_cast<std::byte>(last_gid_byte);
  return f;
}

TEST_F(RxFilterTest, LimitsPeersEvProbesAndStrangersRequests) {
  make(kNever, kNever);
  gate(1000, 512);
  const std::vector<std::byte> probe = sample("stev/ENDPOINT_REQUEST/ev-probe");
  const std::vector<std::byte> status = sample("stev/ENDPOINT_REQUEST/port-status");
  const uint8_t peer_last = static_cast<uint8_t>(ws::requestor().gid[15]);
  // The peer: EV probes refused once its bucket's one frame has passed, port-status updates
  // always passed (they change state).
  EXPECT_TRUE(accepted(probe));
  EXPECT_FALSE(accepted(probe));
  EXPECT_TRUE(accepted(status));
  EXPECT_TRUE(accepted(status));
  // Strangers, whatever their entry: one bucket for all.
  EXPECT_TRUE(accepted(from(status, peer_last ^ 0x02)));
  EXPECT_FALSE(accepted(from(probe, peer_last ^ 0x10)));   // the peer's entry, another GID
  EXPECT_FALSE(accepted(from(status, peer_last ^ 0x01)));  // an empty entry
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.ep_peer_limited, 1u);
  EXPECT_EQ(c.ep_stranger_limited, 2u);
  // Not DestQP 2, or too short for the ERTH: the engine's to judge.
  std::vector<std::byte> f = with(probe, 77, 0);
  EXPECT_TRUE(accepted(f));
  f = probe;
  f.resize(79);
  EXPECT_TRUE(accepted(f));
  // Two peers in one entry: both passed, and strangers hashing there too.
  engine::RxGate second = gates_[0];
  second.qpn += 1;
  second.peer_gid[0] ^= 0x80;
  gates_.push_back(second);
  filter_->publish(gates_);
  EXPECT_TRUE(accepted(probe));
  EXPECT_TRUE(accepted(from(probe, peer_last ^ 0x10)));
  // No QP at all: the peer is a stranger like any other.
  gates_.clear();
  filter_->publish(gates_);
  EXPECT_FALSE(accepted(status));
}

TEST_F(RxFilterTest, EndpointBucketsPassOnePerGap) {
  make(kNever, 3'600'000'000'000ull);
  gate(1000, 512);
  const std::vector<std::byte> probe = sample("stev/ENDPOINT_REQUEST/ev-probe");
  EXPECT_TRUE(accepted(probe));
  EXPECT_FALSE(accepted(probe));
  const std::vector<std::byte> stranger = from(probe, 0x77);
  EXPECT_TRUE(accepted(stranger));
  EXPECT_FALSE(accepted(from(probe, 0x78)));
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.ep_peer_limited, 1u);
  EXPECT_EQ(c.ep_stranger_limited, 1u);
}

TEST_F(RxFilterTest, BucketsAllowTheirBurst) {
  make(3'600'000'000'000ull, 3'600'000'000'000ull, 3);
  gate(1000, 512);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(data_accepted(900)) << i;
  EXPECT_FALSE(data_accepted(900));
  const std::vector<std::byte> probe = sample("stev/ENDPOINT_REQUEST/ev-probe");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(accepted(probe)) << i;
  EXPECT_FALSE(accepted(probe));
  EXPECT_EQ(filter_->counts().sampled, 6u);
}

// The sample NACK (responder -> requestor) as UNEXP_EVENT at NACK PSN `psn` (NETH behind the
// BTH at 74: code byte 76, PSN bytes 87..89).
std::vector<std::byte> unexp_event_at(uint32_t psn) {
  std::vector<std::byte> f = sample("stev/NACK");
  f[76] = std::byte{static_cast<uint8_t>(wire::NackCode::kUnexpEvent)};
  for (int i = 0; i < 3; ++i) f[87 + i] = static_cast<std::byte>(psn >> (16 - 8 * i));
  return f;
}

class RxFilterNackTest : public RxFilterTest {
 protected:
  // The requestor's QP: NACKs come from the responder; `window` 0 = not sending (not RTS).
  void requester_gate(uint32_t snd_cack, uint32_t window = 256) {
    engine::RxGate g;
    g.qpn = ws::requestor().qpn;
    g.peer_gid = ws::responder().gid;
    g.rcv_cack = 5;
    g.rcv_window = 512;
    g.snd_cack = snd_cack;
    g.snd_window = window;
    gates_ = {g};
    filter_->publish(gates_);
  }
  bool nack_accepted(uint32_t psn) { return accepted(unexp_event_at(psn)); }
};

TEST_F(RxFilterNackTest, TheSampleIsWhatTheProgramReads) {
  // The offsets the test (and the program) use, checked against the decoder.
  wire::DecodedFrame d;
  const std::vector<std::byte> f = unexp_event_at(0x123456);
  ASSERT_TRUE(wire::decode_frame(f, d));
  EXPECT_EQ(d.neth.nack_psn, 0x123456u);
  EXPECT_EQ(d.neth.nack_code, static_cast<uint8_t>(wire::NackCode::kUnexpEvent));
  EXPECT_EQ(d.bth.dest_qp, ws::requestor().qpn);
  EXPECT_EQ(d.ip6.src, ws::responder().gid);
}

TEST_F(RxFilterNackTest, RefusesNacksNamingNoOutstandingPsnOnly) {
  make();
  requester_gate(1000, 256);
  // Outstanding at most: 1001 .. 1000 + 256 (Qp::entry: after the cumulative ACK, before
  // snd_nxt, which is at most MPR beyond it).
  EXPECT_TRUE(nack_accepted(1001));
  EXPECT_TRUE(nack_accepted(1000 + 256));   // the window's edge
  EXPECT_FALSE(nack_accepted(1000 + 257));  // beyond it
  EXPECT_FALSE(nack_accepted(1000));        // the cumulative ACK itself
  EXPECT_FALSE(nack_accepted(999));
  EXPECT_FALSE(nack_accepted(1000 - 4096));       // what the flood sends: below ...
  EXPECT_FALSE(nack_accepted(1000 + (1 << 20)));  // ... and far beyond
  EXPECT_FALSE(nack_accepted((1000 - (1 << 23)) & 0xFFFFFF));
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.nacks_not_outstanding, 6u);
  EXPECT_EQ(c.duplicates + c.out_of_window + c.sampled, 0u);  // not the data buckets
  // Other NACK codes are judged the same way (the engine drops them all as stale).
  std::vector<std::byte> trimmed_code = unexp_event_at(900);
  trimmed_code[76] = std::byte{static_cast<uint8_t>(wire::NackCode::kTrimmed)};
  EXPECT_FALSE(accepted(trimmed_code));
  // The ACK moves on: 1001 is acknowledged, 1257 outstanding.
  requester_gate(1100, 256);
  EXPECT_FALSE(nack_accepted(1001));
  EXPECT_TRUE(nack_accepted(1100 + 256));
  EXPECT_FALSE(nack_accepted(1100));
  // Across the PSN wrap.
  requester_gate(0xFFFFF0, 256);
  EXPECT_TRUE(nack_accepted(5));
  EXPECT_TRUE(nack_accepted((0xFFFFF0 + 256) & 0xFFFFFF));
  EXPECT_FALSE(nack_accepted((0xFFFFF0 + 257) & 0xFFFFFF));
  EXPECT_FALSE(nack_accepted(0xFFFFF0));
}

TEST_F(RxFilterNackTest, PassesNacksItCannotJudge) {
  make();
  requester_gate(1000, 256);
  const uint32_t far = 1000 + (1 << 20);
  // Another QP, another source, a trimmed DSCP (the engine counts a decode error), too short for
  // the NETH's PSN.
  EXPECT_TRUE(accepted(with(unexp_event_at(far), ws::requestor().qpn + 1, 0)));
  std::vector<std::byte> f = unexp_event_at(far);
  f[22 + 15] ^= std::byte{1};
  EXPECT_TRUE(accepted(f));
  f = unexp_event_at(far);
  const unsigned traffic_class = unsigned{wire::mrp0().dscp().trimmed} << 2;
  f[14] = static_cast<std::byte>(0x60u | (traffic_class >> 4));
  f[15] =
      static_cast<std::byte>(((traffic_class & 0xFu) << 4) | (static_cast<unsigned>(f[15]) & 0xFu));
  EXPECT_TRUE(accepted(f));
  f = unexp_event_at(far);
  f.resize(89);
  EXPECT_TRUE(accepted(f));
  // A requester not sending (RTR: window 0): the engine counts the wrong state.
  requester_gate(1000, 0);
  EXPECT_TRUE(nack_accepted(far));
  // The QP gone.
  gates_.clear();
  filter_->publish(gates_);
  EXPECT_TRUE(nack_accepted(far));
  EXPECT_EQ(filter_->counts().nacks_not_outstanding, 0u);
}

// The tc ingress variant: the same decisions as actions, and everything that is not ours
// (other EtherTypes, other UDP ports) goes on to the stack.
TEST_F(RxFilterNackTest, TcVariantRefusesTheSameAndPassesTheRest) {
  make();
  if (filter_->run_on(data_, true) == -ENOENT) GTEST_SKIP() << "no tc program here";
  requester_gate(1000, 256);
  const auto tc = [&](const std::vector<std::byte>& f) { return filter_->run_on(f, true); };
  EXPECT_EQ(tc(unexp_event_at(1000 + (1 << 20))), TC_ACT_SHOT);
  EXPECT_EQ(tc(unexp_event_at(1001)), TC_ACT_OK);
  gate(1000, 512);
  EXPECT_EQ(tc(with(data_, qpn_, 1000 + (1 << 21))), TC_ACT_OK);    // the bucket's one frame
  EXPECT_EQ(tc(with(data_, qpn_, 1000 + (1 << 21))), TC_ACT_SHOT);  // out of the window
  EXPECT_EQ(tc(with(data_, qpn_, 1001)), TC_ACT_OK);
  std::vector<std::byte> other = data_;
  other[56] = std::byte{0x30};  // UDP to another port
  EXPECT_EQ(tc(other), TC_ACT_OK);
  std::vector<std::byte> arp = with(data_, qpn_, 1000 + (1 << 21));
  arp[12] = std::byte{0x08};
  arp[13] = std::byte{0x06};
  EXPECT_EQ(tc(arp), TC_ACT_OK);
  EXPECT_EQ(tc(sample("stev/SACK")), TC_ACT_OK);
  RxFilter::Counts c = filter_->counts();
  EXPECT_EQ(c.nacks_not_outstanding, 1u);
  EXPECT_EQ(c.out_of_window, 1u);
}

// At tc ingress the program sees every process's traffic on the interface: a frame to another
// GID than the endpoint's is never refused, whatever QPN, peer and PSN it carries.
TEST_F(RxFilterTest, JudgesOnlyFramesToTheEndpointsOwnGid) {
  make();
  gate(1000, 512);
  filter_->set_local_gid(ws::responder().gid);
  EXPECT_TRUE(data_accepted(1000 + (1 << 21)));   // the bucket's one frame
  EXPECT_FALSE(data_accepted(1000 + (1 << 21)));  // to us: refused
  std::vector<std::byte> f = with(data_, qpn_, 1000 + (1 << 21));
  f[38 + 15] ^= std::byte{1};  // to another GID
  EXPECT_TRUE(accepted(f));
  if (filter_->run_on(f, true) != -ENOENT) {
    EXPECT_EQ(filter_->run_on(f, true), TC_ACT_OK);
    EXPECT_EQ(filter_->run_on(with(data_, qpn_, 1000 + (1 << 21)), true), TC_ACT_SHOT);
  }
  EXPECT_EQ(filter_->counts().out_of_window, 2u);
}

}  // namespace
}  // namespace mrc::runtime

namespace mrc::runtime {
namespace {

// Both variants copy the headers they read to the stack with one helper call before their first
// packet load, and judge a frame that long from that copy: AF_PACKET senders leave all but the
// Ethernet and IPv6 headers in page fragments, where each BPF_LD_ABS takes the helper's
// skb_copy_bits path (docs/performance.md, "Hostile floods"). The BPF_LD_ABS body stays for
// shorter frames: it reads the same fields (one stack load per BPF_LD_ABS).
TEST(RxFilterProgramTest, CopiesTheHeadersOnceAndReadsThemFromTheStack) {
  const auto insn = [](uint64_t raw) {
    bpf_insn i;
    std::memcpy(&i, &raw, sizeof i);
    return i;
  };
  for (const bool tc : {false, true}) {
    SCOPED_TRACE(tc ? "tc" : "socket");
    const std::vector<uint64_t> prog = RxFilter::program_for_test(tc);
    ASSERT_FALSE(prog.empty());
    int copy_at = -1, first_load = -1, farthest = 0, ld_abs = 0, from_stack = 0;
    int32_t copied = -1;  // R4, the length asked for, as set before the call
    for (size_t k = 0; k < prog.size(); ++k) {
      const bpf_insn i = insn(prog[k]);
      if (i.code == (BPF_JMP | BPF_CALL) && i.imm == BPF_FUNC_skb_load_bytes && copy_at < 0)
        copy_at = static_cast<int>(k);
      if (i.code == (BPF_ALU64 | BPF_MOV | BPF_K) && i.dst_reg == BPF_REG_4 && copy_at < 0)
        copied = i.imm;
      if (BPF_CLASS(i.code) == BPF_LD && BPF_MODE(i.code) == BPF_ABS) {
        if (first_load < 0) first_load = static_cast<int>(k);
        const int size = BPF_SIZE(i.code) == BPF_W ? 4 : BPF_SIZE(i.code) == BPF_H ? 2 : 1;
        farthest = std::max(farthest, i.imm + size);
        ++ld_abs;
      }
      if (BPF_CLASS(i.code) == BPF_LDX && i.src_reg == BPF_REG_10) ++from_stack;
    }
    ASSERT_GE(copy_at, 0) << "no bpf_skb_load_bytes";
    ASSERT_GT(ld_abs, 0);
    EXPECT_LT(copy_at, first_load) << "a packet load runs before the copy";
    EXPECT_GE(copied, farthest) << "a load reads beyond the copied headers";
    EXPECT_EQ(from_stack, ld_abs) << "the stack body does not read what the BPF_LD_ABS body reads";
  }
}

// A frame shorter than the copied headers is judged by the BPF_LD_ABS body, as the full frame is
// by the stack's: the same verdicts on data frames cut to 80 bytes (still a whole BTH).
TEST_F(RxFilterTest, JudgesFramesShorterThanTheCopyTheSame) {
  make();
  gate(1000, 512);
  const auto cut = [](std::vector<std::byte> f) {
    f.resize(80);
    return f;
  };
  EXPECT_TRUE(data_accepted(900));  // the bucket's one frame
  EXPECT_TRUE(accepted(cut(with(data_, qpn_, 1001))));
  EXPECT_FALSE(accepted(cut(with(data_, qpn_, 1000))));  // duplicate
  EXPECT_FALSE(accepted(cut(with(data_, qpn_, 999))));
  EXPECT_FALSE(data_accepted(998));  // the full frame, from the stack copy
  EXPECT_TRUE(data_accepted(1002));
  if (filter_->run_on(data_, true) != -ENOENT) {
    EXPECT_EQ(filter_->run_on(cut(with(data_, qpn_, 997)), true), TC_ACT_SHOT);
    EXPECT_EQ(filter_->run_on(cut(with(data_, qpn_, 1003)), true), TC_ACT_OK);
    EXPECT_EQ(filter_->run_on(with(data_, qpn_, 996), true), TC_ACT_SHOT);
  }
  EXPECT_EQ(filter_->counts().duplicates, 3u + (filter_->run_on(data_, true) != -ENOENT ? 2u : 0u));
}

}  // namespace
}  // namespace mrc::runtime

namespace mrc::runtime {
namespace {

// The ingress sink behind the tap rings (IngressSink): it ends at tc ingress only the MRC frames
// to the endpoint's own GID and RoCE port, plain or IPv6-in-IPv6 (SRv6 without SRH), which the
// rings have already taken; everything else goes on (TC_ACT_UNSPEC: the next tc program and the
// stack), ND and the TCP control channel above all.
class IngressSinkTest : public ::testing::Test {
 protected:
  // A sink for the responder's GID (the samples' data frames go to it) or `gid`.
  void make(uint16_t port = wire::kRoceV2Port, const wire::Ipv6Addr& gid = ws::responder().gid) {
    std::string why;
    sink_ = IngressSink::create(port, gid, why);
    if (!sink_) GTEST_SKIP() << "no eBPF here: " << why;
    int32_t v = 0;
    if (sink_->run_on(sample("stev/WRITE_ONLY"), v) == -EPERM) GTEST_SKIP() << "no test run";
  }
  int32_t run(const std::vector<std::byte>& f) {
    int32_t v = 0;
    EXPECT_EQ(sink_->run_on(f, v), 0);
    return v;
  }
  std::unique_ptr<IngressSink> sink_;
};

TEST_F(IngressSinkTest, EndsTheEndpointsOwnRoceFramesOnly) {
  make();
  const std::vector<std::byte> data = sample("stev/WRITE_ONLY");
  EXPECT_EQ(run(data), TC_ACT_SHOT);
  EXPECT_EQ(run(sample("stev/NACK")), TC_ACT_UNSPEC);  // to the requester, not us
  for (int w = 0; w < 4; ++w) {  // another destination address, whichever word differs
    std::vector<std::byte> f = data;
    f[38 + 4 * w + 3] ^= std::byte{0x80};
    EXPECT_EQ(run(f), TC_ACT_UNSPEC) << "address word " << w;
  }
  std::vector<std::byte> f = data;
  f[57] ^= std::byte{1};  // another UDP port
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = data;
  f[20] = std::byte{6};  // TCP (the control channel)
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = data;
  f[20] = std::byte{58};  // ICMPv6 (neighbour discovery)
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = data;
  f[12] = std::byte{0x08};  // not IPv6
  f[13] = std::byte{0x00};
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f.assign(data.begin(), data.begin() + 57);  // too short to hold the UDP port
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  // Another wire profile's port: the same frame is not ours.
  make(4792);
  EXPECT_EQ(run(data), TC_ACT_UNSPEC);
  // The requester's sink ends the frames to the requester.
  make(wire::kRoceV2Port, ws::requestor().gid);
  EXPECT_EQ(run(sample("stev/NACK")), TC_ACT_SHOT);
  EXPECT_EQ(run(sample("stev/SACK")), TC_ACT_SHOT);
  EXPECT_EQ(run(data), TC_ACT_UNSPEC);
}

TEST_F(IngressSinkTest, EndsIpv6InIpv6ToUsAndPassesRoutingHeaders) {
  make();
  const std::vector<std::byte> srv6 = sample("srv6/WRITE_ONLY");
  ASSERT_GE(srv6.size(), 98u);
  ASSERT_EQ(srv6[20], std::byte{41});
  EXPECT_EQ(run(srv6), TC_ACT_SHOT);
  std::vector<std::byte> f = srv6;
  f[54 + 24 + 15] ^= std::byte{1};  // the inner header to another address
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = srv6;
  f[54 + 6] = std::byte{6};  // inner TCP
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = srv6;
  f[54 + 43] ^= std::byte{1};  // inner UDP to another port
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  f = srv6;
  f[54] = std::byte{0x45};  // inner IPv4
  EXPECT_EQ(run(f), TC_ACT_UNSPEC);
  // An SRH in front: the kernel's segment processing decides, as without the sink.
  const std::vector<std::byte> srh = sample("srv6-srh/WRITE_ONLY");
  ASSERT_EQ(srh[20], std::byte{43});
  EXPECT_EQ(run(srh), TC_ACT_UNSPEC);
}

}  // namespace
}  // namespace mrc::runtime
