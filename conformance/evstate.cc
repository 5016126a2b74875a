// Entropy-value rules (MRC-EV-*): carriage, universe, ports, denied EVs, spraying, and the
// per-QP EV state the checker reconstructs from SACK/NACK signals and timeouts (GOOD, SKIP,
// ASSUMED_BAD).
#include <algorithm>
#include <cmath>

#include "conformance/internal.h"

namespace mrc::check::detail {
namespace {

constexpr size_t kMaxEvStates = 65536;  // bounds memory against a sender that never reuses an EV
constexpr size_t kRecentWindow = 1024;  // new-data packets over which the active EV set is measured
// MRC-EV-001 waits this long, or for this many later PSNs, for a new PSN missing in PSN order.
constexpr uint64_t kSprayGapNs = 2'000'000;
constexpr size_t kSprayReorderMax = 4096;
// EV-008/009/013 suspects: data packets watched at least for another usable EV; at most held.
constexpr size_t kSuspectMinWatch = 4;
constexpr size_t kMaxSuspects = 4096;

}  // namespace

void Engine::ev_carriage(const Obs& o, const wire::DecodedFrame& f, const Flow* fl) {
  if (!f.op || !f.op->mrc) return;
  judge(EV_003);
  std::string e;
  if (f.l3 == 6) {
    const uint32_t fl_outer = f.ip6.flow_label;
    if (fl_outer & 0xF0000u) e += " flow label " + hex(fl_outer, 5) + " has bits 19:16 set";
    if (fl && fl->prof.ev_format == wire::EvFormat::kUdp && fl_outer != 0 &&
        !(wire_profile->params().ecmp_flow_label == wire::EcmpFlowLabel::kEv &&
          fl_outer == f.udp.sport))
      e += " flow label " + hex(fl_outer, 5) + " in UDP EV format (want 0)";
    if (f.has_inner_ip6 && f.inner_ip6.flow_label != fl_outer)
      e += " inner flow label " + hex(f.inner_ip6.flow_label, 5) + " != outer " + hex(fl_outer, 5);
  }
  if (!e.empty()) fail(EV_003, o, "EV carriage:" + e);
  if (!fl) return;
  const auto kind = f.op->kind;
  if (kind != wire::PacketKind::kMrcData && kind != wire::PacketKind::kMrcProbe) return;
  if (fl->prof.evs.empty()) {
    na(EV_004, "EV universe not in the DUT profile (qps[].evs)");
    na(EV_005, "EV-to-port map not in the DUT profile (qps[].evs[].port)");
  } else {
    const EvEntry* ent = nullptr;
    for (const EvEntry& x : fl->prof.evs)
      if (x.wev == o.wev) {
        ent = &x;
        break;
      }
    judge(EV_004);
    if (!ent) fail(EV_004, o, "WEV " + hex(o.wev) + " is not in the QP's EV profile");
    const uint8_t port = points[o.point].info.port;
    if (ent && ent->port != 0 && port != 0 && o.at_src) {
      judge(EV_005);
      if (ent->port != port)
        fail(EV_005, o,
             "WEV " + hex(o.wev) + " belongs to port " + std::to_string(ent->port) +
                 " but left on port " + std::to_string(port));
    } else if (port == 0) {
      na(EV_005, "needs per-port captures at the requester (captures.<file>.port)");
    }
  }
  if (kind == wire::PacketKind::kMrcData) {
    if (fl->prof.denied_evs.empty()) {
      na(EV_006, "no denied EVs in the DUT profile (qps[].denied_evs)");
    } else {
      judge(EV_006);
      if (std::find(fl->prof.denied_evs.begin(), fl->prof.denied_evs.end(), o.wev) !=
          fl->prof.denied_evs.end())
        fail(EV_006, o, "data on WEV " + hex(o.wev) + ", which the controller DENIED");
    }
  }
}

void Engine::ev_on_data(const Obs& o, Flow& fl, int64_t psn, bool is_new) {
  // Judged where the requester's choices are visible: its own capture, or any point if it has none.
  const bool judged_here = !requester_captured(fl) || o.at_src;
  if (is_new) {
    const Flow::SprayPend sp{o.wev, judged_here, o.point, o.frame_no, o.ts};
    if (!fl.spray_started) {
      fl.spray_started = true;
      fl.spray_next = psn;
    }
    if (psn == fl.spray_next && fl.spray_pend.empty()) {
      ev_spray(fl, sp);
      fl.spray_next++;
    } else if (psn > fl.spray_next) {
      fl.spray_pend.emplace(psn, sp);
      ev_spray_drain(fl, o.ts, false);
    }
    // A PSN below spray_next came after its gap was given up: the run already restarted there.
  }
  if (fl.spray_flag_on) ev_spray_settle(fl, o.ts, false);
  if (!judged_here) return;
  const uint32_t w = o.wev;
  const uint64_t t = o.ts;
  if (!fl.ev_suspects.empty()) ev_resolve(fl, w, t);
  EvState* found = fl.find_ev(w);
  if (!found && fl.evs.size() < kMaxEvStates) found = &fl.evs.emplace(w, EvState{}).first->second;
  const size_t active = std::max<size_t>(fl.active_evs(), 1);

  if (fl.bad_count > 0) judge(EV_009);
  if (is_new && fl.skip_count > 0) judge(EV_008);
  if (found) {
    EvState& st = *found;
    // MRC-EV-009: no data on an ASSUMED_BAD EV.
    if (st.mode == EvMode::kBad && t > st.since + prof.tol.reaction_ns) {
      const size_t floor = fl.prof.ev_min_active.value_or(std::max<size_t>(1, active / 4));
      const size_t usable = active > fl.bad_count ? active - fl.bad_count : 0;
      judge(EV_009);
      if (usable >= floor) {  // retiring e leaves the requester at its floor or above
        ev_suspect(o, fl, EV_009,
                   std::string(is_new ? "new data" : "retransmission") + " on EV " + hex(w) +
                       ", ASSUMED_BAD since " + at(st.since) +
                       " (no probe answer with M=00/01 since)");
      }
      // One report per episode: the EV counts as released, reported or not (a requester at its
      // ev_min_active floor keeps the EV and never probes it back).
      st.mode = EvMode::kGood;
      fl.bad_count--;
    }
    // MRC-EV-008: SKIP for a rotation (new data only).
    if (is_new && st.mode == EvMode::kSkip && t > st.since + prof.tol.reaction_ns) {
      // A turn is owed only to the other EVs still usable: those used since the signal (any data,
      // retransmissions too) and the active ones the reconstruction holds GOOD (R39: every other
      // GOOD EV).
      size_t used = 0, good_unused = 0;
      for (const auto& [e, s2] : fl.evs) {
        if (e == w) continue;
        if (s2.last_data > st.since)
          ++used;
        else if (s2.mode == EvMode::kGood && fl.recent_count.find(e))
          ++good_unused;
      }
      const size_t need = std::min(
          st.need_others, static_cast<size_t>(std::ceil(prof.tol.skip_rotation_fraction *
                                                        static_cast<double>(used + good_unused))));
      const bool early = t < st.since + prof.tol.t_skip_ns && used < need;
      if (!st.skip_judged) {
        judge(EV_008);
        if (early) {
          ev_suspect(o, fl, EV_008,
                     "new data on EV " + hex(w) + " " + dur(t - st.since) +
                         " after a SKIP signal; only " + std::to_string(used) + " of " +
                         std::to_string(need) + " other EVs used since");
          fl.ev_suspects.back().skip_since = st.since;
          fl.ev_suspects.back().skip_need = need;
          st.skip_judged = true;  // one report per episode
        }
      }
      if (!early) {
        st.mode = EvMode::kGood;
        st.recovered_at = t;
        st.skip_judged = false;
        fl.skip_count--;
      }
    }
    if (is_new) st.last_use = t;
    st.last_data = t;
    if (st.probe_since != 0) {
      st.probe_ep_start = st.probe_since;
      st.probe_ep_end = t;
      st.probe_since = 0;
    }
    if (st.recovered_at == kNoTime) st.recovered_at = t;
  }
  if (!is_new) return;

  // Active set over the recent new-data packets.
  fl.recent_wevs.push_back(w);
  fl.recent_count[w]++;
  if (fl.recent_wevs.size() > kRecentWindow) {
    const uint32_t old = fl.recent_wevs.front();
    fl.recent_wevs.pop_front();
    if (--fl.recent_count[old] == 0) fl.recent_count.erase(old);
  }
}

void Engine::ev_suspect(const Obs& o, Flow& fl, RuleIdx r, std::string msg) {
  if (fl.ev_suspects.size() >= kMaxSuspects) {
    excuse(fl.ev_suspects.front().rule);
    fl.ev_suspects.pop_front();
  }
  const size_t window = std::max<size_t>(kSuspectMinWatch, 2 * fl.active_evs());
  fl.ev_suspects.push_back({r, o.wev, o.point, o.frame_no, o.ts, window, std::move(msg)});
}

// Data on an EV now proves it was usable (GOOD) at time t unless the checker holds it
// ASSUMED_BAD or SKIP, it came back from either only after t, or the requester probed it since
// its previous data (it may have retired it on its own evidence).
static bool usable_at(const EvState* st, uint64_t t) {
  if (!st) return true;
  if (st->mode != EvMode::kGood || st->recovered_at >= t) return false;  // ties: order unknown
  return !st->probing_at(t);
}

void Engine::ev_resolve(Flow& fl, uint32_t wev, uint64_t ts) {
  const EvState* st = fl.find_ev(wev);
  for (auto it = fl.ev_suspects.begin(); it != fl.ev_suspects.end();) {
    if (it->rule == EV_008 && ts == it->ts && wev != it->wev) {
      // Same time stamp, maybe another capture file: this use may have come first (per-port
      // captures merge file by file). Count the turns again with it.
      size_t used = 0;
      for (const auto& [e, s2] : fl.evs)
        if (e != it->wev && (e == wev || s2.last_data > it->skip_since)) ++used;
      if (used >= it->skip_need) {
        excuse(EV_008);
        it = fl.ev_suspects.erase(it);
        continue;
      }
    }
    if (wev != it->wev && usable_at(st, it->ts)) {
      fail_at(it->rule, it->point, it->frame, it->ts,
              it->msg + "; EV " + hex(wev) + " carried data " + std::to_string(ts - it->ts) +
                  " ns later, so another EV was usable");
      it = fl.ev_suspects.erase(it);
    } else if (--it->left == 0) {
      excuse(it->rule);  // no other EV used: the requester was down to this one
      it = fl.ev_suspects.erase(it);
    } else {
      ++it;
    }
  }
}

void Engine::ev_spray_drain(Flow& fl, uint64_t now_ts, bool final) {
  while (!fl.spray_pend.empty()) {
    auto it = fl.spray_pend.begin();
    if (it->first != fl.spray_next) {
      // A PSN not seen yet: wait for it (per-port captures interleave late), unless it is
      // overdue. Its EV is unknown, so the run restarts after it.
      const bool overdue =
          final || fl.spray_pend.size() >= kSprayReorderMax || now_ts > it->second.ts + kSprayGapNs;
      if (!overdue) return;
      fl.run_len = 0;
      fl.spray_next = it->first;
    }
    ev_spray(fl, it->second);
    fl.spray_next++;
    fl.spray_pend.erase(it);
  }
}

void Engine::ev_spray(Flow& fl, const Flow::SprayPend& sp) {
  // MRC-EV-001: spraying, in PSN (send) order.
  if (!sp.known) {
    fl.run_len = 0;
    return;
  }
  const uint32_t w = sp.wev;
  if (w == fl.run_wev && fl.run_len > 0) {
    fl.run_len++;
  } else {
    fl.run_wev = w;
    fl.run_len = 1;
    fl.run_flagged = false;
  }
  const size_t act = fl.active_evs();
  const size_t threshold = std::max<size_t>(prof.tol.spray_run_max, 2 * act);
  const bool single_ev_profile = fl.prof.evs.size() == 1;
  if (fl.run_len > threshold && !fl.run_flagged) {
    judge(EV_001);
    if (!single_ev_profile) {
      ev_spray_settle(fl, sp.ts, true);  // an earlier run still waiting
      fl.spray_flag_on = true;
      fl.spray_flag_wev = w;
      fl.spray_flag_narrow = act < 2;
      fl.spray_flag = sp;
      fl.spray_flag_msg = std::to_string(fl.run_len) +
                          " consecutive new data packets (in PSN order) on EV " + hex(w) +
                          " (active EVs " + std::to_string(act) + ", limit " +
                          std::to_string(threshold) + ")";
    }
    fl.run_flagged = true;
  } else if (fl.run_len == 1) {
    judge(EV_001);
  }
}

void Engine::ev_spray_settle(Flow& fl, uint64_t now_ts, bool final) {
  if (!fl.spray_flag_on || (!final && now_ts <= fl.spray_flag.ts)) return;
  fl.spray_flag_on = false;
  // Exempt when no other active EV was usable: each is ASSUMED_BAD or SKIP in the
  // reconstruction, or the requester probed it since its last data on it (retired on the
  // requester's own evidence, e.g. a SACK gap).
  const uint32_t w = fl.spray_flag_wev;
  const uint64_t t = fl.spray_flag.ts;
  // Nor is an EV whose plane the responder reported down (SACK port_status, PORT_STATUS_UPDATE).
  const auto ps = port_status.find({fl.req_node, fl.rsp_node});
  auto plane_down = [&](uint32_t e) {
    if (ps == port_status.end() || !fl.planes.init) return false;
    const uint32_t* idx = fl.planes.idx_of.find(e);
    if (!idx) return false;
    const uint8_t port = fl.prof.evs[*idx - 1].port;
    return port != 0 && port < 32 && !(ps->second.usable & (1u << port)) &&
           ps->second.down_since[port] <= t;
  };
  auto usable = [&](uint32_t e, const EvState& st) {
    return st.mode == EvMode::kGood && !st.probing_at(t) && !plane_down(e);
  };
  size_t usable_others = 0;
  for (const auto& [e, st] : fl.evs)
    if (e != w && (fl.spray_flag_narrow || fl.recent_count.find(e)) && usable(e, st))
      ++usable_others;
  if (fl.spray_flag_narrow)  // profile EVs never seen are usable as far as the trace shows
    for (const EvEntry& x : fl.prof.evs)
      if (x.wev != w && !fl.evs.count(x.wev) && !plane_down(x.wev)) ++usable_others;
  if (usable_others == 0) {
    excuse(EV_001);
    return;
  }
  fail_at(EV_001, fl.spray_flag.point, fl.spray_flag.frame, fl.spray_flag.ts,
          std::move(fl.spray_flag_msg));
}

void Engine::ev_signal(const Obs& o, Flow& fl, uint32_t wev, EvMode mode, const char* what) {
  (void)what;
  if (fl.spray_flag_on) ev_spray_settle(fl, o.ts, false);
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end()) {
    if (fl.evs.size() >= kMaxEvStates) return;
    it = fl.evs.emplace(wev, EvState{}).first;
  }
  EvState& st = it->second;
  if (mode == EvMode::kSkip) {
    if (st.mode == EvMode::kBad) return;  // ASSUMED_BAD dominates
    if (st.mode != EvMode::kSkip) fl.skip_count++;
    st.skip_judged = false;  // a new episode
    st.mode = EvMode::kSkip;
    const size_t others = fl.active_evs() > 0 ? fl.active_evs() - 1 : 0;
    st.need_others = static_cast<size_t>(
        std::ceil(prof.tol.skip_rotation_fraction * static_cast<double>(others)));
  } else if (mode == EvMode::kBad) {
    // Retired since the first evidence: a later loss on it (the requester resending the rest of
    // what it had in flight there) neither restarts the reaction time nor the probe clock.
    if (st.mode == EvMode::kBad) return;
    if (st.mode == EvMode::kSkip) fl.skip_count--;
    st.skip_judged = false;
    if (st.mode != EvMode::kBad) fl.bad_count++;
    st.mode = EvMode::kBad;
    st.last_probe = 0;
    st.probe_flagged_at = 0;
  }
  st.since = o.ts;
  st.sig_capture = o.point;
  st.sig_frame = o.frame_no;
}

void Engine::ev_timeout_retire(const Obs& o, Flow& fl, uint32_t wev, uint64_t decided_at) {
  // A requester whose other EVs were unusable when its timer expired is at its ev_min_active
  // floor and keeps the EV (R40); usable = not ASSUMED_BAD, not just back, not being probed.
  // A probe answer for the EV after the timer expired already ends the retirement (R40).
  if (const EvState* st = fl.find_ev(wev); st && st->probe_ok_at > decided_at) return;
  const size_t active = std::max<size_t>(fl.active_evs(), 1);
  const size_t floor = fl.prof.ev_min_active.value_or(std::max<size_t>(1, active / 4));
  size_t usable_others = 0;
  for (const auto& [e, st] : fl.evs)
    if (e != wev && fl.recent_count.find(e) && st.mode != EvMode::kBad &&
        st.recovered_at < decided_at && !st.probing_at(decided_at))
      ++usable_others;
  if (usable_others < floor) return;
  ev_signal(o, fl, wev, EvMode::kBad, "timeout");
}

void Engine::ev_probe_ok(const Obs& o, Flow& fl, uint32_t wev) {
  if (fl.spray_flag_on) ev_spray_settle(fl, o.ts, false);
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end()) return;
  it->second.probe_ok_at = o.ts;
  if (it->second.mode != EvMode::kBad) return;
  it->second.mode = EvMode::kGood;
  it->second.recovered_at = kNoTime;  // set by the requester's next data on it
  fl.bad_count--;
}

void Engine::ev_probe_sent(const Obs& o, Flow& fl, uint32_t wev) {
  if (fl.spray_flag_on) ev_spray_settle(fl, o.ts, false);
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end()) {
    if (fl.evs.size() >= kMaxEvStates) return;
    it = fl.evs.emplace(wev, EvState{}).first;
  }
  if (it->second.probe_since == 0) it->second.probe_since = o.ts;
  if (it->second.mode != EvMode::kBad) return;
  EvState& st = it->second;
  const uint64_t last = std::max(st.since, st.last_probe);
  judge(EV_010);
  if (o.ts > last + prof.tol.t_probe_ns + prof.tol.reaction_ns && st.probe_flagged_at != last) {
    fail(EV_010, o,
         "probe on ASSUMED_BAD EV " + hex(wev) + " after " + std::to_string(o.ts - last) +
             " ns without one; T_probe is " + std::to_string(prof.tol.t_probe_ns) + " ns");
  }
  st.last_probe = o.ts;
}

void Engine::ev_sweep(Flow& fl, uint64_t t, bool final) {
  if (final) {
    ev_spray_drain(fl, t, true);
    ev_spray_settle(fl, t, true);
    for (const Flow::EvSuspect& sp : fl.ev_suspects) excuse(sp.rule);
    fl.ev_suspects.clear();
  }
  if (fl.bad_count == 0) return;
  for (auto& [w, st] : fl.evs) {
    if (st.mode != EvMode::kBad) continue;
    const uint64_t last = std::max(st.since, st.last_probe);
    if (t <= last + prof.tol.t_probe_ns + prof.tol.reaction_ns || st.probe_flagged_at == last)
      continue;
    st.probe_flagged_at = last;
    judge(EV_010);
    fail_at(EV_010, st.sig_capture, st.sig_frame, last,
            "EV " + hex(w) + " ASSUMED_BAD since " + at(st.since) + " was not probed for " +
                dur(t - last) + " (limit: T_probe " + dur(prof.tol.t_probe_ns) + " + reaction " +
                dur(prof.tol.reaction_ns) + ")");
  }
}

}  // namespace mrc::check::detail
