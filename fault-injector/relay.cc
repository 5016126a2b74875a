// The AF_PACKET relay back end: owns impaired links (two interfaces each), moves every frame
// from one side to the other through the policy, keeps delayed frames in a timer queue, and
// serves the control socket. One thread, epoll, recvmmsg/sendmmsg; it sleeps in epoll_wait
// whenever there is nothing to do (no busy polling).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <queue>

#include "fault-injector/faults.h"

namespace mrc::faults {

namespace {

using json = nlohmann::json;

constexpr size_t kSlotBytes = 65536 + 64;  // a full IP datagram plus Ethernet and a VLAN tag
constexpr size_t kVlanRoom = 4;            // receive at +4 so a stripped VLAN tag can be put back
constexpr size_t kCmsgBytes = 256;
constexpr int kSocketBufferBytes = 8 << 20;

uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
uint64_t mono_ns() {
  return clock_ns(CLOCK_MONOTONIC);
}
uint64_t real_ns() {
  return clock_ns(CLOCK_REALTIME);
}

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

struct Side {
  int fd = -1;
  int ifindex = 0;
  std::string iface;
  std::unique_ptr<wire::CaptureWriter> pcap;  // (CaptureWriter does not move)
  bool pcap_open = false;
  uint64_t kernel_drops = 0;
};

struct Delayed {
  uint64_t due_mono_ns;
  uint64_t seq;
  uint32_t link;
  uint8_t out_side;
  std::vector<std::byte> bytes;
};

struct DelayedLater {
  bool operator()(const Delayed& a, const Delayed& b) const {
    return a.due_mono_ns != b.due_mono_ns ? a.due_mono_ns > b.due_mono_ns : a.seq > b.seq;
  }
};

struct Client {
  int fd = -1;
  std::string in;
};

// Frames waiting for one sendmmsg on one socket.
struct TxBatch {
  std::vector<std::byte> arena;
  std::vector<size_t> lens;
  size_t used = 0;
};

// Registered epoll tags: what a ready fd is.
enum Tag : uint64_t {
  kTagSocket = 1ull << 40,  // | link << 1 | side
  kTagTimer = 2ull << 40,
  kTagSignal = 3ull << 40,
  kTagEvent = 4ull << 40,
  kTagListen = 5ull << 40,
  kTagClient = 6ull << 40,  // | fd
};
constexpr uint64_t kTagMask = 0xFFull << 40;

}  // namespace

struct Relay::Impl {
  RelayOptions opt;
  std::unique_ptr<Policy> policy;
  DecisionLog log;
  std::vector<std::array<Side, 2>> links;
  RelayCounters counters;
  int epfd = -1, timerfd = -1, sigfd = -1, evfd = -1, listenfd = -1;
  std::vector<Client> clients;
  std::priority_queue<Delayed, std::vector<Delayed>, DelayedLater> delayed;
  uint64_t delayed_seq = 0;
  uint64_t armed_for = 0;
  std::atomic<bool> stop{false};
  bool opened = false;
  bool control_bound = false;
  bool io_failed = false;
  sigset_t old_mask{};
  bool mask_set = false;

  // Receive buffers (shared by all sockets: a batch is processed before the next is read).
  std::vector<std::byte> rx_arena;
  std::vector<mmsghdr> rx_msgs;
  std::vector<iovec> rx_iov;
  std::vector<sockaddr_ll> rx_addr;
  std::vector<std::array<char, kCmsgBytes>> rx_cmsg;
  std::vector<std::array<TxBatch, 2>> tx;  // per link, per side

  ~Impl() { close_all(); }

  void close_all() {
    for (auto& l : links)
      for (Side& s : l)
        if (s.fd >= 0) {
          ::close(s.fd);
          s.fd = -1;
        }
    for (Client& c : clients) ::close(c.fd);
    clients.clear();
    for (int* fd : {&epfd, &timerfd, &sigfd, &evfd, &listenfd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
    if (control_bound) {
      ::unlink(opt.config.control_path.c_str());
      control_bound = false;
    }
    if (mask_set) {
      pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
      mask_set = false;
    }
  }

  bool add_epoll(int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0;
  }

  bool open_side(Side& s, const std::string& link_name, const char* side_name, std::string* err) {
    if (s.iface.empty()) {
      *err = "link '" + link_name + "': no interface for side " + side_name + " (key '" +
             side_name + "')";
      return false;
    }
    s.ifindex = static_cast<int>(if_nametoindex(s.iface.c_str()));
    if (s.ifindex == 0) {
      *err = "link '" + link_name + "': interface '" + s.iface + "' (side " + side_name +
             ") not found in this network namespace";
      return false;
    }
    // Protocol 0 at creation: nothing is received until bind() names the interface, so no
    // frame of another interface slips in between.
    s.fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) {
      *err = errno == EPERM ? "AF_PACKET socket: permission denied (the relay needs CAP_NET_RAW: "
                              "run it as root)"
                            : errno_text("AF_PACKET socket");
      return false;
    }
    const int one = 1;
    const int buf = kSocketBufferBytes;
    if (setsockopt(s.fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf) != 0)
      setsockopt(s.fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    if (setsockopt(s.fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf) != 0)
      setsockopt(s.fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    // Our own transmissions must not come back to us; pkttype is checked too, for old kernels.
    setsockopt(s.fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one);
    setsockopt(s.fd, SOL_PACKET, PACKET_AUXDATA, &one, sizeof one);
    setsockopt(s.fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = s.ifindex;
    if (bind(s.fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
      *err = errno_text("bind to '" + s.iface + "'");
      return false;
    }
    // Frames on an impaired link are addressed to the far end, not to us.
    packet_mreq mr{};
    mr.mr_ifindex = s.ifindex;
    mr.mr_type = PACKET_MR_PROMISC;
    if (setsockopt(s.fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0) {
      *err = errno_text("promiscuous mode on '" + s.iface + "'");
      return false;
    }
    return true;
  }

  bool open_control(std::string* err) {
    const std::string& path = opt.config.control_path;
    sockaddr_un sa{};
    if (path.size() >= sizeof sa.sun_path) {
      *err = "control socket path too long: " + path;
      return false;
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        *err = "control socket path exists and is not a socket: " + path;
        return false;
      }
      ::unlink(path.c_str());  // stale socket of an earlier run
    }
    listenfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
    if (listenfd < 0 || bind(listenfd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      *err = errno_text("control socket " + path);
      return false;
    }
    control_bound = true;
    if (listen(listenfd, 8) != 0) {
      *err = errno_text("control socket " + path);
      return false;
    }
    return add_epoll(listenfd, kTagListen);
  }

  bool open(std::string* err) {
    const InjectorConfig& cfg = opt.config;
    if (cfg.policy.links.empty()) {
      *err = "no links: give at least one link (config [[link]] or --link NAME:IFACE_A:IFACE_B)";
      return false;
    }
    const wire::WireProfile* profile = wire::find_profile(cfg.profile);
    if (!profile) {
      *err = "unknown wire profile '" + cfg.profile + "'";
      return false;
    }
    try {
      policy = std::make_unique<Policy>(cfg.policy, real_ns(), *profile);
    } catch (const std::exception& e) {
      *err = e.what();
      return false;
    }
    opt.batch = std::clamp<size_t>(opt.batch, 1, 256);
    epfd = epoll_create1(EPOLL_CLOEXEC);
    timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epfd < 0 || timerfd < 0 || evfd < 0) {
      *err = errno_text("epoll/timerfd/eventfd");
      return false;
    }
    add_epoll(timerfd, kTagTimer);
    add_epoll(evfd, kTagEvent);
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &mask, &old_mask);
    mask_set = true;
    sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sigfd < 0) {
      *err = errno_text("signalfd");
      return false;
    }
    add_epoll(sigfd, kTagSignal);

    links.resize(cfg.policy.links.size());
    tx.resize(cfg.policy.links.size());
    for (size_t l = 0; l < links.size(); ++l) {
      const LinkInfo& li = cfg.policy.links[l];
      links[l][0].iface = li.iface_a;
      links[l][1].iface = li.iface_b;
      if (li.iface_a == li.iface_b && !li.iface_a.empty()) {
        *err = "link '" + li.name + "': sides a and b are the same interface";
        return false;
      }
      for (int s = 0; s < 2; ++s) {
        Side& side = links[l][static_cast<size_t>(s)];
        if (!open_side(side, li.name, s == 0 ? "a" : "b", err)) return false;
        add_epoll(side.fd, kTagSocket | l << 1 | static_cast<uint64_t>(s));
        const std::string& pcap = s == 0 ? li.pcap_a : li.pcap_b;
        if (!pcap.empty()) {
          side.pcap = std::make_unique<wire::CaptureWriter>();
          if (!side.pcap->open(pcap, wire::CaptureFormat::kPcap)) {
            *err = "capture " + pcap + ": " + side.pcap->error();
            return false;
          }
          side.pcap_open = true;
        }
        TxBatch& b = tx[l][static_cast<size_t>(s)];
        b.arena.resize(opt.batch * kSlotBytes);
        b.lens.resize(opt.batch);
      }
    }
    if (!cfg.control_path.empty() && !open_control(err)) return false;
    if (!cfg.log_path.empty() && !log.open(cfg.log_path, cfg.log_pass, err)) return false;

    rx_arena.resize(opt.batch * kSlotBytes);
    rx_msgs.resize(opt.batch);
    rx_iov.resize(opt.batch);
    rx_addr.resize(opt.batch);
    rx_cmsg.resize(opt.batch);
    opened = true;
    return true;
  }

  // --- transmit -----------------------------------------------------------------------------
  void flush(uint32_t link, int side) {
    TxBatch& b = tx[link][static_cast<size_t>(side)];
    if (b.used == 0) return;
    Side& s = links[link][static_cast<size_t>(side)];
    mmsghdr msgs[256];
    iovec iov[256];
    for (size_t i = 0; i < b.used; ++i) {
      iov[i].iov_base = b.arena.data() + i * kSlotBytes;
      iov[i].iov_len = b.lens[i];
      msgs[i] = mmsghdr{};
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // Stamped before sending: a reply to one of these frames must not appear older than it.
    const uint64_t t_tx = s.pcap_open ? real_ns() : 0;
    size_t done = 0;
    size_t failed = 0;
    int retries = 0;
    while (done < b.used) {
      const int n = sendmmsg(s.fd, msgs + done, static_cast<unsigned>(b.used - done), 0);
      if (n > 0) {
        done += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == ENOBUFS) && retries++ < 3) {
        pollfd p{s.fd, POLLOUT, 0};
        poll(&p, 1, 10);
        continue;
      }
      // A frame that cannot be sent (interface down, buffer full) is lost like on a real
      // link; count it, and carry on with the next one.
      ++counters.tx_errors;
      ++failed;
      ++done;
    }
    counters.tx_frames += b.used - failed;
    if (s.pcap_open) {
      for (size_t i = 0; i < b.used; ++i)
        if (!s.pcap->write(t_tx, wire::Bytes(b.arena.data() + i * kSlotBytes, b.lens[i])))
          io_failed = true;
    }
    b.used = 0;
  }

  void queue_tx(uint32_t link, int side, wire::Bytes frame) {
    TxBatch& b = tx[link][static_cast<size_t>(side)];
    if (frame.size() > kSlotBytes) return;
    std::memcpy(b.arena.data() + b.used * kSlotBytes, frame.data(), frame.size());
    b.lens[b.used++] = frame.size();
    if (b.used == opt.batch) flush(link, side);
  }

  void flush_all() {
    for (uint32_t l = 0; l < tx.size(); ++l)
      for (int s = 0; s < 2; ++s) flush(l, s);
  }

  // --- delays -------------------------------------------------------------------------------
  void arm_timer() {
    if (delayed.empty()) {
      if (armed_for != 0) {
        itimerspec its{};
        timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &its, nullptr);
        armed_for = 0;
      }
      return;
    }
    const uint64_t due = std::max<uint64_t>(delayed.top().due_mono_ns, 1);
    if (due == armed_for) return;
    itimerspec its{};
    its.it_value.tv_sec = static_cast<time_t>(due / 1'000'000'000ull);
    its.it_value.tv_nsec = static_cast<long>(due % 1'000'000'000ull);
    timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &its, nullptr);
    armed_for = due;
  }

  void release_due(uint64_t now) {
    while (!delayed.empty() && delayed.top().due_mono_ns <= now) {
      const Delayed& d = delayed.top();
      queue_tx(d.link, d.out_side, wire::Bytes(d.bytes.data(), d.bytes.size()));
      delayed.pop();
    }
    flush_all();
  }

  // --- receive ------------------------------------------------------------------------------
  void handle_frame(uint32_t link, int side, std::byte* slot, size_t len, const msghdr& mh,
                    const sockaddr_ll& from) {
    if (from.sll_pkttype == PACKET_OUTGOING) return;
    ++counters.rx_frames;
    if (mh.msg_flags & MSG_TRUNC) {
      ++counters.truncated;
      return;
    }
    uint64_t t = 0;
    std::byte* frame = slot + kVlanRoom;
    for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&mh), c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts;
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        t = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
      } else if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) {
        tpacket_auxdata aux;
        std::memcpy(&aux, CMSG_DATA(c), sizeof aux);
        if ((aux.tp_status & TP_STATUS_VLAN_VALID) && len >= 12) {
          // The kernel took the 802.1Q tag off; the far side must see the frame as sent.
          const uint16_t tpid =
              (aux.tp_status & TP_STATUS_VLAN_TPID_VALID) ? aux.tp_vlan_tpid : ETH_P_8021Q;
          std::memmove(slot, slot + kVlanRoom, 12);
          frame = slot;
          frame[12] = static_cast<std::byte>(tpid >> 8);
          frame[13] = static_cast<std::byte>(tpid);
          frame[14] = static_cast<std::byte>(aux.tp_vlan_tci >> 8);
          frame[15] = static_cast<std::byte>(aux.tp_vlan_tci);
          len += kVlanRoom;
        }
      }
    }
    if (t == 0) t = real_ns();
    Side& in = links[link][static_cast<size_t>(side)];
    const wire::Bytes bytes(frame, len);
    if (in.pcap_open && !in.pcap->write(t, bytes)) io_failed = true;
    const Direction dir = side == 0 ? Direction::kAtoB : Direction::kBtoA;
    const Decision& d = policy->on_frame(bytes, dir, link, t);
    if (log.is_open()) log.write(d, *policy);
    if (d.action == Action::kDrop) return;
    const int out_side = 1 - side;
    if (d.delay_ns == 0) {
      for (uint32_t i = 0; i <= d.copies; ++i) queue_tx(link, out_side, d.out);
      return;
    }
    const uint64_t due = mono_ns() + d.delay_ns;
    for (uint32_t i = 0; i <= d.copies; ++i) {
      if (delayed.size() >= opt.max_delayed_frames) {
        ++counters.queue_full;
        continue;
      }
      delayed.push(Delayed{due, delayed_seq++, link, static_cast<uint8_t>(out_side),
                           std::vector<std::byte>(d.out.begin(), d.out.end())});
    }
  }

  void drain_socket(uint32_t link, int side) {
    Side& s = links[link][static_cast<size_t>(side)];
    // A bounded number of batches per wake-up keeps one busy side from starving the other.
    for (int round = 0; round < 8; ++round) {
      for (size_t i = 0; i < opt.batch; ++i) {
        rx_iov[i].iov_base = rx_arena.data() + i * kSlotBytes + kVlanRoom;
        rx_iov[i].iov_len = kSlotBytes - kVlanRoom;
        msghdr& mh = rx_msgs[i].msg_hdr;
        mh = msghdr{};
        mh.msg_name = &rx_addr[i];
        mh.msg_namelen = sizeof(sockaddr_ll);
        mh.msg_iov = &rx_iov[i];
        mh.msg_iovlen = 1;
        mh.msg_control = rx_cmsg[i].data();
        mh.msg_controllen = kCmsgBytes;
      }
      const int n =
          recvmmsg(s.fd, rx_msgs.data(), static_cast<unsigned>(opt.batch), MSG_DONTWAIT, nullptr);
      if (n <= 0) break;
      for (int i = 0; i < n; ++i)
        handle_frame(link, side, rx_arena.data() + static_cast<size_t>(i) * kSlotBytes,
                     rx_msgs[static_cast<size_t>(i)].msg_len,
                     rx_msgs[static_cast<size_t>(i)].msg_hdr, rx_addr[static_cast<size_t>(i)]);
      flush_all();
      if (static_cast<size_t>(n) < opt.batch) break;
    }
  }

  void read_kernel_drops() {
    for (auto& l : links)
      for (Side& s : l) {
        tpacket_stats st{};
        socklen_t len = sizeof st;
        if (s.fd >= 0 && getsockopt(s.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) == 0)
          s.kernel_drops += st.tp_drops;  // reading resets the kernel's counters
      }
    counters.kernel_drops = 0;
    for (auto& l : links)
      for (Side& s : l) counters.kernel_drops += s.kernel_drops;
  }

  // --- control ------------------------------------------------------------------------------
  json counters_json() {
    read_kernel_drops();
    return json{{"rx_frames", counters.rx_frames}, {"tx_frames", counters.tx_frames},
                {"tx_errors", counters.tx_errors}, {"kernel_drops", counters.kernel_drops},
                {"truncated", counters.truncated}, {"queue_full", counters.queue_full},
                {"delayed_now", delayed.size()}};
  }

  json handle_command(const std::string& line) {
    json req;
    try {
      req = json::parse(line);
    } catch (const json::parse_error& e) {
      return json{{"ok", false}, {"error", std::string("not JSON: ") + e.what()}};
    }
    if (!req.is_object() || !req.contains("cmd") || !req["cmd"].is_string())
      return json{{"ok", false}, {"error", "expected {\"cmd\": ...}"}};
    const std::string cmd = req["cmd"];
    if (cmd == "stats") {
      std::string s;
      append_summary_json(s, *policy);
      json j = json::parse(s)["summary"];
      j["relay"] = counters_json();
      return json{{"ok", true}, {"stats", j}};
    }
    if (cmd == "rules") {
      json arr = json::array();
      for (const Rule& r : policy->config().rules) arr.push_back(json::parse(rule_to_json(r)));
      return json{{"ok", true}, {"rules", arr}};
    }
    if (cmd == "add_rule") {
      if (!req.contains("rule")) return json{{"ok", false}, {"error", "add_rule needs \"rule\""}};
      Rule r;
      std::string err;
      if (!parse_rule_json(req["rule"].dump(), r, &err)) return json{{"ok", false}, {"error", err}};
      err = policy->add_rule(std::move(r));
      if (!err.empty()) return json{{"ok", false}, {"error", err}};
      return json{{"ok", true}, {"name", policy->config().rules.back().name}};
    }
    if (cmd == "remove_rule") {
      if (!req.contains("name") || !req["name"].is_string())
        return json{{"ok", false}, {"error", "remove_rule needs \"name\""}};
      if (!policy->remove_rule(req["name"].get<std::string>()))
        return json{{"ok", false},
                    {"error", "no rule named '" + req["name"].get<std::string>() + "'"}};
      return json{{"ok", true}};
    }
    if (cmd == "flap") {
      uint32_t link = 0;
      if (req.contains("link")) {
        if (!req["link"].is_string())
          return json{{"ok", false}, {"error", "\"link\" must be a name"}};
        auto idx = policy->link_index(req["link"].get<std::string>());
        if (!idx)
          return json{{"ok", false},
                      {"error", "no link named '" + req["link"].get<std::string>() + "'"}};
        link = *idx;
      } else if (links.size() != 1) {
        return json{{"ok", false}, {"error", "flap needs \"link\" when the relay owns several"}};
      }
      if (!req.contains("down_ms") || !req["down_ms"].is_number() ||
          req["down_ms"].get<double>() <= 0)
        return json{{"ok", false}, {"error", "flap needs \"down_ms\" > 0"}};
      const auto down = static_cast<uint64_t>(req["down_ms"].get<double>() * 1e6);
      const uint64_t now = real_ns();
      policy->flap_now(link, now, down);
      return json{{"ok", true}, {"down_from_ns", now}, {"down_until_ns", now + down}};
    }
    if (cmd == "stop") {
      stop = true;
      return json{{"ok", true}};
    }
    return json{
        {"ok", false},
        {"error", "unknown cmd '" + cmd + "' (stats, rules, add_rule, remove_rule, flap, stop)"}};
  }

  void close_client(size_t i) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, clients[i].fd, nullptr);
    ::close(clients[i].fd);
    clients.erase(clients.begin() + static_cast<ptrdiff_t>(i));
  }

  void on_client(int fd) {
    size_t i = 0;
    while (i < clients.size() && clients[i].fd != fd) ++i;
    if (i == clients.size()) return;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        clients[i].in.append(buf, static_cast<size_t>(n));
        if (clients[i].in.size() > (1u << 20)) {
          close_client(i);
          return;
        }
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      close_client(i);  // EOF or error
      return;
    }
    size_t nl;
    while ((nl = clients[i].in.find('\n')) != std::string::npos) {
      const std::string line = clients[i].in.substr(0, nl);
      clients[i].in.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string reply = handle_command(line).dump() + "\n";
      size_t off = 0;
      while (off < reply.size()) {
        const ssize_t w = send(fd, reply.data() + off, reply.size() - off, MSG_NOSIGNAL);
        if (w > 0) {
          off += static_cast<size_t>(w);
        } else if (w < 0 && errno == EAGAIN) {
          pollfd p{fd, POLLOUT, 0};
          if (poll(&p, 1, 1000) <= 0) break;
        } else if (w < 0 && errno == EINTR) {
          continue;
        } else {
          break;
        }
      }
    }
  }

  void on_listen() {
    for (;;) {
      const int fd = accept4(listenfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      clients.push_back(Client{fd, {}});
      add_epoll(fd, kTagClient | static_cast<uint64_t>(fd));
    }
  }

  // --- main loop ----------------------------------------------------------------------------
  int run() {
    if (!opened) return 1;
    const uint64_t start = mono_ns();
    const uint64_t end = opt.duration_ns ? start + opt.duration_ns : 0;
    epoll_event events[64];
    while (!stop.load(std::memory_order_relaxed)) {
      int timeout_ms = -1;
      if (end) {
        const uint64_t now = mono_ns();
        if (now >= end) break;
        timeout_ms = static_cast<int>((end - now + 999'999) / 1'000'000);
      }
      const int n = epoll_wait(epfd, events, 64, timeout_ms);
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < n; ++i) {
        const uint64_t tag = events[i].data.u64;
        switch (tag & kTagMask) {
          case kTagSocket:
            drain_socket(static_cast<uint32_t>((tag & 0xFFFFFFFFFFull) >> 1),
                         static_cast<int>(tag & 1));
            break;
          case kTagTimer: {
            uint64_t expirations;
            while (::read(timerfd, &expirations, sizeof expirations) > 0) {
            }
            armed_for = 0;
            break;
          }
          case kTagSignal: {
            signalfd_siginfo si;
            while (::read(sigfd, &si, sizeof si) > 0) {
            }
            stop = true;
            break;
          }
          case kTagEvent: {
            uint64_t v;
            while (::read(evfd, &v, sizeof v) > 0) {
            }
            break;
          }
          case kTagListen:
            on_listen();
            break;
          case kTagClient:
            on_client(static_cast<int>(tag & 0xFFFFFFFFull));
            break;
          default:
            break;
        }
      }
      release_due(mono_ns());
      arm_timer();
    }
    // Frames still held were already logged as delayed: give them their time (bounded) rather
    // than make the log lie.
    const uint64_t drain_until = mono_ns() + opt.drain_ns;
    while (!delayed.empty()) {
      const uint64_t now = mono_ns();
      if (now >= drain_until) break;
      const uint64_t due = delayed.top().due_mono_ns;
      if (due > now) {
        const uint64_t wait = std::min(due, drain_until) - now;
        timespec ts{static_cast<time_t>(wait / 1'000'000'000ull),
                    static_cast<long>(wait % 1'000'000'000ull)};
        nanosleep(&ts, nullptr);
      }
      release_due(mono_ns());
    }
    counters.discarded_at_exit = delayed.size();
    read_kernel_drops();
    flush_all();
    bool ok = !io_failed;
    if (log.is_open() && !log.close(policy.get())) {
      std::cerr << "mrc-inject: " << log.error() << "\n";
      ok = false;
    }
    for (auto& l : links)
      for (Side& s : l)
        if (s.pcap_open && !s.pcap->close()) {
          std::cerr << "mrc-inject: " << s.pcap->error() << "\n";
          ok = false;
        }
    if (!opt.quiet) {
      std::string s;
      append_summary_json(s, *policy);
      json j = json::parse(s);
      j["summary"]["relay"] = counters_json();
      j["summary"]["relay"]["discarded_at_exit"] = counters.discarded_at_exit;
      std::cout << j.dump() << std::endl;
    }
    close_all();
    return ok ? 0 : 1;
  }
};

Relay::Relay(RelayOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(options);
}

Relay::~Relay() = default;

bool Relay::open(std::string* error) {
  std::string err;
  const bool ok = impl_->open(&err);
  if (!ok) {
    impl_->close_all();
    if (error) *error = err;
  }
  return ok;
}

int Relay::run() {
  return impl_->run();
}

void Relay::request_stop() {
  impl_->stop = true;
  if (impl_->evfd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(impl_->evfd, &one, sizeof one);
  }
}

const RelayCounters& Relay::counters() const {
  return impl_->counters;
}
const Policy& Relay::policy() const {
  return *impl_->policy;
}

}  // namespace mrc::faults
