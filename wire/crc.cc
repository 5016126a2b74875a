// CRC-32 (ICRC), the Internet checksum, and the RoCEv2 ICRC / UDP checksum over decoded frames.
#include <bit>
#include <cstring>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "wire/wire.h"

namespace mrc::wire {
namespace {

// Slicing-by-8 tables for the reflected IEEE 802.3 polynomial: the ICRC is computed over every
// byte the checker and the injector touch, so it must run at memory speed.
struct CrcTables {
  uint32_t t[8][256];
  constexpr CrcTables() : t{} {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};
constexpr CrcTables kCrc{};

// Raw register update (no pre/post inversion).
uint32_t crc_update(uint32_t c, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    if constexpr (std::endian::native == std::endian::big) {
      lo = __builtin_bswap32(lo);
      hi = __builtin_bswap32(hi);
    }
    lo ^= c;
    c = kCrc.t[7][lo & 0xFF] ^ kCrc.t[6][(lo >> 8) & 0xFF] ^ kCrc.t[5][(lo >> 16) & 0xFF] ^
        kCrc.t[4][lo >> 24] ^ kCrc.t[3][hi & 0xFF] ^ kCrc.t[2][(hi >> 8) & 0xFF] ^
        kCrc.t[1][(hi >> 16) & 0xFF] ^ kCrc.t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ kCrc.t[0][(c ^ *p++) & 0xFF];
  return c;
}

#if defined(__x86_64__)
// CRC-32 by carry-less multiplication (the folding method of Intel's "Fast CRC Computation for
// Generic Polynomials Using PCLMULQDQ"), for the bit-reflected IEEE polynomial. Folds 64 bytes
// per step with four accumulators, then 16, then reduces 128 -> 64 -> 32 bits (Barrett).
// Works on the raw register; needs len >= 64 and leaves len % 16 bytes to the caller.
// The constants are x^k mod P for the fold distances, and P and floor(x^64 / P), all reflected.
#define MRC_PCLMUL __attribute__((target("pclmul,sse4.1")))
MRC_PCLMUL inline __m128i load16(const uint8_t* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}
// a * k (both 64-bit halves) folded onto the next 16 bytes d.
MRC_PCLMUL inline __m128i fold16(__m128i a, __m128i k, __m128i d) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), d);
}

MRC_PCLMUL uint32_t crc_fold_pclmul(uint32_t c, const uint8_t*& p, size_t& n) {
  const __m128i k_fold64 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
  const __m128i k_fold16 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
  const __m128i k_64to32 = _mm_set_epi64x(0, 0x0163cd6124);
  const __m128i k_barrett = _mm_set_epi64x(0x01f7011641, 0x01db710641);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i a0 = _mm_xor_si128(load16(p), _mm_cvtsi32_si128(static_cast<int>(c)));
  __m128i a1 = load16(p + 16), a2 = load16(p + 32), a3 = load16(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; p += 64, n -= 64) {
    a0 = fold16(a0, k_fold64, load16(p));
    a1 = fold16(a1, k_fold64, load16(p + 16));
    a2 = fold16(a2, k_fold64, load16(p + 32));
    a3 = fold16(a3, k_fold64, load16(p + 48));
  }
  __m128i a = fold16(a0, k_fold16, a1);
  a = fold16(a, k_fold16, a2);
  a = fold16(a, k_fold16, a3);
  for (; n >= 16; p += 16, n -= 16) a = fold16(a, k_fold16, load16(p));
  // 128 -> 64 bits.
  __m128i t = _mm_clmulepi64_si128(a, k_fold16, 0x10);
  a = _mm_xor_si128(_mm_srli_si128(a, 8), t);
  // 64 -> 32 bits.
  t = _mm_srli_si128(a, 4);
  a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k_64to32, 0x00), t);
  // Barrett reduction.
  t = _mm_clmulepi64_si128(_mm_and_si128(a, low32), k_barrett, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), k_barrett, 0x00);
  a = _mm_xor_si128(a, t);
  return static_cast<uint32_t>(_mm_extract_epi32(a, 1));
}

bool have_pclmul() {
  static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return yes;
}
#endif

// The register update every caller uses: folding for long runs where the CPU has it.
uint32_t crc_run(uint32_t c, const uint8_t* p, size_t n) {
#if defined(__x86_64__)
  if (n >= 64 && have_pclmul()) c = crc_fold_pclmul(c, p, n);
#endif
  return crc_update(c, p, n);
}

const uint8_t* u8(Bytes b) { return reinterpret_cast<const uint8_t*>(b.data()); }

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

// Where the RoCE packet of a decoded frame sits: the IP header that carries UDP and the UDP
// datagram (bounded by UDP length). Returns false when the frame has no complete RoCE packet.
struct RocePacket {
  size_t ip_off = 0;
  size_t ip_len = 0;  // header bytes covered by the ICRC (IPv4 IHL*4, IPv6 40)
  bool ipv4 = false;
  size_t udp_off = 0;
  size_t udp_len = 0;
};

bool locate(const DecodedFrame& f, RocePacket& r) {
  if (!f.roce || f.trimmed || !f.has_icrc) return false;
  r.udp_off = f.off_udp;
  r.udp_len = f.udp.length;
  if (f.has_inner_ip6) {
    r.ip_off = f.off_inner;
    r.ip_len = 40;
  } else if (f.l3 == 4) {
    r.ip_off = f.off_l3;
    r.ip_len = static_cast<size_t>(f.ip4.ihl) * 4;
    r.ipv4 = true;
  } else if (f.l3 == 6) {
    r.ip_off = f.off_l3;
    r.ip_len = 40;
  } else {
    return false;
  }
  return r.udp_off + r.udp_len <= f.frame.size() && r.udp_len >= 8 + 12 + kIcrcBytes;
}

}  // namespace

uint32_t crc32(Bytes data, uint32_t crc) {
  return ~crc_run(~crc, u8(data), data.size());
}

uint32_t crc32_portable(Bytes data, uint32_t crc) {
  return ~crc_update(~crc, u8(data), data.size());
}

uint16_t internet_checksum(Bytes data, uint32_t sum) {
  const uint8_t* p = u8(data);
  size_t n = data.size();
  uint64_t acc = sum;
  while (n >= 2) {
    acc += rd16(p);
    p += 2;
    n -= 2;
  }
  if (n) acc += static_cast<uint32_t>(p[0]) << 8;
  while (acc >> 16) acc = (acc & 0xFFFF) + (acc >> 16);
  return static_cast<uint16_t>(~acc & 0xFFFF);
}

std::optional<uint32_t> compute_icrc(const DecodedFrame& f) {
  RocePacket r;
  if (!locate(f, r)) return std::nullopt;
  const uint8_t* frame = u8(f.frame);
  // Masked pseudo-header: 8 bytes of 0xFF stand for the LRH, then IP with its variant fields
  // (those a switch may rewrite: TC/FL/hop limit or TOS/TTL/checksum) set to ones, then UDP
  // with the checksum set to ones, then BTH with the variant byte 4 set to ones.
  uint8_t hdr[8 + 60 + 8 + 12];
  size_t n = 0;
  std::memset(hdr, 0xFF, 8);
  n = 8;
  std::memcpy(hdr + n, frame + r.ip_off, r.ip_len);
  if (r.ipv4) {
    hdr[n + 1] = 0xFF;                       // TOS
    hdr[n + 8] = 0xFF;                       // TTL
    hdr[n + 10] = hdr[n + 11] = 0xFF;        // header checksum
  } else {
    hdr[n + 0] |= 0x0F;                      // low nibble of byte 0 = TC high bits
    hdr[n + 1] = hdr[n + 2] = hdr[n + 3] = 0xFF;  // TC low bits + flow label
    hdr[n + 7] = 0xFF;                       // hop limit
  }
  n += r.ip_len;
  std::memcpy(hdr + n, frame + r.udp_off, 8 + 12);
  hdr[n + 6] = hdr[n + 7] = 0xFF;  // UDP checksum
  hdr[n + 8 + 4] = 0xFF;           // BTH variant byte
  n += 8 + 12;
  uint32_t c = crc_update(0xFFFFFFFFu, hdr, n);
  size_t rest_off = r.udp_off + 8 + 12;
  size_t rest_len = r.udp_len - 8 - 12 - kIcrcBytes;
  c = crc_run(c, frame + rest_off, rest_len);
  return ~c;
}

bool verify_icrc(const DecodedFrame& f) {
  auto c = compute_icrc(f);
  return c && *c == f.icrc;
}

bool fix_icrc(MutBytes frame, const DecodedFrame& f) {
  RocePacket r;
  if (frame.data() != f.frame.data() || !locate(f, r)) return false;
  auto c = compute_icrc(f);
  if (!c) return false;
  auto* p = reinterpret_cast<uint8_t*>(frame.data()) + r.udp_off + r.udp_len - kIcrcBytes;
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(*c >> (8 * i));  // little-endian
  return true;
}

std::optional<uint16_t> compute_udp_checksum(const DecodedFrame& f) {
  if (!f.has_udp || f.off_udp == 0xFFFF) return std::nullopt;
  size_t udp_len = f.udp.length;
  if (f.off_udp + udp_len > f.frame.size() || udp_len < 8) return std::nullopt;
  const uint8_t* frame = u8(f.frame);
  uint32_t sum = 0;
  auto add = [&sum](const uint8_t* p, size_t n) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += rd16(p + i);
  };
  if (f.has_inner_ip6 || f.l3 == 6) {
    const Ipv6Header& ip = f.has_inner_ip6 ? f.inner_ip6 : f.ip6;
    add(ip.src.data(), 16);
    // RFC 8200 8.1: with a routing header, the pseudo-header uses the final destination.
    const Ipv6Addr& dst = (!f.has_inner_ip6 && f.has_srh && f.srh.segment_count > 0)
                              ? f.srh.segments[0]
                              : ip.dst;
    add(dst.data(), 16);
    sum += static_cast<uint32_t>(udp_len);
    sum += kIpProtoUdp;
  } else if (f.l3 == 4) {
    add(f.ip4.src.data(), 4);
    add(f.ip4.dst.data(), 4);
    sum += kIpProtoUdp;
    sum += static_cast<uint32_t>(udp_len);
  } else {
    return std::nullopt;
  }
  // Checksum over the datagram with its checksum field taken as zero.
  uint8_t udp_hdr[8];
  std::memcpy(udp_hdr, frame + f.off_udp, 8);
  udp_hdr[6] = udp_hdr[7] = 0;
  add(udp_hdr, 8);
  uint16_t c = internet_checksum(Bytes(f.frame.data() + f.off_udp + 8, udp_len - 8), sum);
  return c == 0 ? 0xFFFF : c;  // RFC 768: a computed zero is sent as all ones
}

bool fix_udp_checksum(MutBytes frame, const DecodedFrame& f, UdpChecksumPolicy policy) {
  if (!f.has_udp || frame.data() != f.frame.data()) return false;
  auto* p = reinterpret_cast<uint8_t*>(frame.data()) + f.off_udp + 6;
  uint16_t v = 0;
  if (policy == UdpChecksumPolicy::kAsIs) return true;
  if (policy == UdpChecksumPolicy::kCompute) {
    auto c = compute_udp_checksum(f);
    if (!c) return false;
    v = *c;
  }
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
  return true;
}

}  // namespace mrc::wire
