// Parser, matcher and player, unit-tested against the in-process reference (no namespaces).
#include "conformance/scripts/scripts.h"

#include <gtest/gtest.h>

namespace mrc::scripts {
namespace {

Script parse_ok(std::string_view text) {
  Script s;
  ParseError e;
  EXPECT_TRUE(parse_script(text, "t.mrcs", s, e)) << e.format();
  return s;
}

ParseError parse_err(std::string_view text) {
  Script s;
  ParseError e;
  EXPECT_FALSE(parse_script(text, "t.mrcs", s, e));
  return e;
}

TEST(ScriptParse, HeaderAndStatements) {
  const Script s = parse_ok(
      "rules MRC-RSP-009\ntags ci-fast sack\nmtu 1024\n"
      "send WRITE_ONLY psn=$psn len=64\n"
      "+0..1ms expect SACK cack=$psn offset=0 entropy=$e\n");
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.setup.rules, std::vector<std::string>{"MRC-RSP-009"});
  ASSERT_EQ(s.statements.size(), 2u);
  EXPECT_EQ(s.statements[1].window_hi_ns, 1'000'000u);
}

}  // namespace
}  // namespace mrc::scripts
