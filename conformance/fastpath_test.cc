// The checker's per-frame machinery, against plain references: the merge table against a map
// with the same expiry rule, the payload hash paths against each other, the decision-log fast
// parser against the full JSON parser, the early merge key against the decoded one, and the
// containers against the standard ones.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>

#include "conformance/internal.h"
#include "wire/samples.h"

namespace mrc::check::detail {
namespace {

// The merge table keeps exactly the keys a FIFO with the same expiry rule keeps, through index
// cleanings, growth and chunk recycling.
TEST(DedupTable, MatchesAFifoModel) {
  DedupTable t;
  std::deque<std::pair<uint64_t, uint64_t>> fifo;  // (ts, key)
  std::map<uint64_t, uint64_t> live;               // key -> ts
  std::mt19937_64 rng(7);
  const uint64_t window = 5000;
  uint64_t now = 0;
  for (int i = 0; i < 400000; ++i) {
    now += rng() % 4;
    t.expire(now, window);
    while (!fifo.empty() && fifo.front().first + window < now) {
      live.erase(fifo.front().second);
      fifo.pop_front();
    }
    // Mostly fresh keys, some recent ones again, some long expired ones again.
    uint64_t key = rng();
    if (rng() % 8 == 0 && !fifo.empty()) key = fifo[rng() % fifo.size()].second;
    if (rng() % 64 == 0) key = static_cast<uint64_t>(rng() % 64) * 0x9E3779B97F4A7C15ull;
    const uint64_t q = t.find(key);
    ASSERT_EQ(q != DedupTable::kNone, live.count(key) == 1) << "op " << i;
    if (q != DedupTable::kNone) {
      EXPECT_EQ(t.at(q).key, key);
      EXPECT_EQ(t.at(q).ts, live[key]);
      continue;
    }
    const uint64_t n = t.insert(key, now);
    t.at(n).first_point = 3;
    fifo.emplace_back(now, key);
    live[key] = now;
    ASSERT_EQ(t.size(), fifo.size());
  }
  EXPECT_EQ(t.forced(), 0u);
}

// Frozen timestamps: the table stops at kMaxLive entries and forgets the oldest.
TEST(DedupTable, CapsLiveEntries) {
  DedupTable t;
  const size_t n = DedupTable::kMaxLive + 1000;
  for (size_t i = 0; i < n; ++i) t.insert(0x1000 + i * 0x9E3779B97F4A7C15ull, 0);
  EXPECT_EQ(t.size(), DedupTable::kMaxLive);
  EXPECT_EQ(t.forced(), 1000u);
  EXPECT_EQ(t.find(0x1000), DedupTable::kNone);
  EXPECT_NE(t.find(0x1000 + (n - 1) * 0x9E3779B97F4A7C15ull), DedupTable::kNone);
}

TEST(DedupTable, IdsAndSeenCountsOfManyPoints) {
  DedupTable t;
  const uint64_t q = t.insert(42, 10);
  DedupEntry& e = t.at(q);
  t.add_id(e, q, 100);
  t.add_id(e, q, 250);
  t.add_id(e, q, 251);
  EXPECT_EQ(t.id(e, 0), 100u);
  EXPECT_EQ(t.id(e, 1), 250u);
  EXPECT_EQ(t.id(e, 2), 251u);
  DedupExt& x = t.ext(q);
  // More points than fit inline move the counts to the overflow map, unchanged.
  for (uint32_t slot = 0; slot < 6; ++slot)
    for (uint32_t k = 0; k <= slot; ++k) t.seen(x, e.key, slot)++;
  for (uint32_t slot = 0; slot < 6; ++slot) EXPECT_EQ(t.seen(x, e.key, slot), slot + 1);
}

// Past kMaxCopies copies the oldest is forgotten: the ids and the sightings slide by one.
TEST(DedupTable, CopiesBeyondTheLimitSlideTheWindow) {
  for (const bool overflow : {false, true}) {
    DedupTable t;
    const uint64_t q = t.insert(42, 10);
    DedupEntry& e = t.at(q);
    for (uint64_t id : {100, 200, 300, 400}) t.add_id(e, q, id);
    DedupExt& x = t.ext(q);
    const uint32_t points = overflow ? 6 : 2;
    for (uint32_t slot = 0; slot < points; ++slot) t.seen(x, e.key, slot) = 3;
    t.seen(x, e.key, 0) = 0;
    t.add_id(e, q, 500);
    ASSERT_EQ(e.n_ids, DedupEntry::kMaxCopies);
    EXPECT_EQ(t.id(e, 0), 200u);
    EXPECT_EQ(t.id(e, 3), 500u);
    EXPECT_EQ(t.seen(x, e.key, 0), 0u);
    for (uint32_t slot = 1; slot < points; ++slot) EXPECT_EQ(t.seen(x, e.key, slot), 2u);
  }
}

TEST(HashPayload, SimdAndPortablePathsAgree) {
  std::mt19937 rng(3);
  std::vector<uint8_t> buf(9010);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  for (size_t len : {0, 1, 7, 15, 16, 17, 31, 32, 33, 255, 256, 1023, 1024, 1025, 4096, 8999})
    for (size_t off : {0, 1, 3})
      EXPECT_EQ(hash_payload(buf.data() + off, len, 5),
                hash_payload_scalar(buf.data() + off, len, 5))
          << len << " at offset " << off;
}

TEST(HashPayload, EveryByteAndTheLengthCount) {
  std::vector<uint8_t> buf(2100, 0xAB);
  const uint64_t h = hash_payload(buf.data(), buf.size(), 0);
  for (size_t i = 0; i < buf.size(); ++i) {
    buf[i] ^= 0x01;
    EXPECT_NE(hash_payload(buf.data(), buf.size(), 0), h) << "byte " << i;
    buf[i] ^= 0x01;
  }
  // Zero padding of the tail does not hide a length change.
  std::vector<uint8_t> zeros(64, 0);
  for (size_t len = 1; len < 64; ++len)
    EXPECT_NE(hash_payload(zeros.data(), len, 0), hash_payload(zeros.data(), len - 1, 0)) << len;
  EXPECT_NE(hash_payload(buf.data(), buf.size(), 0), hash_payload(buf.data(), buf.size(), 1));
}

TEST(MergeKey, LeavesOutTheVariantByteAndCountsTheRest) {
  Addr a{}, b{};
  a[15] = 1;
  b[15] = 2;
  std::array<uint8_t, 64> bth{};
  for (size_t i = 0; i < bth.size(); ++i) bth[i] = static_cast<uint8_t>(i * 7);
  const uint64_t k = merge_key(a, b, 1234, bth.data(), 20);
  auto with = [&](size_t i) {
    auto c = bth;
    c[i] ^= 0x10;
    return merge_key(a, b, 1234, c.data(), 20);
  };
  EXPECT_EQ(with(4), k);  // FECN/BECN byte, rewritten by switches
  for (size_t i : {0, 1, 2, 3, 5, 11, 12, 19}) EXPECT_NE(with(i), k) << i;
  EXPECT_EQ(with(20), k);  // beyond the bytes covered
  EXPECT_NE(merge_key(b, a, 1234, bth.data(), 20), k);
  EXPECT_NE(merge_key(a, b, 1235, bth.data(), 20), k);
  EXPECT_NE(merge_key(a, b, 1234, bth.data(), 21), k);
  // Every length: each covered byte but byte 4 counts, no byte beyond them does.
  for (size_t n = 0; n <= 64; ++n) {
    const uint64_t kn = merge_key(a, b, 1234, bth.data(), n);
    for (size_t i = 0; i < bth.size(); ++i) {
      auto c = bth;
      c[i] ^= 0x10;
      if (i < n && i != 4)
        EXPECT_NE(merge_key(a, b, 1234, c.data(), n), kn) << n << " " << i;
      else
        EXPECT_EQ(merge_key(a, b, 1234, c.data(), n), kn) << n << " " << i;
    }
  }
}

// The key read from the raw bytes before decoding equals the decoded frame's key whenever the
// frame has the shape early_frame_key() assumes, and it is 0 otherwise (IPv4, VLAN, SRv6 ...).
TEST(MergeKey, EarlyKeyEqualsDecodedKey) {
  DutProfile prof;
  Engine eng(prof, {}, 20);
  const wire::DecodeLayout layout(*eng.wire_profile);
  size_t plain = 0;
  for (const auto& s : wire::samples::all_samples()) {
    const wire::Bytes data(s.frame.data(), s.frame.size());
    wire::DecodedFrame f;
    wire::DecodeOptions opt;
    wire::decode_frame(data, f, opt, *eng.wire_profile);
    const uint64_t early = eng.early_frame_key(data, wire::LinkType::kEthernet);
    Obs o;
    if (!f.roce || !roce_addrs(f, o.src, o.dst)) continue;
    const bool shape = f.l3 == 6 && !f.has_inner_ip6 && f.off_l3 == 14 && f.off_bth == 62;
    // What the pipelined checker's reading thread computes, with no engine state.
    const uint64_t raw = Engine::shape_key(*eng.wire_profile, data, wire::LinkType::kEthernet);
    EXPECT_EQ(Engine::shape_key(*eng.wire_profile, data, wire::LinkType::kEthernet, &layout), raw)
        << s.name;
    if (shape) {
      ++plain;
      EXPECT_EQ(early, eng.frame_key(o, f)) << s.name;
      EXPECT_EQ(raw, eng.frame_key(o, f)) << s.name;
    } else {
      EXPECT_NE(early, eng.frame_key(o, f)) << s.name;
      EXPECT_EQ(raw, 0u) << s.name;
    }
  }
  EXPECT_GT(plain, 10u);
}

// shape_key() with the reading thread's DecodeLayout (its port and opcode lookups) gives the key
// it gives asking the profile: every sample of a profile with three RoCE ports, with the UDP
// destination port and the BTH opcode set to every value.
TEST(MergeKey, ShapeKeyWithTheLayoutEqualsTheProfiles) {
  wire::WireParams params;
  params.name = "ports";
  params.udp_ports = {4971, 4791, 5000};
  const auto wp = wire::make_profile(params);
  const wire::DecodeLayout layout(*wp);
  size_t keyed = 0;
  for (const auto& s : wire::samples::all_samples(*wp)) {
    auto bytes = s.frame;
    if (bytes.size() < 62 + 12) continue;
    for (size_t at : {size_t{56}, size_t{57}, size_t{62}}) {  // dport high, low; the opcode
      const std::byte was = bytes[at];
      for (unsigned v = 0; v < 256; ++v) {
        bytes[at] = std::byte(v);
        const wire::Bytes data(bytes.data(), bytes.size());
        const uint64_t want = Engine::shape_key(*wp, data, wire::LinkType::kEthernet);
        EXPECT_EQ(Engine::shape_key(*wp, data, wire::LinkType::kEthernet, &layout), want)
            << s.name << " byte " << at << " = " << v;
        keyed += want != 0;
      }
      bytes[at] = was;
    }
  }
  EXPECT_GT(keyed, 1000u);
}

// Splitting ICRC verification from decode_frame (to overlap it with the merge-table fetch) gives
// what DecodeOptions::verify_icrc gives.
TEST(Icrc, VerifiedAfterDecodeAsByTheDecoder) {
  const auto prof = wire::make_mrp0(wire::DscpPlan{}, wire::EvStripe::kLowInSport);
  for (const auto& s : wire::samples::all_samples()) {
    for (int corrupt = 0; corrupt < 2; ++corrupt) {
      auto bytes = s.frame;
      if (corrupt) bytes[bytes.size() / 2] ^= std::byte{0x40};
      const wire::Bytes data(bytes.data(), bytes.size());
      wire::DecodedFrame a, b;
      wire::DecodeOptions opt;
      opt.verify_icrc = true;
      const bool ok_a = wire::decode_frame(data, a, opt, *prof);
      opt.verify_icrc = false;
      const bool ok_b = wire::decode_frame(data, b, opt, *prof);
      if (b.has_icrc) {
        b.icrc_checked = true;
        b.icrc_ok = wire::verify_icrc(b);
      }
      EXPECT_EQ(ok_a, ok_b) << s.name;
      EXPECT_EQ(a.icrc_checked, b.icrc_checked) << s.name;
      EXPECT_EQ(a.icrc_ok, b.icrc_ok) << s.name;
    }
  }
}

// frame_rules_stage() (run on the pipelined checker's reading thread) calls a frame clean only
// when frame_rules() judging it in full finds nothing and counts the same rules: every sample
// frame, and copies with one byte of the headers changed (the ICRC left unchecked, else any
// change would be caught by it alone), through both paths on two engines.
TEST(FrameRulesStage, CleanOnlyWhenTheFullJudgementFindsNothing) {
  DutProfile prof;
  size_t clean = 0, judged = 0, frames = 0;
  // Every frame through one pair of engines too: clean frames between judged ones, violations
  // among them (fail_at() folds the clean frames' counts in first).
  Engine all_full(prof, {}, 20), all_fast(prof, {}, 20);
  for (const auto& s : wire::samples::all_samples()) {
    for (size_t at = 0; at <= 96; ++at) {
      for (const uint8_t flip : {0x01, 0x02, 0x10, 0x40, 0x80}) {
        auto bytes = s.frame;
        const bool intact = at == 0;  // at 0: the sample itself, its ICRC verified
        if (!intact) {
          // From the UDP header on (Ethernet 14 + IPv6 40), over the BTH and what follows.
          const size_t i = 54 + at - 1;
          if (i >= bytes.size()) continue;
          bytes[i] ^= std::byte{flip};
        } else if (flip != 0x01) {
          continue;
        }
        Engine full(prof, {}, 20), fast(prof, {}, 20);
        const wire::Bytes data(bytes.data(), bytes.size());
        wire::DecodedFrame f;
        wire::DecodeOptions opt;
        opt.verify_icrc = false;
        const bool ok = wire::decode_frame(data, f, opt, *full.wire_profile);
        if (intact && f.has_icrc) {
          f.icrc_checked = true;
          f.icrc_ok = wire::verify_icrc(f);
        }
        if (!f.roce) continue;
        ++frames;
        Obs o;
        o.f = &f;
        o.frame_no = 1;
        o.trimmed = f.trimmed;
        const FramePre pre = Engine::frame_rules_stage(f, ok);
        full.frame_rules(o, f, ok, FramePre::kJudge);
        fast.frame_rules(o, f, ok, pre);
        all_full.frame_rules(o, f, ok, FramePre::kJudge);
        all_fast.frame_rules(o, f, ok, pre);
        if (pre == FramePre::kJudge) {
          ++judged;
          continue;
        }
        ++clean;
        EXPECT_EQ(pre == FramePre::kCleanIcrc, intact && f.icrc_checked) << s.name;
        // The clean frame's judgements are counted apart (Engine::clean_frames) and reach the
        // report's counts and statuses through interim().
        const Report rf = full.interim(), rs = fast.interim();
        ASSERT_EQ(rs.results.size(), rf.results.size());
        for (size_t r = 0; r < full.rules.size(); ++r) {
          EXPECT_EQ(full.rules[r].violations, 0u) << s.name << " byte " << at << " rule " << r;
          EXPECT_EQ(full.rules[r].excused, 0u) << s.name << " byte " << at << " rule " << r;
          EXPECT_EQ(rs.results[r].checked, rf.results[r].checked)
              << s.name << " byte " << at << " rule " << r;
          EXPECT_EQ(rs.results[r].status, rf.results[r].status)
              << s.name << " byte " << at << " rule " << r;
        }
      }
    }
  }
  // Both kinds occur: most changed copies break a rule, the samples themselves do not.
  EXPECT_GT(clean, 100u) << frames;
  EXPECT_GT(judged, 100u) << frames;
  const Report rf = all_full.interim(), rs = all_fast.interim();
  ASSERT_EQ(rs.results.size(), rf.results.size());
  for (size_t r = 0; r < rf.results.size(); ++r) {
    EXPECT_EQ(rs.results[r].checked, rf.results[r].checked) << "rule " << r;
    EXPECT_EQ(rs.results[r].violations, rf.results[r].violations) << "rule " << r;
    EXPECT_EQ(rs.results[r].status, rf.results[r].status) << "rule " << r;
  }
  EXPECT_GT(rf.results[FRM_005].violations, 0u);
  EXPECT_GT(rf.results[FRM_005].checked, rf.results[FRM_005].violations);
}

// The (source, destination) cache of judge_frame() gives node_of()'s nodes, for pairs that
// share a source or a destination, repeat, and alternate.
TEST(NodesOf, SameNodesAsNodeOf) {
  DutProfile prof;
  Engine e(prof, {}, 20);
  std::vector<Addr> pool(6);
  for (size_t i = 0; i < pool.size(); ++i) {
    pool[i][0] = 0xfd;
    pool[i][15] = static_cast<uint8_t>(i + 1);
    pool[i][8] = static_cast<uint8_t>(i % 2);  // same first 8 bytes for every other address
  }
  std::mt19937_64 rng(19);
  for (int i = 0; i < 20000; ++i) {
    const Addr& a = pool[rng() % pool.size()];
    const Addr& b = pool[rng() % 3 == 0 ? rng() % pool.size() : (rng() % 2)];
    int sn = -2, dn = -2;
    e.nodes_of(a, b, sn, dn);
    ASSERT_EQ(sn, e.node_of(a)) << i;
    ASSERT_EQ(dn, e.node_of(b)) << i;
  }
  EXPECT_EQ(e.node_addr.size(), pool.size());
}

void expect_same(const Decision& a, const Decision& b, const std::string& line) {
  EXPECT_EQ(a.t_ns, b.t_ns) << line;
  EXPECT_EQ(a.link, b.link) << line;
  EXPECT_EQ(a.dir, b.dir) << line;
  EXPECT_EQ(a.action, b.action) << line;
  EXPECT_EQ(a.qpn, b.qpn) << line;
  EXPECT_EQ(a.psn, b.psn) << line;
  EXPECT_EQ(a.opcode, b.opcode) << line;
  EXPECT_EQ(a.ev, b.ev) << line;
  EXPECT_EQ(a.reason, b.reason) << line;
}

// Whatever the fast path accepts, the full parser reads the same way; whatever it refuses goes
// to the full parser (so errors keep their messages).
TEST(DecisionParse, FastPathAgreesWithTheJsonParser) {
  const std::vector<std::string> lines = {
      R"({"t_ns":15121,"link":"p1.a>s1","dir":"a>b","action":"ecn","qpn":256,"psn":11349965,"opcode":199,"ev":279318077,"reason":"ecn bernoulli p=0.01","seed":7})",
      R"( { "t_ns" : 0 , "action" : "drop" } )",
      R"({"t_ns":null,"action":"trim","qpn":null,"psn":null,"opcode":null,"ev":null})",
      R"({"t_ns":18446744073709551615,"action":"corrupt","opcode":"0xdc"})",
      R"({"t_ns":1,"action":"dup","opcode":"220","link":5,"dir":null})",
      R"({"t_ns":1,"action":"weird"})",
      R"({"t_ns":1,"action":"delay","qpn":16777215,"ev":4294967295})",
      R"({"t_ns":1,"action":"drop","opcode":" 12"})",  // strtoul skips the space, as before
      // Refused by the fast path: the full parser decides (some are errors).
      R"({"t_ns":1,"action":"drop","qpn":16777216})",
      R"({"t_ns":1,"action":"drop","psn":-1})",
      R"({"t_ns":1.5,"action":"drop"})",
      R"({"t_ns":1e3,"action":"drop"})",
      R"({"t_ns":01,"action":"drop"})",
      R"({"t_ns":1,"action":"dr\u006fp"})",
      R"({"t_ns":1,"action":"drop","reason":"caf\u00e9"})",
      R"({"t_ns":1,"action":"drop","extra":{"a":1}})",
      R"({"t_ns":1,"action":"drop","extra":[1,2]})",
      R"({"t_ns":1,"action":"drop","flag":true})",
      R"({"t_ns":1,"t_ns":2,"action":"drop"})",
      R"({"t_ns":1,"action":""})",
      R"({"t_ns":1})",
      R"({"action":"drop"})",
      R"({"t_ns":1,"action":"drop"} x)",
      R"({"t_ns":1,"action":"drop",})",
      R"({"t_ns":1,"action":"drop","opcode":"0x100"})",
      R"({"t_ns":99999999999999999999,"action":"drop"})",
      R"([1,2])",
      R"(nonsense)",
  };
  size_t fast = 0;
  for (const auto& line : lines) {
    Decision via_json, via_fast, via_api;
    std::string e_json, e_api;
    const bool ok_json = parse_decision_json(line, via_json, e_json);
    const bool ok_fast = parse_decision_fast(line, via_fast);
    const bool ok_api = parse_decision(line, via_api, e_api);
    EXPECT_EQ(ok_api, ok_json) << line;
    EXPECT_EQ(e_api, e_json) << line;
    if (ok_fast) {
      ++fast;
      EXPECT_TRUE(ok_json) << line;
      expect_same(via_fast, via_json, line);
    }
    if (ok_api) expect_same(via_api, via_json, line);
  }
  EXPECT_EQ(fast, 8u);
}

TEST(Containers, RingAgainstDeque) {
  Ring<uint32_t> r;
  std::deque<uint32_t> d;
  std::mt19937 rng(1);
  for (int i = 0; i < 100000; ++i) {
    const unsigned op = rng() % 8;
    if (op < 4) {
      r.push_back(static_cast<uint32_t>(i));
      d.push_back(static_cast<uint32_t>(i));
    } else if (op == 4) {
      r.emplace_front() = static_cast<uint32_t>(i);
      d.push_front(static_cast<uint32_t>(i));
    } else if (!d.empty()) {
      r.pop_front();
      d.pop_front();
    }
    ASSERT_EQ(r.size(), d.size());
    if (!d.empty()) {
      ASSERT_EQ(r.front(), d.front());
      ASSERT_EQ(r.back(), d.back());
      ASSERT_EQ(r[d.size() / 2], d[d.size() / 2]);
    }
  }
}

// Like std::deque: growing at either end moves no element (evaluators hold a PsnRec& while the
// window grows).
TEST(Containers, RingKeepsReferencesWhileGrowing) {
  Ring<PsnRec> r;
  PsnRec& first = r.emplace_back();
  first.va = 77;
  for (int i = 0; i < 5000; ++i) {
    r.emplace_back().va = static_cast<uint64_t>(i);
    r.emplace_front().va = static_cast<uint64_t>(i);
  }
  EXPECT_EQ(&r[5000], &first);
  EXPECT_EQ(first.va, 77u);
  for (int i = 0; i < 4000; ++i) r.pop_front();
  EXPECT_EQ(&r[1000], &first);
  EXPECT_EQ(r.size(), 6001u);
}

// The ring of a PSN's transmissions: slot 0 inline, slots 1.. in a pooled PsnExt made on the
// second transmission; iteration and overwriting follow the slot order of a plain 4-slot ring.
TEST(Containers, PsnRecTxRingMatchesAPlainRing) {
  TxPool pool;
  PsnRec r;
  std::array<uint64_t, kTxRing> model{};  // pkt per slot, 0 = never used
  size_t next = 0;
  EXPECT_EQ(r.latest(), nullptr);
  for (uint64_t pkt = 1; pkt <= 9; ++pkt) {
    Tx& t = r.push(pool);
    t.pkt = pkt;
    t.ts = 100 - pkt;
    r.tx_count++;
    model[next] = pkt;
    next = (next + 1) % kTxRing;
    EXPECT_EQ(r.ext != nullptr, pkt >= 2);
    std::vector<uint64_t> seen;
    for (const Tx& x : r.txs())
      if (x.valid) seen.push_back(x.pkt);
    std::vector<uint64_t> want;
    for (uint64_t m : model)
      if (m) want.push_back(m);
    EXPECT_EQ(seen, want);
    ASSERT_NE(r.latest(), nullptr);
    EXPECT_EQ(r.latest()->pkt, pkt);
    EXPECT_EQ(r.find(pkt), &t);
    EXPECT_EQ(r.find(pkt > 4 ? pkt - 4 : 100), nullptr);
  }
  PsnExt* e = r.ext;
  r.release(pool);
  EXPECT_EQ(r.ext, nullptr);
  EXPECT_EQ(pool.get(), e);  // recycled
}

TEST(Containers, FlatMapAgainstMap) {
  FlatMap32<uint32_t> m;
  std::map<uint32_t, uint32_t> ref;
  std::mt19937 rng(2);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t k = rng() % 3000;
    if (rng() % 3 == 0) {
      EXPECT_EQ(m.erase(k), ref.erase(k) == 1);
    } else {
      m[k] += 1;
      ref[k] += 1;
    }
    ASSERT_EQ(m.size(), ref.size());
  }
  for (const auto& [k, v] : ref) {
    ASSERT_NE(m.find(k), nullptr);
    EXPECT_EQ(*m.find(k), v);
  }
  EXPECT_EQ(m.find(5000), nullptr);
}

}  // namespace
}  // namespace mrc::check::detail
