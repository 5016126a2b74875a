// mrct check --live: the checker on frames as they arrive on interfaces (mirror ports, taps).
//
// Each interface is read through an AF_PACKET TPACKET_V3 ring (blocks of frames the kernel fills
// and hands over whole, so a busy link costs one poll per block, not one system call per frame;
// libpcap on Linux reads the same ring, so it would add a dependency and nothing else). Frames of
// all interfaces are held `reorder_ms` and judged in time order by the same Checker as files,
// on one thread (the ring's bytes are copied out, so nothing has to stay where it was).
//
// Memory does not grow with the length of the run: the rings are fixed, the reorder buffer holds
// `reorder_ms` of frames (and at most kMaxHeldFrames), the capture kept for violations holds
// `keep_s` seconds (and at most keep_mib MiB), and the checker's own state is bounded as for
// files (per-QP windows, the merge table, the flow and node caps).
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <ostream>
#include <sstream>

#include "conformance/internal.h"

namespace mrc::check {
namespace {

volatile sig_atomic_t g_stop = 0;
void on_stop_signal(int) {
  g_stop = 1;
}

uint64_t clock_ns(clockid_t id) {
  timespec ts{};
  ::clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

constexpr uint32_t kBlockBytes = 1u << 20;  // holds the largest frame (64 KiB GSO) many times
constexpr uint32_t kFrameBytes = 2048;      // TPACKET_V3 packs frames; only a divisor matters
constexpr uint32_t kBlockTimeoutMs = 4;     // a block not full is handed over after this
constexpr size_t kMaxHeldFrames = size_t{1} << 20;
constexpr uint64_t kDetectionLagNs = 1'000'000'000;

// One interface's socket and ring.
struct Ring {
  std::string iface;
  int fd = -1;
  uint8_t* map = nullptr;
  size_t map_len = 0;
  uint32_t blocks = 0;
  uint32_t next = 0;  // the block to read next
  uint64_t drops = 0;
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  ~Ring() {
    if (map) ::munmap(map, map_len);
    if (fd >= 0) ::close(fd);
  }
};

bool open_ring(Ring& r, const std::string& iface, size_t ring_mib, std::string& error) {
  r.iface = iface;
  const std::string what = "--live " + iface + ": ";
  if (iface.empty() || iface.size() >= IFNAMSIZ) {
    error = what + "not an interface name";
    return false;
  }
  const unsigned ifindex = ::if_nametoindex(iface.c_str());
  if (ifindex == 0) {
    error = what + "no such interface";
    return false;
  }
  // Protocol 0 until bound: a socket made with ETH_P_ALL would take frames of every interface
  // until bind() narrows it.
  r.fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (r.fd < 0) {
    error = what + "AF_PACKET socket: " + std::strerror(errno) +
            (errno == EPERM ? " (needs root or CAP_NET_RAW)" : "");
    return false;
  }
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, iface.c_str(), iface.size());
  if (::ioctl(r.fd, SIOCGIFHWADDR, &ifr) == 0 && ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) {
    error = what + "not an Ethernet interface (ARP hardware type " +
            std::to_string(ifr.ifr_hwaddr.sa_family) + ")";
    return false;
  }
  if (::ioctl(r.fd, SIOCGIFFLAGS, &ifr) == 0 && !(ifr.ifr_flags & IFF_UP)) {
    error = what + "interface is down";
    return false;
  }
  int version = TPACKET_V3;
  if (::setsockopt(r.fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) != 0) {
    error = what + "TPACKET_V3: " + std::strerror(errno);
    return false;
  }
  // The kernel stamps a frame once for every socket that reads it (with any socket asking for
  // timestamps): tcpdump on the same interface then records the same times as this ring.
  int on = 1;
  ::setsockopt(r.fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
  tpacket_req3 req{};
  req.tp_block_size = kBlockBytes;
  req.tp_block_nr = static_cast<unsigned>(std::max<size_t>(ring_mib, 2));
  req.tp_frame_size = kFrameBytes;
  req.tp_frame_nr = req.tp_block_size / req.tp_frame_size * req.tp_block_nr;
  req.tp_retire_blk_tov = kBlockTimeoutMs;
  if (::setsockopt(r.fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req) != 0) {
    error = what + "PACKET_RX_RING of " + std::to_string(req.tp_block_nr) +
            " MiB: " + std::strerror(errno);
    return false;
  }
  r.blocks = req.tp_block_nr;
  r.map_len = size_t{req.tp_block_size} * req.tp_block_nr;
  void* m = ::mmap(nullptr, r.map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_LOCKED, r.fd, 0);
  if (m == MAP_FAILED)  // MAP_LOCKED needs RLIMIT_MEMLOCK; the ring works unlocked too
    m = ::mmap(nullptr, r.map_len, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
  if (m == MAP_FAILED) {
    error = what + "mmap of the ring: " + std::strerror(errno);
    return false;
  }
  r.map = static_cast<uint8_t*>(m);
  sockaddr_ll sll{};
  sll.sll_family = AF_PACKET;
  sll.sll_protocol = htons(ETH_P_ALL);
  sll.sll_ifindex = static_cast<int>(ifindex);
  if (::bind(r.fd, reinterpret_cast<sockaddr*>(&sll), sizeof sll) != 0) {
    error = what + "bind: " + std::strerror(errno);
    return false;
  }
  return true;
}

// Frames counted as dropped by the kernel since the last call (the ring was full).
uint64_t take_drops(Ring& r) {
  tpacket_stats_v3 st{};
  socklen_t len = sizeof st;
  if (::getsockopt(r.fd, SOL_PACKET, PACKET_STATISTICS, &st, &len) != 0) return 0;
  r.drops += st.tp_drops;
  return st.tp_drops;
}

struct Held {
  uint64_t ts = 0;
  uint64_t seq = 0;  // arrival order, for ties
  uint32_t point = 0;
  uint32_t orig_len = 0;
  std::vector<std::byte> data;
};

// Copies the frames of every block the kernel has handed over, and hands the blocks back.
// A VLAN tag the NIC took off (TP_STATUS_VLAN_VALID) is put back, so that the frame is the one on
// the wire, as a capture file has it.
void drain_ring(Ring& r, uint32_t point, std::vector<Held>& out, uint64_t& seq) {
  for (;;) {
    auto* bd = reinterpret_cast<tpacket_block_desc*>(r.map + size_t{r.next} * kBlockBytes);
    if (!(__atomic_load_n(&bd->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) return;
    const uint32_t n = bd->hdr.bh1.num_pkts;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(bd) + bd->hdr.bh1.offset_to_first_pkt;
    for (uint32_t i = 0; i < n; ++i) {
      const auto* h = reinterpret_cast<const tpacket3_hdr*>(p);
      const uint8_t* data = p + h->tp_mac;
      const uint32_t snap = h->tp_snaplen;
      Held f;
      f.ts = static_cast<uint64_t>(h->tp_sec) * 1'000'000'000u + h->tp_nsec;
      f.seq = seq++;
      f.point = point;
      f.orig_len = h->tp_len;
      const bool vlan = (h->tp_status & TP_STATUS_VLAN_VALID) && snap >= 12;
      f.data.resize(snap + (vlan ? 4 : 0));
      if (vlan) {
        const uint16_t tpid = static_cast<uint16_t>(
            (h->tp_status & TP_STATUS_VLAN_TPID_VALID) ? h->hv1.tp_vlan_tpid : ETH_P_8021Q);
        const auto tci = static_cast<uint16_t>(h->hv1.tp_vlan_tci);
        std::memcpy(f.data.data(), data, 12);
        const uint8_t tag[4] = {static_cast<uint8_t>(tpid >> 8), static_cast<uint8_t>(tpid),
                                static_cast<uint8_t>(tci >> 8), static_cast<uint8_t>(tci)};
        std::memcpy(f.data.data() + 12, tag, 4);
        std::memcpy(f.data.data() + 16, data + 12, snap - 12);
        f.orig_len += 4;
      } else {
        std::memcpy(f.data.data(), data, snap);
      }
      out.push_back(std::move(f));
      p += h->tp_next_offset;
    }
    __atomic_store_n(&bd->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    r.next = (r.next + 1) % r.blocks;
  }
}

// The frames of the last keep_s seconds, and the captures around violations taken from them.
class Keeper {
 public:
  Keeper(const LiveOptions& o, const std::vector<std::string>& ifaces, std::ostream& err)
      : keep_ns_(static_cast<uint64_t>(o.keep_s * 1e9)),
        dir_(o.keep_dir),
        max_files_(o.keep_files),
        max_bytes_(o.keep_mib << 20),
        ifaces_(ifaces),
        err_(err) {}
  bool on() const { return keep_ns_ > 0; }

  void violation(std::string_view rule, uint32_t point, uint64_t frame, uint64_t ts) {
    for (const Clip& c : open_)
      if (c.rule == rule && ts <= c.to) return;  // inside this rule's open window
    if (started_ >= max_files_) {
      ++refused_;
      return;
    }
    ++started_;
    Clip c;
    c.rule = std::string(rule);
    c.n = ++per_rule_[c.rule];
    c.at = ts;
    c.from = ts > keep_ns_ ? ts - keep_ns_ : 0;
    c.to = ts + keep_ns_;
    c.point = point;
    c.frame = frame;
    open_.push_back(std::move(c));
  }

  void add(Held&& f, uint64_t frame_no) {
    bytes_ += f.data.size();
    frames_.push_back({std::move(f), frame_no});
  }

  // Writes the windows that ended by `now` (all of them when `final`), then forgets the frames no
  // window needs. False on a write error (reported on err).
  bool advance(uint64_t now, bool final) {
    bool ok = true;
    for (size_t i = 0; i < open_.size();) {
      if (final || open_[i].to <= now) {
        ok = write(open_[i]) && ok;
        open_.erase(open_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
    // Some rules find a violation a while after its frame (an obligation that ran out): the
    // frames are held kDetectionLagNs longer than the window itself.
    const uint64_t hold = keep_ns_ + kDetectionLagNs;
    uint64_t lower = now > hold ? now - hold : 0;
    for (const Clip& c : open_) lower = std::min(lower, c.from);
    while (!frames_.empty() && (frames_.front().f.ts < lower || bytes_ > max_bytes_)) {
      if (frames_.front().f.ts >= lower) ++over_budget_;
      bytes_ -= frames_.front().f.data.size();
      frames_.pop_front();
    }
    return ok;
  }

  void notes(std::vector<std::string>& out) const {
    if (written_)
      out.push_back(std::to_string(written_) + " capture(s) around violations written to " + dir_);
    if (refused_)
      out.push_back(std::to_string(refused_) + " violation(s) after the first " +
                    std::to_string(max_files_) + " windows got no capture (--keep-files)");
    if (over_budget_)
      out.push_back(std::to_string(over_budget_) +
                    " frame(s) left the kept capture early: more than --keep-mib MiB in " +
                    "the window; captures around violations lack them");
  }

 private:
  struct Clip {
    std::string rule;
    int n = 0;
    uint64_t at = 0, from = 0, to = 0;
    uint32_t point = 0;
    uint64_t frame = 0;
  };
  struct Kept {
    Held f;
    uint64_t frame_no = 0;
  };

  bool write(const Clip& c) {
    const std::string path = dir_ + "/" + c.rule + "-" + std::to_string(c.n) + ".pcapng";
    wire::CaptureWriter w;
    if (!w.open(path, wire::CaptureFormat::kPcapng)) {
      err_ << "mrct check --live: " << w.error() << "\n";
      return false;
    }
    uint64_t n = 0;
    for (const Kept& k : frames_) {
      if (k.f.ts < c.from || k.f.ts > c.to) continue;
      std::string comment;
      if (c.frame != 0 && k.f.point == c.point && k.frame_no == c.frame)
        comment = c.rule + ": this frame (" + ifaces_[c.point] + " frame " +
                  std::to_string(c.frame) + ")";
      if (!w.write(k.f.ts, wire::as_bytes(k.f.data), k.f.orig_len, comment)) {
        err_ << "mrct check --live: " << w.error() << "\n";
        return false;
      }
      ++n;
    }
    if (!w.close()) {
      err_ << "mrct check --live: " << w.error() << "\n";
      return false;
    }
    ++written_;
    err_ << "mrct check --live: " << c.rule << ": " << n << " frames around the violation in "
         << path << "\n";
    return true;
  }

  uint64_t keep_ns_;
  std::string dir_;
  size_t max_files_;
  size_t max_bytes_;
  const std::vector<std::string>& ifaces_;
  std::ostream& err_;
  std::deque<Kept> frames_;
  size_t bytes_ = 0;
  std::vector<Clip> open_;
  std::map<std::string, int> per_rule_;
  size_t started_ = 0, written_ = 0;
  uint64_t refused_ = 0, over_budget_ = 0;
};

std::string failing_rules(const Report& r) {
  std::string s;
  for (const auto& x : r.results)
    if (x.status == Status::kFail || x.status == Status::kWarn)
      s += (s.empty() ? "" : ", ") + std::string(x.rule->id) + " (" + std::to_string(x.violations) +
           ")";
  return s;
}

}  // namespace

int run_live(const LiveOptions& opts, std::ostream& out, std::ostream& err) {
  if (opts.ifaces.empty()) {
    err << "mrct check: --live: no interface given\n";
    return kExitUsage;
  }
  if (opts.check.wire_profile == "auto" || opts.check.tolerances == TolerancePreset::kAuto ||
      !opts.check.annotated_out.empty()) {
    err << "mrct check: --live reads each frame once: --profile-variant auto, --tolerances auto "
           "and --annotate need files (use --keep-s for captures around violations)\n";
    return kExitUsage;
  }
  if (!opts.check.decision_logs.empty()) {
    err << "mrct check: --live takes no --decisions (a log is read whole; check the saved "
           "captures with it afterwards)\n";
    return kExitUsage;
  }
  if (!(opts.interval_s >= 0) || !(opts.duration_s >= 0) || !(opts.keep_s >= 0) ||
      !(opts.reorder_ms >= 0) || !std::isfinite(opts.interval_s + opts.duration_s + opts.keep_s)) {
    err << "mrct check: --interval-s, --duration-s, --keep-s: expected a number >= 0\n";
    return kExitUsage;
  }
  if (opts.keep_s > 0) {
    struct stat st {};
    if (::stat(opts.keep_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
        ::access(opts.keep_dir.c_str(), W_OK) != 0) {
      err << "mrct check: --keep-dir " << opts.keep_dir << ": not a writable directory\n";
      return kExitUsage;
    }
  }
  DutProfile prof;
  detail::ProfileOrigin origin;
  std::string error;
  if (!detail::prepare_profile(opts.check, prof, origin, error)) {
    err << "mrct check: " << error << "\n";
    return kExitUsage;
  }
  std::vector<std::unique_ptr<Ring>> rings;
  std::vector<std::string> names;
  for (const auto& c : opts.ifaces) {
    for (const auto& n : names)
      if (n == c.path) {
        err << "mrct check: --live " << c.path << ": interface given twice\n";
        return kExitUsage;
      }
    auto r = std::make_unique<Ring>();
    if (!open_ring(*r, c.path, opts.ring_mib, error)) {
      err << "mrct check: " << error << "\n";
      return kExitUsage;
    }
    rings.push_back(std::move(r));
    names.push_back(c.path);
  }

  Checker ck(prof, opts.check.rules, opts.check.max_evidence, 1);
  ck.keep_annotations(false);  // no --annotate live: the list would only grow
  for (const auto& c : opts.ifaces) {
    PointInfo pi;
    pi.path = c.path;
    pi.port = c.port;
    if (!c.node.empty()) {
      pi.node = c.node;
      pi.attribution = "option";
    } else {
      for (const auto& cp : prof.capture_points)
        if (cp.file == c.path) {
          pi.node = cp.node;
          if (pi.port == 0) pi.port = cp.port;
          pi.link_side = cp.link_side;
          pi.attribution = "profile";
        }
    }
    ck.add_point(pi);
  }
  Keeper keep(opts, names, err);
  if (keep.on())
    ck.on_violation([&](std::string_view rule, uint32_t point, uint64_t frame, uint64_t ts) {
      keep.violation(rule, point, frame, ts);
    });

  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  g_stop = 0;
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  const uint64_t start = clock_ns(CLOCK_MONOTONIC);
  const uint64_t interval_ns = static_cast<uint64_t>(opts.interval_s * 1e9);
  const uint64_t duration_ns = static_cast<uint64_t>(opts.duration_s * 1e9);
  const uint64_t reorder_ns = static_cast<uint64_t>(opts.reorder_ms * 1e6);
  uint64_t next_verdict = start + interval_ns;
  std::vector<uint64_t> frame_no(rings.size(), 0);
  std::vector<Held> held;
  uint64_t seq = 0, last_ts = 0, late = 0, drops = 0, verdicts = 0;
  bool keep_ok = true;

  auto decorate = [&](Report& r) {
    detail::add_profile_notes(opts.check, prof, origin, r);
    for (size_t i = 0; i < rings.size() && i < r.captures.size(); ++i)
      if (rings[i]->drops)
        r.notes.push_back("interface " + names[i] + ": the kernel dropped " +
                          std::to_string(rings[i]->drops) +
                          " frame(s) (ring full): verdicts on their QPs may be wrong "
                          "(--ring-mib)");
    if (late)
      r.notes.push_back(std::to_string(late) + " frame(s) arrived more than --reorder-ms after " +
                        "later frames and were judged out of time order");
    keep.notes(r.notes);
  };
  // Judges the held frames older than `cutoff`, in time order.
  auto feed = [&](uint64_t cutoff) {
    std::sort(held.begin(), held.end(), [](const Held& a, const Held& b) {
      return a.ts != b.ts ? a.ts < b.ts : a.seq < b.seq;
    });
    size_t n = 0;
    while (n < held.size() && (held[n].ts <= cutoff || held.size() - n > kMaxHeldFrames)) {
      Held& f = held[n];
      if (f.ts < last_ts) ++late;
      last_ts = std::max(last_ts, f.ts);
      const uint64_t no = ++frame_no[f.point];
      ck.on_frame(f.point, no, f.ts, wire::as_bytes(f.data), wire::LinkType::kEthernet, f.orig_len);
      if (keep.on()) keep.add(std::move(f), no);
      ++n;
    }
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(n));
    if (keep.on()) keep_ok = keep.advance(last_ts, false) && keep_ok;
  };

  std::vector<pollfd> pfds;
  for (const auto& r : rings) pfds.push_back({r->fd, POLLIN | POLLERR, 0});
  for (;;) {
    const uint64_t now = clock_ns(CLOCK_MONOTONIC);
    const bool done = g_stop || (duration_ns && now - start >= duration_ns);
    for (size_t i = 0; i < rings.size(); ++i)
      drain_ring(*rings[i], static_cast<uint32_t>(i), held, seq);
    if (done) break;
    const uint64_t wall = clock_ns(CLOCK_REALTIME);
    feed(wall > reorder_ns ? wall - reorder_ns : 0);
    if (interval_ns && now >= next_verdict) {
      next_verdict += interval_ns * ((now - next_verdict) / interval_ns + 1);
      for (auto& r : rings) drops += take_drops(*r);
      Report r = ck.interim();
      decorate(r);
      char t[32];
      std::snprintf(t, sizeof t, "+%.1f s", static_cast<double>(now - start) / 1e9);
      ++verdicts;
      const std::string fails = failing_rules(r);
      out << "mrct check --live " << t << ": " << r.frames << " frames, " << r.mrc_frames
          << " MRC, " << drops << " dropped; so far "
          << verdict_name(r.verdict(opts.check.fail_on_warn)) << (fails.empty() ? "" : ": " + fails)
          << std::endl;
      if (!opts.check.json_out.empty() && opts.check.json_out != "-")
        detail::write_report_to(opts.check.json_out, out, err, write_json, r);
    }
    uint64_t wait_ns = 50'000'000;
    if (interval_ns) wait_ns = std::min(wait_ns, next_verdict > now ? next_verdict - now : 0);
    if (duration_ns)
      wait_ns = std::min(wait_ns, start + duration_ns > now ? start + duration_ns - now : 0);
    ::poll(pfds.data(), pfds.size(), static_cast<int>(wait_ns / 1'000'000) + 1);
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  // Frames the kernel holds in blocks not yet handed over wait for the block timeout.
  ::usleep(2 * kBlockTimeoutMs * 1000);
  for (size_t i = 0; i < rings.size(); ++i) {
    drain_ring(*rings[i], static_cast<uint32_t>(i), held, seq);
    take_drops(*rings[i]);
  }
  feed(UINT64_MAX);
  Report r = ck.finish(last_ts);
  if (keep.on()) keep_ok = keep.advance(last_ts, true) && keep_ok;
  decorate(r);
  for (size_t i = 0; i < names.size(); ++i)
    if (i < r.captures.size() && r.captures[i].node.empty())
      r.notes.push_back("interface " + names[i] +
                        " is not attributed to a node; rules that need the requester's or the "
                        "responder's own capture are not judged from it (pass IFACE@node)");
  const CheckOptions& co = opts.check;
  bool ok = keep_ok;
  if (!co.json_out.empty())
    ok = detail::write_report_to(co.json_out, out, err, write_json, r) && ok;
  if (!co.junit_out.empty())
    ok = detail::write_report_to(co.junit_out, out, err, write_junit, r) && ok;
  if (!co.markdown_out.empty())
    ok = detail::write_report_to(co.markdown_out, out, err, write_markdown, r) && ok;
  for (const auto& n : r.notes) err << "mrct check: note: " << n << "\n";
  if (!co.quiet && co.json_out != "-") {
    out << "mrct check --live: final verdict after " << verdicts << " periodic verdict(s)\n";
    write_human(r, out);
  }
  if (!ok) return kExitUsage;
  return r.exit_code();
}

}  // namespace mrc::check
