#include "reference-impl/runtime/transfer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mrc::runtime {

constexpr size_t kPopulateChunk = 16u << 20;

Region::~Region() {
  stop_ = true;
  if (populate_.joinable()) populate_.join();
  if (p_ != nullptr) munmap(p_, n_);
}

Status Region::allocate(size_t bytes, uint64_t budget_ns) {
  if (bytes == 0) bytes = 4096;
  const int populate = budget_ns == UINT64_MAX ? MAP_POPULATE : 0;
  void* m =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | populate, -1, 0);
  if (m == MAP_FAILED)
    return Status::Error(ENOMEM, "cannot allocate " + std::to_string(bytes) +
                                     " bytes of buffer: " + std::strerror(errno));
  p_ = static_cast<std::byte*>(m);
  n_ = bytes;
  if (populate) return Status::Ok();
  // In chunks: the budget is checked between them, and a side that ends early waits for one
  // chunk at most. A kernel without MADV_POPULATE_WRITE (before 5.14) leaves the pages to the
  // data path's faults.
  const uint64_t end = monotonic_ns() + budget_ns;
  size_t off = 0;
  for (; off < n_ && monotonic_ns() < end; off += kPopulateChunk)
    if (madvise(p_ + off, std::min(kPopulateChunk, n_ - off), MADV_POPULATE_WRITE) != 0)
      return Status::Ok();
  if (off < n_) {
    populate_ = std::thread([this, off] {
      for (size_t o = off; o < n_ && !stop_.load(std::memory_order_relaxed); o += kPopulateChunk)
        if (madvise(p_ + o, std::min(kPopulateChunk, n_ - o), MADV_POPULATE_WRITE) != 0) break;
    });
  }
  return Status::Ok();
}

uint32_t data_frame_bytes(uint32_t pmtu, wire::EvFormat format, bool srh) {
  // Ethernet, IPv6, UDP, BTH, METH, TSETH, RETH, payload, ICRC (+ outer IPv6 (+ SRH) in SRv6).
  uint32_t n = 14 + 40 + 8 + 12 + 4 + 4 + 16 + pmtu + 4;
  if (format == wire::EvFormat::kSrv6) n += 40 + (srh ? 24 : 0);
  return n;
}

Status Side::create(engine::Endpoint& ep, const engine::EvProfile& ev, const engine::CcProfile& cc,
                    uint64_t profile_id) {
  profile_id_ = profile_id;
  if (mem_.data() == nullptr) {
    if (Status s = allocate(); !s.ok()) return s;
  }
  const uint64_t per_qp = stride_slots_ * plan_.size;
  const uint32_t recv_wr = client_ || !plan_.imm ? 1u : 2u * plan_.wimm;
  const uint32_t cqe = plan_.qps * (plan_.tx_depth + recv_wr) * 2 + 64;
  if (Status s = ep.create_cq(cqe, cq_); !s.ok()) return s;
  if (Status s = ep.add_ev_profile(profile_id_, ev); !s.ok()) return s;
  if (Status s = ep.add_cc_profile(profile_id_, cc); !s.ok()) return s;
  if (Status s = ep.register_mr(mem_.data(), mem_.size(),
                                engine::kAccessLocalWrite | engine::kAccessRemoteWrite, mr_);
      !s.ok())
    return s;
  qps_.resize(plan_.qps);
  for (uint32_t q = 0; q < plan_.qps; ++q) {
    engine::QpInitAttr init;
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.cap.max_send_wr = plan_.tx_depth;
    init.cap.max_recv_wr = recv_wr;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    Qp& x = qps_[q];
    if (Status s = ep.create_qp(init, x.qpn); !s.ok()) return s;
    x.psn = ep.random_psn();
    x.base = mem_.data() + per_qp * q;
    x.post_ns.assign(plan_.tx_depth, 0);
    x.done.assign(plan_.tx_depth, 0);
  }
  return Status::Ok();
}

Status Side::allocate() {
  if (plan_.slots == 0) return Status::Error(EINVAL, "no message slots");
  const uint64_t per_qp = plan_.slots * plan_.size;
  if (Status s = mem_.allocate(per_qp * plan_.qps, populate_budget_ns_); !s.ok()) return s;
  stride_slots_ = plan_.slots;
  if (client_) {
    const uint64_t first = plan_.iters ? std::min(plan_.iters, plan_.slots) : plan_.slots;
    for (uint32_t q = 0; q < plan_.qps; ++q)
      for (uint64_t m = 0; m < first; ++m)
        fill_pattern({mem_.data() + per_qp * q + m * plan_.size, plan_.size}, plan_.seed, q, m);
  }
  return Status::Ok();
}

Status Side::settle(const Plan& agreed) {
  if (mem_.data() != nullptr &&
      (agreed.slots == 0 || agreed.slots > stride_slots_ || agreed.size != plan_.size ||
       agreed.qps != plan_.qps || agreed.iters != plan_.iters || agreed.seed != plan_.seed))
    return Status::Error(EINVAL, "the agreed plan (" + std::to_string(agreed.slots) +
                                     " slots) does not fit the buffer allocated for " +
                                     std::to_string(stride_slots_) + " slots");
  plan_ = agreed;
  return Status::Ok();
}

std::vector<uint32_t> Side::qpns() const {
  std::vector<uint32_t> out;
  for (const Qp& q : qps_) out.push_back(q.qpn);
  return out;
}

std::vector<PeerQp> Side::local_qps() const {
  std::vector<PeerQp> out;
  for (const Qp& q : qps_)
    out.push_back(PeerQp{q.qpn, q.psn, mr_.rkey, reinterpret_cast<uint64_t>(q.base)});
  return out;
}

Status Side::connect(engine::Endpoint& ep, const wire::Ipv6Addr& peer_gid,
                     const std::vector<PeerQp>& peer, uint16_t max_wimm) {
  if (peer.size() != qps_.size())
    return Status::Error(EINVAL, "peer has " + std::to_string(peer.size()) + " QPs, we have " +
                                     std::to_string(qps_.size()));
  for (size_t q = 0; q < qps_.size(); ++q) {
    Qp& x = qps_[q];
    x.peer = peer[q];
    engine::QpAttr at;
    engine::MrcQpAttr m;
    at.qp_state = engine::QpState::kInit;
    at.qp_access_flags = engine::kAccessLocalWrite | engine::kAccessRemoteWrite;
    m.ev_profile_id = profile_id_;
    m.cc_profile_id = profile_id_;
    Status s = ep.modify_qp(x.qpn, at, engine::kQpState | engine::kQpAccessFlags, m,
                            engine::kMrcEvProfileId | engine::kMrcCcProfileId | engine::kMrcHint);
    if (!s.ok())
      return Status::Error(s.code, "QP " + std::to_string(x.qpn) + " to INIT: " + s.message);
    at.qp_state = engine::QpState::kRtr;
    at.dgid = peer_gid;
    at.dest_qp_num = x.peer.qpn;
    at.rq_psn = x.peer.psn;
    at.path_mtu = plan_.pmtu;
    m.max_wimm_dest = plan_.wimm;
    m.mpr_dest = plan_.mpr;
    m.cap = engine::kCapDynamicMpr;
    s = ep.modify_qp(x.qpn, at,
                     engine::kQpState | engine::kQpAv | engine::kQpDestQpn | engine::kQpRqPsn |
                         engine::kQpPathMtu,
                     m, engine::kMrcMaxWimmDest | engine::kMrcMprDest | engine::kMrcCap);
    if (!s.ok())
      return Status::Error(s.code, "QP " + std::to_string(x.qpn) + " to RTR: " + s.message);
    at.qp_state = engine::QpState::kRts;
    at.sq_psn = x.psn;
    m.max_wimm = max_wimm;
    m.mpr = plan_.mpr;
    m.retry.linear_cnt = plan_.retry_linear;
    m.retry.exp_cnt = plan_.retry_exp;
    m.timeout = plan_.timeout;
    s = ep.modify_qp(
        x.qpn, at, engine::kQpState | engine::kQpSqPsn, m,
        engine::kMrcMaxWimm | engine::kMrcMpr | engine::kMrcRetryCnt | engine::kMrcTimeout);
    if (!s.ok())
      return Status::Error(s.code, "QP " + std::to_string(x.qpn) + " to RTS: " + s.message);
  }
  return Status::Ok();
}

Status Side::post_receives(engine::Endpoint& ep) {
  if (!plan_.imm) return Status::Ok();
  for (size_t q = 0; q < qps_.size(); ++q) {
    for (uint32_t i = 0; i < 2u * plan_.wimm; ++i) {
      engine::RecvWr wr;
      wr.wr_id = q;
      if (Status s = ep.post_recv(qps_[q].qpn, wr); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

bool Side::on_async_event(const engine::AsyncEvent& ae) {
  if (ae.type == engine::AsyncEventType::kPortActive || ae.type == engine::AsyncEventType::kPortErr)
    return false;
  const bool mine =
      ae.type == engine::AsyncEventType::kCqErr ? ae.cq == cq_ : qp_index(ae.qp_num) >= 0;
  if (!mine) return false;
  const std::string why = "async event " + std::string(engine::async_event_name(ae.type)) +
                          " on QP " + std::to_string(ae.qp_num);
  if (client_)
    fail(why, async_failed_);
  else if (error_.empty())
    error_ = why;
  return true;
}

void dispatch_async_events(engine::Endpoint& ep, std::span<Side* const> sides) {
  engine::AsyncEvent ae;
  while (ep.get_async_event(ae)) {
    for (Side* s : sides)
      if (s != nullptr && s->on_async_event(ae)) break;
  }
}

int Side::qp_index(uint32_t qpn) const {
  for (size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i].qpn == qpn) return static_cast<int>(i);
  return -1;
}

bool Side::fail(const std::string& why, bool& done) {
  // The first error that is not a flush names the cause; flushes only follow it.
  const bool flush = why.find("FLUSH") != std::string::npos;
  if (error_.empty() || (error_is_flush_ && !flush)) {
    error_ = why;
    error_is_flush_ = flush;
  }
  done = true;
  return false;
}

uint64_t Side::client_step(engine::Endpoint& ep, uint64_t now, bool& done) {
  if (t_start_ == 0) {
    t_start_ = now;
    last_progress_ = now;
  }
  if (async_failed_) done = true;
  for (;;) {
    const int n = ep.poll_cq(cq_, wcs_);
    if (n < 0) {
      fail("poll_cq: error " + std::to_string(-n), done);
      break;
    }
    if (n == 0) break;
    for (int i = 0; i < n; ++i) {
      const engine::Wc& wc = wcs_[static_cast<size_t>(i)];
      const uint32_t q = static_cast<uint32_t>(wc.wr_id >> 40);
      const uint64_t msg = wc.wr_id & ((1ull << 40) - 1);
      if (wc.status != engine::WcStatus::kSuccess) {
        fail("QP " + std::to_string(wc.qp_num) + " message " + std::to_string(msg) + ": " +
                 std::string(engine::wc_status_name(wc.status)) + " (vendor_err " +
                 std::to_string(wc.vendor_err) + ")" +
                 (wc.status == engine::WcStatus::kRetryExcErr
                      ? "; the peer did not acknowledge: is it reachable over every plane?"
                      : ""),
             done);
        continue;
      }
      if (q >= qps_.size()) continue;
      Qp& x = qps_[q];
      const size_t k = msg % plan_.tx_depth;
      lat_.add(now - x.post_ns[k]);
      x.done[k] = 1;
      ++x.completed;
      while (x.lowest < x.posted && x.done[x.lowest % plan_.tx_depth]) {
        x.done[x.lowest % plan_.tx_depth] = 0;
        ++x.lowest;
      }
      last_progress_ = now;
      t_end_ = now;
    }
  }
  if (done) return UINT64_MAX;
  const bool time_over = plan_.duration_ns != 0 && now >= t_start_ + plan_.duration_ns;
  bool all_done = true;
  for (uint32_t q = 0; q < qps_.size(); ++q) {
    Qp& x = qps_[q];
    for (;;) {
      const bool more = plan_.iters ? x.posted < plan_.iters : !time_over;
      if (!more || x.posted - x.lowest >= plan_.tx_depth) break;
      const uint64_t m = x.posted;
      const uint64_t slot = m % plan_.slots;
      std::byte* src = x.base + slot * plan_.size;
      if (m >= plan_.slots) fill_pattern({src, plan_.size}, plan_.seed, q, m);
      const engine::Sge sge{reinterpret_cast<uint64_t>(src), static_cast<uint32_t>(plan_.size),
                            mr_.lkey};
      std::optional<uint32_t> imm;
      if (plan_.imm) imm = static_cast<uint32_t>(m);
      const Status s = ep.post_write(x.qpn, (uint64_t{q} << 40) | m, {&sge, 1},
                                     x.peer.va + slot * plan_.size, x.peer.rkey, imm, true);
      if (!s.ok()) {
        if (s.code == ENOMEM || s.code == EAGAIN || s.code == EBUSY) break;  // send queue full
        fail("post_write on QP " + std::to_string(x.qpn) + ": " + s.message, done);
        return UINT64_MAX;
      }
      x.post_ns[m % plan_.tx_depth] = now;
      ++x.posted;
    }
    const bool finished =
        plan_.iters ? x.completed >= plan_.iters : (time_over && x.completed == x.posted);
    all_done &= finished;
  }
  if (all_done) {
    done = true;
    return UINT64_MAX;
  }
  if (now - last_progress_ > plan_.stall_ns) {
    fail("no completion for " + std::to_string(plan_.stall_ns / 1'000'000'000ull) +
             " s: the transfer stalled",
         done);
    return UINT64_MAX;
  }
  uint64_t wake = last_progress_ + plan_.stall_ns + 1;
  if (plan_.duration_ns != 0 && !time_over) wake = std::min(wake, t_start_ + plan_.duration_ns);
  return wake;
}

uint64_t Side::server_step(engine::Endpoint& ep, uint64_t now, bool& done) {
  (void)now;
  for (;;) {
    const int n = ep.poll_cq(cq_, wcs_);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      const engine::Wc& wc = wcs_[static_cast<size_t>(i)];
      if (wc.status != engine::WcStatus::kSuccess) {
        if (wc.status != engine::WcStatus::kWrFlushErr && error_.empty())
          error_ = "QP " + std::to_string(wc.qp_num) + ": receive completion " +
                   std::string(engine::wc_status_name(wc.status));
        continue;
      }
      const int q = qp_index(wc.qp_num);
      if (q < 0 || wc.opcode != engine::WcOpcode::kRecvRdmaWithImm) continue;
      Qp& x = qps_[static_cast<size_t>(q)];
      const uint32_t m = wc.imm_data;
      if (m < (1u << 28)) {
        if (x.imm_seen.size() <= m)
          x.imm_seen.resize(std::max<size_t>(m + 1, x.imm_seen.size() * 2));
        if (x.imm_seen[m]) ++x.imm_duplicates;
        x.imm_seen[m] = true;
      }
      ++x.imm_received;
      engine::RecvWr wr;
      wr.wr_id = static_cast<uint64_t>(q);
      if (Status s = ep.post_recv(x.qpn, wr); !s.ok() && error_.empty())
        error_ = "post_recv on QP " + std::to_string(x.qpn) + ": " + s.message;
    }
  }
  (void)done;
  return UINT64_MAX;
}

VerifyResult Side::verify(const std::vector<uint64_t>& messages_per_qp) const {
  VerifyResult r;
  for (size_t q = 0; q < qps_.size() && q < messages_per_qp.size(); ++q) {
    const Qp& x = qps_[q];
    const uint64_t total = messages_per_qp[q];
    const uint64_t n = std::min(total, plan_.slots);
    for (uint64_t s = 0; s < n; ++s) {
      const uint64_t m = s + ((total - 1 - s) / plan_.slots) * plan_.slots;
      const std::byte* p = x.base + s * plan_.size;
      ++r.messages_checked;
      r.bytes_checked += plan_.size;
      if (auto off = check_pattern({p, plan_.size}, plan_.seed, static_cast<uint32_t>(q), m)) {
        if (r.messages_bad++ == 0)
          r.first_bad = "qp " + std::to_string(q) + " message " + std::to_string(m) + " slot " +
                        std::to_string(s) + " byte " + std::to_string(*off);
      }
    }
    if (plan_.imm) {
      r.imm_expected += total;
      r.imm_received += x.imm_received;
      r.imm_duplicates += x.imm_duplicates;
      for (uint64_t m = 0; m < total && m < (1u << 28); ++m)
        if (m >= x.imm_seen.size() || !x.imm_seen[m]) ++r.imm_missing;
    }
  }
  return r;
}

std::vector<uint64_t> Side::completed_per_qp() const {
  std::vector<uint64_t> out;
  for (const Qp& q : qps_) out.push_back(q.completed);
  return out;
}

uint64_t Side::messages_completed() const {
  uint64_t n = 0;
  for (const Qp& q : qps_) n += q.completed;
  return n;
}

engine::QpStats Side::qp_stats(const engine::Endpoint& ep) const {
  engine::QpStats sum;
  for (const Qp& q : qps_) {
    engine::QpStats s;
    if (!ep.qp_stats(q.qpn, s).ok()) continue;
    sum.data_packets_sent += s.data_packets_sent;
    sum.data_bytes_sent += s.data_bytes_sent;
    sum.retransmits += s.retransmits;
    sum.rtx_timeout += s.rtx_timeout;
    sum.silent_peer_holds += s.silent_peer_holds;
    sum.rtx_nack += s.rtx_nack;
    sum.rtx_sack_gap += s.rtx_sack_gap;
    sum.rtx_ack_wait += s.rtx_ack_wait;
    sum.sacks_rx += s.sacks_rx;
    sum.nacks_rx += s.nacks_rx;
    sum.probes_sent += s.probes_sent;
    sum.stale_rx += s.stale_rx;
    sum.fatal_rejected += s.fatal_rejected;
    sum.remote_access_errors += s.remote_access_errors;
    sum.invalid_requests += s.invalid_requests;
    sum.error_naks_sent += s.error_naks_sent;
    sum.error_naks_limited += s.error_naks_limited;
    sum.replies_limited += s.replies_limited;
    sum.data_packets_rx += s.data_packets_rx;
    sum.data_bytes_placed += s.data_bytes_placed;
    sum.duplicates_rx += s.duplicates_rx;
    sum.trimmed_rx += s.trimmed_rx;
    sum.ce_rx += s.ce_rx;
    sum.out_of_window_rx += s.out_of_window_rx;
    sum.sacks_sent += s.sacks_sent;
    sum.nacks_sent += s.nacks_sent;
    sum.ev_good += s.ev_good;
    sum.ev_skip += s.ev_skip;
    sum.ev_assumed_bad += s.ev_assumed_bad;
    sum.ev_denied += s.ev_denied;
    sum.cwnd_bytes = std::max(sum.cwnd_bytes, s.cwnd_bytes);
    sum.last_rtt_ns = std::max(sum.last_rtt_ns, s.last_rtt_ns);
  }
  return sum;
}

}  // namespace mrc::runtime
