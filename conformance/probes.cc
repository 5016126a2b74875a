// Endpoint operations (EV probe, port-status update): MRC-PRB-003..008.
// Reliability probes (0xDE) are judged in requester.cc / responder.cc with their QP.
#include <algorithm>

#include "conformance/internal.h"

namespace mrc::check::detail {

void Engine::on_endpoint(const Obs& o, const wire::DecodedFrame& f) {
  const bool request = f.op->kind == wire::PacketKind::kMrcEndpointRequest;
  const uint16_t id = static_cast<uint16_t>(f.bth.psn & 0xFFFF);
  // Arrival at the destination node (its own capture, or anywhere when it has none).
  const bool arrived = o.dst_node >= 0 && !o.icrc_bad &&
                       (node_has_point[static_cast<size_t>(o.dst_node)] ? o.at_dst : o.first);
  if (arrived && request && f.erth.op == static_cast<uint8_t>(wire::EndpointOp::kPortStatusUpdate))
    port_signal(o, o.dst_node, o.src_node, f.erth.port_status_mask, 0xFFFFFFFEu,
                "PORT_STATUS_UPDATE");
  if (arrived && !request) {
    // An EV probe response reports the responder's usable ports too; taken only as marking
    // ports up (a device that does not fill the mask must not read as all ports down).
    port_signal(o, o.dst_node, o.src_node, f.eeth.port_status_mask, f.eeth.port_status_mask,
                "EV probe response");
    // MRC-PRB-007: the probe round trip bounds the reverse-probe period from below.
    auto it = ep_reqs.find(std::make_tuple(o.dst, o.src, id));
    if (it != ep_reqs.end() && it->second.op == static_cast<uint8_t>(wire::EndpointOp::kEvProbe) &&
        o.ts > it->second.ts)
      for (auto& fl : flows)
        if (fl->rsp_node == o.dst_node && fl->req_node == o.src_node)
          fl->rev.rtt_max = std::max(fl->rev.rtt_max, o.ts - it->second.ts);
  }
  if (request && o.at_src && f.erth.op == static_cast<uint8_t>(wire::EndpointOp::kEvProbe)) {
    // MRC-PRB-007: a reverse EV probe from a responder toward its requester, on the plane of the
    // port it left on.
    const uint8_t port = points[o.point].info.port;
    if (port >= 1 && port < RevProbeTrack::kPorts)
      for (auto& fl : flows)
        if (fl->rsp_node == o.src_node && fl->req_node == o.dst_node)
          fl->rev.last_probe[port] = o.ts;
  }
  if (!o.first) return;
  const char* what = request ? "endpoint request" : "endpoint response";

  judge(PRB_003);
  if (f.bth.dest_qp != wire::kEndpointOpQpn || (f.bth.psn >> 16) != 0)
    fail(PRB_003, o,
         std::string(what) + " has DestQP " + hex(f.bth.dest_qp) + " and PSN " + hex(f.bth.psn, 6) +
             "; expected DestQP 0x2 and PSN 0x00||req_id");

  if (request) {
    const auto key = std::make_tuple(o.src, o.dst, id);
    auto it = ep_reqs.find(key);
    judge(PRB_005);
    if (it != ep_reqs.end() && it->second.responses == 0 &&
        o.ts - it->second.ts < prof.tol.ep_timeout_ns)
      fail(PRB_005, o,
           "req_id " + std::to_string(id) + " reused " + std::to_string(o.ts - it->second.ts) +
               " ns after an unanswered request with the same id (frame " +
               std::to_string(it->second.frame) + ")");
    EndpointReq r;
    r.op = f.erth.op;
    r.ts = o.ts;
    r.ts16 = f.erth.ts16;
    r.wev = o.wev;
    r.point = o.point;
    r.frame = o.frame_no;
    ep_reqs[key] = r;
    ep_order.emplace_back(o.ts, key);
    if (f.erth.op == static_cast<uint8_t>(wire::EndpointOp::kEvProbe)) {
      // An EV probe toward a node also probes that EV for the QPs heading there (MRC-EV-010).
      for (auto& fl : flows)
        if (fl->req_node == o.src_node && fl->rsp_node == o.dst_node &&
            (o.at_src || !requester_captured(*fl)))
          ev_probe_sent(o, *fl, o.wev);
    }
    return;
  }

  judge(PRB_006);
  if (f.dscp() != prof.dscp.control)
    fail(PRB_006, o,
         "endpoint response uses DSCP " + std::to_string(f.dscp()) + "; CONTROL is " +
             std::to_string(prof.dscp.control));
  auto it = ep_reqs.find(std::make_tuple(o.dst, o.src, id));
  if (it == ep_reqs.end()) {
    // A response to a request sent before the capture started is not judged.
    if (first_ts != kNoTime && o.ts > first_ts + prof.tol.ep_timeout_ns &&
        !ep_pruned_pairs.count({o.dst, o.src})) {
      judge(PRB_004);
      fail(PRB_004, o,
           "endpoint response req_id " + std::to_string(id) + " to " + format_addr(o.dst) +
               " answers no request from that node");
    }
    return;
  }
  EndpointReq& rq = it->second;
  judge(PRB_004);
  if (rq.responses > 0)
    fail(PRB_004, o,
         "second response to req_id " + std::to_string(id) + " (request frame " +
             std::to_string(rq.frame) + ")");
  else if (f.eeth.op != rq.op)
    fail(PRB_004, o,
         "response op " + std::to_string(f.eeth.op) + " does not echo request op " +
             std::to_string(rq.op));
  rq.responses++;

  judge(PRB_008);
  const uint16_t want_echo = static_cast<uint16_t>(rq.ts16 + (f.eeth.sva ? f.eeth.svc_time : 0));
  if (f.eeth.entropy != rq.wev)
    fail(PRB_008, o,
         "EETH.entropy " + hex(f.eeth.entropy) + " != WEV the request arrived on " + hex(rq.wev));
  else if (f.eeth.ts_echo != want_echo)
    fail(PRB_008, o,
         "EETH.ts_echo " + std::to_string(f.eeth.ts_echo) + " != request ts16 " +
             std::to_string(rq.ts16) +
             (f.eeth.sva ? " + svc_time " + std::to_string(f.eeth.svc_time) : std::string()) +
             " = " + std::to_string(want_echo));
}

// MRC-PRB-007. A responder that receives data on a QP and sends none keeps its reverse EVs
// alive with EV probes toward the requester, about one per RTT on each plane. Judged per plane
// (responder port) while data keeps arriving on that port: each arrival more than the limit
// after both the last probe on that plane and the start of the arrivals is a gap. The limit is
// tolerances.t_reverse_probe_ns, or 4 x the longest EV probe round trip seen when larger.
void Engine::rev_on_data(const Obs& o, Flow& fl) {
  if (!responder_captured(fl)) {
    na(PRB_007, "needs the responder's own capture(s)");
    return;
  }
  if (!o.at_dst || o.icrc_bad) return;
  const uint8_t k = points[o.point].info.port;
  if (k == 0 || k >= RevProbeTrack::kPorts) {
    na(PRB_007, "needs per-port captures at the responder (captures.<file>.port)");
    return;
  }
  RevProbeTrack& rv = fl.rev;
  const uint64_t limit = std::max(prof.tol.t_reverse_probe_ns, 4 * rv.rtt_max);
  if (rv.last_data[k] == 0 || o.ts > rv.last_data[k] + limit) rv.period_start[k] = o.ts;
  rv.last_data[k] = o.ts;
  const uint64_t ref = std::max(rv.period_start[k], rv.last_probe[k]);
  if (o.ts <= ref + limit) {
    if (rv.last_probe[k] > rv.period_start[k]) rv.checked++;  // a probe came in time
    return;
  }
  rv.checked++;
  if (rv.flagged[k] == ref) return;
  rv.flagged[k] = ref;
  rv.violations++;
  if (rv.pending.size() < max_evidence) {
    rv.pending.push_back({o.point, o.frame_no, o.ts,
                          "data keeps arriving on port " + std::to_string(k) + " from " +
                              format_addr(o.src) + " but no EV probe went back on plane " +
                              std::to_string(k) + " for " + dur(o.ts - ref) + " (since " + at(ref) +
                              "), limit " + dur(limit) + ": expected about one per RTT"});
    rv.pending.back().from_ns = ref;  // the gap, for the viewer
    rv.pending.back().port = k;
  }
}

void Engine::rev_finish(Flow& fl) {
  if (fl.rev.checked == 0) return;
  for (const auto& g : flows)
    if (g->req_node == fl.rsp_node && g->rsp_node == fl.req_node && g->data_packets > 0) {
      na(PRB_007, "the responder also sends data to the requester (its SACKs keep reverse EVs)");
      return;
    }
  judge(PRB_007, fl.rev.checked);
  for (Evidence& e : fl.rev.pending) {
    std::vector<Evidence>& kept = rules[PRB_007].evidence;
    const size_t before = kept.size();
    fail_at(PRB_007, e.capture, e.frame, e.ts_ns, e.message);
    if (kept.size() > before) {
      kept.back().from_ns = e.from_ns;
      kept.back().port = e.port;
    }
  }
  // Gaps beyond the evidence kept count all the same.
  if (on(PRB_007)) rules[PRB_007].violations += fl.rev.violations - fl.rev.pending.size();
}

}  // namespace mrc::check::detail
