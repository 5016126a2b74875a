#include "reference-impl/hostile/hostile.h"

#include <gtest/gtest.h>

#include <set>

#include "wire/samples.h"

namespace mrc::hostile {
namespace {

namespace samples = wire::samples;

const wire::WireProfile& p0() {
  return wire::mrp0();
}

// A WRITE_FIRST with RETH from the requestor, as the tap would show it.
std::vector<std::byte> data_frame() {
  wire::FrameSpec s = samples::base_spec(samples::Carrier::kStev, samples::requestor(),
                                         samples::responder(), 0x12345);
  s.bth.opcode = p0().opcode_of(wire::PacketKind::kMrcData, wire::MessagePosition::kFirst, false);
  s.op = p0().opcode_info(s.bth.opcode);
  s.bth.dest_qp = samples::responder().qpn;
  s.bth.psn = 1000;
  s.reth.va = 0x7f0000001000;
  s.reth.rkey = 0xabcdef01;
  s.reth.dma_len = 65536;
  const std::vector<std::byte>& pl = samples::pattern(1024);
  s.payload = {pl.data(), pl.size()};
  return wire::encode_frame(s);
}

std::vector<std::byte> sack_frame(bool probe_answer = false) {
  wire::FrameSpec s = samples::base_spec(samples::Carrier::kStev, samples::responder(),
                                         samples::requestor(), 0x12345);
  s.bth.opcode = p0().opcode_of(wire::PacketKind::kMrcSack, wire::MessagePosition::kNone, false);
  s.op = p0().opcode_info(s.bth.opcode);
  s.bth.dest_qp = samples::requestor().qpn;
  s.bth.psn = 1000;
  s.seth.entropy = 0x12345;
  s.seth.cack_psn = 990;
  s.seth.pr = probe_answer;
  return wire::encode_frame(s);
}

wire::DecodedFrame decoded(const std::vector<std::byte>& f) {
  wire::DecodedFrame d;
  EXPECT_TRUE(wire::decode_frame(wire::as_bytes(f), d)) << d.error.describe();
  return d;
}

Learned learnt() {
  Learner l;
  EXPECT_FALSE(l.offer(wire::as_bytes(sack_frame(true))));  // a probe answer teaches nothing
  EXPECT_FALSE(l.offer(wire::as_bytes(sack_frame())));
  std::vector<std::byte> bad = data_frame();
  bad.back() ^= std::byte{1};
  EXPECT_FALSE(l.offer(wire::as_bytes(bad)));  // a corrupted frame is no template
  EXPECT_TRUE(l.offer(wire::as_bytes(data_frame())));
  return l.learned();
}

const wire::MacAddr kSrc{2, 0, 0, 0, 0, 0xc1};
const wire::MacAddr kDst{2, 0, 0, 0, 0, 0x51};

TEST(Hostile, TheRkeySweepFollowsTheNewestDataPsnOfTheLearntQp) {
  Crafter c(learnt(), kSrc, kDst);
  ASSERT_TRUE(c.ok());
  // The decoded frame's spans point into its bytes: keep them alive while `d` is used.
  const std::vector<std::byte> frame = data_frame();
  wire::DecodedFrame d = decoded(frame);
  wire::FrameSpec newer = d;
  newer.bth.psn = 5000;
  c.track(wire::as_bytes(wire::encode_frame(newer)));
  wire::FrameSpec other_qp = d;
  other_qp.bth.psn = 9000;
  other_qp.bth.dest_qp ^= 1;
  c.track(wire::as_bytes(wire::encode_frame(other_qp)));  // not the learnt QP
  newer.bth.psn = 4000;
  c.track(wire::as_bytes(wire::encode_frame(newer)));  // older: ignored
  EXPECT_EQ(decoded(c.craft(Kind::kWrongRkey, 0)).bth.psn, 5001u);
  EXPECT_EQ(decoded(c.craft(Kind::kVaOutside, 63)).bth.psn, 5064u);
  // Past the nearest 64 the sweep moves further out, ring by ring, so a tap that lags the
  // transfer (a loaded host) still reaches PSNs the responder has not received; then it repeats.
  EXPECT_EQ(decoded(c.craft(Kind::kVaOutside, 64)).bth.psn, 5065u);
  EXPECT_EQ(decoded(c.craft(Kind::kWrongRkey, 64 * 10 + 3)).bth.psn, 5000u + 1 + 3 + 640);
  EXPECT_EQ(decoded(c.craft(Kind::kWrongRkey, 64 * kFollowRings - 1)).bth.psn,
            5000u + 64 * kFollowRings);
  EXPECT_EQ(decoded(c.craft(Kind::kWrongRkey, 64 * kFollowRings)).bth.psn, 5001u);
}

TEST(Hostile, KindNamesRoundTrip) {
  for (Kind k : kAllKinds) EXPECT_EQ(parse_kind(kind_name(k)), k);
  EXPECT_FALSE(parse_kind("nope"));
}

TEST(Hostile, LearnerTakesADataPacketWithRethAndASack) {
  const Learned l = learnt();
  EXPECT_EQ(l.data, data_frame());
  EXPECT_EQ(l.sack, sack_frame());
  const Crafter c(l, kSrc, kDst);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c.responder_qpn(), samples::responder().qpn);
  EXPECT_EQ(c.requester_qpn(), samples::requestor().qpn);
  EXPECT_EQ(c.rkey(), 0xabcdef01u);
  EXPECT_EQ(c.cack_psn(), 990u);
}

TEST(Hostile, CrafterRefusesTemplatesOfTheWrongKind) {
  Learned l = learnt();
  std::swap(l.data, l.sack);
  const Crafter c(l, kSrc, kDst);
  EXPECT_FALSE(c.ok());
  EXPECT_NE(c.error().find("RETH"), std::string::npos);
}

TEST(Hostile, EveryKindIsWellFormedAndChangesOnlyWhatItAttacks) {
  const Crafter c(learnt(), kSrc, kDst);
  ASSERT_TRUE(c.ok()) << c.error();
  const std::vector<std::byte> tframe = data_frame();
  const wire::DecodedFrame tdata = decoded(tframe);
  for (Kind k : kAllKinds) {
    SCOPED_TRACE(std::string(kind_name(k)));
    std::set<std::vector<std::byte>> distinct;
    for (uint64_t i = 0; i < 64; ++i) {
      const std::vector<std::byte> f = c.craft(k, i);
      ASSERT_FALSE(f.empty());
      distinct.insert(f);
      const wire::DecodedFrame d = decoded(f);
      ASSERT_TRUE(d.roce && d.op != nullptr);
      EXPECT_EQ(d.eth.src, kSrc);
      EXPECT_EQ(d.eth.dst, kDst);
      EXPECT_EQ(wire::verify_icrc(d), k != Kind::kBadIcrc);
      const uint32_t ahead = wire::psn_diff(d.bth.psn, tdata.bth.psn);
      switch (k) {
        case Kind::kUnexpEvent: {
          EXPECT_EQ(d.op->kind, wire::PacketKind::kMrcNack);
          EXPECT_EQ(d.bth.dest_qp, samples::requestor().qpn);
          EXPECT_EQ(d.neth.nack_code, static_cast<uint8_t>(wire::NackCode::kUnexpEvent));
          EXPECT_EQ(d.neth.entropy, 0x12345u);
          // never a PSN between the cumulative ACK and what could be outstanding
          const uint32_t off = wire::psn_diff(d.neth.nack_psn, 990);
          EXPECT_TRUE(off >= (1u << 20) || off > wire::kPsnMask - 70000) << off;
          EXPECT_EQ(d.roce_ip6()->src, samples::responder().gid);
          break;
        }
        case Kind::kEvProbe:
        case Kind::kPortStatus:
          EXPECT_EQ(d.op->kind, wire::PacketKind::kMrcEndpointRequest);
          EXPECT_EQ(d.bth.dest_qp, wire::kEndpointOpQpn);
          EXPECT_EQ(d.bth.psn, i);
          EXPECT_EQ(d.erth.op, static_cast<uint8_t>(k == Kind::kEvProbe
                                                        ? wire::EndpointOp::kEvProbe
                                                        : wire::EndpointOp::kPortStatusUpdate));
          EXPECT_EQ(d.roce_ip6()->dst, samples::responder().gid);
          if (k == Kind::kEvProbe) {
            EXPECT_EQ(d.roce_ip6()->src, samples::requestor().gid);
          } else {
            EXPECT_EQ(d.roce_ip6()->src[0], 0xfd);
            EXPECT_EQ(d.roce_ip6()->src[2], 0xde);
            EXPECT_EQ(d.roce_ip6()->src[3], 0xad);
          }
          break;
        case Kind::kPsnAhead:
          EXPECT_GE(ahead, 1u << 21);
          EXPECT_LT(ahead, 1u << 22);
          break;
        case Kind::kOldPsn:
          EXPECT_EQ(d.bth.psn, tdata.bth.psn);
          EXPECT_EQ(d.reth.rkey, tdata.reth.rkey);
          break;
        case Kind::kBadIcrc:
          EXPECT_LT(ahead, 1024u);
          break;
        case Kind::kWrongRkey:
        case Kind::kVaOutside:
          EXPECT_GE(ahead, 1u);
          EXPECT_LE(ahead, 64u);
          EXPECT_EQ(d.reth.rkey != tdata.reth.rkey, k == Kind::kWrongRkey);
          EXPECT_EQ(d.reth.va != tdata.reth.va, k == Kind::kVaOutside);
          EXPECT_EQ(d.payload.size(), tdata.payload.size());
          break;
      }
      if (k != Kind::kPortStatus && k != Kind::kUnexpEvent) {
        EXPECT_EQ(d.roce_ip6()->src, samples::requestor().gid);
      }
    }
    // the source GIDs of port-status updates and the PSNs of the others vary
    EXPECT_EQ(distinct.size(), k == Kind::kOldPsn ? 1u : 64u);
  }
}

}  // namespace
}  // namespace mrc::hostile
