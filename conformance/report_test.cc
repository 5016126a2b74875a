// Reports: JSON contract, JUnit XML, GitHub Markdown, human text, annotated pcapng, and the
// exit codes of run_check().
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/fixtures.h"

namespace mrc::check {
namespace {

using fixtures::DataPkt;
using fixtures::Fate;
using fixtures::kUs;
using fixtures::Session;
using fixtures::Trace;

// A trace with one REQ-006 violation (A=0 on a LAST packet) among conforming traffic.
Trace failing_trace() {
  Trace t;
  Session s(t);
  s.write(3000);
  s.write(2048, false, [](size_t i, DataPkt& p, Fate&) {
    if (i == 1) p.ack = false;
  });
  s.write(1024, true);
  s.advance(300 * kUs);
  s.write(1024);
  return t;
}

Trace clean_trace() {
  Trace t;
  Session s(t);
  s.write(3000);
  s.write(100, true);
  s.ep_probe(5, 0x00050103);
  s.advance(20 * kUs);
  s.write(2048);
  return t;
}

std::string dir_for(const std::string& name) {
  const std::string d =
      ::testing::TempDir() + "/mrc_check_" + std::to_string(::getpid()) + "_report_" + name;
  std::filesystem::remove_all(d);
  return d;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(Report, JsonFollowsTheContract) {
  const std::string dir = dir_for("json");
  const Report r = fixtures::run_files(failing_trace(), dir);
  std::ostringstream o;
  write_json(r, o);
  const auto j = nlohmann::json::parse(o.str());
  EXPECT_EQ(j["verdict"], "NOT CONFORMING");
  EXPECT_TRUE(j["verdict_reasons"].empty());
  EXPECT_GT(j["trace"]["mrc_frames"].get<uint64_t>(), 0u);
  EXPECT_GT(j["captures"][0]["mrc_frames"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["summary"]["rules"], rule_catalogue().size());
  EXPECT_EQ(j["summary"]["fail"], 1);
  ASSERT_EQ(j["rules"].size(), rule_catalogue().size());
  const nlohmann::json* rule = nullptr;
  for (const auto& x : j["rules"])
    if (x["id"] == "MRC-REQ-006") rule = &x;
  ASSERT_NE(rule, nullptr);
  EXPECT_EQ((*rule)["status"], "fail");
  EXPECT_EQ((*rule)["count"], 1);
  EXPECT_EQ((*rule)["violations"], 1);
  EXPECT_EQ((*rule)["refs"][0], "R18");
  EXPECT_EQ((*rule)["severity"], "error");
  ASSERT_EQ((*rule)["evidence"].size(), 1u);
  const auto& ev = (*rule)["evidence"][0];
  EXPECT_EQ(ev["file"], dir + "/h1-eth0.pcapng");
  EXPECT_GT(ev["frame"].get<uint64_t>(), 0u);
  EXPECT_GT(ev["ts_ns"].get<uint64_t>(), 0u);
  EXPECT_NE(ev["message"].get<std::string>().find("A=0"), std::string::npos);
  for (const auto& x : j["rules"]) {
    const std::string st = x["status"];
    EXPECT_TRUE(st == "pass" || st == "fail" || st == "warn" || st == "not-applicable" ||
                st == "not-run");
    if (st == "not-applicable" || st == "not-run") {
      EXPECT_FALSE(x["reason"].get<std::string>().empty()) << x["id"];
    }
  }
  ASSERT_EQ(j["captures"].size(), 2u);
  EXPECT_EQ(j["captures"][0]["node"], "h1");
  EXPECT_EQ(j["captures"][0]["attribution"], "profile");
  EXPECT_EQ(j["captures"][1]["node"], "h2");
  EXPECT_EQ(j["captures"][1]["attribution"], "file name");
  EXPECT_EQ(j["captures"][0]["format"], "pcapng");
  ASSERT_EQ(j["flows"].size(), 1u);
  EXPECT_EQ(j["flows"][0]["requester_qpn"], 0x101);
  EXPECT_EQ(j["flows"][0]["responder_qpn"], 0x202);
  // Debug aid: MRC_CHECK_DUMP=<path> writes the clean scenario's report for inspection.
  if (const char* p = std::getenv("MRC_CHECK_DUMP")) {
    std::ofstream out(p);
    write_json(fixtures::run_files(clean_trace(), dir_for("dump")), out);
  }
}

TEST(Report, JunitHasOneTestcasePerRule) {
  const Report r = fixtures::run(failing_trace());
  std::ostringstream o;
  write_junit(r, o);
  const std::string x = o.str();
  EXPECT_EQ(x.rfind("<?xml", 0), 0u);
  EXPECT_EQ(count_of(x, "<testcase "), rule_catalogue().size());
  EXPECT_EQ(count_of(x, "<failure "), 1u);
  EXPECT_EQ(count_of(x, "<testsuite "), 6u);  // FRM EV REQ RSP PRB CC
  EXPECT_NE(x.find("name=\"MRC-REQ-006\""), std::string::npos);
  EXPECT_GE(count_of(x, "<skipped "), r.count(Status::kNotRun) + r.count(Status::kNotApplicable));
  // Balanced elements and no raw '<' inside attribute values.
  EXPECT_EQ(count_of(x, "<testcase "), count_of(x, "</testcase>"));
  EXPECT_EQ(count_of(x, "<testsuite "), count_of(x, "</testsuite>"));
  const std::regex attr("=\"[^\"]*<[^\"]*\"");
  EXPECT_FALSE(std::regex_search(x, attr));
}

TEST(Report, MarkdownAndHumanNameTheViolation) {
  const Report r = fixtures::run(failing_trace());
  std::ostringstream md, hu;
  write_markdown(r, md);
  write_human(r, hu);
  EXPECT_NE(md.str().find("## MRC conformance: NOT CONFORMING"), std::string::npos);
  EXPECT_NE(md.str().find("`MRC-REQ-006`"), std::string::npos);
  EXPECT_NE(md.str().find("<details>"), std::string::npos);
  EXPECT_NE(hu.str().find("FAIL MRC-REQ-006"), std::string::npos);
  EXPECT_NE(hu.str().find("MRC conformance: NOT CONFORMING"), std::string::npos);
  const Report c = fixtures::run(clean_trace());
  std::ostringstream md2, hu2;
  write_markdown(c, md2);
  write_human(c, hu2);
  EXPECT_NE(md2.str().find("## MRC conformance: CONFORMING"), std::string::npos);
  EXPECT_EQ(md2.str().find("### Violations"), std::string::npos);
  EXPECT_NE(hu2.str().find("MRC conformance: CONFORMING"), std::string::npos);
}

TEST(Report, AnnotatedPcapngCommentsTheViolatingFrame) {
  const std::string dir = dir_for("annotated");
  CheckOptions o;
  const Report r = fixtures::run_files(failing_trace(), dir, &o);
  const RuleResult* rr = r.result("MRC-REQ-006");
  ASSERT_NE(rr, nullptr);
  ASSERT_EQ(rr->evidence.size(), 1u);
  const std::string out = dir + "/annotated.pcapng";
  std::string e;
  ASSERT_TRUE(write_annotated(o, r, out, e)) << e;
  wire::CaptureReader rd;
  ASSERT_TRUE(rd.open(out)) << rd.error();
  wire::CaptureRecord rec;
  uint64_t n = 0, commented = 0;
  std::string comment;
  while (rd.next(rec)) {
    ++n;
    if (!rec.comment.empty()) {
      ++commented;
      comment = std::string(rec.comment);
    }
  }
  EXPECT_TRUE(rd.error().empty()) << rd.error();
  EXPECT_EQ(n, r.frames);
  EXPECT_EQ(commented, 1u);
  EXPECT_NE(comment.find("MRC-REQ-006"), std::string::npos);
  EXPECT_NE(comment.find("h1-eth0.pcapng frame " + std::to_string(rr->evidence[0].frame)),
            std::string::npos);
  // Wireshark's own reader must see the comment.
  if (std::system("command -v tshark >/dev/null 2>&1") == 0) {
    const std::string txt = dir + "/tshark.txt";
    const std::string cmd = "tshark -r " + out + " -Y frame.comment -T fields -e frame.comment > " +
                            txt + " 2>/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_NE(slurp(txt).find("MRC-REQ-006"), std::string::npos) << slurp(txt);
  }
}

TEST(RunCheck, ExitCodesAndOutputs) {
  const std::string dir = dir_for("run");
  CheckOptions o;
  fixtures::run_files(failing_trace(), dir, &o);
  o.json_out = dir + "/report.json";
  o.junit_out = dir + "/report.xml";
  o.markdown_out = dir + "/summary.md";
  o.annotated_out = dir + "/annotated.pcapng";
  std::ostringstream out, err;
  EXPECT_EQ(run_check(o, out, err), 1) << err.str();
  EXPECT_NE(out.str().find("FAIL MRC-REQ-006"), std::string::npos);
  for (const auto& f : {o.json_out, o.junit_out, o.markdown_out, o.annotated_out})
    EXPECT_TRUE(std::filesystem::exists(f)) << f;
  EXPECT_TRUE(nlohmann::json::accept(slurp(o.json_out)));

  // Clean trace: exit 0. JSON to stdout: no human text mixed in.
  const std::string cdir = dir_for("run_clean");
  CheckOptions c;
  fixtures::run_files(clean_trace(), cdir, &c);
  c.json_out = "-";
  std::ostringstream cout_, cerr_;
  EXPECT_EQ(run_check(c, cout_, cerr_), 0) << cerr_.str();
  EXPECT_TRUE(nlohmann::json::accept(cout_.str())) << cout_.str().substr(0, 200);

  // Usage / input errors: exit 2 with the file named.
  CheckOptions bad = c;
  bad.json_out.clear();
  bad.captures.push_back({dir + "/missing.pcap", "", 0});
  std::ostringstream o2, e2;
  EXPECT_EQ(run_check(bad, o2, e2), 2);
  EXPECT_NE(e2.str().find("missing.pcap"), std::string::npos) << e2.str();
  CheckOptions none;
  std::ostringstream o3, e3;
  EXPECT_EQ(run_check(none, o3, e3), 2);
  EXPECT_NE(e3.str().find("no capture files"), std::string::npos);
  CheckOptions badprof = c;
  badprof.json_out.clear();
  badprof.profile_path = dir + "/bad.json";
  std::ofstream(badprof.profile_path) << R"({"qps": [{"mpr": 999}]})";
  std::ostringstream o4, e4;
  EXPECT_EQ(run_check(badprof, o4, e4), 2);
  EXPECT_NE(e4.str().find("bad.json: qps[0]"), std::string::npos) << e4.str();
  CheckOptions badlog = c;
  badlog.json_out.clear();
  badlog.decision_logs = {dir + "/bad.jsonl"};
  std::ofstream(badlog.decision_logs[0]) << R"({"t_ns": 1, "action": "drop"})"
                                         << "\nnot json\n";
  std::ostringstream o5, e5;
  EXPECT_EQ(run_check(badlog, o5, e5), 2);
  EXPECT_NE(e5.str().find("bad.jsonl:2"), std::string::npos) << e5.str();
  CheckOptions badrule = c;
  badrule.json_out.clear();
  badrule.rules.only = {"MRC-NOPE"};
  std::ostringstream o6, e6;
  EXPECT_EQ(run_check(badrule, o6, e6), 2);
  EXPECT_NE(e6.str().find("MRC-NOPE"), std::string::npos);
  // Warnings fail only with fail_on_warn.
  const std::string wdir = dir_for("run_warn");
  Trace wt;
  {
    Session s(wt);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.rsvd_bit = true; });
  }
  CheckOptions w;
  fixtures::run_files(wt, wdir, &w);
  w.quiet = true;
  std::ostringstream o7, e7;
  EXPECT_EQ(run_check(w, o7, e7), 0);
  EXPECT_TRUE(o7.str().empty());
  w.fail_on_warn = true;
  EXPECT_EQ(run_check(w, o7, e7), 1);
}

// A warning reaches GitHub's test reporters as a skipped case whose message starts with
// WARNING and names the rule and its first evidence; the Markdown and JSON link each rule and
// its sources to docs/.
TEST(Report, WarningsAndDocLinks) {
  Trace t;
  {
    Session s(t);
    s.write(1024, false, [](size_t, DataPkt& p, Fate&) { p.rsvd_bit = true; });
  }
  const Report r = fixtures::run(t);
  ASSERT_EQ(r.result("MRC-FRM-008")->status, Status::kWarn);
  std::ostringstream o;
  write_junit(r, o);
  const std::string x = o.str();
  const size_t at = x.find("name=\"MRC-FRM-008\"");
  ASSERT_NE(at, std::string::npos);
  const std::string tc = x.substr(at, x.find("</testcase>", at) - at);
  EXPECT_NE(tc.find("<skipped message=\"WARNING: 1 violation(s) of MRC-FRM-008: "),
            std::string::npos)
      << tc;
  EXPECT_NE(tc.find("First: "), std::string::npos) << tc;
  EXPECT_NE(tc.find("<property name=\"mrc.status\" value=\"warn\"/>"), std::string::npos);
  EXPECT_EQ(count_of(x, "<skipped "),
            r.count(Status::kNotRun) + r.count(Status::kNotApplicable) + r.count(Status::kWarn));
  std::ostringstream md;
  write_markdown(r, md);
  EXPECT_NE(md.str().find("[`MRC-FRM-008`](docs/rules.md#mrc-frm-008)"), std::string::npos)
      << md.str().substr(0, 1500);
  EXPECT_NE(md.str().find("[R5](docs/rule-sources.md#r5)"), std::string::npos);
  EXPECT_NE(md.str().find("Tolerances: **software**"), std::string::npos);
  std::ostringstream js;
  write_json(r, js);
  const auto j = nlohmann::json::parse(js.str());
  for (const auto& x2 : j["rules"])
    if (x2["id"] == "MRC-FRM-008") {
      EXPECT_EQ(x2["doc"], "docs/rules.md#mrc-frm-008");
      EXPECT_EQ(x2["refs_doc"][0], "docs/rule-sources.md#r5");
    }
  EXPECT_EQ(j["tolerances"]["values"]["reaction_ns"], r.tolerances.values.reaction_ns);
}

std::string failing_rules(const Report& r) {
  std::string s;
  for (const auto& id : fixtures::with_status(r, Status::kFail)) s += id + " ";
  for (const auto& why : r.inconclusive) s += "[" + why + "] ";
  return s;
}

// The clean trace with every RoCE datagram moved to UDP port `dport` (the MRC BTH unchanged), and
// an ARP frame first: a capture in which nothing is MRC under the default profile.
Trace moved_to_port(uint16_t dport) {
  Trace t = clean_trace();
  for (auto& f : t.frames) {
    wire::DecodedFrame d;
    if (!wire::decode_frame(wire::as_bytes(f.bytes), d) || d.off_udp == 0xFFFF) continue;
    f.bytes[d.off_udp + 2] = std::byte(dport >> 8);
    f.bytes[d.off_udp + 3] = std::byte(dport & 0xFF);
    // The port is inside the ICRC: a sender on that port computes it over that port.
    wire::DecodeOptions o;
    o.roce_port = dport;
    if (wire::decode_frame(wire::as_bytes(f.bytes), d, o) && d.has_icrc)
      wire::fix_icrc(wire::MutBytes(f.bytes), d);
  }
  std::vector<std::byte> arp(42, std::byte{0});
  arp[12] = std::byte{0x08};
  arp[13] = std::byte{0x06};
  t.add(0, 1, arp);
  return t;
}

TEST(Verdict, NothingMrcIsInconclusiveNotConforming) {
  const std::string dir = dir_for("inconclusive");
  CheckOptions o;
  const Report r = fixtures::run_files(moved_to_port(4971), dir, &o);
  EXPECT_EQ(r.mrc_frames, 0u);
  EXPECT_EQ(r.verdict(), Verdict::kInconclusive);
  EXPECT_EQ(r.exit_code(), kExitInconclusive);
  // MRC-FRM-002 fails on the MRC-looking datagrams to the other port, and still the run is not
  // NOT CONFORMING: the same bytes are MRC under a variant that uses port 4971.
  EXPECT_EQ(r.result("MRC-FRM-002")->status, Status::kFail);
  ASSERT_FALSE(r.inconclusive.empty());
  EXPECT_NE(r.inconclusive[0].find("no frame was recognised as MRC"), std::string::npos);
  ASSERT_EQ(r.unrecognised.size(), 2u);
  const UnrecognisedFrames& port = r.unrecognised[0];
  EXPECT_NE(port.reason.find("UDP to port 4971, not the profile's RoCE port 4791"),
            std::string::npos)
      << port.reason;
  EXPECT_NE(port.reason.find("P_Key 0xffff"), std::string::npos) << port.reason;
  EXPECT_EQ(port.frames + 1, r.frames);
  ASSERT_EQ(port.examples.size(), 5u);
  EXPECT_EQ(port.examples[0].frame, 2u);  // the ARP frame is frame 1 of h1's capture
  EXPECT_EQ(r.unrecognised[1].reason, "not IP (EtherType 0x0806)");
  EXPECT_EQ(r.unrecognised[1].frames, 1u);

  o.json_out = dir + "/report.json";
  o.junit_out = dir + "/report.xml";
  o.markdown_out = dir + "/summary.md";
  std::ostringstream out, err;
  EXPECT_EQ(run_check(o, out, err), 3) << err.str();
  EXPECT_NE(out.str().find("MRC conformance: INCONCLUSIVE"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("not MRC: 1 frame(s): not IP (EtherType 0x0806) ("), std::string::npos)
      << out.str();
  const auto j = nlohmann::json::parse(slurp(o.json_out));
  EXPECT_EQ(j["verdict"], "INCONCLUSIVE");
  EXPECT_EQ(j["exit_code"], 3);
  EXPECT_EQ(j["trace"]["mrc_frames"], 0);
  ASSERT_EQ(j["unrecognised"].size(), 2u);
  EXPECT_EQ(j["unrecognised"][1]["examples"][0]["frame"], 1);
  EXPECT_EQ(j["unrecognised"][1]["examples"][0]["file"], dir + "/h1-eth0.pcapng");
  const std::string x = slurp(o.junit_out);
  EXPECT_NE(x.find("<error type=\"inconclusive\""), std::string::npos);
  EXPECT_EQ(count_of(x, "<testcase "), rule_catalogue().size() + 1);
  const std::string md = slurp(o.markdown_out);
  EXPECT_NE(md.find("## MRC conformance: INCONCLUSIVE"), std::string::npos);
  EXPECT_NE(md.find("### Frames not recognised as MRC"), std::string::npos);

  // The same capture with the port in the profile is judged (and the unchanged trace on 4791
  // is CONFORMING): the verdict follows the traffic, not the rule results alone.
  Trace moved = moved_to_port(4971);
  auto prof = nlohmann::json::parse(moved.profile);
  prof["roce_port"] = 4971;
  moved.profile = prof.dump();
  const Report judged = fixtures::run(moved);
  EXPECT_GT(judged.mrc_frames, 0u);
  EXPECT_EQ(judged.verdict(), Verdict::kConforming) << failing_rules(judged);
  EXPECT_EQ(fixtures::run(clean_trace()).verdict(), Verdict::kConforming);
}

TEST(Verdict, OtherReasonsAreNamed) {
  // P_Key 0 on another port: not MRC-looking enough for MRC-FRM-002, named in the reason.
  Trace t = moved_to_port(4971);
  for (auto& f : t.frames) {
    wire::DecodedFrame d;
    if (!wire::decode_frame(wire::as_bytes(f.bytes), d) || d.off_udp == 0xFFFF) continue;
    f.bytes[d.off_udp + 8 + 2] = std::byte{0};
    f.bytes[d.off_udp + 8 + 3] = std::byte{0};
  }
  const Report r = fixtures::run(t);
  EXPECT_EQ(r.verdict(), Verdict::kInconclusive);
  EXPECT_EQ(r.result("MRC-FRM-002")->status, Status::kPass);
  ASSERT_FALSE(r.unrecognised.empty());
  EXPECT_NE(r.unrecognised[0].reason.find("P_Key 0x0000"), std::string::npos)
      << r.unrecognised[0].reason;
  // A plain RoCEv2 RC SEND on the RoCE port is RoCE but not MRC.
  Trace rc = moved_to_port(4791);
  for (auto& f : rc.frames) {
    wire::DecodedFrame d;
    if (!wire::decode_frame(wire::as_bytes(f.bytes), d) || d.off_bth == 0xFFFF) continue;
    f.bytes[d.off_bth] = std::byte{0x04};  // RC SEND_ONLY
  }
  const Report r2 = fixtures::run(rc);
  EXPECT_EQ(r2.verdict(), Verdict::kInconclusive);
  EXPECT_EQ(r2.exit_code(), 3);
  ASSERT_FALSE(r2.unrecognised.empty());
  EXPECT_NE(r2.unrecognised[0].reason.find("RoCE opcode 0x04"), std::string::npos)
      << r2.unrecognised[0].reason;
  EXPECT_NE(r2.unrecognised[0].reason.find("not an MRC opcode"), std::string::npos);
}

TEST(Verdict, WhatTheRunAskedForMustBeJudged) {
  // --only a family with nothing to judge in the trace: INCONCLUSIVE, and it says which.
  RuleSelection cc;
  cc.only = {"MRC-CC-002"};  // needs the CC profile numbers, which the fixture profile lacks
  const Report r = fixtures::run(clean_trace(), cc);
  EXPECT_EQ(r.count(Status::kPass) + r.count(Status::kFail) + r.count(Status::kWarn), 0u);
  EXPECT_EQ(r.verdict(), Verdict::kInconclusive);
  ASSERT_EQ(r.inconclusive.size(), 1u);
  EXPECT_NE(r.inconclusive[0].find("--only MRC-CC-002: none of its 1 rule(s)"), std::string::npos)
      << r.inconclusive[0];
  // A family that had something to judge: conclusive.
  RuleSelection req;
  req.only = {"MRC-REQ"};
  EXPECT_EQ(fixtures::run(clean_trace(), req).verdict(), Verdict::kConforming);
  EXPECT_EQ(fixtures::run(failing_trace(), req).verdict(), Verdict::kNotConforming);
  // A QP the profile lists that never shows up.
  Trace t = clean_trace();
  auto prof = nlohmann::json::parse(t.profile);
  auto extra = prof["qps"][0];
  extra["requester"]["qpn"] = 0x303;
  extra["responder"]["qpn"] = 0x404;
  prof["qps"].push_back(extra);
  t.profile = prof.dump();
  const Report q = fixtures::run(t);
  EXPECT_EQ(q.verdict(), Verdict::kInconclusive);
  ASSERT_EQ(q.inconclusive.size(), 1u);
  EXPECT_NE(q.inconclusive[0].find("QPN 1028 has no data, SACK or NACK"), std::string::npos)
      << q.inconclusive[0];
}

}  // namespace
}  // namespace mrc::check
