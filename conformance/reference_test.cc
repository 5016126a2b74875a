// The reference endpoint (reference-impl/engine) on the deterministic simulator, captured at both
// hosts with the injector's decision log, must pass every applicable rule: on a clean network and
// under drops, trims, ECN marks, duplicates, reordering and corruption. A failure here is either
// a checker false positive or a reference-endpoint bug; the evidence says which.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/check.h"
#include "conformance/fixtures.h"
#include "reference-impl/sim/engine_harness.h"

namespace mrc::check {
namespace {

namespace sim = mrc::sim;
namespace eng = mrc::engine;
using sim::harness::Harness;
using sim::harness::HarnessConfig;
using sim::harness::QpConfig;
using sim::harness::Transfer;

struct RefResult {
  Report report;
  CheckOptions opts;
  bool completed = false;
  bool exact = false;
  std::string error;
};

std::string profile_for(const Harness& h, const QpConfig& qc) {
  nlohmann::json nodes = nlohmann::json::array();
  for (size_t i = 0; i < 2; ++i)
    nodes.push_back(
        {{"name", std::string(1, static_cast<char>('a' + i))},
         {"addrs", {wire::format_ipv6(sim::harness::node_gid(static_cast<uint8_t>(i)))}}});
  nlohmann::json qps = nlohmann::json::array();
  for (size_t k = 0; k < h.conn_count(); ++k) {
    const auto& c = h.conn(k);
    // Both directions of the connection are QPs the checker may see.
    for (int dir = 0; dir < 2; ++dir) {
      const size_t rq = dir == 0 ? c.a : c.b, rs = dir == 0 ? c.b : c.a;
      qps.push_back(
          {{"requester",
            {{"addr", wire::format_ipv6(sim::harness::node_gid(static_cast<uint8_t>(rq)))},
             {"qpn", dir == 0 ? c.qpn_a : c.qpn_b}}},
           {"responder",
            {{"addr", wire::format_ipv6(sim::harness::node_gid(static_cast<uint8_t>(rs)))},
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
  }
  return nlohmann::json{{"nodes", nodes}, {"qps", qps}}.dump(1);
}

RefResult run_reference(const std::string& name, uint64_t seed,
                        const std::function<void(Harness&)>& faults, size_t bytes = 1 << 20) {
  RefResult out;
  const std::string dir =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_ref_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  HarnessConfig hc;
  hc.seed = seed;
  Harness h(hc);
  QpConfig qc;
  h.connect(0, 1, 1, qc);
  if (!h.ok()) {
    out.error = h.error();
    return out;
  }
  for (size_t i = 0; i < 2; ++i) {
    const std::string path =
        dir + "/" + std::string(1, static_cast<char>('a' + i)) + "-eth0.pcapng";
    h.sim().capture_node(h.node(i).id, 0, path, wire::CaptureFormat::kPcapng);
    out.opts.captures.push_back({path, "", 0});
  }
  faults(h);
  Transfer t(h, 0, bytes, 1);
  t.post(16, 4);
  out.completed = h.run([&] { return t.all_completed(); }, 200'000'000);
  // Let the last acknowledgements, probes and timers play out.
  h.run({}, 2'000'000);
  out.exact = t.exact();
  if (!h.sim().close_captures()) out.error = h.sim().error();
  out.opts.decision_logs.push_back(dir + "/decisions.jsonl");
  if (!h.sim().write_decisions(out.opts.decision_logs[0])) out.error = "write_decisions failed";
  out.opts.profile_path = dir + "/dut.json";
  std::ofstream(out.opts.profile_path) << profile_for(h, qc);
  std::string e;
  if (!check_files(out.opts, out.report, e)) out.error = e;
  return out;
}

std::string summary(const Report& r) {
  std::ostringstream o;
  write_human(r, o);
  return o.str();
}

// Every leaf-to-spine link of `node` on `plane` (all paths), so a fault sees that plane's traffic.
void on_plane(Harness& h, size_t node, uint8_t plane, const sim::Fault& f, bool reverse = false) {
  for (uint32_t path = 0; path < h.config().paths; ++path)
    h.sim().add_fault(reverse ? h.fabric().spine_to_leaf(h.node(node).id, plane, path)
                              : h.fabric().leaf_to_spine(h.node(node).id, plane, path),
                      f);
}

void expect_conforming(const RefResult& r) {
  ASSERT_TRUE(r.error.empty()) << r.error;
  if (std::getenv("MRC_CHECK_REF_VERBOSE")) {
    std::ostringstream o;
    write_human(r.report, o);
    for (const auto& rr : r.report.results)
      if (rr.status == Status::kNotApplicable)
        o << "  n/a " << rr.rule->id << ": " << rr.reason << "\n";
    std::printf("%s", o.str().c_str());
  }
  EXPECT_TRUE(r.completed);
  EXPECT_TRUE(r.exact);
  EXPECT_EQ(fixtures::with_status(r.report, Status::kFail, true), std::set<std::string>{})
      << summary(r.report);
  EXPECT_GT(r.report.count(Status::kPass), 30u) << summary(r.report);
}

TEST(ReferenceEndpoint, CleanNetworkPassesEveryApplicableRule) {
  const RefResult r = run_reference("clean", 1, [](Harness&) {});
  expect_conforming(r);
  EXPECT_EQ(r.report.count(Status::kWarn), 0u) << summary(r.report);
}

TEST(ReferenceEndpoint, DropsPass) {
  const RefResult r = run_reference(
      "drops", 2, [](Harness& h) { on_plane(h, 0, 1, sim::Fault::drop().with_probability(0.03)); },
      4 << 20);
  expect_conforming(r);
  EXPECT_GT(r.report.decisions, 5u);
  EXPECT_EQ(r.report.result("MRC-REQ-015")->status, Status::kPass) << summary(r.report);
}

TEST(ReferenceEndpoint, TrimsPass) {
  const RefResult r = run_reference(
      "trims", 3, [](Harness& h) { on_plane(h, 0, 2, sim::Fault::trim().with_probability(0.05)); },
      4 << 20);
  expect_conforming(r);
  EXPECT_EQ(r.report.result("MRC-RSP-013")->status, Status::kPass) << summary(r.report);
  EXPECT_EQ(r.report.result("MRC-REQ-011")->status, Status::kPass) << summary(r.report);
}

TEST(ReferenceEndpoint, EcnMarksPass) {
  const RefResult r = run_reference(
      "ecn", 4, [](Harness& h) { on_plane(h, 0, 1, sim::Fault::mark_ecn().with_probability(0.1)); },
      4 << 20);
  expect_conforming(r);
  EXPECT_EQ(r.report.result("MRC-RSP-006")->status, Status::kPass) << summary(r.report);
}

TEST(ReferenceEndpoint, MixedFaultsPass) {
  const RefResult r = run_reference(
      "mixed", 5,
      [](Harness& h) {
        on_plane(h, 0, 1, sim::Fault::drop().with_probability(0.01));
        on_plane(h, 0, 2, sim::Fault::trim().with_probability(0.02));
        on_plane(h, 1, 1, sim::Fault::duplicate().with_probability(0.01), true);
        on_plane(h, 1, 2, sim::Fault::delay(2'000, 20'000).with_probability(0.05), true);
        on_plane(h, 1, 1, sim::Fault::drop().with_probability(0.01));  // the reverse path: SACKs
        on_plane(h, 0, 2, sim::Fault::corrupt().with_probability(0.01));
        on_plane(h, 0, 1, sim::Fault::mark_ecn().with_probability(0.05));
      },
      4 << 20);
  expect_conforming(r);
}

}  // namespace
}  // namespace mrc::check
