// The reference engine as a script target, in this process on a virtual clock. Frames the
// engine sends are stamped with the virtual time they were polled; timers fire exactly when due,
// so timing windows are judged without scheduling noise. Mutants rewrite frames through the
// runtime's Mutator, as `mrct endpoint --mutant` does on real sockets.
#include <cstring>
#include <deque>

#include "conformance/scripts/internal.h"
#include "reference-impl/engine/engine.h"

namespace mrc::scripts {

wire::Ipv6Addr gid(uint8_t node) {
  wire::Ipv6Addr a{};
  a[0] = 0xfd;
  a[15] = node;
  return a;
}

wire::MacAddr dut_mac(uint8_t plane) {
  return {0x02, 0, 0, 0, 2, plane};
}
wire::MacAddr tester_mac(uint8_t plane) {
  return {0x02, 0, 0, 0, 1, plane};
}

engine::EndpointConfig reference_config(const Setup& s, const wire::Ipv6Addr& dut_gid) {
  engine::EndpointConfig c;
  c.name = "dut";
  c.gid = dut_gid;
  c.ev_format = s.format;
  c.seed = 1;
  c.caps.trim_nack = s.trim_nack;
  c.caps.svc_time = s.svc_time;
  c.caps.dynamic_mpr = s.dynamic_mpr;
  c.ack_gen_trigger_bytes = s.ack_trigger_bytes;
  c.ack_gen_min_pkt_add_bytes = s.ack_min_add_bytes;
  c.reverse_ev_probe_interval_ns = s.reverse_probe_ns;
  c.probe_interval_ns = 1'000'000;
  return c;
}

bool setup_reference_qp(engine::Endpoint& ep, const Setup& s, runtime::Mutant mutant, void* mem,
                        ReferenceQp& q, std::string& error) {
  auto check = [&](const engine::Status& st, const char* what) {
    if (!st.ok()) error = std::string(what) + ": " + st.message;
    return st.ok();
  };
  engine::EvProfile ev;
  if (!check(runtime::default_ev_profile(s.format, 4u * s.planes, ev), "EV profile")) return false;
  if (mutant == runtime::Mutant::kReuseRetiredEv) ev.ev_min_active = engine::kEvMinActiveAll;
  engine::CcProfile cc;
  cc.algorithm = std::string(engine::kCcNone);
  if (!check(ep.add_ev_profile(1, ev), "add_ev_profile") ||
      !check(ep.add_cc_profile(1, cc), "add_cc_profile") ||
      !check(ep.create_cq(4096, q.cq), "create_cq"))
    return false;
  engine::QpInitAttr init;
  init.send_cq = init.recv_cq = q.cq;
  init.cap.max_send_wr = 256;
  init.cap.max_recv_wr = 256;
  if (!check(ep.create_qp(init, q.qpn), "create_qp")) return false;
  std::memset(mem, s.mr_fill, s.mr_bytes);
  if (!check(ep.register_mr(mem, s.mr_bytes, engine::kAccessLocalWrite | engine::kAccessRemoteWrite,
                            q.mr),
             "register_mr"))
    return false;
  engine::QpAttr at;
  engine::MrcQpAttr m;
  at.qp_state = engine::QpState::kInit;
  at.qp_access_flags = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
  m.ev_profile_id = 1;
  m.cc_profile_id = 1;
  if (!check(ep.modify_qp(q.qpn, at, engine::kQpState | engine::kQpAccessFlags, m,
                          engine::kMrcEvProfileId | engine::kMrcCcProfileId | engine::kMrcHint),
             "modify_qp INIT"))
    return false;
  for (uint32_t i = 0; i < s.recv_wqes; ++i) {
    engine::RecvWr rw;
    rw.wr_id = 1000 + i;
    if (!check(ep.post_recv(q.qpn, rw), "post_recv")) return false;
  }
  at.qp_state = engine::QpState::kRtr;
  at.dgid = gid(1);
  at.dest_qp_num = s.tester_qpn;
  at.rq_psn = s.tester_psn;
  at.path_mtu = s.mtu;
  m.max_wimm_dest = s.max_wimm;
  m.mpr_dest = s.mpr;
  m.cap = s.dynamic_mpr ? uint32_t{engine::kCapDynamicMpr} : 0u;
  if (!check(ep.modify_qp(q.qpn, at,
                          engine::kQpState | engine::kQpAv | engine::kQpDestQpn | engine::kQpRqPsn |
                              engine::kQpPathMtu,
                          m, engine::kMrcMaxWimmDest | engine::kMrcMprDest | engine::kMrcCap),
             "modify_qp RTR"))
    return false;
  at.qp_state = engine::QpState::kRts;
  at.sq_psn = s.dut_psn;
  m.max_wimm = mutant == runtime::Mutant::kExceedWimm
                   ? static_cast<uint16_t>(std::min<uint32_t>(4u * s.max_wimm, 1024))
                   : s.max_wimm;
  m.mpr = s.mpr;
  m.retry.linear_cnt = s.retry_linear;
  m.retry.exp_cnt = s.retry_exp;
  m.timeout = s.timeout;
  return check(ep.modify_qp(q.qpn, at, engine::kQpState | engine::kQpSqPsn, m,
                            engine::kMrcMaxWimm | engine::kMrcMpr | engine::kMrcRetryCnt |
                                engine::kMrcTimeout),
               "modify_qp RTS");
}

void bind_vars(const Setup& s, const ReferenceQp& q, Bindings& b) {
  b.vars["dut_qpn"] = q.qpn;
  b.vars["va"] = q.mr.addr;
  b.vars["rkey"] = q.mr.rkey;
  b.vars["mr_bytes"] = s.mr_bytes;
  b.vars["psn"] = s.tester_psn;
  b.vars["dut_psn"] = s.dut_psn;
  b.vars["tester_qpn"] = s.tester_qpn;
  b.vars["tester_va"] = s.tester_va;
  b.vars["tester_rkey"] = s.tester_rkey;
  b.vars["mtu"] = s.mtu;
  b.vars["max_wimm"] = s.max_wimm;
  b.vars["mpr_psns"] = uint64_t{s.mpr} * engine::kMprUnitPsns;
}

std::vector<Completion> poll_reference_cq(engine::Endpoint& ep, uint32_t cq) {
  std::vector<Completion> out;
  engine::Wc wc[16];
  int n = 0;
  while ((n = ep.poll_cq(cq, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      Completion c;
      c.wr_id = wc[i].wr_id;
      c.status = static_cast<uint32_t>(wc[i].status);
      c.opcode = static_cast<uint32_t>(wc[i].opcode);
      c.byte_len = wc[i].byte_len;
      c.imm = wc[i].imm_data;
      c.with_imm = wc[i].with_imm;
      c.qpn = wc[i].qp_num;
      out.push_back(c);
    }
  }
  return out;
}

bool post_reference_write(engine::Endpoint& ep, uint32_t qpn,
                          std::deque<std::vector<std::byte>>& sources, uint64_t wr_id, uint32_t len,
                          std::optional<uint32_t> imm, uint64_t va, uint32_t rkey,
                          uint8_t fill_seed, std::string& error) {
  // Each WR gets its own source buffer, kept until the target is gone (the engine reads it on
  // retransmission).
  auto& buf = sources.emplace_back(std::max<uint32_t>(len, 1));
  for (uint32_t k = 0; k < len; ++k) buf[k] = std::byte{static_cast<uint8_t>(fill_seed + k)};
  engine::MemoryRegion mr;
  engine::Status st = ep.register_mr(buf.data(), buf.size(), engine::kAccessLocalWrite, mr);
  if (!st.ok()) {
    error = st.message;
    return false;
  }
  engine::Sge sge{mr.addr, len, mr.lkey};
  st = ep.post_write(qpn, wr_id, {&sge, 1}, va, rkey, imm, true);
  if (!st.ok()) {
    error = st.message;
    return false;
  }
  return true;
}

namespace {

class ReferenceTarget : public Target {
 public:
  explicit ReferenceTarget(runtime::Mutant m) : mutant_(m) {}

  std::string name() const override {
    return mutant_ == runtime::Mutant::kNone
               ? "reference"
               : "reference+mutant:" + std::string(runtime::mutant_info(mutant_).name);
  }

  bool start(const Setup& s, Bindings& b, std::string& error) override {
    setup_ = s;
    b.dut_gid = gid(2);
    b.tester_gid = gid(1);
    b.dut_mac = dut_mac(1);
    b.tester_mac = tester_mac(1);
    engine::EndpointConfig c = reference_config(s, b.dut_gid);
    for (uint8_t p = 1; p <= s.planes; ++p) {
      engine::PortConfig pc;
      pc.mac = dut_mac(p);
      pc.next_hop_mac = tester_mac(p);
      c.ports.push_back(pc);
    }
    try {
      ep_ = std::make_unique<engine::Endpoint>(c);
      if (mutant_ != runtime::Mutant::kNone)
        mut_ = std::make_unique<runtime::Mutator>(mutant_, s.format, wire::mrp0(), s.planes);
    } catch (const std::exception& e) {
      error = e.what();
      return false;
    }
    if (mut_) {
      runtime::Mutator* m = mut_.get();
      m->set_clock([this] { return now_; });
      ep_->set_event_sink([m](const engine::Event& e) { m->on_event(e); });
    }
    mem_.assign((s.mr_bytes + 7) / 8, 0);
    if (!setup_reference_qp(*ep_, s, mutant_, mem_.data(), qp_, error)) return false;
    qpn_ = qp_.qpn;
    cq_ = qp_.cq;
    mr_ = qp_.mr;
    bind_vars(s, qp_, b);
    return true;
  }

  uint64_t now_ns() override { return now_; }

  bool inject(std::span<const std::byte> frame, uint8_t plane, std::string& error) override {
    if (plane < 1 || plane > setup_.planes) {
      error = "no plane " + std::to_string(plane);
      return false;
    }
    std::span<const std::byte> f = frame;
    if (mut_) {
      mut_->set_rx_stamp_ns(now_);
      f = mut_->on_rx(frame, rx_scratch_);
    }
    ep_->on_packet(f, plane, now_);
    return true;
  }

  bool next_frame(uint64_t deadline_ns, TargetFrame& out) override {
    while (true) {
      if (!queue_.empty()) {
        out = std::move(queue_.front());
        queue_.pop_front();
        return true;
      }
      engine::TxPacket pkt;
      if (ep_->poll_tx(now_, pkt)) {
        std::vector<engine::TxPacket> extra;
        bool send = true;
        if (mut_) {
          mut_->set_tx_stamp_ns(now_);
          send = mut_->on_tx(pkt, extra);
        }
        if (send) queue_.push_back({std::move(pkt.frame), pkt.port, now_});
        for (engine::TxPacket& x : extra) queue_.push_back({std::move(x.frame), x.port, now_});
        continue;
      }
      const uint64_t due = ep_->next_deadline_ns();
      if (due <= now_) {
        // A timer due now: fire it once; if it produced nothing, time must move on.
        ep_->on_timer(now_);
        if (ep_->poll_tx(now_, pkt)) {
          std::vector<engine::TxPacket> extra;
          bool send = true;
          if (mut_) send = mut_->on_tx(pkt, extra);
          if (send) queue_.push_back({std::move(pkt.frame), pkt.port, now_});
          for (engine::TxPacket& x : extra) queue_.push_back({std::move(x.frame), x.port, now_});
          continue;
        }
        if (ep_->next_deadline_ns() <= now_) ++now_;  // never spin on a stale deadline
        if (now_ > deadline_ns) return false;
        continue;
      }
      if (due > deadline_ns) {
        now_ = std::max(now_, deadline_ns);
        return false;
      }
      now_ = due;
      ep_->on_timer(now_);
    }
  }

  std::vector<Completion> poll_completions() override { return poll_reference_cq(*ep_, cq_); }

  bool read_memory(uint64_t va, size_t len, std::vector<std::byte>& out,
                   std::string& error) override {
    if (va < mr_.addr || va - mr_.addr > mr_.length || len > mr_.length - (va - mr_.addr)) {
      error = "memory range is outside the implementation's region";
      return false;
    }
    const auto* p = reinterpret_cast<const std::byte*>(mem_.data()) + (va - mr_.addr);
    out.assign(p, p + len);
    return true;
  }

  bool post_write(uint64_t wr_id, uint32_t len, std::optional<uint32_t> imm, uint64_t va,
                  uint32_t rkey, uint8_t fill_seed, std::string& error) override {
    return post_reference_write(*ep_, qpn_, src_, wr_id, len, imm, va, rkey, fill_seed, error);
  }

 private:
  runtime::Mutant mutant_;
  Setup setup_;
  std::unique_ptr<engine::Endpoint> ep_;
  std::unique_ptr<runtime::Mutator> mut_;
  uint64_t now_ = 1'000'000'000;  // virtual ns; not 0 so that "before start" stays representable
  uint32_t cq_ = 0, qpn_ = 0;
  std::vector<uint64_t> mem_;
  engine::MemoryRegion mr_;
  std::deque<TargetFrame> queue_;
  std::vector<std::byte> rx_scratch_;
  ReferenceQp qp_;
  std::deque<std::vector<std::byte>> src_;
};

}  // namespace

std::unique_ptr<Target> make_reference_target(runtime::Mutant mutant) {
  return std::make_unique<ReferenceTarget>(mutant);
}

}  // namespace mrc::scripts
