// Fault hooks: each hits exactly its target, random ones hit at the configured rate, packet
// surgery leaves decodable frames, decisions are logged and reproducible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "reference-impl/sim/sim.h"
#include "reference-impl/sim/sim_test_util.h"

namespace mrc::sim {
namespace {

using testing::Carrier;
using testing::data_frame;
using testing::decode;
using testing::GeneratorNode;
using testing::SinkNode;

constexpr uint64_t kInterval = 1000;  // ns between frames: no queueing anywhere

// Node a sends `n` frames to node b over one 100 Gb/s cable; frame i is make(i).
struct TwoNodes {
  TwoNodes(uint64_t n, std::function<std::vector<std::byte>(uint64_t)> make, SimConfig cfg = {},
           bool keep_frames = false)
      : sim(cfg),
        a(n, 0, kInterval, [make](uint64_t i, uint8_t&) { return make(i); }),
        b(keep_frames) {
    na = sim.add_node("a", a);
    nb = sim.add_node("b", b);
    LinkConfig c;
    c.rate_bps = 100'000'000'000;
    c.prop_delay_ns = 500;
    ab = sim.cable(na, 1, nb, 1, c).first;
  }
  std::set<uint32_t> received_psns() const {
    std::set<uint32_t> s;
    for (const auto& g : b.got) s.insert(g.psn);
    return s;
  }
  std::vector<uint32_t> decided_psns(Action action) const {
    std::vector<uint32_t> v;
    for (const auto& d : sim.decisions()) {
      if (d.action == action) v.push_back(d.psn);
    }
    return v;
  }
  Simulator sim;
  GeneratorNode a;
  SinkNode b;
  NodeId na, nb;
  LinkId ab;
};

std::vector<std::byte> frame_psn_ev8(uint64_t i) {
  return data_frame(static_cast<uint32_t>(i), static_cast<uint32_t>(i % 8), 32);
}

TEST(Fault, DropByEvHitsOnlyThatEv) {
  TwoNodes t(800, frame_psn_ev8);
  t.sim.add_fault(t.ab, Fault::drop().only_ev(3));
  t.sim.run_until_idle();
  for (const auto& g : t.b.got) EXPECT_NE(g.wev, 3u);
  EXPECT_EQ(t.b.got.size(), 700u);
  ASSERT_EQ(t.sim.decisions().size(), 100u);
  for (const auto& d : t.sim.decisions()) {
    EXPECT_EQ(d.ev, 3u);
    EXPECT_EQ(d.psn % 8, 3u);
    EXPECT_EQ(d.action, Action::kDrop);
    EXPECT_EQ(d.reason, "drop ev=3");
    EXPECT_EQ(d.qpn, wire::samples::responder().qpn);
    EXPECT_EQ(d.opcode, static_cast<uint8_t>(wire::Opcode::kWriteOnly));
  }
  EXPECT_EQ(t.sim.link_stats(t.ab).drop_fault, 100u);
}

TEST(Fault, DropByPsnStopsAfterItsHitBudget) {
  // PSNs 0..9 sent three times each (as retransmissions would): only the first two copies of
  // PSN 4 are lost.
  TwoNodes t(30, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i % 10), 1, 32); });
  t.sim.add_fault(t.ab, Fault::drop().only_psn(4).at_most(2));
  t.sim.run_until_idle();
  EXPECT_EQ(t.b.got.size(), 28u);
  std::vector<uint64_t> psn4_times;
  for (const auto& g : t.b.got) {
    if (g.psn == 4) psn4_times.push_back(g.t_ns);
  }
  ASSERT_EQ(psn4_times.size(), 1u);
  EXPECT_GT(psn4_times[0], 24 * kInterval);  // the third copy (frame 24)
  EXPECT_EQ(t.decided_psns(Action::kDrop), (std::vector<uint32_t>{4, 4}));
}

TEST(Fault, DropByIndexCountsOnlyMatchingFrames) {
  TwoNodes t(200, frame_psn_ev8);
  t.sim.add_fault(t.ab, Fault::drop().at_indices({99, 0, 5, 5000}));
  // Second hook: index 1 among EV-2 frames = frame 10.
  t.sim.add_fault(t.ab, Fault::drop().only_ev(2).at_indices({1}));
  t.sim.run_until_idle();
  EXPECT_EQ(t.decided_psns(Action::kDrop), (std::vector<uint32_t>{0, 5, 10, 99}));
  std::set<uint32_t> want;
  for (uint32_t i = 0; i < 200; ++i) want.insert(i);
  for (uint32_t i : {0u, 5u, 10u, 99u}) want.erase(i);
  EXPECT_EQ(t.received_psns(), want);
}

TEST(Fault, BernoulliDropRateWithinSixSigma) {
  // n = 100000 frames, p = 0.01: drops ~ Binomial(n, p), mean 1000, sigma = sqrt(n p (1-p))
  // = 31.46. Bound: |drops - 1000| <= 6 sigma = 189 (a correct generator fails this with
  // probability ~2e-9; the seed is fixed, so the test is deterministic either way).
  constexpr uint64_t n = 100'000;
  constexpr double p = 0.01;
  TwoNodes t(n, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 16); });
  t.sim.add_fault(t.ab, Fault::drop().with_probability(p));
  t.sim.run_until_idle(UINT64_MAX);
  const double mean = n * p;
  const double sigma = std::sqrt(n * p * (1 - p));
  const uint64_t drops = t.sim.link_stats(t.ab).drop_fault;
  EXPECT_LE(std::fabs(static_cast<double>(drops) - mean), 6 * sigma) << drops;
  EXPECT_EQ(t.b.got.size(), n - drops);
  // The log names exactly the frames that are missing.
  std::set<uint32_t> missing;
  const std::set<uint32_t> got = t.received_psns();
  for (uint32_t i = 0; i < n; ++i) {
    if (!got.count(i)) missing.insert(i);
  }
  const auto logged = t.decided_psns(Action::kDrop);
  EXPECT_EQ(std::set<uint32_t>(logged.begin(), logged.end()), missing);
  EXPECT_EQ(logged.size(), drops);
}

TEST(Fault, GilbertElliottLossRateAndBurstLength) {
  // Loss only in the bad state: p = P(good->bad) = 0.01, r = P(bad->good) = 0.25.
  // Stationary pi_bad = p / (p + r) = 0.03846 -> mean losses 3846 of n = 100000. The count of
  // bad-state frames of a two-state chain has asymptotic variance
  //   n pi_bad pi_good (1 + lambda) / (1 - lambda),  lambda = 1 - p - r = 0.74,
  // = 24749, sigma = 157.3; bound 6 sigma = 944.
  // Bursts are geometric with mean 1/r = 4 and sd sqrt(1-r)/r = 3.46; about n pi_good p = 962
  // bursts, so the mean burst length has sigma ~ 3.46/sqrt(962) = 0.112; bound 6 sigma = 0.67.
  constexpr uint64_t n = 100'000;
  GilbertElliott ge{0.01, 0.25, 0.0, 1.0};
  TwoNodes t(n, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 16); });
  t.sim.add_fault(t.ab, Fault::drop().in_bursts(ge));
  t.sim.run_until_idle(UINT64_MAX);
  const double pi_bad = ge.p_good_to_bad / (ge.p_good_to_bad + ge.p_bad_to_good);
  const double lambda = 1 - ge.p_good_to_bad - ge.p_bad_to_good;
  const double sigma = std::sqrt(n * pi_bad * (1 - pi_bad) * (1 + lambda) / (1 - lambda));
  const auto lost = t.decided_psns(Action::kDrop);
  EXPECT_LE(std::fabs(static_cast<double>(lost.size()) - n * pi_bad), 6 * sigma) << lost.size();
  // Bursts = runs of consecutive lost frames.
  size_t bursts = 0;
  for (size_t i = 0; i < lost.size(); ++i) {
    if (i == 0 || lost[i] != lost[i - 1] + 1) ++bursts;
  }
  ASSERT_GT(bursts, 0u);
  const double mean_burst = static_cast<double>(lost.size()) / static_cast<double>(bursts);
  EXPECT_LE(std::fabs(mean_burst - 1 / ge.p_bad_to_good), 0.67) << mean_burst;
  for (const auto& d : t.sim.decisions()) {
    EXPECT_NE(d.reason.find("state=bad"), std::string::npos) << d.reason;
  }
}

TEST(Fault, TrimKeepsHeadersFixesLengthsAndSetsDscp) {
  const wire::DscpPlan& plan = wire::mrp0().dscp();
  for (Carrier c : wire::samples::all_carriers()) {
    for (bool lasthop : {false, true}) {
      SCOPED_TRACE(std::string(wire::samples::carrier_name(c)) + (lasthop ? " lasthop" : ""));
      TwoNodes t(
          4, [c](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 5, 1000, c); }, {},
          true);
      t.sim.add_fault(t.ab, Fault::trim(lasthop).only_psn(2));
      t.sim.run_until_idle();
      ASSERT_EQ(t.b.frames.size(), 4u);
      const auto original = data_frame(2, 5, 1000, c);
      const wire::DecodedFrame o = decode(original);
      const std::vector<std::byte>& cut = t.b.frames[2];
      wire::DecodedFrame f;
      ASSERT_TRUE(wire::decode_frame(wire::as_bytes(cut), f)) << f.error.describe();
      EXPECT_TRUE(f.trimmed);
      EXPECT_EQ(f.dscp(), lasthop ? plan.trimmed_lasthop : plan.trimmed);
      if (f.has_inner_ip6) {
        EXPECT_EQ(f.inner_ip6.dscp, f.dscp());
      }
      EXPECT_EQ(f.ecn(), o.ecn());
      EXPECT_EQ(cut.size(), size_t{o.off_udp} + 8 + wire::mrp0().min_trim_bytes());
      EXPECT_TRUE(f.payload.empty());
      EXPECT_FALSE(f.has_icrc);
      EXPECT_EQ(f.udp.length, 8 + wire::mrp0().min_trim_bytes());
      EXPECT_EQ(f.bth.psn, 2u);
      EXPECT_EQ(f.bth.dest_qp, o.bth.dest_qp);
      EXPECT_EQ(f.udp.sport, o.udp.sport);
      EXPECT_TRUE(f.has(wire::kHdrMeth));
      EXPECT_TRUE(f.has(wire::kHdrTseth));
      EXPECT_EQ(f.tseth.ts16, o.tseth.ts16);
      EXPECT_EQ(f.meth.msn, o.meth.msn);
      if (f.l3 == 4) {
        EXPECT_EQ(f.ip4.total_length, cut.size() - f.off_l3);
        EXPECT_EQ(wire::internet_checksum(wire::Bytes(cut.data() + f.off_l3, 20)), 0);
      } else {
        EXPECT_EQ(f.ip6.payload_length, cut.size() - f.off_l3 - 40);
      }
      if (f.has_inner_ip6) {
        EXPECT_EQ(f.inner_ip6.payload_length, cut.size() - f.off_inner - 40);
      }
      // The other frames are untouched.
      EXPECT_EQ(t.b.frames[1], data_frame(1, 5, 1000, c));
      ASSERT_EQ(t.sim.decisions().size(), 1u);
      EXPECT_EQ(t.sim.decisions()[0].action, Action::kTrim);
      EXPECT_EQ(t.sim.link_stats(t.ab).trim_fault, 1u);
    }
  }
}

TEST(Fault, TrimLeavesNonTrimmableFramesAlone) {
  SimConfig cfg;
  cfg.log_pass = true;
  TwoNodes t(
      2,
      [](uint64_t i) {
        return data_frame(static_cast<uint32_t>(i), 1, 500, Carrier::kUdp6,
                          wire::mrp0().dscp().no_trim);
      },
      cfg, true);
  t.sim.add_fault(t.ab, Fault::trim());
  t.sim.run_until_idle();
  ASSERT_EQ(t.b.frames.size(), 2u);
  EXPECT_EQ(t.b.frames[0], data_frame(0, 1, 500, Carrier::kUdp6, wire::mrp0().dscp().no_trim));
  EXPECT_EQ(t.sim.link_stats(t.ab).trim_fault, 0u);
  ASSERT_FALSE(t.sim.decisions().empty());
  EXPECT_EQ(t.sim.decisions()[0].action, Action::kPass);
  EXPECT_NE(t.sim.decisions()[0].reason.find("not trimmable"), std::string::npos);

  // trim_any_dscp overrides the DSCP check.
  TwoNodes u(
      1,
      [](uint64_t) { return data_frame(0, 1, 500, Carrier::kUdp6, wire::mrp0().dscp().no_trim); },
      {}, true);
  Fault f = Fault::trim();
  f.trim_any_dscp = true;
  u.sim.add_fault(u.ab, f);
  u.sim.run_until_idle();
  ASSERT_EQ(u.b.got.size(), 1u);
  EXPECT_TRUE(u.b.got[0].trimmed);
}

TEST(Fault, HitBudgetCountsOnlyFramesTheActionChanged) {
  // Frame 0 is a control frame (not trimmable): it must not use up at_most(1).
  TwoNodes t(3, [](uint64_t i) {
    return i == 0 ? testing::ack_frame(0, 1) : data_frame(static_cast<uint32_t>(i), 1, 500);
  });
  t.sim.add_fault(t.ab, Fault::trim().at_most(1));
  t.sim.run_until_idle();
  ASSERT_EQ(t.b.got.size(), 3u);
  EXPECT_FALSE(t.b.got[0].trimmed);
  EXPECT_TRUE(t.b.got[1].trimmed);
  EXPECT_FALSE(t.b.got[2].trimmed);
  EXPECT_THROW(t.sim.add_fault(t.ab, Fault::duplicate(0)), std::invalid_argument);
  EXPECT_THROW(t.sim.add_fault(t.ab, Fault::drop().at_indices({})), std::invalid_argument);
  EXPECT_THROW(t.sim.add_fault(t.ab, Fault::drop().during(5, 5)), std::invalid_argument);
}

TEST(Fault, EcnMarkOnlyMatchingEctFrames) {
  TwoNodes t(
      40,
      [](uint64_t i) {
        // Frames 30..39 are Not-ECT.
        return data_frame(static_cast<uint32_t>(i), static_cast<uint32_t>(i % 4), 64,
                          Carrier::kStev, std::nullopt, i < 30 ? 2 : 0);
      },
      {}, true);
  t.sim.add_fault(t.ab, Fault::mark_ecn().only_ev(1));
  t.sim.run_until_idle();
  ASSERT_EQ(t.b.got.size(), 40u);
  size_t marked = 0;
  for (size_t i = 0; i < 40; ++i) {
    const auto& g = t.b.got[i];
    const uint8_t want = i >= 30 ? 0 : (i % 4 == 1 ? 3 : 2);
    EXPECT_EQ(g.ecn, want) << "frame " << i;
    marked += g.ecn == 3;
    EXPECT_TRUE(decode(t.b.frames[i], true).icrc_ok);
  }
  EXPECT_EQ(marked, 8u);  // EV 1 among frames 0..29
  EXPECT_EQ(t.sim.link_stats(t.ab).ecn_fault, 8u);
}

TEST(Fault, DelayReordersExactlyByTheDrawnAmount) {
  TwoNodes t(30, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 64); });
  t.sim.add_fault(t.ab, Fault::delay(10'500, 10'500).only_psn(5));
  t.sim.run_until_idle();
  std::vector<uint32_t> order;
  for (const auto& g : t.b.got) order.push_back(g.psn);
  auto pos = [&](uint32_t psn) {
    return std::find(order.begin(), order.end(), psn) - order.begin();
  };
  EXPECT_EQ(pos(5), pos(15) + 1);  // 5 left at 5000, arrives 10.5 us late: after 15, before 16
  EXPECT_EQ(t.b.got[static_cast<size_t>(pos(5))].t_ns, t.b.got[4].t_ns + kInterval + 10'500);

  // Random delays: each logged amount is in range and is exactly the extra arrival time.
  TwoNodes r(200, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 64); });
  r.sim.add_fault(r.ab, Fault::delay(1000, 3000).with_probability(0.5));
  r.sim.run_until_idle();
  std::map<uint32_t, uint64_t> arrival;
  for (const auto& g : r.b.got) arrival[g.psn] = g.t_ns;
  ASSERT_EQ(arrival.size(), 200u);
  size_t delayed = 0;
  std::map<uint32_t, uint64_t> extra_of;
  for (const auto& d : r.sim.decisions()) {
    ASSERT_EQ(d.action, Action::kDelay);
    const size_t plus = d.reason.rfind('+');
    ASSERT_NE(plus, std::string::npos);
    const uint64_t extra = std::stoull(d.reason.substr(plus + 1));
    EXPECT_GE(extra, 1000u);
    EXPECT_LE(extra, 3000u);
    extra_of[d.psn] = extra;
    ++delayed;
  }
  EXPECT_GT(delayed, 50u);
  EXPECT_LT(delayed, 150u);
  // Undelayed frames arrive at psn * interval + c for one constant c; delayed ones exactly
  // `extra` later.
  uint64_t c = 0;
  for (uint32_t i = 0; i < 200; ++i) {
    if (!extra_of.count(i)) {
      c = arrival.at(i) - i * kInterval;
      break;
    }
  }
  for (uint32_t i = 0; i < 200; ++i) {
    const uint64_t extra = extra_of.count(i) ? extra_of.at(i) : 0;
    EXPECT_EQ(arrival.at(i), i * kInterval + c + extra) << "psn " << i;
  }
}

TEST(Fault, DuplicateDeliversIdenticalCopies) {
  TwoNodes t(
      10, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 64); }, {}, true);
  t.sim.add_fault(t.ab, Fault::duplicate(2).only_psn(7));
  t.sim.run_until_idle();
  ASSERT_EQ(t.b.got.size(), 12u);
  std::vector<size_t> idx;
  for (size_t i = 0; i < t.b.got.size(); ++i) {
    if (t.b.got[i].psn == 7) idx.push_back(i);
  }
  ASSERT_EQ(idx.size(), 3u);
  EXPECT_EQ(t.b.frames[idx[0]], t.b.frames[idx[1]]);
  EXPECT_EQ(t.b.frames[idx[0]], t.b.frames[idx[2]]);
  EXPECT_EQ(t.sim.link_stats(t.ab).duplicated, 2u);
  EXPECT_EQ(t.sim.link_stats(t.ab).frames_in, 12u);
  EXPECT_EQ(t.decided_psns(Action::kDup), (std::vector<uint32_t>{7}));
}

TEST(Fault, CorruptFlipsOneCoveredBitSoTheIcrcFails) {
  for (Carrier c : {Carrier::kUdp4, Carrier::kStev, Carrier::kSrv6Srh}) {
    SCOPED_TRACE(wire::samples::carrier_name(c));
    TwoNodes t(
        6,
        [c](uint64_t i) {
          return i < 5 ? data_frame(static_cast<uint32_t>(i), 1, 300, c)
                       : testing::ack_frame(5, 1, c);
        },
        {}, true);
    t.sim.add_fault(t.ab, Fault::corrupt().only_psn(3));
    t.sim.add_fault(t.ab, Fault::corrupt().only_psn(5));  // a frame with no payload
    t.sim.run_until_idle();
    ASSERT_EQ(t.b.frames.size(), 6u);
    for (uint32_t i = 0; i < 6; ++i) {
      const auto original = i < 5 ? data_frame(i, 1, 300, c) : testing::ack_frame(5, 1, c);
      const auto& got = t.b.frames[i];
      ASSERT_EQ(got.size(), original.size());
      size_t bits = 0, where = 0;
      for (size_t k = 0; k < got.size(); ++k) {
        const auto x = static_cast<unsigned>(got[k] ^ original[k]);
        if (x != 0) where = k;
        bits += static_cast<size_t>(__builtin_popcount(x));
      }
      const wire::DecodedFrame f = decode(got, true);
      if (i == 3 || i == 5) {
        EXPECT_EQ(bits, 1u);
        EXPECT_FALSE(f.icrc_ok);
        EXPECT_EQ(f.bth.psn, i);  // headers a switch or a receiver dispatches on are intact
        const wire::DecodedFrame o = decode(original);
        if (i == 3) {
          EXPECT_GE(where, o.off_payload);
          EXPECT_LT(where, o.off_payload + o.payload.size());
        } else {
          EXPECT_GE(where, size_t{o.off_bth} + 12);
          EXPECT_LT(where, original.size() - wire::kIcrcBytes);
        }
      } else {
        EXPECT_EQ(bits, 0u);
        EXPECT_TRUE(f.icrc_ok);
      }
    }
    EXPECT_EQ(t.sim.link_stats(t.ab).corrupted, 2u);
  }
}

TEST(Fault, ActionsComposeAndDropEndsTheChain) {
  TwoNodes t(
      4, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 500); }, {}, true);
  t.sim.add_fault(t.ab, Fault::trim().only_psn(1));
  t.sim.add_fault(t.ab, Fault::mark_ecn().only_psn(1));
  t.sim.add_fault(t.ab, Fault::drop().only_psn(2));
  t.sim.add_fault(t.ab, Fault::duplicate().only_psn(2));  // never reached: dropped first
  t.sim.run_until_idle();
  ASSERT_EQ(t.b.got.size(), 3u);
  EXPECT_TRUE(t.b.got[1].trimmed);
  EXPECT_EQ(t.b.got[1].ecn, 3);
  EXPECT_EQ(t.b.got[2].psn, 3u);
  const auto& d = t.sim.decisions();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].action, Action::kTrim);
  EXPECT_EQ(d[1].action, Action::kEcn);
  EXPECT_EQ(d[0].packet_uid, d[1].packet_uid);
  EXPECT_EQ(d[2].action, Action::kDrop);
  EXPECT_EQ(t.sim.link_stats(t.ab).duplicated, 0u);
}

TEST(Fault, TimeWindowLimitsAHook) {
  TwoNodes t(40, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 64); });
  t.sim.add_fault(t.ab, Fault::drop().during(10'000, 20'000));
  t.sim.run_until_idle();
  const auto dropped = t.decided_psns(Action::kDrop);
  std::vector<uint32_t> want;
  for (uint32_t i = 10; i < 20; ++i) want.push_back(i);
  EXPECT_EQ(dropped, want);
}

std::vector<uint32_t> bernoulli_drops(uint64_t seed, bool extra_hooks) {
  SimConfig cfg;
  cfg.seed = seed;
  TwoNodes t(
      10'000, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 16); }, cfg);
  t.sim.add_fault(t.ab, Fault::drop().with_probability(0.1));
  if (extra_hooks) {
    // A later hook on the same link and a hook on the reverse link draw from their own streams.
    t.sim.add_fault(t.ab, Fault::delay(0, 100).with_probability(0.5));
    t.sim.add_fault(t.sim.find_link("b.p1>a"), Fault::drop().with_probability(0.5));
  }
  t.sim.run_until_idle();
  return t.decided_psns(Action::kDrop);
}

TEST(Fault, SeedsDecideAndHooksDrawFromIndependentStreams) {
  const auto s1 = bernoulli_drops(1, false);
  EXPECT_EQ(s1, bernoulli_drops(1, false));
  EXPECT_NE(s1, bernoulli_drops(2, false));
  EXPECT_EQ(s1, bernoulli_drops(1, true));
  EXPECT_GT(s1.size(), 800u);
}

TEST(Fault, DecisionJsonLine) {
  Decision d;
  d.t_ns = 1500;
  d.link_name = "p1.a>s0";
  d.dir = "a>b";
  d.action = Action::kTrim;
  d.roce = true;
  d.qpn = 34;
  d.psn = 1000;
  d.opcode = 0xC7;
  d.ev = 0x3a5c1;
  d.reason = "trim \"x\"";
  d.seed = 7;
  EXPECT_EQ(decision_json(d),
            "{\"t_ns\":1500,\"link\":\"p1.a>s0\",\"dir\":\"a>b\",\"action\":\"trim\",\"qpn\":34,"
            "\"psn\":1000,\"opcode\":199,\"ev\":239041,\"reason\":\"trim \\\"x\\\"\",\"seed\":7}");
  d.roce = false;
  d.action = Action::kDrop;
  d.reason = "link_down";
  EXPECT_EQ(decision_json(d),
            "{\"t_ns\":1500,\"link\":\"p1.a>s0\",\"dir\":\"a>b\",\"action\":\"drop\",\"qpn\":null,"
            "\"psn\":null,\"opcode\":null,\"ev\":null,\"reason\":\"link_down\",\"seed\":7}");
}

TEST(Fault, LogPassRecordsUntouchedFramesAndSinkSeesEverything) {
  SimConfig cfg;
  cfg.log_pass = true;
  cfg.keep_decisions = false;
  TwoNodes t(
      10, [](uint64_t i) { return data_frame(static_cast<uint32_t>(i), 1, 64); }, cfg);
  std::vector<std::string> lines;
  t.sim.set_decision_sink([&](const Decision& d) { lines.push_back(decision_json(d)); });
  t.sim.add_fault(t.ab, Fault::drop().only_psn(3));
  t.sim.run_until_idle();
  EXPECT_TRUE(t.sim.decisions().empty());
  ASSERT_EQ(lines.size(), 10u);
  size_t passes = 0;
  for (const auto& l : lines) passes += l.find("\"action\":\"pass\"") != std::string::npos;
  EXPECT_EQ(passes, 9u);
}

TEST(Fault, SurgeryRefusesWhatItCannotDo) {
  std::vector<std::byte> not_roce(60, std::byte{0});
  std::string err;
  EXPECT_FALSE(trim_frame(not_roce, 12, wire::mrp0(), &err));
  EXPECT_NE(err.find("not an MRC data packet"), std::string::npos);
  auto ack = testing::ack_frame(1, 1);  // already no longer than a trimmed frame
  const auto before = ack;
  EXPECT_FALSE(trim_frame(ack, 12, wire::mrp0(), &err));
  EXPECT_EQ(ack, before);
  std::vector<std::byte> tiny(10, std::byte{0});
  EXPECT_FALSE(corrupt_frame(tiny, 3, wire::mrp0()).has_value());
  EXPECT_FALSE(set_ecn(tiny, 3, wire::mrp0()));
  // Malformed input never crashes the inspector.
  Rng rng(5);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::byte> junk = data_frame(1, 1, 64);
    junk.resize(rng.uniform(junk.size() + 1));
    for (int k = 0; k < 3 && !junk.empty(); ++k) {
      junk[rng.uniform(junk.size())] = static_cast<std::byte>(rng.next());
    }
    (void)inspect_frame(wire::as_bytes(junk));
    std::vector<std::byte> copy = junk;
    (void)trim_frame(copy, 12, wire::mrp0());
    copy = junk;
    (void)corrupt_frame(copy, rng.next(), wire::mrp0());
  }
}

}  // namespace
}  // namespace mrc::sim
