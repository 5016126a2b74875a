// What the engine fuzz targets and their corpus generator share: one connection between node a
// (requester) and node b (responder) set up the same way in every process, the responder's
// region at a fixed address behind guard bytes and inaccessible pages, the input record format,
// and the checks on what the engine transmits.
//
// Same calls in the same order give the same QPNs, PSNs, keys and EVs (everything comes from the
// endpoints' seeded PRNGs), and the fixed region gives the same RETH addresses, so frames the
// generator records from a simulated transfer are valid input for a target's fresh endpoints.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "wire/wire.h"

namespace mrc::engine::fuzz {

inline constexpr uint64_t kSeed = 0x5EED;
inline constexpr uint8_t kPorts = 2;
inline constexpr uint32_t kMtu = 1024;
inline constexpr uint32_t kMessages = 4;  // the last one WRITE_WITH_IMM
inline constexpr uint32_t kMessageBytes = 4 * kMtu;
inline constexpr uint32_t kTransferBytes = kMessages * kMessageBytes;
inline constexpr uint32_t kPackets = kTransferBytes / kMtu;
inline constexpr uint64_t kRegionAddr = 0x3f0000000000ull;  // page aligned
inline constexpr size_t kGuardBytes = 4096;
inline constexpr uint8_t kGuardByte = 0xA5;
inline constexpr uint64_t kStartNs = 1'000'000;

[[noreturn]] inline void die(const char* what) {
  std::fprintf(stderr, "engine fuzz: %s\n", what);
  std::abort();
}

inline wire::Ipv6Addr gid(int node) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[14] = 0x0f;
  a[15] = static_cast<uint8_t>(node + 1);
  return a;
}

inline uint8_t pattern(size_t i) {
  return static_cast<uint8_t>((i * 131 + (i >> 9)) & 0xFF);
}

struct Pair {
  std::unique_ptr<Endpoint> ep[2];
  uint32_t cq[2] = {0, 0};
  uint32_t qpn[2] = {0, 0};
  uint32_t sq_psn[2] = {0, 0};
};

inline void check(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "engine fuzz: %s: %s\n", what, s.message.c_str());
    std::abort();
  }
}

// One side of the connection: node n's endpoint with its QP created. Split in two steps because
// each side's RTR needs the other side's QPN and first PSN.
inline void create_side(Pair& p, int n) {
  EndpointConfig c;
  c.name = n == 0 ? "a" : "b";
  c.gid = gid(n);
  c.seed = kSeed + static_cast<uint64_t>(n);
  c.ev_format = wire::EvFormat::kStev;
  for (uint8_t port = 1; port <= kPorts; ++port) {
    PortConfig pc;
    pc.mac = {0x02, 0, 0, 0, static_cast<uint8_t>(n + 1), port};
    pc.next_hop_mac = {0x02, 0, 0, 0, 0xEE, port};
    c.ports.push_back(pc);
  }
  p.ep[n] = std::make_unique<Endpoint>(c);
  check(p.ep[n]->create_cq(4096, p.cq[n]), "create_cq");
  EvProfile ev;
  ev.mode = EvMode::kGenerated;
  ev.format_widths = {16, 16};
  ev.fields = {wire::EvField{16, 0x1000, 0, 0xFF, 0x00FF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  ev.ev_count = 8;
  ev.active_count = 4;
  ev.ev_min_active = 2;
  check(p.ep[n]->add_ev_profile(1, ev), "add_ev_profile");
  CcProfile cc;  // NSCC: its code is reachable from the input too
  check(p.ep[n]->add_cc_profile(1, cc), "add_cc_profile");
  QpInitAttr init;
  init.send_cq = init.recv_cq = p.cq[n];
  init.cap.max_send_wr = 64;
  init.cap.max_recv_wr = 64;
  init.cap.max_send_sge = 2;
  check(p.ep[n]->create_qp(init, p.qpn[n]), "create_qp");
  p.sq_psn[n] = p.ep[n]->random_psn();
}

// Takes node n's QP to RTS toward the peer described in p (qpn / sq_psn of 1 - n). Short timeout
// and a finite retry budget so that inputs reach retransmission and retry exhaustion.
inline void connect_side(Pair& p, int n) {
  const int peer = 1 - n;
  QpAttr at;
  MrcQpAttr m;
  at.qp_state = QpState::kInit;
  at.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
  m.ev_profile_id = 1;
  m.cc_profile_id = 1;
  check(p.ep[n]->modify_qp(p.qpn[n], at, kQpState | kQpAccessFlags, m,
                           kMrcEvProfileId | kMrcCcProfileId | kMrcHint),
        "INIT");
  at.qp_state = QpState::kRtr;
  at.dgid = gid(peer);
  at.dest_qp_num = p.qpn[peer];
  at.rq_psn = p.sq_psn[peer];
  at.path_mtu = kMtu;
  m.max_wimm_dest = 4;
  m.mpr_dest = 2;
  m.cap = kCapDynamicMpr;
  check(p.ep[n]->modify_qp(p.qpn[n], at, kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu, m,
                           kMrcMaxWimmDest | kMrcMprDest | kMrcCap),
        "RTR");
  at.qp_state = QpState::kRts;
  at.sq_psn = p.sq_psn[n];
  m.max_wimm = 4;
  m.mpr = 2;
  m.retry.linear_cnt = 3;
  m.retry.exp_cnt = 3;
  m.timeout = 4;
  check(p.ep[n]->modify_qp(p.qpn[n], at, kQpState | kQpSqPsn, m,
                           kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout),
        "RTS");
}

// Both endpoints, connected, in RTS.
inline void make_pair(Pair& p) {
  create_side(p, 0);
  create_side(p, 1);
  connect_side(p, 0);
  connect_side(p, 1);
}

// Only node n's endpoint, connected to the peer it would have in make_pair (the peer's QPN and
// first PSN come from one throwaway pair per process). What a fuzz target needs, at half the cost.
inline void make_side(Pair& p, int n) {
  static const Pair ids = [] {
    Pair t;
    create_side(t, 0);
    create_side(t, 1);
    Pair out;
    for (int k = 0; k < 2; ++k) {
      out.qpn[k] = t.qpn[k];
      out.sq_psn[k] = t.sq_psn[k];
    }
    return out;
  }();
  create_side(p, n);
  p.qpn[1 - n] = ids.qpn[1 - n];
  p.sq_psn[1 - n] = ids.sq_psn[1 - n];
  connect_side(p, n);
}

// The responder's region: [no-access page][guard][kTransferBytes][guard][no-access page], with
// the region starting at kRegionAddr. Mapped once per process.
class FixedRegion {
 public:
  FixedRegion() {
    const size_t page = 4096;
    const size_t inner = kGuardBytes + kTransferBytes + kGuardBytes;
    total_ = page + inner + page;
    void* want = reinterpret_cast<void*>(static_cast<uintptr_t>(kRegionAddr - kGuardBytes - page));
    void* got = ::mmap(want, total_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (got != want) die("cannot map the responder region at its fixed address");
    base_ = static_cast<uint8_t*>(got);
    if (::mprotect(base_, page, PROT_NONE) != 0 ||
        ::mprotect(base_ + page + inner, page, PROT_NONE) != 0)
      die("mprotect");
    guard_lo_ = base_ + page;
    guard_hi_ = guard_lo_ + kGuardBytes + kTransferBytes;
    std::memset(guard_lo_, kGuardByte, kGuardBytes);
    std::memset(guard_hi_, kGuardByte, kGuardBytes);
  }
  uint8_t* data() { return guard_lo_ + kGuardBytes; }
  bool guards_intact() const {
    static const std::vector<uint8_t> want(kGuardBytes, kGuardByte);
    return std::memcmp(guard_lo_, want.data(), kGuardBytes) == 0 &&
           std::memcmp(guard_hi_, want.data(), kGuardBytes) == 0;
  }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* guard_lo_ = nullptr;
  uint8_t* guard_hi_ = nullptr;
  size_t total_ = 0;
};

// b: the region and one receive WQE for the WRITE_WITH_IMM.
inline void prepare_responder(Pair& p, FixedRegion& region, MemoryRegion& mr) {
  check(p.ep[1]->register_mr(region.data(), kTransferBytes, kAccessLocalWrite | kAccessRemoteWrite,
                             mr),
        "register_mr b");
  check(p.ep[1]->post_recv(p.qpn[1], RecvWr{100, {}}), "post_recv");
}

// The remote key b will hand out for its region: the same PRNG draws on a throwaway pair.
inline uint32_t responder_rkey() {
  static const uint32_t rkey = [] {
    Pair p;
    make_side(p, 1);
    MemoryRegion mr;
    static uint8_t scratch[1];
    check(p.ep[1]->register_mr(scratch, 1, kAccessLocalWrite | kAccessRemoteWrite, mr), "rkey");
    return mr.rkey;
  }();
  return rkey;
}

// The requester's source bytes (a pattern), built once per process.
inline const std::vector<uint8_t>& source_bytes() {
  static const std::vector<uint8_t> src = [] {
    std::vector<uint8_t> v(kTransferBytes);
    for (size_t i = 0; i < v.size(); ++i) v[i] = pattern(i);
    return v;
  }();
  return src;
}

// a: the transfer, kMessages writes of source_bytes() into b's region.
inline void post_transfer(Pair& p, MemoryRegion& mr) {
  const std::vector<uint8_t>& src = source_bytes();
  // The engine only reads local memory registered without REMOTE_WRITE.
  void* addr = const_cast<uint8_t*>(src.data());
  check(p.ep[0]->register_mr(addr, src.size(), kAccessLocalWrite, mr), "register_mr a");
  const uint32_t rkey = responder_rkey();
  for (uint32_t k = 0; k < kMessages; ++k) {
    const Sge sge{mr.addr + uint64_t{k} * kMessageBytes, kMessageBytes, mr.lkey};
    std::optional<uint32_t> imm;
    if (k + 1 == kMessages) imm = 0xC0DE;
    check(p.ep[0]->post_write(p.qpn[0], 1 + k, {&sge, 1}, kRegionAddr + uint64_t{k} * kMessageBytes,
                              rkey, imm, true),
          "post_write");
  }
}

// ---------------------------------------------------------------------------------------------
// Input: a sequence of records [ctl][len hi][len lo][frame bytes]
// ---------------------------------------------------------------------------------------------
// ctl bit 0: port (1 or 2); bits 1-3: time advance before the frame in 500 ns steps, scaled by
// 16^(bits 6-7) (so up to ~14 ms, enough for timeouts); bit 4: recompute the ICRC (so mutated
// frames pass the integrity check); bit 5: run the timers before the frame.
struct Record {
  uint8_t port = 1;
  uint64_t advance_ns = 0;
  bool fix_icrc = false;
  bool timer = false;
  std::span<const uint8_t> frame;
};

inline std::vector<Record> parse_records(const uint8_t* data, size_t size) {
  std::vector<Record> out;
  size_t off = 0;
  while (size - off >= 3) {
    const uint8_t ctl = data[off];
    size_t len = (size_t{data[off + 1]} << 8) | data[off + 2];
    off += 3;
    len = std::min(len, size - off);
    Record r;
    r.port = static_cast<uint8_t>(1 + (ctl & 1));
    r.advance_ns = (static_cast<uint64_t>((ctl >> 1) & 7) * 500) << (4 * ((ctl >> 6) & 3));
    r.fix_icrc = (ctl >> 4) & 1;
    r.timer = (ctl >> 5) & 1;
    r.frame = {data + off, len};
    out.push_back(r);
    off += len;
  }
  return out;
}

inline void append_record(std::vector<uint8_t>& out, uint8_t ctl, std::span<const std::byte> f) {
  const size_t len = std::min<size_t>(f.size(), 0xFFFF);
  out.push_back(ctl);
  out.push_back(static_cast<uint8_t>(len >> 8));
  out.push_back(static_cast<uint8_t>(len & 0xFF));
  for (size_t i = 0; i < len; ++i) out.push_back(static_cast<uint8_t>(f[i]));
}

// The ctl byte for a recorded frame: its port and the time since the previous one.
inline uint8_t ctl_for(uint8_t port, uint64_t gap_ns) {
  uint8_t scale = 0;
  uint64_t steps = gap_ns / 500;
  while (steps > 7 && scale < 3) {
    steps >>= 4;
    ++scale;
  }
  if (steps > 7) steps = 7;
  return static_cast<uint8_t>((port == 2 ? 1 : 0) | (steps << 1) | (scale << 6));
}

// ---------------------------------------------------------------------------------------------
// Driving and checking
// ---------------------------------------------------------------------------------------------
// Every frame the engine transmits must be well formed: decodes, is RoCE, has a valid ICRC, and
// leaves on a port that exists. Returns the decoded frame (views into pkt.frame).
inline wire::DecodedFrame check_tx(const TxPacket& pkt) {
  wire::DecodedFrame f;
  wire::DecodeOptions o;
  o.verify_icrc = true;
  if (!wire::decode_frame(wire::as_bytes(pkt.frame), f, o))
    die("engine sent a frame that does not decode");
  if (!f.roce || f.op == nullptr) die("engine sent a non-RoCE frame");
  if (!f.icrc_ok) die("engine sent a frame with a bad ICRC");
  if (pkt.port == 0 || pkt.port > kPorts) die("engine sent on a port that does not exist");
  return f;
}

// Delivers one record's frame (ICRC fixed if asked) at the record's time.
inline void deliver(Endpoint& ep, const Record& r, uint64_t& now, std::vector<std::byte>& scratch) {
  now += r.advance_ns;
  if (r.timer || ep.next_deadline_ns() <= now) ep.on_timer(now);
  scratch.assign(reinterpret_cast<const std::byte*>(r.frame.data()),
                 reinterpret_cast<const std::byte*>(r.frame.data()) + r.frame.size());
  if (r.fix_icrc) {
    wire::DecodedFrame f;
    wire::decode_frame(wire::as_bytes(scratch), f);
    if (f.has_icrc) wire::fix_icrc({scratch.data(), scratch.size()}, f);
  }
  ep.on_packet({scratch.data(), scratch.size()}, r.port, now);
}

}  // namespace mrc::engine::fuzz
