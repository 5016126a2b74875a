// Reference engine benchmarks, and the go-back-N RoCEv2 RC model measured the same way.
//
//   BM_EngineDirect/<qps>      engine cost alone: two endpoints hand frames to each other with no
//                              network in between; data packets per second of wall time.
//   BM_EngineSim/<qps>         the same transfer through the simulator (2 planes x 4 paths,
//                              100 Gb/s ports): wall-time packet rate and simulated goodput.
//   BM_Recovery_*              8 planes x 2 paths (16 paths); one path fails mid-transfer: the
//                              simulated time until in-order goodput is back to 15/16 of the
//                              fault-free rate (and stays there).
//   BM_Loss_*                  goodput of a 16 MiB transfer with 1 % random loss on every packet
//                              (both directions) and without, MRC and go-back-N RC.
// Simulated figures are deterministic (fixed seeds); bench/engine_run.sh prints them with ratios.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "reference-impl/sim/engine_harness.h"
#include "reference-impl/sim/gbn_model.h"

namespace mrc::sim {
namespace {

namespace eng = mrc::engine;
using harness::GbnPair;
using harness::GbnPairConfig;
using harness::GbnTransfer;
using harness::Harness;
using harness::HarnessConfig;
using harness::QpConfig;
using harness::Transfer;

constexpr uint32_t kMtu = 4096;
// Loss and failure runs: T = 1.024 us * 2^4 = 16.384 us, MRC and RC alike.
constexpr uint8_t kTimeoutExp = 4;
constexpr uint64_t kT = 1024ull << kTimeoutExp;
// Throughput runs: T = 262 us. With 64 QPs sharing two ports each QP sends one packet every
// ~11 us, so its 16 KiB SACK interval (~43 us) exceeds 16 us and T = 16 us would time out.
constexpr uint8_t kThroughputTimeoutExp = 8;

double gbps(uint64_t bytes, uint64_t ns) {
  return ns == 0 ? 0.0 : static_cast<double>(bytes) * 8.0 / static_cast<double>(ns);
}

// 16 active EVs per plane plus 16 backups per plane that replace retired ones (the paper's CX-8:
// many active EVs per QP plus a backup set, equal per plane).
QpConfig mrc_qp(std::string_view cc, uint8_t planes, uint8_t timeout_exp = kTimeoutExp) {
  QpConfig qc;
  qc.path_mtu = kMtu;
  qc.timeout = timeout_exp;
  qc.cc = std::string(cc);
  qc.ev = harness::generated_ev_profile(32u * planes, 16u * planes, 1);
  qc.max_send_wr = 64;
  qc.max_recv_wr = 64;
  return qc;
}

// ---------------------------------------------------------------------------------------------
// Engine throughput
// ---------------------------------------------------------------------------------------------
// Frames go straight from one endpoint to the other (the simulator is built but never run), so
// the figure is the cost of both engines per data packet: segmentation, encode with ICRC, decode
// with ICRC check, placement, SACK generation and processing.
void BM_EngineDirect(benchmark::State& state) {
  const uint32_t qps = static_cast<uint32_t>(state.range(0));
  const size_t per_qp = (16u << 20) / qps;
  uint64_t packets = 0, bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    HarnessConfig hc;
    hc.keep_events = false;
    hc.keep_decisions = false;
    Harness h(hc);
    h.connect(0, 1, qps, mrc_qp(eng::kCcNone, 2, kThroughputTimeoutExp));
    std::vector<std::unique_ptr<Transfer>> ts;
    for (uint32_t q = 0; q < qps; ++q) {
      ts.push_back(std::make_unique<Transfer>(h, q, per_qp, static_cast<uint8_t>(q)));
      ts.back()->post(4);
    }
    if (!h.ok()) state.SkipWithError(h.error().c_str());
    eng::Endpoint& a = h.ep(0);
    eng::Endpoint& b = h.ep(1);
    eng::TxPacket pkt;
    uint64_t now = 0;
    state.ResumeTiming();
    for (uint64_t step = 0; step < 10'000'000; ++step) {
      bool moved = false;
      while (a.poll_tx(now, pkt)) {
        b.on_packet(pkt.frame, pkt.port, now);
        moved = true;
      }
      while (b.poll_tx(now, pkt)) {
        a.on_packet(pkt.frame, pkt.port, now);
        moved = true;
      }
      now += 100;
      if (a.next_deadline_ns() <= now) a.on_timer(now);
      if (b.next_deadline_ns() <= now) b.on_timer(now);
      if (!moved) {
        h.poll_all();
        bool done = true;
        for (auto& t : ts) done = done && t->all_completed();
        if (done) break;
      }
    }
    state.PauseTiming();
    bool exact = true;
    for (uint32_t q = 0; q < qps; ++q) {
      exact = exact && ts[q]->exact();
      const eng::QpStats st = h.qp_stats(0, h.conn(q).qpn_a);
      packets += st.data_packets_sent + st.retransmits;
      bytes += st.data_bytes_sent;
    }
    if (!exact) state.SkipWithError("transfer not exact");
    state.ResumeTiming();
  }
  state.counters["pkts/s"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
  state.counters["payload_Gb/s"] =
      benchmark::Counter(static_cast<double>(bytes) * 8 / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineDirect)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// The same transfer through the simulator: 2 planes x 4 paths, 100 Gb/s host links.
void BM_EngineSim(benchmark::State& state) {
  const uint32_t qps = static_cast<uint32_t>(state.range(0));
  const size_t per_qp = (16u << 20) / qps;
  uint64_t packets = 0;
  double goodput = 0;
  for (auto _ : state) {
    HarnessConfig hc;
    hc.keep_events = false;
    hc.keep_decisions = false;
    Harness h(hc);
    h.connect(0, 1, qps, mrc_qp(eng::kCcNscc, 2, kThroughputTimeoutExp));
    std::vector<std::unique_ptr<Transfer>> ts;
    for (uint32_t q = 0; q < qps; ++q) {
      ts.push_back(std::make_unique<Transfer>(h, q, per_qp, static_cast<uint8_t>(q)));
      ts.back()->post(4);
    }
    const bool done = h.run(
        [&] {
          for (auto& t : ts)
            if (!t->all_completed()) return false;
          return true;
        },
        1'000'000'000, 1'000);
    if (!done || !h.ok()) state.SkipWithError(("did not complete: " + h.error()).c_str());
    for (uint32_t q = 0; q < qps; ++q) {
      if (!ts[q]->exact()) state.SkipWithError("transfer not exact");
      const eng::QpStats st = h.qp_stats(0, h.conn(q).qpn_a);
      packets += st.data_packets_sent + st.retransmits;
    }
    goodput = gbps(uint64_t{per_qp} * qps, h.sim().now_ns());
  }
  state.counters["pkts/s"] =
      benchmark::Counter(static_cast<double>(packets), benchmark::Counter::kIsRate);
  state.counters["sim_goodput_Gb/s"] = goodput;
  state.counters["line_rate_Gb/s"] = 200;
}
BENCHMARK(BM_EngineSim)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->MinTime(1.0);

// ---------------------------------------------------------------------------------------------
// Recovery after one of 16 paths fails
// ---------------------------------------------------------------------------------------------
constexpr uint8_t kRecPlanes = 8;
constexpr uint32_t kRecPaths = 2;
constexpr uint64_t kFailAt = 200'000;
constexpr uint64_t kMeasureEnd = 600'000;
constexpr uint64_t kSampleNs = 1'000;
constexpr uint64_t kWindowNs = 10'000;  // goodput is measured over a sliding 10 us window

// In-order delivered bytes at the responder, sampled every kSampleNs until kMeasureEnd.
struct Series {
  std::vector<uint64_t> bytes;  // bytes[i] at i * kSampleNs
  double window_gbps(size_t end_index) const {
    const size_t w = kWindowNs / kSampleNs;
    if (end_index < w) return 0;
    return gbps(bytes[end_index] - bytes[end_index - w], kWindowNs);
  }
};

// Simulated time from the failure until the windowed goodput reaches `threshold` and stays at
// or above it until the end of the measurement; -1 if it never does.
double recovery_us(const Series& s, double threshold_gbps) {
  const size_t fail_i = kFailAt / kSampleNs;
  size_t last_bad = fail_i;
  for (size_t i = fail_i + 1; i < s.bytes.size(); ++i)
    if (s.window_gbps(i) < threshold_gbps) last_bad = i;
  if (last_bad + 1 >= s.bytes.size()) return -1;
  return static_cast<double>((last_bad + 1) * kSampleNs - kFailAt) / 1000.0;
}

double mean_gbps(const Series& s, uint64_t from_ns, uint64_t to_ns) {
  return gbps(s.bytes[to_ns / kSampleNs] - s.bytes[from_ns / kSampleNs], to_ns - from_ns);
}

void sample_every(Simulator& sim, std::function<uint64_t()> read, Series& out) {
  out.bytes.assign(kMeasureEnd / kSampleNs + 1, 0);
  for (uint64_t i = 0; i <= kMeasureEnd / kSampleNs; ++i)
    sim.at(i * kSampleNs, [&out, read, i] { out.bytes[i] = read(); });
}

struct MrcRecovery {
  Series series;
  uint64_t last_retire_ns = 0;  // when the last EV on the failed path was retired
  uint32_t evs_retired = 0;
};

MrcRecovery mrc_recovery_run(bool fail, std::string_view cc) {
  MrcRecovery r;
  HarnessConfig hc;
  hc.seed = 5;
  hc.planes = kRecPlanes;
  hc.paths = kRecPaths;
  hc.keep_decisions = false;
  Harness h(hc);
  h.connect(0, 1, 1, mrc_qp(cc, kRecPlanes));
  Transfer t(h, 0, 96u << 20, 1);
  t.post(48);
  const uint32_t base = wire::psn_add(h.conn(0).sq_psn_a, -1);
  const uint32_t qpn_b = h.conn(0).qpn_b;
  sample_every(
      h.sim(),
      [&h, base, qpn_b] {
        eng::QpStats st;
        h.ep(1).qp_stats(qpn_b, st);
        return uint64_t{wire::psn_diff(st.rcv_cack, base)} * kMtu;
      },
      r.series);
  if (fail) h.fabric().fail_path(1, 0, kFailAt);
  h.run(nullptr, kMeasureEnd + 1, 10'000);
  for (const eng::Event& e : h.node(0).events) {
    if (e.kind == eng::EventKind::kEvState && harness::field_is(e, "to", "ASSUMED_BAD")) {
      ++r.evs_retired;
      r.last_retire_ns = std::max(r.last_retire_ns, e.t_ns);
    }
  }
  return r;
}

void mrc_recovery(benchmark::State& state, std::string_view cc) {
  double rec = 0, r0 = 0, after = 0, retire = 0, retired = 0;
  for (auto _ : state) {
    const MrcRecovery clean = mrc_recovery_run(false, cc);
    const MrcRecovery failed = mrc_recovery_run(true, cc);
    r0 = mean_gbps(clean.series, kFailAt, kMeasureEnd);
    rec = recovery_us(failed.series, r0 * (kRecPlanes * kRecPaths - 1) / (kRecPlanes * kRecPaths));
    after = mean_gbps(failed.series, kFailAt + 100'000, kMeasureEnd);
    retire = failed.evs_retired > 0 ? (failed.last_retire_ns - kFailAt) / 1000.0 : -1;
    retired = failed.evs_retired;
  }
  state.counters["fault_free_Gb/s"] = r0;
  state.counters["recovery_us"] = rec;
  state.counters["after_Gb/s"] = after;  // mean over [fail + 100 us, end]
  state.counters["evs_retired"] = retired;
  state.counters["last_retire_us"] = retire;
  state.counters["timeout_us"] = kT / 1000.0;
}
void BM_Recovery_Mrc(benchmark::State& state) {
  mrc_recovery(state, eng::kCcNscc);
}
BENCHMARK(BM_Recovery_Mrc)->Iterations(1)->Unit(benchmark::kMillisecond);

GbnPairConfig gbn_config(uint8_t planes, uint32_t paths, uint64_t seed) {
  GbnPairConfig c;
  c.seed = seed;
  c.planes = planes;
  c.paths = paths;
  c.node.port = 1;
  c.node.path_mtu = kMtu;
  c.node.timeout_ns = kT;
  c.node.retry_cnt = 7;
  c.node.window_psns = 1024;
  c.first_sport = 0xC000;  // path 0xC000 % paths = 0
  return c;
}

// RC has one path: when it fails the QP stalls until retry exhaustion; it never reaches 15/16.
void BM_Recovery_Gbn(benchmark::State& state) {
  double r0 = 0, rec = 0, after = 0, error_us = -1;
  for (auto _ : state) {
    Series clean, failed;
    for (bool fail : {false, true}) {
      GbnPair p(gbn_config(kRecPlanes, kRecPaths, 5));
      GbnTransfer t(p, 0, 96u << 20, 1);
      t.post(48);
      const uint32_t qb = p.qpn_b(0);
      sample_every(
          p.sim(), [&p, qb] { return p.b().bytes_placed(qb); }, fail ? failed : clean);
      if (fail) p.fabric().fail_path(1, 0, kFailAt);
      uint64_t err_at = 0;
      p.run(
          [&] {
            if (fail && err_at == 0 && p.a().qp_in_error(p.qpn_a(0))) err_at = p.sim().now_ns();
            return false;
          },
          kMeasureEnd + 1, 1'000);
      if (fail && err_at != 0) error_us = (err_at - kFailAt) / 1000.0;
    }
    r0 = mean_gbps(clean, kFailAt, kMeasureEnd);
    rec = recovery_us(failed, r0 * (kRecPlanes * kRecPaths - 1) / (kRecPlanes * kRecPaths));
    after = mean_gbps(failed, kFailAt + 100'000, kMeasureEnd);
  }
  state.counters["fault_free_Gb/s"] = r0;
  state.counters["recovery_us"] = rec;
  state.counters["after_Gb/s"] = after;
  state.counters["qp_error_after_us"] = error_us;
  state.counters["timeout_us"] = kT / 1000.0;
}
BENCHMARK(BM_Recovery_Gbn)->Iterations(1)->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// Goodput under 1 % loss
// ---------------------------------------------------------------------------------------------
constexpr size_t kLossBytes = 16u << 20;
constexpr uint64_t kLossSeeds[] = {101, 202, 303};

// Mean over the seeds of bytes / completion time.
double mrc_loss_goodput(double loss, std::string_view cc, uint8_t planes, uint32_t paths) {
  double sum = 0;
  for (uint64_t seed : kLossSeeds) {
    HarnessConfig hc;
    hc.seed = seed;
    hc.planes = planes;
    hc.paths = paths;
    hc.keep_events = false;
    hc.keep_decisions = false;
    Harness h(hc);
    h.connect(0, 1, 1, mrc_qp(cc, planes));
    if (loss > 0) {
      for (uint8_t pl = 1; pl <= planes; ++pl) {
        h.sim().add_fault(h.fabric().uplink(h.node(0).id, pl),
                          Fault::drop().with_probability(loss));
        h.sim().add_fault(h.fabric().uplink(h.node(1).id, pl),
                          Fault::drop().with_probability(loss));
      }
    }
    Transfer t(h, 0, kLossBytes, 3);
    t.post(16);
    if (!h.run([&] { return t.all_completed(); }, 10'000'000'000ull, 100) || !t.exact()) return -1;
    sum += gbps(kLossBytes, h.sim().now_ns());
  }
  return sum / std::size(kLossSeeds);
}

double gbn_loss_goodput(double loss) {
  double sum = 0;
  for (uint64_t seed : kLossSeeds) {
    GbnPair p(gbn_config(1, 4, seed));
    if (loss > 0) {
      p.sim().add_fault(p.fabric().uplink(p.id_a(), 1), Fault::drop().with_probability(loss));
      p.sim().add_fault(p.fabric().uplink(p.id_b(), 1), Fault::drop().with_probability(loss));
    }
    GbnTransfer t(p, 0, kLossBytes, 3);
    t.post(16);
    if (!p.run([&] { return t.all_completed(); }, 10'000'000'000ull, 100) ||
        t.completed(GbnStatus::kSuccess) != t.posted() || !t.exact())
      return -1;
    sum += gbps(kLossBytes, p.sim().now_ns());
  }
  return sum / std::size(kLossSeeds);
}

void mrc_loss(benchmark::State& state, std::string_view cc, uint8_t planes, uint32_t paths) {
  double clean = 0, lossy = 0;
  for (auto _ : state) {
    clean = mrc_loss_goodput(0, cc, planes, paths);
    lossy = mrc_loss_goodput(0.01, cc, planes, paths);
  }
  state.counters["loss_free_Gb/s"] = clean;
  state.counters["loss_1pct_Gb/s"] = lossy;
  state.counters["ratio"] = clean > 0 ? lossy / clean : 0;
  state.counters["line_rate_Gb/s"] = 100.0 * planes;
}
// One plane x 4 paths: the same 100 Gb/s of capacity as the single-path RC model.
void BM_Loss_Mrc1Plane(benchmark::State& s) {
  mrc_loss(s, eng::kCcNscc, 1, 4);
}
// The same without congestion control: NSCC's window never binds here (in flight ~ the BDP).
void BM_Loss_Mrc1PlaneNoCc(benchmark::State& s) {
  mrc_loss(s, eng::kCcNone, 1, 4);
}
// Two planes x 4 paths: what a dual-plane NIC gets.
void BM_Loss_Mrc2Plane(benchmark::State& s) {
  mrc_loss(s, eng::kCcNscc, 2, 4);
}
BENCHMARK(BM_Loss_Mrc1Plane)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Loss_Mrc1PlaneNoCc)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Loss_Mrc2Plane)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_Loss_Gbn(benchmark::State& state) {
  double clean = 0, lossy = 0;
  for (auto _ : state) {
    clean = gbn_loss_goodput(0);
    lossy = gbn_loss_goodput(0.01);
  }
  state.counters["loss_free_Gb/s"] = clean;
  state.counters["loss_1pct_Gb/s"] = lossy;
  state.counters["ratio"] = clean > 0 ? lossy / clean : 0;
  state.counters["line_rate_Gb/s"] = 100.0;
}
BENCHMARK(BM_Loss_Gbn)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mrc::sim

BENCHMARK_MAIN();
