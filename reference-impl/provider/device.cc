// The SoftMRC device: ports, GID tables, the engine on the wire, and the loop hook that moves
// completions and events out of the engine.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/capability.h>
#include <net/if.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "reference-impl/provider/softmrc.h"

namespace softmrc {
namespace {

constexpr size_t kMaxQueuedEpResponses = 4096;

std::mutex g_mu;  // guards g_dev
softmrc_device* g_dev = nullptr;

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Interfaces that are up, not loopback, in ifindex order: the default ports.
std::vector<std::string> default_ifaces() {
  std::vector<std::pair<unsigned, std::string>> found;
  struct if_nameindex* ni = if_nameindex();
  if (ni == nullptr) return {};
  for (struct if_nameindex* p = ni; p->if_index != 0; ++p) {
    mrc::runtime::IfaceInfo info;
    if (!mrc::runtime::query_iface(p->if_name, info).ok() || !info.up) continue;
    if (std::string_view(p->if_name) == "lo") continue;
    found.emplace_back(p->if_index, p->if_name);
  }
  if_freenameindex(ni);
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

// The GID table of an interface: its link-local IPv6 address, then each global IPv6 address,
// each as a RoCE v1 and a RoCE v2 entry (the order rdma-core shows for rxe and mlx5, so the
// usual "GID index 3" is the first global address as RoCE v2). IPv4 addresses are left out:
// the runtime speaks RoCEv2 over IPv6 only.
std::vector<GidEntry> gid_table(const std::string& iface) {
  std::vector<wire::Ipv6Addr> ll, global;
  struct ifaddrs* ifa = nullptr;
  if (getifaddrs(&ifa) == 0) {
    for (struct ifaddrs* a = ifa; a != nullptr; a = a->ifa_next) {
      if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET6 || iface != a->ifa_name)
        continue;
      wire::Ipv6Addr addr;
      std::memcpy(addr.data(), &reinterpret_cast<sockaddr_in6*>(a->ifa_addr)->sin6_addr, 16);
      (is_link_local(addr) ? ll : global).push_back(addr);
    }
    freeifaddrs(ifa);
  }
  std::vector<GidEntry> out;
  for (auto* list : {&ll, &global})
    for (const auto& a : *list) {
      out.push_back({a, false});
      out.push_back({a, true});
    }
  return out;
}

bool parse_ipv6(const char* text, wire::Ipv6Addr& out) {
  in6_addr a{};
  if (inet_pton(AF_INET6, text, &a) != 1) return false;
  std::memcpy(out.data(), &a, 16);
  return true;
}

void log_error(const std::string& msg) {
  std::fprintf(stderr, "softmrc: %s\n", msg.c_str());
}

// The CC profile QPs get when they name none: NSCC scaled for software paths
// (reference-impl/runtime/cc-veth.toml; the OCP/UET constants read scheduling delay as
// congestion and hold the window at one MTU).
engine::CcProfile default_cc_profile() {
  engine::CcProfile p;
  p.algorithm = std::string(engine::kCcNscc);
  p.nscc.base_rtt = 100'000;
  p.nscc.target_delay = 2'000'000;
  p.nscc.qa_threshold = 20'000'000;
  p.nscc.adjust_period_threshold = 200'000;
  p.nscc.max_cwnd = 4'194'304;
  return p;
}

// exit() with the device open (an application that fails half way): the loop thread must stop
// before the library's static objects (the wire profile) are destroyed under it. Registered
// after the first device's engine exists, so it runs before those objects' destructors.
std::set<softmrc_device*> g_attached;  // devices attached to rdma-core contexts (guarded by g_mu)

void stop_at_exit() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_dev != nullptr && g_dev->rt) g_dev->rt->stop();
  for (softmrc_device* d : g_attached)
    if (d->rt) d->rt->stop();
}

// The software device's ports, GID tables and node GID, from MRC_SOFT_IO, MRC_SOFT_IFACES and
// MRC_SOFT_GID (README.md "What a user sees"). false with errno set on bad input.
bool ports_from_env(softmrc_device& dev) {
  const char* io = env("MRC_SOFT_IO");
  if (io != nullptr && std::string_view(io) != "loopback" && std::string_view(io) != "packet") {
    log_error(std::string("MRC_SOFT_IO=") + io + ": packet (default) or loopback");
    errno = EINVAL;
    return false;
  }
  dev.io = !(io != nullptr && std::string_view(io) == "loopback");
  std::vector<std::string> ifaces;
  if (const char* l = env("MRC_SOFT_IFACES")) ifaces = split_commas(l);
  if (ifaces.empty()) {
    if (dev.io) {
      ifaces = default_ifaces();
    } else {
      ifaces = {"loop1", "loop2"};
    }
  }
  if (ifaces.empty()) {
    log_error("no network interface is up (set MRC_SOFT_IFACES=if1,if2,...)");
    errno = ENODEV;
    return false;
  }
  if (ifaces.size() > engine::kMaxPorts) ifaces.resize(engine::kMaxPorts);
  for (const auto& name : ifaces) {
    PortInfo p;
    p.iface = name;
    if (dev.io) {
      mrc::runtime::IfaceInfo info;
      if (engine::Status s = mrc::runtime::query_iface(name, info); !s.ok()) {
        log_error(s.message);
        errno = ENODEV;
        return false;
      }
      p.mtu = info.mtu;
      p.gids = gid_table(name);
    } else {
      p.mtu = 9000;
      wire::Ipv6Addr ll{}, g{};
      parse_ipv6("fe80::1", ll);
      parse_ipv6("fd00::1", g);
      p.gids = {{ll, false}, {ll, true}, {g, false}, {g, true}};
    }
    dev.ports.push_back(std::move(p));
  }
  if (const char* g = env("MRC_SOFT_GID")) {
    if (!parse_ipv6(g, dev.node_gid)) {
      log_error(std::string("MRC_SOFT_GID=") + g + " is not an IPv6 address");
      errno = EINVAL;
      return false;
    }
  } else {
    bool found = false;
    for (const auto& port : dev.ports) {
      for (const auto& e : port.gids)
        if (!is_link_local(e.gid)) {
          dev.node_gid = e.gid;
          found = true;
          break;
        }
      if (found) break;
    }
    if (!found) {
      log_error("no global IPv6 address on " + dev.ports[0].iface +
                " (SoftMRC speaks RoCEv2 over IPv6; set MRC_SOFT_GID or add an address)");
      errno = ENODEV;
      return false;
    }
  }
  // A node GID that is not an address of the ports (a host whose GID is on lo, as the
  // testbed's hosts have it) is listed in every port's GID table after the ports' own
  // addresses, as RoCE v1 and v2 entries: applications find it there and name it in IBV_QP_AV.
  for (auto& port : dev.ports) {
    bool listed = false;
    for (const auto& e : port.gids) listed = listed || e.gid == dev.node_gid;
    if (!listed) {
      port.gids.push_back({dev.node_gid, false});
      port.gids.push_back({dev.node_gid, true});
    }
  }
  return true;
}

// Attached to an rdma-core device: its ports, GID tables (its own, index for index) and node GID
// (its RoCE v2 entry) as it reports them; only the MTUs come from the netdevs.
bool ports_from_attach(softmrc_device& dev, const AttachSpec& attach) {
  dev.name = attach.name;
  dev.ports = attach.ports;
  dev.node_gid = attach.node_gid;
  for (auto& p : dev.ports) {
    mrc::runtime::IfaceInfo info;
    if (engine::Status s = mrc::runtime::query_iface(p.iface, info); !s.ok()) {
      log_error(attach.name + ": " + s.message);
      errno = ENODEV;
      return false;
    }
    p.mtu = info.mtu;
  }
  return true;
}

// Reads an unsigned decimal environment variable into `out` (unchanged when unset). A value that
// is not a plain number in 0..max is logged with its name and refused (errno EINVAL).
bool env_uint(const char* name, uint64_t max, const char* unit, uint64_t& out) {
  const char* v = env(name);
  if (v == nullptr) return true;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (end == v || *end != '\0' || errno != 0 || v[0] == '-' || v[0] == '+' || v[0] == ' ' ||
      n > max) {
    log_error(std::string(name) + "=" + v + ": a number of " + unit + " in 0.." +
              std::to_string(max));
    errno = EINVAL;
    return false;
  }
  out = n;
  return true;
}

softmrc_device* create_device(const AttachSpec* attach) {
  auto dev = std::make_unique<softmrc_device>();
  if (!(attach != nullptr ? ports_from_attach(*dev, *attach) : ports_from_env(*dev)))
    return nullptr;
  if (const char* f = env("MRC_SOFT_EV_FORMAT")) {
    auto fmt = wire::parse_ev_format(f);
    if (!fmt) {
      log_error(std::string("MRC_SOFT_EV_FORMAT=") + f + ": udp, stev or srv6");
      errno = EINVAL;
      return nullptr;
    }
    dev->ev_format = *fmt;
  }

  engine::EndpointConfig ec;
  ec.name = dev->name;
  ec.gid = dev->node_gid;
  ec.ev_format = dev->ev_format;
  ec.seed = (static_cast<uint64_t>(getpid()) << 32) ^ std::random_device{}();
  // Namespace-scaled timers, as `mrct endpoint` uses (reference-impl/runtime/README.md).
  ec.probe_interval_ns = 1'000'000;
  ec.ep_request_timeout_ns = 50'000'000;
  ec.sack_gap_threshold = 32;
  // A device on a shared host (namespaces, CI runners) is regularly not scheduled for tens of
  // ms; without a grace the peer's silence reads as path failure and retires EVs.
  // MRC_SOFT_SILENT_PEER_GRACE_MS sets the hold `mrct endpoint --silent-peer-grace-ms` gives
  // (engine.h silent_peer_grace_ns says why R44 allows it). The default stays the engine's 0:
  // every first timeout at T, which the conformance scripts time to the window; the testbed's
  // scenario adapter (conformance/mrc-perf/run_mrc_perf.sh) sets 100, as mrct endpoint's default.
  if (const char* g = env("MRC_SOFT_SILENT_PEER_GRACE_MS")) {
    char* end = nullptr;
    const double ms = std::strtod(g, &end);
    if (end == g || *end != '\0' || !(ms >= 0) || ms > 1e6) {
      log_error(std::string("MRC_SOFT_SILENT_PEER_GRACE_MS=") + g +
                ": a number of ms in 0..1000000");
      errno = EINVAL;
      return nullptr;
    }
    ec.silent_peer_grace_ns = static_cast<uint64_t>(ms * 1e6);
  }
  // The runtime's receive coalescing (loop.cc) in us, 0 turns it off; and a PACKET_TX_RING of
  // this many slots instead of sendmmsg (mrct endpoint --rx-coalesce-us, --tx-ring). Read in
  // loopback mode too, where they do nothing, so that a malformed value is never silently taken.
  const mrc::runtime::RuntimeConfig defaults;
  uint64_t rx_coalesce_us = defaults.rx_coalesce_ns / 1000;
  uint64_t tx_ring = defaults.tx_ring_frames;
  if (!env_uint("MRC_SOFT_RX_COALESCE_US", 1000, "us", rx_coalesce_us) ||
      !env_uint("MRC_SOFT_TX_RING", 65536, "slots", tx_ring))
    return nullptr;
  ec.caps = device_caps();
  engine::Endpoint* ep = nullptr;
  softmrc_device* raw = dev.get();
  if (dev->io) {
    mrc::runtime::RuntimeConfig rc;
    rc.endpoint = ec;
    for (const auto& p : dev->ports) rc.planes.push_back({p.iface, std::nullopt});
    rc.io = mrc::runtime::IoKind::kPacket;
    rc.rx_coalesce_ns = rx_coalesce_us * 1000;
    rc.tx_ring_frames = static_cast<uint32_t>(tx_ring);
    // TEST ONLY: a mutant of the engine on the wire (reference-impl/runtime/README.md), so that
    // a test can show the scenario suite through mrc-perf fails a DUT that breaks a rule.
    if (const char* m = env("MRC_SOFT_MUTANT")) {
      const std::optional<mrc::runtime::Mutant> mutant = mrc::runtime::parse_mutant(m);
      if (!mutant) {
        log_error(std::string("MRC_SOFT_MUTANT=") + m +
                  ": no such mutant (mrct endpoint --list-mutants)");
        errno = EINVAL;
        return nullptr;
      }
      rc.mutant = *mutant;
    }
    engine::Status st;
    dev->rt = mrc::runtime::Runtime::create(rc, st);
    if (!dev->rt) {
      log_error(st.message);
      errno = st.code == EPERM || st.code == EACCES ? EPERM : (st.code ? st.code : EIO);
      return nullptr;
    }
    ep = &dev->rt->endpoint();
  } else {
    for (size_t i = 0; i < dev->ports.size(); ++i) ec.ports.push_back(engine::PortConfig{});
    try {
      dev->bare = std::make_unique<engine::Endpoint>(ec);
    } catch (const std::exception& e) {
      log_error(e.what());
      errno = EINVAL;
      return nullptr;
    }
    ep = dev->bare.get();
  }
  ep->set_event_sink([raw](const engine::Event& e) { on_engine_event(raw, e); });
  // The profiles of QPs that name none.
  engine::EvProfile evp;
  if (engine::Status s = mrc::runtime::default_ev_profile(
          dev->ev_format, static_cast<uint32_t>(4 * dev->ports.size()), evp);
      s.ok()) {
    dev->default_ev_engine_id = dev->next_engine_profile_id++;
    (void)ep->add_ev_profile(dev->default_ev_engine_id, evp);
  }
  dev->default_cc_engine_id = dev->next_engine_profile_id++;
  (void)ep->add_cc_profile(dev->default_cc_engine_id, default_cc_profile());
  if (dev->rt) {
    dev->rt->set_app([raw](engine::Endpoint& e, uint64_t, bool&) {
      drain_engine(raw, e);
      return UINT64_MAX;
    });
    static std::once_flag at_exit;
    std::call_once(at_exit, [] { std::atexit(stop_at_exit); });
    if (engine::Status s = dev->rt->start(); !s.ok()) {
      log_error(s.message);
      errno = EIO;
      return nullptr;
    }
  }
  return dev.release();
}

ibv_wc_status wc_status(engine::WcStatus s) {
  switch (s) {
    case engine::WcStatus::kSuccess:
      return IBV_WC_SUCCESS;
    case engine::WcStatus::kLocLenErr:
      return IBV_WC_LOC_LEN_ERR;
    case engine::WcStatus::kLocQpOpErr:
      return IBV_WC_LOC_QP_OP_ERR;
    case engine::WcStatus::kLocProtErr:
      return IBV_WC_LOC_PROT_ERR;
    case engine::WcStatus::kWrFlushErr:
      return IBV_WC_WR_FLUSH_ERR;
    case engine::WcStatus::kRemInvReqErr:
      return IBV_WC_REM_INV_REQ_ERR;
    case engine::WcStatus::kRemAccessErr:
      return IBV_WC_REM_ACCESS_ERR;
    case engine::WcStatus::kRemOpErr:
      return IBV_WC_REM_OP_ERR;
    case engine::WcStatus::kRetryExcErr:
      return IBV_WC_RETRY_EXC_ERR;
    case engine::WcStatus::kFatalErr:
      return IBV_WC_FATAL_ERR;
    case engine::WcStatus::kGeneralErr:
      return IBV_WC_GENERAL_ERR;
  }
  return IBV_WC_GENERAL_ERR;
}

void push_async(mrc_context* ctx, const mrc_async_event& ev) {
  {
    std::lock_guard<std::mutex> lk(ctx->async_mu);
    ctx->async_events.push_back(ev);
  }
  const uint64_t one = 1;
  (void)!write(ctx->async_fd, &one, sizeof one);
}

void signal_channel(mrc_cq* cq) {
  mrc_comp_channel* ch = cq->channel;
  if (ch == nullptr) return;
  {
    std::lock_guard<std::mutex> lk(ch->mu);
    ch->events.push_back(cq);
  }
  const uint64_t one = 1;
  (void)!write(ch->fd, &one, sizeof one);
}

}  // namespace

bool debug_enabled() {
  static const bool on = env("MRC_SOFT_DEBUG") != nullptr;
  return on;
}

int fail(int err, const char* what) {
  if (debug_enabled()) std::fprintf(stderr, "softmrc: %s: %s\n", what, std::strerror(err));
  errno = err;
  return -1;
}

std::nullptr_t fail_null(int err, const char* what) {
  fail(err, what);
  return nullptr;
}

int fail_status(const engine::Status& s) {
  if (debug_enabled()) std::fprintf(stderr, "softmrc: %s\n", s.message.c_str());
  errno = s.code ? s.code : EIO;
  return -1;
}

const engine::DeviceCaps& device_caps() {
  static const engine::DeviceCaps caps;
  return caps;
}

namespace {
thread_local int t_caller_cap_net_admin = -1;  // -1: judge this process
}  // namespace

ScopedCallerCaps::ScopedCallerCaps(bool cap_net_admin) {
  t_caller_cap_net_admin = cap_net_admin ? 1 : 0;
}

ScopedCallerCaps::~ScopedCallerCaps() {
  t_caller_cap_net_admin = -1;
}

bool has_cap_net_admin() {
  if (t_caller_cap_net_admin >= 0) return t_caller_cap_net_admin == 1;
  __user_cap_header_struct hdr{};
  __user_cap_data_struct data[2]{};
  hdr.version = _LINUX_CAPABILITY_VERSION_3;
  hdr.pid = 0;
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32))) != 0;
}

softmrc_device* open_device() {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_dev == nullptr) {
    g_dev = create_device(nullptr);
    if (g_dev == nullptr) return nullptr;
  }
  ++g_dev->refs;
  return g_dev;
}

softmrc_device* attach_device(const AttachSpec& spec) {
  std::lock_guard<std::mutex> lk(g_mu);
  softmrc_device* dev = create_device(&spec);
  if (dev != nullptr) g_attached.insert(dev);
  return dev;
}

void detach_device(softmrc_device* dev) {
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (!g_attached.erase(dev)) return;
  }
  std::unique_ptr<softmrc_device> gone(dev);
  if (gone->rt) gone->rt->stop();
}

void close_device(softmrc_device* dev) {
  std::unique_ptr<softmrc_device> gone;
  {
    std::lock_guard<std::mutex> lk(g_mu);
    if (dev != g_dev || --dev->refs > 0) return;
    gone.reset(g_dev);
    g_dev = nullptr;
  }
  if (gone->rt) gone->rt->stop();
}

void drain_engine(softmrc_device* dev, engine::Endpoint& ep) {
  engine::Wc buf[64];
  for (auto& [engine_cq, cq] : dev->cq_by_engine_id) {
    bool added = false;
    for (;;) {
      const int n = ep.poll_cq(engine_cq, std::span<engine::Wc>(buf, 64));
      if (n <= 0) break;
      std::lock_guard<std::mutex> lk(cq->mu);
      for (int i = 0; i < n; ++i) {
        const engine::Wc& w = buf[i];
        // A ring (device mode) holds what the application has not polled yet; a ring whose
        // consumer index is impossible takes nothing more.
        int64_t pending = static_cast<int64_t>(cq->wcs.size());
        if (cq->ring) pending = cq->ring->pending();
        if (pending < 0 || pending >= cq->cqe) {
          if (!cq->overrun) {
            cq->overrun = true;
            mrc_async_event ae{};
            ae.element.cq = cq;
            ae.event_type = IBV_EVENT_CQ_ERR;
            push_async(cq->ctx, ae);
          }
          continue;
        }
        ibv_wc wc{};
        wc.wr_id = w.wr_id;
        wc.status = wc_status(w.status);
        wc.opcode = w.opcode == engine::WcOpcode::kRdmaWrite ? IBV_WC_RDMA_WRITE
                                                             : IBV_WC_RECV_RDMA_WITH_IMM;
        wc.vendor_err = w.vendor_err;
        wc.byte_len = w.byte_len;
        wc.qp_num = w.qp_num;
        if (w.with_imm) {
          wc.wc_flags |= IBV_WC_WITH_IMM;
          wc.imm_data = htonl(w.imm_data);  // verbs keeps immediates in network order
        }
        if (auto it = dev->qp_by_qpn.find(w.qp_num); it != dev->qp_by_qpn.end()) {
          // The peer's QPN is what verbs reports as src_qp.
          engine::QpAttr a;
          engine::MrcQpAttr m;
          if (ep.query_qp(w.qp_num, a, m).ok()) wc.src_qp = a.dest_qp_num;
        }
        if (cq->ring) {
          cq->ring->push(wc);  // room checked above
        } else {
          cq->wcs.push_back(wc);
        }
        added = true;
      }
      if (n < 64) break;
    }
    if (added) {
      bool fire = false;
      {
        std::lock_guard<std::mutex> lk(cq->mu);
        fire = cq->armed;
        cq->armed = false;
      }
      if (fire) signal_channel(cq);
    }
  }
  engine::AsyncEvent ae;
  while (ep.get_async_event(ae)) {
    mrc_async_event out{};
    mrc_context* target = nullptr;
    switch (ae.type) {
      case engine::AsyncEventType::kQpFatal:
      case engine::AsyncEventType::kQpReqErr:
      case engine::AsyncEventType::kQpAccessErr: {
        out.event_type = ae.type == engine::AsyncEventType::kQpFatal    ? IBV_EVENT_QP_FATAL
                         : ae.type == engine::AsyncEventType::kQpReqErr ? IBV_EVENT_QP_REQ_ERR
                                                                        : IBV_EVENT_QP_ACCESS_ERR;
        auto it = dev->qp_by_qpn.find(ae.qp_num);
        if (it == dev->qp_by_qpn.end()) continue;
        out.element.qp = it->second;
        target = it->second->ctx;
        break;
      }
      case engine::AsyncEventType::kCqErr: {
        auto it = dev->cq_by_engine_id.find(ae.cq);
        if (it == dev->cq_by_engine_id.end()) continue;
        out.event_type = IBV_EVENT_CQ_ERR;
        out.element.cq = it->second;
        target = it->second->ctx;
        break;
      }
      case engine::AsyncEventType::kPortActive:
      case engine::AsyncEventType::kPortErr:
        out.event_type = ae.type == engine::AsyncEventType::kPortActive ? IBV_EVENT_PORT_ACTIVE
                                                                        : IBV_EVENT_PORT_ERR;
        out.element.port_num = ae.port;
        break;
    }
    if (target != nullptr) {
      push_async(target, out);
    } else {
      for (mrc_context* c : dev->contexts) push_async(c, out);
    }
  }
  engine::EpResponse r;
  bool got = false;
  while (ep.ep_poll_response(r)) {
    std::lock_guard<std::mutex> lk(dev->mu);
    // Responses nobody waits for (a batch that timed out) must not pile up for ever.
    if (dev->ep_responses.size() >= kMaxQueuedEpResponses) dev->ep_responses.pop_front();
    dev->ep_responses.push_back(r);
    got = true;
  }
  if (got) dev->ep_cv.notify_all();
}

void on_engine_event(softmrc_device* dev, const engine::Event& e) {
  if (e.kind != engine::EventKind::kEvState || dev->ev_event_cqs.empty()) return;
  auto qit = dev->qp_by_qpn.find(e.qpn);
  if (qit == dev->qp_by_qpn.end() || !qit->second->ev_profile_id) return;
  const uint64_t pid = *qit->second->ev_profile_id;
  auto pit = dev->ev_profiles.find(pid);
  if (pit == dev->ev_profiles.end()) return;
  const engine::EventField* to = e.find("to");
  const engine::EventField* wev = e.find("wev");
  const engine::EventField* port = e.find("port");
  if (to == nullptr || wev == nullptr || port == nullptr) return;
  mrc_ctl_ev_state state;
  if (to->s == "GOOD") {
    state = MRC_CTL_EV_GOOD;
  } else if (to->s == "ASSUMED_BAD") {
    state = MRC_CTL_EV_ASSUMED_BAD;
  } else {
    return;  // SKIP is a per-rotation state, DENIED the controller's own doing
  }
  if (!(pit->second.event_mask & state)) return;
  mrc_ctl_ev_event out{};
  out.profile_id = pid;
  out.state = state;
  auto iit =
      pit->second.index_of_wev.find({static_cast<uint32_t>(wev->u), static_cast<uint8_t>(port->u)});
  if (iit != pit->second.index_of_wev.end()) {
    out.ev = pit->second.evs[iit->second];
  } else {
    out.ev.port = static_cast<uint8_t>(port->u);
    const uint32_t be = htonl(static_cast<uint32_t>(wev->u));
    std::memcpy(out.ev.val, &be, 4);
  }
  for (mrc_cq* cq : dev->ev_event_cqs) {
    bool fire = false;
    {
      std::lock_guard<std::mutex> lk(cq->mu);
      if (cq->ev_events.size() >= static_cast<size_t>(cq->cqe)) {
        ++cq->ev_drops;  // EV CQs do not overrun: the loss is counted in the next event
        continue;
      }
      out.drop_count = cq->ev_drops;
      cq->ev_drops = 0;
      cq->ev_events.push_back(out);
      fire = cq->armed;
      cq->armed = false;
    }
    if (fire) signal_channel(cq);
  }
}

bool wev_of_compact(softmrc_device* dev, const EvProfileRec& p, const mrc_ctl_ev& ev, uint32_t& wev,
                    std::string& error) {
  auto fit = dev->fmt_profiles.find(p.fmt_id);
  std::vector<uint32_t> widths;
  if (fit != dev->fmt_profiles.end()) widths = fit->second.widths;
  std::vector<wire::EvField> fields;
  for (const auto& f : p.fields)
    fields.push_back({f.width, f.init_val, f.min_val, f.max_val, f.mask});
  if (fields.empty())
    for (uint32_t w : widths)
      fields.push_back({w, 0, 0, 0, w >= 32 ? 0xFFFFFFFFu : ((1u << w) - 1)});
  wire::EvBytes compact{};
  std::memcpy(compact.data(), ev.val, compact.size());
  wire::EvExpandResult r = wire::expand_ev(widths, fields, compact);
  if (!r.ok) {
    error = r.error;
    return false;
  }
  const auto& o = r.expanded;
  if (dev->ev_format == wire::EvFormat::kUdp) {
    wev = (uint32_t{o[0]} << 8) | o[1];
  } else {
    wev = (uint32_t{o[0]} << 24) | (uint32_t{o[1]} << 16) | (uint32_t{o[2]} << 8) | o[3];
  }
  return true;
}

}  // namespace softmrc

void softmrc_device::with_engine(const std::function<void(mrc::engine::Endpoint&)>& fn, bool wake) {
  if (rt) {
    rt->with_engine(fn, wake);
    return;
  }
  // Loopback: no loop thread and no wire. Every frame the engine sends is handed back to it at
  // once (the node talks to itself, QP to QP), timers run when due, completions move at once.
  std::lock_guard<std::mutex> lk(bare_mu);
  fn(*bare);
  mrc::engine::TxPacket pkt;
  std::vector<mrc::engine::TxPacket> frames;
  for (int round = 0; round < 10'000; ++round) {
    const uint64_t now = mrc::runtime::monotonic_ns();
    if (bare->next_deadline_ns() <= now) bare->on_timer(now);
    frames.clear();
    while (bare->poll_tx(now, pkt)) frames.push_back(pkt);
    if (frames.empty()) break;
    for (const auto& f : frames) bare->on_packet(f.frame, f.port, now);
  }
  softmrc::drain_engine(this, *bare);
}
