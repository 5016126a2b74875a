// Private helpers of the runtime: file descriptors, system-call errors, the per-port I/O
// interface the event loop drives. Not part of the public API (runtime.h is).
#pragma once

#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "reference-impl/runtime/runtime.h"

namespace mrc::runtime {

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.release();
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  int release() {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// "what: strerror(errno)" with a hint for permission errors.
Status sys_error(const std::string& what);

// Receive side of one NIC port = plane on a real interface.
class PortIo {
 public:
  virtual ~PortIo() = default;
  virtual int fd() const = 0;  // readable when frames wait
  // Hands up to `budget` received frames to fn(frame, kernel_realtime_ns); returns how many.
  virtual size_t receive(size_t budget,
                         const std::function<void(std::span<const std::byte>, uint64_t)>& fn) = 0;
  virtual uint64_t ring_drops() { return 0; }
  PlaneStats stats;
};

// Transmit side of all ports: one socket, the egress interface chosen per frame, so that a
// batch keeps the engine's order across planes (per-plane batches would reorder PSNs by up to a
// batch and look like loss to the peer's SACK-gap detection).
struct TxItem {
  std::span<const std::byte> frame;
  int ifindex = 0;
  wire::MacAddr dst_mac{};
};

class TxIo {
 public:
  virtual ~TxIo() = default;
  virtual int fd() const = 0;  // writable when back-pressure is over
  // Sends frames in order. Returns how many left (the rest stay with the caller to retry when
  // fd() is writable), or -errno on a hard error of the first frame.
  virtual int send(std::span<const TxItem> items) = 0;
  uint64_t blocked = 0;   // times the socket pushed back
  uint64_t errors = 0;    // frames lost to hard errors
  uint64_t syscalls = 0;  // sendmmsg calls, or send() kicks of a transmit ring
};

// kPacket: the kernel receive filter (rx_filter.cc explains the program and its map). One per
// runtime, attached to every plane's ring.
class RxFilter {
 public:
  // The kernel's token buckets, as the engine's: `burst` frames at once, then one per gap
  // (gap 0: the bucket refuses nothing), so that the engine's own buckets of the same rates
  // still see every frame they would answer.
  struct Gaps {
    uint64_t reply_ns = 0;  // per QP: duplicates and PSNs beyond the window
    uint32_t reply_burst = 1;
    uint64_t ep_peer_ns = 0;      // per peer node: its EV probes
    uint64_t ep_stranger_ns = 0;  // all endpoint requests of nodes without a QP with us
    uint32_t ep_burst = 1;
  };
  // nullptr and `why_not` when this kernel or process cannot load it (no CAP_BPF, no bpf()).
  static std::unique_ptr<RxFilter> create(const wire::WireProfile& profile, const Gaps& gaps,
                                          std::string& why_not);
  ~RxFilter();
  RxFilter(const RxFilter&) = delete;
  RxFilter& operator=(const RxFilter&) = delete;
  // The socket filter, for the rings when the program is not at tc ingress.
  int prog_fd() const { return prog_.get(); }
  // Attaches the same program (its tc variant) to `ifindex`'s tc ingress hook (TCX, Linux 6.6),
  // where it refuses frames before the IPv6/UDP receive path and the packet socket; detached
  // when this object goes. false and `why_not` when the kernel cannot.
  bool attach_ingress(int ifindex, std::string& why_not);
  void detach_ingress();
  bool on_ingress() const { return !links_.empty(); }
  // What the engine refuses now (Endpoint::rx_gates); call before the SACKs that carry the
  // cumulative PSNs leave.
  void publish(std::span<const engine::RxGate> gates);
  // The endpoint's own GID: frames to any other address pass whatever they carry (unset: the
  // destination is not looked at).
  void set_local_gid(const wire::Ipv6Addr& gid);
  struct Counts {
    uint64_t duplicates = 0, out_of_window = 0;
    uint64_t ep_peer_limited = 0, ep_stranger_limited = 0;  // endpoint requests refused
    uint64_t sampled = 0;                                   // refusable, passed on by a bucket
    uint64_t nacks_not_outstanding = 0;  // NACKs naming no PSN the requester has outstanding
  };
  Counts counts() const;
  // Runs the program on one Ethernet frame (BPF_PROG_TEST_RUN) as the ring's socket would:
  // 0 = refused, otherwise the snap length; -errno when the kernel cannot run it. With `tc`,
  // its tc variant: TC_ACT_SHOT = refused, TC_ACT_OK = passed. For tests.
  int64_t run_on(std::span<const std::byte> frame, bool tc = false) const;
  // The program's instructions (struct bpf_insn, 8 bytes each; `tc`: its tc variant) with no
  // map behind them, for tests that read the program rather than run it.
  static std::vector<uint64_t> program_for_test(bool tc);

 private:
  RxFilter() = default;
  uint32_t& word(int off);
  uint64_t& dword(int off);
  void publish_peers(std::span<const engine::RxGate> gates);
  Fd map_, prog_, tc_prog_;
  std::vector<Fd> links_;  // tc ingress attachments
  std::byte* shared_ = nullptr;
  size_t shared_bytes_ = 0;
  std::array<wire::Ipv6Addr, 64> published_{};
  std::array<wire::Ipv6Addr, 16> peers_{};
};

// kPacket, the tap receive (rx_filter.cc, "The ingress sink"): a tc ingress program that ends
// the MRC frames addressed to this endpoint after the packet sockets bound to ETH_P_ALL (taps,
// which the kernel runs before tc ingress) have taken them, so that they do not also go through
// the namespace's IPv6 and UDP receive up to the sink socket. Frames to any other address, of
// any other protocol or port, and everything too short to judge go on untouched.
class IngressSink {
 public:
  // nullptr and `why_not` when the kernel does not load it (no bpf(), no CAP_BPF).
  static std::unique_ptr<IngressSink> create(uint16_t roce_port, const wire::Ipv6Addr& gid,
                                             std::string& why_not);
  // On `ifindex`'s tc ingress hook (TCX, Linux 6.6); detached when this object goes.
  bool attach(int ifindex, std::string& why_not);
  void detach() { links_.clear(); }
  bool attached() const { return !links_.empty(); }
  // Runs the program on one Ethernet frame (BPF_PROG_TEST_RUN); `verdict` TC_ACT_SHOT = ended
  // here, TC_ACT_UNSPEC = on to the next program and the stack. 0, or -errno when the kernel
  // cannot run it (a verdict of -1 would be indistinguishable from -EPERM). For tests.
  int run_on(std::span<const std::byte> frame, int32_t& verdict) const;

 private:
  IngressSink() = default;
  Fd prog_;
  std::vector<Fd> links_;
};

struct PortIoConfig {
  IfaceInfo iface;
  uint32_t ring_frames = 1024;
  uint32_t frame_bytes = 8192;
  uint32_t batch = 64;
  wire::EvFormat ev_format = wire::EvFormat::kStev;
  uint16_t roce_port = wire::kRoceV2Port;  // the wire profile's first port
  // kPacket: the eBPF program to attach instead of the classic filter (-1: classic).
  int rx_filter_prog_fd = -1;
  // kPacket: bind the ring to ETH_P_ALL (a tap, run before tc ingress) instead of ETH_P_IPV6
  // (run after it, beside the IPv6 receive); its filter then refuses every other EtherType.
  bool tap = false;
};

Status open_packet_io(const PortIoConfig& cfg, std::unique_ptr<PortIo>& out);
Status open_socket_io(const PortIoConfig& cfg, const wire::Ipv6Addr& gid,
                      std::unique_ptr<PortIo>& out);
Status open_packet_tx(uint32_t batch, std::unique_ptr<TxIo>& out);
// AF_PACKET transmit through a TPACKET_V2 TX ring of ring_frames slots of frame_bytes each;
// batches whose frames alternate interfaces (mean run < 4 frames) go through sendmmsg (batch).
Status open_packet_ring_tx(uint32_t ring_frames, uint32_t frame_bytes, uint32_t batch,
                           std::unique_ptr<TxIo>& out);
Status open_socket_tx(uint32_t batch, std::unique_ptr<TxIo>& out);
// UDP socket bound to [::]:roce_port that drops everything it gets (see runtime.h).
Status open_sink_socket(Fd& out, uint16_t roce_port = wire::kRoceV2Port);

}  // namespace mrc::runtime
