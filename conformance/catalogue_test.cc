#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "conformance/internal.h"

namespace mrc::check {
namespace {

// The ids in RuleIdx order, spelled out independently of the table.
std::vector<std::string> expected_ids() {
  std::vector<std::string> ids;
  auto area = [&](const char* a, int n) {
    for (int i = 1; i <= n; ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "MRC-%s-%03d", a, i);
      ids.push_back(buf);
    }
  };
  area("FRM", 13);
  area("EV", 13);
  area("REQ", 15);
  area("RSP", 14);
  area("PRB", 8);
  area("CC", 2);
  return ids;
}

TEST(Catalogue, IdsFollowRuleIdxOrder) {
  const auto want = expected_ids();
  const auto cat = rule_catalogue();
  ASSERT_EQ(cat.size(), want.size());
  ASSERT_EQ(cat.size(), static_cast<size_t>(detail::kRuleCount));
  for (size_t i = 0; i < cat.size(); ++i) EXPECT_EQ(cat[i].id, want[i]) << "row " << i;
  EXPECT_EQ(cat[detail::REQ_004].id, "MRC-REQ-004");
  EXPECT_EQ(cat[detail::CC_002].id, "MRC-CC-002");
}

TEST(Catalogue, RowsAreWellFormed) {
  const std::set<std::string> tags = {"API", "PAPER", "TP", "UET", "IBTA", "RFC", "PROP"};
  const std::regex ref("R([1-9]|[1-4][0-9]|5[0-2])");
  std::set<std::string_view> ids;
  for (const auto& r : rule_catalogue()) {
    EXPECT_TRUE(ids.insert(r.id).second) << "duplicate " << r.id;
    EXPECT_FALSE(r.statement.empty()) << r.id;
    EXPECT_LT(r.statement.size(), 260u) << r.id << ": one line";
    EXPECT_EQ(r.statement.find('\n'), std::string_view::npos) << r.id;
    EXPECT_FALSE(r.capture_points.empty()) << r.id;
    const auto src = split_words(r.sources);
    EXPECT_FALSE(src.empty()) << r.id;
    for (auto t : src) EXPECT_TRUE(tags.count(std::string(t))) << r.id << ": tag " << t;
    const auto refs = split_words(r.refs);
    EXPECT_FALSE(refs.empty()) << r.id;
    for (auto x : refs) EXPECT_TRUE(std::regex_match(std::string(x), ref)) << r.id << ": " << x;
    EXPECT_EQ(find_rule(r.id), &r);
  }
  EXPECT_EQ(find_rule("MRC-XYZ-001"), nullptr);
}

TEST(Catalogue, EveryResearchRuleIsCovered) {
  std::set<std::string> refs;
  for (const auto& r : rule_catalogue())
    for (auto x : split_words(r.refs)) refs.insert(std::string(x));
  for (int i = 1; i <= 52; ++i) {
    std::string id = "R";  // not "R" + to_string(): GCC 12 -O3 warns falsely (-Wrestrict)
    id += std::to_string(i);
    EXPECT_TRUE(refs.count(id)) << id;
  }
}

TEST(Catalogue, RulesJsonHasTheContractFields) {
  std::ostringstream o;
  print_rules(o, true);
  const auto j = nlohmann::json::parse(o.str());
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), rule_catalogue().size());
  for (const auto& r : j) {
    for (const char* k : {"id", "statement", "source", "severity", "side", "refs", "capture_points",
                          "capability", "implemented", "tolerance"})
      EXPECT_TRUE(r.contains(k)) << k;
    EXPECT_TRUE(r["refs"].is_array());
    EXPECT_TRUE(r["source"].is_array());
  }
  EXPECT_EQ(j[0]["id"], "MRC-FRM-001");
  EXPECT_EQ(j[0]["refs"][0], "R1");
  std::ostringstream t;
  print_rules(t, false);
  EXPECT_NE(t.str().find("MRC-RSP-004"), std::string::npos);
  // Every catalogued rule has an evaluator: none is listed as catalogued only.
  EXPECT_EQ(t.str().find("(catalogued, not run)"), std::string::npos) << t.str();
}

TEST(Catalogue, EveryRuleHasAnEvaluator) {
  for (const auto& r : rule_catalogue())
    EXPECT_TRUE(r.implemented) << r.id << " is catalogued only";
}

// docs/rules.md is generated from the catalogue. Regenerate with MRC_UPDATE_GOLDEN=1.
TEST(Catalogue, RulesMarkdownIsCurrent) {
  const std::string path = std::string(MRC_SOURCE_DIR) + "/docs/rules.md";
  const std::string want = rules_markdown();
  if (std::getenv("MRC_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << want;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << path << " is missing; run this test with MRC_UPDATE_GOLDEN=1";
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), want) << path << " is stale; rerun this test with MRC_UPDATE_GOLDEN=1";
  for (const auto& r : rule_catalogue()) EXPECT_NE(want.find(std::string(r.id)), std::string::npos);
}

// Every research rule a catalogue row names has its own section in docs/rule-sources.md, the
// target of the links in docs/rules.md and in the reports.
TEST(Catalogue, EveryRefResolvesToARuleSource) {
  std::ifstream in(std::string(MRC_SOURCE_DIR) + "/docs/rule-sources.md", std::ios::binary);
  ASSERT_TRUE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  size_t refs = 0;
  for (const auto& r : rule_catalogue()) {
    for (auto ref : split_words(r.refs)) {
      ++refs;
      EXPECT_EQ(ref_anchor(ref), "rule-sources.md#r" + std::string(ref.substr(1))) << r.id;
      // A Markdown heading "### R6" is the anchor #r6.
      EXPECT_NE(doc.find("\n### " + std::string(ref) + "\n"), std::string::npos)
          << r.id << ": " << ref << " has no section in docs/rule-sources.md";
    }
  }
  EXPECT_GT(refs, 60u);
  EXPECT_NE(rules_markdown().find("[R6](rule-sources.md#r6)"), std::string::npos);
}

}  // namespace
}  // namespace mrc::check
