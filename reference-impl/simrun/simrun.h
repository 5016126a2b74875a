// mrc_simrun: `mrct sim`, the reference engine (mrc::engine::Endpoint, the same one every other
// driver uses) on large multi-plane two- and three-tier Clos fabrics built on mrc::sim, with
// workloads from htsim-style connection-matrix files, so the same workload runs in both tools.
//
// The fabric: P planes (host port p is plane p). Two tiers, per plane: L = hosts / hosts_per_leaf
// leaves and S spines; every leaf has one cable to every spine. Three tiers, per plane: pods of
// leaves_per_pod leaves and S aggregation switches (every leaf to every aggregation switch of its
// pod), and C cores; aggregation switch a of every pod has a cable to cores a, a + S, a + 2S, ...
// (htsim's fat-tree wiring). Upward, a switch picks its uplink by hash(plane and tier seed,
// switch, UDP source port, flow label), which is ECMP hashing of the EV (the EV is carried in the
// UDP source port and the flow label), with an independent hash per tier; with `routing srv6`
// the EV names its path instead (pinned_ev_profile). Queues are the simulator's links: a byte
// FIFO with an ECN marking threshold, trimming of trimmable data on overflow and a
// strict-priority queue for trimmed headers.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mrc::simrun {

inline constexpr uint64_t kForeverNs = UINT64_MAX;

// One failure of the fabric: a leaf-spine (leaf-aggregation) cable, an aggregation-core cable,
// every cable of a spine, aggregation or core switch (switch failure), every link of a leaf
// (uplinks and its host links), or a whole plane, down in [from_ns, until_ns), or running at
// rate_fraction of its rate for the whole run (a degraded link, htsim's -failed).
struct Failure {
  uint8_t plane = 0;   // 1-based
  int64_t leaf = -1;   // -1: any; leaves are numbered across pods
  int64_t spine = -1;  // -1: any; 3 tiers: the aggregation switch, numbered across pods
  int64_t core = -1;   // -1: any; 3 tiers only
  bool down = true;    // false: degraded
  double rate_fraction = 1.0;
  uint64_t from_ns = 0;
  uint64_t until_ns = kForeverNs;
  std::string where;  // "file:line" it came from, for messages
};

enum class Routing : uint8_t {
  kEcmp,  // switches hash the EV onto an uplink
  kSrv6,  // the EV names its path (as the testbed's SRv6 uSID lists): pinned_ev_profile
};

struct Topology {
  uint32_t tiers = 2;  // 2: leaf-spine; 3: pods of leaves and aggregation switches, cores
  uint32_t hosts = 16;
  uint32_t planes = 2;
  uint32_t hosts_per_leaf = 4;
  uint32_t spines = 4;          // per plane (2 tiers) or per pod (3 tiers: aggregation switches)
  uint32_t leaves_per_pod = 0;  // 3 tiers
  uint32_t cores = 0;           // per plane, 3 tiers; a multiple of spines
  Routing routing = Routing::kEcmp;
  uint64_t host_rate_bps = 100'000'000'000;
  uint64_t fabric_rate_bps = 100'000'000'000;
  uint64_t host_delay_ns = 500;    // propagation, host <-> leaf
  uint64_t fabric_delay_ns = 500;  // propagation, leaf <-> spine
  uint64_t queue_bytes = 1u << 20;
  uint64_t ecn_threshold_bytes = 200'000;  // 0: no marking
  bool trim = true;                        // trim trimmable data on overflow (else drop)
  std::vector<Failure> failures;
  // htsim's -failed K: K cables of the top tier (leaf-spine, or aggregation-core with 3 tiers,
  // where htsim degrades its failed links too), chosen from the seed, at
  // `random_degraded_fraction` of their rate for the whole run.
  uint32_t random_degraded = 0;
  double random_degraded_fraction = 0.25;

  uint32_t leaves() const { return hosts_per_leaf == 0 ? 0 : hosts / hosts_per_leaf; }
  // Leaves per pod: every leaf with 2 tiers (one pod).
  uint32_t pod_leaves() const { return tiers == 3 ? leaves_per_pod : leaves(); }
  uint32_t pods() const { return pod_leaves() == 0 ? 0 : leaves() / pod_leaves(); }
  // Paths between two leaves of different pods, per plane: spines, or cores (one aggregation
  // switch per core in each pod).
  uint32_t paths() const { return tiers == 3 ? cores : spines; }
};

// With `routing srv6`, EV i of a QP is on plane i % planes and names path (first + i / planes) %
// paths (as the testbed's EV -> uSID segment list mapping, docs/scenarios.md, which has first =
// 0), so the EVs of a QP cover the paths of every plane evenly. first = host x ceil(evs /
// planes): with fewer EVs than paths, hosts start at different paths, else every QP of the
// fabric would crowd onto the first paths. The wire EV carries the path in its low 16 bits and the
// pin tag (bit 31) with a distinct round number above, so every EV of the QP is distinct; the
// switches read the path from it instead of hashing (2 tiers: spine = path; 3 tiers: core = path,
// and the aggregation switch is path % spines, the one wired to that core). Empty string when `evs`
// EVs cannot be pinned distinctly, else the reason.
std::string pinned_ev_check(const Topology& t, uint32_t evs);
inline constexpr uint32_t kPinnedTag = 0x8000'0000u;

// A small line-based file: `key value` settings and `fail ...` lines (docs/simulation.md).
// On error: false and "<name>:<line>: <what>" in *error; `out` is left unchanged.
bool parse_topology_text(std::string_view text, std::string_view name, Topology& out,
                         std::string* error);
bool load_topology(const std::string& path, Topology& out, std::string* error);
// Empty when the topology can be built, else what is wrong (no file position).
std::string validate_topology(const Topology& t);

struct Flow {
  uint32_t id = 0;
  uint32_t src = 0;
  uint32_t dst = 0;
  uint64_t start_ns = 0;
  uint64_t bytes = 0;
};

struct Workload {
  uint32_t nodes = 0;
  std::vector<Flow> flows;
};

// htsim's connection matrix: "Nodes N", "Connections C", then C lines
// "<src>-><dst> [id <n>] start <t> size <bytes>", start in picoseconds as htsim reads it.
// Triggers and failures of htsim's format are refused with the line that uses them.
bool parse_cm_text(std::string_view text, std::string_view name, Workload& out, std::string* error);
bool load_cm(const std::string& path, Workload& out, std::string* error);

// Generators writing that format. Permutation: every node sends to one other node and receives
// from one (the first `conns` senders of a shuffled pairing, seeded). Incast: `senders` distinct
// nodes (seeded) to node `dst`.
std::string permutation_cm(uint32_t nodes, uint32_t conns, uint64_t bytes, uint64_t seed);
std::string incast_cm(uint32_t nodes, uint32_t senders, uint32_t dst, uint64_t bytes,
                      uint64_t seed);
// All-to-all: every node sends `bytes` to every other node, all at time 0 (N x (N - 1) flows).
std::string all_to_all_cm(uint32_t nodes, uint64_t bytes);
// Ring all-reduce steps: the nodes in a ring drawn from the seed (neighbours are then mostly on
// different leaves, as a scheduler's placement would have them); in each of `steps` steps,
// `step_ps` apart, every node sends one chunk of `bytes` to the next. htsim's format has no
// start-after-completion without triggers (refused), so steps are timed.
std::string ring_cm(uint32_t nodes, uint64_t bytes, uint32_t steps, uint64_t step_ps,
                    uint64_t seed);

struct RunConfig {
  uint64_t seed = 1;
  // "mrc": the reference engine. "rc": RoCEv2 RC with go-back-N (mrc::sim::GbnEndpoint), one
  // path per QP: a plane and a UDP source port hashed from the seed and the flow, as a NIC
  // hashes a RoCE flow; no congestion control, a fixed window (rc_window_psns). "spray": the
  // reference engine with EV retirement off (every EV stays in rotation: plain ECMP spraying).
  std::string transport = "mrc";
  uint32_t rc_window_psns = 0;  // rc: unacknowledged PSNs per QP; 0: twice the unloaded BDP
  // Goodput time series: bytes placed at the destinations per bin of this many ns, in total and
  // per plane. 0: off (no per-packet work).
  uint64_t timeseries_ns = 0;
  uint32_t mtu = 4096;
  std::string cc = "nscc";  // "nscc" or "none"
  uint32_t evs = 32;        // EVs per QP (generated profile, spread over the planes)
  // MRC retransmission timeout exponent: T = 1.024 us * 2^timeout. 0 picks the smallest T above
  // twice the unloaded RTT plus an ECN-threshold queue at each of the four hops, because a T
  // below the queueing delay the congestion control aims for resends packets that were only
  // queued and retires their EVs (timeout 4 = 16 us did so 281 times in a fault-free
  // 16-host permutation).
  uint8_t timeout = 0;
  uint64_t end_ns = 1'000'000'000;
  uint64_t slice_ns = 20'000;     // completion/progress check period, simulated
  bool progress = false;          // a progress line on `progress_out` about once a second
  bool keep_link_frames = false;  // fill RunResult::link_frames (tests)
};

struct FlowResult {
  Flow flow;
  bool done = false;
  bool error = false;  // completed with an error status
  uint64_t fct_ns = 0;
  uint64_t ideal_fct_ns = 0;
  double slowdown = 0;
  uint64_t retransmits = 0;
  uint64_t bytes_placed = 0;  // at the destination (less than the flow's when it did not finish)
};

struct ClassQueue {
  // "host_up", "leaf_up", "spine_down", "host_down"; 3 tiers also "agg_up" (aggregation to
  // core) and "core_down" (leaf_up / spine_down are then leaf <-> aggregation switch)
  std::string name;
  uint64_t links = 0;
  uint64_t max_backlog_bytes = 0;     // over every link of the class
  double mean_max_backlog_bytes = 0;  // mean over the links of their maximum
  uint64_t drops = 0, trims = 0, ecn_marks = 0;
};

struct RunResult {
  std::string error;    // non-empty: the run could not be built or the simulator failed
  uint8_t timeout = 0;  // the MRC timeout exponent used
  std::vector<FlowResult> flows;
  uint64_t sim_end_ns = 0;
  uint64_t events = 0;
  double wall_s = 0;
  uint64_t peak_rss_kb = 0;
  uint64_t data_packets_sent = 0, retransmits = 0, rtx_timeout = 0, rtx_nack = 0, rtx_sack_gap = 0,
           rtx_ack_wait = 0, trimmed_rx = 0, ce_rx = 0, ev_retirements = 0;
  uint64_t rc_go_backs = 0, rc_timeouts = 0;  // transport rc
  uint32_t rc_window_psns = 0;                // transport rc: the window used
  std::vector<ClassQueue> queues;
  std::vector<std::string> degraded;  // names of degraded links (random and explicit)
  // Goodput time series (RunConfig::timeseries_ns): bytes placed in bin k = [k bin, (k+1) bin),
  // in total and per plane (ts_plane_bytes[p][k], plane p + 1). The sum is every byte placed.
  std::vector<uint64_t> ts_bytes;
  std::vector<std::vector<uint64_t>> ts_plane_bytes;
  // With the time series, per bin: retransmissions (the engine's retransmit events; rc: its
  // counter, the increase since the previous bin's start), EV retirements (changes to
  // ASSUMED_BAD), and per link class (the order of `queues`) the largest backlog of any link of
  // the class at the start of the bin (a sample, not the maximum within the bin).
  std::vector<uint64_t> ts_retransmits, ts_ev_retirements;
  std::vector<std::vector<uint64_t>> ts_queue_max_bytes;
  // `routing srv6`: EV retirements by the path the EV is pinned to ("p1.spine2", "p1.core5").
  std::vector<std::pair<std::string, uint64_t>> retired_by_path;
  // With RunConfig::keep_link_frames: every link's name and frames delivered.
  std::vector<std::pair<std::string, uint64_t>> link_frames;
};

RunResult run(const Topology& topo, const Workload& wl, const RunConfig& cfg,
              std::ostream* progress_out = nullptr);

// The result as JSON (2-space indented). `perf` adds wall time, events/s and peak RSS, the
// only fields that differ between two runs of one seed.
std::string result_json(const Topology& topo, const Workload& wl, const RunConfig& cfg,
                        const RunResult& r, bool perf);

// The per-run summary (`mrct sim run --summary DIR`, docs/simulation.md "Summary"): summary.md
// (the run's parameters and seed, its figures, the plots), result.json (the JSON text as given)
// and SVG plots: fct_cdf, slowdown (percentiles), goodput (aggregate and per plane), queues (the
// largest backlog per link class over time), queues_max (per class over the run), retransmits
// (retransmissions and EV retirements over time). Made from `result_json_text` alone, so what is
// plotted is what the JSON says; it needs the time series. `workload` names the connection
// matrix in the header. On error: empty and *error.
struct SummaryFile {
  std::string name, text;
};
std::vector<SummaryFile> summary_files(const std::string& result_json_text,
                                       const std::string& workload, std::string* error);
// Empty when `dir` can take a summary (it does not exist, or is an empty directory), else why not.
std::string summary_dir_problem(const std::string& dir);
// Writes the files into a temporary directory beside `dir` and renames it to `dir`, so a failure
// leaves nothing behind.
bool write_summary_dir(const std::string& dir, const std::vector<SummaryFile>& files,
                       std::string* error);

// `mrct sim run|gen ...`
int sim_main(int argc, char** argv);

}  // namespace mrc::simrun
