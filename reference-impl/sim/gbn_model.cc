// RoCEv2 RC with go-back-N recovery (see gbn_model.h for what is modelled).
#include "reference-impl/sim/gbn_model.h"

#include <algorithm>
#include <cstring>

namespace mrc::sim {

using wire::psn_add;
using wire::psn_diff;
using wire::psn_le;
using wire::psn_lt;

namespace {
constexpr uint8_t kAethAck = 0x1F;        // ACK, credit count invalid
constexpr uint8_t kAethNakPsnSeq = 0x60;  // NAK: PSN sequence error
constexpr uint8_t kAethNakAccess = 0x62;  // NAK: remote access error
constexpr uint8_t kEcnEct0 = 2;
constexpr uint32_t kFirstQpn = 0x100;
}  // namespace

std::string_view gbn_status_name(GbnStatus s) {
  switch (s) {
    case GbnStatus::kSuccess:
      return "SUCCESS";
    case GbnStatus::kRetryExceeded:
      return "RETRY_EXC_ERR";
    case GbnStatus::kRemoteAccess:
      return "REM_ACCESS_ERR";
    case GbnStatus::kFlushed:
      return "WR_FLUSH_ERR";
  }
  return "?";
}

GbnEndpoint::GbnEndpoint(GbnConfig cfg) : cfg_(std::move(cfg)), rng_state_(cfg_.seed) {}

uint32_t GbnEndpoint::create_qp(uint16_t sport, uint8_t port) {
  Qp q;
  q.qpn = kFirstQpn + static_cast<uint32_t>(qps_.size());
  q.sport = sport;
  q.port = port == 0 ? cfg_.port : port;
  const uint32_t psn = static_cast<uint32_t>(splitmix64(rng_state_)) & wire::kPsnMask;
  q.psn_end = q.una = q.nxt = q.high = psn;
  qps_.push_back(q);
  return q.qpn;
}

GbnEndpoint::Qp* GbnEndpoint::find(uint32_t qpn) {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
  return &qps_[qpn - kFirstQpn];
}

const GbnEndpoint::Qp* GbnEndpoint::find(uint32_t qpn) const {
  if (qpn < kFirstQpn || qpn - kFirstQpn >= qps_.size()) return nullptr;
  return &qps_[qpn - kFirstQpn];
}

uint32_t GbnEndpoint::initial_psn(uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q != nullptr ? q->una : 0;
}

bool GbnEndpoint::connect(uint32_t qpn, const wire::Ipv6Addr& peer_gid, uint32_t dest_qpn,
                          uint32_t rq_psn) {
  Qp* q = find(qpn);
  if (q == nullptr) return false;
  q->peer = peer_gid;
  q->dest_qpn = dest_qpn;
  q->epsn = rq_psn & wire::kPsnMask;
  q->connected = true;
  return true;
}

bool GbnEndpoint::qp_in_error(uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q == nullptr || q->error;
}

uint32_t GbnEndpoint::register_region(void* addr, size_t len) {
  const uint32_t rkey = next_rkey_++;
  regions_[rkey] = Region{reinterpret_cast<uintptr_t>(addr), len};
  return rkey;
}

bool GbnEndpoint::post_write(uint32_t qpn, uint64_t wr_id, const void* src, uint32_t len,
                             uint64_t remote_addr, uint32_t rkey) {
  Qp* q = find(qpn);
  if (q == nullptr || !q->connected || q->error) return false;
  Wqe w;
  w.wr_id = wr_id;
  w.src = static_cast<const std::byte*>(src);
  w.len = len;
  w.remote_addr = remote_addr;
  w.rkey = rkey;
  w.first_psn = q->psn_end;
  w.npkts = len == 0 ? 1 : (len + cfg_.path_mtu - 1) / cfg_.path_mtu;
  q->psn_end = psn_add(q->psn_end, w.npkts);
  q->sq.push_back(w);
  return true;
}

bool GbnEndpoint::poll(GbnCompletion& out) {
  if (cq_.empty()) return false;
  out = cq_.front();
  cq_.pop_front();
  return true;
}

uint64_t GbnEndpoint::bytes_placed(uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q != nullptr ? q->placed : 0;
}

uint64_t GbnEndpoint::retransmitted_packets(uint32_t qpn) const {
  const Qp* q = find(qpn);
  return q != nullptr ? q->retransmitted : 0;
}

// ---------------------------------------------------------------------------------------------
// Receive
// ---------------------------------------------------------------------------------------------
void GbnEndpoint::on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) {
  (void)port;
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f) || !f.roce || f.op == nullptr || !wire::verify_icrc(f)) {
    ++stats_.rx_dropped;
    return;
  }
  Qp* q = find(f.bth.dest_qp);
  const wire::Ipv6Header* ip = f.roce_ip6();
  if (q == nullptr || !q->connected || q->error || ip == nullptr || ip->dst != cfg_.gid ||
      ip->src != q->peer) {
    ++stats_.rx_dropped;
    return;
  }
  if (f.op->kind == wire::PacketKind::kRcData)
    on_data(*q, f);
  else if (f.op->kind == wire::PacketKind::kRcAck)
    on_ack(*q, f, now_ns);
  else
    ++stats_.rx_dropped;
}

void GbnEndpoint::on_data(Qp& q, const wire::DecodedFrame& f) {
  ++stats_.data_packets_rx;
  const uint32_t psn = f.bth.psn;
  if (psn != q.epsn) {
    if (psn_lt(psn, q.epsn)) {
      // Duplicate: the requester missed our ACK; say again how far we are.
      ++stats_.duplicates_rx;
      ctrl_.push_back({q.qpn, psn_add(q.epsn, -1), kAethAck});
    } else {
      ++stats_.out_of_sequence_rx;
      if (!q.nak_sent) {
        q.nak_sent = true;
        ctrl_.push_back({q.qpn, q.epsn, kAethNakPsnSeq});
      }
    }
    return;
  }
  const wire::MessagePosition pos = f.op->position;
  const bool starts = pos == wire::MessagePosition::kFirst || pos == wire::MessagePosition::kOnly;
  if (starts) {
    auto it = regions_.find(f.reth.rkey);
    const uint64_t va = f.reth.va;
    const uint64_t len = f.reth.dma_len;
    const bool ok = it != regions_.end() && va >= it->second.addr &&
                    va - it->second.addr <= it->second.len &&
                    len <= it->second.len - (va - it->second.addr);
    if (!ok) {
      ++stats_.remote_access_errors;
      ctrl_.push_back({q.qpn, psn, kAethNakAccess});
      q.error = true;
      return;
    }
    q.write_va = va;
    q.write_end = va + len;
    q.writing = true;
  } else if (!q.writing) {
    ++stats_.rx_dropped;  // MIDDLE / LAST without a FIRST
    return;
  }
  const size_t n = f.payload.size();
  if (n > q.write_end - q.write_va) {
    ++stats_.remote_access_errors;
    ctrl_.push_back({q.qpn, psn, kAethNakAccess});
    q.error = true;
    return;
  }
  if (n > 0)
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(q.write_va)), f.payload.data(), n);
  q.write_va += n;
  q.placed += n;
  stats_.bytes_placed += n;
  if (pos == wire::MessagePosition::kLast || pos == wire::MessagePosition::kOnly) q.writing = false;
  q.epsn = psn_add(q.epsn, 1);
  q.nak_sent = false;
  if (f.bth.ack_req) ctrl_.push_back({q.qpn, psn, kAethAck});
}

void GbnEndpoint::acknowledge(Qp& q, uint32_t psn, uint64_t now_ns) {
  // Everything up to and including psn arrived.
  if (!psn_lt(psn, q.high) || psn_lt(psn, q.una)) return;  // stale or never sent
  q.una = psn_add(psn, 1);
  if (psn_lt(q.nxt, q.una)) q.nxt = q.una;
  q.retries = 0;
  while (!q.sq.empty()) {
    const Wqe& w = q.sq.front();
    if (!psn_le(psn_add(w.first_psn, w.npkts), q.una)) break;
    cq_.push_back({w.wr_id, q.qpn, GbnStatus::kSuccess, now_ns});
    q.sq.pop_front();
  }
  q.deadline = q.una == q.high ? UINT64_MAX : now_ns + cfg_.timeout_ns;
}

void GbnEndpoint::on_ack(Qp& q, const wire::DecodedFrame& f, uint64_t now_ns) {
  const uint8_t syn = f.aeth.syndrome;
  const uint32_t psn = f.bth.psn;
  if ((syn >> 5) == 0) {
    ++stats_.acks_rx;
    acknowledge(q, psn, now_ns);
    return;
  }
  ++stats_.naks_rx;
  if (syn == kAethNakPsnSeq) {
    // Everything before psn arrived; resend from psn on.
    acknowledge(q, psn_add(psn, -1), now_ns);
    if (psn_le(q.una, psn) && psn_lt(psn, q.high)) {
      q.nxt = psn;
      ++stats_.go_backs;
      q.deadline = now_ns + cfg_.timeout_ns;
    }
    return;
  }
  if ((syn >> 5) == 3) to_error(q, GbnStatus::kRemoteAccess, now_ns);
}

void GbnEndpoint::to_error(Qp& q, GbnStatus head_status, uint64_t now_ns) {
  q.error = true;
  q.deadline = UINT64_MAX;
  bool head = true;
  for (const Wqe& w : q.sq) {
    cq_.push_back({w.wr_id, q.qpn, head ? head_status : GbnStatus::kFlushed, now_ns});
    head = false;
  }
  q.sq.clear();
}

void GbnEndpoint::on_timer(uint64_t now_ns) {
  for (Qp& q : qps_) {
    if (q.error || q.deadline > now_ns) continue;
    if (q.una == q.high) {
      q.deadline = UINT64_MAX;
      continue;
    }
    ++stats_.timeouts;
    if (++q.retries > cfg_.retry_cnt) {
      to_error(q, GbnStatus::kRetryExceeded, now_ns);
      continue;
    }
    q.nxt = q.una;
    ++stats_.go_backs;
    q.deadline = now_ns + cfg_.timeout_ns;
  }
}

uint64_t GbnEndpoint::next_deadline_ns() const {
  uint64_t d = UINT64_MAX;
  for (const Qp& q : qps_)
    if (!q.error) d = std::min(d, q.deadline);
  return d;
}

// ---------------------------------------------------------------------------------------------
// Transmit
// ---------------------------------------------------------------------------------------------
wire::FrameSpec& GbnEndpoint::begin(const Qp& q, uint8_t opcode, uint8_t dscp, uint8_t ecn) {
  wire::FrameSpec& s = spec_;
  s = wire::FrameSpec{};
  s.has_eth = true;
  s.eth.src = cfg_.mac;
  s.eth.dst = cfg_.next_hop_mac;
  s.eth.ethertype = wire::kEtherTypeIpv6;
  s.l3 = 6;
  s.ip6.dscp = dscp;
  s.ip6.ecn = ecn;
  s.ip6.flow_label = 0;  // RoCEv2: the path is chosen by the UDP source port alone
  s.ip6.next_header = wire::kIpProtoUdp;
  s.ip6.hop_limit = 64;
  s.ip6.src = cfg_.gid;
  s.ip6.dst = q.peer;
  s.has_udp = true;
  s.udp.sport = q.sport;
  s.udp.dport = wire::kRoceV2Port;
  s.roce = true;
  s.bth.opcode = opcode;
  s.bth.dest_qp = q.dest_qpn;
  s.op = wire::mrp0().opcode_info(opcode);
  s.headers = s.op != nullptr ? s.op->headers : 0;
  return s;
}

bool GbnEndpoint::finish(const Qp& q, TxFrame& out) {
  out.frame.resize(wire::encoded_size(spec_));
  const size_t n = wire::encode_frame(spec_, wire::MutBytes(out.frame.data(), out.frame.size()));
  if (n == 0) {
    out.frame.clear();
    return false;
  }
  out.frame.resize(n);
  out.port = q.port;
  return true;
}

bool GbnEndpoint::build_ctrl(const Ctrl& c, TxFrame& out) {
  const Qp* q = find(c.qpn);
  if (q == nullptr) return false;
  wire::FrameSpec& s = begin(*q, static_cast<uint8_t>(wire::Opcode::kRcAcknowledge), cfg_.dscp, 0);
  s.bth.psn = c.psn;
  s.aeth.syndrome = c.syndrome;
  s.aeth.msn = 0;
  if (c.syndrome == kAethAck)
    ++stats_.acks_sent;
  else
    ++stats_.naks_sent;
  return finish(*q, out);
}

bool GbnEndpoint::build_data(Qp& q, uint64_t now_ns, TxFrame& out) {
  if (!q.connected || q.error || q.nxt == q.psn_end) return false;
  if (psn_diff(q.nxt, q.una) >= cfg_.window_psns) return false;
  // The WQE holding nxt (the send queue is short: only unacknowledged messages).
  const Wqe* w = nullptr;
  for (const Wqe& c : q.sq) {
    if (psn_le(c.first_psn, q.nxt) && psn_lt(q.nxt, psn_add(c.first_psn, c.npkts))) {
      w = &c;
      break;
    }
  }
  if (w == nullptr) return false;
  const uint32_t pkt = psn_diff(q.nxt, w->first_psn);
  const uint64_t off = uint64_t{pkt} * cfg_.path_mtu;
  const uint32_t len =
      w->len == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(cfg_.path_mtu, w->len - off));
  wire::Opcode op = wire::Opcode::kRcWriteMiddle;
  if (w->npkts == 1)
    op = wire::Opcode::kRcWriteOnly;
  else if (pkt == 0)
    op = wire::Opcode::kRcWriteFirst;
  else if (pkt + 1 == w->npkts)
    op = wire::Opcode::kRcWriteLast;
  wire::FrameSpec& s = begin(q, static_cast<uint8_t>(op), cfg_.dscp, kEcnEct0);
  s.bth.psn = q.nxt;
  s.bth.ack_req = pkt + 1 == w->npkts || (pkt + 1) % cfg_.ack_req_every == 0;
  s.reth.va = w->remote_addr;
  s.reth.rkey = w->rkey;
  s.reth.dma_len = w->len;
  s.payload = {w->src + off, len};
  if (psn_lt(q.nxt, q.high)) {
    ++stats_.retransmitted_packets;
    ++q.retransmitted;
  } else {
    q.high = psn_add(q.nxt, 1);
  }
  ++stats_.data_packets_sent;
  q.nxt = psn_add(q.nxt, 1);
  if (q.deadline == UINT64_MAX) q.deadline = now_ns + cfg_.timeout_ns;
  return finish(q, out);
}

bool GbnEndpoint::poll_tx(uint64_t now_ns, TxFrame& out) {
  while (!ctrl_.empty()) {
    const Ctrl c = ctrl_.front();
    ctrl_.pop_front();
    if (build_ctrl(c, out)) return true;
  }
  for (size_t n = 0; n < qps_.size(); ++n) {
    Qp& q = qps_[(rr_ + n) % qps_.size()];
    if (build_data(q, now_ns, out)) {
      rr_ = (rr_ + n + 1) % qps_.size();
      return true;
    }
  }
  return false;
}

}  // namespace mrc::sim
