// Requester rules (MRC-REQ-*, MRC-PRB-001, MRC-CC-001) and the arrival side of data packets,
// judged by reconstructing each QP's PSN window from the data packets and the SACKs.
#include <algorithm>

#include "conformance/internal.h"

namespace mrc::check::detail {
namespace {

using wire::MessagePosition;

bool starts(uint8_t pos) {
  return pos == static_cast<uint8_t>(MessagePosition::kFirst) ||
         pos == static_cast<uint8_t>(MessagePosition::kOnly);
}
bool ends(uint8_t pos) {
  return pos == static_cast<uint8_t>(MessagePosition::kLast) ||
         pos == static_cast<uint8_t>(MessagePosition::kOnly);
}
const char* pos_name(uint8_t pos) {
  switch (static_cast<MessagePosition>(pos)) {
    case MessagePosition::kFirst:
      return "FIRST";
    case MessagePosition::kMiddle:
      return "MIDDLE";
    case MessagePosition::kLast:
      return "LAST";
    case MessagePosition::kOnly:
      return "ONLY";
    default:
      return "?";
  }
}
std::string psn_str(int64_t p) {
  return std::to_string(static_cast<uint32_t>(p) & wire::kPsnMask);
}

// PSN records kept below the cumulative ACK, for late retransmissions and duplicate SACKs.
constexpr int64_t kKeepBehindCack = 8192;
// How far ahead of the window's front the eviction loop prefetches.
constexpr size_t kEvictAhead = 4;

bool valid_pmtu(uint32_t v) {
  return v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096;
}

}  // namespace

// MRC-REQ-008, for a first transmission (RTX=0) of PSN p.
void Engine::mpr_check(const Obs& o, Flow& fl, int64_t p) {
  const uint64_t mpr = mpr_eff(fl);
  std::optional<int64_t> cack = fl.max_cack_ext;
  // A transport ACK (AETH 0x1F) acknowledges every PSN up to its own as well.
  if (fl.saw_tack && (!cack || fl.max_tack_ext > *cack)) cack = fl.max_tack_ext;
  if (!cack && fl.prof.initial_psn) cack = fl.unwrap(*fl.prof.initial_psn) - 1;
  if (mpr == 0) {
    na(REQ_008, "MPR not in the DUT profile (qps[].mpr / mpr_dest)");
  } else if (cack) {
    judge(REQ_008);
    if (p - *cack > static_cast<int64_t>(mpr))
      fail(REQ_008, o,
           "new PSN " + psn_str(p) + " sent with cack_seen <= " + psn_str(*cack) +
               ": p - cack = " + std::to_string(p - *cack) + " > MPR_eff " + std::to_string(mpr));
  }
}

void Engine::on_data(Obs& o, Flow& fl) {
  const wire::DecodedFrame& f = *o.f;
  // A copy trimmed below BTH+METH+TSETH is judged by MRC-FRM-011 only: it no longer matches
  // its original, and the responder cannot NACK it.
  if (!f.has(wire::kHdrMeth)) return;
  if (f.trimmed && f.off_udp != 0xFFFF &&
      f.frame.size() - f.off_udp - 8 < wire_profile->min_trim_bytes())
    return;
  const int64_t p = fl.unwrap(f.bth.psn);
  if (!o.first) {
    PsnRec* r = fl.rec(p);
    if (!r) return;
    if (Tx* tx = r->find(o.pkt)) data_arrival(o, fl, p, *r, *tx);
    return;
  }
  fl.data_packets++;
  fl.all_wevs[o.wev] = true;
  const auto pos = f.op->position;
  const bool last_or_only = pos == MessagePosition::kLast || pos == MessagePosition::kOnly;
  const bool sender_view = o.at_src || !requester_captured(fl);

  // MRC-REQ-006: A on the last packet of a message.
  if (last_or_only) {
    judge(REQ_006);
    if (!f.bth.ack_req)
      fail(REQ_006, o,
           std::string(f.op->name) + " PSN " + psn_str(p) +
               " has A=0; A=1 is required "
               "on the last packet of every message");
  }
  // MRC-REQ-007: DSCP of data. A trimmed copy seen after a switch carries the switch's DSCP.
  if (!o.trimmed || o.at_src) {
    judge(REQ_007);
    const uint8_t d = f.dscp();
    const auto& pl = prof.dscp;
    // A copy of a PSN sent before is a retransmission even with RTX=0 (MRC-REQ-004 judges the
    // flag).
    const PsnRec* known = f.bth.rtx ? nullptr : fl.rec(p);
    const bool retx = f.bth.rtx || (known && known->tx_count > 0);
    const bool ok = retx ? (d == pl.trimmable_retx || d == pl.trimmable || d == pl.no_trim)
                         : (d == pl.trimmable || d == pl.no_trim);
    if (!ok)
      fail(REQ_007, o,
           std::string(retx ? "retransmission" : "first transmission") + " of PSN " + psn_str(p) +
               " uses DSCP " + std::to_string(d) + "; allowed " +
               (retx ? std::to_string(pl.trimmable_retx) + ", " : std::string()) +
               std::to_string(pl.trimmable) + " or " + std::to_string(pl.no_trim));
  }
  // MRC-REQ-010: TSETH on every data packet.
  judge(REQ_010);
  if (!f.bth.ts || !f.has(wire::kHdrTseth))
    fail(REQ_010, o, "data PSN " + psn_str(p) + " has no TSETH (BTH.TS=0)");
  // MRC-REQ-012: nothing after a fatal error reached the requester.
  if (fl.fatal_ts != kNoTime && sender_view) {
    judge(REQ_012);
    if (o.ts > fl.fatal_ts + prof.tol.reaction_ns)
      fail(REQ_012, o,
           "data PSN " + psn_str(p) + " sent " + std::to_string(o.ts - fl.fatal_ts) +
               " ns after a fatal NACK/NAK reached the requester");
  }

  PsnRec* r = fl.rec_create(p);
  if (!r) {
    // Too far from the window to keep a record (a wild PSN): the MPR window is still judged.
    if (!f.bth.rtx && fl.have_src_data && p > fl.highest_src_ext && sender_view)
      mpr_check(o, fl, p);
    return;
  }
  const bool seen_before = r->tx_count > 0;
  if (!r->seen) {
    r->seen = true;
    r->pos = static_cast<uint8_t>(pos);
    r->imm = f.op->has_imm;
    r->msn = f.meth.msn;
    r->rqmsn = f.meth.rqmsn;
    r->first_point = o.point;
    r->first_frame = o.frame_no;
    r->gap_pending = false;
  }
  if (!seen_before)
    new_psn_checks(o, fl, p, *r);
  else
    retx_checks(o, fl, p, *r);

  // Record the transmission.
  Tx& tx = r->push(fl.tx_pool);
  tx.pkt = o.pkt;
  tx.ts = o.ts;
  tx.point = o.point;
  tx.frame = o.frame_no;
  tx.wev = o.wev;
  tx.rtx = f.bth.rtx;
  tx.at_src = o.at_src;
  if (!parked.empty()) unpark_decisions(fl, p, tx);
  r->tx_count++;
  if (seen_before) fl.retransmissions++;

  ev_on_data(o, fl, p, !seen_before);

  // MRC-REQ-010: ts16 order per sending port, at the requester's own interface only (a link can
  // reorder: an emulated one across CPUs).
  if (o.at_src && !o.own_iface)
    na(REQ_010, "order needs a capture on the requester's own interface");
  if (o.at_src && o.own_iface && f.has(wire::kHdrTseth)) {
    // The map entry of the port the last data packet left on, cached (map nodes do not move).
    std::pair<uint16_t, uint64_t>* last = ts16_cache.value;
    bool known =
        last != nullptr && ts16_cache.point == o.point && same_addr(ts16_cache.addr, o.src);
    if (!known) {
      auto [it, fresh] = ts16_last.try_emplace(std::make_pair(o.point, o.src));
      last = &it->second;
      known = !fresh;
      ts16_cache = {o.point, o.src, last};
    }
    if (known && o.ts - last->second < 4'000'000) {
      judge(REQ_010);
      const uint16_t back = static_cast<uint16_t>(last->first - f.tseth.ts16);
      const uint16_t fwd = static_cast<uint16_t>(f.tseth.ts16 - last->first);
      if (fwd >= 0x8000 && back != 0)
        fail(REQ_010, o,
             "ts16 went back from " + std::to_string(last->first) + " to " +
                 std::to_string(f.tseth.ts16) + " on this port");
    }
    *last = {f.tseth.ts16, o.ts};
  }

  data_arrival(o, fl, p, *r, tx);

  // Keep the window bounded: drop PSNs well behind the cumulative ACK.
  while (!fl.win.empty() &&
         (fl.win.size() > 65536 ||
          (fl.max_cack_ext && fl.base_ext + kKeepBehindCack < *fl.max_cack_ext))) {
    evict(fl, fl.win.front(), fl.base_ext);
    fl.win.front().release(fl.tx_pool);
    fl.win.pop_front();
    fl.base_ext++;
    // The front moves one PSN per new PSN, kKeepBehindCack behind the traffic: its lines are
    // long out of cache. Fetch the record evicted a few packets from now: both of its lines
    // (release() reads `ext`, in the second).
    if (fl.win.size() > kEvictAhead) {
      const auto* ahead = reinterpret_cast<const char*>(&fl.win[kEvictAhead]);
      __builtin_prefetch(ahead);
      __builtin_prefetch(ahead + 64);
    }
  }
}

void Engine::new_psn_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r) {
  const wire::DecodedFrame& f = *o.f;
  // MRC-REQ-004: RTX=1 on a PSN never sent. Only the requester's own capture can tell, and only
  // beyond the highest PSN it has shown (earlier PSNs may have left on an uncaptured path).
  if (f.bth.rtx) {
    if (o.at_src && fl.have_src_data && p > fl.highest_src_ext) {
      judge(REQ_004);
      fail(REQ_004, o,
           "PSN " + psn_str(p) +
               " has RTX=1 but was never transmitted before (highest "
               "PSN so far " +
               psn_str(fl.highest_src_ext) + ")");
    }
  } else {
    judge(REQ_004);
  }
  // MRC-REQ-001: skipped PSNs, as seen at the requester.
  if (o.at_src) {
    if (fl.have_src_data && p > fl.highest_src_ext + 1) {
      const int64_t from = std::max(fl.highest_src_ext + 1, p - 4096);
      for (int64_t q = from; q < p; ++q) {
        PsnRec* g = fl.rec_create(q);
        if (g && !g->seen && !g->acked) {
          g->gap_pending = true;
          PsnExt& x = g->more(fl.tx_pool);
          x.gap_ts = o.ts;
          x.gap_point = o.point;
          x.gap_frame = o.frame_no;
        }
      }
    }
    if (!fl.have_src_data || p > fl.highest_src_ext) fl.highest_src_ext = p;
    fl.have_src_data = true;
  }
  if (!fl.have_data || p > fl.highest_ext) fl.highest_ext = p;
  fl.have_data = true;

  if (!o.trimmed && !f.trimmed && !r.content_known) {
    r.content_known = true;
    r.va = f.reth.va;
    r.rkey = f.reth.rkey;
    r.dma_len = f.reth.dma_len;
    r.payload_len = static_cast<uint32_t>(f.payload.size());
    r.content_hash = frame_content_hash(o);
    r.nominal = f.udp.length + 40u;
  }
  neighbour_checks(o, fl, p, r);

  // MRC-REQ-008: the MPR window.
  if (!f.bth.rtx) mpr_check(o, fl, p);

  // MRC-REQ-009: WriteIMM messages in flight.
  if (!fl.saw_any_data) {
    fl.saw_any_data = true;
    fl.saw_qp_start = (fl.prof.initial_psn && fl.unwrap(*fl.prof.initial_psn) == p) ||
                      (f.meth.msn == 0 && f.meth.rqmsn == 0);
  }
  const auto pos = f.op->position;
  if (f.op->has_imm && (pos == MessagePosition::kLast || pos == MessagePosition::kOnly)) {
    fl.imm_ends.push_back(p);
    while (fl.imm_ends.size() > 65536) fl.imm_ends.pop_front();
    if (fl.saw_tack) std::erase_if(fl.imm_ends, [&](int64_t e) { return e <= fl.max_tack_ext; });
    if (!fl.prof.max_wimm_dest) {
      na(REQ_009, "max_wimm_dest not in the DUT profile");
    } else if (!fl.saw_tack && !fl.saw_qp_start) {
      na(REQ_009, "no transport ACK seen on the QP before its WriteIMM messages");
    } else {
      judge(REQ_009);
      if (fl.imm_ends.size() > *fl.prof.max_wimm_dest)
        fail(REQ_009, o,
             std::to_string(fl.imm_ends.size()) + " WriteIMM messages outstanding (last PSN " +
                 psn_str(p) + "), responder max_wimm_dest is " +
                 std::to_string(*fl.prof.max_wimm_dest));
    }
  }

  // MRC-CC-001: bytes in flight.
  if (r.nominal != 0 && !r.acked) {
    r.inflight = true;
    fl.inflight_bytes += r.nominal;
    fl.max_nominal = std::max(fl.max_nominal, r.nominal);
    if (!fl.prof.max_cwnd_bytes) {
      na(CC_001, "max_cwnd not in the DUT profile");
    } else {
      judge(CC_001);
      if (fl.inflight_bytes > *fl.prof.max_cwnd_bytes + fl.max_nominal)
        fail(CC_001, o,
             std::to_string(fl.inflight_bytes) + " B in flight after PSN " + psn_str(p) +
                 " > max_cwnd " + std::to_string(*fl.prof.max_cwnd_bytes) + " + MTU " +
                 std::to_string(fl.max_nominal));
    }
  }
}

void Engine::retx_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r) {
  const wire::DecodedFrame& f = *o.f;
  const Tx* prev = r.latest();
  // MRC-REQ-004
  judge(REQ_004);
  if (!f.bth.rtx)
    fail(REQ_004, o,
         "PSN " + psn_str(p) + " was transmitted before (frame " + std::to_string(r.first_frame) +
             " of capture " + std::to_string(r.first_point) + ") but has RTX=0");
  // MRC-REQ-005
  if (!o.trimmed && !f.trimmed) {
    const uint64_t h = frame_content_hash(o);
    if (r.content_known) {
      judge(REQ_005);
      if (h != r.content_hash) {
        std::string what;
        if (f.meth.msn != r.msn || f.meth.rqmsn != r.rqmsn) what += " METH";
        if (f.reth.va != r.va || f.reth.rkey != r.rkey || f.reth.dma_len != r.dma_len)
          what += " RETH";
        if (f.payload.size() != r.payload_len) what += " payload length";
        if (what.empty()) what = " payload/ImmDt bytes";
        fail(REQ_005, o,
             "retransmission of PSN " + psn_str(p) + " differs from the original in" + what);
      }
    } else {
      r.content_known = true;
      r.va = f.reth.va;
      r.rkey = f.reth.rkey;
      r.dma_len = f.reth.dma_len;
      r.payload_len = static_cast<uint32_t>(f.payload.size());
      r.content_hash = h;
      r.nominal = f.udp.length + 40u;
      neighbour_checks(o, fl, p, r);
    }
  }
  // Timeout classification: no NACK, SACK progress beyond p or probe answer since the previous
  // transmission, and that transmission was not trimmed.
  // A NACK that reached the requester up to reaction_ns before the previous copy left may have
  // been read after it (the reference ran its timer first and resent on the NACK 75 us later).
  const bool nack_since_prev =
      prev && r.nack_ts != 0 && r.nack_ts + prof.tol.reaction_ns > prev->ts;
  // SACKs for later PSNs since the previous copy: the gap that shows p lost.
  const bool gap_since_prev =
      prev && fl.last_sack_arrival > prev->ts && fl.have_sack_hi && fl.sack_hi_ext > p;
  const bool evidence = prev && (nack_since_prev || gap_since_prev ||
                                 fl.last_pr_sack_arrival > prev->ts || prev->trimmed || r.acked);
  if (prev && !evidence) r.timeout_retries++;
  // MRC-REQ-014: retry budget. Only the retransmission timer spends it: a packet trimmed again
  // and again under congestion is NACKed and resent each time without using up the QP's retries
  // (open question 7 of the research file; the reference engine counts the same way).
  if (fl.prof.retry_linear && fl.prof.retry_exp) {
    if (*fl.prof.retry_exp != 25) {
      judge(REQ_014);
      const unsigned budget = *fl.prof.retry_linear + *fl.prof.retry_exp;
      if (r.timeout_retries > budget)
        fail(REQ_014, o,
             "PSN " + psn_str(p) + " retransmitted " + std::to_string(r.timeout_retries) +
                 " times by timeout (no NACK, SACK or probe evidence); retry budget linear+exp = " +
                 std::to_string(budget));
    }
  } else {
    na(REQ_014, "retry counts not in the DUT profile (qps[].retry)");
  }
  if (prev) {
    if (!evidence) {
      const uint64_t t = timeout_ns(fl);
      const uint64_t interval = o.ts - prev->ts;
      const double min_ns = static_cast<double>(t) * (1.0 - prof.tol.timer_tolerance) -
                            static_cast<double>(prof.tol.timer_slack_ns);
      if (t == 0) {
        na(REQ_013, "timeout not in the DUT profile (qps[].timeout)");
      } else if (o.at_src && prev->at_src && o.own_iface && prev->point < points.size() &&
                 !points[prev->point].info.link_side) {
        judge(REQ_013);
        if (static_cast<double>(interval) < min_ns)
          fail(REQ_013, o,
               "PSN " + psn_str(p) + " retransmitted " + std::to_string(interval) +
                   " ns after its previous transmission with no NACK/SACK/probe "
                   "evidence; timeout T = " +
                   std::to_string(t) + " ns");
      } else {
        na(REQ_013, "needs a capture at the requester's interface");
      }
      if (t == 0 || static_cast<double>(interval) >= min_ns)
        ev_timeout_retire(
            o, fl, prev->wev,
            t == 0 ? o.ts
                   : std::min(o.ts, prev->ts + static_cast<uint64_t>(std::max(0.0, min_ns))));
    } else if (!nack_since_prev && !prev->trimmed && !r.acked) {
      // Only SACKs (or probe answers) for other PSNs: a requester acting on the gap they show
      // does so within about an RTT, so a retransmission a whole timeout T after the previous
      // one is its timeout (MRC-EV-009).
      const uint64_t t = timeout_ns(fl);
      const double min_ns = static_cast<double>(t) * (1.0 - prof.tol.timer_tolerance) -
                            static_cast<double>(prof.tol.timer_slack_ns);
      // Sooner than T after SACKs for later PSNs, the requester read the gap as a loss: an
      // untrimmed loss retires the EV all the same (PAPER section 2.1). A probe answer alone
      // shows no gap.
      if (t != 0 && static_cast<double>(o.ts - prev->ts) >= min_ns) {
        uint64_t decided = std::min(o.ts, prev->ts + static_cast<uint64_t>(std::max(0.0, min_ns)));
        // Unless the requester probed the EV after the lost copy left and SACKs showed the gap:
        // it read the gap as the loss and retired the EV then (it probes only EVs it holds
        // retired), and the resend came a T later only because its congestion window held it.
        // The reference did so under a busy loop (cwnd 4.6 kB, the one packet in flight lost
        // too: the resend waited 11 ms, until that packet's own timeout), and a probe answer
        // after that probe had already ended the retirement: false MRC-EV-009 in ci-fast.
        if (gap_since_prev)
          if (const EvState* st = fl.find_ev(prev->wev))
            if (const uint64_t probed = st->first_probe_after(prev->ts); probed != 0)
              decided = std::min(decided, probed);
        ev_timeout_retire(o, fl, prev->wev, decided);
      } else if (gap_since_prev) {
        // Decided when a SACK showed the gap, which may have come before a probe answer for the
        // EV that the resend follows: an answer after the lost copy ends that retirement.
        ev_timeout_retire(o, fl, prev->wev, prev->ts);
      }
    }
  }
  // Obligations met by this retransmission.
  if (auto it = fl.nack_retx.find(p); it != fl.nack_retx.end() && o.ts > it->second.since) {
    judge(REQ_011);
    if (fl.active_evs() >= 2 || fl.all_wevs.size() >= 2) {
      judge(EV_013);
      // A NACK for an older copy than the latest one (sent before the NACK arrived) is stale:
      // what follows is no reaction to it.
      if (o.wev == it->second.ev && prev && prev->wev == it->second.ev)
        ev_suspect(o, fl, EV_013,
                   "retransmission of PSN " + psn_str(p) + " after a NACK uses the NACKed EV " +
                       hex(o.wev));
    }
    fl.nack_retx.erase(it);
  }
  if (auto it = fl.drop_retx.find(p); it != fl.drop_retx.end() && o.ts > it->second.since) {
    judge(REQ_015);
    fl.drop_retx.erase(it);
  }
}

void Engine::neighbour_checks(const Obs& o, Flow& fl, int64_t p, PsnRec& r) {
  const wire::DecodedFrame& f = *o.f;
  // MRC-REQ-002 per packet: RETH present, payload sizes against PMTU, message end.
  if (r.content_known && !o.trimmed && !f.trimmed) {
    judge(REQ_002);
    if (!f.has(wire::kHdrReth)) fail(REQ_002, o, "data PSN " + psn_str(p) + " has no RETH");
    const uint8_t pos = r.pos;
    if (!starts(pos) || !ends(pos)) {
      if (!ends(pos)) {
        if (fl.pmtu == 0) {
          if (valid_pmtu(r.payload_len))
            fl.pmtu = r.payload_len;
          else
            fail(REQ_002, o,
                 std::string(pos_name(pos)) + " PSN " + psn_str(p) + " carries " +
                     std::to_string(r.payload_len) + " B, not a valid PMTU");
        } else if (r.payload_len != fl.pmtu) {
          fail(REQ_002, o,
               std::string(pos_name(pos)) + " PSN " + psn_str(p) + " carries " +
                   std::to_string(r.payload_len) + " B; PMTU is " + std::to_string(fl.pmtu));
        }
      }
    }
    if (starts(pos) && ends(pos)) {
      if (r.payload_len != r.dma_len)
        fail(REQ_002, o,
             "ONLY PSN " + psn_str(p) + " carries " + std::to_string(r.payload_len) +
                 " B but DMALen is " + std::to_string(r.dma_len));
    } else if (starts(pos)) {
      MsgRec& m = fl.msgs[r.msn];
      m.first_psn = p;
      m.va_first = r.va;
      m.first_known = true;
      if (fl.msgs.size() > 4096) fl.msgs.erase(fl.msgs.begin());
    } else if (ends(pos)) {
      auto it = fl.msgs.find(r.msn);
      if (it != fl.msgs.end() && it->second.first_known && p > it->second.first_psn) {
        const MsgRec& m = it->second;
        if (r.va + r.payload_len != m.va_first + r.dma_len)
          fail(REQ_002, o,
               "LAST PSN " + psn_str(p) + " ends at VA " + hex(r.va + r.payload_len) +
                   " but the message (FIRST VA " + hex(m.va_first) + ", DMALen " +
                   std::to_string(r.dma_len) + ") ends at " + hex(m.va_first + r.dma_len));
        else if (fl.pmtu && r.va - m.va_first != static_cast<uint64_t>(p - m.first_psn) * fl.pmtu)
          fail(REQ_002, o,
               "LAST PSN " + psn_str(p) + " is " + std::to_string(p - m.first_psn) +
                   " packets after FIRST but its VA is " + std::to_string(r.va - m.va_first) +
                   " B after FIRST's");
      }
    }
  }
  // Pairs (p-1, p) and (p, p+1): opcode adjacency, MSN/RQMSN, RETH progression.
  auto pair = [&](int64_t a, PsnRec& A, PsnRec& B) {
    judge(REQ_001);
    if (ends(A.pos) != starts(B.pos)) {
      fail(REQ_001, o,
           "PSN " + psn_str(a) + " is " + pos_name(A.pos) + " but PSN " + psn_str(a + 1) + " is " +
               pos_name(B.pos));
      return;
    }
    judge(REQ_003);
    if (!starts(B.pos)) {
      if (A.msn != B.msn || A.rqmsn != B.rqmsn)
        fail(REQ_003, o,
             "PSNs " + psn_str(a) + " and " + psn_str(a + 1) +
                 " are in one message but carry MSN/RQMSN " + std::to_string(A.msn) + "/" +
                 std::to_string(A.rqmsn) + " and " + std::to_string(B.msn) + "/" +
                 std::to_string(B.rqmsn));
      if (A.content_known && B.content_known) {
        judge(REQ_002);
        if (A.rkey != B.rkey || A.dma_len != B.dma_len)
          fail(REQ_002, o, "R_Key/DMALen change inside the message at PSN " + psn_str(a + 1));
        else if (fl.pmtu && B.va != A.va + fl.pmtu)
          fail(REQ_002, o,
               "VA of PSN " + psn_str(a + 1) + " is " + hex(B.va) + "; expected " +
                   hex(A.va + fl.pmtu) + " (previous VA + PMTU " + std::to_string(fl.pmtu) + ")");
      }
    } else {
      const uint16_t want_msn = static_cast<uint16_t>(A.msn + 1);
      const uint16_t want_rq = static_cast<uint16_t>(A.rqmsn + (A.imm ? 1 : 0));
      if (B.msn != want_msn || B.rqmsn != want_rq)
        fail(REQ_003, o,
             "message starting at PSN " + psn_str(a + 1) + " has MSN/RQMSN " +
                 std::to_string(B.msn) + "/" + std::to_string(B.rqmsn) + "; after MSN/RQMSN " +
                 std::to_string(A.msn) + "/" + std::to_string(A.rqmsn) +
                 (A.imm ? " (WriteIMM)" : "") + " expected " + std::to_string(want_msn) + "/" +
                 std::to_string(want_rq));
    }
  };
  if (PsnRec* a = fl.rec(p - 1); a && a->seen) pair(p - 1, *a, r);
  if (PsnRec* b = fl.rec(p + 1); b && b->seen) pair(p, r, *b);
}

void Engine::data_arrival(const Obs& o, Flow& fl, int64_t p, PsnRec& /*r*/, Tx& tx) {
  const wire::DecodedFrame& f = *o.f;
  if (o.trimmed) {
    tx.trimmed = true;
    tx.trim_dscp = f.dscp();
  }
  if (o.ce) tx.ce = true;
  if (o.icrc_bad) tx.corrupt = true;
  if (o.at_dst) {
    tx.at_dst = true;
    if (!o.trimmed && !o.icrc_bad) tx.at_dst_intact = true;
  }
  if (!arrival_at_rsp(fl, o) || tx.dropped) return;
  if (!tx.ack_obl) {
    tx.ack_obl = true;
    fl.rx_bytes += std::max<uint64_t>(f.payload.size(), 1024);
    tx.rx_bytes_at = fl.rx_bytes;
    tx.rx_point = o.point;
    // MRC-RSP-009: A=1 or RTX=1 elicits a SACK/NACK (judged with a capture at the responder).
    // A trimmed arrival owes a NACK, which MRC-RSP-013 judges.
    if ((f.bth.ack_req || f.bth.rtx) && !o.icrc_bad && !o.trimmed) {
      if (responder_captured(fl)) {
        if (!fl.ack_resp.count(p)) {
          Pending pd;
          pd.since = o.ts;
          pd.point = o.point;
          pd.frame = o.frame_no;
          pd.deadline = o.ts + prof.tol.t_ack_max_ns;
          fl.ack_resp.emplace(p, pd);
          fl.ack_order.emplace_back(p, pd.deadline);
        }
      } else {
        na(RSP_009, "needs a capture at the responder's interface");
      }
    }
  }
  if (o.trimmed && !tx.trim_obl) {
    tx.trim_obl = true;
    if (!fl.prof.caps.trim_nack || fl.prof.caps.trim_nack_dest_unsupported) {
      na(RSP_013, "responder does not send TRIM NACKs for this QP (profile capabilities)");
    } else {
      Pending& pd = fl.trim_nack[p];
      pd.since = o.ts;
      pd.point = o.point;
      pd.frame = o.frame_no;
      pd.psn = p;
      pd.ev = tx.wev;
      pd.code = f.dscp() == prof.dscp.trimmed_lasthop ? 0x02 : 0x01;
    }
  }
  if (o.ce && !tx.ce_obl) {
    tx.ce_obl = true;
    Pending pd;
    pd.since = o.ts;
    pd.point = o.point;
    pd.frame = o.frame_no;
    pd.psn = p;
    pd.ev = tx.wev;
    pd.bytes_deadline = fl.rx_bytes + 32768;
    fl.ce_echo.push_back(pd);
  }
}

void Engine::ack_covered(Flow& fl, int64_t p, PsnRec& r, uint64_t ts) {
  if (r.acked) return;
  r.acked = true;
  r.gap_pending = false;
  if (r.inflight) {
    r.inflight = false;
    fl.inflight_bytes -= std::min<uint64_t>(fl.inflight_bytes, r.nominal);
  }
  if (in_range(fl.nack_retx, p))
    if (auto it = fl.nack_retx.find(p); it != fl.nack_retx.end() && it->second.since <= ts) {
      judge(REQ_011);
      fl.nack_retx.erase(it);
    }
  // A SACK that reached the requester just before the drop's decision line (decisions are read
  // decision_lookahead_ns early) covers the PSN all the same: another copy got through.
  if (in_range(fl.drop_retx, p))
    if (auto it = fl.drop_retx.find(p); it != fl.drop_retx.end()) {
      judge(REQ_015);
      fl.drop_retx.erase(it);
    }
}

void Engine::evict(Flow& fl, PsnRec& r, int64_t p) {
  // Obligations on this PSN are judged now, so that their tables stay as small as the window.
  settle(fl, p, now);
  if (r.inflight) {
    r.inflight = false;
    fl.inflight_bytes -= std::min<uint64_t>(fl.inflight_bytes, r.nominal);
  }
  if (r.gap_pending && !r.seen && !r.acked) {
    r.gap_pending = false;
    const PsnExt& x = *r.ext;  // made when gap_pending was set
    if (x.gap_ts + prof.tol.end_grace_ns <= now) {
      judge(REQ_001);
      fail_at(REQ_001, x.gap_point, x.gap_frame, x.gap_ts,
              "PSN " + psn_str(p) +
                  " was skipped: later PSNs left the requester, this one was "
                  "never seen at any capture point nor acknowledged");
    }
  }
}

void Engine::on_probe(const Obs& o, Flow& fl) {
  const wire::DecodedFrame& f = *o.f;
  const uint16_t id = f.peth.probe_id;
  if (o.first) {
    judge(PRB_001);
    if (f.bth.psn != 0 || !f.bth.ack_req)
      fail(PRB_001, o,
           "reliability probe id " + std::to_string(id) + " has PSN " + std::to_string(f.bth.psn) +
               " and A=" + (f.bth.ack_req ? "1" : "0") +
               "; a probe consumes no PSN (PSN 0) and requests an ACK (A=1)");
    ProbeRec& pr = fl.probes[id];
    pr = ProbeRec{};
    pr.wev = o.wev;
    pr.ts = o.ts;
    pr.point = o.point;
    pr.frame = o.frame_no;
    fl.probe_order.push_back(id);
    while (fl.probe_order.size() > 4096) {
      fl.probes.erase(fl.probe_order.front());
      fl.probe_order.pop_front();
    }
    if (o.at_src || !requester_captured(fl)) ev_probe_sent(o, fl, o.wev);
  }
  auto it = fl.probes.find(id);
  if (it == fl.probes.end()) return;
  if (o.ce) it->second.ce = true;
  if (o.at_dst) it->second.ce_known = true;
  if (arrival_at_rsp(fl, o) && !o.icrc_bad && !fl.probe_ans.count(id)) {
    Pending pd;
    pd.since = o.ts;
    pd.point = o.point;
    pd.frame = o.frame_no;
    pd.ev = o.wev;
    fl.probe_ans.emplace(id, pd);
  }
}

}  // namespace mrc::check::detail
