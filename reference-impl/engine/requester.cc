// Requester: segmentation, EV spraying, the MPR / WIMM / CC gates, SACK / NACK / transport-ACK
// processing, loss detection (NACK, SACK gap, timeout), retransmission and reliability probes.
#include <algorithm>
#include <cstring>

#include "reference-impl/engine/endpoint_impl.h"

namespace mrc::engine {

using wire::psn_add;
using wire::psn_diff;
using wire::psn_le;
using wire::psn_lt;

namespace {
constexpr uint8_t kEcnEct0 = 2;
constexpr uint32_t kMaxGapK = 64;  // bound on the SACK-gap evidence count
uint64_t sub_floor(uint64_t a, uint64_t b) {
  return a >= b ? a - b : 0;
}
}  // namespace

TxEntry* Qp::entry(uint32_t psn) {
  if (tx_.empty() || !psn_lt(cack_seen_, psn) || !psn_lt(psn, snd_nxt_)) return nullptr;
  TxEntry& e = tx_[psn & tx_mask_];
  return (e.flags & TxEntry::kLive) ? &e : nullptr;
}

uint32_t Qp::usable_ports() const {
  return ep_->usable_ports(attr_.dgid);
}

uint64_t Qp::timer_ns(uint32_t retries) const {
  // Retry k waits T for k <= linear_cnt, then T * 2^(k - linear_cnt), exponent capped at 24
  // (mrc-protocol.md C.9). T = 1.024 us * 2^timeout.
  const uint32_t linear = mrc_.retry.linear_cnt;
  const uint32_t shift = retries > linear ? retries - linear : 0;
  const uint32_t exp = std::min<uint32_t>(uint32_t{mrc_.timeout} + shift, kMaxTimeoutExp);
  return uint64_t{1024} << exp;
}

bool Qp::retry_budget_left(uint32_t retries_done) const {
  if (mrc_.retry.exp_cnt >= kUnlimitedExpRetry) return true;
  return retries_done < uint32_t{mrc_.retry.linear_cnt} + mrc_.retry.exp_cnt;
}

bool Qp::cc_allows(uint32_t nominal) const {
  if (!cc_) return true;
  const uint64_t cwnd = cc_->cwnd_bytes();
  // One packet may always be in flight so that a tiny window cannot stall the QP.
  return bytes_in_flight_ == 0 || bytes_in_flight_ + nominal <= cwnd;
}

uint32_t Qp::nominal_size(uint32_t payload_bytes, bool imm) const {
  // NSCC nominal packet size = UDP length + 40 (A.8.2).
  const wire::WireProfile& p = *ep_->prof;
  uint32_t ib =
      12 + static_cast<uint32_t>(p.header_size(wire::kHdrMeth) + p.header_size(wire::kHdrTseth) +
                                 p.header_size(wire::kHdrReth));
  if (imm) ib += static_cast<uint32_t>(p.header_size(wire::kHdrImm));
  ib += (payload_bytes + 3u) & ~3u;
  ib += wire::kIcrcBytes;
  return 8 + ib + 40;
}

bool Qp::build_data(uint32_t psn, const SendWqe& w, uint32_t pkt, const EvRecord& ev, bool rtx,
                    bool force_ack, uint64_t now_ns, TxPacket& out) {
  Endpoint::Impl& ep = *ep_;
  const uint32_t pmtu = attr_.path_mtu;
  const uint64_t off = uint64_t{pkt} * pmtu;
  const uint32_t len =
      w.length == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(pmtu, w.length - off));
  const bool last = pkt + 1 == w.npkts;
  wire::MessagePosition pos = wire::MessagePosition::kMiddle;
  if (w.npkts == 1)
    pos = wire::MessagePosition::kOnly;
  else if (pkt == 0)
    pos = wire::MessagePosition::kFirst;
  else if (last)
    pos = wire::MessagePosition::kLast;
  const bool imm_here = w.imm && last;
  const uint8_t opcode = ep.prof->opcode_of(wire::PacketKind::kMrcData, pos, imm_here);

  const wire::DscpPlan& dscp = ep.prof->dscp();
  const bool trim_ok = ep.cfg.use_trimming && !(mrc_.cap & kCapTrimNackDestUnsupported);
  const uint8_t ds = !trim_ok ? dscp.no_trim : (rtx ? dscp.trimmable_retx : dscp.trimmable);
  Route r{ev.port, ev.wev, &ev.expanded, evs_.srh()};
  wire::FrameSpec& s = ep.begin_frame(r, attr_.dgid, ds, kEcnEct0, opcode);
  s.bth.dest_qp = attr_.dest_qp_num;
  s.bth.psn = psn;
  s.bth.ack_req = last || force_ack;
  s.bth.rtx = rtx;
  s.bth.ts = true;
  s.bth.se = imm_here && w.solicited;
  s.headers |= wire::kHdrTseth;
  s.meth.msn = w.msn;
  s.meth.rqmsn = w.rqmsn;
  s.tseth.ts16 = Endpoint::Impl::ts16(now_ns);
  s.tseth.ftype = 1;
  s.reth.va = w.remote_addr + off;
  s.reth.rkey = w.rkey;
  s.reth.dma_len = w.length;
  if (imm_here) s.immdt.imm = w.imm_data;

  if (len > 0) {
    // Locate [off, off+len) in the scatter list; copy only when it spans SGEs.
    uint64_t skip = off;
    uint32_t k = 0;
    while (k < w.num_sge && skip >= w.sge[k].length) {
      skip -= w.sge[k].length;
      ++k;
    }
    if (k < w.num_sge && w.sge[k].length - skip >= len) {
      s.payload = {reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(w.sge[k].addr + skip)),
                   len};
    } else {
      ep.gather.resize(len);
      uint32_t done = 0;
      while (done < len && k < w.num_sge) {
        const uint64_t avail = w.sge[k].length - skip;
        const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(avail, len - done));
        std::memcpy(ep.gather.data() + done,
                    reinterpret_cast<const void*>(static_cast<uintptr_t>(w.sge[k].addr + skip)), n);
        done += n;
        skip = 0;
        ++k;
      }
      s.payload = {ep.gather.data(), len};
    }
  }
  return ep.finish_frame(out, ev.port);
}

void Qp::arm_tail_probe(uint64_t now_ns) {
  tlp_sent_ = false;
  tlp_deadline_ = bytes_in_flight_ > 0 ? now_ns + timer_ns(0) / 2 : UINT64_MAX;
}

bool Qp::build_probe(uint32_t ev_idx, uint16_t probe_id, bool tail, uint64_t now_ns,
                     TxPacket& out) {
  Endpoint::Impl& ep = *ep_;
  EvRecord& ev = evs_.at(ev_idx);
  const uint8_t opcode =
      ep.prof->opcode_of(wire::PacketKind::kMrcProbe, wire::MessagePosition::kNone, false);
  Route r{ev.port, ev.wev, &ev.expanded, evs_.srh()};
  wire::FrameSpec& s = ep.begin_frame(r, attr_.dgid, ep.prof->dscp().trimmable, kEcnEct0, opcode);
  s.bth.dest_qp = attr_.dest_qp_num;
  s.bth.psn = 0;  // probes consume no PSN (MRP0 C.7)
  s.bth.ack_req = true;
  s.peth.probe_id = probe_id;
  s.peth.spdcid = static_cast<uint16_t>(qpn_ & 0xFFFF);
  s.peth.dpdcid = static_cast<uint16_t>(attr_.dest_qp_num & 0xFFFF);
  s.peth.ts16 = Endpoint::Impl::ts16(now_ns);
  s.peth.ftype = 1;
  ++st_.probes_sent;
  sent_to_peer(now_ns);
  if (ep.logging()) {
    Event e = ep.event(EventKind::kProbe, qpn_);
    e.u("wev", ev.wev)
        .u("port", ev.port)
        .u("probe_id", probe_id)
        .s("result", tail ? "tail_probe_sent" : "sent");
    ep.emit(e);
  }
  return ep.finish_frame(out, ev.port);
}

bool Qp::next_tx(uint64_t now_ns, TxPacket& out) {
  if (state_ != QpState::kRts) return false;
  const uint32_t usable = usable_ports();

  // 1. Reliability probes for ASSUMED_BAD EVs (not gated by CC or MPR).
  if (evs_.count(EvState::kAssumedBad) == 0) {
    probe_check_ns_ = UINT64_MAX;
  } else if (probe_check_ns_ <= now_ns) {
    const uint64_t interval = std::max<uint64_t>(ep_->cfg.probe_interval_ns, 1);
    uint64_t next = UINT64_MAX;
    int chosen = -1;
    for (uint32_t i = 0; i < evs_.size(); ++i) {
      EvRecord& r = evs_.at(i);
      if (r.state != EvState::kAssumedBad) continue;
      if (r.next_probe_ns <= now_ns) {
        if (((usable >> r.port) & 1u) == 0) {
          r.next_probe_ns = now_ns + interval;  // plane down: try again later
        } else if (chosen < 0) {
          chosen = static_cast<int>(i);
          continue;
        }
      }
      next = std::min(next, r.next_probe_ns);
    }
    if (chosen >= 0) {
      EvRecord& r = evs_.at(static_cast<uint32_t>(chosen));
      if (r.probe_outstanding) {
        r.good_probes = 0;  // the previous probe went unanswered: consecutive count restarts
        if (ep_->logging()) {
          Event e = ep_->event(EventKind::kProbe, qpn_);
          e.u("wev", r.wev).u("probe_id", r.probe_id).s("result", "lost");
          ep_->emit(e);
        }
      }
      r.probe_outstanding = true;
      r.probe_id = next_probe_id_++;
      r.next_probe_ns = now_ns + interval;
      probe_check_ns_ = std::min(next, r.next_probe_ns);
      return build_probe(static_cast<uint32_t>(chosen), r.probe_id, false, now_ns, out);
    }
    probe_check_ns_ = next;
  }
  if (tlp_pending_) {
    const int ev = evs_.pick(usable, false, 0, now_ns, EvSet::Stream::kResend);
    if (ev >= 0) {
      tlp_pending_ = false;
      tlp_sent_ = true;
      tlp_probe_id_ = next_probe_id_;
      tlp_probe_sent_ns_ = now_ns;
      return build_probe(static_cast<uint32_t>(ev), next_probe_id_++, true, now_ns, out);
    }
  }

  // 2. A transport ACK went missing: resend the last packet of the oldest message.
  if (resend_for_ack_) {
    if (sq_head_ < seg_seq_) {
      const int ev = evs_.pick(usable, false, 0, now_ns, EvSet::Stream::kResend);
      if (ev >= 0) {
        resend_for_ack_ = false;
        const SendWqe& w = wqe_at(sq_head_);
        EvRecord& rec = evs_.at(static_cast<uint32_t>(ev));
        ++rec.packets_sent;
        const bool built = build_data(w.last_psn(), w, w.npkts - 1, rec, true, true, now_ns, out);
        ++st_.retransmits;
        ++st_.rtx_ack_wait;
        if (ep_->logging()) {
          Event e = ep_->event(EventKind::kRetransmit, qpn_);
          e.u("psn", w.last_psn())
              .s("cause", rtx_cause_name(RtxCause::kAckWait))
              .u("attempt", ack_wait_retries_)
              .u("wev", rec.wev)
              .u("port", rec.port);
          ep_->emit(e);
        }
        return built;
      }
    } else {
      resend_for_ack_ = false;
    }
  }

  // 3. Retransmissions, each on a fresh EV.
  while (!rtx_q_.empty()) {
    const uint32_t psn = rtx_q_.front();
    TxEntry* e = entry(psn);
    if (e == nullptr || (e->flags & TxEntry::kSacked) || !(e->flags & TxEntry::kRtxQueued)) {
      if (e != nullptr) e->flags &= static_cast<uint8_t>(~TxEntry::kRtxQueued);
      rtx_q_.pop();
      continue;
    }
    if (!cc_allows(e->nominal)) return false;
    // A packet lost without a trim goes to another plane if one is usable: its own plane may be
    // the one that failed, and its other EVs are not retired until their own packets are found
    // lost, so a resend there can be lost again and hold cack back past the ACK timeout of
    // packets that arrived.
    int ev = -1;
    const bool untrimmed_loss = e->cause == RtxCause::kSackGap || e->cause == RtxCause::kTimeout;
    if (untrimmed_loss && e->ev < evs_.size()) {
      const uint32_t other_planes = usable & ~(1u << evs_.at(e->ev).port);
      if (other_planes != 0)
        ev = evs_.pick(other_planes, true, e->wev, now_ns, EvSet::Stream::kResend);
    }
    if (ev < 0) ev = evs_.pick(usable, true, e->wev, now_ns, EvSet::Stream::kResend);
    if (ev < 0) return false;
    rtx_q_.pop();
    e->flags &= static_cast<uint8_t>(~TxEntry::kRtxQueued);
    const uint32_t old_wev = e->wev;
    EvRecord& rec = evs_.at(static_cast<uint32_t>(ev));
    const bool built = build_data(psn, wqe_at(e->wqe_seq), e->pkt, rec, true, false, now_ns, out);
    e->flags |= TxEntry::kInFlight;
    e->flags &= static_cast<uint8_t>(~TxEntry::kTrimmed);
    e->ev = static_cast<uint16_t>(ev);
    e->wev = rec.wev;
    e->tx_seq = ++tx_seq_;
    e->last_tx_ns = now_ns;
    e->deadline_ns = now_ns + timer_ns(e->retries);
    tx_deadline_ = std::min(tx_deadline_, e->deadline_ns);
    bytes_in_flight_ += e->nominal;
    ++rec.packets_sent;
    note_rtx(psn, *e, old_wev);
    sent_to_peer(now_ns);
    arm_tail_probe(now_ns);
    return built;
  }

  // 4. New data, gated by the MPR window, the WIMM limit and the congestion window.
  if (seg_seq_ == sq_tail_) return false;
  const uint32_t psn = snd_nxt_;
  if (psn_diff(psn, cack_seen_) > mpr_eff_) return false;
  SendWqe& w = wqe_at(seg_seq_);
  if (seg_pkt_ == 0 && w.imm && wimm_outstanding_ >= mrc_.max_wimm) return false;
  const uint32_t pmtu = attr_.path_mtu;
  const uint64_t off = uint64_t{seg_pkt_} * pmtu;
  const uint32_t len =
      w.length == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(pmtu, w.length - off));
  const bool last = seg_pkt_ + 1 == w.npkts;
  const uint32_t nominal = nominal_size(len, w.imm && last);
  if (!cc_allows(nominal)) return false;
  const int ev = evs_.pick(usable, false, 0, now_ns);
  if (ev < 0) return false;
  EvRecord& rec = evs_.at(static_cast<uint32_t>(ev));
  const bool built = build_data(psn, w, seg_pkt_, rec, false, false, now_ns, out);
  TxEntry& e = tx_[psn & tx_mask_];
  e = TxEntry{};
  e.wqe_seq = seg_seq_;
  e.pkt = seg_pkt_;
  e.nominal = nominal;
  e.flags = TxEntry::kLive | TxEntry::kInFlight;
  e.ev = static_cast<uint16_t>(ev);
  e.wev = rec.wev;
  e.tx_seq = ++tx_seq_;
  e.last_tx_ns = now_ns;
  e.deadline_ns = now_ns + timer_ns(0);
  tx_deadline_ = std::min(tx_deadline_, e.deadline_ns);
  bytes_in_flight_ += nominal;
  ++rec.packets_sent;
  snd_nxt_ = psn_add(psn, 1);
  if (seg_pkt_ == 0) {
    w.first_sent = true;
    if (w.imm) ++wimm_outstanding_;
  }
  ++st_.data_packets_sent;
  st_.data_bytes_sent += len;
  ++data_tx_since_rev_probe_;
  if (++seg_pkt_ == w.npkts) {
    ++seg_seq_;
    seg_pkt_ = 0;
  }
  sent_to_peer(now_ns);
  arm_tail_probe(now_ns);
  return built;
}

void Qp::note_rtx(uint32_t psn, const TxEntry& e, uint32_t old_wev) {
  ++st_.retransmits;
  switch (e.cause) {
    case RtxCause::kTimeout:
      ++st_.rtx_timeout;
      break;
    case RtxCause::kNackTrim:
    case RtxCause::kNackTrimLastHop:
    case RtxCause::kNackResource:
      ++st_.rtx_nack;
      break;
    case RtxCause::kSackGap:
      ++st_.rtx_sack_gap;
      break;
    case RtxCause::kAckWait:
      ++st_.rtx_ack_wait;
      break;
    case RtxCause::kNone:
      break;
  }
  if (ep_->logging()) {
    Event ev = ep_->event(EventKind::kRetransmit, qpn_);
    ev.u("psn", psn)
        .s("cause", rtx_cause_name(e.cause))
        .u("attempt", e.retries)
        .u("old_wev", old_wev)
        .u("wev", e.wev)
        .u("bytes_in_flight", bytes_in_flight_);
    ep_->emit(ev);
  }
}

void Qp::mark_lost(uint32_t psn, TxEntry& e, RtxCause cause) {
  if (e.flags & TxEntry::kInFlight) {
    bytes_in_flight_ = sub_floor(bytes_in_flight_, e.nominal);
    e.flags &= static_cast<uint8_t>(~TxEntry::kInFlight);
  }
  e.cause = cause;
  if (!(e.flags & TxEntry::kRtxQueued)) {
    if (rtx_q_.push(psn)) e.flags |= TxEntry::kRtxQueued;
  }
}

void Qp::demote_ev(uint16_t ev, uint64_t now_ns, std::string_view reason) {
  if (ev == kNoEv || ev >= evs_.size()) return;
  if (evs_.demote(ev, now_ns, reason)) probe_check_ns_ = std::min(probe_check_ns_, now_ns);
}

void Qp::sent_to_peer(uint64_t now_ns) {
  if (unanswered_since_ns_ == UINT64_MAX) unanswered_since_ns_ = now_ns;
}

bool Qp::peer_silent(uint64_t now_ns) const {
  return unanswered_since_ns_ != UINT64_MAX && now_ns >= unanswered_since_ns_ &&
         now_ns - unanswered_since_ns_ >= timer_ns(0) / 2;
}

void Qp::heard_from_peer(uint64_t now_ns) {
  // The end of a silence of T/2 or more, whether the peer was not scheduled or this process was
  // (then the timer runs only after the rings are read, and finds the first answers of a peer
  // that is still working through what it missed): packets sent before it get one T from now,
  // the silence is not counted against them.
  if (ep_->cfg.silent_peer_grace_ns > 0 && peer_silent(now_ns)) resumed_ns_ = now_ns;
  unanswered_since_ns_ = UINT64_MAX;
  if (silent_hold_) {
    silent_hold_ = false;
    tx_deadline_ = std::min(tx_deadline_, now_ns);  // re-judge the held packets
  }
}

void Qp::advance_cack(uint32_t cack, uint64_t& newly, uint64_t now_ns) {
  for (uint32_t p = psn_add(cack_seen_, 1);; p = psn_add(p, 1)) {
    TxEntry& e = tx_[p & tx_mask_];
    if (e.flags & TxEntry::kLive) {
      if (!(e.flags & TxEntry::kSacked)) {
        note_if_spurious(e, now_ns);
        newly += e.nominal;
        note_delivered(e, now_ns);
        // Only the packet that moved cack times its path here; packets above it that were
        // never SACKed arrived at some earlier time (their SACKs were lost).
        if (p == psn_add(cack_seen_, 1) && e.cause == RtxCause::kNone && e.retries == 0)
          note_rtt_sample(now_ns - e.last_tx_ns, now_ns);
      }
      if (e.flags & TxEntry::kInFlight) bytes_in_flight_ = sub_floor(bytes_in_flight_, e.nominal);
    }
    e = TxEntry{};
    if (p == cack) break;
  }
  cack_seen_ = cack;
  ++ep_->rx_gate_gen;
  if (have_sacked_ && !psn_lt(cack_seen_, highest_sacked_)) have_sacked_ = false;
}

void Qp::deferred_gap_scan(uint64_t now_ns) {
  if (gap_scan_deferred_ && state_ == QpState::kRts) gap_scan(now_ns);
  gap_scan_deferred_ = false;
}

void Qp::gap_scan(uint64_t now_ns) {
  gap_deadline_ = UINT64_MAX;
  gap_scan_deferred_ = false;
  if (!have_sacked_ || !psn_lt(cack_seen_, highest_sacked_)) return;
  // A PSN is lost once `threshold` PSNs above it that were sent after it on its own plane have
  // been SACKed. Each plane queues on its own (its own NIC port, its own switches), so a plane
  // whose queues grow delays every packet it carries behind those of the other planes by as
  // much as its queues hold, however many packets the other planes deliver meanwhile: counted
  // across planes, that delay read as loss. The viewer fixture with seed 4 (a flap on plane 1
  // sends its resends to plane 2) resent 88 packets for 59 losses and retired all four active
  // EVs of plane 2, on which nothing was lost, in one SACK. Packets of one plane share its NIC
  // port's FIFO; they can pass each other only between the plane's switch paths, which the
  // time condition below covers. A plane that delivers nothing at all (failed beyond the NIC,
  // its port still up) leaves no evidence here and is found by the ACK timeout.
  // Walking down from the highest SACKed PSN, keep the largest send sequence numbers seen on
  // each plane.
  const uint32_t k = std::clamp<uint32_t>(ep_->cfg.sack_gap_threshold, 1, kMaxGapK);
  // The count alone is not evidence when paths differ in queueing delay: a packet behind a
  // queue on one path is overtaken by every packet the other paths deliver meanwhile, however
  // many. So a hole is lost only once it has also been out longer than the slowest path's RTT
  // and a quarter of the smoothed RTT (RACK's reordering window): until then its SACK may still
  // be on the way. Without it the viewer fixture resent 1,641 packets on SACK-gap evidence for
  // 49 real losses and retired every EV as queues built.
  const uint64_t reorder_ns = reorder_window_ns();
  std::array<std::array<uint64_t, kMaxGapK>, kMaxPorts + 1> top;
  std::array<uint32_t, kMaxPorts + 1> ntop{};
  bool lost_any = false;
  for (uint32_t p = highest_sacked_; psn_lt(cack_seen_, p); p = psn_add(p, -1)) {
    TxEntry& e = tx_[p & tx_mask_];
    if (!(e.flags & TxEntry::kLive)) continue;
    const uint8_t plane = e.ev < evs_.size() ? evs_.at(e.ev).port : 0;
    std::array<uint64_t, kMaxGapK>& ptop = top[plane <= kMaxPorts ? plane : 0];
    uint32_t& pn = ntop[plane <= kMaxPorts ? plane : 0];
    if (e.flags & TxEntry::kSacked) {
      // insert e.tx_seq into the plane's descending top-k list
      uint32_t pos = pn < k ? pn++ : k;
      if (pos == k) {
        if (e.tx_seq <= ptop[k - 1]) continue;
        pos = k - 1;
      }
      while (pos > 0 && ptop[pos - 1] < e.tx_seq) {
        ptop[pos] = ptop[pos - 1];
        --pos;
      }
      ptop[pos] = e.tx_seq;
      continue;
    }
    if (!(e.flags & TxEntry::kInFlight) || pn < k || ptop[k - 1] <= e.tx_seq) continue;
    // A hole whose EV delivered a packet sent after it is no sign of a failed path: a
    // congestion drop, or a SACK lost on the reverse path (a flap that takes the responder's
    // reverse EV loses the SACKs for packets that did arrive; the fixture then resent 45 such
    // packets at once and retired 7 working EVs). Waiting one more window lets the repair of
    // the holes before it advance cack over the packets that did arrive.
    // A hole on an EV that has delivered nothing yet may be on a path whose RTT no sample has
    // shown (a QP's first packets on a slow path): it gets the tail-probe time, T/2.
    const uint64_t delivered = e.ev < evs_.size() ? evs_.at(e.ev).delivered_tx_seq : 0;
    uint64_t wait_ns = reorder_ns;
    // So does the tail of the work: with nothing new to send, the few packets still arriving
    // are what the responder's SACK coalescing waits for, so SACKs come late; the tail probe
    // at T/2 asks for the responder's state.
    // The extension stops at the tail-probe time: past it the ACK timer T (armed for every
    // packet) is the better judge, and a lost packet must be found before T retires its EV.
    const uint64_t tail_probe_ns = timer_ns(0) / 2;
    if (delivered > e.tx_seq)
      wait_ns = std::min(2 * reorder_ns, std::max(reorder_ns, tail_probe_ns));
    // So does a QP's first RTT window (no previous window's maximum yet): its samples are of
    // its first packets, which found the queues empty, while its first window of data, sent at
    // once, builds the queues that later packets wait in. A fault-free 16-host `mrct sim`
    // permutation (seed 1) resent 19 packets and retired 19 EVs without it; in such runs holes
    // were found lost 15-21 us after their send, 24-43 us into the run, against windows of
    // 15-18 us from RTT maxima of 12-15 us.
    if (delivered == 0 || rtt_max_prev_ns_ == 0 || seg_seq_ == sq_tail_)
      wait_ns = std::max(wait_ns, tail_probe_ns);
    if (now_ns - e.last_tx_ns < wait_ns) {
      gap_deadline_ = std::min(gap_deadline_, e.last_tx_ns + wait_ns);
      continue;
    }
    // A hole on an EV that has delivered nothing sent after it may be behind a queue that grew
    // after the last RTT sample (an ECMP collision) rather than on a failed path: the EV's
    // packets arrive in send order, so the hole is due about as long after the EV's latest
    // delivered packet as it was sent after it, plus as much again for the queue's growth
    // meanwhile, plus the margin; held until then (at most until the tail-probe time). On a
    // failed path that delivered packet is the last one sent before the failure, so the hold
    // adds about one send gap of the EV to finding it. Without the hold, fault-free 16-host
    // `mrct sim` permutations (seeds 2-8) resent 2-29 packets and retired 2-19 EVs: holes
    // found lost 1.14-1.4 x the largest RTT sample after their send, on EVs whose previous
    // packet had arrived after a similar delay.
    if (delivered != 0 && delivered <= e.tx_seq) {
      const EvRecord& d = evs_.at(e.ev);  // delivered != 0: e.ev is one of the QP's EVs
      if (d.delivered_sent_ns <= e.last_tx_ns) {
        const uint64_t gap_ns = e.last_tx_ns - d.delivered_sent_ns;
        const uint64_t until_ns =
            std::min(d.delivered_at_ns + (kHoldGapMult + reo_steps_) * gap_ns +
                         reorder_margin_ns(reorder_ns),
                     e.last_tx_ns + std::max(wait_ns, tail_probe_ns));
        if (now_ns < until_ns) {
          gap_deadline_ = std::min(gap_deadline_, until_ns);
          continue;
        }
      }
    }
    const uint16_t ev = e.ev;
    const bool trimmed = e.flags & TxEntry::kTrimmed;
    mark_lost(p, e, RtxCause::kSackGap);
    lost_any = true;
    if (ep_->cfg.retire_ev_on_sack_gap && !trimmed) demote_ev(ev, now_ns, "sack_gap");
  }
  if (lost_any && cc_) {
    cc_->on_loss(now_ns, 0, false);
    after_cc("loss");
  }
}

bool Qp::answered_after(const TxEntry& e) const {
  return delivered_tx_seq_ > e.tx_seq || answered_tail_probe_sent_ns_ > e.last_tx_ns;
}

void Qp::note_delivered(const TxEntry& e, uint64_t now_ns) {
  delivered_tx_seq_ = std::max(delivered_tx_seq_, e.tx_seq);
  if (e.ev >= evs_.size()) return;
  EvRecord& r = evs_.at(e.ev);
  if (e.tx_seq >= r.delivered_tx_seq) {
    r.delivered_tx_seq = e.tx_seq;
    r.delivered_sent_ns = e.last_tx_ns;
    r.delivered_at_ns = now_ns;
  }
}

uint64_t Qp::reorder_window_ns() const {
  const uint64_t rtt_max = std::max(rtt_max_cur_ns_, rtt_max_prev_ns_);
  if (rtt_max == 0) return 0;  // no RTT sample yet: the count decides alone
  // The margin grows with the spread between the slowest path and the average: the slowest
  // path's own delay varies the most (its queue is the one that differs).
  // RACK's reo_wnd_mult: each spurious resend widens the margin by one more quarter.
  return rtt_max +
         std::max(srtt_ns_, rtt_max > srtt_ns_ ? rtt_max - srtt_ns_ : 0) / 4 * (1 + reo_steps_);
}

uint64_t Qp::reorder_margin_ns(uint64_t reorder_ns) const {
  const uint64_t rtt_max = std::max(rtt_max_cur_ns_, rtt_max_prev_ns_);
  return reorder_ns > rtt_max ? reorder_ns - rtt_max : 0;
}

void Qp::note_if_spurious(const TxEntry& e, uint64_t now_ns) {
  if (e.cause != RtxCause::kSackGap) return;
  // The arrival reported now is the original's, not the resend's, when the resend has not left
  // yet or left less than the shortest RTT ever seen ago (RACK's DSACK, Eifel's timing test):
  // the hole was reordering, not loss, and the window was too short.
  const bool spurious = (e.flags & TxEntry::kRtxQueued) ||
                        (rtt_min_ns_ != UINT64_MAX && now_ns - e.last_tx_ns < rtt_min_ns_);
  if (!spurious) return;
  if (reo_steps_ < kMaxReoSteps) ++reo_steps_;
  reo_clean_rounds_ = 0;
}

void Qp::note_reo_round() {
  // Once per round trip (a packet sent after the round began was delivered): a round with no
  // spurious resend counts towards shrinking the window back, one step per 16 such rounds.
  if (delivered_tx_seq_ <= reo_round_tx_seq_) return;
  reo_round_tx_seq_ = tx_seq_;
  if (reo_steps_ == 0) return;
  if (++reo_clean_rounds_ >= kReoCleanRounds) {
    --reo_steps_;
    reo_clean_rounds_ = 0;
  }
}

void Qp::note_rtt_sample(uint64_t rtt_ns, uint64_t now_ns) {
  const uint64_t window = std::max<uint64_t>(4 * srtt_ns_, 8'000);
  if (now_ns - rtt_window_start_ns_ >= window) {
    rtt_max_prev_ns_ = rtt_max_cur_ns_;
    rtt_max_cur_ns_ = 0;
    rtt_window_start_ns_ = now_ns;
  }
  rtt_max_cur_ns_ = std::max(rtt_max_cur_ns_, rtt_ns);
  rtt_min_ns_ = std::min(rtt_min_ns_, rtt_ns);
}

void Qp::after_cc(std::string_view reason) {
  if (!cc_) return;
  const uint64_t cw = cc_->cwnd_bytes();
  const uint64_t diff = cw > last_cwnd_logged_ ? cw - last_cwnd_logged_ : last_cwnd_logged_ - cw;
  if (diff == 0) return;
  if (diff < attr_.path_mtu && reason == "sack") return;  // log meaningful moves only
  last_cwnd_logged_ = cw;
  if (ep_->logging()) {
    Event e = ep_->event(EventKind::kCwnd, qpn_);
    e.u("cwnd", cw).u("bytes_in_flight", bytes_in_flight_).s("reason", reason);
    ep_->emit(e);
  }
}

const SendWqe* Qp::wqe_of_psn(uint32_t psn) const {
  for (uint64_t seq = sq_head_; seq < sq_tail_; ++seq) {
    const SendWqe& w = sq_[seq % sq_.size()];
    if (seq > seg_seq_ || (seq == seg_seq_ && seg_pkt_ == 0)) break;  // not sent yet
    if (psn_le(w.first_psn, psn) && psn_le(psn, w.last_psn())) return &w;
  }
  return nullptr;
}

void Qp::complete_acked(uint32_t ack_psn) {
  bool progressed = false;
  while (sq_head_ < seg_seq_) {
    const SendWqe& w = wqe_at(sq_head_);
    if (!psn_le(w.last_psn(), ack_psn)) break;
    complete_send(w, WcStatus::kSuccess, false);
    ++sq_head_;
    progressed = true;
  }
  if (progressed) {
    ack_wait_retries_ = 0;
    ack_wait_deadline_ = UINT64_MAX;
    resend_for_ack_ = false;
  }
}

void Qp::check_ack_wait(uint64_t now_ns) {
  if (sq_head_ >= seg_seq_) {
    ack_wait_deadline_ = UINT64_MAX;
    return;
  }
  const SendWqe& w = wqe_at(sq_head_);
  if (psn_le(w.last_psn(), cack_seen_)) {
    // Every PSN of the oldest message arrived but its transport ACK has not.
    if (ack_wait_deadline_ == UINT64_MAX) ack_wait_deadline_ = now_ns + timer_ns(ack_wait_retries_);
  } else {
    ack_wait_deadline_ = UINT64_MAX;
  }
}

void Qp::on_sack(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns) {
  if (state_ != QpState::kRts) {
    ++ep_->stats.rx_wrong_state;
    return;
  }
  const wire::Seth& s = f.seth;
  ++st_.sacks_rx;
  const uint32_t cack = s.cack_psn;
  if (psn_lt(cack_seen_, cack) && !psn_lt(cack, snd_nxt_)) {
    ++st_.stale_rx;  // acknowledges PSNs never sent: ignore the whole SACK
    return;
  }
  const int ev = evs_.find_wev(s.entropy);
  if (ev < 0) {
    // A SACK echoes the WEV of the data packet or probe that triggered it, always one of ours:
    // any other carries no trustworthy window, port status, MPR or CC state.
    ++st_.stale_rx;
    return;
  }
  if (ev >= 0) evs_.at(static_cast<uint32_t>(ev)).last_echo_ns = now_ns;
  heard_from_peer(now_ns);

  uint64_t newly = 0;
  if (psn_lt(cack_seen_, cack)) advance_cack(cack, newly, now_ns);
  bool sacked_new = false;
  if (s.sack_offset >= 1 && s.sack_bitmap != 0) {
    const uint32_t base = psn_add(cack, s.sack_offset);
    for (uint32_t i = 0; i < 64; ++i) {
      if (((s.sack_bitmap >> i) & 1u) == 0) continue;
      const uint32_t p = psn_add(base, i);
      if (!psn_lt(cack_seen_, p)) continue;
      if (!psn_lt(p, snd_nxt_)) {
        ++st_.stale_rx;  // bits beyond what was sent carry no information
        break;
      }
      TxEntry& e = tx_[p & tx_mask_];
      if (!(e.flags & TxEntry::kLive) || (e.flags & TxEntry::kSacked)) continue;
      e.flags |= TxEntry::kSacked;
      note_if_spurious(e, now_ns);
      newly += e.nominal;
      note_delivered(e, now_ns);
      // A first transmission's SACK times its path (an upper bound: the SACK may have waited
      // for others); the echoed timestamp times only the packet that triggered the SACK, and
      // on a slow path that may be none for a while.
      if (e.cause == RtxCause::kNone && e.retries == 0)
        note_rtt_sample(now_ns - e.last_tx_ns, now_ns);
      if (e.flags & TxEntry::kInFlight) {
        bytes_in_flight_ = sub_floor(bytes_in_flight_, e.nominal);
        e.flags &= static_cast<uint8_t>(~TxEntry::kInFlight);
      }
      if (!have_sacked_ || psn_lt(highest_sacked_, p)) {
        highest_sacked_ = p;
        have_sacked_ = true;
      }
      sacked_new = true;
    }
  }
  note_reo_round();

  const auto m = static_cast<wire::SackM>(s.m);
  bool probe_answered = false;  // the answer to a probe of ours that is still outstanding
  if (s.pr) {
    ++st_.probe_sacks_rx;
    const auto probe_id = static_cast<uint16_t>(s.ack_psn_offset);
    if (tlp_probe_sent_ns_ != 0 && probe_id == tlp_probe_id_) {
      answered_tail_probe_sent_ns_ = std::max(answered_tail_probe_sent_ns_, tlp_probe_sent_ns_);
      probe_answered = true;
    }
    if (ev >= 0) {
      EvRecord& r = evs_.at(static_cast<uint32_t>(ev));
      if (r.state == EvState::kAssumedBad && r.probe_outstanding && r.probe_id == probe_id) {
        probe_answered = true;
        r.probe_outstanding = false;
        const char* result = "bad";
        if (m == wire::SackM::kNone) {
          ++r.good_probes;
          result = "good";
          if (r.good_probes >= ep_->cfg.k_recover)
            evs_.recover(static_cast<uint32_t>(ev), EvState::kGood, now_ns, "probes_good");
        } else if (m == wire::SackM::kSkipOnce) {
          result = "ce";
          evs_.recover(static_cast<uint32_t>(ev), EvState::kSkip, now_ns, "probe_ce");
        } else {
          r.good_probes = 0;
        }
        // A demotion the floor held back may have gone through: its probes start now.
        probe_check_ns_ = std::min(probe_check_ns_, now_ns);
        if (ep_->logging()) {
          Event e = ep_->event(EventKind::kProbe, qpn_);
          e.u("wev", r.wev)
              .u("probe_id", probe_id)
              .s("result", result)
              .u("good_probes", r.good_probes);
          ep_->emit(e);
        }
      }
    }
  } else if (ev >= 0) {
    const auto idx = static_cast<uint32_t>(ev);
    switch (m) {
      case wire::SackM::kNone: {
        const uint8_t p = evs_.at(idx).port;
        const int cur = p <= kMaxPorts ? reverse_ev_[p] : -1;
        if (cur < 0 || evs_.at(static_cast<uint32_t>(cur)).state != EvState::kGood)
          adopt_reverse_ev(p, ev, "data_sack");
        break;
      }
      case wire::SackM::kSkipOnce:
        evs_.skip(idx, now_ns, "sack_ce");
        break;
      case wire::SackM::kAlwaysSkip:
        demote_ev(static_cast<uint16_t>(idx), now_ns, "sack_always_skip");
        break;
      case wire::SackM::kInvalid:
        break;
    }
  }

  std::optional<uint64_t> rtt;
  if (f.has(wire::kHdrCcState)) {
    const uint16_t ticks = static_cast<uint16_t>(Endpoint::Impl::ts16(now_ns) - f.cc_state.ts_echo);
    rtt = uint64_t{ticks} << 7;
    last_rtt_ns_ = *rtt;
    srtt_ns_ = srtt_ns_ == 0 ? *rtt : (7 * srtt_ns_ + *rtt) / 8;
    note_rtt_sample(*rtt, now_ns);
  }
  if (s.psv) {
    // SACK port_status bit i is port i+1; ports above 8 keep what the last update said.
    auto it = ep_->peer_port_mask.find(attr_.dgid);
    const uint32_t peer_old = it != ep_->peer_port_mask.end() ? it->second : 0xFFFFFFFEu;
    const uint32_t mask = (peer_old & ~0x1FEu) | (uint32_t{s.port_status} << 1);
    ep_->set_peer_ports(attr_.dgid, mask, port, "sack");
  }
  if ((mrc_.cap & kCapDynamicMpr) && s.mpr != 0) {
    const uint32_t want = std::min(mpr_negotiated_, uint32_t{s.mpr} * kMprUnitPsns);
    if (want != mpr_eff_) {
      mpr_eff_ = want;
      Event e = ep_->event(EventKind::kMpr, qpn_);
      e.u("mpr_psns", mpr_eff_).s("reason", "sack");
      ep_->emit(e);
    }
  }
  if (cc_) {
    CcAckSample sample;
    sample.now_ns = now_ns;
    sample.newly_acked_bytes = newly;
    // NSCC takes the echoed timestamp as a delay sample only from a SACK that acknowledges
    // something new or answers a probe of ours still outstanding (Karn's rule, RFC 6298 section 3).
    // One that answers a duplicate (a spurious resend, or an attacker's replay of an old data
    // packet) echoes whatever timestamp that packet carried, any 16-bit tick: believed, a large one
    // read as queueing and a small one lowered NSCC's base RTT for good, so that every real sample
    // after it read as queueing; four replays shrank the window to about one packet
    // (Validation.SackToAReplayedDataPacketDoesNotDriveCongestionControl), and an old-psn flood
    // held goodput at 0.85x flood-free with the client waiting, not busy. srtt and the loss timers'
    // RTT maximum keep every sample: a SACK overtaken by a later one on another plane also
    // acknowledges nothing new, and its delay is the reordering those timers must allow for
    // (without it, fault-free mrct sim runs resent spuriously). A replay can stretch them, by at
    // most the 8.4 ms the 16-bit echo spans, which delays loss detection but not the window.
    sample.rtt_ns = newly != 0 || sacked_new || probe_answered ? rtt : std::nullopt;
    sample.ecn = m == wire::SackM::kSkipOnce;
    sample.rcv_cwnd_pen = f.cc_state.rcv_cwnd_pen;
    sample.restore_cwnd = f.cc_state.rc;
    sample.bytes_in_flight = bytes_in_flight_;
    cc_->on_ack(sample);
    after_cc("sack");
  }
  if (sacked_new && ep_->rx_batch_open) {
    // The rest of the batch may fill the holes this SACK shows: judge them at its end. The
    // deadline keeps the scan due should the batch never be closed.
    if (!gap_scan_deferred_) ep_->gap_scan_deferred.push_back(qpn_);
    gap_scan_deferred_ = true;
    gap_deadline_ = std::min(gap_deadline_, now_ns);
  } else if (sacked_new) {
    gap_scan(now_ns);
  }
  if (newly != 0) arm_tail_probe(now_ns);
  check_ack_wait(now_ns);
}

void Qp::on_nack(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns) {
  (void)port;
  if (state_ != QpState::kRts) {
    ++ep_->stats.rx_wrong_state;
    return;
  }
  const wire::Neth& n = f.neth;
  const uint32_t psn = n.nack_psn;
  ++st_.nacks_rx;
  // Every NACK code, UNEXP_EVENT included, must name a PSN sent and not yet covered by a SACK,
  // with the WEV of its latest transmission: anything else is stale or spoofed and changes
  // nothing (a QPN and a peer GID are easy to learn; an outstanding PSN and its EV are not).
  TxEntry* e = entry(psn);
  if (e == nullptr || (e->flags & TxEntry::kSacked) || e->wev != n.entropy) {
    ++st_.stale_rx;
    if (n.nack_code == static_cast<uint8_t>(wire::NackCode::kUnexpEvent)) {
      ++st_.fatal_rejected;
      if (ep_->logging()) {
        Event d = ep_->event(EventKind::kDrop, qpn_);
        d.s("reason", "unexp_event_not_outstanding").u("psn", psn).u("wev", n.entropy);
        ep_->emit(d);
      }
    }
    return;
  }
  heard_from_peer(now_ns);
  const int ev = evs_.find_wev(n.entropy);
  if (ev >= 0) evs_.at(static_cast<uint32_t>(ev)).last_echo_ns = now_ns;
  if (ep_->logging()) {
    Event rx = ep_->event(EventKind::kNackRx, qpn_);
    rx.u("psn", psn)
        .u("code", n.nack_code)
        .s("code_name", wire::nack_code_name(n.nack_code))
        .u("wev", n.entropy);
    ep_->emit(rx);
  }
  const auto code = static_cast<wire::NackCode>(n.nack_code);
  if (code == wire::NackCode::kUnexpEvent) {
    // Not retried: the responder cannot continue this QP (remote operation error).
    to_error("nack_unexp_event", wqe_of_psn(psn), WcStatus::kRemOpErr, std::nullopt);
    return;
  }
  if (!(e->flags & TxEntry::kInFlight)) {
    ++st_.stale_rx;  // already declared lost: about an earlier transmission
    return;
  }
  RtxCause cause = RtxCause::kNone;
  switch (code) {
    case wire::NackCode::kTrimmed:
      // Congestion on this path, not failure: skip the EV for a rotation (MRP0 C.5).
      if (ev >= 0) evs_.skip(static_cast<uint32_t>(ev), now_ns, "nack_trimmed");
      if (cc_) cc_->on_trim(now_ns, e->nominal, false);
      e->flags |= TxEntry::kTrimmed;
      cause = RtxCause::kNackTrim;
      break;
    case wire::NackCode::kTrimmedLastHop:
      if (cc_) cc_->on_trim(now_ns, e->nominal, true);
      e->flags |= TxEntry::kTrimmed;
      cause = RtxCause::kNackTrimLastHop;
      break;
    case wire::NackCode::kNoBitmap:
    case wire::NackCode::kNoPktBuffer:
    case wire::NackCode::kNoResource:
    case wire::NackCode::kPsnOorWindow:
      if (!retry_budget_left(e->retries)) {
        to_error("retry_exceeded", &wqe_at(e->wqe_seq), WcStatus::kRetryExcErr, std::nullopt);
        return;
      }
      ++e->retries;
      cause = RtxCause::kNackResource;
      if (code == wire::NackCode::kPsnOorWindow) {
        // The responder's window is smaller than ours: stay below this PSN from now on.
        const uint32_t d = psn_diff(psn, cack_seen_);
        const uint32_t want = std::max<uint32_t>(1, std::min(mpr_eff_, d > 1 ? d - 1 : 1));
        if (want != mpr_eff_) {
          mpr_eff_ = want;
          Event me = ep_->event(EventKind::kMpr, qpn_);
          me.u("mpr_psns", mpr_eff_).s("reason", "nack_psn_oor_window");
          ep_->emit(me);
        }
      }
      break;
    default:
      ++st_.stale_rx;  // not an MRP0 NACK code
      return;
  }
  if (n.m == static_cast<uint8_t>(wire::SackM::kSkipOnce) && code != wire::NackCode::kTrimmed &&
      ev >= 0)
    evs_.skip(static_cast<uint32_t>(ev), now_ns, "nack_ce");
  mark_lost(psn, *e, cause);
  after_cc("nack");
}

void Qp::on_transport_ack(const wire::DecodedFrame& f, uint8_t port, uint64_t now_ns) {
  (void)port;
  if (state_ != QpState::kRts) {
    ++ep_->stats.rx_wrong_state;
    return;
  }
  ++st_.acks_rx;
  const uint8_t syndrome = f.aeth.syndrome;
  const uint32_t psn = f.bth.psn;
  const uint8_t kind = (syndrome >> 5) & 3;
  if (kind == 0) {
    if (!psn_lt(psn, snd_nxt_)) {
      ++st_.stale_rx;
      return;
    }
    heard_from_peer(now_ns);
    if (psn_lt(cack_seen_, psn)) {
      // "Received and placed" implies received: the window may advance too.
      uint64_t newly = 0;
      advance_cack(psn, newly, now_ns);
      if (cc_ && newly != 0) {
        CcAckSample sample;
        sample.now_ns = now_ns;
        sample.newly_acked_bytes = newly;
        sample.bytes_in_flight = bytes_in_flight_;
        cc_->on_ack(sample);
        after_cc("ack");
      }
    }
    complete_acked(psn);
    check_ack_wait(now_ns);
    return;
  }
  if (kind == 3) {
    const uint8_t code = syndrome & 0x1F;
    WcStatus status = WcStatus::kRemOpErr;
    if (code == 1)
      status = WcStatus::kRemInvReqErr;
    else if (code == 2)
      status = WcStatus::kRemAccessErr;
    else if (code != 3) {
      ++st_.stale_rx;  // PSN sequence error / invalid RD request do not exist in MRC
      return;
    }
    // Only a PSN already sent, of a work request not yet completed: a NAK about anything else
    // is stale or spoofed and must not fail the QP.
    const SendWqe* w = psn_lt(psn, snd_nxt_) ? wqe_of_psn(psn) : nullptr;
    if (w == nullptr) {
      ++st_.stale_rx;
      ++st_.fatal_rejected;
      if (ep_->logging()) {
        Event d = ep_->event(EventKind::kDrop, qpn_);
        d.s("reason", "nak_not_outstanding").u("psn", psn).u("syndrome", syndrome);
        ep_->emit(d);
      }
      return;
    }
    to_error(
        code == 1 ? "nak_invalid_request" : (code == 2 ? "nak_remote_access" : "nak_remote_op"), w,
        status, std::nullopt);
    return;
  }
  ++st_.stale_rx;  // RNR NAK: MRC has no RNR
}

void Qp::on_ep_probe_response(uint8_t port, int ev_idx, uint64_t rtt_ns) {
  if (ev_idx < 0 || static_cast<size_t>(ev_idx) >= evs_.size()) return;
  if (srtt_ns_ == 0) srtt_ns_ = rtt_ns;
  adopt_reverse_ev(port, ev_idx, "ev_probe");
}

void Qp::requester_timer(uint64_t now_ns) {
  if (tx_deadline_ <= now_ns) {
    uint64_t next = UINT64_MAX;
    bool any = false;
    for (uint32_t p = psn_add(cack_seen_, 1); psn_lt(p, snd_nxt_); p = psn_add(p, 1)) {
      TxEntry& e = tx_[p & tx_mask_];
      if (!(e.flags & TxEntry::kLive) || (e.flags & TxEntry::kSacked)) continue;
      if (!(e.flags & (TxEntry::kInFlight | TxEntry::kRtxQueued))) continue;
      if (e.deadline_ns <= now_ns) {
        // A first timeout while the peer has left what it could answer unanswered for T/2 or
        // more (peer_silent) is held while the silence lasts, up to silent_peer_grace_ns
        // (engine.h says why). T/2 is the tail-probe time: a live peer has answered the tail
        // probe by now, so a tail loss on a working peer still times out at T. (Measured from
        // its last answer instead, the tail probe's own answer read as the end of a silence
        // and the timeout of a tail lost on one EV waited T + grace.)
        // So is a first timeout while the peer has answered nothing sent after the packet (no
        // data packet sent later delivered on any EV, no later tail probe answered): the peer
        // may have answered older packets just after this one left and then stopped (its
        // process, or the host's packet processing, not scheduled), and the silence, counted
        // from the tail probe, is short of T/2 when T comes. all-to-all under a busy loop
        // (seed 3, QP 259) retired an EV that way: the responder's SACKs for older packets
        // came 7 ms late, then it answered nothing for 19 ms, and nothing was lost. A timeout
        // while packets sent after it are answered still fires at T; one that does fire
        // retires its EV (R40).
        const uint64_t grace = ep_->cfg.silent_peer_grace_ns;
        if (grace > 0 && e.retries == 0) {
          if ((peer_silent(now_ns) || !answered_after(e)) && now_ns < e.deadline_ns + grace) {
            if (!silent_hold_) ++st_.silent_peer_holds;
            silent_hold_ = true;
            next = std::min(next, e.deadline_ns + grace);
            continue;
          }
          // Sent before the peer came back from a held silence: T from its return.
          if (e.last_tx_ns < resumed_ns_ && now_ns < resumed_ns_ + timer_ns(0)) {
            next = std::min(next, resumed_ns_ + timer_ns(0));
            continue;
          }
        }
        if (!retry_budget_left(e.retries)) {
          if (ep_->logging()) {
            Event ev = ep_->event(EventKind::kRetransmit, qpn_);
            ev.u("psn", p).s("cause", "retry_exceeded").u("attempt", e.retries);
            ep_->emit(ev);
          }
          to_error("retry_exceeded", &wqe_at(e.wqe_seq), WcStatus::kRetryExcErr, std::nullopt);
          return;
        }
        ++e.retries;
        // A timeout with neither SACK nor trim NACK is the strongest path-failure signal.
        if ((e.flags & TxEntry::kInFlight) && !(e.flags & TxEntry::kTrimmed))
          demote_ev(e.ev, now_ns, "timeout");
        mark_lost(p, e, RtxCause::kTimeout);
        // The retry clock runs even if no EV is usable, so exhaustion still happens on time.
        e.deadline_ns = now_ns + timer_ns(e.retries);
        any = true;
      }
      next = std::min(next, e.deadline_ns);
    }
    tx_deadline_ = next;
    if (any && cc_) {
      cc_->on_loss(now_ns, 0, true);
      after_cc("timeout");
    }
  }
  if (gap_deadline_ <= now_ns) gap_scan(now_ns);  // sets the next one, if any
  if (tlp_deadline_ <= now_ns) {
    tlp_deadline_ = UINT64_MAX;
    if (bytes_in_flight_ > 0 && !tlp_sent_) tlp_pending_ = true;
  }
  if (ack_wait_deadline_ <= now_ns) {
    if (!retry_budget_left(ack_wait_retries_)) {
      to_error("retry_exceeded", &wqe_at(sq_head_), WcStatus::kRetryExcErr, std::nullopt);
      return;
    }
    ++ack_wait_retries_;
    resend_for_ack_ = true;
    ack_wait_deadline_ = now_ns + timer_ns(ack_wait_retries_);
  }
}

}  // namespace mrc::engine
