// Hashes of the checker's per-frame path: the merge-table key of every frame and the content
// hash of every new data packet (compared with its retransmissions, MRC-REQ-005).
//
// The payload hash is the cost that grows with the frame size, so it is an NH sum (pairs of
// 32-bit words plus key words, multiplied to 64 bits and added): one multiply per 8 bytes with no
// dependency between steps, which SSE2 and AVX2 do 2 and 4 at a time. NH is 2^-32-almost-
// universal per chunk, plenty for telling a retransmission from its original. The merge key must
// not collide between distinct packets in the window (it is compared as is), so it folds 16-byte
// blocks through full 64x64->128-bit multiplies instead.
#include <array>
#include <bit>

#include "conformance/internal.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace mrc::check::detail {
namespace {

constexpr size_t kChunkBytes = 1024;
constexpr size_t kChunkWords = kChunkBytes / 4;

struct Keys {
  std::array<uint32_t, kChunkWords> nh{};
  std::array<uint64_t, 16> fold{};
};

const Keys& keys() {
  static const Keys k = [] {
    Keys out;
    uint64_t x = 0x6D72632D63686B31ull;  // fixed: hashes are reproducible from run to run
    auto next = [&] {
      // splitmix64 step
      x += 0x9E3779B97F4A7C15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    };
    for (auto& w : out.nh) w = static_cast<uint32_t>(next());
    for (auto& w : out.fold) w = next() | 1;
    return out;
  }();
  return k;
}

// NH over n bytes, n a multiple of 16 and at most kChunkBytes.
uint64_t nh_scalar(const uint8_t* p, size_t n, const uint32_t* k) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i += 8) {
    uint32_t a, b;
    std::memcpy(&a, p + i, 4);
    std::memcpy(&b, p + i + 4, 4);
    acc += static_cast<uint64_t>(a + k[i / 4]) * static_cast<uint64_t>(b + k[i / 4 + 1]);
  }
  return acc;
}

#if defined(__x86_64__)
uint64_t nh_sse2(const uint8_t* p, size_t n, const uint32_t* k) {
  __m128i acc = _mm_setzero_si128();
  for (size_t i = 0; i < n; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i kk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + i / 4));
    const __m128i t = _mm_add_epi32(v, kk);
    acc = _mm_add_epi64(acc, _mm_mul_epu32(t, _mm_srli_epi64(t, 32)));
  }
  return static_cast<uint64_t>(_mm_cvtsi128_si64(acc)) +
         static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)));
}

__attribute__((target("avx2"))) uint64_t nh_avx2(const uint8_t* p, size_t n, const uint32_t* k) {
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    const __m256i kk = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + i / 4));
    const __m256i t = _mm256_add_epi32(v, kk);
    acc = _mm256_add_epi64(acc, _mm256_mul_epu32(t, _mm256_srli_epi64(t, 32)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  uint64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  if (i < n) sum += nh_sse2(p + i, n - i, k + i / 4);
  return sum;
}
#endif

using NhFn = uint64_t (*)(const uint8_t*, size_t, const uint32_t*);

NhFn best_nh() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) return nh_avx2;
  return nh_sse2;
#else
  return nh_scalar;
#endif
}

uint64_t hash_with(NhFn nh, const uint8_t* p, size_t n, uint64_t seed) {
  const Keys& k = keys();
  uint64_t h = seed ^ k.fold[0];
  size_t i = 0;
  for (; i + kChunkBytes <= n; i += kChunkBytes)
    h = fold_mul(h ^ nh(p + i, kChunkBytes, k.nh.data()), k.fold[1]);
  const size_t rest = n - i;
  const size_t body = rest & ~size_t{15};
  uint64_t tail = body ? nh(p + i, body, k.nh.data()) : 0;
  if (body < rest) {
    // The last < 16 bytes, zero-padded: the length folded in below tells the padding apart.
    alignas(16) uint8_t buf[16] = {};
    std::memcpy(buf, p + i + body, rest - body);
    tail += nh_scalar(buf, 16, k.nh.data() + body / 4);
  }
  h = fold_mul(h ^ tail, k.fold[2]);
  return fold_mul(h ^ n, k.fold[3]);
}

}  // namespace

uint64_t hash_payload(const uint8_t* p, size_t n, uint64_t seed) {
  static const NhFn nh = best_nh();
  return hash_with(nh, p, n, seed);
}

uint64_t hash_payload_scalar(const uint8_t* p, size_t n, uint64_t seed) {
  return hash_with(nh_scalar, p, n, seed);
}

uint64_t content_hash(const wire::DecodedFrame& f) {
  const Keys& k = keys();
  const uint64_t meth = (uint64_t{f.meth.rqmsn} << 16) | f.meth.msn;
  const uint64_t imm = f.has(wire::kHdrImm) ? (uint64_t{1} << 32) | f.immdt.imm : 0;
  uint64_t h = fold_mul(meth ^ k.fold[4], f.reth.va ^ k.fold[5]);
  h ^= fold_mul((uint64_t{f.reth.rkey} << 32 | f.reth.dma_len) ^ k.fold[6], imm ^ k.fold[7]);
  const auto* pl = reinterpret_cast<const uint8_t*>(f.payload.data());
  return hash_payload(pl, f.payload.size(), h);
}

namespace {

// Up to 8 bytes as a little-endian word, zero-padded, in overlapping loads.
uint64_t load_upto8(const uint8_t* p, size_t r) {
  if (r == 8) return load64(p);
  if (r >= 4) {
    uint32_t lo = 0, hi = 0;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + r - 4, 4);
    return lo | (uint64_t{hi} << (8 * (r - 4)));
  }
  if (r == 0) return 0;
  return p[0] | (uint64_t{p[r / 2]} << (8 * (r / 2))) | (uint64_t{p[r - 1]} << (8 * (r - 1)));
}

// The last r (< 16) bytes of a block as the two words load64 gives of a zero-filled 16-byte
// buffer they were copied into. Copying them was a store of a few bytes followed by an 8-byte load
// of the same bytes, which store-to-load forwarding cannot serve: a stall on every frame.
void load_tail(const uint8_t* p, size_t r, uint64_t& w0, uint64_t& w1) {
  if constexpr (std::endian::native == std::endian::little) {
    if (r >= 8) {
      w0 = load64(p);
      w1 = load_upto8(p + 8, r - 8);
    } else {
      w0 = load_upto8(p, r);
      w1 = 0;
    }
  } else {
    alignas(16) uint8_t buf[16] = {};
    std::memcpy(buf, p, r);
    w0 = load64(buf);
    w1 = load64(buf + 8);
  }
}

}  // namespace

uint64_t merge_key(const Addr& src, const Addr& dst, uint16_t sport, const uint8_t* bth,
                   size_t ib_bytes) {
  const Keys& k = keys();
  uint64_t h = fold_mul(load64(src.data()) ^ k.fold[0], load64(src.data() + 8) ^ k.fold[1]);
  h += fold_mul(load64(dst.data()) ^ k.fold[2], load64(dst.data() + 8) ^ k.fold[3]);
  // Up to 64 bytes from BTH in 16-byte blocks, the last one zero-padded, byte 4 cleared.
  const size_t n = std::min<size_t>(ib_bytes, 64);
  constexpr unsigned kByte4Shift = std::endian::native == std::endian::little ? 32 : 24;
  const uint64_t no_byte4 = ~(uint64_t{0xFF} << kByte4Shift);  // byte 4 of the first word
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint64_t w0 = load64(bth + i) & (i == 0 ? no_byte4 : ~uint64_t{0});
    h += fold_mul(w0 ^ k.fold[4 + i / 8], load64(bth + i + 8) ^ k.fold[5 + i / 8]);
  }
  if (i < n) {
    uint64_t w0 = 0, w1 = 0;
    load_tail(bth + i, n - i, w0, w1);
    w0 &= i == 0 ? no_byte4 : ~uint64_t{0};
    h += fold_mul(w0 ^ k.fold[4 + i / 8], w1 ^ k.fold[5 + i / 8]);
  }
  return fold_mul(h ^ (uint64_t{sport} << 8 | n), k.fold[12]);
}

}  // namespace mrc::check::detail
