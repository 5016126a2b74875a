// Kernel-socket back end: raw IPv6 transmit (IPPROTO_RAW: the engine's IPv6 header goes out as
// built, so per-packet flow label, traffic class and UDP source port survive) and a UDP socket
// per plane for receive, with the IPv6 header rebuilt from ancillary data.
//
// Why not a UDP socket for transmit as well: one UDP socket has one source port, and the EV
// lives in the source port of every packet; IPV6_FLOWINFO_SEND would carry the flow label, but
// not the port.
#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "reference-impl/runtime/sys.h"

#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif
#ifndef IPV6_FLOWINFO
#define IPV6_FLOWINFO 11  // linux/in6.h; glibc's netinet/in.h lacks it
#endif

namespace mrc::runtime {
namespace {

constexpr size_t kEth = 14;
constexpr size_t kIp6 = 40;
constexpr size_t kUdp = 8;

class SocketIo final : public PortIo {
 public:
  Status open(const PortIoConfig& cfg, const wire::Ipv6Addr& gid) {
    cfg_ = cfg;
    gid_ = gid;
    stats.iface = cfg.iface.name;
    const std::string& name = cfg.iface.name;
    rx_ = Fd(socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!rx_.ok()) return sys_error("socket(AF_INET6, SOCK_DGRAM) for " + name);
    const int one = 1;
    (void)setsockopt(rx_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (setsockopt(rx_.get(), SOL_SOCKET, SO_BINDTODEVICE, name.c_str(),
                   static_cast<socklen_t>(name.size())) < 0)
      return sys_error("SO_BINDTODEVICE " + name + " (UDP receive socket)");
    if (setsockopt(rx_.get(), IPPROTO_UDP, UDP_NO_CHECK6_RX, &one, sizeof one) < 0)
      return sys_error("UDP_NO_CHECK6_RX on " + name);
    for (int opt : {IPV6_RECVPKTINFO, IPV6_RECVTCLASS, IPV6_RECVHOPLIMIT, IPV6_FLOWINFO}) {
      if (setsockopt(rx_.get(), IPPROTO_IPV6, opt, &one, sizeof one) < 0)
        return sys_error("IPv6 receive option " + std::to_string(opt) + " on " + name);
    }
    const int rcvbuf = 16 << 20;
    (void)setsockopt(rx_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    sockaddr_in6 sa{};
    sa.sin6_family = AF_INET6;
    sa.sin6_port = htons(cfg.roce_port);
    if (bind(rx_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
      return sys_error("bind [::]:" + std::to_string(cfg.roce_port) + " on " + name);

    const size_t b = cfg.batch;
    rx_bufs_.assign(b, std::vector<std::byte>(cfg.frame_bytes));
    rx_ctrl_.assign(b, std::vector<char>(256));
    rx_names_.resize(b);
    rx_iovs_.resize(b);
    rx_msgs_.resize(b);
    return Status::Ok();
  }

  int fd() const override { return rx_.get(); }

  size_t receive(size_t budget,
                 const std::function<void(std::span<const std::byte>, uint64_t)>& fn) override {
    size_t total = 0;
    const size_t head = kEth + kIp6 + kUdp;
    while (total < budget) {
      const size_t k = std::min(budget - total, rx_msgs_.size());
      for (size_t i = 0; i < k; ++i) {
        rx_iovs_[i].iov_base = rx_bufs_[i].data() + head;
        rx_iovs_[i].iov_len = rx_bufs_[i].size() - head;
        rx_msgs_[i] = mmsghdr{};
        rx_msgs_[i].msg_hdr.msg_name = &rx_names_[i];
        rx_msgs_[i].msg_hdr.msg_namelen = sizeof(sockaddr_in6);
        rx_msgs_[i].msg_hdr.msg_iov = &rx_iovs_[i];
        rx_msgs_[i].msg_hdr.msg_iovlen = 1;
        rx_msgs_[i].msg_hdr.msg_control = rx_ctrl_[i].data();
        rx_msgs_[i].msg_hdr.msg_controllen = rx_ctrl_[i].size();
      }
      const int r =
          recvmmsg(rx_.get(), rx_msgs_.data(), static_cast<unsigned>(k), MSG_DONTWAIT, nullptr);
      if (r <= 0) break;
      const uint64_t now_rt = monotonic_ns() + static_cast<uint64_t>(realtime_offset_ns());
      for (int i = 0; i < r; ++i) {
        const msghdr& mh = rx_msgs_[static_cast<size_t>(i)].msg_hdr;
        const size_t len = rx_msgs_[static_cast<size_t>(i)].msg_len;
        if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
          ++stats.rx_truncated;
          continue;
        }
        std::span<const std::byte> frame = rebuild(static_cast<size_t>(i), len);
        if (frame.empty()) continue;
        ++stats.rx_frames;
        ++stats.rx_reconstructed;
        stats.rx_bytes += frame.size();
        fn(frame, now_rt);
      }
      total += static_cast<size_t>(r);
      if (static_cast<size_t>(r) < k) break;
    }
    return total;
  }

 private:
  // Ethernet + IPv6 + UDP in front of the datagram, from the ancillary data. The fields the
  // kernel consumed (hop limit, traffic class, flow label) come back from cmsgs; the UDP
  // checksum is written as zero (the ICRC masks it).
  std::span<const std::byte> rebuild(size_t i, size_t len) {
    std::vector<std::byte>& b = rx_bufs_[i];
    const msghdr& mh = rx_msgs_[i].msg_hdr;
    const sockaddr_in6& from = rx_names_[i];
    wire::Ipv6Addr dst = gid_;
    uint32_t flowinfo = 0;
    int tclass = 0, hlim = 64;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr;
         c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), c)) {
      if (c->cmsg_level != IPPROTO_IPV6) continue;
      if (c->cmsg_type == IPV6_PKTINFO) {
        in6_pktinfo pi;
        std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
        std::memcpy(dst.data(), &pi.ipi6_addr, 16);
      } else if (c->cmsg_type == IPV6_TCLASS) {
        std::memcpy(&tclass, CMSG_DATA(c), sizeof tclass);
      } else if (c->cmsg_type == IPV6_HOPLIMIT) {
        std::memcpy(&hlim, CMSG_DATA(c), sizeof hlim);
      } else if (c->cmsg_type == IPV6_FLOWINFO) {
        uint32_t be;
        std::memcpy(&be, CMSG_DATA(c), sizeof be);
        flowinfo = ntohl(be);
      }
    }
    auto put = [&](size_t off, uint64_t v, int bytes) {
      for (int k = bytes - 1; k >= 0; --k) {
        b[off + static_cast<size_t>(k)] = static_cast<std::byte>(v & 0xFF);
        v >>= 8;
      }
    };
    std::memcpy(b.data(), cfg_.iface.mac.data(), 6);
    std::memset(b.data() + 6, 0, 6);
    put(12, 0x86DD, 2);
    const uint32_t vtf =
        (6u << 28) | (static_cast<uint32_t>(tclass & 0xFF) << 20) | (flowinfo & 0xFFFFF);
    put(kEth, vtf, 4);
    put(kEth + 4, kUdp + len, 2);
    put(kEth + 6, 17, 1);
    put(kEth + 7, static_cast<uint64_t>(hlim & 0xFF), 1);
    std::memcpy(b.data() + kEth + 8, &from.sin6_addr, 16);
    std::memcpy(b.data() + kEth + 24, dst.data(), 16);
    put(kEth + kIp6, ntohs(from.sin6_port), 2);
    put(kEth + kIp6 + 2, cfg_.roce_port, 2);
    put(kEth + kIp6 + 4, kUdp + len, 2);
    put(kEth + kIp6 + 6, 0, 2);
    return {b.data(), kEth + kIp6 + kUdp + len};
  }

  PortIoConfig cfg_;
  wire::Ipv6Addr gid_{};
  Fd rx_;
  std::vector<std::vector<std::byte>> rx_bufs_;
  std::vector<std::vector<char>> rx_ctrl_;
  std::vector<sockaddr_in6> rx_names_;
  std::vector<iovec> rx_iovs_;
  std::vector<mmsghdr> rx_msgs_;
};

// One raw IPv6 socket for every plane; IPV6_PKTINFO per datagram picks the egress interface.
class SocketTx final : public TxIo {
 public:
  Status open(uint32_t batch) {
    fd_ = Fd(socket(AF_INET6, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_RAW));
    if (!fd_.ok()) return sys_error("socket(AF_INET6, SOCK_RAW, IPPROTO_RAW)");
    const int sndbuf = 8 << 20;
    (void)setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf);
    msgs_.resize(batch);
    iovs_.resize(batch);
    names_.resize(batch);
    ctrl_.assign(batch, std::vector<char>(CMSG_SPACE(sizeof(in6_pktinfo))));
    orig_.resize(batch);
    return Status::Ok();
  }
  int fd() const override { return fd_.get(); }

  int send(std::span<const TxItem> items) override {
    size_t done = 0;
    while (done < items.size()) {
      const size_t k = std::min(items.size() - done, msgs_.size());
      size_t built = 0;
      for (size_t i = 0; i < k; ++i) {
        std::span<const std::byte> f = items[done + i].frame;
        if (f.size() < kEth + kIp6 || f[12] != std::byte{0x86} || f[13] != std::byte{0xDD}) {
          ++errors;  // not IPv6: the raw IPv6 socket cannot carry it
          continue;
        }
        sockaddr_in6& to = names_[built];
        to = sockaddr_in6{};
        to.sin6_family = AF_INET6;
        std::memcpy(&to.sin6_addr, f.data() + kEth + 24, 16);
        iovs_[built].iov_base = const_cast<std::byte*>(f.data() + kEth);
        iovs_[built].iov_len = f.size() - kEth;
        mmsghdr& m = msgs_[built];
        m = mmsghdr{};
        m.msg_hdr.msg_name = &to;
        m.msg_hdr.msg_namelen = sizeof to;
        m.msg_hdr.msg_iov = &iovs_[built];
        m.msg_hdr.msg_iovlen = 1;
        m.msg_hdr.msg_control = ctrl_[built].data();
        m.msg_hdr.msg_controllen = ctrl_[built].size();
        cmsghdr* c = CMSG_FIRSTHDR(&m.msg_hdr);
        c->cmsg_level = IPPROTO_IPV6;
        c->cmsg_type = IPV6_PKTINFO;
        c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
        in6_pktinfo pi{};
        pi.ipi6_ifindex = static_cast<unsigned>(items[done + i].ifindex);
        std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
        orig_[built] = i;
        ++built;
      }
      if (built == 0) {
        done += k;
        continue;
      }
      const int r = sendmmsg(fd_.get(), msgs_.data(), static_cast<unsigned>(built), MSG_DONTWAIT);
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
      if (static_cast<size_t>(r) < built) {
        ++blocked;
        return static_cast<int>(done + orig_[static_cast<size_t>(r)]);
      }
      done += k;
    }
    return static_cast<int>(done);
  }

 private:
  Fd fd_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<sockaddr_in6> names_;
  std::vector<std::vector<char>> ctrl_;
  std::vector<size_t> orig_;  // built message -> index in the caller's batch
};

}  // namespace

Status open_socket_tx(uint32_t batch, std::unique_ptr<TxIo>& out) {
  auto tx = std::make_unique<SocketTx>();
  if (Status st = tx->open(batch); !st.ok()) return st;
  out = std::move(tx);
  return Status::Ok();
}

Status open_socket_io(const PortIoConfig& cfg, const wire::Ipv6Addr& gid,
                      std::unique_ptr<PortIo>& out) {
  auto io = std::make_unique<SocketIo>();
  if (Status st = io->open(cfg, gid); !st.ok()) return st;
  out = std::move(io);
  return Status::Ok();
}

}  // namespace mrc::runtime
