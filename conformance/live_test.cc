// What mrct check --live adds to the Checker: the verdict so far (interim) and a call on each
// violation (on_violation), neither changing the final report.
#include <gtest/gtest.h>

#include <mutex>

#include "conformance/fixtures.h"

namespace mrc::check {
namespace {

using fixtures::DataPkt;
using fixtures::Fate;
using fixtures::kUs;
using fixtures::Session;
using fixtures::Trace;

// Four messages; the second one's last packet lacks the A flag (MRC-REQ-006).
Trace failing() {
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

struct Seen {
  std::string rule;
  uint32_t point = 0;
  uint64_t frame = 0, ts = 0;
};

// Feeds the trace as fixtures::run does, calling interim() after every frame.
Report feed(const Trace& t, unsigned jobs, std::vector<Status>& req006_after,
            std::vector<Seen>& seen) {
  DutProfile prof;
  std::string e;
  EXPECT_TRUE(parse_profile(t.profile, "fixture", prof, e)) << e;
  Checker ck(prof, {}, 50, jobs);
  for (const auto& p : t.points) {
    PointInfo pi;
    pi.path = p.file;
    pi.node = p.node;
    pi.port = p.port;
    pi.attribution = "test";
    ck.add_point(pi);
  }
  std::mutex mu;
  ck.on_violation([&](std::string_view rule, uint32_t point, uint64_t frame, uint64_t ts) {
    std::lock_guard<std::mutex> lock(mu);  // jobs > 1: the judging thread calls
    seen.push_back({std::string(rule), point, frame, ts});
  });
  const std::vector<Trace::Frame> frames = t.sorted();
  std::vector<uint64_t> frame_no(t.points.size(), 0);
  uint64_t last = 0;
  for (const auto& f : frames) {
    ck.on_frame(f.point, ++frame_no[f.point], f.ts, wire::as_bytes(f.bytes));
    last = std::max(last, f.ts);
    const Report r = ck.interim();
    req006_after.push_back(r.result("MRC-REQ-006")->status);
    EXPECT_EQ(r.frames, frame_no[0] + frame_no[1]);
  }
  return ck.finish(last);
}

TEST(Live, InterimGivesTheVerdictSoFarAndLeavesTheFinalReportAlone) {
  const Trace t = failing();
  const Report plain = fixtures::run(t);
  ASSERT_EQ(fixtures::with_status(plain, Status::kFail), std::set<std::string>{"MRC-REQ-006"});
  for (unsigned jobs : {1u, 2u}) {
    SCOPED_TRACE(jobs);
    std::vector<Status> req006;
    std::vector<Seen> seen;
    const Report r = feed(t, jobs, req006, seen);
    EXPECT_EQ(fixtures::all_reports(r), fixtures::all_reports(plain));
    // Not failing at first, failing before the trace ends, and failing from then on.
    ASSERT_FALSE(req006.empty());
    EXPECT_NE(req006.front(), Status::kFail);
    const auto first = std::find(req006.begin(), req006.end(), Status::kFail);
    ASSERT_NE(first, req006.end());
    EXPECT_LT(first - req006.begin() + 1, static_cast<std::ptrdiff_t>(req006.size()));
    EXPECT_TRUE(std::all_of(first, req006.end(), [](Status s) { return s == Status::kFail; }));
    // One call, for the violation and the frame the report names.
    ASSERT_EQ(seen.size(), 1u);
    const Evidence& ev = plain.result("MRC-REQ-006")->evidence.at(0);
    EXPECT_EQ(seen[0].rule, "MRC-REQ-006");
    EXPECT_EQ(seen[0].point, ev.capture);
    EXPECT_EQ(seen[0].frame, ev.frame);
    EXPECT_EQ(seen[0].ts, ev.ts_ns);
  }
}

}  // namespace
}  // namespace mrc::check
