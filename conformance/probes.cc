// Endpoint operations (EV probe, port-status update): MRC-PRB-003..006 and MRC-PRB-008.
// Reliability probes (0xDE) are judged in requester.cc / responder.cc with their QP.
#include "conformance/internal.h"

namespace mrc::check::detail {

void Engine::on_endpoint(const Obs& o, const wire::DecodedFrame& f) {
  if (!o.first) return;
  const bool request = f.op->kind == wire::PacketKind::kMrcEndpointRequest;
  const uint16_t id = static_cast<uint16_t>(f.bth.psn & 0xFFFF);
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

}  // namespace mrc::check::detail
