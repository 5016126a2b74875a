// The Runtime: one engine, its ports on real interfaces, and the epoll loop that drives it.
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "reference-impl/runtime/sys.h"

namespace mrc::runtime {
namespace {

constexpr size_t kRxBudget = 256;                 // frames per port per loop iteration
constexpr size_t kTxBudget = 512;                 // frames taken from the engine per loop iteration
constexpr uint64_t kRxStampSlackNs = 10'000'000;  // CLOCK_REALTIME ahead of the start offset
// A frame read more than this after its arrival stamp counts as late (RuntimeStats::rx_late_*):
// well above the loop's own batching (rx coalescing sleeps 100 us) and a loaded host's
// scheduling delays (3-7 ms of silence measured under six busy loops on two cores), well below
// the timing tolerances a stall breaks (T_ack_max 100 ms in the software preset).
constexpr uint64_t kRxLateNs = 20'000'000;
// A stamp older than this is not an arrival time (a path that leaves another clock's delivery
// time in the packet): it says nothing about the loop.
constexpr uint64_t kRxLateSaneNs = 60'000'000'000;
// Receive coalescing (RuntimeConfig::rx_coalesce_ns) starts after an iteration that took at
// least this many frames. Request/response traffic (a latency test's one WRITE at a time: the
// data, its SACK, a probe) brings 1-3 per wake-up, and a fixed sleep would delay the next request
// by up to the coalescing time (with 2 here, lib_mrc.so's 64 B write latency p50 rose from 249 to
// 327 us); a bulk receiver woken by every frame finds about 4 per wake-up at 4 KiB frames, and
// 12-15 after each 100 us sleep at 4 Gbit/s, so it stays coalescing.
constexpr size_t kRxCoalesceMinFrames = 4;

// epoll tags of the loop's own descriptors (ports use their index).
constexpr uint64_t kTagTimer = 1000;
constexpr uint64_t kTagWake = 1001;
constexpr uint64_t kTagTx = 1002;
constexpr uint64_t kTagLink = 1003;

uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string pcap_name(const std::string& prefix, const std::string& iface) {
  return prefix + "-" + iface + ".pcap";
}

}  // namespace

std::string_view io_kind_name(IoKind k) {
  switch (k) {
    case IoKind::kPacket:
      return "packet";
    case IoKind::kSocket:
      return "socket";
    case IoKind::kPacketTx:
      return "packet-tx";
  }
  return "?";
}

std::optional<IoKind> parse_io_kind(std::string_view s) {
  if (s == "packet") return IoKind::kPacket;
  if (s == "socket") return IoKind::kSocket;
  if (s == "packet-tx") return IoKind::kPacketTx;
  return std::nullopt;
}

struct Runtime::Impl {
  RuntimeConfig cfg;
  std::vector<IfaceInfo> ifaces;
  std::vector<std::unique_ptr<PortIo>> ports;
  std::vector<std::optional<wire::MacAddr>> next_hops;
  std::unique_ptr<engine::Endpoint> ep;
  std::unique_ptr<Mutator> mutator;
  Fd epfd, timerfd, wakefd, sink;
  // Carrier watch: rtnetlink link notifications, and a socket for SIOCGIFFLAGS.
  Fd linkfd, ifctl;
  std::vector<char> link_buf;
  std::vector<std::unique_ptr<wire::CaptureWriter>> captures;
  std::FILE* event_log = nullptr;
  std::vector<char> event_log_buf;
  std::string line;
  // cwnd / bytes in flight samples for the event log: the engine logs cwnd only when it moves by
  // an MTU, so a run at a steady window had none and the viewer could not draw bytes in flight.
  // Every QP the log has named, sampled every kCwndSampleNs while it changes.
  static constexpr uint64_t kCwndSampleNs = 100'000;
  std::map<uint32_t, std::pair<uint64_t, uint64_t>> cwnd_logged;  // qpn -> (cwnd, in flight)
  uint64_t next_cwnd_sample_ns = 0;
  void sample_cwnd(uint64_t now);
  AppHook app;
  engine::EventSink observer;

  // One transmit batch in engine order (all ports), and back-pressure state.
  std::unique_ptr<TxIo> tx;
  std::vector<engine::TxPacket> batch;
  size_t batch_n = 0;
  bool blocked = false;
  engine::TxPacket cur;
  std::vector<engine::TxPacket> extra;
  std::vector<TxItem> items;
  std::vector<std::byte> rx_scratch;
  std::array<uint64_t, kRxBudget> rx_stamps{};  // one receive pass's arrival stamps
  // kPacket: the kernel receive filter and the gates it was last given (rx_filter.cc).
  std::unique_ptr<RxFilter> rx_filter;
  // kPacket with RuntimeConfig::rx_tap: the tc ingress program that ends the frames the tap
  // rings took (sys.h); attached to every plane or to none.
  std::unique_ptr<IngressSink> ingress_sink;
  std::vector<engine::RxGate> rx_gates;
  // Endpoint::rx_gate_generation() at the last publication (none yet: the maximum).
  uint64_t rx_gates_published = UINT64_MAX;

  // loop control
  std::thread thread;
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> running{false};
  std::mutex cmd_mu;
  std::condition_variable cmd_cv;
  // Held by the loop for each iteration (not while it sleeps) and by with_engine(): another
  // thread can then use the engine between two iterations without a round trip to the loop.
  std::mutex engine_mu;
  std::atomic<int> engine_waiters{0};  // with_engine() callers waiting for engine_mu
  struct Cmd {
    const std::function<void(engine::Endpoint&)>* fn;
    bool done = false;
  };
  std::deque<Cmd*> cmds;
  Status loop_status;

  RuntimeStats st;
  uint64_t armed_ns = UINT64_MAX;
  int64_t rt_offset = 0;
  // The latest kernel receive stamp (CLOCK_REALTIME) of a frame handed to the engine. A frame the
  // engine sends after it is stamped later in the runtime's captures even when the two clocks
  // disagree (sent frames are stamped from CLOCK_MONOTONIC plus an offset taken at start, and
  // CLOCK_REALTIME may be slewed since): otherwise the checker can see the data a SACK allowed
  // leave before that SACK arrived.
  uint64_t last_rx_stamp_ns = 0;
  uint64_t capture_stamp(uint64_t now) const {
    return std::max(now + static_cast<uint64_t>(rt_offset), last_rx_stamp_ns + 1);
  }
  // Frames of one transmit burst share the engine's time; in the captures each is 1 ns after the
  // previous one, so that the order in which they left survives a merge of per-port captures
  // (equal stamps in two files leave the checker unable to tell which came first).
  uint64_t last_tx_stamp_ns = 0;

  // Frames leave through AF_PACKET, with the next hop's MAC written by the runtime.
  bool packet_tx() const { return cfg.io == IoKind::kPacket || cfg.io == IoKind::kPacketTx; }
  Status open();
  Status loop();
  size_t receive_all(bool& more);
  bool transmit(uint64_t now);
  void enqueue(engine::TxPacket& pkt, uint64_t now);
  void flush();
  void run_cmds();
  void arm_timer(uint64_t deadline);
  void set_writable_watch(bool on);
  bool tx_watched = false;  // the transmit socket is in the epoll set (EPOLLOUT)
  void on_event(const engine::Event& e);
  RuntimeStats snapshot();
  Status open_link_watch();
  void read_link_events();
  bool carrier_now(size_t p);
  void set_port_up(size_t p, bool up, const char* how, bool defer = false);
  void tell_deferred_ports();
  std::vector<size_t> deferred_ports;  // lost carrier during transmit; engine not told yet
};

Status Runtime::Impl::open() {
  if (cfg.planes.empty()) return Status::Error(EINVAL, "runtime: no plane interfaces given");
  if (cfg.planes.size() > engine::kMaxPorts)
    return Status::Error(EINVAL, "runtime: " + std::to_string(cfg.planes.size()) +
                                     " planes, the engine supports " +
                                     std::to_string(engine::kMaxPorts));
  const wire::Ipv6Addr& gid = cfg.endpoint.gid;
  if (gid[10] == 0xFF && gid[11] == 0xFF &&
      std::all_of(gid.begin(), gid.begin() + 10, [](uint8_t b) { return b == 0; }))
    return Status::Error(ENOTSUP,
                         "runtime: IPv4 GIDs (::ffff:a.b.c.d) are not supported; the "
                         "runtime speaks RoCEv2 over IPv6");
  rt_offset = realtime_offset_ns();
  cfg.endpoint.ports.clear();
  const uint16_t roce_port =
      (cfg.endpoint.profile ? *cfg.endpoint.profile : wire::mrp0()).roce_port();
  // Tap receive (RuntimeConfig::rx_tap): the rings see each frame before tc ingress, so the
  // receive filter must judge it there, on the rings, and tc ingress holds the sink instead.
  if (cfg.io == IoKind::kPacket && cfg.rx_tap && cfg.rx_filter_ingress) {
    std::string why_not;
    ingress_sink = IngressSink::create(roce_port, gid, why_not);
    if (!ingress_sink)
      std::fprintf(stderr,
                   "mrc runtime: note: receive rings bound to IPv6, not taps (%s); every "
                   "frame also takes the IPv6/UDP receive to the sink socket\n",
                   why_not.c_str());
  }
  // Captures must show what the wire brought and mutants judge every received frame: the
  // kernel filter only runs without either.
  if (cfg.io == IoKind::kPacket && cfg.rx_filter && cfg.pcap_prefix.empty() &&
      cfg.mutant == Mutant::kNone) {
    std::string why_not;
    RxFilter::Gaps gaps;
    gaps.reply_ns = cfg.endpoint.reply_interval_ns;
    gaps.ep_peer_ns = cfg.endpoint.ep_reply_interval_ns;
    gaps.ep_stranger_ns = cfg.endpoint.ep_reply_stranger_interval_ns;
    gaps.reply_burst = cfg.endpoint.reply_burst;
    gaps.ep_burst = cfg.endpoint.ep_reply_burst;
    rx_filter = RxFilter::create(cfg.endpoint.profile ? *cfg.endpoint.profile : wire::mrp0(), gaps,
                                 why_not);
    if (!rx_filter)
      std::fprintf(stderr,
                   "mrc runtime: warning: no kernel receive filter (%s); duplicates and "
                   "PSNs beyond the window are refused by the engine\n",
                   why_not.c_str());
    else
      rx_filter->set_local_gid(gid);
    // At tc ingress on every plane or on none (then the rings' socket filters do the work).
    for (size_t i = 0; rx_filter && cfg.rx_filter_ingress && !ingress_sink && i < cfg.planes.size();
         ++i) {
      IfaceInfo info;
      if (!query_iface(cfg.planes[i].iface, info).ok()) {
        rx_filter->detach_ingress();
        break;  // the plane loop below reports it
      }
      if (!rx_filter->attach_ingress(info.index, why_not)) {
        rx_filter->detach_ingress();
        std::fprintf(stderr,
                     "mrc runtime: note: the kernel receive filter runs on the rings, not at "
                     "tc ingress (%s)\n",
                     why_not.c_str());
        break;
      }
    }
  }
  // Ring slots, receive and transmit: the largest frame plus headroom, a power of two.
  uint32_t ring_frame_bytes = 1024;
  while (ring_frame_bytes < cfg.max_frame_bytes + 256) ring_frame_bytes *= 2;
  for (size_t i = 0; i < cfg.planes.size(); ++i) {
    const PlaneConfig& pc = cfg.planes[i];
    for (size_t j = 0; j < i; ++j)
      if (cfg.planes[j].iface == pc.iface)
        return Status::Error(EINVAL, "runtime: interface " + pc.iface + " given for planes " +
                                         std::to_string(j + 1) + " and " + std::to_string(i + 1));
    IfaceInfo info;
    if (Status s = query_iface(pc.iface, info); !s.ok()) return s;
    if (!info.up) return Status::Error(ENETDOWN, "plane interface " + pc.iface + " is down");
    ifaces.push_back(info);
    engine::PortConfig port;
    port.mac = info.mac;
    if (pc.next_hop_mac) port.next_hop_mac = *pc.next_hop_mac;
    port.srv6_source = first_global_ipv6(pc.iface);
    cfg.endpoint.ports.push_back(port);
    next_hops.push_back(pc.next_hop_mac);

    PortIoConfig io;
    io.iface = info;
    io.ring_frames = cfg.rx_ring_frames;
    io.batch = std::max<uint32_t>(1, cfg.batch);
    io.ev_format = cfg.endpoint.ev_format;
    io.roce_port = roce_port;
    io.frame_bytes = ring_frame_bytes;
    if (rx_filter && !rx_filter->on_ingress()) io.rx_filter_prog_fd = rx_filter->prog_fd();
    io.tap = ingress_sink != nullptr;
    std::unique_ptr<PortIo> port_io;
    Status s =
        cfg.io == IoKind::kPacket ? open_packet_io(io, port_io) : open_socket_io(io, gid, port_io);
    if (!s.ok()) return s;
    ports.push_back(std::move(port_io));
  }
  // The sink goes on once every tap ring is bound, so that no frame is ended before a ring
  // could take it. Where it cannot go on every plane it goes on none: the taps then work as
  // the IPv6-bound rings did (the frames also take the IPv6 receive), with the receive filter
  // on the rings, as when tc ingress refuses the filter.
  for (size_t i = 0; ingress_sink && i < ifaces.size(); ++i) {
    std::string why_not;
    if (!ingress_sink->attach(ifaces[i].index, why_not)) {
      ingress_sink->detach();
      std::fprintf(stderr,
                   "mrc runtime: note: no ingress sink behind the tap rings (%s); every frame "
                   "also takes the IPv6/UDP receive to the sink socket\n",
                   why_not.c_str());
      break;
    }
  }
  {
    Status s = !packet_tx()             ? open_socket_tx(std::max<uint32_t>(1, cfg.batch), tx)
               : cfg.tx_ring_frames > 0 ? open_packet_ring_tx(cfg.tx_ring_frames, ring_frame_bytes,
                                                              std::max<uint32_t>(1, cfg.batch), tx)
                                        : open_packet_tx(std::max<uint32_t>(1, cfg.batch), tx);
    if (!s.ok()) return s;
  }
  // Kept with the ingress sink too: frames it does not end (a routing header, fragments) and
  // those of the time before it was attached still reach the port.
  if (Status s = open_sink_socket(sink, roce_port); !s.ok()) {
    // Not fatal: another endpoint in this namespace may hold the port without SO_REUSEADDR.
    std::fprintf(stderr, "mrc runtime: warning: %s; the kernel may answer RoCE packets with ICMP\n",
                 s.message.c_str());
  }
  try {
    ep = std::make_unique<engine::Endpoint>(cfg.endpoint);
  } catch (const std::exception& e) {
    return Status::Error(EINVAL, std::string("engine configuration: ") + e.what());
  }
  if (cfg.mutant != Mutant::kNone) {
    try {
      const wire::WireProfile& prof = cfg.endpoint.profile ? *cfg.endpoint.profile : wire::mrp0();
      mutator = std::make_unique<Mutator>(cfg.mutant, cfg.endpoint.ev_format, prof,
                                          static_cast<uint8_t>(cfg.planes.size()));
    } catch (const std::exception& e) {
      return Status::Error(EINVAL, e.what());
    }
  }
  ep->set_event_sink([this](const engine::Event& e) { on_event(e); });
  // The engine's clock starts now, so that events of the QP setup carry real times.
  ep->on_timer(monotonic_ns());

  if (!cfg.pcap_prefix.empty()) {
    for (const IfaceInfo& i : ifaces) {
      auto w = std::make_unique<wire::CaptureWriter>();
      if (!w->open(pcap_name(cfg.pcap_prefix, i.name), wire::CaptureFormat::kPcap))
        return Status::Error(EIO, "capture: " + w->error());
      captures.push_back(std::move(w));
    }
  }
  if (!cfg.event_log_path.empty()) {
    event_log = std::fopen(cfg.event_log_path.c_str(), "w");
    if (event_log == nullptr) return sys_error("event log " + cfg.event_log_path);
    event_log_buf.resize(1 << 20);
    std::setvbuf(event_log, event_log_buf.data(), _IOFBF, event_log_buf.size());
  }

  epfd = Fd(epoll_create1(EPOLL_CLOEXEC));
  if (!epfd.ok()) return sys_error("epoll_create1");
  timerfd = Fd(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!timerfd.ok()) return sys_error("timerfd_create");
  wakefd = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wakefd.ok()) return sys_error("eventfd");
  auto add = [&](int fd, uint64_t tag) -> Status {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (epoll_ctl(epfd.get(), EPOLL_CTL_ADD, fd, &ev) < 0) return sys_error("epoll_ctl ADD");
    return Status::Ok();
  };
  for (size_t p = 0; p < ports.size(); ++p)
    if (Status s = add(ports[p]->fd(), p); !s.ok()) return s;
  if (Status s = add(timerfd.get(), kTagTimer); !s.ok()) return s;
  if (Status s = add(wakefd.get(), kTagWake); !s.ok()) return s;
  // The transmit socket joins the set only while it pushes back (set_writable_watch).
  if (Status s = open_link_watch(); !s.ok()) return s;
  if (Status s = add(linkfd.get(), kTagLink); !s.ok()) return s;

  batch.resize(std::max<uint32_t>(1, cfg.batch));
  st.planes.resize(ports.size());
  return Status::Ok();
}

// A NIC reports its port down when the link loses carrier; here the plane interface is that
// port. The kernel announces every change of an interface's flags on RTNLGRP_LINK, so the loop
// learns of it within one wakeup (no polling). The socket is opened before the first check, so
// no change between the check and the subscription is missed.
Status Runtime::Impl::open_link_watch() {
  linkfd = Fd(socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!linkfd.ok()) return sys_error("socket(AF_NETLINK) for link notifications");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_LINK;
  if (bind(linkfd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
    return sys_error("bind(AF_NETLINK, RTMGRP_LINK)");
  ifctl = Fd(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!ifctl.ok()) return sys_error("socket(AF_INET6) for interface flags");
  link_buf.resize(1 << 16);
  for (size_t p = 0; p < ports.size(); ++p) {
    if (!carrier_now(p)) set_port_up(p, false, "no carrier at start");
  }
  return Status::Ok();
}

// IFF_RUNNING is the interface's operational state: up with carrier (a veth whose peer is down
// is LOWERLAYERDOWN and not running).
bool Runtime::Impl::carrier_now(size_t p) {
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifaces[p].name.c_str(),
              std::min(ifaces[p].name.size(), sizeof ifr.ifr_name - 1));
  if (ioctl(ifctl.get(), SIOCGIFFLAGS, &ifr) < 0) return errno != ENODEV;
  return (ifr.ifr_flags & IFF_UP) != 0 && (ifr.ifr_flags & IFF_RUNNING) != 0;
}

void Runtime::Impl::set_port_up(size_t p, bool up, const char* how, bool defer) {
  PlaneStats& ps = ports[p]->stats;
  if (ps.up == up) return;
  ps.up = up;
  if (!up) ++ps.carrier_lost;
  std::fprintf(stderr, "mrc runtime %s: port %zu (%s) %s (%s)\n", cfg.endpoint.name.c_str(), p + 1,
               ifaces[p].name.c_str(), up ? "up: carrier back" : "down: carrier lost", how);
  if (defer) {
    // Found while sending a batch the engine built at the batch's time: telling it now would
    // move its clock forward in the middle of that batch (later frames would carry later
    // timestamps than the capture records for them). transmit() tells it when the batch is out.
    deferred_ports.push_back(p);
    return;
  }
  // The engine logs a port_status event, stops or resumes using the plane and sends
  // PORT_STATUS_UPDATE to every peer over the ports still up.
  (void)ep->set_port_state(static_cast<uint8_t>(p + 1), up, monotonic_ns());
}

void Runtime::Impl::tell_deferred_ports() {
  for (size_t p : deferred_ports)
    (void)ep->set_port_state(static_cast<uint8_t>(p + 1), ports[p]->stats.up, monotonic_ns());
  deferred_ports.clear();
}

void Runtime::Impl::read_link_events() {
  for (;;) {
    const ssize_t n = recv(linkfd.get(), link_buf.data(), link_buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOBUFS) {
        // The socket overran: notifications were lost, so ask every port directly.
        for (size_t p = 0; p < ports.size(); ++p) set_port_up(p, carrier_now(p), "rtnetlink");
        continue;
      }
      return;  // EAGAIN: drained
    }
    int len = static_cast<int>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(link_buf.data()); NLMSG_OK(nh, len);
         nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_type != RTM_NEWLINK && nh->nlmsg_type != RTM_DELLINK) continue;
      if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) continue;
      const auto* ifi = static_cast<const ifinfomsg*>(NLMSG_DATA(nh));
      for (size_t p = 0; p < ifaces.size(); ++p) {
        if (ifaces[p].index != ifi->ifi_index) continue;
        const bool up = nh->nlmsg_type == RTM_NEWLINK && (ifi->ifi_flags & IFF_UP) != 0 &&
                        (ifi->ifi_flags & IFF_RUNNING) != 0;
        set_port_up(p, up, "rtnetlink");
      }
    }
  }
}

void Runtime::Impl::on_event(const engine::Event& e) {
  if (e.kind == engine::EventKind::kEvState) {
    if (const engine::EventField* to = e.find("to")) {
      if (to->s == engine::ev_state_name(engine::EvState::kAssumedBad))
        ++st.ev_to_assumed_bad;
      else if (to->s == engine::ev_state_name(engine::EvState::kSkip))
        ++st.ev_to_skip;
      else if (to->s == engine::ev_state_name(engine::EvState::kDenied))
        ++st.ev_to_denied;
      else if (to->s == engine::ev_state_name(engine::EvState::kGood))
        ++st.ev_recovered;
    }
  }
  if (mutator) mutator->on_event(e);
  if (event_log != nullptr && e.qpn != 0) cwnd_logged.try_emplace(e.qpn, UINT64_MAX, UINT64_MAX);
  if (event_log != nullptr) {
    engine::Event shifted = e;
    shifted.t_ns = e.t_ns + static_cast<uint64_t>(rt_offset);
    line.clear();
    engine::append_event_json(line, shifted, cfg.endpoint.name);
    std::fwrite(line.data(), 1, line.size(), event_log);
  }
  if (observer) observer(e);
}

void Runtime::Impl::sample_cwnd(uint64_t now) {
  if (event_log == nullptr || now < next_cwnd_sample_ns) return;
  next_cwnd_sample_ns = now + kCwndSampleNs;
  for (auto& [qpn, last] : cwnd_logged) {
    engine::QpStats s;
    if (!ep->qp_stats(qpn, s).ok()) continue;
    if (std::make_pair(s.cwnd_bytes, s.bytes_in_flight) == last) continue;
    last = {s.cwnd_bytes, s.bytes_in_flight};
    engine::Event e;
    e.kind = engine::EventKind::kCwnd;
    e.t_ns = now + static_cast<uint64_t>(rt_offset);
    e.qpn = qpn;
    if (s.cwnd_bytes != UINT64_MAX) e.u("cwnd", s.cwnd_bytes);  // UINT64_MAX: no window
    e.u("bytes_in_flight", s.bytes_in_flight).s("reason", "sample");
    line.clear();
    engine::append_event_json(line, e, cfg.endpoint.name);
    std::fwrite(line.data(), 1, line.size(), event_log);
  }
}

size_t Runtime::Impl::receive_all(bool& more) {
  size_t received = 0;
  for (size_t p = 0; p < ports.size(); ++p) {
    const uint8_t port = static_cast<uint8_t>(p + 1);
    const uint64_t now = monotonic_ns();
    const uint64_t now_rt = now + static_cast<uint64_t>(rt_offset);
    wire::CaptureWriter* cap = captures.empty() ? nullptr : captures[p].get();
    size_t stamps = 0;
    const size_t n =
        ports[p]->receive(kRxBudget, [&](std::span<const std::byte> frame, uint64_t ts) {
          if (cap != nullptr) cap->write(ts, frame);
          if (stamps < rx_stamps.size()) rx_stamps[stamps++] = ts;
          // A stamp ahead of the clock (a future delivery time some qdiscs leave in the packet)
          // says nothing about when the engine saw the frame.
          if (ts <= now_rt + kRxStampSlackNs) last_rx_stamp_ns = std::max(last_rx_stamp_ns, ts);
          if (mutator) mutator->set_rx_stamp_ns(ts);
          std::span<const std::byte> f = mutator ? mutator->on_rx(frame, rx_scratch) : frame;
          ep->on_packet(f, port, now);
        });
    if (n == kRxBudget) more = true;
    received += n;
    // Lateness against the clock after the pass, not the now_rt it began with: a host that
    // stops the loop in the middle of a pass (a SIGSTOP, a vCPU not run) has it read frames
    // that arrived during the stop with a clock from before it, stamps "ahead" of now_rt that
    // a check against now_rt would skip (a CI run reported 138 ms for a 300 ms stop). The
    // frames' answers leave after the pass anyway.
    if (stamps > 0) {
      const uint64_t end_rt = monotonic_ns() + static_cast<uint64_t>(rt_offset);
      for (size_t i = 0; i < stamps; ++i) {
        const uint64_t ts = rx_stamps[i];
        if (ts >= end_rt || end_rt - ts >= kRxLateSaneNs) continue;
        st.rx_late_max_ns = std::max(st.rx_late_max_ns, end_rt - ts);
        if (end_rt - ts > kRxLateNs) ++st.rx_late_over_20ms;
      }
    }
  }
  return received;
}

void Runtime::Impl::enqueue(engine::TxPacket& pkt, uint64_t now) {
  if (pkt.port == 0 || pkt.port > ports.size() || pkt.frame.size() < 14) return;
  const size_t p = pkt.port - 1;
  if (!ports[p]->stats.up) {
    // What the engine queued before it learnt of the carrier loss: the port cannot send it.
    ++ports[p]->stats.tx_port_down;
    return;
  }
  if (packet_tx()) {
    // The engine's MACs were fixed at construction; the next hop may have been resolved later.
    if (!next_hops[p]) {
      ++ports[p]->stats.tx_no_next_hop;
      return;
    }
    std::memcpy(pkt.frame.data(), next_hops[p]->data(), 6);
    std::memcpy(pkt.frame.data() + 6, ifaces[p].mac.data(), 6);
  }
  if (!captures.empty()) {
    last_tx_stamp_ns = std::max(capture_stamp(now), last_tx_stamp_ns + 1);
    captures[p]->write(last_tx_stamp_ns, wire::as_bytes(pkt.frame));
  }
  if (batch_n == batch.size()) {
    flush();
    if (batch_n == batch.size()) batch.emplace_back();  // blocked: hold it until writable
  }
  batch[batch_n].frame.swap(pkt.frame);
  batch[batch_n].port = pkt.port;
  ++batch_n;
}

void Runtime::Impl::flush() {
  if (batch_n == 0) return;
  items.resize(batch_n);
  for (size_t i = 0; i < batch_n; ++i) {
    const size_t p = batch[i].port - 1;
    items[i].frame = {batch[i].frame.data(), batch[i].frame.size()};
    items[i].ifindex = ifaces[p].index;
    if (next_hops[p]) items[i].dst_mac = *next_hops[p];
  }
  // Frames leave in order; one that cannot leave must not hold back the ports that work.
  size_t start = 0;
  bool pushed_back = false;
  while (start < batch_n) {
    const int r = tx->send({items.data() + start, batch_n - start});
    if (r > 0) {
      for (size_t i = start; i < start + static_cast<size_t>(r); ++i) {
        PlaneStats& ps = ports[batch[i].port - 1]->stats;
        ++ps.tx_frames;
        ps.tx_bytes += batch[i].frame.size();
      }
      start += static_cast<size_t>(r);
      continue;
    }
    const size_t p = batch[start].port - 1;
    if (r < 0) {
      // A hard error (interface gone, EMSGSIZE ...) loses this frame like a bad link would;
      // the engine's recovery deals with it.
      ++ports[p]->stats.tx_errors;
      ++start;
      continue;
    }
    // Pushed back. A port without carrier refuses every frame (the kernel answers ENOBUFS, as
    // for a full queue): waiting for it would stall every plane, so its frames are dropped
    // and the engine is told now rather than at the next link notification.
    if (!carrier_now(p)) {
      set_port_up(p, false, "transmit refused", /*defer=*/true);
      ++ports[p]->stats.tx_port_down;
      ++start;
      continue;
    }
    pushed_back = true;
    break;
  }
  if (pushed_back) {
    for (size_t i = start; i < batch_n; ++i) {
      batch[i - start].frame.swap(batch[i].frame);
      batch[i - start].port = batch[i].port;
    }
    batch_n -= start;
    if (!blocked) set_writable_watch(true);
    blocked = true;
    ++ports[batch[0].port - 1]->stats.tx_blocked;
  } else {
    batch_n = 0;
    if (blocked) set_writable_watch(false);
    blocked = false;
  }
}

// In the epoll set only while on: a socket in the set has the epoll entry on its wait queue
// whatever the events asked for, and then every skb it sent wakes that queue when freed
// (sock_wfree -> sock_def_write_space -> ep_poll_callback under the queue's lock, which finds
// no EPOLLOUT wanted). On veth those frees run in the transmit system call itself, in the
// router's IPv6 receive: 1.4 % of a bulk client's CPU profile. Back-pressure is rare (the
// loop's tx_blocked), so the ADD and DEL are too.
void Runtime::Impl::set_writable_watch(bool on) {
  if (on == tx_watched) return;
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = kTagTx;
  if (epoll_ctl(epfd.get(), on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, tx->fd(), &ev) == 0)
    tx_watched = on;
}

bool Runtime::Impl::transmit(uint64_t now) {
  if (blocked) flush();
  if (!deferred_ports.empty()) tell_deferred_ports();
  // While the socket pushes back, leave the frames in the engine (its pacing and windows still
  // apply) instead of queueing without bound here.
  if (blocked) return false;
  size_t taken = 0;
  if (mutator) mutator->set_tx_stamp_ns(capture_stamp(now));
  while (taken < kTxBudget && ep->poll_tx(now, cur)) {
    ++taken;
    if (mutator) {
      extra.clear();
      if (!mutator->on_tx(cur, extra)) continue;
      enqueue(cur, now);
      for (engine::TxPacket& x : extra) enqueue(x, now);
    } else {
      enqueue(cur, now);
    }
  }
  flush();
  if (!deferred_ports.empty()) tell_deferred_ports();
  return taken == kTxBudget;
}

void Runtime::Impl::run_cmds() {
  std::unique_lock<std::mutex> lk(cmd_mu);
  while (!cmds.empty()) {
    Cmd* c = cmds.front();
    cmds.pop_front();
    lk.unlock();
    (*c->fn)(*ep);
    lk.lock();
    c->done = true;
    cmd_cv.notify_all();
  }
}

void Runtime::Impl::arm_timer(uint64_t deadline) {
  if (deadline == armed_ns) return;
  itimerspec its{};
  if (deadline != UINT64_MAX) {
    its.it_value.tv_sec = static_cast<time_t>(deadline / 1'000'000'000ull);
    its.it_value.tv_nsec = static_cast<long>(deadline % 1'000'000'000ull);
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  }
  (void)timerfd_settime(timerfd.get(), TFD_TIMER_ABSTIME, &its, nullptr);
  armed_ns = deadline;
}

Status Runtime::Impl::loop() {
  const uint64_t cpu0 = thread_cpu_ns();
  epoll_event evs[32];
  Status result;
  bool done = false;
  std::unique_lock<std::mutex> engine_lock(engine_mu);
  // Before the loop sleeps: hand the engine over to a waiting with_engine() caller (relocking at
  // once would starve it while the loop is busy: std::mutex is not fair).
  auto release_engine = [&] {
    engine_lock.unlock();
    while (engine_waiters.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  };
  while (!stop_requested.load(std::memory_order_relaxed)) {
    if (!engine_lock.owns_lock()) engine_lock.lock();
    ++st.loop_iterations;
    bool more = false;
    // The frames in the rings all arrived before the first is handled: a SACK further down (or
    // in another port's ring) may fill the hole an earlier one shows, so the engine judges the
    // holes once the rings are empty (judged SACK by SACK, a working EV is retired on a hole
    // that the same batch fills, and nothing is resent).
    ep->begin_rx_batch();
    const size_t received = receive_all(more);
    uint64_t now = monotonic_ns();
    // Timers run only once the rings are empty too: after the thread was descheduled for longer
    // than an RTO, the SACKs that arrived meanwhile must be seen before the retransmission timer
    // judges their PSNs lost (else a 115 ms scheduling gap cost 942 spurious timeouts).
    if (!more) {
      ep->end_rx_batch(now);
      if (ep->next_deadline_ns() <= now) {
        ep->on_timer(now);
        ++st.timer_fires;
      }
    }
    run_cmds();
    uint64_t app_wake = UINT64_MAX;
    if (app) app_wake = app(*ep, now, done);
    now = monotonic_ns();
    if (rx_filter && ep->rx_gate_generation() != rx_gates_published) {
      // Before the SACKs that carry the new cumulative PSNs leave (rx_filter.cc: why); only
      // when a gate input changed: rx_gates() and publish() walk every QP.
      rx_gates_published = ep->rx_gate_generation();
      ep->rx_gates(rx_gates);
      rx_filter->publish(rx_gates);
      ++st.rx_filter_publishes;
    }
    more |= transmit(now);
    sample_cwnd(now);
    if (done) break;

    const uint64_t deadline = std::min(ep->next_deadline_ns(), app_wake);
    int timeout = -1;
    if (more || cfg.busy_poll) {
      timeout = 0;
    } else if (deadline <= monotonic_ns()) {
      continue;
    } else if (received >= kRxCoalesceMinFrames && cfg.rx_coalesce_ns > 0 && !ep->tx_waiting()) {
      // Frames are streaming in: sleep a fixed time instead of in epoll_wait, like a NIC's
      // receive interrupt moderation. A thread asleep in epoll_wait is woken by every frame
      // its ring takes, and on veth that wake-up (the IPI to this thread's CPU) is paid in the
      // sender's system call: 11 % of a bulk client's CPU (docs/performance.md). Asleep here,
      // arriving frames only queue; the next iteration takes them in one batch.
      // Not while the engine holds data back for an acknowledgement: a sender waiting on its
      // window would sit idle through the sleep with the SACKs that open it already queued
      // (a bulk client slept 750-800 times per GiB, +5-15 % goodput without; the wake-ups it
      // then takes are paid in its peer's SACK transmits).
      const uint64_t wake_ns = std::min(deadline, monotonic_ns() + cfg.rx_coalesce_ns);
      release_engine();
      const timespec ts{static_cast<time_t>(wake_ns / 1'000'000'000ull),
                        static_cast<long>(wake_ns % 1'000'000'000ull)};
      (void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
      ++st.rx_coalesce_sleeps;
      continue;
    } else {
      arm_timer(deadline);
    }
    if (timeout != 0) ++st.epoll_waits;
    release_engine();
    const int n = epoll_wait(epfd.get(), evs, 32, timeout);
    if (n < 0 && errno != EINTR) {
      result = sys_error("epoll_wait");
      break;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = evs[i].data.u64;
      uint64_t v;
      if (tag == kTagTimer) {
        (void)!read(timerfd.get(), &v, sizeof v);
        armed_ns = UINT64_MAX;
      } else if (tag == kTagWake) {
        (void)!read(wakefd.get(), &v, sizeof v);
      } else if (tag == kTagLink) {
        read_link_events();
      }
    }
  }
  // Whatever the engine still has to say (final SACKs) goes out before the loop ends.
  if (!engine_lock.owns_lock()) engine_lock.lock();
  transmit(monotonic_ns());
  st.loop_cpu_ns += thread_cpu_ns() - cpu0;
  run_cmds();
  return result;
}

RuntimeStats Runtime::Impl::snapshot() {
  RuntimeStats out = st;
  out.tx_syscalls = tx ? tx->syscalls : 0;
  out.planes.clear();
  for (auto& p : ports) {
    p->ring_drops();
    out.planes.push_back(p->stats);
  }
  out.endpoint = ep->stats();
  if (rx_filter) {
    const RxFilter::Counts c = rx_filter->counts();
    out.rx_filter = true;
    out.rx_filter_duplicates = c.duplicates;
    out.rx_filter_out_of_window = c.out_of_window;
    out.rx_filter_sampled = c.sampled;
    out.rx_filter_ep_peer_limited = c.ep_peer_limited;
    out.rx_filter_ep_stranger_limited = c.ep_stranger_limited;
    out.rx_filter_nacks_not_outstanding = c.nacks_not_outstanding;
    out.rx_filter_ingress = rx_filter->on_ingress();
  }
  out.rx_tap = ingress_sink && ingress_sink->attached();
  if (mutator) {
    out.mutant_changed = mutator->frames_changed();
    out.mutant_added = mutator->frames_added();
    out.mutant_dropped = mutator->frames_dropped();
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Runtime::~Runtime() {
  stop();
  (void)close_outputs();
}

std::unique_ptr<Runtime> Runtime::create(const RuntimeConfig& cfg, Status& status) {
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  status = impl->open();
  if (!status.ok()) return nullptr;
  return std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
}

engine::Endpoint& Runtime::endpoint() {
  return *impl_->ep;
}
const RuntimeConfig& Runtime::config() const {
  return impl_->cfg;
}
const std::vector<IfaceInfo>& Runtime::ifaces() const {
  return impl_->ifaces;
}

Status Runtime::resolve_next_hops(const std::vector<std::vector<wire::Ipv6Addr>>& dsts_per_plane,
                                  uint64_t timeout_ns) {
  if (!impl_->packet_tx()) return Status::Ok();
  for (size_t p = 0; p < impl_->ifaces.size(); ++p) {
    if (impl_->next_hops[p]) continue;
    std::vector<wire::Ipv6Addr> dsts;
    if (p < dsts_per_plane.size()) dsts = dsts_per_plane[p];
    wire::MacAddr mac;
    Status s = resolve_next_hop(impl_->ifaces[p].name, dsts, timeout_ns, mac);
    if (!s.ok()) return s;
    // Written from the caller's thread before traffic starts, or through call().
    impl_->next_hops[p] = mac;
  }
  return Status::Ok();
}

std::optional<wire::MacAddr> Runtime::next_hop(uint8_t port) const {
  if (port == 0 || port > impl_->next_hops.size()) return std::nullopt;
  return impl_->next_hops[port - 1];
}

void Runtime::set_app(AppHook hook) {
  impl_->app = std::move(hook);
}
void Runtime::set_event_observer(engine::EventSink sink) {
  impl_->observer = std::move(sink);
}

Status Runtime::run() {
  if (impl_->running.exchange(true)) return Status::Error(EBUSY, "runtime: loop already running");
  impl_->stop_requested = false;
  impl_->loop_status = impl_->loop();
  impl_->running = false;
  return impl_->loop_status;
}

Status Runtime::start() {
  if (impl_->running.exchange(true)) return Status::Error(EBUSY, "runtime: loop already running");
  impl_->stop_requested = false;
  impl_->thread = std::thread([this] {
    impl_->loop_status = impl_->loop();
    std::lock_guard<std::mutex> lk(impl_->cmd_mu);
    impl_->running = false;
    impl_->cmd_cv.notify_all();
  });
  return Status::Ok();
}

void Runtime::stop() {
  impl_->stop_requested = true;
  if (impl_->wakefd.ok()) {
    const uint64_t one = 1;
    (void)!write(impl_->wakefd.get(), &one, sizeof one);
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

bool Runtime::running() const {
  return impl_->running.load();
}

void Runtime::call(const std::function<void(engine::Endpoint&)>& fn) {
  if (!impl_->thread.joinable() || !impl_->running.load()) {
    fn(*impl_->ep);
    return;
  }
  Impl::Cmd c{&fn};
  std::unique_lock<std::mutex> lk(impl_->cmd_mu);
  impl_->cmds.push_back(&c);
  const uint64_t one = 1;
  (void)!write(impl_->wakefd.get(), &one, sizeof one);
  impl_->cmd_cv.wait(lk, [&] { return c.done || !impl_->running.load(); });
  if (!c.done) {
    // The loop ended before it got to the command: run it here (the engine is free now).
    auto it = std::find(impl_->cmds.begin(), impl_->cmds.end(), &c);
    if (it != impl_->cmds.end()) impl_->cmds.erase(it);
    lk.unlock();
    fn(*impl_->ep);
  }
}

void Runtime::with_engine(const std::function<void(engine::Endpoint&)>& fn, bool wake) {
  {
    impl_->engine_waiters.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> lk(impl_->engine_mu);
    impl_->engine_waiters.fetch_sub(1, std::memory_order_acq_rel);
    fn(*impl_->ep);
  }
  if (wake && impl_->running.load() && impl_->wakefd.ok()) {
    const uint64_t one = 1;
    (void)!write(impl_->wakefd.get(), &one, sizeof one);
  }
}

void Runtime::set_next_hop(uint8_t port, const wire::MacAddr& mac) {
  if (port == 0 || port > impl_->next_hops.size()) return;
  std::lock_guard<std::mutex> lk(impl_->engine_mu);
  impl_->next_hops[port - 1] = mac;
}

RuntimeStats Runtime::stats() {
  RuntimeStats out;
  call([&](engine::Endpoint&) { out = impl_->snapshot(); });
  return out;
}

Status Runtime::close_outputs() {
  Status result;
  for (auto& c : impl_->captures) {
    if (!c->close() && result.ok()) result = Status::Error(EIO, "capture: " + c->error());
  }
  impl_->captures.clear();
  if (impl_->event_log != nullptr) {
    if (std::fclose(impl_->event_log) != 0 && result.ok())
      result = sys_error("event log " + impl_->cfg.event_log_path);
    impl_->event_log = nullptr;
  }
  return result;
}

}  // namespace mrc::runtime
