// mrc_engine: the sans-I/O reference MRC endpoint.
//
// The one public header of the engine. An Endpoint is one node: a NIC with P ports (port n is
// plane n), its queue pairs, memory regions and completion queues, and the connectionless
// endpoint operations (EV probes, port-status updates). It owns no sockets and no clocks: the
// caller hands it frames (on_packet), tells it the time (every call takes now_ns), asks it for
// frames to transmit (poll_tx) and for the next instant it needs to be woken (next_deadline_ns).
// All randomness comes from a PRNG seeded by EndpointConfig::seed, so the same inputs give the
// same outputs byte for byte.
//
// Driving loop (what the simulator and the runtime do):
//   on_packet(...) / on_timer(now) / post_*(...)   then   while (poll_tx(now, pkt)) send(pkt);
//   sleep until min(next_deadline_ns(), next frame arrival).
// A caller that drains receive rings brackets the drain with begin_rx_batch()/end_rx_batch().
//
// Packets are built and parsed only through mrc::wire (profile MRP0 by default). Behaviour
// follows MRP0 (docs/wire-format.md) and the rules of ../shared/research/mrc-protocol.md Part D;
// the places where the engine had to choose something the sources leave open are marked "MRP0
// gap" in the implementation files.
//
// The verbs-like API mirrors the OCP mrc.h / mrc_ctl.h shapes (state machine, attribute masks,
// ibv_wc-like completions) without copying them: names are re-declared here.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire.h"

namespace mrc::engine {

inline constexpr uint8_t kMaxPorts = 16;       // planes per NIC the engine supports
inline constexpr uint32_t kMaxSge = 4;         // scatter/gather entries per work request
inline constexpr uint8_t kMaxTimeoutExp = 24;  // MRC_QP_TIMEOUT: 1.024 us * 2^t, t <= 24
inline constexpr uint8_t kMaxLinearRetry = 7;
inline constexpr uint8_t kUnlimitedExpRetry = 25;  // retry.exp_cnt = 25 means retry forever
inline constexpr uint32_t kMprUnitPsns = 128;      // MPR / MPR_DEST unit

// ---------------------------------------------------------------------------------------------
// Status: 0 or an errno value, plus a message that says what was wrong.
// ---------------------------------------------------------------------------------------------
struct Status {
  int code = 0;  // 0, EINVAL, ENOMEM, ENOENT, EBUSY, EEXIST, ENOTSUP ...
  std::string message;
  bool ok() const { return code == 0; }
  static Status Ok() { return {}; }
  static Status Error(int errno_code, std::string msg) { return {errno_code, std::move(msg)}; }
};

// ---------------------------------------------------------------------------------------------
// Endpoint configuration
// ---------------------------------------------------------------------------------------------
struct PortConfig {
  wire::MacAddr mac{};           // source MAC of frames leaving this port
  wire::MacAddr next_hop_mac{};  // destination MAC of frames leaving this port
  // Outer IPv6 source in SRv6 mode (MRP0 C.1: the local port address); the node GID if unset.
  std::optional<wire::Ipv6Addr> srv6_source;
};

// Device capabilities and limits (MRC_DEVICE_CAP_* and mrc_device_attr).
struct DeviceCaps {
  bool trim_nack = true;    // MRC_DEVICE_CAP_TRIM_NACK: responder NACKs trimmed packets
  bool dynamic_mpr = true;  // MRC_DEVICE_CAP_DYNAMIC_MPR
  bool svc_time = true;     // MRC_DEVICE_CAP_SVC_TIME: responder adds service time (SVA=1)
  uint16_t max_wimm = 1024;
  uint16_t max_wimm_dest = 1024;
  uint8_t max_mpr = 255;  // 128-PSN units
  uint32_t max_qp = 4096;
  uint32_t max_send_wr = 16384;
  uint32_t max_recv_wr = 16384;
  uint32_t max_cqe = 1u << 20;
};

struct EndpointConfig {
  std::string name;  // node name in the event log
  // Node GID. An IPv4-mapped GID (::ffff:a.b.c.d) makes the node speak RoCEv2 over IPv4 (only
  // with the UDP EV format).
  wire::Ipv6Addr gid{};
  std::vector<PortConfig> ports;  // size = P; port n (1-based) is ports[n-1] = plane n
  wire::EvFormat ev_format = wire::EvFormat::kStev;
  uint64_t seed = 1;
  const wire::WireProfile* profile = nullptr;  // nullptr: mrc::wire::mrp0()
  DeviceCaps caps;

  // SACK generation (MRP0 C.4, UET ACK_Gen_Trigger / ACK_Gen_Min_Pkt_Add).
  uint32_t ack_gen_trigger_bytes = 16384;
  uint32_t ack_gen_min_pkt_add_bytes = 1024;
  // Loss evidence: a PSN missing below >= this many SACKed PSNs sent after it on its own plane
  // (at most 64) is lost.
  uint32_t sack_gap_threshold = 3;
  // An EV whose packet was lost without a trim (SACK gap evidence) is retired at once (paper:
  // "lost packet => EV swapped for a backup"); false retires EVs only on timeout / M=ALWAYS_SKIP.
  bool retire_ev_on_sack_gap = true;
  // A packet's first ACK timeout while the peer has said nothing at all on its QP for T/2 or
  // more (no SACK, NACK or ACK on any EV, the tail probe at T/2 unanswered) waits up to this
  // much longer, for as long as the silence lasts; once the peer is back, what it sent before
  // gets one T from then. Such a timeout says nothing about the packet's EV: the whole peer is
  // silent, which on a software endpoint is most often its process not being scheduled (the
  // ci-fast suite under a busy loop: 17-36 ms silences against a 16.8 ms T retired 1-14 good
  // EVs per run). A timeout while the peer answers (other EVs delivering, the tail probe
  // answered) is path evidence and fires at T as before; so do the retries after the first (C.9
  // schedule), and R44 only asks for "no earlier than T". The same hold applies while nothing
  // sent after the packet has been answered (no later data packet delivered on any EV, no later
  // tail probe answered): a peer that answered older packets and then stopped is as silent
  // about this packet. 0 (the default): every timeout at T.
  uint64_t silent_peer_grace_ns = 0;
  // Reliability probes: consecutive good probe SACKs that return an ASSUMED_BAD EV to GOOD.
  uint32_t k_recover = 3;
  uint64_t probe_interval_ns = 16'000;
  // SKIP lasts until the rotation after the current one has been used; this bounds it in time
  // too (0 = no time bound).
  uint64_t skip_max_ns = 0;
  // Reverse-EV maintenance period for QPs that receive but do not send (0 = the QP's smoothed
  // RTT, at least 2 us).
  uint64_t reverse_ev_probe_interval_ns = 0;
  uint64_t ep_request_timeout_ns = 2'000'000;  // endpoint requests the engine sends itself
  uint32_t ctrl_queue_capacity = 8192;         // pending SACK/NACK/ACK/responses
  // A QP in ERR answers its peer's data packets and probes with a NAK (remote operational
  // error) so that the peer's requester fails at once instead of retrying until its stall
  // timeout. The answers come from a token bucket: `error_nak_burst` at once, then one per
  // `error_nak_interval_ns`, so that spoofed traffic to a dead QP cannot be amplified.
  uint32_t error_nak_burst = 4;
  uint64_t error_nak_interval_ns = 100'000;
  // Replies to input the engine cannot verify come from token buckets (burst, then one per
  // interval; interval 0 = no limit), so that a flood is not answered one for one:
  // - per QP: SACKs / ACKs answering duplicates and NACKs answering PSNs beyond the window
  //   (reply_*), probe SACKs (probe_reply_*), both counted in QpStats::replies_limited;
  // - endpoint responses (EV probe, port-status update): one bucket per node this endpoint has
  //   a QP with, and one shared by all other sources (EndpointStats::ep_responses_limited).
  // The QP defaults leave room for the engine's own probe rate (probe_interval_ns = 16 us per
  // ASSUMED_BAD EV); the runtime, whose probes are 1 ms apart, can tighten them.
  uint32_t reply_burst = 256;
  uint64_t reply_interval_ns = 2'000;
  // Probe SACKs have a bucket of their own: a requester probes every ASSUMED_BAD EV once per
  // probe interval, so their legitimate rate grows with the EVs retired, while duplicates and
  // PSNs beyond the window are rare in a healthy transfer and can be held much tighter.
  uint32_t probe_reply_burst = 256;
  uint64_t probe_reply_interval_ns = 2'000;
  uint32_t ep_reply_burst = 64;
  uint64_t ep_reply_interval_ns = 10'000;
  uint64_t ep_reply_stranger_interval_ns = 100'000;
  // Drop events (EventKind::kDrop) are sampled so that a flood of bad frames cannot fill the
  // disk through the event log: `drop_event_burst` at once, then one per
  // `drop_event_interval_ns`; the next event emitted carries `suppressed` = how many were left
  // out since the previous one (all are counted in EndpointStats::drop_events_suppressed).
  // 0 = every drop is logged.
  uint32_t drop_event_burst = 100;
  uint64_t drop_event_interval_ns = 10'000'000;
  bool use_trimming = true;  // data DSCP TRIMMABLE(_RETX) when true, NO_TRIM otherwise
};

// ---------------------------------------------------------------------------------------------
// Controller objects: EV profiles and CC profiles (mrc_ctl.h shapes)
// ---------------------------------------------------------------------------------------------
enum class EvMode : uint8_t { kAuto, kExplicit, kGenerated };
enum class EvState : uint8_t { kGood, kSkip, kAssumedBad, kDenied };
std::string_view ev_state_name(EvState s);

struct EvEntry {
  wire::EvBytes ev{};  // compact EV (mrc_ctl_ev_t)
  uint8_t port = 0;    // 1-based NIC port = plane
};

// ev_min_active = every EV of the QP: no demotion is ever accepted (the reuse-retired-ev mutant).
inline constexpr uint32_t kEvMinActiveAll = 0xFFFFFFFF;

struct EvProfile {
  EvMode mode = EvMode::kGenerated;
  std::vector<uint32_t> format_widths;  // the EV format profile's field widths (bits)
  std::vector<wire::EvField> fields;    // the EV profile's fields
  uint32_t ev_count = 0;                // GEN / AUTO: EVs generated per QP
  // EVs in the rotation; the others form the backup set that replaces retired EVs of the same
  // plane. 0 = every EV is active (no backup set).
  uint32_t active_count = 0;
  uint32_t ev_min_active = 1;         // floor on GOOD EVs; demotion below it is refused
  std::vector<EvEntry> explicit_evs;  // EXP mode: every EV, in QUERY_EV_ARRAY order
};

// NSCC parameters, the fields of mrc_ctl_cc_nscc_cfg (units in the comments).
struct NsccConfig {
  uint8_t disable_qa = 0;                     // non-zero disables quick adapt
  uint32_t adjust_bytes_threshold = 32768;    // bytes
  uint32_t adjust_period_threshold = 16'000;  // ns
  uint32_t base_rtt = 16'000;                 // ns, unloaded RTT of an MTU packet
  float eta = 600.0f;                         // bytes added once per adjust period
  float fi = 1.0f;                            // fair increase: MTUs per RTT
  float fi_scale = 0.5f;                      // fast increase: cwnd += newly_acked * fi_scale
  float gamma = 0.8f;                         // multiplicative-decrease gain
  float max_md_jump = 0.5f;                   // floor of the MD factor per decrease
  uint32_t max_cwnd = 1'200'000;              // bytes
  uint8_t qa_gate = 3;                        // quick adapt only if achieved < max_cwnd >> qa_gate
  uint32_t qa_threshold = 48'000;             // ns of queueing delay that triggers quick adapt
  uint32_t target_delay = 12'000;             // ns of queueing delay
};

inline constexpr std::string_view kCcNscc = "uet-1.0-nscc";
inline constexpr std::string_view kCcNone = "none";

struct CcProfile {
  std::string algorithm = std::string(kCcNscc);  // "uet-1.0-nscc", "none", or a registered one
  NsccConfig nscc;
};

// What the QP tells its congestion controller about one SACK.
struct CcAckSample {
  uint64_t now_ns = 0;
  uint64_t newly_acked_bytes = 0;  // nominal bytes newly covered by cack / bitmap
  std::optional<uint64_t> rtt_ns;  // from ts_echo (service time already removed when SVA)
  bool ecn = false;                // SACK M = SKIP_ONCE (CE on the forward path)
  uint8_t rcv_cwnd_pen = 0;        // receiver penalty, 0..127
  bool restore_cwnd = false;       // CC_STATE.RC
  uint64_t bytes_in_flight = 0;
};

// Pluggable congestion control: one instance per QP (the QPCC).
class CongestionControl {
 public:
  virtual ~CongestionControl() = default;
  virtual std::string_view name() const = 0;
  virtual uint64_t cwnd_bytes() const = 0;  // UINT64_MAX: no window
  virtual void on_ack(const CcAckSample& sample) = 0;
  virtual void on_trim(uint64_t now_ns, uint32_t nominal_bytes, bool last_hop) = 0;
  virtual void on_loss(uint64_t now_ns, uint32_t nominal_bytes, bool by_timeout) = 0;
};

using CcFactory =
    std::function<std::unique_ptr<CongestionControl>(const CcProfile&, uint32_t mtu_bytes)>;
std::unique_ptr<CongestionControl> make_nscc(const NsccConfig& cfg, uint32_t mtu_bytes);
std::unique_ptr<CongestionControl> make_no_cc();

// ---------------------------------------------------------------------------------------------
// Verbs-like objects
// ---------------------------------------------------------------------------------------------
enum AccessFlags : uint32_t {  // ibv_access_flags values
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
};

struct MemoryRegion {
  uint64_t addr = 0;  // the host address is the RDMA virtual address
  uint64_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint32_t access = 0;
  // Protection domain: a QP reaches only MRs of its own PD (both 0 when PDs are not used).
  uint32_t pd = 0;
};

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kErr };
std::string_view qp_state_name(QpState s);

struct QpCap {
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
};

struct QpInitAttr {
  uint64_t qp_context = 0;
  uint32_t send_cq = 0;
  uint32_t recv_cq = 0;
  QpCap cap;
  bool sq_sig_all = false;
  uint32_t protocol_version = 0;  // one MRC_PROTOCOL_VERSION bit or 0 (provider default)
  uint32_t pd = 0;                // protection domain of the QP (MemoryRegion::pd)
};

struct QpHint {  // advisory sizing (mrc_create_qp_hint)
  uint32_t num_qps_per_peer = 0;
  uint32_t num_send_peers = 0;
  uint32_t num_remote_recv_peers = 0;
};

// Verbs attribute mask (ibv_qp_attr_mask values). Attributes the MRC API declares unsupported
// are listed so that using them fails with a message naming the MRC replacement.
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,  // unsupported
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,    // unsupported: MRC_QP_TIMEOUT
  kQpRetryCnt = 1u << 10,  // unsupported: MRC_QP_RETRY_CNT
  kQpRnrRetry = 1u << 11,  // unsupported
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,  // unsupported
  kQpAltPath = 1u << 14,        // unsupported
  kQpMinRnrTimer = 1u << 15,    // unsupported
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,  // unsupported
  kQpPathMigState = 1u << 18,     // unsupported
  kQpDestQpn = 1u << 20,
};

// MRC attribute mask (mrc_qp_attr_mask values).
enum MrcQpAttrMask : uint32_t {
  kMrcMaxWimm = 1u << 0,
  kMrcMaxWimmDest = 1u << 1,
  kMrcMpr = 1u << 2,
  kMrcMprDest = 1u << 3,
  kMrcTimeout = 1u << 4,
  kMrcEvProfileId = 1u << 5,
  kMrcCcProfileId = 1u << 6,
  kMrcHint = 1u << 7,
  kMrcRetryCnt = 1u << 8,
  kMrcCap = 1u << 9,
  kMrcVendorCfg = 1u << 31,
};

enum MrcQpCap : uint32_t {
  kCapTrimNackDestUnsupported = 1u << 0,  // the peer responder cannot NACK trims
  kCapDynamicMpr = 1u << 1,               // dynamic MPR (both peers agreed out of band)
  kCapSvcTimeDestUnsupported = 1u << 2,   // the peer responder does not report service time
};

struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  uint32_t qp_access_flags = 0;
  uint16_t pkey_index = 0;
  wire::Ipv6Addr dgid{};  // address vector: the peer node GID
  uint32_t dest_qp_num = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t path_mtu = 4096;  // payload bytes: 256, 512, 1024, 2048 or 4096
};

struct MrcQpAttr {
  uint16_t max_wimm = 0;       // in-flight WRITE_WITH_IMM as requester
  uint16_t max_wimm_dest = 0;  // in-flight WRITE_WITH_IMM as responder
  uint8_t mpr = 0;             // requester MPR, 128-PSN units
  uint8_t mpr_dest = 0;        // responder MPR, 128-PSN units
  uint8_t timeout = 0;         // local ACK timeout 1.024 us * 2^timeout
  struct Retry {
    uint8_t linear_cnt = 0;  // fixed-interval retries, <= 7
    uint8_t exp_cnt = 0;     // exponential-backoff retries, <= 25 (25 = unlimited)
  } retry;
  uint64_t ev_profile_id = 0;
  uint64_t cc_profile_id = 0;
  std::optional<QpHint> hint;  // MRC_QP_HINT may be given as "no hint"
  uint32_t cap = 0;            // MrcQpCap bits
};

enum class WrOpcode : uint8_t {
  kRdmaWrite,
  kRdmaWriteWithImm,
  kSend,
  kSendWithImm,
  kRdmaRead,
  kAtomicCmpAndSwp,
  kAtomicFetchAndAdd,
  kLocalInv,
  kBindMw,
  kSendWithInv,
};
std::string_view wr_opcode_name(WrOpcode op);

enum SendFlags : uint32_t {  // ibv_send_flags values
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
};

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kRdmaWrite;
  std::span<const Sge> sg_list;
  uint32_t send_flags = 0;
  uint32_t imm_data = 0;  // host order; carried big-endian in ImmDt
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
};

struct RecvWr {
  uint64_t wr_id = 0;
  std::span<const Sge> sg_list;  // zero SGEs allowed (WRITE_WITH_IMM consumes only the WQE)
};

enum class WcStatus : uint8_t {
  kSuccess,
  kLocLenErr,
  kLocQpOpErr,
  kLocProtErr,
  kWrFlushErr,
  kRemInvReqErr,
  kRemAccessErr,
  kRemOpErr,
  kRetryExcErr,
  kFatalErr,
  kGeneralErr,
};
std::string_view wc_status_name(WcStatus s);

enum class WcOpcode : uint8_t { kRdmaWrite, kRecvRdmaWithImm };

struct Wc {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kRdmaWrite;
  uint32_t qp_num = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;
  bool with_imm = false;
  uint32_t vendor_err = 0;
};

enum class AsyncEventType : uint8_t {
  kQpFatal,      // the QP entered ERR for a reason not tied to one work request
  kQpReqErr,     // responder saw an invalid request (WIMM limit, bad opcode sequence)
  kQpAccessErr,  // responder saw an R_Key / VA / access violation
  kCqErr,        // completion queue overrun
  kPortActive,
  kPortErr,
};
std::string_view async_event_name(AsyncEventType t);

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kQpFatal;
  uint32_t qp_num = 0;
  uint32_t cq = 0;
  uint8_t port = 0;
};

// ---------------------------------------------------------------------------------------------
// Endpoint operations (connectionless, BTH.DestQP = 2)
// ---------------------------------------------------------------------------------------------
struct EpRequest {
  uint16_t req_id = 0;  // unique among this node's outstanding requests
  wire::Ipv6Addr dgid{};
  wire::EndpointOp op = wire::EndpointOp::kEvProbe;
  uint32_t wev = 0;               // wire EV to stamp
  uint8_t port = 1;               // egress port (plane)
  wire::EvBytes srv6_ev{};        // SRv6 mode: the expanded EV (outer DA, SRH segment)
  uint32_t port_status_mask = 0;  // PORT_STATUS_UPDATE: bit N = local port N usable
  uint8_t dscp = 0;               // req_tc
  uint64_t timeout_ns = 2'000'000;
};

struct EpResponse {
  uint16_t req_id = 0;
  wire::EndpointOp op = wire::EndpointOp::kEvProbe;
  bool timed_out = false;
  uint8_t status = 0;
  uint8_t port = 0;     // port the response arrived on
  uint64_t rtt_ns = 0;  // arrival - send - responder service time
  bool adj_svc_time = false;
  uint32_t entropy = 0;           // the WEV the request arrived on
  uint32_t port_status_mask = 0;  // the responder's ports (bit N = port N)
  wire::Ipv6Addr from{};
};

// ---------------------------------------------------------------------------------------------
// Event log: structured events for debugging, written as JSON lines by the runtime.
// ---------------------------------------------------------------------------------------------
enum class EventKind : uint8_t {
  kQpState,     // from, to, reason
  kEvState,     // wev, port, from, to, reason
  kCwnd,        // cwnd, bytes_in_flight, reason
  kRetransmit,  // psn, cause, attempt, old_wev, wev
  kCompletion,  // wr_id, status, opcode, byte_len
  kAsync,       // type
  kDrop,        // reason (decode error, bad ICRC, unknown QP ...)
  kNackRx,      // psn, code, wev
  kProbe,       // wev, probe_id, result
  kPortStatus,  // peer / local mask
  kEpResponse,  // req_id, rtt_ns, status
  kMpr,         // mpr_psns
  kReverseEv,   // port, wev
};
std::string_view event_kind_name(EventKind k);

inline constexpr size_t kMaxEventFields = 8;

struct EventField {
  enum class Type : uint8_t { kUint, kInt, kStr, kDouble } type = Type::kUint;
  std::string_view key;  // static string
  uint64_t u = 0;
  int64_t i = 0;
  double d = 0;
  std::string_view s;  // static string (state names, reasons)
};

struct Event {
  EventKind kind = EventKind::kDrop;
  uint64_t t_ns = 0;
  uint32_t qpn = 0;
  uint8_t nfields = 0;
  std::array<EventField, kMaxEventFields> fields{};

  Event& u(std::string_view key, uint64_t v);
  Event& i(std::string_view key, int64_t v);
  Event& d(std::string_view key, double v);
  Event& s(std::string_view key, std::string_view v);
  const EventField* find(std::string_view key) const;
};

using EventSink = std::function<void(const Event&)>;
// {"t_ns":..,"node":"..","kind":"ev_state","qpn":..,<fields>}\n
void append_event_json(std::string& out, const Event& e, std::string_view node);

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------
struct EndpointStats {
  uint64_t rx_frames = 0;
  uint64_t rx_decode_errors = 0;
  uint64_t rx_bad_icrc = 0;
  uint64_t rx_not_roce = 0;
  uint64_t rx_not_for_us = 0;
  uint64_t rx_unknown_qp = 0;
  uint64_t rx_wrong_state = 0;
  uint64_t rx_unexpected = 0;  // opcodes the engine does not take (RC, CNP, unknown)
  uint64_t rx_bad_port = 0;
  uint64_t tx_frames = 0;
  uint64_t ctrl_queue_drops = 0;
  uint64_t ep_requests_rx = 0;
  uint64_t ep_responses_rx = 0;
  // Port status (PORT_STATUS_UPDATE, endpoint response or SACK PSV) that said the plane it
  // arrived on is down: contradicted by its own arrival, so not applied.
  uint64_t port_status_rejected = 0;
  // Port status from a node this endpoint has no QP with: not stored, so that spoofed sources
  // cannot grow per-peer state (a peer's entry goes with its last QP).
  uint64_t port_status_unknown_peer = 0;
  uint64_t drop_events_suppressed = 0;  // drop events left out of the event log (sampling)
  uint64_t ep_responses_limited = 0;    // endpoint requests left unanswered (token bucket)
  // A gauge, not a counter: entries of per-peer state (port masks, reply buckets) held now, as
  // of the stats() call. Bounded by the peers this endpoint has QPs with, whatever arrives.
  uint64_t peer_state_entries = 0;
};

struct QpStats {
  // requester
  uint64_t data_packets_sent = 0;
  uint64_t data_bytes_sent = 0;  // payload bytes of first transmissions
  uint64_t retransmits = 0;
  uint64_t rtx_timeout = 0;
  uint64_t rtx_nack = 0;
  uint64_t rtx_sack_gap = 0;
  uint64_t rtx_ack_wait = 0;
  // First timeouts held because the peer had been silent since the packet left (episodes;
  // EndpointConfig::silent_peer_grace_ns).
  uint64_t silent_peer_holds = 0;
  uint64_t sacks_rx = 0;
  uint64_t nacks_rx = 0;
  uint64_t acks_rx = 0;
  uint64_t probes_sent = 0;
  uint64_t probe_sacks_rx = 0;
  uint64_t stale_rx = 0;  // SACK/NACK/ACK that referred to PSNs never sent
  // Of stale_rx: NACK UNEXP_EVENT and AETH NAKs that matched no outstanding transmission or work
  // request, so did not move the QP to ERR (a spoofed or very late fatal report).
  uint64_t fatal_rejected = 0;
  uint64_t cwnd_bytes = 0;
  uint64_t bytes_in_flight = 0;
  uint32_t mpr_eff_psns = 0;
  uint32_t cack_seen = 0;
  uint64_t last_rtt_ns = 0;
  uint32_t ev_good = 0, ev_skip = 0, ev_assumed_bad = 0, ev_denied = 0;
  uint64_t ev_demotions_refused = 0;  // ev_min_active floor held
  // responder
  uint64_t data_packets_rx = 0;
  uint64_t data_bytes_placed = 0;
  uint64_t duplicates_rx = 0;
  uint64_t trimmed_rx = 0;
  uint64_t ce_rx = 0;
  uint64_t out_of_window_rx = 0;
  uint64_t remote_access_errors = 0;
  uint64_t invalid_requests = 0;
  uint64_t sacks_sent = 0;
  uint64_t nacks_sent = 0;
  uint64_t acks_sent = 0;
  uint64_t error_naks_sent = 0;     // NAKs a QP in ERR sent to its peer's data and probes
  uint64_t error_naks_limited = 0;  // ... and those the token bucket held back
  uint64_t replies_limited = 0;     // duplicate / out-of-window / probe replies held back
  uint32_t rcv_cack = 0;
  uint32_t ooo_count = 0;
  uint64_t rcvd_bytes = 0;  // nominal bytes of distinct data packets received
};

// What one QP refuses without looking further, for a receive filter in front of the engine
// (the runtime's kernel filter): a data packet from `peer_gid` to `qpn` at a PSN <= rcv_cack is
// a duplicate, one more than rcv_window PSNs beyond rcv_cack is out of the window (the engine
// would only answer it from the QP's reply bucket); a NACK at a PSN <= snd_cack (the
// requester's cumulative ACK) or more than snd_window beyond it names nothing outstanding (the
// engine drops it, Qp::on_nack). snd_window 0: the requester is not sending (not RTS).
struct RxGate {
  uint32_t qpn = 0;
  wire::Ipv6Addr peer_gid{};
  uint32_t rcv_cack = 0;
  uint32_t rcv_window = 0;
  uint32_t snd_cack = 0;
  uint32_t snd_window = 0;
  bool operator==(const RxGate&) const = default;
};

struct EvInfo {
  uint32_t wev = 0;
  uint8_t port = 0;
  EvState state = EvState::kGood;
  bool active = false;  // in the rotation (else backup or retired)
  uint64_t packets_sent = 0;
};

// ---------------------------------------------------------------------------------------------
// Endpoint
// ---------------------------------------------------------------------------------------------
struct TxPacket {
  std::vector<std::byte> frame;  // full Ethernet frame; reuse the object to avoid allocation
  uint8_t port = 0;              // 1-based NIC port = plane
};

class Endpoint {
 public:
  // Throws std::invalid_argument naming the bad field when the configuration is invalid.
  explicit Endpoint(const EndpointConfig& cfg);
  ~Endpoint();
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;

  // ---- sans-I/O
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns);
  void on_timer(uint64_t now_ns);
  bool poll_tx(uint64_t now_ns, TxPacket& out);  // false when nothing to send now
  uint64_t next_deadline_ns() const;             // UINT64_MAX when idle
  // Whether a QP has data or resends that poll_tx holds back for an acknowledgement (window,
  // MPR, WIMM): such a sender's next packets wait on the frames it receives, so a driver should
  // read them as they come rather than let them gather (the runtime's receive coalescing).
  bool tx_waiting() const;
  // A caller that drains a receive ring hands the engine its frames one at a time, but all of
  // them had arrived before the first is handled. Between these two calls a SACK does not judge
  // the PSNs it leaves unacknowledged: a frame later in the batch (the rest of the ring, another
  // port's ring) may acknowledge them, and a loss decided before it retires a working EV and
  // resends nothing (the filling SACK cancels the resend before the transmit; test
  // Recovery.SacksReadInOneBatch...). end_rx_batch() takes the decisions the batch
  // deferred, at `now_ns`, on everything it held. Without these calls every SACK is judged as
  // it comes (the simulator hands frames over one arrival at a time).
  void begin_rx_batch();
  void end_rx_batch(uint64_t now_ns);

  // ---- controller (mrc_ctl-like)
  Status add_ev_profile(uint64_t id, const EvProfile& profile);
  Status add_cc_profile(uint64_t id, const CcProfile& profile);
  Status register_cc_algorithm(std::string_view name, CcFactory factory);
  // Sets an EV's state on every QP that uses the profile (DENIED <-> GOOD is the controller's).
  Status modify_ev_state(uint64_t ev_profile_id, uint32_t wev, EvState state);
  // Local port up/down: stops using the plane and tells every peer node (PORT_STATUS_UPDATE).
  Status set_port_state(uint8_t port, bool up, uint64_t now_ns);
  uint32_t port_status_mask() const;  // bit N = local port N usable

  // ---- verbs-like API
  Status create_cq(uint32_t cqe, uint32_t& cq);
  int poll_cq(uint32_t cq, std::span<Wc> out);  // completions written, or -errno
  Status create_qp(const QpInitAttr& init, uint32_t& qpn);
  Status modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t attr_mask, const MrcQpAttr& mrc,
                   uint32_t mrc_mask);
  Status query_qp(uint32_t qpn, QpAttr& attr, MrcQpAttr& mrc) const;
  Status destroy_qp(uint32_t qpn);
  Status register_mr(void* addr, size_t length, uint32_t access, MemoryRegion& out,
                     uint32_t pd = 0);
  // The same with keys another component assigned (an rdma-core device's ibv_reg_mr, when the
  // provider attaches to rxe): EEXIST when either key is in use. rkey 0 = no remote key (rxe
  // gives 0 to MRs without remote access): such an MR is only reachable by its lkey.
  Status register_mr_with_keys(void* addr, size_t length, uint32_t access, uint32_t lkey,
                               uint32_t rkey, MemoryRegion& out, uint32_t pd = 0);
  Status deregister_mr(uint32_t lkey);
  Status post_send(uint32_t qpn, const SendWr& wr);
  // Convenience: RDMA WRITE (imm unset) or WRITE_WITH_IMM.
  Status post_write(uint32_t qpn, uint64_t wr_id, std::span<const Sge> sg_list,
                    uint64_t remote_addr, uint32_t rkey, std::optional<uint32_t> imm = {},
                    bool signaled = true);
  Status post_recv(uint32_t qpn, const RecvWr& wr);
  bool get_async_event(AsyncEvent& out);
  uint32_t random_psn();  // from the endpoint's PRNG, like lrand48() & 0xFFFFFF

  // Dynamic MPR: the responder's current window (128-PSN units) advertised in SACKs.
  Status set_responder_mpr(uint32_t qpn, uint8_t mpr_units);
  // Receiver penalty advertised in SACK CC_STATE (0..127).
  Status set_rcv_cwnd_pen(uint32_t qpn, uint8_t pen);

  // ---- endpoint operations
  Status ep_post_request(const EpRequest& req, uint64_t now_ns);
  bool ep_poll_response(EpResponse& out);

  // ---- observation
  void set_event_sink(EventSink sink);
  const EndpointStats& stats() const;
  Status qp_stats(uint32_t qpn, QpStats& out) const;
  Status ev_info(uint32_t qpn, std::vector<EvInfo>& out) const;
  const EndpointConfig& config() const;
  // One RxGate per QP whose responder takes data (RTR, RTS), in QPN order: O(QPs), so a caller
  // asks again only when rx_gate_generation() moved, which it does whenever what rx_gates()
  // returns may have changed (and sometimes when it did not).
  void rx_gates(std::vector<RxGate>& out) const;
  uint64_t rx_gate_generation() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mrc::engine
