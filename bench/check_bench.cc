// Conformance checker throughput (issue 6, deliverable 7): frames per second of the checker with
// every rule enabled on a 1M-frame MRP0 capture, against a raw read and a decode of the same
// file. bench/check_run.sh adds `mrct check` wall time and peak RSS, `mrct decode --summary` and
// tshark on the same file, and prints the ratios.
//
// The capture is what a certification run produces: the reference engine (reference-impl/engine)
// on the simulator (2 planes x 4 paths, 100 Gb/s ports) doing a bulk RDMA WRITE from node a to
// node b, captured at a's interface (data out; SACKs, NACKs and transport ACKs in) with the
// injector's decision log, under drops, trims, ECN marks and dropped SACKs. It is cut at exactly
// --frames frames.
//
//   check_bench [--capture_dir=DIR] [--frames=N] [--pmtu=B] [benchmark flags]
//       runs the benchmarks on DIR/a-eth0.pcap (generated into DIR when missing; default DIR
//       $TMPDIR/mrc_check_bench_<N>_<B>).
//   check_bench --make_capture=DIR [--frames=N] [--pmtu=B] [--seed=S] [--both_hosts]
//               [--mixed_faults]
//       only writes DIR/a-eth0.pcap (and with --both_hosts DIR/b-eth0.pcap, the responder's view
//       over the same time), DIR/decisions.jsonl and DIR/dut.json, and prints their statistics.
//       --mixed_faults adds duplicates, delays and corruption to the drops, trims, ECN marks and
//       dropped SACKs.
//
//   BM_ReadOnly        CaptureReader::next over the file: the I/O floor.
//   BM_DecodeIcrc      read + wire::decode_frame with ICRC verification: the checker's decode.
//   BM_DecodeIcrcInMemory  the same over frames already in memory (subtracted from
//                      BM_CheckerFrames: the checker's own work per frame).
//   BM_CheckerFrames   Checker::on_frame/on_decision/finish over frames already in memory: the
//                      checker's own work (decode included), no file I/O. /1: one thread,
//                      /2: pipelined (Checker jobs = 2), its wall time the pipeline's.
//   BM_CheckFiles      check_files(): everything `mrct check --profile --decisions` does but the
//                      printing, all rules enabled.
//   BM_CheckInferred   check_files() without profile or decision log (QPs inferred).
//   BM_Crc32Frames/M   CRC-32 of every frame in memory with method M (table, pclmul, vpclmul512:
//                      those this CPU has); --crc_path=M forces M on every benchmark.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "conformance/check.h"
#include "reference-impl/sim/engine_harness.h"
#include "wire/wire.h"

namespace {

namespace check = mrc::check;
namespace eng = mrc::engine;
namespace sim = mrc::sim;
namespace wire = mrc::wire;
using sim::harness::Harness;
using sim::harness::HarnessConfig;
using sim::harness::QpConfig;
using sim::harness::Transfer;

struct Settings {
  std::string dir;
  std::string make_dir;
  uint64_t frames = 1'000'000;
  uint32_t pmtu = 256;
  uint64_t seed = 7;
  bool both_hosts = false;    // also write b-eth0.pcap (the responder's view), up to the same time
  bool mixed_faults = false;  // also duplicates, delays and corruption
};
Settings g_settings;

std::string capture_path(const std::string& dir) {
  return dir + "/a-eth0.pcap";
}
std::string decisions_path(const std::string& dir) {
  return dir + "/decisions.jsonl";
}
std::string profile_path(const std::string& dir) {
  return dir + "/dut.json";
}

// The DUT profile of the run: both nodes, both directions of the connection, everything the
// stateful rules need (MPR, timeout, retry counts, WIMM limit, initial PSNs, PMTU).
std::string profile_json(const Harness& h, const QpConfig& qc) {
  nlohmann::json nodes = nlohmann::json::array();
  for (uint8_t i = 0; i < 2; ++i)
    nodes.push_back({{"name", std::string(1, static_cast<char>('a' + i))},
                     {"addrs", {wire::format_ipv6(sim::harness::node_gid(i))}}});
  nlohmann::json qps = nlohmann::json::array();
  const auto& c = h.conn(0);
  for (int dir = 0; dir < 2; ++dir) {
    const uint8_t rq = dir == 0 ? 0 : 1, rs = dir == 0 ? 1 : 0;
    qps.push_back({{"requester",
                    {{"addr", wire::format_ipv6(sim::harness::node_gid(rq))},
                     {"qpn", dir == 0 ? c.qpn_a : c.qpn_b}}},
                   {"responder",
                    {{"addr", wire::format_ipv6(sim::harness::node_gid(rs))},
                     {"qpn", dir == 0 ? c.qpn_b : c.qpn_a}}},
                   {"ev_format", "stev"},
                   {"pmtu", qc.path_mtu},
                   {"mpr", qc.mpr},
                   {"mpr_dest", qc.mpr_dest},
                   {"max_wimm_dest", qc.max_wimm_dest},
                   {"timeout", qc.timeout},
                   {"retry", {{"linear", qc.linear_cnt}, {"exp", qc.exp_cnt}}},
                   {"initial_psn", dir == 0 ? c.sq_psn_a : c.sq_psn_b},
                   {"capabilities", {{"trim_nack", true}}}});
  }
  return nlohmann::json{{"nodes", nodes}, {"qps", qps}}.dump(1) + "\n";
}

void on_plane(Harness& h, size_t node, uint8_t plane, const sim::Fault& f, bool reverse = false) {
  for (uint32_t path = 0; path < h.config().paths; ++path)
    h.sim().add_fault(reverse ? h.fabric().spine_to_leaf(h.node(node).id, plane, path)
                              : h.fabric().leaf_to_spine(h.node(node).id, plane, path),
                      f);
}

// Runs the reference engine until node a has sent and received `frames` frames, then writes the
// first `frames` of its capture, the decisions up to the last of them, and the profile.
bool make_capture(const std::string& dir, uint64_t frames, uint32_t pmtu, uint64_t seed,
                  bool both_hosts, bool mixed_faults, std::string& error) {
  std::filesystem::create_directories(dir);
  const std::string raw = dir + "/raw-a.pcap";
  const std::string raw_b = dir + "/raw-b.pcap";
  HarnessConfig hc;
  hc.seed = seed;
  hc.keep_events = false;
  Harness h(hc);
  QpConfig qc;
  qc.path_mtu = pmtu;
  qc.max_send_wr = 4096;
  qc.max_recv_wr = 4096;
  h.connect(0, 1, 1, qc);
  if (!h.ok()) {
    error = h.error();
    return false;
  }
  if (!h.sim().capture_node(h.node(0).id, 0, raw, wire::CaptureFormat::kPcap)) {
    error = h.sim().error();
    return false;
  }
  if (both_hosts && !h.sim().capture_node(h.node(1).id, 0, raw_b, wire::CaptureFormat::kPcap)) {
    error = h.sim().error();
    return false;
  }
  // A faulty network: data dropped, trimmed and ECN-marked on the way out, SACKs dropped on the
  // way back.
  on_plane(h, 0, 1, sim::Fault::drop().with_probability(0.002));
  on_plane(h, 0, 2, sim::Fault::trim().with_probability(0.004));
  on_plane(h, 0, 1, sim::Fault::mark_ecn().with_probability(0.01));
  on_plane(h, 1, 2, sim::Fault::drop().with_probability(0.002));
  if (mixed_faults) {
    on_plane(h, 1, 1, sim::Fault::duplicate().with_probability(0.005), true);
    on_plane(h, 1, 2, sim::Fault::delay(2'000, 20'000).with_probability(0.02), true);
    on_plane(h, 0, 2, sim::Fault::corrupt().with_probability(0.003));
  }

  // Bulk WRITE in 16 MiB chunks of 64 KiB messages (the last 8 of each WRITE_WITH_IMM), the next
  // chunk posted when the previous one completed.
  const size_t chunk = size_t{16} << 20;
  const sim::NodeId a = h.node(0).id;
  auto frames_at_a = [&] {
    const auto& s = h.sim().node_stats(a);
    return s.frames_tx + s.frames_rx;
  };
  std::unique_ptr<Transfer> t;
  uint8_t k = 0;
  while (frames_at_a() < frames + frames / 50) {
    if (t && !t->all_completed()) {
      h.run({}, 20'000);
      if (!h.ok()) break;
      continue;
    }
    if (t) {
      h.ep(0).deregister_mr(t->src().mr().lkey);
      h.ep(1).deregister_mr(t->dst().mr().lkey);
    }
    t = std::make_unique<Transfer>(h, 0, chunk, ++k);
    t->post(static_cast<uint32_t>(chunk / 65536), 8);
  }
  if (!h.ok()) {
    error = h.error();
    return false;
  }
  if (!h.sim().close_captures()) {
    error = h.sim().error();
    return false;
  }

  // Cut at exactly `frames`.
  wire::CaptureReader rd;
  wire::CaptureWriter w;
  if (!rd.open(raw) || !w.open(capture_path(dir), wire::CaptureFormat::kPcap)) {
    error = rd.error().empty() ? w.error() : rd.error();
    return false;
  }
  wire::CaptureRecord rec;
  uint64_t n = 0, last_ts = 0;
  while (n < frames && rd.next(rec)) {
    if (!w.write(rec.ts_ns, rec.data, rec.orig_len)) {
      error = w.error();
      return false;
    }
    last_ts = rec.ts_ns;
    ++n;
  }
  if (!w.close()) {
    error = w.error();
    return false;
  }
  std::filesystem::remove(raw);
  if (both_hosts) {
    wire::CaptureReader rb;
    wire::CaptureWriter wb;
    if (!rb.open(raw_b) || !wb.open(dir + "/b-eth0.pcap", wire::CaptureFormat::kPcap)) {
      error = rb.error().empty() ? wb.error() : rb.error();
      return false;
    }
    while (rb.next(rec) && rec.ts_ns <= last_ts) {
      if (!wb.write(rec.ts_ns, rec.data, rec.orig_len)) {
        error = wb.error();
        return false;
      }
    }
    if (!wb.close()) {
      error = wb.error();
      return false;
    }
    std::filesystem::remove(raw_b);
  }
  if (n != frames) {
    error = "the run produced only " + std::to_string(n) + " frames";
    return false;
  }
  std::ofstream dl(decisions_path(dir), std::ios::trunc);
  uint64_t ndec = 0;
  for (const sim::Decision& d : h.sim().decisions()) {
    if (d.t_ns > last_ts) break;
    dl << sim::decision_json(d) << "\n";
    ++ndec;
  }
  std::ofstream(profile_path(dir), std::ios::trunc) << profile_json(h, qc);
  if (!dl) {
    error = decisions_path(dir) + ": write error";
    return false;
  }
  std::printf("capture %s: %llu frames, %.1f MB, %.3f ms of traffic; %llu decisions\n",
              capture_path(dir).c_str(), static_cast<unsigned long long>(n),
              static_cast<double>(std::filesystem::file_size(capture_path(dir))) / 1e6,
              static_cast<double>(last_ts) / 1e6, static_cast<unsigned long long>(ndec));
  return true;
}

// Makes sure the capture exists (generating it once), and returns its directory.
const std::string& capture_dir() {
  static bool ready = false;
  if (!ready) {
    if (g_settings.dir.empty()) {
      const char* tmp = std::getenv("TMPDIR");
      g_settings.dir = std::string(tmp ? tmp : "/tmp") + "/mrc_check_bench_" +
                       std::to_string(g_settings.frames) + "_" + std::to_string(g_settings.pmtu);
    }
    if (!std::filesystem::exists(capture_path(g_settings.dir)) ||
        !std::filesystem::exists(profile_path(g_settings.dir))) {
      std::string e;
      if (!make_capture(g_settings.dir, g_settings.frames, g_settings.pmtu, g_settings.seed, false,
                        false, e)) {
        std::fprintf(stderr, "check_bench: cannot make the capture: %s\n", e.c_str());
        std::exit(2);
      }
    }
    ready = true;
  }
  return g_settings.dir;
}

check::CheckOptions full_options() {
  check::CheckOptions o;
  o.captures.push_back({capture_path(capture_dir()), "", 0});
  o.profile_path = profile_path(capture_dir());
  o.decision_logs.push_back(decisions_path(capture_dir()));
  o.quiet = true;
  return o;
}

void set_rate(benchmark::State& state, uint64_t frames, uint64_t bytes) {
  state.SetItemsProcessed(static_cast<int64_t>(frames));
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["frames"] = static_cast<double>(frames) / static_cast<double>(state.iterations());
}

void BM_ReadOnly(benchmark::State& state) {
  const std::string path = capture_path(capture_dir());
  uint64_t frames = 0, bytes = 0;
  for (auto _ : state) {
    wire::CaptureReader rd;
    if (!rd.open(path)) state.SkipWithError(rd.error().c_str());
    wire::CaptureRecord rec;
    while (rd.next(rec)) {
      ++frames;
      bytes += rec.data.size();
    }
    benchmark::DoNotOptimize(bytes);
  }
  set_rate(state, frames, bytes);
}
BENCHMARK(BM_ReadOnly)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeIcrc(benchmark::State& state) {
  const std::string path = capture_path(capture_dir());
  const auto profile = wire::make_mrp0(wire::DscpPlan{}, wire::EvStripe::kLowInSport);
  uint64_t frames = 0, bytes = 0, bad = 0;
  wire::DecodedFrame f;
  for (auto _ : state) {
    wire::CaptureReader rd;
    if (!rd.open(path)) state.SkipWithError(rd.error().c_str());
    wire::CaptureRecord rec;
    wire::DecodeOptions opt;
    opt.verify_icrc = true;
    while (rd.next(rec)) {
      opt.link = rec.link;
      if (!wire::decode_frame(rec.data, f, opt, *profile) || !f.icrc_ok) ++bad;
      ++frames;
      bytes += rec.data.size();
    }
  }
  benchmark::DoNotOptimize(bad);
  set_rate(state, frames, bytes);
}
BENCHMARK(BM_DecodeIcrc)->Unit(benchmark::kMillisecond)->UseRealTime();

// The frames of the capture in memory, and the decisions parsed.
struct Loaded {
  std::vector<std::byte> bytes;
  struct Rec {
    uint64_t ts;
    size_t off;
    uint32_t len, orig_len;
    wire::LinkType link;
  };
  std::vector<Rec> recs;
  std::vector<check::Decision> decisions;
  check::DutProfile profile;
};

const Loaded& loaded() {
  static Loaded* l = [] {
    auto* x = new Loaded;
    wire::CaptureReader rd;
    if (!rd.open(capture_path(capture_dir()))) std::exit(2);
    wire::CaptureRecord rec;
    while (rd.next(rec)) {
      x->recs.push_back({rec.ts_ns, x->bytes.size(), static_cast<uint32_t>(rec.data.size()),
                         rec.orig_len, rec.link});
      x->bytes.insert(x->bytes.end(), rec.data.begin(), rec.data.end());
    }
    std::ifstream in(decisions_path(capture_dir()));
    std::string line, e;
    while (std::getline(in, line)) {
      check::Decision d;
      if (check::parse_decision(line, d, e)) x->decisions.push_back(std::move(d));
    }
    if (!check::load_profile(profile_path(capture_dir()), x->profile, e)) {
      std::fprintf(stderr, "check_bench: %s\n", e.c_str());
      std::exit(2);
    }
    return x;
  }();
  return *l;
}

// Decode + ICRC of the frames in memory: subtracted from BM_CheckerFrames, the checker's own work.
void BM_DecodeIcrcInMemory(benchmark::State& state) {
  const Loaded& l = loaded();
  const auto profile = wire::make_mrp0(wire::DscpPlan{}, wire::EvStripe::kLowInSport);
  uint64_t frames = 0, bytes = 0, bad = 0;
  wire::DecodedFrame f;
  wire::DecodeOptions opt;
  opt.verify_icrc = true;
  for (auto _ : state) {
    for (const Loaded::Rec& r : l.recs) {
      opt.link = r.link;
      if (!wire::decode_frame(wire::Bytes(l.bytes.data() + r.off, r.len), f, opt, *profile) ||
          !f.icrc_ok)
        ++bad;
      bytes += r.len;
    }
    frames += l.recs.size();
  }
  benchmark::DoNotOptimize(bad);
  set_rate(state, frames, bytes);
}
BENCHMARK(BM_DecodeIcrcInMemory)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CheckerFrames(benchmark::State& state) {
  const Loaded& l = loaded();
  const uint64_t lookahead = l.profile.tol.decision_lookahead_ns;
  uint64_t frames = 0, bytes = 0;
  int fails = 0;
  const auto jobs = static_cast<unsigned>(state.range(0));
  for (auto _ : state) {
    check::Checker ck(l.profile, {}, 20, jobs);
    check::PointInfo pi;
    pi.path = capture_path(capture_dir());
    pi.node = "a";
    pi.attribution = "file name";
    ck.add_point(pi);
    size_t di = 0;
    uint64_t n = 0;
    for (size_t i = 0; i < l.recs.size(); ++i) {
      const Loaded::Rec& r = l.recs[i];
      while (di < l.decisions.size() && l.decisions[di].t_ns <= r.ts + lookahead)
        ck.on_decision(l.decisions[di++]);
      // As check_files() does: the next frame is announced while this one is judged.
      if (i + 1 < l.recs.size()) {
        const Loaded::Rec& next = l.recs[i + 1];
        ck.prefetch(wire::Bytes(l.bytes.data() + next.off, next.len), next.link);
      }
      ck.on_frame(0, ++n, r.ts, wire::Bytes(l.bytes.data() + r.off, r.len), r.link, r.orig_len);
      bytes += r.len;
    }
    while (di < l.decisions.size()) ck.on_decision(l.decisions[di++]);
    const check::Report rep = ck.finish(l.recs.empty() ? 0 : l.recs.back().ts);
    fails = static_cast<int>(rep.count(check::Status::kFail));
    frames += n;
  }
  state.counters["failed_rules"] = fails;
  set_rate(state, frames, bytes);
}
// Arg: jobs (2: the pipelined checker, decode + ICRC on this thread, the rules on a second one;
// its CPU time counts this thread only, its wall time both).
BENCHMARK(BM_CheckerFrames)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void run_check_files(benchmark::State& state, const check::CheckOptions& opts) {
  uint64_t frames = 0, bytes = 0;
  check::Report rep;
  for (auto _ : state) {
    std::string e;
    if (!check::check_files(opts, rep, e)) {
      state.SkipWithError(e.c_str());
      return;
    }
    frames += rep.frames;
  }
  bytes =
      std::filesystem::file_size(opts.captures[0].path) * static_cast<uint64_t>(state.iterations());
  state.counters["failed_rules"] = static_cast<double>(rep.count(check::Status::kFail));
  state.counters["passed_rules"] = static_cast<double>(rep.count(check::Status::kPass));
  set_rate(state, frames, bytes);
}

void BM_CheckFiles(benchmark::State& state) {
  run_check_files(state, full_options());
}
BENCHMARK(BM_CheckFiles)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_CheckInferred(benchmark::State& state) {
  check::CheckOptions o;
  o.captures.push_back({capture_path(capture_dir()), "", 0});
  o.quiet = true;
  run_check_files(state, o);
}
BENCHMARK(BM_CheckInferred)->Unit(benchmark::kMillisecond)->UseRealTime();

// CRC-32 over every frame in memory with one method: what the ICRC costs on this capture's frame
// sizes with each (registered in main for the methods the CPU has).
void BM_Crc32Frames(benchmark::State& state, wire::CrcPath path) {
  const Loaded& l = loaded();
  uint64_t frames = 0, bytes = 0;
  uint32_t acc = 0;
  for (auto _ : state) {
    for (const Loaded::Rec& r : l.recs) {
      acc ^= wire::crc32_with(path, wire::Bytes(l.bytes.data() + r.off, r.len));
      bytes += r.len;
    }
    frames += l.recs.size();
  }
  benchmark::DoNotOptimize(acc);
  set_rate(state, frames, bytes);
}

bool take_flag(const char* arg, const char* name, std::string& value) {
  const size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0 || arg[n] != '=') return false;
  value = arg + n + 1;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (take_flag(argv[i], "--capture_dir", v)) {
      g_settings.dir = v;
    } else if (take_flag(argv[i], "--make_capture", v)) {
      g_settings.make_dir = v;
    } else if (take_flag(argv[i], "--frames", v)) {
      g_settings.frames = std::strtoull(v.c_str(), nullptr, 10);
    } else if (take_flag(argv[i], "--pmtu", v)) {
      g_settings.pmtu = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
    } else if (std::strcmp(argv[i], "--both_hosts") == 0) {
      g_settings.both_hosts = true;
    } else if (std::strcmp(argv[i], "--mixed_faults") == 0) {
      g_settings.mixed_faults = true;
    } else if (take_flag(argv[i], "--seed", v)) {
      g_settings.seed = std::strtoull(v.c_str(), nullptr, 10);
    } else if (take_flag(argv[i], "--crc_path", v)) {
      // Forces the CRC method of every benchmark (and of the checker): table, pclmul, vpclmul512.
      const wire::CrcPath p = v == "table"    ? wire::CrcPath::kTable
                              : v == "pclmul" ? wire::CrcPath::kPclmul
                                              : wire::CrcPath::kVpclmul512;
      if ((v != "table" && v != "pclmul" && v != "vpclmul512") || !wire::set_crc_path(p)) {
        std::fprintf(stderr, "check_bench: --crc_path=%s: unknown or not supported here\n",
                     v.c_str());
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!g_settings.make_dir.empty()) {
    std::string e;
    if (!make_capture(g_settings.make_dir, g_settings.frames, g_settings.pmtu, g_settings.seed,
                      g_settings.both_hosts, g_settings.mixed_faults, e)) {
      std::fprintf(stderr, "check_bench: %s\n", e.c_str());
      return 2;
    }
    return 0;
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  capture_dir();
  benchmark::AddCustomContext("capture", capture_path(capture_dir()));
  {
    // The start-up calibration that chose the checker's CRC method (wire/crc.cc).
    const wire::CrcCalibration& cal = wire::crc_calibration();
    std::string t;
    for (wire::CrcPath p :
         {wire::CrcPath::kTable, wire::CrcPath::kPclmul, wire::CrcPath::kVpclmul512}) {
      const auto i = static_cast<size_t>(p);
      if (!cal.supported[i]) continue;
      char b[64];
      std::snprintf(b, sizeof b, "%s%s %.0f ns/KiB", t.empty() ? "" : ", ", wire::crc_path_name(p),
                    cal.ns_per_kib[i]);
      t += b;
    }
    benchmark::AddCustomContext(
        "crc_calibration", t + " -> " + wire::crc_path_name(cal.chosen) + " (" + cal.how + ")");
    benchmark::AddCustomContext("crc_path", wire::crc_path_name(wire::crc_path()));
  }
  for (auto [p, name] :
       {std::pair{wire::CrcPath::kTable, "table"}, std::pair{wire::CrcPath::kPclmul, "pclmul"},
        std::pair{wire::CrcPath::kVpclmul512, "vpclmul512"}}) {
    if (wire::crc_path_supported(p))
      benchmark::RegisterBenchmark((std::string("BM_Crc32Frames/") + name).c_str(), BM_Crc32Frames,
                                   p)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
