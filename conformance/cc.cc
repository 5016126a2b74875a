// MRC-CC-002: no window growth on SACKs with M=01 while the measured delay is at or above
// target_delay (UET NSCC: ECN with delay above target is a multiplicative decrease).
//
// Traces do not show cwnd, so the rule is judged from what they do show, with the CC profile's
// base_rtt and target_delay from the DUT profile (qps[].cc):
// - the delay is what the requester measures: its clock at the SACK's arrival (its ts16 clock,
//   calibrated on its last data packet, at most 4 ms old) minus ts_echo, minus base_rtt. A SACK
//   qualifies with M=01 and a delay of at least target_delay + tolerances.reaction_ns (the margin
//   covers the gap between the requester stamping ts16 and its capture seeing the frame);
// - a stretch runs from a qualifying SACK's arrival to the next SACK that does not qualify.
//   Within it, bytes in flight (the MRC-CC-001 estimate) reaching above the highest level seen
//   before the stretch by more than one packet is read as window growth.
// The reading assumes the requester was window-limited before the stretch (a sender that only
// then gets more data to send also rises), hence the rule's info level.
#include <algorithm>

#include "conformance/internal.h"

namespace mrc::check::detail {
namespace {

constexpr uint64_t kCalibrationMaxAgeNs = 4'000'000;  // ts16 wraps every 8.39 ms

}  // namespace

void Engine::cc_on_sack(const Obs& o, const wire::DecodedFrame& f, Flow& fl) {
  if (!fl.prof.cc_target_delay_ns || !fl.prof.cc_base_rtt_ns) {
    na(CC_002,
       "needs the CC profile's base_rtt and target_delay (qps[].cc.base_rtt_ns, "
       "qps[].cc.target_delay_ns)");
    return;
  }
  if (!requester_captured(fl)) {
    na(CC_002, "needs the requester's own capture(s): its send times and ts16 clock");
    return;
  }
  if (!o.at_dst || o.icrc_bad || f.seth.pr) return;  // arrivals at the requester; not probe answers
  CcTrack& c = fl.cc;
  bool qualifies = false;
  uint64_t delay = 0;
  if (f.seth.m == static_cast<uint8_t>(wire::SackM::kSkipOnce) && c.have_cal && o.ts >= c.cal_ts &&
      o.ts - c.cal_ts < kCalibrationMaxAgeNs) {
    const uint16_t now16 = static_cast<uint16_t>(c.cal_ts16 + (o.ts - c.cal_ts) / 128);
    const uint64_t rtt = uint64_t{static_cast<uint16_t>(now16 - f.cc_state.ts_echo)} * 128;
    if (rtt >= *fl.prof.cc_base_rtt_ns) {
      delay = rtt - *fl.prof.cc_base_rtt_ns;
      qualifies = delay >= *fl.prof.cc_target_delay_ns + prof.tol.reaction_ns;
    }
  }
  if (!qualifies) {
    c.open = false;
    if (!c.flagged) na(CC_002, "no SACK with M=01 and delay at or above target_delay");
    return;
  }
  if (c.open) return;
  if (c.hwm == 0) return;  // nothing in flight yet: no level to compare with
  c.open = true;
  c.flagged = false;
  c.ref = c.hwm;
  c.open_ts = o.ts;
  c.open_point = o.point;
  c.open_frame = o.frame_no;
  c.delay_ns = delay;
  judge(CC_002);
}

void Engine::cc_on_data(const Obs& o, const wire::DecodedFrame& f, Flow& fl) {
  if (!fl.prof.cc_target_delay_ns || !fl.prof.cc_base_rtt_ns) return;
  if (!requester_captured(fl) || !o.at_src || !o.first) return;
  CcTrack& c = fl.cc;
  if (f.bth.ts) {
    c.have_cal = true;
    c.cal_ts = o.ts;
    c.cal_ts16 = f.tseth.ts16;
  }
  if (c.open && !c.flagged && fl.inflight_bytes > c.ref + fl.max_nominal) {
    c.flagged = true;
    fail(CC_002, o,
         std::to_string(fl.inflight_bytes) + " B in flight, above the " + std::to_string(c.ref) +
             " B high-water mark plus one packet (" + std::to_string(fl.max_nominal) +
             " B), while every SACK since frame " + std::to_string(c.open_frame) + " (" +
             at(c.open_ts) + ", delay " + dur(c.delay_ns) + " >= target_delay " +
             dur(*fl.prof.cc_target_delay_ns) +
             ") had M=01 and delay at or above target_delay: expected no window growth");
  }
  c.hwm = std::max(c.hwm, fl.inflight_bytes);
}

}  // namespace mrc::check::detail
