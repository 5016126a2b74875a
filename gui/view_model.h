// mrc_view_model: the index behind the Qt viewer (issue 8), with no Qt dependency.
//
// One pass over a capture (pcap/pcapng, memory-mapped, decoded with mrc::wire) builds a compact
// per-frame table and, per QP data direction ("flow"), one lane per EV grouped by plane, in
// time order. The optional artifacts of the same run are then folded in: the endpoint event log
// (EV state changes, cwnd, bytes in flight, retransmit causes), the injector decision log
// (drops and trims the capture cannot show) and the checker report (violations and the frames
// they name). Views draw from this index only: everything they need per frame is in FrameInfo,
// and per-lane frame lists are time-sorted so a view finds what is visible with a binary search.
//
// Memory: ~56 bytes per frame plus 4 per frame per list it is in (flow, lane); the captured
// bytes stay in the file mapping and are decoded again only for the packet pane.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire.h"

namespace mrc::view {

inline constexpr uint32_t kNone = UINT32_MAX;

// What a mark on a lane is. Frames get one kind each; kInjectorDrop and kEvState come from the
// logs (kTrimmed too, when the capture point is before the trimming switch).
enum class MarkKind : uint8_t {
  kFirstTx,       // data, first transmission of its PSN at this capture point
  kRetransmit,    // data with BTH.RTX=1, or a PSN seen before
  kTrimmed,       // a trimmed data packet (DSCP TRIMMED / TRIMMED_LASTHOP) or an injector trim
  kInjectorDrop,  // a drop in the decision log
  kSack,
  kNack,
  kProbe,    // reliability probe
  kEvState,  // EV state change in the event log
  kAck,      // transport ACK / NAK
  kOther,    // anything else of the flow
  // An endpoint operation between the flow's two hosts (BTH.DestQP 2): EV probe or port-status
  // update, request or response. Drawn on the plane's "endpoint ops" lane.
  kEndpointOp,
};
inline constexpr size_t kMarkKindCount = 11;
std::string_view mark_kind_name(MarkKind k);   // "first_tx", "retransmit", ...
std::string_view mark_kind_label(MarkKind k);  // "first transmission", ...
std::optional<MarkKind> parse_mark_kind(std::string_view name);
inline constexpr uint32_t kAllKinds = (1u << kMarkKindCount) - 1;
constexpr uint32_t kind_bit(MarkKind k) {
  return 1u << static_cast<unsigned>(k);
}

enum FrameFlag : uint16_t {
  kFlagRoce = 1u << 0,
  kFlagDecodeError = 1u << 1,
  kFlagRtxBit = 1u << 2,          // BTH.RTX set
  kFlagCe = 1u << 3,              // ECN CE in the outer header
  kFlagTrimmedLastHop = 1u << 4,  // trimmed with DSCP TRIMMED_LASTHOP / NACK code 0x02
  kFlagProbeReply = 1u << 5,      // SACK with PR=1
  kFlagDroppedLater = 1u << 6,    // the decision log drops this frame after the capture point
  kFlagTrimmedLater = 1u << 7,    // the decision log trims it after the capture point
  kFlagDelivered = 1u << 8,       // counted as goodput (first delivery of its PSN)
  kFlagAckReq = 1u << 9,
  kFlagRawIp = 1u << 10,             // link type raw IP (else Ethernet)
  kFlagSackAlwaysSkip = 1u << 11,    // SACK/NACK M = ALWAYS_SKIP
  kFlagEndpointResponse = 1u << 12,  // endpoint operation response (EETH), else request (ERTH)
  kFlagFromResponder = 1u << 13,     // endpoint operation sent by the flow's responder
};

// One captured frame, as the index keeps it.
struct FrameInfo {
  uint64_t ts_ns = 0;
  uint64_t offset = 0;  // of the captured bytes in the file
  uint32_t caplen = 0;
  uint32_t psn = 0;     // BTH.PSN (SACK: cack_psn, NACK: nack_psn; both equal BTH.PSN)
  uint32_t wev = 0;     // the lane's EV: carried WEV (data, probe), echoed entropy (SACK/NACK)
  int32_t rel_psn = 0;  // PSN relative to the flow's first data PSN, unwrapped
  uint32_t flow = kNone;
  uint32_t lane = kNone;  // index into Flow::lanes
  uint16_t payload = 0;   // IB payload bytes (data)
  uint16_t flags = 0;     // FrameFlag
  uint16_t aux = 0;       // probe_id (probe, probe SACK)
  uint8_t opcode = 0;
  MarkKind kind = MarkKind::kOther;
  uint8_t plane = 0;         // 1-based, 0 unknown
  uint8_t code = 0;          // NACK code; endpoint operation: wire::EndpointOp
  uint8_t interface_id = 0;  // pcapng interface (saturated at 255)
};

enum class EvState : uint8_t { kUnknown, kGood, kSkip, kAssumedBad, kDenied };
std::string_view ev_state_label(EvState s);
EvState parse_ev_state(std::string_view s);  // "GOOD", "SKIP", "ASSUMED_BAD", "DENIED"

struct EvSpan {
  uint64_t from_ns = 0;
  uint64_t until_ns = UINT64_MAX;
  EvState state = EvState::kUnknown;
};

// A mark that is not a captured frame: an injector decision or an event-log entry.
struct ExtMark {
  uint64_t ts_ns = 0;
  MarkKind kind = MarkKind::kInjectorDrop;
  uint32_t lane = kNone;
  uint32_t psn = 0;
  int32_t rel_psn = 0;
  bool has_psn = false;
  uint32_t frame = kNone;                // the captured frame it refers to, when found
  EvState to_state = EvState::kUnknown;  // kEvState
  std::string text;  // "drop link_down p1.a>s2", "GOOD -> ASSUMED_BAD (sack_gap)"
};

struct RttSample {
  uint64_t ts_ns = 0;  // time of the acknowledgement
  uint64_t rtt_ns = 0;
  uint32_t frame = kNone;  // the acknowledgement
};

struct SeriesPoint {
  uint64_t ts_ns = 0;
  double value = 0;
};

struct SackInfo {
  uint32_t frame = kNone;
  int32_t rel_cack = 0;
  int32_t rel_base = 0;  // bitmap bit i covers rel_base + i
  uint64_t bitmap = 0;
};

struct Lane {
  uint32_t wev = 0;
  bool control = false;      // the flow's reverse-path lane: ACKs, dropped feedback
  bool endpoint = false;     // the plane's endpoint operations (EV probes, port status), both ways
  uint8_t plane = 0;         // 1-based, 0 unknown
  std::string plane_source;  // "event log", "pcapng interface", "source MAC", ""
  std::vector<uint32_t> frames;  // frame indices, time order
  std::vector<uint32_t> ext;     // indices into Flow::ext, time order
  std::array<uint64_t, kMarkKindCount> counts{};
  std::vector<EvSpan> states;  // from the event log, time order
  std::vector<RttSample> rtt;
  // Goodput: delivered payload bytes, as prefix sums over time.
  std::vector<uint64_t> deliv_ts;
  std::vector<uint64_t> deliv_cum;
  std::string label() const;  // "EV 0xe0010002" / "control" / "endpoint ops"
};

struct Flow {
  wire::Ipv6Addr requester{}, responder{};  // IPv4 as ::ffff:a.b.c.d
  bool ipv4 = false;
  uint32_t responder_qpn = 0;                      // BTH.DestQP of the data
  std::optional<uint32_t> requester_qpn;           // BTH.DestQP of the SACKs/NACKs
  std::string requester_node;                      // node name from the event log, when matched
  uint32_t first_psn = 0;                          // rel_psn 0
  std::vector<Lane> lanes;                         // sorted: plane, then WEV; the control lane last
  std::vector<uint32_t> frames;                    // every frame of the flow, time order
  std::vector<ExtMark> ext;                        // time order
  std::vector<SackInfo> sacks;                     // time order
  std::vector<SeriesPoint> cwnd, bytes_in_flight;  // event log
  std::vector<std::pair<uint64_t, std::string>> qp_events;  // QP state changes
  std::array<uint64_t, kMarkKindCount> counts{};
  uint64_t first_ns = 0, last_ns = 0;
  int32_t min_rel_psn = 0, max_rel_psn = 0;
  std::vector<uint64_t> deliv_ts, deliv_cum;    // goodput over all lanes
  std::vector<uint8_t> planes;                  // distinct planes, ascending
  std::string label() const;                    // "fd00::1 -> fd00::2 QP 0x100"
  uint32_t lane_of(uint32_t wev) const;         // kNone when absent (control, endpoint excluded)
  uint32_t control_lane() const;                // kNone when absent
  uint32_t endpoint_lane(uint8_t plane) const;  // kNone when absent
};

// The checker report's failed / warned rules and the frames they name.
struct Evidence {
  std::string file;
  std::optional<uint64_t> frame_no;  // 1-based, in `file`
  uint64_t ts_ns = 0;
  std::string message;
  uint32_t frame = kNone;  // resolved in the opened capture
  bool by_time = false;    // resolved by timestamp (the evidence names another capture)
  // What the violation is about beyond one frame, when the report says: the interval
  // [from_ns, ts_ns] (a gap, a stall), the plane (the checker's port) and the EV.
  std::optional<uint64_t> from_ns;
  uint8_t plane = 0;
  std::optional<uint32_t> wev;
};

// Everything a violation's evidence points at in the opened capture: the frames it names, the
// interval it is about, the lanes (EV, or a whole plane) and, for a gap, the frames that bound it
// on the lanes involved (the last before and the first after).
struct EvidenceFocus {
  uint32_t flow = kNone;
  std::vector<uint32_t> frames;  // named frames first, then bounding frames; capture indices
  std::vector<uint32_t> lanes;   // lane indices in `flow`
  std::vector<std::pair<uint64_t, uint64_t>> intervals;  // absolute ns
};

struct Violation {
  std::string id, status, severity, statement;
  uint64_t count = 0;
  std::vector<Evidence> evidence;
};

struct LoadOptions {
  // A run directory of `mrct run` (or `mrct suite`: its first failed scenario, else its first):
  // the capture and every artifact come from its manifest.json, or from a search of its usual
  // places when it has none (see RunDir). Fills the fields below that are empty.
  std::string run_dir;
  std::string capture;
  std::vector<std::string> event_logs;
  std::vector<std::string> decision_logs;
  std::string report;
  // Look for artifacts of the same run next to the capture (and in artifacts_dir).
  bool detect = true;
  std::string artifacts_dir;
  // Plane of a lane from the pcapng interface id (+1) when the capture has several interfaces.
  bool planes_from_interfaces = true;
  // Wire profile: a name or a profile file (TOML, docs/wire-format.md section 19); "" = MRP0.
  std::string wire_profile;
};

// Artifacts found in a directory, recognised by content (first JSON line / top-level keys),
// not by file name: event logs have "kind" and "node", decision logs "action" and "link",
// checker reports "rules".
struct Artifacts {
  std::vector<std::string> event_logs;
  std::vector<std::string> decision_logs;
  std::string report;
};
Artifacts detect_artifacts(const std::string& dir);

// The EV -> path table of a run (paths.json of the testbed, schema mrctb-paths/1).
struct PathEntry {
  std::string src, dst;  // node names
  uint32_t ev = 0;       // EV index of the pair
  uint8_t plane = 0;     // 1-based (the table's 0-based plane + 1, = its NIC port)
  int t1 = -1;
  std::string outer_da, egress;
  std::vector<std::string> usids, hops;
  std::string text() const;  // "h1->h2 EV 2: plane 1 (port 1), T1 1, uSIDs 0100 0201 ..."
};

// What a run directory holds, as the viewer resolved it.
struct RunDir {
  std::string dir;       // the scenario run opened
  std::string manifest;  // its manifest.json, when it had one (else the artifacts were searched)
  std::string suite;     // the suite directory, when `dir` was one of its runs
  std::vector<std::string> runs;      // a suite's scenario runs
  std::vector<std::string> captures;  // every capture of the run (the opened one first)
  std::string capture, report, paths;
  std::vector<std::string> event_logs, decision_logs;
  // One line per kind of artifact: "report: check/report.json" or "report: missing (looked
  // in manifest.json, check/*.json)". Shown by the status bar and `--list`.
  std::vector<std::string> found, missing;
};
// Resolves a run directory. False with `error` naming the directory when it is no run (neither a
// manifest nor any capture where a run keeps them).
bool resolve_run_dir(const std::string& dir, RunDir& out, std::string& error);
bool is_run_dir(const std::string& path);  // a directory (of a run or a suite)

struct LoadStats {
  uint64_t frames = 0, roce_frames = 0, decode_errors = 0, other_frames = 0;
  uint64_t file_bytes = 0;
  double index_ms = 0, logs_ms = 0, total_ms = 0;
  uint64_t events = 0, decisions = 0;
};

struct Filter {
  std::vector<uint32_t> evs;  // empty: all
  uint8_t plane = 0;          // 0: all
  std::optional<uint8_t> opcode;
  uint32_t kinds = kAllKinds;
  bool lane_visible(const Lane& l) const;
  bool frame_visible(const FrameInfo& f) const;
  bool ext_visible(const ExtMark& m, const Lane& l) const;
};

struct SelectionStats {
  uint64_t from_ns = 0, to_ns = 0;
  std::array<uint64_t, kMarkKindCount> counts{};
  uint64_t frames = 0;
  uint64_t data_bytes = 0;       // payload of data frames (first + retransmissions)
  uint64_t delivered_bytes = 0;  // goodput bytes
  double goodput_bps = 0;
  uint32_t lanes_used = 0;
  std::vector<std::pair<uint8_t, uint64_t>> data_per_plane;
  uint64_t rtt_samples = 0;
  double rtt_min_ns = 0, rtt_avg_ns = 0, rtt_max_ns = 0;
  std::string to_text() const;
};

// Per-EV figures of a flow over a time range (the EV table): what was sent on the path, what
// happened to it, how long the sender held it out of use.
struct EvStats {
  uint32_t lane = kNone;
  uint32_t wev = 0;
  uint8_t plane = 0;
  uint64_t packets = 0;          // data frames: first transmissions, retransmissions, trimmed
  uint64_t retransmissions = 0;  // of them, retransmissions
  uint64_t drops = 0;            // injector drops (decision log)
  uint64_t trims = 0;            // trimmed frames in the capture, or trims in the decision log
  uint64_t rtt_samples = 0;
  uint64_t rtt_p50_ns = 0, rtt_p99_ns = 0;   // nearest rank; 0 without samples
  uint64_t skip_ns = 0, assumed_bad_ns = 0;  // time in SKIP / ASSUMED_BAD inside the range
  bool idle = false;  // no data frame on this EV in the whole capture (a backup, probes only)
};

// A frame the packet pane links to from another one.
struct RelatedFrame {
  std::string role;  // "original", "later copy", "NACK", "resend", "triggered by", ...
  uint32_t frame = kNone;
};

// Where a navigation step lands: a frame, or a log entry (EV state change) at a time.
struct NavTarget {
  uint64_t ts_ns = 0;
  uint32_t frame = kNone;  // the frame to select; a log entry's frame when it names one
  std::string what;        // "frame 12", "GOOD -> SKIP (nack) at +1.2 ms"
};

// What next/previous can step to. Trims include first transmissions the decision log trims after
// the capture point; state changes are the event log's EV state changes.
enum class NavKind : uint8_t { kRetransmit, kTrim, kNack, kStateChange, kDrop };
std::string_view nav_kind_label(NavKind k);

// "150us", "1.5ms", "2s", "800ns", "1200" (ns); nullopt when it is none of these.
std::optional<uint64_t> parse_duration_ns(std::string_view s);

class ViewModel {
 public:
  ViewModel();
  ~ViewModel();
  ViewModel(ViewModel&&) noexcept;
  ViewModel& operator=(ViewModel&&) noexcept;

  // Reads everything. False with `error` set when the capture cannot be read at all (a truncated
  // capture keeps the frames before the damage, with a warning). Problems in the optional logs
  // become warnings; an unreadable report file given explicitly is an error.
  bool load(const LoadOptions& opts, std::string& error);

  const std::string& capture_path() const;
  const LoadOptions& options() const;  // with detected artifacts filled in
  const LoadStats& stats() const;
  const std::vector<std::string>& warnings() const;
  const std::vector<FrameInfo>& frames() const;
  const std::vector<Flow>& flows() const;
  const std::vector<Violation>& violations() const;
  const RunDir& run() const;  // dir empty when no run directory was opened
  const std::vector<PathEntry>& paths() const;
  // The path table entry of a data frame: by its outer (SRv6) destination address, or by its
  // EV when the table's pair and EV index match. nullptr when unknown.
  const PathEntry* path_of(uint32_t frame) const;
  EvidenceFocus evidence_focus(const Violation& v, int evidence = -1) const;
  uint64_t first_ns() const;
  uint64_t last_ns() const;
  bool is_pcapng() const;

  wire::Bytes frame_bytes(uint32_t frame) const;
  uint32_t frame_orig_len(uint32_t frame) const;  // as recorded; 0 when unknown
  bool decode(uint32_t frame, wire::DecodedFrame& out) const;
  std::string field_tree(uint32_t frame) const;
  std::string summary(uint32_t frame) const;
  // What the index knows about the frame beyond its headers: kind, lane, matching log entries.
  std::string describe(uint32_t frame) const;

  // The flow with the most frames; kNone when there is none.
  uint32_t busiest_flow() const;
  // A flow by QPN (either side) or by "#index"; kNone when absent.
  uint32_t find_flow(std::string_view spec) const;
  // The frame closest in time to ts_ns (any flow), kNone for an empty capture.
  uint32_t frame_near(uint64_t ts_ns) const;
  // First index in `list` (frame indices, time order) with ts >= ts_ns.
  size_t lower_bound(const std::vector<uint32_t>& list, uint64_t ts_ns) const;

  // Delivered bytes per second over (t - window, t] (lane == kNone: the whole flow).
  double goodput_bps(const Flow& flow, uint32_t lane, uint64_t t_ns, uint64_t window_ns) const;
  // Statistics of [from_ns, to_ns]: the lanes `filter` shows (EV, plane), every kind of frame.
  // The display filters (kinds, opcode) do not change them: goodput is goodput whatever is drawn.
  SelectionStats selection_stats(uint32_t flow, uint64_t from_ns, uint64_t to_ns,
                                 const Filter& filter) const;
  // One row per data lane of the flow (control and endpoint lanes left out), lane order.
  std::vector<EvStats> ev_stats(uint32_t flow, uint64_t from_ns, uint64_t to_ns) const;
  // The path table entry of a lane (from its first data frame); nullptr when unknown.
  const PathEntry* lane_path(uint32_t flow, uint32_t lane) const;

  // Frames the packet pane links to: a data frame's original and other copies of its PSN, the
  // NACK of a trim and its resend; a SACK's triggering packet; a NACK's trimmed packet and resend.
  std::vector<RelatedFrame> related(uint32_t frame) const;
  // The PSNs a SACK covers, relative and absolute: "cumulative ACK up to 0x000102 (rel +5);
  // bitmap: +7..+9, +12". Empty for other frames.
  std::string sack_coverage(uint32_t frame) const;
  // The next (forward) or previous frame / log entry of `kind` in `flow` after (before) the
  // position (ts_ns, frame), on the lanes `filter` shows. nullopt when there is none.
  std::optional<NavTarget> navigate(uint32_t flow, NavKind kind, bool forward, uint64_t ts_ns,
                                    uint32_t frame, const Filter& filter) const;
  // "Go to": "123" or "#123" or "frame 123" (1-based frame number), "+1.5ms" or "t 1.5ms" (time
  // after the first frame), "psn 0x1234" (absolute) or "psn +5" (relative to the flow's first
  // data PSN): the first data frame of `flow` with that PSN. nullopt with `error` saying why.
  std::optional<NavTarget> go_to(uint32_t flow, std::string_view spec, std::string& error) const;

  struct Impl;  // gui/view_model_impl.h

 private:
  std::unique_ptr<Impl> impl_;
};

std::string format_time_ns(uint64_t ns);     // "1.234 ms", "12.5 us", "830 ns"
std::string format_wev(uint32_t wev);        // "0xe0010002"
std::string format_rate(double bits_per_s);  // "12.3 Gb/s"

}  // namespace mrc::view
