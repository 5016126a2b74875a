// Endpoint: configuration, controller and verbs API, receive dispatch, transmit scheduling and
// timers.
#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <string>

#include "reference-impl/engine/endpoint_impl.h"
#include "reference-impl/engine/nscc.h"

namespace mrc::engine {
namespace {

std::string validate_config(const EndpointConfig& c) {
  if (c.ports.empty()) return "EndpointConfig.ports: at least one port (plane) is required";
  if (c.ports.size() > kMaxPorts)
    return "EndpointConfig.ports: " + std::to_string(c.ports.size()) + " ports, at most " +
           std::to_string(kMaxPorts);
  if (c.gid == wire::Ipv6Addr{}) return "EndpointConfig.gid: the node GID is all zero";
  const bool v4 =
      std::all_of(c.gid.begin(), c.gid.begin() + 10, [](uint8_t b) { return b == 0; }) &&
      c.gid[10] == 0xFF && c.gid[11] == 0xFF;
  if (v4 && c.ev_format != wire::EvFormat::kUdp)
    return "EndpointConfig.ev_format: an IPv4 node (IPv4-mapped GID) needs the UDP EV format";
  if (c.ack_gen_trigger_bytes == 0) return "EndpointConfig.ack_gen_trigger_bytes must be > 0";
  if (c.k_recover == 0) return "EndpointConfig.k_recover must be > 0";
  if (c.ctrl_queue_capacity == 0) return "EndpointConfig.ctrl_queue_capacity must be > 0";
  return {};
}

}  // namespace

std::string_view ev_state_name(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kSkip:
      return "SKIP";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
  }
  return "UNKNOWN";
}

std::string_view qp_state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "UNKNOWN";
}

std::string_view wr_opcode_name(WrOpcode op) {
  switch (op) {
    case WrOpcode::kRdmaWrite:
      return "IBV_WR_RDMA_WRITE";
    case WrOpcode::kRdmaWriteWithImm:
      return "IBV_WR_RDMA_WRITE_WITH_IMM";
    case WrOpcode::kSend:
      return "IBV_WR_SEND";
    case WrOpcode::kSendWithImm:
      return "IBV_WR_SEND_WITH_IMM";
    case WrOpcode::kRdmaRead:
      return "IBV_WR_RDMA_READ";
    case WrOpcode::kAtomicCmpAndSwp:
      return "IBV_WR_ATOMIC_CMP_AND_SWP";
    case WrOpcode::kAtomicFetchAndAdd:
      return "IBV_WR_ATOMIC_FETCH_AND_ADD";
    case WrOpcode::kLocalInv:
      return "IBV_WR_LOCAL_INV";
    case WrOpcode::kBindMw:
      return "IBV_WR_BIND_MW";
    case WrOpcode::kSendWithInv:
      return "IBV_WR_SEND_WITH_INV";
  }
  return "UNKNOWN";
}

std::string_view wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "IBV_WC_SUCCESS";
    case WcStatus::kLocLenErr:
      return "IBV_WC_LOC_LEN_ERR";
    case WcStatus::kLocQpOpErr:
      return "IBV_WC_LOC_QP_OP_ERR";
    case WcStatus::kLocProtErr:
      return "IBV_WC_LOC_PROT_ERR";
    case WcStatus::kWrFlushErr:
      return "IBV_WC_WR_FLUSH_ERR";
    case WcStatus::kRemInvReqErr:
      return "IBV_WC_REM_INV_REQ_ERR";
    case WcStatus::kRemAccessErr:
      return "IBV_WC_REM_ACCESS_ERR";
    case WcStatus::kRemOpErr:
      return "IBV_WC_REM_OP_ERR";
    case WcStatus::kRetryExcErr:
      return "IBV_WC_RETRY_EXC_ERR";
    case WcStatus::kFatalErr:
      return "IBV_WC_FATAL_ERR";
    case WcStatus::kGeneralErr:
      return "IBV_WC_GENERAL_ERR";
  }
  return "UNKNOWN";
}

std::string_view async_event_name(AsyncEventType t) {
  switch (t) {
    case AsyncEventType::kQpFatal:
      return "IBV_EVENT_QP_FATAL";
    case AsyncEventType::kQpReqErr:
      return "IBV_EVENT_QP_REQ_ERR";
    case AsyncEventType::kQpAccessErr:
      return "IBV_EVENT_QP_ACCESS_ERR";
    case AsyncEventType::kCqErr:
      return "IBV_EVENT_CQ_ERR";
    case AsyncEventType::kPortActive:
      return "IBV_EVENT_PORT_ACTIVE";
    case AsyncEventType::kPortErr:
      return "IBV_EVENT_PORT_ERR";
  }
  return "UNKNOWN";
}

// ---------------------------------------------------------------------------------------------
// Impl helpers
// ---------------------------------------------------------------------------------------------
void Endpoint::Impl::push_wc(uint32_t cq, const Wc& wc) {
  if (cq == 0 || cq > cqs.size()) return;
  Cq& c = cqs[cq - 1];
  if (c.q.size() >= c.capacity) {
    if (!c.overrun) {
      c.overrun = true;
      AsyncEvent a;
      a.type = AsyncEventType::kCqErr;
      a.cq = cq;
      push_async(a);
    }
    return;
  }
  c.q.push_back(wc);
}

void Endpoint::Impl::push_async(const AsyncEvent& a) {
  async.push_back(a);
  Event e = event(EventKind::kAsync, a.qp_num);
  e.s("type", async_event_name(a.type)).u("cq", a.cq).u("port", a.port);
  emit(e);
}

void Endpoint::Impl::emit_drop(const Event& e) {
  if (!drop_events.take(now_ns)) {
    ++drops_suppressed;
    ++stats.drop_events_suppressed;
    return;
  }
  if (drops_suppressed == 0 || e.nfields >= kMaxEventFields) return sink(e);
  Event with = e;
  with.u("suppressed", drops_suppressed);
  drops_suppressed = 0;
  sink(with);
}

bool Endpoint::Impl::enqueue_ctrl(const CtrlPkt& c) {
  if (ctrl.size() >= cfg.ctrl_queue_capacity) {
    ++stats.ctrl_queue_drops;
    return false;
  }
  ctrl.push_back(c);
  return true;
}

uint32_t Endpoint::Impl::usable_ports(const wire::Ipv6Addr& peer) const {
  auto it = peer_port_mask.find(peer);
  const uint32_t peer_mask = it == peer_port_mask.end() ? 0xFFFFFFFEu : it->second;
  return local_port_mask & peer_mask;
}

const MemoryRegion* Endpoint::Impl::mr_for_rkey(uint32_t rkey) const {
  auto it = lkey_of_rkey.find(rkey);
  if (it == lkey_of_rkey.end()) return nullptr;
  return mr_for_lkey(it->second);
}

const MemoryRegion* Endpoint::Impl::mr_for_lkey(uint32_t lkey) const {
  auto it = mr_by_lkey.find(lkey);
  return it == mr_by_lkey.end() ? nullptr : &it->second;
}

Qp* Endpoint::Impl::find_qp(uint32_t qpn) {
  auto it = qps.find(qpn);
  return it == qps.end() ? nullptr : it->second.get();
}

bool Endpoint::Impl::has_qp_to(const wire::Ipv6Addr& peer) const {
  return std::any_of(qps.begin(), qps.end(), [&](const auto& q) {
    return q.second->state() != QpState::kReset && q.second->state() != QpState::kInit &&
           q.second->peer_gid() == peer;
  });
}

void Endpoint::Impl::set_peer_ports(const wire::Ipv6Addr& peer, uint32_t mask, uint8_t arrival_port,
                                    std::string_view source) {
  mask &= ~1u;  // bit 0 is reserved
  if (arrival_port != 0 && ((mask >> arrival_port) & 1u) == 0) {
    ++stats.port_status_rejected;  // says the plane it came in on is down: not believed
    return;
  }
  if (!has_qp_to(peer)) {
    ++stats.port_status_unknown_peer;
    return;
  }
  auto it = peer_port_mask.find(peer);
  const uint32_t old = it == peer_port_mask.end() ? 0xFFFFFFFEu : it->second;
  peer_port_mask[peer] = mask;
  const uint32_t ours = ((1u << (nports + 1)) - 1) & ~1u;  // only planes this node has matter
  if ((old & ours) == (mask & ours)) return;
  if (logging()) {
    Event e = event(EventKind::kPortStatus, 0);
    const uint32_t peer_lo = (uint32_t{peer[12]} << 24) | (uint32_t{peer[13]} << 16) |
                             (uint32_t{peer[14]} << 8) | peer[15];
    e.s("scope", "peer")
        .u("peer_gid_lo32", peer_lo)
        .u("old_mask", old)
        .u("mask", mask)
        .s("source", source);
    emit(e);
  }
}

// ---------------------------------------------------------------------------------------------
// Endpoint
// ---------------------------------------------------------------------------------------------
Endpoint::Endpoint(const EndpointConfig& cfg) {
  if (std::string err = validate_config(cfg); !err.empty()) throw std::invalid_argument(err);
  impl_ = std::make_unique<Impl>(cfg);
  impl_->cc_algos.emplace(std::string(kCcNscc),
                          [](const CcProfile& p, uint32_t mtu) { return make_nscc(p.nscc, mtu); });
  impl_->cc_algos.emplace(std::string(kCcNone),
                          [](const CcProfile&, uint32_t) { return make_no_cc(); });
}

Endpoint::~Endpoint() = default;

const EndpointConfig& Endpoint::config() const {
  return impl_->cfg;
}
const EndpointStats& Endpoint::stats() const {
  impl_->stats.peer_state_entries = impl_->peer_port_mask.size() + impl_->ep_reply_peer.size();
  return impl_->stats;
}
void Endpoint::set_event_sink(EventSink sink) {
  impl_->sink = std::move(sink);
}
uint32_t Endpoint::random_psn() {
  return static_cast<uint32_t>(impl_->rng.next() & wire::kPsnMask);
}
uint32_t Endpoint::port_status_mask() const {
  return impl_->local_port_mask;
}

Status Endpoint::add_ev_profile(uint64_t id, const EvProfile& profile) {
  if (impl_->ev_profiles.count(id))
    return Status::Error(EEXIST, "EV profile " + std::to_string(id) + " already exists");
  // Validate now so that the error names the profile, not a later modify_qp.
  EvSet probe;
  Rng scratch(impl_->cfg.seed ^ id);
  Status s = probe.build(profile, impl_->cfg.ev_format, impl_->nports, scratch);
  if (!s.ok()) return Status::Error(s.code, "EV profile " + std::to_string(id) + ": " + s.message);
  impl_->ev_profiles.emplace(id, profile);
  return Status::Ok();
}

Status Endpoint::add_cc_profile(uint64_t id, const CcProfile& profile) {
  if (impl_->cc_profiles.count(id))
    return Status::Error(EEXIST, "CC profile " + std::to_string(id) + " already exists");
  if (!impl_->cc_algos.count(profile.algorithm))
    return Status::Error(EINVAL, "CC profile " + std::to_string(id) + ": unknown algorithm \"" +
                                     profile.algorithm + "\"");
  if (profile.algorithm == kCcNscc) {
    const NsccConfig& n = profile.nscc;
    if (n.max_cwnd == 0) return Status::Error(EINVAL, "CC profile: nscc.max_cwnd must be > 0");
    if (n.gamma < 0 || n.max_md_jump < 0 || n.max_md_jump > 1)
      return Status::Error(EINVAL, "CC profile: nscc.gamma >= 0 and 0 <= max_md_jump <= 1");
  }
  impl_->cc_profiles.emplace(id, profile);
  return Status::Ok();
}

Status Endpoint::register_cc_algorithm(std::string_view name, CcFactory factory) {
  if (name.empty() || !factory)
    return Status::Error(EINVAL, "CC algorithm needs a name and factory");
  if (impl_->cc_algos.count(name))
    return Status::Error(EEXIST, "CC algorithm \"" + std::string(name) + "\" already registered");
  impl_->cc_algos.emplace(std::string(name), std::move(factory));
  return Status::Ok();
}

Status Endpoint::modify_ev_state(uint64_t ev_profile_id, uint32_t wev, EvState state) {
  if (!impl_->ev_profiles.count(ev_profile_id))
    return Status::Error(EINVAL, "EV profile " + std::to_string(ev_profile_id) + " not found");
  if (state != EvState::kGood && state != EvState::kDenied && state != EvState::kAssumedBad)
    return Status::Error(EINVAL, "modify_ev_state: only GOOD, ASSUMED_BAD or DENIED");
  bool found = false;
  for (auto& [qpn, qp] : impl_->qps) {
    if (!qp->has_ev_set() || qp->ev_profile_id() != ev_profile_id) continue;
    const int idx = qp->evs().find_wev(wev);
    if (idx < 0) continue;
    found = true;
    auto u = static_cast<uint32_t>(idx);
    if (state == EvState::kDenied)
      qp->evs().deny(u, "controller");
    else if (state == EvState::kGood)
      qp->evs().recover(u, EvState::kGood, impl_->now_ns, "controller");
    else
      qp->evs().demote(u, impl_->now_ns, "controller");
  }
  if (!found)
    return Status::Error(ENOENT, "EV " + std::to_string(wev) + " not found in any QP of profile " +
                                     std::to_string(ev_profile_id));
  return Status::Ok();
}

Status Endpoint::set_port_state(uint8_t port, bool up, uint64_t now_ns) {
  Impl& d = *impl_;
  d.touch(now_ns);
  if (port == 0 || port > d.nports)
    return Status::Error(
        EINVAL, "port " + std::to_string(port) + ": ports are 1.." + std::to_string(d.nports));
  const uint32_t old = d.local_port_mask;
  if (up)
    d.local_port_mask |= 1u << port;
  else
    d.local_port_mask &= ~(1u << port);
  if (old == d.local_port_mask) return Status::Ok();
  AsyncEvent a;
  a.type = up ? AsyncEventType::kPortActive : AsyncEventType::kPortErr;
  a.port = port;
  d.push_async(a);
  if (d.logging()) {
    Event e = d.event(EventKind::kPortStatus, 0);
    e.s("scope", "local").u("port", port).u("up", up ? 1 : 0).u("mask", d.local_port_mask);
    d.emit(e);
  }
  d.send_port_status_updates(d.now_ns);
  return Status::Ok();
}

Status Endpoint::create_cq(uint32_t cqe, uint32_t& cq) {
  if (cqe == 0 || cqe > impl_->cfg.caps.max_cqe)
    return Status::Error(EINVAL, "create_cq: cqe " + std::to_string(cqe) + " must be 1.." +
                                     std::to_string(impl_->cfg.caps.max_cqe));
  Cq c;
  c.capacity = cqe;
  impl_->cqs.push_back(std::move(c));
  cq = static_cast<uint32_t>(impl_->cqs.size());
  return Status::Ok();
}

int Endpoint::poll_cq(uint32_t cq, std::span<Wc> out) {
  if (cq == 0 || cq > impl_->cqs.size()) return -EINVAL;
  Cq& c = impl_->cqs[cq - 1];
  size_t n = 0;
  while (n < out.size() && !c.q.empty()) {
    out[n++] = c.q.front();
    c.q.pop_front();
  }
  return static_cast<int>(n);
}

Status Endpoint::create_qp(const QpInitAttr& init, uint32_t& qpn) {
  Impl& d = *impl_;
  auto valid_cq = [&](uint32_t cq) { return cq != 0 && cq <= d.cqs.size(); };
  if (!valid_cq(init.send_cq)) return Status::Error(EINVAL, "create_qp: send_cq is not a CQ");
  if (!valid_cq(init.recv_cq)) return Status::Error(EINVAL, "create_qp: recv_cq is not a CQ");
  if (init.cap.max_send_wr == 0 || init.cap.max_send_wr > d.cfg.caps.max_send_wr)
    return Status::Error(EINVAL, "create_qp: cap.max_send_wr " +
                                     std::to_string(init.cap.max_send_wr) + " must be 1.." +
                                     std::to_string(d.cfg.caps.max_send_wr));
  if (init.cap.max_recv_wr > d.cfg.caps.max_recv_wr)
    return Status::Error(EINVAL, "create_qp: cap.max_recv_wr " +
                                     std::to_string(init.cap.max_recv_wr) + " exceeds " +
                                     std::to_string(d.cfg.caps.max_recv_wr));
  if (init.cap.max_send_sge > kMaxSge || init.cap.max_recv_sge > kMaxSge)
    return Status::Error(EINVAL, "create_qp: at most " + std::to_string(kMaxSge) + " SGEs");
  if (init.protocol_version != 0 && init.protocol_version != 1)
    return Status::Error(EINVAL,
                         "create_qp: protocol_version must be 0 (default) or "
                         "MRC_PROTOCOL_VERSION_1");
  if (d.qps.size() >= d.cfg.caps.max_qp)
    return Status::Error(ENOMEM,
                         "create_qp: max_qp " + std::to_string(d.cfg.caps.max_qp) + " reached");
  while (d.qps.count(d.next_qpn) || d.next_qpn <= wire::kEndpointOpQpn) {
    d.next_qpn = (d.next_qpn + 1) & 0xFFFFFF;
  }
  qpn = d.next_qpn;
  d.next_qpn = (d.next_qpn + 1) & 0xFFFFFF;
  d.qps.emplace(qpn, std::make_unique<Qp>(d, qpn, init));
  return Status::Ok();
}

Status Endpoint::modify_qp(uint32_t qpn, const QpAttr& attr, uint32_t attr_mask,
                           const MrcQpAttr& mrc, uint32_t mrc_mask) {
  Qp* qp = impl_->find_qp(qpn);
  if (qp == nullptr) return Status::Error(EINVAL, "modify_qp: no QP " + std::to_string(qpn));
  ++impl_->rx_gate_gen;  // peer, windows, PSNs
  return qp->modify(attr, attr_mask, mrc, mrc_mask);
}

Status Endpoint::query_qp(uint32_t qpn, QpAttr& attr, MrcQpAttr& mrc) const {
  auto it = impl_->qps.find(qpn);
  if (it == impl_->qps.end())
    return Status::Error(EINVAL, "query_qp: no QP " + std::to_string(qpn));
  it->second->query(attr, mrc);
  return Status::Ok();
}

Status Endpoint::destroy_qp(uint32_t qpn) {
  auto it = impl_->qps.find(qpn);
  if (it == impl_->qps.end())
    return Status::Error(EINVAL, "destroy_qp: no QP " + std::to_string(qpn));
  const wire::Ipv6Addr peer = it->second->peer_gid();
  impl_->qps.erase(it);
  ++impl_->rx_gate_gen;
  if (!impl_->has_qp_to(peer)) {  // per-peer state goes with the peer's last QP
    impl_->peer_port_mask.erase(peer);
    impl_->ep_reply_peer.erase(peer);
  }
  return Status::Ok();
}

namespace {
Status check_mr_args(const void* addr, size_t length, uint32_t access) {
  if (addr == nullptr && length != 0) return Status::Error(EINVAL, "register_mr: null address");
  if (access & ~(kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic))
    return Status::Error(EINVAL, "register_mr: unknown access bits");
  if ((access & kAccessRemoteWrite) && !(access & kAccessLocalWrite))
    return Status::Error(EINVAL, "register_mr: REMOTE_WRITE requires LOCAL_WRITE (verbs rule)");
  const auto base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr));
  if (length > UINT64_MAX - base) return Status::Error(EINVAL, "register_mr: range wraps");
  return Status::Ok();
}
}  // namespace

Status Endpoint::register_mr(void* addr, size_t length, uint32_t access, MemoryRegion& out,
                             uint32_t pd) {
  Impl& d = *impl_;
  if (Status s = check_mr_args(addr, length, access); !s.ok()) return s;
  MemoryRegion mr;
  mr.addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr));
  mr.length = length;
  mr.access = access;
  mr.pd = pd;
  // Keys come from the endpoint PRNG (deterministic, not guessable from the index).
  do {
    mr.lkey = static_cast<uint32_t>(d.rng.next());
  } while (mr.lkey == 0 || d.mr_by_lkey.count(mr.lkey));
  do {
    mr.rkey = static_cast<uint32_t>(d.rng.next());
  } while (mr.rkey == 0 || d.lkey_of_rkey.count(mr.rkey));
  d.mr_by_lkey.emplace(mr.lkey, mr);
  d.lkey_of_rkey.emplace(mr.rkey, mr.lkey);
  out = mr;
  return Status::Ok();
}

Status Endpoint::register_mr_with_keys(void* addr, size_t length, uint32_t access, uint32_t lkey,
                                       uint32_t rkey, MemoryRegion& out, uint32_t pd) {
  Impl& d = *impl_;
  if (Status s = check_mr_args(addr, length, access); !s.ok()) return s;
  if (lkey == 0) return Status::Error(EINVAL, "register_mr_with_keys: lkey 0");
  if (d.mr_by_lkey.count(lkey))
    return Status::Error(EEXIST, "register_mr_with_keys: lkey " + std::to_string(lkey) + " in use");
  if (rkey != 0 && d.lkey_of_rkey.count(rkey))
    return Status::Error(EEXIST, "register_mr_with_keys: rkey " + std::to_string(rkey) + " in use");
  MemoryRegion mr;
  mr.addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr));
  mr.length = length;
  mr.access = access;
  mr.pd = pd;
  mr.lkey = lkey;
  mr.rkey = rkey;
  d.mr_by_lkey.emplace(mr.lkey, mr);
  if (rkey != 0) d.lkey_of_rkey.emplace(mr.rkey, mr.lkey);
  out = mr;
  return Status::Ok();
}

Status Endpoint::deregister_mr(uint32_t lkey) {
  auto it = impl_->mr_by_lkey.find(lkey);
  if (it == impl_->mr_by_lkey.end())
    return Status::Error(EINVAL, "deregister_mr: unknown lkey " + std::to_string(lkey));
  if (it->second.rkey != 0) impl_->lkey_of_rkey.erase(it->second.rkey);
  impl_->mr_by_lkey.erase(it);
  return Status::Ok();
}

Status Endpoint::post_send(uint32_t qpn, const SendWr& wr) {
  Qp* qp = impl_->find_qp(qpn);
  if (qp == nullptr) return Status::Error(EINVAL, "post_send: no QP " + std::to_string(qpn));
  return qp->post_send(wr);
}

Status Endpoint::post_write(uint32_t qpn, uint64_t wr_id, std::span<const Sge> sg_list,
                            uint64_t remote_addr, uint32_t rkey, std::optional<uint32_t> imm,
                            bool signaled) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = imm ? WrOpcode::kRdmaWriteWithImm : WrOpcode::kRdmaWrite;
  wr.sg_list = sg_list;
  wr.send_flags = signaled ? uint32_t{kSendSignaled} : 0u;
  wr.imm_data = imm.value_or(0);
  wr.remote_addr = remote_addr;
  wr.rkey = rkey;
  return post_send(qpn, wr);
}

Status Endpoint::post_recv(uint32_t qpn, const RecvWr& wr) {
  Qp* qp = impl_->find_qp(qpn);
  if (qp == nullptr) return Status::Error(EINVAL, "post_recv: no QP " + std::to_string(qpn));
  return qp->post_recv(wr);
}

bool Endpoint::get_async_event(AsyncEvent& out) {
  if (impl_->async.empty()) return false;
  out = impl_->async.front();
  impl_->async.pop_front();
  return true;
}

Status Endpoint::set_responder_mpr(uint32_t qpn, uint8_t mpr_units) {
  Qp* qp = impl_->find_qp(qpn);
  if (qp == nullptr)
    return Status::Error(EINVAL, "set_responder_mpr: no QP " + std::to_string(qpn));
  if (mpr_units == 0) return Status::Error(EINVAL, "set_responder_mpr: MPR must be >= 1");
  QpAttr a;
  MrcQpAttr m;
  qp->query(a, m);
  if (mpr_units > m.mpr_dest)
    return Status::Error(EINVAL, "set_responder_mpr: " + std::to_string(mpr_units) +
                                     " exceeds the negotiated MPR_DEST " +
                                     std::to_string(m.mpr_dest));
  qp->set_responder_mpr(mpr_units);
  return Status::Ok();
}

Status Endpoint::set_rcv_cwnd_pen(uint32_t qpn, uint8_t pen) {
  Qp* qp = impl_->find_qp(qpn);
  if (qp == nullptr) return Status::Error(EINVAL, "set_rcv_cwnd_pen: no QP " + std::to_string(qpn));
  if (pen > 127) return Status::Error(EINVAL, "set_rcv_cwnd_pen: 0..127");
  qp->set_rcv_cwnd_pen(pen);
  return Status::Ok();
}

Status Endpoint::qp_stats(uint32_t qpn, QpStats& out) const {
  auto it = impl_->qps.find(qpn);
  if (it == impl_->qps.end())
    return Status::Error(EINVAL, "qp_stats: no QP " + std::to_string(qpn));
  it->second->fill_stats(out);
  return Status::Ok();
}

uint64_t Endpoint::rx_gate_generation() const {
  return impl_->rx_gate_gen;
}

void Endpoint::rx_gates(std::vector<RxGate>& out) const {
  out.clear();
  for (const auto& [qpn, qp] : impl_->qps) {
    if (qp->state() != QpState::kRtr && qp->state() != QpState::kRts) continue;
    RxGate g;
    g.qpn = qpn;
    g.peer_gid = qp->peer_gid();
    g.rcv_cack = qp->rcv_cack();
    g.rcv_window = qp->rcv_window();
    if (qp->state() == QpState::kRts) {
      g.snd_cack = qp->snd_cack();
      g.snd_window = qp->snd_window();
    }
    out.push_back(g);
  }
}

Status Endpoint::ev_info(uint32_t qpn, std::vector<EvInfo>& out) const {
  auto it = impl_->qps.find(qpn);
  if (it == impl_->qps.end()) return Status::Error(EINVAL, "ev_info: no QP " + std::to_string(qpn));
  const EvSet& evs = it->second->evs();
  out.clear();
  for (uint32_t i = 0; i < evs.size(); ++i) {
    const EvRecord& r = evs.at(i);
    EvInfo info;
    info.wev = r.wev;
    info.port = r.port;
    info.state = r.state;
    info.active = r.role == EvRecord::Role::kActive;
    info.packets_sent = r.packets_sent;
    out.push_back(info);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Receive dispatch
// ---------------------------------------------------------------------------------------------
void Endpoint::on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) {
  Impl& d = *impl_;
  d.touch(now_ns);
  now_ns = d.now_ns;
  ++d.stats.rx_frames;
  if (port == 0 || port > d.nports || ((d.local_port_mask >> port) & 1u) == 0) {
    ++d.stats.rx_bad_port;
    return;
  }
  wire::DecodedFrame f;
  wire::DecodeOptions opts;
  const bool ok = wire::decode_frame(frame, f, opts, *d.prof);
  if (!f.roce) {
    if (!ok && f.has_udp && d.prof->is_roce_port(f.udp.dport))
      ++d.stats.rx_decode_errors;
    else
      ++d.stats.rx_not_roce;
    return;
  }
  if (!d.frame_for_us(f)) {
    ++d.stats.rx_not_for_us;
    return;
  }
  const wire::DscpPlan& plan = d.prof->dscp();
  const uint8_t dscp = f.dscp();
  const bool trimmed = dscp == plan.trimmed || dscp == plan.trimmed_lasthop;
  const wire::PacketKind kind = f.op != nullptr ? f.op->kind : wire::PacketKind::kUnknown;

  if (trimmed) {
    // A trimmed packet keeps at least BTH + METH (+ TSETH); the ICRC is gone or stale, so it
    // is not checked (R1). Only data packets are trimmable.
    if (kind != wire::PacketKind::kMrcData || !f.has(wire::kHdrMeth)) {
      ++d.stats.rx_decode_errors;
      return;
    }
  } else {
    if (!ok) {
      ++d.stats.rx_decode_errors;
      if (d.logging()) {
        Event e = d.event(EventKind::kDrop, f.bth.dest_qp);
        e.s("reason", wire::decode_error_name(f.error.code))
            .s("layer", wire::layer_name(f.error.layer))
            .u("offset", f.error.offset);
        d.emit(e);
      }
      return;
    }
    if (!wire::verify_icrc(f)) {
      ++d.stats.rx_bad_icrc;
      if (d.logging()) {
        Event e = d.event(EventKind::kDrop, f.bth.dest_qp);
        e.s("reason", "bad_icrc").u("psn", f.bth.psn);
        d.emit(e);
      }
      return;
    }
  }
  const uint32_t wev = d.wev_of_frame(f);

  if (kind == wire::PacketKind::kMrcEndpointRequest ||
      kind == wire::PacketKind::kMrcEndpointResponse) {
    if (f.bth.dest_qp != wire::kEndpointOpQpn) {
      ++d.stats.rx_unexpected;
      return;
    }
    if (kind == wire::PacketKind::kMrcEndpointRequest)
      d.on_ep_request(f, port, now_ns, wev);
    else
      d.on_ep_response(f, port, now_ns);
    return;
  }
  switch (kind) {
    case wire::PacketKind::kMrcData:
    case wire::PacketKind::kMrcProbe:
    case wire::PacketKind::kMrcSack:
    case wire::PacketKind::kMrcNack:
    case wire::PacketKind::kMrcTransportAck:
      break;
    default:
      ++d.stats.rx_unexpected;  // RC, CNP and opcodes the profile does not know
      if (d.logging()) {
        Event e = d.event(EventKind::kDrop, f.bth.dest_qp);
        e.s("reason", "unexpected_opcode").u("opcode", f.bth.opcode);
        d.emit(e);
      }
      return;
  }
  Qp* qp = d.find_qp(f.bth.dest_qp);
  if (qp == nullptr) {
    ++d.stats.rx_unknown_qp;
    return;
  }
  if (qp->state() == QpState::kReset || qp->state() == QpState::kInit) {
    ++d.stats.rx_wrong_state;
    return;
  }
  if (!d.frame_src_is(f, qp->peer_gid())) {
    ++d.stats.rx_not_for_us;  // right QPN, wrong peer: not this connection
    return;
  }
  if (qp->state() == QpState::kErr) {
    if (!trimmed && (kind == wire::PacketKind::kMrcData || kind == wire::PacketKind::kMrcProbe))
      qp->on_rx_in_error(f, port, now_ns, wev);
    else
      ++d.stats.rx_wrong_state;
    return;
  }
  switch (kind) {
    case wire::PacketKind::kMrcData:
      qp->on_data(f, port, now_ns, trimmed, wev);
      break;
    case wire::PacketKind::kMrcProbe:
      qp->on_probe(f, port, now_ns, wev);
      break;
    case wire::PacketKind::kMrcSack:
      qp->on_sack(f, port, now_ns);
      break;
    case wire::PacketKind::kMrcNack:
      qp->on_nack(f, port, now_ns);
      break;
    case wire::PacketKind::kMrcTransportAck:
      qp->on_transport_ack(f, port, now_ns);
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------------------------------------
// Transmit scheduling: control packets, then endpoint requests, then QPs round robin.
// ---------------------------------------------------------------------------------------------
bool Endpoint::poll_tx(uint64_t now_ns, TxPacket& out) {
  Impl& d = *impl_;
  d.touch(now_ns);
  now_ns = d.now_ns;
  while (!d.ctrl.empty()) {
    const CtrlPkt c = d.ctrl.front();
    d.ctrl.pop_front();
    if (((d.local_port_mask >> c.port) & 1u) == 0) continue;  // the port went down meanwhile
    bool built = false;
    if (c.kind == CtrlKind::kEpResponse) {
      built = d.build_ep_response(c, now_ns, out);
    } else if (Qp* qp = d.find_qp(c.qpn)) {
      built = qp->build_ctrl(c, now_ns, out);
    }
    if (built) return true;
  }
  while (!d.ep_tx.empty()) {
    const uint16_t id = d.ep_tx.front();
    d.ep_tx.pop_front();
    if (d.build_ep_request(id, now_ns, out)) return true;
  }
  if (d.qps.empty()) return false;
  // Round robin: start after the QP served last.
  auto it = d.qps.upper_bound(d.rr_last);
  for (size_t n = 0; n < d.qps.size(); ++n) {
    if (it == d.qps.end()) it = d.qps.begin();
    if (it->second->next_tx(now_ns, out)) {
      d.rr_last = it->first;
      return true;
    }
    ++it;
  }
  return false;
}

void Endpoint::on_timer(uint64_t now_ns) {
  Impl& d = *impl_;
  d.touch(now_ns);
  now_ns = d.now_ns;
  for (auto& [qpn, qp] : d.qps) {
    if (qp->deadline() <= now_ns) qp->on_timer(now_ns);
  }
  d.expire_ep(now_ns);
}

void Endpoint::begin_rx_batch() {
  impl_->rx_batch_open = true;
}

void Endpoint::end_rx_batch(uint64_t now_ns) {
  Impl& d = *impl_;
  d.touch(now_ns);
  d.rx_batch_open = false;
  for (const uint32_t qpn : d.gap_scan_deferred)
    if (Qp* qp = d.find_qp(qpn)) qp->deferred_gap_scan(d.now_ns);
  d.gap_scan_deferred.clear();
}

uint64_t Endpoint::next_deadline_ns() const {
  const Impl& d = *impl_;
  uint64_t t = UINT64_MAX;
  for (const auto& [qpn, qp] : d.qps) t = std::min(t, qp->deadline());
  for (const auto& [id, p] : d.ep_pending)
    if (p.sent) t = std::min(t, p.deadline_ns);
  return t;
}

bool Endpoint::tx_waiting() const {
  for (const auto& [qpn, qp] : impl_->qps)
    if (qp->tx_waiting()) return true;
  return false;
}

Status Endpoint::ep_post_request(const EpRequest& req, uint64_t now_ns) {
  impl_->touch(now_ns);
  return impl_->queue_ep_request(req, 0, -1, true, impl_->now_ns);
}

bool Endpoint::ep_poll_response(EpResponse& out) {
  if (impl_->ep_responses.empty()) return false;
  out = impl_->ep_responses.front();
  impl_->ep_responses.pop_front();
  return true;
}

}  // namespace mrc::engine
