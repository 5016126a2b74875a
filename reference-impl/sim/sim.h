// mrc_sim: a deterministic discrete-event network simulator for sans-I/O MRC endpoints.
//
// Virtual time in nanoseconds. Everything random comes from seeded generators owned by the
// simulator, and events at the same instant run in the order they were scheduled, so one seed
// reproduces the same run, the same pcap bytes and the same decision log on every machine.
//
// The model: nodes (anything implementing Node) own numbered ports; a port sends into a one-way
// Link (rate, propagation delay, finite FIFO, fault hooks); a link delivers to a node port or to
// a Switch, which forwards each frame to another link. Fabric builds the MRC topology on top:
// N planes (port p of every node is plane p), each a two-tier Clos with M spine paths, the path
// chosen per frame from its entropy value the way ECMP or SRv6 pins an EV to one path.
//
// Nothing here knows the endpoint engine: the engine plugs in through EndpointNode<>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "wire/wire.h"

namespace mrc::sim {

inline constexpr uint64_t kNoDeadline = UINT64_MAX;  // Node::next_deadline_ns(): no timer armed
inline constexpr uint64_t kForever = UINT64_MAX;
inline constexpr uint32_t kNone = UINT32_MAX;  // "no node / link / switch"

using NodeId = uint32_t;
using LinkId = uint32_t;
using SwitchId = uint32_t;

// ---------------------------------------------------------------------------------------------
// Nodes
// ---------------------------------------------------------------------------------------------
struct TxFrame {
  std::vector<std::byte> frame;  // a complete Ethernet frame
  uint8_t port = 1;              // 1-based egress port (= plane in a Fabric)
};

// The sans-I/O shape of an endpoint. The simulator calls on_packet()/on_timer(), then drains
// poll_tx() until it returns false, then arms one timer at next_deadline_ns(). A node that wants
// to be polled again after an outside change (a test posting work) is woken with
// Simulator::wake(). Calls never re-enter a node.
class Node {
 public:
  virtual ~Node() = default;
  virtual void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) = 0;
  virtual void on_timer(uint64_t now_ns) = 0;
  // Fills `out` with the next frame to send now; false when there is nothing to send at now_ns.
  // out.frame arrives empty (possibly with capacity to reuse).
  virtual bool poll_tx(uint64_t now_ns, TxFrame& out) = 0;
  // Absolute time of the next on_timer() wanted, kNoDeadline for none. A deadline in the past
  // fires at the current time.
  virtual uint64_t next_deadline_ns() const = 0;
};

namespace detail {
template <typename C, typename R, typename A1, typename A2>
A2 second_arg(R (C::*)(A1, A2));
template <typename C, typename R, typename A1, typename A2>
A2 second_arg(R (C::*)(A1, A2) noexcept);
}  // namespace detail

// Adapts any type with the Node methods (the engine's Endpoint) without a dependency on it.
// Its poll_tx(now, Tx&) may use its own Tx type as long as Tx has `frame` and `port` members.
template <typename E>
class EndpointNode final : public Node {
 public:
  using Tx = std::remove_cvref_t<decltype(detail::second_arg(&E::poll_tx))>;
  explicit EndpointNode(E& endpoint) : endpoint_(endpoint) {}
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override {
    endpoint_.on_packet(frame, port, now_ns);
  }
  void on_timer(uint64_t now_ns) override { endpoint_.on_timer(now_ns); }
  bool poll_tx(uint64_t now_ns, TxFrame& out) override {
    // Hand the endpoint the simulator's spare buffer so it can encode without allocating.
    tx_.frame = std::move(out.frame);
    tx_.frame.clear();
    const bool got = endpoint_.poll_tx(now_ns, tx_);
    out.frame = std::move(tx_.frame);
    if (!got) {
      out.frame.clear();
      return false;
    }
    out.port = static_cast<uint8_t>(tx_.port);
    return true;
  }
  uint64_t next_deadline_ns() const override { return endpoint_.next_deadline_ns(); }
  E& endpoint() { return endpoint_; }

 private:
  E& endpoint_;
  Tx tx_{};
};

// A node that sends a script of frames at given times and records what it receives. Used by
// the simulator's own tests and benchmarks, and handy for hostile-packet tests of a real peer.
class ScriptedNode final : public Node {
 public:
  struct Arrival {
    uint64_t t_ns = 0;
    uint8_t port = 0;
    std::vector<std::byte> frame;  // empty unless keep_frames
  };
  explicit ScriptedNode(bool keep_frames = true) : keep_frames_(keep_frames) {}

  // Frames scheduled for the same time leave in the order they were added.
  void send_at(uint64_t t_ns, uint8_t port, std::vector<std::byte> frame);
  // Called for every arrival before it is recorded (e.g. to reply).
  void set_on_receive(std::function<void(const Arrival&, wire::Bytes frame)> fn) {
    on_receive_ = std::move(fn);
  }

  const std::vector<Arrival>& arrivals() const { return arrivals_; }
  uint64_t received_frames() const { return received_frames_; }
  uint64_t received_bytes() const { return received_bytes_; }
  uint64_t sent_frames() const { return sent_frames_; }
  size_t pending() const { return script_.size() - next_; }

  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override;
  void on_timer(uint64_t) override {}
  bool poll_tx(uint64_t now_ns, TxFrame& out) override;
  uint64_t next_deadline_ns() const override;

 private:
  struct Scheduled {
    uint64_t t_ns;
    uint8_t port;
    std::vector<std::byte> frame;
  };
  bool keep_frames_;
  std::vector<Scheduled> script_;  // sorted by time, stable
  size_t next_ = 0;
  std::vector<Arrival> arrivals_;
  std::function<void(const Arrival&, wire::Bytes)> on_receive_;
  uint64_t received_frames_ = 0;
  uint64_t received_bytes_ = 0;
  uint64_t sent_frames_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------------------------
// xoshiro256** seeded through splitmix64: small, fast, and the same sequence everywhere.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);
  uint64_t next();
  uint64_t uniform(uint64_t n);  // [0, n), unbiased; 0 when n == 0
  double unit();                 // [0, 1) with 53 random bits
  bool bernoulli(double p) { return p >= 1.0 || (p > 0.0 && unit() < p); }

 private:
  uint64_t s_[4];
};

uint64_t splitmix64(uint64_t& state);
// Independent stream seeds: one per (master seed, label, index), so adding a fault on one link
// never shifts the random decisions of another.
uint64_t derive_seed(uint64_t master, std::string_view label, uint64_t index);

// ---------------------------------------------------------------------------------------------
// Packets as the simulator sees them
// ---------------------------------------------------------------------------------------------
// What the fabric and the fault hooks look at, decoded once when a frame enters the simulator.
struct PacketInfo {
  bool decoded_ok = false;  // decode_frame() succeeded
  bool roce = false;        // a BTH was found (the fields below are valid)
  wire::PacketKind kind = wire::PacketKind::kUnknown;
  uint8_t opcode = 0;
  uint32_t qpn = 0;  // BTH.DestQP
  uint32_t psn = 0;
  uint32_t wev = 0;  // wire EV from UDP sport / flow label (C.1)
  uint8_t l3 = 0;    // 4, 6 or 0
  uint16_t sport = 0;
  uint32_t flow_label = 0;
  uint8_t dscp = 0;  // outer header, as a switch sees it
  uint8_t ecn = 0;
  bool has_dst = false;
  wire::Ipv6Addr dst{};  // RoCE destination (inner header in SRv6 mode); IPv4 as ::ffff:a.b.c.d
};
PacketInfo inspect_frame(wire::Bytes frame, const wire::WireProfile& profile = wire::mrp0());
wire::Ipv6Addr ipv4_mapped(const wire::Ipv4Addr& a);

struct Packet {
  uint64_t uid = 0;  // unique per frame instance (a duplicate gets its own)
  std::vector<std::byte> bytes;
  PacketInfo info;
  NodeId src_node = kNone;
  NodeId dst_node = kNone;      // resolved from the destination address, see set_node_address()
  uint64_t extra_delay_ns = 0;  // added to the next propagation (reorder fault)
};

// Packet surgery shared by the fault hooks (and usable by other fault tools).
// Cuts a RoCE frame to Ethernet+IP(+SRv6)+UDP+profile.min_trim_bytes(), fixes the IP and UDP
// lengths (UDP checksum set to 0, IPv4 header checksum recomputed) and sets `dscp` in the outer
// (and inner) IP header. False with *error set when the frame is not RoCE or is already that
// short; the frame is then unchanged.
bool trim_frame(std::vector<std::byte>& frame, uint8_t dscp, const wire::WireProfile& profile,
                std::string* error = nullptr);
// Flips bit `bit_index` (mod the region size) of the ICRC-covered region: the IB payload when
// there is one, else the bytes after the BTH (else the BTH without its masked byte 4), so that
// the ICRC no longer matches. Non-RoCE frames get a bit flipped after the Ethernet header.
// Returns the frame offset of the flipped byte, nullopt for a frame too short to corrupt.
std::optional<size_t> corrupt_frame(std::vector<std::byte>& frame, uint64_t bit_index,
                                    const wire::WireProfile& profile);
// Sets ECN in the outer (and inner) header. False when the frame has no IP header.
bool set_ecn(std::vector<std::byte>& frame, uint8_t ecn, const wire::WireProfile& profile);

// ---------------------------------------------------------------------------------------------
// Fault hooks
// ---------------------------------------------------------------------------------------------
enum class Action : uint8_t { kPass, kDrop, kTrim, kDelay, kDup, kCorrupt, kEcn };
std::string_view action_name(Action a);  // "pass", "drop", "trim", "delay", "dup", ...

// Which frames a hook considers. Unset fields match anything.
struct PacketMatch {
  std::optional<uint32_t> ev;
  std::optional<uint32_t> psn;
  std::optional<uint32_t> qpn;
  std::optional<uint8_t> opcode;
  std::optional<wire::PacketKind> kind;
  bool roce_only = true;  // false: non-RoCE frames are considered too
  uint64_t from_ns = 0;   // active in [from_ns, until_ns)
  uint64_t until_ns = kForever;
  bool matches(const PacketInfo& info, uint64_t now_ns) const;
};

enum class Trigger : uint8_t { kAlways, kIndex, kBernoulli, kGilbertElliott };

// Two-state burst model, stepped once per matching frame: first the state moves (good->bad with
// p_good_to_bad, bad->good with p_bad_to_good), then the frame is hit with the loss
// probability of the new state. Mean burst length = 1 / p_bad_to_good; long-run fraction of
// frames in the bad state = p_good_to_bad / (p_good_to_bad + p_bad_to_good).
struct GilbertElliott {
  double p_good_to_bad = 0.0;
  double p_bad_to_good = 1.0;
  double loss_good = 0.0;
  double loss_bad = 1.0;
};

// One per-frame fault rule: an action, when it fires (trigger), on which frames (match).
// Build with an action factory and refine: Fault::drop().only_ev(3),
// Fault::trim().with_probability(0.01), Fault::drop().only_psn(100).at_most(1).
struct Fault {
  Action action = Action::kDrop;
  Trigger trigger = Trigger::kAlways;
  PacketMatch match;
  std::vector<uint64_t> indices;  // kIndex: 0-based positions among the frames this hook matched
  double probability = 0.0;       // kBernoulli
  GilbertElliott burst;           // kGilbertElliott
  uint64_t max_hits = kForever;   // stop firing after this many hits
  std::string name;               // decision-log reason; generated when empty

  uint64_t delay_min_ns = 0;  // kDelay: extra propagation delay, uniform in [min, max]
  uint64_t delay_max_ns = 0;
  uint32_t copies = 1;         // kDup
  bool trim_lasthop = false;   // kTrim: DSCP TRIMMED_LASTHOP instead of TRIMMED
  bool trim_any_dscp = false;  // kTrim: also trim frames whose DSCP is not trimmable
  bool ecn_only_ect = true;    // kEcn: leave Not-ECT frames alone, as a switch would

  static Fault drop() { return Fault{}; }
  static Fault trim(bool lasthop = false);
  static Fault mark_ecn();
  static Fault delay(uint64_t min_ns, uint64_t max_ns);
  static Fault duplicate(uint32_t copies = 1);
  static Fault corrupt();

  Fault& always() {
    trigger = Trigger::kAlways;
    return *this;
  }
  Fault& at_indices(std::vector<uint64_t> idx);
  Fault& with_probability(double p) {
    trigger = Trigger::kBernoulli;
    probability = p;
    return *this;
  }
  Fault& in_bursts(const GilbertElliott& ge) {
    trigger = Trigger::kGilbertElliott;
    burst = ge;
    return *this;
  }
  Fault& only_ev(uint32_t ev) {
    match.ev = ev;
    return *this;
  }
  Fault& only_psn(uint32_t psn) {
    match.psn = psn;
    return *this;
  }
  Fault& only_qpn(uint32_t qpn) {
    match.qpn = qpn;
    return *this;
  }
  Fault& only_opcode(uint8_t op) {
    match.opcode = op;
    return *this;
  }
  Fault& only_kind(wire::PacketKind k) {
    match.kind = k;
    return *this;
  }
  Fault& any_frame() {
    match.roce_only = false;
    return *this;
  }
  Fault& during(uint64_t from_ns, uint64_t until_ns) {
    match.from_ns = from_ns;
    match.until_ns = until_ns;
    return *this;
  }
  Fault& at_most(uint64_t n) {
    max_hits = n;
    return *this;
  }
  Fault& named(std::string n) {
    name = std::move(n);
    return *this;
  }

  std::string describe() const;  // "drop bernoulli p=0.01 ev=3"
  std::string validate() const;  // empty when usable, else what is wrong
};

// ---------------------------------------------------------------------------------------------
// Decision log
// ---------------------------------------------------------------------------------------------
// One record per frame a fault or a queue acted on (and per untouched frame with log_pass).
struct Decision {
  uint64_t t_ns = 0;
  LinkId link = kNone;
  std::string link_name;  // or the switch name for no_route drops
  std::string dir;        // "<src node>><dst node>", '?' for an unknown end
  Action action = Action::kPass;
  bool roce = false;  // qpn/psn/opcode/ev valid
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t opcode = 0;
  uint32_t ev = 0;
  std::string reason;  // "drop bernoulli p=0.01", "queue_full", "link_down", ...
  uint64_t seed = 0;   // the simulator seed that reproduces this decision
  uint64_t packet_uid = 0;
};
// One JSON object, no trailing newline. Fields in this order: t_ns, link, dir, action, qpn, psn,
// opcode, ev, reason, seed (qpn/psn/opcode/ev are null for non-RoCE frames).
std::string decision_json(const Decision& d);

// ---------------------------------------------------------------------------------------------
// Links, switches, statistics
// ---------------------------------------------------------------------------------------------
struct LinkConfig {
  std::string name;
  uint64_t rate_bps = 100'000'000'000;  // 0 = no serialization delay
  uint64_t prop_delay_ns = 1'000;
  // Waiting room behind the frame being serialized; an idle link always accepts one frame.
  uint64_t queue_bytes = 1u << 20;
  // Frames arriving to a backlog of at least this many bytes get ECN CE (ECT frames only);
  // 0 disables marking.
  uint64_t ecn_threshold_bytes = 0;
  // On overflow, trim trimmable data frames (DSCP TRIMMABLE / TRIMMABLE_RETX) instead of
  // dropping them.
  bool trim_on_overflow = false;
  // Already-trimmed frames (DSCP TRIMMED / TRIMMED_LASTHOP) go to a strict-priority queue of
  // this size, as trimming switches forward headers ahead of data.
  bool priority_trimmed = true;
  uint64_t trim_queue_bytes = 64u << 10;
  bool last_hop = false;  // a trim on this link uses DSCP TRIMMED_LASTHOP
};

struct LinkStats {
  uint64_t frames_in = 0;  // offered at the ingress (duplicates included)
  uint64_t bytes_in = 0;
  uint64_t frames_out = 0;  // crossed: delivered at the far end
  uint64_t bytes_out = 0;
  uint64_t drop_queue = 0;        // tail drop (queue full)
  uint64_t drop_link_down = 0;    // arrived, queued or in flight while down
  uint64_t drop_fault = 0;        // a drop hook
  uint64_t drop_unconnected = 0;  // link has no far end
  uint64_t trim_fault = 0;
  uint64_t trim_congestion = 0;
  uint64_t ecn_fault = 0;
  uint64_t ecn_congestion = 0;
  uint64_t delayed = 0;
  uint64_t duplicated = 0;  // extra copies made
  uint64_t corrupted = 0;
  uint64_t max_backlog_bytes = 0;
  uint64_t drops() const { return drop_queue + drop_link_down + drop_fault + drop_unconnected; }
};

struct NodeStats {
  uint64_t frames_tx = 0;
  uint64_t bytes_tx = 0;
  uint64_t frames_rx = 0;
  uint64_t bytes_rx = 0;
  uint64_t tx_unconnected = 0;  // sent on a port with no link
};

struct SwitchStats {
  uint64_t frames = 0;
  uint64_t drop_no_route = 0;
};

// A switch forwards each frame to the link it returns, or drops it (no_route) on kNone.
using RouteFn = std::function<LinkId(const Packet& packet)>;

// ---------------------------------------------------------------------------------------------
// The simulator
// ---------------------------------------------------------------------------------------------
struct SimConfig {
  uint64_t seed = 1;
  const wire::WireProfile* profile = nullptr;  // nullptr = wire::mrp0()
  bool keep_decisions = true;                  // keep the decision log in memory (decisions())
  bool log_pass = false;                // also record frames no hook acted on (action "pass")
  uint64_t max_tx_per_poll = 1u << 20;  // a node returning more frames in one drain is a bug
};

enum class RunStatus : uint8_t { kIdle, kTimeReached, kEventLimit, kStopped, kError };
std::string_view run_status_name(RunStatus s);

struct RunResult {
  RunStatus status = RunStatus::kIdle;
  uint64_t events = 0;  // events dispatched by this call
  uint64_t now_ns = 0;
  std::string error;
};

class Simulator {
 public:
  explicit Simulator(SimConfig config = {});
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  uint64_t seed() const;
  uint64_t now_ns() const;
  const wire::WireProfile& profile() const;

  // --- topology -------------------------------------------------------------------------------
  // The node is serviced (polled) at the current time once the run starts.
  NodeId add_node(std::string name, Node& node);  // not owned; must outlive the simulator run
  NodeId add_node(std::string name, std::unique_ptr<Node> node);
  // Frames whose RoCE destination address equals `addr` are for `node` (Packet::dst_node).
  // With exactly two nodes and no matching address, the destination is the other node.
  void set_node_address(NodeId node, const wire::Ipv6Addr& addr);
  void set_node_address(NodeId node, const wire::Ipv4Addr& addr);

  LinkId add_link(LinkConfig config);
  SwitchId add_switch(std::string name, RouteFn route);
  void connect_port(NodeId node, uint8_t port, LinkId egress);  // frames sent on port -> link
  void link_to_node(LinkId link, NodeId node, uint8_t port);    // link delivers to node port
  void link_to_switch(LinkId link, SwitchId sw);
  // A full-duplex cable between two node ports: two links named "<a>.p<pa>><b>" and back.
  std::pair<LinkId, LinkId> cable(NodeId a, uint8_t port_a, NodeId b, uint8_t port_b,
                                  const LinkConfig& config);

  // --- faults ---------------------------------------------------------------------------------
  // Hooks on a link run in the order added, on every frame entering the link; a drop ends the
  // chain, the other actions compose (e.g. trim + ECN + delay). Each hook draws from its own
  // generator, seeded from (seed, link name, hook position).
  void add_fault(LinkId link, Fault fault);  // throws std::invalid_argument on an invalid fault
  void set_link_state(LinkId link, bool up, uint64_t at_ns);
  void link_down_between(LinkId link, uint64_t from_ns, uint64_t until_ns = kForever);
  bool link_is_up(LinkId link) const;

  // --- driving --------------------------------------------------------------------------------
  void at(uint64_t t_ns, std::function<void()> fn);  // runs fn at t_ns (not before now)
  void wake(NodeId node);  // poll the node at the current time (after the current event)
  void stop();             // ends the current run_* call after the current event

  // Runs every event with time <= t_ns, then sets the clock to t_ns.
  RunResult run_until(uint64_t t_ns, uint64_t max_events = UINT64_MAX);
  // Runs until no event is left (status kIdle) or max_events were dispatched.
  RunResult run_until_idle(uint64_t max_events = 100'000'000);

  // --- output ---------------------------------------------------------------------------------
  // Every frame that crossed the link, stamped with its arrival time at the far end.
  bool capture_link(LinkId link, const std::string& path,
                    wire::CaptureFormat format = wire::CaptureFormat::kPcap);
  // Frames the node sent (stamped when handed to the port) and received (stamped on delivery)
  // on one port, or on all its ports with port 0.
  bool capture_node(NodeId node, uint8_t port, const std::string& path,
                    wire::CaptureFormat format = wire::CaptureFormat::kPcap);
  // Closes (renames into place) every capture file; false when any write failed (see error()).
  // The destructor closes what is still open.
  bool close_captures();

  const std::vector<Decision>& decisions() const;
  void set_decision_sink(std::function<void(const Decision&)> sink);  // called for each record
  bool write_decisions(const std::string& path) const;                // JSON lines

  // --- inspection -----------------------------------------------------------------------------
  size_t node_count() const;
  size_t link_count() const;
  size_t switch_count() const;
  const std::string& node_name(NodeId node) const;
  const std::string& link_name(LinkId link) const;
  const LinkConfig& link_config(LinkId link) const;
  LinkId find_link(std::string_view name) const;  // kNone when absent
  const LinkStats& link_stats(LinkId link) const;
  const NodeStats& node_stats(NodeId node) const;
  const SwitchStats& switch_stats(SwitchId sw) const;
  uint64_t backlog_bytes(LinkId link) const;  // queued, not counting the frame in service
  uint64_t events_dispatched() const;
  const std::string& error() const;  // last error (capture I/O, node misbehaviour)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Multi-plane fabric
// ---------------------------------------------------------------------------------------------
enum class PathSelect : uint8_t {
  kWevModulo,  // path = WEV mod paths: EV w always takes path w % M (tests aim with it)
  kFlowHash,   // seeded hash of UDP sport and flow label, like a switch's ECMP hash
  kCustom,     // FabricConfig::custom_select
};

struct FabricConfig {
  uint8_t planes = 2;      // node port p (1-based) attaches to plane p
  uint32_t paths = 4;      // spines per plane
  LinkConfig host_link;    // node <-> its leaf, each direction (the downlink is the last hop)
  LinkConfig fabric_link;  // leaf <-> spine, each direction
  PathSelect select = PathSelect::kWevModulo;
  std::function<uint32_t(const Packet&, uint32_t paths)> custom_select;
};

// Per plane: every node has its own leaf; the leaf sends a frame for another node to spine
// select(frame) of that plane, the spine to the destination's leaf, the leaf down to the node.
// Link names: "<node>.p<plane>.up", "<node>.p<plane>.down", "p<plane>.<node>>s<path>",
// "p<plane>.s<path>><node>". Planes are numbered like ports (1-based), paths from 0.
// The fabric must outlive the run (switches call into it).
class Fabric {
 public:
  Fabric(Simulator& sim, FabricConfig config, std::vector<NodeId> nodes);
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  const FabricConfig& config() const { return config_; }
  uint32_t path_of(const Packet& packet, uint8_t plane) const;

  LinkId uplink(NodeId node, uint8_t plane) const;
  LinkId downlink(NodeId node, uint8_t plane) const;
  LinkId leaf_to_spine(NodeId node, uint8_t plane, uint32_t path) const;
  LinkId spine_to_leaf(NodeId node, uint8_t plane, uint32_t path) const;
  // Every leaf<->spine link through spine `path` of `plane` (both directions, all nodes).
  std::vector<LinkId> path_links(uint8_t plane, uint32_t path) const;
  // Every link of the plane, host links included.
  std::vector<LinkId> plane_links(uint8_t plane) const;
  std::vector<LinkId> all_links() const;

  void fail_path(uint8_t plane, uint32_t path, uint64_t from_ns, uint64_t until_ns = kForever);
  void fail_plane(uint8_t plane, uint64_t from_ns, uint64_t until_ns = kForever);

 private:
  size_t node_index(NodeId node) const;
  LinkId route_leaf(size_t node_index, uint8_t plane, const Packet& packet) const;
  LinkId route_spine(uint8_t plane, uint32_t path, const Packet& packet) const;

  Simulator& sim_;
  FabricConfig config_;
  std::vector<NodeId> nodes_;
  std::vector<uint64_t> hash_seed_;  // per plane
  // Indexed [node][plane-1] and [node][plane-1][path].
  std::vector<std::vector<LinkId>> up_, down_;
  std::vector<std::vector<std::vector<LinkId>>> l2s_, s2l_;
};

}  // namespace mrc::sim
