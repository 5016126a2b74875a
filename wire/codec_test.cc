#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <set>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::wire {
namespace {

using samples::Sample;

std::vector<std::byte> copy(const std::vector<std::byte>& v) {
  return v;
}

DecodedFrame decode_ok(const std::vector<std::byte>& frame, bool verify = true) {
  DecodedFrame f;
  DecodeOptions o;
  o.verify_icrc = verify;
  EXPECT_TRUE(decode_frame(as_bytes(frame), f, o)) << f.error.describe();
  return f;
}

const Sample& find_sample(const std::vector<Sample>& all, const std::string& name) {
  for (const Sample& s : all)
    if (s.name == name) return s;
  ADD_FAILURE() << "no sample " << name;
  return all.front();
}

TEST(Codec, SamplesCoverEveryOpcodeInEveryCarrier) {
  const auto all = samples::all_samples();
  for (samples::Carrier c : samples::all_carriers()) {
    std::set<std::string> have;
    for (const Sample& s : all) {
      if (s.name.rfind(std::string(samples::carrier_name(c)) + "/", 0) != 0) continue;
      DecodedFrame f = decode_ok(s.frame, false);
      if (f.op && f.op->mrc) have.insert(std::string(f.op->name));
    }
    EXPECT_EQ(have.size(), 12u) << samples::carrier_name(c);
  }
}

TEST(Codec, RoundTripIsByteIdenticalForEverySample) {
  for (const Sample& s : samples::all_samples()) {
    SCOPED_TRACE(s.name);
    DecodedFrame f = decode_ok(s.frame, false);
    EXPECT_FALSE(f.error);
    // Everything kept as decoded: must reproduce the input exactly.
    EncodeOptions as_is;
    as_is.fix_lengths = false;
    as_is.fix_ip_checksum = false;
    as_is.udp_checksum = UdpChecksumPolicy::kAsIs;
    as_is.fix_icrc = false;
    as_is.pad_payload = false;
    EXPECT_EQ(encode_frame(f, as_is), s.frame);
    // Everything recomputed: a well-formed sample is its own fixed point.
    EncodeOptions fixed;
    fixed.udp_checksum = f.udp.checksum ? UdpChecksumPolicy::kCompute : UdpChecksumPolicy::kZero;
    EXPECT_EQ(encode_frame(f, fixed), s.frame);
    // And encode -> decode -> encode again.
    auto again = encode_frame(f, fixed);
    DecodedFrame g = decode_ok(again, false);
    EXPECT_EQ(encode_frame(g, fixed), s.frame);
  }
}

TEST(Codec, EveryRoceSampleHasAValidIcrcExceptTrims) {
  int checked = 0;
  for (const Sample& s : samples::all_samples()) {
    SCOPED_TRACE(s.name);
    DecodedFrame f = decode_ok(s.frame);
    if (!f.roce) continue;
    if (f.trimmed) {
      EXPECT_FALSE(f.has_icrc);
      continue;
    }
    EXPECT_TRUE(f.icrc_checked);
    EXPECT_TRUE(f.icrc_ok);
    ++checked;
  }
  EXPECT_GT(checked, 60);
}

TEST(Codec, DecodesStevDataFields) {
  const auto all = samples::all_samples();
  DecodedFrame f = decode_ok(find_sample(all, "stev/WRITE_LAST_IMM").frame);
  ASSERT_TRUE(f.roce);
  EXPECT_EQ(f.l3, 6);
  EXPECT_EQ(f.bth.opcode, 0xC9);
  EXPECT_EQ(f.op->kind, PacketKind::kMrcData);
  EXPECT_EQ(f.bth.dest_qp, samples::responder().qpn);
  EXPECT_EQ(f.bth.psn, 1003u);
  EXPECT_TRUE(f.bth.ack_req);
  EXPECT_TRUE(f.bth.ts);
  EXPECT_FALSE(f.bth.rtx);
  EXPECT_EQ(f.headers, kHdrMeth | kHdrTseth | kHdrReth | kHdrImm);
  EXPECT_EQ(f.meth.msn, 41);
  EXPECT_EQ(f.meth.rqmsn, 3);
  EXPECT_EQ(f.tseth.ts16, 0x1234);
  EXPECT_EQ(f.tseth.ftype, 1);
  EXPECT_EQ(f.reth.va, 0x00007f0000100000ull + 2 * 1024);
  EXPECT_EQ(f.reth.rkey, 0xabc001u);
  EXPECT_EQ(f.immdt.imm, 0xdeadbeefu);
  EXPECT_EQ(f.payload.size(), 1019u);
  EXPECT_EQ(f.pad_bytes, 1);
  EXPECT_EQ(f.bth.pad_count, 1);
  EXPECT_EQ(f.dscp(), mrp0().dscp().trimmable);
  EXPECT_EQ(f.ecn(), 2);
  EXPECT_EQ(f.ev_format(), EvFormat::kStev);
  EXPECT_EQ(wev_from_carriage(EvFormat::kStev, mrp0().ev_stripe(), f.udp.sport, f.ip6.flow_label),
            0x0003a5c1u);
  EXPECT_EQ(std::memcmp(f.payload.data(), samples::pattern(1019, static_cast<uint8_t>(1003)).data(),
                        1019),
            0);
}

TEST(Codec, DecodesSrv6WithAndWithoutSrh) {
  const auto all = samples::all_samples();
  DecodedFrame a = decode_ok(find_sample(all, "srv6/WRITE_FIRST").frame);
  EXPECT_TRUE(a.has_inner_ip6);
  EXPECT_FALSE(a.has_srh);
  EXPECT_EQ(a.ip6.next_header, kIpProtoIpv6);
  EXPECT_EQ(format_ipv6(a.inner_ip6.dst), "fd00:200::1");
  EXPECT_EQ(format_ipv6(a.ip6.dst), "fcbb:0:101:201:301:e01::");
  EXPECT_EQ(a.inner_ip6.flow_label, a.ip6.flow_label);
  EXPECT_EQ(a.ev_format(), EvFormat::kSrv6);
  EXPECT_EQ(a.off_bth, 14 + 88);

  DecodedFrame b = decode_ok(find_sample(all, "srv6-srh/SACK").frame);
  EXPECT_TRUE(b.has_srh);
  EXPECT_TRUE(b.has_inner_ip6);
  EXPECT_EQ(b.ip6.next_header, kIpProtoRouting);
  EXPECT_EQ(b.srh.next_header, kIpProtoIpv6);
  EXPECT_EQ(b.srh.routing_type, 4);
  EXPECT_EQ(b.srh.hdr_ext_len, 2);
  EXPECT_EQ(b.srh.segments_left, 1);
  EXPECT_EQ(b.srh.last_entry, 0);
  EXPECT_EQ(format_ipv6(b.srh.segments[0]), "fcbb:1:e02::");
  EXPECT_EQ(b.off_bth, 14 + 112);
  EXPECT_EQ(b.seth.cack_psn, 1001u);
  EXPECT_EQ(b.seth.sack_offset, 2);
  EXPECT_EQ(b.seth.sack_bitmap, 5u);
  EXPECT_EQ(b.seth.m, 1);
  EXPECT_TRUE(b.seth.psv);
  EXPECT_EQ(b.cc_state.rcvd_bytes, 13u);
  EXPECT_EQ(b.cc_state.ooo_count, 2);
}

TEST(Codec, PacketSizesMatchTheProfile) {
  // Sizes after the Ethernet header, IPv6 STEV, from docs/wire-format.md.
  const auto all = samples::all_samples();
  auto size_of = [&](const char* name) { return find_sample(all, name).frame.size() - 14; };
  EXPECT_EQ(size_of("stev/SACK"), 100u);
  EXPECT_EQ(size_of("stev/NACK"), 84u);
  EXPECT_EQ(size_of("stev/TRANSPORT_ACK"), 68u);
  EXPECT_EQ(size_of("stev/RELIABILITY_PROBE"), 80u);
  EXPECT_EQ(size_of("stev/ENDPOINT_REQUEST/ev-probe"), 80u);
  EXPECT_EQ(size_of("stev/ENDPOINT_RESPONSE"), 100u);
  EXPECT_EQ(size_of("stev/WRITE_MIDDLE"), 40u + 8 + 12 + 4 + 4 + 16 + 1024 + 4);
  EXPECT_EQ(size_of("srv6/SACK"), 140u);
  EXPECT_EQ(size_of("srv6-srh/SACK"), 164u);
  EXPECT_EQ(size_of("stev/WRITE_MIDDLE/trimmed"), 40u + 8 + 20);
}

TEST(Codec, TrimmedPacketDecodesWithoutIcrc) {
  const auto all = samples::all_samples();
  for (const char* name : {"stev/WRITE_MIDDLE/trimmed", "srv6-srh/WRITE_MIDDLE/trimmed-lasthop",
                           "udp4/WRITE_MIDDLE/trimmed"}) {
    SCOPED_TRACE(name);
    DecodedFrame f = decode_ok(find_sample(all, name).frame);
    EXPECT_TRUE(f.trimmed);
    EXPECT_FALSE(f.has_icrc);
    EXPECT_EQ(f.headers, kHdrMeth | kHdrTseth);
    EXPECT_EQ(f.payload.size(), 0u);
    EXPECT_EQ(f.bth.psn, 1007u);
  }
}

TEST(Icrc, Crc32AndSeedMatchTheStandard) {
  const char* check = "123456789";
  EXPECT_EQ(crc32(as_bytes(check, 9)), 0xCBF43926u);
  // The rxe driver seeds with the CRC register after 8 bytes of 0xFF (the masked LRH).
  const uint8_t ff[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(~crc32(as_bytes(ff, 8)), 0xDEBB20E3u);
  EXPECT_EQ(crc32(as_bytes(check, 5), crc32(as_bytes("", 0))), crc32(as_bytes(check, 5)));
  EXPECT_EQ(crc32(as_bytes(check + 4, 5), crc32(as_bytes(check, 4))), 0xCBF43926u);
}

TEST(Icrc, FastCrcEqualsTheTableMethodForEveryLengthAndAlignment) {
  std::vector<uint8_t> buf(4200);
  std::mt19937 rng(7);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len = 0; len < 600; ++len) {
    for (size_t align : {0, 1, 3, 8}) {
      const Bytes b = as_bytes(buf.data() + align, len);
      ASSERT_EQ(crc32(b), crc32_portable(b)) << "len " << len << " align " << align;
      ASSERT_EQ(crc32(b, 0x12345678), crc32_portable(b, 0x12345678)) << "len " << len;
    }
  }
  EXPECT_EQ(crc32(as_bytes(buf.data(), 4200)), crc32_portable(as_bytes(buf.data(), 4200)));
}

TEST(Checksum, InternetChecksumRfc1071Example) {
  const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(internet_checksum(as_bytes(data, sizeof data)), 0x220d);
}

// Variant fields (masked in the ICRC) may change in flight; invariant ones must break it.
TEST(Icrc, MaskedFieldsDoNotMatterOthersDo) {
  const auto all = samples::all_samples();
  struct Case {
    const char* sample;
    const char* what;
    size_t offset;  // from the start of the frame
    bool still_ok;
  };
  // stev: Ethernet 14, IPv6 at 14, UDP at 54, BTH at 62.
  // srv6: outer IPv6 at 14, inner at 54, UDP at 94, BTH at 102.
  const std::vector<Case> cases = {
      {"stev/WRITE_FIRST", "traffic class (DSCP)", 14 + 0, true},
      {"stev/WRITE_FIRST", "flow label", 14 + 3, true},
      {"stev/WRITE_FIRST", "hop limit", 14 + 7, true},
      {"stev/WRITE_FIRST", "UDP checksum", 54 + 6, true},
      {"stev/WRITE_FIRST", "BTH variant byte", 62 + 4, true},
      {"stev/WRITE_FIRST", "source address", 14 + 8, false},
      {"stev/WRITE_FIRST", "UDP source port", 54 + 1, false},
      {"stev/WRITE_FIRST", "BTH PSN", 62 + 11, false},
      {"stev/WRITE_FIRST", "RETH VA", 62 + 12 + 8 + 7, false},
      {"stev/WRITE_FIRST", "payload", 200, false},
      {"udp4/WRITE_FIRST", "IPv4 TOS", 14 + 1, true},
      {"udp4/WRITE_FIRST", "IPv4 TTL", 14 + 8, true},
      {"udp4/WRITE_FIRST", "IPv4 checksum", 14 + 10, true},
      {"udp4/WRITE_FIRST", "IPv4 id", 14 + 4, false},
      {"srv6/WRITE_FIRST", "outer destination (uSID shift)", 14 + 24 + 5, true},
      {"srv6/WRITE_FIRST", "outer hop limit", 14 + 7, true},
      {"srv6/WRITE_FIRST", "inner destination", 54 + 24 + 15, false},
      {"srv6-srh/WRITE_FIRST", "SRH segments left", 54 + 3, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.sample) + ": " + c.what);
    auto frame = copy(find_sample(all, c.sample).frame);
    frame[c.offset] ^= std::byte{0x01};
    DecodedFrame f;
    DecodeOptions o;
    o.verify_icrc = true;
    decode_frame(as_bytes(frame), f, o);
    ASSERT_TRUE(f.icrc_checked);
    EXPECT_EQ(f.icrc_ok, c.still_ok);
  }
}

// The worked example of docs/wire-format.md (section 11.1), byte for byte.
TEST(Icrc, DocumentedProbeExample) {
  const uint8_t expected[80] = {
      0x61, 0x20, 0x12, 0x34, 0x00, 0x28, 0x11, 0x40, 0xfd, 0x00, 0,    0,    0,    0,
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0x01, 0xfd, 0x00, 0,    0,
      0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0x02, 0x56, 0x78,
      0x12, 0xb7, 0x00, 0x28, 0x00, 0x00, 0xde, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
      0x80, 0x00, 0x00, 0x00, 0,    0,    0,    0,    0x00, 0x07, 0x00, 0x00, 0x00, 0x10,
      0x00, 0x11, 0x12, 0x34, 0x00, 0x01, 0x77, 0x16, 0xe8, 0x11};
  FrameSpec s;
  s.l3 = 6;
  s.ip6.dscp = 4;
  s.ip6.ecn = 2;  // ECT(0)
  const EvCarriage ev = carry_wev(EvFormat::kStev, EvStripe::kLowInSport, 0x12345678);
  s.ip6.flow_label = ev.flow_label;
  s.ip6.src = *parse_ipv6("fd00::1");
  s.ip6.dst = *parse_ipv6("fd00::2");
  s.has_udp = true;
  s.udp.sport = ev.sport;
  s.roce = true;
  s.bth.opcode = 0xDE;
  s.bth.dest_qp = 0x11;
  s.bth.ack_req = true;
  s.peth.probe_id = 7;
  s.peth.spdcid = 0x10;
  s.peth.dpdcid = 0x11;
  s.peth.ts16 = 0x1234;
  auto frame = encode_frame(s);
  ASSERT_EQ(frame.size(), 80u);
  EXPECT_EQ(std::memcmp(frame.data(), expected, 80), 0);
  DecodedFrame f;
  DecodeOptions o;
  o.link = LinkType::kRawIp;
  o.verify_icrc = true;
  ASSERT_TRUE(decode_frame(as_bytes(expected, 80), f, o));
  EXPECT_TRUE(f.icrc_ok);
  EXPECT_EQ(f.icrc, 0x11e81677u);
}

TEST(Icrc, FixIcrcRepairsAModifiedFrame) {
  const auto all = samples::all_samples();
  auto frame = copy(find_sample(all, "udp6/WRITE_ONLY").frame);
  frame[frame.size() - 10] ^= std::byte{0xFF};
  DecodedFrame f;
  decode_frame(as_bytes(frame), f);
  EXPECT_FALSE(verify_icrc(f));
  ASSERT_TRUE(fix_icrc(MutBytes(frame.data(), frame.size()), f));
  decode_frame(as_bytes(frame), f);
  EXPECT_TRUE(verify_icrc(f));
}

TEST(Checksum, UdpChecksumComputedAndVerified) {
  const auto all = samples::all_samples();
  auto frame = copy(find_sample(all, "stev/WRITE_ONLY/udp-checksum").frame);
  DecodedFrame f = decode_ok(frame);
  ASSERT_NE(f.udp.checksum, 0);
  EXPECT_EQ(compute_udp_checksum(f), f.udp.checksum);
  // Verifying by summing the whole datagram with its pseudo-header gives zero.
  frame[80] ^= std::byte{0x10};
  DecodedFrame g = decode_ok(frame, false);
  EXPECT_NE(compute_udp_checksum(g), g.udp.checksum);
}

TEST(Checksum, SrhWithoutInnerHeaderUsesTheFinalDestination) {
  // IPv6 + SRH + UDP (SRH inline mode): the pseudo-header destination is Segment List[0].
  FrameSpec s =
      samples::base_spec(samples::Carrier::kUdp6, samples::requestor(), samples::responder(), 7);
  s.has_srh = true;
  s.srh.segment_count = 2;
  s.srh.segments_left = 1;
  s.srh.segments[0] = *parse_ipv6("fd00:200::1");
  s.srh.segments[1] = *parse_ipv6("fcbb:0:101::");
  s.ip6.dst = s.srh.segments[1];
  s.bth.opcode = 0xCA;
  s.bth.ts = true;
  s.payload = Bytes(samples::pattern(33).data(), 33);
  EncodeOptions o;
  o.udp_checksum = UdpChecksumPolicy::kCompute;
  auto frame = encode_frame(s, o);
  DecodedFrame f = decode_ok(frame);
  ASSERT_TRUE(f.has_srh);
  ASSERT_FALSE(f.has_inner_ip6);
  // Independent computation over the pseudo-header with the final destination.
  std::vector<uint8_t> ph;
  ph.insert(ph.end(), f.ip6.src.begin(), f.ip6.src.end());
  ph.insert(ph.end(), f.srh.segments[0].begin(), f.srh.segments[0].end());
  ph.push_back(0);
  ph.push_back(0);
  ph.push_back(static_cast<uint8_t>(f.udp.length >> 8));
  ph.push_back(static_cast<uint8_t>(f.udp.length));
  ph.push_back(0);
  ph.push_back(0);
  ph.push_back(0);
  ph.push_back(17);
  const auto* udp = reinterpret_cast<const uint8_t*>(frame.data()) + f.off_udp;
  ph.insert(ph.end(), udp, udp + f.udp.length);
  EXPECT_EQ(internet_checksum(as_bytes(ph.data(), ph.size())), 0);  // sums to zero when right
  EXPECT_EQ(f.udp.checksum, *compute_udp_checksum(f));
}

TEST(Rewrite, RestampWevKeepsIcrcValid) {
  const auto all = samples::all_samples();
  for (const char* name : {"stev/WRITE_FIRST", "srv6/WRITE_FIRST", "udp4/WRITE_FIRST",
                           "stev/WRITE_ONLY/udp-checksum"}) {
    SCOPED_TRACE(name);
    auto frame = copy(find_sample(all, name).frame);
    DecodedFrame f = decode_ok(frame);
    const EvFormat fmt = f.ev_format() == EvFormat::kUdp ? EvFormat::kUdp
                         : f.has_inner_ip6               ? EvFormat::kSrv6
                                                         : EvFormat::kStev;
    ASSERT_TRUE(restamp_wev(MutBytes(frame.data(), frame.size()), f, fmt, EvStripe::kLowInSport,
                            0x00beef42));
    DecodedFrame g = decode_ok(frame);
    EXPECT_TRUE(g.icrc_ok);
    EXPECT_EQ(g.udp.sport, 0xef42);
    if (fmt != EvFormat::kUdp) {
      EXPECT_EQ(g.ip6.flow_label, 0xbeu);
    }
    if (fmt == EvFormat::kSrv6) {
      EXPECT_EQ(g.inner_ip6.flow_label, 0xbeu);
    }
    if (g.udp.checksum) {
      EXPECT_EQ(compute_udp_checksum(g), g.udp.checksum);
    }
  }
}

TEST(Rewrite, DscpEcnRewriteKeepsChecksumsAndIcrc) {
  const auto all = samples::all_samples();
  for (const char* name : {"udp4/WRITE_FIRST", "srv6/WRITE_FIRST"}) {
    SCOPED_TRACE(name);
    auto frame = copy(find_sample(all, name).frame);
    DecodedFrame f = decode_ok(frame);
    ASSERT_TRUE(rewrite_dscp_ecn(MutBytes(frame.data(), frame.size()), f, uint8_t{20}, uint8_t{3}));
    DecodedFrame g = decode_ok(frame);
    EXPECT_EQ(g.dscp(), 20);
    EXPECT_EQ(g.ecn(), 3);
    EXPECT_TRUE(g.icrc_ok);
    if (g.l3 == 4) {
      EXPECT_EQ(internet_checksum(Bytes(frame.data() + g.off_l3, 20)), 0);
    }
    if (g.has_inner_ip6) {
      EXPECT_EQ(g.inner_ip6.ecn, 3);
    }
    EXPECT_FALSE(g.trimmed);
    // DSCP TRIMMED on a data packet: decoders treat it as trimmed (no ICRC to check).
    ASSERT_TRUE(
        rewrite_dscp_ecn(MutBytes(frame.data(), frame.size()), g, uint8_t{12}, std::nullopt));
    DecodedFrame h = decode_ok(frame);
    EXPECT_TRUE(h.trimmed);
    EXPECT_FALSE(h.has_icrc);
  }
}

TEST(Rewrite, TrimFrameLikeASwitchInEveryCarrier) {
  const auto all = samples::all_samples();
  for (samples::Carrier c : samples::all_carriers()) {
    const std::string name = std::string(samples::carrier_name(c)) + "/WRITE_MIDDLE";
    SCOPED_TRACE(name);
    for (uint8_t dscp : {mrp0().dscp().trimmed, mrp0().dscp().trimmed_lasthop}) {
      auto frame = copy(find_sample(all, name).frame);
      DecodedFrame f = decode_ok(frame);
      std::string err;
      const size_t n = trim_frame(MutBytes(frame.data(), frame.size()), f, dscp, mrp0(), &err);
      ASSERT_GT(n, 0u) << err;
      frame.resize(n);
      DecodedFrame g = decode_ok(frame);
      EXPECT_TRUE(g.trimmed);
      EXPECT_EQ(g.dscp(), dscp);
      if (g.has_inner_ip6) {
        EXPECT_EQ(g.inner_ip6.dscp, dscp);
      }
      EXPECT_EQ(g.udp.length, 8 + mrp0().min_trim_bytes());
      EXPECT_EQ(g.headers, kHdrMeth | kHdrTseth);
      EXPECT_EQ(g.bth.psn, f.bth.psn);
      EXPECT_EQ(g.meth.msn, f.meth.msn);
      if (g.l3 == 4) {
        EXPECT_EQ(internet_checksum(Bytes(frame.data() + g.off_l3, 20)), 0);
      }
      // Once trimmed, never again; control packets are not trimmed at all.
      EXPECT_EQ(trim_frame(MutBytes(frame.data(), frame.size()), g, dscp, mrp0(), &err), 0u);
      EXPECT_EQ(err, "trim: already trimmed");
    }
  }
  auto sack = copy(find_sample(all, "stev/SACK").frame);
  DecodedFrame s = decode_ok(sack);
  EXPECT_EQ(trim_frame(MutBytes(sack.data(), sack.size()), s, 12), 0u);
  // A non-zero UDP checksum is recomputed over the cut datagram.
  auto cs = copy(find_sample(all, "stev/WRITE_ONLY/udp-checksum").frame);
  DecodedFrame d = decode_ok(cs);
  const size_t n = trim_frame(MutBytes(cs.data(), cs.size()), d, 12);
  ASSERT_GT(n, 0u);
  cs.resize(n);
  DecodedFrame e = decode_ok(cs);
  EXPECT_EQ(compute_udp_checksum(e), e.udp.checksum);
}

TEST(Codec, WevOfUsesTheRoceHeader) {
  const auto all = samples::all_samples();
  DecodedFrame f = decode_ok(find_sample(all, "srv6-srh/WRITE_FIRST").frame);
  EXPECT_EQ(wev_of(f, EvFormat::kSrv6, EvStripe::kLowInSport), 0x0003a5c1u);
  DecodedFrame g = decode_ok(find_sample(all, "udp4/WRITE_FIRST").frame);
  EXPECT_EQ(wev_of(g, EvFormat::kUdp, EvStripe::kLowInSport), 0xa5c1u);
}

TEST(Codec, EncodeRejectsBadSpecsWithoutWritingPastTheBuffer) {
  FrameSpec s =
      samples::base_spec(samples::Carrier::kStev, samples::requestor(), samples::responder(), 1);
  s.bth.opcode = 0xCA;
  s.payload = Bytes(samples::pattern(100).data(), 100);
  std::vector<std::byte> small(50, std::byte{0xAA});
  std::string err;
  EXPECT_EQ(encode_frame(s, MutBytes(small.data(), small.size()), {}, mrp0(), &err), 0u);
  EXPECT_EQ(err, "output buffer too small");
  for (auto b : small) EXPECT_EQ(b, std::byte{0xAA});
  s.bth.opcode = 0x42;
  std::vector<std::byte> big(2000);
  EXPECT_EQ(encode_frame(s, MutBytes(big.data(), big.size()), {}, mrp0(), &err), 0u);
  EXPECT_EQ(err, "opcode not in the wire profile");
  s.bth.opcode = 0xCA;
  s.l3 = 4;
  s.has_inner_ip6 = true;
  EXPECT_EQ(encode_frame(s, MutBytes(big.data(), big.size()), {}, mrp0(), &err), 0u);
}

TEST(Codec, RandomBytesNeverCrash) {
  std::mt19937_64 rng(1234);
  std::vector<std::byte> buf(256);
  DecodedFrame f;
  DecodeOptions o;
  o.verify_icrc = true;
  int roce = 0;
  for (int i = 0; i < 200000; ++i) {
    const size_t n = rng() % buf.size();
    for (size_t k = 0; k < n; ++k) buf[k] = static_cast<std::byte>(rng());
    // Steer some frames towards IPv6/UDP/4791 so the deeper decoders are reached.
    if (n > 60 && (i & 1)) {
      buf[12] = std::byte{0x86};
      buf[13] = std::byte{0xDD};
      buf[14] = std::byte{0x60};
      buf[18] = std::byte{0};
      buf[19] = static_cast<std::byte>(n - 54);
      buf[20] = std::byte{17};
      buf[56] = std::byte{0x12};
      buf[57] = std::byte{0xB7};
      buf[58] = std::byte{0};
      buf[59] = static_cast<std::byte>(n - 54);
    }
    decode_frame(Bytes(buf.data(), n), f, o);
    roce += f.roce;
  }
  EXPECT_GT(roce, 0);
}

TEST(Profile, Mrp0WithOtherDscpPlanRecognisesItsTrims) {
  DscpPlan plan;
  plan.trimmed = 30;
  auto profile = make_mrp0(plan, EvStripe::kHighInSport);
  EXPECT_EQ(profile->name(), "MRP0");
  EXPECT_EQ(profile->ev_stripe(), EvStripe::kHighInSport);
  const auto all = samples::all_samples();
  auto frame = copy(find_sample(all, "stev/WRITE_MIDDLE/trimmed").frame);
  DecodedFrame f;
  // Under the custom plan, DSCP 12 is not a trim: the cut packet is a truncation error.
  EXPECT_FALSE(decode_frame(as_bytes(frame), f, {}, *profile));
  EXPECT_EQ(f.error.code, DecodeErrorCode::kTruncated);
  ASSERT_TRUE(rewrite_dscp_ecn(MutBytes(frame.data(), frame.size()), f, uint8_t{30}, std::nullopt));
  EXPECT_TRUE(decode_frame(as_bytes(frame), f, {}, *profile));
  EXPECT_TRUE(f.trimmed);
}

// A second profile plugs in without touching callers: here one that moves WRITE_ONLY to a
// different opcode number, found by name and used by decode_frame.
class RenumberedProfile final : public WireProfile {
 public:
  std::string_view name() const override { return "TEST1"; }
  const OpcodeInfo* opcode_info(uint8_t opcode) const override {
    if (opcode == 0xCA) return nullptr;
    if (opcode == 0xE0) {
      static OpcodeInfo info = *mrp0().opcode_info(0xCA);
      info.opcode = 0xE0;
      return &info;
    }
    return mrp0().opcode_info(opcode);
  }
  uint8_t opcode_of(PacketKind k, MessagePosition p, bool imm) const override {
    const uint8_t op = mrp0().opcode_of(k, p, imm);
    return op == 0xCA ? 0xE0 : op;
  }
  size_t header_size(HeaderBit h) const override { return mrp0().header_size(h); }
  void decode_header(HeaderBit h, Bytes in, DecodedFrame& out) const override {
    mrp0().decode_header(h, in, out);
  }
  void encode_header(HeaderBit h, const DecodedFrame& in, MutBytes out) const override {
    mrp0().encode_header(h, in, out);
  }
  std::span<const HeaderBit> header_order() const override { return mrp0().header_order(); }
  EvStripe ev_stripe() const override { return mrp0().ev_stripe(); }
  const DscpPlan& dscp() const override { return mrp0().dscp(); }
  size_t min_trim_bytes() const override { return mrp0().min_trim_bytes(); }
  const WireParams& params() const override { return mrp0().params(); }
};

TEST(Profile, SecondProfileRegistersAndDecodesByName) {
  register_profile(std::make_unique<RenumberedProfile>());
  const WireProfile* p = find_profile("TEST1");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(find_profile("MRP0"), nullptr);
  EXPECT_EQ(find_profile("nope"), nullptr);
  const auto names = profile_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "TEST1"), names.end());
  FrameSpec s =
      samples::base_spec(samples::Carrier::kStev, samples::requestor(), samples::responder(), 9);
  s.bth.opcode = p->opcode_of(PacketKind::kMrcData, MessagePosition::kOnly, false);
  s.bth.ts = true;
  s.payload = Bytes(samples::pattern(10).data(), 10);
  auto frame = encode_frame(s, {}, *p);
  ASSERT_FALSE(frame.empty());
  DecodedFrame f;
  EXPECT_TRUE(decode_frame(as_bytes(frame), f, {}, *p));
  EXPECT_EQ(f.bth.opcode, 0xE0);
  EXPECT_EQ(f.op->name, "WRITE_ONLY");
  EXPECT_EQ(f.payload.size(), 10u);
  // The same bytes under MRP0: 0xE0 is unknown there.
  EXPECT_FALSE(decode_frame(as_bytes(frame), f));
  EXPECT_EQ(f.error.code, DecodeErrorCode::kUnknownOpcode);
}

// decode_frame() with a DecodeLayout (the checker's reading thread) decodes every byte the way it
// does asking the profile: every sample of three profiles (MRP0, one with every open choice
// changed, one with an opcode renumbered), every prefix of each, and each with one of its first
// 128 bytes changed, compared byte for byte (the two frames start zeroed). A layout built from
// another profile is ignored.
TEST(DecodeLayout, DecodesEveryFrameAsTheProfileDoes) {
  WireParams changed;
  changed.name = "changed";
  changed.udp_ports = {4971, 4791, 5000};
  changed.eeth_op_shift = 2;
  changed.eeth_sva_bit = 1;
  changed.trim_bytes = 32;
  changed.dscp.trimmed = 13;
  changed.dscp.trimmed_lasthop = 17;
  const auto changed_profile = make_profile(changed);
  const RenumberedProfile renumbered;
  const DecodeLayout mrp0_layout(mrp0());
  size_t compared = 0, roce = 0, tseth = 0, errors = 0;
  for (const WireProfile* profile :
       {&mrp0(), static_cast<const WireProfile*>(changed_profile.get()),
        static_cast<const WireProfile*>(&renumbered)}) {
    const DecodeLayout layout(*profile);
    ASSERT_TRUE(layout.usable);
    auto same = [&](Bytes frame, LinkType link, const DecodeLayout& l, const std::string& what) {
      DecodedFrame a, b;
      std::memset(static_cast<void*>(&a), 0, sizeof a);
      std::memset(static_cast<void*>(&b), 0, sizeof b);
      DecodeOptions o;
      o.link = link;
      o.verify_icrc = true;
      const bool ok_a = decode_frame(frame, a, o, *profile);
      o.layout = &l;
      const bool ok_b = decode_frame(frame, b, o, *profile);
      ++compared;
      roce += a.roce;
      tseth += a.has(kHdrTseth);
      errors += !ok_a;
      EXPECT_EQ(ok_a, ok_b) << what;
      EXPECT_EQ(a.headers, b.headers) << what;
      EXPECT_EQ(a.error.describe(), b.error.describe()) << what;
      EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << what;
    };
    for (const Sample& s : samples::all_samples(*profile)) {
      const LinkType link = LinkType::kEthernet;
      const std::string name = std::string(profile->name()) + " " + s.name;
      same(as_bytes(s.frame), link, layout, name);
      if (profile != &mrp0()) same(as_bytes(s.frame), link, mrp0_layout, name + ", MRP0's layout");
      for (size_t n = 0; n < s.frame.size(); ++n)
        same(Bytes(s.frame.data(), n), link, layout, name + " cut to " + std::to_string(n));
      std::vector<std::byte> m = s.frame;
      for (size_t i = 0; i < std::min<size_t>(m.size(), 128); ++i) {
        for (uint8_t x : {0x01, 0x10, 0x80, 0xFF}) {
          m[i] ^= std::byte{x};
          same(as_bytes(m), link, layout,
               name + " byte " + std::to_string(i) + " ^ " + std::to_string(x));
          m[i] ^= std::byte{x};
        }
      }
    }
  }
  // The frames reached the layout's every lookup: RoCE ports, headers with and without TSETH,
  // and decode errors.
  EXPECT_GT(compared, 100000u);
  EXPECT_GT(roce, 10000u);
  EXPECT_GT(tseth, 1000u);
  EXPECT_GT(errors, 10000u);
}

}  // namespace
}  // namespace mrc::wire
