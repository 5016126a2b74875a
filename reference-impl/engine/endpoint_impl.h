// Endpoint::Impl: node-wide state shared by the QPs (profiles, MRs, CQs, port state, the control
// queue, endpoint operations, frame building). Private header.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "reference-impl/engine/qp.h"
#include "reference-impl/engine/rng.h"

namespace mrc::engine {

struct Cq {
  uint32_t capacity = 0;
  std::deque<Wc> q;
  bool overrun = false;
};

struct PendingEpRequest {
  EpRequest req;
  bool sent = false;
  uint64_t sent_ns = 0;
  uint64_t deadline_ns = UINT64_MAX;
  uint32_t owner_qpn = 0;  // reverse-EV maintenance of that QP; 0 for user / port status
  int ev_idx = -1;
  bool report = true;  // deliver the response through ep_poll_response
};

// How one frame is routed: egress port and the EV stamped in its headers.
struct Route {
  uint8_t port = 1;
  uint32_t wev = 0;
  const wire::EvBytes* srv6 = nullptr;  // SRv6 mode: expanded EV (outer DA, SRH segment)
  bool srh = false;
};

struct Endpoint::Impl {
  explicit Impl(const EndpointConfig& c);

  EndpointConfig cfg;
  const wire::WireProfile* prof = nullptr;
  Rng rng;
  uint8_t nports = 0;
  bool ipv4 = false;
  wire::Ipv4Addr ip4{};
  uint64_t now_ns = 0;
  EndpointStats stats;

  std::map<uint64_t, EvProfile> ev_profiles;
  std::map<uint64_t, CcProfile> cc_profiles;
  std::map<std::string, CcFactory, std::less<>> cc_algos;
  std::vector<Cq> cqs;  // CQ id = index + 1
  std::map<uint32_t, std::unique_ptr<Qp>> qps;
  uint32_t next_qpn = 0x100;
  std::unordered_map<uint32_t, MemoryRegion> mr_by_lkey;
  std::unordered_map<uint32_t, uint32_t> lkey_of_rkey;

  uint32_t local_port_mask = 0;                       // bit N = local port N up
  std::map<wire::Ipv6Addr, uint32_t> peer_port_mask;  // bit N = peer port N usable

  std::deque<CtrlPkt> ctrl;
  std::deque<uint16_t> ep_tx;  // req_ids waiting to leave
  std::map<uint16_t, PendingEpRequest> ep_pending;
  std::deque<EpResponse> ep_responses;
  uint16_t next_req_id = 0x8000;  // internal requests; user req_ids are checked for collisions
  std::deque<AsyncEvent> async;
  EventSink sink;

  wire::FrameSpec spec;           // scratch frame under construction
  std::vector<std::byte> gather;  // scratch payload when a packet spans SGEs
  uint32_t rr_last = 0;

  // Between begin_rx_batch() and end_rx_batch(): the QPs whose SACK-gap scan waits for the end.
  bool rx_batch_open = false;
  // Bumped wherever an RxGate input changes (a QP's state, peer, windows, cumulative PSNs; a QP
  // destroyed): a receive filter republishes only then (Endpoint::rx_gate_generation).
  uint64_t rx_gate_gen = 0;
  std::vector<uint32_t> gap_scan_deferred;

  // ---- helpers (endpoint.cc)
  Event event(EventKind k, uint32_t qpn) const {
    Event e;
    e.kind = k;
    e.t_ns = now_ns;
    e.qpn = qpn;
    return e;
  }
  void emit(const Event& e) {
    if (!sink) return;
    if (e.kind == EventKind::kDrop) return emit_drop(e);
    sink(e);
  }
  void emit_drop(const Event& e);
  TokenBucket drop_events;  // sampling of kDrop events
  // Endpoint responses: one bucket per node this endpoint has a QP with (bounded by the QPs,
  // erased with the peer's last QP), one shared by every other source.
  std::map<wire::Ipv6Addr, TokenBucket> ep_reply_peer;
  TokenBucket ep_reply_stranger;
  bool ep_reply_allowed(const wire::Ipv6Addr& src, uint64_t now);
  uint64_t drops_suppressed = 0;  // since the last drop event emitted
  bool logging() const { return static_cast<bool>(sink); }
  void touch(uint64_t t) {
    if (t > now_ns) now_ns = t;
  }
  void push_wc(uint32_t cq, const Wc& wc);
  void push_async(const AsyncEvent& a);
  bool enqueue_ctrl(const CtrlPkt& c);
  uint32_t usable_ports(const wire::Ipv6Addr& peer) const;
  const MemoryRegion* mr_for_rkey(uint32_t rkey) const;
  const MemoryRegion* mr_for_lkey(uint32_t lkey) const;
  static uint16_t ts16(uint64_t t) { return static_cast<uint16_t>((t >> 7) & 0xFFFF); }
  Qp* find_qp(uint32_t qpn);
  // `arrival_port`: the plane the report came in on, which must be up in `mask` (0: local).
  void set_peer_ports(const wire::Ipv6Addr& peer, uint32_t mask, uint8_t arrival_port,
                      std::string_view source);
  bool has_qp_to(const wire::Ipv6Addr& peer) const;

  // ---- frames (frame.cc)
  wire::FrameSpec& begin_frame(const Route& r, const wire::Ipv6Addr& dst, uint8_t dscp, uint8_t ecn,
                               uint8_t opcode);
  bool finish_frame(TxPacket& out, uint8_t port);
  uint32_t wev_of_frame(const wire::DecodedFrame& f) const;
  bool frame_src_is(const wire::DecodedFrame& f, const wire::Ipv6Addr& gid) const;
  bool frame_for_us(const wire::DecodedFrame& f) const;
  wire::Ipv6Addr frame_src(const wire::DecodedFrame& f) const;

  // ---- endpoint operations (endpoint_ops.cc)
  void on_ep_request(const wire::DecodedFrame& f, uint8_t port, uint64_t now, uint32_t wev);
  void on_ep_response(const wire::DecodedFrame& f, uint8_t port, uint64_t now);
  bool build_ep_request(uint16_t req_id, uint64_t now, TxPacket& out);
  bool build_ep_response(const CtrlPkt& c, uint64_t now, TxPacket& out);
  Status queue_ep_request(const EpRequest& r, uint32_t owner_qpn, int ev_idx, bool report,
                          uint64_t now);
  bool alloc_req_id(uint16_t& out);
  void expire_ep(uint64_t now);
  void send_port_status_updates(uint64_t now);
  // Route toward a peer node on `port` using any QP's reverse EV; falls back to `fallback_wev`.
  Route route_to_peer(const wire::Ipv6Addr& peer, uint8_t port, uint32_t fallback_wev) const;
  void send_reverse_ev_probe(Qp& qp, uint8_t port, int ev_idx, uint64_t now);
};

}  // namespace mrc::engine
