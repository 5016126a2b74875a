// Robustness: garbage, truncation, unknown protocols and long traces never crash the checker,
// and its memory stays bounded by per-QP state.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>

#include "conformance/fixtures.h"
#include "conformance/internal.h"
#include "wire/samples.h"

namespace mrc::check {
namespace {

using fixtures::DataPkt;
using fixtures::Fate;
using fixtures::kUs;
using fixtures::Session;
using fixtures::Trace;

std::string tmp(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_robust_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(Robustness, RandomAndMutatedFramesNeverCrash) {
  DutProfile prof;
  std::string e;
  ASSERT_TRUE(parse_profile(fixtures::profile(), "fixture", prof, e)) << e;
  Checker ck(prof);
  ck.add_point({"a", "h1", "test", 1, std::nullopt});
  ck.add_point({"b", "h2", "test", 0, std::nullopt});
  std::vector<std::vector<std::byte>> seeds;
  for (const auto& s : wire::samples::all_samples()) seeds.push_back(s.frame);
  Trace t;
  Session sess(t);
  sess.write(5000);
  sess.write(64, true);
  for (const auto& f : t.frames) seeds.push_back(f.bytes);
  std::mt19937_64 rng(12345);
  uint64_t ts = 1'000'000;
  for (int i = 0; i < 60000; ++i) {
    std::vector<std::byte> f;
    const int mode = static_cast<int>(rng() % 4);
    if (mode == 0) {
      f.resize(rng() % 300);
      for (auto& b : f) b = static_cast<std::byte>(rng());
    } else {
      f = seeds[rng() % seeds.size()];
      const int flips = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < flips && !f.empty(); ++k)
        f[rng() % f.size()] ^= static_cast<std::byte>(1 + rng() % 255);
      if (mode == 2 && !f.empty()) f.resize(rng() % f.size());
      if (mode == 3) f.resize(f.size() + rng() % 64, std::byte{0});
    }
    ts += rng() % 5000;
    ck.on_frame(static_cast<uint32_t>(rng() % 2), static_cast<uint64_t>(i + 1), ts,
                wire::as_bytes(f),
                rng() % 8 == 0 ? wire::LinkType::kRawIp : wire::LinkType::kEthernet);
    if (i % 997 == 0) {
      Decision d;
      d.t_ns = ts;
      d.action = static_cast<DecisionAction>(rng() % 8);
      d.qpn = static_cast<uint32_t>(rng() % 2 ? 0x202 : rng() & 0xFFFFFF);
      d.psn = static_cast<uint32_t>(rng() & 0xFFFFFF);
      d.opcode = static_cast<uint8_t>(rng());
      d.ev = static_cast<uint32_t>(rng());
      ck.on_decision(d);
    }
  }
  const Report r = ck.finish();
  EXPECT_EQ(r.frames, 60000u);
  EXPECT_EQ(r.results.size(), rule_catalogue().size());
  std::ostringstream o;
  write_json(r, o);
  write_junit(r, o);
  write_markdown(r, o);
  write_human(r, o);
  EXPECT_FALSE(o.str().empty());
}

TEST(Robustness, GarbageFilesAreInputErrors) {
  const std::string dir = tmp("garbage");
  std::mt19937 rng(7);
  const std::string junk = dir + "/junk.pcap";
  {
    std::ofstream f(junk, std::ios::binary);
    for (int i = 0; i < 4096; ++i) f.put(static_cast<char>(rng()));
  }
  const std::string empty = dir + "/empty.pcap";
  std::ofstream(empty).close();
  const std::string text = dir + "/text.pcap";
  std::ofstream(text) << "this is not a capture\n";
  for (const auto& p : {junk, empty, text}) {
    CheckOptions o;
    o.captures.push_back({p, "", 0});
    std::ostringstream out, err;
    EXPECT_EQ(run_check(o, out, err), 2) << p;
    EXPECT_NE(err.str().find(p), std::string::npos) << err.str();
  }
}

TEST(Robustness, TruncationAtAnyOffsetIsHandled) {
  Trace t;
  Session s(t);
  s.write(3000);
  s.write(100, true);
  const std::string dir = tmp("cut");
  CheckOptions o;
  fixtures::run_files(t, dir, &o);
  const std::string src = o.captures[0].path;
  std::ifstream in(src, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 200u);
  int ok = 0, input_errors = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += 13) {
    const std::string p = dir + "/cut.pcapng";
    std::ofstream(p, std::ios::binary) << bytes.substr(0, cut);
    CheckOptions c = o;
    c.captures[0].path = p;
    Report r;
    std::string e;
    if (check_files(c, r, e))
      ++ok;
    else {
      ++input_errors;
      EXPECT_NE(e.find("cut.pcapng"), std::string::npos) << e;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(input_errors, 0);  // cuts inside the file header cannot be read at all
}

TEST(Robustness, UnknownProtocolsAreIgnored) {
  DutProfile prof;
  Checker ck(prof);
  ck.add_point({"x", "", "", 0, std::nullopt});
  uint64_t n = 0;
  // ARP, IPv4 TCP, IPv6 ICMPv6, VLAN-tagged IPv4 UDP DNS, a jumbo of zeros.
  std::vector<std::vector<uint8_t>> frames = {
      {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1},
      {2, 0,  0,    0, 0,  2, 2, 0, 0,  0, 0,    1, 0x08, 0x00, 0x45, 0, 0,    40,
       0, 0,  0x40, 0, 64, 6, 0, 0, 10, 0, 0,    1, 10,   0,    0,    2, 0x12, 0x34,
       0, 80, 0,    0, 0,  0, 0, 0, 0,  0, 0x50, 2, 0xff, 0xff, 0,    0, 0,    0},
      {2,   0,    0,    0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0,    0, 8, 58,
       255, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    0,    0,    0, 1, 0xff, 2, 0, 0,
       0,   0,    0,    0, 0, 0, 0, 0, 0, 0, 0, 1, 128,  0,    0,    0, 0, 0,    0, 0},
      {2,    0,    0,    0, 0, 2,  2,    0,    0,    0,  0,  1,  0x81, 0x00, 0,  5,
       0x08, 0x00, 0x45, 0, 0, 28, 0,    0,    0x40, 0,  64, 17, 0,    0,    10, 0,
       0,    1,    10,   0, 0, 2,  0x30, 0x39, 0,    53, 0,  8,  0,    0},
      std::vector<uint8_t>(9000, 0)};
  for (const auto& f : frames) {
    ++n;
    ck.on_frame(0, n, 1000 * n, wire::as_bytes(f.data(), f.size()));
  }
  const Report r = ck.finish();
  EXPECT_EQ(r.count(Status::kFail), 0u);
  EXPECT_EQ(r.count(Status::kWarn), 0u);
  EXPECT_EQ(r.packets, 0u);
  EXPECT_TRUE(r.flows.empty());
}

// A long conforming trace keeps the engine's state bounded: the PSN window follows the cumulative
// ACK, the merge table follows the time window, and a sender that never reuses an EV cannot grow
// the EV table without bound.
TEST(Robustness, StateStaysBoundedOnLongTraces) {
  DutProfile prof;
  std::string e;
  ASSERT_TRUE(parse_profile(fixtures::profile("{}", R"({"evs": null})"), "fixture", prof, e)) << e;
  detail::Engine eng(prof, {}, 20);
  Checker* unused = nullptr;
  (void)unused;
  PointInfo a{"a", "h1", "test", 0, std::nullopt};
  PointInfo b{"b", "h2", "test", 0, std::nullopt};
  // Attach points directly on the engine, as Checker::add_point does.
  for (auto* p : {&a, &b}) {
    detail::PointState ps;
    ps.info = *p;
    for (size_t i = 0; i < eng.node_name.size(); ++i)
      if (eng.node_name[i] == p->node) ps.node = static_cast<int>(i);
    eng.node_has_point[static_cast<size_t>(ps.node)] = true;
    eng.points.push_back(ps);
  }
  Trace t;
  Session s(t, 64);
  s.gap = 2 * kUs;
  const int kMessages = 30000;
  size_t max_win = 0, max_dedup = 0, max_evs = 0;
  size_t fed = 0;
  auto feed = [&]() {
    const auto frames = t.sorted();
    for (const auto& f : frames)
      eng.on_frame(f.point, ++fed, f.ts, wire::as_bytes(f.bytes), wire::LinkType::kEthernet, 0);
    t.frames.clear();
    if (!eng.flows.empty()) {
      max_win = std::max(max_win, eng.flows[0]->win.size());
      max_evs = std::max(max_evs, eng.flows[0]->evs.size());
    }
    max_dedup = std::max(max_dedup, eng.dedup.size());
  };
  for (int m = 0; m < kMessages; ++m) {
    // Every tenth message a fresh EV, as a sender exploring new paths would.
    s.write(1024, m % 7 == 0,
            m % 10 == 0 ? fixtures::Session::Mut([&](size_t, DataPkt& p, Fate&) {
              p.wev = 0x00700000u + static_cast<uint32_t>(m);
            })
                        : fixtures::Session::Mut{});
    if (m % 100 == 99) feed();
  }
  feed();
  const Report r = eng.finish(0);
  EXPECT_EQ(r.count(Status::kFail), 0u);
  EXPECT_GE(r.frames, static_cast<uint64_t>(kMessages) * 4);
  EXPECT_LE(max_win, 8192u + 200u);                        // kKeepBehindCack + what is in flight
  EXPECT_LE(max_dedup, 1'000'000u / (2 * kUs) * 4 + 100);  // dedup window / packet gap
  EXPECT_LE(max_evs, 65536u);
  EXPECT_LE(eng.flows[0]->recent_wevs.size(), 1024u);
}

// Not a benchmark (bench/ has those): a sanity figure for the log, and a guard against
// accidental quadratic behaviour.
TEST(Robustness, ThroughputSanity) {
  Trace t;
  Session s(t, 128);
  s.gap = 1 * kUs;
  for (int m = 0; m < 4000; ++m) s.write(4096);
  const auto frames = t.sorted();
  DutProfile prof;
  std::string e;
  ASSERT_TRUE(parse_profile(fixtures::profile("{}", R"({"evs": null})"), "fixture", prof, e)) << e;
  Checker ck(prof);
  ck.add_point({"a", "h1", "test", 0, std::nullopt});
  ck.add_point({"b", "h2", "test", 0, std::nullopt});
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t n = 0;
  for (const auto& f : frames) ck.on_frame(f.point, ++n, f.ts, wire::as_bytes(f.bytes));
  const Report r = ck.finish();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ throughput ] %zu frames in %.3f s = %.2f M frames/s\n", frames.size(), sec,
              static_cast<double>(frames.size()) / sec / 1e6);
  std::ostringstream why;
  write_human(r, why);
  EXPECT_EQ(r.count(Status::kFail), 0u) << why.str();
  EXPECT_LT(sec, 30.0);
}

}  // namespace
}  // namespace mrc::check
