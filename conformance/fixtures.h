// Test fixtures for mrc_check: crafted MRP0 traces, built with the codec's encode_frame().
//
// A Session models a conforming requester (h1, fd00::1) and responder (h2, fd00::2) on one QP,
// captured at both hosts' interfaces (h1-eth0, h2-eth0). Tests let it produce a clean exchange
// and then perturb exactly one thing, so that a failing trace violates exactly one rule.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "conformance/check.h"
#include "wire/wire.h"

namespace mrc::check::fixtures {

inline constexpr uint64_t kUs = 1000;

struct Trace {
  struct Point {
    std::string file;  // capture file name, e.g. "h1-eth0.pcapng"
    std::string node;  // attribution for the in-memory run ("" none)
    uint8_t port = 0;
    bool port_on_command_line = false;  // run_files passes node and port as path@node:port
  };
  struct Frame {
    uint32_t point = 0;
    uint64_t ts = 0;
    std::vector<std::byte> bytes;
  };
  std::string profile;  // DUT profile JSON ("" none)
  std::vector<Point> points;
  std::vector<Frame> frames;
  std::vector<std::string> decisions;  // JSON lines

  void add(uint32_t point, uint64_t ts, std::vector<std::byte> bytes);
  std::vector<Frame> sorted() const;  // by time, stable
};

// Every report the checker writes (JSON, JUnit, Markdown, human) and the annotations, as one text:
// two runs gave the same report when these are equal.
std::string all_reports(const Report& r);

// Runs the checker on the trace in memory (Checker API), on one thread and pipelined on two
// (jobs = 2), and expects the same report from both.
Report run(const Trace& t, const RuleSelection& sel = {});
// Writes the trace as pcapng files, profile and decision log into `dir` and runs check_files
// (also with jobs = 2, expecting the same report).
// Capture attribution comes from the file names (<node>-eth0) and the profile's nodes.
Report run_files(const Trace& t, const std::string& dir, CheckOptions* used = nullptr);

// Rule ids with the given status (e.g. failing error-level rules).
std::set<std::string> with_status(const Report& r, Status s, bool errors_only = false);

enum class Fate { kDeliver, kDrop, kTrim, kTrimLastHop, kCe, kCorrupt };

struct DataPkt {
  uint32_t psn = 0;
  wire::MessagePosition pos = wire::MessagePosition::kOnly;
  bool imm = false;
  uint16_t msn = 0, rqmsn = 0;
  uint64_t va = 0;
  uint32_t rkey = 0xabc001;
  uint32_t dma_len = 0;
  uint32_t len = 0;
  uint32_t wev = 0;
  bool rtx = false;
  bool ack = false;
  bool ts = true;
  int ts16 = -1;  // -1: from the send time
  int dscp = -1;  // -1: TRIMMABLE, or TRIMMABLE_RETX when rtx
  uint8_t ecn = 2;
  uint16_t pkey = 0xFFFF;
  bool rsvd_bit = false;  // BTH byte 8 bit 6
  uint32_t fl_high = 0;   // extra flow-label bits 19:16
  uint8_t seed = 0;       // payload pattern
  int pad = -1;           // -1: codec pads; else force this pad count (no pad bytes fixed)
};

struct SackPkt {
  uint32_t cack = 0;
  int16_t ack_off = 0;
  uint32_t entropy = 0;
  uint8_t m = 0;
  bool pr = false;
  uint64_t bitmap = 0;
  int16_t sack_offset = 1;
  uint8_t mpr = 0;
  uint16_t ts_echo = 0;
  uint16_t ooo = 0;
  uint32_t rcvd_bytes = 0;
  int dscp = -1;
  int psn = -1;             // BTH.PSN override
  uint32_t wev = 0x9001;    // reverse-path EV
  bool psv = false;         // port_status valid
  uint8_t port_status = 0;  // bit i: responder port i+1 usable
};

class Session {
 public:
  explicit Session(Trace& t, size_t n_evs = 8);

  Trace& t;
  wire::Ipv6Addr req{}, rsp{};
  uint32_t req_qpn = 0x000101, rsp_qpn = 0x000202;
  uint32_t pmtu = 1024;
  wire::DscpPlan dscp{};
  uint32_t req_point = 0, rsp_point = 1;
  uint64_t now = 1'000'000;  // 1 ms
  uint64_t one_way = 3 * kUs;
  uint64_t gap = 10 * kUs;  // between packets

  // Requester.
  uint32_t next_psn = 1000;
  uint16_t msn = 0, rqmsn = 0;
  uint64_t va = 0x100000;
  std::vector<uint32_t> evs;
  size_t ev_i = 0;
  std::set<uint32_t> avoid;  // EVs the requester currently does not use
  std::map<uint32_t, DataPkt> sent;

  // Responder.
  std::set<uint32_t> received;
  std::map<uint32_t, uint32_t> rx_wev;  // PSN -> WEV of the last delivered transmission
  std::map<uint32_t, uint16_t> rx_ts16;
  std::map<uint32_t, bool> rx_ce;
  uint64_t rx_nominal = 0;
  mutable uint32_t cack_floor = 999;  // cack is never below this (received only grows)
  uint32_t cack() const;

  uint32_t next_ev();
  uint16_t ts16_at(uint64_t at) const { return static_cast<uint16_t>(at / 128); }

  // Frames. `at` is the send time at the sender's capture.
  std::vector<std::byte> data_frame(const DataPkt& p, uint64_t at, bool trimmed = false,
                                    bool lasthop = false, uint8_t ecn_override = 0xFF) const;
  std::vector<std::byte> sack_frame(const SackPkt& s) const;
  std::vector<std::byte> nack_frame(uint32_t psn, uint8_t code, uint32_t entropy, uint8_t m = 0,
                                    int dscp = -1) const;
  std::vector<std::byte> tack_frame(uint32_t psn, uint8_t syndrome = 0x1F, uint16_t msn = 0) const;
  std::vector<std::byte> probe_frame(uint16_t id, uint32_t wev, uint32_t psn = 0) const;

  // Send a data packet now (requester capture) and deliver it per fate (responder capture).
  void send(const DataPkt& p, Fate fate = Fate::kDeliver);
  // Responder: SACK triggered by `trigger` now (responder capture), arriving one_way later.
  void sack(uint32_t trigger, uint8_t m = 0, const std::function<void(SackPkt&)>& mut = {},
            bool reaches_requester = true);
  void nack(uint32_t psn, uint8_t code, uint32_t entropy, uint8_t m = 0, int dscp = -1);
  void tack(uint32_t psn, uint8_t syndrome = 0x1F);
  // Reliability probe on `wev`, answered (PR=1 SACK with `m`) when `answer`.
  void probe(uint16_t id, uint32_t wev, bool answer = true, uint8_t m = 0, uint32_t psn = 0);
  // Endpoint operation (EV probe by default) from requester to responder, with its response.
  struct EpOpts {
    uint32_t dest_qp = 2;
    int responses = 1;
    int rsp_dscp = -1;
    int entropy = -1;               // EETH.entropy override
    uint8_t op = 1;                 // 1 EV_PROBE, 0 PORT_STATUS_UPDATE
    bool reverse = false;           // from the responder's node to the requester's
    uint32_t port_status_mask = 0;  // ERTH (requests); bit N: port N usable
  };
  void ep_probe(uint16_t req_id, uint32_t wev, const EpOpts& o);
  void ep_probe(uint16_t req_id, uint32_t wev) { ep_probe(req_id, wev, EpOpts{}); }

  // A conforming message of `len` bytes: one packet per PMTU on rotating EVs, each delivered
  // and SACKed, then a transport ACK. `mut` may change packet i and its fate before it is sent,
  // and `sack_mut` the SACK it triggers (return false to send no SACK for it).
  using Mut = std::function<void(size_t i, DataPkt&, Fate&)>;
  using SackMut = std::function<bool(size_t i, SackPkt&)>;
  void write(uint32_t len, bool imm = false, const Mut& mut = {}, const SackMut& sack_mut = {},
             bool transport_ack = true);
  // Retransmit PSN p now (RTX=1, DSCP TRIMMABLE_RETX) on the next EV other than `not_ev`.
  void retransmit(uint32_t psn, uint32_t not_ev = 0, Fate fate = Fate::kDeliver,
                  const std::function<void(DataPkt&)>& mut = {});
  void advance(uint64_t ns) { now += ns; }
  void decision(uint64_t t_ns, const std::string& action, uint32_t psn, uint8_t opcode,
                uint32_t ev);
};

// The DUT profile used by the sessions, with overrides merged in (a JSON object text whose
// top-level keys replace the base ones; "qp" keys replace keys of qps[0]).
std::string profile(const std::string& top_overrides = "{}",
                    const std::string& qp_overrides = "{}");

}  // namespace mrc::check::fixtures
