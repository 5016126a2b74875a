// EV set: generation and expansion, rotation balanced over planes, SKIP / ASSUMED_BAD / DENIED
// with the ev_min_active floor and backup replacement from the same plane.
#include "reference-impl/engine/ev_set.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "reference-impl/engine/engine_test_util.h"

namespace mrc::engine::testing {
namespace {

EvSet build(const EvProfile& p, uint8_t nports, wire::EvFormat f = wire::EvFormat::kStev) {
  EvSet s;
  Rng rng(5);
  Status st = s.build(p, f, nports, rng);
  EXPECT_TRUE(st.ok()) << st.message;
  return s;
}

TEST(EvSet, GeneratedEvsExpandIntoTheProfileAndSpreadEquallyOverPorts) {
  const EvSet s = build(make_ev_profile(64, 0, 1), 4);
  ASSERT_EQ(s.size(), 64u);
  std::map<uint8_t, int> per_port;
  std::set<uint32_t> wevs;
  for (uint32_t i = 0; i < s.size(); ++i) {
    const EvRecord& r = s.at(i);
    ++per_port[r.port];
    wevs.insert(r.wev);
    // Field 0: init 0x1000 with 8 random bits in mask 0x00FF; field 1 fully random.
    EXPECT_EQ(r.wev >> 24, 0x10u);
    EXPECT_EQ(r.expanded[0], 0x10);
    EXPECT_EQ(s.find_wev(r.wev), static_cast<int>(i));
  }
  EXPECT_EQ(wevs.size(), 64u);
  for (auto [port, n] : per_port) EXPECT_EQ(n, 16) << int{port};
  EXPECT_EQ(s.active_slots(), 64u);
}

TEST(EvSet, ExplicitProfileKeepsOrderPortsAndRejectsBadPorts) {
  EvProfile p;
  p.mode = EvMode::kExplicit;
  p.format_widths = {16, 16};
  p.fields = {wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  for (uint8_t i = 0; i < 6; ++i) {
    EvEntry e;
    e.ev = {0xAB, i, 0x00, static_cast<uint8_t>(0x10 + i)};
    e.port = static_cast<uint8_t>(1 + i % 2);
    p.explicit_evs.push_back(e);
  }
  const EvSet s = build(p, 2);
  ASSERT_EQ(s.size(), 6u);
  for (uint32_t i = 0; i < 6; ++i) {
    EXPECT_EQ(s.at(i).wev, (0xABu << 24) | (i << 16) | (0x10 + i));
    EXPECT_EQ(s.at(i).port, 1 + i % 2);
  }
  p.explicit_evs[3].port = 3;
  EvSet bad;
  Rng rng(1);
  Status st = bad.build(p, wire::EvFormat::kStev, 2, rng);
  EXPECT_EQ(st.code, EINVAL);
  EXPECT_NE(st.message.find("EV 3 has port 3"), std::string::npos) << st.message;
  // A UDP fabric carries only 16 bits.
  st = bad.build(make_ev_profile(4, 0, 1), wire::EvFormat::kUdp, 2, rng);
  EXPECT_NE(st.message.find("exceeds the 16 bits"), std::string::npos) << st.message;
}

TEST(EvSet, Srv6WevIsTheIndexAndTheDaIsTheExpansion) {
  EvProfile p;
  p.mode = EvMode::kGenerated;
  p.format_widths = {32, 16, 16, 16, 16, 16, 16};
  p.fields = {wire::EvField{32, 0xfcbb0000, 0, 0, 0}};
  for (int k = 0; k < 3; ++k) p.fields.push_back(wire::EvField{16, 0x0100, 0, 0xF, 0x000F});
  p.ev_count = 8;
  const EvSet s = build(p, 2, wire::EvFormat::kSrv6);
  EXPECT_FALSE(s.srh());
  for (uint32_t i = 0; i < s.size(); ++i) {
    const EvRecord& r = s.at(i);
    EXPECT_EQ(r.wev, i);
    EXPECT_EQ(r.expanded[0], 0xfc);
    EXPECT_EQ(r.expanded[1], 0xbb);
    EXPECT_EQ(r.expanded[4], 0x01);  // uSID 1 = 0x010x
    EXPECT_EQ(r.expanded[10], 0);    // uSIDs 4..6 unused: end of container
  }
  p.format_widths = {32, 16};
  p.fields.resize(2);
  EvSet bad;
  Rng rng(1);
  EXPECT_NE(bad.build(p, wire::EvFormat::kSrv6, 2, rng).message.find(">= 128 bits"),
            std::string::npos);
}

TEST(EvSet, RotationAlternatesPlanesAndUsesEveryEvOncePerRound) {
  EvSet s = build(make_ev_profile(12, 0, 1), 3);
  const uint32_t all_ports = 0b1110;
  std::map<uint32_t, int> uses;
  uint8_t prev_port = 0;
  for (int i = 0; i < 12; ++i) {
    const int idx = s.pick(all_ports, false, 0, 0);
    ASSERT_GE(idx, 0);
    ++uses[static_cast<uint32_t>(idx)];
    EXPECT_NE(s.at(static_cast<uint32_t>(idx)).port, prev_port);
    prev_port = s.at(static_cast<uint32_t>(idx)).port;
  }
  EXPECT_EQ(uses.size(), 12u);
  // Unusable planes are skipped entirely.
  for (int i = 0; i < 30; ++i) {
    const int idx = s.pick(0b0100, false, 0, 0);
    ASSERT_GE(idx, 0);
    EXPECT_EQ(s.at(static_cast<uint32_t>(idx)).port, 2);
  }
  EXPECT_EQ(s.pick(0, false, 0, 0), -1);
}

TEST(EvSet, AvoidedEvIsUsedOnlyWhenItIsTheLastOne) {
  EvSet s = build(make_ev_profile(2, 0, 1), 1);
  const uint32_t w0 = s.at(0).wev;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s.pick(0b10, true, w0, 0), 1);
  ASSERT_TRUE(s.demote(1, 0, "test"));
  EXPECT_EQ(s.pick(0b10, true, w0, 0), 0);  // the only GOOD EV, even though avoided
}

// trim-congestion with 2 EVs: every resend avoided the EV its packet had used, and between two
// new packets it took the slot the new data would have had, so all new data went to one EV.
TEST(EvSet, ResendsDoNotMoveTheNewDataThroughTheRotation) {
  EvSet s = build(make_ev_profile(2, 0, 1), 2);  // one EV per plane: a fixed rotation order
  const uint32_t w1 = s.at(1).wev;
  std::map<int, int> new_data;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(s.pick(0b110, true, w1, 0, EvSet::Stream::kResend), 0);
    ++new_data[s.pick(0b110, false, 0, 0)];
  }
  EXPECT_EQ(new_data[0], 10);
  EXPECT_EQ(new_data[1], 10);
}

TEST(EvSet, SkipLastsUntilEveryOtherEvWasUsed) {
  EvSet s = build(make_ev_profile(8, 0, 1), 2);
  const int first = s.pick(0b110, false, 0, 0);
  ASSERT_GE(first, 0);
  s.skip(static_cast<uint32_t>(first), 0, "test");
  EXPECT_EQ(s.count(EvState::kSkip), 1u);
  std::set<int> since;
  for (int i = 0; i < 40; ++i) {
    const int idx = s.pick(0b110, false, 0, 0);
    if (idx == first) break;
    since.insert(idx);
  }
  EXPECT_EQ(since.size(), 7u);  // all seven others came first
  EXPECT_EQ(s.count(EvState::kSkip), 0u);
}

TEST(EvSet, ASecondSignalDuringSkipStartsItAgain) {
  EvSet s = build(make_ev_profile(8, 0, 1), 2);
  const int first = s.pick(0b110, false, 0, 0);
  ASSERT_GE(first, 0);
  s.skip(static_cast<uint32_t>(first), 0, "test");
  std::set<int> since;
  for (int i = 0; i < 12; ++i) ASSERT_NE(s.pick(0b110, false, 0, 0), first) << i;
  s.skip(static_cast<uint32_t>(first), 0, "test");  // marked again near the end of its SKIP
  since.clear();
  for (int i = 0; i < 40; ++i) {
    const int idx = s.pick(0b110, false, 0, 0);
    if (idx == first) break;
    since.insert(idx);
  }
  EXPECT_EQ(since.size(), 7u);  // every other EV had a turn after the second signal
}

// After a failure a QP's planes keep equal shares of its packets while each has a GOOD EV:
// a retired EV's turns go to the other GOOD EVs of its plane. Before, they went to the next
// slot, of the other plane: a QP that lost 3 of its 8 plane-1 EVs sent 5/13 of its packets on
// plane 1 and 8/13 on plane 2, whose host link then capped it (docs/simulation.md, the 94-95 %
// goodput after a spine failure).
TEST(EvSet, PlanesKeepEqualSharesWhenSomeOfTheirEvsAreRetired) {
  for (const EvSet::Stream stream : {EvSet::Stream::kNewData, EvSet::Stream::kResend}) {
    EvSet s = build(make_ev_profile(16, 0, 1), 2);  // 8 EVs per plane, all active, no backups
    std::vector<uint32_t> plane1;
    for (uint32_t i = 0; i < s.size(); ++i)
      if (s.at(i).port == 1) plane1.push_back(i);
    ASSERT_EQ(plane1.size(), 8u);
    for (int k = 0; k < 3; ++k) ASSERT_TRUE(s.demote(plane1[static_cast<size_t>(k)], 0, "loss"));
    std::map<uint8_t, int> per_plane;
    std::map<uint32_t, int> per_ev;
    for (int i = 0; i < 1600; ++i) {
      const int idx = s.pick(0b110, false, 0, 0, stream);
      ASSERT_GE(idx, 0);
      ASSERT_EQ(s.at(static_cast<uint32_t>(idx)).state, EvState::kGood);
      ++per_plane[s.at(static_cast<uint32_t>(idx)).port];
      ++per_ev[static_cast<uint32_t>(idx)];
    }
    EXPECT_EQ(per_plane[1], 800);
    EXPECT_EQ(per_plane[2], 800);
    // Plane 1's turns spread over its 5 GOOD EVs (160 each on average; the rotation reshuffles
    // the order within a plane), plane 2's 8 EVs keep 100 each.
    for (const auto& [idx, n] : per_ev) {
      if (s.at(idx).port == 1) {
        EXPECT_GE(n, 130) << idx;
        EXPECT_LE(n, 190) << idx;
      } else {
        EXPECT_EQ(n, 100) << idx;
      }
    }
    // A plane without a GOOD EV gives its turns to the others.
    for (size_t k = 3; k < 8; ++k) ASSERT_TRUE(s.demote(plane1[k], 0, "loss"));
    for (int i = 0; i < 50; ++i)
      EXPECT_EQ(s.at(static_cast<uint32_t>(s.pick(0b110, false, 0, 0, stream))).port, 2);
  }
}

// SKIP is congestion, not failure: its turn goes to the next slot (the other plane), so a plane
// whose paths are congested carries less; substituting within the plane would keep its share.
TEST(EvSet, ASkippedEvsTurnGoesToTheNextSlot) {
  EvSet s = build(make_ev_profile(8, 0, 1), 2);  // 4 EVs per plane, planes alternate
  const int first = s.pick(0b110, false, 0, 0);  // slot 0
  ASSERT_GE(first, 0);
  const uint32_t skipped = static_cast<uint32_t>(first);
  const uint8_t plane = s.at(skipped).port;
  std::map<uint8_t, int> per_plane;
  for (int i = 0; i < 700; ++i) {
    s.skip(skipped, 0, "ecn");  // congestion signals keep coming: it stays in SKIP
    const int idx = s.pick(0b110, false, 0, 0);
    ASSERT_GE(idx, 0);
    ASSERT_NE(static_cast<uint32_t>(idx), skipped);
    ++per_plane[s.at(static_cast<uint32_t>(idx)).port];
  }
  // Every rotation of 8 slots is 7 packets: 3 on the skipped EV's plane, 4 on the other
  // (substituting within the plane would make it 350 / 350).
  EXPECT_EQ(per_plane[plane], 300);
  EXPECT_EQ(per_plane[plane == 1 ? 2 : 1], 400);
}

TEST(EvSet, ASubstituteAvoidsTheResentPacketsEv) {
  // Plane 1: A retired, B the resent packet's EV (avoided), C. A's turn goes to C, not to B
  // (which would pass it on to plane 2); B's own turn goes to plane 2's next slot.
  EvSet s = build(make_ev_profile(6, 0, 1), 2);
  std::vector<uint32_t> plane1;
  for (uint32_t i = 0; i < s.size(); ++i)
    if (s.at(i).port == 1) plane1.push_back(i);
  ASSERT_TRUE(s.demote(plane1[0], 0, "loss"));
  const uint32_t avoid = s.at(plane1[1]).wev;
  std::map<uint8_t, int> per_plane;
  for (int i = 0; i < 500; ++i) {
    const int idx = s.pick(0b110, true, avoid, 0, EvSet::Stream::kResend);
    ASSERT_GE(idx, 0);
    EXPECT_NE(s.at(static_cast<uint32_t>(idx)).wev, avoid);
    ++per_plane[s.at(static_cast<uint32_t>(idx)).port];
  }
  // Each rotation of 6 slots is 5 packets: 2 on plane 1 (A's turn and C's), 3 on plane 2.
  EXPECT_EQ(per_plane[1], 200);
  EXPECT_EQ(per_plane[2], 300);
}

TEST(EvSet, DemotionTakesABackupOfTheSamePlaneAndRespectsTheFloor) {
  // 12 EVs on 2 planes, 8 active (4 per plane), 4 backups, floor 9.
  EvSet s = build(make_ev_profile(12, 8, 9), 2);
  EXPECT_EQ(s.active_slots(), 8u);
  std::vector<std::pair<uint32_t, uint8_t>> changes;
  s.set_change_callback([&](uint32_t idx, EvState, EvState to, std::string_view) {
    changes.emplace_back(idx, static_cast<uint8_t>(to));
  });
  const uint32_t victim = s.slots()[0];
  const uint8_t plane = s.at(victim).port;
  ASSERT_TRUE(s.demote(victim, 100, "loss"));
  EXPECT_EQ(s.at(victim).state, EvState::kAssumedBad);
  EXPECT_EQ(s.at(victim).role, EvRecord::Role::kOut);
  EXPECT_EQ(s.at(victim).next_probe_ns, 100u);
  const uint32_t replacement = s.slots()[0];
  EXPECT_NE(replacement, victim);
  EXPECT_EQ(s.at(replacement).port, plane);  // same plane
  EXPECT_EQ(s.at(replacement).role, EvRecord::Role::kActive);
  ASSERT_EQ(changes.size(), 1u);
  // 11 usable now; two more demotions reach the floor of 9, the next is refused.
  ASSERT_TRUE(s.demote(s.slots()[1], 100, "loss"));
  ASSERT_TRUE(s.demote(s.slots()[2], 100, "loss"));
  EXPECT_EQ(s.count(EvState::kGood), 9u);
  EXPECT_FALSE(s.demote(s.slots()[3], 100, "loss"));
  EXPECT_EQ(s.demotions_refused(), 1u);
  EXPECT_EQ(s.count(EvState::kGood), 9u);
  // Recovery goes to the backups when the plane's slots are all fine.
  s.recover(victim, EvState::kGood, 200, "probes_good");
  EXPECT_EQ(s.at(victim).state, EvState::kGood);
  EXPECT_EQ(s.at(victim).role, EvRecord::Role::kBackup);
}

TEST(EvSet, AFloorOfEveryEvRefusesEveryDemotion) {
  EvSet s = build(make_ev_profile(8, 0, kEvMinActiveAll), 2);
  EXPECT_EQ(s.min_active(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_FALSE(s.demote(i, 100, "loss"));
  EXPECT_EQ(s.count(EvState::kGood), 8u);
  EXPECT_EQ(s.demotions_refused(), 8u);
  // Any other floor above the EV count is a profile error.
  EvSet bad;
  Rng rng(5);
  EXPECT_FALSE(bad.build(make_ev_profile(8, 0, 9), wire::EvFormat::kStev, 2, rng).ok());
}

TEST(EvSet, ADemotionTheFloorRefusedGoesThroughOnceAnotherEvRecovers) {
  EvSet s = build(make_ev_profile(4, 0, 1), 2);
  std::vector<std::pair<uint32_t, std::string>> bad;
  s.set_change_callback([&](uint32_t idx, EvState, EvState to, std::string_view why) {
    if (to == EvState::kAssumedBad) bad.emplace_back(idx, std::string(why));
  });
  ASSERT_TRUE(s.demote(0, 10, "sack_gap"));
  ASSERT_TRUE(s.demote(1, 10, "sack_gap"));
  ASSERT_TRUE(s.demote(2, 10, "sack_gap"));
  EXPECT_FALSE(s.demote(3, 20, "timeout"));  // the last usable EV stays
  EXPECT_EQ(s.at(3).state, EvState::kGood);
  s.recover(0, EvState::kGood, 30, "probes_good");
  EXPECT_EQ(s.at(0).state, EvState::kGood);
  EXPECT_EQ(s.at(3).state, EvState::kAssumedBad);  // the held-back loss retires it now
  EXPECT_EQ(s.at(3).next_probe_ns, 30u);
  ASSERT_EQ(bad.size(), 4u);
  EXPECT_EQ(bad.back(), std::make_pair(3u, std::string("timeout")));
  // Once it went through (or the EV came back), nothing is left to retire again.
  s.recover(3, EvState::kGood, 40, "probes_good");
  s.recover(1, EvState::kGood, 50, "probes_good");
  EXPECT_EQ(s.at(3).state, EvState::kGood);
  EXPECT_EQ(bad.size(), 4u);
}

TEST(EvSet, RecoveredEvRetakesASlotHeldByABadEv) {
  EvSet s = build(make_ev_profile(4, 4, 1), 2);  // no backups
  const uint32_t victim = s.slots()[0];
  ASSERT_TRUE(s.demote(victim, 0, "loss"));
  EXPECT_EQ(s.at(victim).role, EvRecord::Role::kActive);  // nothing to swap in: stays, unused
  for (int i = 0; i < 10; ++i) EXPECT_NE(s.pick(0b110, false, 0, 0), static_cast<int>(victim));
  s.recover(victim, EvState::kSkip, 0, "probe_ce");
  EXPECT_EQ(s.at(victim).state, EvState::kSkip);
  s.deny(victim, "controller");
  EXPECT_EQ(s.at(victim).state, EvState::kDenied);
  EXPECT_EQ(s.count(EvState::kDenied), 1u);
}

}  // namespace
}  // namespace mrc::engine::testing
