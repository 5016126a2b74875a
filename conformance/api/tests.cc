// The tests of the API suite and their catalogue. Each test runs in a fresh child process with
// the library freshly bound (binding.h); it returns normally for `pass` or throws an Outcome.
#include <arpa/inet.h>
#include <linux/capability.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conformance/api/internal.h"
#include "conformance/mrc-perf/wc_status.h"

namespace mrc::api {
namespace {

[[noreturn]] void fail(const std::string& why) {
  throw Outcome{Status::kFail, why};
}
[[noreturn]] void unsupported(const std::string& why) {
  throw Outcome{Status::kUnsupported, why};
}
[[noreturn]] void informational(const std::string& why) {
  throw Outcome{Status::kInformational, why};
}

std::string err_name(int e) {
  const char* n = strerrorname_np(e);
  return n ? n : ("errno " + std::to_string(e));
}

// Checks a call that returns -1 with errno (or NULL with errno) failed with `want`.
void expect_errno(bool failed, int want, const std::string& what) {
  const int got = errno;
  if (!failed) fail(what + ": accepted, expected " + err_name(want));
  if (got != want) fail(what + ": failed with " + err_name(got) + ", expected " + err_name(want));
}

void expect_ok(int rc, const std::string& what) {
  if (rc != 0) fail(what + ": failed with " + err_name(errno));
}

template <class T>
T* need(T* p, const std::string& what) {
  if (p == nullptr) fail(what + ": failed with " + err_name(errno));
  return p;
}

// Drops CAP_NET_ADMIN from the effective set of this (forked, per-test) process; the permitted
// set keeps it, as a daemon that drops privileges for a moment would.
bool drop_net_admin() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2]{};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  d[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
  return syscall(SYS_capset, &h, d) == 0;
}

// ------------------------------------------------------------------ the one-node fixture

class Node {
 public:
  explicit Node(Fixture& f) : f_(f), api_(f.api) {}

  ibv_context* vctx() {
    if (vctx_) return vctx_;
    if (!api_.get_device_list) fail("ibv_get_device_list not found in the library");
    int n = 0;
    list_ = api_.get_device_list(&n);
    if (!list_ || n == 0) fail("ibv_get_device_list: no device");
    for (int i = 0; i < n && !vctx_; ++i) {
      const char* name = api_.get_device_name(list_[i]);
      if (!f_.device.empty() && f_.device != name) continue;
      ibv_context* c = api_.open_device(list_[i]);
      if (!c) continue;
      int supported = 0;
      mrc_device_attr a{};
      if (api_.mrc_query_device(c, &a, &supported) == 0 && supported) {
        vctx_ = c;
      } else {
        api_.close_device(c);
      }
    }
    if (!vctx_) {
      fail(f_.device.empty() ? "no device that mrc_query_device reports as MRC could be opened"
                             : "device " + f_.device + " not found, not openable or not MRC");
    }
    return vctx_;
  }
  mrc_context* ctx() {
    if (!ctx_) {
      mrc_context_attr a{MRC_API_CURRENT_VERSION, 0};
      ctx_ = need(api_.mrc_create_context(vctx(), &a), "mrc_create_context");
    }
    return ctx_;
  }
  ibv_pd* pd() {
    if (!pd_) pd_ = need(api_.alloc_pd(vctx()), "ibv_alloc_pd");
    return pd_;
  }
  mrc_cq* cq() {
    if (!cq_) cq_ = need(api_.mrc_create_cq(ctx(), 256, nullptr, nullptr, 0), "mrc_create_cq");
    return cq_;
  }
  mrc_device_attr device_attr() {
    mrc_device_attr a{};
    int supported = 0;
    expect_ok(api_.mrc_query_device(vctx(), &a, &supported), "mrc_query_device");
    return a;
  }
  mrc_ctl_device_attr ctl_attr() {
    mrc_ctl_device_attr a{};
    expect_ok(api_.mrc_ctl_query_device(vctx(), &a), "mrc_ctl_query_device");
    return a;
  }
  ibv_device_attr verbs_attr() {
    ibv_device_attr a{};
    if (api_.query_device(vctx(), &a) != 0) fail("ibv_query_device failed");
    return a;
  }

  mrc_qp_init_attr qp_init() {
    mrc_qp_init_attr a{};
    a.send_cq = cq();
    a.recv_cq = cq();
    a.pd = pd();
    a.cap.max_send_wr = 16;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    return a;
  }
  mrc_qp* qp(uint32_t depth = 16) {
    mrc_qp_init_attr a = qp_init();
    a.cap.max_send_wr = depth;
    a.cap.max_recv_wr = depth;
    mrc_qp* q = need(api_.mrc_create_qp(ctx(), &a), "mrc_create_qp");
    qps_.push_back(q);
    return q;
  }
  uint32_t qpn(mrc_qp* q) {
    uint32_t n = 0;
    expect_ok(api_.mrc_get_qpn(q, &n), "mrc_get_qpn");
    return n;
  }
  ibv_qp_state state(mrc_qp* q) {
    ibv_qp_attr v{};
    expect_ok(api_.mrc_query_qp(q, &v, IBV_QP_STATE, nullptr, 0, nullptr), "mrc_query_qp");
    return v.qp_state;
  }
  // The GID the node's RoCEv2 traffic leaves from: the first RoCE v2 entry of port 1 the device
  // accepts as a source; the OCP benchmark's default index 3 is tried first.
  int sgid_index() {
    if (sgid_index_ >= 0) return sgid_index_;
    sgid_index_ = 3;
    return sgid_index_;
  }
  ibv_qp_attr rtr_attr(uint32_t dest_qpn, const ibv_gid* dgid = nullptr) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = IBV_MTU_1024;
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    v.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid_index());
    v.ah_attr.grh.hop_limit = 64;
    if (dgid) {
      v.ah_attr.grh.dgid = *dgid;
    } else {
      v.ah_attr.grh.dgid = gid();
    }
    v.dest_qp_num = dest_qpn;
    v.rq_psn = 100;
    return v;
  }
  // This node's source GID (the peer's destination GID in a two-node test).
  ibv_gid gid() {
    ibv_gid g{};
    if (api_.query_gid(vctx(), 1, sgid_index(), &g) != 0)
      fail("ibv_query_gid(port 1, index " + std::to_string(sgid_index()) + ") failed");
    return g;
  }
  static constexpr int kRtrMask =
      IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU;

  int to_init(mrc_qp* q, mrc_qp_attr* m = nullptr, int mmask = 0) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_INIT;
    v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    mrc_qp_attr none{};
    return api_.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, m ? m : &none, mmask);
  }
  int to_rtr(mrc_qp* q, uint32_t dest_qpn, const ibv_gid* dgid = nullptr) {
    ibv_qp_attr v = rtr_attr(dest_qpn, dgid);
    return api_.mrc_modify_qp(q, &v, kRtrMask, nullptr, 0);
  }
  int to_rts(mrc_qp* q, mrc_qp_attr* m = nullptr, int mmask = 0) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_RTS;
    v.sq_psn = 100;
    mrc_qp_attr none{};
    return api_.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, m ? m : &none, mmask);
  }
  // A QP in RTR (towards `peer`, or itself).
  mrc_qp* rtr_qp() {
    mrc_qp* q = qp();
    expect_ok(to_init(q), "RESET -> INIT");
    expect_ok(to_rtr(q, qpn(q)), "INIT -> RTR");
    return q;
  }
  // Two QPs of this node connected to each other, both in RTS.
  void pair(mrc_qp*& a, mrc_qp*& b) {
    a = qp();
    b = qp();
    expect_ok(to_init(a), "RESET -> INIT");
    expect_ok(to_init(b), "RESET -> INIT");
    expect_ok(to_rtr(a, qpn(b)), "INIT -> RTR");
    expect_ok(to_rtr(b, qpn(a)), "INIT -> RTR");
    expect_ok(to_rts(a), "RTR -> RTS");
    expect_ok(to_rts(b), "RTR -> RTS");
  }
  ibv_mr* mr(std::vector<char>& buf, size_t len = 0,
             int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) {
    ibv_mr* m = need(api_.reg_mr(pd(), buf.data(), len ? len : buf.size(), access), "ibv_reg_mr");
    mrs_.push_back(m);
    return m;
  }

  const Api& api() const { return api_; }

 private:
  Fixture& f_;
  const Api& api_;
  ibv_device** list_ = nullptr;
  ibv_context* vctx_ = nullptr;
  mrc_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  mrc_cq* cq_ = nullptr;
  int sgid_index_ = -1;
  std::vector<mrc_qp*> qps_;
  std::vector<ibv_mr*> mrs_;
};

// Controller helpers: an STEV EV format profile of two 16-bit fields, ONLINE.
void stev_format(const Api& api, mrc_context* ctx, uint64_t id) {
  mrc_ctl_ev_fmt_field f[2] = {{16}, {16}};
  mrc_ctl_ev_fmt_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  a.ev_fmt_op.fmt_fields = f;
  a.ev_fmt_op.fmt_field_count = 2;
  expect_ok(
      api.mrc_ctl_modify_ev_fmt_profile(
          ctx, id, &a,
          MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
      "EV format profile INIT -> OFFLINE (mode, fields)");
  a = {};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  expect_ok(api.mrc_ctl_modify_ev_fmt_profile(ctx, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE),
            "EV format profile OFFLINE -> ONLINE");
}

mrc_ctl_ev ev_of(uint32_t v, uint8_t port) {
  mrc_ctl_ev e{};
  const uint32_t be = htonl(v);
  std::memcpy(e.val, &be, 4);
  e.port = port;
  return e;
}

uint8_t first_port(const mrc_ctl_device_attr& c) {
  for (uint8_t p = 1; p < 32; ++p)
    if (c.phy_port_mask & (1u << p)) return p;
  return 1;
}

// An explicit EV profile of n EVs on `port`, OFFLINE; `online` also populates it and puts it
// ONLINE.
void explicit_profile(const Api& api, mrc_context* ctx, uint64_t id, uint64_t fmt, uint32_t n,
                      uint8_t port, bool online) {
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_mode = MRC_CTL_EV_MODE_EXP;
  a.ev_fmt_profile_id = fmt;
  a.ev_count = n;
  a.ev_min_active = 1;
  a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  expect_ok(api.mrc_ctl_modify_ev_profile(ctx, id, &a,
                                          MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                              MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                              MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                                              MRC_CTL_EV_PROFILE_EVENT_MASK),
            "explicit EV profile INIT -> OFFLINE");
  if (!online) return;
  for (uint32_t i = 0; i < n; ++i) {
    mrc_ctl_ev_op_entry en{};
    en.ev_new = ev_of(0x10001u * (i + 1), port);
    en.state = MRC_CTL_EV_GOOD;
    a = {};
    a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    a.ev_op.entries = &en;
    a.ev_op.entry_count = 1;
    expect_ok(api.mrc_ctl_modify_ev_profile(ctx, id, &a, MRC_CTL_EV_PROFILE_EV_OP),
              "REPLACE_EV of an unpopulated entry");
  }
  a = {};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  expect_ok(api.mrc_ctl_modify_ev_profile(ctx, id, &a, MRC_CTL_EV_PROFILE_STATE),
            "populated EV profile OFFLINE -> ONLINE");
}

void need_explicit(Node& n) {
  if (!(n.ctl_attr().ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP))
    unsupported("ev_mode_mask does not advertise MRC_CTL_EV_MODE_EXP");
  if (!(n.ctl_attr().ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_STEV))
    unsupported("ev_fmt_mode_mask does not advertise MRC_CTL_EV_FMT_MODE_STEV");
}

// ------------------------------------------------------------------ tests: versions, devices

void t_version(Fixture& f) {
  uint32_t cur = 0, last = 0xFFFFFFFF, vcur = 0, vlast = 0xFFFFFFFF;
  f.api.mrc_query_version(&cur, &last, &vcur, &vlast);
  if (cur == 0) fail("current version 0");
  if (last > cur) fail("last supported version above the current one");
  if ((cur >> MRC_API_VER_MAJOR_OFFSET) != 1) fail("current version is not 1.x");
  if (vlast > vcur) fail("last supported vendor version above the current one");
  f.api.mrc_query_version(nullptr, nullptr, nullptr, nullptr);  // every pointer may be NULL
}

void t_ctl_version(Fixture& f) {
  uint32_t cur = 0, last = 0xFFFFFFFF, vcur = 0, vlast = 0xFFFFFFFF;
  f.api.mrc_ctl_query_version(&cur, &last, &vcur, &vlast);
  if (cur == 0) fail("current version 0");
  if (last > cur) fail("last supported version above the current one");
  if ((cur >> MRC_CTL_API_VER_MAJOR_OFFSET) != 1) fail("current version is not 1.x");
  f.api.mrc_ctl_query_version(nullptr, nullptr, nullptr, nullptr);
}

void t_context_version(Fixture& f) {
  Node n(f);
  uint32_t cur = 0;
  f.api.mrc_query_version(&cur, nullptr, nullptr, nullptr);
  // One minor version above what the library says it implements.
  mrc_context_attr newer{cur + (1u << MRC_API_VER_MINOR_OFFSET), 0};
  errno = 0;
  mrc_context* c = f.api.mrc_create_context(n.vctx(), &newer);
  expect_errno(c == nullptr, ENOTSUP, "mrc_create_context with a newer API version");
  mrc_context_attr current{cur, 0};
  for (mrc_context_attr* a : {static_cast<mrc_context_attr*>(nullptr), &current}) {
    c = need(f.api.mrc_create_context(n.vctx(), a),
             a ? "mrc_create_context(current version)" : "mrc_create_context(NULL attr)");
    expect_ok(f.api.mrc_destroy_context(c), "mrc_destroy_context");
  }
}

void t_query_device(Fixture& f) {
  Node n(f);
  mrc_device_attr a{};
  int supported = 0;
  expect_ok(f.api.mrc_query_device(n.vctx(), &a, &supported), "mrc_query_device");
  if (!supported) fail("supported = 0 on the MRC device");
  if (a.mrc_protocol_version == 0) fail("mrc_protocol_version mask is 0");
  if (a.wimm_attr.max_wimm == 0 || a.wimm_attr.max_wimm_dest == 0) fail("max_wimm(_dest) 0");
  if (a.mpr_attr.max_mpr == 0) fail("max_mpr 0");
  errno = 0;
  expect_errno(f.api.mrc_query_device(n.vctx(), nullptr, &supported) != 0, EINVAL,
               "mrc_query_device(attr NULL)");
}

void t_query_device_ex(Fixture& f) {
  if (!f.api.mrc_query_device_ex) unsupported("the library has no mrc_query_device_ex (API 1.0.0)");
  Node n(f);
  mrc_device_attr a = n.device_attr(), b{};
  int supported = 0;
  expect_ok(f.api.mrc_query_device_ex(n.vctx(), n.ctx(), &b, &supported), "mrc_query_device_ex");
  if (!supported) fail("mrc_query_device_ex: supported = 0");
  if (std::memcmp(&a, &b, sizeof a) != 0) fail("mrc_query_device_ex and mrc_query_device disagree");
}

void t_ctl_query_device(Fixture& f) {
  Node n(f);
  mrc_ctl_device_attr c = n.ctl_attr();
  if (c.phy_port_mask == 0) fail("phy_port_mask 0");
  if (c.phy_port_mask & 1u) fail("phy_port_mask bit 0 set (ports are 1-based)");
  if (c.ev.ev_mode_mask == 0) fail("ev_mode_mask 0");
  if (c.ev.ev_fmt_mode_mask == 0) fail("ev_fmt_mode_mask 0");
  if (!c.cc.algorithms) fail("cc.algorithms NULL (an empty list is a NULL first entry)");
  for (int i = 0; c.cc.algorithms[i]; ++i)
    if (i > 64) fail("cc.algorithms is not NULL-terminated");
  if (f.api.mrc_ctl_query_device_ex) {
    mrc_ctl_device_attr d{};
    int supported = 0;
    expect_ok(f.api.mrc_ctl_query_device_ex(n.vctx(), n.ctx(), &d, &supported),
              "mrc_ctl_query_device_ex");
    if (!supported) fail("mrc_ctl_query_device_ex: supported = 0");
    if (d.phy_port_mask != c.phy_port_mask || d.opt_attr != c.opt_attr)
      fail("mrc_ctl_query_device_ex and mrc_ctl_query_device disagree");
  }
}

// ------------------------------------------------------------------ tests: objects

void t_cq_lifecycle(Fixture& f) {
  Node n(f);
  errno = 0;
  expect_errno(f.api.mrc_create_cq(n.ctx(), 0, nullptr, nullptr, 0) == nullptr, EINVAL,
               "mrc_create_cq(cqe 0)");
  mrc_cq* cq = need(f.api.mrc_create_cq(n.ctx(), 16, nullptr, nullptr, 0), "mrc_create_cq(16)");
  ibv_wc wc[4];
  const int k = f.api.mrc_poll_cq(cq, 4, wc);
  if (k != 0) fail("mrc_poll_cq on a new CQ returned " + std::to_string(k));
  expect_ok(f.api.mrc_destroy_cq(cq), "mrc_destroy_cq");
}

void t_context_busy(Fixture& f) {
  Node n(f);
  n.cq();
  errno = 0;
  expect_errno(f.api.mrc_destroy_context(n.ctx()) != 0, EBUSY,
               "mrc_destroy_context while a CQ exists");
}

void t_cq_channel_busy(Fixture& f) {
  Node n(f);
  n.qp();
  errno = 0;
  expect_errno(f.api.mrc_destroy_cq(n.cq()) != 0, EBUSY, "mrc_destroy_cq while a QP uses it");
  mrc_comp_channel* ch = nullptr;
  expect_ok(f.api.mrc_create_comp_channel(n.ctx(), &ch), "mrc_create_comp_channel");
  int fd = -1;
  expect_ok(f.api.mrc_get_comp_channel_fd(ch, &fd), "mrc_get_comp_channel_fd");
  if (fd < 0) fail("mrc_get_comp_channel_fd gave a negative descriptor");
  mrc_cq* cq = need(f.api.mrc_create_cq(n.ctx(), 16, nullptr, ch, 0), "mrc_create_cq(channel)");
  errno = 0;
  expect_errno(f.api.mrc_destroy_comp_channel(ch) != 0, EBUSY,
               "mrc_destroy_comp_channel while a CQ uses it");
  expect_ok(f.api.mrc_destroy_cq(cq), "mrc_destroy_cq");
  expect_ok(f.api.mrc_destroy_comp_channel(ch), "mrc_destroy_comp_channel");
}

void t_qp_hint(Fixture& f) {
  Node n(f);
  mrc_qp_hint_init_attr hi{};
  hi.attr.num_qps_per_peer = 2;
  hi.attr.num_send_peers = 8;
  hi.attr.num_remote_recv_peers = 4;
  mrc_qp_hint* h = need(f.api.mrc_create_qp_hint(n.ctx(), &hi), "mrc_create_qp_hint");
  mrc_qp_hint_attr q{};
  expect_ok(f.api.mrc_query_qp_hint(h, &q, MRC_QP_HINT_NUM_SEND_PEERS), "mrc_query_qp_hint");
  if (q.num_send_peers != 8) fail("num_send_peers reads back " + std::to_string(q.num_send_peers));
  mrc_qp_hint_attr mod{};
  mod.num_qps_per_peer = 3;
  expect_ok(f.api.mrc_modify_qp_hint(h, &mod, MRC_QP_HINT_NUM_QPS_PER_PEER), "mrc_modify_qp_hint");
  expect_ok(f.api.mrc_query_qp_hint(h, &q, MRC_QP_HINT_NUM_QPS_PER_PEER), "mrc_query_qp_hint");
  if (q.num_qps_per_peer != 3) fail("modified num_qps_per_peer not read back");
  mrc_qp* qp = n.qp();
  mrc_qp_attr m{};
  m.qp_hint = h;
  expect_ok(n.to_init(qp, &m, MRC_QP_HINT), "RESET -> INIT with MRC_QP_HINT");
  errno = 0;
  expect_errno(f.api.mrc_destroy_qp_hint(h) != 0, EBUSY, "mrc_destroy_qp_hint while a QP names it");
  expect_ok(f.api.mrc_destroy_qp(qp), "mrc_destroy_qp");
  expect_ok(f.api.mrc_destroy_qp_hint(h), "mrc_destroy_qp_hint after the QP");
}

void t_create_qp_checks(Fixture& f) {
  Node n(f);
  mrc_qp_init_attr a = n.qp_init();
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  errno = 0;
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL,
               "mrc_create_qp with send_ops_flags SEND");
  a = n.qp_init();
  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL,
               "mrc_create_qp with send_ops_flags RDMA_READ");
  a = n.qp_init();
  a.pd = nullptr;
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL, "mrc_create_qp without a PD");
  a = n.qp_init();
  a.protocol_version = static_cast<mrc_protocol_version>(1u << 7);
  if (n.device_attr().mrc_protocol_version & (1u << 7)) unsupported("the device speaks bit 7");
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL,
               "mrc_create_qp with a protocol version the device does not report");
}

void t_qp_limits(Fixture& f) {
  Node n(f);
  const ibv_device_attr d = n.verbs_attr();
  if (d.max_qp_wr <= 0 || d.max_sge <= 0) fail("ibv_query_device: max_qp_wr or max_sge is 0");
  mrc_qp_init_attr a = n.qp_init();
  a.cap.max_send_sge = static_cast<uint32_t>(d.max_sge) + 1;
  errno = 0;
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL,
               "mrc_create_qp with max_send_sge = max_sge + 1");
  a = n.qp_init();
  a.cap.max_send_wr = static_cast<uint32_t>(d.max_qp_wr) + 1;
  expect_errno(f.api.mrc_create_qp(n.ctx(), &a) == nullptr, EINVAL,
               "mrc_create_qp with max_send_wr = max_qp_wr + 1");
  a = n.qp_init();
  a.cap.max_send_sge = static_cast<uint32_t>(d.max_sge);
  mrc_qp* q = need(f.api.mrc_create_qp(n.ctx(), &a), "mrc_create_qp with max_send_sge = max_sge");
  expect_ok(f.api.mrc_destroy_qp(q), "mrc_destroy_qp");
}

// ------------------------------------------------------------------ tests: QP state machine

void t_qp_legal(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  if (n.state(q) != IBV_QPS_RESET) fail("a new QP is not in RESET");
  struct Step {
    const char* name;
    ibv_qp_state want;
  };
  expect_ok(n.to_init(q), "RESET -> INIT");
  if (n.state(q) != IBV_QPS_INIT) fail("RESET -> INIT: query reads another state");
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_INIT;
  expect_ok(f.api.mrc_modify_qp(q, &v, IBV_QP_STATE, nullptr, 0), "INIT -> INIT");
  expect_ok(n.to_rtr(q, n.qpn(q)), "INIT -> RTR");
  if (n.state(q) != IBV_QPS_RTR) fail("INIT -> RTR: query reads another state");
  expect_ok(n.to_rts(q), "RTR -> RTS");
  if (n.state(q) != IBV_QPS_RTS) fail("RTR -> RTS: query reads another state");
  v = {};
  v.qp_state = IBV_QPS_RTS;
  expect_ok(f.api.mrc_modify_qp(q, &v, IBV_QP_STATE, nullptr, 0), "RTS -> RTS");
  for (ibv_qp_state s : {IBV_QPS_ERR, IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RESET}) {
    v = {};
    v.qp_state = s;
    v.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
    const int mask = IBV_QP_STATE | (s == IBV_QPS_INIT ? IBV_QP_ACCESS_FLAGS : 0);
    expect_ok(f.api.mrc_modify_qp(q, &v, mask, nullptr, 0),
              std::string("-> ") + (s == IBV_QPS_ERR     ? "ERR"
                                    : s == IBV_QPS_RESET ? "RESET"
                                                         : "INIT"));
    if (n.state(q) != s) fail("after a modify to state " + std::to_string(s) + " query disagrees");
  }
  mrc_qp* r = n.rtr_qp();
  v = {};
  v.qp_state = IBV_QPS_ERR;
  expect_ok(f.api.mrc_modify_qp(r, &v, IBV_QP_STATE, nullptr, 0), "RTR -> ERR");
}

void t_qp_illegal(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  auto refuse = [&](ibv_qp_state to, int mask, const char* what) {
    ibv_qp_attr v = n.rtr_attr(n.qpn(q));
    v.qp_state = to;
    v.sq_psn = 1;
    const ibv_qp_state before = n.state(q);
    errno = 0;
    expect_errno(f.api.mrc_modify_qp(q, &v, mask, nullptr, 0) != 0, EINVAL, what);
    if (n.state(q) != before) fail(std::string(what) + ": refused, but the state changed");
  };
  refuse(IBV_QPS_RTR, Node::kRtrMask, "RESET -> RTR");
  refuse(IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, "RESET -> RTS");
  expect_ok(n.to_init(q), "RESET -> INIT");
  refuse(IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, "INIT -> RTS");
  expect_ok(n.to_rtr(q, n.qpn(q)), "INIT -> RTR");
  refuse(IBV_QPS_INIT, IBV_QP_STATE, "RTR -> INIT");
  expect_ok(n.to_rts(q), "RTR -> RTS");
  refuse(IBV_QPS_RTR, Node::kRtrMask, "RTS -> RTR");
  refuse(IBV_QPS_INIT, IBV_QP_STATE, "RTS -> INIT");
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_ERR;
  expect_ok(f.api.mrc_modify_qp(q, &v, IBV_QP_STATE, nullptr, 0), "RTS -> ERR");
  refuse(IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, "ERR -> RTS");
  refuse(IBV_QPS_RTR, Node::kRtrMask, "ERR -> RTR");
}

void t_qp_required(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  expect_ok(n.to_init(q), "RESET -> INIT");
  ibv_qp_attr v = n.rtr_attr(n.qpn(q));
  for (int missing : {IBV_QP_AV, IBV_QP_DEST_QPN, IBV_QP_RQ_PSN, IBV_QP_PATH_MTU}) {
    errno = 0;
    expect_errno(
        f.api.mrc_modify_qp(q, &v, Node::kRtrMask & ~missing, nullptr, 0) != 0, EINVAL,
        "INIT -> RTR without verbs attribute mask 0x" + [&] {
          char b[16];
          std::snprintf(b, sizeof b, "%x", missing);
          return std::string(b);
        }());
  }
  expect_ok(n.to_rtr(q, n.qpn(q)), "INIT -> RTR");
  v = {};
  v.qp_state = IBV_QPS_RTS;
  errno = 0;
  expect_errno(f.api.mrc_modify_qp(q, &v, IBV_QP_STATE, nullptr, 0) != 0, EINVAL,
               "RTR -> RTS without IBV_QP_SQ_PSN");
  if (n.state(q) != IBV_QPS_RTR) fail("a refused RTR -> RTS moved the QP");
}

void t_qp_not_rc(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  ibv_qp_attr v{};
  v.qp_state = IBV_QPS_INIT;
  v.qkey = 0x11111111;
  errno = 0;
  expect_errno(f.api.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_QKEY, nullptr, 0) != 0, EINVAL,
               "RESET -> INIT with IBV_QP_QKEY (not an RC attribute)");
  mrc_qp_attr m{};
  m.mpr.mpr_dest = 1;
  expect_ok(n.to_init(q), "RESET -> INIT");
  expect_ok(n.to_rtr(q, n.qpn(q)), "INIT -> RTR");
  m.profile.ev_profile_id = 1;
  v = n.rtr_attr(n.qpn(q));
  v.qp_state = IBV_QPS_RTS;
  v.sq_psn = 1;
  errno = 0;
  expect_errno(
      f.api.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m, MRC_QP_EV_PROFILE_ID) != 0,
      EINVAL, "RTR -> RTS with MRC_QP_EV_PROFILE_ID (an INIT attribute)");
}

// Requester attributes at RTR: mrc.h lists them for RTS, the walkthrough mrc_qp.md gives them at
// RTR. Either is a reading of the OCP text, so the test reports what the library does.
void t_qp_requester_attrs_at_rtr(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  expect_ok(n.to_init(q), "RESET -> INIT");
  ibv_qp_attr v = n.rtr_attr(n.qpn(q));
  mrc_qp_attr m{};
  m.mpr.mpr = 1;
  m.wimm.max_wimm = 1;
  errno = 0;
  const int rc = f.api.mrc_modify_qp(q, &v, Node::kRtrMask, &m, MRC_QP_MPR | MRC_QP_MAX_WIMM);
  informational(
      rc == 0 ? "MRC_QP_MPR and MRC_QP_MAX_WIMM at INIT -> RTR: accepted"
              : "MRC_QP_MPR and MRC_QP_MAX_WIMM at INIT -> RTR: refused with " + err_name(errno) +
                    " (mrc.h lists them for RTS; walkthrough mrc_qp.md sets them at RTR)");
}

// Verbs attributes mrc.h declares unsupported; the companion benchmark sets IBV_QP_PORT at INIT
// and IBV_QP_TIMEOUT / RETRY_CNT / RNR_RETRY at RTS.
void t_qp_unsupported_verbs(Fixture& f) {
  Node n(f);
  std::string out;
  struct A {
    int mask;
    const char* name;
    ibv_qp_state at;
  };
  const A attrs[] = {{IBV_QP_PORT, "IBV_QP_PORT", IBV_QPS_INIT},
                     {IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT", IBV_QPS_RTS},
                     {IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT", IBV_QPS_RTS},
                     {IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY", IBV_QPS_RTS},
                     {IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER", IBV_QPS_RTS},
                     {IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC", IBV_QPS_RTS},
                     {IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC", IBV_QPS_RTR}};
  for (const A& a : attrs) {
    mrc_qp* q = n.qp();
    int rc = 0;
    if (a.at == IBV_QPS_INIT) {
      ibv_qp_attr v{};
      v.qp_state = IBV_QPS_INIT;
      v.port_num = 1;
      v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
      rc = f.api.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | a.mask, nullptr, 0);
    } else if (a.at == IBV_QPS_RTR) {
      expect_ok(n.to_init(q), "RESET -> INIT");
      ibv_qp_attr v = n.rtr_attr(n.qpn(q));
      v.max_dest_rd_atomic = 1;
      rc = f.api.mrc_modify_qp(q, &v, Node::kRtrMask | a.mask, nullptr, 0);
    } else {
      expect_ok(n.to_init(q), "RESET -> INIT");
      expect_ok(n.to_rtr(q, n.qpn(q)), "INIT -> RTR");
      ibv_qp_attr v{};
      v.qp_state = IBV_QPS_RTS;
      v.sq_psn = 1;
      v.timeout = 14;
      v.retry_cnt = 7;
      v.rnr_retry = 7;
      v.min_rnr_timer = 12;
      v.max_rd_atomic = 1;
      rc = f.api.mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_SQ_PSN | a.mask, nullptr, 0);
    }
    out += std::string(a.name) + (rc == 0 ? " accepted; " : " refused (" + err_name(errno) + "); ");
  }
  informational(out +
                "mrc.h: not supported; OCP benchmark sets IBV_QP_PORT, IBV_QP_TIMEOUT, "
                "IBV_QP_RETRY_CNT, IBV_QP_RNR_RETRY");
}

// mrc.h lists MRC attributes each transition requires; the OCP benchmark gives none of them.
void t_qp_mrc_required_left_out(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  std::string out;
  out += n.to_init(q) == 0 ? "INIT without hint/profile ids accepted; "
                           : "INIT without hint/profile ids refused (" + err_name(errno) + "); ";
  if (n.state(q) == IBV_QPS_INIT) {
    out += n.to_rtr(q, n.qpn(q)) == 0
               ? "RTR without MAX_WIMM_DEST/MPR_DEST accepted; "
               : "RTR without MAX_WIMM_DEST/MPR_DEST refused (" + err_name(errno) + "); ";
  }
  if (n.state(q) == IBV_QPS_RTR) {
    out += n.to_rts(q) == 0
               ? "RTS without MAX_WIMM/MPR/RETRY_CNT/TIMEOUT accepted"
               : "RTS without MAX_WIMM/MPR/RETRY_CNT/TIMEOUT refused (" + err_name(errno) + ")";
  }
  informational(out + " (mrc.h: required per transition; OCP benchmark: sets none)");
}

void t_qp_query_back(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.qp();
  expect_ok(n.to_init(q), "RESET -> INIT");
  expect_ok(n.to_rtr(q, 0x123), "INIT -> RTR");
  mrc_qp_attr m{};
  m.timeout = 14;
  m.retry.linear_cnt = 3;
  m.retry.exp_cnt = 5;
  expect_ok(n.to_rts(q, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT), "RTR -> RTS with timeout 14");
  ibv_qp_attr v{};
  mrc_qp_attr got{};
  expect_ok(f.api.mrc_query_qp(q, &v, IBV_QP_STATE | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU, &got,
                               MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT, nullptr),
            "mrc_query_qp");
  if (v.dest_qp_num != 0x123) fail("dest_qp_num reads back " + std::to_string(v.dest_qp_num));
  if (v.path_mtu != IBV_MTU_1024) fail("path_mtu does not read back");
  if (got.timeout != 14) fail("MRC_QP_TIMEOUT reads back " + std::to_string(got.timeout));
  if (got.retry.linear_cnt != 3 || got.retry.exp_cnt != 5)
    fail("MRC_QP_RETRY_CNT does not read back");
}

// ------------------------------------------------------------------ tests: attribute ranges

// Moves a fresh RTR QP to RTS with `m`/`mask`; returns 0 or errno.
int rts_with(Node& n, mrc_qp_attr m, int mask) {
  mrc_qp* q = n.rtr_qp();
  errno = 0;
  return n.to_rts(q, &m, mask) == 0 ? 0 : (errno ? errno : -1);
}

void t_timeout_range(Fixture& f) {
  Node n(f);
  mrc_qp_attr m{};
  m.timeout = 24;
  if (int e = rts_with(n, m, MRC_QP_TIMEOUT)) fail("MRC_QP_TIMEOUT 24 refused: " + err_name(e));
  for (uint8_t t : {25, 31, 255}) {
    m.timeout = t;
    if (rts_with(n, m, MRC_QP_TIMEOUT) != EINVAL)
      fail("MRC_QP_TIMEOUT " + std::to_string(t) + " not refused with EINVAL");
  }
}

void t_retry_range(Fixture& f) {
  Node n(f);
  mrc_qp_attr m{};
  m.timeout = 14;
  m.retry.linear_cnt = 7;
  m.retry.exp_cnt = 25;
  if (int e = rts_with(n, m, MRC_QP_RETRY_CNT))
    fail("retry linear_cnt 7, exp_cnt 25 refused: " + err_name(e));
  m.retry.linear_cnt = 8;
  m.retry.exp_cnt = 0;
  if (rts_with(n, m, MRC_QP_RETRY_CNT) != EINVAL)
    fail("retry linear_cnt 8 not refused with EINVAL");
  m.retry.linear_cnt = 0;
  m.retry.exp_cnt = 26;
  if (rts_with(n, m, MRC_QP_RETRY_CNT) != EINVAL) fail("retry exp_cnt 26 not refused with EINVAL");
}

void t_wimm_mpr_limits(Fixture& f) {
  Node n(f);
  const mrc_device_attr d = n.device_attr();
  mrc_qp_attr m{};
  m.wimm.max_wimm = d.wimm_attr.max_wimm;
  if (int e = rts_with(n, m, MRC_QP_MAX_WIMM))
    fail("MRC_QP_MAX_WIMM = device max_wimm refused: " + err_name(e));
  if (d.wimm_attr.max_wimm < 0xFFFF) {
    m.wimm.max_wimm = static_cast<uint16_t>(d.wimm_attr.max_wimm + 1);
    if (rts_with(n, m, MRC_QP_MAX_WIMM) != EINVAL)
      fail("MRC_QP_MAX_WIMM = max_wimm + 1 not refused with EINVAL");
  }
  if (d.mpr_attr.max_mpr < 0xFF) {
    m = {};
    m.mpr.mpr = static_cast<uint8_t>(d.mpr_attr.max_mpr + 1);
    if (rts_with(n, m, MRC_QP_MPR) != EINVAL)
      fail("MRC_QP_MPR = max_mpr + 1 not refused with EINVAL");
  }
}

// ------------------------------------------------------------------ tests: post_send

std::vector<ibv_wc> poll_n(Node& n, size_t want, double seconds) {
  std::vector<ibv_wc> out;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  ibv_wc wc[8];
  while (out.size() < want && std::chrono::steady_clock::now() < end) {
    const int k = n.api().mrc_poll_cq(n.cq(), 8, wc);
    if (k < 0) fail("mrc_poll_cq returned " + std::to_string(k));
    for (int j = 0; j < k; ++j) out.push_back(wc[j]);
    if (k == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return out;
}

void t_post_writes(Fixture& f) {
  Node n(f);
  mrc_qp *a = nullptr, *b = nullptr;
  n.pair(a, b);
  std::vector<char> src(4096, 'x'), dst(4096, 0);
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  ibv_recv_wr* bad_r = nullptr;
  if (int e = f.api.mrc_post_recv(b, &rwr, &bad_r)) fail("mrc_post_recv: " + err_name(e));
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 4096, ms->lkey};
  ibv_send_wr w1{}, w2{};
  w1.wr_id = 1;
  w1.sg_list = &sge;
  w1.num_sge = 1;
  w1.opcode = IBV_WR_RDMA_WRITE;
  w1.send_flags = IBV_SEND_SIGNALED;
  w1.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(md->addr);
  w1.wr.rdma.rkey = md->rkey;
  w2 = w1;
  w2.wr_id = 2;
  w2.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w2.imm_data = htonl(0xC0FFEE);
  w1.next = &w2;
  ibv_send_wr* bad = nullptr;
  if (int e = f.api.mrc_post_send(a, &w1, &bad))
    fail("mrc_post_send(WRITE, WRITE_WITH_IMM): " + err_name(e));
  const auto wcs = poll_n(n, 3, 10);
  if (wcs.size() != 3)
    fail("expected 3 completions within 10 s, got " + std::to_string(wcs.size()));
  for (const ibv_wc& wc : wcs) {
    if (wc.status != IBV_WC_SUCCESS)
      fail(std::string("completion status ") + std::to_string(wc.status));
  }
  if (std::memcmp(src.data(), dst.data(), dst.size()) != 0) fail("the written bytes differ");
}

void refuse_opcodes(Fixture& f, std::initializer_list<std::pair<ibv_wr_opcode, const char*>> ops) {
  Node n(f);
  mrc_qp *a = nullptr, *b = nullptr;
  n.pair(a, b);
  std::vector<char> buf(64);
  ibv_mr* m = n.mr(buf);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, m->lkey};
  for (const auto& [op, name] : ops) {
    ibv_send_wr w{};
    w.wr_id = 9;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = op;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data());
    w.wr.rdma.rkey = m->rkey;
    w.wr.atomic.remote_addr = reinterpret_cast<uintptr_t>(buf.data());
    w.wr.atomic.rkey = m->rkey;
    ibv_send_wr* bad = nullptr;
    const int rc = f.api.mrc_post_send(a, &w, &bad);
    if (rc == 0) fail(std::string("mrc_post_send accepted ") + name);
    if (rc != EINVAL)
      fail(std::string("mrc_post_send(") + name + ") returned " + err_name(rc) +
           ", expected EINVAL");
    if (bad != &w) fail(std::string("mrc_post_send(") + name + ") did not set *bad_wr");
  }
}

void t_refuse_read(Fixture& f) {
  refuse_opcodes(f, {{IBV_WR_RDMA_READ, "RDMA_READ"}});
}
void t_refuse_send(Fixture& f) {
  refuse_opcodes(f, {{IBV_WR_SEND, "SEND"}, {IBV_WR_SEND_WITH_IMM, "SEND_WITH_IMM"}});
}
void t_refuse_atomics(Fixture& f) {
  refuse_opcodes(f, {{IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP"},
                     {IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD"}});
}

void t_post_sge_limit(Fixture& f) {
  Node n(f);
  mrc_qp *a = nullptr, *b = nullptr;
  n.pair(a, b);  // created with max_send_sge 1
  std::vector<char> buf(64);
  ibv_mr* m = n.mr(buf);
  ibv_sge sge[2] = {{reinterpret_cast<uintptr_t>(buf.data()), 8, m->lkey},
                    {reinterpret_cast<uintptr_t>(buf.data()) + 8, 8, m->lkey}};
  ibv_send_wr w{};
  w.sg_list = sge;
  w.num_sge = 2;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data()) + 32;
  w.wr.rdma.rkey = m->rkey;
  ibv_send_wr* bad = nullptr;
  const int rc = f.api.mrc_post_send(a, &w, &bad);
  if (rc != EINVAL) fail("mrc_post_send with num_sge 2 > max_send_sge 1 returned " + err_name(rc));
  if (bad != &w) fail("*bad_wr not set");
}

void t_post_before_rts(Fixture& f) {
  Node n(f);
  mrc_qp* q = n.rtr_qp();
  std::vector<char> buf(64);
  ibv_mr* m = n.mr(buf);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 8, m->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data()) + 32;
  w.wr.rdma.rkey = m->rkey;
  ibv_send_wr* bad = nullptr;
  const int rc = f.api.mrc_post_send(q, &w, &bad);
  if (rc == 0) fail("mrc_post_send on a QP in RTR accepted");
  if (rc != EINVAL)
    fail("mrc_post_send on a QP in RTR returned " + err_name(rc) + ", expected EINVAL");
}

// ------------------------------------------------------------------ tests: profiles (mrc_ctl.h)

void t_ev_fmt_profile(Fixture& f) {
  Node n(f);
  if (!(n.ctl_attr().ev.ev_fmt_mode_mask & MRC_CTL_EV_FMT_MODE_STEV))
    unsupported("ev_fmt_mode_mask does not advertise STEV");
  mrc_context* ctx = n.ctx();
  mrc_ctl_ev_fmt_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_ev_fmt_profile(ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0,
               EINVAL, "EV format profile INIT -> ONLINE");
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  expect_errno(f.api.mrc_ctl_modify_ev_fmt_profile(ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0,
               EINVAL, "EV format profile INIT -> OFFLINE without MODE");
  a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  expect_ok(f.api.mrc_ctl_modify_ev_fmt_profile(
                ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE),
            "EV format profile INIT -> OFFLINE with MODE");
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  expect_errno(f.api.mrc_ctl_modify_ev_fmt_profile(ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE) != 0,
               EINVAL, "EV format profile OFFLINE -> ONLINE without fields");
  mrc_ctl_ev_fmt_field fields[2] = {{16}, {16}};
  a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  a.ev_fmt_op.fmt_fields = fields;
  a.ev_fmt_op.fmt_field_count = 2;
  expect_ok(f.api.mrc_ctl_modify_ev_fmt_profile(
                ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_OP | MRC_CTL_EV_FMT_PROFILE_STATE),
            "EV format profile OFFLINE -> ONLINE with fields");
  mrc_ctl_ev_fmt_profile_attr q{};
  expect_ok(f.api.mrc_ctl_query_ev_fmt_profile(ctx, 5, &q, MRC_CTL_EV_FMT_PROFILE_STATE),
            "mrc_ctl_query_ev_fmt_profile");
  if (q.profile_state != MRC_CTL_PROFILE_ONLINE) fail("query does not read ONLINE");
  a = {};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  expect_ok(f.api.mrc_ctl_modify_ev_fmt_profile(ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE),
            "EV format profile ONLINE -> OFFLINE");
  a.profile_state = MRC_CTL_PROFILE_INIT;
  expect_ok(f.api.mrc_ctl_modify_ev_fmt_profile(ctx, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE),
            "EV format profile OFFLINE -> INIT");
}

void t_ev_profile_explicit(Fixture& f) {
  Node n(f);
  need_explicit(n);
  const uint8_t port = first_port(n.ctl_attr());
  stev_format(f.api, n.ctx(), 13);
  explicit_profile(f.api, n.ctx(), 1, 13, 4, port, false);
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_STATE) != 0,
               EINVAL, "explicit EV profile OFFLINE -> ONLINE while unpopulated");
  explicit_profile(f.api, n.ctx(), 2, 13, 4, port, true);
  std::vector<mrc_ctl_ev_op_entry> arr(2);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 2;
  errno = 0;
  expect_errno(f.api.mrc_ctl_query_ev_profile(n.ctx(), 2, &q, MRC_CTL_EV_PROFILE_EV_OP) != 0, E2BIG,
               "QUERY_EV_ARRAY into 2 entries of a 4-EV profile");
  if (q.ev_op.entry_count != 4) fail("E2BIG did not report the 4 entries needed");
  arr.resize(4);
  q.ev_op.entries = arr.data();
  expect_ok(f.api.mrc_ctl_query_ev_profile(n.ctx(), 2, &q,
                                           MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_STATE),
            "QUERY_EV_ARRAY");
  if (q.profile_state != MRC_CTL_PROFILE_ONLINE) fail("profile does not read ONLINE");
  for (uint32_t i = 0; i < 4; ++i) {
    const mrc_ctl_ev want = ev_of(0x10001u * (i + 1), port);
    if (std::memcmp(&arr[i].ev, &want, sizeof want) != 0)
      fail("EV array entry " + std::to_string(i) + " is not the EV replaced into it");
  }
}

void t_profile_busy(Fixture& f) {
  Node n(f);
  need_explicit(n);
  stev_format(f.api, n.ctx(), 13);
  explicit_profile(f.api, n.ctx(), 1, 13, 4, first_port(n.ctl_attr()), true);
  mrc_qp* qp = n.qp();
  mrc_qp_attr m{};
  m.profile.ev_profile_id = 1;
  expect_ok(n.to_init(qp, &m, MRC_QP_EV_PROFILE_ID), "RESET -> INIT on the ONLINE EV profile");
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_STATE) != 0,
               EBUSY, "EV profile ONLINE -> OFFLINE while a QP uses it");
  mrc_ctl_ev_fmt_profile_attr fa{};
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  expect_errno(
      f.api.mrc_ctl_modify_ev_fmt_profile(n.ctx(), 13, &fa, MRC_CTL_EV_FMT_PROFILE_STATE) != 0,
      EBUSY, "EV format profile ONLINE -> OFFLINE while an ONLINE EV profile uses it");
  expect_ok(f.api.mrc_destroy_qp(qp), "mrc_destroy_qp");
  expect_ok(f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_STATE),
            "EV profile ONLINE -> OFFLINE without users");
  // A QP naming a profile that does not exist.
  mrc_qp* q2 = n.qp();
  m.profile.ev_profile_id = 77;
  if (n.to_init(q2, &m, MRC_QP_EV_PROFILE_ID) == 0)
    fail("RESET -> INIT on EV profile 77 (none) accepted");
}

void t_cc_profile(Fixture& f) {
  Node n(f);
  const mrc_ctl_device_attr c = n.ctl_attr();
  if (!c.cc.algorithms || !c.cc.algorithms[0]) unsupported("no CC algorithm advertised");
  const char* alg = c.cc.algorithms[0];
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "no-such-algorithm";
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_cc_profile(
                   n.ctx(), 2, &cc, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) != 0,
               EINVAL, "CC profile with an algorithm the device does not list");
  cc.algorithm = alg;
  expect_ok(f.api.mrc_ctl_modify_cc_profile(
                n.ctx(), 2, &cc, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            std::string("CC profile INIT -> OFFLINE with ") + alg);
  cc = {};
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_cc_profile(n.ctx(), 2, &cc, MRC_CTL_CC_PROFILE_STATE) != 0,
               EINVAL, "CC profile OFFLINE -> ONLINE without CONFIG");
  if (std::string(alg) != "uet-1.0-nscc") {
    unsupported(std::string("the first algorithm is ") + alg +
                ", whose configuration the suite does not know");
  }
  mrc_ctl_cc_nscc_cfg nscc{};
  nscc.base_rtt = 100000;
  nscc.target_delay = 2000000;
  nscc.max_cwnd = 4 << 20;
  nscc.gamma = 0.8f;
  nscc.max_md_jump = 0.5f;
  nscc.eta = 600;
  nscc.fi = 1;
  nscc.fi_scale = 0.5f;
  nscc.qa_threshold = 20000000;
  nscc.adjust_period_threshold = 200000;
  nscc.adjust_bytes_threshold = 32768;
  cc.cc_config = &nscc;
  expect_ok(f.api.mrc_ctl_modify_cc_profile(n.ctx(), 2, &cc,
                                            MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG),
            "CC profile OFFLINE -> ONLINE with CONFIG");
  mrc_qp* qp = n.qp();
  mrc_qp_attr m{};
  m.profile.cc_profile_id = 2;
  expect_ok(n.to_init(qp, &m, MRC_QP_CC_PROFILE_ID), "RESET -> INIT on the CC profile");
  cc = {};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_cc_profile(n.ctx(), 2, &cc, MRC_CTL_CC_PROFILE_STATE) != 0,
               EBUSY, "CC profile ONLINE -> OFFLINE while a QP uses it");
}

void t_ev_state(Fixture& f) {
  Node n(f);
  need_explicit(n);
  const uint8_t port = first_port(n.ctl_attr());
  stev_format(f.api, n.ctx(), 13);
  explicit_profile(f.api, n.ctx(), 1, 13, 4, port, true);
  // A QP on the profile: EV states are path states of the QPs that spray over the EVs.
  mrc_qp* qp = n.qp();
  mrc_qp_attr m{};
  m.profile.ev_profile_id = 1;
  expect_ok(n.to_init(qp, &m, MRC_QP_EV_PROFILE_ID), "RESET -> INIT on the EV profile");
  auto set = [&](uint32_t ev, mrc_ctl_ev_state s) {
    mrc_ctl_ev_op_entry en{};
    en.ev = ev_of(ev, port);
    en.state = s;
    mrc_ctl_ev_profile_attr a{};
    a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
    a.ev_op.entries = &en;
    a.ev_op.entry_count = 1;
    errno = 0;
    return f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_EV_OP);
  };
  expect_ok(set(0x30003, MRC_CTL_EV_DENIED), "MODIFY_EV_STATE DENIED");
  expect_ok(set(0x20002, MRC_CTL_EV_ASSUMED_BAD), "MODIFY_EV_STATE ASSUMED_BAD");
  mrc_ctl_ev_op_entry qs[3]{};
  qs[0].ev = ev_of(0x30003, port);
  qs[1].ev = ev_of(0x20002, port);
  qs[2].ev = ev_of(0x10001, port);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  q.ev_op.entries = qs;
  q.ev_op.entry_count = 3;
  expect_ok(f.api.mrc_ctl_query_ev_profile(n.ctx(), 1, &q, MRC_CTL_EV_PROFILE_EV_OP),
            "QUERY_EV_STATE");
  if (qs[0].state != MRC_CTL_EV_DENIED) fail("a DENIED EV does not read DENIED");
  if (qs[1].state != MRC_CTL_EV_ASSUMED_BAD) fail("an ASSUMED_BAD EV does not read ASSUMED_BAD");
  if (qs[2].state != MRC_CTL_EV_GOOD) fail("an untouched EV does not read GOOD");
  expect_ok(set(0x30003, MRC_CTL_EV_GOOD), "MODIFY_EV_STATE DENIED -> GOOD");
  if (set(0xDEAD, MRC_CTL_EV_DENIED) == 0)
    fail("MODIFY_EV_STATE of an EV not in the profile accepted");
  if (errno != ENOENT)
    fail("MODIFY_EV_STATE of an EV not in the profile: " + err_name(errno) + ", expected ENOENT");
}

void t_ev_events(Fixture& f) {
  Node n(f);
  if (!(n.ctl_attr().opt_attr & MRC_CTL_OPT_CAP_EV_EVENT))
    unsupported("opt_attr does not advertise MRC_CTL_OPT_CAP_EV_EVENT");
  need_explicit(n);
  const uint8_t port = first_port(n.ctl_attr());
  stev_format(f.api, n.ctx(), 13);
  explicit_profile(f.api, n.ctx(), 1, 13, 4, port, true);
  mrc_cq* evcq = need(f.api.mrc_ctl_create_ev_event_cq(n.ctx(), 16, nullptr, nullptr, 0),
                      "mrc_ctl_create_ev_event_cq");
  mrc_qp* qp = n.qp();
  mrc_qp_attr m{};
  m.profile.ev_profile_id = 1;
  expect_ok(n.to_init(qp, &m, MRC_QP_EV_PROFILE_ID), "RESET -> INIT on the EV profile");
  mrc_ctl_ev_op_entry en{};
  en.ev = ev_of(0x20002, port);
  en.state = MRC_CTL_EV_ASSUMED_BAD;
  mrc_ctl_ev_profile_attr a{};
  a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  a.ev_op.entries = &en;
  a.ev_op.entry_count = 1;
  expect_ok(f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_EV_OP),
            "MODIFY_EV_STATE ASSUMED_BAD");
  mrc_ctl_ev_event evs[4]{};
  int got = 0;
  for (int i = 0; i < 2000 && got == 0; ++i) {
    got = f.api.mrc_ctl_poll_ev_event(evcq, 4, evs);
    if (got < 0) fail("mrc_ctl_poll_ev_event returned " + std::to_string(got));
    if (got == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (got == 0) fail("no EV event within 2 s of an EV going ASSUMED_BAD (event mask asks for it)");
  if (evs[0].profile_id != 1) fail("EV event names profile " + std::to_string(evs[0].profile_id));
  if (std::memcmp(&evs[0].ev, &en.ev, sizeof en.ev) != 0) fail("EV event names another EV");
}

void t_modify_online(Fixture& f) {
  Node n(f);
  if (!(n.ctl_attr().opt_attr & MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE))
    unsupported("opt_attr does not advertise MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE");
  need_explicit(n);
  stev_format(f.api, n.ctx(), 13);
  explicit_profile(f.api, n.ctx(), 1, 13, 4, first_port(n.ctl_attr()), true);
  mrc_ctl_ev_profile_attr a{};
  a.ev_min_active = 2;
  expect_ok(f.api.mrc_ctl_modify_ev_profile(n.ctx(), 1, &a, MRC_CTL_EV_PROFILE_MIN_ACTIVE),
            "MIN_ACTIVE on an ONLINE profile (MODIFY_ONLINE advertised)");
}

void t_dynamic_mpr(Fixture& f) {
  Node n(f);
  if (!(n.device_attr().cap & MRC_DEVICE_CAP_DYNAMIC_MPR))
    unsupported("device cap does not advertise MRC_DEVICE_CAP_DYNAMIC_MPR");
  mrc_qp* q = n.qp();
  mrc_qp_attr m{};
  m.cap = MRC_QP_CAP_DYNAMIC_MPR;
  expect_ok(n.to_init(q), "RESET -> INIT");
  ibv_qp_attr v = n.rtr_attr(n.qpn(q));
  expect_ok(f.api.mrc_modify_qp(q, &v, Node::kRtrMask, &m, MRC_QP_CAP),
            "INIT -> RTR with MRC_QP_CAP_DYNAMIC_MPR");
}

// A WRITE_WITH_IMM pair on two QPs of the node: `count` messages of `len` bytes, imm_data
// 0xA0000000 + k, receive wr_ids 500 + k; returns every completion seen within `seconds`.
struct ImmRun {
  std::vector<ibv_wc> wcs;
  std::vector<char> src, dst;
};

void t_imm_completion_fields(Fixture& f) {
  Node n(f);
  mrc_qp *a = nullptr, *b = nullptr;
  n.pair(a, b);
  constexpr int kMsgs = 4;
  constexpr uint32_t kLen = 3000;  // not a multiple of the path MTU: several packets, a tail
  std::vector<char> src(kLen * kMsgs), dst(kLen * kMsgs, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 7 + 3);
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  for (int k = 0; k < kMsgs; ++k) {
    ibv_recv_wr r{};
    r.wr_id = 500 + static_cast<uint64_t>(k);
    ibv_recv_wr* bad_r = nullptr;
    if (int e = f.api.mrc_post_recv(b, &r, &bad_r)) fail("mrc_post_recv: " + err_name(e));
  }
  std::vector<ibv_sge> sge(kMsgs);
  std::vector<ibv_send_wr> w(kMsgs);
  for (int k = 0; k < kMsgs; ++k) {
    sge[k] = {reinterpret_cast<uintptr_t>(src.data()) + k * kLen, kLen, ms->lkey};
    w[k].wr_id = 900 + static_cast<uint64_t>(k);
    w[k].sg_list = &sge[k];
    w[k].num_sge = 1;
    w[k].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w[k].send_flags = IBV_SEND_SIGNALED;
    w[k].imm_data = htonl(0xA0000000u + static_cast<uint32_t>(k));
    w[k].wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(md->addr) + k * kLen;
    w[k].wr.rdma.rkey = md->rkey;
    w[k].next = k + 1 < kMsgs ? &w[k + 1] : nullptr;
  }
  ibv_send_wr* bad = nullptr;
  if (int e = f.api.mrc_post_send(a, w.data(), &bad))
    fail("mrc_post_send(4 x WRITE_WITH_IMM): " + err_name(e));
  const auto wcs = poll_n(n, 2 * kMsgs, 10);
  if (wcs.size() != 2 * kMsgs)
    fail("expected 8 completions within 10 s, got " + std::to_string(wcs.size()));
  std::vector<uint64_t> send_ids, recv_ids;
  for (const ibv_wc& wc : wcs) {
    if (wc.status != IBV_WC_SUCCESS) fail("completion status " + std::to_string(wc.status));
    if (wc.opcode == IBV_WC_RDMA_WRITE) {
      send_ids.push_back(wc.wr_id);
      if (wc.qp_num != n.qpn(a)) fail("a send completion names QP " + std::to_string(wc.qp_num));
    } else if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      const uint64_t k = wc.wr_id - 500;
      recv_ids.push_back(wc.wr_id);
      if (k >= kMsgs) fail("a receive completion has wr_id " + std::to_string(wc.wr_id));
      if (!(wc.wc_flags & IBV_WC_WITH_IMM)) fail("receive completion without IBV_WC_WITH_IMM");
      if (wc.byte_len != kLen)
        fail("receive completion byte_len " + std::to_string(wc.byte_len) + ", the message had " +
             std::to_string(kLen));
      if (wc.qp_num != n.qpn(b)) fail("a receive completion names QP " + std::to_string(wc.qp_num));
      // Receives complete in message order, so the k-th receive carries message k's imm_data.
      const uint32_t want = 0xA0000000u + static_cast<uint32_t>(recv_ids.size() - 1);
      if (ntohl(wc.imm_data) != want)
        fail("receive completion " + std::to_string(recv_ids.size()) + " carries imm_data " +
             std::to_string(ntohl(wc.imm_data)) + ", expected " + std::to_string(want));
    } else {
      fail("unexpected completion opcode " + std::to_string(wc.opcode));
    }
  }
  if (send_ids != std::vector<uint64_t>{900, 901, 902, 903})
    fail("send completions out of posting order (RC completes in order)");
  if (recv_ids != std::vector<uint64_t>{500, 501, 502, 503})
    fail("receive completions out of posting order");
  if (std::memcmp(src.data(), dst.data(), dst.size()) != 0) fail("the written bytes differ");
}

// Waits up to `seconds` for an async event of `type` on the context. mrc_get_async_event
// blocks (mrc.h), so it runs on a helper thread; one that never returns is left behind (the
// test process ends with the test).
bool wait_async(Fixture& f, Node& n, ibv_event_type type, mrc_async_event& out, double seconds) {
  if (!f.api.mrc_get_async_event) fail("mrc_get_async_event not found in the library");
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    bool found = false;
    mrc_async_event ev{};
  };
  auto sh = std::make_shared<Shared>();
  mrc_context* ctx = n.ctx();
  const Api& api = f.api;
  std::thread([sh, ctx, &api, type] {
    for (;;) {
      mrc_async_event ev{};
      if (api.mrc_get_async_event(ctx, &ev) != 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // EAGAIN: nothing yet
        continue;
      }
      const bool match = ev.event_type == type;
      if (api.mrc_ack_async_event) api.mrc_ack_async_event(&ev);
      if (match) {
        std::lock_guard<std::mutex> lk(sh->mu);
        sh->found = true;
        sh->ev = ev;
        sh->cv.notify_all();
        return;
      }
    }
  }).detach();
  std::unique_lock<std::mutex> lk(sh->mu);
  sh->cv.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return sh->found; });
  if (sh->found) out = sh->ev;
  return sh->found;
}

void t_cq_overflow(Fixture& f) {
  Node n(f);
  mrc_cq* small = need(f.api.mrc_create_cq(n.ctx(), 2, nullptr, nullptr, 0), "mrc_create_cq(2)");
  mrc_qp_init_attr ia = n.qp_init();
  ia.send_cq = small;
  ia.recv_cq = small;
  mrc_qp* a = need(f.api.mrc_create_qp(n.ctx(), &ia), "mrc_create_qp on a 2-entry CQ");
  mrc_qp* b = n.qp();
  expect_ok(n.to_init(a), "RESET -> INIT");
  expect_ok(n.to_init(b), "RESET -> INIT");
  expect_ok(n.to_rtr(a, n.qpn(b)), "INIT -> RTR");
  expect_ok(n.to_rtr(b, n.qpn(a)), "INIT -> RTR");
  expect_ok(n.to_rts(a), "RTR -> RTS");
  expect_ok(n.to_rts(b), "RTR -> RTS");
  std::vector<char> buf(64 * 8);
  ibv_mr* m = n.mr(buf);
  int cqe = 0;
  for (int k = 0; k < 8; ++k) {  // 8 signaled WRITEs, nobody polls the 2-entry CQ
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()) + k * 64, 64, m->lkey};
    ibv_send_wr w{};
    w.wr_id = static_cast<uint64_t>(k);
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf.data()) + ((k + 4) % 8) * 64;
    w.wr.rdma.rkey = m->rkey;
    ibv_send_wr* bad = nullptr;
    if (f.api.mrc_post_send(a, &w, &bad) == 0) ++cqe;
  }
  if (cqe == 0) fail("no WRITE could be posted");
  mrc_async_event ev{};
  if (!wait_async(f, n, IBV_EVENT_CQ_ERR, ev, 5))
    fail(std::to_string(cqe) + " completions for a 2-entry CQ: no IBV_EVENT_CQ_ERR within 5 s");
  if (ev.element.cq != small) fail("IBV_EVENT_CQ_ERR names another CQ");
}

void t_imm_accounting(Fixture& f) {
  Node n(f);
  const mrc_device_attr d = n.device_attr();
  if (d.wimm_attr.max_wimm < 2 || d.wimm_attr.max_wimm_dest < 2)
    unsupported("device max_wimm / max_wimm_dest below 2");
  mrc_qp* a = n.qp();
  mrc_qp* b = n.qp();
  expect_ok(n.to_init(a), "RESET -> INIT");
  expect_ok(n.to_init(b), "RESET -> INIT");
  mrc_qp_attr dest{};
  dest.wimm.max_wimm_dest = 2;
  ibv_qp_attr v = n.rtr_attr(n.qpn(b));
  expect_ok(f.api.mrc_modify_qp(a, &v, Node::kRtrMask, &dest, MRC_QP_MAX_WIMM_DEST), "INIT -> RTR");
  v = n.rtr_attr(n.qpn(a));
  expect_ok(f.api.mrc_modify_qp(b, &v, Node::kRtrMask, &dest, MRC_QP_MAX_WIMM_DEST),
            "INIT -> RTR (max_wimm_dest 2)");
  mrc_qp_attr req{};
  req.wimm.max_wimm = 2;
  expect_ok(n.to_rts(a, &req, MRC_QP_MAX_WIMM), "RTR -> RTS (max_wimm 2)");
  expect_ok(n.to_rts(b), "RTR -> RTS");
  constexpr int kMsgs = 6;
  std::vector<char> src(8192 * kMsgs, 'i'), dst(8192 * kMsgs, 0);
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  for (int k = 0; k < kMsgs; ++k) {
    ibv_recv_wr r{};
    r.wr_id = static_cast<uint64_t>(k);
    ibv_recv_wr* bad_r = nullptr;
    if (int e = f.api.mrc_post_recv(b, &r, &bad_r)) fail("mrc_post_recv: " + err_name(e));
  }
  auto post = [&](mrc_qp* q, int k) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()) + k * 8192, 8192, ms->lkey};
    ibv_send_wr w{};
    w.wr_id = 100 + static_cast<uint64_t>(k);
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.send_flags = IBV_SEND_SIGNALED;
    w.imm_data = htonl(static_cast<uint32_t>(k));
    w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(md->addr) + k * 8192;
    w.wr.rdma.rkey = md->rkey;
    ibv_send_wr* bad = nullptr;
    if (int e = f.api.mrc_post_send(q, &w, &bad))
      fail("mrc_post_send(WRITE_WITH_IMM " + std::to_string(k) + "): " + err_name(e));
  };
  // Six messages at once, three times max_wimm: the requester paces them, the responder's
  // receives are consumed one per immediate, none lost or repeated.
  for (int k = 0; k < kMsgs; ++k) post(a, k);
  const auto wcs = poll_n(n, 2 * kMsgs, 10);
  std::vector<int> seen(kMsgs, 0);
  int sends = 0;
  for (const ibv_wc& wc : wcs) {
    if (wc.status != IBV_WC_SUCCESS)
      fail("completion status " + std::to_string(wc.status) +
           " with six WRITE_WITH_IMMs on "
           "max_wimm 2 and six receives posted");
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
      const uint32_t k = ntohl(wc.imm_data);
      if (k >= kMsgs) fail("imm_data " + std::to_string(k) + " was never sent");
      ++seen[k];
    } else {
      ++sends;
    }
  }
  for (int k = 0; k < kMsgs; ++k)
    if (seen[k] != 1)
      fail("immediate " + std::to_string(k) + " received " + std::to_string(seen[k]) + " times");
  if (sends != kMsgs) fail(std::to_string(sends) + " send completions of " + std::to_string(kMsgs));
  // No receive posted: MRC has no RNR, so the requester gets an error completion, not a
  // retry without end (and not RNR_RETRY_EXC_ERR).
  post(a, 0);
  const auto err = poll_n(n, 1, 10);
  if (err.empty()) fail("a WRITE_WITH_IMM to a QP with no receive posted: no completion in 10 s");
  if (err[0].status == IBV_WC_SUCCESS)
    fail("a WRITE_WITH_IMM to a QP with no receive posted completed successfully");
  if (err[0].status == IBV_WC_RNR_RETRY_EXC_ERR) fail("IBV_WC_RNR_RETRY_EXC_ERR: MRC has no RNR");
}

void t_ctl_eperm(Fixture& f) {
  Node n(f);
  n.ctx();  // opening the device may need privileges the controller calls do not
  if (!drop_net_admin()) fail("could not drop CAP_NET_ADMIN from the test process (capset)");
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "uet-1.0-nscc";
  errno = 0;
  expect_errno(f.api.mrc_ctl_modify_cc_profile(
                   n.ctx(), 7, &cc, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM) != 0,
               EPERM, "mrc_ctl_modify_cc_profile without CAP_NET_ADMIN");
  mrc_ctl_ev_fmt_profile_attr fa{};
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  expect_errno(
      f.api.mrc_ctl_modify_ev_fmt_profile(n.ctx(), 7, &fa, MRC_CTL_EV_FMT_PROFILE_STATE) != 0,
      EPERM, "mrc_ctl_modify_ev_fmt_profile without CAP_NET_ADMIN");
  errno = 0;
  expect_errno(f.api.mrc_ctl_create_ev_event_cq(n.ctx(), 4, nullptr, nullptr, 0) == nullptr, EPERM,
               "mrc_ctl_create_ev_event_cq without CAP_NET_ADMIN");
  // Capability discovery stays open (mrc_ctl.h: query calls need no privilege).
  mrc_ctl_device_attr d{};
  expect_ok(f.api.mrc_ctl_query_device(n.vctx(), &d), "mrc_ctl_query_device without CAP_NET_ADMIN");
}

void t_ep_probes(Fixture& f) {
  Node n(f);
  if (!(n.ctl_attr().opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE))
    unsupported("opt_attr does not advertise MRC_CTL_OPT_CAP_EP_OP_EV_PROBE");
  if (!f.api.mrc_ctl_ep_batch_send_wait) fail("mrc_ctl_ep_batch_send_wait not found");
  const uint8_t port = first_port(n.ctl_attr());
  constexpr int kReqs = 4;
  mrc_ctl_ep_req reqs[kReqs]{};
  ibv_gid gid{};
  if (f.api.query_gid(n.vctx(), 1, n.sgid_index(), &gid) != 0) fail("ibv_query_gid failed");
  for (int i = 0; i < kReqs; ++i) {
    reqs[i].req_id = static_cast<uint16_t>(40 + i);
    reqs[i].sgid = gid;
    reqs[i].dgid = gid;  // the node probes itself: its own endpoint answers (DestQP 2)
    reqs[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    reqs[i].req_ev = ev_of(0x10001u * static_cast<uint32_t>(i + 1), port);
  }
  mrc_ctl_ep_rsp rsps[kReqs]{};
  int got = 0;
  expect_ok(f.api.mrc_ctl_ep_batch_send_wait(n.ctx(), 0, MRC_CTL_EP_OP_EV_PROBE, reqs, kReqs,
                                             2000000000u, rsps, &got),
            "mrc_ctl_ep_batch_send_wait (4 EV probes to the node itself)");
  if (got != kReqs) fail(std::to_string(got) + " responses to " + std::to_string(kReqs));
  std::vector<int> ids;
  for (int i = 0; i < got; ++i) ids.push_back(rsps[i].req_id);
  std::sort(ids.begin(), ids.end());
  if (ids != std::vector<int>{40, 41, 42, 43}) fail("responses do not match the request ids");
  reqs[1].req_id = 40;  // a repeated id is the caller's error
  errno = 0;
  expect_errno(f.api.mrc_ctl_ep_batch_send_wait(n.ctx(), 0, MRC_CTL_EP_OP_EV_PROBE, reqs, kReqs,
                                                1000000u, rsps, &got) != 0,
               EINVAL, "a batch with a repeated req_id");
}

// ------------------------------------------------------------------ two-node tests

constexpr int kMaxQps = 4;

// What a node tells the other to connect its QPs (a real application's out-of-band exchange).
struct Hello {
  ibv_gid gid;
  uint32_t qpn[kMaxQps];
};

// A buffer the peer may write to.
struct Target {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint32_t len = 0;
};

std::string wc_status_name(int s) {
  const char* n = mrc_wc_status_name(s);
  return n ? n : "status " + std::to_string(s);
}

// Connects `count` QPs of this node to the peer's, both sides in RTS (the walkthrough's order:
// INIT, exchange QPNs and GIDs, RTR, RTS); `m` / `mmask` go with RTR -> RTS.
std::vector<mrc_qp*> connect(Node& n, const Link& l, int count, uint32_t depth,
                             mrc_qp_attr* m = nullptr, int mmask = 0) {
  std::vector<mrc_qp*> qps;
  Hello mine{};
  mine.gid = n.gid();
  for (int i = 0; i < count; ++i) {
    qps.push_back(n.qp(depth));
    expect_ok(n.to_init(qps.back()), "RESET -> INIT");
    mine.qpn[i] = n.qpn(qps.back());
  }
  const Hello peer = l.swap(mine, "QPNs and GIDs");
  for (int i = 0; i < count; ++i)
    expect_ok(n.to_rtr(qps[i], peer.qpn[i], &peer.gid), "INIT -> RTR towards the peer node");
  l.sync("both nodes in RTR");
  for (mrc_qp* q : qps) expect_ok(n.to_rts(q, m, mmask), "RTR -> RTS");
  l.sync("both nodes in RTS");
  return qps;
}

uint64_t addr_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p);
}

ibv_send_wr write_wr(uint64_t wr_id, ibv_sge& sge, const Target& t, uint64_t offset = 0) {
  ibv_send_wr w{};
  w.wr_id = wr_id;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = t.addr + offset;
  w.wr.rdma.rkey = t.rkey;
  return w;
}

void post_one(const Api& api, mrc_qp* q, ibv_send_wr& w, const std::string& what) {
  ibv_send_wr* bad = nullptr;
  if (int e = api.mrc_post_send(q, &w, &bad)) fail("mrc_post_send(" + what + "): " + err_name(e));
}

void post_recvs(const Api& api, mrc_qp* q, uint64_t first_wr_id, int count) {
  for (int k = 0; k < count; ++k) {
    ibv_recv_wr r{};
    r.wr_id = first_wr_id + static_cast<uint64_t>(k);
    ibv_recv_wr* bad = nullptr;
    if (int e = api.mrc_post_recv(q, &r, &bad)) fail("mrc_post_recv: " + err_name(e));
  }
}

// The message-size classes: one byte, just under, at and just over the path MTU (1024: one
// packet, one packet, two packets with a one-byte tail), many packets with a tail, and 1 MiB.
constexpr uint32_t kSizeClasses[] = {1, 1023, 1024, 1025, 65543, 1u << 20};
constexpr size_t kGuard = 64;  // untouched bytes after each class's slot

// The byte at offset i of the message of size class c written by node `node`.
char pattern_byte(int node, size_t c, size_t i) {
  return static_cast<char>((i * 131 + (i >> 9) + c * 17 + static_cast<size_t>(node) * 101) & 0xff);
}

void t2_data(Fixture& f, Link& l) {
  Node n(f);
  std::vector<mrc_qp*> qps = connect(n, l, 1, 16);
  const int me = l.node(), peer = 1 - me;
  std::vector<size_t> off;
  size_t total = 0;
  for (uint32_t len : kSizeClasses) {
    off.push_back(total);
    total += len + kGuard;
  }
  // Destination: every byte the complement of what the peer will write there (a byte not
  // written cannot pass), guards 0xA5.
  std::vector<char> src(total), dst(total, static_cast<char>(0xA5));
  for (size_t c = 0; c < std::size(kSizeClasses); ++c) {
    for (size_t i = 0; i < kSizeClasses[c]; ++i) {
      src[off[c] + i] = pattern_byte(me, c, i);
      dst[off[c] + i] = static_cast<char>(~pattern_byte(peer, c, i));
    }
  }
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  const Target theirs = l.swap(Target{addr_of(dst.data()), md->rkey, 0}, "the peer's buffer");
  for (int writer = 0; writer < 2; ++writer) {
    if (me == writer) {
      std::vector<ibv_sge> sge(std::size(kSizeClasses));
      for (size_t c = 0; c < sge.size(); ++c) {
        sge[c] = {addr_of(src.data()) + off[c], kSizeClasses[c], ms->lkey};
        ibv_send_wr w = write_wr(c, sge[c], theirs, off[c]);
        post_one(f.api, qps[0], w, "WRITE of " + std::to_string(kSizeClasses[c]) + " B");
      }
      const auto wcs = poll_n(n, sge.size(), 20);
      if (wcs.size() != sge.size())
        fail(std::to_string(wcs.size()) + " of " + std::to_string(sge.size()) +
             " WRITEs completed within 20 s");
      for (size_t k = 0; k < wcs.size(); ++k) {
        if (wcs[k].status != IBV_WC_SUCCESS)
          fail("the WRITE of " + std::to_string(kSizeClasses[k]) + " B completed with " +
               wc_status_name(wcs[k].status));
        if (wcs[k].wr_id != k) fail("WRITE completions out of posting order");
      }
      // An RC WRITE's successful completion means the data is in the peer's memory.
      l.sync("the writes completed");
      char ok = 0;
      l.recv(&ok, 1, "the peer's verification", 60);
      if (!ok) return;  // the peer reports what differs
    } else {
      l.sync("the writes completed", 60);
      std::string bad;
      for (size_t c = 0; c < std::size(kSizeClasses) && bad.empty(); ++c) {
        for (size_t i = 0; i < kSizeClasses[c] + kGuard; ++i) {
          const char want =
              i < kSizeClasses[c] ? pattern_byte(peer, c, i) : static_cast<char>(0xA5);
          if (dst[off[c] + i] == want) continue;
          bad = "size class " + std::to_string(kSizeClasses[c]) + " B written by node " +
                (peer == 0 ? "A" : "B") + ": byte " + std::to_string(i) +
                (i < kSizeClasses[c] ? " differs" : " (past the message) was overwritten");
          break;
        }
      }
      const char ok = bad.empty();
      l.send(&ok, 1);
      if (!ok) fail(bad);
    }
  }
}

void t2_imm(Fixture& f, Link& l) {
  Node n(f);
  std::vector<mrc_qp*> qps = connect(n, l, 1, 16);
  constexpr uint32_t kLens[] = {1, 3000, 65636};  // one packet, a tail, more than 64 KiB
  constexpr int kMsgs = std::size(kLens);
  const int me = l.node();
  std::vector<char> src(65636 * 3), dst(65636 * 3, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>(i * 13 + me * 7 + 1);
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  const Target theirs = l.swap(Target{addr_of(dst.data()), md->rkey, 0}, "the peer's buffer");
  const uint32_t my_qpn = n.qpn(qps[0]);
  for (int writer = 0; writer < 2; ++writer) {
    const std::string dir = writer == 0 ? "A -> B" : "B -> A";
    if (me == writer) {
      l.sync("the peer's receives posted");
      std::vector<ibv_sge> sge(kMsgs);
      for (int k = 0; k < kMsgs; ++k) {
        sge[k] = {addr_of(src.data()) + 65636u * k, kLens[k], ms->lkey};
        ibv_send_wr w = write_wr(900 + k, sge[k], theirs, 65636u * k);
        w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        w.imm_data = htonl(0xB0000000u + static_cast<uint32_t>(writer << 8 | k));
        post_one(f.api, qps[0], w, "WRITE_WITH_IMM");
      }
      const auto wcs = poll_n(n, kMsgs, 20);
      if (wcs.size() != kMsgs)
        fail(dir + ": " + std::to_string(wcs.size()) + " of 3 send completions within 20 s");
      for (int k = 0; k < kMsgs; ++k) {
        const ibv_wc& wc = wcs[k];
        if (wc.status != IBV_WC_SUCCESS)
          fail(dir + ": send completion " + wc_status_name(wc.status));
        if (wc.opcode != IBV_WC_RDMA_WRITE)
          fail(dir + ": send completion opcode " + std::to_string(wc.opcode) +
               ", expected IBV_WC_RDMA_WRITE");
        if (wc.wr_id != 900u + k)
          fail(dir + ": send completion " + std::to_string(k) + " has wr_id " +
               std::to_string(wc.wr_id) + ", expected " + std::to_string(900 + k));
        if (wc.qp_num != my_qpn)
          fail(dir + ": a send completion names QP " + std::to_string(wc.qp_num));
      }
      l.sync("the receiver's checks", 60);
    } else {
      post_recvs(f.api, qps[0], 700, kMsgs);
      l.sync("the peer's receives posted");
      const auto wcs = poll_n(n, kMsgs, 20);
      if (wcs.size() != kMsgs)
        fail(dir + ": " + std::to_string(wcs.size()) + " of 3 receive completions within 20 s");
      for (int k = 0; k < kMsgs; ++k) {
        const ibv_wc& wc = wcs[k];
        const std::string what = dir + ": receive completion " + std::to_string(k) + " ";
        if (wc.status != IBV_WC_SUCCESS) fail(what + wc_status_name(wc.status));
        if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM)
          fail(what + "opcode " + std::to_string(wc.opcode) +
               ", expected IBV_WC_RECV_RDMA_WITH_IMM");
        if (!(wc.wc_flags & IBV_WC_WITH_IMM)) fail(what + "without IBV_WC_WITH_IMM");
        const uint32_t want_imm = 0xB0000000u + static_cast<uint32_t>(writer << 8 | k);
        if (ntohl(wc.imm_data) != want_imm)
          fail(what + "imm_data " + std::to_string(ntohl(wc.imm_data)) + ", expected " +
               std::to_string(want_imm));
        if (wc.byte_len != kLens[k])
          fail(what + "byte_len " + std::to_string(wc.byte_len) + ", the message had " +
               std::to_string(kLens[k]));
        if (wc.wr_id != 700u + k)
          fail(what + "wr_id " + std::to_string(wc.wr_id) + ", expected " +
               std::to_string(700 + k));
        if (wc.qp_num != my_qpn) fail(what + "names QP " + std::to_string(wc.qp_num));
        for (uint32_t i = 0; i < kLens[k]; ++i) {
          const size_t at = 65636u * k + i;
          if (dst[at] != static_cast<char>(at * 13 + (1 - me) * 7 + 1))
            fail(what + "data differs at byte " + std::to_string(i));
        }
      }
      l.sync("the receiver's checks", 60);
    }
  }
}

void t2_order(Fixture& f, Link& l) {
  Node n(f);
  constexpr int kQps = 4, kPerQp = 32;
  constexpr uint32_t kLen = 512;
  std::vector<mrc_qp*> qps = connect(n, l, kQps, 64);
  const int me = l.node();
  std::vector<char> src(kLen * kQps * kPerQp, 'o'), dst(kLen * kQps * kPerQp, 0);
  ibv_mr* ms = n.mr(src);
  ibv_mr* md = n.mr(dst);
  const Target theirs = l.swap(Target{addr_of(dst.data()), md->rkey, 0}, "the peer's buffer");
  std::map<uint32_t, int> index_of_qpn;
  for (int q = 0; q < kQps; ++q) index_of_qpn[n.qpn(qps[q])] = q;
  for (int writer = 0; writer < 2; ++writer) {
    const std::string dir = writer == 0 ? "A -> B" : "B -> A";
    std::vector<std::vector<uint64_t>> ids(kQps);
    std::vector<std::vector<uint32_t>> imms(kQps);
    if (me == writer) {
      l.sync("the peer's receives posted");
      ibv_sge sge{addr_of(src.data()), kLen, ms->lkey};
      for (int k = 0; k < kPerQp; ++k) {  // round robin over the QPs, one WR at a time
        for (int q = 0; q < kQps; ++q) {
          const uint64_t slot = static_cast<uint64_t>(q * kPerQp + k);
          ibv_send_wr w = write_wr(slot, sge, theirs, slot * kLen);
          w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
          w.imm_data = htonl(static_cast<uint32_t>(slot));
          post_one(f.api, qps[q], w, "WRITE_WITH_IMM");
        }
      }
    } else {
      for (int q = 0; q < kQps; ++q)
        post_recvs(f.api, qps[q], static_cast<uint64_t>(q * kPerQp), kPerQp);
      l.sync("the peer's receives posted");
    }
    const auto wcs = poll_n(n, kQps * kPerQp, 30);
    if (wcs.size() != kQps * kPerQp)
      fail(dir + ": " + std::to_string(wcs.size()) + " of " + std::to_string(kQps * kPerQp) +
           " completions within 30 s");
    for (const ibv_wc& wc : wcs) {
      if (wc.status != IBV_WC_SUCCESS)
        fail(dir + ": a completion with " + wc_status_name(wc.status));
      const auto it = index_of_qpn.find(wc.qp_num);
      if (it == index_of_qpn.end())
        fail(dir + ": a completion names QP " + std::to_string(wc.qp_num));
      ids[it->second].push_back(wc.wr_id);
      if (me != writer) imms[it->second].push_back(ntohl(wc.imm_data));
    }
    for (int q = 0; q < kQps; ++q) {
      for (int k = 0; k < kPerQp; ++k) {
        const uint64_t want = static_cast<uint64_t>(q * kPerQp + k);
        if (ids[q].size() != kPerQp || ids[q][k] != want)
          fail(dir + ": QP " + std::to_string(q) + ": " + (me == writer ? "send" : "receive") +
               " completion " + std::to_string(k) + " has wr_id " +
               (k < static_cast<int>(ids[q].size()) ? std::to_string(ids[q][k]) : "none") +
               ", expected " + std::to_string(want) + " (a QP completes in posting order)");
        if (me != writer && imms[q][k] != want)
          fail(dir + ": QP " + std::to_string(q) + ": receive completion " + std::to_string(k) +
               " carries imm_data " + std::to_string(imms[q][k]) + ", expected " +
               std::to_string(want) + " (immediates complete in message order)");
      }
    }
    l.sync("both nodes' checks", 60);
  }
}

// Node B vanishes (its process ends) after both QPs are in RTS; node A's WRITE must complete
// with IBV_WC_RETRY_EXC_ERR, not before the configured retries can have run.
void t2_retry_exceeded(Fixture& f, Link& l) {
  Node n(f);
  mrc_qp_attr m{};
  m.timeout = 16;  // 1.024 us * 2^16 = 67 ms
  m.retry.linear_cnt = 2;
  m.retry.exp_cnt = 2;
  std::vector<mrc_qp*> qps = connect(n, l, 1, 16, &m, MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT);
  if (l.node() == 1) return;  // node B vanishes: its process and device end
  if (!l.wait_gone(20)) fail("the peer node did not end");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<char> src(64, 'r');
  ibv_mr* ms = n.mr(src);
  ibv_sge sge{addr_of(src.data()), 64, ms->lkey};
  // Any address and rkey: nothing answers.
  ibv_send_wr w = write_wr(1, sge, Target{0x10000, 0x1234, 0});
  const auto t0 = std::chrono::steady_clock::now();
  post_one(f.api, qps[0], w, "WRITE to a vanished peer");
  const double t_ms = 1.024e-3 * (1u << m.timeout);
  // Initial timeout, linear retries at the timeout, exponential ones doubling: the least time
  // the configured retries take is (1 + linear_cnt) timeouts; allow generously above the total.
  const double min_ms = (1 + m.retry.linear_cnt) * t_ms;
  const double total_ms = (1 + m.retry.linear_cnt) * t_ms + t_ms * ((2u << m.retry.exp_cnt) - 2);
  const auto wcs = poll_n(n, 1, 10 * total_ms / 1000 + 5);
  const double took_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (wcs.empty())
    fail("no completion " + std::to_string(static_cast<int>(took_ms)) +
         " ms after the WRITE to a vanished peer");
  if (wcs[0].status != IBV_WC_RETRY_EXC_ERR)
    fail("the WRITE to a vanished peer completed with " + wc_status_name(wcs[0].status) +
         ", expected IBV_WC_RETRY_EXC_ERR");
  if (wcs[0].wr_id != 1) fail("the error completion has wr_id " + std::to_string(wcs[0].wr_id));
  if (took_ms < min_ms)
    fail("IBV_WC_RETRY_EXC_ERR after " + std::to_string(static_cast<int>(took_ms)) +
         " ms, before the configured retries (timeout 16, linear_cnt 2: at least " +
         std::to_string(static_cast<int>(min_ms)) + " ms)");
}

// Node A writes 64 bytes to each target node B's `make` sets up in `mem`, each on its own QP
// (an access error ends a QP); each must complete with IBV_WC_REM_ACCESS_ERR and node B's memory
// must stay as it was.
void refused_writes(Fixture& f, Link& l, const std::vector<std::string>& what,
                    std::vector<Target> (*make)(Node&, std::vector<char>&)) {
  Node n(f);
  const int count = static_cast<int>(what.size());
  std::vector<mrc_qp*> qps = connect(n, l, count, 16);
  std::vector<char> mem(8192, static_cast<char>(0xA5));
  std::array<Target, kMaxQps> t{};
  if (l.node() == 1) {
    const std::vector<Target> v = make(n, mem);
    std::copy(v.begin(), v.end(), t.begin());
  }
  t = l.swap(t, "the targets");
  if (l.node() == 0) {
    std::vector<char> src(64, 'w');
    ibv_mr* ms = n.mr(src);
    for (int i = 0; i < count; ++i) {
      ibv_sge sge{addr_of(src.data()), t[i].len, ms->lkey};
      ibv_send_wr w = write_wr(static_cast<uint64_t>(i), sge, t[i]);
      post_one(f.api, qps[i], w, what[i]);
      const auto wcs = poll_n(n, 1, 20);
      if (wcs.empty()) fail(what[i] + ": no completion within 20 s");
      if (wcs[0].status != IBV_WC_REM_ACCESS_ERR)
        fail(what[i] + ": completed with " + wc_status_name(wcs[0].status) +
             ", expected IBV_WC_REM_ACCESS_ERR");
    }
    l.sync("the writes are done");
  } else {
    l.sync("the writes are done", 60);
    for (size_t i = 0; i < mem.size(); ++i)
      if (mem[i] != static_cast<char>(0xA5))
        fail("a refused WRITE changed byte " + std::to_string(i) + " of node B's memory");
  }
}

void t2_wrong_rkey(Fixture& f, Link& l) {
  refused_writes(
      f, l, {"a WRITE with the rkey of a deregistered MR", "a WRITE with an rkey never issued"},
      [](Node& n, std::vector<char>& mem) {
        const Api& api = n.api();
        ibv_mr* gone = need(
            api.reg_mr(n.pd(), mem.data(), 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            "ibv_reg_mr");
        const uint32_t stale = gone->rkey;
        if (api.dereg_mr(gone) != 0) fail("ibv_dereg_mr failed");
        ibv_mr* live = n.mr(mem, 0);
        uint32_t never = live->rkey ^ 0x5A5A5A5Au;
        if (never == stale) never ^= 1;
        return std::vector<Target>{{addr_of(mem.data()), stale, 64},
                                   {addr_of(mem.data()), never, 64}};
      });
}

void t2_va_outside(Fixture& f, Link& l) {
  refused_writes(f, l, {"a WRITE just past the MR's end", "a WRITE across the MR's end"},
                 [](Node& n, std::vector<char>& mem) {
                   ibv_mr* m = n.mr(mem, 4096);  // the first half of the 8 KiB only
                   return std::vector<Target>{{addr_of(mem.data()) + 4096, m->rkey, 64},
                                              {addr_of(mem.data()) + 4096 - 32, m->rkey, 64}};
                 });
}

void t2_no_remote_write(Fixture& f, Link& l) {
  refused_writes(f, l, {"a WRITE to an MR without IBV_ACCESS_REMOTE_WRITE"},
                 [](Node& n, std::vector<char>& mem) {
                   ibv_mr* m = n.mr(mem, 0, IBV_ACCESS_LOCAL_WRITE);
                   return std::vector<Target>{{addr_of(mem.data()), m->rkey, 64}};
                 });
}

// clang-format off
const TestDef kTests[] = {
  {{"MRC-API-001", "versions", "mrc_query_version reports a 1.x current version at or above the last supported one (also for the vendor API) and accepts NULL pointers.", "API mrc.h (mrc_query_version)"}, t_version},
  {{"MRC-API-002", "versions", "mrc_ctl_query_version reports a 1.x current version at or above the last supported one and accepts NULL pointers.", "API mrc_ctl.h (mrc_ctl_query_version)"}, t_ctl_version},
  {{"MRC-API-003", "versions", "mrc_create_context refuses an API version newer than the library's with ENOTSUP and accepts NULL attributes and its current version.", "API mrc.h (mrc_create_context, mrc_context_attr)"}, t_context_version},
  {{"MRC-API-004", "device", "mrc_query_device marks the MRC device supported with a non-zero protocol mask, max_wimm(_dest) and max_mpr, and refuses a NULL attr with EINVAL.", "API mrc.h (mrc_query_device, mrc_device_attr)"}, t_query_device},
  {{"MRC-API-005", "device", "mrc_query_device_ex (API 1.0.1) answers as mrc_query_device; unsupported in a 1.0.0 library.", "API mrc.h (mrc_query_device_ex)"}, t_query_device_ex},
  {{"MRC-API-006", "device", "mrc_ctl_query_device(_ex) reports 1-based ports, EV modes and formats, and a NULL-terminated CC algorithm list.", "API mrc_ctl.h (mrc_ctl_device_attr)"}, t_ctl_query_device},
  {{"MRC-API-007", "objects", "mrc_create_cq refuses cqe 0 with EINVAL; a new CQ polls empty and is destroyed.", "API mrc.h (mrc_create_cq, mrc_poll_cq)"}, t_cq_lifecycle},
  {{"MRC-API-008", "objects", "mrc_destroy_context fails with EBUSY while a CQ of the context exists.", "API mrc.h (mrc_destroy_context)"}, t_context_busy},
  {{"MRC-API-009", "objects", "mrc_destroy_cq fails with EBUSY while a QP uses the CQ, mrc_destroy_comp_channel while a CQ uses the channel.", "API mrc.h (mrc_destroy_cq, completion channels)"}, t_cq_channel_busy},
  {{"MRC-API-010", "objects", "QP hints are created, queried and modified; mrc_destroy_qp_hint fails with EBUSY while a QP names the hint.", "API mrc.h (mrc_qp_hint, MRC_QP_HINT)"}, t_qp_hint},
  {{"MRC-API-011", "objects", "mrc_create_qp refuses SEND or READ in send_ops_flags, a NULL PD and a protocol version the device does not report, with EINVAL.", "API mrc.h (mrc_qp_init_attr)"}, t_create_qp_checks},
  {{"MRC-API-012", "limits", "mrc_create_qp accepts max_send_sge = ibv max_sge and refuses max_sge + 1 and max_send_wr = max_qp_wr + 1 with EINVAL.", "API mrc.h (mrc_qp_init_attr.cap) + verbs ibv_device_attr"}, t_qp_limits},
  {{"MRC-API-013", "qp-states", "Every legal transition succeeds and mrc_query_qp reads it back: RESET->INIT->INIT->RTR->RTS->RTS, RTS->ERR->RESET->INIT->RESET, RTR->ERR.", "API mrc.h (mrc_modify_qp state changes)"}, t_qp_legal},
  {{"MRC-API-014", "qp-states", "Illegal transitions (RESET->RTR/RTS, INIT->RTS, RTR->INIT, RTS->RTR/INIT, ERR->RTS/RTR) fail with EINVAL and leave the state unchanged.", "API mrc.h (mrc_modify_qp state changes)"}, t_qp_illegal},
  {{"MRC-API-015", "qp-states", "INIT->RTR without any of IBV_QP_AV, DEST_QPN, RQ_PSN, PATH_MTU and RTR->RTS without IBV_QP_SQ_PSN fail with EINVAL.", "API mrc.h (verbs attributes of an RC QP)"}, t_qp_required},
  {{"MRC-API-016", "qp-states", "An attribute an RC QP does not have (IBV_QP_QKEY) or an MRC attribute of another transition (EV profile id at RTS) is refused with EINVAL.", "API mrc.h (mrc_qp_attr_mask per transition)"}, t_qp_not_rc},
  {{"MRC-API-017", "qp-states", "Requester attributes MRC_QP_MPR / MRC_QP_MAX_WIMM at INIT->RTR: reported, not judged (mrc.h lists them for RTS, the walkthrough sets them at RTR).", "API mrc.h (mrc_qp_attr_mask) vs walkthrough mrc_qp.md"}, t_qp_requester_attrs_at_rtr},
  {{"MRC-API-018", "qp-states", "Verbs attributes mrc.h declares unsupported (IBV_QP_PORT, TIMEOUT, RETRY_CNT, RNR_RETRY, MIN_RNR_TIMER, MAX_*_RD_ATOMIC): accepted or refused is reported, not judged.", "API mrc.h (mrc_modify_qp) vs examples/benchmark"}, t_qp_unsupported_verbs},
  {{"MRC-API-019", "qp-states", "Transitions without the MRC attributes mrc.h lists as required: accepted (defaults) or refused is reported, not judged.", "API mrc.h (required attributes) vs examples/benchmark"}, t_qp_mrc_required_left_out},
  {{"MRC-API-020", "qp-states", "mrc_query_qp reads back dest_qp_num, path_mtu, MRC_QP_TIMEOUT and MRC_QP_RETRY_CNT as set.", "API mrc.h (mrc_query_qp)"}, t_qp_query_back},
  {{"MRC-API-021", "ranges", "MRC_QP_TIMEOUT 24 is accepted; 25, 31 and 255 are refused with EINVAL.", "API mrc.h (mrc_qp_attr.timeout: at most 24)"}, t_timeout_range},
  {{"MRC-API-022", "ranges", "MRC_QP_RETRY_CNT linear_cnt 7 / exp_cnt 25 are accepted; linear_cnt 8 and exp_cnt 26 are refused with EINVAL.", "API mrc.h (mrc_qp_attr.retry)"}, t_retry_range},
  {{"MRC-API-023", "ranges", "MRC_QP_MAX_WIMM up to the device max_wimm is accepted, one more refused with EINVAL; MRC_QP_MPR above max_mpr is refused with EINVAL.", "API mrc.h (mrc_device_attr wimm_attr, mpr_attr)"}, t_wimm_mpr_limits},
  {{"MRC-API-024", "post-send", "RDMA WRITE and WRITE_WITH_IMM post on an RTS QP and complete successfully with the data in place (two QPs of one node).", "API mrc.h (mrc_post_send, mrc_poll_cq)"}, t_post_writes},
  {{"MRC-API-025", "post-send", "mrc_post_send refuses RDMA READ with EINVAL and *bad_wr.", "API mrc.h (mrc_post_send)"}, t_refuse_read},
  {{"MRC-API-026", "post-send", "mrc_post_send refuses SEND and SEND_WITH_IMM with EINVAL and *bad_wr.", "API mrc.h (mrc_post_send)"}, t_refuse_send},
  {{"MRC-API-027", "post-send", "mrc_post_send refuses atomics (CMP_AND_SWP, FETCH_AND_ADD) with EINVAL and *bad_wr.", "API mrc.h (mrc_post_send)"}, t_refuse_atomics},
  {{"MRC-API-028", "limits", "mrc_post_send refuses a WR with more SGEs than the QP's max_send_sge with EINVAL and *bad_wr.", "API mrc.h (ibv_post_send semantics)"}, t_post_sge_limit},
  {{"MRC-API-029", "post-send", "mrc_post_send on a QP not yet in RTS fails with EINVAL.", "API mrc.h (ibv_post_send semantics)"}, t_post_before_rts},
  {{"MRC-API-030", "profiles", "EV format profile state machine: INIT->ONLINE and OFFLINE without MODE or ONLINE without fields fail with EINVAL; INIT->OFFLINE->ONLINE->OFFLINE->INIT.", "API mrc_ctl.h (EV format profiles) + walkthrough mrc_ctl_exp_ev.md"}, t_ev_fmt_profile},
  {{"MRC-API-031", "profiles", "An explicit EV profile cannot go ONLINE unpopulated (EINVAL); populated by REPLACE_EV it does, and QUERY_EV_ARRAY returns E2BIG with the count, then the EVs.", "API mrc_ctl.h (EV profiles) + walkthrough mrc_ctl_exp_ev.md"}, t_ev_profile_explicit},
  {{"MRC-API-032", "profiles", "An ONLINE EV profile a QP uses, and its EV format profile, cannot go OFFLINE (EBUSY); without users it can; a QP cannot name a missing profile.", "API mrc_ctl.h (profile state machine)"}, t_profile_busy},
  {{"MRC-API-033", "profiles", "CC profile: an unlisted algorithm is EINVAL, ONLINE needs CONFIG (EINVAL), and an ONLINE profile a QP uses cannot go OFFLINE (EBUSY).", "API mrc_ctl.h (CC profiles)"}, t_cc_profile},
  {{"MRC-API-034", "ev-state", "MODIFY_EV_STATE sets DENIED and ASSUMED_BAD, QUERY_EV_STATE reads them (others GOOD), DENIED is lifted, and an EV not in the profile is ENOENT.", "API mrc_ctl.h (EV operations) + walkthrough mrc_ctl_ev_events.md"}, t_ev_state},
  {{"MRC-API-035", "ev-state", "With MRC_CTL_OPT_CAP_EV_EVENT, an EV of a used profile going ASSUMED_BAD yields an EV event naming the profile and EV; unsupported otherwise.", "API mrc_ctl.h (EV events) + walkthrough mrc_ctl_ev_events.md"}, t_ev_events},
  {{"MRC-API-036", "capabilities", "With MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE, an ONLINE EV profile's MIN_ACTIVE can change; unsupported otherwise.", "API mrc_ctl.h (mrc_ctl_attr_opt)"}, t_modify_online},
  {{"MRC-API-037", "capabilities", "With MRC_DEVICE_CAP_DYNAMIC_MPR, a QP accepts MRC_QP_CAP_DYNAMIC_MPR at RTR; unsupported otherwise.", "API mrc.h (mrc_device_cap, mrc_qp_cap)"}, t_dynamic_mpr},
  {{"MRC-API-038", "post-send", "WRITE_WITH_IMM completions: the receive completion has IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM, the posted imm_data, byte_len = message length, the receive's wr_id and QP; send and receive completions come in posting order.", "API mrc.h (mrc_post_send, mrc_post_recv, ibv_wc) + walkthrough mrc_qp.md"}, t_imm_completion_fields},
  {{"MRC-API-039", "objects", "A CQ that receives more completions than its cqe raises IBV_EVENT_CQ_ERR naming the CQ on the context's async events.", "API mrc.h (mrc_create_cq, mrc_get_async_event) + verbs CQ overrun"}, t_cq_overflow},
  {{"MRC-API-040", "limits", "With max_wimm 2, max_wimm_dest 2 and six receives posted, six WRITE_WITH_IMMs complete and each immediate arrives exactly once; one more with no receive posted completes with an error (MRC has no RNR), not RNR_RETRY_EXC_ERR and not a hang.", "API mrc.h (mrc_qp_attr wimm: max_wimm, max_wimm_dest)"}, t_imm_accounting},
  {{"MRC-API-041", "privileges", "Without CAP_NET_ADMIN, mrc_ctl_modify_cc_profile, mrc_ctl_modify_ev_fmt_profile and mrc_ctl_create_ev_event_cq fail with EPERM; mrc_ctl_query_device still answers.", "API mrc_ctl.h (CAP_NET_ADMIN)"}, t_ctl_eperm},
  {{"MRC-API-042", "capabilities", "With MRC_CTL_OPT_CAP_EP_OP_EV_PROBE, a batch of EV probes to the node's own GID gets one response per req_id; a repeated req_id is EINVAL; unsupported otherwise.", "API mrc_ctl.h (mrc_ctl_ep_batch_send_wait) + walkthrough mrc_ctl_ev_probes.md"}, t_ep_probes},
  {{"MRC-API-043", "two-node", "Between two nodes, RDMA WRITEs of every message-size class (1, 1023, 1024, 1025, 65543 B, 1 MiB) complete in posting order and the data arrives byte for byte, nothing past the message written, in both directions.", "API mrc.h (mrc_post_send, ibv_send_wr) + walkthrough mrc_qp.md"}, nullptr, t2_data},
  {{"MRC-API-044", "two-node", "Between two nodes, WRITE_WITH_IMM of 1, 3000 and 65636 B: the sender's completions have IBV_WC_RDMA_WRITE and the posted wr_id; the receiver's have IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_WITH_IMM, the imm_data, byte_len = message length, the receive's wr_id and QP, the data in place; both directions.", "API mrc.h (mrc_post_send, mrc_post_recv, ibv_wc) + walkthrough mrc_qp.md"}, nullptr, t2_imm},
  {{"MRC-API-045", "two-node", "Between two nodes, 32 WRITE_WITH_IMMs on each of 4 QPs posted round robin: on every QP the send completions, the receive completions and their imm_data come in posting order; both directions.", "API mrc.h (RC completion order, mrc_poll_cq) + walkthrough mrc_qp.md"}, nullptr, t2_order},
  {{"MRC-API-046", "two-node", "When the peer vanishes, a WRITE completes with IBV_WC_RETRY_EXC_ERR and its wr_id, not before the configured MRC_QP_TIMEOUT and MRC_QP_RETRY_CNT retries can have run (timeout 16, linear_cnt 2, exp_cnt 2).", "API mrc.h (mrc_qp_attr timeout, retry; IBV_WC_RETRY_EXC_ERR)"}, nullptr, t2_retry_exceeded},
  {{"MRC-API-047", "two-node", "A WRITE with a wrong rkey (of a deregistered MR; never issued) completes with IBV_WC_REM_ACCESS_ERR and writes nothing.", "API mrc.h (mrc_post_send) + verbs remote access errors"}, nullptr, t2_wrong_rkey},
  {{"MRC-API-048", "two-node", "A WRITE to a VA outside the MR (just past its end; across its end) completes with IBV_WC_REM_ACCESS_ERR and writes nothing.", "API mrc.h (mrc_post_send) + verbs remote access errors"}, nullptr, t2_va_outside},
  {{"MRC-API-049", "two-node", "A WRITE to an MR registered without IBV_ACCESS_REMOTE_WRITE completes with IBV_WC_REM_ACCESS_ERR and writes nothing.", "API mrc.h (mrc_post_send) + verbs remote access errors"}, nullptr, t2_no_remote_write},
};
// clang-format on

}  // namespace

std::span<const TestDef> test_defs() {
  return kTests;
}

}  // namespace mrc::api
