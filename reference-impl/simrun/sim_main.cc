// `mrct sim`: run a connection matrix on a Clos fabric, or write one.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "reference-impl/simrun/simrun.h"

namespace mrc::simrun {

namespace {
constexpr int kOk = 0;
constexpr int kIncomplete = 1;  // the run finished, and some flows did not complete
constexpr int kUsage = 2;
constexpr double kSummaryBinUs = 10;  // --summary without --timeseries-us

// Writes `text` to `path` through a temporary file, so a failed write leaves nothing behind.
bool write_atomically(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      *error = path + ": cannot write";
      return false;
    }
    out << text;
    if (!out.flush()) {
      *error = path + ": write failed";
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = path + ": cannot rename into place";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}
}  // namespace

int sim_main(int argc, char** argv) {
  CLI::App app{
      "The reference MRC engine on a multi-plane two- or three-tier Clos fabric "
      "(docs/simulation.md).\n"
      "  run: a connection matrix (htsim's .cm format) on a topology file or flags; JSON out,\n"
      "       and with --summary DIR a summary.md with SVG plots.\n"
      "  gen: write a permutation or incast connection matrix.\n"
      "Exit: 0 every flow completed, 1 some flows did not complete by --end-us, 2 bad options "
      "or input.",
      "sim"};
  app.require_subcommand(1);

  CLI::App* run_cmd = app.add_subcommand("run", "Run a connection matrix on a fabric");
  std::string topo_file, cm_file, out_file;
  Topology topo;
  RunConfig rc;
  double end_us = 1e6;
  bool quiet = false, perf = true;
  run_cmd->add_option("--topo", topo_file, "topology file (flags below override its settings)");
  run_cmd->add_option("--cm", cm_file, "connection matrix (htsim format)")->required();
  run_cmd->add_option("-o,--output", out_file, "JSON result file (default: stdout)");
  auto* o_hosts = run_cmd->add_option("--hosts", topo.hosts, "hosts (default 16)");
  auto* o_planes = run_cmd->add_option("--planes", topo.planes, "planes (default 2)");
  auto* o_hpl = run_cmd->add_option("--hosts-per-leaf", topo.hosts_per_leaf, "(default 4)");
  auto* o_spines = run_cmd->add_option("--spines", topo.spines, "spines per plane (default 4)");
  auto* o_queue =
      run_cmd->add_option("--queue-bytes", topo.queue_bytes, "per link (default 1 MiB)");
  auto* o_ecn =
      run_cmd->add_option("--ecn-threshold-bytes", topo.ecn_threshold_bytes, "(default 200000)");
  auto* o_failed = run_cmd->add_option(
      "--failed", topo.random_degraded,
      "leaf-spine cables at 1/4 rate for the whole run, chosen from the seed (htsim -failed)");
  bool no_trim = false;
  run_cmd->add_flag("--no-trim", no_trim, "drop instead of trimming on overflow");
  // Fabric shape and routing (three tiers, SRv6 pinning).
  auto* o_tiers = run_cmd->add_option("--tiers", topo.tiers, "2 or 3 (default 2)");
  auto* o_lpp = run_cmd->add_option("--leaves-per-pod", topo.leaves_per_pod,
                                    "3 tiers: leaves per pod (--spines: aggregation switches "
                                    "per pod)");
  auto* o_cores = run_cmd->add_option("--cores", topo.cores,
                                      "3 tiers: core switches per plane, a multiple of --spines");
  std::string routing;
  auto* o_routing = run_cmd
                        ->add_option("--routing", routing,
                                     "ecmp (switches hash the EV) or srv6 (the EV names its "
                                     "path, as the testbed's uSID lists)")
                        ->check(CLI::IsMember({"ecmp", "srv6"}));
  run_cmd->add_option("--seed", rc.seed, "simulation seed")->capture_default_str();
  run_cmd->add_option("--mtu", rc.mtu, "path MTU: 1024, 2048 or 4096")->capture_default_str();
  run_cmd->add_option("--cc", rc.cc, "nscc or none")->capture_default_str();
  run_cmd->add_option("--evs", rc.evs, "EVs per QP")->capture_default_str();
  int timeout_exp = 0;
  run_cmd
      ->add_option("--timeout", timeout_exp,
                   "MRC timeout exponent, T = 1.024 us * 2^t (0: from the fabric, see "
                   "docs/simulation.md)")
      ->capture_default_str()
      ->check(CLI::Range(0, 31));
  run_cmd->add_option("--end-us", end_us, "simulated time limit (us)")->capture_default_str();
  // Transport and time series (issue 17 item 5).
  run_cmd
      ->add_option("--transport", rc.transport,
                   "mrc: the reference engine; rc: RoCEv2 RC go-back-N, one hashed path per QP, "
                   "no CC; spray: the engine with EV retirement off")
      ->capture_default_str()
      ->check(CLI::IsMember({"mrc", "rc", "spray"}));
  run_cmd
      ->add_option("--rc-window", rc.rc_window_psns,
                   "rc: unacknowledged packets per QP (0: twice the unloaded BDP)")
      ->capture_default_str();
  double timeseries_us = 0;
  run_cmd
      ->add_option("--timeseries-us", timeseries_us,
                   "goodput time series: bytes placed per bin of this many us, in total and "
                   "per plane, in the JSON (0: off)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1e6));
  std::string summary_dir;
  run_cmd->add_option("--summary", summary_dir,
                      "also write DIR/summary.md with SVG plots (FCT CDF, slowdown percentiles, "
                      "goodput per plane, queues, retransmissions and EV retirements over time) "
                      "and DIR/result.json; DIR must be new or empty; turns the time series on "
                      "(10 us bins unless --timeseries-us)");
  run_cmd->add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  bool no_perf = false;
  run_cmd->add_flag("--no-perf", no_perf,
                    "leave out the perf object (wall time, RSS), the only fields that differ "
                    "between two runs of one seed");

  CLI::App* gen_cmd = app.add_subcommand("gen", "Write a connection matrix (htsim format)");
  std::string kind, gen_out;
  uint32_t nodes = 0, conns = 0, senders = 8, dst = 0;
  uint64_t bytes = 2'000'000, gen_seed = 1;
  uint32_t steps = 1;
  uint64_t step_us = 100;
  gen_cmd->add_option("kind", kind, "permutation | incast | all-to-all | ring")
      ->required()
      ->check(CLI::IsMember({"permutation", "incast", "all-to-all", "ring"}));
  gen_cmd->add_option("--nodes", nodes, "nodes")->required();
  gen_cmd->add_option("--conns", conns, "permutation: connections (default: every node)");
  gen_cmd->add_option("--senders", senders, "incast: senders")->capture_default_str();
  gen_cmd->add_option("--dst", dst, "incast: the receiving node")->capture_default_str();
  gen_cmd->add_option("--steps", steps, "ring: all-reduce steps (2 x (nodes - 1) for a whole one)")
      ->capture_default_str();
  gen_cmd->add_option("--step-us", step_us, "ring: time between the starts of two steps (us)")
      ->capture_default_str();
  gen_cmd->add_option("--size", bytes, "bytes per flow (ring: per chunk)")->capture_default_str();
  gen_cmd->add_option("--seed", gen_seed, "shuffle seed")->capture_default_str();
  gen_cmd->add_option("-o,--output", gen_out, "output file")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc_exit = app.exit(e);
    return rc_exit == 0 ? kOk : kUsage;
  }

  std::string error;
  if (gen_cmd->parsed()) {
    if (nodes < 2 || nodes > (1u << 16)) {
      std::cerr << "mrct sim gen: --nodes must be in 2..65536\n";
      return kUsage;
    }
    if (bytes == 0 || bytes > (uint64_t{1} << 31)) {
      std::cerr << "mrct sim gen: --size must be in 1..2^31\n";
      return kUsage;
    }
    std::string text;
    if (kind == "permutation") {
      text = permutation_cm(nodes, conns == 0 ? nodes : conns, bytes, gen_seed);
    } else if (kind == "all-to-all") {
      if (uint64_t{nodes} * (nodes - 1) > (uint64_t{1} << 20)) {
        std::cerr << "mrct sim gen: all-to-all of " << nodes
                  << " nodes is more than 2^20 flows; use --nodes <= 1024\n";
        return kUsage;
      }
      text = all_to_all_cm(nodes, bytes);
    } else if (kind == "ring") {
      if (steps == 0 || uint64_t{steps} * nodes > (uint64_t{1} << 20) || step_us > 1'000'000) {
        std::cerr << "mrct sim gen: ring needs 1 <= --steps, --steps x --nodes <= 2^20 and "
                     "--step-us <= 1000000\n";
        return kUsage;
      }
      text = ring_cm(nodes, bytes, steps, step_us * 1'000'000, gen_seed);
    } else {
      if (dst >= nodes || senders == 0 || senders >= nodes) {
        std::cerr << "mrct sim gen: incast needs --dst < --nodes and 1 <= --senders < --nodes\n";
        return kUsage;
      }
      text = incast_cm(nodes, senders, dst, bytes, gen_seed);
    }
    if (!write_atomically(gen_out, text, &error)) {
      std::cerr << "mrct sim gen: " << error << "\n";
      return kUsage;
    }
    return kOk;
  }

  // run
  Topology base;
  if (!topo_file.empty() && !load_topology(topo_file, base, &error)) {
    std::cerr << "mrct sim: " << error << "\n";
    return kUsage;
  }
  if (o_hosts->count()) base.hosts = topo.hosts;
  if (o_planes->count()) base.planes = topo.planes;
  if (o_hpl->count()) base.hosts_per_leaf = topo.hosts_per_leaf;
  if (o_spines->count()) base.spines = topo.spines;
  if (o_queue->count()) base.queue_bytes = topo.queue_bytes;
  if (o_ecn->count()) base.ecn_threshold_bytes = topo.ecn_threshold_bytes;
  if (o_failed->count()) base.random_degraded = topo.random_degraded;
  if (no_trim) base.trim = false;
  if (o_tiers->count()) base.tiers = topo.tiers;
  if (o_lpp->count()) base.leaves_per_pod = topo.leaves_per_pod;
  if (o_cores->count()) base.cores = topo.cores;
  if (o_routing->count()) base.routing = routing == "srv6" ? Routing::kSrv6 : Routing::kEcmp;
  if (std::string p = validate_topology(base); !p.empty()) {
    std::cerr << "mrct sim: " << (topo_file.empty() ? std::string("flags") : topo_file) << ": " << p
              << "\n";
    return kUsage;
  }
  Workload wl;
  if (!load_cm(cm_file, wl, &error)) {
    std::cerr << "mrct sim: " << error << "\n";
    return kUsage;
  }
  if (wl.nodes > base.hosts) {
    std::cerr << "mrct sim: " << cm_file << ": Nodes " << wl.nodes << " but the topology has "
              << base.hosts << " hosts\n";
    return kUsage;
  }
  if (end_us <= 0) {
    std::cerr << "mrct sim: --end-us must be positive\n";
    return kUsage;
  }
  if (!summary_dir.empty()) {
    // Checked before the run, so a long run does not end in a refusal.
    if (std::string p = summary_dir_problem(summary_dir); !p.empty()) {
      std::cerr << "mrct sim: --summary " << p << "\n";
      return kUsage;
    }
    if (timeseries_us == 0) timeseries_us = kSummaryBinUs;
  }
  rc.end_ns = static_cast<uint64_t>(end_us * 1e3);
  rc.timeseries_ns = static_cast<uint64_t>(std::llround(timeseries_us * 1e3));
  if (timeseries_us > 0 && rc.timeseries_ns == 0) {
    std::cerr << "mrct sim: --timeseries-us must be at least 0.001\n";
    return kUsage;
  }
  rc.progress = !quiet;
  rc.timeout = static_cast<uint8_t>(timeout_exp);
  perf = !no_perf;
  const RunResult r = run(base, wl, rc, &std::cerr);
  if (!r.error.empty()) {
    std::cerr << "mrct sim: " << r.error << "\n";
    return kUsage;
  }
  const std::string json = result_json(base, wl, rc, r, perf);
  std::vector<SummaryFile> summary;
  if (!summary_dir.empty()) {
    summary = summary_files(json, cm_file, &error);
    if (summary.empty() || !write_summary_dir(summary_dir, summary, &error)) {
      std::cerr << "mrct sim: " << error << "\n";
      return kUsage;
    }
  }
  if (out_file.empty()) {
    std::cout << json;
  } else if (!write_atomically(out_file, json, &error)) {
    std::cerr << "mrct sim: " << error << "\n";
    // All or nothing: the summary goes too.
    for (const SummaryFile& f : summary) std::remove((summary_dir + "/" + f.name).c_str());
    if (!summary.empty()) ::rmdir(summary_dir.c_str());
    return kUsage;
  }
  size_t done = 0;
  for (const FlowResult& f : r.flows) done += f.done && !f.error;
  if (!quiet) {
    char line[240];
    std::snprintf(line, sizeof line,
                  "mrct sim: %zu/%zu flows completed at %.1f us simulated; %llu events in %.2f s "
                  "wall, peak RSS %.1f MB\n",
                  done, r.flows.size(), static_cast<double>(r.sim_end_ns) / 1e3,
                  static_cast<unsigned long long>(r.events), r.wall_s,
                  static_cast<double>(r.peak_rss_kb) / 1024.0);
    std::cerr << line;
  }
  return done == r.flows.size() ? kOk : kIncomplete;
}

}  // namespace mrc::simrun
