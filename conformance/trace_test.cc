// Trace assembly: merging capture points, attribution of captures to nodes, QP inference,
// decision logs, truncated inputs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

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

void exchange(Session& s) {
  s.write(3000);
  s.write(100, true);
  s.write(2048);
  s.ep_probe(3, 0x00050101);
  s.advance(20 * kUs);
  s.write(1024);
}

std::string tmp(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_trace_" + name;
  std::filesystem::remove_all(d);
  return d;
}

TEST(Trace, SamePacketAtTwoPointsIsOnePacket) {
  Trace t;
  Session s(t);
  exchange(s);
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.frames, t.frames.size());
  EXPECT_EQ(r.packets * 2, r.frames);  // every packet was captured at both hosts
  EXPECT_EQ(r.count(Status::kFail), 0u);
  ASSERT_EQ(r.flows.size(), 1u);
  EXPECT_EQ(r.flows[0].data_packets, 7u);
}

// A packet the fabric duplicated shows up twice at the receiver: still one transmission.
TEST(Trace, FabricDuplicateIsNotARetransmission) {
  Trace t;
  Session s(t);
  s.write(1024);
  const auto copy = t.frames[1];  // the data packet as seen at the responder
  t.add(copy.point, copy.ts + 500, copy.bytes);
  s.write(1024);
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.result("MRC-REQ-004")->status, Status::kPass);
  EXPECT_EQ(r.flows[0].retransmissions, 0u);
}

// One capture point (the responder's): a packet is never seen at another point, so only a data
// copy away from its sender's interface can be a second sighting (the fabric's duplicate); an
// identical control packet sent again by the responder is a new packet.
TEST(Trace, AtASinglePointOnlyADataCopyAwayFromItsSenderIsADuplicate) {
  Trace both;
  Session s(both);
  s.write(1024);
  s.write(1024);
  Trace t;
  t.profile = both.profile;
  t.points = {both.points[1]};
  for (const auto& f : both.frames)
    if (f.point == 1) t.add(0, f.ts, f.bytes);
  const Report plain = fixtures::run(t);
  ASSERT_EQ(plain.flows.size(), 1u);
  EXPECT_EQ(plain.packets, t.frames.size());
  size_t data = 0, sack = 0;
  for (size_t i = 0; i < t.frames.size() && !(data && sack); ++i) {
    wire::DecodedFrame d;
    ASSERT_TRUE(wire::decode_frame(wire::as_bytes(t.frames[i].bytes), d));
    if (!data && d.op && d.op->kind == wire::PacketKind::kMrcData) data = i + 1;
    if (!sack && d.op && d.op->kind == wire::PacketKind::kMrcSack) sack = i + 1;
  }
  ASSERT_TRUE(data && sack);
  const auto dup_data = t.frames[data - 1], again_sack = t.frames[sack - 1];
  t.add(0, dup_data.ts + 300, dup_data.bytes);
  t.add(0, again_sack.ts + 300, again_sack.bytes);
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.packets, plain.packets + 1);  // the SACK is a packet, the data copy is not
  EXPECT_EQ(r.flows[0].retransmissions, 0u);
  EXPECT_EQ(r.flows[0].data_packets, plain.flows[0].data_packets);
  EXPECT_EQ(r.flows[0].sacks, plain.flows[0].sacks + 1);
  EXPECT_EQ(r.count(Status::kFail), plain.count(Status::kFail));
}

// The sender resends one PSN on the same EV exactly one ts16 wrap (65536 x 128 ns) after its
// previous copy: the two copies are byte for byte the same, but a copy seen again at its
// sender's own interface is the sender's next transmission, not a second sighting.
TEST(Trace, ACopyResentOneTs16WrapLaterIsANewTransmission) {
  Trace t;
  // The merge window of a software fabric (the testbed's), longer than a ts16 wrap.
  t.profile = fixtures::profile(R"({"tolerances": {"end_grace_ns": 200000, "reaction_ns": 2000,
      "t_ack_max_ns": 50000, "dedup_window_ns": 200000000}})",
                                "{}");
  Session s(t);
  uint32_t lost = 0;
  s.write(
      1024, false,
      [&](size_t, DataPkt& p, Fate& f) {
        f = Fate::kDrop;
        lost = p.psn;
      },
      {}, false);
  s.advance(50 * kUs);
  const uint32_t w = s.evs[1];
  s.retransmit(lost, 0, Fate::kDrop, [&](DataPkt& p) { p.wev = w; });
  const size_t first_copy = t.frames.size() - 1;
  s.advance(65536 * 128 - (s.now - t.frames[first_copy].ts));
  s.retransmit(lost, 0, Fate::kDeliver, [&](DataPkt& p) { p.wev = w; });
  ASSERT_EQ(t.frames[first_copy].bytes, t.frames[t.frames.size() - 2].bytes);
  s.advance(s.one_way + kUs);  // the responder has it
  s.sack(lost);
  s.tack(lost);
  const Report r = fixtures::run(t);
  ASSERT_EQ(r.flows.size(), 1u);
  EXPECT_EQ(r.flows[0].retransmissions, 2u);
  for (const auto& x : r.results)
    EXPECT_NE(x.status, Status::kFail)
        << x.rule->id << ": " << (x.evidence.empty() ? "" : x.evidence[0].message);
}

// The fabric duplicated an endpoint response (and a SACK) on the way: one response, one SACK.
TEST(Trace, FabricDuplicateOfControlPacketsIsOnePacket) {
  Trace t;
  Session s(t);
  s.write(1024);
  s.ep_probe(4, 0x00050102);
  s.advance(20 * kUs);
  s.write(1024);
  std::vector<Trace::Frame> dups;
  for (const auto& f : t.frames) {
    wire::DecodedFrame d;
    wire::decode_frame(wire::as_bytes(f.bytes), d);
    if (f.point == 0 && (d.bth.opcode == 0xD9 || d.bth.opcode == 0xDC)) dups.push_back(f);
  }
  ASSERT_GE(dups.size(), 2u);
  for (const auto& f : dups) t.add(f.point, f.ts + 300, f.bytes);
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.result("MRC-PRB-004")->status, Status::kPass);
  EXPECT_EQ(r.count(Status::kFail), 0u);
  EXPECT_EQ(r.flows[0].sacks, 2u);
  // Sent twice by the responder itself, a response is a second response.
  Trace t2;
  Session s2(t2);
  Session::EpOpts o;
  o.responses = 2;
  s2.ep_probe(4, 0x00050102, o);
  EXPECT_EQ(fixtures::run(t2).result("MRC-PRB-004")->status, Status::kFail);
}

// A responder repeats an identical transport ACK while nothing new arrives: each one, seen at
// both hosts, is one packet, however many there are (past four, the later ones were read as
// sightings of the fourth).
TEST(Trace, AnAckRepeatedManyTimesIsAPacketEachTime) {
  Trace t;
  Session s(t);
  s.write(1024);
  const Report once = fixtures::run(t);
  for (int i = 0; i < 7; ++i) {
    s.advance(5 * kUs);
    s.tack(s.cack());
  }
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.packets, once.packets + 7);
  EXPECT_EQ(r.packets * 2, r.frames);
  EXPECT_EQ(r.count(Status::kFail), 0u);
}

TEST(Trace, InfersTheQpWithoutAProfile) {
  Trace t;
  Session s(t);
  exchange(s);
  t.profile.clear();
  const Report r = fixtures::run(t);
  ASSERT_EQ(r.flows.size(), 1u);
  EXPECT_FALSE(r.flows[0].configured);
  EXPECT_EQ(r.flows[0].requester, "fd00::1");
  EXPECT_EQ(*r.flows[0].requester_qpn, 0x101u);
  EXPECT_EQ(*r.flows[0].responder_qpn, 0x202u);
  EXPECT_EQ(r.count(Status::kFail), 0u);
  // What needs the profile is not applicable, with the reason.
  const RuleResult* mpr = r.result("MRC-REQ-008");
  EXPECT_EQ(mpr->status, Status::kNotApplicable);
  EXPECT_NE(mpr->reason.find("MPR"), std::string::npos);
  EXPECT_EQ(r.result("MRC-REQ-002")->status, Status::kPass);  // PMTU inferred
}

// Without names in a profile, a host capture is recognised by the hop limit of what it sends.
TEST(Trace, HopLimitAttributesHostCaptures) {
  Trace t;
  Session s(t);
  exchange(s);
  t.profile.clear();
  const wire::Ipv6Addr h1 = s.req, h2 = s.rsp;
  for (auto& f : t.frames) {
    wire::DecodedFrame d;
    wire::decode_frame(wire::as_bytes(f.bytes), d);
    const wire::Ipv6Addr& mine = f.point == 0 ? h1 : h2;
    if (d.ip6.src != mine) f.bytes[14 + 7] = std::byte{62};  // crossed two routers
  }
  t.points[0].file = "a.pcapng";
  t.points[1].file = "b.pcapng";
  const Report r = fixtures::run_files(t, tmp("hoplimit"));
  ASSERT_EQ(r.captures.size(), 2u);
  EXPECT_EQ(r.captures[0].node, "fd00::1");
  EXPECT_EQ(r.captures[0].attribution, "hop limit");
  EXPECT_EQ(r.captures[1].node, "fd00::2");
  // Rules that need the responder's own capture are judged.
  EXPECT_EQ(r.result("MRC-RSP-002")->status, Status::kPass);
  EXPECT_EQ(r.count(Status::kFail), 0u);
}

TEST(Trace, UnattributedCapturesAreNotedAndOrderRulesNotJudged) {
  Trace t;
  Session s(t);
  exchange(s);
  t.profile.clear();
  t.points[0].file = "a.pcapng";
  t.points[1].file = "b.pcapng";
  const Report r = fixtures::run_files(t, tmp("unattributed"));
  EXPECT_TRUE(r.captures[0].node.empty());
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("not attributed"), std::string::npos);
  EXPECT_EQ(r.result("MRC-RSP-002")->status, Status::kNotApplicable);
  EXPECT_EQ(r.count(Status::kFail), 0u);
}

TEST(Trace, CommandLineAttributionWins) {
  Trace t;
  Session s(t);
  exchange(s);
  const std::string dir = tmp("option");
  CheckOptions o;
  fixtures::run_files(t, dir, &o);
  o.captures[0].node = "h1";
  o.captures[0].port = 1;
  Report r;
  std::string e;
  ASSERT_TRUE(check_files(o, r, e)) << e;
  EXPECT_EQ(r.captures[0].attribution, "option");
  EXPECT_EQ(r.captures[1].attribution, "file name");
}

// exchange() written as capture files in tmp(name) and checked; `o` gets the options used.
Report exchange_files(const std::string& name, CheckOptions& o) {
  Trace t;
  Session s(t);
  exchange(s);
  return fixtures::run_files(t, tmp(name), &o);
}

TEST(Trace, TruncatedCaptureIsJudgedUpToTheCut) {
  CheckOptions o;
  const Report full = exchange_files("truncated", o);
  const auto path = o.captures[0].path;
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 7);
  Report r;
  std::string e;
  ASSERT_TRUE(check_files(o, r, e)) << e;
  EXPECT_FALSE(r.captures[0].error.empty());
  EXPECT_EQ(r.captures[0].frames + 1, full.captures[0].frames);
  bool noted = false;
  for (const auto& n : r.notes) noted = noted || n.find("ends early") != std::string::npos;
  EXPECT_TRUE(noted);
}

// A capture piped in is judged as it arrives; --annotate, which reads the captures twice, says
// it cannot before reading anything.
TEST(Trace, ACapturePipedInIsJudgedAndAnnotateRefusesIt) {
  CheckOptions o;
  const Report from_files = exchange_files("piped", o);
  std::ifstream f(o.captures[0].path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto piped = [&](CheckOptions opts, auto&& fn) {
    wire::samples::PipeFeed feed(wire::as_bytes(bytes.data(), bytes.size()));
    opts.captures[0].path = feed.path();
    fn(opts);
  };
  piped(o, [&](const CheckOptions& opts) {
    Report r;
    std::string e;
    ASSERT_TRUE(check_files(opts, r, e)) << e;
    EXPECT_EQ(r.frames, from_files.frames);
    EXPECT_EQ(r.packets, from_files.packets);
    EXPECT_EQ(r.count(Status::kFail), from_files.count(Status::kFail));
  });
  piped(o, [&](CheckOptions opts) {
    opts.annotated_out = o.captures[0].path + ".annotated.pcapng";
    std::ostringstream out, err;
    EXPECT_EQ(run_check(opts, out, err), 2);
    EXPECT_NE(err.str().find("is not a regular file"), std::string::npos) << err.str();
    EXPECT_FALSE(std::filesystem::exists(opts.annotated_out));
  });
}

// A copy the injector corrupted on the way fails its ICRC; the decision log explains it.
TEST(Trace, InjectorCorruptionExcusesTheIcrc) {
  auto build = [](bool with_decision) {
    Trace t;
    Session s(t);
    s.write(1024);
    DataPkt p;
    s.write(
        1024, false,
        [&](size_t, DataPkt& q, Fate& f) {
          p = q;
          f = Fate::kDrop;
        },
        {}, false);
    auto bad = s.data_frame(p, s.now);
    bad[14 + 40 + 8 + 12 + 1] ^= std::byte{0x40};  // METH.RQMSN: the copy no longer matches
    t.add(1, s.now - 10 * kUs + s.one_way, bad);
    if (with_decision) s.decision(s.now - 10 * kUs + kUs, "corrupt", p.psn, 0xCA, p.wev);
    s.advance(40 * kUs);
    s.avoid.insert(p.wev);
    s.retransmit(p.psn, p.wev);
    const uint64_t saved = s.now;
    s.now += s.one_way + kUs;
    s.sack(p.psn);
    s.now = saved + 20 * kUs;
    s.probe(1, p.wev);
    return t;
  };
  const Report excused = fixtures::run(build(true));
  EXPECT_EQ(excused.result("MRC-FRM-001")->status, Status::kPass);
  EXPECT_EQ(excused.result("MRC-FRM-001")->excused, 1u);
  EXPECT_EQ(excused.count(Status::kFail), 0u);
  const Report blamed = fixtures::run(build(false));
  EXPECT_EQ(blamed.result("MRC-FRM-001")->status, Status::kFail);
  EXPECT_EQ(fixtures::with_status(blamed, Status::kFail, true),
            std::set<std::string>{"MRC-FRM-001"});
}

// Decisions on the far side of the injector: a NACK the injector dropped never reached the
// requester, which therefore owes no retransmission for it.
TEST(Trace, DroppedNackCreatesNoObligation) {
  Trace t;
  Session s(t);
  s.write(1024);
  DataPkt p;
  s.write(
      1024, false, [&](size_t, DataPkt& q, Fate&) { p = q; },
      [](size_t, fixtures::SackPkt&) { return false; }, false);
  s.received.erase(p.psn);
  s.nack(p.psn, 0x07, p.wev);
  s.decision(s.now + kUs, "drop", p.psn, 0xDD, 0x9001);
  s.advance(400 * kUs);
  s.write(1024);
  // Keep only the responder's capture.
  Trace only_rsp = t;
  only_rsp.points = {t.points[1]};
  only_rsp.frames.clear();
  for (const auto& f : t.frames)
    if (f.point == 1) only_rsp.frames.push_back({0, f.ts, f.bytes});
  const Report r = fixtures::run(only_rsp);
  EXPECT_EQ(r.result("MRC-REQ-011")->status, Status::kNotApplicable);
  EXPECT_EQ(r.count(Status::kFail), 0u);
  // Without the decision the NACK is assumed delivered, and the missing retransmission fails.
  only_rsp.decisions.clear();
  EXPECT_EQ(fixtures::run(only_rsp).result("MRC-REQ-011")->status, Status::kFail);
}

// A data decision read before the QP's first frame (the QP is inferred, its nodes are known) waits
// for the flow, then marks the copy it concerns: a SACK for that PSN acknowledges a packet the
// injector dropped on its way to the responder.
TEST(Trace, DecisionBeforeTheQpsFirstFrameWaitsForTheFlow) {
  Trace t;
  Session s(t);
  t.profile = fixtures::profile(R"({"qps": []})");
  DataPkt p;
  const uint64_t sent_at = s.now;
  s.write(1024, false, [&](size_t, DataPkt& q, Fate&) { p = q; });
  const Report clean = fixtures::run(t);
  EXPECT_EQ(clean.result("MRC-RSP-003")->status, Status::kPass);
  EXPECT_EQ(clean.count(Status::kFail), 0u);
  const auto line = [&](uint32_t psn, uint32_t ev) {
    return R"({"t_ns": )" + std::to_string(sent_at + kUs) +
           R"(, "link": "s1-h2", "dir": "fwd", "action": "drop", "qpn": )" +
           std::to_string(s.rsp_qpn) + R"(, "psn": )" + std::to_string(psn) +
           R"(, "opcode": 199, "ev": )" + std::to_string(ev) +
           R"(, "src": "fd00::1", "dst": "fd00::2"})";
  };
  // Another PSN of the QP and another EV: the decision concerns no copy in the trace.
  t.decisions = {line(p.psn + 1, p.wev), line(p.psn, p.wev + 1)};
  EXPECT_EQ(fixtures::run(t).result("MRC-RSP-003")->status, Status::kPass);
  t.decisions = {line(p.psn, p.wev)};
  const Report r = fixtures::run(t);
  const RuleResult* rsp3 = r.result("MRC-RSP-003");
  EXPECT_EQ(rsp3->status, Status::kFail);
  ASSERT_FALSE(rsp3->evidence.empty());
  EXPECT_NE(rsp3->evidence[0].message.find("every transmission of it was lost"), std::string::npos);
}

}  // namespace
}  // namespace mrc::check
