// Control packets that change requester state are validated against what is outstanding (PSN
// range, work request, EV, QP state), and a QP in ERR makes its peer fail promptly. Each test
// forges the packet an attacker who knows the QPN and the peer GID (plain-text control channel,
// a tap) would send, and checks that it changes nothing and is counted.
#include <random>

#include "reference-impl/engine/engine_test_util.h"
#include "reference-impl/engine/qp.h"

namespace mrc::engine::testing {
namespace {

using wire::PacketKind;

// Re-encodes a decoded frame after `edit` (headers recomputed from the opcode).
std::vector<std::byte> forge(const wire::DecodedFrame& d,
                             const std::function<void(wire::FrameSpec&)>& edit) {
  wire::FrameSpec s = d;
  s.headers = 0;
  edit(s);
  return wire::encode_frame(s);
}

QpState state_of(Side& s) {
  QpAttr a;
  MrcQpAttr m;
  EXPECT_TRUE(s.ep->query_qp(s.qpn, a, m).ok());
  return a.qp_state;
}

QpStats stats_of(Side& s) {
  QpStats st;
  EXPECT_TRUE(s.ep->qp_stats(s.qpn, st).ok());
  return st;
}

// Runs a write A -> B while `on_sack` may inject frames each time B's SACK reaches A.
std::vector<Wc> write_with_injection(Pair& p, Buffer& src, Buffer& dst, uint32_t len,
                                     const std::function<void(const wire::DecodedFrame&)>& on_sack,
                                     std::vector<wire::DecodedFrame>* data_seen = nullptr) {
  std::vector<wire::DecodedFrame> sacks;
  std::vector<std::vector<std::byte>> keep;  // the decoded frames point into these
  keep.reserve(100000);
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (!decode(f, d) || d.op == nullptr) return Verdict::kDeliver;
    keep.push_back(f.bytes);
    wire::DecodedFrame k;
    EXPECT_TRUE(wire::decode_frame(wire::as_bytes(keep.back()), k));
    if (!f.a_to_b && d.op->kind == PacketKind::kMrcSack) sacks.push_back(k);
    if (f.a_to_b && d.op->kind == PacketKind::kMrcData && data_seen) data_seen->push_back(k);
    return Verdict::kDeliver;
  };
  const Sge sge = src.sge(0, len);
  EXPECT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  std::vector<Wc> wcs;
  p.run([&] {
    while (!sacks.empty()) {
      const wire::DecodedFrame s = sacks.back();
      sacks.clear();
      on_sack(s);
    }
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return !wcs.empty();
  });
  p.hook = nullptr;
  return wcs;
}

TEST(Validation, SpoofedUnexpEventOutsideTheOutstandingRangeIsDroppedAndCounted) {
  Pair p(2, 21);
  Buffer src(*p.a.ep, 64 * 4096, 1);
  Buffer dst(*p.b.ep, 64 * 4096, 2);
  uint64_t injected = 0;
  const auto wcs = write_with_injection(p, src, dst, 64 * 4096, [&](const wire::DecodedFrame& s) {
    auto unexp = [&](uint32_t psn, uint32_t wev) {
      return forge(s, [&](wire::FrameSpec& f) {
        f.bth.opcode = 0xDD;
        f.bth.psn = psn;
        f.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kUnexpEvent);
        f.neth.nack_psn = psn;
        f.neth.entropy = wev;
      });
    };
    // Far ahead of anything sent, at the cumulative ACK (already acknowledged), and at an
    // outstanding PSN but with an entropy that is not the one its packet was sent on.
    const uint32_t cack = stats_of(p.a).cack_seen;  // what A has seen acknowledged
    p.a.ep->on_packet(unexp(wire::psn_add(cack, 5000), s.seth.entropy), 1, p.now);
    p.a.ep->on_packet(unexp(cack, s.seth.entropy), 1, p.now);
    p.a.ep->on_packet(unexp(wire::psn_add(cack, 1), 0xDEAD), 1, p.now);
    injected += 3;
  });
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(src.bytes, dst.bytes);
  EXPECT_EQ(state_of(p.a), QpState::kRts);
  ASSERT_GT(injected, 0u);
  EXPECT_EQ(stats_of(p.a).fatal_rejected, injected);
  EXPECT_GE(count_events(p.a, EventKind::kDrop, "reason", "unexp_event_not_outstanding"), 1u);
}

TEST(Validation, UnexpEventForAnOutstandingTransmissionStillFailsTheWorkRequest) {
  Pair p(2, 22);
  Buffer src(*p.a.ep, 64 * 4096, 3);
  Buffer dst(*p.b.ep, 64 * 4096, 4);
  std::vector<wire::DecodedFrame> data;
  bool sent = false;
  p.one_way_ns = 20'000;  // keep packets outstanding long enough to name one
  const auto wcs = write_with_injection(
      p, src, dst, 64 * 4096,
      [&](const wire::DecodedFrame& s) {
        if (sent || data.empty()) return;
        const wire::DecodedFrame& last = data.back();  // sent, not yet SACKed
        sent = true;
        p.a.ep->on_packet(forge(s,
                                [&](wire::FrameSpec& f) {
                                  f.bth.opcode = 0xDD;
                                  f.bth.psn = last.bth.psn;
                                  f.neth.nack_code = 0x19;
                                  f.neth.nack_psn = last.bth.psn;
                                  f.neth.entropy = wev_of(last);
                                }),
                          1, p.now);
      },
      &data);
  ASSERT_TRUE(sent);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemOpErr);
  EXPECT_EQ(state_of(p.a), QpState::kErr);
}

TEST(Validation, AethNakForAPsnNotYetSentIsIgnored) {
  QpParams params;
  params.mpr = 1;  // 128 PSNs in flight: most of the 1000-packet message is not sent yet
  params.mpr_dest = 1;
  Pair p(2, 23, params);
  Buffer src(*p.a.ep, 1000 * 4096, 5);
  Buffer dst(*p.b.ep, 1000 * 4096, 6);
  uint64_t injected = 0;
  const auto wcs = write_with_injection(p, src, dst, 1000 * 4096, [&](const wire::DecodedFrame& s) {
    // 200 PSNs past what A has seen acknowledged: beyond its 128-PSN window, so never sent, but
    // inside the message (a WR that is outstanding).
    const uint32_t psn = wire::psn_add(stats_of(p.a).cack_seen, 200);
    if (wire::psn_diff(psn, p.a.sq_psn) > 999) return;
    p.a.ep->on_packet(forge(s,
                            [&](wire::FrameSpec& f) {
                              f.bth.opcode = 0xD1;
                              f.bth.psn = psn;
                              f.aeth.syndrome = 0x62;  // remote access error
                            }),
                      1, p.now);
    ++injected;
  });
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_EQ(src.bytes, dst.bytes);
  ASSERT_GT(injected, 0u);
  EXPECT_GE(stats_of(p.a).fatal_rejected, 1u);
}

TEST(Validation, SackWithAnEntropyThatIsNotOneOfTheQpsChangesNothing) {
  Pair p(2, 24);  // dynamic MPR on: a believed SACK.mpr = 1 would shrink the window to 128
  Buffer src(*p.a.ep, 64 * 4096, 7);
  Buffer dst(*p.b.ep, 64 * 4096, 8);
  uint64_t injected = 0;
  const auto wcs = write_with_injection(p, src, dst, 64 * 4096, [&](const wire::DecodedFrame& s) {
    p.a.ep->on_packet(forge(s,
                            [&](wire::FrameSpec& f) {
                              f.seth.entropy = 0xBEEF;
                              f.seth.mpr = 1;
                              f.seth.port_status = 0x01;  // port 2 down
                            }),
                      1, p.now);
    ++injected;
  });
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  ASSERT_GT(injected, 0u);
  const QpStats st = stats_of(p.a);
  EXPECT_EQ(st.mpr_eff_psns, 8u * kMprUnitPsns);
  EXPECT_GE(st.stale_rx, injected);
  EXPECT_EQ(p.a.ep->stats().port_status_rejected, 0u);
}

// A replayed data packet (an attacker's old-psn flood, or a spurious resend) draws a SACK that
// acknowledges nothing new and echoes the replayed packet's old timestamp: NSCC must not take it
// as a delay sample, whatever delay that timestamp makes up (the window stays as it was).
TEST(Validation, SackToAReplayedDataPacketDoesNotDriveCongestionControl) {
  QpParams qp;
  qp.cc = "uet-1.0-nscc";
  Pair p(2, 25, qp);
  Buffer src(*p.a.ep, 16 * 4096, 9);
  Buffer dst(*p.b.ep, 16 * 4096, 10);
  const auto wcs = write_with_injection(p, src, dst, 16 * 4096, [](const wire::DecodedFrame&) {});
  ASSERT_EQ(wcs.size(), 1u);
  // The first data packet A sent, byte for byte (what the old-psn flood replays).
  const Frame* first = nullptr;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (f.a_to_b && decode(f, d) && d.op && d.op->kind == PacketKind::kMrcData) {
      first = &f;
      break;
    }
  }
  ASSERT_NE(first, nullptr);
  const Frame replayed = *first;
  p.run_idle(100'000);
  const QpStats before = stats_of(p.a);
  ASSERT_GT(before.last_rtt_ns, 0u);
  ASSERT_GT(before.cwnd_bytes, 0u);
  // Replays of the first data packet at several later times: each echoed timestamp is then
  // 0..8.4 ms (16-bit ticks of 128 ns) behind A's clock, as an attacker's would be.
  uint64_t replays = 0;
  for (uint64_t gap_ns : {1'000'000ull, 2'345'678ull, 8'300'000ull, 8'380'000ull}) {
    p.now += gap_ns;
    p.b.ep->on_packet(replayed.bytes, replayed.port, p.now);
    ++replays;
    p.run_idle(100'000);
  }
  const QpStats after = stats_of(p.a);
  EXPECT_GE(after.sacks_rx, before.sacks_rx + 1) << "B answered none of the replays";
  EXPECT_EQ(after.cwnd_bytes, before.cwnd_bytes);
  EXPECT_EQ(state_of(p.a), QpState::kRts);
  EXPECT_EQ(replays, 4u);
}

TEST(Validation, PortStatusThatDeniesItsOwnArrivalPlaneOrComesFromAStrangerIsNotApplied) {
  Pair p(2, 25);
  Buffer src(*p.a.ep, 4 * 4096, 9);
  Buffer dst(*p.b.ep, 4 * 4096, 10);
  auto wcs = write_with_injection(p, src, dst, 4096, [](const wire::DecodedFrame&) {});
  ASSERT_EQ(wcs.size(), 1u);
  // A template: any frame B sent to A.
  ASSERT_FALSE(p.log.empty());
  wire::DecodedFrame tmpl;
  const Frame* from_b = nullptr;
  for (const Frame& f : p.log)
    if (!f.a_to_b) from_b = &f;
  ASSERT_NE(from_b, nullptr);
  ASSERT_TRUE(decode(*from_b, tmpl));
  auto update = [&](const wire::Ipv6Addr& from, uint32_t mask, uint16_t req_id) {
    return forge(tmpl, [&](wire::FrameSpec& f) {
      f.bth.opcode = 0xD8;
      f.bth.dest_qp = wire::kEndpointOpQpn;
      f.bth.psn = req_id;
      f.ip6.src = from;
      f.erth.op = static_cast<uint8_t>(wire::EndpointOp::kPortStatusUpdate);
      f.erth.port_status_mask = mask;
    });
  };
  const EndpointStats s0 = p.a.ep->stats();
  // B's GID, arriving on plane 1, claiming B's plane 1 is down (only plane 2 up).
  p.a.ep->on_packet(update(p.b.ep->config().gid, 1u << 2, 1), 1, ++p.now);
  EXPECT_EQ(p.a.ep->stats().port_status_rejected, s0.port_status_rejected + 1);
  // 1000 strangers: answered (one response each, as MRP0 asks) but nothing stored.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1000; ++i) {
    wire::Ipv6Addr g = gid_of(0);
    for (int k = 2; k < 16; ++k) g[k] = static_cast<uint8_t>(rng());
    p.a.ep->on_packet(update(g, 1u << 1, static_cast<uint16_t>(i)), 1, ++p.now);
  }
  EXPECT_EQ(p.a.ep->stats().port_status_unknown_peer, s0.port_status_unknown_peer + 1000);
  // Plane 1 is still used toward B: a new write sprays over both planes.
  std::array<uint64_t, 3> per_plane{};
  p.hook = [&](Frame& f) {
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) ++per_plane[f.port];
    return Verdict::kDeliver;
  };
  const Sge sge = src.sge(0, 4 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 2, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_GT(per_plane[1], 0u);
  EXPECT_GT(per_plane[2], 0u);
}

TEST(Validation, PortStatusFromThePeerOnAnUpPlaneIsStillApplied) {
  // The positive control of the previous test: B's real update (plane 2 down, sent on plane 1)
  // moves A off plane 2.
  Pair p(2, 26);
  Buffer src(*p.a.ep, 8 * 4096, 11);
  Buffer dst(*p.b.ep, 8 * 4096, 12);
  ASSERT_TRUE(p.b.ep->set_port_state(2, false, p.now).ok());
  p.run_idle(100'000);
  std::array<uint64_t, 3> per_plane{};
  p.hook = [&](Frame& f) {
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) ++per_plane[f.port];
    return Verdict::kDeliver;
  };
  const Sge sge = src.sge(0, 8 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_GT(per_plane[1], 0u);
  EXPECT_EQ(per_plane[2], 0u);
  EXPECT_EQ(p.a.ep->stats().port_status_rejected, 0u);
}

// The responder's QP goes to ERR (a hostile WRITE it refused, or its application): the
// requester, even with unlimited retries, fails its work request at once with
// IBV_WC_REM_OP_ERR instead of probing until its application's stall timeout.
TEST(Validation, QpInErrorMakesThePeerFailPromptlyWithRemoteOperationalError) {
  QpParams params;
  params.exp_cnt = kUnlimitedExpRetry;
  Pair p(2, 27, params);
  Buffer src(*p.a.ep, 16 * 4096, 13);
  Buffer dst(*p.b.ep, 16 * 4096, 14);
  QpAttr at;
  at.qp_state = QpState::kErr;
  ASSERT_TRUE(p.b.ep->modify_qp(p.b.qpn, at, kQpState, MrcQpAttr{}, 0).ok());
  const uint64_t t0 = p.now;
  const Sge sge = src.sge(0, 16 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, dst.addr(), dst.mr.rkey).ok());
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run(
      [&] {
        auto w = p.poll(p.a);
        wcs.insert(wcs.end(), w.begin(), w.end());
        return !wcs.empty();
      },
      10'000'000));
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRemOpErr);
  EXPECT_LT(p.now - t0, 100'000u) << "not within a few round trips";
  EXPECT_EQ(state_of(p.a), QpState::kErr);
  EXPECT_GE(stats_of(p.b).error_naks_sent, 1u);
}

TEST(Validation, AQpInErrorAnswersAFloodWithABoundedNumberOfNaks) {
  Pair p(2, 28);
  Buffer src(*p.a.ep, 4 * 4096, 15);
  Buffer dst(*p.b.ep, 4 * 4096, 16);
  auto wcs = write_with_injection(p, src, dst, 4096, [](const wire::DecodedFrame&) {});
  ASSERT_EQ(wcs.size(), 1u);
  const Frame* data = nullptr;
  for (const Frame& f : p.log)
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) data = &f;
  ASSERT_NE(data, nullptr);
  QpAttr at;
  at.qp_state = QpState::kErr;
  ASSERT_TRUE(p.b.ep->modify_qp(p.b.qpn, at, kQpState, MrcQpAttr{}, 0).ok());
  // 10,000 copies in 1 ms: at most the burst plus one per interval may be answered.
  const EndpointConfig& cfg = p.b.ep->config();
  uint64_t t = p.now + 1000;
  const uint64_t t0 = t;
  TxPacket out;
  uint64_t replies = 0;
  for (int i = 0; i < 10'000; ++i) {
    t += 100;
    p.b.ep->on_packet(data->bytes, data->port, t);
    while (p.b.ep->poll_tx(t, out)) ++replies;
  }
  const uint64_t bound = cfg.error_nak_burst + (t - t0) / cfg.error_nak_interval_ns + 1;
  const QpStats st = stats_of(p.b);
  EXPECT_GE(replies, 1u);
  EXPECT_LE(replies, bound);
  EXPECT_EQ(st.error_naks_sent, replies);
  EXPECT_EQ(st.error_naks_sent + st.error_naks_limited, 10'000u);
}

// A flood of bad frames must not fill the disk through the event log: drop events are
// sampled, and the ones written say how many were left out, so the counts stay exact.
TEST(Flood, DropEventsAreSampledWithCountsSoTheEventLogStaysSmall) {
  Pair p(2, 29);
  Buffer src(*p.a.ep, 4 * 4096, 17);
  Buffer dst(*p.b.ep, 4 * 4096, 18);
  auto wcs = write_with_injection(p, src, dst, 4096, [](const wire::DecodedFrame&) {});
  ASSERT_EQ(wcs.size(), 1u);
  std::vector<std::byte> bad;
  for (const Frame& f : p.log)
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) bad = f.bytes;
  ASSERT_FALSE(bad.empty());
  bad[bad.size() - 10] ^= std::byte{0xFF};  // payload byte: the ICRC no longer matches
  const size_t events0 = p.b.events.size();
  const size_t log0 = p.b.jsonl.size();
  const EndpointConfig& cfg = p.b.ep->config();
  // 100,000 frames over 10 s (10k/s): the log may hold the burst plus one per interval.
  constexpr uint64_t kFrames = 100'000;
  uint64_t t = p.now + 1000;
  const uint64_t t0 = t;
  for (uint64_t i = 0; i < kFrames; ++i) {
    t += 100'000;
    p.b.ep->on_packet(bad, 1, t);
  }
  EXPECT_EQ(p.b.ep->stats().rx_bad_icrc, kFrames);
  uint64_t logged = 0, suppressed_in_log = 0;
  for (size_t i = events0; i < p.b.events.size(); ++i) {
    const Event& e = p.b.events[i];
    if (e.kind != EventKind::kDrop) continue;
    ++logged;
    if (const EventField* f = e.find("suppressed")) suppressed_in_log += f->u;
  }
  const uint64_t bound = cfg.drop_event_burst + (t - t0) / cfg.drop_event_interval_ns + 1;
  EXPECT_LE(logged, bound);
  EXPECT_GE(logged, bound / 2);  // sampled, not silenced
  EXPECT_EQ(logged + p.b.ep->stats().drop_events_suppressed, kFrames);
  // Every suppressed drop but those after the last event written is accounted for in the log.
  EXPECT_LE(suppressed_in_log, p.b.ep->stats().drop_events_suppressed);
  EXPECT_GE(suppressed_in_log + 10'000 / 100, p.b.ep->stats().drop_events_suppressed);
  EXPECT_LT(p.b.jsonl.size() - log0, 200'000u) << "event log bytes for 100k bad frames";
}

// Duplicates of a placed PSN and EV-probe requests need nothing secret to forge: a flood of
// them gets a bounded number of replies, per QP and per source node.
TEST(Flood, RepliesToDuplicatesAndEndpointRequestsAreRateLimited) {
  Pair p(2, 30);
  Buffer src(*p.a.ep, 4 * 4096, 19);
  Buffer dst(*p.b.ep, 4 * 4096, 20);
  auto wcs = write_with_injection(p, src, dst, 4096, [](const wire::DecodedFrame&) {});
  ASSERT_EQ(wcs.size(), 1u);
  std::vector<std::byte> dup;
  for (const Frame& f : p.log)
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) dup = f.bytes;
  ASSERT_FALSE(dup.empty());
  const EndpointConfig& cfg = p.b.ep->config();
  TxPacket out;
  constexpr uint64_t kFrames = 10'000;
  auto flood = [&](const std::vector<std::byte>& fr) {
    uint64_t replies = 0;
    const uint64_t t0 = p.now + 1'000'000;
    uint64_t t = t0;
    for (uint64_t i = 0; i < kFrames; ++i) {
      t += 1'000;  // 1 M frames/s for 10 ms
      p.b.ep->on_packet(fr, 1, t);
      while (p.b.ep->poll_tx(t, out)) ++replies;
    }
    p.now = t;
    return std::make_pair(replies, t - t0);
  };
  // 1. Duplicates of a placed PSN: one SACK (and a transport ACK) per allowed reply.
  const auto [dup_replies, dup_ns] = flood(dup);
  const QpStats st = stats_of(p.b);
  const uint64_t qp_bound = cfg.reply_burst + dup_ns / cfg.reply_interval_ns + 1;
  EXPECT_GE(st.duplicates_rx, kFrames);
  EXPECT_GE(st.replies_limited, kFrames - qp_bound);
  EXPECT_LE(dup_replies, 2 * qp_bound);
  EXPECT_GE(dup_replies, qp_bound / 2);  // limited, not silenced
  // 2. EV-probe requests from a stranger, then from the QP's peer: separate buckets.
  wire::DecodedFrame d;
  ASSERT_TRUE(wire::decode_frame(wire::as_bytes(dup), d));
  auto ev_probe = [&](const wire::Ipv6Addr& from) {
    return forge(d, [&](wire::FrameSpec& f) {
      f.bth.opcode = 0xD8;
      f.bth.dest_qp = wire::kEndpointOpQpn;
      f.bth.psn = 7;
      f.ip6.src = from;
      f.erth.op = static_cast<uint8_t>(wire::EndpointOp::kEvProbe);
      f.payload = {};
    });
  };
  wire::Ipv6Addr stranger = gid_of(77);
  const EndpointStats e0 = p.b.ep->stats();
  const auto [stranger_replies, s_ns] = flood(ev_probe(stranger));
  EXPECT_EQ(p.b.ep->stats().ep_requests_rx, e0.ep_requests_rx + kFrames);
  EXPECT_LE(stranger_replies, cfg.ep_reply_burst + s_ns / cfg.ep_reply_stranger_interval_ns + 1);
  EXPECT_GE(stranger_replies, 1u);
  const auto [peer_replies, p_ns] = flood(ev_probe(p.a.ep->config().gid));
  EXPECT_LE(peer_replies, cfg.ep_reply_burst + p_ns / cfg.ep_reply_interval_ns + 1);
  EXPECT_GT(peer_replies, stranger_replies);  // the peer's own bucket, not the strangers'
  EXPECT_EQ(p.b.ep->stats().ep_responses_limited,
            e0.ep_responses_limited + 2 * kFrames - stranger_replies - peer_replies);
}

TEST(Flood, ProbeSacksHaveABucketOfTheirOwn) {
  // A tight bucket for duplicates (as `mrct endpoint` sets) must not silence the answers to
  // reliability probes, which EV recovery needs at a rate that grows with the EVs retired.
  QpParams prm;
  prm.tune = [](EndpointConfig& c) {
    c.reply_burst = 2;
    c.reply_interval_ns = 1'000'000'000;
  };
  Pair p(2, 32, prm);
  Buffer src(*p.a.ep, 4 * 4096, 21);
  Buffer dst(*p.b.ep, 4 * 4096, 22);
  ASSERT_EQ(write_with_injection(p, src, dst, 4096, [](const wire::DecodedFrame&) {}).size(), 1u);
  std::vector<std::byte> dup;
  for (const Frame& f : p.log)
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) dup = f.bytes;
  ASSERT_FALSE(dup.empty());
  wire::DecodedFrame d;
  ASSERT_TRUE(wire::decode_frame(wire::as_bytes(dup), d));
  TxPacket out;
  auto answers = [&](auto make, uint64_t n) {
    uint64_t replies = 0;
    for (uint64_t i = 0; i < n; ++i) {
      p.now += 1'000;
      p.b.ep->on_packet(make(i), 1, p.now);
      while (p.b.ep->poll_tx(p.now, out)) ++replies;
    }
    return replies;
  };
  const uint64_t dup_replies = answers([&](uint64_t) { return dup; }, 100);
  EXPECT_LE(dup_replies, 2u * 2);  // a SACK and a transport ACK per allowed reply
  const uint64_t probe_replies = answers(
      [&](uint64_t i) {
        return forge(d, [&](wire::FrameSpec& f) {
          f.bth.opcode = static_cast<uint8_t>(wire::Opcode::kReliabilityProbe);
          f.bth.ts = false;
          f.peth = wire::Peth{};
          f.peth.probe_id = static_cast<uint16_t>(i);
          f.payload = {};
        });
      },
      100);
  EXPECT_EQ(probe_replies, 100u);
  EXPECT_GE(stats_of(p.b).replies_limited, 100u - 2);
}

TEST(TokenBucket, BurstThenOnePerInterval) {
  TokenBucket b;
  b.configure(3, 1000);
  uint64_t t = 5000;
  EXPECT_TRUE(b.take(t));
  EXPECT_TRUE(b.take(t));
  EXPECT_TRUE(b.take(t));
  EXPECT_FALSE(b.take(t));
  EXPECT_FALSE(b.take(t + 999));
  EXPECT_TRUE(b.take(t + 1000));
  EXPECT_FALSE(b.take(t + 1500));
  EXPECT_TRUE(b.take(t + 2000));
  // A long quiet spell refills to the burst, not beyond.
  t += 1'000'000;
  int n = 0;
  while (n < 100 && b.take(t)) ++n;
  EXPECT_EQ(n, 3);
  TokenBucket unlimited;
  unlimited.configure(0, 0);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(unlimited.take(1));
}

}  // namespace
}  // namespace mrc::engine::testing
