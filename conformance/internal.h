// Private declarations shared by the checker's implementation files. Not installed, not public:
// mrct and other folders use conformance/check.h only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "conformance/check.h"
#include "wire/wire.h"

namespace mrc::check::detail {

// Rule indices, in catalogue order. catalogue.cc holds one row per index; a test verifies that
// the row at index i carries the id spelled by the enumerator.
enum RuleIdx : uint16_t {
  FRM_001,
  FRM_002,
  FRM_003,
  FRM_004,
  FRM_005,
  FRM_006,
  FRM_007,
  FRM_008,
  FRM_009,
  FRM_010,
  FRM_011,
  FRM_012,
  FRM_013,
  EV_001,
  EV_002,
  EV_003,
  EV_004,
  EV_005,
  EV_006,
  EV_007,
  EV_008,
  EV_009,
  EV_010,
  EV_011,
  EV_012,
  EV_013,
  REQ_001,
  REQ_002,
  REQ_003,
  REQ_004,
  REQ_005,
  REQ_006,
  REQ_007,
  REQ_008,
  REQ_009,
  REQ_010,
  REQ_011,
  REQ_012,
  REQ_013,
  REQ_014,
  REQ_015,
  RSP_001,
  RSP_002,
  RSP_003,
  RSP_004,
  RSP_005,
  RSP_006,
  RSP_007,
  RSP_008,
  RSP_009,
  RSP_010,
  RSP_011,
  RSP_012,
  RSP_013,
  RSP_014,
  PRB_001,
  PRB_002,
  PRB_003,
  PRB_004,
  PRB_005,
  PRB_006,
  PRB_007,
  PRB_008,
  CC_001,
  CC_002,
  kRuleCount
};

// ---------------------------------------------------------------------------------------------
// Containers of the per-frame path. The checker touches per-packet state on every frame, so these
// avoid per-element allocation (std::deque allocates one block per PsnRec, std::unordered_map one
// node per entry) and keep what is looked up per frame small enough to stay in cache.
// ---------------------------------------------------------------------------------------------

// Zero-filled anonymous memory of at least n bytes (the mapped size in `bytes`); throws
// std::bad_alloc when it cannot be had.
void* alloc_pages(size_t n, size_t& bytes, bool huge);
void free_pages(void* p, size_t bytes);

// A zero-filled array of trivially copyable T that large tables use: anonymous memory, in 2 MiB
// pages where the kernel allows (a random lookup in a table of several MiB otherwise pays a TLB
// miss, and a nested page walk under virtualisation, on top of the cache miss).
template <class T>
class PodArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  PodArray() = default;
  // huge: ask for 2 MiB pages (for arrays touched densely; a sparse one is cheaper in 4 KiB).
  explicit PodArray(size_t n, bool huge = true) : n_(n) {
    p_ = static_cast<T*>(alloc_pages(n * sizeof(T), bytes_, huge));
  }
  ~PodArray() { free_pages(p_, bytes_); }
  // Takes over `bytes` of anonymous memory (from alloc_pages, or a page-aligned piece of such a
  // mapping) as n elements. Its contents are kept: the caller initialises what it reads.
  static PodArray adopt(void* p, size_t n, size_t bytes) {
    PodArray a;
    a.p_ = static_cast<T*>(p);
    a.n_ = n;
    a.bytes_ = bytes;
    return a;
  }
  // Gives up the memory (its size in `bytes`): the caller frees it.
  T* release(size_t& bytes) {
    T* p = p_;
    bytes = bytes_;
    p_ = nullptr;
    n_ = bytes_ = 0;
    return p;
  }
  PodArray(const PodArray&) = delete;
  PodArray& operator=(const PodArray&) = delete;
  PodArray(PodArray&& o) noexcept { swap(o); }
  PodArray& operator=(PodArray&& o) noexcept {
    swap(o);
    return *this;
  }
  void swap(PodArray& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    std::swap(bytes_, o.bytes_);
  }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* data() { return p_; }
  const T* data() const { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
  size_t bytes_ = 0;
};
// A double-ended queue in blocks of 256 elements, like std::deque (references stay valid until
// their element is popped: evaluators hold a PsnRec& while the window grows), but with blocks
// large enough that a PsnRec does not cost an allocation (std::deque's blocks hold one) and with
// emptied blocks kept for reuse, so that a window sliding forward allocates nothing.
template <class T>
class Ring {
  static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>);
  static constexpr unsigned kShift = 8;
  static constexpr size_t kBlock = size_t{1} << kShift;

 public:
  Ring() = default;
  ~Ring() {
    for (size_t k = 0; k < nblocks_; ++k) std::free(block(k));
    for (T* b : spare_) std::free(b);
    std::free(map_);
  }
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) {
    const size_t p = off_ + i;
    return block(p >> kShift)[p & (kBlock - 1)];
  }
  const T& operator[](size_t i) const {
    const size_t p = off_ + i;
    return block(p >> kShift)[p & (kBlock - 1)];
  }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  T& emplace_back() {
    const size_t p = off_ + size_;
    if ((p >> kShift) == nblocks_) add_block(/*front=*/false);
    T* t = new (&block(p >> kShift)[p & (kBlock - 1)]) T();
    ++size_;
    return *t;
  }
  void push_back(const T& v) { emplace_back() = v; }
  T& emplace_front() {
    if (off_ == 0) {
      add_block(/*front=*/true);
      off_ = kBlock;
    }
    --off_;
    T* t = new (&block(0)[off_]) T();
    ++size_;
    return *t;
  }
  void pop_front() {
    ++off_;
    --size_;
    if (off_ == kBlock) {
      drop_front_block();
      off_ = 0;
    }
  }
  void clear() {
    while (nblocks_ > 0) drop_front_block();
    off_ = 0;
    size_ = 0;
  }

 private:
  // Block k of the queue: one load from first_, no wrap-around to compute (an element lookup is
  // on the checker's per-frame path several times a frame).
  T*& block(size_t k) const { return first_[k]; }
  __attribute__((noinline)) void add_block(bool front) {
    T* b = nullptr;
    if (!spare_.empty()) {
      b = spare_.back();
      spare_.pop_back();
    } else {
      // Cache-line aligned: a PsnRec is two whole lines.
      constexpr size_t kAlign = std::max<size_t>(64, alignof(T));
      b = static_cast<T*>(
          std::aligned_alloc(kAlign, (kBlock * sizeof(T) + kAlign - 1) / kAlign * kAlign));
      if (!b) throw std::bad_alloc();
    }
    const bool room = front ? map_head_ > 0 : map_head_ + nblocks_ < map_cap_;
    if (!room) {
      // The block pointers move to the middle of the map (a map at least half free is reused,
      // else it doubles), so that a queue sliding one way moves them once per many blocks; the
      // blocks, and so the elements, stay where they are.
      T** m = map_;
      size_t cap = map_cap_;
      if (nblocks_ * 2 + 2 > cap) {
        cap = std::max<size_t>(8, map_cap_ * 2);
        m = static_cast<T**>(std::malloc(cap * sizeof(T*)));
        if (!m) throw std::bad_alloc();
      }
      const size_t head = (cap - nblocks_) / 2;
      if (nblocks_ > 0) std::memmove(m + head, map_ + map_head_, nblocks_ * sizeof(T*));
      if (m != map_) std::free(map_);
      map_ = m;
      map_cap_ = cap;
      map_head_ = head;
    }
    if (front) {
      map_[--map_head_] = b;
    } else {
      map_[map_head_ + nblocks_] = b;
    }
    ++nblocks_;
    first_ = map_ + map_head_;
  }
  void drop_front_block() {
    T* b = block(0);
    ++map_head_;
    --nblocks_;
    first_ = map_ + map_head_;
    if (spare_.size() < 2)
      spare_.push_back(b);
    else
      std::free(b);
  }

  T** map_ = nullptr;    // block k of the queue is map_[map_head_ + k]
  T** first_ = nullptr;  // map_ + map_head_
  size_t map_cap_ = 0, map_head_ = 0, nblocks_ = 0;
  size_t off_ = 0;  // position of element 0 in block 0
  size_t size_ = 0;
  std::vector<T*> spare_;
};

// Open-addressing map from 32-bit keys (WEVs) to small values: linear probing, load <= 1/2,
// backward-shift deletion (no tombstones). Iteration order is unspecified: use it only where
// order cannot reach a report.
template <class V>
class FlatMap32 {
 public:
  size_t size() const { return size_; }
  V* find(uint32_t k) {
    if (size_ == 0) return nullptr;
    for (size_t i = home(k);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == k) return &s.val;
    }
  }
  // Inserts V{} when absent. Invalidates pointers into the map when it grows.
  V& operator[](uint32_t k) {
    if ((size_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    for (size_t i = home(k);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s.used = true;
        s.key = k;
        s.val = V{};
        ++size_;
        return s.val;
      }
      if (s.key == k) return s.val;
    }
  }
  bool erase(uint32_t k) {
    if (size_ == 0) return false;
    size_t i = home(k);
    for (;; i = (i + 1) & mask_) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == k) break;
    }
    // Backward shift: move later members of the probe run into the hole when their home allows.
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t h = home(slots_[j].key);
      const bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].used = false;
    --size_;
    return true;
  }

 private:
  struct Slot {
    uint32_t key = 0;
    bool used = false;
    V val{};
  };
  size_t home(uint32_t k) const {
    return static_cast<size_t>(static_cast<uint32_t>(k * 0x9E3779B1u) >> shift_) & mask_;
  }
  void rehash(size_t cap) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    shift_ = 32 - static_cast<unsigned>(__builtin_ctzll(cap));
    size_ = 0;
    for (const Slot& s : old)
      if (s.used) (*this)[s.key] = s.val;
  }
  std::vector<Slot> slots_;
  size_t size_ = 0, mask_ = 0;
  unsigned shift_ = 32;
};

// 64-bit hashing of the per-frame path (not cryptographic; deterministic across runs).
__extension__ typedef unsigned __int128 u128_t;
inline uint64_t fold_mul(uint64_t a, uint64_t b) {
  const u128_t p = static_cast<u128_t>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}
inline uint64_t load64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
// Hash of a byte string: 2^-32-almost-universal NH sums over 1 KiB chunks (SIMD when the CPU has
// it), chunks and length folded with 128-bit multiplies.
uint64_t hash_payload(const uint8_t* p, size_t n, uint64_t seed);
// The portable path of hash_payload (tests compare the SIMD paths with it).
uint64_t hash_payload_scalar(const uint8_t* p, size_t n, uint64_t seed);

using Addr = wire::Ipv6Addr;

struct AddrHash {
  size_t operator()(const Addr& a) const {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t b : a) h = (h ^ b) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::string format_addr(const Addr& a);  // IPv4-mapped addresses print as dotted quads
Addr v4_mapped(const wire::Ipv4Addr& a);
std::optional<Addr> parse_addr(std::string_view s);  // IPv6 or IPv4 (mapped)

// RoCE-level addresses of a decoded frame (inner header in SRv6 mode); false when not IP.
bool roce_addrs(const wire::DecodedFrame& f, Addr& src, Addr& dst);
// Sets every tolerance the profile did not give (DutProfile::tolerances_set) to the preset's.
void apply_preset(const Tolerances& preset, DutProfile& prof);

inline bool same_addr(const Addr& a, const Addr& b) {
  return load64(a.data()) == load64(b.data()) && load64(a.data() + 8) == load64(b.data() + 8);
}

inline constexpr uint64_t kNoTime = UINT64_MAX;

// Whether an ordered map may hold key k: false, with no tree walk, when k is outside its keys.
template <class Map, class K>
bool in_range(const Map& m, const K& k) {
  return !m.empty() && !(k < m.begin()->first) && !(m.rbegin()->first < k);
}

// One observation of a frame at one capture point, as the evaluators see it.
// Content hash of the parts of a data packet a retransmission must repeat byte for byte:
// METH, RETH, ImmDt and payload (not BTH flags, TSETH, EV, DSCP or ICRC).
uint64_t content_hash(const wire::DecodedFrame& f);

// frame_rules_stage()'s finding on a frame.
enum class FramePre : uint8_t {
  kJudge,      // frame_rules() must judge it in full
  kClean,      // breaks no rule of frame_rules(); its ICRC is not judged (none, or trimmed)
  kCleanIcrc,  // the same, with an ICRC that verifies (MRC-FRM-001 judged)
};

struct Obs {
  uint32_t point = 0;
  uint64_t frame_no = 0;
  uint64_t ts = 0;
  const wire::DecodedFrame* f = nullptr;
  uint64_t pkt = 0;       // merged packet id (same packet at several points)
  bool first = true;      // first observation of this packet
  bool at_src = false;    // capture point belongs to the sending node
  bool own_iface = true;  // taken on that node's own interface (not at the link's far end)
  bool at_dst = false;    // capture point belongs to the receiving node
  int src_node = -1;
  int dst_node = -1;
  Addr src{};
  Addr dst{};
  wire::EvFormat format = wire::EvFormat::kUdp;
  uint32_t wev = 0;
  bool trimmed = false;  // DSCP TRIMMED / TRIMMED_LASTHOP
  bool ce = false;
  bool icrc_bad = false;  // the ICRC does not verify: the receiver drops it
  bool snapped = false;   // the capture cut the frame (snap length)
  // content_hash(*f), when the reading thread of the pipelined checker computed it already
  // (Engine::payload_hash_stage): hashing reads the whole payload, which sits in that thread's
  // cache, and it is the judging thread that is the longer stage.
  bool content_hash_known = false;
  uint64_t content_hash = 0;
};

// One transmission of a PSN (a distinct packet, possibly seen at several points).
// Packed: the checker keeps one PsnRec per PSN of the window, and touches it per packet.
struct Tx {
  uint64_t pkt = 0;
  uint64_t ts = 0;  // first observation
  uint64_t frame = 0;
  uint32_t point = 0;
  uint32_t wev = 0;
  uint8_t trim_dscp = 0;
  bool valid : 1 = false;
  bool rtx : 1 = false;
  bool at_src : 1 = false;   // first observation was at the requester
  bool trimmed : 1 = false;  // seen trimmed somewhere
  bool ce : 1 = false;
  bool at_dst : 1 = false;  // seen at the responder's capture point
  bool at_dst_intact : 1 = false;
  bool dropped : 1 = false;   // injector dropped it
  bool corrupt : 1 = false;   // seen with a bad ICRC: the responder drops it
  bool trim_obl : 1 = false;  // obligations created for its arrival
  bool ce_obl : 1 = false;
  bool ack_obl : 1 = false;
  uint8_t decided_links = 0;       // injector links (interned, bit per link) that logged this copy
  uint32_t rx_point = UINT32_MAX;  // capture point where it reached the responder
  uint64_t rx_bytes_at = 0;        // Flow::rx_bytes once it had arrived there
};

inline constexpr int kTxRing = 4;

// What few PSNs need: transmissions 2 to kTxRing of the ring, and where a PSN the requester's
// capture skipped was found missing. Pooled per flow (TxPool), so that a PsnRec stays two cache
// lines: nearly every PSN is sent once and never skipped.
struct PsnExt {
  std::array<Tx, kTxRing - 1> tx{};  // ring slots 1 .. kTxRing-1 (slot 0 is PsnRec::tx0)
  uint64_t gap_ts = 0;
  uint64_t gap_frame = 0;
  uint32_t gap_point = 0;
  PsnExt* next_free = nullptr;  // in TxPool's free list
};

// PsnExt blocks of one flow: slabs allocated as the number in use grows (bounded by the window),
// recycled through a free list as records leave the window.
class TxPool {
 public:
  PsnExt* get() {
    if (!free_) grow();
    PsnExt* e = free_;
    free_ = e->next_free;
    return new (e) PsnExt();
  }
  void put(PsnExt* e) {
    e->next_free = free_;
    free_ = e;
  }

 private:
  static constexpr size_t kSlab = 256;
  __attribute__((noinline)) void grow() {
    slabs_.push_back(std::make_unique<PsnExt[]>(kSlab));
    PsnExt* s = slabs_.back().get();
    for (size_t i = kSlab; i-- > 0;) put(&s[i]);
  }
  std::vector<std::unique_ptr<PsnExt[]>> slabs_;
  PsnExt* free_ = nullptr;
};

// One PSN of a flow's window. Two cache lines: the checker keeps one per PSN of the window and
// touches it (and its neighbours) per packet; the rare parts live in a PsnExt.
struct alignas(64) PsnRec {
  // From the first transmission whose headers were intact.
  uint64_t va = 0;
  uint64_t content_hash = 0;
  uint32_t rkey = 0, dma_len = 0, payload_len = 0;
  uint32_t nominal = 0;
  uint16_t msn = 0, rqmsn = 0;
  uint16_t tx_count = 0;
  uint16_t timeout_retries = 0;  // retransmissions with no NACK/SACK/probe evidence before them
  uint8_t tx_next = 0;           // ring slot of the next transmission
  uint8_t pos = 0;               // wire::MessagePosition
  bool seen : 1 = false;
  bool imm : 1 = false;
  bool content_known : 1 = false;
  bool acked : 1 = false;
  bool gap_pending : 1 = false;  // skipped at the requester's capture, not yet seen anywhere
  bool inflight : 1 = false;     // counted in the CC bytes-in-flight estimate
  uint32_t first_point = 0;
  Tx tx0{};  // ring slot 0
  uint64_t first_frame = 0;
  uint64_t nack_ts = 0;   // last NACK for this PSN that reached the requester
  PsnExt* ext = nullptr;  // slots 1.. of the ring and the gap fields, once needed

  // Ring slot k (0 .. kTxRing-1): nullptr when no transmission ever used it.
  Tx* slot(unsigned k) { return k == 0 ? &tx0 : ext ? &ext->tx[k - 1] : nullptr; }
  const Tx* slot(unsigned k) const { return k == 0 ? &tx0 : ext ? &ext->tx[k - 1] : nullptr; }
  // The ring's slots in order (slot 0 first), those never used left out: for (Tx& t : r.txs()).
  template <class R, class T>
  struct TxIter {
    R* r;
    unsigned k;
    T& operator*() const { return *r->slot(k); }
    TxIter& operator++() {
      ++k;
      return *this;
    }
    bool operator!=(const TxIter& o) const { return k != o.k; }
  };
  template <class R, class T>
  struct TxRange {
    R* r;
    TxIter<R, T> begin() const { return {r, 0}; }
    TxIter<R, T> end() const { return {r, r->ext ? unsigned{kTxRing} : 1u}; }
  };
  TxRange<PsnRec, Tx> txs() { return {this}; }
  TxRange<const PsnRec, const Tx> txs() const { return {this}; }

  const Tx* latest() const;
  const Tx* latest_before(uint64_t ts) const;
  Tx* find(uint64_t pkt);
  // A new transmission in the ring (the oldest is overwritten).
  Tx& push(TxPool& pool) {
    if (tx_next != 0 && !ext) ext = pool.get();
    Tx* t = new (slot(tx_next)) Tx();
    t->valid = true;
    tx_next = static_cast<uint8_t>((tx_next + 1) % kTxRing);
    return *t;
  }
  PsnExt& more(TxPool& pool) {
    if (!ext) ext = pool.get();
    return *ext;
  }
  // Before the record leaves the window.
  void release(TxPool& pool) {
    if (ext) pool.put(ext);
    ext = nullptr;
  }
};
static_assert(sizeof(PsnRec) == 128);

enum class EvMode : uint8_t { kGood, kSkip, kBad };

struct EvState {
  EvMode mode = EvMode::kGood;
  uint64_t since = 0;     // when the signal reached the requester
  uint64_t last_use = 0;  // last new-data use
  uint64_t last_probe = 0;
  uint64_t probe_flagged_at = 0;
  size_t need_others = 0;  // SKIP: distinct other EVs to use first
  // SKIP: a use of the EV was already judged early in this episode. It stays in SKIP until the
  // episode ends (turns taken or T_skip) as the requester's own view does: released at once, it
  // would make a long run on the other EVs (the requester still avoiding it) read as no spraying.
  bool skip_judged = false;
  // When the EV was last back in use after SKIP or ASSUMED_BAD: the requester's first data on it
  // (kNoTime between a probe answer and that data: the requester may want several answers).
  uint64_t recovered_at = 0;
  uint64_t last_data = 0;  // last data (new or retransmission) from the requester
  // Probing by the requester: the first probe since its last data (0: none), and the previous
  // such episode [start, end) that data on the EV ended.
  uint64_t probe_since = 0;
  uint64_t probe_ok_at = 0;  // last probe answer with M=00/01
  uint64_t probe_ep_start = 0, probe_ep_end = 0;
  bool probing_at(uint64_t t) const {
    return (probe_since != 0 && probe_since <= t) ||
           (probe_ep_start != 0 && probe_ep_start <= t && t < probe_ep_end);
  }
  // The first probe on the EV sent after t, as far as the two episodes held show (0: none).
  uint64_t first_probe_after(uint64_t t) const {
    if (probe_ep_start > t) return probe_ep_start;
    return probe_since > t ? probe_since : 0;
  }
  uint32_t sig_capture = 0;
  uint64_t sig_frame = 0;
};

struct Pending {
  uint64_t since = 0;
  uint32_t point = 0;
  uint64_t frame = 0;
  uint32_t ev = 0;
  uint8_t code = 0;
  uint64_t deadline = 0;
  uint64_t bytes_deadline = 0;
  int64_t psn = 0;
};

struct ProbeRec {
  uint32_t wev = 0;
  uint64_t ts = 0;
  bool ce = false;
  bool ce_known = false;
  uint32_t point = 0;
  uint64_t frame = 0;
};

struct MsgRec {
  int64_t first_psn = 0;
  uint64_t va_first = 0;
  bool first_known = false;
};

// The usable ports of a peer as last signalled to a sender (PORT_STATUS_UPDATE from the peer,
// the port_status of its SACKs, the port mask of its EV probe responses). MRC-EV-012.
struct PortStatus {
  uint32_t usable = 0xFFFFFFFEu;  // bit N: port N usable
  std::array<uint64_t, 32> down_since{};
  std::array<uint32_t, 32> point{};
  std::array<uint64_t, 32> frame{};
  std::array<const char*, 32> how{};
  uint32_t flagged = 0;  // ports whose current down episode was already reported
};

// Per-plane EV use of a QP's new data at the requester (MRC-EV-002, MRC-EV-011; planes.cc),
// measured over windows of new data packets.
struct PlaneTrack {
  bool init = false;
  FlatMap32<uint32_t> idx_of;        // WEV -> 1 + index in the profile's evs
  std::vector<uint8_t> ports;        // planes of the profile's EVs (1-based ports), ascending
  FlatMap32<uint32_t> last_win;      // WEV -> 1 + the last window it carried new data in
  std::array<uint32_t, 33> count{};  // distinct EVs per port in the current window
  uint32_t win_id = 0, win_len = 0, win_target = 0;
  uint32_t distinct = 0, carried = 0;  // distinct EVs in the window, of them used in the one before
  uint32_t prev_distinct = 0;
  bool win_repl = false, prev_repl = false;  // a never-used EV first carried data in the window
  bool win_bad = false;                      // an EV was ASSUMED_BAD during the window
  bool win_dirty = false;                    // a port was marked down during the window
  uint32_t win_point = 0;
  uint64_t win_frame = 0, win_ts = 0;
  uint32_t repl_wev = 0;
  uint64_t repl_ts = 0;
  PortStatus* port_status = nullptr;  // of (requester node, responder node), once signalled
};

// Reverse EV probes of a QP's responder (MRC-PRB-007; probes.cc). Index: responder port 1..8.
struct RevProbeTrack {
  static constexpr size_t kPorts = 9;
  std::array<uint64_t, kPorts> last_data{}, period_start{}, last_probe{}, flagged{};
  uint64_t rtt_max = 0;  // EV probe round trips seen at the responder
  uint64_t checked = 0;
  uint64_t violations = 0;
  std::vector<Evidence> pending;  // judged at the end: only if the responder sent no data
};

// MRC-CC-002 (cc.cc): stretches of SACKs with M=01 and delay >= target_delay.
struct CcTrack {
  bool have_cal = false;  // requester ts16 clock vs capture time, from its last data packet
  uint64_t cal_ts = 0;
  uint16_t cal_ts16 = 0;
  uint64_t hwm = 0;  // highest bytes-in-flight estimate so far
  bool open = false, flagged = false;
  uint64_t ref = 0, open_ts = 0, open_frame = 0, delay_ns = 0;
  uint32_t open_point = 0;
};

struct Flow {
  int id = 0;
  int req_node = -1, rsp_node = -1;
  Addr req_addr{}, rsp_addr{};
  std::optional<uint32_t> req_qpn, rsp_qpn;
  QpProfile prof;
  bool configured = false;

  // PSN window (extended 64-bit PSNs).
  bool have_ref = false;
  int64_t ref_ext = 0;   // highest extended PSN unwrapped so far
  int64_t base_ext = 0;  // PSN of win[0]
  Ring<PsnRec> win;
  TxPool tx_pool;     // the PsnExt blocks of win's records
  uint32_t wild = 0;  // consecutive PSNs refused as far outside the window
  bool have_data = false;
  int64_t highest_ext = 0;  // highest data PSN seen anywhere
  bool have_src_data = false;
  int64_t highest_src_ext = 0;  // highest new PSN seen at the requester's capture
  std::optional<int64_t> max_cack_ext;
  // The last SACK cack, CC_STATE rcvd_bytes and transport ACK PSN in the responder's transmit
  // order (MRC-RSP-002/007/010): across its own interfaces' captures (`src_order`), per capture
  // point at captures of its links (`link_order`: a link keeps the order of what the port sent,
  // two planes' links do not keep it between them).
  struct RspOrder {
    std::optional<int64_t> cack_ext;
    std::optional<uint32_t> rcvd_bytes;
    std::optional<int64_t> tack_ext;
  };
  RspOrder src_order;
  std::map<uint32_t, RspOrder> link_order;
  int64_t sack_hi_ext = 0;
  bool have_sack_hi = false;
  uint64_t last_sack_arrival = 0;  // at the requester
  uint64_t last_pr_sack_arrival = 0;
  uint8_t dyn_mpr = 0;  // last non-zero SACK.mpr

  uint32_t pmtu = 0;  // configured or inferred
  std::map<uint16_t, MsgRec> msgs;

  // WIMM and transport ACKs.
  std::deque<int64_t> imm_ends;  // last PSN of WriteIMM messages first-sent
  bool saw_tack = false;
  // The trace holds the QP's first message (MSN 0, or the profile's initial PSN): every
  // WriteIMM message sent so far is then known, and none is acknowledged before a transport ACK.
  bool saw_qp_start = false;
  bool saw_any_data = false;
  int64_t max_tack_ext = 0;

  // QP error (fatal NACK / NAK reached the requester).
  uint64_t fatal_ts = kNoTime;

  // EVs.
  std::unordered_map<uint32_t, EvState> evs;  // never erased: pointers into it stay valid
  // Direct-mapped cache of evs lookups by WEV (nullptr: empty).
  std::array<std::pair<uint32_t, EvState*>, 64> ev_cache{};
  EvState* find_ev(uint32_t wev) {
    auto& c = ev_cache[(wev * 0x9E3779B1u) >> 26];
    if (c.second && c.first == wev) return c.second;
    auto it = evs.find(wev);
    if (it == evs.end()) return nullptr;
    c = {wev, &it->second};
    return c.second;
  }
  Ring<uint32_t> recent_wevs;  // last new-data WEVs
  FlatMap32<uint32_t> recent_count;
  uint32_t run_wev = 0;
  uint32_t run_len = 0;
  bool run_flagged = false;
  // MRC-EV-001 follows new data in PSN order, which is the requester's send order: per-port
  // captures stamped with equal times merge file by file, not in send order.
  struct SprayPend {
    uint32_t wev = 0;
    bool known = false;  // false: seen first away from the requester's capture
    uint32_t point = 0;
    uint64_t frame = 0;
    uint64_t ts = 0;
  };
  bool spray_started = false;
  int64_t spray_next = 0;                   // next PSN the run goes on with
  std::map<int64_t, SprayPend> spray_pend;  // new PSNs seen ahead of spray_next
  // A run over the limit, judged once the trace moves past its time stamp: frames stamped the
  // same (e.g. probes in another per-port capture) may belong before it.
  bool spray_flag_on = false;
  uint32_t spray_flag_wev = 0;
  bool spray_flag_narrow = false;  // fewer than 2 active EVs: the whole EV universe is owed
  SprayPend spray_flag;
  std::string spray_flag_msg;
  // EV-008/009/013: data on an EV the rule forbids is a violation once the requester proves it
  // had another usable EV by sending data on one within its next few data packets; it may have
  // retired the others on evidence no capture shows (it owes only ev_min_active EVs).
  struct EvSuspect {
    RuleIdx rule{};
    uint32_t wev = 0;
    uint32_t point = 0;
    uint64_t frame = 0;
    uint64_t ts = 0;
    size_t left = 0;  // data packets still to watch
    std::string msg;
    uint64_t skip_since = 0;  // EV-008: the SKIP signal and the other EVs owed a turn
    size_t skip_need = 0;
  };
  std::deque<EvSuspect> ev_suspects;
  size_t bad_count = 0;
  size_t skip_count = 0;

  // Probes.
  std::map<uint16_t, ProbeRec> probes;
  std::deque<uint16_t> probe_order;

  // Obligations.
  std::map<int64_t, Pending> nack_retx;  // REQ-011
  std::map<int64_t, Pending> drop_retx;  // REQ-015
  std::map<int64_t, Pending> trim_nack;  // RSP-013
  std::map<int64_t, Pending> ack_resp;   // RSP-009
  std::deque<std::pair<int64_t, uint64_t>> ack_order;
  std::vector<Pending> ce_echo;           // RSP-006
  std::map<uint16_t, Pending> probe_ans;  // PRB-002
  // When the injector dropped a reliability probe of this flow (its log names no probe id).
  std::deque<uint64_t> probe_drops;  // PRB-002
  uint64_t rx_bytes = 0;             // Σ max(payload, 1 KiB) of data arrivals

  // CC.
  uint64_t inflight_bytes = 0;
  uint32_t max_nominal = 0;

  // Control packets (SACK/NACK/ACK) the injector dropped: (opcode, PSN, decision time).
  std::deque<std::tuple<uint8_t, uint32_t, uint64_t>> ctl_drops;
  // Data packets the injector dropped: (PSN, decision time) (MRC-RSP-009 at link-side captures).
  std::deque<std::pair<int64_t, uint64_t>> data_drops;

  // Summary.
  uint64_t data_packets = 0, retransmissions = 0, sacks = 0, nacks = 0;
  FlatMap32<bool> all_wevs;  // a set: the values are unused

  // MRC-EV-002/007/011/012, MRC-PRB-007, MRC-CC-002.
  PlaneTrack planes;
  RevProbeTrack rev;
  CcTrack cc;

  int64_t unwrap(uint32_t psn);
  // nullptr when outside the window
  PsnRec* rec(int64_t ext) {
    const uint64_t i = static_cast<uint64_t>(ext - base_ext);
    return ext >= base_ext && i < win.size() ? &win[i] : nullptr;
  }
  PsnRec* rec_create(int64_t ext);  // grows the window; nullptr when too far
  size_t active_evs() const { return recent_count.size(); }
};

// One key of the merge table. The point where the key was first seen (the most upstream one)
// tells how many copies were sent; further copies at other points are the fabric's duplicates.
// 32 bytes: the table holds every packet of the dedup window (a million at 50 Mpps x 20 ms), so
// what only packets seen again (or SRv6 ones) need lives in a DedupExt beside it.
struct alignas(32) DedupEntry {
  static constexpr int kMaxCopies = 4;
  static constexpr uint16_t kBigLen = 0xFFFF;  // ib_len too large here: the DedupExt has it
  uint64_t key = 0;
  uint64_t ts = 0;
  uint64_t id0 = 0;  // packet id of the first copy
  uint32_t first_point = 0;
  uint16_t ib_len = 0;  // bytes after UDP at first sight
  uint8_t n_ids = 0;    // copies sent at first_point (ids of the later ones in DedupTable)
  bool srv6 : 1 = false;
  bool trimmed : 1 = false;
  bool has_ext : 1 = false;
};

struct DedupExt {
  static constexpr int kSeenInline = 3;
  uint32_t last_point = 0;
  uint32_t ib_len = 0;
  Addr outer_da{};  // outer IPv6 destination and hop limit where last seen (SRv6)
  uint8_t hop_limit = 0;
  // Copies seen so far at other points, per point (mod 64): up to kSeenInline points here, all
  // of them in DedupTable's overflow map once more points saw the packet.
  uint8_t n_seen = 0;
  bool seen_overflow = false;
  std::array<uint8_t, kSeenInline> seen_slot{};
  std::array<uint8_t, kSeenInline> seen_count{};
};

// The merge table: entries in a ring in insertion (= time) order, so that expiry pops the oldest
// and insertion writes sequentially; a compact open-addressing index (8 bytes per slot: a tag of
// the key and the entry's sequence number) finds them. A frame looks up one index line (fetched
// before the frame is decoded); the entry itself is read only when the tag matches. Expiry does
// not touch the index: a slot whose entry has expired is stale, skipped by lookups and reused by
// insertions, and the index is cleaned in place (or rebuilt larger), sweeping it in slot order,
// when stale and live slots fill 3/4 of it. The ring is made of fixed chunks recycled as the
// window moves, so that a steady stream allocates nothing and growth copies nothing.
class DedupTable {
 public:
  // The window is also capped in packets: beyond this many live entries the oldest is forgotten
  // early (counted in forced(), reported as a note). A copy seen more than this many packets
  // after the first sighting is then judged as a new packet; the cap also bounds memory against
  // frozen timestamps.
  static constexpr size_t kMaxLive = size_t{1} << 20;
  static constexpr uint64_t kNone = UINT64_MAX;

  DedupTable() = default;
  ~DedupTable() {
    for (void* b : spare_blocks_) free_pages(b, kChunkBytes);
  }
  DedupTable(const DedupTable&) = delete;
  DedupTable& operator=(const DedupTable&) = delete;

  size_t size() const { return static_cast<size_t>(tail_ - head_); }
  uint64_t forced() const { return forced_; }
  // Forgets entries, oldest first, while the oldest was inserted more than `window` before now.
  void expire(uint64_t now, uint64_t window) {
    while (head_ != tail_ && at(head_).ts + window < now) pop();
  }
  // Unconditional: GCC 12 drops a __builtin_prefetch under a branch. With no index yet the
  // address is the null pointer plus 0, which prefetching ignores.
  void prefetch(uint64_t key) const {
    __builtin_prefetch(index_.data() + (tag_of(key) & index_mask_));
  }
  // Sequence number of the live entry with this key, or kNone.
  uint64_t find(uint64_t key) {
    if (head_ == tail_) return kNone;
    const uint32_t tag = tag_of(key);
    for (size_t i = tag & index_mask_;; i = (i + 1) & index_mask_) {
      const Slot s = index_[i];
      if (s.tag == 0) return kNone;
      if (s.tag == tag) {
        const uint64_t q = seq_of(s.seq);
        if (q >= head_ && at(q).key == key) return q;
      }
    }
  }
  DedupEntry& at(uint64_t seq) {
    return chunks_[(seq >> kChunkShift) & chunk_mask_].entries[seq & (kChunkEntries - 1)];
  }
  // The extension of entry seq, made (from the entry) on first use.
  DedupExt& ext(uint64_t seq);
  // `key` must be absent. Returns the new entry's sequence number; the entry comes
  // value-initialised but for key and ts.
  uint64_t insert(uint64_t key, uint64_t ts);
  // Packet id of copy k (< e.n_ids) sent at e.first_point, and a further one.
  uint64_t id(const DedupEntry& e, size_t k) const {
    return k == 0 ? e.id0 : e.id0 + extra_ids_.at(e.key)[k - 1];
  }
  // A further copy sent at e.first_point. Past kMaxCopies the oldest is forgotten and the
  // sightings elsewhere slide with it: copy k becomes copy k - 1 (a responder repeats an
  // identical transport ACK many times within the window; the fifth was read as a sighting).
  void add_id(DedupEntry& e, uint64_t seq, uint64_t id);
  // Copies of the packet seen so far at capture points with this slot (point mod 64).
  uint8_t& seen(DedupExt& x, uint64_t key, uint32_t slot);

 private:
  static constexpr unsigned kChunkShift = 16;  // 65536 entries: 2 MiB, one huge page
  static constexpr size_t kChunkEntries = size_t{1} << kChunkShift;
  struct Slot {
    uint32_t tag = 0;  // 0 = empty
    uint32_t seq = 0;  // low 32 bits of the entry's sequence number
  };
  struct Chunk {
    PodArray<DedupEntry> entries;
    PodArray<DedupExt> ext;  // allocated when an entry of the chunk first needs one
  };
  static uint32_t tag_of(uint64_t key) { return static_cast<uint32_t>(key >> 32) | 0x80000000u; }
  // Full sequence number of a slot: the index is cleaned well within 2^32 insertions, so every
  // slot's entry is less than 2^32 behind tail_.
  uint64_t seq_of(uint32_t lo) const {
    return tail_ - static_cast<uint32_t>(static_cast<uint32_t>(tail_) - lo);
  }
  void pop();
  void rebuild_index();

  // Chunk k of the ring holds sequence numbers [k * kChunkEntries, (k + 1) * kChunkEntries).
  std::vector<Chunk> chunks_;  // a ring of chunks, power-of-two long
  size_t chunk_mask_ = 0;
  std::vector<Chunk> spare_;  // emptied chunks kept for reuse
  // Pieces of outgrown index arrays, kChunkBytes each, for new chunks' entries: memory already
  // faulted in, where a fresh mapping would make the kernel clear every page first (insert()
  // initialises each entry, so old contents do not matter).
  static constexpr size_t kChunkBytes = kChunkEntries * sizeof(DedupEntry);
  std::vector<void*> spare_blocks_;
  uint64_t head_ = 0, tail_ = 0;  // live sequence numbers are [head_, tail_)
  PodArray<Slot> index_;
  size_t index_mask_ = 0;
  size_t occupied_ = 0;      // index slots in use, live or stale
  uint64_t rebuilt_at_ = 0;  // tail_ at the last cleaning
  // Rare parts, by key: ids of copies re-sent at the first point (minus id0), seen counts of
  // packets seen at more than kSeenInline other points.
  std::unordered_map<uint64_t, std::array<uint32_t, DedupEntry::kMaxCopies - 1>> extra_ids_;
  std::unordered_map<uint64_t, std::array<uint8_t, 64>> seen_overflow_;
  uint64_t forced_ = 0;
};

struct EndpointReq {
  uint8_t op = 0;
  uint64_t ts = 0;
  uint16_t ts16 = 0;
  uint32_t wev = 0;
  uint32_t responses = 0;
  uint32_t point = 0;
  uint64_t frame = 0;
};

struct RuleState {
  uint64_t checked = 0;
  uint64_t violations = 0;
  uint64_t excused = 0;
  std::vector<Evidence> evidence;
  std::string na_reason;
};

struct PointState {
  PointInfo info;
  int node = -1;
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t mrc = 0;
  uint64_t decode_errors = 0;
};

// Why a frame was not recognised as MRC (Report::unrecognised), kept as numbers per frame and
// worded once at the end.
struct UnrecognisedKey {
  enum Kind : uint8_t {
    kNotIp,          // a: EtherType
    kNotUdp,         // a: 4 or 6, b: IP protocol / next header
    kFragment,       // IPv4 fragment
    kDecodeError,    // a: Layer, b: DecodeErrorCode (before a BTH was found)
    kOtherPort,      // a: UDP destination port, b: 0, or 0x10000 | P_Key when MRC-like
    kShortBth,       // UDP to the RoCE port without a complete BTH
    kUnknownOpcode,  // a: opcode unknown to the wire profile
    kNotMrcOpcode,   // a: opcode the profile knows, not an MRC one
    kOther,          // beyond kMaxUnrecognisedKinds distinct reasons
  };
  Kind kind = kOther;
  uint32_t a = 0, b = 0;
  auto operator<=>(const UnrecognisedKey&) const = default;
};
struct UnrecognisedCount {
  uint64_t frames = 0;
  std::vector<FrameRef> examples;
};
inline constexpr size_t kMaxUnrecognisedKinds = 64;
inline constexpr size_t kUnrecognisedExamples = 5;

// The checker engine (Checker::Impl). Methods are spread over engine.cc (dispatch, flows,
// dedup, results), framing.cc, requester.cc, responder.cc, evstate.cc and probes.cc.
struct Engine {
  Engine(DutProfile p, RuleSelection sel, size_t max_ev);

  DutProfile prof;
  RuleSelection sel;
  size_t max_evidence;
  std::unique_ptr<wire::WireProfile> wire_profile;
  std::unique_ptr<wire::DecodeLayout> decode_layout;  // wire_profile's lookups, for on_frame()
  std::array<RuleState, kRuleCount> rules;
  std::array<bool, kRuleCount> enabled{};

  std::vector<PointState> points;
  std::vector<Addr> node_addr;  // primary address per node id
  std::vector<std::string> node_name;
  std::vector<uint8_t> node_has_point;  // 0/1 (not vector<bool>: read on every frame)
  std::unordered_map<Addr, int, AddrHash> addr_node;

  // The last addresses resolved to nodes: a frame's source and destination are nearly always
  // those of the frame before (node ids never change once given).
  struct NodeCacheEntry {
    Addr addr{};
    int id = -1;
  };
  std::array<NodeCacheEntry, 4> node_cache{};
  unsigned node_cache_next = 0;
  // The nodes of the last two (source, destination) address pairs judge_frame() resolved: a
  // QP's data one way and its control packets the other. One hit costs four 8-byte compares
  // where node_of() twice scanned node_cache (3 % of the judging thread's instructions).
  struct NodePairEntry {
    Addr src{}, dst{};
    int src_node = -1, dst_node = -1;
  };
  std::array<NodePairEntry, 2> node_pairs{};
  unsigned node_pairs_next = 0;
  // node_of(src), node_of(dst) through node_pairs.
  void nodes_of(const Addr& src, const Addr& dst, int& src_node, int& dst_node);

  std::vector<std::unique_ptr<Flow>> flows;
  // The last flow found per lookup key (a key, once bound to a flow, stays bound to it).
  struct FlowCacheEntry {
    int req_node = -2, rsp_node = -2;
    uint32_t qpn = 0;
    Flow* flow = nullptr;
  };
  FlowCacheEntry data_flow_cache, ctl_flow_cache;
  std::map<std::tuple<int, int, uint32_t>, int> by_data;    // (req node, rsp node, rsp qpn)
  std::map<std::tuple<int, int, uint32_t>, int> by_ctl;     // (req node, rsp node, req qpn)
  std::map<std::pair<int, int>, std::vector<int>> by_pair;  // (req node, rsp node) -> flows
  uint64_t flows_refused = 0;  // inferred QPs beyond kMaxFlows (garbage traffic)
  uint64_t nodes_refused = 0;

  DedupTable dedup;
  uint64_t next_pkt = 1;

  std::map<std::tuple<Addr, Addr, uint16_t>, EndpointReq> ep_reqs;  // (src, dst, req_id)
  std::deque<std::pair<uint64_t, std::tuple<Addr, Addr, uint16_t>>> ep_order;
  static constexpr size_t kMaxEndpointReqs = 1 << 18;
  std::set<std::pair<Addr, Addr>>
      ep_pruned_pairs;  // (requester, responder) with forgotten requests
  std::unordered_map<std::string, uint8_t> decision_links;  // injector link -> bit (8 kept)
  // A data decision read (decision_lookahead_ns early) before its copy showed up in a capture.
  struct ParkedDecision {
    Flow* fl = nullptr;
    int64_t psn = 0;
    uint64_t t_ns = 0;
    std::optional<uint32_t> ev;
    uint8_t link_bit = 0;
    DecisionAction action = DecisionAction::kOther;
    // No flow yet (the decision came before the QP's first frame): the flow it names.
    uint32_t qpn = 0;
    uint32_t psn24 = 0;
    int src_node = -1, dst_node = -1;
  };
  // In arrival order (the oldest decision for a link gets the oldest copy), with counts per
  // (flow, PSN) key so that the common case, a copy nothing waits for, costs one load from a
  // 128 KiB table (in PSN order: see flow_key), and with the positions of the decisions of each
  // key, so that a copy some decision waits for visits those decisions only instead of the queue
  // (up to 4096 entries).
  struct ParkedDecisions {
    // Decision k (k from 0 in arrival order) is q[k - q_base]; those applied stay in q, marked
    // gone, until they reach its front.
    std::deque<ParkedDecision> q;
    std::deque<bool> gone;
    uint64_t q_base = 0;
    size_t live_n = 0;
    std::unordered_map<uint64_t, std::vector<uint64_t>>
        by_key;  // key -> arrival numbers, ascending
    std::vector<uint16_t> live = std::vector<uint16_t>(size_t{1} << 16);  // by key's top bits
    std::vector<uint64_t> scratch;
    static uint64_t key(const ParkedDecision& pd);
    static uint64_t flow_key(const Flow* fl, int64_t psn);
    static uint64_t nameless_key(uint32_t qpn, int src_node, int dst_node, uint32_t psn24);
    // A key's top 16 bits (its counter in `live`), without the rest of its hash.
    static uint64_t flow_slot(const Flow* fl, int64_t psn);
    static uint64_t nameless_slot(uint32_t qpn, int src_node, int dst_node, uint32_t psn24);
    bool empty() const { return live_n == 0; }
    bool waiting_slot(uint64_t slot) const { return live[slot] != 0; }  // may be a false positive
    void count(uint64_t k, int delta) {
      live[k >> 48] = static_cast<uint16_t>(live[k >> 48] + delta);
    }
    void push(const ParkedDecision& pd, uint64_t now_ns, uint64_t max_age_ns);
    // The arrival numbers of the decisions with key a or b, ascending, in `scratch`.
    void gather(uint64_t a, uint64_t b, bool with_b);
    void drop_gone_front();
  } parked;
  Tx* decided_tx(const Decision& d, PsnRec& r, uint8_t link_bit);
  void mpr_check(const Obs& o, Flow& fl, int64_t p);
  uint8_t decision_link_bit(const std::string& link);
  static void mark_decided(Tx& t, DecisionAction a);
  bool decision_may_concern(const Tx& t, uint64_t t_ns, const std::optional<uint32_t>& ev,
                            uint8_t link_bit) const;
  void unpark_decisions(Flow& fl, int64_t p, Tx& tx);
  bool answer_port_lost(const Flow& fl, const Pending& pd) const;
  bool answer_lost_on_link(const Flow& fl, int64_t p, const Pending& pd) const;
  Flow::RspOrder& rsp_order(Flow& fl, const Obs& o);

  std::map<std::pair<uint32_t, Addr>, std::pair<uint16_t, uint64_t>> ts16_last;  // R22
  struct Ts16Cache {
    uint32_t point = 0;
    Addr addr{};
    std::pair<uint16_t, uint64_t>* value = nullptr;
  } ts16_cache;

  std::deque<uint64_t> corrupt_times;  // injector corrupt decisions

  std::vector<Annotation> annotations;
  bool annotate = true;  // false: no annotations (mrct check --live has no --annotate)
  uint64_t frames = 0, packets = 0, first_ts = kNoTime, last_ts = 0, now = 0;
  uint64_t decisions = 0;
  uint64_t next_sweep = 0;
  std::vector<CaptureSummary> capture_summaries;

  wire::DecodedFrame decoded;  // on_frame() decodes into it, frame after frame
  // The frame announced by prefetch(): its merge key, so that on_frame() does not hash it again.
  const std::byte* ahead_data = nullptr;
  size_t ahead_size = 0;
  wire::LinkType ahead_link = wire::LinkType::kEthernet;
  uint64_t ahead_key = 0;

  // --- results (engine.cc)
  bool on(RuleIdx r) const { return enabled[r]; }
  void judge(RuleIdx r, uint64_t n = 1) { rules[r].checked += n; }
  // Frames frame_rules() found clean, by FramePre: what they judge is added to `rules` only
  // where a count is read (fail_at's max, interim()), so that a clean frame costs one increment
  // instead of one per rule it judges.
  std::array<uint64_t, 3> clean_frames{};
  uint64_t clean_checked(size_t r) const;  // the judgements of `r` in clean_frames
  void fold_clean_frames();                // adds them to `rules`, and empties clean_frames
  void fail(RuleIdx r, const Obs& o, std::string msg);
  void fail_at(RuleIdx r, uint32_t point, uint64_t frame, uint64_t ts, std::string msg);
  void excuse(RuleIdx r) { rules[r].excused++; }
  // Records why a rule could not be judged (first reason wins; no allocation after that).
  void na(RuleIdx r, const char* reason) {
    if (rules[r].na_reason.empty()) rules[r].na_reason = reason;
  }

  // --- dispatch (engine.cc)
  void on_frame(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                wire::LinkType link, uint32_t orig_len);
  // The pipelined checker (Checker with jobs > 1) splits on_frame() in two: decode_stage() and
  // icrc_stage() on the thread that reads the captures (they need no engine state), and
  // on_decoded() with the rest on the thread that judges. Same verdicts as on_frame(). The
  // reading thread also computes the frame's merge key (shape_key(), a function of the bytes
  // alone); on_decoded() takes it, and the judging thread fetches its merge-table line ahead
  // (may_merge() tells when that is worth it).
  // `layout`: wp's lookups read once (wire::DecodeLayout), for the reading thread's decode.
  static bool decode_stage(const wire::WireProfile& wp, wire::Bytes data, wire::LinkType link,
                           wire::DecodedFrame& f, const wire::DecodeLayout* layout = nullptr);
  // Verifies the ICRC of n decoded frames (at most kIcrcStageMax) at once (wire::compute_icrcs,
  // which interleaves them), setting icrc_checked and icrc_ok as on_frame() does.
  static constexpr size_t kIcrcStageMax = 8;
  static void icrc_stage(wire::DecodedFrame* const* fs, size_t n);
  void on_decoded(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                  wire::LinkType link, uint32_t orig_len, const wire::DecodedFrame& f, bool ok,
                  uint64_t key, std::optional<uint64_t> content_h = std::nullopt,
                  FramePre frame_pre = FramePre::kJudge);
  // What frame_rules() will find in a frame, from the decoded frame alone (the ICRC verified):
  // kClean / kCleanIcrc when it breaks none of the MRC-FRM rules frame_rules() judges and needs
  // none of the engine's state, so that frame_rules() only counts the rules judged; kJudge for
  // any other frame (a violation, a decode error, a trimmed data packet, SRv6, not MRC), which
  // frame_rules() judges in full. The pipelined checker runs it on the reading thread.
  static FramePre frame_rules_stage(const wire::DecodedFrame& f, bool ok);
  // content_hash() of a frame whose payload MRC-REQ-005 and the content checks hash (new data,
  // not trimmed, decoded whole); nullopt for any other frame. A function of the decoded frame
  // alone: the pipelined checker runs it on the reading thread.
  static std::optional<uint64_t> payload_hash_stage(const wire::DecodedFrame& f, bool ok);
  // content_hash(*o.f), computed once per frame.
  static uint64_t frame_content_hash(const Obs& o) {
    return o.content_hash_known ? o.content_hash : content_hash(*o.f);
  }
  void tick(uint64_t ts);  // the clock and the periodic sweep, per frame
  uint64_t take_early_key(wire::Bytes data, wire::LinkType link);
  template <bool C>
  using FrameT = std::conditional_t<C, const wire::DecodedFrame, wire::DecodedFrame>;
  template <bool IcrcDone>
  void judge_frame(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                   wire::LinkType link, uint32_t orig_len, FrameT<IcrcDone>& frame, bool ok,
                   uint64_t early_key, std::optional<uint64_t> content_h, FramePre frame_pre);
  void on_decision(const Decision& d);
  void prefetch(wire::Bytes data, wire::LinkType link);
  Report finish(uint64_t end_ts);
  // The results so far, without ending the trace: obligations still open are neither failed nor
  // forgotten, and the engine goes on (mrct check --live's periodic verdict).
  Report interim() const;
  // Called on every violation, on the thread that judges (mrct check --live keeps a capture
  // around each one).
  std::function<void(RuleIdx, uint32_t point, uint64_t frame, uint64_t ts)> on_violation;
  int node_of(const Addr& a);
  int known_node(const std::optional<Addr>& a) const;
  uint64_t frame_key(const Obs& o, const wire::DecodedFrame& f) const;
  // 0: unusual shape, or a frame that needs no merge-table lookup (see merges()).
  uint64_t early_frame_key(wire::Bytes data, wire::LinkType link) const;
  // The merge key of a frame of the usual shape read from its bytes, whether or not it will be
  // looked up (0: another shape); needs no engine state. `layout` (built from wp) answers the
  // port and opcode lookups.
  static uint64_t shape_key(const wire::WireProfile& wp, wire::Bytes data, wire::LinkType link,
                            const wire::DecodeLayout* layout = nullptr);
  // Whether a frame of the usual shape from src may go through the merge table (false: one that
  // certainly does not); only decides whether its merge-table line is fetched ahead.
  bool may_merge(const Addr& src, bool is_data) const;
  // Whether a frame goes through the merge table. With a single capture point, a packet is never
  // seen at another point: a frame there is a new packet, except a data packet away from its
  // sender's own interface, whose byte-identical copy is a duplicate (ts16 tells resends apart).
  bool merges(bool data, bool at_src, bool own_iface) const {
    return points.size() > 1 || (data && !(at_src && own_iface));
  }
  uint64_t merge(Obs& o, const wire::DecodedFrame& f, uint64_t key);
  Flow* flow_for_data(const Obs& o, uint32_t rsp_qpn, bool create);
  Flow* flow_for_ctl(const Obs& o, uint32_t req_qpn, std::optional<uint16_t> spdcid, bool create);
  Flow* flow_for_decision(const Decision& d, bool data);
  Flow& new_flow(int req_node, int rsp_node, const Addr& req, const Addr& rsp);
  void bind_data(Flow& fl, uint32_t rsp_qpn);
  void bind_ctl(Flow& fl, uint32_t req_qpn);
  void sweep(uint64_t now_ts);
  bool requester_captured(const Flow& fl) const {
    return fl.req_node >= 0 && node_has_point[static_cast<size_t>(fl.req_node)];
  }
  bool responder_captured(const Flow& fl) const {
    return fl.rsp_node >= 0 && node_has_point[static_cast<size_t>(fl.rsp_node)];
  }
  // The observation counts as arrival at the responder / requester.
  bool arrival_at_rsp(const Flow& fl, const Obs& o) const;
  bool arrival_at_req(const Flow& fl, const Obs& o) const;
  // Without a capture at the requester, a control packet the injector dropped never arrived.
  bool ctl_dropped(const Flow& fl, const Obs& o) const;
  uint64_t mpr_eff(const Flow& fl) const;     // PSNs; 0 unknown
  uint64_t timeout_ns(const Flow& fl) const;  // 0 unknown

  // --- framing.cc: stateless per-frame rules
  // pre: frame_rules_stage(f, decoded_ok).
  void frame_rules(const Obs& o, const wire::DecodedFrame& f, bool decoded_ok, FramePre pre);
  void non_roce_rules(const Obs& o, const wire::DecodedFrame& f);
  // Counts a frame that is not MRC under its reason.
  void unrecognised(const Obs& o, const wire::DecodedFrame& f);
  std::string describe(const UnrecognisedKey& k) const;
  std::map<UnrecognisedKey, UnrecognisedCount> unrecognised_frames;
  // SRv6 framing beyond the header chain: the inner DA against the peer's GID (MRC-FRM-012) and
  // the UDP checksum (MRC-FRM-013).
  void srv6_inner_da(const Obs& o, const wire::DecodedFrame& f);
  void udp_checksum(const Obs& o, const wire::DecodedFrame& f);
  bool corrupt_near(uint64_t ts) const;
  // Times in evidence text: relative to the first frame ("t=+0.012345678 s", the clock of the
  // report's evidence lines; absolute ns stay in Evidence::ts_ns), and durations with a unit
  // ("23.08 ms").
  std::string at(uint64_t ts) const;
  static std::string dur(uint64_t ns);  // an injector 'corrupt' decision explains this frame
  size_t profile_nodes = 0;  // node ids below this come from the profile (nodes[], qps[])
  uint64_t mrc_frames = 0;
  void hop_rules(const Obs& o, const wire::DecodedFrame& f, const DedupEntry& prev,
                 const DedupExt& prev_ext);
  void trim_shape(const Obs& o, const wire::DecodedFrame& f, uint32_t untrimmed_ib_len);

  // --- requester.cc
  void on_data(Obs& o, Flow& fl);
  void data_arrival(const Obs& o, Flow& fl, int64_t p, PsnRec& r, Tx& tx);
  void on_probe(const Obs& o, Flow& fl);
  void new_psn_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void retx_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void neighbour_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void evict(Flow& fl, PsnRec& r, int64_t p);
  // Judges the per-PSN obligations of p (retransmit after NACK / drop, trim NACK) as of `at`:
  // failed when older than the end grace, forgotten otherwise.
  void settle(Flow& fl, int64_t p, uint64_t at);
  void ack_covered(Flow& fl, int64_t p, PsnRec& r, uint64_t ts);

  // --- responder.cc
  void on_sack(const Obs& o, Flow& fl);
  void on_nack(const Obs& o, Flow& fl);
  void on_tack(const Obs& o, Flow& fl);

  // --- evstate.cc
  void ev_on_data(const Obs& o, Flow& fl, int64_t psn, bool is_new);
  void ev_spray(Flow& fl, const Flow::SprayPend& sp);
  void ev_suspect(const Obs& o, Flow& fl, RuleIdx r, std::string msg);
  void ev_resolve(Flow& fl, uint32_t wev, uint64_t ts);
  void ev_spray_drain(Flow& fl, uint64_t now_ts, bool final);
  void ev_spray_settle(Flow& fl, uint64_t now_ts, bool final);
  void ev_signal(const Obs& o, Flow& fl, uint32_t wev, EvMode mode, const char* what);
  void ev_probe_ok(const Obs& o, Flow& fl, uint32_t wev);
  void ev_probe_sent(const Obs& o, Flow& fl, uint32_t wev);
  // `decided_at`: when the requester's timer expired (the retransmission may leave later).
  void ev_timeout_retire(const Obs& o, Flow& fl, uint32_t wev, uint64_t decided_at);
  void ev_sweep(Flow& fl, uint64_t now_ts, bool final);
  void ev_carriage(const Obs& o, const wire::DecodedFrame& f, const Flow* fl);

  // --- probes.cc: endpoint operations
  void on_endpoint(const Obs& o, const wire::DecodedFrame& f);
  // MRC-PRB-007: data arriving at a responder that should probe its reverse EVs.
  void rev_on_data(const Obs& o, Flow& fl);
  void rev_finish(Flow& fl);

  // --- planes.cc: per-plane EV rules (MRC-EV-002, -007, -011, -012)
  // By (sender node, peer node); entries are never erased (flows keep pointers to them).
  std::map<std::pair<int, int>, PortStatus> port_status;
  void port_signal(const Obs& o, int sender, int peer, uint32_t usable, uint32_t known,
                   const char* how);
  void plane_on_packet(const Obs& o, const wire::DecodedFrame& f, Flow& fl, bool data);
  void plane_on_sack(const Obs& o, const wire::DecodedFrame& f, Flow& fl);

  // --- cc.cc: MRC-CC-002
  void cc_on_data(const Obs& o, const wire::DecodedFrame& f, Flow& fl);
  void cc_on_sack(const Obs& o, const wire::DecodedFrame& f, Flow& fl);
};

// Merge-table key of a frame (see Engine::merge): RoCE addresses, UDP sport and the first
// `ib_bytes` bytes from BTH with BTH byte 4 (FECN/BECN, rewritten by switches) left out.
uint64_t merge_key(const Addr& src, const Addr& dst, uint16_t sport, const uint8_t* bth,
                   size_t ib_bytes);

std::string hex(uint64_t v, int width = 0);

// The two paths of parse_decision(): the flat-object fast path (false: needs the full parser)
// and the full JSON parser (the reference; tests compare them).
bool parse_decision_fast(std::string_view line, Decision& out);
bool parse_decision_json(std::string_view line, Decision& out, std::string& error);

// The DUT profile of a check (trace.cc): the profile file, the wire profile (given or detected
// from the captures) and the tolerance preset; and the notes the report gets about them.
struct ProfileOrigin {
  std::string wire;                     // Report::wire_profile_origin
  std::vector<std::string> wire_notes;  // what mrct detect inferred
  std::string derivation;               // --tolerances auto
};
bool prepare_profile(const CheckOptions& opts, DutProfile& prof, ProfileOrigin& origin,
                     std::string& error);
void add_profile_notes(const CheckOptions& opts, const DutProfile& prof,
                       const ProfileOrigin& origin, Report& report);
// Writes a report atomically (path.tmp, then rename; "-" = `out`); false after a message on `err`.
bool write_report_to(const std::string& path, std::ostream& out, std::ostream& err,
                     void (*fn)(const Report&, std::ostream&), const Report& r);

// Reads a capture's first frames and guesses the node it was taken on (see trace.cc).
std::optional<Addr> guess_capture_node(const std::string& path, const DutProfile& prof,
                                       std::string& how);

}  // namespace mrc::check::detail
