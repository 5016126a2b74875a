// Responder: validation and out-of-order placement by RETH, the PSN bitmap over the window,
// duplicate detection, SACK / NACK / transport ACK generation, WRITE_WITH_IMM completions in
// message order, reverse-EV maintenance.
#include <algorithm>
#include <cstring>

#include "reference-impl/engine/endpoint_impl.h"

namespace mrc::engine {

using wire::psn_add;
using wire::psn_diff;
using wire::psn_le;
using wire::psn_lt;

namespace {
constexpr uint8_t kEcnCe = 3;
constexpr uint8_t kAethAck = 0x1F;  // ACK, credits invalid (MRC has no message credits)
constexpr uint8_t kAethNakInvalidRequest = 0x61;
constexpr uint8_t kAethNakRemoteAccess = 0x62;
constexpr uint8_t kAethNakRemoteOp = 0x63;
}  // namespace

bool Qp::rx_received(uint32_t psn) const {
  if (rx_.empty() || !psn_lt(rcv_cack_, psn) || psn_diff(psn, rcv_cack_) > rcv_window_)
    return false;
  return (rx_[psn & rx_mask_].flags & RxSlot::kReceived) != 0;
}

void Qp::queue_sack(uint8_t port, uint32_t psn, uint32_t wev, uint8_t m, bool has_ts, uint16_t ts16,
                    uint64_t now_ns, bool pr, uint16_t probe_id) {
  CtrlPkt c;
  c.kind = CtrlKind::kSack;
  c.port = port;
  c.qpn = qpn_;
  c.arrival_ns = now_ns;
  c.psn = psn;
  c.wev = wev;
  c.m = m;
  c.has_ts = has_ts;
  c.ts16 = ts16;
  c.pr = pr;
  c.probe_id = probe_id;
  ep_->enqueue_ctrl(c);
}

void Qp::queue_transport_ack(uint8_t port, uint32_t wev, uint64_t now_ns) {
  CtrlPkt c;
  c.kind = CtrlKind::kAck;
  c.port = port;
  c.qpn = qpn_;
  c.arrival_ns = now_ns;
  c.wev = wev;
  ep_->enqueue_ctrl(c);
}

void Qp::queue_nak(uint8_t port, uint32_t psn, uint32_t wev, uint8_t syndrome, uint64_t now_ns) {
  CtrlPkt c;
  c.kind = CtrlKind::kNak;
  c.port = port;
  c.qpn = qpn_;
  c.arrival_ns = now_ns;
  c.psn = psn;
  c.wev = wev;
  c.code = syndrome;
  ep_->enqueue_ctrl(c);
}

void Qp::queue_nack(uint8_t port, uint32_t psn, uint32_t wev, uint8_t code, uint8_t m, bool has_ts,
                    uint16_t ts16, uint64_t now_ns) {
  CtrlPkt c;
  c.kind = CtrlKind::kNack;
  c.port = port;
  c.qpn = qpn_;
  c.arrival_ns = now_ns;
  c.psn = psn;
  c.wev = wev;
  c.code = code;
  c.m = m;
  c.has_ts = has_ts;
  c.ts16 = ts16;
  ep_->enqueue_ctrl(c);
}

bool Qp::responder_fault(uint8_t port, uint32_t psn, uint32_t wev, uint8_t syndrome,
                         AsyncEventType async, std::string_view reason, uint64_t now_ns) {
  // Verbs RC: the responder NAKs the offending PSN and its QP goes to ERR; the requester's QP
  // follows when the NAK arrives.
  queue_nak(port, psn, wev, syndrome, now_ns);
  if (syndrome == kAethNakRemoteAccess)
    ++st_.remote_access_errors;
  else
    ++st_.invalid_requests;
  if (ep_->logging()) {
    Event e = ep_->event(EventKind::kDrop, qpn_);
    e.u("psn", psn).s("reason", reason).u("nak_syndrome", syndrome);
    ep_->emit(e);
  }
  to_error(reason, nullptr, WcStatus::kWrFlushErr, async);
  return false;
}

void Qp::on_data(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns, bool trimmed,
                 uint32_t wev) {
  if (state_ != QpState::kRtr && state_ != QpState::kRts) {
    ++ep_->stats.rx_wrong_state;
    return;
  }
  const bool ce = f.ecn() == kEcnCe;
  const uint8_t m = static_cast<uint8_t>(ce ? wire::SackM::kSkipOnce : wire::SackM::kNone);
  const uint32_t psn = f.bth.psn;
  const bool has_ts = f.has(wire::kHdrTseth);
  const uint16_t ts = f.tseth.ts16;
  if (ce) ++st_.ce_rx;
  ++data_rx_since_rev_probe_;
  if (rev_probe_due_ == UINT64_MAX) {
    const uint64_t iv = ep_->cfg.reverse_ev_probe_interval_ns != 0
                            ? ep_->cfg.reverse_ev_probe_interval_ns
                            : std::max<uint64_t>(srtt_ns_, 2'000);
    rev_probe_due_ = now_ns + iv;
  }

  if (trimmed) {
    // Payload cut by a switch: nothing to place; ask for a retransmission (MRP0 C.5).
    ++st_.trimmed_rx;
    if (ep_->cfg.caps.trim_nack) {
      const bool last_hop = f.dscp() == ep_->prof->dscp().trimmed_lasthop;
      const auto code = last_hop ? wire::NackCode::kTrimmedLastHop : wire::NackCode::kTrimmed;
      queue_nack(port, psn, wev, static_cast<uint8_t>(code), m, has_ts, ts, now_ns);
    }
    return;
  }

  ++st_.data_packets_rx;
  if (psn_le(psn, rcv_cack_)) {
    // Already placed: answer so that a requester that lost our ACKs learns the state again.
    ++st_.duplicates_rx;
    if (!reply_allowed(now_ns)) return;
    queue_sack(port, psn, wev, m, has_ts, ts, now_ns, false, 0);
    if (any_msg_completed_) queue_transport_ack(port, wev, now_ns);
    return;
  }
  if (psn_diff(psn, rcv_cack_) > rcv_window_) {
    ++st_.out_of_window_rx;
    if (!reply_allowed(now_ns)) return;
    queue_nack(port, psn, wev, static_cast<uint8_t>(wire::NackCode::kPsnOorWindow), m, has_ts, ts,
               now_ns);
    return;
  }
  RxSlot& slot = rx_[psn & rx_mask_];
  if (slot.flags & RxSlot::kReceived) {
    ++st_.duplicates_rx;
    if (reply_allowed(now_ns)) queue_sack(port, psn, wev, m, has_ts, ts, now_ns, false, 0);
    return;
  }

  // ---- validate before touching memory
  const wire::MessagePosition pos = f.op->position;
  const size_t len = f.payload.size();
  const uint32_t pmtu = attr_.path_mtu;
  const bool imm = f.op->has_imm;
  if (len > pmtu ||
      ((pos == wire::MessagePosition::kFirst || pos == wire::MessagePosition::kMiddle) &&
       len != pmtu) ||
      f.reth.dma_len < len) {
    responder_fault(port, psn, wev, kAethNakInvalidRequest, AsyncEventType::kQpReqErr,
                    "bad_segment_length", now_ns);
    return;
  }
  if (imm && static_cast<uint16_t>(f.meth.rqmsn - imm_completed_) >= mrc_.max_wimm_dest) {
    responder_fault(port, psn, wev, kAethNakInvalidRequest, AsyncEventType::kQpReqErr,
                    "wimm_limit_exceeded", now_ns);
    return;
  }
  if (!(attr_.qp_access_flags & kAccessRemoteWrite)) {
    responder_fault(port, psn, wev, kAethNakRemoteAccess, AsyncEventType::kQpAccessErr,
                    "qp_no_remote_write", now_ns);
    return;
  }
  const uint64_t va = f.reth.va;
  if (len > 0) {
    const MemoryRegion* mr = ep_->mr_for_rkey(f.reth.rkey);
    const bool ok = mr != nullptr && mr->pd == init_.pd && (mr->access & kAccessRemoteWrite) &&
                    va >= mr->addr && va - mr->addr <= mr->length &&
                    len <= mr->length - (va - mr->addr);
    if (!ok) {
      responder_fault(port, psn, wev, kAethNakRemoteAccess, AsyncEventType::kQpAccessErr,
                      mr == nullptr || mr->pd != init_.pd  ? "bad_rkey"
                      : !(mr->access & kAccessRemoteWrite) ? "mr_no_remote_write"
                                                           : "va_outside_region",
                      now_ns);
      return;
    }
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(va)), f.payload.data(), len);
  }

  slot.flags = RxSlot::kReceived;
  const bool last = pos == wire::MessagePosition::kLast || pos == wire::MessagePosition::kOnly;
  if (last) slot.flags |= RxSlot::kLast;
  if (imm) slot.flags |= RxSlot::kImm;
  slot.msn = f.meth.msn;
  slot.rqmsn = f.meth.rqmsn;
  slot.imm = f.immdt.imm;
  slot.dma_len = f.reth.dma_len;
  rcvd_bytes_ += uint64_t{f.udp.length} + 40;
  st_.data_bytes_placed += len;
  ++ooo_count_;

  // SACK triggers (MRP0 C.4): A, RTX or CE at once, otherwise every ack_gen_trigger bytes
  // counting each packet as at least ack_gen_min_pkt_add.
  bytes_since_sack_ +=
      std::max<uint32_t>(static_cast<uint32_t>(len), ep_->cfg.ack_gen_min_pkt_add_bytes);
  if (f.bth.ack_req || f.bth.rtx || ce || bytes_since_sack_ >= ep_->cfg.ack_gen_trigger_bytes) {
    queue_sack(port, psn, wev, m, has_ts, ts, now_ns, false, 0);
    bytes_since_sack_ = 0;
  }
  advance_rcv_cack(port, wev, now_ns);
}

void Qp::advance_rcv_cack(uint8_t port, uint32_t wev, uint64_t now_ns) {
  bool completed_any = false;
  for (;;) {
    const uint32_t next = psn_add(rcv_cack_, 1);
    RxSlot& s = rx_[next & rx_mask_];
    if (!(s.flags & RxSlot::kReceived)) break;
    const RxSlot done = s;
    s = RxSlot{};
    rcv_cack_ = next;
    ++ep_->rx_gate_gen;
    if (ooo_count_ > 0) --ooo_count_;
    if (!(done.flags & RxSlot::kLast)) continue;
    msn_completed_ = done.msn;
    any_msg_completed_ = true;
    completed_any = true;
    if (!(done.flags & RxSlot::kImm)) continue;
    if (done.rqmsn != imm_completed_) {
      responder_fault(port, next, wev, kAethNakInvalidRequest, AsyncEventType::kQpReqErr,
                      "rqmsn_out_of_order", now_ns);
      return;
    }
    if (rq_.empty()) {
      // MRC has no RNR: a WRITE_WITH_IMM without a posted receive is fatal for the QP.
      responder_fault(port, next, wev, kAethNakRemoteOp, AsyncEventType::kQpFatal, "no_receive_wqe",
                      now_ns);
      return;
    }
    Wc wc;
    wc.wr_id = rq_.front();
    rq_.pop();
    wc.status = WcStatus::kSuccess;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.qp_num = qpn_;
    wc.byte_len = done.dma_len;
    wc.imm_data = done.imm;
    wc.with_imm = true;
    ++imm_completed_;
    if (ep_->logging()) {
      Event e = ep_->event(EventKind::kCompletion, qpn_);
      e.u("wr_id", wc.wr_id)
          .s("status", wc_status_name(wc.status))
          .s("opcode", "RECV_RDMA_WITH_IMM")
          .u("byte_len", wc.byte_len)
          .u("imm", wc.imm_data)
          .s("side", "recv");
      ep_->emit(e);
    }
    ep_->push_wc(init_.recv_cq, wc);
  }
  // One transport ACK per packet that completed messages (coalesced, MRP0 C.6).
  if (completed_any) queue_transport_ack(port, wev, now_ns);
}

void Qp::on_probe(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns, uint32_t wev) {
  if (state_ != QpState::kRtr && state_ != QpState::kRts) {
    ++ep_->stats.rx_wrong_state;
    return;
  }
  if (!reply_allowed(now_ns, true)) return;
  const bool ce = f.ecn() == kEcnCe;
  const uint8_t m = static_cast<uint8_t>(ce ? wire::SackM::kSkipOnce : wire::SackM::kNone);
  queue_sack(port, rcv_cack_, wev, m, true, f.peth.ts16, now_ns, true, f.peth.probe_id);
}

bool Qp::reply_allowed(uint64_t now_ns, bool probe) {
  // Duplicates, PSNs beyond the window and probes need no state to forge (a QPN, the peer GID
  // and any PSN): answering each one would turn a flood into an equal flood of replies.
  if ((probe ? probe_replies_ : replies_).take(now_ns)) return true;
  ++st_.replies_limited;
  return false;
}

void Qp::on_rx_in_error(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns, uint32_t wev) {
  // Verbs RC would drop silently and let the peer retry until its retry budget (or, with
  // unlimited retries, its application's stall timeout) runs out: ~190,000 probes in 30 s.
  // A NAK (remote operational error) at the packet's PSN ends the peer's work request at once
  // with IBV_WC_REM_OP_ERR; the peer accepts it only for a PSN of a work request it has
  // outstanding. A probe has no PSN: the NAK names the first PSN this QP has not received.
  ++ep_->stats.rx_wrong_state;
  if (rx_.empty()) return;  // never reached RTR: no peer state to report against
  if (!error_naks_.take(now_ns)) {
    ++st_.error_naks_limited;
    return;
  }
  const bool probe = f.op->kind == wire::PacketKind::kMrcProbe;
  const uint32_t psn = probe ? psn_add(rcv_cack_, 1) : f.bth.psn;
  queue_nak(port, psn, wev, kAethNakRemoteOp, now_ns);
  ++st_.error_naks_sent;
}

void Qp::begin_ctrl_frame(const CtrlPkt& c, uint8_t opcode, uint8_t dscp) {
  const EvRecord* ev = control_ev(c.port);
  Route r;
  r.port = c.port;
  if (ev != nullptr) {
    r.wev = ev->wev;
    r.srv6 = &ev->expanded;
    r.srh = evs_.srh();
  }
  wire::FrameSpec& s = ep_->begin_frame(r, attr_.dgid, dscp, 0, opcode);
  s.bth.dest_qp = attr_.dest_qp_num;
}

bool Qp::build_ctrl(const CtrlPkt& c, uint64_t now_ns, TxPacket& out) {
  if (state_ != QpState::kRtr && state_ != QpState::kRts && c.kind != CtrlKind::kNak) return false;
  if (rx_.empty()) return false;
  Endpoint::Impl& ep = *ep_;
  const uint8_t control = ep.prof->dscp().control;
  // A profile without the SVA flag (WireParams::sva) has no way to say the time was added.
  const bool sva = ep.cfg.caps.svc_time && ep.prof->params().sva && c.has_ts;
  const uint64_t svc_ticks = now_ns > c.arrival_ns ? (now_ns - c.arrival_ns) >> 7 : 0;
  const uint16_t ts_echo = static_cast<uint16_t>(c.ts16 + (sva ? svc_ticks : 0));
  switch (c.kind) {
    case CtrlKind::kSack: {
      const uint8_t op =
          ep.prof->opcode_of(wire::PacketKind::kMrcSack, wire::MessagePosition::kNone, false);
      begin_ctrl_frame(c, op, control);
      wire::FrameSpec& s = ep.spec;
      s.bth.psn = rcv_cack_;
      wire::Seth& h = s.seth;
      h.m = c.m;
      h.pr = c.pr;
      if (c.pr) {
        h.ack_psn_offset = static_cast<int16_t>(c.probe_id);
      } else {
        // Signed distance from cack; 0 when it does not fit (a very old duplicate).
        const int32_t d =
            static_cast<int32_t>(psn_diff(c.psn, rcv_cack_) << 8) >> 8;  // sign-extend 24 bits
        h.ack_psn_offset = (d >= INT16_MIN && d <= INT16_MAX) ? static_cast<int16_t>(d) : 0;
      }
      h.entropy = c.wev;
      h.spdcid = static_cast<uint16_t>(qpn_ & 0xFFFF);
      h.dpdcid = static_cast<uint16_t>(attr_.dest_qp_num & 0xFFFF);
      h.port_status = static_cast<uint8_t>((ep.local_port_mask >> 1) & 0xFF);
      h.psv = true;
      h.cack_psn = rcv_cack_;
      h.cc_type = ep.prof->params().cc_type;
      h.sva = sva;
      if ((mrc_.cap & kCapDynamicMpr) && ep.cfg.caps.dynamic_mpr)
        h.mpr = rsp_mpr_units_ != 0 ? rsp_mpr_units_ : mrc_.mpr_dest;
      // Bitmap window: start right after cack unless the trigger lies further out.
      uint32_t offset = 1;
      if (!c.pr && psn_lt(rcv_cack_, c.psn)) {
        const uint32_t d = psn_diff(c.psn, rcv_cack_);
        if (d > 64) offset = std::min<uint32_t>(d - 32, INT16_MAX);
      }
      h.sack_offset = static_cast<int16_t>(offset);
      uint64_t bitmap = 0;
      for (uint32_t i = 0; i < 64; ++i) {
        if (rx_received(psn_add(rcv_cack_, int64_t{offset} + i))) bitmap |= uint64_t{1} << i;
      }
      h.sack_bitmap = bitmap;
      wire::CcState& cs = s.cc_state;
      cs.ts_echo = c.has_ts ? ts_echo : 0;
      cs.ooo_count = static_cast<uint16_t>(std::min<uint32_t>(ooo_count_, 0x7FFF));
      cs.rcv_cwnd_pen = static_cast<uint8_t>(std::min<uint8_t>(rcv_cwnd_pen_, 127));
      cs.rcvd_bytes = static_cast<uint32_t>(((rcvd_bytes_ + 255) / 256) & 0xFFFFFF);
      ++st_.sacks_sent;
      break;
    }
    case CtrlKind::kNack: {
      const uint8_t op =
          ep.prof->opcode_of(wire::PacketKind::kMrcNack, wire::MessagePosition::kNone, false);
      begin_ctrl_frame(c, op, control);
      wire::FrameSpec& s = ep.spec;
      s.bth.psn = c.psn;
      wire::Neth& n = s.neth;
      n.nack_code = c.code;
      n.entropy = c.wev;
      n.spdcid = static_cast<uint16_t>(qpn_ & 0xFFFF);
      n.dpdcid = static_cast<uint16_t>(attr_.dest_qp_num & 0xFFFF);
      n.nack_psn = c.psn;
      n.cc_type = ep.prof->params().cc_type;
      n.sva = sva;
      n.m = c.m;
      n.ts_echo = c.has_ts ? ts_echo : 0;
      ++st_.nacks_sent;
      break;
    }
    case CtrlKind::kAck:
    case CtrlKind::kNak: {
      const uint8_t op = ep.prof->opcode_of(wire::PacketKind::kMrcTransportAck,
                                            wire::MessagePosition::kNone, false);
      begin_ctrl_frame(c, op, control);
      wire::FrameSpec& s = ep.spec;
      const bool nak = c.kind == CtrlKind::kNak;
      s.bth.psn = nak ? c.psn : rcv_cack_;
      s.aeth.syndrome = nak ? c.code : kAethAck;
      s.aeth.msn = msn_completed_;
      ++st_.acks_sent;
      break;
    }
    case CtrlKind::kEpResponse:
      return false;
  }
  return ep.finish_frame(out, c.port);
}

void Qp::responder_timer(uint64_t now_ns) {
  if (rev_probe_due_ > now_ns) return;
  // Reverse-EV maintenance (paper 2.4): a QP that receives but does not send probes one random
  // EV per plane each period and adopts the ones that answer.
  const bool receive_only = data_rx_since_rev_probe_ > 0 && data_tx_since_rev_probe_ == 0;
  if (receive_only && ev_set_built_) {
    const uint32_t usable = ep_->usable_ports(attr_.dgid);
    for (uint8_t p = 1; p <= ep_->nports; ++p) {
      if (((usable >> p) & 1u) == 0) continue;
      const int ev = evs_.random_good_in_plane(p, ep_->rng);
      if (ev >= 0) ep_->send_reverse_ev_probe(*this, p, ev, now_ns);
    }
  }
  const bool active = data_rx_since_rev_probe_ > 0;
  data_rx_since_rev_probe_ = 0;
  data_tx_since_rev_probe_ = 0;
  if (!active) {
    rev_probe_due_ = UINT64_MAX;  // idle: the next data packet re-arms the period
    return;
  }
  const uint64_t iv = ep_->cfg.reverse_ev_probe_interval_ns != 0
                          ? ep_->cfg.reverse_ev_probe_interval_ns
                          : std::max<uint64_t>(srtt_ns_, 2'000);
  rev_probe_due_ = now_ns + iv;
}

}  // namespace mrc::engine
