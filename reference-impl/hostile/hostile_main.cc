// `mrc_hostile`: learn a running transfer from a tap, then flood one kind of hostile frame at a
// fixed rate through AF_PACKET. TEST AND BENCHMARK ONLY; root (CAP_NET_RAW) is needed.
//
//   mrc_hostile learn --iface IF --out FILE [--timeout-s 10]
//   mrc_hostile flood --iface IF --learned FILE --next-hop-mac MAC --kind KIND
//                     --rate FRAMES_PER_S (--seconds S | --count N) [--cpu N]
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference-impl/hostile/hostile.h"

namespace mrc::hostile {
namespace {

using json = nlohmann::json;

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string to_hex(const std::vector<std::byte>& v) {
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(v.size() * 2);
  for (std::byte b : v) {
    s.push_back(d[std::to_integer<unsigned>(b) >> 4]);
    s.push_back(d[std::to_integer<unsigned>(b) & 15]);
  }
  return s;
}

bool from_hex(const std::string& s, std::vector<std::byte>& out) {
  if (s.size() % 2 != 0) return false;
  out.clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    unsigned v = 0;
    if (std::sscanf(s.c_str() + i, "%2x", &v) != 1) return false;
    out.push_back(static_cast<std::byte>(v));
  }
  return true;
}

bool parse_mac(const std::string& s, wire::MacAddr& mac) {
  unsigned b[6];
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5]) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (b[i] > 255) return false;
    mac[i] = static_cast<uint8_t>(b[i]);
  }
  return true;
}

// An AF_PACKET socket on one interface (every protocol); -1 with a message on failure.
int open_packet(const std::string& iface, int& ifindex, wire::MacAddr& mac, bool promisc) {
  ifindex = static_cast<int>(if_nametoindex(iface.c_str()));
  if (ifindex == 0) {
    std::fprintf(stderr, "mrc_hostile: no interface %s\n", iface.c_str());
    return -1;
  }
  const int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
  if (fd < 0) {
    std::fprintf(stderr, "mrc_hostile: AF_PACKET socket: %s (needs root)\n", std::strerror(errno));
    return -1;
  }
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = ifindex;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0 ||
      ioctl(fd, SIOCGIFHWADDR, &ifr) != 0) {
    std::fprintf(stderr, "mrc_hostile: %s: %s\n", iface.c_str(), std::strerror(errno));
    close(fd);
    return -1;
  }
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  if (promisc) {
    packet_mreq mr{};
    mr.mr_ifindex = ifindex;
    mr.mr_type = PACKET_MR_PROMISC;
    setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr));
  }
  return fd;
}

int learn(const std::string& iface, const std::string& out_path, double timeout_s) {
  int ifindex = 0;
  wire::MacAddr mac{};
  const int fd = open_packet(iface, ifindex, mac, true);
  if (fd < 0) return 2;
  Learner learner;
  std::vector<std::byte> buf(65536);
  const uint64_t deadline = now_ns() + static_cast<uint64_t>(timeout_s * 1e9);
  uint64_t seen = 0;
  while (!learner.complete()) {
    const uint64_t t = now_ns();
    if (t >= deadline) break;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>((deadline - t) / 1'000'000 + 1)) <= 0) continue;
    const ssize_t n = recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n <= 0) continue;
    ++seen;
    learner.offer({buf.data(), static_cast<size_t>(n)});
  }
  close(fd);
  if (!learner.complete()) {
    std::fprintf(stderr,
                 "mrc_hostile: learnt nothing usable from %s in %.1f s (%lu frames seen; need a "
                 "data packet with RETH and a SACK)\n",
                 iface.c_str(), timeout_s, static_cast<unsigned long>(seen));
    return 1;
  }
  Crafter c(learner.learned(), mac, mac);
  json j = {{"data", to_hex(learner.learned().data)},
            {"sack", to_hex(learner.learned().sack)},
            {"responder_qpn", c.responder_qpn()},
            {"requester_qpn", c.requester_qpn()},
            {"data_psn", c.data_psn()},
            {"cack_psn", c.cack_psn()},
            {"rkey", c.rkey()},
            {"va", c.va()},
            {"frames_seen", seen}};
  std::ofstream f(out_path);
  f << j.dump() << "\n";
  if (!f.good()) {
    std::fprintf(stderr, "mrc_hostile: cannot write %s\n", out_path.c_str());
    return 2;
  }
  std::fprintf(stderr,
               "mrc_hostile: learnt responder QPN 0x%x, requester QPN 0x%x, PSN %u, "
               "rkey 0x%x, VA 0x%lx from %lu frames\n",
               c.responder_qpn(), c.requester_qpn(), c.data_psn(), c.rkey(),
               static_cast<unsigned long>(c.va()), static_cast<unsigned long>(seen));
  return 0;
}

// The IPv6 hop limit of an Ethernet + IPv6 frame (no VLAN: what Crafter builds). Outside the
// ICRC (a variant field) and the UDP checksum, so the frame stays valid: the benchmark gives
// its frames a hop limit of their own to tell them from the transfer's at the router.
void set_hop_limit(std::vector<std::byte>& f, int hop_limit) {
  constexpr size_t kEtherType = 12, kHopLimit = 14 + 7;
  if (hop_limit < 0 || f.size() <= kHopLimit || f[kEtherType] != std::byte{0x86} ||
      f[kEtherType + 1] != std::byte{0xDD})
    return;
  f[kHopLimit] = static_cast<std::byte>(hop_limit);
}

struct CpuTimes {
  double user_s = 0, sys_s = 0;
};

CpuTimes cpu_times() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  return {s(ru.ru_utime), s(ru.ru_stime)};
}

int flood(const std::string& iface, const std::string& learned_path, const std::string& mac_s,
          Kind kind, double rate, double seconds, uint64_t count, int cpu, int hop_limit) {
  std::ifstream f(learned_path);
  json j = json::parse(f, nullptr, false);
  Learned l;
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j.contains("sack") ||
      !j["data"].is_string() || !j["sack"].is_string() ||
      !from_hex(j["data"].get<std::string>(), l.data) ||
      !from_hex(j["sack"].get<std::string>(), l.sack)) {
    std::fprintf(stderr, "mrc_hostile: %s: not a file written by 'mrc_hostile learn'\n",
                 learned_path.c_str());
    return 2;
  }
  wire::MacAddr dst{};
  if (!parse_mac(mac_s, dst)) {
    std::fprintf(stderr, "mrc_hostile: --next-hop-mac %s: not a MAC address\n", mac_s.c_str());
    return 2;
  }
  int ifindex = 0;
  wire::MacAddr src{};
  const int fd = open_packet(iface, ifindex, src, false);
  if (fd < 0) return 2;
  // wrong-rkey / va-outside follow the transfer on the tap (when it is still mirrored here);
  // the other kinds read nothing, so their receive queue must not fill with the fabric's frames.
  const bool follow = kind == Kind::kWrongRkey || kind == Kind::kVaOutside;
  if (!follow) {
    int zero = 0;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &zero, sizeof(zero));
    shutdown(fd, SHUT_RD);
  }
  Crafter c(std::move(l), src, dst);
  std::vector<std::byte> rx(65536);
  if (!c.ok()) {
    std::fprintf(stderr, "mrc_hostile: %s: %s\n", learned_path.c_str(), c.error().c_str());
    close(fd);
    return 2;
  }
  // The kernel's per-frame work (veth, the router's forwarding, the victim's socket) runs in this
  // thread's softirq; the qdisc adds a lock and a queue in front of it that the veth has no use
  // for. Best effort: an old kernel without it still floods.
  int one = 1;
  setsockopt(fd, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof(one));
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "mrc_hostile: --cpu %d: %s\n", cpu, std::strerror(errno));
      close(fd);
      return 2;
    }
  }
  // --seconds is a deadline as well: a generator that cannot keep up (a loaded host) sends fewer
  // frames rather than flooding past the end of the transfer it was meant to overlap.
  const uint64_t total = count > 0 ? count : static_cast<uint64_t>(rate * seconds);
  const uint64_t deadline =
      count > 0 ? UINT64_MAX : now_ns() + static_cast<uint64_t>(seconds * 1e9);
  // Frames are built before the clock starts (crafting a 4 KiB data frame, ICRC included, cost
  // more than sending it: the generator reached 8,000-32,000 frames/s crafting each one). Frame
  // k is pool[k % pool size], so each kind's variation (request ids, NACK PSNs, PSN offsets,
  // port-status GIDs) cycles through the pool: 16,384 small frames, or 1,024 data frames (4 MiB).
  // wrong-rkey and va-outside follow the newest PSN on the tap: each is built when it is sent.
  const bool data_kind = kind == Kind::kPsnAhead || kind == Kind::kOldPsn || kind == Kind::kBadIcrc;
  const size_t pool_size =
      follow ? 0 : static_cast<size_t>(std::min<uint64_t>(total, data_kind ? 1024 : 16384));
  const uint64_t build0 = now_ns();
  std::vector<std::vector<std::byte>> pool(pool_size);
  for (size_t i = 0; i < pool_size; ++i) {
    pool[i] = c.craft(kind, i);
    set_hop_limit(pool[i], hop_limit);
    if (pool[i].empty()) {
      std::fprintf(stderr, "mrc_hostile: cannot build frame %zu of kind %s\n", i,
                   std::string(kind_name(kind)).c_str());
      close(fd);
      return 1;
    }
  }
  // A batch is every frame due by now, up to kMaxBatch: one syscall for many frames when the
  // generator is behind (it wakes late on a loaded host) and few when it is on time.
  constexpr size_t kMinBatch = 32;
  constexpr size_t kMaxBatch = 512;
  std::vector<std::vector<std::byte>> live(follow ? kMaxBatch : 0);
  std::vector<iovec> iov(kMaxBatch);
  std::vector<mmsghdr> msgs(kMaxBatch);
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = ifindex;
  to.sll_halen = 6;
  std::memcpy(to.sll_addr, dst.data(), 6);
  uint64_t sent = 0, errors = 0, craft_failed = 0, syscalls = 0;
  const CpuTimes cpu0 = cpu_times();
  const uint64_t t0 = now_ns();
  const double ns_per_frame = 1e9 / rate;
  while (sent + errors + craft_failed < total) {
    uint64_t t = now_ns();
    if (t >= deadline) break;
    // Pacing: frame k is due at t0 + k / rate; the generator sleeps until kMinBatch frames are
    // due (one wake-up per frame would cost more than the frames).
    const uint64_t k = sent + errors + craft_failed;
    const uint64_t due = t0 + static_cast<uint64_t>(static_cast<double>(k) * ns_per_frame);
    const uint64_t wake =
        due + static_cast<uint64_t>(static_cast<double>(kMinBatch - 1) * ns_per_frame);
    if (t < wake && total - k >= kMinBatch) {
      timespec ts{static_cast<time_t>(wake / 1'000'000'000ull),
                  static_cast<long>(wake % 1'000'000'000ull)};
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
      t = now_ns();
    }
    const uint64_t due_now =
        1 + static_cast<uint64_t>(static_cast<double>(t - std::min(t, due)) / ns_per_frame);
    for (int r = 0; follow && r < 4096; ++r) {
      const ssize_t got = recv(fd, rx.data(), rx.size(), MSG_DONTWAIT);
      if (got <= 0) break;
      c.track({rx.data(), static_cast<size_t>(got)});
    }
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>({kMaxBatch, total - k, std::max<uint64_t>(due_now, 1)}));
    size_t m = 0;
    for (size_t b = 0; b < n; ++b) {
      const std::vector<std::byte>* fr;
      if (follow) {
        live[m] = c.craft(kind, k + b);
        set_hop_limit(live[m], hop_limit);
        fr = &live[m];
      } else {
        fr = &pool[(k + b) % pool_size];
      }
      if (fr->empty()) {
        ++craft_failed;
        continue;
      }
      iov[m] = {const_cast<std::byte*>(fr->data()), fr->size()};
      msgs[m] = {};
      msgs[m].msg_hdr.msg_name = &to;
      msgs[m].msg_hdr.msg_namelen = sizeof(to);
      msgs[m].msg_hdr.msg_iov = &iov[m];
      msgs[m].msg_hdr.msg_iovlen = 1;
      ++m;
    }
    size_t done = 0;
    while (done < m) {
      const int r = sendmmsg(fd, msgs.data() + done, static_cast<unsigned>(m - done), 0);
      ++syscalls;
      if (r > 0) {
        done += static_cast<size_t>(r);
        sent += static_cast<uint64_t>(r);
      } else if (r < 0 && errno == EINTR) {
        continue;
      } else {
        ++errors;  // the frame at `done` failed alone (ENOBUFS ...); go on with the rest
        ++done;
      }
    }
  }
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  const CpuTimes cpu1 = cpu_times();
  close(fd);
  json out = {{"kind", kind_name(kind)},
              {"sent", sent},
              {"send_errors", errors},
              {"craft_failed", craft_failed},
              {"seconds", secs},
              {"rate_target", rate},
              {"rate", secs > 0 ? sent / secs : 0},
              {"frames_per_syscall", syscalls > 0 ? static_cast<double>(sent) / syscalls : 0},
              {"pool", pool_size},
              {"pool_build_s", static_cast<double>(t0 - build0) / 1e9},
              {"cpu", cpu},
              // The generator's CPU while it flooded: user (pacing, batches) and system (the
              // sends, and whatever softirq work the kernel charges to this thread).
              {"cpu_user_s", cpu1.user_s - cpu0.user_s},
              {"cpu_sys_s", cpu1.sys_s - cpu0.sys_s},
              {"responder_qpn", c.responder_qpn()},
              {"requester_qpn", c.requester_qpn()}};
  std::printf("%s\n", out.dump().c_str());
  return craft_failed == 0 ? 0 : 1;
}

}  // namespace

int hostile_main(int argc, char** argv) {
  CLI::App app{"mrc_hostile: hostile MRC frames from what a tap shows (TEST/BENCHMARK ONLY)"};
  app.require_subcommand(1);
  std::string iface, out, learned, mac, kind_s;
  double timeout_s = 10, rate = 10'000, seconds = 1;
  uint64_t count = 0;
  int cpu = -1;
  int hop_limit = -1;
  CLI::App* l = app.add_subcommand("learn", "read the tap until a RETH data packet and a SACK");
  l->add_option("--iface", iface, "tap interface")->required();
  l->add_option("--out", out, "where to write what was learnt (JSON)")->required();
  l->add_option("--timeout-s", timeout_s, "give up after this long")->check(CLI::Range(0.1, 600.0));
  CLI::App* fl = app.add_subcommand("flood", "send one kind of hostile frame at a fixed rate");
  fl->add_option("--iface", iface, "interface towards the router")->required();
  fl->add_option("--learned", learned, "file written by 'learn'")->required();
  fl->add_option("--next-hop-mac", mac, "the router port's MAC")->required();
  std::string kinds;
  for (Kind k : kAllKinds)
    kinds += std::string(kinds.empty() ? "" : ", ") + std::string(kind_name(k));
  fl->add_option("--kind", kind_s, kinds)->required();
  fl->add_option("--rate", rate, "frames per second")->check(CLI::Range(1.0, 1e7));
  fl->add_option("--seconds", seconds, "how long (rate x seconds frames)")
      ->check(CLI::Range(0.001, 3600.0));
  fl->add_option("--count", count, "frames (instead of rate x seconds)");
  fl->add_option("--cpu", cpu, "pin the generator (and the kernel work it runs inline) to this CPU")
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  fl->add_option("--hop-limit", hop_limit,
                 "IPv6 hop limit of every frame (default: as learnt), so that a tc filter can "
                 "tell them from the transfer's")
      ->check(CLI::Range(1, 255));
  CLI11_PARSE(app, argc, argv);
  if (l->parsed()) return learn(iface, out, timeout_s);
  const std::optional<Kind> kind = parse_kind(kind_s);
  if (!kind) {
    std::fprintf(stderr, "mrc_hostile: --kind %s: one of %s\n", kind_s.c_str(), kinds.c_str());
    return 2;
  }
  return flood(iface, learned, mac, *kind, rate, seconds, count, cpu, hop_limit);
}

}  // namespace mrc::hostile

int main(int argc, char** argv) {
  return mrc::hostile::hostile_main(argc, argv);
}
