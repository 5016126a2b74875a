// mrc_faults: the MRC-aware fault injector.
//
// The one public header of the injector library. Two layers:
//  * Policy: a pure, deterministic, sans-I/O policy core. It sees one frame at a time with the
//    time passed in (`on_frame(bytes, dir, link, t_ns)`) and returns a Decision: pass, drop,
//    trim, delay, dup, corrupt or ecn, with the rewritten bytes when it changed the frame. All
//    randomness comes from a seeded xoshiro256** stream per (rule, link, direction), never from
//    the clock, so the same seed and the same frames give the same decisions, and adding a rule
//    does not change the decisions of the others.
//  * Relay: an AF_PACKET back end that owns impaired links (two interfaces each, both
//    directions), applies the policy to every frame, keeps delayed frames in a timer queue,
//    writes the decision log and optional per-side pcaps, and takes commands on a UNIX socket.
//
// Rules come from a TOML or JSON file (fault-injector/README.md documents every key) or from the
// control socket as JSON. The decision log is JSON lines, one per frame the injector touched,
// in the format of docs/architecture.md, closed by a summary line.
#pragma once

#include <array>
#include <bitset>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wire/wire.h"

namespace mrc::faults {

// ---------------------------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------------------------
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256** seeded through splitmix64 (so seed 0 is fine).
class Prng {
 public:
  explicit Prng(uint64_t seed = 1) { reseed(seed); }
  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64(x);
  }
  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n); 0 when n == 0. Unbiased (rejection).
  uint64_t below(uint64_t n) {
    if (n == 0) return 0;
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }
  bool chance(double p) { return p >= 1.0 || (p > 0.0 && uniform() < p); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

// ---------------------------------------------------------------------------------------------
// Vocabulary
// ---------------------------------------------------------------------------------------------
// A link has two sides, a and b. kAtoB: a frame received on side a, sent out of side b.
enum class Direction : uint8_t { kAtoB = 0, kBtoA = 1 };
std::string_view direction_name(Direction d);  // "ab", "ba"
std::optional<Direction> parse_direction(std::string_view s);

// What happened to a frame; the decision log's "action". Values index Stats arrays.
enum class Action : uint8_t { kPass, kDrop, kTrim, kDelay, kDup, kCorrupt, kEcn };
inline constexpr size_t kActionCount = 7;
std::string_view action_name(Action a);
std::optional<Action> parse_action(std::string_view s);
constexpr uint32_t action_bit(Action a) {
  return 1u << static_cast<uint32_t>(a);
}

enum class FaultType : uint8_t {
  kLoss,       // Bernoulli loss with probability p
  kDrop,       // loss with p = 1 unless given: exact-packet drops (with PSN range and max_hits)
  kGilbert,    // Gilbert-Elliott two-state loss
  kDelay,      // fixed delay plus uniform jitter, order kept unless keep_order = false
  kReorder,    // with probability p, hold a frame back so later frames overtake it
  kDup,        // with probability p, send `copies` extra copies
  kCorrupt,    // with probability p, flip `bits` bits covered by the ICRC
  kTrim,       // with probability p, cut a data packet to the MRP0 minimum, DSCP TRIMMED(_LASTHOP)
  kEcn,        // with probability p, set ECN CE on ECN-capable frames
  kRate,       // serialisation at rate_bps through a finite queue: tail-drop or trim on overflow
  kFlap,       // link down/up schedule: every frame is dropped while the link is down
  kBlackhole,  // every matching frame is dropped (typically: given EVs)
};
std::string_view fault_type_name(FaultType t);
std::optional<FaultType> parse_fault_type(std::string_view s);

// What to do with a packet a trim would cut but that a switch may not trim (DSCP not TRIMMABLE or
// TRIMMABLE_RETX). A switch drops it instead, which is the default.
enum class Untrimmable : uint8_t { kDrop, kPass, kTrimAnyway };
// Rate limiter queue overflow.
enum class Overflow : uint8_t { kDrop, kTrim };

inline constexpr uint64_t kForever = std::numeric_limits<uint64_t>::max();

// Which frames a rule applies to. An empty list matches everything; all given conditions must
// hold. Conditions on RoCE fields (ev, qpn, psn, opcode, rtx) only match RoCE frames.
struct Match {
  std::optional<Direction> dir;
  std::vector<std::string> links;  // link names
  std::vector<int> planes;         // the planes of the links (LinkInfo::plane)
  std::vector<uint32_t> evs;       // wire EVs (wev_from_carriage of the frame's carriage)
  std::vector<uint32_t> qpns;      // BTH.DestQP
  std::optional<std::pair<uint32_t, uint32_t>> psn;  // inclusive range, PSN arithmetic mod 2^24
  std::bitset<256> opcodes;                          // BTH opcodes; none set = any
  std::optional<bool> rtx;                           // BTH.RTX
  uint64_t from_ns = 0;  // time window [from_ns, until_ns) relative to the policy epoch
  uint64_t until_ns = kForever;
  bool roce_only = true;  // false: non-RoCE frames (ARP, NDP, ...) match too
};

struct Rule {
  std::string name;  // unique within a policy; seeds the rule's random streams
  FaultType type = FaultType::kLoss;
  Match match;
  double p = 1.0;         // firing probability (loss, drop, reorder, dup, corrupt, trim, ecn)
  uint64_t max_hits = 0;  // fire at most this many times in total; 0 = no limit

  // gilbert: per-frame transition probabilities and the loss probability in each state.
  double p_good_to_bad = 0.0;
  double p_bad_to_good = 1.0;
  double loss_good = 0.0;
  double loss_bad = 1.0;

  // delay: delay_ns + uniform [0, jitter_ns]; reorder: frames that fire are held delay_ns.
  uint64_t delay_ns = 0;
  uint64_t jitter_ns = 0;
  bool keep_order = true;  // delay: a frame never leaves before one that arrived earlier

  uint32_t copies = 1;           // dup: extra copies
  uint32_t bits = 1;             // corrupt: distinct bits to flip
  bool fix_udp_checksum = true;  // corrupt: keep a non-zero UDP checksum valid so the
                                 // receiver's ICRC check (not UDP) is what catches it
  bool lasthop = false;          // trim and rate overflow: DSCP TRIMMED_LASTHOP
  Untrimmable untrimmable = Untrimmable::kDrop;

  // rate: bits per second, queue capacity in bytes, per-frame wire overhead (preamble 8,
  // FCS 4, inter-frame gap 12) that an AF_PACKET frame does not show.
  double rate_bps = 0.0;
  uint64_t queue_bytes = 0;
  Overflow overflow = Overflow::kDrop;
  uint32_t overhead_bytes = 24;

  // flap: down at down_at_ns (relative to the epoch) for down_for_ns; repeated every period_ns
  // (0 = once) `count` times (0 = forever when periodic).
  uint64_t down_at_ns = 0;
  uint64_t down_for_ns = 0;
  uint64_t period_ns = 0;
  uint64_t count = 1;
};

// One impaired link: two interfaces (sides a and b) and the plane it belongs to.
struct LinkInfo {
  std::string name;
  int plane = -1;  // -1: not on a plane
  std::string iface_a;
  std::string iface_b;
  std::string pcap_a;  // optional per-side capture (frames received and sent on that side)
  std::string pcap_b;
  // How EVs are carried on this link. Unset: inferred per frame (DecodedFrame::ev_format()),
  // which cannot tell STEV with a zero flow label from UDP carriage.
  std::optional<wire::EvFormat> ev_format = std::nullopt;
};

struct PolicyConfig {
  uint64_t seed = 1;
  std::vector<LinkInfo> links;  // at least one; index = the `link` argument of on_frame
  std::vector<Rule> rules;      // evaluated in order; effects compose (see Policy::on_frame)
};

// ---------------------------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------------------------
// What the policy saw in a frame.
struct FrameInfo {
  uint32_t len = 0;
  bool roce = false;  // decoded up to the BTH with a known opcode
  uint8_t opcode = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t ev = 0;  // wire EV
  // RoCE endpoints (inner IPv6 under SRv6): with the QPN they name the QP, since QPNs repeat
  // across nodes.
  std::string src, dst;
  bool rtx = false;
  bool trimmed = false;  // arrived already trimmed
  wire::PacketKind kind = wire::PacketKind::kUnknown;
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  const wire::OpcodeInfo* op = nullptr;
};

struct Decision {
  uint64_t t_ns = 0;
  uint32_t link = 0;
  Direction dir = Direction::kAtoB;
  uint64_t frame_no = 0;  // per policy, from 0, counting every frame
  FrameInfo frame;
  // The primary action (drop > trim > corrupt > ecn > dup > delay > pass) and every applied one.
  Action action = Action::kPass;
  uint32_t applied = 0;    // action_bit() mask
  uint64_t delay_ns = 0;   // send the frame (and its copies) this much later
  uint32_t copies = 0;     // extra copies to send
  bool rewritten = false;  // the frame to send is `bytes`, not the input
  std::vector<std::byte> bytes;
  std::string rules;   // names of the rules that fired, comma-separated
  std::string reason;  // why, one clause per fired rule ("r1: bernoulli p=0.01")
  // The bytes to send: `bytes` when rewritten, else the input frame (valid while it is).
  wire::Bytes out;
};

struct LinkDirStats {
  std::array<uint64_t, kActionCount> actions{};  // by primary action
  uint64_t frames = 0;
  uint64_t bytes = 0;
};

struct Stats {
  std::vector<std::array<LinkDirStats, 2>> links;  // [link][dir]
  std::vector<std::pair<std::string, uint64_t>> rule_hits;
  uint64_t frames = 0;
};

// ---------------------------------------------------------------------------------------------
// The policy core
// ---------------------------------------------------------------------------------------------
class Policy {
 public:
  // epoch_ns: the time that rule windows and flap schedules count from.
  Policy(PolicyConfig config, uint64_t epoch_ns, const wire::WireProfile& profile = wire::mrp0());
  ~Policy();
  Policy(const Policy&) = delete;
  Policy& operator=(const Policy&) = delete;

  // Decides what happens to one frame. Rules run in order, each on the result of the previous:
  // a drop ends the evaluation; trim, corrupt and ecn rewrite the frame; delays add up; dup adds
  // copies. The returned reference (and its `out` view) stays valid until the next call.
  // Malformed frames are never an error: they are matched as non-RoCE frames.
  const Decision& on_frame(wire::Bytes frame, Direction dir, uint32_t link, uint64_t t_ns);

  // Runtime control. Returns an empty string on success, else why not.
  std::string add_rule(Rule rule);
  bool remove_rule(std::string_view name);
  // Takes the link down now for down_ns (on top of any schedule).
  void flap_now(uint32_t link, uint64_t t_ns, uint64_t down_ns);
  bool link_down(uint32_t link, Direction dir, uint64_t t_ns) const;

  const PolicyConfig& config() const;
  const Stats& stats() const;
  uint64_t seed() const;
  uint64_t epoch_ns() const;
  std::optional<uint32_t> link_index(std::string_view name) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks a rule on its own (ranges, required keys); empty string when valid.
std::string validate_rule(const Rule& r);

// ---------------------------------------------------------------------------------------------
// Frame surgery (used by the policy; public so that other tools and tests can use it)
// ---------------------------------------------------------------------------------------------
// Cuts a decoded, untrimmed data frame to Ethernet + IP (+SRH/inner IPv6) + UDP + BTH + METH
// (+TSETH when present), fixes IP/UDP lengths, the IPv4 header checksum and a non-zero UDP
// checksum, and sets the outer (and inner) DSCP to the profile's TRIMMED or TRIMMED_LASTHOP.
// No ICRC. Returns false (out untouched) when the frame is not an untrimmed data packet.
bool trim_frame(const wire::DecodedFrame& f, std::vector<std::byte>& out, bool lasthop,
                const wire::WireProfile& profile = wire::mrp0());
// Flips `bits` distinct bits in the ICRC-covered bytes after the BTH (payload first, else the
// extension headers), fixing a non-zero UDP checksum when fix_udp_checksum. frame must be the
// buffer `f` was decoded from. Returns false when the frame has no ICRC to break.
bool corrupt_frame(wire::MutBytes frame, wire::DecodedFrame& f, uint32_t bits, Prng& rng,
                   bool fix_udp_checksum);

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------
struct InjectorConfig {
  PolicyConfig policy;
  std::string log_path;      // decision log; empty = none
  bool log_pass = true;      // log passed RoCE frames too (non-RoCE frames only when touched)
  std::string control_path;  // UNIX socket; empty = none
  std::string profile = "MRP0";
};

enum class ConfigFormat : uint8_t { kAuto, kToml, kJson };

// Parses a config; on failure returns false with `error` naming file, line (TOML; JSON syntax
// errors too) and key: "faults.toml:12: rule[1] (\"trim5\"): key 'p': must be in [0, 1]".
bool parse_config(std::string_view text, std::string_view file_name, ConfigFormat format,
                  InjectorConfig& out, std::string* error);
bool load_config(const std::string& path, InjectorConfig& out, std::string* error);
// One rule as a JSON object (the control socket's and --rule's format, same keys as the file).
bool parse_rule_json(std::string_view json, Rule& out, std::string* error);
std::string rule_to_json(const Rule& r);
// Opcode names ("WRITE_MIDDLE", "0xC7", "199") and kinds ("data", "ack", "sack", "nack",
// "probe", "endpoint", "control", "rc") to a set of opcodes; false when unknown.
bool parse_opcodes(std::string_view s, std::bitset<256>& out,
                   const wire::WireProfile& profile = wire::mrp0());

// ---------------------------------------------------------------------------------------------
// Decision log
// ---------------------------------------------------------------------------------------------
// One JSON line (without newline) for a decision:
// {"t_ns","link","dir","action","qpn","psn","opcode","ev","reason","seed"} plus "frame", "len",
// "op" (opcode name), "rules", and "delay_ns" / "copies" / "actions" when they apply. RoCE
// fields are null for non-RoCE frames.
void append_decision_json(std::string& out, const Decision& d, std::string_view link_name,
                          uint64_t seed);
// The closing line: {"summary":{"seed","frames","links":{NAME:{"ab":{ACTION:N},"ba":{...}}},
// "rules":{NAME:hits}}}.
void append_summary_json(std::string& out, const Policy& policy);
// Whether a decision belongs in the log: every touched frame; passed RoCE frames when log_pass.
bool should_log(const Decision& d, bool log_pass);

class DecisionLog {
 public:
  DecisionLog();
  ~DecisionLog();
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;
  // "-" writes to stdout. Writes to path.tmp and renames on close().
  bool open(const std::string& path, bool log_pass, std::string* error);
  bool is_open() const;
  void write(const Decision& d, const Policy& policy);
  // Appends the summary line and closes; false when a write failed (error() says why).
  bool close(const Policy* policy);
  uint64_t lines() const;
  const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// AF_PACKET relay back end
// ---------------------------------------------------------------------------------------------
struct RelayOptions {
  InjectorConfig config;
  uint64_t duration_ns = 0;              // stop after this long; 0 = until SIGINT/SIGTERM or "stop"
  size_t batch = 32;                     // frames per recvmmsg/sendmmsg
  size_t max_delayed_frames = 1u << 16;  // timer queue capacity; beyond it frames are dropped
  uint64_t drain_ns = 2'000'000'000;     // at exit, wait this long for delayed frames
  bool quiet = false;                    // no summary on stdout
};

struct RelayCounters {
  uint64_t rx_frames = 0;
  uint64_t tx_frames = 0;
  uint64_t tx_errors = 0;
  uint64_t kernel_drops = 0;  // PACKET_STATISTICS tp_drops (socket buffer overruns)
  uint64_t truncated = 0;     // frames larger than the receive slot
  uint64_t queue_full = 0;    // delayed frames dropped because the timer queue was full
  uint64_t discarded_at_exit = 0;
};

class Relay {
 public:
  explicit Relay(RelayOptions options);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;
  // Opens sockets, captures, log and control socket. Needs CAP_NET_RAW. False with `error`.
  bool open(std::string* error);
  // Runs until stopped; returns 0, or 1 when the log or a capture could not be written.
  int run();
  // Thread-safe and async-signal-safe.
  void request_stop();
  const RelayCounters& counters() const;
  const Policy& policy() const;  // after a successful open()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The command line (`mrc-inject`, later `mrct inject`): run | check | replay | ctl.
int inject_main(int argc, char** argv);

}  // namespace mrc::faults
