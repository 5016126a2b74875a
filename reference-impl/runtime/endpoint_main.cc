// `mrct endpoint`: the perftest-style tool (ib_write_bw-like server and client roles, plus a
// "memory" role that runs both engines in one thread without any I/O, as a baseline).
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reference-impl/runtime/control.h"
#include "reference-impl/runtime/runtime.h"
#include "reference-impl/runtime/transfer.h"

namespace mrc::runtime {
namespace {

using nlohmann::json;

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;
constexpr int kProtocolVersion = 1;

struct Options {
  std::string role;
  std::string server;
  std::vector<std::string> servers;           // node: --server A,B,...
  uint32_t clients = 0;                       // node: clients to accept
  std::vector<std::string> peer_ev_profiles;  // GID=FILE
  std::string listen = "::";
  uint16_t port = 18515;
  std::string gid;
  std::string name;
  std::vector<std::string> ifaces;
  std::vector<std::string> next_hops;
  std::string io = "packet";
  std::string size = "64K";
  uint64_t iters = 0;
  double duration_s = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 128;
  bool imm = false;
  std::string ev_format = "stev";
  std::string ev_profile;
  std::string cc_profile;
  std::string wire_profile;
  uint32_t evs = 0;
  uint32_t pmtu = 0;
  uint32_t timeout = 18;
  double probe_interval_us = 1000;
  double ep_timeout_us = 50000;
  // A first ACK timeout with the peer wholly silent waits up to this much longer: a process on a
  // shared host is regularly not scheduled for tens of ms (engine.h silent_peer_grace_ns).
  double silent_peer_grace_ms = 100;
  uint32_t sack_gap = 32;
  std::string ack_every;  // bytes with optional K/M suffix; empty = the engine's 16 KiB
  std::string cc;
  std::string retry = "7:7";
  uint32_t mpr = 8;
  uint32_t wimm = 128;
  bool json_out = false;
  std::string event_log;
  std::string pcap;
  std::string mutant = "none";
  uint64_t seed = 1;
  std::string seed_text = "1";  // a number or "random"
  bool busy_poll = false;
  bool no_rx_filter = false;
  bool no_rx_filter_ingress = false;
  bool no_rx_tap = false;
  std::string buffer_limit = "2G";
  double ctl_timeout_s = 10;
  double accept_timeout_s = 0;
  double stall_s = 30;
  uint32_t planes = 1;  // memory role
  uint32_t ring = 1024;
  uint32_t tx_ring = 0;
  uint32_t rx_coalesce_us = 100;
  bool list_mutants = false;
};

bool parse_size(const std::string& s, uint64_t& out) {
  if (s.empty()) return false;
  size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(s, &pos, 0);
  } catch (...) {
    return false;
  }
  uint64_t mult = 1;
  const std::string suffix = s.substr(pos);
  if (suffix.empty() || suffix == "B")
    mult = 1;
  else if (suffix == "K" || suffix == "KiB" || suffix == "k")
    mult = 1ull << 10;
  else if (suffix == "M" || suffix == "MiB")
    mult = 1ull << 20;
  else if (suffix == "G" || suffix == "GiB")
    mult = 1ull << 30;
  else
    return false;
  out = v * mult;
  return true;
}

bool parse_mac(const std::string& s, wire::MacAddr& out) {
  unsigned b[6];
  char extra;
  if (std::sscanf(s.c_str(), "%x:%x:%x:%x:%x:%x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5],
                  &extra) != 6)
    return false;
  for (int i = 0; i < 6; ++i) {
    if (b[i] > 255) return false;
    out[static_cast<size_t>(i)] = static_cast<uint8_t>(b[i]);
  }
  return true;
}

std::string fmt_double(double v, int prec) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

// A number as the user would have typed it ("-1", "0.5", "nan"), not std::to_string's "-1.000000".
std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

int usage_error(const std::string& prog, const std::string& msg) {
  std::fprintf(stderr, "%s: %s\n", prog.c_str(), msg.c_str());
  return kUsage;
}

// Everything the roles share once the options are checked.
struct Setup {
  Plan plan;
  wire::EvFormat format = wire::EvFormat::kStev;
  engine::EvProfile ev;
  engine::CcProfile cc;
  Mutant mutant = Mutant::kNone;
  uint64_t buffer_limit = 0;
  wire::Ipv6Addr gid{};
  std::vector<PlaneConfig> planes;
  IoKind io = IoKind::kPacket;
  bool srh = false;
  uint64_t probe_interval_ns = 1'000'000;
  uint64_t ep_timeout_ns = 50'000'000;
  uint64_t silent_peer_grace_ns = 100'000'000;
  uint32_t sack_gap = 0;         // 0: the engine's default
  uint32_t ack_every_bytes = 0;  // 0: the engine's ack_gen_trigger_bytes
  // --wire-profile: shared so that copies of the Setup keep it alive (null: MRP0).
  std::shared_ptr<const wire::WireProfile> wire_profile;
};

// NSCC scaled for software paths (veth and Linux routers in namespaces, shared CPUs): their
// unloaded RTT is tens of microseconds, but scheduling adds milliseconds that a switch queue never
// would. With the OCP constants (16 us base RTT, quick adapt at 48 us of delay) NSCC reads that
// as congestion and collapses to one MTU (README.md). `--cc nscc` restores them; cc-veth.toml is
// this profile as a file.
engine::CcProfile software_path_nscc() {
  engine::CcProfile cc;
  cc.algorithm = std::string(engine::kCcNscc);
  cc.nscc.base_rtt = 100'000;
  cc.nscc.target_delay = 2'000'000;
  cc.nscc.qa_threshold = 20'000'000;
  cc.nscc.adjust_period_threshold = 200'000;
  cc.nscc.max_cwnd = 4u << 20;
  return cc;
}

// The first 16 expanded bytes (outer DA in SRv6) of every explicit EV, by plane.
std::vector<std::vector<wire::Ipv6Addr>> plane_destinations(const engine::EvProfile& ev,
                                                            wire::EvFormat format,
                                                            const wire::Ipv6Addr& peer,
                                                            size_t nplanes) {
  std::vector<std::vector<wire::Ipv6Addr>> out(nplanes);
  if (format == wire::EvFormat::kSrv6) {
    for (const engine::EvEntry& e : ev.explicit_evs) {
      wire::EvExpandResult r = wire::expand_ev(ev.format_widths, ev.fields, e.ev);
      if (!r.ok || e.port == 0 || e.port > nplanes) continue;
      wire::Ipv6Addr da;
      std::copy_n(r.expanded.begin(), 16, da.begin());
      out[e.port - 1].push_back(da);
    }
  }
  for (auto& v : out) v.push_back(peer);
  return out;
}

// Slots per QP: every message gets its own slot when the buffer limit allows (then every
// message is verified), else the ring of slots is reused and the last message of each slot
// is verified.
// The answers that follow a peer's bulk memory work get at least this long: `welcome` (the
// server populates its buffer first) and `result` (it verifies). The other answers take a few
// engine calls and get --ctl-timeout. A server populates for at most half of it and leaves the
// rest to a thread (transfer.h, Region), so on a host where 2 GiB take 14 s the transfer still
// starts with the buffer in place, as on a quiet one.
constexpr uint64_t kBulkAnswerMinNs = 60'000'000'000ull;
uint64_t bulk_answer_ns(uint64_t ctl_to) {
  return std::max(ctl_to, kBulkAnswerMinNs);
}

Status choose_slots(Plan& plan, uint64_t limit) {
  const uint64_t per_qp_limit = limit / std::max<uint32_t>(1, plan.qps);
  uint64_t slots = per_qp_limit / plan.size;
  if (plan.iters) slots = std::min(slots, plan.iters);
  const uint64_t need = plan.iters ? std::min<uint64_t>(plan.iters, plan.tx_depth) : plan.tx_depth;
  if (slots < need)
    return Status::Error(EINVAL, "--buffer-limit " + std::to_string(limit) + " holds " +
                                     std::to_string(slots) + " messages of " +
                                     std::to_string(plan.size) + " B per QP; need at least " +
                                     std::to_string(need) + " (--tx-depth)");
  plan.slots = slots;
  return Status::Ok();
}

int prepare(const std::string& prog, const Options& o, Setup& s) {
  // Times: finite and in range (NaN passes every `x <= 0` test; inf overflows the ns casts).
  const struct {
    const char* name;
    double v;
    bool zero_ok;
    double max;
  } times[] = {{"--duration", o.duration_s, true, 1e6},
               {"--stall", o.stall_s, false, 1e6},
               {"--ctl-timeout", o.ctl_timeout_s, false, 1e6},
               {"--accept-timeout", o.accept_timeout_s, true, 1e6},
               {"--probe-interval-us", o.probe_interval_us, false, 1e9},
               {"--ep-timeout-us", o.ep_timeout_us, false, 1e9},
               {"--silent-peer-grace-ms", o.silent_peer_grace_ms, true, 1e6}};
  for (const auto& t : times) {
    if (!std::isfinite(t.v) || t.v < 0 || (!t.zero_ok && t.v == 0) || t.v > t.max)
      return usage_error(prog, std::string(t.name) + " " + shortest(t.v) +
                                   ": must be a finite number " + (t.zero_ok ? ">= 0" : "> 0") +
                                   " and at most " + std::to_string(static_cast<uint64_t>(t.max)));
  }
  if (!parse_size(o.size, s.plan.size) || s.plan.size == 0 || s.plan.size > 0xFFFFFFFFull)
    return usage_error(
        prog, "--size '" + o.size + "': give bytes with an optional K/M/G suffix, 1..4G-1");
  if (!parse_size(o.buffer_limit, s.buffer_limit))
    return usage_error(prog, "--buffer-limit '" + o.buffer_limit + "' is not a size");
  if (o.iters && o.duration_s > 0) return usage_error(prog, "give --iters or --duration, not both");
  s.plan.iters = o.duration_s > 0 ? 0 : (o.iters ? o.iters : 1000);
  s.plan.duration_ns = static_cast<uint64_t>(o.duration_s * 1e9);
  if (o.qps == 0 || o.qps > 1024) return usage_error(prog, "--qps must be 1..1024");
  s.plan.qps = o.qps;
  if (o.tx_depth == 0 || o.tx_depth > 16384)
    return usage_error(prog, "--tx-depth must be 1..16384");
  s.plan.tx_depth = o.tx_depth;
  s.plan.imm = o.imm;
  s.plan.seed = o.seed;
  if (o.timeout > engine::kMaxTimeoutExp)
    return usage_error(prog, "--timeout is the exponent t of 1.024 us * 2^t, 0.." +
                                 std::to_string(engine::kMaxTimeoutExp));
  s.plan.timeout = static_cast<uint8_t>(o.timeout);
  unsigned lin = 0, ex = 0;
  char extra;
  if (std::sscanf(o.retry.c_str(), "%u:%u%c", &lin, &ex, &extra) != 2 ||
      lin > engine::kMaxLinearRetry || ex > engine::kUnlimitedExpRetry)
    return usage_error(
        prog, "--retry '" + o.retry + "': LINEAR:EXP with LINEAR 0..7, EXP 0..25 (25 = forever)");
  s.plan.retry_linear = static_cast<uint8_t>(lin);
  s.plan.retry_exp = static_cast<uint8_t>(ex);
  if (o.mpr == 0 || o.mpr > 255) return usage_error(prog, "--mpr must be 1..255 (128-PSN units)");
  s.plan.mpr = static_cast<uint8_t>(o.mpr);
  if (o.wimm == 0 || o.wimm > 1024) return usage_error(prog, "--wimm must be 1..1024");
  s.plan.wimm = static_cast<uint16_t>(o.wimm);
  s.plan.stall_ns = static_cast<uint64_t>(o.stall_s * 1e9);
  if (o.pmtu != 0 && o.pmtu != 256 && o.pmtu != 512 && o.pmtu != 1024 && o.pmtu != 2048 &&
      o.pmtu != 4096)
    return usage_error(prog, "--pmtu must be 256, 512, 1024, 2048 or 4096");

  std::optional<wire::EvFormat> f = wire::parse_ev_format(o.ev_format);
  if (!f) return usage_error(prog, "--ev-format '" + o.ev_format + "': udp, stev or srv6");
  s.format = *f;
  if (!o.wire_profile.empty()) {
    std::string why;
    std::unique_ptr<wire::WireProfile> wp = wire::open_wire_profile(o.wire_profile, why);
    if (!wp) return usage_error(prog, "--wire-profile: " + why);
    s.wire_profile = std::move(wp);
  }
  std::optional<Mutant> m = parse_mutant(o.mutant);
  if (!m) return usage_error(prog, "--mutant '" + o.mutant + "' is unknown (see --list-mutants)");
  s.mutant = *m;
  if (s.mutant == Mutant::kExceedWimm && !o.imm)
    return usage_error(prog, "--mutant exceed-wimm needs --imm");
  std::optional<IoKind> io = parse_io_kind(o.io);
  if (!io) return usage_error(prog, "--io '" + o.io + "': packet, socket or packet-tx");
  s.io = *io;

  const size_t nplanes = o.role == "memory" ? o.planes : o.ifaces.size();
  if (o.role != "memory") {
    if (o.ifaces.empty())
      return usage_error(prog, "--ifaces IF[,IF...] is required (one interface per plane)");
    for (const std::string& i : o.ifaces) s.planes.push_back(PlaneConfig{i, std::nullopt});
    for (const std::string& nh : o.next_hops) {
      const size_t eq = nh.find('=');
      wire::MacAddr mac;
      if (eq == std::string::npos || !parse_mac(nh.substr(eq + 1), mac))
        return usage_error(prog, "--next-hop '" + nh + "': IFACE=aa:bb:cc:dd:ee:ff");
      auto it = std::find_if(s.planes.begin(), s.planes.end(),
                             [&](const PlaneConfig& p) { return p.iface == nh.substr(0, eq); });
      if (it == s.planes.end())
        return usage_error(prog,
                           "--next-hop names " + nh.substr(0, eq) + ", which is not in --ifaces");
      it->next_hop_mac = mac;
    }
    if (!o.gid.empty()) {
      std::optional<wire::Ipv6Addr> g = wire::parse_ipv6(o.gid);
      if (!g) return usage_error(prog, "--gid '" + o.gid + "' is not an IPv6 address");
      s.gid = *g;
    } else {
      std::optional<wire::Ipv6Addr> g = first_global_ipv6("lo");
      if (!g)
        return usage_error(
            prog, "no --gid given and no global IPv6 address on lo to use as the node GID");
      s.gid = *g;
    }
  } else if (nplanes == 0 || nplanes > engine::kMaxPorts) {
    return usage_error(prog, "--planes must be 1.." + std::to_string(engine::kMaxPorts));
  }
  if (nplanes > engine::kMaxPorts)
    return usage_error(prog, std::to_string(nplanes) + " interfaces; the engine supports " +
                                 std::to_string(engine::kMaxPorts) + " planes");

  Status st;
  if (!o.ev_profile.empty()) {
    st = load_ev_profile(o.ev_profile, s.format, static_cast<uint8_t>(nplanes), s.ev);
  } else {
    st = default_ev_profile(s.format, o.evs ? o.evs : static_cast<uint32_t>(4 * nplanes), s.ev);
  }
  if (!st.ok()) return usage_error(prog, st.message);
  if (o.evs && !o.ev_profile.empty() && s.ev.mode != engine::EvMode::kExplicit)
    s.ev.ev_count = o.evs;
  uint32_t fmt_bits = 0;
  for (uint32_t w : s.ev.format_widths) fmt_bits += w;
  s.srh = s.format == wire::EvFormat::kSrv6 && fmt_bits > 128;
  if (!o.cc_profile.empty()) {
    if (Status c = load_cc_profile(o.cc_profile, s.cc); !c.ok())
      return usage_error(prog, c.message);
  } else {
    s.cc = software_path_nscc();
  }
  if (!o.cc.empty()) {
    if (!o.cc_profile.empty()) return usage_error(prog, "give --cc or --cc-profile, not both");
    if (o.cc == "nscc" || o.cc == engine::kCcNscc)
      s.cc = engine::CcProfile{};  // OCP/UET constants
    else if (o.cc == "none")
      s.cc.algorithm = std::string(engine::kCcNone);
    else if (o.cc != "veth")
      return usage_error(prog, "--cc '" + o.cc + "': veth, nscc or none");
  }
  if (o.probe_interval_us <= 0) return usage_error(prog, "--probe-interval-us must be > 0");
  s.probe_interval_ns = static_cast<uint64_t>(o.probe_interval_us * 1e3);
  if (o.ep_timeout_us <= 0) return usage_error(prog, "--ep-timeout-us must be > 0");
  s.ep_timeout_ns = static_cast<uint64_t>(o.ep_timeout_us * 1e3);
  s.silent_peer_grace_ns = static_cast<uint64_t>(o.silent_peer_grace_ms * 1e6);
  s.sack_gap = o.sack_gap;
  if (!o.ack_every.empty()) {
    uint64_t v = 0;
    if (!parse_size(o.ack_every, v) || v < 1024 || v > (1u << 20))
      return usage_error(prog, "--ack-every '" + o.ack_every + "': bytes 1K..1M (K/M suffix)");
    s.ack_every_bytes = static_cast<uint32_t>(v);
  }
  return kOk;
}

// PMTU: the largest that fits every plane interface (or the one asked for, checked).
int choose_pmtu(const std::string& prog, const Options& o, Setup& s,
                const std::vector<IfaceInfo>& ifs) {
  uint32_t min_mtu = UINT32_MAX;
  std::string smallest;
  for (const IfaceInfo& i : ifs) {
    if (i.mtu < min_mtu) {
      min_mtu = i.mtu;
      smallest = i.name;
    }
  }
  if (ifs.empty()) min_mtu = 9000;
  auto fits = [&](uint32_t p) { return data_frame_bytes(p, s.format, s.srh) - 14 <= min_mtu; };
  if (o.pmtu != 0) {
    if (!fits(o.pmtu))
      return usage_error(prog, "--pmtu " + std::to_string(o.pmtu) + " needs an IP MTU of " +
                                   std::to_string(data_frame_bytes(o.pmtu, s.format, s.srh) - 14) +
                                   " B, " + smallest + " has " + std::to_string(min_mtu));
    s.plan.pmtu = o.pmtu;
    return kOk;
  }
  for (uint32_t p : {4096u, 2048u, 1024u, 512u, 256u}) {
    if (fits(p)) {
      s.plan.pmtu = p;
      return kOk;
    }
  }
  return usage_error(prog, "interface " + smallest + " MTU " + std::to_string(min_mtu) +
                               " is too small for any PMTU");
}

void mutant_banner(Mutant m) {
  if (m == Mutant::kNone) return;
  const MutantInfo& i = mutant_info(m);
  std::fprintf(stderr,
               "!!! TEST-ONLY MUTANT MODE '%.*s': %.*s. This endpoint deliberately violates %.*s "
               "and must only be used to test the conformance checker. !!!\n",
               static_cast<int>(i.name.size()), i.name.data(), static_cast<int>(i.what.size()),
               i.what.data(), static_cast<int>(i.rule.size()), i.rule.data());
  if (!i.needs.empty())
    std::fprintf(stderr, "!!! mutant '%.*s' only shows with: %.*s !!!\n",
                 static_cast<int>(i.name.size()), i.name.data(), static_cast<int>(i.needs.size()),
                 i.needs.data());
}

json qps_json(const std::vector<PeerQp>& qps) {
  json a = json::array();
  for (const PeerQp& q : qps)
    a.push_back({{"qpn", q.qpn}, {"psn", q.psn}, {"rkey", q.rkey}, {"va", q.va}});
  return a;
}

bool qps_from_json(const json& j, std::vector<PeerQp>& out) {
  if (!j.is_array()) return false;
  out.clear();
  for (const json& e : j) {
    if (!e.is_object()) return false;
    PeerQp q;
    try {
      q.qpn = e.at("qpn").get<uint32_t>();
      q.psn = e.at("psn").get<uint32_t>();
      q.rkey = e.value("rkey", 0u);
      q.va = e.value("va", uint64_t{0});
    } catch (const json::exception&) {
      return false;
    }
    out.push_back(q);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------
struct Report {
  std::string role;
  std::string mutant;
  Plan plan;
  std::string ev_format;
  size_t planes = 0;
  uint64_t bytes = 0, messages = 0;
  double seconds = 0;
  const LatencyHistogram* lat = nullptr;
  engine::QpStats qp;
  RuntimeStats rt;
  bool have_rt = false;
  VerifyResult verify;
  bool have_verify = false;
  std::string error;
  std::string peer_error;
  double cpu_s = 0;
};

json report_json(const Report& r) {
  json j;
  j["role"] = r.role;
  j["seed"] = r.plan.seed;
  j["mutant"] = r.mutant;
  j["ev_format"] = r.ev_format;
  j["planes"] = r.planes;
  j["qps"] = r.plan.qps;
  j["size"] = r.plan.size;
  j["pmtu"] = r.plan.pmtu;
  j["imm"] = r.plan.imm;
  j["bytes"] = r.bytes;
  j["messages"] = r.messages;
  j["seconds"] = r.seconds;
  const double gbps = r.seconds > 0 ? static_cast<double>(r.bytes) * 8 / r.seconds / 1e9 : 0;
  j["gbit_per_s"] = gbps;
  j["msg_per_s"] = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds : 0;
  if (r.lat != nullptr && r.lat->count() > 0) {
    j["latency_us"] = {{"min", r.lat->min() / 1e3},
                       {"p50", r.lat->quantile(0.5) / 1e3},
                       {"p90", r.lat->quantile(0.9) / 1e3},
                       {"p99", r.lat->quantile(0.99) / 1e3},
                       {"p999", r.lat->quantile(0.999) / 1e3},
                       {"max", r.lat->max() / 1e3},
                       {"mean", r.lat->mean() / 1e3}};
  }
  j["retransmissions"] = {
      {"total", r.qp.retransmits},     {"timeout", r.qp.rtx_timeout},
      {"nack", r.qp.rtx_nack},         {"sack_gap", r.qp.rtx_sack_gap},
      {"ack_wait", r.qp.rtx_ack_wait}, {"silent_peer_holds", r.qp.silent_peer_holds}};
  j["packets"] = {{"data_sent", r.qp.data_packets_sent}, {"data_rx", r.qp.data_packets_rx},
                  {"duplicates_rx", r.qp.duplicates_rx}, {"sacks_sent", r.qp.sacks_sent},
                  {"sacks_rx", r.qp.sacks_rx},           {"nacks_sent", r.qp.nacks_sent},
                  {"nacks_rx", r.qp.nacks_rx},           {"probes_sent", r.qp.probes_sent},
                  {"trimmed_rx", r.qp.trimmed_rx},       {"ce_rx", r.qp.ce_rx}};
  j["refused"] = {{"stale_rx", r.qp.stale_rx},
                  {"fatal_rejected", r.qp.fatal_rejected},
                  {"out_of_window_rx", r.qp.out_of_window_rx},
                  {"remote_access_errors", r.qp.remote_access_errors},
                  {"invalid_requests", r.qp.invalid_requests},
                  {"error_naks_sent", r.qp.error_naks_sent},
                  {"error_naks_limited", r.qp.error_naks_limited},
                  {"replies_limited", r.qp.replies_limited}};
  if (r.have_rt) {
    j["ev"] = {{"retired", r.rt.ev_to_assumed_bad},
               {"skipped", r.rt.ev_to_skip},
               {"denied", r.rt.ev_to_denied},
               {"recovered", r.rt.ev_recovered}};
    json planes = json::array();
    for (const PlaneStats& p : r.rt.planes)
      planes.push_back({{"iface", p.iface},
                        {"rx_frames", p.rx_frames},
                        {"tx_frames", p.tx_frames},
                        {"tx_errors", p.tx_errors},
                        {"tx_blocked", p.tx_blocked},
                        {"tx_no_next_hop", p.tx_no_next_hop},
                        {"rx_ring_drops", p.rx_ring_drops},
                        {"rx_truncated", p.rx_truncated},
                        {"rx_reconstructed", p.rx_reconstructed},
                        {"up", p.up},
                        {"carrier_lost", p.carrier_lost},
                        {"tx_port_down", p.tx_port_down}});
    j["ports"] = planes;
    // Every drop reason the engine counts (docs/wire-format.md 8.7 says what each refuses).
    const engine::EndpointStats& es = r.rt.endpoint;
    j["engine"] = {{"rx_frames", es.rx_frames},
                   {"rx_bad_icrc", es.rx_bad_icrc},
                   {"rx_decode_errors", es.rx_decode_errors},
                   {"rx_not_roce", es.rx_not_roce},
                   {"rx_not_for_us", es.rx_not_for_us},
                   {"rx_unknown_qp", es.rx_unknown_qp},
                   {"rx_wrong_state", es.rx_wrong_state},
                   {"rx_unexpected", es.rx_unexpected},
                   {"rx_bad_port", es.rx_bad_port},
                   {"ctrl_queue_drops", es.ctrl_queue_drops},
                   {"ep_requests_rx", es.ep_requests_rx},
                   {"ep_responses_rx", es.ep_responses_rx},
                   {"port_status_rejected", es.port_status_rejected},
                   {"port_status_unknown_peer", es.port_status_unknown_peer},
                   {"ep_responses_limited", es.ep_responses_limited},
                   {"drop_events_suppressed", es.drop_events_suppressed},
                   {"peer_state_entries", es.peer_state_entries},
                   {"tx_frames", es.tx_frames}};
    // Refused in the kernel: never seen by the engine, so not in "engine" or the QP counters.
    j["rx_filter"] = {{"on", r.rt.rx_filter},
                      {"at", !r.rt.rx_filter          ? "none"
                             : r.rt.rx_filter_ingress ? "tc-ingress"
                             : r.rt.rx_tap            ? "tap"
                                                      : "socket"},
                      {"nacks_not_outstanding", r.rt.rx_filter_nacks_not_outstanding},
                      {"duplicates", r.rt.rx_filter_duplicates},
                      {"out_of_window", r.rt.rx_filter_out_of_window},
                      {"sampled", r.rt.rx_filter_sampled},
                      {"ep_peer_limited", r.rt.rx_filter_ep_peer_limited},
                      {"ep_stranger_limited", r.rt.rx_filter_ep_stranger_limited},
                      {"publishes", r.rt.rx_filter_publishes}};
    // The receive rings are taps and tc ingress ends what they took (RuntimeConfig::rx_tap).
    j["rx_tap"] = r.rt.rx_tap;
    j["loop"] = {{"iterations", r.rt.loop_iterations},
                 {"epoll_waits", r.rt.epoll_waits},
                 {"rx_coalesce_sleeps", r.rt.rx_coalesce_sleeps},
                 {"rx_late_max_ns", r.rt.rx_late_max_ns},
                 {"rx_late_over_20ms", r.rt.rx_late_over_20ms},
                 {"timer_fires", r.rt.timer_fires},
                 {"tx_syscalls", r.rt.tx_syscalls},
                 {"cpu_s", r.rt.loop_cpu_ns / 1e9}};
    if (r.mutant != "none")
      j["mutant_frames"] = {{"changed", r.rt.mutant_changed},
                            {"added", r.rt.mutant_added},
                            {"dropped", r.rt.mutant_dropped}};
  }
  j["cpu_s"] = r.cpu_s;
  // Peak resident memory of the whole process (buffers included): a flood must not move it.
  rusage ru{};
  j["peak_rss_kib"] = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : 0;
  j["cpu_s_per_gib"] = r.bytes ? r.cpu_s / (static_cast<double>(r.bytes) / (1ull << 30)) : 0;
  if (r.have_verify) {
    j["verify"] = {{"messages_checked", r.verify.messages_checked},
                   {"messages_bad", r.verify.messages_bad},
                   {"bytes_checked", r.verify.bytes_checked},
                   {"first_bad", r.verify.first_bad}};
    if (r.plan.imm)
      j["verify"]["imm"] = {{"expected", r.verify.imm_expected},
                            {"received", r.verify.imm_received},
                            {"missing", r.verify.imm_missing},
                            {"duplicates", r.verify.imm_duplicates}};
  }
  j["error"] = r.error;
  j["peer_error"] = r.peer_error;
  return j;
}

void print_report(const Report& r) {
  const double gbps = r.seconds > 0 ? static_cast<double>(r.bytes) * 8 / r.seconds / 1e9 : 0;
  const double mps = r.seconds > 0 ? static_cast<double>(r.messages) / r.seconds / 1e6 : 0;
  std::printf("mrct endpoint %s: %s, %zu plane(s), %u QP(s), %s %" PRIu64
              " B messages, PMTU %u%s\n",
              r.role.c_str(), r.ev_format.c_str(), r.planes, r.plan.qps,
              r.plan.imm ? "WRITE_WITH_IMM" : "WRITE", r.plan.size, r.plan.pmtu,
              r.mutant != "none" ? (", MUTANT " + r.mutant).c_str() : "");
  std::printf("  %14s %10s %9s %9s %9s %9s %9s %9s %9s\n", "bytes", "messages", "seconds", "Gbit/s",
              "Mmsg/s", "p50 us", "p99 us", "p99.9 us", "max us");
  auto us = [&](double q) {
    return r.lat && r.lat->count() ? fmt_double(static_cast<double>(r.lat->quantile(q)) / 1e3, 1)
                                   : std::string("-");
  };
  std::printf(
      "  %14" PRIu64 " %10" PRIu64 " %9.3f %9.3f %9.4f %9s %9s %9s %9s\n", r.bytes, r.messages,
      r.seconds, gbps, mps, us(0.5).c_str(), us(0.99).c_str(), us(0.999).c_str(),
      r.lat && r.lat->count() ? fmt_double(static_cast<double>(r.lat->max()) / 1e3, 1).c_str()
                              : "-");
  std::printf("  retransmissions: %" PRIu64 " (timeout %" PRIu64 ", nack %" PRIu64
              ", sack_gap %" PRIu64 ", ack_wait %" PRIu64 ")\n",
              r.qp.retransmits, r.qp.rtx_timeout, r.qp.rtx_nack, r.qp.rtx_sack_gap,
              r.qp.rtx_ack_wait);
  if (r.have_rt) {
    std::printf("  EV retirements: %" PRIu64 " (skips %" PRIu64 ", denied %" PRIu64
                ", recovered %" PRIu64 ")\n",
                r.rt.ev_to_assumed_bad, r.rt.ev_to_skip, r.rt.ev_to_denied, r.rt.ev_recovered);
    uint64_t drops = 0, errs = 0;
    for (const PlaneStats& p : r.rt.planes) {
      drops += p.rx_ring_drops;
      errs += p.tx_errors + p.tx_no_next_hop;
    }
    std::printf("  frames: engine rx %" PRIu64 " (bad ICRC %" PRIu64 ") tx %" PRIu64
                ", ring drops %" PRIu64 ", tx errors %" PRIu64 "\n",
                r.rt.endpoint.rx_frames, r.rt.endpoint.rx_bad_icrc, r.rt.endpoint.tx_frames, drops,
                errs);
  }
  if (r.bytes)
    std::printf("  CPU: %.3f s, %.3f s per GiB\n", r.cpu_s,
                r.cpu_s / (static_cast<double>(r.bytes) / (1ull << 30)));
  if (r.have_verify) {
    std::printf("  data verified: %" PRIu64 "/%" PRIu64 " messages (%" PRIu64 " bytes) %s%s\n",
                r.verify.messages_checked - r.verify.messages_bad, r.verify.messages_checked,
                r.verify.bytes_checked, r.verify.messages_bad ? "MISMATCH at " : "ok",
                r.verify.first_bad.c_str());
    if (r.plan.imm)
      std::printf("  immediate data: %" PRIu64 "/%" PRIu64 " received, %" PRIu64
                  " missing, %" PRIu64 " duplicates\n",
                  r.verify.imm_received, r.verify.imm_expected, r.verify.imm_missing,
                  r.verify.imm_duplicates);
  }
  if (!r.error.empty()) std::printf("  ERROR: %s\n", r.error.c_str());
  if (!r.peer_error.empty()) std::printf("  PEER ERROR: %s\n", r.peer_error.c_str());
}

json verify_json(const VerifyResult& v) {
  return {{"messages_checked", v.messages_checked}, {"messages_bad", v.messages_bad},
          {"bytes_checked", v.bytes_checked},       {"first_bad", v.first_bad},
          {"imm_expected", v.imm_expected},         {"imm_received", v.imm_received},
          {"imm_missing", v.imm_missing},           {"imm_duplicates", v.imm_duplicates}};
}

VerifyResult verify_from_json(const json& j) {
  VerifyResult v;
  v.messages_checked = j.value("messages_checked", uint64_t{0});
  v.messages_bad = j.value("messages_bad", uint64_t{0});
  v.bytes_checked = j.value("bytes_checked", uint64_t{0});
  v.first_bad = j.value("first_bad", std::string());
  v.imm_expected = j.value("imm_expected", uint64_t{0});
  v.imm_received = j.value("imm_received", uint64_t{0});
  v.imm_missing = j.value("imm_missing", uint64_t{0});
  v.imm_duplicates = j.value("imm_duplicates", uint64_t{0});
  return v;
}

bool verify_ok(const VerifyResult& v, const Plan& p) {
  return v.messages_checked > 0 && v.messages_bad == 0 &&
         (!p.imm || (v.imm_missing == 0 && v.imm_duplicates == 0));
}

void emit(const Options& o, const Report& r) {
  if (o.json_out) {
    std::printf("%s\n", report_json(r).dump().c_str());
  } else {
    print_report(r);
  }
  std::fflush(stdout);
}

double process_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

RuntimeConfig runtime_config(const Options& o, const Setup& s, const std::string& role) {
  RuntimeConfig rc;
  rc.endpoint.name = o.name.empty() ? role : o.name;
  rc.endpoint.gid = s.gid;
  rc.endpoint.ev_format = s.format;
  rc.endpoint.profile = s.wire_profile.get();
  rc.endpoint.seed = o.seed * 1000003ull + (role == "server" ? 2 : 1);
  rc.endpoint.probe_interval_ns = s.probe_interval_ns;
  rc.endpoint.ep_request_timeout_ns = s.ep_timeout_ns;
  rc.endpoint.silent_peer_grace_ns = s.silent_peer_grace_ns;
  if (s.sack_gap) rc.endpoint.sack_gap_threshold = s.sack_gap;
  if (s.ack_every_bytes) rc.endpoint.ack_gen_trigger_bytes = s.ack_every_bytes;
  // Replies to unverifiable input, scaled for software paths like the defaults above. The
  // engine's buckets (500k duplicate/out-of-window replies and 100k endpoint responses per
  // second) describe a NIC; here every reply costs the loop a frame through the kernel, and a
  // 20k frames/s flood of duplicates or PSNs far ahead, answered one for one, cut goodput to
  // 0.05-0.12x on 2 cores (reference-impl/hostile/bench_hostile.sh). A healthy transfer needs
  // few: 0 duplicates and 0 out-of-window PSNs in a clean 6 s run, and about 50 endpoint
  // requests per second (reverse-EV probes). Probe SACKs keep the engine's bucket: their rate
  // grows with the EVs a requester has retired, one probe each per --probe-interval-us.
  rc.endpoint.reply_burst = 64;
  rc.endpoint.reply_interval_ns = 1'000'000;
  rc.endpoint.ep_reply_burst = 64;
  rc.endpoint.ep_reply_interval_ns = 1'000'000;
  rc.endpoint.ep_reply_stranger_interval_ns = 1'000'000;
  rc.planes = s.planes;
  rc.io = s.io;
  rc.rx_ring_frames = o.ring;
  rc.tx_ring_frames = o.tx_ring;
  rc.busy_poll = o.busy_poll;
  rc.rx_coalesce_ns = uint64_t{o.rx_coalesce_us} * 1000;
  rc.rx_filter = !o.no_rx_filter;
  rc.rx_filter_ingress = !o.no_rx_filter_ingress;
  rc.rx_tap = !o.no_rx_tap;
  rc.pcap_prefix = o.pcap;
  rc.event_log_path = o.event_log;
  rc.mutant = s.mutant;
  return rc;
}

// ---------------------------------------------------------------------------------------------
// Roles
// ---------------------------------------------------------------------------------------------
// The serving side's answer to an accepted hello: the plan as it settled it, and its QPs.
json welcome_msg(const Setup& s, const std::string& name, const Plan& plan,
                 const std::vector<PeerQp>& local_qps) {
  return {{"type", "welcome"},
          {"version", kProtocolVersion},
          {"gid", wire::format_ipv6(s.gid)},
          {"planes", s.planes.size()},
          {"slots", plan.slots},
          {"pmtu", plan.pmtu},
          {"max_wimm_dest", plan.wimm},
          {"mpr_dest", plan.mpr},
          {"name", name},
          {"qp", qps_json(local_qps)}};
}

// What a client's hello says beyond the transfer plan.
struct ClientHello {
  std::optional<wire::Ipv6Addr> gid;
  std::string name;
  uint64_t slots = 0;
};

// Reads a client's hello into `plan` (the side serving it: its EV format and plane count);
// returns why it is refused, empty when it is accepted.
std::string read_hello(const json& hello, const std::string& ev_format, size_t planes, Plan& plan,
                       ClientHello& out) {
  try {
    if (hello.at("version").get<int>() != kProtocolVersion) return "protocol version mismatch";
    if (hello.at("ev_format").get<std::string>() != ev_format)
      return "EV format " + hello.at("ev_format").get<std::string>() + " but the server runs " +
             ev_format;
    if (hello.at("planes").get<size_t>() != planes)
      return "client has " + std::to_string(hello.at("planes").get<size_t>()) +
             " planes, the server " + std::to_string(planes);
    out.gid = wire::parse_ipv6(hello.at("gid").get<std::string>());
    out.name = hello.value("name", std::string());
    plan.size = hello.at("size").get<uint64_t>();
    plan.iters = hello.at("iters").get<uint64_t>();
    plan.duration_ns = hello.at("duration_ns").get<uint64_t>();
    plan.qps = hello.at("qps").get<uint32_t>();
    plan.tx_depth = hello.at("tx_depth").get<uint32_t>();
    plan.imm = hello.at("imm").get<bool>();
    plan.seed = hello.at("seed").get<uint64_t>();
    plan.pmtu = std::min(plan.pmtu, hello.at("pmtu").get<uint32_t>());
    out.slots = hello.at("slots").get<uint64_t>();
  } catch (const json::exception& e) {
    return std::string("bad hello: ") + e.what();
  }
  if (!out.gid) return "bad GID";
  if (plan.size == 0 || plan.size > 0xFFFFFFFFull || plan.qps == 0 || plan.qps > 1024 ||
      plan.tx_depth == 0 || plan.tx_depth > 16384 || out.slots == 0)
    return "inconsistent transfer parameters";
  return {};
}

int run_server(const std::string& prog, const Options& o, Setup& s) {
  Status st;
  std::unique_ptr<Runtime> rt = Runtime::create(runtime_config(o, s, "server"), st);
  if (!rt) return usage_error(prog, st.message);
  if (int rc = choose_pmtu(prog, o, s, rt->ifaces()); rc != kOk) return rc;
  Fd listener;
  if (st = ControlChannel::listen(o.listen, o.port, listener); !st.ok())
    return usage_error(prog, st.message);
  if (!o.json_out)
    std::fprintf(stderr, "%s server: GID %s, %zu plane(s), waiting on control port %u\n",
                 prog.c_str(), wire::format_ipv6(s.gid).c_str(), s.planes.size(), o.port);
  ControlChannel ctl;
  if (st = ControlChannel::accept(listener, static_cast<uint64_t>(o.accept_timeout_s * 1e9), ctl);
      !st.ok())
    return usage_error(prog, st.message);
  const uint64_t ctl_to = static_cast<uint64_t>(o.ctl_timeout_s * 1e9);
  json hello;
  if (st = ctl.expect("hello", hello, ctl_to); !st.ok()) return usage_error(prog, st.message);
  auto reject = [&](const std::string& why) {
    (void)ctl.send({{"type", "error"}, {"message", why}});
    return usage_error(prog, "client " + ctl.peer() + ": " + why);
  };
  Plan& plan = s.plan;
  std::vector<PeerQp> peer_qps;
  ClientHello ch;
  if (std::string why = read_hello(hello, o.ev_format, s.planes.size(), plan, ch); !why.empty())
    return reject(why);
  const std::optional<wire::Ipv6Addr> peer_gid = ch.gid;
  const uint64_t client_slots = ch.slots;
  if (st = choose_slots(plan, s.buffer_limit); !st.ok()) return reject(st.message);
  plan.slots = std::min(plan.slots, client_slots);

  Side side(plan, false);
  side.set_populate_budget_ns(bulk_answer_ns(ctl_to) / 2);  // the client waits for `welcome`
  engine::Endpoint& ep = rt->endpoint();
  if (st = side.create(ep, s.ev, s.cc); !st.ok()) return reject(st.message);
  if (st = ctl.send(welcome_msg(s, o.name, plan, side.local_qps())); !st.ok())
    return usage_error(prog, st.message);
  json qps_msg;
  if (st = ctl.expect("qps", qps_msg, ctl_to); !st.ok()) return usage_error(prog, st.message);
  if (!qps_msg.contains("qp") || !qps_from_json(qps_msg["qp"], peer_qps) ||
      peer_qps.size() != plan.qps)
    return reject("bad 'qp' list");
  if (st = side.connect(ep, *peer_gid, peer_qps, plan.wimm); !st.ok()) return reject(st.message);
  if (st = side.post_receives(ep); !st.ok()) return reject(st.message);
  if (st = rt->resolve_next_hops(plane_destinations(s.ev, s.format, *peer_gid, s.planes.size()),
                                 3'000'000'000ull);
      !st.ok())
    return reject(st.message);
  rt->set_app([&side](engine::Endpoint& e, uint64_t now, bool& done) {
    Side* sides[] = {&side};
    dispatch_async_events(e, sides);
    return side.server_step(e, now, done);
  });
  if (st = rt->start(); !st.ok()) return reject(st.message);
  if (st = ctl.send({{"type", "ready"}}); !st.ok()) {
    rt->stop();
    return usage_error(prog, st.message);
  }
  // The transfer runs on the loop thread; the client says when it is over.
  json done_msg;
  Status done_st = ctl.expect("done", done_msg, 0);
  rt->stop();
  Report r;
  r.role = "server";
  r.mutant = std::string(mutant_info(s.mutant).name);
  r.plan = plan;
  r.ev_format = o.ev_format;
  r.planes = s.planes.size();
  r.rt = rt->stats();
  r.have_rt = true;
  r.qp = side.qp_stats(ep);
  r.cpu_s = r.rt.loop_cpu_ns / 1e9;
  r.error = side.error();
  std::vector<uint64_t> per_qp;
  if (!done_st.ok()) {
    r.error = done_st.message;
  } else {
    try {
      per_qp = done_msg.at("messages").get<std::vector<uint64_t>>();
      r.seconds = done_msg.value("seconds", 0.0);
      r.peer_error = done_msg.value("error", std::string());
    } catch (const json::exception& e) {
      r.error = std::string("bad 'done' message: ") + e.what();
    }
  }
  for (uint64_t m : per_qp) r.messages += m;
  r.bytes = r.messages * plan.size;
  if (!per_qp.empty()) {
    r.verify = side.verify(per_qp);
    r.have_verify = true;
  }
  (void)ctl.send({{"type", "result"},
                  {"verify", verify_json(r.verify)},
                  {"error", r.error},
                  {"retired", r.rt.ev_to_assumed_bad}});
  if (Status c = rt->close_outputs(); !c.ok() && r.error.empty()) r.error = c.message;
  emit(o, r);
  const bool ok =
      r.error.empty() && r.peer_error.empty() && r.have_verify && verify_ok(r.verify, plan);
  return ok ? kOk : kFailed;
}

// What a server answers a client's hello with.
struct Welcome {
  wire::Ipv6Addr gid{};
  std::string name;
  std::vector<PeerQp> peer_qps;
  uint16_t max_wimm_dest = 0;
};

// The client side of the control handshake: says hello with the plan, reads the welcome and
// settles the message slots and PMTU with the server's.
Status client_handshake(ControlChannel& ctl, const Options& o, const Setup& s, Plan& plan,
                        std::string_view mutant, uint64_t ctl_to, Welcome& out) {
  const json hello = {{"type", "hello"},
                      {"version", kProtocolVersion},
                      {"gid", wire::format_ipv6(s.gid)},
                      {"ev_format", o.ev_format},
                      {"planes", s.planes.size()},
                      {"size", plan.size},
                      {"iters", plan.iters},
                      {"duration_ns", plan.duration_ns},
                      {"qps", plan.qps},
                      {"tx_depth", plan.tx_depth},
                      {"imm", plan.imm},
                      {"seed", plan.seed},
                      {"pmtu", plan.pmtu},
                      {"slots", plan.slots},
                      {"mutant", std::string(mutant)},
                      {"name", o.name}};
  if (Status st = ctl.send(hello); !st.ok()) return st;
  json welcome;
  if (Status st = ctl.expect("welcome", welcome, bulk_answer_ns(ctl_to)); !st.ok()) return st;
  std::optional<wire::Ipv6Addr> gid;
  try {
    gid = wire::parse_ipv6(welcome.at("gid").get<std::string>());
    out.name = welcome.value("name", std::string());
    const uint64_t server_slots = welcome.at("slots").get<uint64_t>();
    if (server_slots == 0 || server_slots > plan.slots)
      return Status::Error(EPROTO,
                           "server offered " + std::to_string(server_slots) + " message slots");
    plan.slots = server_slots;  // message m goes to slot m % slots on both sides
    plan.pmtu = std::min(plan.pmtu, welcome.at("pmtu").get<uint32_t>());
    out.max_wimm_dest = welcome.at("max_wimm_dest").get<uint16_t>();
    if (!qps_from_json(welcome.at("qp"), out.peer_qps) || out.peer_qps.size() != plan.qps)
      return Status::Error(EPROTO, "server sent a bad 'qp' list");
  } catch (const json::exception& e) {
    return Status::Error(EPROTO, std::string("bad welcome from the server: ") + e.what());
  }
  if (!gid) return Status::Error(EPROTO, "server sent a bad GID");
  out.gid = *gid;
  return Status::Ok();
}

int run_client(const std::string& prog, const Options& o, Setup& s) {
  if (o.server.empty())
    return usage_error(prog, "client: --server ADDR (the server's control address) is required");
  Status st;
  std::unique_ptr<Runtime> rt = Runtime::create(runtime_config(o, s, "client"), st);
  if (!rt) return usage_error(prog, st.message);
  if (int rc = choose_pmtu(prog, o, s, rt->ifaces()); rc != kOk) return rc;
  Plan& plan = s.plan;
  if (st = choose_slots(plan, s.buffer_limit); !st.ok()) return usage_error(prog, st.message);
  // The buffer (up to --buffer-limit, every slot written with its first message) before the
  // server hears from us: filling it takes seconds on a starved host, and the server gives each
  // answer only --ctl-timeout (the cause of all-paths-down failing under load, issue 20).
  Side side(plan, true);
  if (st = side.allocate(); !st.ok()) return usage_error(prog, st.message);
  const uint64_t ctl_to = static_cast<uint64_t>(o.ctl_timeout_s * 1e9);
  ControlChannel ctl;
  if (st = ControlChannel::connect(o.server, o.port, ctl_to, ctl); !st.ok())
    return usage_error(prog, st.message);

  Welcome w;
  if (st = client_handshake(ctl, o, s, plan, mutant_info(s.mutant).name, ctl_to, w); !st.ok())
    return usage_error(prog, st.message);
  if (st = side.settle(plan); !st.ok()) return usage_error(prog, st.message);
  const std::optional<wire::Ipv6Addr> peer_gid = w.gid;
  const std::vector<PeerQp>& peer_qps = w.peer_qps;
  uint16_t max_wimm = w.max_wimm_dest;
  if (s.mutant == Mutant::kExceedWimm)
    max_wimm = static_cast<uint16_t>(std::min(4u * max_wimm, 65535u));
  // No demotion is ever accepted: the EV of a lost packet stays in the rotation and unprobed.
  if (s.mutant == Mutant::kReuseRetiredEv) s.ev.ev_min_active = engine::kEvMinActiveAll;
  Side* sidep = &side;
  engine::Endpoint& ep = rt->endpoint();
  if (st = side.create(ep, s.ev, s.cc); !st.ok()) return usage_error(prog, st.message);
  if (st = side.connect(ep, *peer_gid, peer_qps, max_wimm); !st.ok())
    return usage_error(prog, st.message);
  if (st = rt->resolve_next_hops(plane_destinations(s.ev, s.format, *peer_gid, s.planes.size()),
                                 3'000'000'000ull);
      !st.ok())
    return usage_error(prog, st.message);
  if (st = ctl.send({{"type", "qps"}, {"qp", qps_json(side.local_qps())}}); !st.ok())
    return usage_error(prog, st.message);
  json ready;
  if (st = ctl.expect("ready", ready, ctl_to); !st.ok()) return usage_error(prog, st.message);
  rt->set_app([sidep](engine::Endpoint& e, uint64_t now, bool& done) {
    Side* sides[] = {sidep};
    dispatch_async_events(e, sides);
    return sidep->client_step(e, now, done);
  });
  st = rt->run();

  Report r;
  r.role = "client";
  r.mutant = std::string(mutant_info(s.mutant).name);
  r.plan = plan;
  r.ev_format = o.ev_format;
  r.planes = s.planes.size();
  r.rt = rt->stats();
  r.have_rt = true;
  r.qp = sidep->qp_stats(ep);
  r.messages = sidep->messages_completed();
  r.bytes = sidep->bytes_completed();
  r.seconds = sidep->t_end() > sidep->t_start() ? (sidep->t_end() - sidep->t_start()) / 1e9 : 0;
  r.lat = &sidep->latency();
  r.cpu_s = r.rt.loop_cpu_ns / 1e9;
  r.error = !st.ok() ? st.message : sidep->error();
  json done_msg = {{"type", "done"},
                   {"messages", sidep->completed_per_qp()},
                   {"seconds", r.seconds},
                   {"error", r.error}};
  if (Status c = ctl.send(done_msg); !c.ok()) {
    r.peer_error = c.message;
  } else {
    json result;
    if (Status c2 = ctl.expect("result", result, bulk_answer_ns(ctl_to)); !c2.ok()) {
      r.peer_error = c2.message;
    } else {
      r.verify = verify_from_json(result.value("verify", json::object()));
      r.have_verify = true;
      r.peer_error = result.value("error", std::string());
    }
  }
  if (Status c = rt->close_outputs(); !c.ok() && r.error.empty()) r.error = c.message;
  emit(o, r);
  const bool ok =
      r.error.empty() && r.peer_error.empty() && r.have_verify && verify_ok(r.verify, plan);
  return ok ? kOk : kFailed;
}

// ---------------------------------------------------------------------------------------------
// Node: one process for every role of a host. It accepts --clients connections (responder
// side of each) and writes to every --server (requester side), all on one engine and one set of
// plane sockets: QPNs come from the one engine, so they never collide, and every frame that
// reaches the host's ports is seen by the engine that owns its QP (two processes on the same
// interfaces would each receive the other's frames and answer each other's endpoint requests).
// Each connection gets its own CQ, QPs, buffer and EV/CC profile ids. The loop runs from the
// start; the control threads change the engine only through Runtime::call().
// ---------------------------------------------------------------------------------------------
struct NodeConn {
  bool client = false;
  std::string ctl_addr;  // client: the server's control address
  std::string peer_name;
  wire::Ipv6Addr peer_gid{};
  Plan plan;
  std::unique_ptr<Side> side;
  ControlChannel ctl;
  bool active = false;    // stepped by the loop (loop thread)
  bool finished = false;  // client: transfer over (set on the loop thread, under mu)
  bool have_verify = false;
  VerifyResult verify;
  std::vector<uint64_t> per_qp;
  double seconds = 0;
  uint64_t retired = 0;  // EV retirements on this connection's QPs
  std::string error, peer_error;
};

class Node {
 public:
  Node(const std::string& prog, const Options& o, Setup& s) : prog_(prog), o_(o), s_(s) {}
  int run();

 private:
  Status load_profiles();
  const engine::EvProfile& profile_for(const wire::Ipv6Addr& gid) const;
  // side: allocated already (a client's, before its handshake), or null.
  Status add_side(NodeConn& c, const engine::EvProfile& ev, uint64_t profile_id,
                  std::unique_ptr<Side> side = nullptr);
  void serve(NodeConn& c, uint64_t profile_id);
  void write(NodeConn& c, uint64_t profile_id);
  uint64_t step(engine::Endpoint& ep, uint64_t now);
  void activate(NodeConn& c);  // loop thread

  const std::string& prog_;
  const Options& o_;
  Setup& s_;
  std::unique_ptr<Runtime> rt_;
  std::vector<std::unique_ptr<NodeConn>> conns_;  // fixed once the loop runs
  std::vector<std::pair<wire::Ipv6Addr, engine::EvProfile>> peer_profiles_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t ctl_to_ = 0;
  uint64_t conn_buffer_limit_ = 0;
  std::map<uint32_t, NodeConn*> by_qpn_;  // for the event observer (loop thread)
  std::vector<Side*> step_sides_;
};

void Node::activate(NodeConn& c) {
  c.active = true;
  for (uint32_t q : c.side->qpns()) by_qpn_[q] = &c;
}

Status Node::load_profiles() {
  for (const std::string& item : o_.peer_ev_profiles) {
    const size_t eq = item.find('=');
    std::optional<wire::Ipv6Addr> gid;
    if (eq != std::string::npos) gid = wire::parse_ipv6(item.substr(0, eq));
    if (!gid)
      return Status::Error(EINVAL, "--peer-ev-profile '" + item + "': GID=FILE with an IPv6 GID");
    engine::EvProfile ev;
    if (Status st = load_ev_profile(item.substr(eq + 1), s_.format,
                                    static_cast<uint8_t>(s_.planes.size()), ev);
        !st.ok())
      return st;
    peer_profiles_.emplace_back(*gid, std::move(ev));
  }
  return Status::Ok();
}

const engine::EvProfile& Node::profile_for(const wire::Ipv6Addr& gid) const {
  for (const auto& [g, ev] : peer_profiles_)
    if (g == gid) return ev;
  return s_.ev;
}

Status Node::add_side(NodeConn& c, const engine::EvProfile& ev, uint64_t profile_id,
                      std::unique_ptr<Side> side) {
  Status st;
  if (side) {
    st = side->settle(c.plan);
  } else {
    side = std::make_unique<Side>(c.plan, c.client);
    if (!c.client) side->set_populate_budget_ns(bulk_answer_ns(ctl_to_) / 2);  // as run_server
    st = side->allocate();
  }
  if (!st.ok()) return st;
  rt_->call([&](engine::Endpoint& ep) {
    c.side = std::move(side);
    st = c.side->create(ep, ev, s_.cc, profile_id);
  });
  return st;
}

uint64_t Node::step(engine::Endpoint& ep, uint64_t now) {
  step_sides_.clear();  // reused: no allocation per loop iteration
  for (auto& c : conns_)
    if (c->active) step_sides_.push_back(c->side.get());
  dispatch_async_events(ep, step_sides_);
  uint64_t wake = UINT64_MAX;
  for (auto& c : conns_) {
    if (!c->active) continue;
    bool done = false;
    if (!c->client) {
      c->side->server_step(ep, now, done);
      continue;
    }
    if (c->finished) continue;
    wake = std::min(wake, c->side->client_step(ep, now, done));
    if (done) {
      std::lock_guard<std::mutex> lk(mu_);
      c->finished = true;
      cv_.notify_all();
    }
  }
  return wake;
}

// Responder side of one accepted client: the server role's handshake, then wait for `done`,
// verify on the loop thread, answer `result`.
void Node::serve(NodeConn& c, uint64_t profile_id) {
  auto reject = [&](const std::string& why) {
    (void)c.ctl.send({{"type", "error"}, {"message", why}});
    c.error = "client " + c.ctl.peer() + ": " + why;
  };
  json hello;
  if (Status st = c.ctl.expect("hello", hello, ctl_to_); !st.ok()) {
    c.error = st.message;
    return;
  }
  Plan& plan = c.plan;
  plan = s_.plan;
  ClientHello ch;
  if (std::string why = read_hello(hello, o_.ev_format, s_.planes.size(), plan, ch); !why.empty())
    return reject(why);
  c.peer_name = ch.name;
  c.peer_gid = *ch.gid;
  const uint64_t client_slots = ch.slots;
  if (Status st = choose_slots(plan, conn_buffer_limit_); !st.ok()) return reject(st.message);
  plan.slots = std::min(plan.slots, client_slots);
  if (Status st = add_side(c, profile_for(c.peer_gid), profile_id); !st.ok())
    return reject(st.message);
  if (Status st = c.ctl.send(welcome_msg(s_, o_.name, plan, c.side->local_qps())); !st.ok()) {
    c.error = st.message;
    return;
  }
  json qps_msg;
  std::vector<PeerQp> peer_qps;
  if (Status st = c.ctl.expect("qps", qps_msg, ctl_to_); !st.ok()) {
    c.error = st.message;
    return;
  }
  if (!qps_msg.contains("qp") || !qps_from_json(qps_msg["qp"], peer_qps) ||
      peer_qps.size() != plan.qps)
    return reject("bad 'qp' list");
  Status st;
  rt_->call([&](engine::Endpoint& ep) {
    st = c.side->connect(ep, c.peer_gid, peer_qps, plan.wimm);
    if (st.ok()) st = c.side->post_receives(ep);
    if (st.ok()) activate(c);
  });
  if (!st.ok()) return reject(st.message);
  if (st = c.ctl.send({{"type", "ready"}}); !st.ok()) {
    c.error = st.message;
    return;
  }
  json done_msg;
  if (st = c.ctl.expect("done", done_msg, 0); !st.ok()) {
    c.error = st.message;
    return;
  }
  try {
    c.per_qp = done_msg.at("messages").get<std::vector<uint64_t>>();
    c.seconds = done_msg.value("seconds", 0.0);
    c.peer_error = done_msg.value("error", std::string());
  } catch (const json::exception& e) {
    c.error = std::string("bad 'done' message: ") + e.what();
  }
  // Every message of the client completed, so the engine placed all of it and has nothing more
  // to write into this buffer (duplicates are not placed again). The loop stops stepping the
  // side, and the check (several MB of pattern) runs here instead of holding up the loop, which
  // still serves the other connections.
  std::string side_error;
  rt_->call([&](engine::Endpoint&) {
    c.active = false;
    side_error = c.side->error();
  });
  if (!c.per_qp.empty()) {
    c.verify = c.side->verify(c.per_qp);
    c.have_verify = true;
  }
  if (c.error.empty()) c.error = side_error;
  (void)c.ctl.send({{"type", "result"}, {"verify", verify_json(c.verify)}, {"error", c.error}});
}

// Requester side towards one server: the client role's handshake, the transfer on the loop
// thread, then `done` and the server's verification.
void Node::write(NodeConn& c, uint64_t profile_id) {
  Plan& plan = c.plan;
  if (Status st = choose_slots(plan, conn_buffer_limit_); !st.ok()) {
    c.error = st.message;
    return;
  }
  // Filled before the server waits on us, as run_client does.
  auto side = std::make_unique<Side>(plan, true);
  if (Status st = side->allocate(); !st.ok()) {
    c.error = st.message;
    return;
  }
  if (Status st = ControlChannel::connect(c.ctl_addr, o_.port, ctl_to_, c.ctl); !st.ok()) {
    c.error = st.message;
    return;
  }
  Welcome w;
  if (Status st = client_handshake(c.ctl, o_, s_, plan, "none", ctl_to_, w); !st.ok()) {
    c.error = st.message;
    return;
  }
  c.peer_name = w.name;
  c.peer_gid = w.gid;
  const std::vector<PeerQp>& peer_qps = w.peer_qps;
  const uint16_t max_wimm = w.max_wimm_dest;
  if (Status st = add_side(c, profile_for(c.peer_gid), profile_id, std::move(side)); !st.ok()) {
    c.error = st.message;
    return;
  }
  Status st;
  rt_->call(
      [&](engine::Endpoint& ep) { st = c.side->connect(ep, c.peer_gid, peer_qps, max_wimm); });
  if (!st.ok()) {
    c.error = st.message;
    return;
  }
  if (st = c.ctl.send({{"type", "qps"}, {"qp", qps_json(c.side->local_qps())}}); !st.ok()) {
    c.error = st.message;
    return;
  }
  json ready;
  if (st = c.ctl.expect("ready", ready, ctl_to_); !st.ok()) {
    c.error = st.message;
    return;
  }
  rt_->call([&](engine::Endpoint&) { activate(c); });
  {
    std::unique_lock<std::mutex> lk(mu_);
    // The loop may also end on an I/O error, which notifies no one: look again now and then.
    while (!c.finished && rt_->running()) cv_.wait_for(lk, std::chrono::milliseconds(100));
  }
  std::vector<uint64_t> per_qp;
  rt_->call([&](engine::Endpoint&) {
    per_qp = c.side->completed_per_qp();
    c.error = c.side->error();
    const Side& x = *c.side;
    c.seconds = x.t_end() > x.t_start() ? (x.t_end() - x.t_start()) / 1e9 : 0;
  });
  if (!c.finished && c.error.empty()) c.error = "the event loop ended before the transfer";
  json done_msg = {
      {"type", "done"}, {"messages", per_qp}, {"seconds", c.seconds}, {"error", c.error}};
  if (st = c.ctl.send(done_msg); !st.ok()) {
    c.peer_error = st.message;
    return;
  }
  json result;
  if (st = c.ctl.expect("result", result, bulk_answer_ns(ctl_to_)); !st.ok()) {
    c.peer_error = st.message;
    return;
  }
  c.verify = verify_from_json(result.value("verify", json::object()));
  c.have_verify = true;
  c.peer_error = result.value("error", std::string());
}

int Node::run() {
  if (o_.servers.empty() && o_.clients == 0)
    return usage_error(prog_, "node: give --server ADDR[,ADDR...] and/or --clients N (N >= 1)");
  if (Status st = load_profiles(); !st.ok()) return usage_error(prog_, st.message);
  const size_t nconn = o_.servers.size() + o_.clients;
  if (nconn > 64) return usage_error(prog_, "node: at most 64 connections");
  conn_buffer_limit_ = s_.buffer_limit / nconn;
  ctl_to_ = static_cast<uint64_t>(o_.ctl_timeout_s * 1e9);
  RuntimeConfig rc = runtime_config(o_, s_, "node");
  // Engines of different nodes must not draw the same PSNs: the GID goes into the seed.
  uint64_t gid_lo = 0;
  for (size_t i = 8; i < 16; ++i) gid_lo = (gid_lo << 8) | s_.gid[i];
  rc.endpoint.seed = o_.seed * 1000003ull + 3 + gid_lo * 0x9E3779B97F4A7C15ull;
  Status st;
  rt_ = Runtime::create(rc, st);
  if (!rt_) return usage_error(prog_, st.message);
  if (int r = choose_pmtu(prog_, o_, s_, rt_->ifaces()); r != kOk) return r;
  // Next hops: the destinations of every profile (SRv6 outer DAs); peers are not known yet,
  // so a plane without such a route falls back to its gateway route or only neighbour.
  {
    std::vector<std::vector<wire::Ipv6Addr>> dsts(s_.planes.size());
    auto add = [&](const engine::EvProfile& ev) {
      auto d = plane_destinations(ev, s_.format, s_.gid, s_.planes.size());
      for (size_t p = 0; p < d.size(); ++p)
        dsts[p].insert(dsts[p].end(), d[p].begin(), d[p].end() - 1);
    };
    add(s_.ev);
    for (const auto& pp : peer_profiles_) add(pp.second);
    if (st = rt_->resolve_next_hops(dsts, 3'000'000'000ull); !st.ok())
      return usage_error(prog_, st.message);
  }
  Fd listener;
  if (o_.clients > 0) {
    if (st = ControlChannel::listen(o_.listen, o_.port, listener); !st.ok())
      return usage_error(prog_, st.message);
  }
  for (size_t k = 0; k < nconn; ++k) {
    auto c = std::make_unique<NodeConn>();
    c->client = k < o_.servers.size();
    if (c->client) {
      c->ctl_addr = o_.servers[k];
      c->plan = s_.plan;
      // A different pattern per connection: data written to the wrong peer's buffer or the
      // wrong connection's slots does not verify.
      c->plan.seed = s_.plan.seed * 1000003ull + gid_lo * 131 + k + 1;
    }
    conns_.push_back(std::move(c));
  }
  rt_->set_event_observer([this](const engine::Event& e) {
    if (e.kind != engine::EventKind::kEvState) return;
    const engine::EventField* to = e.find("to");
    if (to == nullptr || to->s != engine::ev_state_name(engine::EvState::kAssumedBad)) return;
    auto it = by_qpn_.find(e.qpn);
    if (it != by_qpn_.end()) ++it->second->retired;
  });
  rt_->set_app([this](engine::Endpoint& ep, uint64_t now, bool&) { return step(ep, now); });
  if (st = rt_->start(); !st.ok()) return usage_error(prog_, st.message);
  if (!o_.json_out)
    std::fprintf(stderr,
                 "%s node %s: GID %s, %zu plane(s), %u client(s) to accept, %zu "
                 "server(s) to write to\n",
                 prog_.c_str(), o_.name.c_str(), wire::format_ipv6(s_.gid).c_str(),
                 s_.planes.size(), o_.clients, o_.servers.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < o_.servers.size(); ++k)
    threads.emplace_back([this, k] { write(*conns_[k], k + 1); });
  std::thread acceptor([&] {
    for (size_t k = o_.servers.size(); k < nconn; ++k) {
      NodeConn& c = *conns_[k];
      if (Status a = ControlChannel::accept(
              listener, static_cast<uint64_t>(o_.accept_timeout_s * 1e9), c.ctl);
          !a.ok()) {
        for (size_t j = k; j < nconn; ++j) conns_[j]->error = a.message;
        return;
      }
      threads.emplace_back([this, k] { serve(*conns_[k], k + 1); });
    }
  });
  acceptor.join();
  for (std::thread& t : threads) t.join();
  rt_->stop();

  const RuntimeStats rst = rt_->stats();
  engine::Endpoint& ep = rt_->endpoint();
  json out;
  out["role"] = "node";
  out["name"] = o_.name;
  out["ev_format"] = o_.ev_format;
  out["planes"] = s_.planes.size();
  json conns = json::array();
  bool ok = true;
  uint64_t bytes = 0;
  std::string first_error;
  for (auto& cp : conns_) {
    NodeConn& c = *cp;
    Report r;
    r.role = c.client ? "client" : "server";
    r.mutant = "none";
    r.plan = c.plan;
    r.ev_format = o_.ev_format;
    r.planes = s_.planes.size();
    if (c.side) {
      r.qp = c.side->qp_stats(ep);
      if (c.client) {
        r.messages = c.side->messages_completed();
        r.bytes = c.side->bytes_completed();
        r.lat = &c.side->latency();
      }
    }
    if (!c.client) {
      for (uint64_t m : c.per_qp) r.messages += m;
      r.bytes = r.messages * c.plan.size;
    }
    r.seconds = c.seconds;
    r.verify = c.verify;
    r.have_verify = c.have_verify;
    r.error = c.error;
    r.peer_error = c.peer_error;
    json j = report_json(r);
    j["peer"] = c.peer_name;
    j["peer_gid"] = wire::format_ipv6(c.peer_gid);
    if (c.client) j["server"] = c.ctl_addr;
    j["ev"] = {{"retired", c.retired}};
    conns.push_back(j);
    const bool conn_ok =
        r.error.empty() && r.peer_error.empty() && r.have_verify && verify_ok(r.verify, c.plan);
    if (!conn_ok && first_error.empty())
      first_error = (c.client ? "to " : "from ") +
                    (c.peer_name.empty() ? c.ctl_addr : c.peer_name) + ": " +
                    (!r.error.empty()        ? r.error
                     : !r.peer_error.empty() ? r.peer_error
                                             : "not verified");
    ok &= conn_ok;
    if (c.client) bytes += r.bytes;
  }
  out["connections"] = conns;
  Report node;
  node.role = "node";
  node.rt = rst;
  node.have_rt = true;
  json nj = report_json(node);
  for (const char* k : {"ev", "ports", "engine", "loop"}) out[k] = nj[k];
  out["bytes"] = bytes;
  out["cpu_s"] = rst.loop_cpu_ns / 1e9;
  if (Status c = rt_->close_outputs(); !c.ok() && first_error.empty()) first_error = c.message;
  out["error"] = first_error;
  if (o_.json_out) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("mrct endpoint node %s: %zu connection(s)\n", o_.name.c_str(), conns_.size());
    for (const json& j : conns)
      std::printf("  %s %s: %s messages, %s, verified %s/%s%s%s\n",
                  j["role"].get<std::string>().c_str(), j["peer"].get<std::string>().c_str(),
                  j["messages"].dump().c_str(),
                  (fmt_double(j["gbit_per_s"].get<double>(), 3) + " Gbit/s").c_str(),
                  j.contains("verify") ? j["verify"]["messages_checked"].dump().c_str() : "-",
                  j.contains("verify") ? j["verify"]["messages_bad"].dump().c_str() : "-",
                  j["error"].get<std::string>().empty() ? "" : " ERROR: ",
                  j["error"].get<std::string>().c_str());
  }
  std::fflush(stdout);
  return ok && first_error.empty() ? kOk : kFailed;
}

int run_node(const std::string& prog, const Options& o, Setup& s) {
  Node n(prog, o, s);
  return n.run();
}

// Both engines in this thread, frames handed over directly: the cost of the engine alone.
int run_memory(const std::string& prog, const Options& o, Setup& s) {
  if (s.mutant != Mutant::kNone)
    return usage_error(prog, "--mutant needs real interfaces (server/client)");
  s.plan.pmtu = o.pmtu ? o.pmtu : 4096;
  Plan& plan = s.plan;
  if (Status st = choose_slots(plan, s.buffer_limit); !st.ok())
    return usage_error(prog, st.message);
  auto make_cfg = [&](uint8_t node) {
    engine::EndpointConfig c;
    c.name = node == 1 ? "client" : "server";
    c.gid = wire::Ipv6Addr{0xfd, 0, 0, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, node};
    c.ev_format = s.format;
    c.seed = o.seed * 1000003ull + node;
    c.probe_interval_ns = s.probe_interval_ns;
    c.ep_request_timeout_ns = s.ep_timeout_ns;
    c.silent_peer_grace_ns = s.silent_peer_grace_ns;
    if (s.sack_gap) c.sack_gap_threshold = s.sack_gap;
    if (s.ack_every_bytes) c.ack_gen_trigger_bytes = s.ack_every_bytes;
    for (uint32_t p = 1; p <= o.planes; ++p) {
      engine::PortConfig pc;
      pc.mac = {0x02, 0, 0, 0, node, static_cast<uint8_t>(p)};
      pc.next_hop_mac = {0x02, 0, 0, 0, static_cast<uint8_t>(3 - node), static_cast<uint8_t>(p)};
      c.ports.push_back(pc);
    }
    return c;
  };
  std::unique_ptr<engine::Endpoint> a, b;
  try {
    a = std::make_unique<engine::Endpoint>(make_cfg(1));
    b = std::make_unique<engine::Endpoint>(make_cfg(2));
  } catch (const std::exception& e) {
    return usage_error(prog, std::string("engine configuration: ") + e.what());
  }
  Side client(plan, true), server(plan, false);
  Status st;
  if (st = client.create(*a, s.ev, s.cc); !st.ok()) return usage_error(prog, st.message);
  if (st = server.create(*b, s.ev, s.cc); !st.ok()) return usage_error(prog, st.message);
  if (st = client.connect(*a, b->config().gid, server.local_qps(), plan.wimm); !st.ok())
    return usage_error(prog, st.message);
  if (st = server.connect(*b, a->config().gid, client.local_qps(), plan.wimm); !st.ok())
    return usage_error(prog, st.message);
  if (st = server.post_receives(*b); !st.ok()) return usage_error(prog, st.message);

  uint64_t retired = 0;
  a->set_event_sink([&](const engine::Event& e) {
    if (e.kind != engine::EventKind::kEvState) return;
    const engine::EventField* to = e.find("to");
    if (to && to->s == engine::ev_state_name(engine::EvState::kAssumedBad)) ++retired;
  });
  const double cpu0 = process_cpu_s();
  engine::TxPacket pkt;
  bool done = false;
  uint64_t frames = 0;
  while (!done) {
    const uint64_t now = monotonic_ns();
    Side* client_sides[] = {&client};
    Side* server_sides[] = {&server};
    dispatch_async_events(*a, client_sides);
    dispatch_async_events(*b, server_sides);
    client.client_step(*a, now, done);
    bool server_done = false;
    server.server_step(*b, now, server_done);
    bool moved = false;
    for (int round = 0; round < 64; ++round) {
      bool any = false;
      while (a->poll_tx(now, pkt)) {
        b->on_packet(wire::as_bytes(pkt.frame), pkt.port, now);
        any = true;
        ++frames;
      }
      while (b->poll_tx(now, pkt)) {
        a->on_packet(wire::as_bytes(pkt.frame), pkt.port, now);
        any = true;
        ++frames;
      }
      if (!any) break;
      moved = true;
    }
    if (a->next_deadline_ns() <= now) a->on_timer(now);
    if (b->next_deadline_ns() <= now) b->on_timer(now);
    (void)moved;
  }
  bool server_done = false;
  server.server_step(*b, monotonic_ns(), server_done);
  const double cpu = process_cpu_s() - cpu0;
  Report r;
  r.role = "memory";
  r.mutant = "none";
  r.plan = plan;
  r.ev_format = o.ev_format;
  r.planes = o.planes;
  r.qp = client.qp_stats(*a);
  engine::QpStats srv = server.qp_stats(*b);
  r.qp.data_packets_rx = srv.data_packets_rx;
  r.qp.sacks_sent = srv.sacks_sent;
  r.messages = client.messages_completed();
  r.bytes = client.bytes_completed();
  r.seconds = client.t_end() > client.t_start() ? (client.t_end() - client.t_start()) / 1e9 : 0;
  r.lat = &client.latency();
  r.cpu_s = cpu;
  r.error = client.error().empty() ? server.error() : client.error();
  r.verify = server.verify(client.completed_per_qp());
  r.have_verify = true;
  r.rt.ev_to_assumed_bad = retired;
  emit(o, r);
  return r.error.empty() && verify_ok(r.verify, plan) ? kOk : kFailed;
}

}  // namespace

int endpoint_main(int argc, char** argv) {
  // How messages name the tool: "mrct endpoint" (mrct passes that as argv[0]) or
  // "mrc_endpoint", never "mrct endpoint endpoint".
  std::string prog = argc > 0 && argv[0] != nullptr ? argv[0] : "mrct endpoint";
  if (const size_t slash = prog.rfind('/'); slash != std::string::npos) prog.erase(0, slash + 1);
  if (prog.size() < 8 || prog.compare(prog.size() - 8, 8, "endpoint") != 0) prog += " endpoint";
  Options o;
  CLI::App app{
      "MRC endpoint over real interfaces, like perftest's ib_write_bw.\n"
      "  server: waits for one client on the control port, receives and verifies the data.\n"
      "  client: connects to --server, writes --iters messages (or for --duration) per QP.\n"
      "  node: every role of a host in one process: accepts --clients N and writes to every\n"
      "        --server A,B,... (incast, all-to-all).\n"
      "  memory: both engines in one thread without I/O (the engine's own cost).\n"
      "Needs root (AF_PACKET / raw sockets). Exit: 0 ok, 1 transfer or verification failed, 2 bad "
      "options or setup.",
      "endpoint"};
  app.add_option("role", o.role, "server | client | node | memory")
      ->check(CLI::IsMember({"server", "client", "node", "memory"}));
  app.add_option("--server", o.servers,
                 "client: the server's control address (loopback or namespace address); node: "
                 "the servers to write to, comma-separated")
      ->delimiter(',');
  app.add_option("--clients", o.clients, "node: clients to accept on the control port")
      ->capture_default_str();
  app.add_option("--peer-ev-profile", o.peer_ev_profiles,
                 "GID=FILE: EV profile for the connection with that peer (default --ev-profile)");
  app.add_option("--listen", o.listen, "server: control address to listen on")
      ->capture_default_str();
  app.add_option("--port", o.port, "control TCP port")->capture_default_str();
  app.add_option("--gid", o.gid, "this node's GID (IPv6); default: the first global address on lo");
  app.add_option("--name", o.name, "node name in the event log (default: the role)");
  app.add_option("--ifaces", o.ifaces, "plane interfaces, port n = n-th interface")->delimiter(',');
  app.add_option("--next-hop", o.next_hops,
                 "IFACE=MAC: fixed next hop of a plane (default: from the kernel)");
  app.add_option("--io", o.io,
                 "packet (AF_PACKET), socket (raw IPv6 + UDP sockets) or packet-tx (AF_PACKET "
                 "transmit, UDP socket receive)")
      ->capture_default_str();
  app.add_option("--size", o.size, "message size, bytes with optional K/M/G suffix")
      ->capture_default_str();
  app.add_option("--iters", o.iters, "messages per QP (default 1000)");
  app.add_option("--duration", o.duration_s, "seconds to run instead of --iters");
  app.add_option("--qps", o.qps, "queue pairs")->capture_default_str();
  app.add_option("--tx-depth", o.tx_depth, "outstanding messages per QP")->capture_default_str();
  app.add_flag("--imm", o.imm, "RDMA WRITE_WITH_IMM (immediate = message index) instead of WRITE");
  app.add_option("--ev-format", o.ev_format, "udp | stev | srv6")->capture_default_str();
  app.add_option("--ev-profile", o.ev_profile, "EV profile (TOML)");
  app.add_option("--cc-profile", o.cc_profile, "CC profile (TOML)");
  app.add_option("--wire-profile", o.wire_profile,
                 "wire profile: MRP0 or a file (TOML, docs/wire-format.md section 19): UDP port, "
                 "EV stripe, header bits, cc_type ... (sent to and received on its first port)");
  app.add_option("--cc", o.cc,
                 "congestion control without a profile file: veth (default: NSCC scaled for "
                 "software paths, see cc-veth.toml), nscc (OCP/UET constants) or none");
  app.add_option("--probe-interval-us", o.probe_interval_us,
                 "reliability-probe interval of ASSUMED_BAD EVs (must exceed the path RTT)")
      ->capture_default_str();
  app.add_option("--evs", o.evs, "generated EVs per QP (default 4 per plane)");
  app.add_option("--ep-timeout-us", o.ep_timeout_us,
                 "timeout of the engine's own endpoint requests (reverse-EV probes)")
      ->capture_default_str();
  app.add_option("--silent-peer-grace-ms", o.silent_peer_grace_ms,
                 "a packet's first ACK timeout waits up to this much longer while the peer has "
                 "said nothing on the QP for T/2 or more (a descheduled peer process, not a "
                 "failed path); 0 = every timeout at T")
      ->capture_default_str();
  app.add_option("--sack-gap", o.sack_gap,
                 "SACKed PSNs above a hole that make it a loss (0 = the engine's 3)")
      ->capture_default_str();
  app.add_option("--ack-every", o.ack_every,
                 "responder: one coalesced SACK per this many data bytes received (K/M "
                 "suffix, 1K..1M; default 16K, the engine's ACK_Gen_Trigger); a message's last "
                 "packet and retransmissions are acknowledged at once regardless");
  app.add_option("--pmtu", o.pmtu,
                 "path MTU 256..4096 (default: the largest the interfaces carry)");
  app.add_option("--timeout", o.timeout, "QP timeout exponent t: 1.024 us * 2^t")
      ->capture_default_str();
  app.add_option("--retry", o.retry, "LINEAR:EXP retry counts (EXP 25 = forever)")
      ->capture_default_str();
  app.add_option("--mpr", o.mpr, "MPR window in 128-PSN units")->capture_default_str();
  app.add_option("--wimm", o.wimm, "server: max WRITE_WITH_IMM in flight it accepts")
      ->capture_default_str();
  app.add_flag("--json", o.json_out, "print the results as one JSON object");
  app.add_option("--event-log", o.event_log, "engine events as JSON lines");
  app.add_option("--pcap", o.pcap, "capture each port into PREFIX-<iface>.pcap");
  app.add_option("--mutant", o.mutant, "TEST ONLY: break one rule on purpose (--list-mutants)");
  app.add_flag("--list-mutants", o.list_mutants, "list the mutant modes and exit");
  app.add_option("--seed", o.seed_text,
                 "engine and data pattern seed, or \"random\" (printed in the result). The "
                 "same seed gives the same QPNs (the first is 256), start PSNs, rkeys and data "
                 "in every run")
      ->capture_default_str();
  app.add_flag("--busy-poll", o.busy_poll, "spin instead of sleeping (burns a core)");
  app.add_option("--rx-coalesce-us", o.rx_coalesce_us,
                 "after an iteration that received 4 frames or more, sleep this long before "
                 "looking again instead of being woken by each frame (0: woken by each)")
      ->check(CLI::Range(0u, 1000u))
      ->capture_default_str();
  app.add_flag("--no-rx-filter-ingress", o.no_rx_filter_ingress,
               "io packet: run the kernel receive filter on the receive rings, not at tc "
               "ingress (refused frames then still take the IPv6/UDP receive path; for "
               "comparison)");
  app.add_flag("--no-rx-tap", o.no_rx_tap,
               "io packet: bind the receive rings to IPv6 (served after tc ingress, beside the "
               "IPv6/UDP receive every frame then also takes) instead of as taps whose frames "
               "tc ingress ends (for comparison)");
  app.add_flag("--no-rx-filter", o.no_rx_filter,
               "io packet: no kernel receive filter (duplicates and PSNs beyond the window reach "
               "the engine; for comparison)");
  app.add_option("--buffer-limit", o.buffer_limit, "bytes of message buffer per side")
      ->capture_default_str();
  app.add_option("--ctl-timeout", o.ctl_timeout_s,
                 "seconds to wait for the control peer (at least 60 for the answers that follow "
                 "its buffer work: welcome, result)")
      ->capture_default_str();
  app.add_option("--accept-timeout", o.accept_timeout_s,
                 "server: seconds to wait for a client (0 = forever)");
  app.add_option("--stall", o.stall_s, "client: fail after this many seconds without a completion")
      ->capture_default_str();
  app.add_option("--planes", o.planes, "memory role: number of planes")->capture_default_str();
  app.add_option("--ring", o.ring, "receive ring frames per plane")->capture_default_str();
  app.add_option("--tx-ring", o.tx_ring,
                 "packet, packet-tx: transmit ring (PACKET_TX_RING) frames, e.g. 1024; 0: sendmmsg")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kOk : kUsage;
  }
  if (o.seed_text == "random") {
    std::random_device rd;
    o.seed = (uint64_t{rd()} << 32) ^ rd();
    std::fprintf(stderr, "%s: --seed random: %llu\n", prog.c_str(),
                 static_cast<unsigned long long>(o.seed));
  } else {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(o.seed_text.c_str(), &end, 10);
    if (o.seed_text.empty() || !std::isdigit(static_cast<unsigned char>(o.seed_text[0])) ||
        *end != '\0' || errno == ERANGE)
      return usage_error(prog, "--seed '" + o.seed_text + "': a number 0..2^64-1 or random");
    o.seed = v;
  }
  if (o.list_mutants) {
    for (const MutantInfo& m : mutant_table())
      std::printf("%-18.*s %-12.*s %-7s %.*s%s%.*s\n", static_cast<int>(m.name.size()),
                  m.name.data(), static_cast<int>(m.rule.size()), m.rule.data(),
                  m.responder ? "server" : "client", static_cast<int>(m.what.size()), m.what.data(),
                  m.needs.empty() ? "" : "; needs ", static_cast<int>(m.needs.size()),
                  m.needs.data());
    return kOk;
  }
  if (o.role.empty())
    return usage_error(prog, "give a role: server, client, node or memory (--help)");
  if (o.role == "client") {
    if (o.servers.size() > 1)
      return usage_error(prog, "client: one --server; use the node role for several");
    if (!o.servers.empty()) o.server = o.servers[0];
  }
  Setup s;
  if (int rc = prepare(prog, o, s); rc != kOk) return rc;
  if (s.mutant != Mutant::kNone && o.role == "node")
    return usage_error(prog, "--mutant needs the server or client role");
  if (s.mutant != Mutant::kNone && o.role != "memory") {
    // The client is only a requester and the server only a responder here.
    const MutantInfo& mi = mutant_info(s.mutant);
    if (mi.responder != (o.role == "server"))
      return usage_error(prog, "--mutant " + std::string(mi.name) + " acts on what the " +
                                   (mi.responder ? "responder" : "requester") +
                                   " sends; give it to the " +
                                   (mi.responder ? "server" : "client"));
  }
  mutant_banner(s.mutant);
  if (o.role == "server") return run_server(prog, o, s);
  if (o.role == "client") return run_client(prog, o, s);
  if (o.role == "node") return run_node(prog, o, s);
  return run_memory(prog, o, s);
}

}  // namespace mrc::runtime
