// Endpoint operations (MRP0 C.8): EV probe and port-status update requests / responses on
// QPN 2, RTT with service-time adjustment, port-status propagation, reverse-EV probes.
#include <algorithm>
#include <cerrno>
#include <set>

#include "reference-impl/engine/endpoint_impl.h"

namespace mrc::engine {
namespace {
constexpr uint8_t kEpStatusOk = 0;
constexpr uint8_t kEpStatusUnknownOp = 1;  // MRP0 gap: only 0 = OK is named
}  // namespace

bool Endpoint::Impl::alloc_req_id(uint16_t& out) {
  for (uint32_t tries = 0; tries < 0x10000; ++tries) {
    const uint16_t id = next_req_id++;
    if (!ep_pending.count(id)) {
      out = id;
      return true;
    }
  }
  return false;
}

Status Endpoint::Impl::queue_ep_request(const EpRequest& r, uint32_t owner_qpn, int ev_idx,
                                        bool report, uint64_t now) {
  (void)now;
  if (r.port == 0 || r.port > nports)
    return Status::Error(EINVAL, "endpoint request: port " + std::to_string(r.port) +
                                     " is not 1.." + std::to_string(nports));
  if (r.op != wire::EndpointOp::kEvProbe && r.op != wire::EndpointOp::kPortStatusUpdate)
    return Status::Error(EINVAL, "endpoint request: unknown op");
  if (r.dgid == wire::Ipv6Addr{}) return Status::Error(EINVAL, "endpoint request: dgid is zero");
  if (r.dscp > 63) return Status::Error(EINVAL, "endpoint request: dscp > 63");
  if (ep_pending.count(r.req_id))
    return Status::Error(
        EBUSY, "endpoint request: req_id " + std::to_string(r.req_id) + " is still outstanding");
  PendingEpRequest p;
  p.req = r;
  p.owner_qpn = owner_qpn;
  p.ev_idx = ev_idx;
  p.report = report;
  ep_pending.emplace(r.req_id, p);
  ep_tx.push_back(r.req_id);
  return Status::Ok();
}

bool Endpoint::Impl::build_ep_request(uint16_t req_id, uint64_t now, TxPacket& out) {
  auto it = ep_pending.find(req_id);
  if (it == ep_pending.end() || it->second.sent) return false;
  PendingEpRequest& p = it->second;
  const EpRequest& r = p.req;
  if (((local_port_mask >> r.port) & 1u) == 0) {
    // Port down: the request cannot leave; report it as timed out at once.
    p.sent = true;
    p.deadline_ns = now;
    return false;
  }
  Route route;
  route.port = r.port;
  route.wev = r.wev;
  if (cfg.ev_format == wire::EvFormat::kSrv6 && r.srv6_ev != wire::EvBytes{}) {
    route.srv6 = &r.srv6_ev;
    route.srh = std::any_of(r.srv6_ev.begin() + 16, r.srv6_ev.end(), [](uint8_t b) { return b; });
  }
  const uint8_t opcode =
      prof->opcode_of(wire::PacketKind::kMrcEndpointRequest, wire::MessagePosition::kNone, false);
  wire::FrameSpec& s = begin_frame(route, r.dgid, r.dscp, 0, opcode);
  s.bth.dest_qp = wire::kEndpointOpQpn;
  s.bth.psn = r.req_id;  // 0x00 || req_id
  s.bth.ack_req = false;
  s.erth.op = static_cast<uint8_t>(r.op);
  s.erth.port_status_mask =
      r.op == wire::EndpointOp::kPortStatusUpdate ? (r.port_status_mask & ~1u) : 0;
  s.erth.ts16 = ts16(now);
  s.erth.ftype = 1;
  if (!finish_frame(out, r.port)) return false;
  p.sent = true;
  p.sent_ns = now;
  p.deadline_ns = now + std::max<uint64_t>(r.timeout_ns, 1);
  return true;
}

bool Endpoint::Impl::ep_reply_allowed(const wire::Ipv6Addr& src, uint64_t now) {
  TokenBucket* b = &ep_reply_stranger;
  if (auto it = ep_reply_peer.find(src); it != ep_reply_peer.end()) {
    b = &it->second;
  } else if (has_qp_to(src)) {
    b = &ep_reply_peer[src];
    b->configure(cfg.ep_reply_burst, cfg.ep_reply_interval_ns);
  }
  if (b->take(now)) return true;
  ++stats.ep_responses_limited;
  return false;
}

void Endpoint::Impl::on_ep_request(const wire::DecodedFrame& f, uint8_t port, uint64_t now,
                                   uint32_t wev) {
  ++stats.ep_requests_rx;
  const wire::Ipv6Addr src = frame_src(f);
  CtrlPkt c;
  c.kind = CtrlKind::kEpResponse;
  c.port = port;
  c.arrival_ns = now;
  c.psn = f.bth.psn & 0xFFFF;
  c.wev = wev;
  c.code = f.erth.op;
  c.has_ts = true;
  c.ts16 = f.erth.ts16;
  c.peer = src;
  c.status = kEpStatusOk;
  if (f.erth.op == static_cast<uint8_t>(wire::EndpointOp::kPortStatusUpdate)) {
    // The sender's planes: stop (or resume) using them toward that node on every QP.
    set_peer_ports(src, f.erth.port_status_mask, port, "port_status_update");
  } else if (f.erth.op != static_cast<uint8_t>(wire::EndpointOp::kEvProbe)) {
    c.status = kEpStatusUnknownOp;
  }
  // One response per request (MRP0), as far as the source's token bucket allows.
  if (ep_reply_allowed(src, now)) enqueue_ctrl(c);
}

Route Endpoint::Impl::route_to_peer(const wire::Ipv6Addr& peer, uint8_t port,
                                    uint32_t fallback_wev) const {
  for (const auto& [qpn, qp] : qps) {
    if (!qp->has_ev_set() || qp->peer_gid() != peer) continue;
    if (qp->state() != QpState::kRtr && qp->state() != QpState::kRts) continue;
    const EvRecord* ev = qp->control_ev(port);
    if (ev == nullptr) continue;
    return Route{port, ev->wev, &ev->expanded, qp->evs().srh()};
  }
  return Route{port, fallback_wev, nullptr, false};
}

bool Endpoint::Impl::build_ep_response(const CtrlPkt& c, uint64_t now, TxPacket& out) {
  const Route route = route_to_peer(c.peer, c.port, c.wev);
  const uint8_t opcode =
      prof->opcode_of(wire::PacketKind::kMrcEndpointResponse, wire::MessagePosition::kNone, false);
  wire::FrameSpec& s = begin_frame(route, c.peer, prof->dscp().control, 0, opcode);
  s.bth.dest_qp = wire::kEndpointOpQpn;
  s.bth.psn = c.psn;
  // In 128 ns ticks, saturated at what the 16-bit field holds (8.4 ms): ts_echo must carry the
  // same value as svc_time, or the requester's RTT (ts_echo - ts16 - svc_time) is off.
  const uint64_t svc_ticks =
      std::min<uint64_t>(now > c.arrival_ns ? (now - c.arrival_ns) >> 7 : 0, 0xFFFF);
  const bool sva = cfg.caps.svc_time && prof->params().sva;
  s.eeth.op = c.code;
  s.eeth.sva = sva;
  s.eeth.status = c.status;
  s.eeth.entropy = c.wev;
  s.eeth.port_status_mask = local_port_mask;
  s.eeth.ts_echo = static_cast<uint16_t>(c.ts16 + (sva ? svc_ticks : 0));
  s.eeth.svc_time = sva ? static_cast<uint16_t>(svc_ticks) : 0;
  return finish_frame(out, c.port);
}

void Endpoint::Impl::on_ep_response(const wire::DecodedFrame& f, uint8_t port, uint64_t now) {
  ++stats.ep_responses_rx;
  const auto req_id = static_cast<uint16_t>(f.bth.psn & 0xFFFF);
  auto it = ep_pending.find(req_id);
  if (it == ep_pending.end() || !it->second.sent || (f.bth.psn >> 16) != 0) {
    ++stats.rx_unexpected;  // unsolicited, duplicate, or already timed out
    return;
  }
  PendingEpRequest p = it->second;
  const wire::Ipv6Addr src = frame_src(f);
  if (src != p.req.dgid || f.eeth.op != static_cast<uint8_t>(p.req.op)) {
    ++stats.rx_unexpected;
    return;
  }
  ep_pending.erase(it);
  const uint64_t svc_ns = uint64_t{f.eeth.svc_time} << 7;
  const uint64_t elapsed = now - p.sent_ns;
  EpResponse r;
  r.req_id = req_id;
  r.op = p.req.op;
  r.status = f.eeth.status;
  r.port = port;
  r.rtt_ns = elapsed > svc_ns ? elapsed - svc_ns : 0;
  r.adj_svc_time = f.eeth.sva || f.eeth.svc_time != 0;
  r.entropy = f.eeth.entropy;
  r.port_status_mask = f.eeth.port_status_mask;
  r.from = src;
  set_peer_ports(src, f.eeth.port_status_mask, port, "ep_response");
  if (p.owner_qpn != 0) {
    if (Qp* qp = find_qp(p.owner_qpn)) qp->on_ep_probe_response(p.req.port, p.ev_idx, r.rtt_ns);
  }
  if (logging()) {
    Event e = event(EventKind::kEpResponse, p.owner_qpn);
    e.u("req_id", req_id)
        .u("rtt_ns", r.rtt_ns)
        .u("status", r.status)
        .u("port", port)
        .u("entropy", r.entropy);
    emit(e);
  }
  if (p.report) ep_responses.push_back(r);
}

void Endpoint::Impl::expire_ep(uint64_t now) {
  for (auto it = ep_pending.begin(); it != ep_pending.end();) {
    const PendingEpRequest& p = it->second;
    if (!p.sent || p.deadline_ns > now) {
      ++it;
      continue;
    }
    if (p.report) {
      EpResponse r;
      r.req_id = p.req.req_id;
      r.op = p.req.op;
      r.timed_out = true;
      r.from = p.req.dgid;
      ep_responses.push_back(r);
    }
    if (logging()) {
      Event e = event(EventKind::kEpResponse, p.owner_qpn);
      e.u("req_id", p.req.req_id).s("result", "timeout");
      emit(e);
    }
    it = ep_pending.erase(it);
  }
}

void Endpoint::Impl::send_port_status_updates(uint64_t now) {
  std::set<wire::Ipv6Addr> peers;
  for (const auto& [qpn, qp] : qps) {
    if (qp->state() == QpState::kRtr || qp->state() == QpState::kRts) peers.insert(qp->peer_gid());
  }
  for (const auto& peer : peers) {
    for (uint8_t p = 1; p <= nports; ++p) {
      if (((local_port_mask >> p) & 1u) == 0) continue;
      uint16_t id;
      if (!alloc_req_id(id)) return;
      const Route route = route_to_peer(peer, p, 0);
      EpRequest r;
      r.req_id = id;
      r.dgid = peer;
      r.op = wire::EndpointOp::kPortStatusUpdate;
      r.wev = route.wev;
      r.port = p;
      if (route.srv6 != nullptr) r.srv6_ev = *route.srv6;
      r.port_status_mask = local_port_mask;
      r.dscp = prof->dscp().control;
      r.timeout_ns = cfg.ep_request_timeout_ns;
      queue_ep_request(r, 0, -1, false, now);
    }
  }
}

void Endpoint::Impl::send_reverse_ev_probe(Qp& qp, uint8_t port, int ev_idx, uint64_t now) {
  uint16_t id;
  if (!alloc_req_id(id)) return;
  const EvRecord& ev = qp.evs().at(static_cast<uint32_t>(ev_idx));
  EpRequest r;
  r.req_id = id;
  r.dgid = qp.peer_gid();
  r.op = wire::EndpointOp::kEvProbe;
  r.wev = ev.wev;
  r.port = port;
  r.srv6_ev = ev.expanded;
  r.dscp = prof->dscp().control;
  r.timeout_ns = cfg.ep_request_timeout_ns;
  queue_ep_request(r, qp.qpn(), ev_idx, false, now);
}

}  // namespace mrc::engine
