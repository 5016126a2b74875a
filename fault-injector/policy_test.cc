// Policy core: each fault model's observed rate and effect, targeting, determinism.
//
// Rate bounds: a model that fires with probability p on n independent frames gives a
// Binomial(n, p) count; tests accept |count - n p| <= 5 sigma (sigma = sqrt(n p (1 - p))). With
// fixed seeds the outcome is deterministic; 5 sigma means a correct model would fail for fewer
// than 1 in 10^6 seeds. At n = 200k a rate 10 % (relative) off is caught for p >= 0.05 (checked
// by mutating the model); at p = 0.01 the bound is +-11 %.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "fault-injector/faults.h"
#include "fault-injector/test_frames.h"

namespace mrc::faults {
namespace {

using testing::ack_frame;
using testing::binomial_bound;
using testing::Carrier;
using testing::data_frame;
using testing::DataSpec;
using wire::Bytes;

constexpr uint64_t kEpoch = 1'700'000'000'000'000'000ull;  // an arbitrary wall-clock epoch

PolicyConfig one_link(std::vector<Rule> rules, uint64_t seed = 7) {
  PolicyConfig c;
  c.seed = seed;
  c.links.push_back(LinkInfo{"l0", 0, "", "", "", ""});
  c.rules = std::move(rules);
  return c;
}

Rule rule(FaultType t, double p = 1.0, std::string name = "r") {
  Rule r;
  r.type = t;
  r.p = p;
  r.name = std::move(name);
  return r;
}

struct Counts {
  std::map<Action, uint64_t> by_action;
  uint64_t total = 0;
  uint64_t of(Action a) const {
    auto it = by_action.find(a);
    return it == by_action.end() ? 0 : it->second;
  }
};

// Runs n copies of one frame 1 us apart through a policy.
Counts run_n(Policy& pol, size_t n, const DataSpec& base = {}) {
  Counts c;
  const auto f = data_frame(base);
  for (size_t i = 0; i < n; ++i) {
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i * 1000);
    ++c.by_action[d.action];
    ++c.total;
  }
  return c;
}

// Encoding is the slow part of these tests: frames are built once per distinct spec.
const std::vector<std::byte>& cached_frame(const DataSpec& s) {
  static std::map<std::tuple<int, uint32_t, uint32_t, uint32_t, int, size_t, int, int, bool, bool>,
                  std::vector<std::byte>>
      cache;
  auto key =
      std::make_tuple(static_cast<int>(s.carrier), s.wev, s.qpn, s.psn, int{s.opcode}, s.payload,
                      s.dscp ? int{*s.dscp} : -1, int{s.ecn}, s.rtx, s.udp_checksum);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, data_frame(s)).first;
  return it->second;
}

bool ipv4_header_ok(const wire::DecodedFrame& f) {
  if (f.l3 != 4) return true;
  const size_t hl = static_cast<size_t>(f.ip4.ihl) * 4;
  return wire::internet_checksum(f.frame.subspan(f.off_l3, hl)) == 0;
}

bool udp_checksum_ok(const wire::DecodedFrame& f) {
  if (f.udp.checksum == 0) return true;
  auto c = wire::compute_udp_checksum(f);
  return c && *c == f.udp.checksum;
}

// ---------------------------------------------------------------------------------------------
TEST(Prng, SameSeedSameStreamDifferentSeedDiffers) {
  Prng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
  Prng u(1);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double v = u.uniform();
    ASSERT_GE(v, 0.0);
    ASSERT_LT(v, 1.0);
    sum += v;
  }
  // Mean of n U(0,1): sd = 1/sqrt(12 n); 5 sd.
  EXPECT_NEAR(sum / n, 0.5, 5.0 / std::sqrt(12.0 * n));
}

TEST(Bernoulli, ObservedLossRateWithinFiveSigma) {
  for (double p : {0.01, 0.05, 0.3}) {
    Policy pol(one_link({rule(FaultType::kLoss, p)}), kEpoch);
    const size_t n = 200000;
    const Counts c = run_n(pol, n, DataSpec{.payload = 64});
    const double drops = static_cast<double>(c.of(Action::kDrop));
    EXPECT_NEAR(drops, n * p, binomial_bound(n, p)) << "p=" << p;
    EXPECT_EQ(c.of(Action::kDrop) + c.of(Action::kPass), n);
  }
}

TEST(GilbertElliott, StationaryLossRateAndMeanBurstLength) {
  // Good->bad 1 %, bad->good 20 %, lossless good state, lossy bad state: pi_bad = p/(p+r).
  Rule r = rule(FaultType::kGilbert);
  r.p_good_to_bad = 0.01;
  r.p_bad_to_good = 0.2;
  r.loss_good = 0.0;
  r.loss_bad = 1.0;
  Policy pol(one_link({r}), kEpoch);
  const size_t n = 200000;
  uint64_t drops = 0, bursts = 0, run = 0, burst_frames = 0;
  DataSpec s{.payload = 64};
  for (size_t i = 0; i < n; ++i) {
    const auto& f = cached_frame(s);
    const bool lost =
        pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i).action == Action::kDrop;
    if (lost) {
      ++drops;
      ++run;
    } else if (run) {
      ++bursts;
      burst_frames += run;
      run = 0;
    }
  }
  const double pb = 0.01 / 0.21;
  // Sum of a two-state Markov chain's indicator: asymptotic variance per step
  // pi_b pi_g (1 + lambda) / (1 - lambda), lambda = 1 - p - r = 0.79 (sd ~ 278 at n = 200k).
  const double lambda = 1.0 - 0.21;
  const double sd = std::sqrt(n * pb * (1 - pb) * (1 + lambda) / (1 - lambda));
  EXPECT_NEAR(static_cast<double>(drops), n * pb, 5 * sd);
  // Burst lengths are Geometric(r): mean 1/r = 5, variance (1-r)/r^2 = 20.
  ASSERT_GT(bursts, 1000u);
  const double mean_burst = static_cast<double>(burst_frames) / static_cast<double>(bursts);
  EXPECT_NEAR(mean_burst, 5.0, 5 * std::sqrt(20.0 / static_cast<double>(bursts)));
  // A Bernoulli loss of the same rate would have mean bursts of 1/(1 - pb) = 1.05.
}

TEST(Delay, FixedPlusJitterWithinBoundsAndOrderKept) {
  Rule r = rule(FaultType::kDelay);
  r.delay_ns = 100'000;
  r.jitter_ns = 50'000;
  r.keep_order = false;
  Policy pol(one_link({r}), kEpoch);
  const size_t n = 100000;
  double sum = 0;
  uint64_t lo = UINT64_MAX, hi = 0;
  DataSpec s{.payload = 64};
  for (size_t i = 0; i < n; ++i) {
    const auto& f = cached_frame(s);
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i * 1000);
    ASSERT_EQ(d.action, Action::kDelay);
    lo = std::min(lo, d.delay_ns);
    hi = std::max(hi, d.delay_ns);
    sum += static_cast<double>(d.delay_ns);
  }
  EXPECT_GE(lo, 100'000u);
  EXPECT_LE(hi, 150'000u);
  // Uniform jitter on [0, 50 us]: mean 25 us, sd 50/sqrt(12) us; 5 standard errors.
  EXPECT_NEAR(sum / n, 125'000.0, 5 * (50'000.0 / std::sqrt(12.0)) / std::sqrt(double(n)));

  // keep_order: departure times never go backwards although the jitter exceeds the spacing.
  r.keep_order = true;
  Policy ordered(one_link({r}), kEpoch);
  uint64_t last_departure = 0;
  for (size_t i = 0; i < 20000; ++i) {
    const auto& f = cached_frame(s);
    const uint64_t t = kEpoch + i * 1000;
    const Decision& d = ordered.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, t);
    ASSERT_GE(t + d.delay_ns, last_departure);
    ASSERT_GE(d.delay_ns, 100'000u);
    last_departure = t + d.delay_ns;
  }
}

TEST(Reorder, HeldFractionAndInversions) {
  Rule r = rule(FaultType::kReorder, 0.1);
  r.delay_ns = 50'000;
  Policy pol(one_link({r}), kEpoch);
  const size_t n = 100000;
  std::vector<std::pair<uint64_t, uint32_t>> departures;  // (time, psn)
  uint64_t held = 0;
  DataSpec s{.payload = 64};
  for (size_t i = 0; i < n; ++i) {
    const auto& f = cached_frame(s);
    const uint64_t t = kEpoch + i * 10'000;  // 10 us apart
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, t);
    if (d.delay_ns) {
      ++held;
      EXPECT_EQ(d.delay_ns, 50'000u);
      EXPECT_EQ(d.action, Action::kDelay);
    }
    departures.emplace_back(t + d.delay_ns, static_cast<uint32_t>(i));
  }
  EXPECT_NEAR(static_cast<double>(held), n * 0.1, binomial_bound(n, 0.1));
  // A frame held 50 us is overtaken by the next frames that were not held (up to 4 of them,
  // the 5th leaves at the same time and keeps its place after it in a stable order).
  std::stable_sort(departures.begin(), departures.end());
  uint64_t inversions = 0;
  for (size_t i = 1; i < departures.size(); ++i)
    if (departures[i].second < departures[i - 1].second) ++inversions;
  EXPECT_GT(inversions, held / 2);
  EXPECT_LE(inversions, held);
}

TEST(Duplication, RateAndCopies) {
  Rule r = rule(FaultType::kDup, 0.02);
  r.copies = 2;
  Policy pol(one_link({r}), kEpoch);
  const size_t n = 200000;
  uint64_t dups = 0;
  DataSpec s{.payload = 64};
  for (size_t i = 0; i < n; ++i) {
    const auto& f = cached_frame(s);
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i);
    if (d.action == Action::kDup) {
      ++dups;
      EXPECT_EQ(d.copies, 2u);
      ASSERT_EQ(d.out.size(), f.size());
      EXPECT_TRUE(std::equal(d.out.begin(), d.out.end(), f.begin()));
    } else {
      EXPECT_EQ(d.copies, 0u);
    }
  }
  EXPECT_NEAR(static_cast<double>(dups), n * 0.02, binomial_bound(n, 0.02));
}

TEST(Corruption, RateAndBrokenIcrcForEveryCarrier) {
  for (Carrier c : wire::samples::all_carriers()) {
    for (bool udp_csum : {false, true}) {
      Rule r = rule(FaultType::kCorrupt, 0.1);
      r.bits = 3;
      Policy pol(one_link({r}), kEpoch);
      const size_t n = 100000;
      uint64_t corrupted = 0;
      DataSpec s{.carrier = c, .payload = 256, .udp_checksum = udp_csum};
      const auto f = data_frame(s);  // the same frame each time: the flips differ
      for (size_t i = 0; i < n; ++i) {
        const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i);
        wire::DecodedFrame out;
        ASSERT_TRUE(wire::decode_frame(d.out, out)) << out.error.describe();
        if (d.action != Action::kCorrupt) {
          ASSERT_TRUE(std::equal(d.out.begin(), d.out.end(), f.begin(), f.end()));
          continue;
        }
        ++corrupted;
        ASSERT_EQ(d.out.size(), f.size());
        size_t bits = 0;
        for (size_t b = 0; b < f.size(); ++b)
          bits += static_cast<size_t>(std::popcount(static_cast<unsigned>(d.out[b] ^ f[b])));
        // 3 payload bits, plus the UDP checksum field when it is kept valid.
        if (!udp_csum) {
          ASSERT_EQ(bits, 3u);
        }
        ASSERT_FALSE(wire::verify_icrc(out)) << "frame " << i;
        ASSERT_TRUE(udp_checksum_ok(out));
      }
      EXPECT_NEAR(static_cast<double>(corrupted), n * 0.1, binomial_bound(n, 0.1))
          << wire::samples::carrier_name(c);
    }
  }
}

TEST(Trim, RateAndTrimmedFramesDecodeForEveryCarrier) {
  const auto& plan = wire::mrp0().dscp();
  for (Carrier c : wire::samples::all_carriers()) {
    for (bool lasthop : {false, true}) {
      Rule r = rule(FaultType::kTrim, 0.3);
      r.lasthop = lasthop;
      Policy pol(one_link({r}), kEpoch);
      const size_t n = 100000;
      uint64_t trimmed = 0;
      DataSpec s{.carrier = c, .payload = 1024, .udp_checksum = lasthop};
      const auto f = data_frame(s);
      wire::DecodedFrame in;
      ASSERT_TRUE(wire::decode_frame(wire::as_bytes(f), in));
      for (size_t i = 0; i < n; ++i) {
        const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i);
        if (d.action != Action::kTrim) {
          ASSERT_EQ(d.action, Action::kPass);
          continue;
        }
        ++trimmed;
        if (trimmed > 3) continue;  // the bytes are the same every time; check a few
        wire::DecodedFrame out;
        ASSERT_TRUE(wire::decode_frame(d.out, out)) << out.error.describe();
        EXPECT_TRUE(out.trimmed);
        EXPECT_FALSE(out.has_icrc);
        EXPECT_EQ(out.dscp(), lasthop ? plan.trimmed_lasthop : plan.trimmed);
        if (out.has_inner_ip6) {
          EXPECT_EQ(out.inner_ip6.dscp, out.dscp());
        }
        EXPECT_EQ(out.ecn(), in.ecn());
        EXPECT_EQ(out.headers, wire::kHdrMeth | wire::kHdrTseth);
        EXPECT_EQ(out.bth.psn, in.bth.psn);
        EXPECT_EQ(out.bth.opcode, in.bth.opcode);
        EXPECT_EQ(out.meth.msn, in.meth.msn);
        EXPECT_EQ(out.udp.sport, in.udp.sport);
        EXPECT_EQ(out.flow_label(), in.flow_label());
        EXPECT_TRUE(out.payload.empty());
        // Cut to the profile minimum after UDP, with every length consistent.
        EXPECT_EQ(out.udp.length, 8 + wire::mrp0().min_trim_bytes());
        EXPECT_EQ(d.out.size(), in.off_udp + 8 + wire::mrp0().min_trim_bytes());
        EXPECT_TRUE(ipv4_header_ok(out));
        EXPECT_TRUE(udp_checksum_ok(out));
        if (lasthop) {
          EXPECT_NE(out.udp.checksum, 0);
        }
      }
      EXPECT_NEAR(static_cast<double>(trimmed), n * 0.3, binomial_bound(n, 0.3))
          << wire::samples::carrier_name(c);
    }
  }
}

TEST(Trim, UntrimmableDscpControlPacketsAndTrimmedPackets) {
  const auto& plan = wire::mrp0().dscp();
  const auto no_trim = data_frame(DataSpec{.dscp = plan.no_trim});
  const auto retx = data_frame(DataSpec{.rtx = true});
  const auto ack = ack_frame(Carrier::kUdp6, 5, 0x11, 3);
  {
    Policy pol(one_link({rule(FaultType::kTrim)}), kEpoch);
    // A switch drops what it may not trim.
    EXPECT_EQ(pol.on_frame(wire::as_bytes(no_trim), Direction::kAtoB, 0, kEpoch).action,
              Action::kDrop);
    // TRIMMABLE_RETX is trimmable.
    EXPECT_EQ(pol.on_frame(wire::as_bytes(retx), Direction::kAtoB, 0, kEpoch).action,
              Action::kTrim);
    // Control packets are never trimmed.
    EXPECT_EQ(pol.on_frame(wire::as_bytes(ack), Direction::kAtoB, 0, kEpoch).action, Action::kPass);
    // An already trimmed packet stays as it is.
    const Decision& d = pol.on_frame(wire::as_bytes(retx), Direction::kAtoB, 0, kEpoch);
    const std::vector<std::byte> once(d.out.begin(), d.out.end());
    EXPECT_EQ(pol.on_frame(wire::as_bytes(once), Direction::kAtoB, 0, kEpoch).action,
              Action::kPass);
  }
  {
    Rule r = rule(FaultType::kTrim);
    r.untrimmable = Untrimmable::kPass;
    Policy pol(one_link({r}), kEpoch);
    EXPECT_EQ(pol.on_frame(wire::as_bytes(no_trim), Direction::kAtoB, 0, kEpoch).action,
              Action::kPass);
    r.untrimmable = Untrimmable::kTrimAnyway;
    Policy any(one_link({r}), kEpoch);
    EXPECT_EQ(any.on_frame(wire::as_bytes(no_trim), Direction::kAtoB, 0, kEpoch).action,
              Action::kTrim);
  }
}

TEST(Ecn, RateCeSetIcrcStillValidNotEctUntouched) {
  for (Carrier c : wire::samples::all_carriers()) {
    Policy pol(one_link({rule(FaultType::kEcn, 0.25)}), kEpoch);
    const size_t n = 100000;
    uint64_t marked = 0;
    const auto f = data_frame(DataSpec{.carrier = c, .payload = 128, .ecn = 2});
    for (size_t i = 0; i < n; ++i) {
      const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i);
      if (d.action != Action::kEcn) continue;
      ++marked;
      if (marked > 3) continue;
      wire::DecodedFrame out;
      ASSERT_TRUE(wire::decode_frame(d.out, out, {.verify_icrc = true}));
      EXPECT_EQ(out.ecn(), 3);
      if (out.has_inner_ip6) {
        EXPECT_EQ(out.inner_ip6.ecn, 3);
      }
      EXPECT_TRUE(out.icrc_ok);
      EXPECT_TRUE(ipv4_header_ok(out));
      EXPECT_EQ(out.dscp(), wire::mrp0().dscp().trimmable);
    }
    EXPECT_NEAR(static_cast<double>(marked), n * 0.25, binomial_bound(n, 0.25));
    // Not-ECT packets are never marked.
    const auto not_ect = data_frame(DataSpec{.carrier = c, .ecn = 0});
    Policy all(one_link({rule(FaultType::kEcn, 1.0)}), kEpoch);
    for (int i = 0; i < 100; ++i)
      EXPECT_EQ(all.on_frame(wire::as_bytes(not_ect), Direction::kAtoB, 0, kEpoch).action,
                Action::kPass);
  }
}

TEST(RateLimit, ThroughputQueueBoundAndOverflowAction) {
  // 1 Gb/s through a 30000-byte queue, offered 2 Gb/s (998-byte frames, +24 B on the wire).
  for (Overflow ov : {Overflow::kDrop, Overflow::kTrim}) {
    Rule r = rule(FaultType::kRate);
    r.rate_bps = 1e9;
    r.queue_bytes = 30000;
    r.overflow = ov;
    Policy pol(one_link({r}), kEpoch);
    const auto f = data_frame(DataSpec{.payload = 912});
    const uint64_t wire_bytes = f.size() + 24;
    const size_t n = 20000;
    const uint64_t gap = wire_bytes * 4;  // 2 Gb/s offered
    uint64_t forwarded = 0, overflowed = 0, max_delay = 0;
    for (size_t i = 0; i < n; ++i) {
      const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i * gap);
      if (d.action == Action::kDelay) {
        ++forwarded;
        max_delay = std::max(max_delay, d.delay_ns);
      } else {
        ++overflowed;
        EXPECT_EQ(d.action, ov == Overflow::kDrop ? Action::kDrop : Action::kTrim);
        if (ov == Overflow::kTrim) {
          EXPECT_EQ(d.delay_ns, 0u);
        }
      }
    }
    // Bytes that left = rate * time + what sits in the queue at the end (<= queue_bytes).
    const double duration_ns = static_cast<double>(n * gap);
    const double per_frame_ns = static_cast<double>(wire_bytes) * 8.0;  // at 1 Gb/s
    const double expected = duration_ns / per_frame_ns;
    EXPECT_GE(static_cast<double>(forwarded), expected - 2);
    EXPECT_LE(static_cast<double>(forwarded),
              expected + 30000.0 / static_cast<double>(wire_bytes) + 2);
    EXPECT_EQ(forwarded + overflowed, n);
    // No frame waits longer than a full queue takes to drain.
    EXPECT_LE(max_delay, static_cast<uint64_t>(30000 * 8.0) + 1);
    EXPECT_GT(max_delay, (30000 - 2 * wire_bytes) * 8);
  }
  // Below the rate nothing overflows and a frame only waits for its own serialisation.
  Rule r = rule(FaultType::kRate);
  r.rate_bps = 1e9;
  r.queue_bytes = 4096;
  Policy pol(one_link({r}), kEpoch);
  const auto f = data_frame(DataSpec{.payload = 64});
  for (size_t i = 0; i < 1000; ++i) {
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + i * 100'000);
    ASSERT_EQ(d.action, Action::kDelay);
    ASSERT_EQ(d.delay_ns, (f.size() + 24) * 8);
  }
}

TEST(Flap, ScheduleTimingAndFlapNow) {
  Rule r = rule(FaultType::kFlap);
  r.down_at_ns = 100'000'000;
  r.down_for_ns = 20'000'000;
  r.period_ns = 200'000'000;
  r.count = 3;
  Policy pol(one_link({r}), kEpoch);
  const auto f = data_frame(DataSpec{.payload = 64});
  const std::vector<uint8_t> arp(42, 0xFF);  // not RoCE: a link down loses it too
  uint64_t dropped = 0;
  for (uint64_t ms10 = 0; ms10 < 10000; ++ms10) {  // every 0.1 ms for 1 s
    const uint64_t t_rel = ms10 * 100'000;
    const bool down = (t_rel >= 100'000'000 && t_rel < 120'000'000) ||
                      (t_rel >= 300'000'000 && t_rel < 320'000'000) ||
                      (t_rel >= 500'000'000 && t_rel < 520'000'000);
    const Action a = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + t_rel).action;
    ASSERT_EQ(a, down ? Action::kDrop : Action::kPass) << "t=" << t_rel;
    const Action b =
        pol.on_frame(wire::as_bytes(arp.data(), arp.size()), Direction::kBtoA, 0, kEpoch + t_rel)
            .action;
    ASSERT_EQ(b, down ? Action::kDrop : Action::kPass) << "t=" << t_rel;
    ASSERT_EQ(pol.link_down(0, Direction::kAtoB, kEpoch + t_rel), down);
    dropped += down;
  }
  EXPECT_EQ(dropped, 600u);  // 3 windows of 20 ms at 0.1 ms spacing

  Policy now(one_link({}), kEpoch);
  now.flap_now(0, kEpoch + 5'000'000, 1'000'000);
  EXPECT_EQ(now.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + 4'999'999).action,
            Action::kPass);
  EXPECT_EQ(now.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + 5'000'000).action,
            Action::kDrop);
  EXPECT_EQ(now.on_frame(wire::as_bytes(f), Direction::kBtoA, 0, kEpoch + 5'999'999).action,
            Action::kDrop);
  EXPECT_EQ(now.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch + 6'000'000).action,
            Action::kPass);
}

TEST(Targeting, OnlyTheChosenEvQpnPsnOpcodeDirAndWindowAreTouched) {
  Rule r = rule(FaultType::kDrop);
  r.match.dir = Direction::kAtoB;
  r.match.evs = {0x00010005, 0x00020007};
  r.match.qpns = {0x22};
  r.match.psn = std::make_pair(0xFFFFF0u, 0x000010u);  // wraps around 2^24
  ASSERT_TRUE(parse_opcodes("WRITE_MIDDLE", r.match.opcodes));
  ASSERT_TRUE(parse_opcodes("WRITE_LAST", r.match.opcodes));
  r.match.from_ns = 1'000'000;
  r.match.until_ns = 9'000'000;
  Policy pol(one_link({r}), kEpoch);
  Prng g(99);
  const uint32_t evs[] = {0x00010005, 0x00020007, 0x00010006, 0x00030005};
  const uint32_t qpns[] = {0x22, 0x23};
  const uint8_t ops[] = {0xC6, 0xC7, 0xC8, 0xCA};
  uint64_t should = 0, did = 0;
  for (size_t i = 0; i < 100000; ++i) {
    DataSpec s{.payload = 16};
    s.carrier = g.below(2) ? Carrier::kStev : Carrier::kSrv6;  // 32-bit WEVs
    s.wev = evs[g.below(4)];
    s.qpn = qpns[g.below(2)];
    s.opcode = ops[g.below(4)];
    s.psn = static_cast<uint32_t>(0xFFFFE0u + g.below(64)) & wire::kPsnMask;
    const Direction dir = g.below(2) ? Direction::kAtoB : Direction::kBtoA;
    const uint64_t t_rel = g.below(10'000'000);
    const bool in_psn = wire::psn_le(0xFFFFF0u, s.psn) && wire::psn_le(s.psn, 0x10u);
    const bool match = dir == Direction::kAtoB && (s.wev == 0x00010005 || s.wev == 0x00020007) &&
                       s.qpn == 0x22 && (s.opcode == 0xC7 || s.opcode == 0xC8) && in_psn &&
                       t_rel >= 1'000'000 && t_rel < 9'000'000;
    const auto& f = cached_frame(s);
    const Decision& d = pol.on_frame(wire::as_bytes(f), dir, 0, kEpoch + t_rel);
    ASSERT_EQ(d.action, match ? Action::kDrop : Action::kPass)
        << "ev=" << s.wev << " qpn=" << s.qpn << " op=" << int(s.opcode) << " psn=" << s.psn;
    if (match) {
      EXPECT_EQ(d.frame.ev, s.wev);
    }
    should += match;
    did += d.action == Action::kDrop;
  }
  EXPECT_GT(should, 500u);
  EXPECT_EQ(should, did);
}

TEST(Targeting, PlaneAndLinkAndRtxAndMaxHits) {
  PolicyConfig c;
  c.seed = 3;
  c.links = {LinkInfo{"p0", 0, "", "", "", ""}, LinkInfo{"p1", 1, "", "", "", ""},
             LinkInfo{"p1b", 1, "", "", "", ""}};
  Rule plane = rule(FaultType::kBlackhole, 1.0, "plane1");
  plane.match.planes = {1};
  plane.match.evs = {0x42};
  Rule link = rule(FaultType::kEcn, 1.0, "ecn-p0");
  link.match.links = {"p0"};
  // Exact-packet drop: PSN 1005 once; the retransmission (RTX=1) passes.
  Rule once = rule(FaultType::kDrop, 1.0, "once");
  once.match.psn = std::make_pair(1005u, 1005u);
  once.match.rtx = false;
  once.max_hits = 1;
  c.rules = {plane, link, once};
  Policy pol(c, kEpoch);
  const auto ev42 = data_frame(DataSpec{.carrier = Carrier::kUdp4, .wev = 0x42, .psn = 1});
  const auto ev43 = data_frame(DataSpec{.carrier = Carrier::kUdp4, .wev = 0x43, .psn = 1});
  EXPECT_EQ(pol.on_frame(wire::as_bytes(ev42), Direction::kAtoB, 0, kEpoch).action, Action::kEcn);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(ev42), Direction::kAtoB, 1, kEpoch).action, Action::kDrop);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(ev42), Direction::kBtoA, 2, kEpoch).action, Action::kDrop);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(ev43), Direction::kAtoB, 1, kEpoch).action, Action::kPass);
  const auto p1005 = data_frame(DataSpec{.carrier = Carrier::kUdp4, .psn = 1005});
  const auto p1005_rtx = data_frame(DataSpec{.carrier = Carrier::kUdp4, .psn = 1005, .rtx = true});
  EXPECT_EQ(pol.on_frame(wire::as_bytes(p1005), Direction::kAtoB, 1, kEpoch).action, Action::kDrop);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(p1005_rtx), Direction::kAtoB, 1, kEpoch).action,
            Action::kPass);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(p1005), Direction::kAtoB, 1, kEpoch).action, Action::kPass);
  const Stats& st = pol.stats();
  ASSERT_EQ(st.rule_hits.size(), 3u);
  EXPECT_EQ(st.rule_hits[0].second, 2u);
  EXPECT_EQ(st.rule_hits[1].second, 1u);
  EXPECT_EQ(st.rule_hits[2].second, 1u);
}

// A mixed policy and a mixed stream, as the determinism tests use it.
std::string run_mixed(uint64_t seed, size_t n, bool extra_rule = false) {
  PolicyConfig c = one_link({}, seed);
  Rule loss = rule(FaultType::kLoss, 0.01, "loss");
  loss.match.evs = {1, 2, 3};
  Rule ge = rule(FaultType::kGilbert, 1.0, "ge");
  ge.p_good_to_bad = 0.001;
  ge.p_bad_to_good = 0.3;
  ge.match.evs = {4};
  Rule trim = rule(FaultType::kTrim, 0.05, "trim");
  Rule ecn = rule(FaultType::kEcn, 0.1, "ecn");
  Rule dly = rule(FaultType::kDelay, 1.0, "dly");
  dly.delay_ns = 1000;
  dly.jitter_ns = 5000;
  Rule dup = rule(FaultType::kDup, 0.005, "dup");
  Rule cor = rule(FaultType::kCorrupt, 0.005, "cor");
  c.rules = {loss, ge, trim, ecn, dly, dup, cor};
  if (extra_rule) {
    Rule other = rule(FaultType::kLoss, 0.5, "other");
    other.match.evs = {999};
    c.rules.insert(c.rules.begin(), other);
  }
  Policy pol(c, kEpoch);
  Prng g(1234);  // the input stream is the same for every seed
  std::string log;
  for (size_t i = 0; i < n; ++i) {
    DataSpec s{.payload = 64};
    s.wev = static_cast<uint32_t>(1 + g.below(6));
    s.psn = static_cast<uint32_t>(i % 256);
    const auto& f = cached_frame(s);
    const Decision& d = pol.on_frame(
        wire::as_bytes(f), g.below(2) ? Direction::kAtoB : Direction::kBtoA, 0, kEpoch + i * 700);
    if (!should_log(d, true)) continue;
    append_decision_json(log, d, "l0", seed);
    log += '\n';
  }
  append_summary_json(log, pol);
  return log;
}

TEST(Determinism, SameSeedSameLogDifferentSeedDiffers) {
  const size_t n = 100000;
  const std::string a = run_mixed(42, n);
  const std::string b = run_mixed(42, n);
  EXPECT_EQ(a, b);
  const std::string c = run_mixed(43, n);
  EXPECT_NE(a, c);
  // Every frame is logged (log_pass) and the log says which seed made it.
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), static_cast<ptrdiff_t>(n));
  EXPECT_NE(a.find("\"seed\":42"), std::string::npos);
}

TEST(Determinism, AddingAnUnrelatedRuleKeepsTheOtherDecisions) {
  // Streams are per (rule, link, direction): a rule that never matches changes nothing else.
  const std::string a = run_mixed(42, 20000);
  std::string b = run_mixed(42, 20000, true);
  // Only the summary's rule list differs.
  const size_t cut_a = a.rfind("{\"summary\"");
  const size_t cut_b = b.rfind("{\"summary\"");
  EXPECT_EQ(a.substr(0, cut_a), b.substr(0, cut_b));
}

TEST(DecisionLog, LineFieldsAndSummaryCounts) {
  Rule loss = rule(FaultType::kLoss, 0.5, "half");
  Policy pol(one_link({loss}), kEpoch);
  const auto f =
      data_frame(DataSpec{.carrier = Carrier::kStev, .wev = 0x00050006, .qpn = 0x33, .psn = 77});
  std::map<std::string, uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kBtoA, 0, kEpoch + i);
    std::string line;
    append_decision_json(line, d, "l0", pol.seed());
    const auto j = nlohmann::json::parse(line);
    for (const char* k :
         {"t_ns", "link", "dir", "action", "qpn", "psn", "opcode", "ev", "reason", "seed"})
      ASSERT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["t_ns"], kEpoch + static_cast<uint64_t>(i));
    EXPECT_EQ(j["link"], "l0");
    EXPECT_EQ(j["dir"], "ba");
    EXPECT_EQ(j["qpn"], 0x33);
    EXPECT_EQ(j["psn"], 77);
    EXPECT_EQ(j["opcode"], 0xC7);
    EXPECT_EQ(j["op"], "WRITE_MIDDLE");
    EXPECT_EQ(j["ev"], 0x00050006);
    EXPECT_EQ(j["seed"], 7);
    if (j["action"] == "drop") {
      EXPECT_EQ(j["reason"], "half: bernoulli p=0.5");
    }
    ++seen[j["action"].get<std::string>()];
  }
  // A non-RoCE frame: RoCE fields are null.
  const std::vector<uint8_t> arp(42, 0xFF);
  const Decision& d =
      pol.on_frame(wire::as_bytes(arp.data(), arp.size()), Direction::kAtoB, 0, kEpoch);
  EXPECT_FALSE(should_log(d, true));  // passed non-RoCE frames are not logged
  std::string line;
  append_decision_json(line, d, "l0", 7);
  const auto j = nlohmann::json::parse(line);
  EXPECT_TRUE(j["qpn"].is_null());
  EXPECT_TRUE(j["ev"].is_null());
  std::string sum;
  append_summary_json(sum, pol);
  const auto s = nlohmann::json::parse(sum)["summary"];
  EXPECT_EQ(s["links"]["l0"]["ba"]["drop"], seen["drop"]);
  EXPECT_EQ(s["links"]["l0"]["ba"]["pass"], seen["pass"]);
  EXPECT_EQ(s["links"]["l0"]["ab"]["pass"], 1);  // the ARP frame
  EXPECT_EQ(s["rules"]["half"], seen["drop"]);
  EXPECT_EQ(s["frames"], 1001);
}

TEST(Composition, EffectsAddUpAndDropEndsEvaluation) {
  Rule ecn = rule(FaultType::kEcn, 1.0, "ecn");
  Rule dly = rule(FaultType::kDelay, 1.0, "dly");
  dly.delay_ns = 5000;
  Rule dup = rule(FaultType::kDup, 1.0, "dup");
  Policy pol(one_link({ecn, dly, dup}), kEpoch);
  const auto f = data_frame(DataSpec{.carrier = Carrier::kUdp4});
  const Decision& d = pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch);
  EXPECT_EQ(d.action, Action::kEcn);
  EXPECT_EQ(d.applied,
            action_bit(Action::kEcn) | action_bit(Action::kDelay) | action_bit(Action::kDup));
  EXPECT_EQ(d.delay_ns, 5000u);
  EXPECT_EQ(d.copies, 1u);
  EXPECT_EQ(d.rules, "ecn,dly,dup");
  std::string line;
  append_decision_json(line, d, "l0", 7);
  EXPECT_EQ(nlohmann::json::parse(line)["actions"], nlohmann::json({"delay", "dup", "ecn"}));

  Policy dropping(one_link({rule(FaultType::kBlackhole, 1.0, "bh"), dly}), kEpoch);
  const Decision& e = dropping.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch);
  EXPECT_EQ(e.action, Action::kDrop);
  EXPECT_EQ(e.delay_ns, 0u);
  EXPECT_TRUE(e.out.empty());
  EXPECT_EQ(e.rules, "bh");
}

TEST(Robustness, GarbageAndTruncatedFramesNeverCrash) {
  // Every model, on every frame (roce_only = false), over random bytes and every truncation
  // of real frames: the policy must never crash or read out of bounds.
  std::vector<Rule> rules;
  for (FaultType t : {FaultType::kCorrupt, FaultType::kTrim, FaultType::kEcn, FaultType::kDup,
                      FaultType::kDelay, FaultType::kRate, FaultType::kLoss}) {
    Rule r = rule(t, 0.5, std::string(fault_type_name(t)));
    r.match.roce_only = false;
    r.delay_ns = 10;
    r.rate_bps = 1e9;
    r.queue_bytes = 100000;
    r.untrimmable = Untrimmable::kTrimAnyway;
    rules.push_back(r);
  }
  Policy pol(one_link(rules), kEpoch);
  Prng g(5);
  std::vector<std::byte> buf;
  for (int i = 0; i < 50000; ++i) {
    buf.resize(g.below(200));
    for (auto& b : buf) b = static_cast<std::byte>(g.next());
    if (buf.size() > 14 && g.below(2)) {
      buf[12] = std::byte{0x86};
      buf[13] = std::byte{0xDD};
    }
    pol.on_frame(Bytes(buf.data(), buf.size()), Direction::kAtoB, 0,
                 kEpoch + static_cast<uint64_t>(i));
  }
  for (const auto& s : wire::samples::all_samples()) {
    for (size_t len = 0; len <= s.frame.size(); ++len) {
      const Decision& d = pol.on_frame(Bytes(s.frame.data(), len), Direction::kAtoB, 0, kEpoch);
      if (d.action != Action::kDrop) {
        EXPECT_LE(d.out.size(), std::max<size_t>(len, 1));
      }
    }
  }
  // An unknown link index is a caller bug: the frame passes, nothing crashes.
  const auto f = data_frame(DataSpec{});
  EXPECT_EQ(pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 9, kEpoch).action, Action::kPass);
}

TEST(RuntimeControl, AddRemoveRulesAndValidation) {
  Policy pol(one_link({}), kEpoch);
  const auto f = data_frame(DataSpec{});
  EXPECT_EQ(pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch).action, Action::kPass);
  EXPECT_EQ(pol.add_rule(rule(FaultType::kBlackhole, 1.0, "bh")), "");
  EXPECT_NE(pol.add_rule(rule(FaultType::kBlackhole, 1.0, "bh")), "");  // duplicate name
  Rule bad = rule(FaultType::kLoss, 1.5, "bad");
  EXPECT_NE(pol.add_rule(bad).find("p must be in [0, 1]"), std::string::npos);
  Rule unknown_link = rule(FaultType::kLoss, 0.5, "ul");
  unknown_link.match.links = {"nope"};
  EXPECT_NE(pol.add_rule(unknown_link).find("unknown link"), std::string::npos);
  EXPECT_EQ(pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch).action, Action::kDrop);
  EXPECT_TRUE(pol.remove_rule("bh"));
  EXPECT_FALSE(pol.remove_rule("bh"));
  EXPECT_EQ(pol.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch).action, Action::kPass);
  Rule unnamed = rule(FaultType::kEcn, 1.0, "");
  EXPECT_EQ(pol.add_rule(unnamed), "");
  EXPECT_EQ(pol.config().rules.back().name, "rule1");
}

}  // namespace
}  // namespace mrc::faults

namespace mrc::faults {
namespace {

TEST(EvCarriage, LinkEvFormatResolvesStevWithZeroFlowLabel) {
  // With the EV's high half in the source port, a STEV EV whose low half is 0 leaves the flow
  // label 0: per-frame inference reads it as UDP carriage, the link's ev_format does not.
  auto profile = wire::make_mrp0(wire::mrp0().dscp(), wire::EvStripe::kHighInSport);
  auto f = data_frame(DataSpec{.carrier = Carrier::kStev});
  wire::DecodedFrame d;
  ASSERT_TRUE(wire::decode_frame(wire::MutBytes(f.data(), f.size()), d, {}, *profile));
  ASSERT_TRUE(wire::restamp_wev(wire::MutBytes(f.data(), f.size()), d, wire::EvFormat::kStev,
                                wire::EvStripe::kHighInSport, 0xABCD0000u));
  PolicyConfig c = one_link({});
  Policy inferred(c, kEpoch, *profile);
  EXPECT_EQ(inferred.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch).frame.ev, 0xABCDu);
  c.links[0].ev_format = wire::EvFormat::kStev;
  Policy declared(c, kEpoch, *profile);
  EXPECT_EQ(declared.on_frame(wire::as_bytes(f), Direction::kAtoB, 0, kEpoch).frame.ev,
            0xABCD0000u);
}

}  // namespace
}  // namespace mrc::faults
