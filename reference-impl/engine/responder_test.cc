// Responder safety: R_Key / VA / access validation before any memory write, WIMM limit, and
// malformed or hostile frames (garbage, truncation, mutation, unknown opcodes, PSNs far out of
// window, spoofed sources, bogus SACKs) that must never crash or write outside a region.
#include <cerrno>
#include <random>

#include "reference-impl/engine/engine_test_util.h"

namespace mrc::engine::testing {
namespace {

using wire::PacketKind;

// A region in the middle of a larger buffer: the guards must never change.
struct Guarded {
  std::vector<uint8_t> all;
  size_t off;
  size_t len;
  MemoryRegion mr;
  Guarded(Endpoint& ep, size_t n, size_t guard,
          uint32_t access = kAccessLocalWrite | kAccessRemoteWrite)
      : all(n + 2 * guard), off(guard), len(n) {
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint8_t>(i * 7 + 3);
    EXPECT_TRUE(ep.register_mr(all.data() + off, n, access, mr).ok());
  }
  std::vector<uint8_t> snapshot() const { return all; }
  bool guards_intact(const std::vector<uint8_t>& before) const {
    return std::equal(all.begin(), all.begin() + off, before.begin()) &&
           std::equal(all.begin() + off + len, all.end(), before.begin() + off + len);
  }
};

std::vector<Wc> run_to_completion(Pair& p, size_t n = 1) {
  std::vector<Wc> wcs;
  p.run([&] {
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return wcs.size() >= n;
  });
  return wcs;
}

TEST(Responder, BadRkeyIsRefusedWithRemoteAccessNakAndMemoryUntouched) {
  Pair p(2, 1);
  Buffer src(*p.a.ep, 8 * 4096, 1);
  Guarded dst(*p.b.ep, 8 * 4096, 4096);
  const auto before = dst.snapshot();
  const Sge sge = src.sge(0, 8 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 5, {&sge, 1}, dst.mr.addr, dst.mr.rkey ^ 0x5A5A).ok());
  const auto wcs = run_to_completion(p);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].wr_id, 5u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(dst.all, before);  // not one byte written
  size_t naks = 0;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcTransportAck &&
        d.aeth.syndrome == 0x62) {
      ++naks;
      EXPECT_EQ(d.bth.dest_qp, p.a.qpn);
    }
  }
  EXPECT_EQ(naks, 1u);
  AsyncEvent ae;
  ASSERT_TRUE(p.b.ep->get_async_event(ae));
  EXPECT_EQ(ae.type, AsyncEventType::kQpAccessErr);
  EXPECT_EQ(ae.qp_num, p.b.qpn);
  QpAttr attr;
  MrcQpAttr mrc;
  ASSERT_TRUE(p.a.ep->query_qp(p.a.qpn, attr, mrc).ok());
  EXPECT_EQ(attr.qp_state, QpState::kErr);
  ASSERT_TRUE(p.b.ep->query_qp(p.b.qpn, attr, mrc).ok());
  EXPECT_EQ(attr.qp_state, QpState::kErr);
  QpStats st;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st).ok());
  EXPECT_EQ(st.data_bytes_placed, 0u);
  EXPECT_EQ(st.remote_access_errors, 1u);
}

TEST(Responder, WriteCrossingTheRegionEndIsRefused) {
  Pair p(2, 2);
  Buffer src(*p.a.ep, 4096, 3);
  Guarded dst(*p.b.ep, 4096, 4096);
  const auto before = dst.snapshot();
  const Sge sge = src.sge(0, 200);
  // 200 bytes starting 100 before the end of the region.
  ASSERT_TRUE(
      p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.mr.addr + 4096 - 100, dst.mr.rkey).ok());
  auto wcs = run_to_completion(p);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(dst.all, before);
}

TEST(Responder, WriteBelowTheRegionAndToAReadOnlyRegionAreRefused) {
  for (int variant = 0; variant < 2; ++variant) {
    Pair p(1, 3 + variant);
    Buffer src(*p.a.ep, 4096, 5);
    Guarded dst(*p.b.ep, 4096, 4096,
                variant == 0 ? kAccessLocalWrite | kAccessRemoteWrite : kAccessLocalWrite);
    const auto before = dst.snapshot();
    const Sge sge = src.sge(0, 64);
    const uint64_t va = variant == 0 ? dst.mr.addr - 32 : dst.mr.addr;
    ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, va, dst.mr.rkey).ok());
    auto wcs = run_to_completion(p);
    ASSERT_EQ(wcs.size(), 1u) << variant;
    EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr) << variant;
    EXPECT_EQ(dst.all, before) << variant;
  }
}

TEST(Responder, WriteToAnMrOfAnotherProtectionDomainIsRefused) {
  // Pair's QPs are in PD 0; the region is registered in PD 7 with remote write: the rkey is
  // valid on the node but not for the QP (verbs: an MR serves only QPs of its own PD).
  Pair p(1, 9);
  Buffer src(*p.a.ep, 4096, 5);
  std::vector<uint8_t> other(3 * 4096, 0xA5);
  MemoryRegion mr;
  ASSERT_TRUE(
      p.b.ep->register_mr(other.data() + 4096, 4096, kAccessLocalWrite | kAccessRemoteWrite, mr, 7)
          .ok());
  EXPECT_EQ(mr.pd, 7u);
  const auto before = other;
  // Locally, an SGE of another PD's MR is refused at post time.
  std::vector<uint8_t> src_other(64, 1);
  MemoryRegion local;
  ASSERT_TRUE(p.a.ep->register_mr(src_other.data(), 64, kAccessLocalWrite, local, 7).ok());
  const Sge foreign{local.addr, 64, local.lkey};
  EXPECT_EQ(p.a.ep->post_write(p.a.qpn, 2, {&foreign, 1}, mr.addr, mr.rkey).code, EINVAL);
  const Sge sge = src.sge(0, 64);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, mr.addr, mr.rkey).ok());
  auto wcs = run_to_completion(p);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(other, before);
}

TEST(Responder, RegionsWithAssignedKeysAreReachedOnlyByThoseKeys) {
  // The provider attached to rxe registers rdma-core's MRs with rxe's own keys: a WRITE with
  // that rkey lands, an MR whose rkey is 0 (rxe: no remote access) is reachable by no key, and
  // a key already in use is refused.
  Pair p(1, 11);
  Buffer src(*p.a.ep, 4096, 5);
  std::vector<uint8_t> dst(3 * 4096, 0xA5);
  MemoryRegion mr;
  ASSERT_TRUE(p.b.ep
                  ->register_mr_with_keys(dst.data() + 4096, 4096,
                                          kAccessLocalWrite | kAccessRemoteWrite, 0x1234, 0x1234,
                                          mr)
                  .ok());
  EXPECT_EQ(mr.lkey, 0x1234u);
  EXPECT_EQ(mr.rkey, 0x1234u);
  MemoryRegion dup;
  EXPECT_EQ(p.b.ep->register_mr_with_keys(dst.data(), 64, kAccessLocalWrite, 0x1234, 0, dup).code,
            EEXIST);
  EXPECT_EQ(
      p.b.ep->register_mr_with_keys(dst.data(), 64, kAccessLocalWrite, 0x99, 0x1234, dup).code,
      EEXIST);
  EXPECT_EQ(p.b.ep->register_mr_with_keys(dst.data(), 64, kAccessLocalWrite, 0, 0, dup).code,
            EINVAL);
  // Remote write allowed but no rkey: no WRITE can name it.
  MemoryRegion no_rkey;
  ASSERT_TRUE(p.b.ep
                  ->register_mr_with_keys(dst.data(), 64, kAccessLocalWrite | kAccessRemoteWrite,
                                          0x77, 0, no_rkey)
                  .ok());
  const Sge sge = src.sge(0, 64);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, mr.addr, 0x1234).ok());
  auto wcs = run_to_completion(p);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(std::equal(dst.begin() + 4096, dst.begin() + 4096 + 64, src.bytes.begin()));
  const auto before = dst;
  ASSERT_TRUE(
      p.a.ep->post_write(p.a.qpn, 2, {&sge, 1}, reinterpret_cast<uintptr_t>(dst.data()), 0).ok());
  wcs = run_to_completion(p);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemAccessErr);
  EXPECT_EQ(dst, before);
}

TEST(Responder, WimmLimitViolationIsAnInvalidRequest) {
  QpParams qp;
  qp.max_wimm = 8;       // A believes it may have 8 outstanding
  qp.max_wimm_dest = 2;  // but B only takes 2
  qp.timeout = 4;
  Pair p(2, 5, qp);
  Buffer src(*p.a.ep, 16 * 4096, 7);
  Buffer dst(*p.b.ep, 16 * 4096, 8);
  for (uint64_t i = 0; i < 4; ++i) ASSERT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{i, {}}).ok());
  // Hold message 0 back (its first packet is lost) so later messages pile up at B.
  const uint32_t first = p.a.sq_psn;
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcData && d.bth.psn == first &&
        !d.bth.rtx)
      return Verdict::kDrop;
    return Verdict::kDeliver;
  };
  for (uint64_t i = 0; i < 4; ++i) {
    const Sge sge = src.sge(i * 8192, 8192);
    ASSERT_TRUE(
        p.a.ep->post_write(p.a.qpn, i, {&sge, 1}, dst.addr(i * 8192), dst.mr.rkey, 9u).ok());
  }
  auto wcs = run_to_completion(p, 4);
  bool saw_inv = false;
  for (const Wc& w : wcs) saw_inv |= w.status == WcStatus::kRemInvReqErr;
  EXPECT_TRUE(saw_inv);
  AsyncEvent ae;
  ASSERT_TRUE(p.b.ep->get_async_event(ae));
  EXPECT_EQ(ae.type, AsyncEventType::kQpReqErr);
  QpStats st;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st).ok());
  EXPECT_EQ(st.invalid_requests, 1u);
}

TEST(Responder, WriteWithImmWithoutAReceiveWqeIsARemoteOperationError) {
  Pair p(2, 9);
  Buffer src(*p.a.ep, 4096, 17);
  Buffer dst(*p.b.ep, 4096, 18);
  const Sge sge = src.sge(0, 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 2, {&sge, 1}, dst.addr(), dst.mr.rkey, 5u).ok());
  auto wcs = run_to_completion(p, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);  // the plain WRITE before it is fine
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kRemOpErr);
  EXPECT_EQ(src.bytes, dst.bytes);
  AsyncEvent ae;
  ASSERT_TRUE(p.b.ep->get_async_event(ae));
  EXPECT_EQ(ae.type, AsyncEventType::kQpFatal);
  EXPECT_EQ(ae.qp_num, p.b.qpn);
}

TEST(Responder, ReceiverPenaltyIsAdvertisedInSacks) {
  Pair p(1, 10);
  ASSERT_TRUE(p.b.ep->set_rcv_cwnd_pen(p.b.qpn, 64).ok());
  EXPECT_EQ(p.b.ep->set_rcv_cwnd_pen(p.b.qpn, 128).code, EINVAL);
  Buffer src(*p.a.ep, 4096, 19);
  Buffer dst(*p.b.ep, 4096, 20);
  const Sge sge = src.sge(0, 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_EQ(run_to_completion(p).size(), 1u);
  size_t sacks = 0;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcSack) {
      ++sacks;
      EXPECT_EQ(d.cc_state.rcv_cwnd_pen, 64);
    }
  }
  EXPECT_EQ(sacks, 1u);
}

// Captures real frames of a clean exchange to use as mutation seeds.
struct Seeds {
  std::vector<std::vector<std::byte>> a_to_b;  // data (and probes) toward B
  std::vector<std::vector<std::byte>> b_to_a;  // SACKs, ACKs toward A
};

Seeds capture(Pair& p, Buffer& src, uint64_t dst_addr, uint32_t rkey) {
  Seeds s;
  const Sge sge = src.sge(0, 3 * 4096 + 100);
  EXPECT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst_addr, rkey, 3u).ok());
  EXPECT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{1, {}}).ok());
  EXPECT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  for (const Frame& f : p.log) (f.a_to_b ? s.a_to_b : s.b_to_a).push_back(f.bytes);
  return s;
}

TEST(Responder, GarbageTruncationAndMutationNeverCrashOrWriteOutsideTheRegion) {
  Pair p(2, 6);
  Buffer src(*p.a.ep, 4 * 4096, 11);
  Guarded dst(*p.b.ep, 4 * 4096, 8192);
  const Seeds seeds = capture(p, src, dst.mr.addr, dst.mr.rkey);
  ASSERT_FALSE(seeds.a_to_b.empty());
  ASSERT_FALSE(seeds.b_to_a.empty());
  const auto before = dst.snapshot();
  std::mt19937_64 rng(1234);
  uint64_t t = p.now + 1'000'000;
  TxPacket out;
  auto feed = [&](Endpoint& ep, const std::vector<std::byte>& fr) {
    ep.on_packet(fr, static_cast<uint8_t>(1 + rng() % 2), ++t);
    ep.on_timer(t);
    while (ep.poll_tx(t, out)) {
    }
  };
  // 1. Pure garbage of every small length and random lengths.
  for (int i = 0; i < 3000; ++i) {
    std::vector<std::byte> g(i < 200 ? i : rng() % 9000);
    for (auto& b : g) b = static_cast<std::byte>(rng());
    feed(*p.b.ep, g);
    feed(*p.a.ep, g);
  }
  // 2. Every truncation of every seed.
  for (const auto& s : seeds.a_to_b)
    for (size_t n = 0; n < s.size(); n += 1 + n / 64) feed(*p.b.ep, {s.begin(), s.begin() + n});
  for (const auto& s : seeds.b_to_a)
    for (size_t n = 0; n < s.size(); ++n) feed(*p.a.ep, {s.begin(), s.begin() + n});
  // 3. Random byte mutations, with the ICRC repaired so they reach the protocol logic.
  auto mutate = [&](std::vector<std::byte> fr) {
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Favour the headers, where the interesting fields are.
      const size_t pos = rng() % 2 ? rng() % std::min<size_t>(fr.size(), 130) : rng() % fr.size();
      fr[pos] = static_cast<std::byte>(rng());
    }
    wire::DecodedFrame d;
    if (wire::decode_frame(wire::as_bytes(fr), d) && d.has_icrc && rng() % 4 != 0)
      wire::fix_icrc({fr.data(), fr.size()}, d);
    return fr;
  };
  for (int i = 0; i < 20000; ++i) {
    feed(*p.b.ep, mutate(seeds.a_to_b[rng() % seeds.a_to_b.size()]));
    feed(*p.a.ep, mutate(seeds.b_to_a[rng() % seeds.b_to_a.size()]));
  }
  // 4. Well-formed data packets with fresh PSNs inside the window and hostile RETH fields
  //    (VA around and outside the region, wrong R_Key, DMA length smaller than the payload):
  //    these reach placement. Whenever one puts B's QP in ERR it is reset and reconnected.
  std::vector<wire::DecodedFrame> data_seeds;
  for (const auto& fr : seeds.a_to_b) {
    wire::DecodedFrame d;
    if (wire::decode_frame(wire::as_bytes(fr), d) && d.op && d.op->kind == PacketKind::kMrcData)
      data_seeds.push_back(d);
  }
  ASSERT_FALSE(data_seeds.empty());
  uint64_t refused = 0;
  for (int i = 0; i < 8000; ++i) {
    QpAttr attr;
    MrcQpAttr mrc;
    ASSERT_TRUE(p.b.ep->query_qp(p.b.qpn, attr, mrc).ok());
    if (attr.qp_state == QpState::kErr) {
      QpStats st;
      p.b.ep->qp_stats(p.b.qpn, st);
      refused += st.remote_access_errors + st.invalid_requests;
      QpAttr reset;
      reset.qp_state = QpState::kReset;
      ASSERT_TRUE(p.b.ep->modify_qp(p.b.qpn, reset, kQpState, {}, 0).ok());
      p.connect(p.b, p.a);
    }
    wire::FrameSpec s = data_seeds[rng() % data_seeds.size()];
    s.headers = 0;
    s.bth.psn = wire::psn_add(p.a.sq_psn, static_cast<int64_t>(rng() % 1000));
    const int64_t span = static_cast<int64_t>(dst.len) + 2 * 8192;
    switch (rng() % 4) {
      case 0:
        s.reth.va = dst.mr.addr - 8192 + static_cast<uint64_t>(rng() % span);
        break;
      case 1:
        s.reth.va = rng();
        break;
      case 2:
        s.reth.va = dst.mr.addr + dst.len - rng() % 64;
        break;
      default:
        s.reth.va = dst.mr.addr + rng() % dst.len;
        break;
    }
    if (rng() % 3 == 0) s.reth.rkey = static_cast<uint32_t>(rng());
    if (rng() % 5 == 0) s.reth.dma_len = static_cast<uint32_t>(rng() % 4096);
    feed(*p.b.ep, wire::encode_frame(s));
  }
  EXPECT_TRUE(dst.guards_intact(before));
  EXPECT_GT(refused, 100u);  // the hostile writes were seen, judged and refused
  const EndpointStats& bs = p.b.ep->stats();
  EXPECT_GT(bs.rx_decode_errors + bs.rx_not_roce, 0u);
  EXPECT_GT(bs.rx_bad_icrc, 0u);
}

TEST(Responder, UnknownOpcodesWrongPeerUnknownQpAndFarPsnAreDroppedCleanly) {
  Pair p(2, 7);
  Buffer src(*p.a.ep, 4 * 4096, 13);
  Guarded dst(*p.b.ep, 4 * 4096, 4096);
  const Seeds seeds = capture(p, src, dst.mr.addr, dst.mr.rkey);
  const auto before = dst.snapshot();
  QpStats st0;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st0).ok());
  wire::DecodedFrame d;
  ASSERT_TRUE(wire::decode_frame(wire::as_bytes(seeds.a_to_b[0]), d));
  ASSERT_EQ(d.op->kind, PacketKind::kMrcData);
  auto reencode = [&](const std::function<void(wire::FrameSpec&)>& edit) {
    wire::FrameSpec s = d;
    s.headers = 0;
    edit(s);
    return wire::encode_frame(s);
  };
  uint64_t t = p.now + 1000;
  TxPacket out;
  std::vector<std::vector<std::byte>> replies;
  auto inject = [&](const std::vector<std::byte>& fr) {
    p.b.ep->on_packet(fr, 1, ++t);
    while (p.b.ep->poll_tx(t, out)) replies.push_back(out.frame);
  };
  const EndpointStats s0 = p.b.ep->stats();

  // An opcode the profile does not know: a decode error, nothing else.
  auto unknown = seeds.a_to_b[0];
  unknown[d.off_bth] = std::byte{0xFF};
  inject(unknown);
  EXPECT_EQ(p.b.ep->stats().rx_decode_errors, s0.rx_decode_errors + 1);
  // IBTA RC READ request and RC SEND: not MRC, refused.
  inject(reencode([](wire::FrameSpec& s) {
    s.bth.opcode = 0x0C;
    s.payload = {};
  }));
  inject(reencode([](wire::FrameSpec& s) { s.bth.opcode = 0x04; }));
  EXPECT_EQ(p.b.ep->stats().rx_unexpected, s0.rx_unexpected + 2);
  // Right QPN, wrong source GID.
  inject(reencode([](wire::FrameSpec& s) { s.ip6.src = gid_of(9); }));
  EXPECT_EQ(p.b.ep->stats().rx_not_for_us, s0.rx_not_for_us + 1);
  // Unknown destination QP.
  inject(reencode([](wire::FrameSpec& s) { s.bth.dest_qp = 0x777; }));
  EXPECT_EQ(p.b.ep->stats().rx_unknown_qp, s0.rx_unknown_qp + 1);
  // A PSN far out of the window: NACK PSN_OOR_WINDOW, nothing placed, QP still fine.
  replies.clear();
  inject(reencode([&](wire::FrameSpec& s) {
    s.bth.psn = wire::psn_add(p.a.sq_psn, 100000);
    s.reth.va = dst.mr.addr;
  }));
  ASSERT_EQ(replies.size(), 1u);
  wire::DecodedFrame r;
  ASSERT_TRUE(wire::decode_frame(wire::as_bytes(replies[0]), r));
  EXPECT_EQ(r.op->kind, PacketKind::kMrcNack);
  EXPECT_EQ(r.neth.nack_code, 0x0B);
  QpStats st;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st).ok());
  EXPECT_EQ(st.out_of_window_rx, st0.out_of_window_rx + 1);
  EXPECT_EQ(st.data_bytes_placed, st0.data_bytes_placed);
  EXPECT_EQ(dst.all, before);
  // The QP is unharmed: a new transfer still works byte-exact.
  const Sge sge = src.sge(0, 4 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 2, {&sge, 1}, dst.mr.addr, dst.mr.rkey).ok());
  p.now = t;
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(std::equal(src.bytes.begin(), src.bytes.end(), dst.all.begin() + dst.off));
}

TEST(Responder, BogusSacksAndNacksDoNotConfuseTheRequester) {
  Pair p(2, 8);
  Buffer src(*p.a.ep, 64 * 4096, 15);
  Buffer dst(*p.b.ep, 64 * 4096, 16);
  wire::FrameSpec sack;
  bool have = false;
  uint64_t injected = 0;
  // Every SACK B sends is followed by a forged twin that claims PSNs A never sent.
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (f.a_to_b || !decode(f, d) || d.op->kind != PacketKind::kMrcSack) return Verdict::kDeliver;
    sack = d;
    have = true;
    return Verdict::kDeliver;
  };
  const Sge sge = src.sge(0, 64 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  TxPacket out;
  ASSERT_TRUE(p.run([&] {
    if (have) {
      have = false;
      wire::FrameSpec s = sack;
      s.headers = 0;
      s.seth.cack_psn = wire::psn_add(s.seth.cack_psn, 5000);
      s.bth.psn = s.seth.cack_psn;
      p.a.ep->on_packet(wire::encode_frame(s), 1, p.now);
      s = sack;
      s.headers = 0;
      s.seth.sack_offset = 2000;
      s.seth.sack_bitmap = ~0ull;
      p.a.ep->on_packet(wire::encode_frame(s), 1, p.now);
      s = sack;
      s.headers = 0;
      s.bth.opcode = 0xDD;  // a NACK for a PSN never sent
      s.neth.nack_code = 0x01;
      s.neth.nack_psn = wire::psn_add(s.seth.cack_psn, 4000);
      s.bth.psn = s.neth.nack_psn;
      p.a.ep->on_packet(wire::encode_frame(s), 1, p.now);
      injected += 3;
    }
    return !p.poll(p.a).empty();
  }));
  EXPECT_GT(injected, 0u);
  EXPECT_EQ(src.bytes, dst.bytes);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_GE(st.stale_rx, injected);
  EXPECT_EQ(st.retransmits, 0u);
}

}  // namespace
}  // namespace mrc::engine::testing
