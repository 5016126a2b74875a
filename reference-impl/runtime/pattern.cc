// Message data pattern and latency histogram of `mrct endpoint`.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "reference-impl/runtime/runtime.h"

namespace mrc::runtime {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t base_of(uint64_t seed, uint32_t qp_index, uint64_t msg) {
  return mix(seed ^ mix((uint64_t{qp_index} << 40) ^ msg ^ 0x5bd1e995ull));
}

}  // namespace

void fill_pattern(std::span<std::byte> buf, uint64_t seed, uint32_t qp_index, uint64_t msg) {
  const uint64_t base = base_of(seed, qp_index, msg);
  const size_t words = buf.size() / 8;
  std::byte* p = buf.data();
  for (size_t k = 0; k < words; ++k) {
    const uint64_t w = mix(base + k * kGolden);
    std::memcpy(p + k * 8, &w, 8);
  }
  if (const size_t tail = buf.size() % 8) {
    const uint64_t w = mix(base + words * kGolden);
    std::memcpy(p + words * 8, &w, tail);
  }
}

std::optional<size_t> check_pattern(std::span<const std::byte> buf, uint64_t seed,
                                    uint32_t qp_index, uint64_t msg) {
  const uint64_t base = base_of(seed, qp_index, msg);
  const size_t words = buf.size() / 8;
  const std::byte* p = buf.data();
  for (size_t k = 0; k < words; ++k) {
    const uint64_t w = mix(base + k * kGolden);
    if (std::memcmp(p + k * 8, &w, 8) != 0) {
      for (size_t b = 0; b < 8; ++b)
        if (p[k * 8 + b] != reinterpret_cast<const std::byte*>(&w)[b]) return k * 8 + b;
    }
  }
  if (const size_t tail = buf.size() % 8) {
    const uint64_t w = mix(base + words * kGolden);
    for (size_t b = 0; b < tail; ++b)
      if (p[words * 8 + b] != reinterpret_cast<const std::byte*>(&w)[b]) return words * 8 + b;
  }
  return std::nullopt;
}

// Bucket index: values below kSub map 1:1; above, the power of two selects a row and the next
// log2(kSub) bits the column.
void LatencyHistogram::add(uint64_t ns) {
  size_t idx;
  if (ns < kSub) {
    idx = ns;
  } else {
    const int msb = 63 - std::countl_zero(ns);
    const int shift = msb - 6;  // kSub = 64 = 2^6
    idx = static_cast<size_t>(shift + 1) * kSub + ((ns >> shift) & (kSub - 1));
  }
  idx = std::min(idx, buckets_.size() - 1);
  ++buckets_[idx];
  ++count_;
  sum_ += ns;
  min_ = std::min(min_, ns);
  max_ = std::max(max_, ns);
}

uint64_t LatencyHistogram::quantile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  const uint64_t rank =
      std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      uint64_t upper;
      if (i < kSub) {
        upper = i;
      } else {
        const size_t row = i / kSub;  // >= 1
        const int shift = static_cast<int>(row) - 1;
        upper = ((uint64_t{kSub} + (i % kSub) + 1) << shift) - 1;
      }
      return std::clamp(upper, min(), max_);
    }
  }
  return max_;
}

}  // namespace mrc::runtime
