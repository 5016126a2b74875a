#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "wire/wire.h"

namespace mrc::wire {
namespace {

EvBytes from_hex(const std::string& hex) {
  EvBytes b{};
  for (size_t i = 0; i + 1 < hex.size() && i / 2 < b.size(); i += 2)
    b[i / 2] = static_cast<uint8_t>(std::stoul(hex.substr(i, 2), nullptr, 16));
  return b;
}

std::string to_hex(const EvBytes& b, size_t n) {
  std::string s;
  char buf[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", b[i]);
    s += buf;
  }
  return s;
}

EvField fixed(uint32_t width, uint32_t value) {
  return {width, value, 0, 0, 0};
}
EvField masked(uint32_t width, uint32_t init, uint32_t mask, uint32_t min, uint32_t max) {
  return {width, init, min, max, mask};
}

struct Vector {
  const char* name;
  std::vector<uint32_t> format;
  std::vector<EvField> fields;
  const char* compact;
  const char* expanded;  // hex of the first bytes; the rest must be zero
};

// Every expansion vector of the research file (mrc-protocol.md A.3.5), from the OCP reference.
TEST(EvExpansion, MatchesEveryResearchVector) {
  const std::vector<Vector> vectors = {
      {"stev 16+16 full",
       {16, 16},
       {masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff)},
       "f3b04256",
       "f3b04256"},
      {"stev tiers 4+4 bits",
       {16, 16},
       {masked(16, 0x0100, 0x000f, 1, 15), masked(16, 0x0200, 0x000f, 1, 15)},
       "a4",
       "010a0204"},
      {"stev mask 0x0f0f a",
       {16, 16},
       {masked(16, 0x1000, 0x0f0f, 0, 255), masked(16, 0x2000, 0x0f0f, 0, 255)},
       "3312",
       "13032102"},
      {"stev mask 0x0f0f b",
       {16, 16},
       {masked(16, 0x1000, 0x0f0f, 0, 255), masked(16, 0x2000, 0x0f0f, 0, 255)},
       "e33e",
       "1e03230e"},
      {"srv6 4x4-bit uSIDs",
       {32, 16, 16, 16, 16},
       {fixed(32, 0x42424242), masked(4, 0, 0xf, 0, 15), masked(4, 0, 0xf, 0, 15),
        masked(4, 0, 0xf, 0, 15), masked(4, 0, 0xf, 0, 15)},
       "78ba",
       "4242424200070008000b000a"},
      {"srv6 4x16 uSIDs",
       {32, 16, 16, 16, 16},
       {fixed(32, 0xcafecafe), masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff),
        masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff)},
       "43ba48d6a43de086",
       "cafecafe43ba48d6a43de086"},
      {"srv6+srh",
       {32, 16, 16, 16, 16, 16, 16, 32, 16, 16},
       {fixed(32, 0xcafecafe), masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff),
        masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff),
        masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff), fixed(32, 0xdecafbad),
        masked(16, 0, 0xffff, 0, 0xffff), masked(16, 0, 0xffff, 0, 0xffff)},
       "b8a7310e14c80962ae4b9dd6587a4c16",
       "cafecafeb8a7310e14c80962ae4b9dd6decafbad587a4c16"},
  };
  for (const Vector& v : vectors) {
    SCOPED_TRACE(v.name);
    const EvExpandResult r = expand_ev(v.format, v.fields, from_hex(v.compact));
    ASSERT_TRUE(r.ok) << r.error;
    const std::string want = v.expanded;
    EXPECT_EQ(to_hex(r.expanded, want.size() / 2), want);
    for (size_t i = want.size() / 2; i < 32; ++i) EXPECT_EQ(r.expanded[i], 0) << "byte " << i;
  }
}

TEST(EvExpansion, RejectsBitsBeyondTheProfile) {
  const std::vector<uint32_t> format = {16, 16};
  const std::vector<EvField> fields = {masked(16, 0x0100, 0x000f, 1, 15),
                                       masked(16, 0x0200, 0x000f, 1, 15)};
  const EvExpandResult r = expand_ev(format, fields, from_hex("a401"));
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("bit 15"), std::string::npos) << r.error;
}

TEST(EvExpansion, ValidatesProfileRestrictions) {
  const std::vector<uint32_t> format = {16, 16};
  EXPECT_EQ(validate_ev_profile(format, std::vector<EvField>{fixed(16, 1), fixed(16, 2)}), "");
  EXPECT_NE(
      validate_ev_profile(format, std::vector<EvField>{fixed(16, 1), fixed(16, 2), fixed(1, 0)}),
      "");
  EXPECT_NE(validate_ev_profile(format, std::vector<EvField>{fixed(17, 1)}).find("exceeds format"),
            std::string::npos);
  EXPECT_NE(validate_ev_profile(format, std::vector<EvField>{fixed(4, 16)}).find("init_val"),
            std::string::npos);
  EXPECT_NE(
      validate_ev_profile(format, std::vector<EvField>{masked(4, 0, 0x1f, 0, 1)}).find("mask"),
      std::string::npos);
  EXPECT_NE(
      validate_ev_profile(format, std::vector<EvField>{masked(8, 0, 0x3, 0, 4)}).find("max_val"),
      std::string::npos);
  EXPECT_NE(
      validate_ev_profile(std::vector<uint32_t>{200, 100}, std::vector<EvField>{}).find("256"),
      std::string::npos);
}

TEST(EvCarriage, StripesAndInverse) {
  const uint32_t wev = 0x1234abcd;
  EvCarriage lo = carry_wev(EvFormat::kStev, EvStripe::kLowInSport, wev);
  EXPECT_EQ(lo.sport, 0xabcd);
  EXPECT_EQ(lo.flow_label, 0x1234u);
  EvCarriage hi = carry_wev(EvFormat::kStev, EvStripe::kHighInSport, wev);
  EXPECT_EQ(hi.sport, 0x1234);
  EXPECT_EQ(hi.flow_label, 0xabcdu);
  EvCarriage udp = carry_wev(EvFormat::kUdp, EvStripe::kLowInSport, wev);
  EXPECT_EQ(udp.sport, 0xabcd);
  EXPECT_EQ(udp.flow_label, 0u);
  EXPECT_EQ(wev_from_carriage(EvFormat::kStev, EvStripe::kLowInSport, lo.sport, lo.flow_label),
            wev);
  EXPECT_EQ(wev_from_carriage(EvFormat::kSrv6, EvStripe::kHighInSport, hi.sport, hi.flow_label),
            wev);
  EXPECT_EQ(wev_from_carriage(EvFormat::kUdp, EvStripe::kLowInSport, udp.sport, 0), 0xabcdu);
  // Flow-label bits 19:16 never carry EV bits.
  EXPECT_EQ(wev_from_carriage(EvFormat::kStev, EvStripe::kLowInSport, 1, 0xF0002), 0x00020001u);
}

TEST(Usid, ShiftsLikeRfc9800WorkedExample) {
  Ipv6Addr da = *parse_ipv6("fcbb:0:1a01:2b02:3c03::");
  EXPECT_EQ(usid_active(da), 0x1a01u);
  ASSERT_TRUE(usid_shift(da));
  EXPECT_EQ(format_ipv6(da), "fcbb:0:2b02:3c03::");
  EXPECT_EQ(usid_active(da), 0x2b02u);
  ASSERT_TRUE(usid_shift(da));
  EXPECT_EQ(format_ipv6(da), "fcbb:0:3c03::");
  // The argument is now zero: end of the container, no shift.
  EXPECT_FALSE(usid_shift(da));
  EXPECT_EQ(format_ipv6(da), "fcbb:0:3c03::");
}

TEST(Usid, FullContainerShiftsSixTimes) {
  Ipv6Addr da = *parse_ipv6("fcbb:bbbb:1:2:3:4:5:6");
  int shifts = 0;
  while (usid_shift(da)) ++shifts;
  EXPECT_EQ(shifts, 5);
  EXPECT_EQ(format_ipv6(da), "fcbb:bbbb:6::");
}

}  // namespace
}  // namespace mrc::wire
