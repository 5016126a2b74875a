// Config files (TOML, JSON), single JSON rules, and the errors they give.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fault-injector/faults.h"

namespace mrc::faults {
namespace {

std::string error_of(std::string_view text, std::string_view file = "t.toml") {
  InjectorConfig c;
  std::string err;
  EXPECT_FALSE(parse_config(text, file, ConfigFormat::kAuto, c, &err)) << text;
  return err;
}

TEST(Config, ExampleTomlAndJsonParseToTheSameRules) {
  const std::string dir = std::string(MRC_SOURCE_DIR) + "/fault-injector/examples/";
  InjectorConfig t, j;
  std::string err;
  ASSERT_TRUE(load_config(dir + "faults.toml", t, &err)) << err;
  ASSERT_TRUE(load_config(dir + "faults.json", j, &err)) << err;
  EXPECT_EQ(t.policy.seed, 42u);
  ASSERT_EQ(t.policy.links.size(), 1u);
  EXPECT_EQ(t.policy.links[0].name, "t0p0-t1p0");
  EXPECT_EQ(t.policy.links[0].iface_a, "mrcfi-a");
  EXPECT_EQ(t.policy.links[0].plane, 0);
  ASSERT_EQ(t.policy.rules.size(), 5u);
  ASSERT_EQ(j.policy.rules.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(rule_to_json(t.policy.rules[i]), rule_to_json(j.policy.rules[i]));
  const Rule& trim = t.policy.rules[0];
  EXPECT_EQ(trim.type, FaultType::kTrim);
  EXPECT_DOUBLE_EQ(trim.p, 0.01);
  EXPECT_EQ(trim.match.dir, Direction::kAtoB);
  EXPECT_TRUE(trim.match.opcodes.test(0xC7));
  EXPECT_FALSE(trim.match.opcodes.test(0xDC));  // SACK is not data
  EXPECT_EQ(t.policy.rules[1].match.evs, (std::vector<uint32_t>{0x0003a5c1, 0x0003a5c2}));
  const Rule& once = t.policy.rules[2];
  EXPECT_EQ(once.match.psn, std::make_pair(1005u, 1005u));
  EXPECT_EQ(once.match.rtx, false);
  EXPECT_EQ(once.max_hits, 1u);
  EXPECT_EQ(t.policy.rules[3].match.from_ns, 2'000'000'000u);
  EXPECT_EQ(t.policy.rules[3].match.until_ns, 4'000'000'000u);
  const Rule& flap = t.policy.rules[4];
  EXPECT_EQ(flap.down_at_ns, 5'000'000'000u);
  EXPECT_EQ(flap.down_for_ns, 300'000'000u);
  EXPECT_EQ(flap.period_ns, 10'000'000'000u);
  EXPECT_EQ(flap.count, 3u);
  // The parsed config builds a policy.
  EXPECT_NO_THROW(Policy(t.policy, 0));
}

TEST(Config, EveryModelsKeys) {
  const char* text = R"(
seed = 1
[[link]]
name = "l"
[[rule]]
type = "gilbert"
p_gb = 0.01
p_bg = 0.25
loss_good = 0.001
loss_bad = 0.9
[[rule]]
type = "delay"
delay_us = 100
jitter_us = 20.5
keep_order = false
[[rule]]
type = "reorder"
p = 0.1
delay_us = 300
[[rule]]
type = "dup"
p = 0.01
copies = 3
[[rule]]
type = "corrupt"
p = 0.001
bits = 2
fix_udp_checksum = false
[[rule]]
type = "rate"
rate_gbps = 10
queue_bytes = 65536
overflow = "trim"
lasthop = true
[[rule]]
type = "loss"
p = 0.02
plane = [0, 1]
link = "l"
)";
  InjectorConfig c;
  std::string err;
  ASSERT_TRUE(parse_config(text, "m.toml", ConfigFormat::kAuto, c, &err)) << err;
  const auto& r = c.policy.rules;
  ASSERT_EQ(r.size(), 7u);
  EXPECT_EQ(r[0].name, "rule1");
  EXPECT_DOUBLE_EQ(r[0].p_good_to_bad, 0.01);
  EXPECT_DOUBLE_EQ(r[0].p_bad_to_good, 0.25);
  EXPECT_DOUBLE_EQ(r[0].loss_good, 0.001);
  EXPECT_DOUBLE_EQ(r[0].loss_bad, 0.9);
  EXPECT_EQ(r[1].delay_ns, 100'000u);
  EXPECT_EQ(r[1].jitter_ns, 20'500u);
  EXPECT_FALSE(r[1].keep_order);
  EXPECT_EQ(r[2].delay_ns, 300'000u);
  EXPECT_EQ(r[3].copies, 3u);
  EXPECT_EQ(r[4].bits, 2u);
  EXPECT_FALSE(r[4].fix_udp_checksum);
  EXPECT_DOUBLE_EQ(r[5].rate_bps, 10e9);
  EXPECT_EQ(r[5].queue_bytes, 65536u);
  EXPECT_EQ(r[5].overflow, Overflow::kTrim);
  EXPECT_TRUE(r[5].lasthop);
  EXPECT_EQ(r[6].match.planes, (std::vector<int>{0, 1}));
  EXPECT_EQ(r[6].match.links, (std::vector<std::string>{"l"}));
  // rule_to_json -> parse_rule_json is the identity.
  for (const Rule& x : r) {
    Rule y;
    ASSERT_TRUE(parse_rule_json(rule_to_json(x), y, &err)) << err;
    EXPECT_EQ(rule_to_json(x), rule_to_json(y));
  }
}

TEST(Config, ErrorsNameFileLineAndKey) {
  // Unknown key: line of the key.
  std::string e = error_of("seed = 1\n[[rule]]\ntype = \"loss\"\np = 0.1\npp = 3\n");
  EXPECT_NE(e.find("t.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'pp'"), std::string::npos) << e;
  EXPECT_NE(e.find("rule[0]"), std::string::npos) << e;
  // Out of range, with the rule's name.
  e = error_of("[[rule]]\nname = \"x\"\ntype = \"loss\"\n\np = 1.5\n");
  EXPECT_NE(e.find("t.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("rule[0] (\"x\"): key 'p': must be in [0, 1]"), std::string::npos) << e;
  // Wrong type.
  e = error_of("[[rule]]\ntype = \"dup\"\np = \"often\"\n");
  EXPECT_NE(e.find("t.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("key 'p': expected a number, got a string"), std::string::npos) << e;
  // Unknown model.
  e = error_of("[[rule]]\ntype = \"teleport\"\n");
  EXPECT_NE(e.find("t.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown fault type 'teleport'"), std::string::npos) << e;
  // Missing required key.
  e = error_of("[[rule]]\ntype = \"reorder\"\np = 0.1\n");
  EXPECT_NE(e.find("needs key 'delay_us'"), std::string::npos) << e;
  // A key valid elsewhere but not for this model.
  e = error_of("[[rule]]\ntype = \"gilbert\"\np_gb = 0.1\np_bg = 0.1\ndelay_us = 5\n");
  EXPECT_NE(e.find("t.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'delay_us' for type 'gilbert'"), std::string::npos) << e;
  // Unknown opcode name.
  e = error_of("[[rule]]\ntype = \"drop\"\nopcode = [\"WRITE_MIDDLE\", \"READ_SIDEWAYS\"]\n");
  EXPECT_NE(e.find("t.toml:3:"), std::string::npos) << e;
  EXPECT_NE(e.find("READ_SIDEWAYS"), std::string::npos) << e;
  // Unknown link.
  e = error_of("[[link]]\nname = \"a\"\n[[rule]]\ntype = \"drop\"\nlink = \"b\"\n");
  EXPECT_NE(e.find("t.toml:5:"), std::string::npos) << e;
  EXPECT_NE(e.find("no link named 'b'"), std::string::npos) << e;
  // Duplicate rule names.
  e = error_of(
      "[[rule]]\nname = \"a\"\ntype = \"drop\"\n[[rule]]\nname = \"a\"\ntype = \"drop\"\n");
  EXPECT_NE(e.find("duplicate rule name 'a'"), std::string::npos) << e;
  // Bad direction, bad PSN, empty window, flap that never comes up.
  EXPECT_NE(error_of("[[rule]]\ntype = \"drop\"\ndir = \"up\"\n").find("key 'dir'"),
            std::string::npos);
  EXPECT_NE(error_of("[[rule]]\ntype = \"drop\"\npsn = 16777216\n").find("key 'psn'"),
            std::string::npos);
  EXPECT_NE(
      error_of("[[rule]]\ntype = \"drop\"\nfrom_ms = 5\nuntil_ms = 5\n").find("key 'until_ms'"),
      std::string::npos);
  EXPECT_NE(error_of("[[rule]]\ntype = \"flap\"\ndown_for_ms = 5\nperiod_ms = 5\n")
                .find("never comes up"),
            std::string::npos);
  // Unknown top-level key.
  e = error_of("sed = 1\n");
  EXPECT_NE(e.find("t.toml:1:"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'sed'"), std::string::npos) << e;
  // TOML syntax error.
  e = error_of("seed = 1\n[[rule]\n");
  EXPECT_NE(e.find("t.toml:2:"), std::string::npos) << e;
  EXPECT_NE(e.find("TOML syntax error"), std::string::npos) << e;
}

TEST(Config, JsonErrors) {
  // Syntax: nlohmann reports line and column.
  std::string e = error_of("{\n\"seed\": 1,\n\"rule\": [\n{\"type\": \"drop\",}\n]}\n", "c.json");
  EXPECT_NE(e.find("c.json: parse error at line 4"), std::string::npos) << e;
  // Semantics: no line numbers in JSON values, but the rule index and key.
  e = error_of("{\"rule\": [{\"type\": \"drop\"}, {\"type\": \"loss\", \"p\": -1}]}", "c.json");
  EXPECT_NE(e.find("c.json: rule[1]: key 'p': must be in [0, 1]"), std::string::npos) << e;
  e = error_of("{\"rule\": [{\"type\": \"drop\", \"ev\": [\"0x1g\"]}]}", "c.json");
  EXPECT_NE(e.find("key 'ev'"), std::string::npos) << e;
  Rule r;
  EXPECT_FALSE(parse_rule_json("{\"type\":\"loss\"}", r, &e));
  EXPECT_NE(e.find("needs key 'p'"), std::string::npos) << e;
  EXPECT_FALSE(parse_rule_json("{\"type\":\"loss\",", r, &e));
  EXPECT_NE(e.find("rule: parse error"), std::string::npos) << e;
  EXPECT_TRUE(parse_rule_json("{\"type\":\"blackhole\",\"ev\":[5,\"0x10\"],\"dir\":\"ba\"}", r, &e))
      << e;
  EXPECT_EQ(r.match.evs, (std::vector<uint32_t>{5, 16}));
  EXPECT_EQ(r.match.dir, Direction::kBtoA);
}

TEST(Config, OpcodeNamesAndKinds) {
  std::bitset<256> s;
  ASSERT_TRUE(parse_opcodes("write_only_imm", s));
  EXPECT_TRUE(s.test(0xCB));
  EXPECT_EQ(s.count(), 1u);
  s.reset();
  ASSERT_TRUE(parse_opcodes("data", s));
  EXPECT_EQ(s.count(), 6u);  // WRITE FIRST/MIDDLE/LAST/LAST_IMM/ONLY/ONLY_IMM
  s.reset();
  ASSERT_TRUE(parse_opcodes("control", s));
  for (int op : {0xD1, 0xD8, 0xD9, 0xDC, 0xDD, 0xDE})
    EXPECT_TRUE(s.test(static_cast<size_t>(op))) << op;
  EXPECT_FALSE(s.test(0xC7));
  s.reset();
  ASSERT_TRUE(parse_opcodes("0xDD", s));
  ASSERT_TRUE(parse_opcodes("220", s));
  EXPECT_TRUE(s.test(0xDD));
  EXPECT_TRUE(s.test(0xDC));
  EXPECT_FALSE(parse_opcodes("256", s));
  EXPECT_FALSE(parse_opcodes("nope", s));
}

}  // namespace
}  // namespace mrc::faults
