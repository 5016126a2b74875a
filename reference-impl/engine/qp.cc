// QP life cycle: the verbs state machine with the MRC attributes, work-request posting,
// completions and the error state.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <string>

#include "reference-impl/engine/endpoint_impl.h"

namespace mrc::engine {
namespace {

struct AttrName {
  uint32_t bit;
  const char* name;
};

constexpr AttrName kVerbsNames[] = {
    {kQpState, "IBV_QP_STATE"},
    {kQpCurState, "IBV_QP_CUR_STATE"},
    {kQpAccessFlags, "IBV_QP_ACCESS_FLAGS"},
    {kQpPkeyIndex, "IBV_QP_PKEY_INDEX"},
    {kQpPort, "IBV_QP_PORT"},
    {kQpAv, "IBV_QP_AV"},
    {kQpPathMtu, "IBV_QP_PATH_MTU"},
    {kQpTimeout, "IBV_QP_TIMEOUT"},
    {kQpRetryCnt, "IBV_QP_RETRY_CNT"},
    {kQpRnrRetry, "IBV_QP_RNR_RETRY"},
    {kQpRqPsn, "IBV_QP_RQ_PSN"},
    {kQpMaxQpRdAtomic, "IBV_QP_MAX_QP_RD_ATOMIC"},
    {kQpAltPath, "IBV_QP_ALT_PATH"},
    {kQpMinRnrTimer, "IBV_QP_MIN_RNR_TIMER"},
    {kQpSqPsn, "IBV_QP_SQ_PSN"},
    {kQpMaxDestRdAtomic, "IBV_QP_MAX_DEST_RD_ATOMIC"},
    {kQpPathMigState, "IBV_QP_PATH_MIG_STATE"},
    {kQpDestQpn, "IBV_QP_DEST_QPN"},
};

constexpr AttrName kMrcNames[] = {
    {kMrcMaxWimm, "MRC_QP_MAX_WIMM"},
    {kMrcMaxWimmDest, "MRC_QP_MAX_WIMM_DEST"},
    {kMrcMpr, "MRC_QP_MPR"},
    {kMrcMprDest, "MRC_QP_MPR_DEST"},
    {kMrcTimeout, "MRC_QP_TIMEOUT"},
    {kMrcEvProfileId, "MRC_QP_EV_PROFILE_ID"},
    {kMrcCcProfileId, "MRC_QP_CC_PROFILE_ID"},
    {kMrcHint, "MRC_QP_HINT"},
    {kMrcRetryCnt, "MRC_QP_RETRY_CNT"},
    {kMrcCap, "MRC_QP_CAP"},
    {kMrcVendorCfg, "MRC_QP_VENDOR_CFG"},
};

std::string names_of(uint32_t mask, const AttrName* table, size_t n) {
  std::string out;
  for (size_t k = 0; k < n; ++k) {
    if (mask & table[k].bit) {
      if (!out.empty()) out += ", ";
      out += table[k].name;
    }
  }
  for (uint32_t b = 0; b < 32; ++b) {
    const uint32_t bit = 1u << b;
    if (!(mask & bit)) continue;
    bool known = false;
    for (size_t k = 0; k < n; ++k) known |= table[k].bit == bit;
    if (!known) {
      if (!out.empty()) out += ", ";
      out += "bit " + std::to_string(b);
    }
  }
  return out;
}

std::string verbs_names(uint32_t m) {
  return names_of(m, kVerbsNames, std::size(kVerbsNames));
}
std::string mrc_names(uint32_t m) {
  return names_of(m, kMrcNames, std::size(kMrcNames));
}

constexpr uint32_t kUnsupportedVerbs = kQpPort | kQpTimeout | kQpRetryCnt | kQpRnrRetry |
                                       kQpMinRnrTimer | kQpMaxQpRdAtomic | kQpMaxDestRdAtomic |
                                       kQpAltPath | kQpPathMigState;

std::string unsupported_message(uint32_t mask) {
  if (mask & kQpTimeout) return "IBV_QP_TIMEOUT is not supported by MRC: use MRC_QP_TIMEOUT";
  if (mask & kQpRetryCnt) return "IBV_QP_RETRY_CNT is not supported by MRC: use MRC_QP_RETRY_CNT";
  return verbs_names(mask & kUnsupportedVerbs) + " not supported by MRC";
}

struct Transition {
  uint32_t verbs_required, verbs_optional, mrc_required, mrc_optional;
};

// Required / optional attributes per transition (mrc.h mrc_qp_attr_mask table, verbs RC rules).
bool transition_rules(QpState from, QpState to, Transition& t) {
  using S = QpState;
  if (to == S::kReset || to == S::kErr) {
    t = {kQpState, kQpCurState, 0, 0};
    return true;
  }
  if (from == S::kReset && to == S::kInit) {
    t = {kQpState, kQpCurState | kQpPkeyIndex | kQpAccessFlags,
         kMrcHint | kMrcEvProfileId | kMrcCcProfileId, kMrcCap | kMrcVendorCfg};
    return true;
  }
  if (from == S::kInit && to == S::kInit) {
    t = {kQpState, kQpCurState | kQpPkeyIndex | kQpAccessFlags, 0,
         kMrcHint | kMrcEvProfileId | kMrcCcProfileId | kMrcCap | kMrcVendorCfg};
    return true;
  }
  if (from == S::kInit && to == S::kRtr) {
    t = {kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu,
         kQpCurState | kQpPkeyIndex | kQpAccessFlags, kMrcMaxWimmDest | kMrcMprDest,
         kMrcCap | kMrcVendorCfg};
    return true;
  }
  if (from == S::kRtr && to == S::kRts) {
    t = {kQpState | kQpSqPsn, kQpCurState | kQpAccessFlags,
         kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout, kMrcCap | kMrcVendorCfg};
    return true;
  }
  if (from == S::kRts && to == S::kRts) {
    t = {kQpState, kQpCurState | kQpAccessFlags, 0, kMrcTimeout | kMrcRetryCnt | kMrcVendorCfg};
    return true;
  }
  return false;
}

uint32_t round_pow2(uint32_t n) {
  return std::bit_ceil(std::max<uint32_t>(n, 1));
}

Status einval(std::string msg) {
  return Status::Error(EINVAL, std::move(msg));
}

}  // namespace

std::string_view rtx_cause_name(RtxCause c) {
  switch (c) {
    case RtxCause::kNone:
      return "none";
    case RtxCause::kTimeout:
      return "timeout";
    case RtxCause::kNackTrim:
      return "nack_trimmed";
    case RtxCause::kNackTrimLastHop:
      return "nack_trimmed_lasthop";
    case RtxCause::kNackResource:
      return "nack_resource";
    case RtxCause::kSackGap:
      return "sack_gap";
    case RtxCause::kAckWait:
      return "ack_wait";
  }
  return "unknown";
}

Qp::Qp(Endpoint::Impl& ep, uint32_t qpn, const QpInitAttr& init)
    : ep_(&ep), qpn_(qpn), init_(init) {
  reverse_ev_.fill(-1);
  error_naks_.configure(ep.cfg.error_nak_burst, ep.cfg.error_nak_interval_ns);
  replies_.configure(ep.cfg.reply_burst, ep.cfg.reply_interval_ns);
  probe_replies_.configure(ep.cfg.probe_reply_burst, ep.cfg.probe_reply_interval_ns);
}

void Qp::set_state(QpState to, std::string_view reason) {
  if (to == state_) return;
  const QpState from = state_;
  state_ = to;
  ++ep_->rx_gate_gen;
  Event e = ep_->event(EventKind::kQpState, qpn_);
  e.s("from", qp_state_name(from)).s("to", qp_state_name(to)).s("reason", reason);
  ep_->emit(e);
}

Status Qp::modify(const QpAttr& a, uint32_t mask, const MrcQpAttr& m, uint32_t mrc_mask) {
  if (mask & kUnsupportedVerbs) return einval(unsupported_message(mask));
  if ((mask & kQpCurState) && a.cur_qp_state != state_)
    return einval(std::string("IBV_QP_CUR_STATE is ") + std::string(qp_state_name(a.cur_qp_state)) +
                  " but the QP is in " + std::string(qp_state_name(state_)));
  if (!(mask & kQpState)) return einval("IBV_QP_STATE is required by mrc_modify_qp");
  const QpState to = a.qp_state;
  Transition t;
  if (!transition_rules(state_, to, t))
    return einval("illegal QP state transition " + std::string(qp_state_name(state_)) + " -> " +
                  std::string(qp_state_name(to)));
  const std::string tr = std::string(qp_state_name(state_)) + "->" + std::string(qp_state_name(to));
  if (uint32_t missing = t.verbs_required & ~mask)
    return einval(tr + " requires " + verbs_names(missing));
  if (uint32_t extra = mask & ~(t.verbs_required | t.verbs_optional))
    return einval(verbs_names(extra) + " not allowed in " + tr);
  if (uint32_t missing = t.mrc_required & ~mrc_mask)
    return einval(tr + " requires " + mrc_names(missing));
  if (uint32_t extra = mrc_mask & ~(t.mrc_required | t.mrc_optional))
    return einval(mrc_names(extra) + " not allowed in " + tr);

  const DeviceCaps& caps = ep_->cfg.caps;
  // ---- validate values before changing anything
  if (mrc_mask & kMrcEvProfileId) {
    if (!ep_->ev_profiles.count(m.ev_profile_id))
      return einval("MRC_QP_EV_PROFILE_ID " + std::to_string(m.ev_profile_id) +
                    ": no such EV profile");
  }
  if (mrc_mask & kMrcCcProfileId) {
    auto it = ep_->cc_profiles.find(m.cc_profile_id);
    if (it == ep_->cc_profiles.end())
      return einval("MRC_QP_CC_PROFILE_ID " + std::to_string(m.cc_profile_id) +
                    ": no such CC profile");
  }
  if (mrc_mask & kMrcCap) {
    const uint32_t known =
        kCapTrimNackDestUnsupported | kCapDynamicMpr | kCapSvcTimeDestUnsupported;
    if (m.cap & ~known)
      return einval("MRC_QP_CAP has unknown bits " + std::to_string(m.cap & ~known));
    if ((m.cap & kCapDynamicMpr) && !caps.dynamic_mpr)
      return einval("MRC_QP_CAP_DYNAMIC_MPR: device does not support dynamic MPR");
  }
  if (mask & kQpPathMtu) {
    const uint32_t mtu = a.path_mtu;
    if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096)
      return einval("IBV_QP_PATH_MTU " + std::to_string(mtu) +
                    ": must be 256, 512, 1024, 2048 or 4096 bytes");
  }
  if (mask & kQpDestQpn) {
    if (a.dest_qp_num > 0xFFFFFF || a.dest_qp_num <= wire::kEndpointOpQpn)
      return einval("IBV_QP_DEST_QPN " + std::to_string(a.dest_qp_num) +
                    ": must be 3..0xFFFFFF (0-2 are reserved, 2 = endpoint operations)");
  }
  if ((mask & kQpRqPsn) && a.rq_psn > wire::kPsnMask)
    return einval("IBV_QP_RQ_PSN " + std::to_string(a.rq_psn) + " exceeds 24 bits");
  if ((mask & kQpSqPsn) && a.sq_psn > wire::kPsnMask)
    return einval("IBV_QP_SQ_PSN " + std::to_string(a.sq_psn) + " exceeds 24 bits");
  if (mask & kQpAv) {
    if (a.dgid == wire::Ipv6Addr{}) return einval("IBV_QP_AV: destination GID is all zero");
    const bool peer_v4 =
        a.dgid[10] == 0xFF && a.dgid[11] == 0xFF &&
        std::all_of(a.dgid.begin(), a.dgid.begin() + 10, [](uint8_t b) { return b == 0; });
    if (peer_v4 != ep_->ipv4)
      return einval("IBV_QP_AV: destination GID and node GID must both be IPv6 or both IPv4");
  }
  if ((mask & kQpAccessFlags) && (a.qp_access_flags & ~(kAccessLocalWrite | kAccessRemoteWrite |
                                                        kAccessRemoteRead | kAccessRemoteAtomic)))
    return einval("IBV_QP_ACCESS_FLAGS has unknown bits");
  if (mrc_mask & kMrcMprDest) {
    if (m.mpr_dest == 0 || m.mpr_dest > caps.max_mpr)
      return einval("MRC_QP_MPR_DEST " + std::to_string(m.mpr_dest) + ": must be 1.." +
                    std::to_string(caps.max_mpr) + " (128-PSN units)");
  }
  if (mrc_mask & kMrcMpr) {
    if (m.mpr == 0 || m.mpr > caps.max_mpr)
      return einval("MRC_QP_MPR " + std::to_string(m.mpr) + ": must be 1.." +
                    std::to_string(caps.max_mpr) + " (128-PSN units)");
  }
  if ((mrc_mask & kMrcMaxWimm) && m.max_wimm > caps.max_wimm)
    return einval("MRC_QP_MAX_WIMM " + std::to_string(m.max_wimm) + " exceeds device max_wimm " +
                  std::to_string(caps.max_wimm));
  if ((mrc_mask & kMrcMaxWimmDest) && m.max_wimm_dest > caps.max_wimm_dest)
    return einval("MRC_QP_MAX_WIMM_DEST " + std::to_string(m.max_wimm_dest) +
                  " exceeds device max_wimm_dest " + std::to_string(caps.max_wimm_dest));
  if ((mrc_mask & kMrcTimeout) && m.timeout > kMaxTimeoutExp)
    return einval("MRC_QP_TIMEOUT " + std::to_string(m.timeout) + ": must be 0..24");
  if (mrc_mask & kMrcRetryCnt) {
    if (m.retry.linear_cnt > kMaxLinearRetry)
      return einval("MRC_QP_RETRY_CNT linear_cnt " + std::to_string(m.retry.linear_cnt) +
                    ": must be 0..7");
    if (m.retry.exp_cnt > kUnlimitedExpRetry)
      return einval("MRC_QP_RETRY_CNT exp_cnt " + std::to_string(m.retry.exp_cnt) +
                    ": must be 0..25 (25 = unlimited)");
  }

  // Build what the new state needs before committing to it.
  EvSet new_evs;
  bool rebuild_evs = false;
  if (mrc_mask & kMrcEvProfileId) {
    Status s = new_evs.build(ep_->ev_profiles.at(m.ev_profile_id), ep_->cfg.ev_format, ep_->nports,
                             ep_->rng);
    if (!s.ok())
      return einval("MRC_QP_EV_PROFILE_ID " + std::to_string(m.ev_profile_id) + ": " + s.message);
    new_evs.start_at(qpn_);
    rebuild_evs = true;
  }
  std::unique_ptr<CongestionControl> new_cc;
  if (to == QpState::kRts && state_ == QpState::kRtr) {
    const CcProfile& prof = ep_->cc_profiles.at(mrc_.cc_profile_id);
    auto it = ep_->cc_algos.find(prof.algorithm);
    if (it == ep_->cc_algos.end())
      return einval("CC profile " + std::to_string(mrc_.cc_profile_id) + ": unknown algorithm \"" +
                    prof.algorithm + "\"");
    new_cc = it->second(prof, attr_.path_mtu);
    if (!new_cc) return einval("CC algorithm \"" + prof.algorithm + "\" returned no controller");
  }

  // ---- commit
  if (mask & kQpAccessFlags) attr_.qp_access_flags = a.qp_access_flags;
  if (mask & kQpPkeyIndex) attr_.pkey_index = a.pkey_index;
  if (mask & kQpAv) attr_.dgid = a.dgid;
  if (mask & kQpDestQpn) attr_.dest_qp_num = a.dest_qp_num;
  if (mask & kQpRqPsn) attr_.rq_psn = a.rq_psn;
  if (mask & kQpSqPsn) attr_.sq_psn = a.sq_psn;
  if (mask & kQpPathMtu) attr_.path_mtu = a.path_mtu;
  if (mrc_mask & kMrcMaxWimm) mrc_.max_wimm = m.max_wimm;
  if (mrc_mask & kMrcMaxWimmDest) mrc_.max_wimm_dest = m.max_wimm_dest;
  if (mrc_mask & kMrcMpr) mrc_.mpr = m.mpr;
  if (mrc_mask & kMrcMprDest) mrc_.mpr_dest = m.mpr_dest;
  if (mrc_mask & kMrcTimeout) mrc_.timeout = m.timeout;
  if (mrc_mask & kMrcRetryCnt) mrc_.retry = m.retry;
  if (mrc_mask & kMrcEvProfileId) mrc_.ev_profile_id = m.ev_profile_id;
  if (mrc_mask & kMrcCcProfileId) mrc_.cc_profile_id = m.cc_profile_id;
  if (mrc_mask & kMrcHint) mrc_.hint = m.hint;
  if (mrc_mask & kMrcCap) mrc_.cap = m.cap;
  if (rebuild_evs) {
    evs_ = std::move(new_evs);
    ev_set_built_ = true;
    evs_.set_skip_max_ns(ep_->cfg.skip_max_ns);
    evs_.set_change_callback(
        [this](uint32_t idx, EvState from, EvState to_state, std::string_view reason) {
          const EvRecord& r = evs_.at(idx);
          Event e = ep_->event(EventKind::kEvState, qpn_);
          e.u("wev", r.wev)
              .u("port", r.port)
              .s("from", ev_state_name(from))
              .s("to", ev_state_name(to_state))
              .s("reason", reason);
          ep_->emit(e);
        });
  }

  if (to == QpState::kReset) {
    // Verbs: RESET discards all queue contents without completions.
    sq_.clear();
    sq_head_ = sq_tail_ = seg_seq_ = 0;
    seg_pkt_ = 0;
    rq_.reset(0);
    tx_.clear();
    rx_.clear();
    rtx_q_.reset(0);
    cc_.reset();
    ev_set_built_ = false;
    evs_ = EvSet();
    attr_ = QpAttr();
    mrc_ = MrcQpAttr();
    bytes_in_flight_ = 0;
    wimm_outstanding_ = 0;
    tx_deadline_ = ack_wait_deadline_ = probe_check_ns_ = rev_probe_due_ = UINT64_MAX;
    tlp_deadline_ = gap_deadline_ = UINT64_MAX;
    tlp_pending_ = false;
    resend_for_ack_ = false;
    st_ = QpStats();
    reverse_ev_.fill(-1);
    set_state(QpState::kReset, "modify_qp");
    return Status::Ok();
  }
  if (to == QpState::kErr) {
    to_error("modify_qp", nullptr, WcStatus::kWrFlushErr, std::nullopt);
    return Status::Ok();
  }
  if (state_ == QpState::kReset && to == QpState::kInit) {
    sq_.assign(std::max<uint32_t>(init_.cap.max_send_wr, 1), SendWqe{});
    rq_.reset(std::max<uint32_t>(init_.cap.max_recv_wr, 1));
  }
  if (state_ == QpState::kInit && to == QpState::kRtr) {
    rcv_window_ = uint32_t{mrc_.mpr_dest} * kMprUnitPsns;
    rx_.assign(round_pow2(rcv_window_), RxSlot{});
    rx_mask_ = static_cast<uint32_t>(rx_.size() - 1);
    rcv_cack_ = wire::psn_add(attr_.rq_psn, -1);
    msn_completed_ = 0xFFFF;
    imm_completed_ = 0;
    ooo_count_ = 0;
    rcvd_bytes_ = 0;
    bytes_since_sack_ = 0;
    rsp_mpr_units_ = 0;
    for (uint8_t p = 1; p <= ep_->nports; ++p) reverse_ev_[p] = evs_.first_good_in_plane(p);
  }
  if (state_ == QpState::kRtr && to == QpState::kRts) {
    mpr_negotiated_ = uint32_t{mrc_.mpr} * kMprUnitPsns;
    mpr_eff_ = mpr_negotiated_;
    tx_.assign(round_pow2(mpr_negotiated_ + 1), TxEntry{});
    tx_mask_ = static_cast<uint32_t>(tx_.size() - 1);
    rtx_q_.reset(tx_.size());
    cack_seen_ = wire::psn_add(attr_.sq_psn, -1);
    snd_nxt_ = attr_.sq_psn;
    psn_next_post_ = attr_.sq_psn;
    cc_ = std::move(new_cc);
    last_cwnd_logged_ = cc_->cwnd_bytes();
  }
  set_state(to, "modify_qp");
  return Status::Ok();
}

void Qp::query(QpAttr& a, MrcQpAttr& m) const {
  a = attr_;
  a.qp_state = state_;
  a.cur_qp_state = state_;
  m = mrc_;
}

Status Qp::post_send(const SendWr& wr) {
  if (wr.opcode != WrOpcode::kRdmaWrite && wr.opcode != WrOpcode::kRdmaWriteWithImm)
    return einval("opcode " + std::string(wr_opcode_name(wr.opcode)) +
                  " is not supported by MRC: only RDMA_WRITE and RDMA_WRITE_WITH_IMM");
  if (wr.send_flags & kSendInline)
    return einval("IBV_SEND_INLINE is not supported: data is read from registered memory");
  if (state_ != QpState::kRts && state_ != QpState::kErr)
    return einval("post_send needs the QP in RTS, it is in " + std::string(qp_state_name(state_)));
  if (wr.sg_list.size() > std::min<uint32_t>(init_.cap.max_send_sge, kMaxSge))
    return einval("sg_list has " + std::to_string(wr.sg_list.size()) +
                  " entries, max_send_sge is " +
                  std::to_string(std::min<uint32_t>(init_.cap.max_send_sge, kMaxSge)));
  if (sq_tail_ - sq_head_ >= sq_.size())
    return Status::Error(ENOMEM, "send queue full (" + std::to_string(sq_.size()) + " WRs)");
  const bool imm = wr.opcode == WrOpcode::kRdmaWriteWithImm;
  uint64_t total = 0;
  for (size_t k = 0; k < wr.sg_list.size(); ++k) {
    const Sge& g = wr.sg_list[k];
    const MemoryRegion* mr = ep_->mr_for_lkey(g.lkey);
    if (mr == nullptr)
      return einval("sg_list[" + std::to_string(k) + "]: unknown lkey " + std::to_string(g.lkey));
    if (mr->pd != init_.pd)
      return einval("sg_list[" + std::to_string(k) + "]: the MR of lkey " + std::to_string(g.lkey) +
                    " is in another protection domain than the QP");
    if (g.addr < mr->addr || g.addr - mr->addr > mr->length ||
        g.length > mr->length - (g.addr - mr->addr))
      return einval("sg_list[" + std::to_string(k) +
                    "]: [addr, addr+length) outside the MR of lkey " + std::to_string(g.lkey));
    total += g.length;
  }
  if (total > 0x80000000ull) return einval("message length " + std::to_string(total) + " > 2^31");
  const uint32_t pmtu = attr_.path_mtu;
  const uint64_t npkts = std::max<uint64_t>(1, (total + pmtu - 1) / pmtu);
  if (npkts > (1u << 22))
    return einval("message of " + std::to_string(total) + " bytes needs " + std::to_string(npkts) +
                  " PSNs at PMTU " + std::to_string(pmtu) +
                  ", more than the PSN space allows (2^22)");
  if (imm && state_ == QpState::kRts && mrc_.max_wimm == 0)
    return einval("RDMA_WRITE_WITH_IMM on a QP whose MRC_QP_MAX_WIMM is 0");

  SendWqe& w = wqe_at(sq_tail_);
  w = SendWqe{};
  w.wr_id = wr.wr_id;
  w.remote_addr = wr.remote_addr;
  w.rkey = wr.rkey;
  w.length = static_cast<uint32_t>(total);
  w.imm_data = wr.imm_data;
  w.imm = imm;
  w.signaled = (wr.send_flags & kSendSignaled) != 0;
  w.solicited = (wr.send_flags & kSendSolicited) != 0;
  w.num_sge = static_cast<uint8_t>(wr.sg_list.size());
  std::copy(wr.sg_list.begin(), wr.sg_list.end(), w.sge.begin());
  w.npkts = static_cast<uint32_t>(npkts);
  if (state_ == QpState::kErr) {
    // Verbs: work posted to a QP in ERR completes at once with a flush error.
    complete_send(w, WcStatus::kWrFlushErr, true);
    return Status::Ok();
  }
  w.first_psn = psn_next_post_;
  psn_next_post_ = wire::psn_add(psn_next_post_, static_cast<int64_t>(npkts));
  w.msn = msn_next_++;
  w.rqmsn = rqmsn_next_;
  if (imm) ++rqmsn_next_;
  ++sq_tail_;
  return Status::Ok();
}

Status Qp::post_recv(const RecvWr& wr) {
  if (state_ == QpState::kReset)
    return einval("post_recv needs the QP in INIT, RTR or RTS, it is in RESET");
  if (wr.sg_list.size() > std::min<uint32_t>(init_.cap.max_recv_sge, kMaxSge))
    return einval("sg_list has " + std::to_string(wr.sg_list.size()) +
                  " entries, max_recv_sge is " + std::to_string(init_.cap.max_recv_sge));
  for (size_t k = 0; k < wr.sg_list.size(); ++k) {
    const MemoryRegion* mr = ep_->mr_for_lkey(wr.sg_list[k].lkey);
    if (mr == nullptr || mr->pd != init_.pd)
      return einval("sg_list[" + std::to_string(k) + "]: lkey " +
                    std::to_string(wr.sg_list[k].lkey) + " is no MR of the QP's protection domain");
  }
  if (state_ == QpState::kErr) {
    Wc wc;
    wc.wr_id = wr.wr_id;
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.qp_num = qpn_;
    ep_->push_wc(init_.recv_cq, wc);
    return Status::Ok();
  }
  if (!rq_.push(wr.wr_id))
    return Status::Error(ENOMEM,
                         "receive queue full (" + std::to_string(init_.cap.max_recv_wr) + " WRs)");
  return Status::Ok();
}

void Qp::complete_send(const SendWqe& w, WcStatus status, bool force) {
  if (w.imm && w.first_sent && wimm_outstanding_ > 0) --wimm_outstanding_;
  const bool report = force || status != WcStatus::kSuccess || w.signaled || init_.sq_sig_all;
  if (ep_->logging()) {
    Event e = ep_->event(EventKind::kCompletion, qpn_);
    e.u("wr_id", w.wr_id)
        .s("status", wc_status_name(status))
        .s("opcode", w.imm ? "RDMA_WRITE_WITH_IMM" : "RDMA_WRITE")
        .u("byte_len", w.length)
        .u("signaled", report ? 1 : 0)
        .s("side", "send");
    ep_->emit(e);
  }
  if (!report) return;
  Wc wc;
  wc.wr_id = w.wr_id;
  wc.status = status;
  wc.opcode = WcOpcode::kRdmaWrite;
  wc.qp_num = qpn_;
  wc.byte_len = w.length;
  ep_->push_wc(init_.send_cq, wc);
}

void Qp::to_error(std::string_view reason, const SendWqe* failed, WcStatus status,
                  std::optional<AsyncEventType> async) {
  if (state_ == QpState::kErr || state_ == QpState::kReset) return;
  set_state(QpState::kErr, reason);
  // Send queue: the failing WR carries the cause, the others are flushed (always reported).
  for (uint64_t seq = sq_head_; seq < sq_tail_; ++seq) {
    const SendWqe& w = wqe_at(seq);
    complete_send(w, (&w == failed) ? status : WcStatus::kWrFlushErr, true);
  }
  sq_head_ = sq_tail_;
  seg_seq_ = sq_tail_;
  seg_pkt_ = 0;
  while (!rq_.empty()) {
    Wc wc;
    wc.wr_id = rq_.front();
    wc.status = WcStatus::kWrFlushErr;
    wc.opcode = WcOpcode::kRecvRdmaWithImm;
    wc.qp_num = qpn_;
    rq_.pop();
    ep_->push_wc(init_.recv_cq, wc);
  }
  rtx_q_.clear();
  for (auto& e : tx_) e = TxEntry{};
  bytes_in_flight_ = 0;
  wimm_outstanding_ = 0;
  tx_deadline_ = ack_wait_deadline_ = probe_check_ns_ = rev_probe_due_ = UINT64_MAX;
  tlp_deadline_ = gap_deadline_ = UINT64_MAX;
  tlp_pending_ = false;
  resend_for_ack_ = false;
  if (async) {
    AsyncEvent a;
    a.type = *async;
    a.qp_num = qpn_;
    ep_->push_async(a);
  }
}

uint64_t Qp::deadline() const {
  uint64_t d = UINT64_MAX;
  if (state_ == QpState::kRts) {
    d = std::min({tx_deadline_, ack_wait_deadline_, probe_check_ns_, tlp_deadline_, gap_deadline_});
  }
  if (state_ == QpState::kRtr || state_ == QpState::kRts) d = std::min(d, rev_probe_due_);
  return d;
}

void Qp::on_timer(uint64_t now_ns) {
  if (state_ == QpState::kRts) requester_timer(now_ns);
  if (state_ == QpState::kRtr || state_ == QpState::kRts) responder_timer(now_ns);
}

void Qp::fill_stats(QpStats& out) const {
  out = st_;
  out.cwnd_bytes = cc_ ? cc_->cwnd_bytes() : 0;
  out.bytes_in_flight = bytes_in_flight_;
  out.mpr_eff_psns = mpr_eff_;
  out.cack_seen = cack_seen_;
  out.last_rtt_ns = last_rtt_ns_;
  out.ev_good = evs_.count(EvState::kGood);
  out.ev_skip = evs_.count(EvState::kSkip);
  out.ev_assumed_bad = evs_.count(EvState::kAssumedBad);
  out.ev_denied = evs_.count(EvState::kDenied);
  out.ev_demotions_refused = evs_.demotions_refused();
  out.rcv_cack = rcv_cack_;
  out.ooo_count = ooo_count_;
  out.rcvd_bytes = rcvd_bytes_;
}

const EvRecord* Qp::control_ev(uint8_t port) const {
  if (!ev_set_built_ || evs_.size() == 0 || port > kMaxPorts) return nullptr;
  const int cur = reverse_ev_[port];
  if (cur >= 0 && static_cast<size_t>(cur) < evs_.size()) {
    const EvState s = evs_.at(static_cast<uint32_t>(cur)).state;
    if (s == EvState::kGood || s == EvState::kSkip) return &evs_.at(static_cast<uint32_t>(cur));
  }
  const int idx = evs_.first_good_in_plane(port);
  if (idx >= 0) return &evs_.at(static_cast<uint32_t>(idx));
  for (uint32_t i = 0; i < evs_.size(); ++i)
    if (evs_.at(i).port == port) return &evs_.at(i);
  return nullptr;
}

void Qp::adopt_reverse_ev(uint8_t port, int ev_idx, std::string_view reason) {
  if (port == 0 || port > kMaxPorts || ev_idx < 0) return;
  if (reverse_ev_[port] == ev_idx) return;
  reverse_ev_[port] = ev_idx;
  if (ep_->logging()) {
    Event e = ep_->event(EventKind::kReverseEv, qpn_);
    e.u("port", port).u("wev", evs_.at(static_cast<uint32_t>(ev_idx)).wev).s("reason", reason);
    ep_->emit(e);
  }
}

}  // namespace mrc::engine
