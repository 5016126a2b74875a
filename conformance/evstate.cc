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

}  // namespace

void Engine::ev_carriage(const Obs& o, const wire::DecodedFrame& f, const Flow* fl) {
  if (!f.op || !f.op->mrc) return;
  judge(EV_003);
  std::string e;
  if (f.l3 == 6) {
    const uint32_t fl_outer = f.ip6.flow_label;
    if (fl_outer & 0xF0000u) e += " flow label " + hex(fl_outer, 5) + " has bits 19:16 set";
    if (fl && fl->prof.ev_format == wire::EvFormat::kUdp && fl_outer != 0)
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

void Engine::ev_on_data(const Obs& o, Flow& fl, bool is_new) {
  // Judged where the requester's choices are visible: its own capture, or any point if it has none.
  if (requester_captured(fl) && !o.at_src) return;
  const uint32_t w = o.wev;
  const uint64_t t = o.ts;
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
      if (usable > floor) {
        fail(EV_009, o,
             std::string(is_new ? "new data" : "retransmission") + " on EV " + hex(w) +
                 ", ASSUMED_BAD since t=" + std::to_string(st.since) +
                 " ns (no probe answer with M=00/01 since)");
        // One report per episode: treat the EV as released to avoid a cascade.
        st.mode = EvMode::kGood;
        fl.bad_count--;
      }
    }
    // MRC-EV-008: SKIP for a rotation (new data only).
    if (is_new && st.mode == EvMode::kSkip && t > st.since + prof.tol.reaction_ns) {
      size_t used = 0;
      for (const auto& [e, s2] : fl.evs)
        if (e != w && s2.last_use > st.since) ++used;
      judge(EV_008);
      if (t < st.since + prof.tol.t_skip_ns && used < st.need_others) {
        fail(EV_008, o,
             "new data on EV " + hex(w) + " " + std::to_string(t - st.since) +
                 " ns after a SKIP signal; only " + std::to_string(used) + " of " +
                 std::to_string(st.need_others) + " other EVs used since");
      }
      st.mode = EvMode::kGood;
      fl.skip_count--;
    }
    if (is_new) st.last_use = t;
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

  // MRC-EV-001: spraying.
  if (w == fl.run_wev && fl.run_len > 0) {
    fl.run_len++;
  } else {
    fl.run_wev = w;
    fl.run_len = 1;
    fl.run_flagged = false;
  }
  const size_t act = fl.active_evs();
  const size_t threshold = std::max<size_t>(prof.tol.spray_run_max, 2 * act);
  const size_t unusable = fl.bad_count + fl.skip_count;
  const bool single_ev_profile = fl.prof.evs.size() == 1;
  const bool degraded = act >= 2 && act - std::min(act, unusable) < 2;
  if (fl.run_len > threshold && !fl.run_flagged) {
    judge(EV_001);
    if (!degraded && !single_ev_profile) {
      fail(EV_001, o,
           std::to_string(fl.run_len) + " consecutive new data packets on EV " + hex(w) +
               " (active EVs " + std::to_string(act) + ", limit " + std::to_string(threshold) +
               ")");
    }
    fl.run_flagged = true;
  } else if (fl.run_len == 1) {
    judge(EV_001);
  }
}

void Engine::ev_signal(const Obs& o, Flow& fl, uint32_t wev, EvMode mode, const char* what) {
  (void)what;
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end()) {
    if (fl.evs.size() >= kMaxEvStates) return;
    it = fl.evs.emplace(wev, EvState{}).first;
  }
  EvState& st = it->second;
  if (mode == EvMode::kSkip) {
    if (st.mode == EvMode::kBad) return;  // ASSUMED_BAD dominates
    if (st.mode != EvMode::kSkip) fl.skip_count++;
    st.mode = EvMode::kSkip;
    const size_t others = fl.active_evs() > 0 ? fl.active_evs() - 1 : 0;
    st.need_others = static_cast<size_t>(
        std::ceil(prof.tol.skip_rotation_fraction * static_cast<double>(others)));
  } else if (mode == EvMode::kBad) {
    if (st.mode == EvMode::kSkip) fl.skip_count--;
    if (st.mode != EvMode::kBad) fl.bad_count++;
    st.mode = EvMode::kBad;
    st.last_probe = 0;
    st.probe_flagged_at = 0;
  }
  st.since = o.ts;
  st.sig_capture = o.point;
  st.sig_frame = o.frame_no;
}

void Engine::ev_timeout_retire(const Obs& o, Flow& fl, uint32_t wev) {
  ev_signal(o, fl, wev, EvMode::kBad, "timeout");
}

void Engine::ev_probe_ok(const Obs& o, Flow& fl, uint32_t wev) {
  (void)o;
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end() || it->second.mode != EvMode::kBad) return;
  it->second.mode = EvMode::kGood;
  fl.bad_count--;
}

void Engine::ev_probe_sent(const Obs& o, Flow& fl, uint32_t wev) {
  auto it = fl.evs.find(wev);
  if (it == fl.evs.end() || it->second.mode != EvMode::kBad) return;
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
  (void) final;
  if (fl.bad_count == 0) return;
  for (auto& [w, st] : fl.evs) {
    if (st.mode != EvMode::kBad) continue;
    const uint64_t last = std::max(st.since, st.last_probe);
    if (t <= last + prof.tol.t_probe_ns + prof.tol.reaction_ns || st.probe_flagged_at == last)
      continue;
    st.probe_flagged_at = last;
    judge(EV_010);
    fail_at(EV_010, st.sig_capture, st.sig_frame, last,
            "EV " + hex(w) + " ASSUMED_BAD since t=" + std::to_string(st.since) +
                " ns was not probed within T_probe " + std::to_string(prof.tol.t_probe_ns) + " ns");
  }
}

}  // namespace mrc::check::detail
