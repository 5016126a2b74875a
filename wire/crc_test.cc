// The CRC-32 methods (table, PCLMULQDQ, VPCLMULQDQ) agree with each other and with the standard,
// on every length and alignment, and the ICRC they give equals one computed the plain way (the
// masked pseudo-header and the payload in one buffer, through the table method).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::wire {
namespace {

const CrcPath kAllPaths[] = {CrcPath::kTable, CrcPath::kPclmul, CrcPath::kVpclmul512};

const char* name_of(CrcPath p) {
  switch (p) {
    case CrcPath::kTable:
      return "table";
    case CrcPath::kPclmul:
      return "pclmul";
    case CrcPath::kVpclmul512:
      return "vpclmul512";
  }
  return "?";
}

// Restores the method crc32()/compute_icrc() use when a test that forced one ends.
class PathGuard {
 public:
  PathGuard() : saved_(crc_path()) {}
  ~PathGuard() { set_crc_path(saved_); }

 private:
  CrcPath saved_;
};

TEST(CrcPaths, TheTableIsAlwaysThereAndTheChosenPathIsSupported) {
  EXPECT_TRUE(crc_path_supported(CrcPath::kTable));
  EXPECT_TRUE(crc_path_supported(crc_path()));
  const CrcCalibration& cal = crc_calibration();
  EXPECT_TRUE(cal.supported[static_cast<size_t>(cal.chosen)]);
  for (CrcPath p : kAllPaths)
    EXPECT_EQ(cal.supported[static_cast<size_t>(p)], crc_path_supported(p)) << name_of(p);
}

// The method is chosen by measured speed, not by CPUID: the chosen one is never slower than
// another the CPU has by more than the noise allowance (a wider one must win by 5 %).
TEST(CrcPaths, CalibrationChoosesTheFastestMethod) {
  const CrcCalibration cal = calibrate_crc_paths(nullptr);
  EXPECT_STREQ(cal.how, "calibrated");
  const double chosen = cal.ns_per_kib[static_cast<size_t>(cal.chosen)];
  EXPECT_GT(chosen, 0);
  for (CrcPath p : kAllPaths) {
    const auto i = static_cast<size_t>(p);
    if (!cal.supported[i]) {
      EXPECT_EQ(cal.ns_per_kib[i], 0) << name_of(p);
      continue;
    }
    EXPECT_GT(cal.ns_per_kib[i], 0) << name_of(p);
    if (static_cast<int>(p) < static_cast<int>(cal.chosen)) {
      EXPECT_LT(chosen, 0.95 * cal.ns_per_kib[i]) << name_of(p) << " was faster";
    } else if (p != cal.chosen) {
      EXPECT_GE(cal.ns_per_kib[i], 0.95 * chosen) << name_of(p) << " was faster by 5 %";
    }
  }
}

TEST(CrcPaths, AnEnvironmentNameForcesAMethodTheCpuHas) {
  for (CrcPath p : kAllPaths) {
    const CrcCalibration cal = calibrate_crc_paths(crc_path_name(p));
    if (crc_path_supported(p)) {
      EXPECT_EQ(cal.chosen, p) << name_of(p);
      EXPECT_STREQ(cal.how, "MRC_CRC_PATH");
    } else {
      EXPECT_NE(cal.chosen, p) << name_of(p);
      EXPECT_NE(std::string(cal.how).find("ignored"), std::string::npos);
    }
  }
  const CrcCalibration bogus = calibrate_crc_paths("avx1024");
  EXPECT_TRUE(crc_path_supported(bogus.chosen));
  EXPECT_NE(std::string(bogus.how).find("ignored"), std::string::npos) << bogus.how;
  EXPECT_STREQ(crc_path_name(CrcPath::kVpclmul512), "vpclmul512");
}

TEST(CrcPaths, EveryPathGivesTheCheckValue) {
  const char* check = "123456789";
  for (CrcPath p : kAllPaths) {
    if (!crc_path_supported(p)) continue;
    EXPECT_EQ(crc32_with(p, as_bytes(check, 9)), 0xCBF43926u) << name_of(p);
    // Long enough for every folding loop: 1000 x "123456789" (zlib's value).
    std::string s;
    for (int i = 0; i < 1000; ++i) s += check;
    EXPECT_EQ(crc32_with(p, as_bytes(s.data(), s.size())), 0x407589CFu) << name_of(p);
  }
}

TEST(CrcPaths, AllPathsAgreeOnRandomLengthsAlignmentsAndSeeds) {
  std::vector<uint8_t> buf(9000);
  std::mt19937_64 rng(11);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  auto check = [&](size_t off, size_t len, uint32_t seed) {
    const Bytes b = as_bytes(buf.data() + off, len);
    const uint32_t want = crc32_portable(b, seed);
    for (CrcPath p : kAllPaths) {
      if (!crc_path_supported(p)) continue;
      ASSERT_EQ(crc32_with(p, b, seed), want)
          << name_of(p) << " len " << len << " off " << off << " seed " << seed;
    }
  };
  // Every length up to 1100 (all loop and tail combinations of each path) at a few alignments,
  for (size_t len = 0; len <= 1100; ++len)
    for (size_t off : {0, 1, 7, 13, 32, 63}) check(off, len, off == 0 ? 0 : 0x9E3779B9u);
  // then random lengths, offsets and seeds up to jumbo frames.
  for (int i = 0; i < 3000; ++i) {
    const size_t off = rng() % 64, len = rng() % 8900;
    check(off, len, static_cast<uint32_t>(rng()));
  }
}

TEST(CrcPaths, ChainingEqualsOneRun) {
  std::vector<uint8_t> buf(3000);
  std::mt19937 rng(5);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (CrcPath p : kAllPaths) {
    if (!crc_path_supported(p)) continue;
    for (size_t cut : {0, 1, 15, 16, 63, 64, 65, 255, 256, 257, 1500, 3000}) {
      const uint32_t first = crc32_with(p, as_bytes(buf.data(), cut));
      EXPECT_EQ(crc32_with(p, as_bytes(buf.data() + cut, buf.size() - cut), first),
                crc32_portable(as_bytes(buf.data(), buf.size())))
          << name_of(p) << " cut " << cut;
    }
  }
}

TEST(CrcPaths, SetCrcPathRefusesWhatTheCpuLacksAndChangesNothing) {
  PathGuard guard;
  const CrcPath before = crc_path();
  for (CrcPath p : kAllPaths) {
    if (crc_path_supported(p)) {
      EXPECT_TRUE(set_crc_path(p));
      EXPECT_EQ(crc_path(), p);
      ASSERT_TRUE(set_crc_path(before));
    } else {
      EXPECT_FALSE(set_crc_path(p));
      EXPECT_EQ(crc_path(), before);
    }
  }
}

// The ICRC the plain way: the masked pseudo-header and the rest of the packet in one buffer.
uint32_t plain_icrc(const DecodedFrame& f) {
  const auto* frame = reinterpret_cast<const uint8_t*>(f.frame.data());
  size_t ip_off, ip_len;
  bool v4 = false;
  if (f.has_inner_ip6) {
    ip_off = f.off_inner;
    ip_len = 40;
  } else if (f.l3 == 4) {
    ip_off = f.off_l3;
    ip_len = static_cast<size_t>(f.ip4.ihl) * 4;
    v4 = true;
  } else {
    ip_off = f.off_l3;
    ip_len = 40;
  }
  std::vector<uint8_t> m(8, 0xFF);
  m.insert(m.end(), frame + ip_off, frame + ip_off + ip_len);
  uint8_t* ip = m.data() + 8;
  if (v4) {
    ip[1] = ip[8] = ip[10] = ip[11] = 0xFF;
  } else {
    ip[0] |= 0x0F;
    ip[1] = ip[2] = ip[3] = ip[7] = 0xFF;
  }
  const size_t udp = m.size();
  m.insert(m.end(), frame + f.off_udp, frame + f.off_udp + f.udp.length - kIcrcBytes);
  m[udp + 6] = m[udp + 7] = 0xFF;
  m[udp + 8 + 4] = 0xFF;
  return crc32_portable(as_bytes(m.data(), m.size()));
}

// An RDMA WRITE Only of `len` payload bytes (pattern `seed`) in carrier `c`, PSN = len.
std::vector<std::byte> write_only(samples::Carrier c, size_t len, uint8_t seed) {
  FrameSpec s = samples::base_spec(c, samples::requestor(), samples::responder(), 0x1234);
  s.bth.opcode = 0x0A;  // RDMA WRITE Only
  s.bth.dest_qp = samples::responder().qpn;
  s.bth.psn = static_cast<uint32_t>(len);
  s.reth = {0x1000, 0x77, static_cast<uint32_t>(len)};
  s.payload = Bytes(samples::pattern(len, seed).data(), len);
  return encode_frame(s);
}

TEST(CrcPaths, IcrcOfEverySampleAndPayloadLengthIsTheSameOnEveryPath) {
  PathGuard guard;
  int checked = 0;
  auto check_frame = [&](const std::vector<std::byte>& bytes, const std::string& what) {
    DecodedFrame f;
    DecodeOptions o;
    if (!decode_frame(as_bytes(bytes), f, o) || !f.roce || f.trimmed || !f.has_icrc) return;
    const uint32_t want = plain_icrc(f);
    for (CrcPath p : kAllPaths) {
      if (!set_crc_path(p)) continue;
      const auto got = compute_icrc(f);
      ASSERT_TRUE(got.has_value()) << what;
      ASSERT_EQ(*got, want) << name_of(p) << " " << what;
    }
    ++checked;
  };
  for (const samples::Sample& s : samples::all_samples()) check_frame(s.frame, s.name);
  // Payload lengths across every tail and loop boundary, in each carrier (IPv4 and IPv6 headers,
  // inner IPv6 for SRv6: pseudo-headers of different lengths).
  for (samples::Carrier c : samples::all_carriers()) {
    for (size_t len = 0; len <= 600; len += (len < 300 ? 1 : 37)) {
      check_frame(write_only(c, len, static_cast<uint8_t>(len)),
                  std::string(samples::carrier_name(c)) + " payload " + std::to_string(len));
    }
  }
  EXPECT_GT(checked, 1500);
}

// compute_icrcs() over groups of 1..9 frames of mixed carriers and payload lengths (every 64-byte
// round and 16-byte tail, packets of different lengths in one group, frames with no RoCE packet
// among them) equals compute_icrc() of each frame, which the test above holds to the plain ICRC,
// on every method the CPU has.
TEST(CrcPaths, IcrcOfAGroupOfFramesEqualsEachFramesIcrc) {
  PathGuard guard;
  std::vector<std::vector<std::byte>> bytes;
  for (const samples::Sample& s : samples::all_samples()) bytes.push_back(s.frame);
  for (samples::Carrier c : samples::all_carriers()) {
    for (size_t len = 0; len <= 400; len += (len < 200 ? 1 : 23)) {
      bytes.push_back(write_only(c, len, static_cast<uint8_t>(len * 7)));
    }
  }
  std::vector<DecodedFrame> frames(bytes.size());
  size_t roce = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    DecodeOptions o;
    decode_frame(as_bytes(bytes[i]), frames[i], o);
    roce += compute_icrc(frames[i]).has_value();
  }
  ASSERT_GT(roce, 1000u);
  ASSERT_LT(roce, bytes.size());  // some frames have no RoCE packet
  // In the order made (neighbours of about one length) and shuffled (any lengths together).
  std::vector<size_t> order(frames.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<size_t> shuffled = order;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(19));
  int checked = 0;
  for (CrcPath p : kAllPaths) {
    if (!set_crc_path(p)) continue;
    for (const std::vector<size_t>* ord : {&order, &shuffled}) {
      for (size_t group = 1; group <= 9; ++group) {
        for (size_t at = 0; at < ord->size(); at += group) {
          const size_t k = std::min(group, ord->size() - at);
          const DecodedFrame* fs[9];
          std::optional<uint32_t> got[9];
          for (size_t i = 0; i < k; ++i) fs[i] = &frames[(*ord)[at + i]];
          compute_icrcs(fs, k, got);
          for (size_t i = 0; i < k; ++i) {
            ASSERT_EQ(got[i], compute_icrc(*fs[i]))
                << name_of(p) << " group of " << k << ", frame " << (*ord)[at + i] << " ("
                << fs[i]->frame.size() << " bytes), place " << i;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 30000);
}

}  // namespace
}  // namespace mrc::wire
