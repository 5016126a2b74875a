// lib_mrc.so through its C API, in loopback mode (MRC_SOFT_IO=loopback: no wire, the device's
// frames go back to its own engine, so two QPs of one process talk to each other): the verbs
// device, every mrc.h function on its success and error paths, the QP state table, the data
// path with its memory protection, and mrc_ctl.h (profiles, EV states and events, probes,
// ports, EPERM without CAP_NET_ADMIN).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mrc.h"
#include "mrc_ctl.h"

namespace {

bool have_net_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32))) != 0;
}

// Drops CAP_NET_ADMIN from this process's effective set (for a forked child).
void drop_net_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) _exit(90);
  data[CAP_NET_ADMIN / 32].effective &= ~(1u << (CAP_NET_ADMIN % 32));
  if (syscall(SYS_capset, &hdr, data) != 0) _exit(91);
}

class Provider : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("MRC_SOFT_IO", "loopback", 1); }

  void SetUp() override {
    int n = 0;
    list_ = ibv_get_device_list(&n);
    ASSERT_NE(list_, nullptr);
    ASSERT_GE(n, 1);
    ASSERT_STREQ(ibv_get_device_name(list_[0]), "softmrc0");
    vctx_ = ibv_open_device(list_[0]);
    ASSERT_NE(vctx_, nullptr) << std::strerror(errno);
    mrc_context_attr ca{MRC_API_CURRENT_VERSION, 0};
    ctx_ = mrc_create_context(vctx_, &ca);
    ASSERT_NE(ctx_, nullptr);
    pd_ = ibv_alloc_pd(vctx_);
    ASSERT_NE(pd_, nullptr);
    cq_ = mrc_create_cq(ctx_, 256, nullptr, nullptr, 0);
    ASSERT_NE(cq_, nullptr);
  }

  void TearDown() override {
    for (mrc_qp* q : qps_) EXPECT_EQ(mrc_destroy_qp(q), 0);
    for (ibv_mr* m : mrs_) EXPECT_EQ(ibv_dereg_mr(m), 0);
    if (cq_) {
      EXPECT_EQ(mrc_destroy_cq(cq_), 0);
    }
    if (pd_) {
      EXPECT_EQ(ibv_dealloc_pd(pd_), 0);
    }
    if (ctx_) {
      EXPECT_EQ(mrc_destroy_context(ctx_), 0);
    }
    if (vctx_) {
      EXPECT_EQ(ibv_close_device(vctx_), 0);
    }
    if (list_) ibv_free_device_list(list_);
  }

  mrc_qp* make_qp(ibv_pd* pd = nullptr) {
    mrc_qp_init_attr a{};
    a.send_cq = cq_;
    a.recv_cq = cq_;
    a.pd = pd ? pd : pd_;
    a.cap.max_send_wr = 64;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    mrc_qp* q = mrc_create_qp(ctx_, &a);
    if (q) qps_.push_back(q);
    return q;
  }

  ibv_mr* reg(void* p, size_t n, int access, ibv_pd* pd = nullptr) {
    ibv_mr* m = ibv_reg_mr(pd ? pd : pd_, p, n, access);
    if (m) mrs_.push_back(m);
    return m;
  }

  int to_init(mrc_qp* q, int extra_vmask = 0, mrc_qp_attr* m = nullptr, int mmask = 0) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_INIT;
    v.port_num = 1;
    v.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    mrc_qp_attr none{};
    return mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | extra_vmask, m ? m : &none,
                         mmask);
  }

  int to_rtr(mrc_qp* q, uint32_t dest_qpn, int sgid_index = 3) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = IBV_MTU_1024;
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    v.ah_attr.grh.sgid_index = static_cast<uint8_t>(sgid_index);
    EXPECT_EQ(ibv_query_gid(vctx_, 1, 3, &v.ah_attr.grh.dgid), 0);  // the node talks to itself
    v.dest_qp_num = dest_qpn;
    v.rq_psn = 100;
    return mrc_modify_qp(
        q, &v, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
        nullptr, 0);
  }

  int to_rts(mrc_qp* q) {
    ibv_qp_attr v{};
    v.qp_state = IBV_QPS_RTS;
    v.sq_psn = 100;
    v.timeout = 7;     // ignored: mrc.h says IBV_QP_TIMEOUT is not supported
    v.retry_cnt = 14;  // ignored, and not even a valid verbs value
    return mrc_modify_qp(q, &v, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT,
                         nullptr, 0);
  }

  // Two QPs of the context connected to each other, in RTS.
  void connected_pair(mrc_qp*& a, mrc_qp*& b) {
    a = make_qp();
    b = make_qp();
    ASSERT_TRUE(a && b);
    uint32_t qa = 0, qb = 0;
    ASSERT_EQ(mrc_get_qpn(a, &qa), 0);
    ASSERT_EQ(mrc_get_qpn(b, &qb), 0);
    ASSERT_EQ(to_init(a), 0);
    ASSERT_EQ(to_init(b), 0);
    ASSERT_EQ(to_rtr(a, qb), 0);
    ASSERT_EQ(to_rtr(b, qa), 0);
    ASSERT_EQ(to_rts(a), 0);
    ASSERT_EQ(to_rts(b), 0);
  }

  std::vector<ibv_wc> poll_until(size_t n, int max_polls = 200000) {
    std::vector<ibv_wc> out;
    ibv_wc wc[8];
    for (int i = 0; i < max_polls && out.size() < n; ++i) {
      const int k = mrc_poll_cq(cq_, 8, wc);
      EXPECT_GE(k, 0);
      for (int j = 0; j < k; ++j) out.push_back(wc[j]);
    }
    return out;
  }

  ibv_device** list_ = nullptr;
  ibv_context* vctx_ = nullptr;
  mrc_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  mrc_cq* cq_ = nullptr;
  std::vector<mrc_qp*> qps_;
  std::vector<ibv_mr*> mrs_;
};

// ---- versions, device, verbs

TEST_F(Provider, VersionsAndContextNegotiation) {
  uint32_t cur = 0, last = 1, vcur = 0, vlast = 1;
  mrc_query_version(&cur, &last, &vcur, &vlast);
  EXPECT_EQ(cur, static_cast<uint32_t>(MRC_API_VER(1, 0, 1)));
  EXPECT_EQ(last, 0u);
  EXPECT_EQ(vcur, static_cast<uint32_t>(MRC_API_VER(1, 0, 0)));
  EXPECT_EQ(vlast, 0u);
  mrc_query_version(nullptr, nullptr, nullptr, nullptr);  // every pointer may be NULL
  mrc_ctl_query_version(&cur, &last, &vcur, &vlast);
  EXPECT_EQ(cur, static_cast<uint32_t>(MRC_CTL_API_VER(1, 0, 1)));
  // A newer API or vendor API than the library's is refused; NULL, 0 and LATEST are not.
  mrc_context_attr newer{static_cast<uint32_t>(MRC_API_VER(1, 1, 0)), 0};
  errno = 0;
  EXPECT_EQ(mrc_create_context(vctx_, &newer), nullptr);
  EXPECT_EQ(errno, ENOTSUP);
  mrc_context_attr vendor_newer{0, static_cast<uint32_t>(MRC_API_VER(2, 0, 0))};
  EXPECT_EQ(mrc_create_context(vctx_, &vendor_newer), nullptr);
  EXPECT_EQ(errno, ENOTSUP);
  mrc_context_attr latest{static_cast<uint32_t>(MRC_API_VER_LATEST), 0};
  for (mrc_context_attr* a : {static_cast<mrc_context_attr*>(nullptr), &latest}) {
    mrc_context* c = mrc_create_context(vctx_, a);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(mrc_destroy_context(c), 0);
  }
  EXPECT_EQ(mrc_create_context(nullptr, nullptr), nullptr);
  EXPECT_EQ(errno, ENODEV);
}

TEST_F(Provider, DeviceQueryPortAndGidTable) {
  mrc_device_attr a{};
  int supported = 0;
  ASSERT_EQ(mrc_query_device(vctx_, &a, &supported), 0);
  EXPECT_NE(supported, 0);
  EXPECT_EQ(a.mrc_protocol_version, static_cast<uint32_t>(MRC_PROTOCOL_VERSION_1));
  EXPECT_GT(a.wimm_attr.max_wimm, 0);
  EXPECT_GT(a.mpr_attr.max_mpr, 0);
  EXPECT_EQ(a.cap & MRC_DEVICE_CAP_TRIM_NACK, static_cast<uint32_t>(MRC_DEVICE_CAP_TRIM_NACK));
  mrc_device_attr b{};
  ASSERT_EQ(mrc_query_device_ex(vctx_, ctx_, &b, &supported), 0);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_EQ(mrc_query_device(vctx_, nullptr, &supported), -1);
  EXPECT_EQ(errno, EINVAL);

  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(vctx_, &da), 0);
  EXPECT_EQ(da.phys_port_cnt, 2);  // loopback: two planes
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(vctx_, 1, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
  EXPECT_EQ(pa.gid_tbl_len, 4);
  EXPECT_NE(ibv_query_port(vctx_, 3, &pa), 0);
  // Link-local then the global address, each as RoCE v1 and v2: index 3 is the RoCEv2 GID.
  ibv_gid g{};
  ASSERT_EQ(ibv_query_gid(vctx_, 1, 3, &g), 0);
  char text[64];
  ASSERT_NE(inet_ntop(AF_INET6, g.raw, text, sizeof text), nullptr);
  EXPECT_STREQ(text, "fd00::1");
  ASSERT_EQ(ibv_query_gid(vctx_, 1, 0, &g), 0);
  EXPECT_EQ(g.raw[0], 0xFE);
  EXPECT_EQ(ibv_query_gid(vctx_, 1, 4, &g), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_query_gid(vctx_, 9, 0, &g), -1);
}

TEST_F(Provider, MemoryRegistration) {
  std::vector<char> buf(4096);
  // Relaxed ordering is an optional hint (the OCP benchmark sets it).
  ibv_mr* m = reg(buf.data(), buf.size(),
                  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->addr, buf.data());
  EXPECT_EQ(m->length, buf.size());
  EXPECT_EQ(m->pd, pd_);
  EXPECT_NE(m->lkey, 0u);
  EXPECT_NE(m->rkey, 0u);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_MW_BIND), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // verbs: remote write needs local write.
  EXPECT_EQ(ibv_reg_mr(pd_, buf.data(), buf.size(), IBV_ACCESS_REMOTE_WRITE), nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd_), EBUSY);  // a PD with MRs stays
}

// ---- contexts, channels, CQs, hints

TEST_F(Provider, ObjectLifetimesAndErrors) {
  EXPECT_EQ(mrc_destroy_context(ctx_), -1);  // the CQ is still there
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(mrc_create_cq(ctx_, 0, nullptr, nullptr, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_create_cq(ctx_, 16, nullptr, nullptr, 1), nullptr);  // one vector
  EXPECT_EQ(mrc_poll_cq(cq_, -1, nullptr), -1);
  mrc_comp_channel* ch = nullptr;
  ASSERT_EQ(mrc_create_comp_channel(ctx_, &ch), 0);
  int fd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(ch, &fd), 0);
  EXPECT_GE(fd, 0);
  mrc_cq* cq2 = mrc_create_cq(ctx_, 16, this, ch, 0);
  ASSERT_NE(cq2, nullptr);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), -1);  // a CQ uses it
  EXPECT_EQ(errno, EBUSY);
  EXPECT_EQ(mrc_req_notify_cq(cq_, 0), -1);  // cq_ has no channel
  EXPECT_EQ(mrc_destroy_cq(cq2), 0);
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);

  mrc_qp_hint_init_attr hi{};
  hi.attr.num_qps_per_peer = 2;
  hi.attr.num_send_peers = 8;
  hi.attr.num_remote_recv_peers = 4;
  mrc_qp_hint* h = mrc_create_qp_hint(ctx_, &hi);
  ASSERT_NE(h, nullptr);
  mrc_qp_hint_attr q{};
  ASSERT_EQ(mrc_query_qp_hint(h, &q, MRC_QP_HINT_NUM_SEND_PEERS), 0);
  EXPECT_EQ(q.num_send_peers, 8);
  EXPECT_EQ(q.num_qps_per_peer, 0);  // not asked for
  mrc_qp_hint_attr mod{};
  mod.num_qps_per_peer = 3;
  ASSERT_EQ(mrc_modify_qp_hint(h, &mod, MRC_QP_HINT_NUM_QPS_PER_PEER), 0);
  ASSERT_EQ(mrc_query_qp_hint(h, &q, MRC_QP_HINT_NUM_QPS_PER_PEER), 0);
  EXPECT_EQ(q.num_qps_per_peer, 3);
  mod.num_send_peers = -1;
  EXPECT_EQ(mrc_modify_qp_hint(h, &mod, MRC_QP_HINT_NUM_SEND_PEERS), -1);
  EXPECT_EQ(mrc_modify_qp_hint(h, &mod, 1 << 20), -1);
  mrc_qp* qp = make_qp();
  ASSERT_NE(qp, nullptr);
  mrc_qp_attr m{};
  m.qp_hint = h;
  ASSERT_EQ(to_init(qp, 0, &m, MRC_QP_HINT), 0);
  EXPECT_EQ(mrc_destroy_qp_hint(h), -1);  // the QP names it
  EXPECT_EQ(errno, EBUSY);
  mrc_qp_attr got{};
  ASSERT_EQ(mrc_query_qp(qp, nullptr, 0, &got, MRC_QP_HINT, nullptr), 0);
  EXPECT_EQ(got.qp_hint, h);
  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  qps_.clear();
  EXPECT_EQ(mrc_destroy_qp_hint(h), 0);
}

TEST_F(Provider, CreateQpChecksItsArguments) {
  mrc_qp_init_attr a{};
  a.send_cq = cq_;
  a.recv_cq = cq_;
  a.pd = pd_;
  a.cap.max_send_wr = 1;
  a.protocol_version = static_cast<mrc_protocol_version>(4);
  EXPECT_EQ(mrc_create_qp(ctx_, &a), nullptr);
  a.protocol_version = MRC_PROTOCOL_VERSION_1;
  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
  EXPECT_EQ(mrc_create_qp(ctx_, &a), nullptr);
  a.send_ops_flags = 0;
  a.pd = nullptr;
  EXPECT_EQ(mrc_create_qp(ctx_, &a), nullptr);
  a.pd = pd_;
  a.cap.max_send_sge = 64;
  EXPECT_EQ(mrc_create_qp(ctx_, &a), nullptr);
  a.cap.max_send_sge = 1;
  mrc_qp* q = mrc_create_qp(ctx_, &a);
  ASSERT_NE(q, nullptr);
  qps_.push_back(q);
  EXPECT_EQ(mrc_destroy_cq(cq_), -1);  // the QP uses it
  EXPECT_EQ(errno, EBUSY);
  mrc_qp_init_attr back{};
  ASSERT_EQ(mrc_query_qp(q, nullptr, 0, nullptr, 0, &back), 0);
  EXPECT_EQ(back.pd, pd_);
  EXPECT_EQ(back.protocol_version, MRC_PROTOCOL_VERSION_1);
}

// ---- the QP state table

struct Step {
  ibv_qp_state to;
  int vmask;
  int mrc_mask;
  int expect_errno;  // 0: success
};

TEST_F(Provider, QpStateTable) {
  mrc_qp* peer = make_qp();
  ASSERT_NE(peer, nullptr);
  uint32_t peer_qpn = 0;
  ASSERT_EQ(mrc_get_qpn(peer, &peer_qpn), 0);
  const int rtr_req = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU;
  const Step steps[] = {
      {IBV_QPS_RTR, rtr_req, 0, EINVAL},                       // RESET -> RTR is not a transition
      {IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, 0, EINVAL},  // nor RESET -> RTS
      {IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_QKEY, 0, EINVAL},   // no Q_Key on a connected QP
      {IBV_QPS_INIT, IBV_QP_STATE, MRC_QP_MPR, EINVAL},        // MPR belongs to RTS
      // Ignored verbs attributes (mrc.h: not supported; the OCP benchmark sets IBV_QP_PORT).
      {IBV_QPS_INIT, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, 0, 0},
      {IBV_QPS_INIT, IBV_QP_STATE, 0, 0},                      // INIT -> INIT
      {IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, 0, EINVAL},  // INIT -> RTS
      {IBV_QPS_RTR, IBV_QP_STATE | IBV_QP_AV, 0, EINVAL},      // RTR needs DEST_QPN ...
      {IBV_QPS_RTR, rtr_req, MRC_QP_CC_PROFILE_ID, EINVAL},    // profiles belong to INIT
      {IBV_QPS_RTR, rtr_req | IBV_QP_SQ_PSN, 0, EINVAL},       // SQ PSN belongs to RTS
      {IBV_QPS_RTR, rtr_req, MRC_QP_MAX_WIMM_DEST | MRC_QP_MPR_DEST, 0},
      {IBV_QPS_INIT, IBV_QP_STATE, 0, EINVAL},  // no way back to INIT
      {IBV_QPS_RTS, IBV_QP_STATE, 0, EINVAL},   // RTS needs SQ_PSN
      {IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER, 0, 0},
      {IBV_QPS_RTS, IBV_QP_STATE, MRC_QP_TIMEOUT, 0},        // RTS -> RTS: timeout
      {IBV_QPS_RTS, IBV_QP_STATE, MRC_QP_MPR_DEST, EINVAL},  // ... not the responder MPR
      {IBV_QPS_ERR, IBV_QP_STATE, 0, 0},
      {IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN, 0, EINVAL},  // ERR -> RTS
      {IBV_QPS_RESET, IBV_QP_STATE, 0, 0},
      {IBV_QPS_INIT, IBV_QP_STATE, 0, 0},
  };
  mrc_qp* q = make_qp();
  ASSERT_NE(q, nullptr);
  int i = 0;
  for (const Step& s : steps) {
    ibv_qp_attr v{};
    v.qp_state = s.to;
    v.port_num = 1;
    v.path_mtu = IBV_MTU_1024;
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    v.ah_attr.grh.sgid_index = 3;
    ASSERT_EQ(ibv_query_gid(vctx_, 1, 3, &v.ah_attr.grh.dgid), 0);
    v.dest_qp_num = peer_qpn;
    mrc_qp_attr m{};
    m.mpr.mpr = m.mpr.mpr_dest = 4;
    m.wimm.max_wimm_dest = 8;
    m.timeout = 12;
    ibv_qp_attr before{};
    ASSERT_EQ(mrc_query_qp(q, &before, IBV_QP_STATE, nullptr, 0, nullptr), 0);
    errno = 0;
    const int rc = mrc_modify_qp(q, &v, s.vmask, &m, s.mrc_mask);
    ibv_qp_attr after{};
    ASSERT_EQ(mrc_query_qp(q, &after, IBV_QP_STATE, nullptr, 0, nullptr), 0);
    if (s.expect_errno == 0) {
      EXPECT_EQ(rc, 0) << "step " << i << ": " << std::strerror(errno);
      EXPECT_EQ(after.qp_state, s.to) << "step " << i;
    } else {
      EXPECT_EQ(rc, -1) << "step " << i;
      EXPECT_EQ(errno, s.expect_errno) << "step " << i;
      EXPECT_EQ(after.qp_state, before.qp_state) << "step " << i << ": a refused change moved it";
    }
    ++i;
  }
}

TEST_F(Provider, RtrChecksTheSourceGid) {
  mrc_qp* q = make_qp();
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(to_init(q), 0);
  EXPECT_EQ(to_rtr(q, 0x100, 2), -1);  // index 2 is the same address as RoCE v1
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(to_rtr(q, 0x100, 9), -1);  // beyond the table
  EXPECT_EQ(to_rtr(q, 0x100, 3), 0);
  mrc_qp_attr m{};
  ibv_qp_attr v{};
  ASSERT_EQ(mrc_query_qp(q, &v, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN, &m,
                         MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST, nullptr),
            0);
  EXPECT_EQ(v.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(v.dest_qp_num, 0x100u);
  EXPECT_EQ(v.path_mtu, IBV_MTU_1024);
  EXPECT_GT(m.mpr.mpr_dest, 0);  // the device default the application left out
  EXPECT_GT(m.wimm.max_wimm_dest, 0);
}

// ---- data path

TEST_F(Provider, WriteAndWriteWithImmediateLandAndComplete) {
  mrc_qp *a = nullptr, *b = nullptr;
  connected_pair(a, b);
  std::vector<unsigned char> src(64 * 1024), dst(64 * 1024 + 8192, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 13 + 1);
  ibv_mr* ms = reg(src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* md = reg(dst.data() + 4096, 64 * 1024, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_TRUE(ms && md);
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  ibv_recv_wr* bad_r = nullptr;
  ASSERT_EQ(mrc_post_recv(b, &rwr, &bad_r), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), static_cast<uint32_t>(src.size()), ms->lkey};
  ibv_send_wr w1{}, w2{};
  w1.wr_id = 1;
  w1.sg_list = &sge;
  w1.num_sge = 1;
  w1.opcode = IBV_WR_RDMA_WRITE;
  w1.send_flags = IBV_SEND_SIGNALED;
  w1.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(md->addr);
  w1.wr.rdma.rkey = md->rkey;
  w1.next = &w2;  // a chain of two
  ibv_sge small{reinterpret_cast<uintptr_t>(src.data()), 8, ms->lkey};
  w2 = w1;
  w2.wr_id = 2;
  w2.sg_list = &small;
  w2.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  w2.imm_data = htonl(0xC0FFEE);
  w2.next = nullptr;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a, &w1, &bad), 0);
  auto wcs = poll_until(3);
  ASSERT_EQ(wcs.size(), 3u);
  int writes = 0, recvs = 0;
  uint32_t qb = 0;
  ASSERT_EQ(mrc_get_qpn(b, &qb), 0);
  for (const ibv_wc& wc : wcs) {
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc.status);
    if (wc.opcode == IBV_WC_RDMA_WRITE) {
      ++writes;
    } else {
      ASSERT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      ++recvs;
      EXPECT_EQ(wc.wr_id, 77u);
      EXPECT_EQ(ntohl(wc.imm_data), 0xC0FFEEu);
      EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(wc.qp_num, qb);
    }
  }
  EXPECT_EQ(writes, 2);
  EXPECT_EQ(recvs, 1);
  EXPECT_EQ(std::memcmp(dst.data() + 4096, src.data(), src.size()), 0);
  for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(dst[i], 0) << "below the MR";
  for (size_t i = 4096 + 65536; i < dst.size(); ++i) ASSERT_EQ(dst[i], 0) << "above the MR";
}

// Memory per QP (README.md, "Memory per QP"): a QP in RTS with the device defaults (the
// application gives no MPR, as the OCP benchmark does) takes at most 256 KiB of the process's
// resident set. The PSN tables are sized by the window (MPR x 128 PSNs): the default used to be
// 64 units, 1.1 MiB per QP, seven times a `mrct endpoint` QP.
constexpr long kQpFootprintBoundKib = 256;

long rss_kib(const std::string& pid) {
  std::FILE* f = std::fopen(("/proc/" + pid + "/status").c_str(), "r");
  if (f == nullptr) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmRSS:", 6) == 0) kib = std::atol(line + 6);
  std::fclose(f);
  return kib;
}

TEST_F(Provider, AQpInRtsTakesAtMostItsDocumentedMemory) {
  constexpr int kQps = 64;
  // One QP first, so that what every device and engine allocates once is not counted.
  mrc_qp *a = nullptr, *b = nullptr;
  connected_pair(a, b);
  const long before = rss_kib("self");
  uint32_t qpn = 0;
  ASSERT_EQ(mrc_get_qpn(a, &qpn), 0);
  for (int i = 0; i < kQps; ++i) {
    mrc_qp* q = make_qp();
    ASSERT_NE(q, nullptr);
    ASSERT_EQ(to_init(q), 0);
    ASSERT_EQ(to_rtr(q, qpn), 0);
    ASSERT_EQ(to_rts(q), 0);
  }
  const long grown = rss_kib("self") - before;
  ASSERT_GE(before, 0);
  std::printf("memory per QP in RTS (in-process): %ld KiB\n", grown / kQps);
  EXPECT_LE(grown / kQps, kQpFootprintBoundKib) << grown << " KiB for " << kQps << " QPs in RTS";
}

TEST_F(Provider, PostSendRefusesAnythingButWrites) {
  mrc_qp *a = nullptr, *b = nullptr;
  connected_pair(a, b);
  std::vector<char> buf(64);
  ibv_mr* m = reg(buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf.data()), 64, m->lkey};
  for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_READ,
                           IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD}) {
    ibv_send_wr w{};
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = op;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(mrc_post_send(a, &w, &bad), EINVAL) << op;
    EXPECT_EQ(bad, &w);
  }
  ibv_send_wr w{};
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(mrc_post_send(a, &w, &bad), EINVAL);
  w.send_flags = 0;
  sge.lkey ^= 0xFFFF;  // not an MR
  EXPECT_EQ(mrc_post_send(a, &w, &bad), EINVAL);
  EXPECT_EQ(bad, &w);
  ibv_recv_wr r{};
  r.num_sge = 9;
  ibv_recv_wr* bad_r = nullptr;
  EXPECT_EQ(mrc_post_recv(b, &r, &bad_r), EINVAL);
  EXPECT_EQ(bad_r, &r);
}

TEST_F(Provider, RemoteWritesOutsideTheirMrAreRefusedAndWriteNothing) {
  // Wrong rkey, VA outside the MR, an MR without remote write, an MR of another PD: each is a
  // remote access error at the requester, an access error event at the responder, and not one
  // byte changes.
  ibv_pd* other_pd = ibv_alloc_pd(vctx_);
  ASSERT_NE(other_pd, nullptr);
  std::vector<unsigned char> src(256, 0x5A), mem(4 * 4096);
  for (size_t i = 0; i < mem.size(); ++i) mem[i] = static_cast<unsigned char>(i * 7);
  const auto before = mem;
  ibv_mr* ms = reg(src.data(), src.size(), IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* good = reg(mem.data() + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_mr* ro = reg(mem.data() + 8192, 4096, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* foreign =
      reg(mem.data() + 12288, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, other_pd);
  ASSERT_TRUE(ms && good && ro && foreign);
  struct Case {
    uint64_t va;
    uint32_t rkey;
    const char* what;
  } cases[] = {
      {reinterpret_cast<uintptr_t>(good->addr), good->rkey ^ 0x1234, "wrong rkey"},
      {reinterpret_cast<uintptr_t>(good->addr) + 4096 - 100, good->rkey, "crosses the end"},
      {reinterpret_cast<uintptr_t>(good->addr) - 64, good->rkey, "below the MR"},
      {reinterpret_cast<uintptr_t>(ro->addr), ro->rkey, "no remote write"},
      {reinterpret_cast<uintptr_t>(foreign->addr), foreign->rkey, "another PD"},
  };
  for (const Case& c : cases) {
    mrc_qp *a = nullptr, *b = nullptr;
    connected_pair(a, b);
    ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 200, ms->lkey};
    ibv_send_wr w{};
    w.wr_id = 9;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.opcode = IBV_WR_RDMA_WRITE;
    w.send_flags = IBV_SEND_SIGNALED;
    w.wr.rdma.remote_addr = c.va;
    w.wr.rdma.rkey = c.rkey;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(mrc_post_send(a, &w, &bad), 0) << c.what;
    auto wcs = poll_until(1);
    ASSERT_EQ(wcs.size(), 1u) << c.what;
    EXPECT_EQ(mem, before) << c.what;
    // (ASSERT: without the error there is no async event, and mrc_get_async_event would block.)
    ASSERT_EQ(wcs[0].status, IBV_WC_REM_ACCESS_ERR) << c.what;
    mrc_async_event ev{};
    ASSERT_EQ(mrc_get_async_event(ctx_, &ev), 0) << c.what;
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << c.what;
    EXPECT_EQ(ev.element.qp, b) << c.what;
    mrc_ack_async_event(&ev);
    for (mrc_qp* q : {a, b}) {
      EXPECT_EQ(mrc_destroy_qp(q), 0);
      qps_.erase(std::find(qps_.begin(), qps_.end(), q));
    }
  }
  EXPECT_EQ(ibv_dereg_mr(foreign), 0);
  mrs_.pop_back();
  EXPECT_EQ(ibv_dealloc_pd(other_pd), 0);
}

TEST_F(Provider, CompletionChannelDeliversOneEventPerArming) {
  mrc_comp_channel* ch = nullptr;
  ASSERT_EQ(mrc_create_comp_channel(ctx_, &ch), 0);
  int token = 0;
  mrc_cq* cq = mrc_create_cq(ctx_, 64, &token, ch, 0);
  ASSERT_NE(cq, nullptr);
  std::swap(cq, cq_);  // the pair below completes on the channel's CQ
  mrc_qp *a = nullptr, *b = nullptr;
  connected_pair(a, b);
  ASSERT_EQ(mrc_req_notify_cq(cq_, 0), 0);
  std::vector<char> src(64, 1), dst(64, 0);
  ibv_mr* ms = reg(src.data(), 64, IBV_ACCESS_LOCAL_WRITE);
  ibv_mr* md = reg(dst.data(), 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ibv_sge sge{reinterpret_cast<uintptr_t>(src.data()), 64, ms->lkey};
  ibv_send_wr w{};
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(dst.data());
  w.wr.rdma.rkey = md->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(mrc_post_send(a, &w, &bad), 0);
  ASSERT_EQ(poll_until(1).size(), 1u);
  mrc_cq* got = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(mrc_get_cq_event(ch, &got, &ctx), 0);
  EXPECT_EQ(got, cq_);
  EXPECT_EQ(ctx, &token);
  // Not re-armed: a second completion makes no second event.
  ASSERT_EQ(mrc_post_send(a, &w, &bad), 0);
  ASSERT_EQ(poll_until(1).size(), 1u);
  int fd = -1;
  ASSERT_EQ(mrc_get_comp_channel_fd(ch, &fd), 0);
  const int flags = fcntl(fd, F_GETFL);
  ASSERT_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
  EXPECT_EQ(mrc_get_cq_event(ch, &got, &ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  mrc_ack_cq_events(cq_, 1);
  for (mrc_qp* q : qps_) EXPECT_EQ(mrc_destroy_qp(q), 0);
  qps_.clear();
  std::swap(cq, cq_);
  EXPECT_EQ(mrc_destroy_cq(cq), 0);  // every event was acknowledged: no wait
  EXPECT_EQ(mrc_destroy_comp_channel(ch), 0);
}

// ---- the controller API

class Controller : public Provider {
 protected:
  void SetUp() override {
    Provider::SetUp();
    if (!have_net_admin()) GTEST_SKIP() << "needs CAP_NET_ADMIN";
  }

  void stev_format(uint64_t id) {
    mrc_ctl_ev_fmt_field f[2] = {{16}, {16}};
    mrc_ctl_ev_fmt_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
    a.ev_fmt_op.fmt_fields = f;
    a.ev_fmt_op.fmt_field_count = 2;
    ASSERT_EQ(
        mrc_ctl_modify_ev_fmt_profile(
            ctx_, id, &a,
            MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP),
        0);
    a = {};
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, id, &a, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  }

  static mrc_ctl_ev ev_of(uint32_t v, uint8_t port) {
    mrc_ctl_ev e{};
    const uint32_t be = htonl(v);
    std::memcpy(e.val, &be, 4);
    e.port = port;
    return e;
  }

  // An explicit profile of n EVs 0x10001 * (i + 1), alternating ports, ONLINE.
  void explicit_profile(uint64_t id, uint64_t fmt, uint32_t n) {
    mrc_ctl_ev_profile_attr a{};
    a.profile_state = MRC_CTL_PROFILE_OFFLINE;
    a.ev_mode = MRC_CTL_EV_MODE_EXP;
    a.ev_fmt_profile_id = fmt;
    a.ev_count = n;
    a.ev_min_active = 1;
    a.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
    ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, id, &a,
                                        MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                            MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                            MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                                            MRC_CTL_EV_PROFILE_EVENT_MASK),
              0);
    a = {};
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, id, &a, MRC_CTL_EV_PROFILE_STATE), -1);
    EXPECT_EQ(errno, EINVAL);  // still unpopulated
    for (uint32_t i = 0; i < n; ++i) {
      mrc_ctl_ev_op_entry en{};
      en.ev = mrc_ctl_ev{};  // MRC_CTL_EV_UNPOPULATED (a C compound literal)
      en.ev_new = ev_of(0x10001u * (i + 1), static_cast<uint8_t>(i % 2 + 1));
      en.state = MRC_CTL_EV_GOOD;
      a = {};
      a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
      a.ev_op.entries = &en;
      a.ev_op.entry_count = 1;
      ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, id, &a, MRC_CTL_EV_PROFILE_EV_OP), 0) << i;
    }
    a = {};
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, id, &a, MRC_CTL_EV_PROFILE_STATE), 0);
  }
};

TEST_F(Controller, CapabilitiesAndPorts) {
  mrc_ctl_device_attr a{};
  ASSERT_EQ(mrc_ctl_query_device(vctx_, &a), 0);
  EXPECT_EQ(a.phy_port_mask, 0b110u);  // ports 1 and 2
  EXPECT_TRUE(a.ev.ev_mode_mask & MRC_CTL_EV_MODE_EXP);
  EXPECT_TRUE(a.ev.ev_mode_mask & MRC_CTL_EV_MODE_GEN);
  EXPECT_EQ(a.ev.ev_fmt_mode_mask, static_cast<uint32_t>(MRC_CTL_EV_FMT_MODE_STEV));
  EXPECT_TRUE(a.opt_attr & MRC_CTL_OPT_CAP_EP_OP_EV_PROBE);
  EXPECT_TRUE(a.opt_attr & MRC_CTL_OPT_CAP_EV_EVENT);
  ASSERT_NE(a.cc.algorithms, nullptr);
  EXPECT_STREQ(a.cc.algorithms[0], "uet-1.0-nscc");
  EXPECT_EQ(a.cc.algorithms[1], nullptr);
  int supported = 0;
  mrc_ctl_device_attr b{};
  ASSERT_EQ(mrc_ctl_query_device_ex(vctx_, ctx_, &b, &supported), 0);
  EXPECT_NE(supported, 0);

  mrc_ctl_port_attr p{};
  ASSERT_EQ(mrc_ctl_query_port(ctx_, 2, &p, MRC_CTL_PORT_ADMIN_STATE), 0);
  EXPECT_EQ(p.port_admin_state, MRC_CTL_PORT_ADMIN_ENABLED);
  p.port_admin_state = MRC_CTL_PORT_ADMIN_DISABLED;
  ASSERT_EQ(mrc_ctl_modify_port(ctx_, 2, &p, MRC_CTL_PORT_ADMIN_STATE), 0);
  ibv_port_attr pa{};
  ASSERT_EQ(ibv_query_port(vctx_, 2, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_DOWN);  // a disabled port reads DOWN
  p.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
  ASSERT_EQ(mrc_ctl_modify_port(ctx_, 2, &p, MRC_CTL_PORT_ADMIN_STATE), 0);
  ASSERT_EQ(ibv_query_port(vctx_, 2, &pa), 0);
  EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(mrc_ctl_modify_port(ctx_, 3, &p, MRC_CTL_PORT_ADMIN_STATE), -1);
  EXPECT_EQ(mrc_ctl_query_port(ctx_, 1, &p, 1 << 5), -1);
}

TEST_F(Controller, EvFormatProfileStateMachine) {
  mrc_ctl_ev_fmt_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);  // INIT -> ONLINE
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);  // OFFLINE needs MODE
  a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(
                ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE),
            0);
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EINVAL);  // ONLINE needs fields
  mrc_ctl_ev_fmt_field wide[2] = {{32}, {8}};
  a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  a.ev_fmt_op.fmt_fields = wide;
  a.ev_fmt_op.fmt_field_count = 2;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_OP), -1);
  EXPECT_EQ(errno, E2BIG);  // 40 bits do not fit a 32-bit STEV
  mrc_ctl_ev_fmt_field f[2] = {{16}, {16}};
  a.ev_fmt_op.fmt_fields = f;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a,
                                          MRC_CTL_EV_FMT_PROFILE_OP | MRC_CTL_EV_FMT_PROFILE_STATE),
            0);
  mrc_ctl_ev_fmt_profile_attr q{};
  mrc_ctl_ev_fmt_field out[1];
  q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
  q.ev_fmt_op.fmt_fields = out;
  q.ev_fmt_op.fmt_field_count = 1;
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(ctx_, 5, &q,
                                         MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_OP),
            -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(q.ev_fmt_op.fmt_field_count, 2);
  EXPECT_EQ(q.profile_state, MRC_CTL_PROFILE_ONLINE);
  a = {};
  a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_MODE), -1);
  EXPECT_EQ(errno, EINVAL);  // ONLINE: no reconfiguration
  a.cur_profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_CUR_STATE), -1);
  a = {};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  a.profile_state = MRC_CTL_PROFILE_INIT;
  ASSERT_EQ(mrc_ctl_modify_ev_fmt_profile(ctx_, 5, &a, MRC_CTL_EV_FMT_PROFILE_STATE), 0);
  EXPECT_EQ(mrc_ctl_query_ev_fmt_profile(ctx_, 99, &q, MRC_CTL_EV_FMT_PROFILE_STATE), -1);
}

TEST_F(Controller, ExplicitEvProfileDrivesTheQpAndItsStates) {
  stev_format(13);
  explicit_profile(1, 13, 8);
  // QUERY_EV_ARRAY: too short, then whole.
  std::vector<mrc_ctl_ev_op_entry> arr(4);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 4;
  EXPECT_EQ(mrc_ctl_query_ev_profile(ctx_, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, E2BIG);
  ASSERT_EQ(q.ev_op.entry_count, 8);
  arr.resize(8);
  q.ev_op.entries = arr.data();
  ASSERT_EQ(mrc_ctl_query_ev_profile(ctx_, 1, &q,
                                     MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_STATE |
                                         MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MODE),
            0);
  EXPECT_EQ(q.profile_state, MRC_CTL_PROFILE_ONLINE);
  EXPECT_EQ(q.ev_count, 8u);
  EXPECT_EQ(q.ev_mode, MRC_CTL_EV_MODE_EXP);
  for (uint32_t i = 0; i < 8; ++i) {
    mrc_ctl_ev want = ev_of(0x10001u * (i + 1), static_cast<uint8_t>(i % 2 + 1));
    EXPECT_EQ(std::memcmp(&arr[i].ev, &want, sizeof want), 0) << i;
    EXPECT_EQ(arr[i].state, MRC_CTL_EV_GOOD) << i;
  }
  // A QP on the profile and a CC profile; the profiles then cannot go OFFLINE.
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
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "uet-1.0-nscc";
  ASSERT_EQ(mrc_ctl_modify_cc_profile(ctx_, 2, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  cc = {};
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 2, &cc, MRC_CTL_CC_PROFILE_STATE), -1);  // no CONFIG
  cc.cc_config = &nscc;
  ASSERT_EQ(
      mrc_ctl_modify_cc_profile(ctx_, 2, &cc, MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG),
      0);
  mrc_cq* evcq = mrc_ctl_create_ev_event_cq(ctx_, 16, nullptr, nullptr, 0);
  ASSERT_NE(evcq, nullptr);

  mrc_qp* qp = make_qp();
  ASSERT_NE(qp, nullptr);
  mrc_qp_attr m{};
  m.profile.ev_profile_id = 77;  // no such profile
  EXPECT_EQ(to_init(qp, 0, &m, MRC_QP_EV_PROFILE_ID), -1);
  m.profile.ev_profile_id = 1;
  m.profile.cc_profile_id = 2;
  ASSERT_EQ(to_init(qp, 0, &m, MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID), 0);
  mrc_qp_attr got{};
  ASSERT_EQ(
      mrc_query_qp(qp, nullptr, 0, &got, MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID, nullptr), 0);
  EXPECT_EQ(got.profile.ev_profile_id, 1u);
  EXPECT_EQ(got.profile.cc_profile_id, 2u);
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);
  cc = {};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 2, &cc, MRC_CTL_CC_PROFILE_STATE), -1);
  EXPECT_EQ(errno, EBUSY);

  // DENIED by the controller; ASSUMED_BAD makes an EV event.
  mrc_ctl_ev_op_entry en{};
  en.ev = ev_of(0x30003, 1);
  en.state = MRC_CTL_EV_DENIED;
  a = {};
  a.ev_op.op = MRC_CTL_EV_OP_MODIFY_EV_STATE;
  a.ev_op.entries = &en;
  a.ev_op.entry_count = 1;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_EV_OP), 0);
  en.ev = ev_of(0x20002, 2);
  en.state = MRC_CTL_EV_ASSUMED_BAD;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_EV_OP), 0);
  mrc_ctl_ev_op_entry qs[3]{};
  qs[0].ev = ev_of(0x30003, 1);
  qs[1].ev = ev_of(0x20002, 2);
  qs[2].ev = ev_of(0x10001, 1);
  q = {};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_STATE;
  q.ev_op.entries = qs;
  q.ev_op.entry_count = 3;
  ASSERT_EQ(mrc_ctl_query_ev_profile(ctx_, 1, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  EXPECT_EQ(qs[0].state, MRC_CTL_EV_DENIED);
  EXPECT_EQ(qs[1].state, MRC_CTL_EV_ASSUMED_BAD);
  EXPECT_EQ(qs[2].state, MRC_CTL_EV_GOOD);
  mrc_ctl_ev_event evs[4];
  ASSERT_EQ(mrc_ctl_poll_ev_event(evcq, 4, evs), 1);
  EXPECT_EQ(evs[0].profile_id, 1u);
  EXPECT_EQ(evs[0].state, MRC_CTL_EV_ASSUMED_BAD);
  mrc_ctl_ev want = ev_of(0x20002, 2);
  EXPECT_EQ(std::memcmp(&evs[0].ev, &want, sizeof want), 0);
  EXPECT_EQ(evs[0].drop_count, 0u);
  // Errors: an EV not in the profile, both operations at once, REPLACE_EV while ONLINE.
  en.ev = ev_of(0xDEAD, 1);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a,
                                      MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP),
            -1);
  EXPECT_EQ(errno, EINVAL);
  a.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
  en.ev = ev_of(0x10001, 1);
  en.ev_new = ev_of(0x90009, 1);
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_EV_OP), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(mrc_destroy_qp(qp), 0);
  qps_.clear();
  EXPECT_EQ(mrc_destroy_cq(evcq), 0);
  // Without users the profiles go OFFLINE again.
  a = {};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 1, &a, MRC_CTL_EV_PROFILE_STATE), 0);
  cc = {};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 2, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
}

TEST_F(Controller, GeneratedEvProfileDrawsWithinTheFields) {
  stev_format(20);
  mrc_ctl_ev_field fields[2] = {{16, 0, 0x10, 0x1F, 0xFF},    // 8 EV bits, 0x10..0x1F
                                {16, 0xC000, 0, 0, 0x3FFF}};  // 14 bits, unbounded
  mrc_ctl_ev_profile_attr a{};
  a.profile_state = MRC_CTL_PROFILE_OFFLINE;
  a.ev_mode = MRC_CTL_EV_MODE_GEN;
  a.ev_fmt_profile_id = 20;
  a.ev_count = 16;
  a.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
  a.ev_fields_op.fields = fields;
  a.ev_fields_op.field_count = 2;
  const int offline = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                      MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 3, &a, offline), -1);  // GEN needs its fields
  ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, 3, &a, offline | MRC_CTL_EV_PROFILE_EV_FIELDS_OP), 0);
  a = {};
  a.profile_state = MRC_CTL_PROFILE_ONLINE;
  EXPECT_EQ(mrc_ctl_modify_ev_profile(ctx_, 3, &a, MRC_CTL_EV_PROFILE_STATE), -1);
  a.ev_min_active = 2;
  a.ev_event_mask = MRC_CTL_EV_ASSUMED_BAD;
  ASSERT_EQ(mrc_ctl_modify_ev_profile(ctx_, 3, &a,
                                      MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MIN_ACTIVE |
                                          MRC_CTL_EV_PROFILE_EVENT_MASK),
            0);
  std::vector<mrc_ctl_ev_op_entry> arr(16);
  mrc_ctl_ev_profile_attr q{};
  q.ev_op.op = MRC_CTL_EV_OP_QUERY_EV_ARRAY;
  q.ev_op.entries = arr.data();
  q.ev_op.entry_count = 16;
  ASSERT_EQ(mrc_ctl_query_ev_profile(ctx_, 3, &q, MRC_CTL_EV_PROFILE_EV_OP), 0);
  int per_port[3] = {0, 0, 0};
  for (const auto& e : arr) {
    ASSERT_GE(e.ev.port, 1);
    ASSERT_LE(e.ev.port, 2);
    ++per_port[e.ev.port];
    EXPECT_GE(e.ev.val[0], 0x10);  // the compact EV: first field's 8 bits lead
    EXPECT_LE(e.ev.val[0], 0x1F);
  }
  EXPECT_EQ(per_port[1], 8);
  EXPECT_EQ(per_port[2], 8);
  mrc_ctl_ev_field back[1];
  q = {};
  q.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS;
  q.ev_fields_op.fields = back;
  q.ev_fields_op.field_count = 1;
  EXPECT_EQ(mrc_ctl_query_ev_profile(ctx_, 3, &q, MRC_CTL_EV_PROFILE_EV_FIELDS_OP), -1);
  EXPECT_EQ(errno, E2BIG);
  EXPECT_EQ(q.ev_fields_op.field_count, 2);
}

TEST_F(Controller, CcProfileChecks) {
  mrc_ctl_cc_profile_attr cc{};
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.algorithm = "cubic";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 4, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            -1);
  EXPECT_EQ(errno, EINVAL);
  cc.algorithm = nullptr;  // no CC
  ASSERT_EQ(mrc_ctl_modify_cc_profile(ctx_, 4, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  cc.profile_state = MRC_CTL_PROFILE_ONLINE;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(ctx_, 4, &cc, MRC_CTL_CC_PROFILE_STATE), 0);
  mrc_ctl_cc_profile_attr q{};
  q.algorithm = "x";
  ASSERT_EQ(mrc_ctl_query_cc_profile(ctx_, 4, &q,
                                     MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  EXPECT_EQ(q.profile_state, MRC_CTL_PROFILE_ONLINE);
  EXPECT_EQ(q.algorithm, nullptr);
  cc = {};
  cc.algorithm = "uet-1.0-nscc";
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 4, &cc, MRC_CTL_CC_PROFILE_ALGORITHM), -1);  // ONLINE
  mrc_ctl_cc_nscc_cfg bad{};  // max_cwnd 0
  cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
  cc.cc_config = &bad;
  ASSERT_EQ(mrc_ctl_modify_cc_profile(ctx_, 6, &cc,
                                      MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM),
            0);
  EXPECT_EQ(mrc_ctl_modify_cc_profile(ctx_, 6, &cc, MRC_CTL_CC_PROFILE_CONFIG), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(Controller, EvProbesAreAnsweredInABatch) {
  // Loopback: the device probes its own GID and answers itself, on both ports.
  mrc_ctl_ep_req reqs[3]{};
  for (int i = 0; i < 3; ++i) {
    reqs[i].req_id = static_cast<uint16_t>(100 + i);
    ASSERT_EQ(ibv_query_gid(vctx_, 1, 3, &reqs[i].sgid), 0);
    reqs[i].dgid = reqs[i].sgid;
    reqs[i].ev_fmt_mode = MRC_CTL_EV_FMT_MODE_STEV;
    reqs[i].req_ev = ev_of(0x12340000u + static_cast<uint32_t>(i), static_cast<uint8_t>(i % 2 + 1));
  }
  mrc_ctl_ep_rsp rsps[3]{};
  int n = -1;
  ASSERT_EQ(
      mrc_ctl_ep_batch_send_wait(ctx_, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, 3, 200000000, rsps, &n), 0)
      << std::strerror(errno);
  ASSERT_EQ(n, 3);
  std::vector<int> seen;
  for (int i = 0; i < 3; ++i) seen.push_back(rsps[i].req_id);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int>{100, 101, 102}));
  // Errors: a repeated id, an sgid that is not the device's, a port it does not have.
  reqs[1].req_id = 100;
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(ctx_, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, 3, 1000, rsps, &n),
            -1);
  EXPECT_EQ(errno, EINVAL);
  reqs[1].req_id = 101;
  reqs[0].sgid.raw[15] ^= 1;
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(ctx_, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, 3, 1000, rsps, &n),
            -1);
  reqs[0].sgid.raw[15] ^= 1;
  reqs[2].req_ev.port = 7;
  EXPECT_EQ(mrc_ctl_ep_batch_send_wait(ctx_, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, 3, 1000, rsps, &n),
            -1);
  reqs[2].req_ev.port = 1;
  // A probe to a GID nobody answers times out with the others answered.
  reqs[2].dgid.raw[15] ^= 0x40;
  ASSERT_EQ(
      mrc_ctl_ep_batch_send_wait(ctx_, 0, MRC_CTL_EP_OP_EV_PROBE, reqs, 3, 20000000, rsps, &n), -1);
  EXPECT_EQ(errno, ETIMEDOUT);
  EXPECT_EQ(n, 2);
}

TEST_F(Provider, ControllerCallsWithoutCapNetAdminFailWithEperm) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    drop_net_admin();
    mrc_ctl_cc_profile_attr cc{};
    cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
    int bad = 0;
    if (mrc_ctl_modify_cc_profile(ctx_, 9, &cc, MRC_CTL_CC_PROFILE_STATE) != -1 || errno != EPERM)
      bad |= 1;
    mrc_ctl_port_attr p{};
    if (mrc_ctl_query_port(ctx_, 1, &p, MRC_CTL_PORT_ADMIN_STATE) != -1 || errno != EPERM) bad |= 2;
    if (mrc_ctl_create_ev_event_cq(ctx_, 4, nullptr, nullptr, 0) != nullptr || errno != EPERM)
      bad |= 4;
    mrc_ctl_ev_profile_attr a{};
    if (mrc_ctl_query_ev_profile(ctx_, 1, &a, 0) != -1 || errno != EPERM) bad |= 8;
    // Capability discovery stays open to applications.
    mrc_ctl_device_attr d{};
    if (mrc_ctl_query_device(vctx_, &d) != 0) bad |= 16;
    _exit(bad);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "bit mask of calls that did not fail with EPERM";
}

// A malformed runtime knob refuses the device with EINVAL (and the log names it), in loopback
// mode too, where the knob does nothing: a typo is never silently taken. Each case in a child,
// so that the process's one shared device (created at the first open) is made anew.
TEST(ProviderEnv, MalformedRuntimeKnobsRefuseTheDevice) {
  struct Case {
    const char* name;
    const char* value;
    bool ok;
  };
  const Case cases[] = {
      {"MRC_SOFT_RX_COALESCE_US", "abc", false}, {"MRC_SOFT_RX_COALESCE_US", "1001", false},
      {"MRC_SOFT_RX_COALESCE_US", "-1", false},  {"MRC_SOFT_RX_COALESCE_US", " 5", false},
      {"MRC_SOFT_TX_RING", "65537", false},      {"MRC_SOFT_TX_RING", "1e3", false},
      {"MRC_SOFT_RX_COALESCE_US", "0", true},    {"MRC_SOFT_TX_RING", "1024", true},
  };
  for (const Case& c : cases) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setenv("MRC_SOFT_IO", "loopback", 1);
      setenv(c.name, c.value, 1);
      int n = 0;
      ibv_device** list = ibv_get_device_list(&n);
      if (list == nullptr || n < 1) _exit(10);
      errno = 0;
      ibv_context* v = ibv_open_device(list[0]);
      if (v == nullptr) _exit(errno == EINVAL ? 1 : 11);
      ibv_close_device(v);
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), c.ok ? 0 : 1) << c.name << "=" << c.value;
  }
}

}  // namespace
