// A small synthetic run for the viewer's tests, built frame by frame with mrc::wire so that
// every expected count is known by construction: two QP flows, three EVs on two planes, PSNs
// that wrap at 2^24, a drop and a trim, SACKs (one answering a probe), a NACK, a transport ACK,
// and frames outside any flow. Written with an event log, a decision log and a checker report.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace mrc::view::testing {

inline constexpr uint32_t kEvA = 0xE0010001;  // plane 1
inline constexpr uint32_t kEvB = 0xE0010002;  // plane 1
inline constexpr uint32_t kEvC = 0xE0020001;  // plane 2
inline constexpr uint32_t kResponderQpn = 0x11;
inline constexpr uint32_t kRequesterQpn = 0x22;
inline constexpr uint32_t kFirstPsn = 0xFFFFFD;  // psn k = kFirstPsn + k mod 2^24
inline constexpr uint32_t kPayload = 1024;

struct SyntheticRun {
  std::string dir, capture, events, decisions, report;
  std::map<std::string, uint32_t> frame;  // 0-based capture index by name
  std::map<std::string, uint64_t> t_ns;   // capture time by the same names
};

// Writes the run into `dir` (created). Throws std::runtime_error on failure.
SyntheticRun write_synthetic_run(const std::string& dir, bool with_logs = true);

}  // namespace mrc::view::testing
