#include <gtest/gtest.h>

#include "conformance/fixtures.h"
#include "conformance/internal.h"

namespace mrc::check {
namespace {

TEST(Profile, EmptyObjectGivesDefaults) {
  DutProfile p;
  std::string e;
  ASSERT_TRUE(parse_profile("{}", "dut.json", p, e)) << e;
  EXPECT_EQ(p.dscp.control, 46);
  EXPECT_TRUE(p.qps.empty());
  EXPECT_TRUE(p.infer_qps);
  EXPECT_EQ(p.roce_port, 4791);
}

TEST(Profile, FullFixtureProfileParses) {
  DutProfile p;
  std::string e;
  ASSERT_TRUE(parse_profile(fixtures::profile(), "fixture", p, e)) << e;
  ASSERT_EQ(p.qps.size(), 1u);
  const QpProfile& q = p.qps[0];
  EXPECT_EQ(*q.requester_qpn, 0x101u);
  EXPECT_EQ(*q.responder_qpn, 0x202u);
  EXPECT_EQ(*q.mpr, 8);
  EXPECT_EQ(*q.timeout, 5);
  EXPECT_EQ(*q.retry_linear, 3);
  EXPECT_EQ(q.evs.size(), 13u);
  EXPECT_EQ(q.evs.back().port, 2);
  EXPECT_EQ(*q.ev_format, wire::EvFormat::kStev);
  EXPECT_EQ(p.nodes.size(), 2u);
  EXPECT_EQ(p.capture_points.size(), 1u);
  EXPECT_EQ(p.capture_points[0].port, 1);
  EXPECT_EQ(p.tol.reaction_ns, 2000u);
}

struct BadCase {
  const char* json;
  const char* want;  // substring of the error
};

TEST(Profile, ErrorsNameTheField) {
  const BadCase cases[] = {
      {"[", "dut.json: (document): invalid JSON"},
      {"[]", "expected a JSON object"},
      {R"({"bogus": 1})", "dut.json: bogus: unknown field"},
      {R"({"dscp": {"control": 64}})", "dscp.control: expected an integer 0..63"},
      {R"({"dscp": {"gold": 1}})", "dscp.gold: unknown DSCP class"},
      {R"({"ev_stripe": "middle"})", "ev_stripe: expected"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 5}, "mpr": 300}]})",
       "qps[0].mpr: expected an integer 0..255"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "nope", "qpn": 5}}]})",
       "qps[0].responder.addr: not an IPv6 or IPv4 address"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2"}}]})",
       "qps[0]: needs requester.addr, responder.addr and responder.qpn"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 5}, "pmtu": 1000}]})",
       "qps[0].pmtu: expected 256, 512"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 5}, "retry": {"exp": 26}}]})",
       "qps[0].retry.exp: expected an integer 0..25"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 5}, "capabilities": {"warp": true}}]})",
       "qps[0].capabilities.warp: unknown capability"},
      {R"({"qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 5}, "evs": [{"port": 1}]}]})",
       "qps[0].evs[0]: missing wev"},
      {R"({"defaults": {"timeout": 30}})", "defaults.timeout: expected an integer 0..24"},
      {R"({"nodes": [{"name": "h1"}]})", "nodes[0].addrs: expected a non-empty array"},
      {R"({"tolerances": {"skip_rotation_fraction": 2}})", "tolerances.skip_rotation_fraction"},
      {R"({"tolerances": {"t_nap_ns": 2}})", "tolerances.t_nap_ns: unknown tolerance"},
      {R"({"captures": {"h1-eth0.pcap": 5}})", "captures.h1-eth0.pcap: expected a node name"},
  };
  for (const auto& c : cases) {
    DutProfile p;
    std::string e;
    EXPECT_FALSE(parse_profile(c.json, "dut.json", p, e)) << c.json;
    EXPECT_NE(e.find(c.want), std::string::npos) << "got: " << e << "\nwant: " << c.want;
  }
}

TEST(Profile, LoadMissingFileNamesIt) {
  DutProfile p;
  std::string e;
  EXPECT_FALSE(load_profile("/nonexistent/dut.json", p, e));
  EXPECT_NE(e.find("/nonexistent/dut.json"), std::string::npos);
}

TEST(Profile, DefaultsApplyToListedQps) {
  DutProfile p;
  std::string e;
  ASSERT_TRUE(parse_profile(
      R"({"defaults": {"timeout": 7, "mpr": 4},
          "qps": [{"requester": {"addr": "10.0.0.1"}, "responder": {"addr": "10.0.0.2", "qpn": 9}, "mpr": 2}]})",
      "x", p, e))
      << e;
  EXPECT_EQ(*p.qps[0].timeout, 7);
  EXPECT_EQ(*p.qps[0].mpr, 2);
  EXPECT_EQ(detail::format_addr(*p.qps[0].requester_addr), "10.0.0.1");
}

// Per-plane, SRv6-expansion and CC fields (MRC-EV-002/007/011/012, MRC-PRB-007, MRC-CC-002).
TEST(Profile, PlaneAndCcFields) {
  DutProfile p;
  std::string e;
  ASSERT_TRUE(parse_profile(
      R"({"defaults": {"cc": {"base_rtt_ns": 100000, "target_delay_ns": 2000000},
            "evs": [{"wev": 0, "port": 1, "da": "fcbb:0:100:200:101:302::"},
                    {"wev": 1, "port": 2, "da": "fcbb:0:1100::", "segment": "fcbb:0:e02::"}]},
          "qps": [{"requester": {"addr": "fd00::1"}, "responder": {"addr": "fd00::2", "qpn": 9},
            "ev_expansion": {"format_widths": [32, 16, 16, 16, 16, 16, 16],
              "fields": [{"width": 32, "init_val": 4240113664}, {"width": 16, "mask": 65535},
                         {"width": 16, "mask": 65535}, {"width": 16, "mask": 65535},
                         {"width": 16, "mask": 65535}]},
            "evs": [{"wev": 2, "port": 1, "compact": "0100020001010302"}]}],
          "tolerances": {"t_port_ns": 5, "plane_balance_slack": 1, "t_reverse_probe_ns": 7}})",
      "x", p, e))
      << e;
  EXPECT_EQ(*p.defaults.cc_base_rtt_ns, 100000u);
  EXPECT_EQ(*p.defaults.cc_target_delay_ns, 2000000u);
  ASSERT_EQ(p.defaults.evs.size(), 2u);
  EXPECT_EQ(wire::format_ipv6(*p.defaults.evs[0].da), "fcbb:0:100:200:101:302::");
  EXPECT_FALSE(p.defaults.evs[0].segment);
  EXPECT_EQ(wire::format_ipv6(*p.defaults.evs[1].segment), "fcbb:0:e02::");
  const EvEntry& x = p.qps[0].evs.back();  // computed by the mrc_ctl.h expansion
  EXPECT_EQ(x.wev, 2u);
  EXPECT_EQ(wire::format_ipv6(*x.da), "fcbb:0:100:200:101:302::");
  EXPECT_FALSE(x.segment);  // the format is 128 bits wide: no SRH
  EXPECT_EQ(p.tol.t_port_ns, 5u);
  EXPECT_EQ(p.tol.plane_balance_slack, 1u);
  EXPECT_EQ(p.tol.t_reverse_probe_ns, 7u);

  const BadCase cases[] = {
      {R"({"defaults": {"evs": [{"wev": 0, "da": "nope"}]}})",
       "defaults.evs[0].da: expected an IPv6 address"},
      {R"({"defaults": {"evs": [{"wev": 0, "segment": "fcbb::"}]}})",
       "defaults.evs[0].segment: needs da"},
      {R"({"defaults": {"evs": [{"wev": 0, "compact": "0101"}]}})",
       "defaults.evs[0].compact: needs the QP's ev_expansion"},
      {R"({"defaults": {"evs": [{"wev": 0, "plane": 1}]}})",
       "defaults.evs[0].plane: unknown field"},
      {R"({"defaults": {"ev_expansion": {"format_widths": [16], "fields": [{"width": 16, "mask": 255}]},
            "evs": [{"wev": 0, "compact": "zz"}]}})",
       "defaults.evs[0].compact: expected a hex string"},
      {R"({"defaults": {"ev_expansion": {"format_widths": [8], "fields": [{"width": 16}]}}})",
       "defaults.ev_expansion: "},
      {R"({"defaults": {"cc": {"base_rtt": 5}}})", "defaults.cc.base_rtt: unknown field"},
      {R"({"tolerances": {"plane_balance_slack": -1}})", "tolerances.plane_balance_slack"},
  };
  for (const auto& c : cases) {
    DutProfile q;
    EXPECT_FALSE(parse_profile(c.json, "dut.json", q, e)) << c.json;
    EXPECT_NE(e.find(c.want), std::string::npos) << "got: " << e << "\nwant: " << c.want;
  }
}

TEST(Decision, ParsesTheContractFields) {
  Decision d;
  std::string e;
  ASSERT_TRUE(parse_decision(
      R"({"t_ns": 123, "link": "s1-h2", "dir": "fwd", "action": "drop", "qpn": 514, "psn": 1000,
          "opcode": 202, "ev": 327937, "src": "fd00::1", "dst": "fd00::2", "reason": "loss 1%",
          "seed": 7})",
      d, e))
      << e;
  EXPECT_EQ(d.t_ns, 123u);
  EXPECT_EQ(d.action, DecisionAction::kDrop);
  EXPECT_EQ(*d.qpn, 514u);
  EXPECT_EQ(*d.psn, 1000u);
  EXPECT_EQ(*d.opcode, 202);
  EXPECT_EQ(*d.ev, 327937u);
  EXPECT_EQ(d.link, "s1-h2");
  EXPECT_EQ(d.src, "fd00::1");
  EXPECT_EQ(d.dst, "fd00::2");
  ASSERT_TRUE(parse_decision(R"({"t_ns": 5, "action": "trim", "opcode": "0xc7"})", d, e)) << e;
  EXPECT_EQ(*d.opcode, 0xC7);
  EXPECT_EQ(d.action, DecisionAction::kTrim);
  EXPECT_FALSE(d.psn);
}

TEST(Decision, RejectsBadLinesWithAReason) {
  Decision d;
  std::string e;
  EXPECT_FALSE(parse_decision("   ", d, e));
  EXPECT_TRUE(e.empty());
  EXPECT_FALSE(parse_decision("{", d, e));
  EXPECT_NE(e.find("invalid JSON"), std::string::npos);
  EXPECT_FALSE(parse_decision(R"({"action": "drop"})", d, e));
  EXPECT_NE(e.find("t_ns"), std::string::npos);
  EXPECT_FALSE(parse_decision(R"({"t_ns": 1})", d, e));
  EXPECT_NE(e.find("action"), std::string::npos);
  EXPECT_FALSE(parse_decision(R"({"t_ns": 1, "action": "drop", "psn": -4})", d, e));
  EXPECT_NE(e.find("psn"), std::string::npos);
  EXPECT_FALSE(parse_decision(R"({"t_ns": 1, "action": "drop", "opcode": "zz"})", d, e));
  EXPECT_NE(e.find("opcode"), std::string::npos);
}

TEST(Profile, CaptureSide) {
  DutProfile p;
  std::string e;
  ASSERT_TRUE(parse_profile(
      R"({"captures": {"a.pcap": {"node": "h1", "port": 1, "side": "link"}, "b.pcap": "h2"}})",
      "x.json", p, e))
      << e;
  ASSERT_EQ(p.capture_points.size(), 2u);
  EXPECT_TRUE(p.capture_points[0].link_side);
  EXPECT_FALSE(p.capture_points[1].link_side);
  EXPECT_FALSE(
      parse_profile(R"({"captures": {"a.pcap": {"node": "h1", "side": "far"}}})", "x.json", p, e));
  EXPECT_NE(e.find("captures.a.pcap.side"), std::string::npos) << e;
  EXPECT_FALSE(
      parse_profile(R"({"captures": {"a.pcap": {"node": "h1", "sied": "link"}}})", "x.json", p, e));
  EXPECT_NE(e.find("sied"), std::string::npos) << e;
}

// mrc_inject ends its log with a counters line; it is skipped, not a malformed decision.
TEST(Decision, SkipsTheInjectorSummaryLine) {
  Decision d;
  std::string e;
  EXPECT_FALSE(parse_decision(R"({"summary": {"frames": 10, "drop": 2}})", d, e));
  EXPECT_TRUE(e.empty()) << e;
  EXPECT_FALSE(parse_decision(R"({"summary": 3})", d, e));
  EXPECT_FALSE(e.empty());
}

TEST(CaptureArg, PathNodeAndPort) {
  auto a = parse_capture_arg("cap/h1-eth0.pcap");
  EXPECT_EQ(a.path, "cap/h1-eth0.pcap");
  EXPECT_TRUE(a.node.empty());
  a = parse_capture_arg("x.pcap@h1");
  EXPECT_EQ(a.path, "x.pcap");
  EXPECT_EQ(a.node, "h1");
  EXPECT_EQ(a.port, 0);
  a = parse_capture_arg("x.pcap@h1:3");
  EXPECT_EQ(a.node, "h1");
  EXPECT_EQ(a.port, 3);
  a = parse_capture_arg("x.pcap@fd00::1");
  EXPECT_EQ(a.node, "fd00::1");
  EXPECT_EQ(a.port, 0);
}

TEST(RuleSelectionTest, IdsAndPrefixes) {
  RuleSelection s;
  EXPECT_TRUE(s.selected("MRC-REQ-001"));
  s.only = {"MRC-REQ"};
  EXPECT_TRUE(s.selected("MRC-REQ-001"));
  EXPECT_FALSE(s.selected("MRC-RSP-001"));
  s.skip = {"MRC-REQ-001"};
  EXPECT_FALSE(s.selected("MRC-REQ-001"));
  EXPECT_TRUE(s.selected("MRC-REQ-002"));
  s.only = {"MRC-RE"};  // not a whole prefix
  s.skip.clear();
  EXPECT_FALSE(s.selected("MRC-REQ-002"));
}

}  // namespace
}  // namespace mrc::check
