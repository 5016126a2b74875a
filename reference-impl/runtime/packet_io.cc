// AF_PACKET back end: a TPACKET_V2 receive ring and sendmmsg transmit on one interface, plus
// the UDP sink socket both back ends keep on port 4791.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

#include "reference-impl/runtime/sys.h"

#ifndef PACKET_IGNORE_OUTGOING
#define PACKET_IGNORE_OUTGOING 23
#endif
#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif

namespace mrc::runtime {
namespace {

// Accepts IPv6 frames that are UDP to 4791 or IPv6-in-IPv6 / routing header (SRv6 outer header:
// the engine decodes the inner packet itself). The EtherType check matters for a ring bound to
// ETH_P_ALL (a tap); bound to ETH_P_IPV6 it always holds.
sock_filter kRoceFilter[] = {
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 12),             // 0: EtherType
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x86DD, 0, 7),  // 1: IPv6 ? 2 : drop
    BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 14 + 6),         // 2: IPv6 next header
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 17, 0, 2),      // 3: UDP ? 4 : 6
    BPF_STMT(BPF_LD | BPF_H | BPF_ABS, 14 + 40 + 2),    // 4: UDP dport
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 4791, 2, 3),    // 5: 4791 ? accept : drop
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 41, 1, 0),      // 6: IPv6-in-IPv6 ? accept : 7
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 43, 0, 1),      // 7: routing header ? accept : drop
    BPF_STMT(BPF_RET | BPF_K, 0x40000),                 // 8: accept
    BPF_STMT(BPF_RET | BPF_K, 0),                       // 9: drop
};
constexpr size_t kRoceFilterPort = 5;

sock_filter kDropAll[] = {BPF_STMT(BPF_RET | BPF_K, 0)};

class PacketIo final : public PortIo {
 public:
  ~PacketIo() override {
    if (ring_ != nullptr) munmap(ring_, ring_bytes_);
  }

  Status open(const PortIoConfig& cfg) {
    cfg_ = cfg;
    stats.iface = cfg.iface.name;
    fd_ = Fd(socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_.ok()) return sys_error("socket(AF_PACKET) for " + cfg.iface.name);
    const int v2 = TPACKET_V2;
    if (setsockopt(fd_.get(), SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) < 0)
      return sys_error("PACKET_VERSION on " + cfg.iface.name);
    // The filter with the wire profile's port.
    std::array<sock_filter, std::size(kRoceFilter)> filter;
    std::copy(std::begin(kRoceFilter), std::end(kRoceFilter), filter.begin());
    filter[kRoceFilterPort].k = cfg.roce_port;
    sock_fprog prog{static_cast<unsigned short>(filter.size()), filter.data()};
    if (cfg.rx_filter_prog_fd >= 0) {
      // The kernel receive filter (rx_filter.cc): accepts what the classic one does, less the
      // data packets the engine would refuse anyway.
      if (setsockopt(fd_.get(), SOL_SOCKET, SO_ATTACH_BPF, &cfg.rx_filter_prog_fd,
                     sizeof cfg.rx_filter_prog_fd) < 0)
        return sys_error("SO_ATTACH_BPF (receive filter) on " + cfg.iface.name);
    } else if (setsockopt(fd_.get(), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0) {
      return sys_error("SO_ATTACH_FILTER on " + cfg.iface.name);
    }
    // Our own transmissions must not come back through the ring (and kernel-sent frames are
    // not ours to judge).
    const int one = 1;
    (void)setsockopt(fd_.get(), SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);

    frame_size_ = cfg.frame_bytes;
    const uint32_t frames_per_block = 16;
    block_size_ = frame_size_ * frames_per_block;
    uint32_t frames = std::max<uint32_t>(cfg.ring_frames, frames_per_block);
    frames = (frames + frames_per_block - 1) / frames_per_block * frames_per_block;
    tpacket_req req{};
    req.tp_block_size = block_size_;
    req.tp_block_nr = frames / frames_per_block;
    req.tp_frame_size = frame_size_;
    req.tp_frame_nr = frames;
    if (setsockopt(fd_.get(), SOL_PACKET, PACKET_RX_RING, &req, sizeof req) < 0)
      return sys_error("PACKET_RX_RING (" + std::to_string(frames) + " x " +
                       std::to_string(frame_size_) + " B) on " + cfg.iface.name);
    frame_nr_ = frames;
    ring_bytes_ = size_t{block_size_} * req.tp_block_nr;
    void* m = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (m == MAP_FAILED) return sys_error("mmap of the receive ring of " + cfg.iface.name);
    ring_ = static_cast<std::byte*>(m);

    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    // A tap (ETH_P_ALL) is served in __netif_receive_skb_core before tc ingress, where the
    // ingress sink then ends the frames it took; bound to ETH_P_IPV6 the ring is served after
    // tc ingress, beside the IPv6 receive that every frame also takes.
    sll.sll_protocol = htons(cfg.tap ? ETH_P_ALL : ETH_P_IPV6);
    sll.sll_ifindex = cfg.iface.index;
    if (bind(fd_.get(), reinterpret_cast<sockaddr*>(&sll), sizeof sll) < 0)
      return sys_error("bind(AF_PACKET) to " + cfg.iface.name);
    return Status::Ok();
  }

  int fd() const override { return fd_.get(); }

  size_t receive(size_t budget,
                 const std::function<void(std::span<const std::byte>, uint64_t)>& fn) override {
    size_t n = 0;
    while (n < budget) {
      auto* hdr = reinterpret_cast<tpacket2_hdr*>(ring_ + size_t{next_} * frame_size_);
      const uint32_t status = __atomic_load_n(&hdr->tp_status, __ATOMIC_ACQUIRE);
      if ((status & TP_STATUS_USER) == 0) break;
      const bool truncated = (status & TP_STATUS_COPY) != 0 || hdr->tp_snaplen < hdr->tp_len ||
                             hdr->tp_len > cfg_.frame_bytes;
      if (truncated) {
        ++stats.rx_truncated;
      } else {
        const auto* frame = reinterpret_cast<const std::byte*>(hdr) + hdr->tp_mac;
        const uint64_t ts = uint64_t{hdr->tp_sec} * 1'000'000'000ull + hdr->tp_nsec;
        ++stats.rx_frames;
        stats.rx_bytes += hdr->tp_snaplen;
        fn({frame, hdr->tp_snaplen}, ts);
      }
      __atomic_store_n(&hdr->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
      next_ = (next_ + 1) % frame_nr_;
      ++n;
    }
    return n;
  }

  uint64_t ring_drops() override {
    tpacket_stats st{};
    socklen_t len = sizeof st;
    if (getsockopt(fd_.get(), SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0) drops_ += st.tp_drops;
    stats.rx_ring_drops = drops_;
    return drops_;
  }

 private:
  PortIoConfig cfg_;
  Fd fd_;
  std::byte* ring_ = nullptr;
  size_t ring_bytes_ = 0;
  uint32_t frame_size_ = 0, block_size_ = 0, frame_nr_ = 0, next_ = 0;
  uint64_t drops_ = 0;
};

class PacketTx final : public TxIo {
 public:
  Status open(uint32_t batch) {
    // Protocol 0: this socket receives nothing, it only transmits.
    fd_ = Fd(socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_.ok()) return sys_error("socket(AF_PACKET) for transmit");
    const int one = 1;
    (void)setsockopt(fd_.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    const int sndbuf = 8 << 20;
    (void)setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    msgs_.resize(batch);
    iovs_.resize(batch);
    names_.resize(batch);
    return Status::Ok();
  }
  int fd() const override { return fd_.get(); }

  int send(std::span<const TxItem> items) override {
    size_t done = 0;
    while (done < items.size()) {
      const size_t k = std::min(items.size() - done, msgs_.size());
      for (size_t i = 0; i < k; ++i) {
        const TxItem& it = items[done + i];
        sockaddr_ll& to = names_[i];
        to = sockaddr_ll{};
        to.sll_family = AF_PACKET;
        to.sll_protocol = htons(ETH_P_IPV6);
        to.sll_ifindex = it.ifindex;
        to.sll_halen = 6;
        std::memcpy(to.sll_addr, it.dst_mac.data(), 6);
        iovs_[i].iov_base = const_cast<std::byte*>(it.frame.data());
        iovs_[i].iov_len = it.frame.size();
        msgs_[i] = mmsghdr{};
        msgs_[i].msg_hdr.msg_name = &to;
        msgs_[i].msg_hdr.msg_namelen = sizeof to;
        msgs_[i].msg_hdr.msg_iov = &iovs_[i];
        msgs_[i].msg_hdr.msg_iovlen = 1;
      }
      const int r = sendmmsg(fd_.get(), msgs_.data(), static_cast<unsigned>(k), MSG_DONTWAIT);
      ++syscalls;
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == ENOBUFS) {
          ++blocked;
          return static_cast<int>(done);
        }
        if (done > 0) return static_cast<int>(done);
        ++errors;
        return -errno;
      }
      done += static_cast<size_t>(r);
      if (static_cast<size_t>(r) < k) {
        ++blocked;
        return static_cast<int>(done);
      }
    }
    return static_cast<int>(done);
  }

 private:
  Fd fd_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<sockaddr_ll> names_;
};

// AF_PACKET transmit through a TPACKET_V2 TX ring (PACKET_TX_RING): the frames are written into
// the mmapped ring and one send() per run of frames for the same interface hands them all to
// the kernel, which builds each skb on the ring's pages (no copy from user iovecs, no
// per-message sockaddr and msghdr walk). The socket is not bound: each kick names the egress
// interface in its sockaddr_ll, so frames still leave in the engine's order across planes (a
// run ends where the interface changes). SOCK_RAW: the frame carries its own Ethernet header
// with the next hop's MAC.
//
// Slot protocol (kernel and user share one head): a slot is ours when TP_STATUS_AVAILABLE; we
// fill it and mark it TP_STATUS_SEND_REQUEST; the kick turns each into TP_STATUS_SENDING and
// advances the kernel's head, and the skb's destructor makes it AVAILABLE again. A kick that
// fails (ENOBUFS from a full or carrier-less device, EAGAIN with a full socket buffer) leaves
// the kernel's head on the failed slot and every later requested slot unsent; those are handed
// back to AVAILABLE and the frames reported as not sent, so that the caller retries or drops
// them as with sendmmsg and the next send() refills the same slots.
class PacketRingTx final : public TxIo {
 public:
  ~PacketRingTx() override {
    if (ring_ != nullptr) munmap(ring_, ring_bytes_);
  }

  Status open(uint32_t ring_frames, uint32_t frame_bytes, uint32_t batch) {
    if (Status st = mmsg_.open(batch); !st.ok()) return st;
    fd_ = Fd(socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd_.ok()) return sys_error("socket(AF_PACKET) for the transmit ring");
    const int v2 = TPACKET_V2;
    if (setsockopt(fd_.get(), SOL_PACKET, PACKET_VERSION, &v2, sizeof v2) < 0)
      return sys_error("PACKET_VERSION on the transmit ring");
    const int one = 1;
    (void)setsockopt(fd_.get(), SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one);
    // Every frame in flight holds socket buffer space until its skb is freed.
    const int sndbuf = 32 << 20;
    (void)setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    frame_size_ = frame_bytes;
    data_off_ = TPACKET2_HDRLEN - sizeof(sockaddr_ll);
    const uint32_t frames_per_block = 16;
    uint32_t frames = std::max<uint32_t>(ring_frames, frames_per_block);
    frames = (frames + frames_per_block - 1) / frames_per_block * frames_per_block;
    tpacket_req req{};
    req.tp_block_size = frame_size_ * frames_per_block;
    req.tp_block_nr = frames / frames_per_block;
    req.tp_frame_size = frame_size_;
    req.tp_frame_nr = frames;
    if (setsockopt(fd_.get(), SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0)
      return sys_error("PACKET_TX_RING (" + std::to_string(frames) + " x " +
                       std::to_string(frame_size_) + " B)");
    frame_nr_ = frames;
    ring_bytes_ = size_t{req.tp_block_size} * req.tp_block_nr;
    void* m = mmap(nullptr, ring_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_.get(), 0);
    if (m == MAP_FAILED) return sys_error("mmap of the transmit ring");
    ring_ = static_cast<std::byte*>(m);
    return Status::Ok();
  }
  int fd() const override { return fd_.get(); }

  int send(std::span<const TxItem> items) override {
    // Frames sprayed over planes alternate interfaces frame by frame: a kick per run would be
    // a system call per frame, so short runs go through sendmmsg on a second socket instead
    // (both transmit synchronously through the device, so the order across calls holds).
    size_t runs = 1;
    for (size_t i = 1; i < items.size(); ++i) runs += items[i].ifindex != items[i - 1].ifindex;
    if (runs * kMinRunFrames > items.size()) {
      const uint64_t b = mmsg_.blocked, e = mmsg_.errors, c = mmsg_.syscalls;
      const int r = mmsg_.send(items);
      blocked += mmsg_.blocked - b;
      errors += mmsg_.errors - e;
      syscalls += mmsg_.syscalls - c;
      return r;
    }
    return send_ring(items);
  }

 private:
  // Mean run length below which a batch goes through sendmmsg.
  static constexpr size_t kMinRunFrames = 4;

  int send_ring(std::span<const TxItem> items) {
    size_t done = 0;
    while (done < items.size()) {
      // One run: consecutive frames for the same interface, as many as there are free slots.
      const int ifindex = items[done].ifindex;
      size_t k = 0;
      while (done + k < items.size() && items[done + k].ifindex == ifindex) {
        tpacket2_hdr* hdr = slot(head_ + k);
        const uint32_t status = __atomic_load_n(&hdr->tp_status, __ATOMIC_ACQUIRE);
        // Still in flight (or requested): the ring is full.
        if ((status & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING | TP_STATUS_WRONG_FORMAT)) != 0)
          break;
        const std::span<const std::byte> f = items[done + k].frame;
        if (f.size() > frame_size_ - data_off_) {
          if (k > 0) break;  // kick what is before it first
          // Does not fit a slot: a hard error for this frame alone, as EMSGSIZE from sendmmsg.
          if (done > 0) return static_cast<int>(done);
          ++errors;
          return -EMSGSIZE;
        }
        std::memcpy(reinterpret_cast<std::byte*>(hdr) + data_off_, f.data(), f.size());
        hdr->tp_len = static_cast<uint32_t>(f.size());
        __atomic_store_n(&hdr->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
        ++k;
      }
      if (k == 0) {
        // The next slot is still in flight (its skb is queued somewhere on the path).
        ++blocked;
        ++ring_full;
        return static_cast<int>(done);
      }
      sockaddr_ll to{};
      to.sll_family = AF_PACKET;
      to.sll_protocol = htons(ETH_P_IPV6);
      to.sll_ifindex = ifindex;
      to.sll_halen = 6;
      const ssize_t r = sendto(fd_.get(), nullptr, 0, MSG_DONTWAIT,
                               reinterpret_cast<const sockaddr*>(&to), sizeof to);
      const int err = r < 0 ? errno : 0;
      ++syscalls;
      const size_t sent = sent_prefix(k);
      head_ = (head_ + static_cast<uint32_t>(sent)) % frame_nr_;
      done += sent;
      if (sent == k) continue;
      // The kernel stopped at slot `sent` (its head stays there): give back every unsent slot.
      for (size_t i = sent; i < k; ++i)
        __atomic_store_n(&slot(head_ + (i - sent))->tp_status, TP_STATUS_AVAILABLE,
                         __ATOMIC_RELEASE);
      if (err == 0 || err == EAGAIN || err == ENOBUFS || err == EINTR) {
        ++blocked;
        return static_cast<int>(done);
      }
      if (done > 0) return static_cast<int>(done);
      ++errors;
      return -err;
    }
    return static_cast<int>(done);
  }

  uint64_t ring_full = 0;  // times every slot was in flight

  tpacket2_hdr* slot(size_t i) const {
    return reinterpret_cast<tpacket2_hdr*>(ring_ + (i % frame_nr_) * size_t{frame_size_});
  }
  // How many of the k slots from head_ the kernel has taken (SENDING, or AVAILABLE again).
  size_t sent_prefix(size_t k) const {
    size_t i = 0;
    for (; i < k; ++i) {
      const uint32_t st = __atomic_load_n(&slot(head_ + i)->tp_status, __ATOMIC_ACQUIRE);
      if (st == TP_STATUS_SEND_REQUEST || (st & TP_STATUS_WRONG_FORMAT) != 0) break;
    }
    return i;
  }

  PacketTx mmsg_;
  Fd fd_;
  std::byte* ring_ = nullptr;
  size_t ring_bytes_ = 0;
  uint32_t frame_size_ = 0, frame_nr_ = 0, data_off_ = 0, head_ = 0;
};

}  // namespace

Status open_packet_io(const PortIoConfig& cfg, std::unique_ptr<PortIo>& out) {
  auto io = std::make_unique<PacketIo>();
  if (Status st = io->open(cfg); !st.ok()) return st;
  out = std::move(io);
  return Status::Ok();
}

Status open_packet_tx(uint32_t batch, std::unique_ptr<TxIo>& out) {
  auto tx = std::make_unique<PacketTx>();
  if (Status st = tx->open(batch); !st.ok()) return st;
  out = std::move(tx);
  return Status::Ok();
}

Status open_packet_ring_tx(uint32_t ring_frames, uint32_t frame_bytes, uint32_t batch,
                           std::unique_ptr<TxIo>& out) {
  auto tx = std::make_unique<PacketRingTx>();
  if (Status st = tx->open(ring_frames, frame_bytes, batch); !st.ok()) return st;
  out = std::move(tx);
  return Status::Ok();
}

Status open_sink_socket(Fd& out, uint16_t roce_port) {
  Fd s(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.ok()) return sys_error("socket(AF_INET6, SOCK_DGRAM) for the port-4791 sink");
  const int one = 1, zero = 0;
  (void)setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  (void)setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  // RoCEv2 senders (rxe, this engine) leave the IPv6 UDP checksum zero.
  (void)setsockopt(s.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one);
  sock_fprog prog{1, kDropAll};
  if (setsockopt(s.get(), SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof prog) < 0)
    return sys_error("SO_ATTACH_FILTER on the port-4791 sink");
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(roce_port);
  if (bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
    return sys_error("bind [::]:" + std::to_string(roce_port) + " for the sink socket");
  out = std::move(s);
  return Status::Ok();
}

}  // namespace mrc::runtime
