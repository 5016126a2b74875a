// Clean exchanges between two endpoints: WRITE / WRITE_WITH_IMM delivery, segmentation, SACK
// generation, spraying, MPR and WIMM windows, determinism.
#include <functional>
#include <set>

#include "reference-impl/engine/engine_test_util.h"

namespace mrc::engine::testing {
namespace {

using wire::PacketKind;

std::vector<wire::DecodedFrame> data_frames(const Pair& p, bool a_to_b = true) {
  std::vector<wire::DecodedFrame> out;
  for (const Frame& f : p.log) {
    if (f.a_to_b != a_to_b) continue;
    wire::DecodedFrame d;
    if (decode(f, d) && d.op && d.op->kind == PacketKind::kMrcData) out.push_back(d);
  }
  return out;
}

TEST(Exchange, WriteIsDeliveredByteExactWithOneCompletion) {
  Pair p(2);
  const size_t len = 1 << 20;
  Buffer src(*p.a.ep, len, 1);
  Buffer dst(*p.b.ep, len, 2);
  ASSERT_NE(src.bytes, dst.bytes);
  const Sge sge = src.sge(0, len);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 42, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto got = p.poll(p.a);
    wcs.insert(wcs.end(), got.begin(), got.end());
    return !wcs.empty();
  }));
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 42u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(wcs[0].opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(wcs[0].byte_len, len);
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_TRUE(p.poll(p.b).empty());  // a plain WRITE consumes no receive WQE

  // Segmentation at PMTU: 256 packets, consecutive PSNs from sq_psn, RETH on every one with the
  // VA advancing by PMTU, FIRST/MIDDLE exactly PMTU, A=1 on the last.
  const auto data = data_frames(p);
  ASSERT_EQ(data.size(), len / 4096);
  for (size_t i = 0; i < data.size(); ++i) {
    const auto& d = data[i];
    EXPECT_EQ(d.bth.psn, wire::psn_add(p.a.sq_psn, static_cast<int64_t>(i)));
    EXPECT_FALSE(d.bth.rtx);
    EXPECT_TRUE(d.has(wire::kHdrReth));
    EXPECT_TRUE(d.has(wire::kHdrTseth));
    EXPECT_EQ(d.reth.va, dst.addr(i * 4096));
    EXPECT_EQ(d.reth.rkey, dst.mr.rkey);
    EXPECT_EQ(d.reth.dma_len, len);
    EXPECT_EQ(d.payload.size(), 4096u);
    EXPECT_EQ(d.meth.msn, 0u);
    EXPECT_EQ(d.bth.dest_qp, p.b.qpn);
    const auto pos = d.op->position;
    if (i == 0)
      EXPECT_EQ(pos, wire::MessagePosition::kFirst);
    else if (i + 1 == data.size())
      EXPECT_EQ(pos, wire::MessagePosition::kLast);
    else
      EXPECT_EQ(pos, wire::MessagePosition::kMiddle);
    EXPECT_EQ(d.bth.ack_req, i + 1 == data.size());
    EXPECT_EQ(d.dscp(), wire::mrp0().dscp().trimmable);
    EXPECT_TRUE(wire::verify_icrc(d));
  }
  QpStats st;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st).ok());
  EXPECT_EQ(st.data_bytes_placed, len);
  EXPECT_EQ(st.duplicates_rx, 0u);
  // Once everything is acknowledged both endpoints go idle: no timer is left armed.
  p.run_idle(10'000'000);
  EXPECT_EQ(p.a.ep->next_deadline_ns(), UINT64_MAX);
  EXPECT_EQ(p.b.ep->next_deadline_ns(), UINT64_MAX);
  EXPECT_EQ(p.in_flight(), 0u);
}

// A receive filter republishes the gates only when rx_gate_generation() moved: at every step
// of a transfer, gates that changed come with a new generation, and an idle pair moves none.
TEST(Exchange, RxGateGenerationMovesWheneverTheGatesDo) {
  Pair p(2);
  struct Seen {
    uint64_t gen = UINT64_MAX;
    std::vector<RxGate> gates;
    int changes = 0;
  };
  Seen seen_a, seen_b;
  const auto check = [](const Endpoint& ep, Seen& s) {
    std::vector<RxGate> now;
    ep.rx_gates(now);
    if (ep.rx_gate_generation() == s.gen) {
      EXPECT_EQ(now, s.gates) << "gates changed under generation " << s.gen;
      return;
    }
    if (now != s.gates) ++s.changes;
    s.gen = ep.rx_gate_generation();
    s.gates = now;
  };
  check(*p.a.ep, seen_a);
  check(*p.b.ep, seen_b);
  const size_t len = 1 << 20;
  Buffer src(*p.a.ep, len, 1);
  Buffer dst(*p.b.ep, len, 2);
  const Sge sge = src.sge(0, len);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] {
    check(*p.a.ep, seen_a);
    check(*p.b.ep, seen_b);
    return !p.poll(p.a).empty();
  }));
  // The responder's cumulative PSN moved with the data (the pair delivers bursts at once, so
  // a few steps see it move).
  EXPECT_GE(seen_b.changes, 1);
  std::vector<RxGate> gates;
  p.b.ep->rx_gates(gates);
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].rcv_cack, wire::psn_add(p.a.sq_psn, 255));
  // Idle: nothing moves.
  p.run_idle(10'000'000);
  check(*p.a.ep, seen_a);
  check(*p.b.ep, seen_b);
  const uint64_t ga = p.a.ep->rx_gate_generation(), gb = p.b.ep->rx_gate_generation();
  p.run_idle(10'000'000);
  EXPECT_EQ(p.a.ep->rx_gate_generation(), ga);
  EXPECT_EQ(p.b.ep->rx_gate_generation(), gb);
  // A QP leaving RTS (here: destroyed) moves it too.
  ASSERT_TRUE(p.b.ep->destroy_qp(p.b.qpn).ok());
  check(*p.b.ep, seen_b);
  EXPECT_NE(p.b.ep->rx_gate_generation(), gb);
  p.b.ep->rx_gates(gates);
  EXPECT_TRUE(gates.empty());
}

TEST(Exchange, SegmentationOfOddLengthsAndMultipleSges) {
  QpParams qp;
  qp.path_mtu = 1024;
  Pair p(2, 11, qp);
  Buffer src(*p.a.ep, 10000, 3);
  Buffer dst(*p.b.ep, 10000, 4);
  // Three SGEs of odd sizes, so packets straddle SGE boundaries.
  const Sge sges[3] = {src.sge(0, 1000), src.sge(5000, 1500), src.sge(2000, 1001)};
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, sges, dst.addr(17), dst.mr.rkey).ok());
  // A zero-length write is one ONLY packet with no payload.
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 2, {}, dst.addr(0), dst.mr.rkey).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto got = p.poll(p.a);
    wcs.insert(wcs.end(), got.begin(), got.end());
    return wcs.size() == 2;
  }));
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  std::vector<uint8_t> expect(src.bytes.begin(), src.bytes.begin() + 1000);
  expect.insert(expect.end(), src.bytes.begin() + 5000, src.bytes.begin() + 6500);
  expect.insert(expect.end(), src.bytes.begin() + 2000, src.bytes.begin() + 3001);
  ASSERT_EQ(expect.size(), 3501u);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), dst.bytes.begin() + 17));
  const auto data = data_frames(p);
  ASSERT_EQ(data.size(), 5u);  // ceil(3501/1024) = 4, plus the zero-length ONLY
  EXPECT_EQ(data[3].payload.size(), 3501u - 3 * 1024);
  EXPECT_EQ(data[3].op->position, wire::MessagePosition::kLast);
  EXPECT_EQ(data[4].op->position, wire::MessagePosition::kOnly);
  EXPECT_EQ(data[4].payload.size(), 0u);
  EXPECT_EQ(data[4].meth.msn, 1u);  // MSN + 1 per message
  // Untouched bytes of the destination stay as they were.
  Buffer fresh(*p.b.ep, 10000, 4);
  EXPECT_TRUE(std::equal(fresh.bytes.begin(), fresh.bytes.begin() + 17, dst.bytes.begin()));
  EXPECT_TRUE(std::equal(fresh.bytes.begin() + 17 + 3501, fresh.bytes.end(),
                         dst.bytes.begin() + 17 + 3501));
}

TEST(Exchange, WriteWithImmCompletesInMessageOrder) {
  Pair p(2);
  const size_t n = 6;
  Buffer src(*p.a.ep, 64 * 1024, 5);
  Buffer dst(*p.b.ep, 64 * 1024, 6);
  for (uint64_t i = 0; i < n; ++i)
    ASSERT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{100 + i, {}}).ok());
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t len = i == 3 ? 0 : static_cast<uint32_t>(1000 * (i + 1) + 7);
    const Sge sge = src.sge(i * 8192, len);
    auto sgl = len ? std::span<const Sge>(&sge, 1) : std::span<const Sge>();
    ASSERT_TRUE(p.a.ep
                    ->post_write(p.a.qpn, i, sgl, dst.addr(i * 8192), dst.mr.rkey,
                                 static_cast<uint32_t>(0xABC00 + i), i % 2 == 0)
                    .ok());
  }
  std::vector<Wc> recv, send;
  ASSERT_TRUE(p.run([&] {
    auto r = p.poll(p.b);
    recv.insert(recv.end(), r.begin(), r.end());
    auto s = p.poll(p.a);
    send.insert(send.end(), s.begin(), s.end());
    return recv.size() == n && send.size() == 3;
  }));
  for (uint64_t i = 0; i < n; ++i) {
    EXPECT_EQ(recv[i].wr_id, 100 + i);
    EXPECT_EQ(recv[i].status, WcStatus::kSuccess);
    EXPECT_EQ(recv[i].opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_TRUE(recv[i].with_imm);
    EXPECT_EQ(recv[i].imm_data, 0xABC00 + i);
    EXPECT_EQ(recv[i].byte_len, i == 3 ? 0u : 1000 * (i + 1) + 7);
    EXPECT_EQ(recv[i].qp_num, p.b.qpn);
    const size_t len = recv[i].byte_len;
    EXPECT_TRUE(std::equal(src.bytes.begin() + i * 8192, src.bytes.begin() + i * 8192 + len,
                           dst.bytes.begin() + i * 8192));
  }
  // Only the signalled sends (even wr_ids) complete.
  ASSERT_EQ(send.size(), 3u);
  EXPECT_EQ(send[0].wr_id, 0u);
  EXPECT_EQ(send[1].wr_id, 2u);
  EXPECT_EQ(send[2].wr_id, 4u);
  // RQMSN counts earlier WRITE_WITH_IMM messages; ImmDt rides on the last packet.
  std::set<uint32_t> seen_msn;
  for (const auto& d : data_frames(p)) {
    EXPECT_EQ(d.meth.rqmsn, d.meth.msn);
    EXPECT_EQ(d.has(wire::kHdrImm), d.op->position == wire::MessagePosition::kLast ||
                                        d.op->position == wire::MessagePosition::kOnly);
    seen_msn.insert(d.meth.msn);
  }
  EXPECT_EQ(seen_msn.size(), n);
}

TEST(Exchange, SackEvery16KiBAndImmediatelyOnAckRequest) {
  Pair p(1);
  Buffer src(*p.a.ep, 64 * 1024, 7);
  Buffer dst(*p.b.ep, 64 * 1024, 8);
  // 64 KiB at PMTU 4096 = 16 packets: SACK after packets 4, 8, 12 (16 KiB each) and 16 (A=1).
  const Sge sge = src.sge(0, 64 * 1024);
  p.one_way_ns = 100'000;  // no SACK comes back before all data has left
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  std::vector<wire::DecodedFrame> sacks;
  size_t acks = 0;
  for (const Frame& f : p.log) {
    if (f.a_to_b) continue;
    wire::DecodedFrame d;
    ASSERT_TRUE(decode(f, d));
    if (d.op->kind == PacketKind::kMrcSack) sacks.push_back(d);
    if (d.op->kind == PacketKind::kMrcTransportAck) ++acks;
    EXPECT_EQ(d.dscp(), wire::mrp0().dscp().control);
  }
  ASSERT_EQ(sacks.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    const uint32_t expect_cack = wire::psn_add(p.a.sq_psn, static_cast<int64_t>(4 * k + 3));
    EXPECT_EQ(sacks[k].seth.cack_psn, expect_cack);
    EXPECT_EQ(sacks[k].bth.psn, expect_cack);  // R23
    EXPECT_EQ(sacks[k].bth.dest_qp, p.a.qpn);
    EXPECT_EQ(sacks[k].seth.ack_psn_offset, 0);
    EXPECT_EQ(sacks[k].seth.m, 0);
    EXPECT_EQ(sacks[k].cc_state.ooo_count, 0);
    // rcvd_bytes: nominal size (UDP length + 40) of 4(k+1) packets in 256-byte units, ceiling.
    const uint64_t nominal = 8 + 12 + 4 + 4 + 16 + 4096 + 4 + 40;
    EXPECT_EQ(sacks[k].cc_state.rcvd_bytes, (nominal * 4 * (k + 1) + 255) / 256);
    EXPECT_TRUE(sacks[k].seth.psv);
    EXPECT_EQ(sacks[k].seth.port_status, 0x01);  // port 1 up
  }
  EXPECT_EQ(acks, 1u);  // one transport ACK for the one message
}

TEST(Exchange, SmallPacketsCountAtLeastOneKiBTowardsTheSackTrigger) {
  QpParams qp;
  qp.path_mtu = 256;
  Pair p(1, 5, qp);
  Buffer src(*p.a.ep, 32 * 256, 9);
  Buffer dst(*p.b.ep, 32 * 256, 10);
  p.one_way_ns = 100'000;
  const Sge sge = src.sge(0, 32 * 256);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  size_t sacks = 0;
  for (const Frame& f : p.log)
    if (!f.a_to_b && is_kind(f, PacketKind::kMrcSack)) ++sacks;
  EXPECT_EQ(sacks, 2u);  // 32 packets x max(256, 1024) = 32 KiB: one per 16 packets
  EXPECT_EQ(src.bytes, dst.bytes);
}

TEST(Exchange, PacketsSprayAcrossEvsAndBalanceAcrossPlanes) {
  QpParams qp;
  qp.ev = make_ev_profile(32, 0, 1);
  Pair p(4, 3, qp);
  const size_t len = 400 * 4096;
  Buffer src(*p.a.ep, len, 11);
  Buffer dst(*p.b.ep, len, 12);
  const Sge sge = src.sge(0, static_cast<uint32_t>(len));
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_EQ(src.bytes, dst.bytes);
  std::map<uint8_t, size_t> per_port;
  std::set<uint32_t> wevs;
  std::map<uint32_t, uint8_t> port_of_wev;
  uint32_t prev = 0;
  size_t repeats = 0;
  for (const Frame& f : p.log) {
    if (!f.a_to_b) continue;
    wire::DecodedFrame d;
    ASSERT_TRUE(decode(f, d));
    ++per_port[f.port];
    const uint32_t w = wev_of(d);
    wevs.insert(w);
    auto [it, fresh] = port_of_wev.emplace(w, f.port);
    EXPECT_EQ(it->second, f.port) << "an EV must always leave on its own port";
    if (w == prev) ++repeats;
    prev = w;
  }
  EXPECT_EQ(wevs.size(), 32u);  // every EV is used
  EXPECT_EQ(repeats, 0u);       // consecutive packets never share an EV
  ASSERT_EQ(per_port.size(), 4u);
  for (auto [port, n] : per_port) EXPECT_NEAR(static_cast<double>(n), 100.0, 1.0) << int{port};
}

// A WRITE of 1000 packets of 256 B behind a 128-PSN MPR window and a long pipe (50 us one way),
// so that the window, not the pipe, is the limit.
struct WindowBoundWrite {
  static QpParams params() {
    QpParams qp;
    qp.mpr = 1;  // 128 PSNs
    qp.path_mtu = 256;
    return qp;
  }
  static constexpr size_t kLen = 1000 * 256;
  Pair p{2, 9, params()};
  Buffer src{*p.a.ep, kLen, 13};
  Buffer dst{*p.b.ep, kLen, 14};
  WindowBoundWrite() { p.one_way_ns = 50'000; }
  bool post() {
    const Sge sge = src.sge(0, static_cast<uint32_t>(kLen));
    return p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok();
  }
  // fn(PSNs ahead of A's cumulative ACK) for every first transmission A sends.
  void on_new_data(std::function<void(uint32_t)> fn) {
    p.hook = [this, fn = std::move(fn)](Frame& f) {
      wire::DecodedFrame d;
      if (!decode(f, d)) return Verdict::kDeliver;
      if (f.a_to_b && d.op->kind == PacketKind::kMrcData && !d.bth.rtx) {
        QpStats st;
        p.a.ep->qp_stats(p.a.qpn, st);
        fn(wire::psn_diff(d.bth.psn, st.cack_seen));
      }
      return Verdict::kDeliver;
    };
  }
};

TEST(Exchange, MprWindowBoundsPsnsAheadOfCack) {
  WindowBoundWrite w;
  Pair& p = w.p;
  ASSERT_TRUE(w.post());
  // R20: when A sends a new PSN, it is at most MPR ahead of the highest cack A has received.
  uint32_t max_ahead = 0;
  w.on_new_data([&](uint32_t ahead) { max_ahead = std::max(max_ahead, ahead); });
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_EQ(w.src.bytes, w.dst.bytes);
  EXPECT_LE(max_ahead, 128u);
  EXPECT_GE(max_ahead, 120u);  // and the window is actually used
}

// tx_waiting(): data the window holds back (the runtime does not coalesce its receive then: the
// SACKs that open the window must be read as they come). Posted and not yet sent, or held at a
// full window: waiting; everything acknowledged: not. A responder never is.
TEST(Exchange, TxWaitingWhileTheWindowHoldsDataBack) {
  WindowBoundWrite w;
  Pair& p = w.p;
  EXPECT_FALSE(p.a.ep->tx_waiting());
  ASSERT_TRUE(w.post());
  EXPECT_TRUE(p.a.ep->tx_waiting());
  bool waiting_at_full_window = false, responder_waiting = false;
  w.on_new_data([&](uint32_t ahead) {
    // The window is full and most of the message is still to come.
    if (ahead >= 127 && w.dst.bytes != w.src.bytes) waiting_at_full_window |= p.a.ep->tx_waiting();
    responder_waiting |= p.b.ep->tx_waiting();
  });
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_EQ(w.src.bytes, w.dst.bytes);
  EXPECT_TRUE(waiting_at_full_window);
  EXPECT_FALSE(responder_waiting);
  EXPECT_FALSE(p.a.ep->tx_waiting());
}

TEST(Exchange, WimmLimitBoundsOutstandingWriteWithImm) {
  QpParams qp;
  qp.max_wimm = 2;
  Pair p(2, 21, qp);
  Buffer src(*p.a.ep, 4096, 15);
  Buffer dst(*p.b.ep, 4096, 16);
  p.one_way_ns = 100'000;
  for (uint64_t i = 0; i < 6; ++i) {
    ASSERT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{i, {}}).ok());
    const Sge sge = src.sge(i * 512, 512);
    ASSERT_TRUE(
        p.a.ep->post_write(p.a.qpn, i, {&sge, 1}, dst.addr(i * 512), dst.mr.rkey, 7u, true).ok());
  }
  // Before anything can come back, only two WRITE_WITH_IMM messages may have started.
  p.pump();
  EXPECT_EQ(data_frames(p).size(), 2u);
  std::vector<Wc> recv;
  ASSERT_TRUE(p.run([&] {
    auto r = p.poll(p.b);
    recv.insert(recv.end(), r.begin(), r.end());
    return recv.size() == 6;
  }));
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.begin() + 6 * 512, dst.bytes.begin()));
  // Each burst of first transmissions holds at most two messages.
  std::map<uint64_t, std::set<uint16_t>> msns_by_time;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcData && !d.bth.rtx)
      msns_by_time[f.sent_ns].insert(d.meth.msn);
  }
  for (const auto& [t, msns] : msns_by_time) EXPECT_LE(msns.size(), 2u) << t;
}

// SRv6: IPv6-in-IPv6, the outer DA is the expanded EV, the WEV is the EV's index (MRP0 C.1).
void srv6_exchange(bool with_srh) {
  QpParams qp;
  qp.format = wire::EvFormat::kSrv6;
  EvProfile& ev = qp.ev;
  ev = EvProfile{};
  ev.mode = EvMode::kGenerated;
  ev.ev_count = 8;
  ev.format_widths = {32, 16, 16, 16, 16, 16, 16};
  ev.fields = {wire::EvField{32, 0xfcbb0000, 0, 0, 0}};
  for (int k = 0; k < 3; ++k) ev.fields.push_back(wire::EvField{16, 0x0a00, 0, 0xFF, 0x00FF});
  if (with_srh) {
    // Second container in a one-segment SRH: its own locator and two uSIDs.
    ev.format_widths.insert(ev.format_widths.end(), {32, 16, 16});
    ev.fields.resize(7, wire::EvField{16, 0, 0, 0, 0});
    ev.fields.push_back(wire::EvField{32, 0xfcbb0001, 0, 0, 0});
    ev.fields.push_back(wire::EvField{16, 0x0b00, 0, 0xFF, 0x00FF});
  }
  Pair p(2, 31, qp);
  Buffer src(*p.a.ep, 40'000, 41);
  Buffer dst(*p.b.ep, 40'000, 42);
  const Sge sge = src.sge(0, 40'000);
  ASSERT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{1, {}}).ok());
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey, 99u).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_EQ(src.bytes, dst.bytes);
  auto recv = p.poll(p.b);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].imm_data, 99u);
  size_t data = 0, sacks = 0;
  std::set<uint32_t> wevs;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    ASSERT_TRUE(decode(f, d));
    ASSERT_TRUE(d.has_inner_ip6);
    EXPECT_EQ(d.has_srh, with_srh);
    EXPECT_EQ(d.ip6.dst[0], 0xfc);
    EXPECT_EQ(d.ip6.dst[1], 0xbb);
    EXPECT_EQ(d.inner_ip6.dst, f.a_to_b ? gid_of(2) : gid_of(1));
    EXPECT_EQ(d.ip6.next_header, with_srh ? wire::kIpProtoRouting : wire::kIpProtoIpv6);
    if (with_srh) {
      EXPECT_EQ(d.srh.segments[0][3], 0x01);  // fcbb:0001:...
    }
    EXPECT_TRUE(wire::verify_icrc(d));
    const uint32_t w = wev_of(d, wire::EvFormat::kSrv6);
    EXPECT_LT(w, 8u);  // the EV index
    if (d.op->kind == wire::PacketKind::kMrcData) {
      ++data;
      wevs.insert(w);
    }
    if (d.op->kind == wire::PacketKind::kMrcSack) {
      ++sacks;
      EXPECT_LT(d.seth.entropy, 8u);
    }
  }
  EXPECT_EQ(data, 10u);
  EXPECT_GT(sacks, 0u);
  EXPECT_EQ(wevs.size(), 8u);
}

TEST(Exchange, Srv6WithoutSrh) {
  srv6_exchange(false);
}
TEST(Exchange, Srv6WithOneSegmentSrh) {
  srv6_exchange(true);
}

TEST(Exchange, UdpFormatOverIpv4) {
  QpParams qp;
  qp.format = wire::EvFormat::kUdp;
  qp.ipv4 = true;
  qp.ev = EvProfile{};
  qp.ev.mode = EvMode::kGenerated;
  qp.ev.ev_count = 16;
  qp.ev.format_widths = {16};
  qp.ev.fields = {wire::EvField{16, 0xC000, 0, 0, 0x3FFF}};
  Pair p(2, 33, qp);
  Buffer src(*p.a.ep, 100'000, 43);
  Buffer dst(*p.b.ep, 100'000, 44);
  const Sge sge = src.sge(0, 100'000);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_EQ(src.bytes, dst.bytes);
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    ASSERT_TRUE(decode(f, d));
    EXPECT_EQ(d.l3, 4);
    EXPECT_EQ(d.ip4.dst[3], f.a_to_b ? 2 : 1);
    EXPECT_TRUE(wire::verify_icrc(d));
    if (f.a_to_b) {
      EXPECT_GE(d.udp.sport, 0xC000);  // the EV is the source port
    }
  }
}

TEST(Exchange, SameSeedSameBytes) {
  auto run_once = [](uint64_t seed) {
    Pair p(4, seed);
    Buffer src(*p.a.ep, 200'000, 17);
    Buffer dst(*p.b.ep, 200'000, 18);
    const Sge sge = src.sge(0, 200'000);
    EXPECT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{1, {}}).ok());
    EXPECT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey, 5u).ok());
    uint64_t n = 0;
    p.hook = [&](Frame&) { return (++n % 37 == 0) ? Verdict::kDrop : Verdict::kDeliver; };
    EXPECT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
    EXPECT_EQ(src.bytes, dst.bytes);
    // The buffers' addresses differ between runs; compare everything but RETH VA and ICRC.
    std::string digest;
    for (const Frame& f : p.log) {
      wire::DecodedFrame d;
      EXPECT_TRUE(decode(f, d));
      digest += std::to_string(f.sent_ns) + ":" + std::to_string(f.port) + ":" +
                std::to_string(d.bth.opcode) + ":" + std::to_string(d.bth.psn) + ":" +
                std::to_string(d.udp.sport) + ":" + std::to_string(d.flow_label()) + ":" +
                std::to_string(d.payload.size()) + ";";
    }
    return digest;
  };
  const std::string one = run_once(99);
  EXPECT_EQ(one, run_once(99));
  EXPECT_NE(one, run_once(100));
}

}  // namespace
}  // namespace mrc::engine::testing
