// Table-driven malformed input: each case states the error the decoder must report.
#include <gtest/gtest.h>

#include <functional>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::wire {
namespace {

using Frame = std::vector<std::byte>;

Frame sample(const std::string& name) {
  for (const auto& s : samples::all_samples())
    if (s.name == name) return s.frame;
  ADD_FAILURE() << "no sample " << name;
  return {};
}

void put16(Frame& f, size_t off, uint16_t v) {
  f[off] = static_cast<std::byte>(v >> 8);
  f[off + 1] = static_cast<std::byte>(v);
}

// Cuts the UDP payload of a plain IPv6 (udp6/stev) frame to n bytes and fixes IP/UDP lengths,
// so that decoding reaches the IB headers and finds them short.
Frame cut_udp_payload(Frame f, size_t n) {
  const size_t udp = 14 + 40;
  f.resize(udp + 8 + n);
  put16(f, 14 + 4, static_cast<uint16_t>(8 + n));
  put16(f, udp + 4, static_cast<uint16_t>(8 + n));
  return f;
}

struct Case {
  std::string name;
  std::function<Frame()> make;
  DecodeErrorCode code;
  Layer layer;
  std::string message;  // substring of describe()
};

TEST(Malformed, EachCaseReportsItsError) {
  const std::vector<Case> cases = {
      {"empty frame", [] { return Frame{}; }, DecodeErrorCode::kTruncated, Layer::kEthernet,
       "truncated Ethernet at offset 0: need 14 bytes, have 0"},
      {"short Ethernet", [] { return Frame(10); }, DecodeErrorCode::kTruncated, Layer::kEthernet,
       "have 10"},
      {"VLAN tag cut",
       [] {
         auto f = sample("stev/WRITE_ONLY/vlan");
         f.resize(16);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kVlan, "truncated VLAN at offset 14"},
      {"IPv4 header cut",
       [] {
         auto f = sample("udp4/WRITE_FIRST");
         f.resize(30);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kIpv4,
       "truncated IPv4 at offset 14: need 20 bytes, have 16"},
      {"IPv4 version 5",
       [] {
         auto f = sample("udp4/WRITE_FIRST");
         f[14] = std::byte{0x55};
         return f;
       },
       DecodeErrorCode::kBadVersion, Layer::kIpv4, "bad version 5"},
      {"IPv4 IHL 3",
       [] {
         auto f = sample("udp4/WRITE_FIRST");
         f[14] = std::byte{0x43};
         return f;
       },
       DecodeErrorCode::kBadHeaderLength, Layer::kIpv4, "bad header length 3"},
      {"IPv4 total length beyond frame",
       [] {
         auto f = sample("udp4/WRITE_FIRST");
         put16(f, 16, 9000);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kIpv4, "need 9000 bytes"},
      {"IPv4 total length below header",
       [] {
         auto f = sample("udp4/WRITE_FIRST");
         put16(f, 16, 12);
         return f;
       },
       DecodeErrorCode::kBadLength, Layer::kIpv4, "bad length in IPv4"},
      {"IPv6 header cut",
       [] {
         auto f = sample("stev/SACK");
         f.resize(40);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kIpv6, "need 40 bytes, have 26"},
      {"IPv6 version 4 in an IPv6 frame",
       [] {
         auto f = sample("stev/SACK");
         f[14] = std::byte{0x40};
         return f;
       },
       DecodeErrorCode::kBadVersion, Layer::kIpv6, "bad version 4"},
      {"IPv6 payload length beyond frame",
       [] {
         auto f = sample("stev/SACK");
         put16(f, 18, 500);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kIpv6, "need 540 bytes"},
      {"SRH cut",
       [] {
         auto f = sample("srv6-srh/SACK");
         put16(f, 18, 4);
         f.resize(58);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kSrh, "truncated SRH at offset 54"},
      {"SRH with 9 segments",
       [] {
         auto f = sample("srv6-srh/SACK");
         f[54 + 4] = std::byte{8};
         return f;
       },
       DecodeErrorCode::kTooManySegments, Layer::kSrh, "SRH with 9 segments"},
      {"SRH last entry beyond its length",
       [] {
         auto f = sample("srv6-srh/SACK");
         f[54 + 4] = std::byte{1};
         return f;
       },
       DecodeErrorCode::kBadHeaderLength, Layer::kSrh, "bad header length 2 in SRH"},
      {"inner IPv6 version 0",
       [] {
         auto f = sample("srv6/SACK");
         f[54] = std::byte{0x00};
         return f;
       },
       DecodeErrorCode::kBadVersion, Layer::kInnerIpv6, "bad version 0 in inner IPv6 at offset 54"},
      {"inner IPv6 payload length disagrees",
       [] {
         auto f = sample("srv6/SACK");
         put16(f, 58, 10);
         return f;
       },
       DecodeErrorCode::kBadLength, Layer::kInnerIpv6, "bad length in inner IPv6"},
      {"UDP header cut",
       [] {
         auto f = sample("stev/SACK");
         f.resize(58);
         put16(f, 18, 4);
         return f;
       },
       DecodeErrorCode::kTruncated, Layer::kUdp,
       "truncated UDP at offset 54: need 8 bytes, have 4"},
      {"UDP length disagrees with IP",
       [] {
         auto f = sample("stev/SACK");
         put16(f, 58, 30);
         return f;
       },
       DecodeErrorCode::kBadLength, Layer::kUdp, "bad length in UDP"},
      {"BTH cut", [] { return cut_udp_payload(sample("stev/SACK"), 7); },
       DecodeErrorCode::kTruncated, Layer::kBth,
       "truncated BTH at offset 62: need 12 bytes, have 7"},
      {"unknown opcode",
       [] {
         auto f = sample("stev/SACK");
         f[62] = std::byte{0x42};
         return f;
       },
       DecodeErrorCode::kUnknownOpcode, Layer::kBth, "unknown opcode 0x42 in BTH at offset 62"},
      {"no room for ICRC", [] { return cut_udp_payload(sample("stev/TRANSPORT_ACK"), 14); },
       DecodeErrorCode::kTruncated, Layer::kIcrc, "truncated ICRC"},
      {"RETH cut (not a trim)",
       [] { return cut_udp_payload(sample("stev/WRITE_ONLY"), 12 + 8 + 5 + 4); },
       DecodeErrorCode::kTruncated, Layer::kReth,
       "truncated RETH at offset 82: need 16 bytes, have 5"},
      {"SETH cut", [] { return cut_udp_payload(sample("stev/SACK"), 12 + 20 + 4); },
       DecodeErrorCode::kTruncated, Layer::kSeth, "truncated SETH"},
      {"CC_STATE cut", [] { return cut_udp_payload(sample("stev/SACK"), 12 + 28 + 3 + 4); },
       DecodeErrorCode::kTruncated, Layer::kCcState, "truncated CC_STATE"},
      {"NETH cut", [] { return cut_udp_payload(sample("stev/NACK"), 12 + 19 + 4); },
       DecodeErrorCode::kTruncated, Layer::kNeth, "truncated NETH"},
      {"PETH cut", [] { return cut_udp_payload(sample("stev/RELIABILITY_PROBE"), 12 + 2 + 4); },
       DecodeErrorCode::kTruncated, Layer::kPeth, "truncated PETH"},
      {"EETH cut", [] { return cut_udp_payload(sample("stev/ENDPOINT_RESPONSE"), 12 + 35 + 4); },
       DecodeErrorCode::kTruncated, Layer::kEeth, "truncated EETH"},
      {"pad count larger than payload",
       [] {
         auto f = sample("stev/WRITE_ONLY/zero-length");
         f[63] = static_cast<std::byte>(static_cast<uint8_t>(f[63]) | 0x30);
         return f;
       },
       DecodeErrorCode::kBadPad, Layer::kPayload, "pad count 3 exceeds the payload"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Frame frame = c.make();
    DecodedFrame f;
    DecodeOptions o;
    o.verify_icrc = true;
    EXPECT_FALSE(decode_frame(as_bytes(frame), f, o));
    EXPECT_EQ(f.error.code, c.code) << f.error.describe();
    EXPECT_EQ(f.error.layer, c.layer) << f.error.describe();
    EXPECT_NE(f.error.describe().find(c.message), std::string::npos) << f.error.describe();
  }
}

TEST(Malformed, NonRoceFramesAreListedNotErrors) {
  for (const char* name : {"arp", "udp6/not-roce"}) {
    SCOPED_TRACE(name);
    const Frame frame = sample(name);
    DecodedFrame f;
    EXPECT_TRUE(decode_frame(as_bytes(frame), f));
    EXPECT_FALSE(f.roce);
    EXPECT_FALSE(f.error);
  }
}

TEST(Malformed, IpFragmentIsNotDecodedAsUdp) {
  auto f = sample("udp4/WRITE_FIRST");
  put16(f, 14 + 6, 0x2000);  // more fragments
  DecodedFrame d;
  EXPECT_TRUE(decode_frame(as_bytes(f), d));
  EXPECT_FALSE(d.has_udp);
}

}  // namespace
}  // namespace mrc::wire
