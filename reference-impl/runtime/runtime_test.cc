// Unit tests of the runtime that need no privileges: data pattern, latency histogram, TOML
// profiles, mutant rewrites, the control channel and the tool's option handling (memory role).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>

#include "reference-impl/runtime/control.h"
#include "reference-impl/runtime/runtime.h"
#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::runtime {
namespace {

// ---------------------------------------------------------------------------------------------
// Pattern and histogram
// ---------------------------------------------------------------------------------------------
TEST(Pattern, RoundTripsAndCatchesEveryKindOfMistake) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{4096}, size_t{65539}}) {
    std::vector<std::byte> buf(n);
    fill_pattern(buf, 42, 3, 1000);
    EXPECT_FALSE(check_pattern(buf, 42, 3, 1000).has_value()) << n;
    // Another message, QP or seed gives different bytes (all but astronomically unlikely).
    if (n >= 8) {
      EXPECT_EQ(check_pattern(buf, 42, 3, 1001), std::optional<size_t>(0)) << n;
      EXPECT_TRUE(check_pattern(buf, 42, 4, 1000).has_value());
      EXPECT_TRUE(check_pattern(buf, 43, 3, 1000).has_value());
    }
    // One flipped bit anywhere, including the tail that is not a whole word, is found.
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      std::vector<std::byte> bad = buf;
      bad[at] ^= std::byte{0x10};
      EXPECT_EQ(check_pattern(bad, 42, 3, 1000), std::optional<size_t>(at)) << n << " " << at;
    }
  }
}

TEST(LatencyHistogram, QuantilesWithinBucketError) {
  LatencyHistogram h;
  std::mt19937_64 rng(5);
  std::vector<uint64_t> v;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t x = 1000 + rng() % 5'000'000;
    v.push_back(x);
    h.add(x);
  }
  std::sort(v.begin(), v.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    const double exact = static_cast<double>(v[static_cast<size_t>(q * v.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(h.quantile(q)), exact, exact * 0.02) << q;
  }
  EXPECT_EQ(h.max(), v.back());
  EXPECT_EQ(h.min(), v.front());
  EXPECT_EQ(h.count(), v.size());
  LatencyHistogram small;
  small.add(3);
  EXPECT_EQ(small.quantile(0.5), 3u);
}

// ---------------------------------------------------------------------------------------------
// Profiles
// ---------------------------------------------------------------------------------------------
TEST(EvProfile, DefaultsPerFormat) {
  engine::EvProfile p;
  ASSERT_TRUE(default_ev_profile(wire::EvFormat::kStev, 16, p).ok());
  EXPECT_EQ(p.ev_count, 16u);
  EXPECT_EQ(p.format_widths, (std::vector<uint32_t>{16, 16}));
  EXPECT_TRUE(wire::validate_ev_profile(p.format_widths, p.fields).empty());
  ASSERT_TRUE(default_ev_profile(wire::EvFormat::kUdp, 8, p).ok());
  EXPECT_TRUE(wire::validate_ev_profile(p.format_widths, p.fields).empty());
  const Status s = default_ev_profile(wire::EvFormat::kSrv6, 8, p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("--ev-profile"), std::string::npos);
}

TEST(EvProfile, ExplicitSrv6DaIsTheExpandedOuterDestination) {
  const char* text = R"(mode = "explicit"
[[evs]]
port = 1
da = "fcbb:0:1100:1302::"
[[evs]]
port = 2
da = "fcbb:0:2100:2302::"
)";
  engine::EvProfile p;
  Status s = parse_ev_profile(text, "paths.toml", wire::EvFormat::kSrv6, 2, p);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(p.mode, engine::EvMode::kExplicit);
  ASSERT_EQ(p.explicit_evs.size(), 2u);
  EXPECT_EQ(p.ev_count, 2u);
  wire::EvExpandResult r = wire::expand_ev(p.format_widths, p.fields, p.explicit_evs[1].ev);
  ASSERT_TRUE(r.ok) << r.error;
  wire::Ipv6Addr da;
  std::copy_n(r.expanded.begin(), 16, da.begin());
  EXPECT_EQ(wire::format_ipv6(da), "fcbb:0:2100:2302::");
  EXPECT_EQ(p.explicit_evs[1].port, 2);
  // The engine accepts it.
  engine::EndpointConfig cfg;
  cfg.gid = *wire::parse_ipv6("fd00:a::1");
  cfg.ev_format = wire::EvFormat::kSrv6;
  cfg.ports.resize(2);
  engine::Endpoint ep(cfg);
  EXPECT_TRUE(ep.add_ev_profile(1, p).ok());
}

TEST(EvProfile, GeneratedWithFields) {
  const char* text = R"(mode = "generated"
format_widths = [16, 16]
ev_count = 12
active_count = 8
[[fields]]
width = 16
init_val = 0x1000
max_val = 0xff
mask = 0xff
[[fields]]
width = 16
max_val = 0xffff
mask = 0xffff
)";
  engine::EvProfile p;
  Status s = parse_ev_profile(text, "gen.toml", wire::EvFormat::kStev, 4, p);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(p.ev_count, 12u);
  EXPECT_EQ(p.active_count, 8u);
  ASSERT_EQ(p.fields.size(), 2u);
  EXPECT_EQ(p.fields[0].init_val, 0x1000u);
  EXPECT_EQ(p.fields[0].mask, 0xFFu);
}

TEST(EvProfile, ErrorsNameFileLineAndKey) {
  struct Case {
    const char* text;
    const char* want;
  } cases[] = {
      {"mode = \"sideways\"\n", "p.toml:1: 'mode'"},
      {"ev_count = 4\ncolour = 3\n", "p.toml:2: 'colour': unknown key"},
      {"mode = \"explicit\"\n[[evs]]\nport = 9\ncompact = \"a4\"\n", "'evs[0].port': must be 1..2"},
      {"mode = \"explicit\"\n[[evs]]\nport = 1\ncompact = \"xyz\"\n", "'evs[0].compact'"},
      {"mode = \"explicit\"\n[[evs]]\nport = 1\nda = \"fcbb::\"\n", "only for the srv6 EV format"},
      {"mode = \"explicit\"\n", "needs [[evs]]"},
      {"format_widths = [16]\n", "give both format_widths and fields"},
      {"ev_count = -1\n", "'ev_count': out of range"},
      {"ev_count = [\n", "p.toml:"},
  };
  for (const Case& c : cases) {
    engine::EvProfile p;
    const Status s = parse_ev_profile(c.text, "p.toml", wire::EvFormat::kStev, 2, p);
    EXPECT_FALSE(s.ok()) << c.text;
    EXPECT_NE(s.message.find(c.want), std::string::npos) << s.message;
  }
  engine::EvProfile p;
  EXPECT_NE(load_ev_profile("/nonexistent/x.toml", wire::EvFormat::kStev, 1, p)
                .message.find("cannot open"),
            std::string::npos);
}

TEST(CcProfile, ParsesAndRejects) {
  engine::CcProfile cc;
  Status s = parse_cc_profile("algorithm = \"nscc\"\n[nscc]\nbase_rtt = 200000\ngamma = 0.5\n",
                              "cc.toml", cc);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(cc.algorithm, engine::kCcNscc);
  EXPECT_EQ(cc.nscc.base_rtt, 200000u);
  EXPECT_FLOAT_EQ(cc.nscc.gamma, 0.5f);
  ASSERT_TRUE(parse_cc_profile("algorithm = \"none\"\n", "cc.toml", cc).ok());
  EXPECT_EQ(cc.algorithm, engine::kCcNone);
  s = parse_cc_profile("algorithm = \"cubic\"\n", "cc.toml", cc);
  EXPECT_NE(s.message.find("cc.toml:1: 'algorithm'"), std::string::npos) << s.message;
  s = parse_cc_profile("[nscc]\ngamma = 2\n", "cc.toml", cc);
  EXPECT_NE(s.message.find("'nscc.gamma': out of range"), std::string::npos) << s.message;
  s = parse_cc_profile("[nscc]\nbase_rt = 2\n", "cc.toml", cc);
  EXPECT_NE(s.message.find("'nscc.base_rt': unknown key"), std::string::npos) << s.message;
}

// ---------------------------------------------------------------------------------------------
// Mutants
// ---------------------------------------------------------------------------------------------
using wire::samples::Carrier;

std::vector<std::byte> sample(const std::string& name) {
  for (const auto& s : wire::samples::all_samples())
    if (s.name == name) return s.frame;
  ADD_FAILURE() << "no sample " << name;
  return {};
}

wire::DecodedFrame decode(const std::vector<std::byte>& f) {
  wire::DecodedFrame d;
  EXPECT_TRUE(wire::decode_frame(wire::as_bytes(f), d)) << d.error.describe();
  return d;
}

// A frame like `name` with one change made through the codec.
template <typename Fn>
std::vector<std::byte> variant(const std::string& name, Fn&& change) {
  std::vector<std::byte> base = sample(name);
  wire::DecodedFrame d = decode(base);
  change(d);
  return wire::encode_frame(d);
}

engine::TxPacket tx(std::vector<std::byte> f, uint8_t port = 1) {
  engine::TxPacket p;
  p.frame = std::move(f);
  p.port = port;
  return p;
}

TEST(Mutant, TableParsesAndHasAtLeastTen) {
  EXPECT_GE(mutant_table().size(), 10u);
  for (const MutantInfo& m : mutant_table()) {
    EXPECT_EQ(parse_mutant(m.name), m.mutant) << m.name;
    EXPECT_EQ(mutant_info(m.mutant).name, m.name);
    EXPECT_TRUE(m.rule.starts_with("MRC-")) << m.name;
  }
  EXPECT_FALSE(parse_mutant("flip-everything").has_value());
  EXPECT_EQ(parse_mutant("none"), Mutant::kNone);
}

TEST(Mutant, RefusesConfigurationsWhereItCannotWork) {
  EXPECT_THROW(Mutator(Mutant::kWrongPort, wire::EvFormat::kStev, wire::mrp0(), 1),
               std::invalid_argument);
}

TEST(Mutant, WrongIcrcCorruptsEveryFiftiethDataPacketOnly) {
  Mutator m(Mutant::kWrongIcrc, wire::EvFormat::kStev, wire::mrp0(), 1);
  const auto data = sample("stev/WRITE_ONLY");
  std::vector<engine::TxPacket> extra;
  int bad = 0;
  for (int i = 1; i <= 100; ++i) {
    engine::TxPacket p = tx(data);
    ASSERT_TRUE(m.on_tx(p, extra));
    wire::DecodedFrame d = decode(p.frame);
    if (!wire::verify_icrc(d)) {
      ++bad;
      EXPECT_EQ(i % 50, 0);
      EXPECT_EQ(p.frame.size(), data.size());
    }
  }
  EXPECT_EQ(bad, 2);
  EXPECT_TRUE(extra.empty());
  // Control packets are never touched.
  engine::TxPacket sack = tx(sample("stev/SACK"));
  for (int i = 0; i < 60; ++i) m.on_tx(sack, extra);
  EXPECT_TRUE(wire::verify_icrc(decode(sack.frame)));
}

TEST(Mutant, ReadOpcodeAddsAValidReadRequest) {
  Mutator m(Mutant::kReadOpcode, wire::EvFormat::kStev, wire::mrp0(), 1);
  const auto data = sample("stev/WRITE_FIRST");
  std::vector<engine::TxPacket> extra;
  for (int i = 0; i < 500; ++i) {
    engine::TxPacket p = tx(data);
    ASSERT_TRUE(m.on_tx(p, extra));
    EXPECT_EQ(p.frame, data);
  }
  ASSERT_EQ(extra.size(), 1u);
  wire::DecodedFrame d = decode(extra[0].frame);
  EXPECT_EQ(d.bth.opcode, static_cast<uint8_t>(wire::Opcode::kRcReadRequest));
  EXPECT_TRUE(wire::verify_icrc(d));
  EXPECT_EQ(d.bth.dest_qp, decode(data).bth.dest_qp);
  EXPECT_TRUE(d.payload.empty());
}

TEST(Mutant, RtxWithoutBitClearsOnlyTheRtxBit) {
  Mutator m(Mutant::kRtxWithoutBit, wire::EvFormat::kStev, wire::mrp0(), 1);
  std::vector<engine::TxPacket> extra;
  const auto rtx = variant("stev/WRITE_MIDDLE", [](wire::DecodedFrame& d) { d.bth.rtx = true; });
  engine::TxPacket p = tx(rtx);
  ASSERT_TRUE(m.on_tx(p, extra));
  wire::DecodedFrame d = decode(p.frame);
  EXPECT_FALSE(d.bth.rtx);
  EXPECT_TRUE(wire::verify_icrc(d));
  wire::DecodedFrame orig = decode(rtx);
  EXPECT_EQ(d.bth.psn, orig.bth.psn);
  EXPECT_EQ(d.udp.sport, orig.udp.sport);
  EXPECT_EQ(d.ip6.flow_label, orig.ip6.flow_label);
  ASSERT_EQ(d.payload.size(), orig.payload.size());
  EXPECT_TRUE(std::equal(d.payload.begin(), d.payload.end(), orig.payload.begin()));
  const auto first = sample("stev/WRITE_MIDDLE");
  engine::TxPacket q = tx(first);
  m.on_tx(q, extra);
  EXPECT_EQ(q.frame, first);
}

TEST(Mutant, WrongEvEchoAndRegressCackChangeOneSackField) {
  std::vector<engine::TxPacket> extra;
  Mutator echo(Mutant::kWrongEvEcho, wire::EvFormat::kStev, wire::mrp0(), 1);
  const auto sack = sample("stev/SACK");
  engine::TxPacket p = tx(sack);
  echo.on_tx(p, extra);
  wire::DecodedFrame a = decode(sack), b = decode(p.frame);
  EXPECT_EQ(b.seth.entropy, a.seth.entropy ^ 0x5A5Au);
  EXPECT_EQ(b.seth.cack_psn, a.seth.cack_psn);
  EXPECT_TRUE(wire::verify_icrc(b));

  Mutator cack(Mutant::kRegressCack, wire::EvFormat::kStev, wire::mrp0(), 1);
  uint32_t highest = 0;
  for (uint32_t i = 1; i <= 8; ++i) {
    const uint32_t c = 1000 + 100 * i;
    engine::TxPacket s = tx(variant("stev/SACK", [&](wire::DecodedFrame& d) {
      d.seth.cack_psn = c;
      d.bth.psn = c;
    }));
    cack.on_tx(s, extra);
    wire::DecodedFrame d = decode(s.frame);
    EXPECT_TRUE(wire::verify_icrc(d));
    if (i < 8) {
      EXPECT_EQ(d.seth.cack_psn, c);
      highest = c;
    } else {
      EXPECT_EQ(d.seth.cack_psn, c - 16);  // below the highest sent (this one's own 1800)
      EXPECT_LT(d.seth.cack_psn, c);
      EXPECT_GT(d.seth.cack_psn, highest);
      EXPECT_EQ(d.bth.psn, d.seth.cack_psn);
    }
  }
}

TEST(Mutant, ExceedMprAddsAFarCopy) {
  Mutator m(Mutant::kExceedMpr, wire::EvFormat::kStev, wire::mrp0(), 1);
  const auto data = sample("stev/WRITE_ONLY");
  std::vector<engine::TxPacket> extra;
  for (int i = 0; i < 500; ++i) {
    engine::TxPacket p = tx(data);
    m.on_tx(p, extra);
  }
  ASSERT_EQ(extra.size(), 1u);
  wire::DecodedFrame d = decode(extra[0].frame), o = decode(data);
  EXPECT_EQ(d.bth.psn, wire::psn_add(o.bth.psn, 65536));
  EXPECT_TRUE(wire::verify_icrc(d));
}

TEST(Mutant, SkipTrimNackDropsOnlyTrimNacks) {
  Mutator m(Mutant::kSkipTrimNack, wire::EvFormat::kStev, wire::mrp0(), 1);
  std::vector<engine::TxPacket> extra;
  engine::TxPacket trim = tx(variant("stev/NACK", [](wire::DecodedFrame& d) {
    d.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kTrimmed);
  }));
  EXPECT_FALSE(m.on_tx(trim, extra));
  engine::TxPacket last = tx(variant("stev/NACK", [](wire::DecodedFrame& d) {
    d.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kTrimmedLastHop);
  }));
  EXPECT_FALSE(m.on_tx(last, extra));
  engine::TxPacket other = tx(variant("stev/NACK", [](wire::DecodedFrame& d) {
    d.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kNoResource);
  }));
  EXPECT_TRUE(m.on_tx(other, extra));
  EXPECT_EQ(m.frames_dropped(), 2u);
}

// MRC-PRB-007's mutant: per port, one EV probe leaves per kSparseProbeGapNs and the others are
// dropped; port-status updates, endpoint responses, SACKs and data are left alone.
TEST(Mutant, SparseReverseProbeKeepsOneEvProbePerPortAndGap) {
  Mutator m(Mutant::kSparseReverseProbe, wire::EvFormat::kStev, wire::mrp0(), 2);
  EXPECT_TRUE(mutant_info(Mutant::kSparseReverseProbe).responder);
  uint64_t now = 1'000'000;
  m.set_clock([&now] { return now; });
  std::vector<engine::TxPacket> extra;
  const auto probe = [&](uint8_t port) {
    engine::TxPacket p = tx(sample("stev/ENDPOINT_REQUEST/ev-probe"), port);
    return m.on_tx(p, extra);
  };
  EXPECT_TRUE(probe(1));
  EXPECT_TRUE(probe(2));  // each port has its own gap
  now += 1'000'000;
  EXPECT_FALSE(probe(1));
  EXPECT_FALSE(probe(2));
  now += Mutator::kSparseProbeGapNs - 1'000'001;
  EXPECT_FALSE(probe(1));
  now += 1;
  EXPECT_TRUE(probe(1));
  EXPECT_FALSE(probe(1));
  for (const char* keep : {"stev/ENDPOINT_REQUEST/port-status", "stev/ENDPOINT_RESPONSE",
                           "stev/SACK", "stev/WRITE_MIDDLE"}) {
    const std::vector<std::byte> f = sample(keep);
    engine::TxPacket p = tx(f);
    EXPECT_TRUE(m.on_tx(p, extra)) << keep;
    EXPECT_EQ(p.frame, f) << keep;
  }
  EXPECT_TRUE(extra.empty());
  EXPECT_EQ(m.frames_dropped(), 4u);
  EXPECT_EQ(m.frames_changed(), 0u);
}

// A data frame like `name` carrying `wev` in `format`, optionally from another outer source
// address and on another outer DA (SRv6: another port and path).
std::vector<std::byte> data_on(const std::string& name, wire::EvFormat format, uint32_t wev,
                               uint8_t outer_last = 0) {
  return variant(name, [&](wire::DecodedFrame& d) {
    const wire::EvCarriage c = wire::carry_wev(format, wire::mrp0().ev_stripe(), wev);
    d.udp.sport = c.sport;
    if (d.l3 == 6) d.ip6.flow_label = c.flow_label;
    if (d.has_inner_ip6) d.inner_ip6.flow_label = c.flow_label;
    if (outer_last != 0) {
      d.ip6.src[15] = outer_last;
      d.ip6.dst[15] = outer_last;
    }
  });
}

// An ignore-ecn mutator on two ports, on the clock `now`, that saw unchanged data on each of
// `evs` (STEV WEV, port).
std::unique_ptr<Mutator> ecn_mutator(uint64_t& now,
                                     std::initializer_list<std::pair<uint32_t, uint8_t>> evs) {
  constexpr auto kStev = wire::EvFormat::kStev;
  auto m = std::make_unique<Mutator>(Mutant::kIgnoreEcn, kStev, wire::mrp0(), 2);
  m->set_clock([&now] { return now; });
  std::vector<engine::TxPacket> extra;
  for (auto [wev, port] : evs) {
    const auto f = data_on("stev/WRITE_MIDDLE", kStev, wev);
    engine::TxPacket p = tx(f, port);
    EXPECT_TRUE(m->on_tx(p, extra));
    EXPECT_EQ(p.frame, f);
  }
  return m;
}

// The engine's event for EV `wev` on `port` changing state, as the mutator hears it.
engine::Event ev_state(uint32_t wev, uint8_t port, const char* from, const char* to) {
  engine::Event e;
  e.kind = engine::EventKind::kEvState;
  e.u("wev", wev).u("port", port).s("from", from).s("to", to);
  return e;
}

TEST(Mutant, IgnoreEcnKeepsSendingOnTheMarkedEv) {
  constexpr auto kStev = wire::EvFormat::kStev;
  constexpr uint32_t kA = 0x00A10001, kB = 0x00B20002, kC = 0x00C30003;
  uint64_t now = 1'000'000;
  auto mp = ecn_mutator(now, {{kA, 1}, {kB, 2}, {kC, 2}});
  Mutator& m = *mp;
  std::vector<engine::TxPacket> extra;
  const auto on_a = data_on("stev/WRITE_MIDDLE", kStev, kA);  // port 1
  // Sends one new data packet on A (port 1); returns its WEV and checks what else must hold.
  auto send_a = [&](uint8_t want_port) {
    engine::TxPacket p = tx(on_a, 1);
    EXPECT_TRUE(m.on_tx(p, extra));
    const wire::DecodedFrame d = decode(p.frame);
    EXPECT_TRUE(wire::verify_icrc(d));
    EXPECT_EQ(p.port, want_port);
    return wire::wev_of(d, kStev, wire::mrp0().ev_stripe());
  };

  // ALWAYS_SKIP (a path verdict, not ECN) and echoes of EVs never sent on pin nothing.
  std::vector<std::byte> scratch;
  for (auto [mv, wev] : {std::pair{2, kB}, std::pair{1, 0x00DD0004u}}) {
    const auto sack = variant("stev/SACK", [&](wire::DecodedFrame& d) {
      d.seth.m = static_cast<uint8_t>(mv);
      d.seth.entropy = wev;
    });
    m.on_rx(wire::as_bytes(sack), scratch);
    EXPECT_EQ(send_a(1), kA);
  }

  // The echo reaches the engine unchanged.
  const auto ce = variant("stev/SACK", [](wire::DecodedFrame& d) {
    d.seth.m = 1;
    d.seth.entropy = kB;
  });
  EXPECT_EQ(m.on_rx(wire::as_bytes(ce), scratch).data(), ce.data());
  // Within the reaction time every new data packet goes on B, on B's port; retransmissions stay.
  for (int k = 0; k < 8; ++k) {
    now += 10'000;
    EXPECT_EQ(send_a(2), kB) << k;
  }
  engine::TxPacket rtx =
      tx(variant("stev/WRITE_MIDDLE", [](wire::DecodedFrame& x) { x.bth.rtx = true; }), 1);
  const auto rtx_before = rtx.frame;
  m.on_tx(rtx, extra);
  EXPECT_EQ(rtx.frame, rtx_before);
  EXPECT_EQ(rtx.port, 1);
  // An echo on another EV changes nothing; another one on B restarts the reaction time.
  const auto ce_c = variant("stev/SACK", [](wire::DecodedFrame& d) {
    d.seth.m = 1;
    d.seth.entropy = kC;
  });
  m.on_rx(wire::as_bytes(ce_c), scratch);
  m.on_rx(wire::as_bytes(ce), scratch);
  now += Mutator::kEcnPinReactionNs;
  EXPECT_EQ(send_a(2), kB);
  // Then kEcnPinPackets more, later than the reaction time, and it is over.
  now += 1;
  for (uint32_t k = 0; k < Mutator::kEcnPinPackets; ++k) EXPECT_EQ(send_a(2), kB) << k;
  EXPECT_EQ(send_a(1), kA);
  EXPECT_EQ(m.frames_changed(), 9 + Mutator::kEcnPinPackets);
  // The next pin waits until the engine placed kEcnPinGap packets itself (runs on one EV stay
  // short: MRC-EV-001).
  now += Mutator::kEcnPinReactionNs + 1;
  m.on_rx(wire::as_bytes(ce_c), scratch);
  EXPECT_EQ(send_a(1), kA);
  for (uint32_t k = 2; k < Mutator::kEcnPinGap; ++k) EXPECT_EQ(send_a(1), kA) << k;

  // A NACK TRIMMED pins too; the pin ends after kEcnPinMaxNs without data, and when the EV is
  // retired (keeping it would be MRC-EV-009).
  const auto trim = variant("stev/NACK", [](wire::DecodedFrame& d) {
    d.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kTrimmed);
    d.neth.entropy = kC;
  });
  m.on_rx(wire::as_bytes(trim), scratch);
  EXPECT_EQ(send_a(2), kC);
  now += Mutator::kEcnPinMaxNs + 1;
  for (uint32_t k = 0; k < Mutator::kEcnPinGap; ++k) EXPECT_EQ(send_a(1), kA) << k;
  m.on_rx(wire::as_bytes(trim), scratch);
  EXPECT_EQ(send_a(2), kC);
  m.on_event(ev_state(kC, 2, "SKIP", "ASSUMED_BAD"));
  EXPECT_EQ(send_a(1), kA);
  // Nor does an echo on an EV the engine holds retired start a pin (an echo for a packet still
  // in flight); once the EV is back, one does.
  for (uint32_t k = 0; k < Mutator::kEcnPinGap; ++k) EXPECT_EQ(send_a(1), kA) << k;
  now += Mutator::kEcnPinReactionNs + 1;
  m.on_rx(wire::as_bytes(trim), scratch);
  EXPECT_EQ(send_a(1), kA);
  m.on_event(ev_state(kC, 2, "ASSUMED_BAD", "GOOD"));
  m.on_rx(wire::as_bytes(trim), scratch);
  EXPECT_EQ(send_a(2), kC);
}

TEST(Mutant, IgnoreEcnPinsAtMostARunMax) {
  constexpr auto kStev = wire::EvFormat::kStev;
  constexpr uint32_t kA = 0x00A10001, kB = 0x00B20002;
  uint64_t now = 1'000'000;
  auto m = ecn_mutator(now, {{kA, 1}, {kB, 2}});
  std::vector<engine::TxPacket> extra;
  const auto on_a = data_on("stev/WRITE_MIDDLE", kStev, kA);
  auto send_a = [&] {
    engine::TxPacket p = tx(on_a, 1);
    EXPECT_TRUE(m->on_tx(p, extra));
    return wire::wev_of(decode(p.frame), kStev, wire::mrp0().ev_stripe());
  };
  std::vector<std::byte> scratch;
  const auto ce = variant("stev/SACK", [](wire::DecodedFrame& d) {
    d.seth.m = 1;
    d.seth.entropy = kB;
  });
  m->on_rx(wire::as_bytes(ce), scratch);
  // A burst within the reaction time: kEcnPinRunMax packets on B, then the engine's choice.
  for (uint32_t k = 0; k < Mutator::kEcnPinRunMax; ++k) EXPECT_EQ(send_a(), kB) << k;
  EXPECT_EQ(send_a(), kA);
}

TEST(Mutant, IgnoreEcnInSrv6MovesThePathWithTheEv) {
  constexpr auto kSrv6 = wire::EvFormat::kSrv6;
  for (const std::string carrier : {"srv6", "srv6-srh"}) {
    SCOPED_TRACE(carrier);
    Mutator m(Mutant::kIgnoreEcn, kSrv6, wire::mrp0(), 2);
    std::vector<engine::TxPacket> extra;
    const auto on_a = data_on(carrier + "/WRITE_MIDDLE", kSrv6, 3, 0x0A);
    const auto on_b = data_on(carrier + "/WRITE_MIDDLE", kSrv6, 5, 0x0B);
    engine::TxPacket a = tx(on_a, 1), b = tx(on_b, 2);
    m.on_tx(a, extra);
    m.on_tx(b, extra);
    std::vector<std::byte> scratch;
    const auto ce = variant(carrier + "/SACK", [](wire::DecodedFrame& d) {
      d.seth.m = 1;
      d.seth.entropy = 5;
    });
    m.on_rx(wire::as_bytes(ce), scratch);
    engine::TxPacket p = tx(on_a, 1);
    m.on_tx(p, extra);
    const wire::DecodedFrame d = decode(p.frame);
    EXPECT_EQ(wire::wev_of(d, kSrv6, wire::mrp0().ev_stripe()), 5u);
    EXPECT_EQ(d.ip6.dst, decode(on_b).ip6.dst);
    EXPECT_TRUE(wire::verify_icrc(d));
    EXPECT_EQ(p.port, 2);
    // The moved packet is the packet the requester would have sent on B: its source address,
    // path, EV stamp and ICRC.
    EXPECT_EQ(p.frame, on_b);
  }
}

// The mutant acts in the engine's EV profile, so the frames leave untouched.
TEST(Mutant, ReuseRetiredEvLeavesFramesAlone) {
  Mutator m(Mutant::kReuseRetiredEv, wire::EvFormat::kSrv6, wire::mrp0(), 2);
  std::vector<engine::TxPacket> extra;
  const auto data = sample("stev/WRITE_MIDDLE");
  engine::TxPacket p = tx(data, 1);
  EXPECT_TRUE(m.on_tx(p, extra));
  EXPECT_EQ(p.frame, data);
  EXPECT_TRUE(extra.empty());
}

TEST(Mutant, ControlDscpAndWrongPort) {
  std::vector<engine::TxPacket> extra;
  Mutator dscp(Mutant::kControlDscpData, wire::EvFormat::kStev, wire::mrp0(), 1);
  engine::TxPacket p = tx(sample("stev/WRITE_ONLY"));
  dscp.on_tx(p, extra);
  EXPECT_EQ(decode(p.frame).dscp(), wire::mrp0().dscp().control);
  EXPECT_TRUE(wire::verify_icrc(decode(p.frame)));

  Mutator port(Mutant::kWrongPort, wire::EvFormat::kStev, wire::mrp0(), 3);
  engine::TxPacket d = tx(sample("stev/WRITE_ONLY"), 3);
  port.on_tx(d, extra);
  EXPECT_EQ(d.port, 1);
  engine::TxPacket s = tx(sample("stev/SACK"), 3);
  port.on_tx(s, extra);
  EXPECT_EQ(s.port, 3);
}

// ---------------------------------------------------------------------------------------------
// Control channel
// ---------------------------------------------------------------------------------------------
uint16_t test_port() {
  return static_cast<uint16_t>(21000 + getpid() % 20000);
}

TEST(Control, ExchangesMessagesAndReportsPeerErrors) {
  const uint16_t port = test_port();
  Fd listener;
  ASSERT_TRUE(ControlChannel::listen("127.0.0.1", port, listener).ok());
  std::thread server([&] {
    ControlChannel c;
    ASSERT_TRUE(ControlChannel::accept(listener, 5'000'000'000ull, c).ok());
    nlohmann::json m;
    ASSERT_TRUE(c.expect("hello", m, 5'000'000'000ull).ok());
    EXPECT_EQ(m["x"], 7);
    ASSERT_TRUE(c.send({{"type", "error"}, {"message", "no thanks"}}).ok());
  });
  ControlChannel c;
  ASSERT_TRUE(ControlChannel::connect("127.0.0.1", port, 5'000'000'000ull, c).ok());
  ASSERT_TRUE(c.send({{"type", "hello"}, {"x", 7}}).ok());
  nlohmann::json m;
  const Status s = c.expect("welcome", m, 5'000'000'000ull);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("no thanks"), std::string::npos) << s.message;
  server.join();
}

TEST(Control, UnreachablePeerFailsWithinTheTimeout) {
  ControlChannel c;
  const uint64_t t0 = monotonic_ns();
  const Status s = ControlChannel::connect("127.0.0.1", static_cast<uint16_t>(test_port() + 1),
                                           300'000'000ull, c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("cannot reach the server's control port"), std::string::npos)
      << s.message;
  EXPECT_LT(monotonic_ns() - t0, 2'000'000'000ull);
  EXPECT_FALSE(ControlChannel::connect("no-such-host.invalid", 1, 100'000'000ull, c).ok());
}

// ---------------------------------------------------------------------------------------------
// The tool: option errors and the in-memory role
// ---------------------------------------------------------------------------------------------
int run_tool(std::vector<std::string> args) {
  args.insert(args.begin(), "mrct-endpoint-test");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return endpoint_main(static_cast<int>(args.size()), argv.data());
}

TEST(EndpointTool, BadOptionsExitTwo) {
  EXPECT_EQ(run_tool({}), 2);
  EXPECT_EQ(run_tool({"juggle"}), 2);
  EXPECT_EQ(run_tool({"memory", "--size", "12Q"}), 2);
  EXPECT_EQ(run_tool({"memory", "--iters", "5", "--duration", "1"}), 2);
  EXPECT_EQ(run_tool({"memory", "--ev-format", "srv6"}), 2);  // no EV profile
  EXPECT_EQ(run_tool({"memory", "--ev-format", "ipx"}), 2);
  EXPECT_EQ(run_tool({"memory", "--mutant", "flip-everything"}), 2);
  EXPECT_EQ(run_tool({"memory", "--pmtu", "1000"}), 2);
  EXPECT_EQ(run_tool({"memory", "--retry", "9:1"}), 2);
  EXPECT_EQ(run_tool({"memory", "--cc-profile", "/nonexistent.toml"}), 2);
  EXPECT_EQ(run_tool({"client", "--ifaces", "lo"}), 2);  // no --server
  EXPECT_EQ(run_tool({"server", "--gid", "fd00::1", "--ifaces", "mrcrt-no-such0"}), 2);
  EXPECT_EQ(run_tool({"memory", "--size", "1M", "--buffer-limit", "1M", "--tx-depth", "4"}), 2);
  // A responder-side mutant given to the client (which is only a requester) is refused.
  EXPECT_EQ(run_tool({"client", "--server", "::1", "--gid", "fd00::1", "--ifaces", "lo", "--mutant",
                      "wrong-ev-echo"}),
            2);
  EXPECT_EQ(run_tool({"--list-mutants"}), 0);
  // Times must be finite and in range (NaN passed `<= 0`; --ctl-timeout nan never gave up).
  for (const char* opt : {"--stall", "--duration", "--ctl-timeout", "--accept-timeout",
                          "--probe-interval-us", "--ep-timeout-us"})
    for (const char* v : {"nan", "inf", "-1", "1e300"})
      EXPECT_EQ(run_tool({"memory", opt, v}), 2) << opt << " " << v;
  EXPECT_EQ(run_tool({"memory", "--stall", "0"}), 2);
  EXPECT_EQ(run_tool({"memory", "--seed", "x"}), 2);
  EXPECT_EQ(run_tool({"memory", "--seed", "-1"}), 2);
  EXPECT_EQ(run_tool({"memory", "--seed", "99999999999999999999999"}), 2);
}

TEST(EndpointTool, SeedRandomRuns) {
  EXPECT_EQ(run_tool({"memory", "--size", "4K", "--iters", "16", "--seed", "random"}), 0);
  EXPECT_EQ(run_tool({"memory", "--size", "4K", "--iters", "16", "--seed", "18446744073709551615"}),
            0);
}

TEST(EndpointTool, MemoryRoleMovesAndVerifiesData) {
  EXPECT_EQ(run_tool({"memory", "--size", "64K", "--iters", "64", "--planes", "4", "--json"}), 0);
  EXPECT_EQ(run_tool({"memory", "--size", "5000", "--iters", "50", "--qps", "3", "--imm", "--pmtu",
                      "1024", "--ev-format", "udp"}),
            0);
  // Fewer slots than messages: the ring wraps and the last message of each slot is verified.
  EXPECT_EQ(run_tool({"memory", "--size", "4K", "--iters", "300", "--tx-depth", "16",
                      "--buffer-limit", "128K", "--cc", "none"}),
            0);
  EXPECT_EQ(run_tool({"memory", "--size", "16K", "--duration", "0.2", "--tx-depth", "8"}), 0);
}

}  // namespace
}  // namespace mrc::runtime
