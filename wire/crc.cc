// CRC-32 (ICRC), the Internet checksum, and the RoCEv2 ICRC / UDP checksum over decoded frames.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
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
// Generic Polynomials Using PCLMULQDQ"), for the bit-reflected IEEE polynomial. A 128-bit
// accumulator holds a polynomial congruent to the message so far; fold16 multiplies it by x^128
// (mod P) and adds the next 16 bytes. Wide loops keep four independent accumulators, 16 bytes
// each (PCLMULQDQ) or 64 bytes each (VPCLMULQDQ on 512-bit registers), so that the multiplier's
// latency is hidden. A final partial block is handled with byte shuffles, and 128 bits are
// reduced to 32 by folding and a Barrett reduction.
//
// The fold constants are (x^(D+32) mod P, x^(D-32) mod P), bit-reflected and shifted left by one,
// for a fold distance of D bits; k_64to32 is x^64 mod P and k_barrett is (floor(x^64 / P), P).
//
// Every routine works on a raw register starting from zero over the message `head` || `p`: head
// is a multiple of 64 bytes (at least 64) with the initial register value already XORed into it,
// so that the ICRC's masked pseudo-header (built in a small buffer) and the packet's payload are
// one stream with a single final reduction. Leading zero bytes do not change a zero register,
// which lets the head be padded at the front: to whole 512-bit registers, so that the head costs
// one or two folds; `skip` (a multiple of 16) says how many of the leading bytes are that
// padding, which the 128-bit path and the table skip.
#define MRC_PCLMUL __attribute__((target("pclmul,sse4.1")))
#define MRC_VPCLMUL __attribute__((target("pclmul,sse4.1,avx512f,vpclmulqdq")))

constexpr uint64_t kFold2048Lo = 0x011542778a, kFold2048Hi = 0x01322d1430;
constexpr uint64_t kFold512Lo = 0x0154442bd4, kFold512Hi = 0x01c6e41596;
constexpr uint64_t kFold384Lo = 0x003db1ecdc, kFold384Hi = 0x0174359406;
constexpr uint64_t kFold256Lo = 0x00f1da05aa, kFold256Hi = 0x015a546366;
constexpr uint64_t kFold128Lo = 0x01751997d0, kFold128Hi = 0x00ccaa009e;
constexpr uint64_t kFold64to32 = 0x0163cd6124;
constexpr uint64_t kBarrettMu = 0x01f7011641, kBarrettPoly = 0x01db710641;

// pshufb controls: 16 zeroing bytes (high bit set), the identity, 16 zeroing bytes. The 16 bytes
// at offset 16 - s shift a register left (towards higher lanes) by s bytes; at 16 + s, right.
alignas(16) constexpr uint8_t kShuffle[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0,    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   11,   12,   13,   14,   15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};

MRC_PCLMUL inline __m128i load16(const uint8_t* q) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q));
}
// a * x^D folded onto the next bytes d (k holds the constants for the distance D).
MRC_PCLMUL inline __m128i fold16(__m128i a, __m128i k, __m128i d) {
  return _mm_xor_si128(
      _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11)), d);
}

// The 16-byte steps, the final n % 16 bytes and the reduction to 32 bits. `p` holds n bytes and
// at least 16 bytes of the message precede it (in the head when p - begin + n < 16, where
// `begin` is where the payload starts).
MRC_PCLMUL uint32_t finish128(__m128i a, const uint8_t* begin, const uint8_t* p, size_t n) {
  const __m128i k128 = _mm_set_epi64x(kFold128Hi, kFold128Lo);
  for (; n >= 16; p += 16, n -= 16) a = fold16(a, k128, load16(p));
  if (n > 0) {
    // The message is a (16 bytes) then t (n bytes): split it into the first n bytes of a, whose
    // distance to the end is 128 bits, and the last 16 bytes (the rest of a, then t).
    // t: the 16 bytes that end the message (only its last n lanes are used). An overlapping
    // load when the payload is that long; else through a buffer (a store-forwarding stall).
    __m128i t;
    if (static_cast<size_t>(p - begin) + n >= 16) {
      t = load16(p + n - 16);
    } else {
      alignas(16) uint8_t buf[16] = {};
      std::memcpy(buf + 16 - n, p, n);
      t = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
    }
    const __m128i shl = load16(kShuffle + n);        // left by 16 - n bytes
    const __m128i shr = load16(kShuffle + 16 + n);   // right by n bytes
    const __m128i first = _mm_shuffle_epi8(a, shl);  // a's first n bytes, at the top
    const __m128i last = _mm_blendv_epi8(_mm_shuffle_epi8(a, shr), t, shr);
    a = fold16(first, k128, last);
  }
  // 128 -> 64 bits.
  const __m128i k_fold16 = _mm_set_epi64x(kFold128Hi, kFold128Lo);
  const __m128i k_64to32 = _mm_set_epi64x(0, kFold64to32);
  const __m128i k_barrett = _mm_set_epi64x(kBarrettMu, kBarrettPoly);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  __m128i x = _mm_clmulepi64_si128(a, k_fold16, 0x10);
  a = _mm_xor_si128(_mm_srli_si128(a, 8), x);
  // 64 -> 32 bits.
  x = _mm_srli_si128(a, 4);
  a = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), k_64to32, 0x00), x);
  // Barrett reduction.
  x = _mm_clmulepi64_si128(_mm_and_si128(a, low32), k_barrett, 0x10);
  x = _mm_clmulepi64_si128(_mm_and_si128(x, low32), k_barrett, 0x00);
  a = _mm_xor_si128(a, x);
  return static_cast<uint32_t>(_mm_extract_epi32(a, 1));
}

MRC_PCLMUL uint32_t crc_stream_pclmul(const uint8_t* head, size_t head_len, size_t skip,
                                      const uint8_t* p, size_t n) {
  const uint8_t* const begin = p;
  const __m128i k_head = _mm_set_epi64x(kFold128Hi, kFold128Lo);
  __m128i a = load16(head + skip);
  for (size_t i = skip + 16; i < head_len; i += 16) a = fold16(a, k_head, load16(head + i));
  if (n >= 64) {
    const __m128i k128 = _mm_set_epi64x(kFold128Hi, kFold128Lo);
    const __m128i k512 = _mm_set_epi64x(kFold512Hi, kFold512Lo);
    __m128i a0 = fold16(a, k128, load16(p));
    __m128i a1 = load16(p + 16), a2 = load16(p + 32), a3 = load16(p + 48);
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
      a0 = fold16(a0, k512, load16(p));
      a1 = fold16(a1, k512, load16(p + 16));
      a2 = fold16(a2, k512, load16(p + 32));
      a3 = fold16(a3, k512, load16(p + 48));
    }
    a = fold16(a0, k128, a1);
    a = fold16(a, k128, a2);
    a = fold16(a, k128, a3);
  }
  return finish128(a, begin, p, n);
}

MRC_VPCLMUL inline __m512i load64(const uint8_t* q) {
  return _mm512_loadu_si512(q);
}
MRC_VPCLMUL inline __m512i fold64(__m512i a, __m512i k, __m512i d) {
  // 0x96: three-way XOR.
  return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(a, k, 0x00),
                                   _mm512_clmulepi64_epi128(a, k, 0x11), d, 0x96);
}

// The stream after its head: z0 holds the register folded over the head (64 bytes from the end
// of the head), p the n bytes that follow.
MRC_VPCLMUL inline uint32_t vpclmul_after_head(__m512i z0, const uint8_t* p, size_t n) {
  const uint8_t* const begin = p;
  const __m512i k512 = _mm512_set_epi64(kFold512Hi, kFold512Lo, kFold512Hi, kFold512Lo, kFold512Hi,
                                        kFold512Lo, kFold512Hi, kFold512Lo);
  if (n >= 64) {
    z0 = fold64(z0, k512, load64(p));
    p += 64;
    n -= 64;
  }
  if (n >= 192) {
    const __m512i k2048 = _mm512_set_epi64(kFold2048Hi, kFold2048Lo, kFold2048Hi, kFold2048Lo,
                                           kFold2048Hi, kFold2048Lo, kFold2048Hi, kFold2048Lo);
    __m512i z1 = load64(p), z2 = load64(p + 64), z3 = load64(p + 128);
    p += 192;
    n -= 192;
    for (; n >= 256; p += 256, n -= 256) {
      z0 = fold64(z0, k2048, load64(p));
      z1 = fold64(z1, k2048, load64(p + 64));
      z2 = fold64(z2, k2048, load64(p + 128));
      z3 = fold64(z3, k2048, load64(p + 192));
    }
    z0 = fold64(z0, k512, z1);
    z0 = fold64(z0, k512, z2);
    z0 = fold64(z0, k512, z3);
  }
  for (; n >= 64; p += 64, n -= 64) z0 = fold64(z0, k512, load64(p));
  // Lanes 0..2 folded onto lane 3 (distances 384, 256, 128 bits).
  __m128i a;
  const __m512i k_lanes = _mm512_set_epi64(0, 0, kFold128Hi, kFold128Lo, kFold256Hi, kFold256Lo,
                                           kFold384Hi, kFold384Lo);
  const __m512i m = _mm512_xor_si512(_mm512_clmulepi64_epi128(z0, k_lanes, 0x00),
                                     _mm512_clmulepi64_epi128(z0, k_lanes, 0x11));
  // Through memory: GCC 12 warns (maybe-uninitialized) on every 512 -> 128-bit extract.
  alignas(64) __m128i lm[4], lz[4];
  _mm512_store_si512(lm, m);
  _mm512_store_si512(lz, z0);
  a = _mm_xor_si128(_mm_xor_si128(lm[0], lm[1]), _mm_xor_si128(lm[2], lz[3]));
  return finish128(a, begin, p, n);
}

MRC_VPCLMUL uint32_t crc_stream_vpclmul(const uint8_t* head, size_t head_len, size_t /*skip*/,
                                        const uint8_t* p, size_t n) {
  const __m512i k512 = _mm512_set_epi64(kFold512Hi, kFold512Lo, kFold512Hi, kFold512Lo, kFold512Hi,
                                        kFold512Lo, kFold512Hi, kFold512Lo);
  __m512i z0 = load64(head);
  for (size_t i = 64; i < head_len; i += 64) z0 = fold64(z0, k512, load64(head + i));
  return vpclmul_after_head(z0, p, n);
}

// The ICRC of a RoCE packet over IPv6 whose UDP header follows the IPv6 header: the masked
// pseudo-header of compute_icrc() is then the 64 bytes from 4 before the IPv6 header to the end of
// BTH, with every masked byte ORed with ones (the 4 bytes before IPv6 are the end of the LRH's
// ones, the 4 before them the LRH's start, which cancels the register's initial ones: a leading
// zero block, left out). One load instead of a buffer built byte by byte, whose 64-byte load
// could not be forwarded from the stores that filled it. Raw register, like the streams.
MRC_VPCLMUL uint32_t icrc_ipv6_vpclmul(const uint8_t* from, const uint8_t* p, size_t n) {
  // Byte k of the mask ORed into byte k of the block (little-endian 64-bit words).
  const __m512i ones = _mm512_set_epi64(
      /* bytes 56..63: BTH byte 4 (block byte 56) */ 0x00000000000000FFull,
      /* 48..55: UDP checksum (50, 51) */ 0x00000000FFFF0000ull,
      /* 40..47 */ 0,
      /* 32..39 */ 0,
      /* 24..31 */ 0,
      /* 16..23 */ 0,
      /* 8..15: hop limit (11) */ 0x00000000FF000000ull,
      /* 0..7: LRH end (0..3), TC/flow label (4 low nibble, 5..7) */ 0xFFFFFF0FFFFFFFFFull);
  const __m512i z0 = _mm512_or_si512(_mm512_loadu_si512(from), ones);
  return vpclmul_after_head(z0, p, n);
}

// The same ICRC of N packets with PCLMULQDQ, their folds interleaved. A frame of a few hundred
// bytes is a chain of ~17 dependent multiply-and-add steps (the head, four 64-byte rounds, the
// tail, the reduction), each waiting for the multiplier's latency; N independent chains side by
// side keep it busy. The 64-byte head (from[i], masked as in icrc_ipv6_vpclmul) is the four
// accumulators' start, so it costs no fold of its own, and the three accumulators are folded
// onto the fourth at once (distances 384, 256, 128 bits) rather than one after the other. The
// payload follows the head in the frame, so the last partial block is always an overlapping
// load. Raw registers into out[i].
template <int N>
MRC_PCLMUL inline __attribute__((always_inline)) void icrc_ipv6_pclmul(const uint8_t* const* from,
                                                                       const uint8_t* const* pay,
                                                                       const size_t* len,
                                                                       uint32_t* out) {
  const __m128i k128 = _mm_set_epi64x(kFold128Hi, kFold128Lo);
  const __m128i k256 = _mm_set_epi64x(kFold256Hi, kFold256Lo);
  const __m128i k384 = _mm_set_epi64x(kFold384Hi, kFold384Lo);
  const __m128i k512 = _mm_set_epi64x(kFold512Hi, kFold512Lo);
  // Bytes 0..15 and 48..63 of the masks of icrc_ipv6_vpclmul (16..47 are not masked).
  const __m128i mask_lo =
      _mm_set_epi64x(0x00000000FF000000ll, static_cast<int64_t>(0xFFFFFF0FFFFFFFFFull));
  const __m128i mask_hi = _mm_set_epi64x(0x00000000000000FFll, 0x00000000FFFF0000ll);
  __m128i a[N][4];
  const uint8_t* p[N];
  size_t n[N];
  size_t rounds = SIZE_MAX;  // 64-byte rounds every packet has
  for (int i = 0; i < N; ++i) {
    a[i][0] = _mm_or_si128(load16(from[i]), mask_lo);
    a[i][1] = load16(from[i] + 16);
    a[i][2] = load16(from[i] + 32);
    a[i][3] = _mm_or_si128(load16(from[i] + 48), mask_hi);
    p[i] = pay[i];
    n[i] = len[i];
    rounds = std::min(rounds, n[i] / 64);
  }
  for (size_t r = 0; r < rounds; ++r)
    for (int i = 0; i < N; ++i) {
      for (int j = 0; j < 4; ++j) a[i][j] = fold16(a[i][j], k512, load16(p[i] + 16 * j));
      p[i] += 64;
      n[i] -= 64;
    }
  __m128i c[N];
  for (int i = 0; i < N; ++i) {
    for (; n[i] >= 64; p[i] += 64, n[i] -= 64)
      for (int j = 0; j < 4; ++j) a[i][j] = fold16(a[i][j], k512, load16(p[i] + 16 * j));
    const __m128i x0 = _mm_xor_si128(_mm_clmulepi64_si128(a[i][0], k384, 0x00),
                                     _mm_clmulepi64_si128(a[i][0], k384, 0x11));
    const __m128i x1 = _mm_xor_si128(_mm_clmulepi64_si128(a[i][1], k256, 0x00),
                                     _mm_clmulepi64_si128(a[i][1], k256, 0x11));
    c[i] = _mm_xor_si128(_mm_xor_si128(x0, x1), fold16(a[i][2], k128, a[i][3]));
  }
  for (int i = 0; i < N; ++i)
    for (; n[i] >= 16; p[i] += 16, n[i] -= 16) c[i] = fold16(c[i], k128, load16(p[i]));
  for (int i = 0; i < N; ++i) {
    if (n[i] == 0) continue;
    // As in finish128: the first n bytes of c, 128 bits from the end, folded onto the last 16
    // bytes of the message (the rest of c, then the n bytes; an overlapping load).
    const __m128i t = load16(p[i] + n[i] - 16);
    const __m128i shl = load16(kShuffle + n[i]);
    const __m128i shr = load16(kShuffle + 16 + n[i]);
    const __m128i first = _mm_shuffle_epi8(c[i], shl);
    const __m128i last = _mm_blendv_epi8(_mm_shuffle_epi8(c[i], shr), t, shr);
    c[i] = fold16(first, k128, last);
  }
  // 128 -> 64 -> 32 bits and the Barrett reduction of finish128, each step for every packet.
  const __m128i k_64to32 = _mm_set_epi64x(0, kFold64to32);
  const __m128i k_barrett = _mm_set_epi64x(kBarrettMu, kBarrettPoly);
  const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
  for (int i = 0; i < N; ++i)
    c[i] = _mm_xor_si128(_mm_srli_si128(c[i], 8), _mm_clmulepi64_si128(c[i], k128, 0x10));
  for (int i = 0; i < N; ++i)
    c[i] = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(c[i], low32), k_64to32, 0x00),
                         _mm_srli_si128(c[i], 4));
  for (int i = 0; i < N; ++i) {
    __m128i x = _mm_clmulepi64_si128(_mm_and_si128(c[i], low32), k_barrett, 0x10);
    x = _mm_clmulepi64_si128(_mm_and_si128(x, low32), k_barrett, 0x00);
    out[i] = static_cast<uint32_t>(_mm_extract_epi32(_mm_xor_si128(c[i], x), 1));
  }
}

MRC_PCLMUL void icrc_ipv6_pclmul4(const uint8_t* const* from, const uint8_t* const* pay,
                                  const size_t* len, uint32_t* out) {
  icrc_ipv6_pclmul<4>(from, pay, len, out);
}
MRC_PCLMUL void icrc_ipv6_pclmul2(const uint8_t* const* from, const uint8_t* const* pay,
                                  const size_t* len, uint32_t* out) {
  icrc_ipv6_pclmul<2>(from, pay, len, out);
}
MRC_PCLMUL uint32_t icrc_ipv6_pclmul1(const uint8_t* from, const uint8_t* pay, size_t len) {
  uint32_t out;
  icrc_ipv6_pclmul<1>(&from, &pay, &len, &out);
  return out;
}
#endif

uint32_t crc_stream_table(const uint8_t* head, size_t head_len, size_t skip, const uint8_t* p,
                          size_t n) {
  return crc_update(crc_update(0, head + skip, head_len - skip), p, n);
}

using CrcStream = uint32_t (*)(const uint8_t*, size_t, size_t, const uint8_t*, size_t);

CrcStream stream_for(CrcPath path) {
  switch (path) {
#if defined(__x86_64__)
    case CrcPath::kPclmul:
      return crc_stream_pclmul;
    case CrcPath::kVpclmul512:
      return crc_stream_vpclmul;
#endif
    default:
      return crc_stream_table;
  }
}

// The widest method the CPU has, by CPUID: what may run, not what is fastest.
CrcPath cpu_crc_path() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool pclmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  if (pclmul && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq"))
    return CrcPath::kVpclmul512;
  if (pclmul) return CrcPath::kPclmul;
#endif
  return CrcPath::kTable;
}

// The raw register update with the chosen method; short runs go to the table.
uint32_t crc_run(CrcStream stream, uint32_t c, const uint8_t* p, size_t n) {
  if (n < 64 || stream == crc_stream_table) return crc_update(c, p, n);
  alignas(64) uint8_t head[64];
  std::memcpy(head, p, 64);
  for (int i = 0; i < 4; ++i) head[i] ^= static_cast<uint8_t>(c >> (8 * i));
  return stream(head, 64, 0, p + 64, n - 64);
}

}  // namespace

// One timing of every method this CPU has over frame-sized buffers: CPUID says what may run, not
// what is fast. On a 2-vCPU Xeon with AVX-512 (issue 19, 2026-11-27) the 512-bit method ran
// 3.5x slower than the 128-bit one (CRC of every frame 5.2 vs 18.5 M/s), while on AMD EPYC it is
// the fastest at 1 KiB. A method's time is the best of several rounds, so a preemption in one
// round does not decide; the whole calibration reads ~3 MB once per process (~0.3 ms).
CrcCalibration calibrate_crc_paths(const char* forced) {
  CrcCalibration cal;
  static constexpr size_t kSizes[] = {256, 1024, 4096};  // payloads of PMTU 256..4096 frames
  static constexpr int kReps = 16, kRounds = 5;
  alignas(64) static uint8_t buf[4096 + 64];
  for (size_t i = 0; i < sizeof buf; ++i) buf[i] = static_cast<uint8_t>(i * 131 + 7);
  uint32_t sink = 0;
  for (CrcPath p : {CrcPath::kTable, CrcPath::kPclmul, CrcPath::kVpclmul512}) {
    const auto i = static_cast<size_t>(p);
    if (static_cast<int>(p) > static_cast<int>(cpu_crc_path())) break;
    cal.supported[i] = true;
    const CrcStream stream = stream_for(p);
    double best = 1e300;
    for (int round = 0; round < kRounds + 1; ++round) {  // round 0 warms up (AVX-512 licence)
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < kReps; ++r)
        for (size_t n : kSizes) sink += crc_run(stream, sink, buf + (r & 7), n);
      const auto t1 = std::chrono::steady_clock::now();
      if (round > 0)
        best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    cal.ns_per_kib[i] = best / (kReps * (256.0 + 1024 + 4096) / 1024);
  }
  // A wider method must win by 5 %: within noise the narrower one runs without 512-bit
  // frequency effects on the code around it.
  cal.chosen = CrcPath::kTable;
  for (CrcPath p : {CrcPath::kPclmul, CrcPath::kVpclmul512}) {
    const auto i = static_cast<size_t>(p);
    if (cal.supported[i] &&
        cal.ns_per_kib[i] < 0.95 * cal.ns_per_kib[static_cast<size_t>(cal.chosen)])
      cal.chosen = p;
  }
  cal.how = "calibrated";
  // MRC_CRC_PATH=table|pclmul|vpclmul512 forces a method (reproducing a run, comparing); a
  // method the CPU lacks or an unknown name is ignored, and `how` says so.
  if (forced != nullptr && *forced != 0) {
    const std::string_view v(forced);
    std::optional<CrcPath> named;
    for (CrcPath p : {CrcPath::kTable, CrcPath::kPclmul, CrcPath::kVpclmul512})
      if (v == crc_path_name(p)) named = p;
    if (named && cal.supported[static_cast<size_t>(*named)]) {
      cal.chosen = *named;
      cal.how = "MRC_CRC_PATH";
    } else {
      cal.how = "calibrated (MRC_CRC_PATH names no method this CPU has: ignored)";
    }
  }
  cal.sink = sink;
  return cal;
}

namespace {

const CrcCalibration& calibration() {
  static const CrcCalibration c = calibrate_crc_paths(std::getenv("MRC_CRC_PATH"));
  return c;
}

struct CrcDispatch {
  CrcPath path = calibration().chosen;
  CrcStream stream = stream_for(path);
};
CrcDispatch& dispatch() {
  static CrcDispatch d;
  return d;
}

const uint8_t* u8(Bytes b) {
  return reinterpret_cast<const uint8_t*>(b.data());
}

uint16_t rd16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

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

// A RoCE packet over IPv6 with UDP right after the IPv6 header and at least 4 bytes before it:
// its masked pseudo-header is the 64 bytes from 4 before the IPv6 header, masked (see
// icrc_ipv6_vpclmul), so it is loaded in place.
bool ipv6_shape(const RocePacket& r) {
  return !r.ipv4 && r.ip_off >= 4 && r.udp_off == r.ip_off + 40;
}

// What the in-place IPv6 kernels take for such a packet: the 64 bytes of its pseudo-header
// (`from`), then the rest of the ICRC's coverage, BTH onwards up to the ICRC (`pay`, `len`).
struct Ipv6Span {
  const uint8_t* from;
  const uint8_t* pay;
  size_t len;
};
Ipv6Span ipv6_span(const uint8_t* frame, const RocePacket& r) {
  return {frame + r.ip_off - 4, frame + r.udp_off + 8 + 12, r.udp_len - 8 - 12 - kIcrcBytes};
}

}  // namespace

uint32_t crc32(Bytes data, uint32_t crc) {
  return ~crc_run(dispatch().stream, ~crc, u8(data), data.size());
}

uint32_t crc32_with(CrcPath path, Bytes data, uint32_t crc) {
  if (!crc_path_supported(path)) path = CrcPath::kTable;
  return ~crc_run(stream_for(path), ~crc, u8(data), data.size());
}

bool crc_path_supported(CrcPath path) {
  return static_cast<int>(path) <= static_cast<int>(cpu_crc_path());
}

const CrcCalibration& crc_calibration() {
  return calibration();
}

const char* crc_path_name(CrcPath path) {
  switch (path) {
    case CrcPath::kTable:
      return "table";
    case CrcPath::kPclmul:
      return "pclmul";
    case CrcPath::kVpclmul512:
      return "vpclmul512";
  }
  return "?";
}

CrcPath crc_path() {
  return dispatch().path;
}

bool set_crc_path(CrcPath path) {
  if (!crc_path_supported(path)) return false;
  dispatch().path = path;
  dispatch().stream = stream_for(path);
  return true;
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
#if defined(__x86_64__)
  if (ipv6_shape(r)) {
    const CrcPath path = dispatch().path;
    const Ipv6Span v = ipv6_span(frame, r);
    if (path == CrcPath::kVpclmul512) return ~icrc_ipv6_vpclmul(v.from, v.pay, v.len);
    if (path == CrcPath::kPclmul) return ~icrc_ipv6_pclmul1(v.from, v.pay, v.len);
  }
#endif
  // Masked pseudo-header: 8 bytes of 0xFF stand for the LRH, then IP with its variant fields
  // (those a switch may rewrite: TC/FL/hop limit or TOS/TTL/checksum) set to ones, then UDP
  // with the checksum set to ones, then BTH with the variant byte 4 set to ones.
  // Built at the end of a buffer whose length is a multiple of 64, after leading zeros, with the
  // initial register value (all ones) XORed into its first four bytes: the carry-less multiply
  // paths then take header and payload as one stream (see crc_stream_pclmul).
  constexpr size_t kHdrMax = 8 + 60 + 8 + 12;
  alignas(64) uint8_t buf[(kHdrMax + 63) / 64 * 64];
  const size_t n = 8 + r.ip_len + 8 + 12;
  const size_t head_len = (n + 63) / 64 * 64;
  const size_t pad = head_len - n;
  uint8_t* hdr = buf + pad;
  std::memset(buf, 0, pad);
  std::memset(hdr, 0xFF, 8);
  std::memcpy(hdr + 8, frame + r.ip_off, r.ip_len);
  uint8_t* ip = hdr + 8;
  if (r.ipv4) {
    ip[1] = 0xFF;            // TOS
    ip[8] = 0xFF;            // TTL
    ip[10] = ip[11] = 0xFF;  // header checksum
  } else {
    ip[0] |= 0x0F;                 // low nibble of byte 0 = TC high bits
    ip[1] = ip[2] = ip[3] = 0xFF;  // TC low bits + flow label
    ip[7] = 0xFF;                  // hop limit
  }
  uint8_t* udp = ip + r.ip_len;
  std::memcpy(udp, frame + r.udp_off, 8 + 12);
  udp[6] = udp[7] = 0xFF;                         // UDP checksum
  udp[8 + 4] = 0xFF;                              // BTH variant byte
  for (size_t i = 0; i < 4; ++i) hdr[i] ^= 0xFF;  // the initial register value
  const uint8_t* rest = frame + r.udp_off + 8 + 12;
  const size_t rest_len = r.udp_len - 8 - 12 - kIcrcBytes;
  return ~dispatch().stream(buf, head_len, pad / 16 * 16, rest, rest_len);
}

void compute_icrcs(const DecodedFrame* const* frames, size_t n, std::optional<uint32_t>* out) {
#if defined(__x86_64__)
  if (dispatch().path == CrcPath::kPclmul) {
    // Packets of the in-place IPv6 shape are gathered into groups of four; any other (IPv4,
    // SRv6, no RoCE packet) is computed on its own.
    const uint8_t* from[4];
    const uint8_t* pay[4];
    size_t len[4];
    size_t idx[4];
    uint32_t raw[4];
    int k = 0;
    auto flush = [&] {
      if (k == 4) {
        icrc_ipv6_pclmul4(from, pay, len, raw);
      } else {
        int i = 0;
        if (k >= 2) {
          icrc_ipv6_pclmul2(from, pay, len, raw);
          i = 2;
        }
        if (i < k) raw[i] = icrc_ipv6_pclmul1(from[i], pay[i], len[i]);
      }
      for (int i = 0; i < k; ++i) out[idx[i]] = ~raw[i];
      k = 0;
    };
    for (size_t i = 0; i < n; ++i) {
      RocePacket r;
      const DecodedFrame& f = *frames[i];
      if (!locate(f, r)) {
        out[i] = std::nullopt;
        continue;
      }
      if (!ipv6_shape(r)) {
        out[i] = compute_icrc(f);
        continue;
      }
      const Ipv6Span v = ipv6_span(u8(f.frame), r);
      from[k] = v.from;
      pay[k] = v.pay;
      len[k] = v.len;
      idx[k] = i;
      if (++k == 4) flush();
    }
    if (k > 0) flush();
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) out[i] = compute_icrc(*frames[i]);
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
    const Ipv6Addr& dst =
        (!f.has_inner_ip6 && f.has_srh && f.srh.segment_count > 0) ? f.srh.segments[0] : ip.dst;
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
