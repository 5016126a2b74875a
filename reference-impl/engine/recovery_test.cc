// Loss recovery and path management between two endpoints: timeout, SACK gap and trim NACK
// retransmission, EV retirement and probe recovery, retry exhaustion, ECN, duplicates, lost
// transport ACKs, corrupted packets, port status, endpoint operations, NSCC.
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "reference-impl/engine/engine_test_util.h"

namespace mrc::engine::testing {
namespace {

using wire::PacketKind;

struct Sent {
  uint64_t t_ns;
  uint32_t psn;
  uint32_t wev;
  bool rtx;
  uint8_t dscp;
  uint8_t port;
};

// Every data packet A sent, in order.
std::vector<Sent> data_sent(const Pair& p) {
  std::vector<Sent> out;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b || !decode(f, d) || d.op->kind != PacketKind::kMrcData) continue;
    out.push_back({f.sent_ns, d.bth.psn, wev_of(d), d.bth.rtx, d.dscp(), f.port});
  }
  return out;
}

bool data_psn(const Frame& f, uint32_t psn, bool rtx) {
  wire::DecodedFrame d;
  return f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcData && d.bth.psn == psn &&
         d.bth.rtx == rtx;
}

// A copy: the event vector grows while the pair keeps running.
std::optional<Event> find_event(const Side& s, EventKind k, std::string_view key,
                                std::string_view value) {
  for (const Event& e : s.events) {
    if (e.kind != k) continue;
    const EventField* f = e.find(key);
    if (f != nullptr && f->type == EventField::Type::kStr && f->s == value) return e;
  }
  return std::nullopt;
}

struct Transfer {
  Buffer src;
  Buffer dst;
  Transfer(Pair& p, size_t len, uint8_t seed)
      : src(*p.a.ep, len, seed), dst(*p.b.ep, len, seed + 1) {}
  void post(Pair& p, uint64_t wr_id, size_t off, uint32_t len) {
    const Sge sge = src.sge(off, len);
    ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, wr_id, {&sge, 1}, dst.addr(off), dst.mr.rkey).ok());
  }
  bool exact() const { return src.bytes == dst.bytes; }
};

QpParams fast_timeout() {
  QpParams qp;
  qp.timeout = 4;  // T = 16.384 us
  return qp;
}

TEST(Recovery, TailLossIsRetransmittedAfterTimeoutOnAFreshEvWithRtx) {
  Pair p(2, 1, fast_timeout());
  Transfer t(p, 8 * 4096, 1);
  const uint32_t last = wire::psn_add(p.a.sq_psn, 7);
  p.hook = [&](Frame& f) { return data_psn(f, last, false) ? Verdict::kDrop : Verdict::kDeliver; };
  t.post(p, 1, 0, 8 * 4096);
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return !wcs.empty();
  }));
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(t.exact());
  const auto sent = data_sent(p);
  ASSERT_EQ(sent.size(), 9u);
  const Sent& orig = sent[7];
  const Sent& rtx = sent[8];
  EXPECT_EQ(orig.psn, last);
  EXPECT_FALSE(orig.rtx);
  EXPECT_EQ(rtx.psn, last);
  EXPECT_TRUE(rtx.rtx);
  EXPECT_NE(rtx.wev, orig.wev);  // fresh EV
  EXPECT_EQ(rtx.dscp, wire::mrp0().dscp().trimmable_retx);
  const uint64_t T = 1024ull << 4;
  EXPECT_GE(rtx.t_ns - orig.t_ns, T);
  EXPECT_LT(rtx.t_ns - orig.t_ns, 2 * T);
  const std::optional<Event> e = find_event(p.a, EventKind::kRetransmit, "cause", "timeout");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->find("psn")->u, last);
  EXPECT_EQ(e->find("old_wev")->u, orig.wev);
  // The EV that lost a packet without a trim is retired.
  const std::optional<Event> ev = find_event(p.a, EventKind::kEvState, "reason", "timeout");
  ASSERT_TRUE(ev.has_value());
  EXPECT_EQ(ev->find("wev")->u, orig.wev);
  EXPECT_EQ(ev->find("to")->s, "ASSUMED_BAD");
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.rtx_timeout, 1u);
  EXPECT_EQ(st.retransmits, 1u);
  // The event log as JSON lines: one object per line, the same story.
  std::istringstream in(p.a.jsonl);
  std::string line;
  size_t lines = 0, rtx_lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    ++lines;
    EXPECT_EQ(j["node"], "a");
    if (j["kind"] == "retransmit") {
      ++rtx_lines;
      EXPECT_EQ(j["cause"], "timeout");
      EXPECT_EQ(j["psn"], last);
      EXPECT_EQ(j["wev"], rtx.wev);
    }
  }
  EXPECT_EQ(lines, p.a.events.size());
  EXPECT_EQ(rtx_lines, 1u);
}

TEST(Recovery, MiddleLossIsRetransmittedOnSackGapEvidenceBeforeTimeout) {
  Pair p(2, 2, fast_timeout());
  Transfer t(p, 32 * 4096, 3);
  const uint32_t victim = wire::psn_add(p.a.sq_psn, 2);
  p.hook = [&](Frame& f) {
    return data_psn(f, victim, false) ? Verdict::kDrop : Verdict::kDeliver;
  };
  t.post(p, 1, 0, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  const auto sent = data_sent(p);
  auto it = std::find_if(sent.begin(), sent.end(), [](const Sent& s) { return s.rtx; });
  ASSERT_NE(it, sent.end());
  EXPECT_EQ(it->psn, victim);
  EXPECT_LT(it->t_ns, 1024ull << 4);  // well before the ACK timeout
  EXPECT_TRUE(find_event(p.a, EventKind::kRetransmit, "cause", "sack_gap").has_value());
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.rtx_sack_gap, 1u);
  EXPECT_EQ(st.rtx_timeout, 0u);
}

// A receive ring drained in one go after this process was not scheduled for a while: the
// SACKs that show a hole come before the SACK, further down the ring, that fills it. Judged SACK
// by SACK, the hole (older than the reordering window by then) is lost on the first SACKs and
// its EV retired, and the filling SACK then cancels the resend before it leaves: one EV retired,
// nothing resent, as the runtime's fault-free all-to-all did in about 1 run of 7. Judged at the
// end of the batch, nothing is lost. Timeline: PSN 1 of a first write is delayed (70 us) while
// the rest of it (2 us) and a second write sent at 60 us arrive; A reads every SACK at 75 us.
struct BatchOutcome {
  size_t sack_gap_retirements = 0;
  uint64_t rtx_sack_gap = 0;
  uint64_t retransmits = 0;
  size_t gap_sacks = 0;
  size_t fill_sacks = 0;
};

BatchOutcome sack_batch_case(bool batch) {
  BatchOutcome out;
  QpParams params = fast_timeout();
  // B SACKs every packet: the held packet's own SACK is the one that fills the hole.
  params.tune = [](EndpointConfig& c) { c.ack_gen_trigger_bytes = 1; };
  Pair p(1, 11, params);
  Transfer t(p, 12 * 4096, 9);
  std::vector<Frame> to_b, to_a;
  p.hook = [&](Frame& f) {
    (f.a_to_b ? to_b : to_a).push_back(f);
    return Verdict::kDrop;  // delivered by hand below
  };
  // B gets `frames` at `at`; its answers (SACKs, after any coalescing timer within 1 us) are
  // returned.
  auto to_responder = [&](const std::vector<Frame>& frames, uint64_t at) {
    p.now = at;
    to_a.clear();
    for (const Frame& f : frames) p.b.ep->on_packet(f.bytes, f.port, p.now);
    p.pump();
    while (p.b.ep->next_deadline_ns() <= at + 1'000) {
      p.now = std::max(p.now, p.b.ep->next_deadline_ns());
      p.b.ep->on_timer(p.now);
      p.pump();
    }
    std::vector<Frame> answers;
    for (const Frame& f : to_a)
      if (is_kind(f, PacketKind::kMrcSack)) answers.push_back(f);
    return answers;
  };
  const uint32_t victim = wire::psn_add(p.a.sq_psn, 1);
  auto data_of = [&](bool want_victim) {
    std::vector<Frame> v;
    for (const Frame& f : to_b)
      if (is_kind(f, PacketKind::kMrcData) && data_psn(f, victim, false) == want_victim)
        v.push_back(f);
    return v;
  };
  t.post(p, 1, 0, 4 * 4096);
  p.pump();
  EXPECT_EQ(data_of(false).size(), 3u);
  const std::vector<Frame> held = data_of(true);
  EXPECT_EQ(held.size(), 1u);
  // The first write's SACKs reach A on time: its RTT is a few microseconds.
  for (const Frame& f : to_responder(data_of(false), 2'000)) p.a.ep->on_packet(f.bytes, 1, 4'000);
  to_b.clear();
  p.now = 60'000;
  t.post(p, 2, 4 * 4096, 8 * 4096);
  p.pump();
  EXPECT_EQ(data_of(false).size(), 8u);
  const std::vector<Frame> gap = to_responder(data_of(false), 62'000);
  const std::vector<Frame> fill = to_responder(held, 70'000);
  out.gap_sacks = gap.size();
  out.fill_sacks = fill.size();
  // A was not scheduled from 5 us to 75 us: every SACK is in its ring.
  p.now = 75'000;
  if (batch) p.a.ep->begin_rx_batch();
  for (const std::vector<Frame>* v : {&gap, &fill})
    for (const Frame& f : *v) p.a.ep->on_packet(f.bytes, f.port, p.now);
  if (batch) p.a.ep->end_rx_batch(p.now);
  p.pump();
  out.sack_gap_retirements = count_events(p.a, EventKind::kEvState, "reason", "sack_gap");
  QpStats st;
  EXPECT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  out.rtx_sack_gap = st.rtx_sack_gap;
  out.retransmits = st.retransmits;
  return out;
}

TEST(Recovery, SacksReadInOneBatchJudgeAHoleOnlyAfterTheSackThatFillsIt) {
  const BatchOutcome b = sack_batch_case(true);
  ASSERT_GE(b.gap_sacks, 1u);
  ASSERT_GE(b.fill_sacks, 1u);
  EXPECT_EQ(b.sack_gap_retirements, 0u);
  EXPECT_EQ(b.rtx_sack_gap, 0u);
  EXPECT_EQ(b.retransmits, 0u);
  // The same frames judged one by one (no batch): the hole is lost on the SACKs before the one
  // that fills it, a working EV is retired. This is what the batch prevents, and it shows the
  // case reaches the SACK-gap rule at all.
  const BatchOutcome u = sack_batch_case(false);
  EXPECT_GE(u.sack_gap_retirements, 1u);
  EXPECT_EQ(u.retransmits, 0u);  // the filling SACK came before the resend left
}

void trim_test(uint8_t dscp, uint8_t expect_code) {
  Pair p(2, 3, fast_timeout());
  Transfer t(p, 16 * 4096, 5);
  const uint32_t victim = wire::psn_add(p.a.sq_psn, 3);
  uint32_t victim_wev = 0;
  p.hook = [&](Frame& f) {
    if (data_psn(f, victim, false)) {
      wire::DecodedFrame d;
      decode(f, d);
      victim_wev = wev_of(d);
      f.bytes = trim_frame(f.bytes, dscp);
    }
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 16 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  // The responder NACKed exactly that PSN, echoing its EV.
  std::vector<wire::DecodedFrame> nacks;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcNack) nacks.push_back(d);
  }
  ASSERT_EQ(nacks.size(), 1u);
  EXPECT_EQ(nacks[0].neth.nack_code, expect_code);
  EXPECT_EQ(nacks[0].neth.nack_psn, victim);
  EXPECT_EQ(nacks[0].bth.psn, victim);
  EXPECT_EQ(nacks[0].neth.entropy, victim_wev);
  EXPECT_EQ(nacks[0].dscp(), wire::mrp0().dscp().control);
  const auto sent = data_sent(p);
  auto it = std::find_if(sent.begin(), sent.end(), [](const Sent& s) { return s.rtx; });
  ASSERT_NE(it, sent.end());
  EXPECT_EQ(it->psn, victim);
  EXPECT_NE(it->wev, victim_wev);
  EXPECT_EQ(std::count_if(sent.begin(), sent.end(), [](const Sent& s) { return s.rtx; }), 1);
  // A trim is congestion, not failure: never ASSUMED_BAD.
  for (const Event& e : p.a.events)
    if (e.kind == EventKind::kEvState) {
      EXPECT_NE(e.find("to")->s, "ASSUMED_BAD");
    }
  QpStats rst;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, rst).ok());
  EXPECT_EQ(rst.trimmed_rx, 1u);
  EXPECT_EQ(rst.nacks_sent, 1u);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.rtx_nack, 1u);
  if (expect_code == 0x01) {
    const std::optional<Event> e = find_event(p.a, EventKind::kEvState, "reason", "nack_trimmed");
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->find("wev")->u, victim_wev);
    EXPECT_EQ(e->find("to")->s, "SKIP");
  } else {
    EXPECT_EQ(count_events(p.a, EventKind::kEvState), 0u);  // last-hop trims carry no penalty
  }
}

TEST(Recovery, TrimmedPacketIsNackedAndRetransmittedEvSkipped) {
  trim_test(wire::mrp0().dscp().trimmed, 0x01);
}

TEST(Recovery, LastHopTrimIsNackedWithoutEvPenalty) {
  trim_test(wire::mrp0().dscp().trimmed_lasthop, 0x02);
}

TEST(Recovery, BlackholedEvIsRetiredProbedAndRecovered) {
  QpParams qp = fast_timeout();
  qp.ev = make_ev_profile(8, 0, 1);
  Pair p(2, 4, qp);
  Transfer t(p, 256 * 4096, 7);
  uint32_t victim = 0;
  bool have_victim = false;
  bool blackhole = true;
  size_t probes_dropped = 0;
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (!f.a_to_b || !decode(f, d)) return Verdict::kDeliver;
    const uint32_t w = wev_of(d);
    if (!have_victim && d.op->kind == PacketKind::kMrcData) {
      victim = w;
      have_victim = true;
    }
    if (blackhole && have_victim && w == victim) {
      if (d.op->kind == PacketKind::kMrcProbe) ++probes_dropped;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 128 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  // Let a few probe periods pass while still broken.
  p.run_idle(60'000);
  const std::optional<Event> bad = find_event(p.a, EventKind::kEvState, "to", "ASSUMED_BAD");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->find("wev")->u, victim);
  EXPECT_GE(probes_dropped, 2u);
  EXPECT_EQ(count_events(p.a, EventKind::kEvState, "reason", "probes_good"), 0u);
  {
    // No data went out on the retired EV after it was retired.
    const uint64_t retired_at = bad->t_ns;
    for (const Sent& s : data_sent(p)) EXPECT_FALSE(s.t_ns > retired_at && s.wev == victim);
  }

  // Repair the path: three consecutive good probe SACKs bring the EV back.
  blackhole = false;
  const size_t log_mark = p.log.size();
  p.run_idle(100'000);
  const std::optional<Event> good = find_event(p.a, EventKind::kEvState, "reason", "probes_good");
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(good->find("wev")->u, victim);
  EXPECT_EQ(good->find("to")->s, "GOOD");
  size_t probe_sacks = 0;
  for (size_t i = log_mark; i < p.log.size(); ++i) {
    wire::DecodedFrame d;
    if (!p.log[i].a_to_b && decode(p.log[i], d) && d.op->kind == PacketKind::kMrcSack &&
        d.seth.pr) {
      ++probe_sacks;
      EXPECT_EQ(d.seth.entropy, victim);
    }
  }
  EXPECT_EQ(probe_sacks, 3u);  // K_RECOVER = 3, then probing stops
  // Probes consumed no PSN: the next message continues right after the first one.
  t.post(p, 2, 128 * 4096, 128 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  bool victim_used_again = false;
  uint32_t max_psn_off = 0;
  for (const Sent& s : data_sent(p)) {
    if (s.t_ns >= good->t_ns && s.wev == victim) victim_used_again = true;
    max_psn_off = std::max(max_psn_off, wire::psn_diff(s.psn, p.a.sq_psn));
  }
  EXPECT_TRUE(victim_used_again);
  EXPECT_EQ(max_psn_off, 255u);
}

TEST(Recovery, RetryExhaustionFollowsLinearThenExponentialScheduleAndErrorsTheQp) {
  QpParams qp;
  qp.timeout = 4;
  qp.linear_cnt = 2;
  qp.exp_cnt = 2;
  qp.ev = make_ev_profile(8, 0, 2);
  Pair p(2, 5, qp);
  Transfer t(p, 8192, 9);
  p.hook = [&](Frame& f) { return f.a_to_b ? Verdict::kDrop : Verdict::kDeliver; };
  t.post(p, 1, 0, 4096);
  t.post(p, 2, 4096, 4096);
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return wcs.size() == 2;
  }));
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].wr_id, 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  EXPECT_EQ(wcs[1].wr_id, 2u);
  EXPECT_EQ(wcs[1].status, WcStatus::kWrFlushErr);
  QpAttr attr;
  MrcQpAttr mrc;
  ASSERT_TRUE(p.a.ep->query_qp(p.a.qpn, attr, mrc).ok());
  EXPECT_EQ(attr.qp_state, QpState::kErr);
  // Transmissions of the first PSN: original, then retries at T, 2T, 3T (linear), 5T, and the
  // QP errors at 9T when retry 5 would exceed linear_cnt + exp_cnt = 4.
  const uint64_t T = 1024ull << 4;
  std::vector<uint64_t> times;
  for (const Sent& s : data_sent(p))
    if (s.psn == p.a.sq_psn) times.push_back(s.t_ns);
  ASSERT_EQ(times.size(), 5u);
  const uint64_t t0 = times[0];
  EXPECT_EQ(times[1] - t0, T);
  EXPECT_EQ(times[2] - t0, 2 * T);
  EXPECT_EQ(times[3] - t0, 3 * T);
  EXPECT_EQ(times[4] - t0, 5 * T);
  const std::optional<Event> err = find_event(p.a, EventKind::kQpState, "to", "ERR");
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(err->find("reason")->s, "retry_exceeded");
  EXPECT_EQ(err->t_ns - t0, 9 * T);
  // Retransmissions used distinct EVs each time, and the floor kept ev_min_active EVs.
  std::set<uint32_t> wevs;
  for (const Sent& s : data_sent(p))
    if (s.psn == p.a.sq_psn) wevs.insert(s.wev);
  EXPECT_EQ(wevs.size(), 5u);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.ev_good + st.ev_skip, 2u);
  EXPECT_GT(st.ev_demotions_refused, 0u);
  // Nothing reached B's memory.
  Buffer fresh(*p.b.ep, 8192, 10);
  EXPECT_EQ(t.dst.bytes, fresh.bytes);
}

// A responder that says nothing for 3T (its process not scheduled, as on a loaded host): every
// SACK it owes A comes out at once at 3T. Returns A's stats; `grace_ns` is A's (and B's)
// silent_peer_grace_ns.
QpStats run_silent_peer(uint64_t grace_ns, Pair*& out, std::unique_ptr<Pair>& keep) {
  QpParams qp = fast_timeout();
  qp.ev = make_ev_profile(8, 0, 1);
  qp.tune = [grace_ns](EndpointConfig& c) { c.silent_peer_grace_ns = grace_ns; };
  keep = std::make_unique<Pair>(2, 21, qp);
  Pair& p = *keep;
  out = &p;
  const uint64_t T = 1024ull << 4;
  const uint64_t wake = 3 * T;
  p.hook = [&p, wake](Frame& f) {
    p.one_way_ns = !f.a_to_b && p.now < wake ? wake - p.now : 2'000;
    return Verdict::kDeliver;
  };
  Transfer t(p, 16 * 4096, 3);
  t.post(p, 1, 0, 16 * 4096);
  EXPECT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  QpStats st;
  EXPECT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  return st;
}

TEST(Recovery, SilentPeerHoldsTheFirstTimeoutAndRetiresNoEv) {
  const uint64_t T = 1024ull << 4;
  std::unique_ptr<Pair> keep;
  Pair* p = nullptr;
  // Without the grace the 3T silence times out every packet in flight and retires their EVs:
  // what the ci-fast suite saw under a busy loop.
  const QpStats strict = run_silent_peer(0, p, keep);
  EXPECT_GT(strict.rtx_timeout, 0u);
  EXPECT_GT(count_events(p->a, EventKind::kEvState, "reason", "timeout"), 0u);
  EXPECT_EQ(strict.silent_peer_holds, 0u);
  // With a grace longer than the silence nothing is resent and no EV retired: the answers that
  // end the silence acknowledge everything.
  const QpStats held = run_silent_peer(10 * T, p, keep);
  EXPECT_EQ(held.rtx_timeout, 0u);
  EXPECT_EQ(held.retransmits, 0u);
  EXPECT_EQ(count_events(p->a, EventKind::kEvState, "reason", "timeout"), 0u);
  EXPECT_EQ(held.silent_peer_holds, 1u);
  // A grace shorter than the silence only delays the timeout: the EVs are retired at T + grace.
  const QpStats short_grace = run_silent_peer(T / 2, p, keep);
  EXPECT_GT(short_grace.rtx_timeout, 0u);
  const std::optional<Event> ev = find_event(p->a, EventKind::kEvState, "reason", "timeout");
  ASSERT_TRUE(ev.has_value());
  const std::vector<Sent> sent = data_sent(*p);
  ASSERT_FALSE(sent.empty());
  EXPECT_EQ(ev->t_ns - sent.front().t_ns, T + T / 2);
}

TEST(Recovery, SilentPeerGraceDoesNotDelayATimeoutWhileOtherEvsDeliver) {
  // One EV loses every data packet, the peer keeps answering (SACKs for the other EVs, then
  // the tail probe): the timeout is path evidence and fires at T, grace or not. The SACK gap
  // would find the lost packets first (and retire the EV) and the timer would never be tested:
  // here it finds no loss (a threshold above the transfer's packet count) and retires nothing,
  // so only the timer can, and an engine that held every first timeout for the grace (100 T)
  // would retire the EV at 101 T. Probes pass: a tail probe on that EV must not leave the peer
  // silent at T, which would make the hold right.
  const uint64_t T = 1024ull << 4;
  QpParams qp = fast_timeout();
  qp.ev = make_ev_profile(8, 0, 1);
  qp.tune = [T](EndpointConfig& c) {
    c.silent_peer_grace_ns = 100 * T;
    c.sack_gap_threshold = 1000;  // x planes, clamped to 64 > the 16 packets sent
    c.retire_ev_on_sack_gap = false;
  };
  Pair p(2, 4, qp);
  Transfer t(p, 16 * 4096, 7);
  uint32_t victim = 0;
  bool have_victim = false;
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (!f.a_to_b || !decode(f, d)) return Verdict::kDeliver;
    const uint32_t w = wev_of(d);
    if (!have_victim && d.op->kind == PacketKind::kMrcData) {
      victim = w;
      have_victim = true;
    }
    return have_victim && w == victim && d.op->kind == PacketKind::kMrcData ? Verdict::kDrop
                                                                            : Verdict::kDeliver;
  };
  t.post(p, 1, 0, 16 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  const std::optional<Event> bad = find_event(p.a, EventKind::kEvState, "to", "ASSUMED_BAD");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->find("wev")->u, victim);
  EXPECT_EQ(bad->find("reason")->s, "timeout");
  const std::vector<Sent> sent = data_sent(p);
  ASSERT_FALSE(sent.empty());
  // The first packet (on the victim) times out at T exactly: the peer answered the others.
  EXPECT_EQ(bad->t_ns - sent.front().t_ns, T);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_GT(st.rtx_timeout, 0u);
  EXPECT_EQ(st.rtx_sack_gap, 0u);
  EXPECT_EQ(st.silent_peer_holds, 0u);
}

// What all-to-all under a busy loop showed (QP 259, seed 2): the peer answered the first
// packets of a burst, then nothing for longer than T (its process, or the host's packet
// processing, not scheduled). Its last answer came after the rest of the burst had left, so the
// silence was counted from the tail probe at T/2 and was not T/2 long yet when the rest timed
// out at T: the hold did not apply, the timeouts resent and retired the EVs. Nothing sent after
// those packets had been answered on any EV. `stall_ns`: until then everything A sends after
// the first `answered` data packets (the rest of the burst, probes, resends) reaches B only at
// `stall_ns`. `grace_ns` is A's and B's silent_peer_grace_ns.
QpStats run_stalled_tail(uint32_t answered, uint64_t stall_ns, uint64_t grace_ns, Pair*& out,
                         std::unique_ptr<Pair>& keep) {
  QpParams qp = fast_timeout();
  qp.ev = make_ev_profile(8, 0, 1);
  qp.tune = [grace_ns](EndpointConfig& c) { c.silent_peer_grace_ns = grace_ns; };
  keep = std::make_unique<Pair>(2, 31, qp);
  Pair& p = *keep;
  out = &p;
  const uint32_t first = p.a.sq_psn;
  p.hook = [&p, first, answered, stall_ns](Frame& f) {
    wire::DecodedFrame d;
    p.one_way_ns = 2'000;
    if (!f.a_to_b || !decode(f, d) || p.now >= stall_ns) return Verdict::kDeliver;
    const bool early = d.op->kind == PacketKind::kMrcData && !d.bth.rtx &&
                       wire::psn_diff(d.bth.psn, first) < answered;
    if (!early) p.one_way_ns = stall_ns - p.now;
    return Verdict::kDeliver;
  };
  Transfer t(p, 16 * 4096, 5);
  t.post(p, 1, 0, 16 * 4096);
  EXPECT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  const std::vector<Sent> sent = data_sent(p);
  EXPECT_GE(sent.size(), 16u);
  // One burst: PSNs 12..15 left before any answer came back.
  if (sent.size() >= 16) {
    EXPECT_EQ(sent[15].t_ns, sent[0].t_ns);
  }
  QpStats st;
  EXPECT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  return st;
}

TEST(Recovery, PeerStalledAfterAnsweringPartOfABurstRetiresNoEv) {
  const uint64_t T = 1024ull << 4;
  std::unique_ptr<Pair> keep;
  Pair* p = nullptr;
  // Without the grace (every timeout at T) the stall is read as path failure: what the
  // grace has to prevent.
  const QpStats strict = run_stalled_tail(12, 3 * T, 0, p, keep);
  EXPECT_GT(strict.rtx_timeout, 0u);
  EXPECT_GT(count_events(p->a, EventKind::kEvState, "reason", "timeout"), 0u);
  // With the runtime's grace (100 T here) the timeouts wait for the peer: it answers at 3T and
  // nothing is resent, no EV retired.
  const QpStats held = run_stalled_tail(12, 3 * T, 100 * T, p, keep);
  EXPECT_EQ(held.rtx_timeout, 0u);
  EXPECT_EQ(held.retransmits, 0u);
  EXPECT_GE(held.silent_peer_holds, 1u);
  EXPECT_EQ(count_events(p->a, EventKind::kEvState, "to", "ASSUMED_BAD"), 0u);
}

TEST(Recovery, SilentPeerGraceDoesNotDelayATailLossOnAFailedEvWhenTheTailProbeIsAnswered) {
  // The last packet is lost on its EV (dropped), the tail probe at T/2 is answered: the peer is
  // alive and the timeout is path evidence, at T and not at T + grace.
  const uint64_t T = 1024ull << 4;
  QpParams qp = fast_timeout();
  qp.ev = make_ev_profile(8, 0, 1);
  qp.tune = [T](EndpointConfig& c) { c.silent_peer_grace_ns = 100 * T; };
  Pair p(2, 33, qp);
  Transfer t(p, 8 * 4096, 3);
  const uint32_t last = wire::psn_add(p.a.sq_psn, 7);
  p.hook = [&](Frame& f) { return data_psn(f, last, false) ? Verdict::kDrop : Verdict::kDeliver; };
  t.post(p, 1, 0, 8 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  const std::vector<Sent> sent = data_sent(p);
  uint64_t first_ns = 0, resend_ns = 0;
  for (const Sent& s : sent) {
    if (s.psn != last) continue;
    if (!s.rtx && first_ns == 0) first_ns = s.t_ns;
    if (s.rtx && resend_ns == 0) resend_ns = s.t_ns;
  }
  ASSERT_NE(resend_ns, 0u);
  EXPECT_LE(resend_ns - first_ns, 2 * T);
}

TEST(Recovery, SilentPeerGraceDelaysOnlyTheFirstRetryWhenEveryPathIsDown) {
  // Nothing ever comes back: the first retry waits T + grace, the others keep the C.9 schedule,
  // and the QP still errors when the budget is spent.
  const uint64_t T = 1024ull << 4;
  QpParams qp;
  qp.timeout = 4;
  qp.linear_cnt = 2;
  qp.exp_cnt = 2;
  qp.ev = make_ev_profile(8, 0, 2);
  qp.tune = [T](EndpointConfig& c) { c.silent_peer_grace_ns = 3 * T; };
  Pair p(2, 5, qp);
  Transfer t(p, 4096, 9);
  p.hook = [&](Frame& f) { return f.a_to_b ? Verdict::kDrop : Verdict::kDeliver; };
  t.post(p, 1, 0, 4096);
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return !wcs.empty();
  }));
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kRetryExcErr);
  std::vector<uint64_t> times;
  for (const Sent& s : data_sent(p))
    if (s.psn == p.a.sq_psn) times.push_back(s.t_ns);
  ASSERT_EQ(times.size(), 5u);
  EXPECT_EQ(times[1] - times[0], 4 * T);
  EXPECT_EQ(times[2] - times[1], T);
  EXPECT_EQ(times[3] - times[2], T);
  EXPECT_EQ(times[4] - times[3], 2 * T);
}

TEST(Recovery, UnlimitedRetriesNeverGiveUp) {
  QpParams qp;
  qp.timeout = 0;  // T = 1.024 us: 30 retries reach the 2^24 cap and stay there
  qp.linear_cnt = 0;
  qp.exp_cnt = 25;
  qp.probe_interval_ns = 1'000'000'000;
  Pair p(1, 6, qp);
  Transfer t(p, 4096, 11);
  bool broken = true;
  p.hook = [&](Frame& f) { return broken && f.a_to_b ? Verdict::kDrop : Verdict::kDeliver; };
  t.post(p, 1, 0, 4096);
  QpStats st;
  ASSERT_TRUE(p.run(
      [&] {
        p.a.ep->qp_stats(p.a.qpn, st);
        return st.rtx_timeout >= 30;
      },
      1'000'000'000'000ull));
  QpAttr attr;
  MrcQpAttr mrc;
  ASSERT_TRUE(p.a.ep->query_qp(p.a.qpn, attr, mrc).ok());
  EXPECT_EQ(attr.qp_state, QpState::kRts);
  // The wait between retries is capped at 1.024 us * 2^24 (about 17.2 s).
  std::vector<uint64_t> times;
  for (const Frame& f : p.log)
    if (f.a_to_b && is_kind(f, PacketKind::kMrcData)) times.push_back(f.sent_ns);
  ASSERT_GE(times.size(), 31u);
  EXPECT_EQ(times[1] - times[0], 1024u);
  EXPECT_EQ(times[2] - times[1], 2048u);
  EXPECT_EQ(times[30] - times[29], 1024ull << 24);
  broken = false;
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }, 100'000'000'000ull));
  EXPECT_TRUE(t.exact());
}

TEST(Recovery, EcnMarkedPacketGetsImmediateSackAndSkipsItsEv) {
  Pair p(2, 7);
  Transfer t(p, 16 * 4096, 13);
  const uint32_t victim = wire::psn_add(p.a.sq_psn, 1);
  uint32_t victim_wev = 0;
  p.hook = [&](Frame& f) {
    if (data_psn(f, victim, false)) {
      wire::DecodedFrame d;
      decode(f, d);
      victim_wev = wev_of(d);
      wire::rewrite_dscp_ecn({f.bytes.data(), f.bytes.size()}, d, std::nullopt, uint8_t{3});
    }
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 16 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  size_t ce_sacks = 0;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcSack && d.seth.m == 1) {
      ++ce_sacks;
      EXPECT_EQ(d.seth.entropy, victim_wev);
      EXPECT_EQ(wire::psn_add(d.seth.cack_psn, d.seth.ack_psn_offset), victim);
    }
  }
  EXPECT_EQ(ce_sacks, 1u);
  const std::optional<Event> e = find_event(p.a, EventKind::kEvState, "reason", "sack_ce");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->find("wev")->u, victim_wev);
  EXPECT_EQ(e->find("to")->s, "SKIP");
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.retransmits, 0u);
}

TEST(Recovery, DuplicatedPacketsArePlacedOnceAndCompleteOnce) {
  Pair p(2, 8);
  Transfer t(p, 20 * 4096, 15);
  p.hook = [&](Frame& f) { return f.a_to_b ? Verdict::kDuplicate : Verdict::kDeliver; };
  ASSERT_TRUE(p.b.ep->post_recv(p.b.qpn, RecvWr{9, {}}).ok());
  const Sge sge = t.src.sge(0, 20 * 4096);
  ASSERT_TRUE(p.a.ep->post_write(p.a.qpn, 1, {&sge, 1}, t.dst.addr(), t.dst.mr.rkey, 77u).ok());
  std::vector<Wc> send, recv;
  ASSERT_TRUE(p.run([&] {
    auto s = p.poll(p.a);
    send.insert(send.end(), s.begin(), s.end());
    auto r = p.poll(p.b);
    recv.insert(recv.end(), r.begin(), r.end());
    return !send.empty();
  }));
  p.run_idle(100'000);
  EXPECT_EQ(p.poll(p.a).size(), 0u);
  EXPECT_EQ(send.size(), 1u);
  ASSERT_EQ(recv.size(), 1u);
  EXPECT_EQ(recv[0].imm_data, 77u);
  EXPECT_TRUE(t.exact());
  QpStats st;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, st).ok());
  EXPECT_EQ(st.data_bytes_placed, 20u * 4096);
  EXPECT_EQ(st.duplicates_rx, 20u);
}

TEST(Recovery, LostTransportAckIsRecoveredByResendingTheLastPacket) {
  Pair p(2, 9, fast_timeout());
  Transfer t(p, 4 * 4096, 17);
  bool dropped = false;
  p.hook = [&](Frame& f) {
    if (!dropped && !f.a_to_b && is_kind(f, PacketKind::kMrcTransportAck)) {
      dropped = true;
      return Verdict::kDrop;
    }
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 4 * 4096);
  std::vector<Wc> wcs;
  ASSERT_TRUE(p.run([&] {
    auto w = p.poll(p.a);
    wcs.insert(wcs.end(), w.begin(), w.end());
    return !wcs.empty();
  }));
  ASSERT_TRUE(dropped);
  ASSERT_EQ(wcs.size(), 1u);
  EXPECT_EQ(wcs[0].status, WcStatus::kSuccess);
  EXPECT_TRUE(t.exact());
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.rtx_ack_wait, 1u);
  QpStats rst;
  ASSERT_TRUE(p.b.ep->qp_stats(p.b.qpn, rst).ok());
  EXPECT_EQ(rst.duplicates_rx, 1u);
  EXPECT_EQ(rst.data_bytes_placed, 4u * 4096);
}

TEST(Recovery, CorruptedPacketIsDroppedOnIcrcAndRecovered) {
  Pair p(2, 10, fast_timeout());
  Transfer t(p, 16 * 4096, 19);
  const uint32_t victim = wire::psn_add(p.a.sq_psn, 5);
  p.hook = [&](Frame& f) {
    if (data_psn(f, victim, false)) f.bytes[f.bytes.size() - 100] ^= std::byte{0x40};
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 16 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(p.b.ep->stats().rx_bad_icrc, 1u);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_EQ(st.retransmits, 1u);
}

TEST(Recovery, PeerPortDownStopsThatPlaneUntilItComesBack) {
  Pair p(2, 11);
  Transfer t(p, 64 * 4096, 21);
  ASSERT_TRUE(p.b.ep->set_port_state(2, false, p.now).ok());
  p.run_idle(50'000);  // the PORT_STATUS_UPDATE reaches A
  AsyncEvent ae;
  ASSERT_TRUE(p.b.ep->get_async_event(ae));
  EXPECT_EQ(ae.type, AsyncEventType::kPortErr);
  EXPECT_EQ(ae.port, 2);
  size_t updates = 0;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcEndpointRequest) {
      ++updates;
      EXPECT_EQ(d.erth.op, 0);  // PORT_STATUS_UPDATE
      EXPECT_EQ(d.erth.port_status_mask, 0b010u);
      EXPECT_EQ(d.bth.dest_qp, wire::kEndpointOpQpn);
      EXPECT_EQ(f.port, 1);  // only the live port carries it
    }
  }
  EXPECT_EQ(updates, 1u);
  const size_t mark = p.log.size();
  t.post(p, 1, 0, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  for (size_t i = mark; i < p.log.size(); ++i)
    if (p.log[i].a_to_b) {
      EXPECT_EQ(p.log[i].port, 1) << "frame " << i;
    }
  ASSERT_TRUE(p.b.ep->set_port_state(2, true, p.now).ok());
  p.run_idle(50'000);
  const size_t mark2 = p.log.size();
  t.post(p, 2, 32 * 4096, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  size_t on_two = 0;
  for (size_t i = mark2; i < p.log.size(); ++i)
    if (p.log[i].a_to_b && p.log[i].port == 2) ++on_two;
  EXPECT_GT(on_two, 10u);
  EXPECT_TRUE(t.exact());
}

TEST(Recovery, LocalPortDownStopsSendingOnIt) {
  Pair p(2, 12);
  Transfer t(p, 32 * 4096, 23);
  ASSERT_TRUE(p.a.ep->set_port_state(1, false, p.now).ok());
  t.post(p, 1, 0, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  for (const Frame& f : p.log)
    if (f.a_to_b) {
      EXPECT_EQ(f.port, 2);
    }
}

TEST(Recovery, EvProbeRequestGetsResponseWithRttAndEntropy) {
  Pair p(2, 13);
  p.one_way_ns = 3'000;
  EpRequest req;
  req.req_id = 5;
  req.dgid = p.b.ep->config().gid;
  req.op = wire::EndpointOp::kEvProbe;
  req.wev = 0x12345678;
  req.port = 2;
  req.timeout_ns = 100'000;
  ASSERT_TRUE(p.a.ep->ep_post_request(req, p.now).ok());
  EXPECT_EQ(p.a.ep->ep_post_request(req, p.now).code, EBUSY);  // req_id still outstanding
  EpResponse rsp;
  ASSERT_TRUE(p.run([&] { return p.a.ep->ep_poll_response(rsp); }));
  EXPECT_EQ(rsp.req_id, 5);
  EXPECT_FALSE(rsp.timed_out);
  EXPECT_EQ(rsp.status, 0);
  EXPECT_EQ(rsp.port, 2);
  EXPECT_EQ(rsp.entropy, 0x12345678u);
  EXPECT_EQ(rsp.rtt_ns, 6'000u);
  EXPECT_TRUE(rsp.adj_svc_time);
  EXPECT_EQ(rsp.port_status_mask, 0b110u);
  // The request carried the requested WEV in sport / flow label; the response used DSCP_CONTROL.
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    ASSERT_TRUE(decode(f, d));
    if (d.op->kind == PacketKind::kMrcEndpointRequest) {
      EXPECT_EQ(wev_of(d), 0x12345678u);
      EXPECT_EQ(d.bth.psn, 5u);
    }
    if (d.op->kind == PacketKind::kMrcEndpointResponse) {
      EXPECT_EQ(d.dscp(), wire::mrp0().dscp().control);
      EXPECT_EQ(d.bth.psn, 5u);
    }
  }
  // An unanswered request times out.
  p.hook = [](Frame&) { return Verdict::kDrop; };
  req.req_id = 6;
  ASSERT_TRUE(p.a.ep->ep_post_request(req, p.now).ok());
  ASSERT_TRUE(p.run([&] { return p.a.ep->ep_poll_response(rsp); }));
  EXPECT_EQ(rsp.req_id, 6);
  EXPECT_TRUE(rsp.timed_out);
}

TEST(Recovery, ReceiveOnlyQpMaintainsReverseEvsWithEvProbes) {
  Pair p(2, 14);
  Transfer t(p, 512 * 4096, 25);
  t.post(p, 1, 0, 512 * 4096);
  p.one_way_ns = 5'000;
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  p.run_idle(100'000);  // let the last probes' responses come back
  EXPECT_TRUE(t.exact());
  std::set<uint8_t> probe_ports;
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcEndpointRequest) {
      EXPECT_EQ(d.erth.op, 1);  // EV_PROBE
      probe_ports.insert(f.port);
    }
  }
  EXPECT_EQ(probe_ports.size(), 2u);  // one per plane
  EXPECT_GT(count_events(p.b, EventKind::kReverseEv, "reason", "ev_probe"), 0u);
  // A, which sends, maintains its reverse EVs from data SACKs instead and sends no probes.
  for (const Frame& f : p.log)
    if (f.a_to_b) {
      EXPECT_FALSE(is_kind(f, PacketKind::kMrcEndpointRequest));
    }
}

TEST(Recovery, ControllerDeniedEvIsNotUsedUntilAllowedAgain) {
  Pair p(2, 17);
  Transfer t(p, 64 * 4096, 31);
  std::vector<EvInfo> evs;
  ASSERT_TRUE(p.a.ep->ev_info(p.a.qpn, evs).ok());
  ASSERT_EQ(evs.size(), 16u);
  const uint32_t denied = evs[3].wev;
  ASSERT_TRUE(p.a.ep->modify_ev_state(1, denied, EvState::kDenied).ok());
  EXPECT_EQ(p.a.ep->modify_ev_state(1, 0xFFFFFFFF, EvState::kDenied).code, ENOENT);
  EXPECT_EQ(p.a.ep->modify_ev_state(9, denied, EvState::kDenied).code, EINVAL);
  t.post(p, 1, 0, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  for (const Sent& s : data_sent(p)) EXPECT_NE(s.wev, denied);
  ASSERT_TRUE(p.a.ep->ev_info(p.a.qpn, evs).ok());
  EXPECT_EQ(evs[3].state, EvState::kDenied);
  ASSERT_TRUE(p.a.ep->modify_ev_state(1, denied, EvState::kGood).ok());
  const size_t mark = p.log.size();
  t.post(p, 2, 32 * 4096, 32 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  bool used = false;
  for (size_t i = mark; i < p.log.size(); ++i) {
    wire::DecodedFrame d;
    if (p.log[i].a_to_b && decode(p.log[i], d) && wev_of(d) == denied) used = true;
  }
  EXPECT_TRUE(used);
}

TEST(Recovery, DynamicMprFromSackShrinksTheRequesterWindow) {
  QpParams qp;
  qp.path_mtu = 256;
  qp.mpr = 4;
  qp.mpr_dest = 4;
  Pair p(2, 15, qp);
  ASSERT_TRUE(p.b.ep->set_responder_mpr(p.b.qpn, 1).ok());
  EXPECT_EQ(p.b.ep->set_responder_mpr(p.b.qpn, 5).code, EINVAL);
  Transfer t(p, 2000 * 256, 27);
  p.one_way_ns = 20'000;
  uint32_t max_ahead = 0;
  bool shrunk = false;
  p.hook = [&](Frame& f) {
    wire::DecodedFrame d;
    if (f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcData && !d.bth.rtx) {
      QpStats st;
      p.a.ep->qp_stats(p.a.qpn, st);
      if (st.mpr_eff_psns == 128) shrunk = true;
      if (shrunk) max_ahead = std::max(max_ahead, wire::psn_diff(d.bth.psn, st.cack_seen));
    }
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 2000 * 256);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  EXPECT_TRUE(shrunk);
  EXPECT_LE(max_ahead, 128u);
  for (const Frame& f : p.log) {
    wire::DecodedFrame d;
    if (!f.a_to_b && decode(f, d) && d.op->kind == PacketKind::kMrcSack) {
      EXPECT_EQ(d.seth.mpr, 1);
    }
  }
}

TEST(Recovery, NsccKeepsBytesInFlightWithinTheWindowUnderTrims) {
  QpParams qp;
  qp.cc = "uet-1.0-nscc";
  Pair p(2, 16, qp);
  Transfer t(p, 600 * 4096, 29);
  uint64_t n = 0;
  uint64_t violations = 0;
  p.hook = [&](Frame& f) {
    if (!f.a_to_b) return Verdict::kDeliver;
    wire::DecodedFrame d;
    if (!decode(f, d) || d.op->kind != PacketKind::kMrcData) return Verdict::kDeliver;
    QpStats st;
    p.a.ep->qp_stats(p.a.qpn, st);
    if (st.bytes_in_flight > st.cwnd_bytes + 4096 + 200) ++violations;  // R51
    if (++n % 20 == 0) f.bytes = trim_frame(f.bytes, wire::mrp0().dscp().trimmed);
    return Verdict::kDeliver;
  };
  t.post(p, 1, 0, 600 * 4096);
  ASSERT_TRUE(p.run([&] { return !p.poll(p.a).empty(); }));
  EXPECT_TRUE(t.exact());
  EXPECT_EQ(violations, 0u);
  EXPECT_GT(count_events(p.a, EventKind::kCwnd), 0u);
  QpStats st;
  ASSERT_TRUE(p.a.ep->qp_stats(p.a.qpn, st).ok());
  EXPECT_LT(st.cwnd_bytes, NsccConfig{}.max_cwnd);  // trims pulled the window down
  EXPECT_GT(st.rtx_nack, 0u);
}

}  // namespace
}  // namespace mrc::engine::testing
