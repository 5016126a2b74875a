// The completion ring of device mode (cq_ring.h).
#include "reference-impl/provider/cq_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace softmrc::cq_ring {

namespace {

constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW;

Header* header(void* map) {
  return static_cast<Header*>(map);
}

ibv_wc* slot(void* map, uint64_t index, uint32_t slots) {
  auto* base = reinterpret_cast<ibv_wc*>(static_cast<uint8_t*>(map) + kSlotsOffset);
  return base + (index & (slots - 1));
}

}  // namespace

uint32_t slots_for(int cqe) {
  if (cqe < 1 || static_cast<uint32_t>(cqe) > kMaxSlots) return 0;
  uint32_t s = 1;
  while (s < static_cast<uint32_t>(cqe)) s <<= 1;
  return s;
}

size_t bytes_for(uint32_t slots) {
  return kSlotsOffset + static_cast<size_t>(slots) * sizeof(ibv_wc);
}

Producer::~Producer() {
  if (map_ != nullptr) munmap(map_, bytes_);
  if (fd_ >= 0) close(fd_);
}

bool Producer::create(uint32_t slots) {
  if (slots == 0 || slots > kMaxSlots || (slots & (slots - 1)) != 0) {
    errno = EINVAL;
    return false;
  }
  const size_t bytes = bytes_for(slots);
  const int fd = memfd_create("softmrc-cq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return false;
  void* map = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      fcntl(fd, F_ADD_SEALS, kSeals | F_SEAL_SEAL) == 0)
    map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    const int e = errno;
    close(fd);
    errno = e;
    return false;
  }
  Header* h = header(map);
  h->magic = kMagic;
  h->version = kVersion;
  h->slots = slots;
  h->slot_size = sizeof(ibv_wc);
  h->produced.store(0, std::memory_order_relaxed);
  h->consumed.store(0, std::memory_order_relaxed);
  fd_ = fd;
  map_ = map;
  bytes_ = bytes;
  slots_ = slots;
  produced_ = 0;
  return true;
}

int64_t Producer::pending() const {
  const uint64_t consumed = header(map_)->consumed.load(std::memory_order_acquire);
  const uint64_t pending = produced_ - consumed;  // wraps when consumed > produced_
  if (pending > slots_) return -1;
  return static_cast<int64_t>(pending);
}

bool Producer::push(const ibv_wc& wc) {
  if (map_ == nullptr) return false;
  const int64_t pending_now = pending();
  if (pending_now < 0 || pending_now >= static_cast<int64_t>(slots_)) return false;
  std::memcpy(slot(map_, produced_, slots_), &wc, sizeof wc);
  ++produced_;
  header(map_)->produced.store(produced_, std::memory_order_release);
  return true;
}

Consumer::~Consumer() {
  if (map_ != nullptr) munmap(map_, bytes_);
}

bool Consumer::attach(int fd, uint32_t slots) {
  struct stat st {};
  const size_t bytes = bytes_for(slots);
  const bool ok = slots != 0 && slots <= kMaxSlots && (slots & (slots - 1)) == 0 &&
                  fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes &&
                  (fcntl(fd, F_GET_SEALS) & kSeals) == kSeals;
  void* map = ok ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  close(fd);
  if (map == MAP_FAILED) {
    errno = EPROTO;
    return false;
  }
  const Header* h = header(map);
  if (h->magic != kMagic || h->version != kVersion || h->slots != slots ||
      h->slot_size != sizeof(ibv_wc)) {
    munmap(map, bytes);
    errno = EPROTO;
    return false;
  }
  map_ = map;
  bytes_ = bytes;
  slots_ = slots;
  consumed_ = 0;  // a new ring: whatever the device wrote there is not ours to believe
  return true;
}

int Consumer::poll(int n, ibv_wc* wc) {
  Header* h = header(map_);
  const uint64_t available = h->produced.load(std::memory_order_acquire) - consumed_;
  if (available > slots_) {
    errno = EPROTO;
    return -1;
  }
  const int take = available < static_cast<uint64_t>(n) ? static_cast<int>(available) : n;
  for (int i = 0; i < take; ++i) std::memcpy(&wc[i], slot(map_, consumed_ + i, slots_), sizeof *wc);
  if (take > 0) {
    consumed_ += static_cast<uint64_t>(take);
    h->consumed.store(consumed_, std::memory_order_release);
  }
  return take;
}

}  // namespace softmrc::cq_ring
