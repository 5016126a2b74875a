// mrc_runtime: the reference MRC endpoint on real Linux interfaces.
//
// The one public header of the runtime. A Runtime puts one sans-I/O engine::Endpoint on the wire:
// one network interface per NIC port (= plane), an epoll loop on one thread, a timerfd armed at
// the engine's next deadline, batched receive and transmit, optional per-port captures and an
// event log. The clock handed to the engine is CLOCK_MONOTONIC in nanoseconds. The loop watches
// each plane interface's carrier (rtnetlink) and reports it as the port's state to the engine.
//
// I/O back ends (README.md explains the choice):
//   kPacket  AF_PACKET per plane: PACKET_RX_RING receive, sendmmsg transmit. The engine's frames
//            leave byte for byte (UDP source port, flow label, outer SRv6 header, zero UDP
//            checksum) and arrive as they were on the wire, outer header included. Works for
//            every EV format. Needs the next-hop MAC of each plane (neighbour table or config).
//   kSocket  raw IPv6 (IPPROTO_RAW, header included) transmit bound to the plane interface and a
//            UDP socket per plane (UDP_NO_CHECK6_RX, packet info, traffic class, flow label,
//            hop limit as ancillary data) for receive. The kernel resolves neighbours and, in
//            SRv6 mode, decapsulates (End.DT6) before the endpoint sees the packet.
// Both keep a UDP "sink" socket on port 4791 so the host kernel neither answers RoCE packets
// with ICMP port-unreachable nor counts them as checksum errors.
//
// `mrct endpoint` (endpoint_main) is the perftest-style tool built on this library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "wire/wire.h"

namespace mrc::runtime {

using engine::Status;

// CLOCK_MONOTONIC in nanoseconds: the engine's clock.
uint64_t monotonic_ns();
// CLOCK_REALTIME minus CLOCK_MONOTONIC, sampled once per process: captures and the event log
// add it so that their timestamps line up with tcpdump captures taken elsewhere.
int64_t realtime_offset_ns();

// ---------------------------------------------------------------------------------------------
// Interfaces and next hops (ioctl + rtnetlink)
// ---------------------------------------------------------------------------------------------
struct IfaceInfo {
  std::string name;
  int index = 0;
  wire::MacAddr mac{};
  uint32_t mtu = 0;
  bool up = false;
};
Status query_iface(const std::string& name, IfaceInfo& out);

// The first global (not link-local, not loopback ::1) IPv6 address on an interface.
std::optional<wire::Ipv6Addr> first_global_ipv6(const std::string& iface);

// MAC of the next hop for frames that leave `iface`. Tries, in order: the gateway of the most
// specific IPv6 route through `iface` that covers one of `dsts` (any table but `local`,
// multipath next hops included) or, when that route has no gateway (the destination is on the
// link), the destination's own neighbour entry; any gateway route through `iface`; and finally
// the only usable neighbour on `iface`. A gateway with no neighbour entry yet is solicited (a
// datagram to its discard port makes the kernel run NDP) and polled for until `timeout_ns`. `how`
// says which rule matched, for logs.
Status resolve_next_hop(const std::string& iface, std::span<const wire::Ipv6Addr> dsts,
                        uint64_t timeout_ns, wire::MacAddr& out, std::string* how = nullptr);

// ---------------------------------------------------------------------------------------------
// Mutant modes: TEST ONLY. Each breaks one rule of the conformance catalogue on purpose, so
// that the checker can prove it catches the violation. Off unless asked for by name.
// ---------------------------------------------------------------------------------------------
enum class Mutant : uint8_t {
  kNone,
  kWrongIcrc,        // every 50th new data packet leaves with a corrupted ICRC (MRC-FRM-001)
  kReadOpcode,       // every 500th data packet is followed by an RC READ request (MRC-FRM-004)
  kRtxWithoutBit,    // retransmitted data packets leave with BTH.RTX = 0 (MRC-REQ-004)
  kWrongEvEcho,      // SACKs echo an entropy the trigger did not carry (MRC-RSP-004)
  kRegressCack,      // every 8th SACK moves cack_psn back by 16 (MRC-RSP-002)
  kExceedMpr,        // every 500th data packet is copied with its PSN 4 MPR windows ahead
                     // (MRC-REQ-008)
  kExceedWimm,       // requester max_wimm = 4 x the responder's max_wimm_dest (MRC-REQ-009);
                     // applied by endpoint_main, needs --imm
  kSkipTrimNack,     // NACKs TRIMMED / TRIMMED_LASTHOP are never sent (MRC-RSP-013)
  kIgnoreEcn,        // received SACK/NACK M is cleared: the requester never sees the ECN echo
                     // (MRC-EV-008, MRC-CC-002)
  kReuseRetiredEv,   // data keeps going out on EVs the wire shows lost (MRC-EV-009)
  kControlDscpData,  // data packets leave with DSCP CONTROL (MRC-REQ-007)
  kWrongPort,        // data packets leave on the next port, not their EV's (MRC-EV-005)
  // Responder mutants for the exact-packet scripts (conformance/scripts): what a responder
  // takes in or answers with, one rule each.
  kAcceptBadIcrc,        // received packets with a bad ICRC are taken as good (MRC-FRM-001)
  kAcceptForeignOpcode,  // received RC WRITE/READ requests are taken as MRC WRITE_ONLY
                         // (MRC-FRM-004)
  kIgnoreAckReq,         // received data has BTH.A cleared: no SACK on request (MRC-RSP-009)
  kNackWrongPsn,         // NACK nack_psn one above the PSN it refers to (MRC-RSP-012)
  kWrongNackCode,        // NACK codes swapped: TRIMMED <-> TRIMMED_LASTHOP, PSN_OOR_WINDOW ->
                         // NO_PKT_BUFFER (MRC-RSP-013, MRC-RSP-014)
  kSackBitmapExtra,      // SACK bitmaps claim the last PSN of their window (MRC-RSP-003)
  kProbeIdOff,           // probe SACKs (PR=1) answer probe_id + 1 (MRC-PRB-002)
  kEpWrongEntropy,       // endpoint responses echo the request's WEV XOR 0x5a5a (MRC-PRB-008)
  kAckWrongSyndrome,     // transport ACKs carry syndrome 0x00, NAKs 0x1F (MRC-RSP-010)
  kCtrlDscpData,         // SACK/NACK/transport ACK leave with DSCP TRIMMABLE (MRC-RSP-011)
  kTsEchoOff,            // SACK/NACK ts_echo 0x8000 ticks off (MRC-CC-002's delay input)
  kSparseReverseProbe,   // the responder sends at most one EV probe per port every
                         // kSparseProbeGapNs, so reverse EVs go unprobed for longer than
                         // MRC-PRB-007's limit between the probes that do leave
  kIgnoreUnexpEvent,     // requester: received NACK UNEXP_EVENT read as NO_RESOURCE, so the
                         // QP retries instead of stopping (MRC-REQ-012)
  kIgnoreSackM,          // requester: received SACKs have M cleared, so SKIP_ONCE and
                         // ALWAYS_SKIP move nothing off their EV (MRC-EV-008, MRC-EV-009)
  kIgnoreProbeAnswer,    // requester: received probe SACKs (PR=1) are dropped, so a retired
                         // EV never comes back (MRC-EV-009)
  kIgnorePortStatus,     // requester: received PORT_STATUS_UPDATE requests read as "every
                         // port up" (MRC-EV-012)
};

struct MutantInfo {
  Mutant mutant = Mutant::kNone;
  std::string_view name;   // --mutant NAME
  std::string_view rule;   // catalogue rule it breaks
  std::string_view what;   // one line for --help and the warning banner
  std::string_view needs;  // what must happen on the path for it to show ("" = always shows)
  bool responder = false;  // acts on what the responder sends (give it to the server)
};
std::span<const MutantInfo> mutant_table();  // every mutant but kNone
std::optional<Mutant> parse_mutant(std::string_view name);
const MutantInfo& mutant_info(Mutant m);

// Frame rewriter of a mutant, on the transmit and receive paths of the runtime. Deterministic:
// "every Nth" counts frames, no randomness.
class Mutator {
 public:
  Mutator(Mutant m, wire::EvFormat format, const wire::WireProfile& profile, uint8_t nports);
  Mutant mutant() const { return mutant_; }
  // Sees the engine's events (EV retirements for kIgnoreEcn).
  void on_event(const engine::Event& e);
  // Rewrites an outgoing frame in place (may change pkt.port); may append extra frames to
  // `extra`. Returns false when the frame must not be sent.
  bool on_tx(engine::TxPacket& pkt, std::vector<engine::TxPacket>& extra);
  // Receive path: returns the frame to hand to the engine (`frame` itself or a rewritten copy
  // in `scratch`). kIgnoreEcn only watches it for ECN echoes.
  std::span<const std::byte> on_rx(std::span<const std::byte> frame,
                                   std::vector<std::byte>& scratch);
  // kIgnoreEcn: after an ECN echo (SACK M=01, NACK TRIMMED) on EV e, every new data packet goes
  // on e (its port and, in SRv6, its path) until kEcnPinPackets of them have left more than
  // kEcnPinReactionNs after the last echo on e (just past the checker's default reaction time of
  // 100 us, so the rule judges them; few enough that the checker's watch for another usable EV,
  // max(4, 2 x active EVs) data packets, is still open when the requester sprays again), or
  // kEcnPinMaxNs after the first echo, or after kEcnPinRunMax packets (a longer run on one EV
  // breaks MRC-EV-001, spraying, as well), or once every other EV is marked as well.
  static constexpr uint32_t kEcnPinPackets = 2;
  static constexpr uint32_t kEcnPinRunMax = 12;
  static constexpr uint32_t kEcnPinGap = 4;  // packets left to the engine between two pins
  static constexpr uint64_t kEcnPinReactionNs = 110'000;
  static constexpr uint64_t kEcnPinMaxNs = 2'000'000;
  // kSparseReverseProbe: the gap between the EV probes that leave. The checker's limit is
  // max(t_reverse_probe_ns = 10 ms, 4 x the longest EV probe round trip), and that round trip
  // reached 6.7 ms on a loaded 2-core VM (limit 27 ms, so a 25 ms gap was caught only where the
  // scheduler stretched it): 100 ms breaks MRC-PRB-007 on every gap unless a probe takes 25 ms
  // to come back, and leaves probes on both sides of each gap (the viewer shows the gap).
  static constexpr uint64_t kSparseProbeGapNs = 100'000'000;
  // The clock kIgnoreEcn measures those times with when the runtime gives no stamps (tests).
  void set_clock(std::function<uint64_t()> now_ns) { now_ns_ = std::move(now_ns); }
  // The stamps the runtime's captures give the frames of the current transmit burst and the
  // frame being received (ns, one clock): kIgnoreEcn judges the age of an echo by them, exactly
  // as the checker will from those captures.
  void set_tx_stamp_ns(uint64_t stamp_ns) { tx_stamp_ns_ = stamp_ns; }
  void set_rx_stamp_ns(uint64_t stamp_ns) { rx_stamp_ns_ = stamp_ns; }
  uint64_t frames_changed() const { return changed_; }
  uint64_t frames_added() const { return added_; }
  uint64_t frames_dropped() const { return dropped_; }

 private:
  bool reencode(engine::TxPacket& pkt, const wire::DecodedFrame& spec);
  // The receive-path rewrites of the responder mutants (accept-bad-icrc, ...).
  std::span<const std::byte> rx_rewrite(std::span<const std::byte> frame,
                                        std::vector<std::byte>& scratch);
  // kIgnoreEcn: records the port (and in SRv6 the path) of an unmodified data packet's EV.
  void learn_ev(const engine::TxPacket& pkt, const wire::DecodedFrame& f);
  // kIgnoreEcn: moves a data packet onto `wev` as the requester itself would have sent it.
  bool move_to_ev(engine::TxPacket& pkt, wire::DecodedFrame& f, uint32_t wev);
  Mutant mutant_;
  wire::EvFormat format_;
  const wire::WireProfile* profile_;
  uint8_t nports_;
  uint64_t data_seen_ = 0, sacks_seen_ = 0;
  uint64_t changed_ = 0, added_ = 0, dropped_ = 0;
  std::vector<std::pair<uint32_t, uint32_t>> max_cack_;  // qpn -> cack
  // kIgnoreEcn: per WEV the port its data left on and, in SRv6, the outer header bytes from
  // the source address to the inner header (the port's address, the EV's path in the DA and
  // SRH); the EV the latest ECN echo pinned.
  struct SeenEv {
    uint8_t port = 0;
    std::vector<std::byte> path;
    // An echo on it not yet followed by new data on it more than kEcnPinReactionNs later: the
    // checker holds it in SKIP, so it cannot prove another EV was usable.
    bool marked = false;
    uint64_t marked_ns = 0;
  };
  std::set<uint32_t> retired_evs_;  // kIgnoreEcn: WEVs the engine holds ASSUMED_BAD
  // kIgnoreEcn: whether an EV other than `wev` is known and unmarked.
  bool other_ev_clean(uint32_t wev) const;
  struct EcnPin {
    bool on = false;
    uint32_t wev = 0;
    uint64_t start_ns = 0;  // when the first echo arrived
    uint64_t echo_ns = 0;   // when the last echo on the EV arrived
    uint32_t late = 0;      // packets moved more than kEcnPinReactionNs after it
    uint32_t moved = 0;     // packets moved since the first echo
  };
  std::unordered_map<uint32_t, SeenEv> seen_evs_;
  EcnPin pin_;
  uint32_t unpinned_ = kEcnPinGap;  // new data packets the engine placed since the last pin
  std::function<uint64_t()> now_ns_;
  std::optional<uint64_t> tx_stamp_ns_, rx_stamp_ns_;
  // kSparseReverseProbe: port -> when its last EV probe left.
  std::unordered_map<uint8_t, uint64_t> probe_sent_ns_;
  std::vector<std::byte> scratch_;
};

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------
// kPacket: AF_PACKET receive ring and transmit. kSocket: UDP socket receive, raw IPv6 transmit.
// kPacketTx: AF_PACKET transmit, UDP socket receive. On a host whose kernel delivers every
// received frame in the sender's softirq (veth), the ring copies each frame there, on the
// sender's CPU; a UDP socket copies it in the receiving thread's recvmmsg instead.
enum class IoKind : uint8_t { kPacket, kSocket, kPacketTx };
std::string_view io_kind_name(IoKind k);
std::optional<IoKind> parse_io_kind(std::string_view s);

struct PlaneConfig {
  std::string iface;                          // plane n is planes[n-1]
  std::optional<wire::MacAddr> next_hop_mac;  // kPacket(Tx): fixed next hop (else resolved)
};

struct RuntimeConfig {
  // The engine configuration. `ports` is filled by the runtime (one per plane, source MAC of
  // the interface); ev_format selects what the back end accepts.
  engine::EndpointConfig endpoint;
  std::vector<PlaneConfig> planes;
  IoKind io = IoKind::kPacket;
  uint32_t rx_ring_frames = 1024;  // kPacket: receive ring slots per plane (power of two)
  uint32_t batch = 64;             // frames per sendmmsg / recvmmsg
  // kPacket, kPacketTx: transmit through a PACKET_TX_RING of this many slots (0: sendmmsg).
  // The engine's frames are written into the mmapped ring and one send() per run of frames for
  // the same plane hands them to the kernel (packet_io.cc, PacketRingTx). Default sendmmsg: a
  // ring frame's skb holds the ring's page, which a delivery to another namespace over veth
  // copies again (skb_copy_ubufs) into newly allocated pages, so on veth the ring saved no copy
  // and was slower in 8 of 8 quiet A/B pairs (docs/performance.md, "The transmit ring").
  uint32_t tx_ring_frames = 0;
  bool busy_poll = false;  // spin instead of sleeping in epoll_wait (burns a core)
  // After an iteration that received 4 frames or more, sleep this long (bounded by the next
  // engine deadline) in clock_nanosleep instead of in epoll_wait, so that frames arriving
  // meanwhile wake nobody (receive interrupt moderation, as a NIC's rx-usecs; loop.cc). 0:
  // always epoll_wait. At 4 KiB frames and 4-5 Gbit/s, 100 us is 12-15 frames per batch.
  uint64_t rx_coalesce_ns = 100'000;
  // Capture every frame sent and received on each port into <pcap_prefix>-<iface>.pcap
  // (nanosecond pcap, Ethernet). Empty: no capture.
  std::string pcap_prefix;
  std::string event_log_path;  // JSON lines of engine events; empty: none
  Mutant mutant = Mutant::kNone;
  // Receive frames larger than this are counted as truncated and dropped.
  uint32_t max_frame_bytes = 8192 - 256;
  // kPacket: refuse in the kernel (an eBPF socket filter on each ring) the data packets the
  // engine would refuse anyway: duplicates and PSNs beyond twice the window of a QP in RTR/RTS,
  // from its peer; one per QP and reply_interval_ns still reaches the engine. Off with captures
  // (they show what the wire brought) and mutants; where the kernel refuses bpf(), the runtime
  // warns and goes on without it. NACKs naming no outstanding PSN are refused too.
  bool rx_filter = true;
  // ... and, without the tap receive (rx_tap below), run it at each plane interface's tc
  // ingress hook (TCX, Linux 6.6+) rather than on the rings, so that a refused frame skips the
  // namespace's IPv6/UDP receive path as well; where the kernel cannot, on the rings. false:
  // on the rings, and no tap receive either (for comparison).
  bool rx_filter_ingress = true;
  // kPacket: the receive rings are taps (bound to ETH_P_ALL, which the kernel serves before tc
  // ingress) and a tc ingress program ends the MRC frames to our GID once the ring has them, so
  // that the namespace's IPv6/UDP receive and the sink socket never see them (on veth that work
  // runs in the sender's system call). The kernel receive filter then runs on the rings, where
  // it still refuses before the copy. Where tc cannot be attached, the former receive
  // (ETH_P_IPV6 binding, the filter at tc ingress) is used; false forces it.
  bool rx_tap = true;
};

struct PlaneStats {
  std::string iface;
  uint64_t rx_frames = 0, rx_bytes = 0;
  uint64_t tx_frames = 0, tx_bytes = 0;
  uint64_t tx_errors = 0;       // sendmmsg failures other than back-pressure
  uint64_t tx_blocked = 0;      // times the socket pushed back (EAGAIN / ENOBUFS)
  uint64_t tx_no_next_hop = 0;  // frames dropped because the next hop was unknown
  uint64_t rx_ring_drops = 0;   // kPacket: PACKET_STATISTICS tp_drops
  uint64_t rx_truncated = 0;
  uint64_t rx_reconstructed = 0;  // kSocket, kPacketTx: frames rebuilt from a datagram
  // Carrier of the interface as the runtime last saw it (rtnetlink link messages, and a direct
  // check when transmit is refused). A port without carrier is reported to the engine
  // (Endpoint::set_port_state: the engine stops using the plane and tells its peers).
  bool up = true;
  uint64_t carrier_lost = 0;  // up -> down transitions
  uint64_t tx_port_down = 0;  // frames dropped because the port had no carrier
};

struct RuntimeStats {
  std::vector<PlaneStats> planes;
  uint64_t loop_iterations = 0;
  uint64_t epoll_waits = 0;         // times the loop slept in epoll_wait
  uint64_t rx_coalesce_sleeps = 0;  // times it slept rx_coalesce_ns instead (not in epoll_waits)
  // How late the loop read what had arrived: the longest a frame waited in the receive ring
  // (the kernel's arrival stamp to the end of the pass that read it), and how many waited over
  // 20 ms. A long wait is a host that did not run the loop (CPU contention, a stalled vCPU): the
  // endpoint's answers were late for a reason that is the machine's, not the protocol's (mrct
  // run reports it; mrct suite runs such a failed case once more).
  uint64_t rx_late_max_ns = 0;
  uint64_t rx_late_over_20ms = 0;
  uint64_t timer_fires = 0;
  uint64_t tx_syscalls = 0;        // sendmmsg calls or transmit-ring kicks
  uint64_t ev_to_assumed_bad = 0;  // EV retirements
  uint64_t ev_to_skip = 0;
  uint64_t ev_to_denied = 0;
  uint64_t ev_recovered = 0;  // back to GOOD
  uint64_t mutant_changed = 0, mutant_added = 0, mutant_dropped = 0;
  uint64_t loop_cpu_ns = 0;  // CPU time of the loop thread (CLOCK_THREAD_CPUTIME_ID)
  // The kernel receive filter: whether it runs, and the data packets it refused (they never
  // reached the engine's counters) and passed on although refusable (one per reply interval).
  bool rx_filter = false;
  uint64_t rx_filter_duplicates = 0, rx_filter_out_of_window = 0, rx_filter_sampled = 0;
  // ... and the endpoint requests it refused: EV probes beyond one per ep_reply_interval_ns
  // from a peer node, and requests of other nodes beyond one per ep_reply_stranger_interval_ns.
  uint64_t rx_filter_ep_peer_limited = 0, rx_filter_ep_stranger_limited = 0;
  // Times the loop rewrote the filter's map: only when the engine's gates changed (a window
  // moved, a QP changed state), not every loop turn.
  uint64_t rx_filter_publishes = 0;
  uint64_t rx_filter_nacks_not_outstanding = 0;  // NACKs refused: no outstanding PSN named
  bool rx_filter_ingress = false;                // at tc ingress (else the rings' socket filter)
  bool rx_tap = false;  // the rings are taps and tc ingress ends the frames they took
  engine::EndpointStats endpoint;
};

// Runs on the loop thread after every batch of receptions and timers, before transmission:
// posts work requests and polls completion queues. Returns the CLOCK_MONOTONIC time at which it
// wants to run again even if nothing happens (UINT64_MAX: only on activity). Setting `done`
// ends run() / the loop thread.
using AppHook = std::function<uint64_t(engine::Endpoint& ep, uint64_t now_ns, bool& done)>;

class Runtime {
 public:
  // Opens the interfaces and sockets and builds the engine. Fails with a message naming the
  // interface and the system call when something is missing (no such interface, not root,
  // MTU too small for the PMTU is checked by the caller).
  static std::unique_ptr<Runtime> create(const RuntimeConfig& cfg, Status& status);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The engine. Use it only while the loop is not running, or from the app hook / call().
  engine::Endpoint& endpoint();
  const RuntimeConfig& config() const;
  const std::vector<IfaceInfo>& ifaces() const;

  // kPacket: finds each plane's next-hop MAC (resolve_next_hop with that plane's destinations).
  // Planes with a configured next_hop_mac are left alone. kSocket: no-op.
  Status resolve_next_hops(const std::vector<std::vector<wire::Ipv6Addr>>& dsts_per_plane,
                           uint64_t timeout_ns);
  std::optional<wire::MacAddr> next_hop(uint8_t port) const;

  void set_app(AppHook hook);
  // Another observer of engine events (the runtime keeps its own for the event log and stats).
  void set_event_observer(engine::EventSink sink);

  // Runs the loop on the calling thread until the app says done, stop() is called or an I/O
  // error ends it.
  Status run();
  // Runs the loop on a new thread (one thread per endpoint).
  Status start();
  // Thread-safe; returns after the loop thread (if any) has ended.
  void stop();
  bool running() const;
  // Runs fn on the loop thread and waits for it; runs it directly when the loop is not running.
  void call(const std::function<void(engine::Endpoint&)>& fn);
  // Runs fn on the calling thread between two loop iterations (the loop holds the engine lock
  // while it works, not while it sleeps), then wakes the loop if `wake` so that what fn posted
  // leaves at once: a doorbell, cheaper than call()'s round trip. Never from the loop thread
  // (app hook, event observer): it would deadlock.
  void with_engine(const std::function<void(engine::Endpoint&)>& fn, bool wake = true);
  // kPacket: sets (or replaces) the next-hop MAC of a port, safely while the loop runs.
  void set_next_hop(uint8_t port, const wire::MacAddr& mac);

  RuntimeStats stats();
  // Flushes and closes captures and the event log (also done by the destructor).
  Status close_outputs();

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Profiles (TOML)
// ---------------------------------------------------------------------------------------------
// EV profile file:
//   mode = "generated" | "explicit" | "auto"      (default "generated")
//   format_widths = [16, 16]                       (default: per EV format, see README.md)
//   ev_count = 32        active_count = 0         ev_min_active = 1
//   [[fields]]  width = 16  init_val = 0  min_val = 0  max_val = 0xffff  mask = 0xffff
//   [[evs]]     port = 1  compact = "a4"          (explicit: compact EV bytes in hex)
//   [[evs]]     port = 2  da = "fcbb:0:2100:2302::"  segment = "..."   (SRv6 shorthand)
// Errors name the file, the key and the line.
Status parse_ev_profile(std::string_view toml_text, std::string_view source, wire::EvFormat format,
                        uint8_t nports, engine::EvProfile& out);
Status load_ev_profile(const std::string& path, wire::EvFormat format, uint8_t nports,
                       engine::EvProfile& out);
// The profile used without a file: generated EVs, ev_count of them spread over the planes.
// UDP: 14 random bits under 0xC000 in the source port. STEV: 16 random flow-label bits and 14
// random source-port bits. SRv6 has no default (paths depend on the fabric).
Status default_ev_profile(wire::EvFormat format, uint32_t ev_count, engine::EvProfile& out);

// CC profile file:
//   algorithm = "uet-1.0-nscc" | "none"
//   [nscc]  base_rtt = 16000  target_delay = 12000  max_cwnd = 1200000  ... (NsccConfig names)
Status parse_cc_profile(std::string_view toml_text, std::string_view source,
                        engine::CcProfile& out);
Status load_cc_profile(const std::string& path, engine::CcProfile& out);

// ---------------------------------------------------------------------------------------------
// Data pattern and latency statistics (used by `mrct endpoint`)
// ---------------------------------------------------------------------------------------------
// Content of message `msg` of QP number `qp_index` (0-based in the run): 64-bit words of a
// mixing function of (seed, qp_index, msg, word index), so a message written to the wrong slot,
// a stale message or a shifted payload all mismatch.
void fill_pattern(std::span<std::byte> buf, uint64_t seed, uint32_t qp_index, uint64_t msg);
// Offset of the first byte that differs from the pattern, or std::nullopt when all match.
std::optional<size_t> check_pattern(std::span<const std::byte> buf, uint64_t seed,
                                    uint32_t qp_index, uint64_t msg);

// Log-linear histogram: 64 sub-buckets per power of two (relative error <= 1.6 %).
class LatencyHistogram {
 public:
  void add(uint64_t ns);
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  double mean() const {
    return count_ ? static_cast<double>(sum_) / static_cast<double>(count_) : 0;
  }
  // Value at quantile q in [0, 1] (upper edge of its bucket, clamped to max()).
  uint64_t quantile(double q) const;

 private:
  static constexpr int kSub = 64;
  std::vector<uint64_t> buckets_ = std::vector<uint64_t>(64 * kSub, 0);
  uint64_t count_ = 0, sum_ = 0, min_ = UINT64_MAX, max_ = 0;
};

// ---------------------------------------------------------------------------------------------
// The tool
// ---------------------------------------------------------------------------------------------
// `mrct endpoint ROLE [options]`: argv[0] is the program name used in messages, argv[1] the role
// (server | client | memory), then options (see --help). Returns 0 when the transfer completed
// and the data verified, 1 when it ran and failed (errors, verification), 2 on bad options or
// setup errors (unreachable peer, missing interface, not root), 3 on mutant self-check failure.
int endpoint_main(int argc, char** argv);

}  // namespace mrc::runtime
