// mrc_check: the MRC conformance checker.
//
// The one public header of the checker library. It holds the rule catalogue (what vendors
// certify against), the DUT profile (what the checker needs to know about the device and the
// deployment), the streaming Checker (frames in, verdicts out), and the reporters.
//
// Every verdict is traceable: each rule has a stable ID (MRC-<area>-<nnn>), the research rule(s)
// it derives from (R1..R52, docs/rule-sources.md), a source tag, and evidence naming the
// capture file, the frame number (1-based, as Wireshark counts) and the time. A rule that has no
// evaluator reports not-run, never pass.
//
// Memory is bounded by per-QP state (PSN windows, EV sets, pending obligations) and by the
// de-duplication window, never by the size of a capture: captures are streamed.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire.h"

namespace mrc::check {

// ---------------------------------------------------------------------------------------------
// Rule catalogue
// ---------------------------------------------------------------------------------------------
enum class Severity : uint8_t { kError, kWarning, kInfo };
// Whose behaviour a rule judges. kEither: whichever endpoint sent the packet.
enum class Side : uint8_t { kRequester, kResponder, kEither, kFabric };
enum class Status : uint8_t { kPass, kFail, kWarn, kNotApplicable, kNotRun };

std::string_view severity_name(Severity s);  // "error" | "warning" | "info"
std::string_view side_name(Side s);          // "requester" | "responder" | "either" | "fabric"
std::string_view status_name(Status s);  // "pass" | "fail" | "warn" | "not-applicable" | "not-run"

struct RuleInfo {
  std::string_view id;         // "MRC-RSP-004"
  std::string_view statement;  // one line, our own words
  std::string_view sources;    // space-separated tags: API PAPER TP UET IBTA RFC PROP
  Severity severity = Severity::kError;
  Side side = Side::kEither;
  std::string_view capture_points;  // where captures must be taken for the rule to be judged
  std::string_view capability;      // DUT capability / profile data it depends on ("" = none)
  std::string_view refs;            // space-separated research rules: "R24 R35"
  bool implemented = false;         // false: catalogued only, reports not-run
  std::string_view tolerance;       // documented tolerance or evaluation note ("" = exact)
};

std::span<const RuleInfo> rule_catalogue();
const RuleInfo* find_rule(std::string_view id);
std::vector<std::string_view> split_words(std::string_view s);  // "R24 R35" -> {"R24","R35"}

// `mrct rules` prints the catalogue as a table, or as a JSON array with id, statement, source,
// severity, side, capture_points, capability, refs, implemented, tolerance.
void print_rules(std::ostream& out, bool json);
// The text of docs/rules.md (generated; a test keeps the checked-in file equal to it).
std::string rules_markdown();
// Where a research rule ("R6") is stated: "rule-sources.md#r6", relative to docs/. Every ref of
// the catalogue has a section there (a test checks it).
std::string ref_anchor(std::string_view ref);
// "[R6](rule-sources.md#r6) [R7](rule-sources.md#r7)"
std::string ref_links(std::string_view refs);

// ---------------------------------------------------------------------------------------------
// DUT profile (JSON): what the checker knows about the QPs, the devices and the deployment.
// Everything is optional; QPs are inferred from the traffic when not listed.
// ---------------------------------------------------------------------------------------------
struct Capabilities {
  bool trim_nack = true;  // responder sends TRIM NACKs (MRC_DEVICE_CAP_TRIM_NACK)
  bool trim_nack_dest_unsupported =
      false;                 // requester declared MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED
  bool dynamic_mpr = false;  // both sides enabled MRC_QP_CAP_DYNAMIC_MPR
  bool svc_time = false;     // responder reports service time
};

struct EvEntry {
  uint32_t wev = 0;
  uint8_t port = 0;  // 1-based NIC port (= plane); 0 unknown
  // SRv6 (MRC-EV-007): the EV's expansion, O[0..15] (the outer DA) and O[16..31] (the SRH
  // segment, for formats wider than 128 bits). From evs[].da / evs[].segment, or computed from
  // evs[].compact under the QP's ev_expansion.
  std::optional<wire::Ipv6Addr> da;
  std::optional<wire::Ipv6Addr> segment;
};

struct QpProfile {
  // Endpoints: node addresses (RoCE-level, the inner header in SRv6 mode) and QPNs.
  std::optional<wire::Ipv6Addr> requester_addr;  // IPv4 stored v4-mapped (::ffff:a.b.c.d)
  std::optional<wire::Ipv6Addr> responder_addr;
  std::optional<uint32_t> requester_qpn;
  std::optional<uint32_t> responder_qpn;
  std::optional<wire::EvFormat> ev_format;  // inferred per frame when absent
  std::optional<uint32_t> pmtu;             // inferred from FIRST/MIDDLE payloads when absent
  std::optional<uint8_t> mpr;               // requester MPR, 128-PSN units
  std::optional<uint8_t> mpr_dest;          // responder MPR, 128-PSN units
  std::optional<uint16_t> max_wimm_dest;    // responder's in-flight WriteIMM limit
  std::optional<uint8_t> timeout;           // local ACK timeout exponent (1.024 us * 2^t)
  std::optional<uint8_t> retry_linear;      // linear_cnt (<= 7)
  std::optional<uint8_t> retry_exp;         // exp_cnt (<= 25, 25 = unlimited)
  std::optional<uint32_t> initial_psn;      // requester SQ PSN at start
  std::optional<uint32_t> ev_min_active;
  std::optional<uint64_t> max_cwnd_bytes;  // CC profile max_cwnd
  std::vector<EvEntry> evs;                // the EV universe (wire form); empty = unknown
  std::vector<uint32_t> denied_evs;        // WEVs the controller DENIED
  Capabilities caps;
  // CC profile numbers (mrc_ctl_cc_nscc_cfg) that MRC-CC-002 needs: qps[].cc.
  std::optional<uint64_t> cc_base_rtt_ns;
  std::optional<uint64_t> cc_target_delay_ns;
};

struct NodeProfile {
  std::string name;                   // as in capture file names: <name>-<iface>.pcap
  std::vector<wire::Ipv6Addr> addrs;  // node GIDs and per-port addresses
};

struct CapturePointProfile {
  std::string file;  // basename or path suffix of the capture
  std::string node;  // node whose interface it was taken on
  uint8_t port = 0;  // 1-based NIC port (plane), 0 unknown
  // Taken at the far end of the node's link (a switch port), not on the node's own interface:
  // the node's frames, but not its exact send order and times ("side": "link").
  bool link_side = false;
};

// Documented tolerances of time- and count-based rules. All times in ns.
struct Tolerances {
  uint64_t dedup_window_ns = 20'000'000;  // same packet seen at several points within this
  uint64_t end_grace_ns = 5'000'000;      // obligations younger than this at trace end: unjudged
  uint64_t reaction_ns = 100'000;         // requester reaction time to a received signal
  uint64_t t_ack_max_ns = 1'000'000;      // R30: SACK/NACK after A/RTX/CE data
  uint64_t t_skip_ns = 5'000'000;         // R39: SKIP may end after this even without rotation
  double skip_rotation_fraction = 0.5;    // R39: fraction of the other EVs to use first
  uint64_t t_probe_ns = 10'000'000;       // R41: ASSUMED_BAD EV probed at least this often
  double timer_tolerance = 0.05;          // R44: retransmission may come this fraction early
  uint64_t timer_slack_ns = 10'000;       // R44: ... plus this absolute slack
  uint32_t spray_run_max = 16;            // R8: max run of new data on one EV (min value)
  uint64_t decision_lookahead_ns = 1'000'000;  // injector decisions applied this early
  uint64_t ep_timeout_ns = 2'000'000;          // R47: endpoint request considered outstanding
  uint64_t t_port_ns = 1'000'000;              // R43: a port-status signal is obeyed within this
  uint32_t plane_balance_slack = 0;            // R9/R42: EVs per plane may differ by 1 + this
  uint64_t t_reverse_probe_ns = 10'000'000;    // R49: longest gap between reverse EV probes
                                               // (at least 4 x the probe RTT seen)
};

// Tolerance presets (`mrct check --tolerances`). kSoftware: the defaults above, for software
// endpoints on a software fabric (namespaces, userspace relays: reactions take tens of us).
// kHardware: NICs that react within microseconds and traces of a few hundred us, which the software
// allowances (100 us reaction, 5 ms end grace) would leave mostly unjudged. kAuto: derived from
// the RTTs and reaction times in the captures, between the two. Tolerance keys set in the
// profile override any preset.
enum class TolerancePreset : uint8_t { kSoftware, kHardware, kAuto };
std::string_view tolerance_preset_name(TolerancePreset p);  // "software" | "hardware" | "auto"
std::optional<TolerancePreset> parse_tolerance_preset(std::string_view s);
Tolerances preset_tolerances(TolerancePreset p);  // kAuto: the software values
// Every tolerance as (profile key, value as text), in a fixed order, for reports.
std::vector<std::pair<std::string, std::string>> tolerance_values(const Tolerances& t);

struct DutProfile {
  wire::DscpPlan dscp;
  wire::EvStripe stripe = wire::EvStripe::kLowInSport;
  uint16_t roce_port = wire::kRoceV2Port;
  // A wire-profile file's choices (mrct check --profile-variant): when set they win over the
  // three fields above, which use_wire_params() keeps equal to them.
  std::optional<wire::WireParams> wire;
  void use_wire_params(const wire::WireParams& p) {
    wire = p;
    dscp = p.dscp;
    stripe = p.ev_stripe;
    roce_port = p.udp_ports.front();
  }
  // The wire parameters the checker decodes with.
  wire::WireParams wire_params() const {
    if (wire) return *wire;
    wire::WireParams p;
    p.dscp = dscp;
    p.ev_stripe = stripe;
    p.udp_ports = {roce_port};
    return p;
  }
  std::vector<NodeProfile> nodes;
  std::vector<CapturePointProfile> capture_points;
  std::vector<QpProfile> qps;
  QpProfile defaults;     // applied to inferred QPs (addresses/QPNs ignored)
  bool infer_qps = true;  // judge traffic of QPs not listed in `qps`
  std::optional<std::array<uint8_t, 4>> srv6_locator;  // R6: outer DA[0:31]
  std::vector<std::string> tolerances_set;             // the tolerance keys the profile gave
  // MRC-FRM-013: a zero UDP checksum over IPv6 is allowed (RFC 6935/6936, Linux rxe sends it).
  // Over IPv4 zero is always allowed (RFC 768).
  bool udp_zero_checksum = true;
  Tolerances tol;
};

// Parses a DUT profile. On error returns false and sets `error` naming the origin and field:
// "dut.json: qps[0].mpr: expected an integer 0..255".
bool parse_profile(std::string_view json_text, std::string_view origin, DutProfile& out,
                   std::string& error);
bool load_profile(const std::string& path, DutProfile& out, std::string& error);

// ---------------------------------------------------------------------------------------------
// Injector decision log (JSON lines): ground truth for drops, trims, corruption, ECN marks.
// ---------------------------------------------------------------------------------------------
enum class DecisionAction : uint8_t { kPass, kDrop, kTrim, kDelay, kDup, kCorrupt, kEcn, kOther };

struct Decision {
  uint64_t t_ns = 0;
  std::string link;
  std::string dir;
  DecisionAction action = DecisionAction::kOther;
  std::optional<uint32_t> qpn;  // BTH.DestQP of the touched packet
  std::optional<uint32_t> psn;
  std::optional<uint8_t> opcode;
  std::optional<uint32_t> ev;  // WEV of the touched packet
  std::string src, dst;        // RoCE source/destination address of the touched packet, if logged
  std::string reason;
};

// Parses one line. Empty/whitespace lines return false with empty error.
bool parse_decision(std::string_view line, Decision& out, std::string& error);

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------
struct Evidence {
  uint32_t capture = 0;  // index into Report::captures; UINT32_MAX: not tied to a frame
  uint64_t frame = 0;    // 1-based frame number in that capture (0 = none)
  uint64_t ts_ns = 0;
  std::string message;  // expected vs seen
  // When the violation is about an interval (a gap, a stall) rather than one frame: its start
  // (ts_ns is its end), and the plane (port, 1-based) it concerns; 0 when not. The viewer shades
  // the interval and the plane's lanes.
  uint64_t from_ns = 0;
  uint8_t port = 0;
};

struct RuleResult {
  const RuleInfo* rule = nullptr;
  Status status = Status::kNotRun;
  uint64_t checked = 0;  // judgements made
  uint64_t violations = 0;
  uint64_t excused = 0;            // violations explained by injector decisions
  std::string reason;              // why not-applicable / not-run
  std::vector<Evidence> evidence;  // first N violations
};

struct CaptureSummary {
  std::string path;
  std::string node;         // attributed node ("" unknown)
  std::string attribution;  // how: "option", "profile", "file name", "hop limit", ""
  bool pcapng = false;
  uint64_t frames = 0;
  uint64_t roce_frames = 0;
  uint64_t mrc_frames = 0;  // RoCE frames with an MRC opcode of the wire profile
  uint64_t decode_errors = 0;
  std::string error;  // read error (truncated file ...), frames before it were judged
};

struct FlowSummary {
  std::string requester;  // address
  std::string responder;
  std::optional<uint32_t> requester_qpn;
  std::optional<uint32_t> responder_qpn;
  bool configured = false;
  uint64_t data_packets = 0;
  uint64_t retransmissions = 0;
  uint64_t sacks = 0;
  uint64_t nacks = 0;
  uint64_t distinct_evs = 0;
};

struct Annotation {
  uint32_t capture = 0;
  uint64_t frame = 0;
  std::string text;
};

// A capture frame, named as Wireshark counts it.
struct FrameRef {
  uint32_t capture = 0;  // index into Report::captures
  uint64_t frame = 0;    // 1-based
};

// Frames that were not recognised as MRC, grouped by why: "UDP to port 4971, not the RoCE port
// 4791 ...", "IPv6, not UDP (next header 58)", "RoCE opcode 0x04 (RC_SEND_ONLY) is not an MRC
// opcode" ...
struct UnrecognisedFrames {
  std::string reason;
  uint64_t frames = 0;
  std::vector<FrameRef> examples;  // the first few
};

// CONFORMING: every judged rule held and there was something to judge. NOT CONFORMING: a rule
// failed (or warned, with fail_on_warn). INCONCLUSIVE: nothing in the captures was MRC, or a rule
// family the run asked for (--only, a QP of the profile) had nothing to judge; a capture with no
// MRC frame is INCONCLUSIVE even when framing rules failed on it, since the traffic may be MRC
// under another wire variant.
enum class Verdict : uint8_t { kConforming, kNotConforming, kInconclusive };
std::string_view verdict_name(Verdict v);  // "CONFORMING" | "NOT CONFORMING" | "INCONCLUSIVE"

// Exit codes of `mrct check`.
inline constexpr int kExitConforming = 0;
inline constexpr int kExitNotConforming = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInconclusive = 3;

// Which tolerances a check used, and where they came from.
struct ToleranceInfo {
  std::string preset = "software";
  Tolerances values;
  std::vector<std::string> from_profile;  // keys the profile set, over the preset
  std::string derivation;                 // kAuto: the samples and the values taken from them
};

struct Report {
  std::vector<RuleResult> results;  // catalogue order
  ToleranceInfo tolerances;
  std::vector<CaptureSummary> captures;
  std::vector<std::string> decision_logs;
  uint64_t decisions = 0;
  std::vector<FlowSummary> flows;
  std::vector<std::string> notes;       // input warnings
  std::string wire_profile;             // name of the wire profile the frames were decoded with
  std::string wire_profile_origin;      // "default", "file v.toml", "detected (mrct detect)"
  std::vector<Annotation> annotations;  // violating frames, for the annotated pcapng
  uint64_t frames = 0;                  // observations
  uint64_t packets = 0;                 // distinct packets after merging capture points
  uint64_t first_ts_ns = 0;
  uint64_t last_ts_ns = 0;
  uint64_t mrc_frames = 0;                       // observations recognised as MRC
  bool no_mrc = false;                           // set by finish(): no frame was MRC
  std::vector<UnrecognisedFrames> unrecognised;  // most frequent reason first
  std::vector<std::string> inconclusive;         // why the verdict is INCONCLUSIVE ("" = none)
  bool fail_on_warn = false;                     // CheckOptions::fail_on_warn, for verdict()

  uint64_t count(Status s) const;
  // Warnings make it NOT CONFORMING when warn_fails or the member fail_on_warn is set.
  Verdict verdict(bool warn_fails = false) const;
  // kExitConforming, kExitNotConforming or kExitInconclusive, as verdict() says.
  int exit_code(bool warn_fails = false) const;
  const RuleResult* result(std::string_view id) const;
};

// ---------------------------------------------------------------------------------------------
// Streaming checker: feed frames of all capture points in time order, then finish().
// ---------------------------------------------------------------------------------------------
struct PointInfo {
  std::string path;
  std::string node;  // "" unknown
  std::string attribution;
  uint8_t port = 0;
  std::optional<wire::Ipv6Addr> node_addr;  // attribution by address (hop-limit heuristic)
  bool link_side = false;                   // CapturePointProfile::link_side
};

struct RuleSelection {
  std::vector<std::string> only;  // ids or prefixes ("MRC-REQ"); empty = all
  std::vector<std::string> skip;
  bool selected(std::string_view id) const;
};

class Checker {
 public:
  // jobs > 1: pipelined on two threads. on_frame() decodes the frame and verifies its ICRC on the
  // caller's thread and hands it to a second thread that judges it; frames and decisions keep
  // their order, so the report is the same as with jobs = 1. The bytes given to on_frame() must
  // then stay where they are until finish() (a mapped capture file, frames held in memory).
  explicit Checker(DutProfile profile, RuleSelection selection = {}, size_t max_evidence = 20,
                   unsigned jobs = 1);
  ~Checker();
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // Every point before the first frame: with a single point the checker keeps no merge-table
  // entry for packets that cannot be seen twice there, so a point added later would not
  // recognise the packets seen before it.
  uint32_t add_point(PointInfo point);
  // One captured frame. Never fails: undecodable frames become decode findings.
  // orig_len: the frame's length on the wire (0 = as captured); longer means snapped.
  void on_frame(uint32_t point, uint64_t frame_no, uint64_t ts_ns, wire::Bytes data,
                wire::LinkType link = wire::LinkType::kEthernet, uint32_t orig_len = 0);
  // A hint, with no effect on the verdicts: `data` is the frame that on_frame() will most likely
  // get next, and stays where it is until then. The checker starts fetching the state that frame
  // will look up, so that the fetch overlaps the work on the current frame.
  void prefetch(wire::Bytes data, wire::LinkType link = wire::LinkType::kEthernet);
  // One injector decision, delivered in time order relative to frames (see
  // Tolerances::decision_lookahead_ns).
  void on_decision(const Decision& d);
  // Ends the trace at `end_ts_ns` (0: the last frame time), judges pending obligations.
  Report finish(uint64_t end_ts_ns = 0);
  // The verdicts so far, the trace going on: rules judged so far, obligations still open left
  // open (neither failed nor forgotten). Frames may follow; finish() still ends the trace.
  Report interim();
  // Called on every violation as it is found (before finish() returns for those it finds), on
  // the thread that judges: with jobs > 1 not the caller's. `frame` 0: not tied to a frame.
  using ViolationFn =
      std::function<void(std::string_view rule_id, uint32_t point, uint64_t frame, uint64_t ts_ns)>;
  void on_violation(ViolationFn fn);
  // false: Report::annotations stays empty (they feed --annotate; a long live run would fill
  // them up to their cap of 100,000 for nothing).
  void keep_annotations(bool keep);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Files in, report out: what `mrct check` wraps.
// ---------------------------------------------------------------------------------------------
struct CaptureInput {
  std::string path;
  std::string node;  // optional attribution
  uint8_t port = 0;
};
// "path", "path@node" or "path@node:port".
CaptureInput parse_capture_arg(std::string_view arg);

struct CheckOptions {
  std::vector<CaptureInput> captures;
  std::string profile_path;  // DUT profile JSON ("" = none)
  // Wire profile: a name or TOML file ("" = the DUT profile's dscp/ev_stripe/roce_port, else
  // MRP0), or "auto": inferred from the captures by detect_variant() first.
  std::string wire_profile;
  std::vector<std::string> decision_logs;  // injector JSONL
  std::string json_out;                    // "-" = stdout
  std::string junit_out;
  std::string markdown_out;
  std::string annotated_out;  // annotated pcapng
  RuleSelection rules;
  TolerancePreset tolerances = TolerancePreset::kSoftware;
  bool fail_on_warn = false;
  bool quiet = false;  // no human summary on `out`
  size_t max_evidence = 20;
  // Threads (mrct check -j): 2 or more pipeline the check (Checker's jobs) when every capture is a
  // regular file; a pipe or device is checked on one thread. The report is the same either way.
  unsigned jobs = 1;
  // mrct check --timings: run_check() prints each phase's wall and CPU time to `err` (see
  // CheckTimings), to find where a run's time goes outside the rules.
  bool timings = false;
};

// Where a check's time went, phase by phase (mrct check --timings). CPU time is the process's
// (every thread) and the calling thread's own; with -j 2 the difference is the judging thread's.
struct CheckTimings {
  struct Phase {
    std::string name;
    double wall_s = 0, cpu_s = 0, thread_cpu_s = 0;
  };
  std::vector<Phase> phases;
  // Ends the phase begun at the previous mark (or at construction) and names it.
  void mark(std::string name);
  // The table, one line per phase and a total, each line prefixed "mrct check: timings: ".
  void print(std::ostream& err) const;
  CheckTimings();

 private:
  double wall0_, cpu0_, thread_cpu0_;
};

// kAuto: reads the captures once (they must be regular files) and measures, per capture point,
// RTTs (a data packet to the SACK whose cack_psn is its PSN) and reaction times (a NACK to the
// retransmission of its PSN); sets `tol` from them and says how in `derivation`.
bool derive_tolerances(const CheckOptions& opts, const DutProfile& prof, Tolerances& tol,
                       std::string& derivation, std::string& error);

// Reads and judges everything. Returns false on a usage/input error (message in `error`):
// missing files, unreadable or non-capture files, bad profile, bad decision log.
bool check_files(const CheckOptions& opts, Report& report, std::string& error);
// The same, marking its phases in `timings` (nullptr: none).
bool check_files(const CheckOptions& opts, Report& report, std::string& error,
                 CheckTimings* timings);

// The whole `mrct check`: judge, write the requested reports, print the human summary.
// Returns the exit code: 0 conforming, 1 not conforming, 2 usage or input error, 3 inconclusive.
int run_check(const CheckOptions& opts, std::ostream& out, std::ostream& err);

// ---------------------------------------------------------------------------------------------
// Live input (mrct check --live): frames as they arrive on interfaces (mirror ports, taps), read
// from AF_PACKET TPACKET_V3 rings, judged by the same Checker as files.
// ---------------------------------------------------------------------------------------------
struct LiveOptions {
  // The report options (profile, wire profile, tolerance preset, rules, report paths); its
  // `captures` are ignored. The JSON, JUnit and Markdown reports are written at the end, and the
  // JSON report also after each interval with the verdict so far.
  CheckOptions check;
  // Interfaces, each optionally IFACE@NODE[:PORT] as for capture files; one capture point each.
  std::vector<CaptureInput> ifaces;
  double interval_s = 10;  // a verdict so far every interval (0: none)
  double duration_s = 0;   // stop after this long (0: at SIGINT or SIGTERM)
  // Around each violation, the frames of `keep_s` seconds before and after it (all interfaces,
  // merged on time) go to `keep_dir`/<rule id>-<n>.pcapng, the violating frame commented; 0: none.
  // At most `keep_files` files (one per rule while its window is open) and `keep_mib` MiB held.
  double keep_s = 0;
  std::string keep_dir = ".";
  size_t keep_files = 100;
  size_t keep_mib = 256;
  size_t ring_mib = 64;  // kernel ring per interface
  // Frames are judged in time order once `reorder_ms` old, so that the interfaces' frames merge
  // as the files' do.
  double reorder_ms = 20;
};

// The whole `mrct check --live`: returns the exit code as run_check() does (2 also when an
// interface cannot be opened: missing, down, no permission).
int run_live(const LiveOptions& opts, std::ostream& out, std::ostream& err);

// ---------------------------------------------------------------------------------------------
// Wire-variant detection (mrct detect): the open choices a capture's MRC traffic speaks.
// ---------------------------------------------------------------------------------------------
struct ParamConfidence {
  std::string key;        // profile-file key: "ev.stripe"
  std::string value;      // as written in the file: "high_in_sport"
  double confidence = 0;  // 0: no evidence (MRP0's value kept); 1: every piece of evidence agrees
  std::string evidence;   // "412 of 420 distinguishing echoes match ..."
};
struct VariantGuess {
  wire::WireParams params;
  std::vector<ParamConfidence> confidence;  // one per parameter inferred
  uint64_t frames = 0;
  uint64_t mrc_frames = 0;           // frames that decode as MRC with a valid ICRC (or trimmed)
  std::string summary() const;       // one line per parameter
  std::string profile_text() const;  // the profile file, confidences as comments
};
// Reads every capture (files; a pipe is read once) and infers the parameters. False with `error`
// on an unreadable capture. mrc_frames == 0 means there was nothing to infer from.
bool detect_variant(const std::vector<std::string>& captures, VariantGuess& out,
                    std::string& error);

// Reporters.
void write_json(const Report& r, std::ostream& out);
void write_junit(const Report& r, std::ostream& out);
void write_markdown(const Report& r, std::ostream& out);
void write_human(const Report& r, std::ostream& out);
// Re-reads the captures (merged on time) and writes them into one pcapng with a packet comment
// on each violating frame.
bool write_annotated(const CheckOptions& opts, const Report& r, const std::string& path,
                     std::string& error);

}  // namespace mrc::check
