#include "conformance/fixtures.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "wire/samples.h"

namespace mrc::check::fixtures {

namespace {
// The tests write their captures under TempDir()/mrc_check_<pid>_*: a run leaves nothing behind.
class RemoveScratchDirs : public ::testing::Environment {
 public:
  void TearDown() override {
    namespace fs = std::filesystem;
    const std::string prefix = "mrc_check_" + std::to_string(::getpid()) + "_";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(::testing::TempDir(), ec))
      if (e.path().filename().string().rfind(prefix, 0) == 0) fs::remove_all(e.path(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kRemoveScratchDirs =
    ::testing::AddGlobalTestEnvironment(new RemoveScratchDirs);
}  // namespace

using nlohmann::json;
using wire::MessagePosition;

void Trace::add(uint32_t point, uint64_t ts, std::vector<std::byte> bytes) {
  EXPECT_FALSE(bytes.empty()) << "fixture frame failed to encode";
  frames.push_back({point, ts, std::move(bytes)});
}

std::vector<Trace::Frame> Trace::sorted() const {
  std::vector<Frame> v = frames;
  std::stable_sort(v.begin(), v.end(), [](const Frame& a, const Frame& b) { return a.ts < b.ts; });
  return v;
}

std::set<std::string> with_status(const Report& r, Status s, bool errors_only) {
  std::set<std::string> out;
  for (const auto& rr : r.results)
    if (rr.status == s && (!errors_only || rr.rule->severity == Severity::kError))
      out.insert(std::string(rr.rule->id));
  return out;
}

namespace {

std::vector<Decision> parse_decisions(const Trace& t) {
  std::vector<Decision> out;
  for (const auto& line : t.decisions) {
    Decision d;
    std::string e;
    EXPECT_TRUE(parse_decision(line, d, e)) << e << " in " << line;
    out.push_back(d);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Decision& a, const Decision& b) { return a.t_ns < b.t_ns; });
  return out;
}

}  // namespace

std::string all_reports(const Report& r) {
  std::ostringstream o;
  write_json(r, o);
  o << "\n--- junit\n";
  write_junit(r, o);
  o << "\n--- markdown\n";
  write_markdown(r, o);
  o << "\n--- human\n";
  write_human(r, o);
  o << "\n--- annotations\n";
  for (const Annotation& a : r.annotations)
    o << a.capture << " " << a.frame << " " << a.text << "\n";
  return o.str();
}

namespace {

Report run_jobs(const Trace& t, const RuleSelection& sel, unsigned jobs) {
  DutProfile prof;
  if (!t.profile.empty()) {
    std::string e;
    EXPECT_TRUE(parse_profile(t.profile, "fixture", prof, e)) << e;
  }
  const uint64_t lookahead = prof.tol.decision_lookahead_ns;
  Checker ck(prof, sel, 50, jobs);
  for (const auto& p : t.points) {
    PointInfo pi;
    pi.path = p.file;
    pi.node = p.node;
    pi.port = p.port;
    pi.attribution = p.node.empty() ? "" : "test";
    ck.add_point(pi);
  }
  auto decisions = parse_decisions(t);
  size_t di = 0;
  std::vector<uint64_t> frame_no(t.points.size(), 0);
  uint64_t last = 0;
  // Alive until finish(): the pipelined checker (jobs > 1) reads the bytes until then.
  const std::vector<Trace::Frame> frames = t.sorted();
  for (const auto& f : frames) {
    while (di < decisions.size() && decisions[di].t_ns <= f.ts + lookahead)
      ck.on_decision(decisions[di++]);
    ck.on_frame(f.point, ++frame_no[f.point], f.ts, wire::as_bytes(f.bytes));
    last = std::max(last, f.ts);
  }
  while (di < decisions.size()) ck.on_decision(decisions[di++]);
  return ck.finish(last);
}

}  // namespace

Report run(const Trace& t, const RuleSelection& sel) {
  Report r = run_jobs(t, sel, 1);
  // Every fixture also goes through the pipelined checker (mrct check -j 2): same report.
  EXPECT_EQ(all_reports(run_jobs(t, sel, 2)), all_reports(r)) << "the pipelined checker differs";
  return r;
}

Report run_files(const Trace& t, const std::string& dir, CheckOptions* used) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  CheckOptions o;
  const auto frames = t.sorted();
  for (size_t i = 0; i < t.points.size(); ++i) {
    const std::string path = dir + "/" + t.points[i].file;
    wire::CaptureWriter w;
    EXPECT_TRUE(w.open(path, wire::CaptureFormat::kPcapng)) << w.error();
    for (const auto& f : frames) {
      if (f.point != i) continue;
      EXPECT_TRUE(w.write(f.ts, wire::as_bytes(f.bytes)));
    }
    EXPECT_TRUE(w.close()) << w.error();
    CaptureInput in;
    in.path = path;
    if (t.points[i].port_on_command_line) {  // path@node:port
      in.node = t.points[i].node;
      in.port = t.points[i].port;
    }
    o.captures.push_back(in);
  }
  if (!t.profile.empty()) {
    o.profile_path = dir + "/dut.json";
    std::ofstream(o.profile_path) << t.profile;
  }
  if (!t.decisions.empty()) {
    const std::string p = dir + "/decisions.jsonl";
    std::ofstream out(p);
    for (const auto& d : t.decisions) out << d << "\n";
    o.decision_logs.push_back(p);
  }
  o.max_evidence = 50;
  Report r;
  std::string e;
  EXPECT_TRUE(check_files(o, r, e)) << e;
  // And check_files() with two threads (mrct check -j 2): the same report.
  CheckOptions o2 = o;
  o2.jobs = 2;
  Report r2;
  EXPECT_TRUE(check_files(o2, r2, e)) << e;
  EXPECT_EQ(all_reports(r2), all_reports(r)) << "check_files with jobs = 2 differs";
  if (used) *used = o;
  return r;
}

std::string profile(const std::string& top_overrides, const std::string& qp_overrides) {
  json evs = json::array();
  for (uint32_t i = 0; i < 12; ++i) evs.push_back({{"wev", 0x00050100u + i}, {"port", 1}});
  evs.push_back({{"wev", 0x00050300u}, {"port", 2}});
  json base = {{"nodes", json::array({{{"name", "h1"}, {"addrs", {"fd00::1"}}},
                                      {{"name", "h2"}, {"addrs", {"fd00::2"}}}})},
               {"captures", {{"h1-eth0.pcapng", {{"node", "h1"}, {"port", 1}}}}},
               {"qps", json::array({{{"requester", {{"addr", "fd00::1"}, {"qpn", 0x101}}},
                                     {"responder", {{"addr", "fd00::2"}, {"qpn", 0x202}}},
                                     {"ev_format", "stev"},
                                     {"pmtu", 1024},
                                     {"mpr", 8},
                                     {"mpr_dest", 8},
                                     {"max_wimm_dest", 4},
                                     {"timeout", 5},
                                     {"retry", {{"linear", 3}, {"exp", 3}}},
                                     {"initial_psn", 1000},
                                     {"evs", evs},
                                     {"denied_evs", {0x00059999}},
                                     {"max_cwnd", 1 << 20},
                                     {"capabilities", {{"trim_nack", true}}}}})},
               {"tolerances",
                {{"end_grace_ns", 200'000},
                 {"reaction_ns", 2'000},
                 {"t_ack_max_ns", 50'000},
                 {"t_probe_ns", 500'000},
                 {"t_skip_ns", 2'000'000},
                 {"dedup_window_ns", 1'000'000},
                 {"ep_timeout_ns", 1'000'000},
                 {"decision_lookahead_ns", 100'000}}}};
  json top = json::parse(top_overrides);
  for (auto it = top.begin(); it != top.end(); ++it) {
    if (it->is_null())
      base.erase(it.key());
    else
      base[it.key()] = *it;
  }
  json qp = json::parse(qp_overrides);
  if (base.contains("qps") && !base["qps"].empty())
    for (auto it = qp.begin(); it != qp.end(); ++it) {
      if (it->is_null())
        base["qps"][0].erase(it.key());
      else
        base["qps"][0][it.key()] = *it;
    }
  return base.dump(1);
}

// ---------------------------------------------------------------------------------------------
// Session
// ---------------------------------------------------------------------------------------------
Session::Session(Trace& tr, size_t n_evs) : t(tr) {
  req = *wire::parse_ipv6("fd00::1");
  rsp = *wire::parse_ipv6("fd00::2");
  for (size_t i = 0; i < n_evs; ++i) evs.push_back(0x00050100u + static_cast<uint32_t>(i));
  if (t.points.empty()) {
    t.points.push_back({"h1-eth0.pcapng", "h1", 1});
    t.points.push_back({"h2-eth0.pcapng", "h2", 0});
  }
  if (t.profile.empty()) t.profile = profile();
}

uint32_t Session::cack() const {
  // Tests may take back a PSN above the cumulative ACK (a responder that dropped it), never one
  // at or below it, so the search can start from the last answer.
  uint32_t c = cack_floor;
  while (c > 999 && !received.count(c)) --c;
  while (received.count(c + 1)) ++c;
  cack_floor = c;
  return c;
}

uint32_t Session::next_ev() {
  for (size_t k = 0; k < evs.size(); ++k) {
    const uint32_t e = evs[ev_i++ % evs.size()];
    if (!avoid.count(e)) return e;
  }
  return evs[ev_i++ % evs.size()];
}

namespace {

wire::FrameSpec base(const wire::Ipv6Addr& src, const wire::Ipv6Addr& dst, uint32_t wev,
                     uint8_t dscp, uint8_t ecn) {
  wire::FrameSpec s;
  s.has_eth = true;
  s.eth.src = {0x02, 0, 0, 0, 0, src[15]};
  s.eth.dst = {0x02, 0, 0, 0, 0, dst[15]};
  s.l3 = 6;
  s.ip6.src = src;
  s.ip6.dst = dst;
  const auto c = wire::carry_wev(wire::EvFormat::kStev, wire::EvStripe::kLowInSport, wev);
  s.ip6.flow_label = c.flow_label;
  s.ip6.dscp = dscp;
  s.ip6.ecn = ecn;
  s.has_udp = true;
  s.udp.sport = c.sport;
  s.udp.dport = wire::kRoceV2Port;
  s.roce = true;
  s.bth.pkey = 0xFFFF;
  return s;
}

}  // namespace

std::vector<std::byte> Session::data_frame(const DataPkt& p, uint64_t at, bool trimmed,
                                           bool lasthop, uint8_t ecn_override) const {
  uint8_t d =
      p.dscp >= 0 ? static_cast<uint8_t>(p.dscp) : (p.rtx ? dscp.trimmable_retx : dscp.trimmable);
  if (trimmed) d = lasthop ? dscp.trimmed_lasthop : dscp.trimmed;
  wire::FrameSpec s = base(req, rsp, p.wev, d, ecn_override != 0xFF ? ecn_override : p.ecn);
  s.ip6.flow_label |= (p.fl_high & 0xF) << 16;
  s.bth.opcode = wire::mrp0().opcode_of(wire::PacketKind::kMrcData, p.pos, p.imm);
  s.bth.dest_qp = rsp_qpn;
  s.bth.psn = p.psn;
  s.bth.ack_req = p.ack;
  s.bth.rtx = p.rtx;
  s.bth.ts = p.ts;
  s.bth.rsvd_b8_6 = p.rsvd_bit;
  s.bth.pkey = p.pkey;
  s.meth = {p.rqmsn, p.msn};
  s.tseth.ts16 = p.ts16 >= 0 ? static_cast<uint16_t>(p.ts16) : ts16_at(at);
  s.reth = {p.va, p.rkey, p.dma_len};
  s.immdt.imm = 0xfeedbeef;
  const auto& pat = wire::samples::pattern(p.len, p.seed);
  s.payload = wire::Bytes(pat.data(), pat.size());
  wire::EncodeOptions opt;
  if (trimmed) {
    s.trimmed = true;
    s.headers = wire::kHdrMeth | (p.ts ? wire::kHdrTseth : 0u);
    s.payload = {};
  } else if (p.pad >= 0) {
    opt.pad_payload = false;
    s.pad_bytes = static_cast<uint8_t>(p.pad);
  }
  return wire::encode_frame(s, opt);
}

std::vector<std::byte> Session::sack_frame(const SackPkt& k) const {
  wire::FrameSpec s =
      base(rsp, req, k.wev, k.dscp >= 0 ? static_cast<uint8_t>(k.dscp) : dscp.control, 0);
  s.bth.opcode = 0xDC;
  s.bth.dest_qp = req_qpn;
  s.bth.psn = k.psn >= 0 ? static_cast<uint32_t>(k.psn) : k.cack;
  s.seth.m = k.m;
  s.seth.pr = k.pr;
  s.seth.ack_psn_offset = k.ack_off;
  s.seth.entropy = k.entropy;
  s.seth.spdcid = static_cast<uint16_t>(rsp_qpn);
  s.seth.dpdcid = static_cast<uint16_t>(req_qpn);
  s.seth.cack_psn = k.cack;
  s.seth.mpr = k.mpr;
  s.seth.sack_offset = k.sack_offset;
  s.seth.sack_bitmap = k.bitmap;
  s.seth.psv = k.psv;
  s.seth.port_status = k.port_status;
  s.cc_state.ts_echo = k.ts_echo;
  s.cc_state.ooo_count = k.ooo;
  s.cc_state.rcvd_bytes = k.rcvd_bytes;
  return wire::encode_frame(s);
}

std::vector<std::byte> Session::nack_frame(uint32_t psn, uint8_t code, uint32_t entropy, uint8_t m,
                                           int d) const {
  wire::FrameSpec s = base(rsp, req, 0x9001, d >= 0 ? static_cast<uint8_t>(d) : dscp.control, 0);
  s.bth.opcode = 0xDD;
  s.bth.dest_qp = req_qpn;
  s.bth.psn = psn;
  s.neth.nack_code = code;
  s.neth.entropy = entropy;
  s.neth.spdcid = static_cast<uint16_t>(rsp_qpn);
  s.neth.dpdcid = static_cast<uint16_t>(req_qpn);
  s.neth.nack_psn = psn;
  s.neth.m = m;
  return wire::encode_frame(s);
}

std::vector<std::byte> Session::tack_frame(uint32_t psn, uint8_t syndrome, uint16_t m) const {
  wire::FrameSpec s = base(rsp, req, 0x9001, dscp.control, 0);
  s.bth.opcode = 0xD1;
  s.bth.dest_qp = req_qpn;
  s.bth.psn = psn;
  s.aeth.syndrome = syndrome;
  s.aeth.msn = m;
  return wire::encode_frame(s);
}

std::vector<std::byte> Session::probe_frame(uint16_t id, uint32_t wev, uint32_t psn) const {
  wire::FrameSpec s = base(req, rsp, wev, dscp.trimmable, 2);
  s.bth.opcode = 0xDE;
  s.bth.dest_qp = rsp_qpn;
  s.bth.psn = psn;
  s.bth.ack_req = true;
  s.peth.probe_id = id;
  s.peth.spdcid = static_cast<uint16_t>(req_qpn);
  s.peth.dpdcid = static_cast<uint16_t>(rsp_qpn);
  s.peth.ts16 = ts16_at(now);
  return wire::encode_frame(s);
}

void Session::send(const DataPkt& p, Fate fate) {
  sent[p.psn] = p;
  t.add(req_point, now, data_frame(p, now));
  const uint64_t at = now + one_way;
  switch (fate) {
    case Fate::kDeliver:
    case Fate::kCe: {
      const bool ce = fate == Fate::kCe;
      t.add(rsp_point, at, data_frame(p, now, false, false, ce ? 3 : 0xFF));
      received.insert(p.psn);
      rx_wev[p.psn] = p.wev;
      rx_ts16[p.psn] = p.ts16 >= 0 ? static_cast<uint16_t>(p.ts16) : ts16_at(now);
      rx_ce[p.psn] = ce;
      rx_nominal += 40 + 8 + 36 + p.len + 4;
      break;
    }
    case Fate::kTrim:
    case Fate::kTrimLastHop:
      t.add(rsp_point, at, data_frame(p, now, true, fate == Fate::kTrimLastHop));
      rx_wev[p.psn] = p.wev;
      rx_ce[p.psn] = false;
      break;
    case Fate::kCorrupt: {
      auto b = data_frame(p, now);
      b[b.size() - 10] ^= std::byte{0x5a};  // payload byte: the ICRC no longer verifies
      t.add(rsp_point, at, std::move(b));
      break;
    }
    case Fate::kDrop:
      break;
  }
}

void Session::sack(uint32_t trigger, uint8_t m, const std::function<void(SackPkt&)>& mut,
                   bool reaches_requester) {
  SackPkt k;
  k.cack = cack();
  k.ack_off = static_cast<int16_t>(static_cast<int32_t>(trigger) - static_cast<int32_t>(k.cack));
  k.entropy = rx_wev.count(trigger) ? rx_wev[trigger] : 0;
  k.m = m;
  k.ooo = 0;
  for (auto it = received.upper_bound(k.cack); it != received.end(); ++it) {
    if (*it - (k.cack + 1) < 64) k.bitmap |= uint64_t{1} << (*it - (k.cack + 1));
    ++k.ooo;
  }
  k.rcvd_bytes = static_cast<uint32_t>((rx_nominal + 255) / 256) & 0xFFFFFF;
  k.ts_echo = rx_ts16.count(trigger) ? rx_ts16[trigger] : 0;
  if (mut) mut(k);
  const auto f = sack_frame(k);
  t.add(rsp_point, now, f);
  if (reaches_requester) t.add(req_point, now + one_way, f);
}

void Session::nack(uint32_t psn, uint8_t code, uint32_t entropy, uint8_t m, int d) {
  const auto f = nack_frame(psn, code, entropy, m, d);
  t.add(rsp_point, now, f);
  t.add(req_point, now + one_way, f);
}

void Session::tack(uint32_t psn, uint8_t syndrome) {
  const auto f = tack_frame(psn, syndrome, msn);
  t.add(rsp_point, now, f);
  t.add(req_point, now + one_way, f);
}

void Session::probe(uint16_t id, uint32_t wev, bool answer, uint8_t m, uint32_t psn) {
  const auto f = probe_frame(id, wev, psn);
  t.add(req_point, now, f);
  t.add(rsp_point, now + one_way, f);
  if (!answer) return;
  const uint64_t saved = now;
  now += one_way + 1 * kUs;
  sack(0, m, [&](SackPkt& k) {
    k.pr = true;
    k.ack_off = static_cast<int16_t>(id);
    k.entropy = wev;
    k.ts_echo = ts16_at(saved);
  });
  now = saved;
}

void Session::ep_probe(uint16_t req_id, uint32_t wev, const EpOpts& o) {
  // A reverse operation goes from the responder's node to the requester's.
  const wire::Ipv6Addr& from = o.reverse ? rsp : req;
  const wire::Ipv6Addr& to = o.reverse ? req : rsp;
  const uint32_t from_point = o.reverse ? rsp_point : req_point;
  const uint32_t to_point = o.reverse ? req_point : rsp_point;
  wire::FrameSpec s = base(from, to, wev, 0, 2);
  s.bth.opcode = 0xD8;
  s.bth.dest_qp = o.dest_qp;
  s.bth.psn = req_id;
  s.erth.op = o.op;
  s.erth.ts16 = ts16_at(now);
  s.erth.port_status_mask = o.port_status_mask;
  const auto f = wire::encode_frame(s);
  t.add(from_point, now, f);
  t.add(to_point, now + one_way, f);
  for (int i = 0; i < o.responses; ++i) {
    wire::FrameSpec r = base(to, from, 0x9002,
                             o.rsp_dscp >= 0 ? static_cast<uint8_t>(o.rsp_dscp) : dscp.control, 0);
    r.bth.opcode = 0xD9;
    r.bth.dest_qp = 2;
    r.bth.psn = req_id;
    r.eeth.op = o.op;
    r.eeth.entropy = o.entropy >= 0 ? static_cast<uint32_t>(o.entropy) : wev;
    r.eeth.ts_echo = ts16_at(now);
    const auto rf = wire::encode_frame(r);
    const uint64_t at = now + one_way + (1 + static_cast<uint64_t>(i)) * kUs;
    t.add(to_point, at, rf);
    t.add(from_point, at + one_way, rf);
  }
}

void Session::write(uint32_t len, bool imm, const Mut& mut, const SackMut& sack_mut,
                    bool transport_ack) {
  const uint32_t n = std::max<uint32_t>(1, (len + pmtu - 1) / pmtu);
  const uint64_t va0 = va;
  uint32_t last = 0;
  uint64_t last_sent_at = now;
  for (uint32_t i = 0; i < n; ++i) {
    DataPkt p;
    p.psn = next_psn++;
    p.pos = n == 1 ? MessagePosition::kOnly
                   : (i == 0 ? MessagePosition::kFirst
                             : (i + 1 == n ? MessagePosition::kLast : MessagePosition::kMiddle));
    p.imm = imm && i + 1 == n;
    p.msn = msn;
    p.rqmsn = rqmsn;
    p.va = va0 + static_cast<uint64_t>(i) * pmtu;
    p.dma_len = len;
    p.len = i + 1 == n ? len - i * pmtu : pmtu;
    p.wev = next_ev();
    p.ack = i + 1 == n;
    p.seed = static_cast<uint8_t>(p.psn);
    Fate fate = Fate::kDeliver;
    if (mut) mut(i, p, fate);
    send(p, fate);
    last = p.psn;
    last_sent_at = now;
    if (fate != Fate::kDrop && fate != Fate::kTrim && fate != Fate::kTrimLastHop &&
        fate != Fate::kCorrupt) {
      const uint64_t saved = now;
      now += one_way + 1 * kUs;
      SackPkt probe_k;
      bool send_it = true;
      if (sack_mut) {
        // Let the test see and change the SACK; build it through sack() for consistency.
        sack(
            p.psn, rx_ce[p.psn] ? 1 : 0,
            [&](SackPkt& k) {
              send_it = sack_mut(i, k);
              probe_k = k;
            },
            true);
        if (!send_it) {
          // Remove the two frames just added.
          t.frames.pop_back();
          t.frames.pop_back();
        }
      } else {
        sack(p.psn, rx_ce[p.psn] ? 1 : 0);
      }
      now = saved;
    }
    now += gap;
  }
  va = va0 + len + 4096;
  msn++;
  if (imm) rqmsn++;
  if (transport_ack) {
    // The responder acknowledges placement only after the last packet (and its SACK) went out.
    now = std::max(now, last_sent_at + one_way + 2 * kUs);
    if (received.count(last) && cack() >= last) tack(last);
    now += gap;
  }
}

void Session::retransmit(uint32_t psn, uint32_t not_ev, Fate fate,
                         const std::function<void(DataPkt&)>& mut) {
  DataPkt p = sent.at(psn);
  p.rtx = true;
  p.dscp = -1;
  p.ts16 = -1;
  uint32_t e = next_ev();
  if (e == not_ev || e == p.wev) e = next_ev();
  p.wev = e;
  if (mut) mut(p);
  send(p, fate);
}

void Session::decision(uint64_t t_ns, const std::string& action, uint32_t psn, uint8_t opcode,
                       uint32_t ev) {
  json j = {{"t_ns", t_ns},
            {"link", "s1-h2"},
            {"dir", "fwd"},
            {"action", action},
            {"qpn", opcode == 0xDC || opcode == 0xDD || opcode == 0xD1 ? req_qpn : rsp_qpn},
            {"psn", psn},
            {"opcode", opcode},
            {"ev", ev},
            {"reason", "test"},
            {"seed", 1}};
  t.decisions.push_back(j.dump());
}

}  // namespace mrc::check::fixtures
