// The completion ring of device mode: a CQ's work completions in a memfd that softmrcd (the one
// producer) and the application's lib_mrc.so (the one consumer) both map, so that mrc_poll_cq
// is a few loads and stores instead of a socket round trip. Private header of lib_mrc.so and
// softmrcd (README.md, "One device per node").
//
// Layout: a header (magic, version, slot count, slot size; `produced`, written only by the
// device; `consumed`, written only by the library, each on its own cache line), then `slots`
// ibv_wc slots. Both indices count completions since creation; slot i holds completion i modulo
// `slots` (a power of two). Neither side trusts what the other writes: each keeps its own copy of
// its own index and of the slot count, reads the other's index once per call and refuses it
// (the ring is corrupt) unless 0 <= produced - consumed <= slots, and only ever indexes slots
// with its own values. The memfd is sealed against shrinking and growing, so neither side can
// make the other's mapping fault.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace softmrc::cq_ring {

constexpr uint32_t kMagic = 0x4d524352;  // "MRCR"
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxSlots = 1u << 20;

struct Header {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t slot_size;
  alignas(64) std::atomic<uint64_t> produced;
  alignas(64) std::atomic<uint64_t> consumed;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "the indices are shared memory");
constexpr size_t kSlotsOffset = 192;
static_assert(sizeof(Header) <= kSlotsOffset);

// Slots for a CQ of `cqe` entries: the next power of two, at least 1. 0 when too large.
uint32_t slots_for(int cqe);
// Bytes of the memfd of a ring of `slots` slots.
size_t bytes_for(uint32_t slots);

// The device's side. Not thread-safe: the device pushes under the CQ's mutex.
class Producer {
 public:
  Producer() = default;
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  // Creates the sealed memfd and maps it. false with errno set.
  bool create(uint32_t slots);
  int fd() const { return fd_; }
  uint32_t slots() const { return slots_; }
  // Completions the consumer has not taken, or -1 when its `consumed` is impossible.
  int64_t pending() const;
  // Appends one completion: false when the ring is full or corrupt (the CQ overruns).
  bool push(const ibv_wc& wc);

 private:
  int fd_ = -1;
  void* map_ = nullptr;
  size_t bytes_ = 0;
  uint32_t slots_ = 0;
  uint64_t produced_ = 0;  // ours; the shared copy is only ever written
};

// The library's side: one consumer (mrc_poll_cq callers serialise on the CQ's own mutex).
class Consumer {
 public:
  Consumer() = default;
  ~Consumer();
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;

  // Maps a ring the device sent, of the slot count the device announced: false (errno EPROTO)
  // unless the memfd is exactly that size, sealed against shrinking and growing, and its
  // header agrees. Takes ownership of fd (closed either way).
  bool attach(int fd, uint32_t slots);
  // Up to n completions into wc: how many, or -1 (errno EPROTO) when the ring is corrupt.
  int poll(int n, ibv_wc* wc);

 private:
  void* map_ = nullptr;
  size_t bytes_ = 0;
  uint32_t slots_ = 0;
  uint64_t consumed_ = 0;  // ours
};

}  // namespace softmrc::cq_ring
