// Engine endpoints on the simulator: N nodes (mrc::engine::Endpoint behind EndpointNode) joined
// by a Fabric of P planes x M paths, QPs between them, transfers into guarded buffers, and the
// observation the simulator tests, the engine benchmark and the fuzz corpus generator share
// (event log, completions, captures read back). No gtest here: failures are returned as text.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "reference-impl/sim/gbn_model.h"
#include "reference-impl/sim/sim.h"
#include "wire/wire.h"

namespace mrc::sim::harness {

namespace eng = mrc::engine;

// ---------------------------------------------------------------------------------------------
// NIC transmit model
// ---------------------------------------------------------------------------------------------
// The engine hands out a frame whenever its windows allow; a NIC only builds the next packet when
// its port can take it. The port of the next packet is the engine's choice, so NicNode stops
// pulling frames while any of the node's uplinks holds more than `max_backlog_bytes` waiting
// behind the frame being serialized (a per-port transmit FIFO that is full), re-checking every
// `recheck_ns`. Without it a window's worth of packets would sit in the host link queue, which no
// NIC does (it would inflate RTTs past the ACK timeout and make a go-back-N sender resend frames
// that never left); with a shared limit instead of a per-port one, a port carrying a few more
// bytes than the others (probes) would build a standing queue the others do not have.
class NicNode final : public Node {
 public:
  explicit NicNode(Node& inner) : inner_(inner) {}
  void attach(const Simulator& sim, std::vector<LinkId> uplinks, uint64_t max_backlog_bytes,
              uint64_t recheck_ns) {
    sim_ = &sim;
    uplinks_ = std::move(uplinks);
    max_backlog_bytes_ = max_backlog_bytes;
    recheck_ns_ = std::max<uint64_t>(recheck_ns, 1);
  }
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override {
    inner_.on_packet(frame, port, now_ns);
  }
  void on_timer(uint64_t now_ns) override {
    if (throttled_ && now_ns >= retry_at_) throttled_ = false;
    if (inner_.next_deadline_ns() <= now_ns) inner_.on_timer(now_ns);
  }
  bool poll_tx(uint64_t now_ns, TxFrame& out) override {
    if (sim_ != nullptr) {
      uint64_t backlog = 0;
      for (LinkId l : uplinks_) backlog = std::max(backlog, sim_->backlog_bytes(l));
      if (backlog > max_backlog_bytes_) {
        throttled_ = true;
        throttled_at_ = now_ns;
        retry_at_ = now_ns + recheck_ns_;
        return false;
      }
    }
    return inner_.poll_tx(now_ns, out);
  }
  uint64_t next_deadline_ns() const override {
    const uint64_t d = inner_.next_deadline_ns();
    if (!throttled_) return d;
    // A deadline that has already passed is the inner node asking to be polled (a probe or a
    // retransmission is due); that waits for the port like everything else.
    return d <= throttled_at_ ? retry_at_ : std::min(d, retry_at_);
  }

 private:
  Node& inner_;
  const Simulator* sim_ = nullptr;
  std::vector<LinkId> uplinks_;
  uint64_t max_backlog_bytes_ = 0;
  uint64_t recheck_ns_ = 1;
  bool throttled_ = false;
  uint64_t throttled_at_ = 0;
  uint64_t retry_at_ = kNoDeadline;
};

// ---------------------------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------------------------
// A registered region with guard bytes on both sides: anything written outside the region shows
// up as a changed guard byte. The RDMA address of a region is its host address, so a run whose
// captures must be byte-identical across processes places the region at a fixed address
// (`fixed_addr`, page aligned, mapped with MAP_FIXED_NOREPLACE).
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr uint8_t kGuardByte = 0xA5;

  GuardedBuffer(size_t len, uint8_t seed, uint64_t fixed_addr = 0) : len_(len) {
    const size_t total = len + 2 * kGuardBytes;
    if (fixed_addr != 0) {
      map_len_ = (total + 4095) & ~size_t{4095};
      void* want = reinterpret_cast<void*>(static_cast<uintptr_t>(fixed_addr - kGuardBytes));
      void* got = ::mmap(want, map_len_, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
      if (got == MAP_FAILED || got != want) {
        if (got != MAP_FAILED) ::munmap(got, map_len_);
        error_ = "GuardedBuffer: cannot map " + std::to_string(map_len_) + " bytes at 0x" +
                 to_hex(fixed_addr - kGuardBytes) + ": " + std::strerror(errno);
        map_len_ = 0;
      } else {
        base_ = static_cast<uint8_t*>(got);
      }
    }
    if (base_ == nullptr) {
      storage_.resize(total);
      base_ = storage_.data();
    }
    std::memset(base_, kGuardByte, total);
    fill_pattern(seed);
  }
  ~GuardedBuffer() {
    if (map_len_ != 0) ::munmap(base_, map_len_);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  void fill_pattern(uint8_t seed) {
    for (size_t i = 0; i < len_; ++i) data()[i] = pattern_byte(i, seed);
  }
  static uint8_t pattern_byte(size_t i, uint8_t seed) {
    return static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 8) + (i >> 16) * 3) & 0xFF);
  }
  eng::Status register_with(eng::Endpoint& ep, uint32_t access) {
    return ep.register_mr(data(), len_, access, mr_);
  }
  uint8_t* data() { return base_ + kGuardBytes; }
  const uint8_t* data() const { return base_ + kGuardBytes; }
  size_t size() const { return len_; }
  uint64_t addr(size_t off = 0) const { return reinterpret_cast<uintptr_t>(data()) + off; }
  const eng::MemoryRegion& mr() const { return mr_; }
  const std::string& error() const { return error_; }  // fixed mapping failed (heap used)
  bool guards_intact() const {
    for (size_t i = 0; i < kGuardBytes; ++i) {
      if (base_[i] != kGuardByte || base_[kGuardBytes + len_ + i] != kGuardByte) return false;
    }
    return true;
  }
  bool equals(const GuardedBuffer& o) const {
    return len_ == o.len_ && std::memcmp(data(), o.data(), len_) == 0;
  }
  // First offset where the two regions differ, or size() when equal.
  size_t first_difference(const GuardedBuffer& o) const {
    for (size_t i = 0; i < std::min(len_, o.len_); ++i)
      if (data()[i] != o.data()[i]) return i;
    return len_ == o.len_ ? len_ : std::min(len_, o.len_);
  }

 private:
  static std::string to_hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
  }
  size_t len_;
  uint8_t* base_ = nullptr;
  size_t map_len_ = 0;
  std::vector<uint8_t> storage_;
  std::string error_;
  eng::MemoryRegion mr_{};
};

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------
inline wire::Ipv6Addr node_gid(uint8_t index) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[1] = 0x00;
  a[14] = 0x01;
  a[15] = static_cast<uint8_t>(index + 1);
  return a;
}

// STEV 16+16, generated: field 0 = 0x10 in the high byte + 8 random bits, field 1 = 16 random
// bits (the shape of the OCP example profile).
inline eng::EvProfile generated_ev_profile(uint32_t ev_count, uint32_t active_count,
                                           uint32_t min_active) {
  eng::EvProfile p;
  p.mode = eng::EvMode::kGenerated;
  p.format_widths = {16, 16};
  p.fields = {wire::EvField{16, 0x1000, 0, 0xFF, 0x00FF}, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF}};
  p.ev_count = ev_count;
  p.active_count = active_count;
  p.ev_min_active = min_active;
  return p;
}

struct QpConfig {
  uint32_t path_mtu = 4096;
  uint8_t mpr = 8;  // 128-PSN units
  uint8_t mpr_dest = 8;
  uint16_t max_wimm = 16;
  uint16_t max_wimm_dest = 16;
  uint8_t timeout = 4;  // T = 1.024 us * 2^4 = 16.384 us
  uint8_t linear_cnt = 7;
  uint8_t exp_cnt = eng::kUnlimitedExpRetry;
  uint32_t max_send_wr = 1024;
  uint32_t max_recv_wr = 1024;
  uint32_t cap = 0;
  std::string cc = std::string(eng::kCcNone);
  eng::NsccConfig nscc{};
  eng::EvProfile ev = generated_ev_profile(16, 0, 1);
  bool sq_sig_all = false;
};

// Host links: 100 Gb/s NIC ports; fabric links: 400 Gb/s leaf-spine. One way through the fabric
// is 2 x 0.5 us + 2 x 1 us of propagation plus four store-and-forward hops.
inline LinkConfig default_host_link() {
  LinkConfig c;
  c.rate_bps = 100'000'000'000;
  c.prop_delay_ns = 500;
  c.queue_bytes = 1u << 20;
  return c;
}
inline LinkConfig default_fabric_link() {
  LinkConfig c;
  c.rate_bps = 400'000'000'000;
  c.prop_delay_ns = 1'000;
  c.queue_bytes = 1u << 20;
  return c;
}
// Re-check interval of a throttled NIC: one MTU frame's serialization time on a host link.
inline uint64_t nic_recheck_ns(const LinkConfig& host) {
  const uint64_t rate = std::max<uint64_t>(host.rate_bps, 1);
  return (4200ull * 8 * 1'000'000'000 + rate - 1) / rate;
}

struct HarnessConfig {
  uint64_t seed = 1;  // simulator seed; endpoint i uses seed * 1000 + i + 1
  uint8_t planes = 2;
  uint32_t paths = 4;
  uint32_t nodes = 2;
  LinkConfig host_link = default_host_link();
  LinkConfig fabric_link = default_fabric_link();
  PathSelect select = PathSelect::kWevModulo;
  bool nic_pacing = true;
  uint64_t nic_backlog_bytes = 2 * 4200;  // per uplink, behind the frame in service
  uint64_t probe_interval_ns = 16'000;
  bool keep_events = true;
  bool keep_decisions = true;
  std::function<void(eng::EndpointConfig&)> tweak_endpoint;  // per-node overrides
  // Wire profile of the endpoints and the simulator (not owned; nullptr: MRP0).
  const wire::WireProfile* profile = nullptr;
  // Other nodes on the fabric (not owned), after the engine nodes: e.g. a ScriptedNode that
  // injects hostile frames. They have no address, so nothing is routed to them.
  std::vector<std::pair<std::string, Node*>> extra_nodes;
};

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------
struct NodeCtx {
  std::string name;
  std::unique_ptr<eng::Endpoint> ep;
  std::unique_ptr<EndpointNode<eng::Endpoint>> adapter;
  std::unique_ptr<NicNode> nic;
  NodeId id = kNone;
  uint32_t cq = 0;
  std::vector<eng::Event> events;
  std::vector<eng::Wc> wcs;  // completions polled so far
};

struct Conn {
  size_t a = 0, b = 0;  // node indices; a is the requester of the transfers the tests post
  uint32_t qpn_a = 0, qpn_b = 0;
  uint32_t sq_psn_a = 0, sq_psn_b = 0;
};

class Harness {
 public:
  explicit Harness(HarnessConfig cfg) : cfg_(std::move(cfg)), sim_(sim_config(cfg_)) {
    for (uint32_t i = 0; i < cfg_.nodes; ++i) {
      auto n = std::make_unique<NodeCtx>();
      n->name = std::string(1, static_cast<char>('a' + i));
      eng::EndpointConfig ec;
      ec.name = n->name;
      ec.gid = node_gid(static_cast<uint8_t>(i));
      ec.seed = cfg_.seed * 1000 + i + 1;
      ec.ev_format = wire::EvFormat::kStev;
      ec.probe_interval_ns = cfg_.probe_interval_ns;
      ec.profile = cfg_.profile;
      for (uint8_t p = 1; p <= cfg_.planes; ++p) {
        eng::PortConfig pc;
        pc.mac = {0x02, 0, 0, 0, static_cast<uint8_t>(i + 1), p};
        pc.next_hop_mac = {0x02, 0, 0, 0, 0xEE, p};
        ec.ports.push_back(pc);
      }
      if (cfg_.tweak_endpoint) cfg_.tweak_endpoint(ec);
      n->ep = std::make_unique<eng::Endpoint>(ec);
      n->adapter = std::make_unique<EndpointNode<eng::Endpoint>>(*n->ep);
      n->nic = std::make_unique<NicNode>(*n->adapter);
      if (cfg_.keep_events) {
        NodeCtx* raw = n.get();
        n->ep->set_event_sink([raw](const eng::Event& e) { raw->events.push_back(e); });
      }
      n->id = sim_.add_node(n->name, *n->nic);
      sim_.set_node_address(n->id, ec.gid);
      eng::Status st = n->ep->create_cq(1u << 16, n->cq);
      if (!st.ok()) fail("create_cq: " + st.message);
      nodes_.push_back(std::move(n));
    }
    FabricConfig fc;
    fc.planes = cfg_.planes;
    fc.paths = cfg_.paths;
    fc.host_link = cfg_.host_link;
    fc.fabric_link = cfg_.fabric_link;
    fc.select = cfg_.select;
    std::vector<NodeId> ids;
    for (auto& n : nodes_) ids.push_back(n->id);
    for (auto& [name, node] : cfg_.extra_nodes) {
      extra_ids_.push_back(sim_.add_node(name, *node));
      ids.push_back(extra_ids_.back());
    }
    fabric_ = std::make_unique<Fabric>(sim_, fc, ids);
    for (auto& n : nodes_) {
      if (!cfg_.nic_pacing) continue;
      std::vector<LinkId> up;
      for (uint8_t p = 1; p <= cfg_.planes; ++p) up.push_back(fabric_->uplink(n->id, p));
      n->nic->attach(sim_, std::move(up), cfg_.nic_backlog_bytes, nic_recheck_ns(cfg_.host_link));
    }
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  Simulator& sim() { return sim_; }
  Fabric& fabric() { return *fabric_; }
  const HarnessConfig& config() const { return cfg_; }
  NodeCtx& node(size_t i) { return *nodes_.at(i); }
  eng::Endpoint& ep(size_t i) { return *nodes_.at(i)->ep; }
  size_t node_count() const { return nodes_.size(); }
  NodeId extra_id(size_t k) const { return extra_ids_.at(k); }
  const std::string& error() const { return error_; }
  bool ok() const { return error_.empty(); }

  // Connects `qps` QP pairs between nodes a and b (a sends, b receives, but both directions work).
  std::vector<size_t> connect(size_t a, size_t b, uint32_t qps, const QpConfig& qc) {
    std::vector<size_t> out;
    const uint64_t ev_id = next_profile_id_++;
    const uint64_t cc_id = next_profile_id_++;
    for (size_t s : {a, b}) {
      eng::Status st = ep(s).add_ev_profile(ev_id, qc.ev);
      if (!st.ok()) fail("add_ev_profile: " + st.message);
      eng::CcProfile cc;
      cc.algorithm = qc.cc;
      cc.nscc = qc.nscc;
      st = ep(s).add_cc_profile(cc_id, cc);
      if (!st.ok()) fail("add_cc_profile: " + st.message);
    }
    for (uint32_t k = 0; k < qps; ++k) {
      Conn c;
      c.a = a;
      c.b = b;
      c.qpn_a = create_qp(a, qc);
      c.qpn_b = create_qp(b, qc);
      c.sq_psn_a = ep(a).random_psn();
      c.sq_psn_b = ep(b).random_psn();
      bring_up(a, c.qpn_a, b, c.qpn_b, c.sq_psn_a, c.sq_psn_b, qc, ev_id, cc_id);
      bring_up(b, c.qpn_b, a, c.qpn_a, c.sq_psn_b, c.sq_psn_a, qc, ev_id, cc_id);
      conns_.push_back(c);
      out.push_back(conns_.size() - 1);
    }
    return out;
  }
  const Conn& conn(size_t i) const { return conns_.at(i); }
  size_t conn_count() const { return conns_.size(); }

  // Work request ids unique in this harness, so that each transfer finds its own completions.
  uint64_t alloc_wr_ids(uint64_t n) {
    const uint64_t base = next_wr_id_;
    next_wr_id_ += n;
    return base;
  }

  // After posting work from outside the run: let the node transmit at the current time.
  void wake(size_t i) { sim_.wake(nodes_.at(i)->id); }

  // Runs in slices of `slice_ns` until done() holds (checked after every slice, completions
  // polled first), `limit_ns` of simulated time passed, or the simulator failed. True when done()
  // held. With no predicate, runs for limit_ns.
  bool run(const std::function<bool()>& done, uint64_t limit_ns, uint64_t slice_ns = 2'000) {
    const uint64_t end = sim_.now_ns() + limit_ns;
    while (sim_.now_ns() < end) {
      const RunResult r = sim_.run_until(std::min(end, sim_.now_ns() + slice_ns));
      poll_all();
      if (r.status == RunStatus::kError) {
        fail("simulator: " + r.error);
        return false;
      }
      if (done && done()) return true;
    }
    return !done;
  }

  void poll_all() {
    eng::Wc buf[64];
    for (auto& n : nodes_) {
      for (;;) {
        const int k = n->ep->poll_cq(n->cq, buf);
        if (k <= 0) break;
        n->wcs.insert(n->wcs.end(), buf, buf + k);
      }
    }
  }

  // Completions with a given opcode on node i.
  size_t completions(size_t i, eng::WcOpcode op, std::optional<eng::WcStatus> status = {}) const {
    size_t k = 0;
    for (const eng::Wc& w : nodes_.at(i)->wcs)
      if (w.opcode == op && (!status || w.status == *status)) ++k;
    return k;
  }

  eng::QpStats qp_stats(size_t node, uint32_t qpn) {
    eng::QpStats st;
    eng::Status s = ep(node).qp_stats(qpn, st);
    if (!s.ok()) fail("qp_stats: " + s.message);
    return st;
  }
  eng::QpState qp_state(size_t node, uint32_t qpn) {
    eng::QpAttr a;
    eng::MrcQpAttr m;
    eng::Status s = ep(node).query_qp(qpn, a, m);
    if (!s.ok()) fail("query_qp: " + s.message);
    return a.qp_state;
  }
  std::vector<eng::EvInfo> ev_info(size_t node, uint32_t qpn) {
    std::vector<eng::EvInfo> out;
    eng::Status s = ep(node).ev_info(qpn, out);
    if (!s.ok()) fail("ev_info: " + s.message);
    return out;
  }

  void fail(std::string msg) {
    if (error_.empty()) error_ = std::move(msg);
  }

 private:
  static SimConfig sim_config(const HarnessConfig& c) {
    SimConfig s;
    s.seed = c.seed;
    s.keep_decisions = c.keep_decisions;
    s.profile = c.profile;
    return s;
  }

  uint32_t create_qp(size_t n, const QpConfig& qc) {
    eng::QpInitAttr init;
    init.send_cq = node(n).cq;
    init.recv_cq = node(n).cq;
    init.cap.max_send_wr = qc.max_send_wr;
    init.cap.max_recv_wr = qc.max_recv_wr;
    init.cap.max_send_sge = 4;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all = qc.sq_sig_all;
    uint32_t qpn = 0;
    eng::Status st = ep(n).create_qp(init, qpn);
    if (!st.ok()) fail("create_qp: " + st.message);
    return qpn;
  }

  void bring_up(size_t s, uint32_t qpn, size_t peer, uint32_t peer_qpn, uint32_t sq_psn,
                uint32_t peer_sq_psn, const QpConfig& qc, uint64_t ev_id, uint64_t cc_id) {
    eng::QpAttr at;
    eng::MrcQpAttr m;
    at.qp_state = eng::QpState::kInit;
    at.qp_access_flags = eng::kAccessLocalWrite | eng::kAccessRemoteWrite;
    m.ev_profile_id = ev_id;
    m.cc_profile_id = cc_id;
    eng::Status st = ep(s).modify_qp(qpn, at, eng::kQpState | eng::kQpAccessFlags, m,
                                     eng::kMrcEvProfileId | eng::kMrcCcProfileId | eng::kMrcHint);
    if (!st.ok()) fail("modify_qp INIT: " + st.message);
    at.qp_state = eng::QpState::kRtr;
    at.dgid = ep(peer).config().gid;
    at.dest_qp_num = peer_qpn;
    at.rq_psn = peer_sq_psn;
    at.path_mtu = qc.path_mtu;
    m.max_wimm_dest = qc.max_wimm_dest;
    m.mpr_dest = qc.mpr_dest;
    m.cap = qc.cap;
    st = ep(s).modify_qp(
        qpn, at, eng::kQpState | eng::kQpAv | eng::kQpDestQpn | eng::kQpRqPsn | eng::kQpPathMtu, m,
        eng::kMrcMaxWimmDest | eng::kMrcMprDest | eng::kMrcCap);
    if (!st.ok()) fail("modify_qp RTR: " + st.message);
    at.qp_state = eng::QpState::kRts;
    at.sq_psn = sq_psn;
    m.max_wimm = qc.max_wimm;
    m.mpr = qc.mpr;
    m.retry.linear_cnt = qc.linear_cnt;
    m.retry.exp_cnt = qc.exp_cnt;
    m.timeout = qc.timeout;
    st = ep(s).modify_qp(qpn, at, eng::kQpState | eng::kQpSqPsn, m,
                         eng::kMrcMaxWimm | eng::kMrcMpr | eng::kMrcRetryCnt | eng::kMrcTimeout);
    if (!st.ok()) fail("modify_qp RTS: " + st.message);
  }

  HarnessConfig cfg_;
  Simulator sim_;
  std::vector<std::unique_ptr<NodeCtx>> nodes_;
  std::unique_ptr<Fabric> fabric_;
  std::vector<NodeId> extra_ids_;
  std::vector<Conn> conns_;
  uint64_t next_profile_id_ = 1;
  uint64_t next_wr_id_ = 1;
  std::string error_;
};

// ---------------------------------------------------------------------------------------------
// Transfers
// ---------------------------------------------------------------------------------------------
// `len` bytes from a source buffer on the requester into a guarded destination on the responder,
// as `messages` RDMA WRITEs (the last `imm_messages` of them WRITE_WITH_IMM, each consuming a
// receive WQE posted here).
class Transfer {
 public:
  // `fixed_dst`: place the destination region at that address (see GuardedBuffer).
  Transfer(Harness& h, size_t conn, size_t len, uint8_t seed, uint64_t fixed_dst = 0)
      : h_(h),
        conn_(conn),
        src_(len, seed),
        dst_(len, static_cast<uint8_t>(seed + 101), fixed_dst) {
    const Conn& c = h.conn(conn);
    if (!dst_.error().empty()) h.fail(dst_.error());
    if (!src_.register_with(h.ep(c.a), eng::kAccessLocalWrite).ok()) h.fail("register src");
    if (!dst_.register_with(h.ep(c.b), eng::kAccessLocalWrite | eng::kAccessRemoteWrite).ok())
      h.fail("register dst");
  }

  // Posts the whole buffer as `messages` equal writes, the last `imm_messages` of them with
  // immediate data 0x1000 + k (k = message index).
  void post(uint32_t messages, uint32_t imm_messages = 0, bool signaled = true) {
    const Conn& c = h_.conn(conn_);
    base_wr_id_ = h_.alloc_wr_ids(messages);
    const size_t len = src_.size();
    const size_t per = (len + messages - 1) / messages;
    uint32_t k = 0;
    for (size_t off = 0; off < len; off += per, ++k) {
      const uint32_t n = static_cast<uint32_t>(std::min(per, len - off));
      const eng::Sge sge{src_.addr(off), n, src_.mr().lkey};
      std::optional<uint32_t> imm;
      if (k + imm_messages >= messages) {
        imm = 0x1000u + k;
        eng::Status rs = h_.ep(c.b).post_recv(c.qpn_b, eng::RecvWr{base_wr_id_ + k, {}});
        if (!rs.ok()) h_.fail("post_recv: " + rs.message);
        ++imm_posted_;
      }
      eng::Status st = h_.ep(c.a).post_write(c.qpn_a, base_wr_id_ + k, {&sge, 1}, dst_.addr(off),
                                             dst_.mr().rkey, imm, signaled);
      if (!st.ok()) h_.fail("post_write: " + st.message);
      ++posted_;
    }
    h_.wake(c.a);
  }

  bool mine(uint64_t wr_id) const { return wr_id >= base_wr_id_ && wr_id < base_wr_id_ + posted_; }
  // This transfer's send completions on the requester, in completion order.
  std::vector<eng::Wc> send_wcs() const {
    const Conn& c = h_.conn(conn_);
    std::vector<eng::Wc> out;
    for (const eng::Wc& w : h_.node(c.a).wcs)
      if (w.qp_num == c.qpn_a && w.opcode == eng::WcOpcode::kRdmaWrite && mine(w.wr_id))
        out.push_back(w);
    return out;
  }
  std::vector<eng::Wc> recv_wcs() const {
    const Conn& c = h_.conn(conn_);
    std::vector<eng::Wc> out;
    for (const eng::Wc& w : h_.node(c.b).wcs)
      if (w.qp_num == c.qpn_b && w.opcode == eng::WcOpcode::kRecvRdmaWithImm && mine(w.wr_id))
        out.push_back(w);
    return out;
  }
  size_t send_completions(std::optional<eng::WcStatus> status = {}) const {
    size_t k = 0;
    for (const eng::Wc& w : send_wcs()) k += !status || w.status == *status;
    return k;
  }
  size_t recv_completions() const { return recv_wcs().size(); }
  bool all_completed() const { return posted_ > 0 && send_completions() >= posted_; }
  bool exact() const { return src_.equals(dst_) && dst_.guards_intact(); }
  uint32_t posted() const { return posted_; }
  uint32_t imm_posted() const { return imm_posted_; }
  GuardedBuffer& src() { return src_; }
  GuardedBuffer& dst() { return dst_; }
  const Conn& conn() const { return h_.conn(conn_); }

 private:
  Harness& h_;
  size_t conn_;
  GuardedBuffer src_;
  GuardedBuffer dst_;
  uint64_t base_wr_id_ = 0;
  uint32_t posted_ = 0;
  uint32_t imm_posted_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Event log queries
// ---------------------------------------------------------------------------------------------
inline bool field_is(const eng::Event& e, std::string_view key, std::string_view value) {
  const eng::EventField* f = e.find(key);
  return f != nullptr && f->type == eng::EventField::Type::kStr && f->s == value;
}
inline uint64_t field_u(const eng::Event& e, std::string_view key, uint64_t dflt = UINT64_MAX) {
  const eng::EventField* f = e.find(key);
  return f != nullptr && f->type == eng::EventField::Type::kUint ? f->u : dflt;
}
inline std::vector<eng::Event> events_of(const NodeCtx& n, eng::EventKind k,
                                         std::string_view key = {}, std::string_view value = {}) {
  std::vector<eng::Event> out;
  for (const eng::Event& e : n.events)
    if (e.kind == k && (key.empty() || field_is(e, key, value))) out.push_back(e);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Captures read back
// ---------------------------------------------------------------------------------------------
struct CapturedFrame {
  uint64_t t_ns = 0;
  std::vector<std::byte> bytes;
};
inline bool read_capture(const std::string& path, std::vector<CapturedFrame>& out,
                         std::string* error = nullptr) {
  wire::CaptureReader r;
  if (!r.open(path)) {
    if (error) *error = r.error();
    return false;
  }
  wire::CaptureRecord rec;
  while (r.next(rec)) out.push_back({rec.ts_ns, {rec.data.begin(), rec.data.end()}});
  if (!r.error().empty()) {
    if (error) *error = r.error();
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The go-back-N RC baseline on the same fabric
// ---------------------------------------------------------------------------------------------
struct GbnPairConfig {
  uint64_t seed = 1;
  uint8_t planes = 2;
  uint32_t paths = 4;
  LinkConfig host_link = default_host_link();
  LinkConfig fabric_link = default_fabric_link();
  PathSelect select = PathSelect::kWevModulo;
  GbnConfig node;  // name, gid and MACs are filled in per node
  uint32_t qps = 1;
  // QP k uses UDP source port first_sport + k, so with kWevModulo it takes path
  // (first_sport + k) % paths of plane node.port.
  uint16_t first_sport = 0xC000;
  bool nic_pacing = true;
  uint64_t nic_backlog_bytes = 2 * 4200;  // per uplink, behind the frame in service
};

// Two go-back-N nodes, a sends to b over QPs on one plane.
class GbnPair {
 public:
  explicit GbnPair(GbnPairConfig cfg)
      : cfg_(std::move(cfg)),
        sim_(sim_config(cfg_.seed)),
        a_(node_config(cfg_, 0)),
        b_(node_config(cfg_, 1)),
        nic_a_(a_),
        nic_b_(b_) {
    ida_ = sim_.add_node("a", nic_a_);
    idb_ = sim_.add_node("b", nic_b_);
    sim_.set_node_address(ida_, node_gid(0));
    sim_.set_node_address(idb_, node_gid(1));
    FabricConfig fc;
    fc.planes = cfg_.planes;
    fc.paths = cfg_.paths;
    fc.host_link = cfg_.host_link;
    fc.fabric_link = cfg_.fabric_link;
    fc.select = cfg_.select;
    fabric_ = std::make_unique<Fabric>(sim_, fc, std::vector<NodeId>{ida_, idb_});
    if (cfg_.nic_pacing) {
      const uint64_t recheck = nic_recheck_ns(cfg_.host_link);
      nic_a_.attach(sim_, {fabric_->uplink(ida_, cfg_.node.port)}, cfg_.nic_backlog_bytes, recheck);
      nic_b_.attach(sim_, {fabric_->uplink(idb_, cfg_.node.port)}, cfg_.nic_backlog_bytes, recheck);
    }
    for (uint32_t k = 0; k < cfg_.qps; ++k) {
      const uint16_t sport = static_cast<uint16_t>(cfg_.first_sport + k);
      const uint32_t qa = a_.create_qp(sport);
      const uint32_t qb = b_.create_qp(sport);
      a_.connect(qa, node_gid(1), qb, b_.initial_psn(qb));
      b_.connect(qb, node_gid(0), qa, a_.initial_psn(qa));
      qpn_a_.push_back(qa);
      qpn_b_.push_back(qb);
    }
  }
  GbnPair(const GbnPair&) = delete;
  GbnPair& operator=(const GbnPair&) = delete;

  Simulator& sim() { return sim_; }
  Fabric& fabric() { return *fabric_; }
  GbnEndpoint& a() { return a_; }
  GbnEndpoint& b() { return b_; }
  NodeId id_a() const { return ida_; }
  NodeId id_b() const { return idb_; }
  uint32_t qpn_a(size_t k) const { return qpn_a_.at(k); }
  uint32_t qpn_b(size_t k) const { return qpn_b_.at(k); }
  const GbnPairConfig& config() const { return cfg_; }
  std::vector<GbnCompletion>& completions() { return wcs_; }

  void poll() {
    GbnCompletion c;
    while (a_.poll(c)) wcs_.push_back(c);
  }
  // Same contract as Harness::run.
  bool run(const std::function<bool()>& done, uint64_t limit_ns, uint64_t slice_ns = 2'000) {
    const uint64_t end = sim_.now_ns() + limit_ns;
    while (sim_.now_ns() < end) {
      const RunResult r = sim_.run_until(std::min(end, sim_.now_ns() + slice_ns));
      poll();
      if (r.status == RunStatus::kError) {
        error_ = "simulator: " + r.error;
        return false;
      }
      if (done && done()) return true;
    }
    return !done;
  }
  const std::string& error() const { return error_; }

 private:
  static SimConfig sim_config(uint64_t seed) {
    SimConfig s;
    s.seed = seed;
    return s;
  }
  static GbnConfig node_config(const GbnPairConfig& c, uint8_t i) {
    GbnConfig g = c.node;
    g.name = i == 0 ? "a" : "b";
    g.gid = node_gid(i);
    g.mac = {0x02, 0, 0, 0, static_cast<uint8_t>(i + 1), g.port};
    g.next_hop_mac = {0x02, 0, 0, 0, 0xEE, g.port};
    g.seed = c.seed * 1000 + i + 1;
    return g;
  }

  GbnPairConfig cfg_;
  Simulator sim_;
  GbnEndpoint a_, b_;
  NicNode nic_a_, nic_b_;
  NodeId ida_ = kNone, idb_ = kNone;
  std::unique_ptr<Fabric> fabric_;
  std::vector<uint32_t> qpn_a_, qpn_b_;
  std::vector<GbnCompletion> wcs_;
  std::string error_;
};

// `len` bytes from a on QP k into a guarded buffer on b, as `messages` writes.
class GbnTransfer {
 public:
  GbnTransfer(GbnPair& p, size_t qp, size_t len, uint8_t seed)
      : p_(p), qp_(qp), src_(len, seed), dst_(len, static_cast<uint8_t>(seed + 101)) {
    rkey_ = p.b().register_region(dst_.data(), dst_.size());
  }
  void post(uint32_t messages, uint64_t base_wr_id = 1) {
    const size_t len = src_.size();
    const size_t per = (len + messages - 1) / messages;
    uint32_t k = 0;
    for (size_t off = 0; off < len; off += per, ++k) {
      const uint32_t n = static_cast<uint32_t>(std::min(per, len - off));
      if (p_.a().post_write(p_.qpn_a(qp_), base_wr_id + k, src_.data() + off, n, dst_.addr(off),
                            rkey_))
        ++posted_;
    }
    p_.sim().wake(p_.id_a());
  }
  size_t completed(std::optional<GbnStatus> status = {}) const {
    size_t k = 0;
    for (const GbnCompletion& c : p_.completions())
      if (c.qpn == p_.qpn_a(qp_) && (!status || c.status == *status)) ++k;
    return k;
  }
  bool all_completed() const { return completed() >= posted_; }
  bool exact() const { return src_.equals(dst_) && dst_.guards_intact(); }
  uint32_t posted() const { return posted_; }
  GuardedBuffer& dst() { return dst_; }

 private:
  GbnPair& p_;
  size_t qp_;
  GuardedBuffer src_;
  GuardedBuffer dst_;
  uint32_t rkey_ = 0;
  uint32_t posted_ = 0;
};

}  // namespace mrc::sim::harness
