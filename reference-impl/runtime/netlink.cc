// Interface facts (ioctl, getifaddrs) and next-hop MAC resolution (rtnetlink dumps of routes and
// neighbours). Only IPv6: the runtime speaks RoCEv2 over IPv6.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "reference-impl/runtime/runtime.h"
#include "reference-impl/runtime/sys.h"

namespace mrc::runtime {
namespace {

struct Route6 {
  wire::Ipv6Addr dst{};
  uint8_t plen = 0;
  uint32_t table = 0;
  int oif = 0;
  bool has_gw = false;
  wire::Ipv6Addr gw{};
};

struct Neigh6 {
  int ifindex = 0;
  wire::Ipv6Addr addr{};
  bool has_mac = false;
  wire::MacAddr mac{};
  uint16_t state = 0;
  bool router = false;
};

bool usable_state(uint16_t s) {
  return (s & (NUD_PERMANENT | NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_NOARP)) != 0;
}

bool prefix_covers(const wire::Ipv6Addr& net, uint8_t plen, const wire::Ipv6Addr& a) {
  for (unsigned bit = 0; bit < plen; ++bit) {
    const uint8_t m = static_cast<uint8_t>(0x80u >> (bit % 8));
    if ((net[bit / 8] & m) != (a[bit / 8] & m)) return false;
  }
  return true;
}

// One rtnetlink dump; calls fn for every message of type `want`.
template <typename Fn>
Status nl_dump(uint16_t type, uint16_t want, Fn&& fn) {
  Fd fd(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (!fd.ok()) return sys_error("socket(AF_NETLINK)");
  struct {
    nlmsghdr nh;
    union {
      rtmsg rt;
      ndmsg nd;
    } u;
  } req{};
  req.nh.nlmsg_type = type;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.nh.nlmsg_seq = 1;
  if (type == RTM_GETROUTE) {
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    req.u.rt.rtm_family = AF_INET6;
  } else {
    req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(ndmsg));
    req.u.nd.ndm_family = AF_INET6;
  }
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (sendto(fd.get(), &req, req.nh.nlmsg_len, 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) < 0)
    return sys_error("netlink sendto");
  std::vector<char> buf(1 << 16);
  for (;;) {
    const ssize_t n = recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("netlink recv");
    }
    int len = static_cast<int>(n);
    for (auto* nh = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(nh, len);
         nh = NLMSG_NEXT(nh, len)) {
      if (nh->nlmsg_type == NLMSG_DONE) return Status::Ok();
      if (nh->nlmsg_type == NLMSG_ERROR) {
        const auto* err = static_cast<const nlmsgerr*>(NLMSG_DATA(nh));
        if (err->error == 0) return Status::Ok();
        return Status::Error(-err->error,
                             std::string("netlink dump: ") + std::strerror(-err->error));
      }
      if (nh->nlmsg_type == want) fn(nh);
    }
  }
}

Status dump_routes(std::vector<Route6>& out) {
  return nl_dump(RTM_GETROUTE, RTM_NEWROUTE, [&](nlmsghdr* nh) {
    const auto* rt = static_cast<const rtmsg*>(NLMSG_DATA(nh));
    if (rt->rtm_family != AF_INET6 || rt->rtm_type != RTN_UNICAST) return;
    Route6 base;
    base.plen = rt->rtm_dst_len;
    base.table = rt->rtm_table;
    std::vector<Route6> hops;
    int len = static_cast<int>(RTM_PAYLOAD(nh));
    for (auto* a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
      switch (a->rta_type) {
        case RTA_DST:
          if (RTA_PAYLOAD(a) == 16) std::memcpy(base.dst.data(), RTA_DATA(a), 16);
          break;
        case RTA_TABLE:
          if (RTA_PAYLOAD(a) == 4) std::memcpy(&base.table, RTA_DATA(a), 4);
          break;
        case RTA_OIF:
          if (RTA_PAYLOAD(a) == 4) std::memcpy(&base.oif, RTA_DATA(a), 4);
          break;
        case RTA_GATEWAY:
          if (RTA_PAYLOAD(a) == 16) {
            std::memcpy(base.gw.data(), RTA_DATA(a), 16);
            base.has_gw = true;
          }
          break;
        case RTA_MULTIPATH: {
          auto* nhp = static_cast<rtnexthop*>(RTA_DATA(a));
          int left = static_cast<int>(RTA_PAYLOAD(a));
          while (left >= static_cast<int>(sizeof(rtnexthop)) &&
                 nhp->rtnh_len >= sizeof(rtnexthop) && nhp->rtnh_len <= left) {
            Route6 h;
            h.oif = nhp->rtnh_ifindex;
            int alen = nhp->rtnh_len - static_cast<int>(sizeof(rtnexthop));
            for (auto* b = RTNH_DATA(nhp); RTA_OK(b, alen); b = RTA_NEXT(b, alen)) {
              if (b->rta_type == RTA_GATEWAY && RTA_PAYLOAD(b) == 16) {
                std::memcpy(h.gw.data(), RTA_DATA(b), 16);
                h.has_gw = true;
              }
            }
            hops.push_back(h);
            left -= RTNH_ALIGN(nhp->rtnh_len);
            nhp = RTNH_NEXT(nhp);
          }
          break;
        }
        default:
          break;
      }
    }
    if (base.table == RT_TABLE_LOCAL) return;
    if (hops.empty()) {
      out.push_back(base);
    } else {
      for (Route6& h : hops) {
        h.dst = base.dst;
        h.plen = base.plen;
        h.table = base.table;
        out.push_back(h);
      }
    }
  });
}

Status dump_neighbours(std::vector<Neigh6>& out) {
  return nl_dump(RTM_GETNEIGH, RTM_NEWNEIGH, [&](nlmsghdr* nh) {
    const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(nh));
    if (nd->ndm_family != AF_INET6) return;
    Neigh6 n;
    n.ifindex = nd->ndm_ifindex;
    n.state = nd->ndm_state;
    n.router = (nd->ndm_flags & NTF_ROUTER) != 0;
    int len = static_cast<int>(nh->nlmsg_len - NLMSG_LENGTH(sizeof(ndmsg)));
    for (auto* a = reinterpret_cast<rtattr*>(reinterpret_cast<char*>(const_cast<ndmsg*>(nd)) +
                                             NLMSG_ALIGN(sizeof(ndmsg)));
         RTA_OK(a, len); a = RTA_NEXT(a, len)) {
      if (a->rta_type == NDA_DST && RTA_PAYLOAD(a) == 16)
        std::memcpy(n.addr.data(), RTA_DATA(a), 16);
      if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == 6) {
        std::memcpy(n.mac.data(), RTA_DATA(a), 6);
        n.has_mac = true;
      }
    }
    out.push_back(n);
  });
}

bool lookup_neigh(int ifindex, const wire::Ipv6Addr& addr, wire::MacAddr& mac, Status& st) {
  std::vector<Neigh6> ns;
  st = dump_neighbours(ns);
  if (!st.ok()) return false;
  for (const Neigh6& n : ns) {
    if (n.ifindex == ifindex && n.addr == addr && n.has_mac && usable_state(n.state)) {
      mac = n.mac;
      return true;
    }
  }
  return false;
}

// Makes the kernel resolve `gw` on `ifindex`: a datagram to its discard port goes through the
// neighbour subsystem, which sends the solicitation.
void solicit(const std::string& iface, int ifindex, const wire::Ipv6Addr& gw) {
  Fd s(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.ok()) return;
  (void)setsockopt(s.get(), SOL_SOCKET, SO_BINDTODEVICE, iface.c_str(),
                   static_cast<socklen_t>(iface.size()));
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_port = htons(9);
  std::memcpy(&sa.sin6_addr, gw.data(), 16);
  if (gw[0] == 0xfe && (gw[1] & 0xc0) == 0x80) sa.sin6_scope_id = static_cast<uint32_t>(ifindex);
  const char probe = 0;
  (void)sendto(s.get(), &probe, 1, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
}

std::string mac_text(const wire::MacAddr& m) {
  char b[24];
  std::snprintf(b, sizeof b, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return b;
}

}  // namespace

Status sys_error(const std::string& what) {
  const int e = errno;
  std::string msg = what + ": " + std::strerror(e);
  if (e == EPERM || e == EACCES) msg += " (needs root / CAP_NET_RAW)";
  return Status::Error(e == 0 ? EIO : e, msg);
}

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int64_t realtime_offset_ns() {
  static const int64_t offset = [] {
    timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return (int64_t{rt.tv_sec} - int64_t{mono.tv_sec}) * 1'000'000'000ll +
           (int64_t{rt.tv_nsec} - int64_t{mono.tv_nsec});
  }();
  return offset;
}

Status query_iface(const std::string& name, IfaceInfo& out) {
  if (name.empty() || name.size() >= IFNAMSIZ)
    return Status::Error(EINVAL, "interface name '" + name + "' is empty or too long");
  out = IfaceInfo{};
  out.name = name;
  out.index = static_cast<int>(if_nametoindex(name.c_str()));
  if (out.index == 0)
    return Status::Error(ENODEV,
                         "interface '" + name + "' does not exist in this network namespace");
  Fd s(socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.ok()) return sys_error("socket(AF_INET6)");
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, name.c_str(), name.size());
  if (ioctl(s.get(), SIOCGIFHWADDR, &ifr) < 0) return sys_error("SIOCGIFHWADDR " + name);
  std::memcpy(out.mac.data(), ifr.ifr_hwaddr.sa_data, 6);
  if (ioctl(s.get(), SIOCGIFMTU, &ifr) < 0) return sys_error("SIOCGIFMTU " + name);
  out.mtu = static_cast<uint32_t>(ifr.ifr_mtu);
  if (ioctl(s.get(), SIOCGIFFLAGS, &ifr) < 0) return sys_error("SIOCGIFFLAGS " + name);
  out.up = (ifr.ifr_flags & IFF_UP) != 0;
  return Status::Ok();
}

std::optional<wire::Ipv6Addr> first_global_ipv6(const std::string& iface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<wire::Ipv6Addr> found;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET6 || iface != a->ifa_name)
      continue;
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
    wire::Ipv6Addr v;
    std::memcpy(v.data(), &sa->sin6_addr, 16);
    const bool link_local = v[0] == 0xfe && (v[1] & 0xc0) == 0x80;
    const bool loopback = IN6_IS_ADDR_LOOPBACK(&sa->sin6_addr);
    if (!link_local && !loopback) found = v;
  }
  freeifaddrs(list);
  return found;
}

Status resolve_next_hop(const std::string& iface, std::span<const wire::Ipv6Addr> dsts,
                        uint64_t timeout_ns, wire::MacAddr& out, std::string* how) {
  IfaceInfo info;
  if (Status st = query_iface(iface, info); !st.ok()) return st;
  std::vector<Route6> routes;
  if (Status st = dump_routes(routes); !st.ok()) return st;

  // The gateway: the longest route through iface covering a destination, else any gateway route
  // through iface (the plane's router).
  const Route6* best = nullptr;
  for (const Route6& r : routes) {
    if (r.oif != info.index || !r.has_gw) continue;
    for (const wire::Ipv6Addr& d : dsts) {
      if (prefix_covers(r.dst, r.plen, d) && (best == nullptr || r.plen > best->plen)) best = &r;
    }
  }
  std::string rule = "route to destination";
  // A destination on the link itself (its longest route through iface has no gateway, as on a
  // direct cable between two hosts): its own neighbour entry is the next hop.
  const Route6* onlink = nullptr;
  const wire::Ipv6Addr* onlink_dst = nullptr;
  for (const Route6& r : routes) {
    if (r.oif != info.index) continue;
    for (const wire::Ipv6Addr& d : dsts)
      if (prefix_covers(r.dst, r.plen, d) && (onlink == nullptr || r.plen > onlink->plen)) {
        onlink = &r;
        onlink_dst = &d;
      }
  }
  if (onlink != nullptr && !onlink->has_gw && (best == nullptr || onlink->plen > best->plen)) {
    const wire::Ipv6Addr dst = *onlink_dst;
    const uint64_t until = monotonic_ns() + timeout_ns;
    Status st;
    bool solicited = false;
    for (;;) {
      if (lookup_neigh(info.index, dst, out, st)) {
        if (how) *how = "destination " + wire::format_ipv6(dst) + " on link: " + mac_text(out);
        return Status::Ok();
      }
      if (!st.ok()) return st;
      if (monotonic_ns() >= until) break;
      if (!solicited) {
        solicit(iface, info.index, dst);
        solicited = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::Error(EHOSTUNREACH, "plane interface " + iface + ": " + wire::format_ipv6(dst) +
                                           " is on the link but did not resolve (no neighbour "
                                           "entry after NDP)");
  }
  if (best == nullptr) {
    for (const Route6& r : routes) {
      if (r.oif == info.index && r.has_gw && (best == nullptr || r.plen > best->plen)) best = &r;
    }
    rule = "gateway route through " + iface;
  }
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  if (best != nullptr) {
    const wire::Ipv6Addr gw = best->gw;
    Status st;
    bool solicited = false;
    for (;;) {
      if (lookup_neigh(info.index, gw, out, st)) {
        if (how) *how = rule + ": gateway " + wire::format_ipv6(gw) + " is " + mac_text(out);
        return Status::Ok();
      }
      if (!st.ok()) return st;
      if (monotonic_ns() >= deadline) break;
      if (!solicited) {
        solicit(iface, info.index, gw);
        solicited = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return Status::Error(EHOSTUNREACH, "plane interface " + iface + ": gateway " +
                                           wire::format_ipv6(gw) +
                                           " did not resolve (no neighbour entry after NDP); give "
                                           "--next-hop " +
                                           iface + "=MAC or add a static neighbour");
  }
  // No route: a point-to-point plane link has exactly one neighbour, the plane router.
  std::vector<Neigh6> ns;
  if (Status st = dump_neighbours(ns); !st.ok()) return st;
  std::vector<wire::MacAddr> macs, router_macs;
  for (const Neigh6& n : ns) {
    if (n.ifindex != info.index || !n.has_mac || !usable_state(n.state)) continue;
    if (std::find(macs.begin(), macs.end(), n.mac) == macs.end()) macs.push_back(n.mac);
    if (n.router && std::find(router_macs.begin(), router_macs.end(), n.mac) == router_macs.end())
      router_macs.push_back(n.mac);
  }
  const size_t count = macs.size();
  if (count == 1 || router_macs.size() == 1) {
    out = count == 1 ? macs[0] : router_macs[0];
    if (how) *how = "only (router) neighbour on " + iface + ": " + mac_text(out);
    return Status::Ok();
  }
  return Status::Error(EHOSTUNREACH,
                       "plane interface " + iface +
                           ": cannot find the next hop (no IPv6 gateway "
                           "route through it and " +
                           std::to_string(count) +
                           " usable neighbours); add a route via the plane router or give "
                           "--next-hop " +
                           iface + "=MAC");
}

}  // namespace mrc::runtime
