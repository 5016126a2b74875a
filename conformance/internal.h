// Private declarations shared by the checker's implementation files. Not installed, not public:
// mrct and other folders use conformance/check.h only.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "conformance/check.h"
#include "wire/wire.h"

namespace mrc::check::detail {

// Rule indices, in catalogue order. catalogue.cc holds one row per index; a test verifies that
// the row at index i carries the id spelled by the enumerator.
enum RuleIdx : uint16_t {
  FRM_001,
  FRM_002,
  FRM_003,
  FRM_004,
  FRM_005,
  FRM_006,
  FRM_007,
  FRM_008,
  FRM_009,
  FRM_010,
  FRM_011,
  EV_001,
  EV_002,
  EV_003,
  EV_004,
  EV_005,
  EV_006,
  EV_007,
  EV_008,
  EV_009,
  EV_010,
  EV_011,
  EV_012,
  EV_013,
  REQ_001,
  REQ_002,
  REQ_003,
  REQ_004,
  REQ_005,
  REQ_006,
  REQ_007,
  REQ_008,
  REQ_009,
  REQ_010,
  REQ_011,
  REQ_012,
  REQ_013,
  REQ_014,
  REQ_015,
  RSP_001,
  RSP_002,
  RSP_003,
  RSP_004,
  RSP_005,
  RSP_006,
  RSP_007,
  RSP_008,
  RSP_009,
  RSP_010,
  RSP_011,
  RSP_012,
  RSP_013,
  RSP_014,
  PRB_001,
  PRB_002,
  PRB_003,
  PRB_004,
  PRB_005,
  PRB_006,
  PRB_007,
  PRB_008,
  CC_001,
  CC_002,
  kRuleCount
};

using Addr = wire::Ipv6Addr;

struct AddrHash {
  size_t operator()(const Addr& a) const {
    uint64_t h = 1469598103934665603ull;
    for (uint8_t b : a) h = (h ^ b) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

std::string format_addr(const Addr& a);  // IPv4-mapped addresses print as dotted quads
Addr v4_mapped(const wire::Ipv4Addr& a);
std::optional<Addr> parse_addr(std::string_view s);  // IPv6 or IPv4 (mapped)

// RoCE-level addresses of a decoded frame (inner header in SRv6 mode); false when not IP.
bool roce_addrs(const wire::DecodedFrame& f, Addr& src, Addr& dst);

inline constexpr uint64_t kNoTime = UINT64_MAX;

// One observation of a frame at one capture point, as the evaluators see it.
struct Obs {
  uint32_t point = 0;
  uint64_t frame_no = 0;
  uint64_t ts = 0;
  const wire::DecodedFrame* f = nullptr;
  uint64_t pkt = 0;     // merged packet id (same packet at several points)
  bool first = true;    // first observation of this packet
  bool at_src = false;  // capture point belongs to the sending node
  bool at_dst = false;  // capture point belongs to the receiving node
  int src_node = -1;
  int dst_node = -1;
  Addr src{};
  Addr dst{};
  wire::EvFormat format = wire::EvFormat::kUdp;
  uint32_t wev = 0;
  bool trimmed = false;  // DSCP TRIMMED / TRIMMED_LASTHOP
  bool ce = false;
  bool icrc_bad = false;  // the ICRC does not verify: the receiver drops it
  bool snapped = false;   // the capture cut the frame (snap length)
};

// One transmission of a PSN (a distinct packet, possibly seen at several points).
struct Tx {
  uint64_t pkt = 0;
  uint64_t ts = 0;  // first observation
  uint32_t point = 0;
  uint64_t frame = 0;
  uint32_t wev = 0;
  bool valid = false;
  bool rtx = false;
  bool at_src = false;   // first observation was at the requester
  bool trimmed = false;  // seen trimmed somewhere
  uint8_t trim_dscp = 0;
  bool ce = false;
  bool at_dst = false;  // seen at the responder's capture point
  bool at_dst_intact = false;
  bool dropped = false;   // injector dropped it
  bool corrupt = false;   // seen with a bad ICRC: the responder drops it
  bool trim_obl = false;  // obligations created for its arrival
  bool ce_obl = false;
  bool ack_obl = false;
};

inline constexpr int kTxRing = 3;

struct PsnRec {
  bool seen = false;
  // From the first transmission whose headers were intact.
  uint8_t pos = 0;  // wire::MessagePosition
  bool imm = false;
  uint16_t msn = 0, rqmsn = 0;
  bool content_known = false;
  uint64_t va = 0;
  uint32_t rkey = 0, dma_len = 0, payload_len = 0;
  uint64_t content_hash = 0;
  uint32_t nominal = 0;
  uint16_t tx_count = 0;
  uint8_t tx_next = 0;
  std::array<Tx, kTxRing> tx{};
  uint64_t first_ts = 0;
  uint32_t first_point = 0;
  uint64_t first_frame = 0;
  bool acked = false;
  uint64_t nack_ts = 0;      // last NACK for this PSN that reached the requester
  bool gap_pending = false;  // skipped at the requester's capture, not yet seen anywhere
  uint64_t gap_ts = 0;
  uint32_t gap_point = 0;
  uint64_t gap_frame = 0;
  bool inflight = false;  // counted in the CC bytes-in-flight estimate
  uint64_t drop_ts = 0;   // injector drop of a transmission (decision log)
  uint32_t drop_wev = 0;
  bool drop_known = false;

  const Tx* latest() const;
  const Tx* latest_before(uint64_t ts) const;
  Tx* find(uint64_t pkt);
  Tx& push();
};

enum class EvMode : uint8_t { kGood, kSkip, kBad };

struct EvState {
  EvMode mode = EvMode::kGood;
  uint64_t since = 0;     // when the signal reached the requester
  uint64_t last_use = 0;  // last new-data use
  uint64_t last_probe = 0;
  uint64_t probe_flagged_at = 0;
  size_t need_others = 0;  // SKIP: distinct other EVs to use first
  uint32_t sig_capture = 0;
  uint64_t sig_frame = 0;
};

struct Pending {
  uint64_t since = 0;
  uint32_t point = 0;
  uint64_t frame = 0;
  uint32_t ev = 0;
  uint8_t code = 0;
  uint64_t deadline = 0;
  uint64_t bytes_deadline = 0;
  int64_t psn = 0;
};

struct ProbeRec {
  uint32_t wev = 0;
  uint64_t ts = 0;
  bool ce = false;
  bool ce_known = false;
  uint32_t point = 0;
  uint64_t frame = 0;
};

struct MsgRec {
  int64_t first_psn = 0;
  uint64_t va_first = 0;
  bool first_known = false;
};

struct Flow {
  int id = 0;
  int req_node = -1, rsp_node = -1;
  Addr req_addr{}, rsp_addr{};
  std::optional<uint32_t> req_qpn, rsp_qpn;
  QpProfile prof;
  bool configured = false;

  // PSN window (extended 64-bit PSNs).
  bool have_ref = false;
  int64_t ref_ext = 0;   // highest extended PSN unwrapped so far
  int64_t base_ext = 0;  // PSN of win[0]
  std::deque<PsnRec> win;
  uint32_t wild = 0;  // consecutive PSNs refused as far outside the window
  bool have_data = false;
  int64_t highest_ext = 0;  // highest data PSN seen anywhere
  bool have_src_data = false;
  int64_t highest_src_ext = 0;  // highest new PSN seen at the requester's capture
  std::optional<int64_t> max_cack_ext;
  std::optional<int64_t> last_src_cack_ext;  // responder-order cack (capture at responder)
  std::optional<uint32_t> last_src_rcvd_bytes;
  std::optional<int64_t> last_src_tack_ext;
  int64_t sack_hi_ext = 0;
  bool have_sack_hi = false;
  uint64_t last_sack_arrival = 0;  // at the requester
  uint64_t last_pr_sack_arrival = 0;
  uint8_t dyn_mpr = 0;  // last non-zero SACK.mpr

  uint32_t pmtu = 0;  // configured or inferred
  std::map<uint16_t, MsgRec> msgs;

  // WIMM and transport ACKs.
  std::deque<int64_t> imm_ends;  // last PSN of WriteIMM messages first-sent
  bool saw_tack = false;
  int64_t max_tack_ext = 0;

  // QP error (fatal NACK / NAK reached the requester).
  uint64_t fatal_ts = kNoTime;

  // EVs.
  std::unordered_map<uint32_t, EvState> evs;
  std::deque<uint32_t> recent_wevs;  // last new-data WEVs
  std::unordered_map<uint32_t, uint32_t> recent_count;
  uint32_t run_wev = 0;
  uint32_t run_len = 0;
  bool run_flagged = false;
  size_t bad_count = 0;
  size_t skip_count = 0;

  // Probes.
  std::map<uint16_t, ProbeRec> probes;
  std::deque<uint16_t> probe_order;

  // Obligations.
  std::map<int64_t, Pending> nack_retx;  // REQ-011
  std::map<int64_t, Pending> drop_retx;  // REQ-015
  std::map<int64_t, Pending> trim_nack;  // RSP-013
  std::map<int64_t, Pending> ack_resp;   // RSP-009
  std::deque<std::pair<int64_t, uint64_t>> ack_order;
  std::vector<Pending> ce_echo;           // RSP-006
  std::map<uint16_t, Pending> probe_ans;  // PRB-002
  uint64_t rx_bytes = 0;                  // Σ max(payload, 1 KiB) of data arrivals

  // CC.
  uint64_t inflight_bytes = 0;
  uint32_t max_nominal = 0;

  // Control packets (SACK/NACK/ACK) the injector dropped: (opcode, PSN, decision time).
  std::deque<std::tuple<uint8_t, uint32_t, uint64_t>> ctl_drops;

  // Summary.
  uint64_t data_packets = 0, retransmissions = 0, sacks = 0, nacks = 0;
  std::unordered_set<uint32_t> all_wevs;

  int64_t unwrap(uint32_t psn);
  PsnRec* rec(int64_t ext);         // nullptr when outside the window
  PsnRec* rec_create(int64_t ext);  // grows the window; nullptr when too far
  size_t active_evs() const { return recent_count.size(); }
};

// One key of the merge table. The point where the key was first seen (the most upstream one)
// tells how many copies were sent; further copies at other points are the fabric's duplicates.
struct DedupEntry {
  static constexpr int kMaxCopies = 4;
  uint64_t ts = 0;
  uint32_t first_point = 0;
  uint8_t n_ids = 0;
  std::array<uint64_t, kMaxCopies> ids{};  // packet id of each copy sent at first_point
  std::array<uint8_t, 64> seen{};          // copies seen so far per point (mod 64)
  uint32_t last_point = 0;
  Addr outer_da{};
  uint8_t hop_limit = 0;
  bool srv6 = false;
  uint32_t ib_len = 0;  // bytes after UDP at first sight
  bool trimmed = false;
};

struct EndpointReq {
  uint8_t op = 0;
  uint64_t ts = 0;
  uint16_t ts16 = 0;
  uint32_t wev = 0;
  uint32_t responses = 0;
  uint32_t point = 0;
  uint64_t frame = 0;
};

struct RuleState {
  uint64_t checked = 0;
  uint64_t violations = 0;
  uint64_t excused = 0;
  std::vector<Evidence> evidence;
  std::string na_reason;
};

struct PointState {
  PointInfo info;
  int node = -1;
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t decode_errors = 0;
};

// The checker engine (Checker::Impl). Methods are spread over engine.cc (dispatch, flows,
// dedup, results), framing.cc, requester.cc, responder.cc, evstate.cc and probes.cc.
struct Engine {
  Engine(DutProfile p, RuleSelection sel, size_t max_ev);

  DutProfile prof;
  RuleSelection sel;
  size_t max_evidence;
  std::unique_ptr<wire::WireProfile> wire_profile;
  std::array<RuleState, kRuleCount> rules;
  std::array<bool, kRuleCount> enabled{};

  std::vector<PointState> points;
  std::vector<Addr> node_addr;  // primary address per node id
  std::vector<std::string> node_name;
  std::vector<bool> node_has_point;
  std::unordered_map<Addr, int, AddrHash> addr_node;

  std::vector<std::unique_ptr<Flow>> flows;
  std::map<std::tuple<int, int, uint32_t>, int> by_data;    // (req node, rsp node, rsp qpn)
  std::map<std::tuple<int, int, uint32_t>, int> by_ctl;     // (req node, rsp node, req qpn)
  std::map<std::pair<int, int>, std::vector<int>> by_pair;  // (req node, rsp node) -> flows
  uint64_t flows_refused = 0;  // inferred QPs beyond kMaxFlows (garbage traffic)
  uint64_t nodes_refused = 0;

  std::unordered_map<uint64_t, DedupEntry> dedup;
  std::deque<std::pair<uint64_t, uint64_t>> dedup_order;  // (ts, key)
  uint64_t next_pkt = 1;

  std::map<std::tuple<Addr, Addr, uint16_t>, EndpointReq> ep_reqs;  // (src, dst, req_id)
  std::deque<std::pair<uint64_t, std::tuple<Addr, Addr, uint16_t>>> ep_order;

  std::map<std::pair<uint32_t, Addr>, std::pair<uint16_t, uint64_t>> ts16_last;  // R22

  std::deque<uint64_t> corrupt_times;  // injector corrupt decisions

  std::vector<Annotation> annotations;
  uint64_t frames = 0, packets = 0, first_ts = kNoTime, last_ts = 0, now = 0;
  uint64_t decisions = 0;
  uint64_t next_sweep = 0;
  std::vector<CaptureSummary> capture_summaries;

  wire::DecodedFrame frame;  // reused per frame

  // --- results (engine.cc)
  bool on(RuleIdx r) const { return enabled[r]; }
  void judge(RuleIdx r, uint64_t n = 1) { rules[r].checked += n; }
  void fail(RuleIdx r, const Obs& o, std::string msg);
  void fail_at(RuleIdx r, uint32_t point, uint64_t frame, uint64_t ts, std::string msg);
  void excuse(RuleIdx r) { rules[r].excused++; }
  // Records why a rule could not be judged (first reason wins; no allocation after that).
  void na(RuleIdx r, const char* reason) {
    if (rules[r].na_reason.empty()) rules[r].na_reason = reason;
  }

  // --- dispatch (engine.cc)
  void on_frame(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                wire::LinkType link, uint32_t orig_len);
  void on_decision(const Decision& d);
  Report finish(uint64_t end_ts);
  int node_of(const Addr& a);
  uint64_t merge(Obs& o, const wire::DecodedFrame& f, uint64_t& key_out);
  Flow* flow_for_data(const Obs& o, uint32_t rsp_qpn, bool create);
  Flow* flow_for_ctl(const Obs& o, uint32_t req_qpn, std::optional<uint16_t> spdcid, bool create);
  Flow* flow_for_decision(const Decision& d, bool data);
  Flow& new_flow(int req_node, int rsp_node, const Addr& req, const Addr& rsp);
  void bind_data(Flow& fl, uint32_t rsp_qpn);
  void bind_ctl(Flow& fl, uint32_t req_qpn);
  void sweep(uint64_t now_ts);
  bool requester_captured(const Flow& fl) const;
  bool responder_captured(const Flow& fl) const;
  // The observation counts as arrival at the responder / requester.
  bool arrival_at_rsp(const Flow& fl, const Obs& o) const;
  bool arrival_at_req(const Flow& fl, const Obs& o) const;
  // Without a capture at the requester, a control packet the injector dropped never arrived.
  bool ctl_dropped(const Flow& fl, const Obs& o) const;
  uint64_t mpr_eff(const Flow& fl) const;     // PSNs; 0 unknown
  uint64_t timeout_ns(const Flow& fl) const;  // 0 unknown

  // --- framing.cc: stateless per-frame rules
  void frame_rules(const Obs& o, const wire::DecodedFrame& f, bool decoded_ok);
  void non_roce_rules(const Obs& o, const wire::DecodedFrame& f);
  void hop_rules(const Obs& o, const wire::DecodedFrame& f, const DedupEntry& prev);
  void trim_shape(const Obs& o, const wire::DecodedFrame& f, uint32_t untrimmed_ib_len);

  // --- requester.cc
  void on_data(Obs& o, Flow& fl);
  void data_arrival(const Obs& o, Flow& fl, int64_t p, PsnRec& r, Tx& tx);
  void on_probe(const Obs& o, Flow& fl);
  void new_psn_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void retx_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void neighbour_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r);
  void evict(Flow& fl, PsnRec& r, int64_t p);
  // Judges the per-PSN obligations of p (retransmit after NACK / drop, trim NACK) as of `at`:
  // failed when older than the end grace, forgotten otherwise.
  void settle(Flow& fl, int64_t p, uint64_t at);
  void ack_covered(Flow& fl, int64_t p, PsnRec& r, uint64_t ts);

  // --- responder.cc
  void on_sack(const Obs& o, Flow& fl);
  void on_nack(const Obs& o, Flow& fl);
  void on_tack(const Obs& o, Flow& fl);

  // --- evstate.cc
  void ev_on_data(const Obs& o, Flow& fl, bool is_new);
  void ev_signal(const Obs& o, Flow& fl, uint32_t wev, EvMode mode, const char* what);
  void ev_probe_ok(const Obs& o, Flow& fl, uint32_t wev);
  void ev_probe_sent(const Obs& o, Flow& fl, uint32_t wev);
  void ev_timeout_retire(const Obs& o, Flow& fl, uint32_t wev);
  void ev_sweep(Flow& fl, uint64_t now_ts, bool final);
  void ev_carriage(const Obs& o, const wire::DecodedFrame& f, const Flow* fl);

  // --- probes.cc: endpoint operations
  void on_endpoint(const Obs& o, const wire::DecodedFrame& f);
};

// Content hash of the parts of a data packet a retransmission must repeat byte for byte:
// METH, RETH, ImmDt and payload (not BTH flags, TSETH, EV, DSCP or ICRC).
uint64_t content_hash(const wire::DecodedFrame& f);
uint64_t fnv1a(const void* p, size_t n, uint64_t h = 1469598103934665603ull);
// A fast 64-bit hash (8 bytes per step) for payload-sized inputs; not cryptographic.
uint64_t hash_bytes(const void* p, size_t n, uint64_t h = 0x9E3779B97F4A7C15ull);

std::string hex(uint64_t v, int width = 0);

// Reads a capture's first frames and guesses the node it was taken on (see trace.cc).
std::optional<Addr> guess_capture_node(const std::string& path, const DutProfile& prof,
                                       std::string& how);

}  // namespace mrc::check::detail
