// QP state machine, attribute validation, work-request validation and the error state.
#include <gmock/gmock.h>

#include <cerrno>

#include "reference-impl/engine/engine_test_util.h"

namespace mrc::engine::testing {
namespace {

using ::testing::HasSubstr;

class QpStateTest : public ::testing::Test {
 protected:
  QpStateTest() : ep(make_config("n", 1, 2, 3)) {
    EXPECT_TRUE(ep.create_cq(64, cq).ok());
    QpInitAttr init;
    init.send_cq = cq;
    init.recv_cq = cq;
    init.cap.max_send_wr = 4;
    init.cap.max_recv_wr = 2;
    EXPECT_TRUE(ep.create_qp(init, qpn).ok());
    EXPECT_TRUE(ep.add_ev_profile(1, make_ev_profile(8, 0, 1)).ok());
    CcProfile cc;
    EXPECT_TRUE(ep.add_cc_profile(1, cc).ok());
    ep.set_event_sink([this](const Event& e) { events.push_back(e); });
  }

  Status to_init(uint32_t mrc_mask = kMrcEvProfileId | kMrcCcProfileId | kMrcHint) {
    QpAttr a;
    a.qp_state = QpState::kInit;
    a.qp_access_flags = kAccessLocalWrite | kAccessRemoteWrite;
    MrcQpAttr m;
    m.ev_profile_id = 1;
    m.cc_profile_id = 1;
    return ep.modify_qp(qpn, a, kQpState | kQpAccessFlags, m, mrc_mask);
  }
  Status to_rtr(uint32_t mask = kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu,
                uint32_t mrc_mask = kMrcMaxWimmDest | kMrcMprDest, uint32_t mtu = 4096) {
    QpAttr a;
    a.qp_state = QpState::kRtr;
    a.dgid = gid_of(2);
    a.dest_qp_num = 0x123;
    a.rq_psn = 0x10;
    a.path_mtu = mtu;
    MrcQpAttr m;
    m.max_wimm_dest = 8;
    m.mpr_dest = 8;
    return ep.modify_qp(qpn, a, mask, m, mrc_mask);
  }
  Status to_rts(MrcQpAttr m = rts_attrs(),
                uint32_t mrc_mask = kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout) {
    QpAttr a;
    a.qp_state = QpState::kRts;
    a.sq_psn = 0x20;
    return ep.modify_qp(qpn, a, kQpState | kQpSqPsn, m, mrc_mask);
  }
  static MrcQpAttr rts_attrs() {
    MrcQpAttr m;
    m.max_wimm = 8;
    m.mpr = 8;
    m.timeout = 8;
    m.retry.linear_cnt = 7;
    m.retry.exp_cnt = 25;
    return m;
  }
  QpState state() {
    QpAttr a;
    MrcQpAttr m;
    EXPECT_TRUE(ep.query_qp(qpn, a, m).ok());
    return a.qp_state;
  }

  Endpoint ep;
  uint32_t cq = 0;
  uint32_t qpn = 0;
  std::vector<Event> events;
};

TEST_F(QpStateTest, WalksResetInitRtrRtsAndLogsEachState) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  QpAttr a;
  MrcQpAttr m;
  ASSERT_TRUE(ep.query_qp(qpn, a, m).ok());
  EXPECT_EQ(a.qp_state, QpState::kRts);
  EXPECT_EQ(a.dest_qp_num, 0x123u);
  EXPECT_EQ(a.sq_psn, 0x20u);
  EXPECT_EQ(m.mpr, 8);
  EXPECT_EQ(m.retry.exp_cnt, 25);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].kind, EventKind::kQpState);
  EXPECT_EQ(events[2].find("from")->s, "RTR");
  EXPECT_EQ(events[2].find("to")->s, "RTS");
}

TEST_F(QpStateTest, IllegalTransitionsFailWithEinvalAndAMessage) {
  Status s = to_rtr();
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("illegal QP state transition RESET -> RTR"));
  ASSERT_TRUE(to_init().ok());
  s = to_rts();
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("INIT -> RTS"));
  EXPECT_EQ(state(), QpState::kInit);  // a failed modify changes nothing
  ASSERT_TRUE(to_rtr().ok());
  QpAttr a;
  a.qp_state = QpState::kInit;
  s = ep.modify_qp(qpn, a, kQpState, {}, 0);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("RTR -> INIT"));
}

TEST_F(QpStateTest, MissingRequiredAttributesAreNamed) {
  Status s = to_init(kMrcCcProfileId | kMrcHint);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("requires MRC_QP_EV_PROFILE_ID"));
  s = to_init(kMrcEvProfileId | kMrcCcProfileId);
  EXPECT_THAT(s.message, HasSubstr("requires MRC_QP_HINT"));
  ASSERT_TRUE(to_init().ok());
  s = to_rtr(kQpState | kQpAv | kQpDestQpn | kQpPathMtu);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("requires IBV_QP_RQ_PSN"));
  s = to_rtr(kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu, kMrcMaxWimmDest);
  EXPECT_THAT(s.message, HasSubstr("requires MRC_QP_MPR_DEST"));
  ASSERT_TRUE(to_rtr().ok());
  s = to_rts(rts_attrs(), kMrcMaxWimm | kMrcMpr | kMrcTimeout);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("requires MRC_QP_RETRY_CNT"));
  EXPECT_EQ(state(), QpState::kRtr);
}

TEST_F(QpStateTest, UnsupportedAndMisplacedAttributesAreRejected) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  MrcQpAttr m;
  m.ev_profile_id = 1;
  m.cc_profile_id = 1;
  const uint32_t mm = kMrcEvProfileId | kMrcCcProfileId | kMrcHint;
  Status s = ep.modify_qp(qpn, a, kQpState | kQpTimeout, m, mm);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("use MRC_QP_TIMEOUT"));
  s = ep.modify_qp(qpn, a, kQpState | kQpRetryCnt, m, mm);
  EXPECT_THAT(s.message, HasSubstr("use MRC_QP_RETRY_CNT"));
  s = ep.modify_qp(qpn, a, kQpState | kQpMaxQpRdAtomic, m, mm);
  EXPECT_THAT(s.message, HasSubstr("IBV_QP_MAX_QP_RD_ATOMIC not supported"));
  s = ep.modify_qp(qpn, a, kQpState | kQpSqPsn, m, mm);
  EXPECT_THAT(s.message, HasSubstr("IBV_QP_SQ_PSN not allowed in RESET->INIT"));
  s = ep.modify_qp(qpn, a, kQpState, m, mm | kMrcMpr);
  EXPECT_THAT(s.message, HasSubstr("MRC_QP_MPR not allowed in RESET->INIT"));
  a.cur_qp_state = QpState::kRtr;
  s = ep.modify_qp(qpn, a, kQpState | kQpCurState, m, mm);
  EXPECT_THAT(s.message, HasSubstr("IBV_QP_CUR_STATE is RTR but the QP is in RESET"));
  EXPECT_EQ(state(), QpState::kReset);
}

TEST_F(QpStateTest, AttributeValuesAreRangeChecked) {
  QpAttr a;
  a.qp_state = QpState::kInit;
  MrcQpAttr m;
  m.ev_profile_id = 99;
  m.cc_profile_id = 1;
  Status s = ep.modify_qp(qpn, a, kQpState, m, kMrcEvProfileId | kMrcCcProfileId | kMrcHint);
  EXPECT_THAT(s.message, HasSubstr("MRC_QP_EV_PROFILE_ID 99: no such EV profile"));
  ASSERT_TRUE(to_init().ok());
  s = to_rtr(kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu, kMrcMaxWimmDest | kMrcMprDest,
             1000);
  EXPECT_THAT(s.message, HasSubstr("IBV_QP_PATH_MTU 1000"));
  ASSERT_TRUE(to_rtr().ok());
  MrcQpAttr m2 = rts_attrs();
  m2.timeout = 25;
  EXPECT_THAT(to_rts(m2).message, HasSubstr("MRC_QP_TIMEOUT 25: must be 0..24"));
  m2 = rts_attrs();
  m2.retry.linear_cnt = 8;
  EXPECT_THAT(to_rts(m2).message, HasSubstr("linear_cnt 8"));
  m2 = rts_attrs();
  m2.retry.exp_cnt = 26;
  EXPECT_THAT(to_rts(m2).message, HasSubstr("exp_cnt 26"));
  m2 = rts_attrs();
  m2.mpr = 0;
  EXPECT_THAT(to_rts(m2).message, HasSubstr("MRC_QP_MPR 0"));
  EXPECT_EQ(state(), QpState::kRtr);
  EXPECT_TRUE(to_rts().ok());
}

TEST_F(QpStateTest, OnlyRdmaWriteOpcodesArePosted) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(to_rtr().ok());
  std::vector<uint8_t> buf(4096);
  MemoryRegion mr;
  ASSERT_TRUE(ep.register_mr(buf.data(), buf.size(), kAccessLocalWrite, mr).ok());
  const Sge sge{mr.addr, 100, mr.lkey};
  SendWr wr;
  wr.sg_list = {&sge, 1};
  wr.opcode = WrOpcode::kRdmaWrite;
  Status s = ep.post_send(qpn, wr);
  EXPECT_EQ(s.code, EINVAL);
  EXPECT_THAT(s.message, HasSubstr("needs the QP in RTS, it is in RTR"));
  ASSERT_TRUE(to_rts().ok());
  for (WrOpcode op : {WrOpcode::kSend, WrOpcode::kSendWithImm, WrOpcode::kRdmaRead,
                      WrOpcode::kAtomicCmpAndSwp, WrOpcode::kAtomicFetchAndAdd}) {
    wr.opcode = op;
    s = ep.post_send(qpn, wr);
    EXPECT_EQ(s.code, EINVAL);
    EXPECT_THAT(s.message, HasSubstr("not supported by MRC"));
    EXPECT_THAT(s.message, HasSubstr(std::string(wr_opcode_name(op))));
  }
  wr.opcode = WrOpcode::kRdmaWrite;
  const Sge bad{mr.addr + 4000, 100, mr.lkey};
  wr.sg_list = {&bad, 1};
  EXPECT_THAT(ep.post_send(qpn, wr).message, HasSubstr("outside the MR"));
  const Sge unknown{mr.addr, 100, mr.lkey + 1};
  wr.sg_list = {&unknown, 1};
  EXPECT_THAT(ep.post_send(qpn, wr).message, HasSubstr("unknown lkey"));
  wr.sg_list = {&sge, 1};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ep.post_send(qpn, wr).ok());
  s = ep.post_send(qpn, wr);
  EXPECT_EQ(s.code, ENOMEM);  // max_send_wr = 4
}

TEST_F(QpStateTest, ErrorStateFlushesEverythingWithCompletions) {
  ASSERT_TRUE(to_init().ok());
  ASSERT_TRUE(ep.post_recv(qpn, RecvWr{7, {}}).ok());
  ASSERT_TRUE(ep.post_recv(qpn, RecvWr{8, {}}).ok());
  EXPECT_EQ(ep.post_recv(qpn, RecvWr{9, {}}).code, ENOMEM);  // max_recv_wr = 2
  ASSERT_TRUE(to_rtr().ok());
  ASSERT_TRUE(to_rts().ok());
  std::vector<uint8_t> buf(64);
  MemoryRegion mr;
  ASSERT_TRUE(ep.register_mr(buf.data(), buf.size(), kAccessLocalWrite, mr).ok());
  const Sge sge{mr.addr, 64, mr.lkey};
  ASSERT_TRUE(ep.post_write(qpn, 1, {&sge, 1}, 0x1000, 5, std::nullopt, false).ok());
  QpAttr a;
  a.qp_state = QpState::kErr;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kQpState, {}, 0).ok());
  Wc wc[8];
  ASSERT_EQ(ep.poll_cq(cq, wc), 3);
  EXPECT_EQ(wc[0].wr_id, 1u);  // unsignalled, but errors always complete
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wc[1].wr_id, 7u);
  EXPECT_EQ(wc[1].status, WcStatus::kWrFlushErr);
  EXPECT_EQ(wc[2].wr_id, 8u);
  // Work posted in ERR completes at once with a flush error.
  ASSERT_TRUE(ep.post_write(qpn, 2, {&sge, 1}, 0x1000, 5).ok());
  ASSERT_EQ(ep.poll_cq(cq, wc), 1);
  EXPECT_EQ(wc[0].wr_id, 2u);
  EXPECT_EQ(wc[0].status, WcStatus::kWrFlushErr);
  // ERR -> RESET -> INIT works again.
  a.qp_state = QpState::kReset;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kQpState, {}, 0).ok());
  EXPECT_TRUE(to_init().ok());
  EXPECT_EQ(ep.poll_cq(cq, wc), 0);
}

TEST(QpValidation, EndpointConfigAndObjectsAreValidated) {
  EndpointConfig c = make_config("x", 1, 2, 1);
  c.ports.clear();
  EXPECT_THROW(Endpoint{c}, std::invalid_argument);
  c = make_config("x", 1, 2, 1);
  c.gid = {};
  EXPECT_THROW(Endpoint{c}, std::invalid_argument);
  Endpoint ep(make_config("x", 1, 2, 1));
  uint32_t cq = 0;
  EXPECT_EQ(ep.create_cq(0, cq).code, EINVAL);
  QpInitAttr init;
  uint32_t qpn = 0;
  EXPECT_THAT(ep.create_qp(init, qpn).message, HasSubstr("send_cq"));
  CcProfile cc;
  cc.algorithm = "bbr";
  EXPECT_THAT(ep.add_cc_profile(1, cc).message, HasSubstr("unknown algorithm \"bbr\""));
  EvProfile evp = make_ev_profile(8, 0, 9);
  EXPECT_THAT(ep.add_ev_profile(1, evp).message, HasSubstr("ev_min_active 9 > ev_count 8"));
  EXPECT_TRUE(ep.add_ev_profile(1, make_ev_profile(8, 0, 1)).ok());
  EXPECT_EQ(ep.add_ev_profile(1, make_ev_profile(8, 0, 1)).code, EEXIST);
  std::vector<uint8_t> buf(16);
  MemoryRegion mr;
  EXPECT_THAT(ep.register_mr(buf.data(), 16, kAccessRemoteWrite, mr).message,
              HasSubstr("REMOTE_WRITE requires LOCAL_WRITE"));
  EXPECT_EQ(ep.deregister_mr(12345).code, EINVAL);
}

TEST(QpValidation, CustomCongestionControlPlugsIn) {
  struct Fixed final : CongestionControl {
    std::string_view name() const override { return "fixed"; }
    uint64_t cwnd_bytes() const override { return 3 * 4184; }
    void on_ack(const CcAckSample&) override { ++acks; }
    void on_trim(uint64_t, uint32_t, bool) override {}
    void on_loss(uint64_t, uint32_t, bool) override {}
    int acks = 0;
  };
  Fixed* seen = nullptr;
  Endpoint ep(make_config("x", 1, 1, 1));
  ASSERT_TRUE(ep.register_cc_algorithm("fixed", [&](const CcProfile&, uint32_t mtu) {
                  EXPECT_EQ(mtu, 4096u);
                  auto cc = std::make_unique<Fixed>();
                  seen = cc.get();
                  return cc;
                }).ok());
  EXPECT_EQ(ep.register_cc_algorithm("fixed", nullptr).code, EINVAL);
  CcProfile cc;
  cc.algorithm = "fixed";
  ASSERT_TRUE(ep.add_cc_profile(1, cc).ok());
  ASSERT_TRUE(ep.add_ev_profile(1, make_ev_profile(4, 0, 1)).ok());
  uint32_t cq = 0, qpn = 0;
  ASSERT_TRUE(ep.create_cq(16, cq).ok());
  QpInitAttr init;
  init.send_cq = init.recv_cq = cq;
  ASSERT_TRUE(ep.create_qp(init, qpn).ok());
  QpAttr a;
  MrcQpAttr m;
  a.qp_state = QpState::kInit;
  m.ev_profile_id = 1;
  m.cc_profile_id = 1;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kQpState, m, kMrcEvProfileId | kMrcCcProfileId | kMrcHint).ok());
  a.qp_state = QpState::kRtr;
  a.dgid = gid_of(2);
  a.dest_qp_num = 77;
  m.mpr_dest = 1;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kQpState | kQpAv | kQpDestQpn | kQpRqPsn | kQpPathMtu, m,
                           kMrcMaxWimmDest | kMrcMprDest)
                  .ok());
  a.qp_state = QpState::kRts;
  m.mpr = 1;
  ASSERT_TRUE(ep.modify_qp(qpn, a, kQpState | kQpSqPsn, m,
                           kMrcMaxWimm | kMrcMpr | kMrcRetryCnt | kMrcTimeout)
                  .ok());
  ASSERT_NE(seen, nullptr);
  // The window of the custom controller gates sending: 3 packets leave, then nothing.
  std::vector<uint8_t> buf(10 * 4096);
  MemoryRegion mr;
  ASSERT_TRUE(ep.register_mr(buf.data(), buf.size(), kAccessLocalWrite, mr).ok());
  const Sge sge{mr.addr, static_cast<uint32_t>(buf.size()), mr.lkey};
  ASSERT_TRUE(ep.post_write(qpn, 1, {&sge, 1}, 0x1000, 5).ok());
  TxPacket pkt;
  int sent = 0;
  while (ep.poll_tx(0, pkt)) ++sent;
  EXPECT_EQ(sent, 3);
  QpStats st;
  ASSERT_TRUE(ep.qp_stats(qpn, st).ok());
  EXPECT_EQ(st.cwnd_bytes, 3u * 4184);
  EXPECT_EQ(st.bytes_in_flight, 3u * 4184);
}

}  // namespace
}  // namespace mrc::engine::testing
