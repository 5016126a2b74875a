// Per-plane EV rules: the SRv6 outer DA of each EV (MRC-EV-007), reaction to port status
// (MRC-EV-012), and the balance of EVs across planes in steady state (MRC-EV-002) and after
// replacements (MRC-EV-011).
//
// A plane is a 1-based NIC port; an EV's plane is its port in the DUT profile (qps[].evs[].port),
// and port k of one node faces port k of its peers (one switch plane per port number).
#include <algorithm>

#include "conformance/internal.h"

namespace mrc::check::detail {
namespace {

constexpr size_t kMinWindow = 256;   // new data packets per balance window, at least
constexpr size_t kWindowPerEv = 16;  // ... and this many per EV of the profile
constexpr size_t kMaxWindow = 65536;

void plane_init(PlaneTrack& pt, const QpProfile& prof) {
  pt.init = true;
  for (size_t i = 0; i < prof.evs.size(); ++i) {
    const EvEntry& e = prof.evs[i];
    if (!pt.idx_of.find(e.wev)) pt.idx_of[e.wev] = static_cast<uint32_t>(i + 1);
    if (e.port >= 1 && e.port <= 32 &&
        std::find(pt.ports.begin(), pt.ports.end(), e.port) == pt.ports.end())
      pt.ports.push_back(e.port);
  }
  std::sort(pt.ports.begin(), pt.ports.end());
  pt.win_target = static_cast<uint32_t>(
      std::min(kMaxWindow, std::max(kMinWindow, kWindowPerEv * prof.evs.size())));
}

std::string addr_str(const wire::Ipv6Addr& a) {
  return wire::format_ipv6(a);
}

}  // namespace

void Engine::port_signal(const Obs& o, int sender, int peer, uint32_t usable, uint32_t known,
                         const char* how) {
  if (sender < 0 || peer < 0) return;
  PortStatus& ps = port_status[{sender, peer}];
  for (uint32_t k = 1; k < 32; ++k) {
    const uint32_t bit = 1u << k;
    if (!(known & bit)) continue;
    const bool up = usable & bit;
    const bool was_up = ps.usable & bit;
    if (!up && was_up) {
      ps.down_since[k] = o.ts;
      ps.point[k] = o.point;
      ps.frame[k] = o.frame_no;
      ps.how[k] = how;
      ps.flagged &= ~bit;
      ps.usable &= ~bit;
    } else if (up) {
      ps.usable |= bit;
    }
  }
}

void Engine::plane_on_sack(const Obs& o, const wire::DecodedFrame& f, Flow& fl) {
  if (!f.seth.psv || !arrival_at_req(fl, o) || ctl_dropped(fl, o)) return;
  // SACK port_status bit i: the responder's port i+1 is usable (ports 1..8).
  port_signal(o, fl.req_node, fl.rsp_node, static_cast<uint32_t>(f.seth.port_status) << 1, 0x1FEu,
              "SACK port_status");
}

void Engine::plane_on_packet(const Obs& o, const wire::DecodedFrame& f, Flow& fl, bool data) {
  PlaneTrack& pt = fl.planes;
  if (!pt.init) plane_init(pt, fl.prof);
  const bool req_cap = requester_captured(fl);
  const uint32_t* idx = pt.idx_of.find(o.wev);
  const EvEntry* ent = idx ? &fl.prof.evs[*idx - 1] : nullptr;

  // MRC-EV-007: the outer DA (and SRH segment) of an SRv6 packet is its EV's expansion. Only the
  // requester's own capture shows the DA before any switch shifted it.
  if (f.has_inner_ip6 && f.l3 == 6) {
    if (!req_cap) {
      na(EV_007, "needs the requester's own capture (switches shift the outer DA)");
    } else if (o.at_src && o.first) {
      if (!ent || !ent->da) {
        na(EV_007,
           "the DUT profile gives no SRv6 expansion for the EV (qps[].evs[].da, or compact with "
           "ev_expansion)");
      } else {
        judge(EV_007);
        const char* what = data ? "data" : "reliability probe";
        if (!same_addr(f.ip6.dst, *ent->da)) {
          fail(EV_007, o,
               std::string(what) + " on WEV " + hex(o.wev) + ": outer DA " + addr_str(f.ip6.dst) +
                   ", expected the EV's expansion " + addr_str(*ent->da));
        } else if (ent->segment && !f.has_srh) {
          fail(EV_007, o,
               std::string(what) + " on WEV " + hex(o.wev) + ": no SRH, expected segment " +
                   addr_str(*ent->segment) + " (EV expansion wider than 128 bits)");
        } else if (ent->segment && !same_addr(f.srh.segments[0], *ent->segment)) {
          fail(EV_007, o,
               std::string(what) + " on WEV " + hex(o.wev) + ": SRH segment " +
                   addr_str(f.srh.segments[0]) + ", expected " + addr_str(*ent->segment));
        } else if (!ent->segment && f.has_srh) {
          fail(EV_007, o,
               std::string(what) + " on WEV " + hex(o.wev) +
                   ": SRH present, but the EV's expansion fits the outer DA (128 bits)");
        }
      }
    }
  }
  if (data && !f.has_inner_ip6) na(EV_007, "no SRv6 data (EV format srv6) in the trace");
  if (!data) return;

  // MRC-EV-012: no data toward a peer on a plane the peer marked down.
  const bool sender_view = req_cap ? o.at_src : o.first;
  if (sender_view) {
    const uint8_t k = ent ? ent->port : 0;
    if (!pt.port_status && !port_status.empty()) {
      auto it = port_status.find({fl.req_node, fl.rsp_node});
      if (it != port_status.end()) pt.port_status = &it->second;
    }
    if (!pt.port_status) {
      na(EV_012,
         "no PORT_STATUS_UPDATE from the responder nor SACK port_status (PSV=1) reached "
         "the requester");
    } else if (k == 0 || k > 31) {
      na(EV_012, "EV-to-port map not in the DUT profile (qps[].evs[].port)");
    } else {
      PortStatus& ps = *pt.port_status;
      const uint32_t bit = 1u << k;
      judge(EV_012);
      if (!(ps.usable & bit) && o.ts > ps.down_since[k] + prof.tol.t_port_ns &&
          !(ps.flagged & bit)) {
        ps.flagged |= bit;
        fail(EV_012, o,
             "data PSN " + std::to_string(f.bth.psn) + " toward " + format_addr(o.dst) +
                 " on WEV " + hex(o.wev) + " (plane " + std::to_string(k) + ") " +
                 std::to_string(o.ts - ps.down_since[k]) + " ns after " + ps.how[k] +
                 " marked that port down (frame " + std::to_string(ps.frame[k]) +
                 "); expected no plane-" + std::to_string(k) + " EV after " +
                 std::to_string(prof.tol.t_port_ns) + " ns until the port is marked up");
      }
    }
  }

  // MRC-EV-002 / MRC-EV-011: distinct EVs per plane over windows of new data.
  if (!req_cap) {
    na(EV_002, "needs the requester's own capture(s)");
    na(EV_011, "needs the requester's own capture(s)");
    return;
  }
  if (!o.at_src || !o.first || f.bth.rtx) return;
  if (pt.ports.size() < 2) {
    na(EV_002, "the DUT profile's EVs (qps[].evs[].port) name fewer than two planes");
    na(EV_011, "the DUT profile's EVs (qps[].evs[].port) name fewer than two planes");
    return;
  }
  if (pt.win_len == 0) {
    na(EV_002,
       "no complete window of max(256, 16 x profile EVs) new data packets in steady "
       "state (every plane in use, no EV retired or replaced, no port marked down)");
    na(EV_011,
       "no replacement EV (a never-used EV starting to carry new data after the first "
       "window) followed by a complete window with every plane in use");
    pt.win_point = o.point;
    pt.win_frame = o.frame_no;
    pt.win_ts = o.ts;
  }
  pt.win_len++;
  if (fl.bad_count > 0) pt.win_bad = true;
  if (pt.port_status)
    for (uint8_t p : pt.ports)
      if (p < 32 && !(pt.port_status->usable & (1u << p))) pt.win_dirty = true;
  if (ent && ent->port >= 1 && ent->port <= 32) {
    uint32_t& last = pt.last_win[o.wev];
    const uint32_t cur = pt.win_id + 1;
    if (last != cur) {
      if (last == 0 && pt.win_id > 0 && !pt.win_repl) {
        pt.win_repl = true;
        pt.repl_wev = o.wev;
        pt.repl_ts = o.ts;
      }
      if (last != 0 && last + 1 == cur) pt.carried++;
      last = cur;
      pt.count[ent->port]++;
      pt.distinct++;
    }
  }
  if (pt.win_len < pt.win_target) return;

  // The window is complete: judge it.
  uint32_t mx = 0, mn = UINT32_MAX;
  std::string counts;
  for (uint8_t p : pt.ports) {
    mx = std::max(mx, pt.count[p]);
    mn = std::min(mn, pt.count[p]);
    if (!counts.empty()) counts += ", ";
    counts += "port ";
    counts += std::to_string(p);
    counts += ": ";
    counts += std::to_string(pt.count[p]);
  }
  const bool any_idle = mn == 0;  // a plane without EVs is read as a port down
  const uint32_t allowed = 1 + prof.tol.plane_balance_slack;
  const std::string span = std::to_string(pt.win_len) + " new data packets from " + at(pt.win_ts);
  const bool steady = !pt.win_bad && !pt.win_dirty && !any_idle &&
                      !(pt.win_id > 0 && pt.win_repl) &&
                      (pt.win_id == 0 || pt.carried == pt.prev_distinct);
  if (steady) {
    judge(EV_002);
    if (mx - mn > allowed)
      fail_at(EV_002, pt.win_point, pt.win_frame, pt.win_ts,
              "distinct EVs per plane over " + span + ": " + counts +
                  "; expected to differ by at most " + std::to_string(allowed));
  }
  if (pt.prev_repl && !pt.win_repl && !pt.win_dirty && !any_idle) {
    judge(EV_011);
    if (mx - mn > allowed)
      fail_at(EV_011, pt.win_point, pt.win_frame, pt.win_ts,
              "after replacement EV " + hex(pt.repl_wev) + " first carried data at " +
                  at(pt.repl_ts) + ", distinct EVs per plane over " + span + ": " + counts +
                  "; expected to differ by at most " + std::to_string(allowed));
  }
  pt.prev_repl = pt.win_id > 0 && pt.win_repl;
  pt.prev_distinct = pt.distinct;
  pt.win_id++;
  pt.win_len = 0;
  pt.distinct = pt.carried = 0;
  pt.win_repl = pt.win_bad = pt.win_dirty = false;
  pt.count.fill(0);
}

}  // namespace mrc::check::detail
