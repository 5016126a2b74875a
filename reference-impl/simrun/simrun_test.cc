#include "reference-impl/simrun/simrun.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <sstream>
#include <string>

#include "reference-impl/svgplot/svgplot.h"

namespace mrc::simrun {
namespace {

Topology small() {
  Topology t;
  t.hosts = 16;
  t.planes = 2;
  t.hosts_per_leaf = 4;
  t.spines = 4;
  return t;
}

Workload workload(const std::string& text) {
  Workload wl;
  std::string err;
  EXPECT_TRUE(parse_cm_text(text, "w.cm", wl, &err)) << err;
  return wl;
}

TEST(SimrunTopology, ParsesSettingsAndFailures) {
  Topology t;
  std::string err;
  ASSERT_TRUE(
      parse_topology_text("# a comment\nhosts 64\nplanes 8\nhosts_per_leaf 16\n"
                          "spines 8\nhost_rate_gbps 400\ntrim off\n"
                          "fail plane 3 leaf 1 spine 2 down from_us 10 until_us 20.5\n"
                          "fail plane 2 spine 7 rate 0.25\nfail random 4 rate 0.5\n",
                          "t.topo", t, &err))
      << err;
  EXPECT_EQ(t.hosts, 64u);
  EXPECT_EQ(t.planes, 8u);
  EXPECT_EQ(t.leaves(), 4u);
  EXPECT_EQ(t.host_rate_bps, 400'000'000'000u);
  EXPECT_FALSE(t.trim);
  ASSERT_EQ(t.failures.size(), 2u);
  EXPECT_EQ(t.failures[0].plane, 3);
  EXPECT_EQ(t.failures[0].leaf, 1);
  EXPECT_EQ(t.failures[0].spine, 2);
  EXPECT_EQ(t.failures[0].from_ns, 10'000u);
  EXPECT_EQ(t.failures[0].until_ns, 20'500u);
  EXPECT_EQ(t.failures[0].where, "t.topo:8");
  EXPECT_FALSE(t.failures[1].down);
  EXPECT_EQ(t.failures[1].leaf, -1);
  EXPECT_DOUBLE_EQ(t.failures[1].rate_fraction, 0.25);
  EXPECT_EQ(t.random_degraded, 4u);
}

TEST(SimrunTopology, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"hosts 16\nplanez 2\n", "t.topo:2: unknown key 'planez'"},
      {"hosts 16\n\nplanes x\n", "t.topo:3: planes: expected an integer"},
      {"hosts 16\nfail plane 1 leaf 0\n", "t.topo:2: fail line needs 'down'"},
      {"hosts 16\nfail plane 1 rate 0.5 from_us 3\n", "t.topo:2: a degraded link"},
      {"hosts 16\nfail plane 3 down\n", "t.topo:2: plane 3 outside 1..2"},
      {"hosts 16\nfail plane 1 leaf 4 down\n", "t.topo:2: leaf 4 outside 0..3"},
      {"hosts 15\n", "hosts (15) must be a multiple of hosts_per_leaf (4)"},
      {"tiers 4\n", "t.topo:1: tiers: expected an integer in 2..3"},
      {"routing ospf\n", "t.topo:1: routing: expected ecmp or srv6"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 3\n", "multiple of leaves_per_pod"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 3\n",
       "cores (3) must be a positive multiple of spines"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 8\nspines 2\ncores 4\n",
       "at least 2 pods"},
      {"hosts 16\ncores 4\n", "leaves_per_pod and cores need tiers 3"},
      {"hosts 16\nfail plane 1 core 1 down\n", "t.topo:2: 'core' needs tiers 3"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "fail plane 1 leaf 0 core 1 down\n",
       "t.topo:7: a leaf has no cable to a core"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "\nfail plane 1 leaf 0 agg 2 down\n",
       "t.topo:8: leaf 0 (pod 0) has no cable to agg 2 (pod 1)"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "fail plane 1 agg 1 core 2 down\n",
       "t.topo:7: agg 1 has no cable to core 2"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "fail plane 1 agg 8 down\n",
       "t.topo:7: agg 8 outside 0..7"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "fail plane 1 core 4 rate 0.5\n",
       "t.topo:7: core 4 outside 0..3"},
      {"tiers 3\nhosts 16\nhosts_per_leaf 2\nleaves_per_pod 2\nspines 2\ncores 4\n"
       "fail random 33 rate 0.5\n",
       "only 32 aggregation-core cables"},
      {"tiers 3\nhosts 65536\nhosts_per_leaf 1\nleaves_per_pod 2\nspines 64\ncores 64\n"
       "planes 16\n",
       "more than the 2^24 this simulator builds"},
  };
  for (const Case& c : cases) {
    Topology t;
    const Topology before = t;
    std::string err;
    EXPECT_FALSE(parse_topology_text(c.text, "t.topo", t, &err)) << c.text;
    EXPECT_NE(err.find(c.want), std::string::npos) << "got: " << err;
    EXPECT_EQ(t.hosts, before.hosts);  // unchanged on error
  }
}

// The smallest fat tree (k = 4): 4 pods of 2 leaves and 2 aggregation switches, 4 cores,
// 2 hosts per leaf.
Topology fat_tree() {
  Topology t;
  t.tiers = 3;
  t.hosts = 16;
  t.planes = 2;
  t.hosts_per_leaf = 2;
  t.leaves_per_pod = 2;
  t.spines = 2;
  t.cores = 4;
  return t;
}

TEST(SimrunTopology, ParsesThreeTiersAndTheirFailures) {
  Topology t;
  std::string err;
  ASSERT_TRUE(
      parse_topology_text("tiers 3\nhosts 1024\nplanes 8\nhosts_per_leaf 8\n"
                          "leaves_per_pod 8\nspines 8\ncores 64\nrouting srv6\n"
                          "fail plane 2 agg 9 core 17 down from_us 5\n"
                          "fail plane 3 core 63 rate 0.5\nfail plane 1 agg 127 down\n"
                          "fail plane 1 leaf 127 agg 127 down\nfail random 8 rate 0.25\n",
                          "t.topo", t, &err))
      << err;
  EXPECT_EQ(t.tiers, 3u);
  EXPECT_EQ(t.leaves(), 128u);
  EXPECT_EQ(t.pods(), 16u);
  EXPECT_EQ(t.paths(), 64u);
  EXPECT_EQ(t.routing, Routing::kSrv6);
  ASSERT_EQ(t.failures.size(), 4u);
  EXPECT_EQ(t.failures[0].spine, 9);
  EXPECT_EQ(t.failures[0].core, 17);
  EXPECT_EQ(t.failures[1].core, 63);
  EXPECT_EQ(t.failures[1].spine, -1);
  EXPECT_EQ(t.failures[3].where, "t.topo:12");
}

TEST(SimrunCm, ParsesHtsimFormat) {
  const Workload wl = workload(
      "Nodes 4\nConnections 2\n0->3 id 7 start 2000000 size 4096\n2->1 start 0 size 100\n");
  EXPECT_EQ(wl.nodes, 4u);
  ASSERT_EQ(wl.flows.size(), 2u);
  EXPECT_EQ(wl.flows[0].id, 7u);
  EXPECT_EQ(wl.flows[0].dst, 3u);
  EXPECT_EQ(wl.flows[0].start_ns, 2'000u);  // picoseconds in the file
  EXPECT_EQ(wl.flows[1].id, 2u);
  EXPECT_EQ(wl.flows[1].bytes, 100u);
}

TEST(SimrunCm, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"Nodes 4\nConnections 1\n0->4 size 10\n", "w.cm:3: node out of range"},
      {"Nodes 4\nConnections 1\n1->1 size 10\n", "w.cm:3: a node cannot send to itself"},
      {"Nodes 4\nConnections 1\n0->1 start 0\n", "w.cm:3: connection without 'size"},
      {"Nodes 4\nConnections 2\n0->1 size 5\n", "w.cm:2: 'Connections 2' but 1"},
      {"Nodes 4\nConnections 1\n0->1 size 5 trigger 1\n", "w.cm:3: htsim 'trigger'"},
      {"0->1 size 5\n", "w.cm:1: connection before the 'Nodes' line"},
      {"Nodes 4\nConnections 1\n0-1 size 5\n", "w.cm:3: expected '<src>-><dst>"},
  };
  for (const Case& c : cases) {
    Workload wl;
    std::string err;
    EXPECT_FALSE(parse_cm_text(c.text, "w.cm", wl, &err)) << c.text;
    EXPECT_NE(err.find(c.want), std::string::npos) << "got: " << err;
  }
}

TEST(SimrunCm, PermutationIsAPermutation) {
  const Workload wl = workload(permutation_cm(64, 64, 1000, 5));
  ASSERT_EQ(wl.flows.size(), 64u);
  std::set<uint32_t> src, dst;
  for (const Flow& f : wl.flows) {
    EXPECT_NE(f.src, f.dst);
    src.insert(f.src);
    dst.insert(f.dst);
  }
  EXPECT_EQ(src.size(), 64u);
  EXPECT_EQ(dst.size(), 64u);
  EXPECT_NE(permutation_cm(64, 64, 1000, 5), permutation_cm(64, 64, 1000, 6));
  const Workload in = workload(incast_cm(16, 8, 3, 1000, 1));
  ASSERT_EQ(in.flows.size(), 8u);
  std::set<uint32_t> senders;
  for (const Flow& f : in.flows) {
    EXPECT_EQ(f.dst, 3u);
    senders.insert(f.src);
  }
  EXPECT_EQ(senders.size(), 8u);
}

TEST(SimrunCm, AllToAllAndRingGenerators) {
  const Workload a = workload(all_to_all_cm(8, 1000));
  ASSERT_EQ(a.flows.size(), 8u * 7u);
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const Flow& f : a.flows) {
    EXPECT_NE(f.src, f.dst);
    EXPECT_EQ(f.bytes, 1000u);
    pairs.insert({f.src, f.dst});
  }
  EXPECT_EQ(pairs.size(), 8u * 7u);  // every ordered pair once

  const Workload r = workload(ring_cm(16, 4096, 3, 50'000'000, 7));
  ASSERT_EQ(r.flows.size(), 16u * 3u);
  std::map<uint32_t, uint32_t> next;  // of step 0
  for (const Flow& f : r.flows) {
    const uint64_t step = f.start_ns / 50'000;
    ASSERT_LT(step, 3u);
    EXPECT_EQ(f.start_ns, step * 50'000);
    if (step == 0) {
      EXPECT_TRUE(next.emplace(f.src, f.dst).second) << "node " << f.src << " twice";
    }
  }
  ASSERT_EQ(next.size(), 16u);
  // One ring through all 16 nodes, not several smaller cycles.
  uint32_t n = 0, len = 0;
  do {
    n = next.at(n);
    ++len;
  } while (n != 0 && len <= 16);
  EXPECT_EQ(len, 16u);
  EXPECT_NE(ring_cm(16, 4096, 1, 0, 7), ring_cm(16, 4096, 1, 0, 8));  // the seed draws the ring
}

nlohmann::json run_json(const Topology& t, const Workload& wl, RunConfig rc = {}) {
  rc.end_ns = 20'000'000;
  const RunResult r = run(t, wl, rc);
  EXPECT_EQ(r.error, "");
  return nlohmann::json::parse(result_json(t, wl, rc, r, false));
}

TEST(SimrunRun, PermutationCompletesAndIsDeterministicBySeed) {
  const Topology t = small();
  const Workload wl = workload(permutation_cm(16, 16, 256 * 1024, 1));
  RunConfig rc;
  rc.seed = 3;
  const nlohmann::json a = run_json(t, wl, rc);
  const nlohmann::json b = run_json(t, wl, rc);
  EXPECT_EQ(a["summary"]["completed"], 16);
  EXPECT_EQ(a, b);  // same seed, same bytes
  rc.seed = 4;
  const nlohmann::json c = run_json(t, wl, rc);
  EXPECT_NE(a["flows"], c["flows"]);  // the seed reaches the run (EVs, PSNs, ECMP)
  // Every flow at least as slow as its ideal, and goodput below the host rate.
  for (const auto& f : a["flows"]) {
    EXPECT_GE(f["slowdown"].get<double>(), 1.0) << f.dump();
    EXPECT_LE(f["goodput_gbps"].get<double>(), 2 * 100.0) << f.dump();  // two planes
    EXPECT_FALSE(f["error"].get<bool>()) << f.dump();
  }
  EXPECT_GE(a["summary"]["data_packets_sent"].get<uint64_t>(), 16u * 64u);
}

TEST(SimrunRun, IncastTrimsAndStillCompletes) {
  Topology t = small();
  t.queue_bytes = 64 * 1024;
  t.ecn_threshold_bytes = 16 * 1024;
  const Workload wl = workload(incast_cm(16, 8, 0, 512 * 1024, 2));
  const nlohmann::json j = run_json(t, wl);
  EXPECT_EQ(j["summary"]["completed"], 8);
  uint64_t trims = 0, marks = 0;
  for (const auto& q : j["summary"]["queues"]) {
    trims += q["trims"].get<uint64_t>();
    marks += q["ecn_marks"].get<uint64_t>();
  }
  EXPECT_GT(marks, 0u);
  EXPECT_GT(trims, 0u);
  EXPECT_EQ(j["summary"]["trimmed_rx"].get<uint64_t>(), trims);  // every trim reached a host
  // 8:1 into one 100G host link: the last flow cannot finish before 8 x the ideal.
  EXPECT_GT(j["summary"]["slowdown"]["max"].get<double>(), 4.0);
}

TEST(SimrunRun, SpineFailureMidRunRecovers) {
  Topology t = small();
  Failure f;
  f.plane = 1;
  f.spine = 2;  // every cable of spine 2 of plane 1
  f.from_ns = 50'000;
  t.failures.push_back(f);
  const Workload wl = workload(permutation_cm(16, 16, 2 * 1024 * 1024, 1));
  const nlohmann::json j = run_json(t, wl);
  EXPECT_EQ(j["summary"]["completed"], 16);
  EXPECT_GT(j["summary"]["ev_retirements"].get<uint64_t>(), 0u);
  EXPECT_GT(j["summary"]["retransmits"]["total"].get<uint64_t>(), 0u);
  uint64_t drops = 0;
  for (const auto& q : j["summary"]["queues"]) drops += q["drops"].get<uint64_t>();
  EXPECT_GT(drops, 0u);  // frames were lost on the dead spine
  // The same run without the failure loses nothing, and the default timeout (from the fabric's
  // RTT and ECN threshold) does not fire on packets that were only queued. (With timeout 4,
  // 16 us, this run resent 281 packets on timeout and retired 185 EVs.) The test below holds
  // it to no resend at all.
  const nlohmann::json clean = run_json(small(), wl);
  EXPECT_EQ(clean["summary"]["retransmits"]["timeout"], 0) << clean["summary"].dump();
  for (const auto& q : clean["summary"]["queues"]) EXPECT_EQ(q["drops"], 0) << q.dump();
}

// Without a fault nothing is lost (1 MB queues, no drop, no trim), so a golden peer resends
// nothing and retires no EV. Seed 1 at 16 hosts resent 19 packets on SACK-gap evidence and
// retired 19 EVs before the SACK-gap scan waited T/2 in a QP's first RTT window (the start-up
// burst builds queues at ECMP collisions that the first RTT samples have not shown). Seeds 2, 5
// and 7 then still resent 9, 12 and 2 packets (retiring 8, 11 and 2 EVs) on holes behind a
// queue that grew after the last RTT sample, until the scan held a hole while its EV's own
// delivery stream said it was queued (Qp::gap_scan). Not yet zero with seeds 3, 4, 6, 8 (2, 1,
// 4, 4 resends) and at 64 hosts (docs/simulation.md), so those are not held here.
class FaultFreeSeed : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FaultFreeSeed, PermutationResendsNothingAndRetiresNoEv) {
  const Workload wl = workload(permutation_cm(16, 16, 2 * 1024 * 1024, GetParam()));
  RunConfig rc;
  rc.seed = GetParam();
  const nlohmann::json j = run_json(small(), wl, rc);
  const nlohmann::json& sum = j["summary"];
  ASSERT_EQ(sum["completed"], 16) << sum.dump();
  for (const auto& q : sum["queues"]) {
    ASSERT_EQ(q["drops"], 0) << "not fault-free: " << q.dump();
    ASSERT_EQ(q["trims"], 0) << "not fault-free: " << q.dump();
  }
  EXPECT_EQ(sum["retransmits"]["total"], 0) << sum["retransmits"].dump();
  EXPECT_EQ(sum["ev_retirements"], 0) << sum.dump();
}

INSTANTIATE_TEST_SUITE_P(SimrunRun, FaultFreeSeed, ::testing::Values(1, 2, 5, 7),
                         [](const ::testing::TestParamInfo<uint64_t>& p) {
                           return "seed" + std::to_string(p.param);
                         });

TEST(SimrunRun, DegradedCablesAreSlower) {
  Topology t = small();
  t.random_degraded = 4;
  const Workload wl = workload(permutation_cm(16, 16, 1024 * 1024, 1));
  RunConfig rc;
  const RunResult r = run(t, wl, rc);
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.degraded.size(), 4u);
  Topology all = small();
  for (uint8_t p = 1; p <= 2; ++p) {
    Failure f;
    f.plane = p;
    f.down = false;
    f.rate_fraction = 0.1;
    all.failures.push_back(f);
  }
  const nlohmann::json slow = run_json(all, wl);
  const nlohmann::json fast = run_json(small(), wl);
  EXPECT_GT(slow["summary"]["fct_ns"]["p50"].get<uint64_t>(),
            2 * fast["summary"]["fct_ns"]["p50"].get<uint64_t>());
}

// --transport: the go-back-N RC baseline and spraying without EV retirement run the same
// workload on the same fabric.
RunConfig with_transport(const std::string& transport, uint64_t timeseries_ns = 0) {
  RunConfig rc;
  rc.transport = transport;
  rc.timeseries_ns = timeseries_ns;
  return rc;
}

uint64_t fabric_drops(const nlohmann::json& j) {
  uint64_t drops = 0;
  for (const auto& q : j["summary"]["queues"]) drops += q["drops"].get<uint64_t>();
  return drops;
}

TEST(SimrunTransport, EachTransportCompletesAPermutation) {
  const Workload wl = workload(permutation_cm(16, 16, 256 * 1024, 1));
  std::map<std::string, nlohmann::json> runs;
  for (const char* tr : {"mrc", "rc", "spray"}) {
    const nlohmann::json j = run_json(small(), wl, with_transport(tr));
    EXPECT_EQ(j["engine"]["transport"], tr);
    EXPECT_EQ(j["summary"]["completed"], 16) << tr << ": " << j["summary"].dump();
    EXPECT_EQ(j["summary"]["completed_with_error"], 0) << tr;
    EXPECT_EQ(fabric_drops(j), 0u) << tr;
    runs[tr] = j;
  }
  // rc: one plane per QP, so its flows take at least the time of one 100G port (the engine
  // sprays over both planes), and it reports its window and go-back counts.
  EXPECT_GT(runs["rc"]["summary"]["fct_ns"]["p50"].get<uint64_t>(),
            runs["mrc"]["summary"]["fct_ns"]["p50"].get<uint64_t>());
  EXPECT_GT(runs["rc"]["engine"]["rc_window_psns"].get<uint32_t>(), 0u);
  EXPECT_EQ(runs["rc"]["summary"]["rc"]["go_backs"], 0);
  EXPECT_FALSE(runs["mrc"]["summary"].contains("rc"));
  const RunResult bad = run(small(), wl, with_transport("tcp"));
  EXPECT_NE(bad.error.find("transport must be mrc, rc or spray"), std::string::npos) << bad.error;
}

TEST(SimrunTransport, RcGoesBackNAfterALoss) {
  // Plane 1 down for 20 us: RC QPs hashed onto it lose a window in flight; the responder drops
  // everything after the first missing PSN, so the requester resends more packets than the
  // fabric dropped.
  Topology t = small();
  Failure f;
  f.plane = 1;
  f.from_ns = 20'000;
  f.until_ns = 40'000;
  t.failures.push_back(f);
  const Workload wl = workload(permutation_cm(16, 16, 512 * 1024, 1));
  const nlohmann::json j = run_json(t, wl, with_transport("rc"));
  const nlohmann::json& sum = j["summary"];
  EXPECT_EQ(sum["completed"], 16) << sum.dump();
  const uint64_t drops = fabric_drops(j);
  ASSERT_GT(drops, 0u) << "the failure hit no RC flow";
  EXPECT_GT(sum["rc"]["go_backs"].get<uint64_t>(), 0u);
  EXPECT_GT(sum["retransmits"]["total"].get<uint64_t>(), drops) << sum.dump();
  EXPECT_EQ(sum["ev_retirements"], 0);
}

TEST(SimrunTransport, SprayRetiresNothing) {
  // A spine of plane 1 fails for good: the engine retires the EVs hashed through it; spraying
  // keeps them in rotation and resends what they lose.
  Topology t = small();
  Failure f;
  f.plane = 1;
  f.spine = 2;
  f.from_ns = 50'000;
  t.failures.push_back(f);
  const Workload wl = workload(permutation_cm(16, 16, 2 * 1024 * 1024, 1));
  const nlohmann::json mrc = run_json(t, wl, with_transport("mrc"));
  const nlohmann::json spray = run_json(t, wl, with_transport("spray"));
  EXPECT_GT(mrc["summary"]["ev_retirements"].get<uint64_t>(), 0u);
  EXPECT_EQ(spray["summary"]["ev_retirements"], 0) << spray["summary"].dump();
  EXPECT_EQ(spray["summary"]["completed"], 16);
  // Spraying still loses packets on the dead EVs and resends them on others.
  EXPECT_GT(fabric_drops(spray), 0u);
  EXPECT_GT(spray["summary"]["retransmits"]["total"].get<uint64_t>(), 0u);
}

TEST(SimrunTransport, TimeSeriesSumsToTheBytesDelivered) {
  // Trims and resends (a small-queue incast) must not count twice: the series counts bytes
  // placed, not frames received.
  Topology t = small();
  t.queue_bytes = 64 * 1024;
  t.ecn_threshold_bytes = 16 * 1024;
  const Workload wl = workload(incast_cm(16, 8, 0, 512 * 1024, 2));
  for (const char* tr : {"mrc", "rc", "spray"}) {
    const nlohmann::json j = run_json(t, wl, with_transport(tr, 2'000));
    const nlohmann::json& ts = j["timeseries"];
    ASSERT_EQ(j["summary"]["completed"], 8) << tr;
    EXPECT_EQ(ts["bin_ns"], 2'000);
    const auto bytes = ts["bytes"].get<std::vector<uint64_t>>();
    const auto planes = ts["plane_bytes"].get<std::vector<std::vector<uint64_t>>>();
    ASSERT_EQ(planes.size(), 2u) << tr;
    uint64_t total = 0;
    for (size_t k = 0; k < bytes.size(); ++k) {
      total += bytes[k];
      ASSERT_EQ(planes[0].size(), bytes.size());
      ASSERT_EQ(planes[1].size(), bytes.size());
      EXPECT_EQ(planes[0][k] + planes[1][k], bytes[k]) << tr << " bin " << k;
    }
    // Every byte placed is in the series once; a flow that completed without error placed all
    // of its bytes (rc: a QP can end in RETRY_EXC_ERR here, 64 KiB queues and no CC).
    uint64_t placed = 0;
    for (const auto& f : j["flows"]) {
      placed += f["bytes_placed"].get<uint64_t>();
      if (f["done"].get<bool>() && !f["error"].get<bool>()) {
        EXPECT_EQ(f["bytes_placed"], f["bytes"]) << tr << ": " << f.dump();
      }
    }
    EXPECT_EQ(total, placed) << tr;
    if (std::string(tr) != "rc") {
      EXPECT_EQ(total, 8u * 512 * 1024) << tr;
    }
    // The series covers the run; nothing is placed after the last completion.
    EXPECT_EQ(bytes.size(), (j["summary"]["sim_end_ns"].get<uint64_t>() + 1'999) / 2'000) << tr;
    if (std::string(tr) != "rc") {
      EXPECT_GT(j["summary"]["retransmits"]["total"].get<uint64_t>() +
                    j["summary"]["trimmed_rx"].get<uint64_t>(),
                0u)
          << tr << ": nothing was resent or trimmed, the test proves nothing";
      EXPECT_GT(std::accumulate(planes[1].begin(), planes[1].end(), uint64_t{0}), 0u);
    }
    // Deterministic, and off by default.
    EXPECT_EQ(run_json(t, wl, with_transport(tr, 2'000)), j) << tr;
    EXPECT_FALSE(run_json(t, wl, with_transport(tr)).contains("timeseries")) << tr;
  }
}

TEST(SimrunTransport, TimeSeriesCountsResendsRetirementsAndQueues) {
  // A spine of plane 1 fails for good under a permutation (resends and retirements), and an
  // incast with small queues (resends on rc, queues at the receiver's host links).
  Topology spine = small();
  Failure f;
  f.plane = 1;
  f.spine = 2;
  f.from_ns = 50'000;
  spine.failures.push_back(f);
  Topology incast = small();
  incast.queue_bytes = 64 * 1024;
  incast.ecn_threshold_bytes = 16 * 1024;
  const Workload perm = workload(permutation_cm(16, 16, 1024 * 1024, 1));
  const Workload in = workload(incast_cm(16, 8, 0, 512 * 1024, 2));
  struct Case {
    const Topology& t;
    const Workload& wl;
    const char* transport;
  };
  for (const Case& c : {Case{spine, perm, "mrc"}, Case{spine, perm, "rc"}, Case{incast, in, "mrc"},
                        Case{incast, in, "rc"}}) {
    const std::string what = std::string(c.transport) + (&c.t == &spine ? " spine" : " incast");
    const nlohmann::json j = run_json(c.t, c.wl, with_transport(c.transport, 5'000));
    const nlohmann::json& ts = j["timeseries"];
    const nlohmann::json& sum = j["summary"];
    const size_t bins = ts["bytes"].size();
    const auto rtx = ts["retransmits"].get<std::vector<uint64_t>>();
    const auto ret = ts["ev_retirements"].get<std::vector<uint64_t>>();
    ASSERT_EQ(rtx.size(), bins) << what;
    ASSERT_EQ(ret.size(), bins) << what;
    EXPECT_GT(sum["retransmits"]["total"].get<uint64_t>(), 0u) << what << ": proves nothing";
    EXPECT_EQ(std::accumulate(rtx.begin(), rtx.end(), uint64_t{0}), sum["retransmits"]["total"])
        << what;
    EXPECT_EQ(std::accumulate(ret.begin(), ret.end(), uint64_t{0}), sum["ev_retirements"]) << what;
    if (&c.t == &spine && std::string(c.transport) == "mrc") {
      EXPECT_GT(sum["ev_retirements"].get<uint64_t>(), 0u);
      // Nothing is retired before the failure at 50 us (bins of 5 us).
      EXPECT_EQ(std::accumulate(ret.begin(), ret.begin() + 10, uint64_t{0}), 0u);
    }
    // One series per link class, each sample at most the class's maximum over the run, and
    // queues seen somewhere.
    const nlohmann::json& q = ts["queue_max_bytes"];
    ASSERT_EQ(q.size(), sum["queues"].size()) << what;
    uint64_t seen = 0;
    for (const auto& cls : sum["queues"]) {
      const auto v = q[cls["class"].get<std::string>()].get<std::vector<uint64_t>>();
      ASSERT_EQ(v.size(), bins) << what;
      for (uint64_t b : v) EXPECT_LE(b, cls["max_backlog_bytes"].get<uint64_t>()) << what;
      seen = std::max(seen, *std::max_element(v.begin(), v.end()));
    }
    EXPECT_GT(seen, 0u) << what;
    if (&c.t == &incast) {
      const auto down = q["host_down"].get<std::vector<uint64_t>>();
      EXPECT_GT(*std::max_element(down.begin(), down.end()), 16u * 1024) << what;
    }
    // The samples change nothing else: the same run without the series has the same figures
    // and event count.
    nlohmann::json plain_sum = run_json(c.t, c.wl, with_transport(c.transport))["summary"];
    EXPECT_EQ(plain_sum, sum) << what;
  }
}

// The values of one series of an SVG plot (svgplot's data-values attribute).
std::vector<std::pair<double, double>> svg_series(const std::string& svg, const std::string& name) {
  std::vector<std::pair<double, double>> out;
  const std::string key = "data-name=\"" + name + "\" data-values=\"";
  const size_t at = svg.find(key);
  if (at == std::string::npos) return out;
  const size_t end = svg.find('"', at + key.size());
  std::istringstream in(svg.substr(at + key.size(), end - at - key.size()));
  std::string pt;
  while (in >> pt) {
    const size_t comma = pt.find(',');
    out.emplace_back(std::stod(pt.substr(0, comma)), std::stod(pt.substr(comma + 1)));
  }
  return out;
}

TEST(SimrunSummary, PlotsHoldTheJsonsValues) {
  Topology t = small();
  Failure f;
  f.plane = 1;
  f.spine = 2;
  f.from_ns = 50'000;
  t.failures.push_back(f);
  const Workload wl = workload(permutation_cm(16, 16, 1024 * 1024, 1));
  RunConfig rc = with_transport("mrc", 5'000);
  rc.end_ns = 20'000'000;
  const RunResult r = run(t, wl, rc);
  ASSERT_EQ(r.error, "");
  const std::string text = result_json(t, wl, rc, r, false);
  const nlohmann::json j = nlohmann::json::parse(text);
  std::string err;
  const std::vector<SummaryFile> files = summary_files(text, "perm16.cm", &err);
  ASSERT_EQ(err, "");
  std::map<std::string, std::string> by_name;
  for (const SummaryFile& sf : files) by_name[sf.name] = sf.text;
  for (const char* n : {"summary.md", "result.json", "fct_cdf.svg", "slowdown.svg", "goodput.svg",
                        "queues.svg", "queues_max.svg", "retransmits.svg"})
    EXPECT_EQ(by_name.count(n), 1u) << n;
  EXPECT_EQ(by_name["result.json"], text);

  // The CDF ends at the largest FCT with every flow; the slowdown curve at the largest slowdown.
  const auto cdf = svg_series(by_name["fct_cdf.svg"], "CDF");
  ASSERT_EQ(cdf.size(), 16u);
  EXPECT_DOUBLE_EQ(cdf.back().first, j["summary"]["fct_ns"]["max"].get<double>() / 1e3);
  EXPECT_DOUBLE_EQ(cdf.back().second, 1.0);
  EXPECT_DOUBLE_EQ(cdf.front().second, 1.0 / 16);
  const auto sd = svg_series(by_name["slowdown.svg"], "slowdown");
  ASSERT_EQ(sd.size(), 16u);
  EXPECT_NEAR(sd.back().second, j["summary"]["slowdown"]["max"].get<double>(), 1e-6);
  EXPECT_DOUBLE_EQ(sd.back().first, 100.0);

  // Goodput: the bins' Gb/s times the bin are the bytes placed, in total and per plane.
  const nlohmann::json& ts = j["timeseries"];
  const auto all = svg_series(by_name["goodput.svg"], "all planes");
  ASSERT_EQ(all.size(), ts["bytes"].size());
  for (size_t k = 0; k < all.size(); ++k) {
    EXPECT_DOUBLE_EQ(all[k].first, 5.0 * static_cast<double>(k));
    EXPECT_NEAR(all[k].second * 5'000 / 8, ts["bytes"][k].get<double>(), 1e-3) << k;
  }
  const auto p2 = svg_series(by_name["goodput.svg"], "plane 2");
  ASSERT_EQ(p2.size(), all.size());
  EXPECT_NEAR(p2[20].second * 5'000 / 8, ts["plane_bytes"][1][20].get<double>(), 1e-3);
  // Retransmissions and retirements per bin; the largest host_down queue per bin.
  double rtx = 0, ret = 0;
  for (const auto& [x, y] : svg_series(by_name["retransmits.svg"], "retransmissions")) rtx += y;
  for (const auto& [x, y] : svg_series(by_name["retransmits.svg"], "EV retirements")) ret += y;
  EXPECT_EQ(rtx, j["summary"]["retransmits"]["total"].get<double>());
  EXPECT_EQ(ret, j["summary"]["ev_retirements"].get<double>());
  EXPECT_GT(ret, 0);
  const auto hd = svg_series(by_name["queues.svg"], "host_down");
  ASSERT_EQ(hd.size(), all.size());
  EXPECT_DOUBLE_EQ(hd[3].second, ts["queue_max_bytes"]["host_down"][3].get<double>() / 1e3);
  EXPECT_NE(by_name["queues_max.svg"].find(
                "data-category=\"leaf_up\" data-value=\"" +
                svgplot::format_value(j["summary"]["queues"][1]["max_backlog_bytes"].get<double>() /
                                      1e3) +
                "\""),
            std::string::npos);

  // The header has the workload, the seed and the parameters; the plots are linked.
  const std::string& md = by_name["summary.md"];
  EXPECT_EQ(md.rfind("# mrct sim run: perm16.cm\n", 0), 0u) << md;
  EXPECT_NE(md.find("| seed | 1 |"), std::string::npos);
  EXPECT_NE(md.find("| topology.hosts | 16 |"), std::string::npos);
  EXPECT_NE(md.find("| engine.evs_per_qp | 32 |"), std::string::npos);
  EXPECT_NE(md.find("| timeseries.bin_ns | 5000 |"), std::string::npos);
  EXPECT_NE(md.find("![FCT CDF](fct_cdf.svg)"), std::string::npos);
  EXPECT_NE(md.find("| EV retirements | " + j["summary"]["ev_retirements"].dump() + " |"),
            std::string::npos);
  // Same JSON, same bytes.
  EXPECT_EQ(summary_files(text, "perm16.cm", &err)[2].text, files[2].text);

  // Without a time series there is no summary; neither from text that is not a result.
  const std::vector<SummaryFile> none =
      summary_files(result_json(t, wl, with_transport("mrc"), r, false), "w", &err);
  EXPECT_TRUE(none.empty());
  EXPECT_NE(err.find("--timeseries-us"), std::string::npos) << err;
  EXPECT_TRUE(summary_files("{\"a\":", "w", &err).empty());
}

TEST(SimrunSummary, LongSeriesAreMergedForThePlots) {
  nlohmann::ordered_json j;
  j["seed"] = 1;
  j["topology"] = {{"hosts", 2}};
  j["engine"] = {{"transport", "mrc"}};
  j["summary"] = {{"fct_ns", {{"max", 0}}},
                  {"slowdown", nlohmann::json::object()},
                  {"retransmits", nlohmann::json::object()}};
  j["flows"] = nlohmann::json::array();
  std::vector<uint64_t> bytes(2500, 1000);  // 2,500 bins of 1 us, 1,000 bytes each: 8 Gb/s
  j["timeseries"] = {{"bin_ns", 1000}, {"bytes", bytes}};
  std::string err;
  const auto files = summary_files(j.dump(), "w", &err);
  ASSERT_EQ(err, "");
  std::string goodput;
  for (const SummaryFile& f : files)
    if (f.name == "goodput.svg") goodput = f.text;
  const auto all = svg_series(goodput, "all planes");
  ASSERT_EQ(all.size(), 834u);  // 3 bins per point
  EXPECT_DOUBLE_EQ(all[1].first, 3.0);
  EXPECT_DOUBLE_EQ(all[1].second, 8.0);
  EXPECT_NEAR(all.back().second, 8.0 / 3, 1e-8);  // the last point holds one bin of three (%.9g)
}

TEST(SimrunSummary, WritesANewDirectoryOrNothing) {
  const std::string base = ::testing::TempDir() + "simrun_summary_" + std::to_string(::getpid());
  const std::vector<SummaryFile> files = {{"a.md", "A"}, {"b.svg", "<svg/>"}};
  std::string err;
  ASSERT_TRUE(write_summary_dir(base, files, &err)) << err;
  std::ifstream a(base + "/a.md");
  std::string text((std::istreambuf_iterator<char>(a)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "A");
  // A directory with files in it is refused, and keeps its files.
  EXPECT_FALSE(write_summary_dir(base, {{"c.md", "C"}}, &err));
  EXPECT_NE(err.find("not empty"), std::string::npos) << err;
  EXPECT_NE(summary_dir_problem(base), "");
  EXPECT_FALSE(std::ifstream(base + "/c.md").good());
  // No temporary directory is left beside it.
  EXPECT_FALSE(std::ifstream(base + ".tmp." + std::to_string(::getpid()) + "/a.md").good());
  // A file in the way, and an unwritable place, are refused before anything is written.
  EXPECT_NE(summary_dir_problem(base + "/a.md"), "");
  EXPECT_NE(summary_dir_problem("/proc/no/such/dir"), "");
  for (const SummaryFile& f : files) std::remove((base + "/" + f.name).c_str());
  // An empty directory is replaced.
  EXPECT_EQ(summary_dir_problem(base), "");
  ASSERT_TRUE(write_summary_dir(base + "/", files, &err)) << err;
  EXPECT_TRUE(std::ifstream(base + "/b.svg").good());
  for (const SummaryFile& f : files) std::remove((base + "/" + f.name).c_str());
  ::rmdir(base.c_str());
}

TEST(SimrunRun, RefusesAWorkloadBiggerThanTheFabric) {
  const Workload wl = workload(permutation_cm(32, 32, 1000, 1));
  const RunResult r = run(small(), wl, RunConfig{});
  EXPECT_NE(r.error.find("32 nodes"), std::string::npos) << r.error;
}

uint64_t frames_on(const RunResult& r, const std::string& link) {
  for (const auto& [name, frames] : r.link_frames)
    if (name == link) return frames;
  ADD_FAILURE() << "no link " << link;
  return 0;
}

TEST(SimrunRun, ThreeTierPermutationCompletesAndIsDeterministicBySeed) {
  const Topology t = fat_tree();
  const Workload wl = workload(permutation_cm(16, 16, 256 * 1024, 1));
  RunConfig rc;
  rc.seed = 3;
  const nlohmann::json a = run_json(t, wl, rc);
  const nlohmann::json b = run_json(t, wl, rc);
  EXPECT_EQ(a["summary"]["completed"], 16) << a["summary"].dump();
  EXPECT_EQ(a, b);
  rc.seed = 4;
  EXPECT_NE(a["flows"], run_json(t, wl, rc)["flows"]);
  EXPECT_EQ(a["topology"]["pods_per_plane"], 4);
  // The core tier is built: per plane 8 aggregation switches with 2 cables each to the cores.
  std::map<std::string, uint64_t> links;
  for (const auto& q : a["summary"]["queues"]) links[q["class"]] = q["links"];
  EXPECT_EQ(links["agg_up"], 2u * 8u * 2u);
  EXPECT_EQ(links["core_down"], 2u * 8u * 2u);
  EXPECT_EQ(links["leaf_up"], 2u * 8u * 2u);
  EXPECT_EQ(links["host_up"], 2u * 16u);
}

// One frame, one at a time, to a host on the same leaf, on the other leaf of the pod and in
// another pod: each step up the tree adds two fabric links each way, and the engine's view
// of the fabric (the ideal FCT) matches what was built.
TEST(SimrunRun, ThreeTierHopCountsAndRttsAreAsBuilt) {
  Topology t = fat_tree();
  t.fabric_delay_ns = 20'000;  // long cables, so the hop count dominates the FCT
  const Workload wl = workload(
      "Nodes 16\n0->1 start 0 size 1000\n0->2 start 1000000000 size 1000\n"
      "0->4 start 2000000000 size 1000\n");
  RunConfig rc;
  rc.keep_link_frames = true;
  rc.end_ns = 20'000'000;
  const RunResult r = run(t, wl, rc);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.flows.size(), 3u);
  for (const FlowResult& f : r.flows) ASSERT_TRUE(f.done);
  const int64_t leaf = static_cast<int64_t>(r.flows[0].fct_ns);
  const int64_t pod = static_cast<int64_t>(r.flows[1].fct_ns);
  const int64_t core = static_cast<int64_t>(r.flows[2].fct_ns);
  // 2 more fabric links each way (data and ACK): 4 x 20 us of propagation, plus the frames'
  // serialization on them (a 1,000-byte frame at 100 Gb/s is about 90 ns).
  EXPECT_GE(pod - leaf, 80'000);
  EXPECT_LE(pod - leaf, 81'000);
  EXPECT_GE(core - pod, 80'000);
  EXPECT_LE(core - pod, 81'000);
  const int64_t ideal_pod = static_cast<int64_t>(r.flows[1].ideal_fct_ns);
  const int64_t ideal_core = static_cast<int64_t>(r.flows[2].ideal_fct_ns);
  EXPECT_GE(ideal_core - ideal_pod, 80'000);
  EXPECT_LE(ideal_core - ideal_pod, 81'000);
  // Only the third flow (its data frame, ACK and control frames) went through a core: every
  // frame there crossed one link up and one down.
  auto core_frames = [](const RunResult& x) {
    uint64_t n = 0;
    for (const auto& [name, frames] : x.link_frames)
      if (name.find("core") != std::string::npos) n += frames;
    return n;
  };
  EXPECT_GE(core_frames(r), 4u);  // the data frame and its ACK
  EXPECT_EQ(core_frames(r) % 2, 0u);
  const RunResult in_pod =
      run(t, workload("Nodes 16\n0->1 start 0 size 1000\n0->2 start 1000000000 size 1000\n"), rc);
  ASSERT_EQ(in_pod.error, "");
  EXPECT_EQ(core_frames(in_pod), 0u);
}

TEST(SimrunRun, ThreeTierFailedCoreIsRoutedAround) {
  Topology t = fat_tree();
  for (uint8_t p = 1; p <= 2; ++p) {
    Failure f;
    f.plane = p;
    f.core = 1;  // every cable of core 1, for the rest of the run
    f.from_ns = 20'000;
    t.failures.push_back(f);
  }
  const Workload wl = workload(permutation_cm(16, 16, 1024 * 1024, 1));
  const nlohmann::json j = run_json(t, wl);
  const nlohmann::json& sum = j["summary"];
  EXPECT_EQ(sum["completed"], 16) << sum.dump();
  EXPECT_GT(sum["ev_retirements"].get<uint64_t>(), 0u);
  uint64_t core_drops = 0, other_drops = 0;
  for (const auto& q : sum["queues"]) {
    (q["class"] == "agg_up" || q["class"] == "core_down" ? core_drops : other_drops) +=
        q["drops"].get<uint64_t>();
  }
  EXPECT_GT(core_drops, 0u);  // frames were lost at the dead core
  EXPECT_EQ(other_drops, 0u);
}

// Leaves and aggregation switches hash the EV with different seeds. With one seed, leaf 0 and
// aggregation switch 0 would compute the same hash for a frame, so every EV that leaf 0 sends to
// aggregation switch 0 (hash even) would also take its first core (hash even): half of the
// pod's core uplinks would never carry leaf 0's traffic (fabric polarisation).
TEST(SimrunRun, ThreeTierHashesEachTierIndependently) {
  Topology t = fat_tree();
  t.planes = 1;
  RunConfig rc;
  rc.evs = 32;
  rc.keep_link_frames = true;
  rc.end_ns = 20'000'000;
  const RunResult r = run(t, workload("Nodes 16\n0->4 start 0 size 1000000\n"), rc);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.flows.at(0).done);
  for (const char* link : {"p1.agg0>core0", "p1.agg0>core2", "p1.agg1>core1", "p1.agg1>core3"})
    EXPECT_GT(frames_on(r, link), 0u) << link;
}

TEST(SimrunRun, Srv6PinningUsesEverySpineOncePerPlane) {
  // 2 planes x 4 spines, 8 EVs: one EV per (plane, spine). Every uplink of the sender's leaf
  // carries data; with 8 EVs on 8 links that is each path exactly once.
  Topology t = small();
  t.routing = Routing::kSrv6;
  const Workload wl = workload("Nodes 16\n0->4 start 0 size 1000000\n");
  RunConfig rc;
  rc.evs = 8;
  rc.keep_link_frames = true;
  rc.end_ns = 20'000'000;
  const RunResult r = run(t, wl, rc);
  ASSERT_EQ(r.error, "");
  ASSERT_TRUE(r.flows.at(0).done);
  for (int p = 1; p <= 2; ++p) {
    for (int m = 0; m < 4; ++m) {
      EXPECT_GT(frames_on(r, "p" + std::to_string(p) + ".leaf0>spine" + std::to_string(m)), 10u)
          << "plane " << p << " spine " << m;
    }
  }
  // ECMP hashing of the same 8 EVs leaves some uplink unused (the reason pinning exists).
  t.routing = Routing::kEcmp;
  const RunResult h = run(t, wl, rc);
  int unused = 0;
  for (int p = 1; p <= 2; ++p)
    for (int m = 0; m < 4; ++m)
      unused +=
          frames_on(h, "p" + std::to_string(p) + ".leaf0>spine" + std::to_string(m)) == 0 ? 1 : 0;
  EXPECT_GT(unused, 0);

  // Fewer EVs than paths: a host starts at path host x EVs per plane (host 1, one EV per plane:
  // spine 1), so the QPs of a fabric do not all crowd onto the first paths.
  rc.evs = 2;
  t.routing = Routing::kSrv6;
  const RunResult one = run(t, workload("Nodes 16\n1->4 start 0 size 100000\n"), rc);
  ASSERT_EQ(one.error, "");
  for (int p = 1; p <= 2; ++p) {
    for (int m = 0; m < 4; ++m) {
      const uint64_t n =
          frames_on(one, "p" + std::to_string(p) + ".leaf0>spine" + std::to_string(m));
      EXPECT_EQ(n > 0, m == 1) << "plane " << p << " spine " << m << ": " << n;
    }
  }
  rc.evs = 8;

  // Three tiers: the EV names the core, and with it the aggregation switch wired to it.
  Topology f = fat_tree();
  f.routing = Routing::kSrv6;
  const RunResult c = run(f, workload("Nodes 16\n0->4 start 0 size 1000000\n"), rc);
  ASSERT_EQ(c.error, "");
  ASSERT_TRUE(c.flows.at(0).done);
  for (int p = 1; p <= 2; ++p) {
    const std::string pn = "p" + std::to_string(p);
    for (int core = 0; core < 4; ++core) {
      const int agg = core % 2;  // pod 0
      EXPECT_GT(frames_on(c, pn + ".agg" + std::to_string(agg) + ">core" + std::to_string(core)),
                10u)
          << pn << " core " << core;
    }
  }
}

TEST(SimrunRun, Srv6FailedSpineRetiresExactlyItsEvs) {
  Topology t = small();
  t.routing = Routing::kSrv6;
  Failure f;
  f.plane = 1;
  f.spine = 2;
  f.from_ns = 30'000;
  t.failures.push_back(f);
  RunConfig rc;
  rc.evs = 16;  // two EVs per (plane, spine)
  rc.end_ns = 20'000'000;
  const Workload wl = workload(permutation_cm(16, 16, 1024 * 1024, 1));
  const RunResult r = run(t, wl, rc);
  ASSERT_EQ(r.error, "");
  for (const FlowResult& fr : r.flows) EXPECT_TRUE(fr.done) << fr.flow.id;
  ASSERT_FALSE(r.retired_by_path.empty());
  for (const auto& [path, n] : r.retired_by_path) EXPECT_EQ(path, "p1.spine2") << n;
  // Every sender on another leaf than its receiver had two EVs on the dead spine.
  uint64_t crossing = 0;
  for (const Flow& fl : wl.flows) crossing += fl.src / 4 != fl.dst / 4;
  EXPECT_GE(r.ev_retirements, 2 * crossing);
}

TEST(SimrunRun, Srv6RefusesMoreEvsThanItCanPin) {
  Topology t = small();
  t.routing = Routing::kSrv6;
  EXPECT_EQ(pinned_ev_check(t, 2 * 4 * 16384), "");
  EXPECT_NE(pinned_ev_check(t, 2 * 4 * 16384 + 1), "");
  RunConfig rc;
  rc.evs = 2 * 4 * 16384 + 1;
  const RunResult r = run(t, workload("Nodes 16\n0->4 size 1000\n"), rc);
  EXPECT_NE(r.error.find("routing srv6"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace mrc::simrun
