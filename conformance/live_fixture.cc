// live_fixture DIR: writes two checker fixtures for the --live test (live_netns_test.sh) as
// capture files, one pcapng per host interface plus the DUT profile:
//   DIR/good: conforming RDMA WRITEs (several messages, WriteIMM, an EV probe);
//   DIR/bad:  the same with the last packet of one message missing its A flag (MRC-REQ-006, a
//             violation that no replay timing can hide or cause).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "conformance/fixtures.h"

namespace {

using mrc::check::fixtures::DataPkt;
using mrc::check::fixtures::Fate;
using mrc::check::fixtures::kUs;
using mrc::check::fixtures::Session;
using mrc::check::fixtures::Trace;

Trace make(bool bad) {
  Trace t;
  Session s(t);
  for (int round = 0; round < 20; ++round) {
    s.write(3000);
    s.write(100, true);
    s.write(2048, false, [&](size_t i, DataPkt& p, Fate&) {
      if (bad && round == 10 && i == 1) p.ack = false;
    });
    s.advance(50 * kUs);
  }
  s.ep_probe(5, 0x00050103);
  s.advance(20 * kUs);
  s.write(2048);
  return t;
}

bool dump(const Trace& t, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const auto frames = t.sorted();
  for (size_t i = 0; i < t.points.size(); ++i) {
    mrc::wire::CaptureWriter w;
    if (!w.open(dir + "/" + t.points[i].file, mrc::wire::CaptureFormat::kPcapng)) {
      std::fprintf(stderr, "live_fixture: %s\n", w.error().c_str());
      return false;
    }
    for (const auto& f : frames)
      if (f.point == i && !w.write(f.ts, mrc::wire::as_bytes(f.bytes))) return false;
    if (!w.close()) return false;
  }
  std::ofstream(dir + "/dut.json") << t.profile;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: live_fixture DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  return dump(make(false), dir + "/good") && dump(make(true), dir + "/bad") ? 0 : 1;
}
