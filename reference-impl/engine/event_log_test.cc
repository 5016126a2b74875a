// Event log: JSON-lines formatting and field handling.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "reference-impl/engine/engine.h"

namespace mrc::engine {
namespace {

TEST(EventLog, FormatsOneJsonObjectPerLine) {
  Event e;
  e.kind = EventKind::kEvState;
  e.t_ns = 123456789;
  e.qpn = 0x101;
  e.u("wev", 0xDEADBEEF).s("from", "GOOD").s("to", "ASSUMED_BAD").i("delta", -3).d("ratio", 0.5);
  std::string out;
  append_event_json(out, e, "node-a");
  EXPECT_EQ(out,
            "{\"t_ns\":123456789,\"node\":\"node-a\",\"kind\":\"ev_state\",\"qpn\":257,"
            "\"wev\":3735928559,\"from\":\"GOOD\",\"to\":\"ASSUMED_BAD\",\"delta\":-3,"
            "\"ratio\":0.5}\n");
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["kind"], "ev_state");
  EXPECT_EQ(j["wev"], 3735928559u);
}

TEST(EventLog, EscapesStringsAndReplacesNonFiniteNumbers) {
  Event e;
  e.kind = EventKind::kDrop;
  e.s("reason", "a\"b\\c\n\x01").d("x", 1.0 / 0.0);
  std::string out;
  append_event_json(out, e, "n\"1");
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["node"], "n\"1");
  EXPECT_EQ(j["reason"], "a\"b\\c\n\x01");
  EXPECT_TRUE(j["x"].is_null());
}

TEST(EventLog, FieldsBeyondTheCapacityAreDroppedNotOverflowed) {
  Event e;
  for (size_t k = 0; k < kMaxEventFields + 3; ++k) e.u("f", k);
  EXPECT_EQ(e.nfields, kMaxEventFields);
  EXPECT_EQ(e.find("f")->u, 0u);
  EXPECT_EQ(e.find("missing"), nullptr);
  EXPECT_EQ(event_kind_name(EventKind::kRetransmit), "retransmit");
}

}  // namespace
}  // namespace mrc::engine
