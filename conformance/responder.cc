// Responder rules (MRC-RSP-*, MRC-PRB-002): SACK, NACK and transport ACK, judged against the
// reconstructed PSN window; and the requester-side effects of those packets when they arrive
// (NACK obligations, EV signals, fatal errors).
#include <algorithm>
#include <bit>

#include "conformance/internal.h"

namespace mrc::check::detail {

namespace {
// An UNEXP_EVENT NACK ends the QP only if it names a PSN the requester sent, not yet covered by
// an acknowledgement, on the EV of its latest transmission (what a requester can check; a QPN
// and peer GID are easy to learn, so anything else may be spoofed: docs/wire-format.md 8.7).
bool names_outstanding(const PsnRec* r, uint32_t entropy) {
  if (r == nullptr || !r->seen || r->acked) return false;
  const Tx* last = nullptr;
  for (const Tx& t : r->txs())
    if (t.valid && (last == nullptr || t.ts >= last->ts)) last = &t;
  return last == nullptr || last->wev == entropy;
}
}  // namespace
namespace {

std::string psn_str(int64_t p) {
  return std::to_string(static_cast<uint32_t>(p) & wire::kPsnMask);
}

bool lost(const Engine& e, const Flow& fl, const Tx& t) {
  return t.dropped || t.corrupt || (e.responder_captured(fl) && !t.at_dst);
}

std::string wev_list(const PsnRec& r) {
  std::string s;
  for (const Tx& t : r.txs())
    if (t.valid) s += (s.empty() ? "" : ", ") + hex(t.wev);
  return s;
}

}  // namespace

// R24, R28 and R31 order the responder's SACKs and transport ACKs as it transmits them. Captures
// on its own interfaces show that order across its ports. A capture of one of its links (the
// switch end of the cable, "side": "link") shows the order that port sent in, since the cable and
// the injector's relay keep it, but not the order between ports: the planes' links forward on
// their own, so packets sent on two planes can cross before their captures (issue 23).
Flow::RspOrder& Engine::rsp_order(Flow& fl, const Obs& o) {
  return o.own_iface ? fl.src_order : fl.link_order[o.point];
}

void Engine::on_sack(const Obs& o, Flow& fl) {
  const wire::DecodedFrame& f = *o.f;
  const wire::Seth& s = f.seth;
  const int64_t cack = fl.unwrap(s.cack_psn);
  const uint8_t m = s.m;
  // Highest PSN this SACK reports received.
  int64_t hi = cack;
  if (s.sack_bitmap != 0)
    hi = std::max(hi, cack + s.sack_offset + (63 - std::countl_zero(s.sack_bitmap)));

  if (o.first) {
    fl.sacks++;
    // MRC-RSP-001: framing.
    judge(RSP_001);
    std::string bad;
    if (f.bth.psn != s.cack_psn)
      bad += " BTH.PSN " + std::to_string(f.bth.psn) + " != cack_psn " + std::to_string(s.cack_psn);
    if (s.sack_offset < 1) bad += " sack_offset " + std::to_string(s.sack_offset) + " < 1";
    if (f.bth.ack_req) bad += " A=1";
    if (s.dpdcid != (f.bth.dest_qp & 0xFFFF))
      bad += " dpdcid " + hex(s.dpdcid, 4) + " != DestQP[15:0] " + hex(f.bth.dest_qp & 0xFFFF, 4);
    if (fl.rsp_qpn && s.spdcid != (*fl.rsp_qpn & 0xFFFF))
      bad +=
          " spdcid " + hex(s.spdcid, 4) + " != responder QPN[15:0] " + hex(*fl.rsp_qpn & 0xFFFF, 4);
    if (fl.configured && fl.prof.requester_qpn && f.bth.dest_qp != *fl.prof.requester_qpn)
      bad += " DestQP " + hex(f.bth.dest_qp) + " != requester QPN " + hex(*fl.prof.requester_qpn);
    if (!bad.empty()) fail(RSP_001, o, "SACK:" + bad);
    // MRC-RSP-005: M code point.
    judge(RSP_005);
    if (m == 3) fail(RSP_005, o, "SACK M=11 is not a valid code point");
    // MRC-RSP-008: mpr field.
    judge(RSP_008);
    if (s.mpr != 0) {
      if (!fl.prof.caps.dynamic_mpr)
        fail(RSP_008, o,
             "SACK.mpr = " + std::to_string(s.mpr) +
                 " but dynamic MPR is not enabled on both sides (profile)");
      else if (fl.prof.mpr_dest && s.mpr > *fl.prof.mpr_dest)
        fail(RSP_008, o,
             "SACK.mpr = " + std::to_string(s.mpr) + " exceeds the negotiated mpr_dest " +
                 std::to_string(*fl.prof.mpr_dest));
      fl.dyn_mpr = s.mpr;
    }
    // MRC-RSP-011: control DSCP.
    judge(RSP_011);
    if (f.dscp() != prof.dscp.control)
      fail(RSP_011, o,
           "SACK uses DSCP " + std::to_string(f.dscp()) + "; CONTROL is " +
               std::to_string(prof.dscp.control));

    // MRC-RSP-003 (causality) and MRC-RSP-013 (trimmed PSNs not acknowledged), per PSN newly
    // covered by cack or named in the bitmap.
    auto check_acked = [&](int64_t q) {
      if (fl.have_data && q > fl.highest_ext) {
        judge(RSP_003);
        fail(RSP_003, o,
             "SACK acknowledges PSN " + psn_str(q) +
                 " which was never transmitted (highest PSN sent " + psn_str(fl.highest_ext) + ")");
        return;
      }
      PsnRec* r = fl.rec(q);
      if (!r) return;
      if (!r->seen) {
        ack_covered(fl, q, *r, o.ts);
        return;
      }
      judge(RSP_003);
      bool any_before = false, any_arrived = false, any_intact = false;
      for (const Tx& t : r->txs()) {
        if (!t.valid || t.ts > o.ts) continue;
        any_before = true;
        if (lost(*this, fl, t)) continue;
        any_arrived = true;
        if (!t.trimmed && (!responder_captured(fl) || t.at_dst_intact)) any_intact = true;
      }
      if (!any_before && r->tx_count <= kTxRing) {
        fail(RSP_003, o, "SACK acknowledges PSN " + psn_str(q) + " before it was transmitted");
      } else if (any_before && !any_arrived && r->tx_count <= kTxRing) {
        fail(RSP_003, o,
             "SACK acknowledges PSN " + psn_str(q) +
                 " but every transmission of it was lost before the responder");
      } else if (any_arrived && !any_intact && r->tx_count <= kTxRing) {
        // (Only the last kTxRing copies are kept: an older, intact one may have arrived.)
        judge(RSP_013);
        fail(RSP_013, o,
             "SACK acknowledges PSN " + psn_str(q) +
                 " although only trimmed copies of it reached the responder");
      }
      ack_covered(fl, q, *r, o.ts);
    };
    const int64_t lo = fl.max_cack_ext ? *fl.max_cack_ext + 1 : std::max(fl.base_ext, cack - 4096);
    for (int64_t q = std::max(lo, cack - 65536); q <= cack; ++q) check_acked(q);
    for (uint64_t bits = s.sack_bitmap; bits != 0; bits &= bits - 1) {
      const int64_t q = cack + s.sack_offset + std::countr_zero(bits);
      if (q <= cack) continue;
      PsnRec* r = fl.rec(q);
      if (r && r->acked) continue;
      check_acked(q);
    }
    if (!fl.max_cack_ext || cack > *fl.max_cack_ext) fl.max_cack_ext = cack;
    if (!fl.have_sack_hi || hi > fl.sack_hi_ext) fl.sack_hi_ext = hi;
    fl.have_sack_hi = true;

    // MRC-RSP-004 / MRC-RSP-005 / MRC-PRB-002: the trigger.
    if (!s.pr) {
      const int64_t t = cack + s.ack_psn_offset;
      PsnRec* r = fl.rec(t);
      if (r && r->seen) {
        const Tx* trig = r->latest_before(o.ts);
        bool match = false;
        for (const Tx& x : r->txs())
          match = match || (x.valid && x.ts <= o.ts && x.wev == s.entropy);
        if (trig) {
          judge(RSP_004);
          if (!match && r->tx_count <= kTxRing)
            fail(RSP_004, o,
                 "SACK entropy " + hex(s.entropy) +
                     " is not the WEV of any transmission "
                     "of its trigger PSN " +
                     psn_str(t) + " (" + wev_list(*r) + ")");
          // The copy that triggered it carries the SACK's entropy; when several such copies
          // arrived (a retransmission on the same EV), judge only what holds for all of them.
          bool all_ce = true, any_ce = false, any_arrived = false;
          for (const Tx& x : r->txs()) {
            if (!x.valid || x.ts > o.ts || x.wev != s.entropy) continue;
            if (responder_captured(fl) && !x.at_dst) continue;
            any_arrived = true;
            all_ce = all_ce && x.ce;
            any_ce = any_ce || x.ce;
          }
          if (!any_arrived) {  // the copy is older than the ones kept, or never seen arriving
            all_ce = trig->ce && r->tx_count <= kTxRing;
            any_ce = trig->ce || !trig->at_dst || r->tx_count > kTxRing;
          }
          if (all_ce && m != 1 && m != 2) {
            fail(RSP_005, o,
                 "trigger PSN " + psn_str(t) + " arrived with CE but SACK M=" + std::to_string(m));
          } else if (m == 1 && !any_ce && responder_captured(fl) && any_arrived) {
            fail(
                RSP_005, o,
                "SACK M=01 but trigger PSN " + psn_str(t) + " arrived at the responder without CE");
          }
        }
      }
      if (auto it = fl.ack_resp.find(t); it != fl.ack_resp.end()) {
        judge(RSP_009);
        if (o.ts > it->second.deadline)
          fail(RSP_009, o,
               "SACK for PSN " + psn_str(t) + " came " + std::to_string(o.ts - it->second.since) +
                   " ns after the packet "
                   "arrived; T_ack_max is " +
                   std::to_string(prof.tol.t_ack_max_ns) + " ns");
        fl.ack_resp.erase(it);
      }
    } else {
      const uint16_t id = static_cast<uint16_t>(s.ack_psn_offset);
      auto it = fl.probes.find(id);
      judge(PRB_002);
      if (it == fl.probes.end() || it->second.ts > o.ts) {
        if (!fl.probes.empty() || o.ts > first_ts + prof.tol.dedup_window_ns)
          fail(PRB_002, o,
               "SACK with PR=1 answers probe id " + std::to_string(id) +
                   " but no such probe was sent on this QP");
      } else {
        judge(RSP_004);
        if (s.entropy != it->second.wev)
          fail(RSP_004, o,
               "probe answer entropy " + hex(s.entropy) + " != probe WEV " + hex(it->second.wev));
        if (it->second.ce && m != 1 && m != 2)
          fail(RSP_005, o,
               "probe " + std::to_string(id) + " arrived with CE but SACK M=" + std::to_string(m));
        else if (m == 1 && !it->second.ce && it->second.ce_known)
          fail(RSP_005, o, "SACK M=01 but probe " + std::to_string(id) + " arrived without CE");
        fl.probe_ans.erase(id);
      }
    }
    // MRC-RSP-006: CE echoes.
    if (m == 1 || m == 2) {
      for (auto it = fl.ce_echo.begin(); it != fl.ce_echo.end();) {
        if (it->ev == s.entropy && it->since <= o.ts) {
          judge(RSP_006);
          it = fl.ce_echo.erase(it);
        } else {
          ++it;
        }
      }
    }
    // A SACK for a packet that arrived more than two ACK-generation windows after a CE packet
    // whose EV is still not echoed: the echo is late. Judged in the responder's own order
    // (which trigger it answered), not by capture time, because a software responder may take
    // arrivals off its socket well after its capture saw them.
    if (!s.pr && !fl.ce_echo.empty()) {
      const PsnRec* tr = fl.rec(cack + s.ack_psn_offset);
      for (auto it = fl.ce_echo.begin(); it != fl.ce_echo.end();) {
        // Only against a copy that came in through the same port (a responder may serve its
        // ports' queues in any order), and the earliest copy that may have triggered it.
        uint64_t at = UINT64_MAX;
        if (tr)
          for (const Tx& x : tr->txs())
            if (x.valid && x.ack_obl && x.wev == s.entropy && x.rx_point == it->point)
              at = std::min(at, x.rx_bytes_at);
        if (at != UINT64_MAX && at > it->bytes_deadline) {
          judge(RSP_006);
          fail_at(RSP_006, it->point, it->frame, it->since,
                  "data PSN " + psn_str(it->psn) + " arrived with CE on EV " + hex(it->ev) +
                      "; the responder acknowledged PSN " + psn_str(cack + s.ack_psn_offset) +
                      ", which arrived more than 32 KiB later, before echoing that EV with "
                      "M=01/10");
          it = fl.ce_echo.erase(it);
        } else {
          ++it;
        }
      }
    }
  }

  // Responder-order rules: only at the responder's capture (per capture point at its links').
  if (o.at_src) {
    Flow::RspOrder& ord = rsp_order(fl, o);
    const char* where = o.own_iface ? "" : " at this capture of the responder's link";
    judge(RSP_002);
    if (ord.cack_ext && cack < *ord.cack_ext)
      fail(RSP_002, o,
           "cack_psn went back from " + psn_str(*ord.cack_ext) + " to " + psn_str(cack) + where);
    if (!ord.cack_ext || cack > *ord.cack_ext) ord.cack_ext = cack;
    judge(RSP_007);
    const auto& cc = f.cc_state;
    if (ord.rcvd_bytes) {
      const uint32_t d = (cc.rcvd_bytes - *ord.rcvd_bytes) & 0xFFFFFF;
      if (d >= (1u << 23))
        fail(RSP_007, o,
             "rcvd_bytes went back from " + std::to_string(*ord.rcvd_bytes) + " to " +
                 std::to_string(cc.rcvd_bytes) + where);
    }
    ord.rcvd_bytes = cc.rcvd_bytes;
    // Bits i with sack_offset + i > 0: the PSNs above cack the bitmap marks received.
    const int first = std::max(0, 1 - int{s.sack_offset});
    const int bits = first >= 64 ? 0 : std::popcount(s.sack_bitmap >> first);
    if (cc.ooo_count < bits)
      fail(RSP_007, o,
           "ooo_count " + std::to_string(cc.ooo_count) + " < " + std::to_string(bits) +
               " PSNs above cack marked received in the bitmap");
  } else if (!responder_captured(fl)) {
    na(RSP_002, "needs a capture at the responder's interface");
    na(RSP_007, "needs a capture at the responder's interface");
  }

  // Effects at the requester.
  if (arrival_at_req(fl, o) && !ctl_dropped(fl, o)) {
    fl.last_sack_arrival = o.ts;
    if (s.pr) fl.last_pr_sack_arrival = o.ts;
    if (s.pr && (m == 0 || m == 1)) ev_probe_ok(o, fl, s.entropy);
    if (m == 1)
      ev_signal(o, fl, s.entropy, EvMode::kSkip, "SACK M=01");
    else if (m == 2)
      ev_signal(o, fl, s.entropy, EvMode::kBad, "SACK M=10");
  }
}

void Engine::on_nack(const Obs& o, Flow& fl) {
  const wire::DecodedFrame& f = *o.f;
  const wire::Neth& n = f.neth;
  const int64_t p = fl.unwrap(n.nack_psn);
  if (o.first) {
    fl.nacks++;
    // MRC-RSP-012: fields.
    judge(RSP_012);
    std::string bad;
    if (wire::nack_code_name(n.nack_code).empty())
      bad += " code " + hex(n.nack_code, 2) + " is not valid";
    if (n.nack_psn != f.bth.psn)
      bad += " nack_psn " + std::to_string(n.nack_psn) + " != BTH.PSN " + std::to_string(f.bth.psn);
    if (n.dpdcid != (f.bth.dest_qp & 0xFFFF))
      bad += " dpdcid " + hex(n.dpdcid, 4) + " != DestQP[15:0] " + hex(f.bth.dest_qp & 0xFFFF, 4);
    if (fl.configured && fl.prof.requester_qpn && f.bth.dest_qp != *fl.prof.requester_qpn)
      bad += " DestQP " + hex(f.bth.dest_qp) + " != requester QPN " + hex(*fl.prof.requester_qpn);
    if (PsnRec* r = fl.rec(p); r && r->seen) {
      bool match = false, any = false;
      for (const Tx& x : r->txs())
        if (x.valid && x.ts <= o.ts) {
          any = true;
          match = match || x.wev == n.entropy;
        }
      // Only the last kTxRing copies are kept: an older one may have been the NACKed copy.
      if (any && !match && r->tx_count <= kTxRing)
        bad += " entropy " + hex(n.entropy) + " is not the WEV of any transmission of PSN " +
               psn_str(p) + " (" + wev_list(*r) + ")";
    }
    if (!bad.empty()) fail(RSP_012, o, "NACK:" + bad);
    // MRC-RSP-011
    judge(RSP_011);
    if (f.dscp() != prof.dscp.control)
      fail(RSP_011, o,
           "NACK uses DSCP " + std::to_string(f.dscp()) + "; CONTROL is " +
               std::to_string(prof.dscp.control));
    // MRC-RSP-013: the trim NACK owed for a trimmed arrival.
    if (n.nack_code == 0x01 || n.nack_code == 0x02) {
      if (auto it = fl.trim_nack.find(p); it != fl.trim_nack.end() && it->second.since <= o.ts) {
        judge(RSP_013);
        if (it->second.code != 0 && it->second.code != n.nack_code)
          fail(RSP_013, o,
               "NACK code " + hex(n.nack_code, 2) + " for PSN " + psn_str(p) +
                   " but the packet arrived with DSCP " +
                   (it->second.code == 1 ? "TRIMMED (want 0x01)" : "TRIMMED_LASTHOP (want 0x02)"));
        fl.trim_nack.erase(it);
      }
    }
    // MRC-RSP-014: PSN_OOR_WINDOW must be out of the window.
    if (n.nack_code == 0x0B) {
      const uint64_t mpr = mpr_eff(fl);
      if (mpr == 0) {
        na(RSP_014, "MPR not in the DUT profile");
      } else if (fl.max_cack_ext) {
        judge(RSP_014);
        if (p - *fl.max_cack_ext <= static_cast<int64_t>(mpr))
          fail(RSP_014, o,
               "NACK PSN_OOR_WINDOW for PSN " + psn_str(p) + " but cack_psn was at least " +
                   psn_str(*fl.max_cack_ext) + ": p - cack = " +
                   std::to_string(p - *fl.max_cack_ext) + " <= MPR_eff " + std::to_string(mpr));
      }
    }
    // MRC-RSP-006: a NACK may echo CE too.
    if (n.m == 1 || n.m == 2) {
      for (auto it = fl.ce_echo.begin(); it != fl.ce_echo.end();) {
        if (it->ev == n.entropy && it->since <= o.ts) {
          judge(RSP_006);
          it = fl.ce_echo.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (auto it = fl.ack_resp.find(p); it != fl.ack_resp.end()) {
      judge(RSP_009);
      if (o.ts > it->second.deadline)
        fail(RSP_009, o,
             "NACK for PSN " + psn_str(p) + " came " + std::to_string(o.ts - it->second.since) +
                 " ns after the packet arrived");
      fl.ack_resp.erase(it);
    }
  }

  if (!arrival_at_req(fl, o) || ctl_dropped(fl, o)) return;
  const uint8_t c = n.nack_code;
  if (c == 0x01 || c == 0x02 || c == 0x06 || c == 0x07 || c == 0x0A || c == 0x0B) {
    PsnRec* r = fl.rec(p);
    if (r) r->nack_ts = o.ts;
    if (r && r->seen && !r->acked && fl.fatal_ts == kNoTime) {
      auto [it, fresh] = fl.nack_retx.try_emplace(p);
      if (fresh) {
        it->second.since = o.ts;
        it->second.point = o.point;
        it->second.frame = o.frame_no;
        it->second.psn = p;
      }
      it->second.ev = n.entropy;
      it->second.code = c;
    }
    if (c == 0x01) ev_signal(o, fl, n.entropy, EvMode::kSkip, "NACK TRIMMED");
  } else if (c == 0x19 && fl.fatal_ts == kNoTime && names_outstanding(fl.rec(p), n.entropy)) {
    fl.fatal_ts = o.ts;
    fl.nack_retx.clear();
    fl.drop_retx.clear();
  }
}

void Engine::on_tack(const Obs& o, Flow& fl) {
  const wire::DecodedFrame& f = *o.f;
  const uint8_t syn = f.aeth.syndrome;
  const int64_t s = fl.unwrap(f.bth.psn);
  const bool ack = syn == 0x1F;
  if (o.first) {
    judge(RSP_010);
    if (!ack && !(syn >= 0x61 && syn <= 0x63))
      fail(RSP_010, o,
           "transport ACK with AETH syndrome " + hex(syn, 2) +
               "; MRC uses 0x1F (ACK) or 0x61-0x63 (NAK)");
    judge(RSP_011);
    if (f.dscp() != prof.dscp.control)
      fail(RSP_011, o,
           "transport ACK uses DSCP " + std::to_string(f.dscp()) + "; CONTROL is " +
               std::to_string(prof.dscp.control));
    if (ack) {
      if (fl.have_data && s > fl.highest_ext) {
        fail(RSP_010, o,
             "transport ACK PSN " + psn_str(s) + " is beyond every PSN sent (" +
                 psn_str(fl.highest_ext) + ")");
      } else {
        // Placed implies received: every PSN up to S beyond what SACKs already covered must have
        // arrived before this ACK (a SACK-covered PSN was judged by MRC-RSP-003).
        const int64_t from = std::max(fl.max_cack_ext ? *fl.max_cack_ext + 1 : s, s - 1024);
        for (int64_t q = from; q <= s; ++q) {
          const PsnRec* r = fl.rec(q);
          if (!r || !r->seen || r->acked) continue;
          bool arrived = false;
          for (const Tx& t : r->txs())
            arrived = arrived || (t.valid && t.ts <= o.ts && !lost(*this, fl, t) && !t.trimmed);
          if (!arrived) {
            fail(RSP_010, o,
                 "transport ACK PSN " + psn_str(s) + " covers PSN " + psn_str(q) +
                     ", which had not reached the responder intact");
            break;
          }
        }
      }
      if (!fl.saw_tack || s > fl.max_tack_ext) fl.max_tack_ext = s;
      fl.saw_tack = true;
      std::erase_if(fl.imm_ends, [&](int64_t e) { return e <= fl.max_tack_ext; });
    }
  }
  if (o.at_src && ack) {
    Flow::RspOrder& ord = rsp_order(fl, o);
    judge(RSP_010);
    if (ord.tack_ext && s < *ord.tack_ext)
      fail(RSP_010, o,
           "transport ACK PSN went back from " + psn_str(*ord.tack_ext) + " to " + psn_str(s) +
               (o.own_iface ? "" : " at this capture of the responder's link"));
    if (!ord.tack_ext || s > *ord.tack_ext) ord.tack_ext = s;
  }
  const bool nak = (syn & 0x60) == 0x60;
  // A NAK about a PSN never sent is stale or spoofed: a requester rightly ignores it.
  const PsnRec* nr = fl.rec(s);
  if (nak && arrival_at_req(fl, o) && !ctl_dropped(fl, o) && fl.fatal_ts == kNoTime && nr &&
      nr->seen) {
    fl.fatal_ts = o.ts;
    fl.nack_retx.clear();
    fl.drop_retx.clear();
  }
}

}  // namespace mrc::check::detail
