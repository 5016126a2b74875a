// mrc_lab_sbs: the side-by-side transfer on the deterministic simulator, for MRC (the reference
// engine) and for go-back-N RC (the simulator's RC model), with the faults the SoftRoCE lab
// applies to rxe: Bernoulli loss on every fabric hop, or one of the paths going dark for a while.
//
// The transfer is perftest's: N RDMA WRITEs of B bytes from node a to node b, at most W of them
// outstanding (a new one is posted when one completes). The tool prints one JSON object with, per
// message, the time its first packet left a and the time a saw it complete, plus transport
// counters; side_by_side.py turns those into goodput, tail latency and stall time with the same
// definitions it applies to the rxe captures (lab/labreport.py).
//
// The fabric is one plane of `paths` spines: every packet crosses a's leaf, one spine and b's
// leaf, the spine chosen from its entropy value (UDP source port), so an RC QP (one source port)
// lives on one path and MRC sprays over all of them.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "reference-impl/sim/engine_harness.h"
#include "reference-impl/sim/gbn_model.h"
#include "reference-impl/sim/sim.h"
#include "wire/wire.h"

namespace {

using mrc::sim::Fault;
using mrc::sim::LinkConfig;
using mrc::sim::PathSelect;
namespace harness = mrc::sim::harness;
namespace eng = mrc::engine;
namespace wire = mrc::wire;
using json = nlohmann::json;

struct Args {
  std::string transport = "mrc";  // mrc | rc
  std::string fault = "none";     // none | loss | flap
  uint32_t messages = 1000;
  uint32_t msg_bytes = 65536;
  uint32_t window = 128;  // outstanding messages (perftest tx_depth)
  uint32_t paths = 8;
  double link_gbps = 0.4;     // every link (host and fabric)
  uint64_t prop_ns = 10'000;  // per link
  double loss_pct = 1.0;      // per fabric hop, both directions
  uint64_t flap_at_ns = 400'000'000;
  uint64_t flap_ns = 200'000'000;
  uint32_t flap_path = 0;  // RC's path with the default source port (worst case for RC)
  uint64_t rc_timeout_ns = 67'108'864;  // perftest -u 14: 4.096 us * 2^14
  uint32_t rc_retry_cnt = 7;
  uint32_t rc_window_psns = 128;  // rxe: RXE_MAX_UNACKED_PSNS
  uint32_t rc_ack_every = 64;     // rxe: RXE_MAX_PKT_PER_ACK
  double mrc_timeout_us = 0;      // 0: 8 x the unloaded RTT (rounded up to 1.024 us * 2^t)
  double mrc_probe_us = 0;        // 0: 3 x the unloaded RTT (the engine's 16 us suits 100G fabrics)
  uint32_t mrc_mpr = 1;           // 128-PSN units: the same in-flight cap as rxe
  uint32_t mrc_evs = 16;
  uint64_t seed = 1;
  uint64_t slice_ns = 10'000;
  uint64_t limit_ns = 120'000'000'000;
  std::string pcap;  // keep the requester's capture here
};

LinkConfig link(const Args& a) {
  LinkConfig c;
  c.rate_bps = static_cast<uint64_t>(a.link_gbps * 1e9);
  c.prop_delay_ns = a.prop_ns;
  c.queue_bytes = 4u << 20;
  return c;
}

// Unloaded RTT of one MTU data packet out and a small ACK back: four store-and-forward links
// each way (host up, leaf->spine, spine->leaf, host down).
double base_rtt_us(const Args& a) {
  const double bps = a.link_gbps * 1e9;
  const double data = 4 * (4200 * 8 / bps * 1e6 + a.prop_ns / 1e3);
  const double ack = 4 * (100 * 8 / bps * 1e6 + a.prop_ns / 1e3);
  return data + ack;
}

uint8_t timeout_exp(double us) {
  // smallest t with 1.024 us * 2^t >= us
  const double t = std::ceil(std::log2(std::max(us, 1.024) / 1.024));
  return static_cast<uint8_t>(std::min<double>(t, eng::kMaxTimeoutExp));
}

struct Outcome {
  std::vector<int64_t> first_tx_ns;
  std::vector<int64_t> completion_ns;
  std::vector<std::string> status;  // per message, "success" or the failure
  json counters = json::object();
  std::string error;
  uint64_t sim_end_ns = 0;
};

// Per message: the earliest time any of its PSNs left the requester (from a's capture).
bool first_transmissions(const std::string& pcap, uint32_t sq_psn, uint32_t ppm, uint32_t messages,
                         std::vector<int64_t>& out, std::string& error) {
  std::vector<harness::CapturedFrame> frames;
  if (!harness::read_capture(pcap, frames, &error)) return false;
  std::map<uint32_t, uint64_t> first;  // PSN offset from sq_psn -> time
  for (const auto& f : frames) {
    const mrc::sim::PacketInfo pi = mrc::sim::inspect_frame(wire::as_bytes(f.bytes));
    if (pi.kind != wire::PacketKind::kMrcData && pi.kind != wire::PacketKind::kRcData) continue;
    const uint32_t off = wire::psn_diff(pi.psn, sq_psn);
    first.emplace(off, f.t_ns);  // keeps the first
  }
  out.assign(messages, -1);
  for (const auto& [off, t] : first) {
    const uint32_t k = off / ppm;
    if (k < messages && (out[k] < 0 || static_cast<int64_t>(t) < out[k])) out[k] = t;
  }
  return true;
}

void add_faults(mrc::sim::Simulator& sim, mrc::sim::Fabric& fabric, mrc::sim::NodeId a,
                mrc::sim::NodeId b, const Args& args, json& applied) {
  if (args.fault == "loss") {
    const double p = args.loss_pct / 100.0;
    for (uint32_t m = 0; m < args.paths; ++m) {
      sim.add_fault(fabric.leaf_to_spine(a, 1, m), Fault::drop().with_probability(p));
      sim.add_fault(fabric.leaf_to_spine(b, 1, m), Fault::drop().with_probability(p));
    }
    applied = {{"kind", "loss"},
               {"pct_per_hop", args.loss_pct},
               {"where", "every leaf->spine link, both directions (one lossy hop per packet)"}};
  } else if (args.fault == "flap") {
    fabric.fail_path(1, args.flap_path, args.flap_at_ns, args.flap_at_ns + args.flap_ns);
    applied = {{"kind", "flap"},
               {"path", args.flap_path},
               {"of_paths", args.paths},
               {"down_at_ns", args.flap_at_ns},
               {"down_ns", args.flap_ns}};
  } else {
    applied = {{"kind", "none"}};
  }
}

Outcome run_mrc(const Args& args, json& params) {
  Outcome o;
  harness::HarnessConfig hc;
  hc.seed = args.seed;
  hc.planes = 1;
  hc.paths = args.paths;
  hc.host_link = link(args);
  hc.fabric_link = link(args);
  hc.select = PathSelect::kWevModulo;
  hc.keep_events = false;
  hc.keep_decisions = false;
  const double rtt_us = base_rtt_us(args);
  const double probe_us = args.mrc_probe_us > 0 ? args.mrc_probe_us : 3 * rtt_us;
  hc.probe_interval_ns = static_cast<uint64_t>(probe_us * 1e3);
  harness::Harness h(hc);
  harness::QpConfig qc;
  qc.path_mtu = 4096;
  qc.mpr = static_cast<uint8_t>(args.mrc_mpr);
  qc.mpr_dest = static_cast<uint8_t>(args.mrc_mpr);
  qc.timeout = timeout_exp(args.mrc_timeout_us > 0 ? args.mrc_timeout_us : 8 * rtt_us);
  qc.max_send_wr = std::max<uint32_t>(args.window, 16);
  qc.ev = harness::generated_ev_profile(args.mrc_evs, 0, 1);
  h.connect(0, 1, 1, qc);
  if (!h.ok()) {
    o.error = h.error();
    return o;
  }
  params["mrc"] = {{"base_rtt_us", rtt_us},
                   {"probe_interval_us", probe_us},
                   {"timeout_exp", qc.timeout},
                   {"timeout_us", 1.024 * std::pow(2.0, qc.timeout)},
                   {"mpr_psns", args.mrc_mpr * eng::kMprUnitPsns},
                   {"evs", args.mrc_evs},
                   {"cc", qc.cc},
                   {"retry", "linear 7, exponential unlimited"}};
  const size_t len = static_cast<size_t>(args.messages) * args.msg_bytes;
  harness::GuardedBuffer src(len, 3), dst(len, 4);
  if (!src.register_with(h.ep(0), eng::kAccessLocalWrite).ok() ||
      !dst.register_with(h.ep(1), eng::kAccessLocalWrite | eng::kAccessRemoteWrite).ok()) {
    o.error = "register_mr failed";
    return o;
  }
  json applied;
  add_faults(h.sim(), h.fabric(), h.node(0).id, h.node(1).id, args, applied);
  params["fault"] = applied;
  const std::string pcap = args.pcap.empty() ? "/tmp/mrc_lab_sbs_mrc.pcap" : args.pcap;
  h.sim().capture_node(h.node(0).id, 0, pcap);
  const harness::Conn& c = h.conn(0);
  const uint64_t base = h.alloc_wr_ids(args.messages);
  o.completion_ns.assign(args.messages, -1);
  o.status.assign(args.messages, "not completed");
  uint32_t posted = 0, completed = 0, outstanding = 0;
  size_t seen = 0;
  auto post_more = [&] {
    while (posted < args.messages && outstanding < args.window) {
      const uint64_t off = static_cast<uint64_t>(posted) * args.msg_bytes;
      const eng::Sge sge{src.addr(off), args.msg_bytes, src.mr().lkey};
      eng::Status st =
          h.ep(0).post_write(c.qpn_a, base + posted, {&sge, 1}, dst.addr(off), dst.mr().rkey);
      if (!st.ok()) {
        o.error = "post_write: " + st.message;
        return false;
      }
      ++posted;
      ++outstanding;
    }
    h.wake(0);
    return true;
  };
  if (!post_more()) return o;
  bool failed = false;
  while (completed < args.messages && !failed && h.sim().now_ns() < args.limit_ns) {
    const auto r = h.sim().run_until(h.sim().now_ns() + args.slice_ns);
    if (r.status == mrc::sim::RunStatus::kError) {
      o.error = "simulator: " + r.error;
      break;
    }
    h.poll_all();
    auto& wcs = h.node(0).wcs;
    for (; seen < wcs.size(); ++seen) {
      const eng::Wc& w = wcs[seen];
      if (w.opcode != eng::WcOpcode::kRdmaWrite || w.wr_id < base ||
          w.wr_id >= base + args.messages)
        continue;
      const uint64_t k = w.wr_id - base;
      o.completion_ns[k] = static_cast<int64_t>(h.sim().now_ns());
      o.status[k] = std::string(eng::wc_status_name(w.status));
      --outstanding;
      ++completed;
      if (w.status != eng::WcStatus::kSuccess) failed = true;
    }
    if (!failed && !post_more()) break;
  }
  o.sim_end_ns = h.sim().now_ns();
  h.sim().close_captures();
  eng::QpStats qs = h.qp_stats(0, c.qpn_a);
  o.counters = {{"data_packets_sent", qs.data_packets_sent},
                {"retransmits", qs.retransmits},
                {"rtx_timeout", qs.rtx_timeout},
                {"rtx_nack", qs.rtx_nack},
                {"rtx_sack_gap", qs.rtx_sack_gap},
                {"sacks_rx", qs.sacks_rx},
                {"nacks_rx", qs.nacks_rx},
                {"probes_sent", qs.probes_sent},
                {"ev_good_at_end", qs.ev_good},
                {"ev_assumed_bad_at_end", qs.ev_assumed_bad},
                {"exact", src.equals(dst) && dst.guards_intact()}};
  const uint32_t ppm = (args.msg_bytes + qc.path_mtu - 1) / qc.path_mtu;
  std::string err;
  if (!first_transmissions(pcap, c.sq_psn_a, ppm, args.messages, o.first_tx_ns, err))
    o.error = "capture: " + err;
  if (args.pcap.empty()) std::remove(pcap.c_str());
  return o;
}

Outcome run_rc(const Args& args, json& params) {
  Outcome o;
  harness::GbnPairConfig gc;
  gc.seed = args.seed;
  gc.planes = 1;
  gc.paths = args.paths;
  gc.host_link = link(args);
  gc.fabric_link = link(args);
  gc.select = PathSelect::kWevModulo;
  gc.node.port = 1;
  gc.node.path_mtu = 4096;
  gc.node.window_psns = args.rc_window_psns;
  gc.node.timeout_ns = args.rc_timeout_ns;
  gc.node.retry_cnt = args.rc_retry_cnt;
  gc.node.ack_req_every = args.rc_ack_every;
  gc.qps = 1;
  harness::GbnPair p(gc);
  params["rc"] = {{"timeout_ns", args.rc_timeout_ns},
                  {"retry_cnt", args.rc_retry_cnt},
                  {"window_psns", args.rc_window_psns},
                  {"ack_req_every", args.rc_ack_every},
                  {"path", gc.first_sport % args.paths}};
  const size_t len = static_cast<size_t>(args.messages) * args.msg_bytes;
  harness::GuardedBuffer src(len, 3), dst(len, 4);
  const uint32_t rkey = p.b().register_region(dst.data(), dst.size());
  json applied;
  add_faults(p.sim(), p.fabric(), p.id_a(), p.id_b(), args, applied);
  params["fault"] = applied;
  const std::string pcap = args.pcap.empty() ? "/tmp/mrc_lab_sbs_rc.pcap" : args.pcap;
  p.sim().capture_node(p.id_a(), 0, pcap);
  const uint32_t qpn = p.qpn_a(0);
  const uint32_t sq_psn = p.a().initial_psn(qpn);
  o.completion_ns.assign(args.messages, -1);
  o.status.assign(args.messages, "not completed");
  uint32_t posted = 0, completed = 0, outstanding = 0;
  size_t seen = 0;
  auto post_more = [&] {
    while (posted < args.messages && outstanding < args.window) {
      const uint64_t off = static_cast<uint64_t>(posted) * args.msg_bytes;
      if (!p.a().post_write(qpn, posted, src.data() + off, args.msg_bytes, dst.addr(off), rkey)) {
        return false;  // QP in error: the completions say why
      }
      ++posted;
      ++outstanding;
    }
    p.sim().wake(p.id_a());
    return true;
  };
  post_more();
  bool failed = false;
  while (completed < args.messages && !failed && p.sim().now_ns() < args.limit_ns) {
    const auto r = p.sim().run_until(p.sim().now_ns() + args.slice_ns);
    if (r.status == mrc::sim::RunStatus::kError) {
      o.error = "simulator: " + r.error;
      break;
    }
    p.poll();
    auto& wcs = p.completions();
    for (; seen < wcs.size(); ++seen) {
      const mrc::sim::GbnCompletion& w = wcs[seen];
      if (w.wr_id >= args.messages) continue;
      o.completion_ns[w.wr_id] = static_cast<int64_t>(p.sim().now_ns());
      o.status[w.wr_id] = std::string(mrc::sim::gbn_status_name(w.status));
      --outstanding;
      ++completed;
      if (w.status != mrc::sim::GbnStatus::kSuccess) failed = true;
    }
    if (!failed) post_more();
  }
  o.sim_end_ns = p.sim().now_ns();
  p.sim().close_captures();
  const mrc::sim::GbnStats& st = p.a().stats();
  o.counters = {{"data_packets_sent", st.data_packets_sent},
                {"retransmits", st.retransmitted_packets},
                {"timeouts", st.timeouts},
                {"go_backs", st.go_backs},
                {"naks_rx", st.naks_rx},
                {"exact", failed ? false : (src.equals(dst) && dst.guards_intact())}};
  const uint32_t ppm = (args.msg_bytes + gc.node.path_mtu - 1) / gc.node.path_mtu;
  std::string err;
  if (!first_transmissions(pcap, sq_psn, ppm, args.messages, o.first_tx_ns, err))
    o.error = "capture: " + err;
  if (args.pcap.empty()) std::remove(pcap.c_str());
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{
      "mrc_lab_sbs: MRC (reference engine) or go-back-N RC on the simulator, perftest-"
      "style transfer under the lab's faults; prints JSON"};
  app.add_option("--transport", a.transport, "mrc | rc")->check(CLI::IsMember({"mrc", "rc"}));
  app.add_option("--fault", a.fault, "none | loss | flap")
      ->check(CLI::IsMember({"none", "loss", "flap"}));
  app.add_option("--messages", a.messages, "RDMA WRITEs")->check(CLI::Range(1u, 1u << 20));
  app.add_option("--msg-bytes", a.msg_bytes, "bytes per WRITE")->check(CLI::Range(1u, 1u << 24));
  app.add_option("--window", a.window, "outstanding messages")->check(CLI::Range(1u, 1u << 16));
  app.add_option("--paths", a.paths, "spines (paths) in the plane")->check(CLI::Range(1u, 64u));
  app.add_option("--link-gbps", a.link_gbps, "rate of every link")
      ->check(CLI::Range(0.001, 1000.0));
  app.add_option("--prop-ns", a.prop_ns, "propagation delay of every link");
  app.add_option("--loss-pct", a.loss_pct, "loss per fabric hop")->check(CLI::Range(0.0, 100.0));
  app.add_option("--flap-at-ns", a.flap_at_ns, "path goes down at");
  app.add_option("--flap-ns", a.flap_ns, "for");
  app.add_option("--flap-path", a.flap_path, "which path (RC uses path 0)");
  app.add_option("--rc-timeout-ns", a.rc_timeout_ns, "RC local ACK timeout");
  app.add_option("--rc-retry-cnt", a.rc_retry_cnt, "RC timeouts without progress before error");
  app.add_option("--rc-window-psns", a.rc_window_psns, "RC unacknowledged PSN cap");
  app.add_option("--rc-ack-every", a.rc_ack_every, "RC AckReq every n packets");
  app.add_option("--mrc-timeout-us", a.mrc_timeout_us,
                 "MRC ACK timeout, rounded up to 1.024us*2^t (0: 8x the unloaded RTT)");
  app.add_option("--mrc-probe-us", a.mrc_probe_us,
                 "MRC EV probe interval (0: 3x the unloaded RTT)");
  app.add_option("--mrc-mpr", a.mrc_mpr, "MRC MPR (128-PSN units)")->check(CLI::Range(1u, 255u));
  app.add_option("--mrc-evs", a.mrc_evs, "MRC EVs per QP")->check(CLI::Range(1u, 4096u));
  app.add_option("--seed", a.seed, "simulator seed");
  app.add_option("--slice-ns", a.slice_ns, "completion polling granularity");
  app.add_option("--limit-ns", a.limit_ns, "give up after this much simulated time");
  app.add_option("--pcap", a.pcap, "keep the requester's capture here");
  CLI11_PARSE(app, argc, argv);
  if (a.fault == "flap" && a.flap_path >= a.paths) {
    std::fprintf(stderr, "mrc_lab_sbs: --flap-path %u must be below --paths %u\n", a.flap_path,
                 a.paths);
    return 2;
  }
  json params = {{"base_rtt_us", base_rtt_us(a)},
                 {"messages", a.messages},
                 {"msg_bytes", a.msg_bytes},
                 {"window", a.window},
                 {"paths", a.paths},
                 {"link_gbps", a.link_gbps},
                 {"prop_ns", a.prop_ns},
                 {"seed", a.seed},
                 {"path_mtu", 4096}};
  const auto t0 = std::chrono::steady_clock::now();
  Outcome o = a.transport == "mrc" ? run_mrc(a, params) : run_rc(a, params);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::map<std::string, uint32_t> status_counts;
  for (const auto& s : o.status) ++status_counts[s];
  json out = {{"transport", a.transport == "mrc" ? "MRC (reference engine, simulator)"
                                                 : "RC go-back-N (simulator model)"},
              {"fault", a.fault},
              {"params", params},
              {"first_tx_ns", o.first_tx_ns},
              {"completion_ns", o.completion_ns},
              {"status_counts", status_counts},
              {"counters", o.counters},
              {"sim_end_ns", o.sim_end_ns},
              {"wall_s", wall}};
  if (!o.error.empty()) out["error"] = o.error;
  std::printf("%s\n", out.dump().c_str());
  return o.error.empty() ? 0 : 1;
}
