// The checker engine: flows, merging of capture points, dispatch to the evaluators, results.
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iterator>
#include <new>
#include <thread>
#include <utility>

#include "conformance/internal.h"

namespace mrc::check {
namespace detail {

// ---------------------------------------------------------------------------------------------
// Merge table
// ---------------------------------------------------------------------------------------------
void* alloc_pages(size_t n, size_t& bytes, bool huge) {
  constexpr size_t kHuge = size_t{2} << 20;
  bytes = 0;
  if (n == 0) return nullptr;
  bytes = n >= kHuge ? (n + kHuge - 1) & ~(kHuge - 1) : (n + 4095) & ~size_t{4095};
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (huge && bytes >= kHuge) {
    ::madvise(p, bytes, MADV_HUGEPAGE);
    // A dense array is written whole soon: fault it in now, one huge page at a time, rather
    // than first mapping the shared zero page on a read and copying it on the next write (two
    // faults per 2 MiB). Best effort (Linux >= 5.14).
#if defined(MADV_POPULATE_WRITE)
    ::madvise(p, bytes, MADV_POPULATE_WRITE);
#endif
  }
  return p;
}

void free_pages(void* p, size_t bytes) {
  if (p) ::munmap(p, bytes);
}

void DedupTable::pop() {
  const uint64_t seq = head_++;
  const DedupEntry& e = at(seq);
  if (e.n_ids > 1) extra_ids_.erase(e.key);
  if (e.has_ext && ext(seq).seen_overflow) seen_overflow_.erase(e.key);
  // A chunk the head left holds no live entry: keep one for reuse (the window moves steadily),
  // free the others.
  if ((head_ & (kChunkEntries - 1)) == 0) {
    Chunk& c = chunks_[((head_ - 1) >> kChunkShift) & chunk_mask_];
    if (spare_.empty()) spare_.push_back(std::move(c));
    c = Chunk{};
  }
}

void DedupTable::rebuild_index() {
  rebuilt_at_ = tail_;
  if (!index_.empty() && (size() + 1) * 3 <= index_.size()) {
    // Same size: delete the stale slots in place, sweeping from an empty slot so that every probe
    // run is seen whole. Backward-shift deletion moves later members of the run into the hole,
    // which may be stale too, hence the inner loop.
    size_t start = 0;
    while (index_[start].tag != 0) ++start;
    for (size_t k = 1; k <= index_.size(); ++k) {
      const size_t i = (start + k) & index_mask_;
      while (index_[i].tag != 0 && seq_of(index_[i].seq) < head_) {
        size_t hole = i;
        for (size_t j = (hole + 1) & index_mask_; index_[j].tag != 0; j = (j + 1) & index_mask_) {
          const size_t h = index_[j].tag & index_mask_;
          const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
          if (stays) continue;
          index_[hole] = index_[j];
          hole = j;
        }
        index_[hole] = Slot{};
        --occupied_;
      }
    }
    return;
  }
  size_t cap = std::max<size_t>(1024, index_.size());
  while ((size() + 1) * 3 > cap) cap *= 2;
  PodArray<Slot> old(cap);
  old.swap(index_);
  index_mask_ = cap - 1;
  occupied_ = 0;
  // Walking the old index in slot order places each live entry at or near its old home (or that
  // plus the old size): sequential streams instead of a random write per entry.
  for (size_t j = 0; j < old.size(); ++j) {
    if (old[j].tag == 0 || seq_of(old[j].seq) < head_) continue;
    size_t i = old[j].tag & index_mask_;
    while (index_[i].tag != 0) i = (i + 1) & index_mask_;
    index_[i] = old[j];
    ++occupied_;
  }
  // The outgrown array becomes entry chunks; a remainder smaller than a chunk is unmapped. At
  // most the chunks the ring may still add before it holds kMaxLive entries are kept, so that
  // the peak memory stays what the table would map anyway.
  size_t bytes = 0;
  auto* base = reinterpret_cast<std::byte*>(old.release(bytes));
  const size_t in_use = static_cast<size_t>((tail_ >> kChunkShift) - (head_ >> kChunkShift)) + 1;
  const size_t max_chunks = kMaxLive / kChunkEntries + 1;
  const size_t keep = max_chunks > in_use ? max_chunks - in_use : 0;
  size_t used = 0;
  for (; used + kChunkBytes <= bytes && spare_blocks_.size() < keep; used += kChunkBytes)
    spare_blocks_.push_back(base + used);
  if (used < bytes) free_pages(base + used, bytes - used);
}

uint64_t DedupTable::insert(uint64_t key, uint64_t ts) {
  if (size() >= kMaxLive) {
    pop();
    ++forced_;
  }
  // Linear probing stays short up to half full (stale slots count: lookups step over them).
  if ((occupied_ + 1) * 2 > index_.size() || tail_ - rebuilt_at_ > (uint64_t{1} << 30))
    rebuild_index();
  const uint64_t seq = tail_;
  if ((seq & (kChunkEntries - 1)) == 0 || chunks_.empty()) {
    // A new chunk: grow the ring of chunks when every position holds live entries.
    const uint64_t first_chunk = head_ >> kChunkShift;
    const uint64_t chunk = seq >> kChunkShift;
    if (chunks_.empty() || chunk - first_chunk >= chunks_.size()) {
      std::vector<Chunk> n(std::max<size_t>(4, chunks_.size() * 2));
      for (uint64_t k = first_chunk; k < chunk; ++k)
        n[k & (n.size() - 1)] = std::move(chunks_[k & chunk_mask_]);
      chunks_.swap(n);
      chunk_mask_ = chunks_.size() - 1;
    }
    Chunk& c = chunks_[chunk & chunk_mask_];
    if (c.entries.empty()) {
      if (!spare_.empty()) {
        c = std::move(spare_.back());
        spare_.pop_back();
      } else {
        if (!spare_blocks_.empty()) {
          c.entries = PodArray<DedupEntry>::adopt(spare_blocks_.back(), kChunkEntries, kChunkBytes);
          spare_blocks_.pop_back();
        } else {
          c.entries = PodArray<DedupEntry>(kChunkEntries);
        }
      }
    }
  }
  ++tail_;
  // The first free slot of the probe run: empty, or stale (its entry expired).
  const uint32_t tag = tag_of(key);
  size_t i = tag & index_mask_;
  while (index_[i].tag != 0 && seq_of(index_[i].seq) >= head_) i = (i + 1) & index_mask_;
  if (index_[i].tag == 0) ++occupied_;
  index_[i] = Slot{tag, static_cast<uint32_t>(seq)};
  DedupEntry& e = at(seq);
  new (&e) DedupEntry();
  e.key = key;
  e.ts = ts;
  return seq;
}

DedupExt& DedupTable::ext(uint64_t seq) {
  DedupEntry& e = at(seq);
  Chunk& c = chunks_[(seq >> kChunkShift) & chunk_mask_];
  if (c.ext.empty()) c.ext = PodArray<DedupExt>(kChunkEntries, /*huge=*/false);
  DedupExt& x = c.ext[seq & (kChunkEntries - 1)];
  if (!e.has_ext) {
    new (&x) DedupExt();
    x.last_point = e.first_point;
    x.ib_len = e.ib_len;
    e.has_ext = true;
  }
  return x;
}

void DedupTable::add_id(DedupEntry& e, uint64_t seq, uint64_t id) {
  if (e.n_ids == DedupEntry::kMaxCopies) {
    auto& extra = extra_ids_.at(e.key);
    const uint32_t shift = extra[0];
    e.id0 += shift;
    for (size_t k = 0; k + 1 < extra.size(); ++k) extra[k] = extra[k + 1] - shift;
    --e.n_ids;
    if (e.has_ext) {
      DedupExt& x = ext(seq);
      if (x.seen_overflow) {
        for (uint8_t& c : seen_overflow_.at(e.key)) c = c > 0 ? c - 1 : 0;
      } else {
        for (uint8_t i = 0; i < x.n_seen; ++i)
          x.seen_count[i] = x.seen_count[i] > 0 ? x.seen_count[i] - 1 : 0;
      }
    }
  }
  if (e.n_ids == 0)
    e.id0 = id;
  else
    extra_ids_[e.key][e.n_ids - 1u] = static_cast<uint32_t>(id - e.id0);
  ++e.n_ids;
}

uint8_t& DedupTable::seen(DedupExt& x, uint64_t key, uint32_t slot) {
  if (!x.seen_overflow) {
    for (uint8_t i = 0; i < x.n_seen; ++i)
      if (x.seen_slot[i] == slot) return x.seen_count[i];
    if (x.n_seen < DedupExt::kSeenInline) {
      x.seen_slot[x.n_seen] = static_cast<uint8_t>(slot);
      x.seen_count[x.n_seen] = 0;
      return x.seen_count[x.n_seen++];
    }
    auto& all = seen_overflow_[key];
    all.fill(0);
    for (uint8_t i = 0; i < x.n_seen; ++i) all[x.seen_slot[i]] = x.seen_count[i];
    x.seen_overflow = true;
  }
  return seen_overflow_[key][slot];
}

// ---------------------------------------------------------------------------------------------
// PSN records and flows
// ---------------------------------------------------------------------------------------------
const Tx* PsnRec::latest() const {
  if (tx_count == 0) return nullptr;
  const Tx* t = slot((tx_next + kTxRing - 1) % kTxRing);
  return t && t->valid ? t : nullptr;
}

const Tx* PsnRec::latest_before(uint64_t ts) const {
  const Tx* best = nullptr;
  for (const Tx& t : txs())
    if (t.valid && t.ts <= ts && (!best || t.ts > best->ts)) best = &t;
  return best;
}

Tx* PsnRec::find(uint64_t pkt) {
  for (Tx& t : txs())
    if (t.valid && t.pkt == pkt) return &t;
  return nullptr;
}

int64_t Flow::unwrap(uint32_t psn) {
  psn &= wire::kPsnMask;
  if (!have_ref) {
    have_ref = true;
    // Start well away from 0 so that PSNs before the first one stay positive.
    ref_ext = (int64_t{1} << 32) + psn;
    base_ext = ref_ext;
    return ref_ext;
  }
  const uint32_t ref = static_cast<uint32_t>(ref_ext) & wire::kPsnMask;
  int64_t d = static_cast<int64_t>((psn - ref) & wire::kPsnMask);
  if (d >= (1 << 23)) d -= (1 << 24);
  const int64_t ext = ref_ext + d;
  if (ext > ref_ext) ref_ext = ext;
  return ext;
}

namespace {
constexpr size_t kMaxWindow = 65536;  // > max MPR (32640 PSNs) with room for late retransmits
constexpr int64_t kMaxJump = 8192;    // largest forward step of the window at once
// The injector's log stamps a drop when its relay reads the frame, after a capture on the
// switch end of the link stamped it; allow for the two clocks' reading order.
constexpr uint64_t kProbeDropSlackNs = 1'000'000;
}  // namespace

PsnRec* Flow::rec_create(int64_t ext) {
  if (win.empty()) {
    base_ext = ext;
    win.emplace_back();
    return &win.front();
  }
  if (ext < base_ext) {
    // A PSN before the window: grow backwards only a little (late first sighting).
    const int64_t need = base_ext - ext;
    if (need > 4096 || win.size() + static_cast<size_t>(need) > kMaxWindow) return nullptr;
    for (int64_t k = 0; k < need; ++k) win.emplace_front();
    base_ext = ext;
    return &win.front();
  }
  const int64_t i = ext - base_ext;
  // A PSN far beyond the window is a corrupt field or a capture that missed a lot: not judged,
  // and not allowed to allocate. When the sender really moved on, restart the window there.
  if (i >= static_cast<int64_t>(win.size()) + kMaxJump) {
    if (++wild < 64) return nullptr;
    wild = 0;
    for (size_t k = 0; k < win.size(); ++k) win[k].release(tx_pool);
    win.clear();
    base_ext = ext;
    win.emplace_back();
    return &win.front();
  }
  wild = 0;
  while (static_cast<int64_t>(win.size()) <= i) win.emplace_back();
  return &win[static_cast<size_t>(i)];
}

// ---------------------------------------------------------------------------------------------
// Engine
// ---------------------------------------------------------------------------------------------
Engine::Engine(DutProfile p, RuleSelection s, size_t max_ev)
    : prof(std::move(p)), sel(std::move(s)), max_evidence(max_ev) {
  wire_profile = wire::make_profile(prof.wire_params());
  decode_layout = std::make_unique<wire::DecodeLayout>(*wire_profile);
  auto cat = rule_catalogue();
  for (size_t i = 0; i < kRuleCount; ++i)
    enabled[i] = cat[i].implemented && sel.selected(cat[i].id);
  for (const auto& n : prof.nodes) {
    const int id = static_cast<int>(node_addr.size());
    node_addr.push_back(n.addrs.front());
    node_name.push_back(n.name);
    node_has_point.push_back(false);
    for (const auto& a : n.addrs) addr_node.emplace(a, id);
  }
  for (const auto& q : prof.qps) {
    const int rq = node_of(*q.requester_addr);
    const int rs = node_of(*q.responder_addr);
    Flow& fl = new_flow(rq, rs, *q.requester_addr, *q.responder_addr);
    fl.prof = q;
    fl.configured = true;
    fl.pmtu = q.pmtu.value_or(0);
    bind_data(fl, *q.responder_qpn);
    if (q.requester_qpn) bind_ctl(fl, *q.requester_qpn);
  }
  profile_nodes = node_addr.size();
}

std::string Engine::at(uint64_t ts) const {
  const uint64_t base = first_ts == kNoTime ? ts : std::min(ts, first_ts);
  char buf[48];
  std::snprintf(buf, sizeof buf, "t=+%.9f s", static_cast<double>(ts - base) / 1e9);
  return buf;
}

std::string Engine::dur(uint64_t ns) {
  char buf[48];
  if (ns < 10'000)
    std::snprintf(buf, sizeof buf, "%llu ns", static_cast<unsigned long long>(ns));
  else if (ns < 10'000'000)
    std::snprintf(buf, sizeof buf, "%.2f us", static_cast<double>(ns) / 1e3);
  else if (ns < 10'000'000'000ull)
    std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", static_cast<double>(ns) / 1e9);
  return buf;
}

namespace {
// Caps on state created from the traffic itself, so that garbage cannot grow it without bound.
constexpr size_t kMaxNodes = 65536;
constexpr size_t kMaxFlows = 16384;
}  // namespace

int Engine::node_of(const Addr& a) {
  for (const NodeCacheEntry& c : node_cache)
    if (c.id >= 0 && same_addr(c.addr, a)) return c.id;
  auto it = addr_node.find(a);
  if (it != addr_node.end()) {
    node_cache[node_cache_next++ % node_cache.size()] = {a, it->second};
    return it->second;
  }
  if (node_addr.size() >= kMaxNodes) {
    nodes_refused++;
    return -1;
  }
  const int id = static_cast<int>(node_addr.size());
  node_addr.push_back(a);
  node_name.emplace_back();
  node_has_point.push_back(false);
  addr_node.emplace(a, id);
  return id;
}

void Engine::nodes_of(const Addr& src, const Addr& dst, int& src_node, int& dst_node) {
  for (const NodePairEntry& e : node_pairs)
    if (e.src_node >= 0 && same_addr(e.src, src) && same_addr(e.dst, dst)) {
      src_node = e.src_node;
      dst_node = e.dst_node;
      return;
    }
  src_node = node_of(src);
  dst_node = node_of(dst);
  // (-1: a node refused past kMaxNodes; node_of() counts each refusal, so it is asked again.)
  if (src_node >= 0 && dst_node >= 0)
    node_pairs[node_pairs_next++ & 1] = {src, dst, src_node, dst_node};
}

Flow& Engine::new_flow(int req_node, int rsp_node, const Addr& req, const Addr& rsp) {
  auto fl = std::make_unique<Flow>();
  fl->id = static_cast<int>(flows.size());
  fl->req_node = req_node;
  fl->rsp_node = rsp_node;
  fl->req_addr = req;
  fl->rsp_addr = rsp;
  fl->prof = prof.defaults;
  fl->prof.requester_addr = req;
  fl->prof.responder_addr = rsp;
  fl->pmtu = fl->prof.pmtu.value_or(0);
  by_pair[{req_node, rsp_node}].push_back(fl->id);
  flows.push_back(std::move(fl));
  return *flows.back();
}

void Engine::bind_data(Flow& fl, uint32_t rsp_qpn) {
  fl.rsp_qpn = rsp_qpn;
  by_data[{fl.req_node, fl.rsp_node, rsp_qpn}] = fl.id;
}

void Engine::bind_ctl(Flow& fl, uint32_t req_qpn) {
  fl.req_qpn = req_qpn;
  by_ctl[{fl.req_node, fl.rsp_node, req_qpn}] = fl.id;
}

Flow* Engine::flow_for_data(const Obs& o, uint32_t rsp_qpn, bool create) {
  FlowCacheEntry& c = data_flow_cache;
  if (c.flow && c.req_node == o.src_node && c.rsp_node == o.dst_node && c.qpn == rsp_qpn)
    return c.flow;
  auto it = by_data.find({o.src_node, o.dst_node, rsp_qpn});
  if (it != by_data.end()) {
    c = {o.src_node, o.dst_node, rsp_qpn, flows[it->second].get()};
    return c.flow;
  }
  // A flow first seen through its control packets: match the responder QPN's low bits (spdcid).
  if (auto p = by_pair.find({o.src_node, o.dst_node}); p != by_pair.end()) {
    for (int id : p->second) {
      Flow* f = flows[static_cast<size_t>(id)].get();
      if (!f->rsp_qpn && f->req_qpn) {
        bind_data(*f, rsp_qpn);
        return f;
      }
    }
  }
  if (!create || !prof.infer_qps || o.src_node < 0 || o.dst_node < 0) return nullptr;
  if (flows.size() >= kMaxFlows) {
    flows_refused++;
    return nullptr;
  }
  Flow& fl = new_flow(o.src_node, o.dst_node, o.src, o.dst);
  bind_data(fl, rsp_qpn);
  return &fl;
}

Flow* Engine::flow_for_ctl(const Obs& o, uint32_t req_qpn, std::optional<uint16_t> spdcid,
                           bool create) {
  // Control packets go responder -> requester.
  FlowCacheEntry& c = ctl_flow_cache;
  if (c.flow && c.req_node == o.dst_node && c.rsp_node == o.src_node && c.qpn == req_qpn)
    return c.flow;
  auto it = by_ctl.find({o.dst_node, o.src_node, req_qpn});
  if (it != by_ctl.end()) {
    c = {o.dst_node, o.src_node, req_qpn, flows[it->second].get()};
    return c.flow;
  }
  Flow* only = nullptr;
  int candidates = 0;
  if (auto p = by_pair.find({o.dst_node, o.src_node}); p != by_pair.end()) {
    for (int id : p->second) {
      Flow* f = flows[static_cast<size_t>(id)].get();
      if (f->req_qpn) continue;
      if (spdcid && f->rsp_qpn && (*f->rsp_qpn & 0xFFFF) == *spdcid) {
        bind_ctl(*f, req_qpn);
        return f;
      }
      only = f;
      ++candidates;
    }
  }
  if (candidates == 1 && (!spdcid || !only->rsp_qpn)) {
    bind_ctl(*only, req_qpn);
    return only;
  }
  if (!create || !prof.infer_qps || o.src_node < 0 || o.dst_node < 0) return nullptr;
  if (flows.size() >= kMaxFlows) {
    flows_refused++;
    return nullptr;
  }
  Flow& fl = new_flow(o.dst_node, o.src_node, o.dst, o.src);
  bind_ctl(fl, req_qpn);
  return &fl;
}

// The node of an address already known (from the profile or the traffic); -1 otherwise. Unlike
// node_of(), it never creates a node.
int Engine::known_node(const std::optional<Addr>& a) const {
  if (!a) return -1;
  auto it = addr_node.find(*a);
  return it == addr_node.end() ? -1 : it->second;
}

Flow* Engine::flow_for_decision(const Decision& d, bool data) {
  if (!d.qpn) return nullptr;
  // QPNs repeat across nodes: the packet's addresses, when logged, name the flow.
  std::optional<Addr> src, dst;
  if (!d.src.empty()) src = parse_addr(d.src);
  if (!d.dst.empty()) dst = parse_addr(d.dst);
  const int src_node = known_node(src), dst_node = known_node(dst);
  Flow* best = nullptr;
  for (auto& f : flows) {
    const auto& q = data ? f->rsp_qpn : f->req_qpn;
    if (!q || *q != *d.qpn) continue;
    const int from = data ? f->req_node : f->rsp_node, to = data ? f->rsp_node : f->req_node;
    if ((src && from >= 0 && src_node >= 0 && from != src_node) ||
        (dst && to >= 0 && dst_node >= 0 && to != dst_node))
      continue;
    if (!best) best = f.get();
    if (d.psn && f->have_ref) {
      // Prefer the flow whose PSN window holds the PSN.
      const uint32_t ref = static_cast<uint32_t>(f->ref_ext) & wire::kPsnMask;
      if (wire::psn_diff(ref, *d.psn) < 65536 || wire::psn_diff(*d.psn, ref) < 65536)
        return f.get();
    }
  }
  return best;
}

// A packet whose ICRC fails is dropped by the receiver: it never counts as an arrival.
bool Engine::arrival_at_rsp(const Flow& fl, const Obs& o) const {
  return !o.icrc_bad && (responder_captured(fl) ? o.at_dst : true);
}
bool Engine::arrival_at_req(const Flow& fl, const Obs& o) const {
  return !o.icrc_bad && (requester_captured(fl) ? o.at_dst : o.first);
}

bool Engine::ctl_dropped(const Flow& fl, const Obs& o) const {
  if (requester_captured(fl)) return false;
  for (const auto& [op, psn, t] : fl.ctl_drops)
    if (op == o.f->bth.opcode && psn == o.f->bth.psn && t >= o.ts &&
        t - o.ts <= prof.tol.dedup_window_ns)
      return true;
  return false;
}

uint64_t Engine::mpr_eff(const Flow& fl) const {
  uint64_t m = 0;
  if (fl.prof.mpr && fl.prof.mpr_dest)
    m = std::min(*fl.prof.mpr, *fl.prof.mpr_dest);
  else if (fl.prof.mpr)
    m = *fl.prof.mpr;
  else if (fl.prof.mpr_dest)
    m = *fl.prof.mpr_dest;
  if (fl.prof.caps.dynamic_mpr && fl.dyn_mpr != 0)
    m = m ? std::min<uint64_t>(m, fl.dyn_mpr) : fl.dyn_mpr;
  return m * 128;
}

uint64_t Engine::timeout_ns(const Flow& fl) const {
  if (!fl.prof.timeout) return 0;
  return static_cast<uint64_t>(1024.0 * static_cast<double>(uint64_t{1} << *fl.prof.timeout));
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------
void Engine::fail(RuleIdx r, const Obs& o, std::string msg) {
  fail_at(r, o.point, o.frame_no, o.ts, std::move(msg));
}

void Engine::fail_at(RuleIdx r, uint32_t point, uint64_t frame_no, uint64_t ts, std::string msg) {
  if (!enabled[r]) return;
  // The max below needs the rule's whole count.
  if (clean_frames[static_cast<size_t>(FramePre::kClean)] |
      clean_frames[static_cast<size_t>(FramePre::kCleanIcrc)])
    fold_clean_frames();
  RuleState& st = rules[r];
  st.violations++;
  st.checked = std::max(st.checked, st.violations);
  const auto& info = rule_catalogue()[r];
  if (annotate && frame_no != 0 && annotations.size() < 100000)
    annotations.push_back({point, frame_no, std::string(info.id) + ": " + msg});
  if (st.evidence.size() < max_evidence)
    st.evidence.push_back({frame_no ? point : UINT32_MAX, frame_no, ts, std::move(msg)});
  if (on_violation) on_violation(r, point, frame_no, ts);
}

// ---------------------------------------------------------------------------------------------
// Merging the same packet seen at several capture points
// ---------------------------------------------------------------------------------------------
uint64_t Engine::frame_key(const Obs& o, const wire::DecodedFrame& f) const {
  // The key covers what no switch rewrites: RoCE addresses, sport, the IB bytes minus the BTH
  // variant byte. Data packets use only BTH+METH+TSETH, which survive trimming, so a trimmed copy
  // merges with its original; ts16 separates transmissions of one PSN.
  const bool data = f.op && f.op->kind == wire::PacketKind::kMrcData;
  const uint8_t* bth = nullptr;
  size_t n = 0;
  if (f.off_bth != 0xFFFF && f.off_bth < f.frame.size()) {
    n = std::min(f.frame.size() - f.off_bth, data ? size_t{20} : size_t{64});
    bth = reinterpret_cast<const uint8_t*>(f.frame.data()) + f.off_bth;
  }
  return merge_key(o.src, o.dst, f.udp.sport, bth, n);
}

// Ethernet II, IPv6 without extension headers, UDP to the RoCE port: the shape whose merge key
// early_frame_key() and shape_key() read straight from the bytes (what frame_key() computes for
// such a frame). Null when the frame has another shape.
namespace {
constexpr size_t kOffIp6 = 14, kOffUdp = kOffIp6 + 40, kOffBth = kOffUdp + 8;
// layout: wp's lookups read once (wire::DecodeLayout), or null.
const uint8_t* plain_shape(const wire::WireProfile& wp, wire::Bytes data, wire::LinkType link,
                           const wire::DecodeLayout* layout = nullptr) {
  if (link != wire::LinkType::kEthernet || data.size() < kOffBth + 12) return nullptr;
  const auto* b = reinterpret_cast<const uint8_t*>(data.data());
  if (b[12] != 0x86 || b[13] != 0xDD || b[kOffIp6 + 6] != 17) return nullptr;
  const auto port = static_cast<uint16_t>(b[kOffUdp + 2] << 8 | b[kOffUdp + 3]);
  if (!(layout ? layout->is_roce_port(port) : wp.is_roce_port(port))) return nullptr;
  return b;
}

// The merge key of a frame of that shape (b: its bytes, n_bytes of them).
uint64_t plain_key(const uint8_t* b, size_t n_bytes, const Addr& src, bool is_data) {
  Addr dst;
  std::memcpy(dst.data(), b + kOffIp6 + 24, 16);
  const size_t n = std::min(n_bytes - kOffBth, is_data ? size_t{20} : size_t{64});
  const uint16_t sport = static_cast<uint16_t>(b[kOffUdp] << 8 | b[kOffUdp + 1]);
  return merge_key(src, dst, sport, b + kOffBth, n);
}
}  // namespace

uint64_t Engine::shape_key(const wire::WireProfile& wp, wire::Bytes data, wire::LinkType link,
                           const wire::DecodeLayout* layout) {
  if (layout) layout = layout->for_profile(wp);
  const uint8_t* b = plain_shape(wp, data, link, layout);
  if (!b) return 0;
  Addr src;
  std::memcpy(src.data(), b + kOffIp6 + 8, 16);
  const wire::OpcodeInfo* op = layout ? layout->ops[b[kOffBth]] : wp.opcode_info(b[kOffBth]);
  return plain_key(b, data.size(), src, op && op->kind == wire::PacketKind::kMrcData);
}

bool Engine::may_merge(const Addr& src, bool is_data) const {
  if (points.size() != 1) return true;
  // At the sender: known from the node cache alone (node_of() may add a node, and the frame
  // announced by a prefetch may never come).
  const PointState& ps = points[0];
  bool at_src = false;
  for (const NodeCacheEntry& c : node_cache)
    at_src = at_src || (ps.node >= 0 && c.id == ps.node && same_addr(c.addr, src));
  return merges(is_data, at_src, !ps.info.link_side);
}

uint64_t Engine::early_frame_key(wire::Bytes data, wire::LinkType link) const {
  const uint8_t* b = plain_shape(*wire_profile, data, link);
  if (!b) return 0;
  Addr src;
  std::memcpy(src.data(), b + kOffIp6 + 8, 16);
  const wire::OpcodeInfo* op = wire_profile->opcode_info(b[kOffBth]);
  const bool is_data = op && op->kind == wire::PacketKind::kMrcData;
  return may_merge(src, is_data) ? plain_key(b, data.size(), src, is_data) : 0;
}

uint64_t Engine::merge(Obs& o, const wire::DecodedFrame& f, uint64_t h) {
  dedup.expire(o.ts, prof.tol.dedup_window_ns);
  const bool data = f.op && f.op->kind == wire::PacketKind::kMrcData;
  if (const uint64_t q = dedup.find(h); q != DedupTable::kNone) {
    DedupEntry& e = dedup.at(q);
    // A copy seen where the first one was seen, or at its sender (which may send the next one
    // through another port), is a new packet.
    const bool upstream = o.point == e.first_point || o.at_src;
    // A data packet seen again at its sender's own interface is the sender's next copy: ts16
    // repeats every 8.4 ms, so a PSN resent on the same EV a whole number of wraps later has
    // the same key (trim-congestion: a third copy 41.9 ms after the second).
    const bool resent = data && o.at_src && o.own_iface;
    if (upstream && (!data || resent)) {
      // Sent again, byte for byte: a new packet (identical SACKs and ACKs are legitimate). A data
      // packet carries ts16, so an identical copy of one is a duplicate even here.
      dedup.add_id(e, q, next_pkt++);
      o.pkt = dedup.id(e, e.n_ids - 1u);
      o.first = true;
      if (e.srv6 && f.l3 == 6) {  // the hops of the new copy are judged from here
        DedupExt& x = dedup.ext(q);
        x.last_point = o.point;
        x.outer_da = f.ip6.dst;
        x.hop_limit = f.ip6.hop_limit;
      }
      return o.pkt;
    }
    DedupExt& x = dedup.ext(q);
    size_t k = size_t{e.n_ids} - 1;
    // Downstream, the n-th sighting at a point is the n-th copy; a data packet's copies are
    // resends ts16 wraps (8.4 ms) apart, of which the latest is the one arriving (an earlier one
    // may have been lost).
    if (!upstream && !data) {
      uint8_t& seen = dedup.seen(x, e.key, o.point % 64);
      k = seen;
      if (seen < 255) seen++;
    }
    o.pkt = dedup.id(e, std::min<size_t>(k, e.n_ids - 1u));
    o.first = false;
    hop_rules(o, f, e, x);
    x.last_point = o.point;
    if (f.l3 == 6) {
      x.outer_da = f.ip6.dst;
      x.hop_limit = f.ip6.hop_limit;
    }
    e.trimmed = e.trimmed || o.trimmed;
    return o.pkt;
  }
  const uint64_t q = dedup.insert(h, o.ts);
  DedupEntry& e = dedup.at(q);
  dedup.add_id(e, q, next_pkt++);
  e.first_point = o.point;
  e.srv6 = f.has_inner_ip6;
  e.trimmed = o.trimmed;
  const uint32_t ib_len =
      f.off_udp != 0xFFFF ? static_cast<uint32_t>(f.frame.size() - f.off_udp - 8) : 0;
  e.ib_len = static_cast<uint16_t>(std::min<uint32_t>(ib_len, DedupEntry::kBigLen));
  if (e.srv6 || ib_len >= DedupEntry::kBigLen) {
    DedupExt& x = dedup.ext(q);
    x.ib_len = ib_len;
    if (f.l3 == 6) {
      x.outer_da = f.ip6.dst;
      x.hop_limit = f.ip6.hop_limit;
    }
  }
  o.pkt = e.id0;
  o.first = true;
  return o.pkt;
}

// ---------------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------------
// Everything on_frame() does after the decode. IcrcDone: decode_stage() verified the ICRC
// already (the pipelined checker), else it is verified here, after the merge-table prefetch.
template <bool IcrcDone>
inline __attribute__((always_inline)) void Engine::judge_frame(
    uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data, wire::LinkType link,
    uint32_t orig_len, FrameT<IcrcDone>& frame, bool ok, uint64_t early_key,
    std::optional<uint64_t> content_h, FramePre frame_pre) {
  PointState& ps = points[point];
  ps.frames++;
  if (!ok) ps.decode_errors++;
  Obs o;
  o.point = point;
  o.frame_no = frame_no;
  o.ts = ts;
  o.f = &frame;
  o.snapped = orig_len > data.size();
  if (content_h) {
    o.content_hash_known = true;
    o.content_hash = *content_h;
  }
  auto verify_icrc = [&] {
    if constexpr (!IcrcDone) {
      if (frame.has_icrc) {
        frame.icrc_checked = true;
        frame.icrc_ok = wire::verify_icrc(frame);
      }
    }
  };
  if (!frame.roce) {
    verify_icrc();
    non_roce_rules(o, frame);
    unrecognised(o, frame);
    return;
  }
  ps.roce++;
  if (frame.op && frame.op->mrc) {
    ps.mrc++;
    mrc_frames++;
  } else {
    unrecognised(o, frame);
  }
  const bool have_addrs = roce_addrs(frame, o.src, o.dst);
  const wire::PacketKind kind = frame.op ? frame.op->kind : wire::PacketKind::kUnknown;
  uint64_t key = 0;
  bool merges_here = false;
  if (have_addrs) {
    nodes_of(o.src, o.dst, o.src_node, o.dst_node);
    o.at_src = ps.node >= 0 && ps.node == o.src_node;
    o.own_iface = !ps.info.link_side;
    o.at_dst = ps.node >= 0 && ps.node == o.dst_node;
    merges_here = merges(kind == wire::PacketKind::kMrcData, o.at_src, o.own_iface);
  }
  if (merges_here) {
    // early_frame_key() read the bytes frame_key() would read when the decoder found that shape.
    const bool same_shape = early_key != 0 && link == wire::LinkType::kEthernet && frame.l3 == 6 &&
                            !frame.has_inner_ip6 && frame.off_l3 == 14 && frame.off_bth == 62;
    key = same_shape ? early_key : frame_key(o, frame);
    if (key != early_key) dedup.prefetch(key);
  }
  verify_icrc();
  if (!have_addrs) return;
  o.format = frame.ev_format();
  // A profile that puts the 16-bit UDP EV in the flow label too: such a frame is UDP format,
  // not STEV, whatever the flow label says.
  if (o.format == wire::EvFormat::kStev &&
      wire_profile->params().ecmp_flow_label == wire::EcmpFlowLabel::kEv &&
      frame.flow_label() == frame.udp.sport)
    o.format = wire::EvFormat::kUdp;
  o.trimmed = frame.trimmed;
  o.ce = frame.ecn() == 3;
  if (merges_here) {
    merge(o, frame, key);
  } else {
    o.pkt = next_pkt++;
    o.first = true;
  }
  if (o.first) packets++;

  Flow* fl = nullptr;
  switch (kind) {
    case wire::PacketKind::kMrcData:
    case wire::PacketKind::kMrcProbe:
      fl = flow_for_data(o, frame.bth.dest_qp, true);
      break;
    case wire::PacketKind::kMrcSack:
      fl = flow_for_ctl(o, frame.bth.dest_qp, frame.seth.spdcid, true);
      break;
    case wire::PacketKind::kMrcNack:
      fl = flow_for_ctl(o, frame.bth.dest_qp, frame.neth.spdcid, true);
      break;
    case wire::PacketKind::kMrcTransportAck:
      fl = flow_for_ctl(o, frame.bth.dest_qp, std::nullopt, true);
      break;
    default:
      break;
  }
  if (fl && fl->prof.ev_format) o.format = *fl->prof.ev_format;
  o.wev = wire::wev_from_carriage(wire_profile->params(), o.format, frame.udp.sport,
                                  frame.flow_label());
  o.icrc_bad = frame.icrc_checked && !frame.icrc_ok;
  if (o.first) {
    // On one thread the stage runs here, after verify_icrc(); the pipelined checker's reading
    // thread ran it already.
    frame_rules(o, frame, ok, IcrcDone ? frame_pre : frame_rules_stage(frame, ok));
    srv6_inner_da(o, frame);
    udp_checksum(o, frame);
    ev_carriage(o, frame, fl);
  }
  // Stateful rules need every header of the packet; a frame the decoder gave up on is judged by
  // the framing rules only. So is a corrupted copy first seen away from its sender: its fields
  // cannot be trusted, and its receiver drops it.
  if (!ok) return;
  if (o.icrc_bad && o.first && !o.at_src) return;
  if (kind == wire::PacketKind::kMrcEndpointRequest ||
      kind == wire::PacketKind::kMrcEndpointResponse) {
    on_endpoint(o, frame);
    return;
  }
  if (!fl) return;
  switch (kind) {
    case wire::PacketKind::kMrcData:
      on_data(o, *fl);
      plane_on_packet(o, frame, *fl, true);
      rev_on_data(o, *fl);
      cc_on_data(o, frame, *fl);
      break;
    case wire::PacketKind::kMrcProbe:
      on_probe(o, *fl);
      plane_on_packet(o, frame, *fl, false);
      break;
    case wire::PacketKind::kMrcSack:
      cc_on_sack(o, frame, *fl);
      on_sack(o, *fl);
      plane_on_sack(o, frame, *fl);
      break;
    case wire::PacketKind::kMrcNack:
      on_nack(o, *fl);
      break;
    case wire::PacketKind::kMrcTransportAck:
      on_tack(o, *fl);
      break;
    default:
      break;
  }
}

void Engine::tick(uint64_t ts) {
  frames++;
  if (first_ts == kNoTime) first_ts = ts;
  last_ts = std::max(last_ts, ts);
  now = std::max(now, ts);
  if (now >= next_sweep) {
    sweep(now);
    next_sweep = now + 200'000;
  }
}

// The merge-table line is fetched before the frame is even decoded when the frame has the usual
// shape (the key is recomputed from the decoded frame in judge_frame(), and fetched again if it
// differs): the table spans the dedup window, and its random line is the costliest load here. A
// frame announced by prefetch() had its key computed (and its line fetched) then.
uint64_t Engine::take_early_key(wire::Bytes data, wire::LinkType link) {
  uint64_t early_key = 0;
  if (data.data() == ahead_data && data.size() == ahead_size && link == ahead_link) {
    early_key = ahead_key;
  } else {
    early_key = early_frame_key(data, link);
    dedup.prefetch(early_key);
  }
  ahead_data = nullptr;
  return early_key;
}

bool Engine::decode_stage(const wire::WireProfile& wp, wire::Bytes data, wire::LinkType link,
                          wire::DecodedFrame& f, const wire::DecodeLayout* layout) {
  wire::DecodeOptions opt;
  opt.link = link;
  opt.verify_icrc = false;
  opt.layout = layout;
  return wire::decode_frame(data, f, opt, wp);
}

void Engine::icrc_stage(wire::DecodedFrame* const* fs, size_t n) {
  assert(n <= kIcrcStageMax);
  std::optional<uint32_t> icrc[kIcrcStageMax];
  wire::compute_icrcs(fs, n, icrc);
  for (size_t i = 0; i < n; ++i) {
    wire::DecodedFrame& f = *fs[i];
    if (f.has_icrc) {  // what DecodeOptions::verify_icrc and on_frame() set
      f.icrc_checked = true;
      f.icrc_ok = icrc[i] && *icrc[i] == f.icrc;
    }
  }
}

void Engine::on_frame(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                      wire::LinkType link, uint32_t orig_len) {
  tick(ts);
  const uint64_t early_key = take_early_key(data, link);
  wire::DecodeOptions opt;
  opt.link = link;
  // The ICRC is verified in judge_frame(), once the merge-table line for this frame is being
  // fetched: the CRC over the whole packet hides that cache miss. Same result as
  // DecodeOptions::verify_icrc.
  opt.verify_icrc = false;
  opt.layout = decode_layout.get();
  const bool ok = wire::decode_frame(data, decoded, opt, *wire_profile);
  judge_frame<false>(point, frame_no, ts, data, link, orig_len, decoded, ok, early_key,
                     std::nullopt, FramePre::kJudge);
}

std::optional<uint64_t> Engine::payload_hash_stage(const wire::DecodedFrame& f, bool ok) {
  // What on_data() and retx_checks() hash: a data packet's content, unless trimmed (o.trimmed is
  // f.trimmed). A frame the decoder gave up on reaches no stateful rule.
  if (!ok || !f.roce || !f.op || f.op->kind != wire::PacketKind::kMrcData || f.trimmed)
    return std::nullopt;
  return content_hash(f);
}

void Engine::on_decoded(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data,
                        wire::LinkType link, uint32_t orig_len, const wire::DecodedFrame& f,
                        bool ok, uint64_t key, std::optional<uint64_t> content_h,
                        FramePre frame_pre) {
  tick(ts);
  judge_frame<true>(point, frame_no, ts, data, link, orig_len, f, ok, key, content_h, frame_pre);
}

void Engine::prefetch(wire::Bytes data, wire::LinkType link) {
  ahead_key = early_frame_key(data, link);
  ahead_data = data.data();
  ahead_size = data.size();
  ahead_link = link;
  dedup.prefetch(ahead_key);
}

// A decision concerns exactly one copy of the packet. Each injector link sees the copies of a
// PSN in the order they were sent (a path is FIFO), and logs each once: the copy is the oldest
// one sent before the decision that this link has not logged yet. A drop cannot concern a copy
// the responder's capture already saw. Retransmissions can be queued behind earlier copies for
// tens of ms on a software fabric, so the newest copy is not necessarily the one.
uint8_t Engine::decision_link_bit(const std::string& link) {
  if (auto it = decision_links.find(link); it != decision_links.end()) return it->second;
  const auto bit = static_cast<uint8_t>(1u << (decision_links.size() % 8));
  decision_links.emplace(link, bit);
  return bit;
}

void Engine::mark_decided(Tx& t, DecisionAction a) {
  if (a == DecisionAction::kDrop) t.dropped = true;
  if (a == DecisionAction::kTrim) t.trimmed = true;
  if (a == DecisionAction::kEcn) t.ce = true;
}

namespace {
uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

// The top 16 bits of a key choose its counter in the filter: the PSN plus a per-flow offset, so
// that a flow's data, nearly in PSN order, reads the counters in order (a hashed counter was a
// cache miss per data packet); the rest is a hash that the buckets tell apart.
uint64_t Engine::ParkedDecisions::flow_key(const Flow* fl, int64_t psn) {
  const uint64_t h = mix64(reinterpret_cast<uintptr_t>(fl) ^ mix64(static_cast<uint64_t>(psn)));
  return (flow_slot(fl, psn) << 48) | (h >> 16) | 1;
}

uint64_t Engine::ParkedDecisions::flow_slot(const Flow* fl, int64_t psn) {
  return (static_cast<uint64_t>(psn) + static_cast<uint64_t>(fl->id) * 0x9E37u) & 0xFFFF;
}

namespace {
uint64_t nodes_word(int src_node, int dst_node) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(src_node)) << 32) |
         static_cast<uint32_t>(dst_node);
}
}  // namespace

uint64_t Engine::ParkedDecisions::nameless_slot(uint32_t qpn, int src_node, int dst_node,
                                                uint32_t psn24) {
  return (psn24 + (mix64(nodes_word(src_node, dst_node) ^ qpn) >> 48)) & 0xFFFF;
}

uint64_t Engine::ParkedDecisions::nameless_key(uint32_t qpn, int src_node, int dst_node,
                                               uint32_t psn24) {
  const uint64_t nodes = nodes_word(src_node, dst_node);
  const uint64_t h = mix64(mix64(nodes) ^ ((static_cast<uint64_t>(qpn) << 24) | psn24));
  const uint64_t slot = nameless_slot(qpn, src_node, dst_node, psn24);
  return ((slot << 48) | (h >> 16)) & ~uint64_t{1};
}

uint64_t Engine::ParkedDecisions::key(const ParkedDecision& pd) {
  return pd.fl ? flow_key(pd.fl, pd.psn) : nameless_key(pd.qpn, pd.src_node, pd.dst_node, pd.psn24);
}

void Engine::ParkedDecisions::drop_gone_front() {
  while (!q.empty() && gone.front()) {
    q.pop_front();
    gone.pop_front();
    ++q_base;
  }
}

void Engine::ParkedDecisions::push(const ParkedDecision& pd, uint64_t now_ns, uint64_t max_age_ns) {
  drop_gone_front();
  while (live_n > 0 && (live_n >= 4096 || q.front().t_ns + max_age_ns < now_ns)) {
    const uint64_t k = key(q.front());
    count(k, -1);
    // The oldest live decision is the first of its key.
    auto it = by_key.find(k);
    it->second.erase(it->second.begin());
    if (it->second.empty()) by_key.erase(it);
    q.pop_front();
    gone.pop_front();
    ++q_base;
    --live_n;
    drop_gone_front();
  }
  const uint64_t k = key(pd);
  by_key[k].push_back(q_base + q.size());
  q.push_back(pd);
  gone.push_back(false);
  ++live_n;
  count(k, +1);
}

void Engine::ParkedDecisions::gather(uint64_t a, uint64_t b, bool with_b) {
  scratch.clear();
  static const std::vector<uint64_t> kNoSeqs;
  auto ia = by_key.find(a);
  const std::vector<uint64_t>& va = ia == by_key.end() ? kNoSeqs : ia->second;
  auto ib = with_b ? by_key.find(b) : by_key.end();
  const std::vector<uint64_t>& vb = ib == by_key.end() ? kNoSeqs : ib->second;
  std::merge(va.begin(), va.end(), vb.begin(), vb.end(), std::back_inserter(scratch));
}

// A copy the requester's capture shows after its decision was read: the decision is its. The
// decisions are taken in arrival order, as a walk of the whole queue would (only those with the
// copy's two keys can match).
void Engine::unpark_decisions(Flow& fl, int64_t p, Tx& tx) {
  const uint32_t psn24 = static_cast<uint32_t>(p) & wire::kPsnMask;
  // The filter reads only a key's slot (its top 16 bits), and nearly every data packet finds
  // both slots empty: the two keys' hashes (three and four mix64 rounds) are computed only
  // when a slot is taken. The nameless slot needs one round, the flow's slot none.
  if (!parked.waiting_slot(ParkedDecisions::flow_slot(&fl, p)) &&
      !(fl.rsp_qpn && parked.waiting_slot(ParkedDecisions::nameless_slot(*fl.rsp_qpn, fl.req_node,
                                                                         fl.rsp_node, psn24))))
    return;
  const uint64_t named = ParkedDecisions::flow_key(&fl, p);
  const uint64_t nameless =
      fl.rsp_qpn ? ParkedDecisions::nameless_key(*fl.rsp_qpn, fl.req_node, fl.rsp_node, psn24) : 0;
  parked.gather(named, nameless, fl.rsp_qpn.has_value());
  if (parked.scratch.empty()) return;
  std::vector<uint64_t> named_left, nameless_left;
  for (const uint64_t k : parked.scratch) {
    ParkedDecision& pd = parked.q[k - parked.q_base];
    if (!pd.fl && fl.rsp_qpn && pd.qpn == *fl.rsp_qpn && pd.src_node == fl.req_node &&
        pd.dst_node == fl.rsp_node && pd.psn24 == (static_cast<uint32_t>(p) & wire::kPsnMask)) {
      parked.count(nameless, -1);
      pd.fl = &fl;  // the flow it was waiting for
      pd.psn = p;
      parked.count(named, +1);
    }
    if (pd.fl == &fl && pd.psn == p && decision_may_concern(tx, pd.t_ns, pd.ev, pd.link_bit)) {
      tx.decided_links |= pd.link_bit;
      mark_decided(tx, pd.action);
      parked.count(named, -1);
      parked.gone[k - parked.q_base] = true;
      --parked.live_n;
    } else {
      (ParkedDecisions::key(pd) == named ? named_left : nameless_left).push_back(k);
    }
  }
  auto store = [&](uint64_t key, std::vector<uint64_t>& left) {
    if (left.empty())
      parked.by_key.erase(key);
    else
      parked.by_key[key] = std::move(left);
  };
  store(named, named_left);
  if (fl.rsp_qpn) store(nameless, nameless_left);
}

// A copy sent before the decision, within the merge window, on the decision's EV, and not yet
// logged by that link.
bool Engine::decision_may_concern(const Tx& t, uint64_t t_ns, const std::optional<uint32_t>& ev,
                                  uint8_t link_bit) const {
  return t.valid && t.ts <= t_ns && t_ns - t.ts < prof.tol.dedup_window_ns &&
         (!ev || t.wev == *ev) && !(t.decided_links & link_bit);
}

Tx* Engine::decided_tx(const Decision& d, PsnRec& r, uint8_t bit) {
  Tx* best = nullptr;
  for (Tx& t : r.txs()) {
    if (!decision_may_concern(t, d.t_ns, d.ev, bit)) continue;
    if (d.action == DecisionAction::kDrop && t.at_dst) continue;
    if (!best || t.ts < best->ts) best = &t;
  }
  if (best) best->decided_links |= bit;
  return best;
}

void Engine::on_decision(const Decision& d) {
  decisions++;
  if (d.action == DecisionAction::kCorrupt) {
    corrupt_times.push_back(d.t_ns);
    while (corrupt_times.size() > 4096) corrupt_times.pop_front();
  }
  if (!d.opcode) return;
  const wire::OpcodeInfo* info = wire_profile->opcode_info(*d.opcode);
  if (!info) return;
  const bool data = info->kind == wire::PacketKind::kMrcData;
  Flow* fl = flow_for_decision(d, data || info->kind == wire::PacketKind::kMrcProbe);
  if (!fl && data && d.psn && d.qpn && !d.src.empty()) {
    // Read (decision_lookahead_ns early) before the QP's first frame: wait for the flow.
    const auto src = parse_addr(d.src), dst = parse_addr(d.dst);
    ParkedDecision pd{nullptr, 0, d.t_ns, d.ev, decision_link_bit(d.link), d.action};
    pd.qpn = *d.qpn;
    pd.psn24 = *d.psn;
    pd.src_node = known_node(src);
    pd.dst_node = known_node(dst);
    if (pd.src_node >= 0 && pd.dst_node >= 0)
      parked.push(pd, d.t_ns, 4 * prof.tol.decision_lookahead_ns);
    return;
  }
  if (!fl) return;
  if (data && d.psn) {
    const int64_t p = fl->unwrap(*d.psn);
    PsnRec* r = fl->rec_create(p);
    if (!r) return;
    // Any decision on a data packet proves the requester sent it at d.t_ns.
    if (auto it = fl->drop_retx.find(p);
        it != fl->drop_retx.end() && d.t_ns > it->second.since && d.action != DecisionAction::kDrop)
      fl->drop_retx.erase(it);
    const uint8_t bit = decision_link_bit(d.link);
    if (Tx* tx = decided_tx(d, *r, bit)) {
      mark_decided(*tx, d.action);
    } else {
      parked.push({fl, p, d.t_ns, d.ev, bit, d.action}, d.t_ns, 4 * prof.tol.decision_lookahead_ns);
    }
    if (d.action == DecisionAction::kDrop) {
      fl->data_drops.emplace_back(p, d.t_ns);
      while (fl->data_drops.size() > 256) fl->data_drops.pop_front();
      if (fl->fatal_ts == kNoTime && !r->acked && on(REQ_015)) {
        Pending pd;
        pd.since = d.t_ns;
        pd.psn = p;
        pd.ev = d.ev.value_or(0);
        pd.frame = 0;
        pd.point = UINT32_MAX;
        fl->drop_retx.try_emplace(p, pd);
      }
    } else if (d.action == DecisionAction::kTrim) {
      const bool applies = fl->prof.caps.trim_nack && !fl->prof.caps.trim_nack_dest_unsupported;
      if (applies && !fl->trim_nack.count(p)) {
        Pending pd;
        pd.since = d.t_ns;
        pd.psn = p;
        pd.ev = d.ev.value_or(0);
        pd.point = UINT32_MAX;
        fl->trim_nack.emplace(p, pd);
      }
    }
    return;
  }
  if (d.action == DecisionAction::kDrop && d.psn &&
      (info->kind == wire::PacketKind::kMrcNack || info->kind == wire::PacketKind::kMrcSack ||
       info->kind == wire::PacketKind::kMrcTransportAck)) {
    fl->ctl_drops.emplace_back(*d.opcode, *d.psn, d.t_ns);
    while (fl->ctl_drops.size() > 256) fl->ctl_drops.pop_front();
    // The log does not say which probe a dropped SACK answered (PR=1 and the probe id are not
    // logged): every probe still waiting for its answer may have lost it here (MRC-PRB-002).
    if (info->kind == wire::PacketKind::kMrcSack)
      std::erase_if(fl->probe_ans, [&](const auto& kv) { return kv.second.since <= d.t_ns; });
  }
  if (d.action == DecisionAction::kDrop && info->kind == wire::PacketKind::kMrcProbe) {
    fl->probe_drops.push_back(d.t_ns);
    while (fl->probe_drops.size() > 256) fl->probe_drops.pop_front();
  }
  if (info->kind == wire::PacketKind::kMrcNack && d.psn) {
    // The responder sent a NACK for this PSN: a pending trim obligation is met even when the
    // injector then drops the NACK.
    const int64_t p = fl->unwrap(*d.psn);
    if (auto it = fl->trim_nack.find(p); it != fl->trim_nack.end() && it->second.since <= d.t_ns)
      fl->trim_nack.erase(it);
    if (d.action == DecisionAction::kDrop) {
      // The NACK never reached the requester: it owes no retransmission for it.
      if (auto it = fl->nack_retx.find(p); it != fl->nack_retx.end() && !requester_captured(*fl))
        fl->nack_retx.erase(it);
    }
  }
}

void Engine::settle(Flow& fl, int64_t p, uint64_t at) {
  // Called for every PSN leaving the window: nearly always none of the tables holds it.
  if (!in_range(fl.nack_retx, p) && !in_range(fl.drop_retx, p) && !in_range(fl.trim_nack, p))
    return;
  const uint64_t grace = prof.tol.end_grace_ns;
  auto psn_str = [](int64_t x) {
    return std::to_string(static_cast<uint32_t>(x) & wire::kPsnMask);
  };
  if (auto it = fl.nack_retx.find(p); it != fl.nack_retx.end()) {
    const Pending& pd = it->second;
    if (pd.since + grace <= at) {
      judge(REQ_011);
      fail_at(REQ_011, pd.point, pd.frame, pd.since,
              "NACK code " + hex(pd.code, 2) + " for PSN " + psn_str(p) +
                  " reached the requester but the PSN was never retransmitted");
    }
    fl.nack_retx.erase(it);
  }
  if (auto it = fl.drop_retx.find(p); it != fl.drop_retx.end()) {
    const Pending& pd = it->second;
    if (pd.since + grace <= at) {
      judge(REQ_015);
      fail_at(REQ_015, UINT32_MAX, 0, pd.since,
              "injector dropped data PSN " + psn_str(p) + " (EV " + hex(pd.ev) + ") at " +
                  this->at(pd.since) + "; it was never retransmitted nor acknowledged");
    }
    fl.drop_retx.erase(it);
  }
  if (auto it = fl.trim_nack.find(p); it != fl.trim_nack.end()) {
    const Pending& pd = it->second;
    if (pd.since + grace <= at) {
      judge(RSP_013);
      fail_at(
          RSP_013, pd.point, pd.frame, pd.since,
          "trimmed data PSN " + psn_str(p) + " reached the responder; no TRIMMED NACK followed");
    }
    fl.trim_nack.erase(it);
  }
}

// The answer to a packet leaves through the port the packet arrived on (the trigger's EV), so a
// responder that loses that port before it answers loses the answer with it: the packet is not
// judged once the responder reports the port down (SACK port_status, PORT_STATUS_UPDATE) after
// the packet arrived.
bool Engine::answer_port_lost(const Flow& fl, const Pending& pd) const {
  const uint8_t port = points[pd.point].info.port;
  if (port == 0 || port >= 32) return false;
  auto it = port_status.find({fl.req_node, fl.rsp_node});
  if (it == port_status.end()) return false;
  const PortStatus& ps = it->second;
  return ps.down_since[port] != 0 && ps.down_since[port] >= pd.since;
}

// A capture of the responder's link ("side": "link", the switch end of its cable) sees data before
// the injector's relay on that cable and the responder's answers after it: a packet seen arriving
// there that the injector then dropped never reached the responder, and an answer the injector
// dropped is never seen. Either, logged after the packet was seen and before its answer was due,
// excuses its missing answer: a dropped SACK of the flow whose trigger (cack_psn +
// ack_psn_offset, a signed 16-bit offset: the log names only cack_psn) may be the PSN, a dropped
// NACK for the PSN, or the drop of the PSN itself.
bool Engine::answer_lost_on_link(const Flow& fl, int64_t p, const Pending& pd) const {
  if (pd.point >= points.size() || !points[pd.point].info.link_side) return false;
  const uint32_t p24 = static_cast<uint32_t>(p) & wire::kPsnMask;
  auto in_time = [&](uint64_t t) { return t + kProbeDropSlackNs >= pd.since && t <= pd.deadline; };
  for (const auto& [q, t] : fl.data_drops)
    if (q == p && in_time(t)) return true;
  for (const auto& [op, psn, t] : fl.ctl_drops) {
    if (!in_time(t)) continue;
    const wire::OpcodeInfo* info = wire_profile->opcode_info(op);
    if (!info) continue;
    // p - cack within [-2^15, 2^15) (mod 2^24): ack_psn_offset can reach p.
    if (info->kind == wire::PacketKind::kMrcSack &&
        ((p24 - psn + 0x8000u) & wire::kPsnMask) < 0x10000u)
      return true;
    if (info->kind == wire::PacketKind::kMrcNack && psn == p24) return true;
  }
  return false;
}

void Engine::sweep(uint64_t t) {
  for (auto& fp : flows) {
    Flow& fl = *fp;
    while (!fl.ack_order.empty()) {
      auto [p, deadline] = fl.ack_order.front();
      if (deadline >= t) break;
      fl.ack_order.pop_front();
      auto it = fl.ack_resp.find(p);
      if (it == fl.ack_resp.end() || it->second.deadline != deadline) continue;
      judge(RSP_009);
      if (answer_port_lost(fl, it->second) || answer_lost_on_link(fl, p, it->second))
        excuse(RSP_009);
      else
        fail_at(RSP_009, it->second.point, it->second.frame, it->second.since,
                "data PSN " + std::to_string(static_cast<uint32_t>(p) & wire::kPsnMask) +
                    " (A/RTX set) got no SACK or NACK within " +
                    std::to_string(prof.tol.t_ack_max_ns) + " ns");
      fl.ack_resp.erase(it);
    }
    ev_sweep(fl, t, false);
  }
  // Endpoint requests: forget old ones. A software fabric can hold a request for tens of ms, so
  // the horizon is generous; a response to a forgotten request is then not judged (MRC-PRB-004).
  const uint64_t ep_horizon_ns = std::max<uint64_t>(10 * prof.tol.ep_timeout_ns, 1000000000);
  while (!ep_order.empty() &&
         (ep_order.front().first + ep_horizon_ns < t || ep_order.size() > kMaxEndpointReqs)) {
    auto it = ep_reqs.find(ep_order.front().second);
    if (it != ep_reqs.end() && it->second.ts == ep_order.front().first) {
      ep_pruned_pairs.emplace(std::get<0>(it->first), std::get<1>(it->first));
      ep_reqs.erase(it);
    }
    ep_order.pop_front();
  }
}

Report Engine::interim() const {
  Report rep;
  auto cat = rule_catalogue();
  for (size_t i = 0; i < kRuleCount; ++i) {
    RuleResult rr;
    rr.rule = &cat[i];
    const RuleState& st = rules[i];
    rr.checked = st.checked + clean_checked(i);
    rr.violations = st.violations;
    rr.excused = st.excused;
    rr.evidence = st.evidence;
    if (!cat[i].implemented) {
      rr.status = Status::kNotRun;
      rr.reason = "catalogued only: no evaluator yet";
    } else if (!sel.selected(cat[i].id)) {
      rr.status = Status::kNotRun;
      rr.reason = "deselected";
    } else if (st.violations > 0) {
      rr.status = cat[i].severity == Severity::kError ? Status::kFail : Status::kWarn;
    } else if (rr.checked == 0) {
      rr.status = Status::kNotApplicable;
      rr.reason = st.na_reason.empty() ? "nothing in the trace to judge" : st.na_reason;
    } else {
      rr.status = Status::kPass;
    }
    rep.results.push_back(std::move(rr));
  }
  for (size_t i = 0; i < points.size(); ++i) {
    CaptureSummary cs;
    cs.path = points[i].info.path;
    cs.node = points[i].node >= 0
                  ? (node_name[static_cast<size_t>(points[i].node)].empty()
                         ? format_addr(node_addr[static_cast<size_t>(points[i].node)])
                         : node_name[static_cast<size_t>(points[i].node)])
                  : "";
    cs.attribution = points[i].info.attribution;
    cs.frames = points[i].frames;
    cs.roce_frames = points[i].roce;
    cs.mrc_frames = points[i].mrc;
    cs.decode_errors = points[i].decode_errors;
    rep.captures.push_back(std::move(cs));
  }
  rep.frames = frames;
  rep.packets = packets;
  rep.first_ts_ns = first_ts == kNoTime ? 0 : first_ts;
  rep.last_ts_ns = last_ts;
  rep.mrc_frames = mrc_frames;
  rep.no_mrc = mrc_frames == 0;
  rep.decisions = decisions;
  return rep;
}

Report Engine::finish(uint64_t end_ts) {
  const uint64_t end = end_ts ? end_ts : last_ts;
  sweep(end);
  const uint64_t grace = prof.tol.end_grace_ns;
  auto old_enough = [&](uint64_t since) { return since + grace <= end; };
  auto psn_str = [](int64_t p) {
    return std::to_string(static_cast<uint32_t>(p) & wire::kPsnMask);
  };
  for (auto& fp : flows) {
    Flow& fl = *fp;
    std::vector<int64_t> pending;
    for (const auto* m : {&fl.nack_retx, &fl.drop_retx, &fl.trim_nack})
      for (const auto& kv : *m) pending.push_back(kv.first);
    for (int64_t p : pending) settle(fl, p, end);
    for (auto& pd : fl.ce_echo) {
      if (!old_enough(pd.since)) continue;
      judge(RSP_006);
      fail_at(RSP_006, pd.point, pd.frame, pd.since,
              "data PSN " + psn_str(pd.psn) + " arrived with CE on EV " + hex(pd.ev) +
                  "; no SACK/NACK echoed that EV with M=01/10");
    }
    // Seen only upstream of the responder, and no injector log to say what was lost after: the
    // probe (or its answer) may have been dropped on the way, which no capture here shows.
    const bool probe_fate_known = responder_captured(fl) || decisions > 0;
    if (!fl.probe_ans.empty() && !probe_fate_known)
      na(PRB_002, "needs the responder's capture or the injector's decision log");
    // A probe seen only at a capture on the responder's link ("side": "link", the switch end of
    // its cable, upstream of the injector's relay) has not reached the responder if the injector
    // dropped a probe of the flow after it was seen there; the log names no probe id, so every
    // probe then waiting may be the one (as for a dropped SACK above).
    auto dropped_on_link = [&](const Pending& pd) {
      if (pd.point >= points.size() || !points[pd.point].info.link_side) return false;
      return std::any_of(fl.probe_drops.begin(), fl.probe_drops.end(),
                         [&](uint64_t t) { return t + kProbeDropSlackNs >= pd.since; });
    };
    for (auto& [id, pd] : fl.probe_ans) {
      if (!old_enough(pd.since) || !probe_fate_known) continue;
      judge(PRB_002);
      if (dropped_on_link(pd)) {
        excuse(PRB_002);
        continue;
      }
      fail_at(PRB_002, pd.point, pd.frame, pd.since,
              "reliability probe id " + std::to_string(id) +
                  " reached the responder; no SACK with PR=1 answered it");
    }
    for (auto& [p, pd] : fl.ack_resp) {
      if (pd.deadline > end) continue;
      judge(RSP_009);
      if (answer_port_lost(fl, pd) || answer_lost_on_link(fl, p, pd)) {
        excuse(RSP_009);
        continue;
      }
      fail_at(RSP_009, pd.point, pd.frame, pd.since,
              "data PSN " + psn_str(p) + " (A/RTX set) got no SACK or NACK within " +
                  std::to_string(prof.tol.t_ack_max_ns) + " ns");
    }
    for (size_t i = 0; i < fl.win.size(); ++i)
      evict(fl, fl.win[i], fl.base_ext + static_cast<int64_t>(i));
    ev_sweep(fl, end, true);
    rev_finish(fl);
  }

  Report rep = interim();
  for (auto& fp : flows) {
    const Flow& fl = *fp;
    if (!fl.configured && fl.data_packets == 0 && fl.sacks == 0 && fl.nacks == 0) continue;
    FlowSummary s;
    s.requester = format_addr(fl.req_addr);
    s.responder = format_addr(fl.rsp_addr);
    s.requester_qpn = fl.req_qpn;
    s.responder_qpn = fl.rsp_qpn;
    s.configured = fl.configured;
    s.data_packets = fl.data_packets;
    s.retransmissions = fl.retransmissions;
    s.sacks = fl.sacks;
    s.nacks = fl.nacks;
    s.distinct_evs = fl.all_wevs.size();
    rep.flows.push_back(std::move(s));
  }
  if (flows_refused)
    rep.notes.push_back(std::to_string(flows_refused) + " packets of QPs beyond the first " +
                        std::to_string(kMaxFlows) + " were not judged statefully");
  if (dedup.forced())
    rep.notes.push_back(std::to_string(dedup.forced()) +
                        " packets left the merge table before tolerances.dedup_window_ns ended (it "
                        "holds the last " +
                        std::to_string(DedupTable::kMaxLive) +
                        " packets); a later copy of one of them would be judged as a new packet");
  if (nodes_refused)
    rep.notes.push_back(std::to_string(nodes_refused) +
                        " packets from addresses beyond the first " + std::to_string(kMaxNodes) +
                        " were not attributed to nodes");
  for (const auto& [k, c] : unrecognised_frames)
    rep.unrecognised.push_back({describe(k), c.frames, c.examples});
  std::stable_sort(
      rep.unrecognised.begin(), rep.unrecognised.end(),
      [](const UnrecognisedFrames& a, const UnrecognisedFrames& b) { return a.frames > b.frames; });
  rep.mrc_frames = mrc_frames;
  rep.no_mrc = mrc_frames == 0;
  if (rep.no_mrc) {
    rep.inconclusive.push_back(
        "no frame was recognised as MRC (" + std::to_string(frames) +
        " frame(s) read; why each was not is listed under the frames not recognised): there is "
        "nothing to judge, and a capture of MRC under another wire variant looks just like this");
  }
  // What the run asked for by name and got no judgement on.
  for (const std::string& want : sel.only) {
    size_t asked = 0, judged = 0;
    for (size_t i = 0; i < kRuleCount; ++i) {
      if (!enabled[i] || !RuleSelection{{want}, {}}.selected(rep.results[i].rule->id)) continue;
      ++asked;
      const Status st = rep.results[i].status;
      judged += st == Status::kPass || st == Status::kFail || st == Status::kWarn;
    }
    if (judged == 0)
      rep.inconclusive.push_back(
          "--only " + want + ": " +
          (asked == 0 ? std::string("no implemented rule is selected by it")
                      : "none of its " + std::to_string(asked) + " rule(s) had anything to judge"));
  }
  for (const auto& fp : flows) {
    const Flow& fl = *fp;
    if (!fl.configured || fl.data_packets || fl.sacks || fl.nacks) continue;
    auto qp_end = [](const Addr& a, const std::optional<uint32_t>& qpn) {
      return format_addr(a) + (qpn ? " QPN " + std::to_string(*qpn) : std::string());
    };
    rep.inconclusive.push_back("the profile's QP " + qp_end(fl.req_addr, fl.req_qpn) + " -> " +
                               qp_end(fl.rsp_addr, fl.rsp_qpn) +
                               " has no data, SACK or NACK in the captures");
  }
  rep.tolerances.values = prof.tol;
  rep.tolerances.from_profile = prof.tolerances_set;
  rep.annotations = std::move(annotations);
  rep.frames = frames;
  rep.packets = packets;
  rep.first_ts_ns = first_ts == kNoTime ? 0 : first_ts;
  rep.last_ts_ns = last_ts;
  rep.decisions = decisions;
  return rep;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Public wrappers
// ---------------------------------------------------------------------------------------------
bool RuleSelection::selected(std::string_view id) const {
  auto match = [&](const std::string& pat) {
    return id == pat ||
           (id.size() > pat.size() && id.substr(0, pat.size()) == pat && id[pat.size()] == '-');
  };
  if (!only.empty() && std::none_of(only.begin(), only.end(), match)) return false;
  return std::none_of(skip.begin(), skip.end(), match);
}

uint64_t Report::count(Status s) const {
  return static_cast<uint64_t>(std::count_if(results.begin(), results.end(),
                                             [&](const RuleResult& r) { return r.status == s; }));
}

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::kConforming:
      return "CONFORMING";
    case Verdict::kNotConforming:
      return "NOT CONFORMING";
    case Verdict::kInconclusive:
      return "INCONCLUSIVE";
  }
  return "?";
}

Verdict Report::verdict(bool warn_fails) const {
  if (no_mrc) return Verdict::kInconclusive;
  if (count(Status::kFail) > 0) return Verdict::kNotConforming;
  if ((warn_fails || fail_on_warn) && count(Status::kWarn) > 0) return Verdict::kNotConforming;
  if (!inconclusive.empty()) return Verdict::kInconclusive;
  return Verdict::kConforming;
}

int Report::exit_code(bool warn_fails) const {
  switch (verdict(warn_fails)) {
    case Verdict::kConforming:
      return kExitConforming;
    case Verdict::kNotConforming:
      return kExitNotConforming;
    case Verdict::kInconclusive:
      return kExitInconclusive;
  }
  return kExitUsage;
}

const RuleResult* Report::result(std::string_view id) const {
  for (const auto& r : results)
    if (r.rule && r.rule->id == id) return &r;
  return nullptr;
}

namespace detail {

// The pipelined checker (Checker with jobs > 1). The caller's thread, which reads the captures,
// also decodes each frame and verifies its ICRC (Engine::decode_stage, then Engine::icrc_stage
// four frames at a time) into a slot of a ring; a second thread takes the slots in order and
// judges them (Engine::on_decoded). Decisions travel
// through the same ring, so the engine sees frames and decisions in the order the caller gave
// them, as on one thread: the verdicts cannot differ. Slots are handed over in batches (one
// release store per kBatch slots, a futex wake only when the other side sleeps).
class Pipeline {
 public:
  explicit Pipeline(Engine& e)
      : e_(e),
        wp_(wire::make_profile(e.prof.wire_params())),
        layout_(std::make_unique<wire::DecodeLayout>(*wp_)) {
    ring_ = std::make_unique<Slot[]>(kSlots);
  }
  ~Pipeline() { stop(); }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  void frame(uint32_t point, uint64_t frame_no, uint64_t ts, wire::Bytes data, wire::LinkType link,
             uint32_t orig_len) {
    Slot& s = acquire();
    // The slot two on was last read on the judging core: its lines are requested for writing
    // now, while this frame is decoded. Only a slot already judged (tail_seen is behind the
    // judging thread, never ahead).
    const uint64_t next = prod_.filled + prod_.staged;
    if (next + kSlotsAhead - prod_.tail_seen < kSlots)
      fetch_slot<1>(ring_[(next + kSlotsAhead) & (kSlots - 1)]);
    s.is_frame = true;
    s.point = point;
    s.frame_no = frame_no;
    s.ts = ts;
    s.data = data;
    s.link = link;
    s.orig_len = orig_len;
    s.ok = Engine::decode_stage(*wp_, data, link, s.f, layout_.get());
    s.key = Engine::shape_key(*wp_, data, link, layout_.get());
    s.content_h = Engine::payload_hash_stage(s.f, s.ok);
    // The ICRC (and frame_rules_stage, which reads its verdict) waits for kIcrcGroup frames.
    if (++prod_.staged == kIcrcGroup) commit_staged();
  }
  void decision(const Decision& d) {
    commit_staged();
    Slot& s = acquire();
    s.is_frame = false;
    s.d = d;
    commit();
  }
  // Returns once every slot given so far has been judged; rethrows what the judging thread threw.
  void drain() {
    commit_staged();
    publish();
    for (uint64_t t = tail_.v.load(std::memory_order_acquire); t != prod_.filled;)
      t = await(tail_, prod_.filled);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static constexpr uint64_t kSlots = 1024;  // power of two
  static constexpr uint64_t kBatch = 32;
  // Frames whose ICRCs are computed together (wire::compute_icrcs interleaves four): decoded
  // into the ring's next slots, committed once their ICRC is known. A divisor of kBatch, so
  // that the hand-over's batches are unchanged.
  static constexpr uint64_t kIcrcGroup = 4;
  static_assert(kBatch % kIcrcGroup == 0);
  static_assert(kIcrcGroup <= Engine::kIcrcStageMax);
  static constexpr uint64_t kStop = UINT64_MAX;
  // How often a thread that finds nothing to do re-reads the other's counter before it sleeps on
  // the futex: a sleep and a wake cost two system calls and a scheduler round trip, more than the
  // other thread needs for a batch.
  static constexpr int kSpins = 2000;
  // Each slot on its own cache lines: the judging thread reads slot t while the reading thread
  // writes slot t + k, and neither should take the other's line.
  struct alignas(64) Slot {
    wire::DecodedFrame f;
    bool is_frame = true;
    bool ok = false;
    wire::LinkType link = wire::LinkType::kEthernet;
    uint32_t point = 0;
    uint32_t orig_len = 0;
    uint64_t frame_no = 0;
    uint64_t ts = 0;
    uint64_t key = 0;                       // Engine::shape_key()
    std::optional<uint64_t> content_h;      // Engine::payload_hash_stage()
    FramePre frame_pre = FramePre::kJudge;  // Engine::frame_rules_stage()
    wire::Bytes data{};
    Decision d;
  };
  // A counter written by one thread and read by the other, alone on its cache line: the reading
  // thread's own bookkeeping (written every frame) must not share a line with it, or every frame
  // would move that line between the cores. A thread that waits for it to change sleeps on
  // `epoch` (a futex word) after saying so in `sleeping`, and the writer makes a system call
  // only then (an event count). std::atomic<uint64_t>::notify_one (libstdc++ 12) did a locked
  // add on a line of its waiter table at every call, and both counters hashed to the same
  // entry of that table, so each hand-over moved that line between the cores.
  struct alignas(64) Counter {
    std::atomic<uint64_t> v{0};
    std::atomic<uint64_t> wake_at{0};  // the sleeper's target: set() wakes it from there on
    std::atomic<uint32_t> sleeping{0};
    std::atomic<uint32_t> epoch{0};
  };
  // Sets c and wakes its waiter if it sleeps and x is what it waits for. Sequentially consistent
  // on both sides: either the waiter's check of v sees x, or this load sees it sleeping (and its
  // target, stored before).
  static void set(Counter& c, uint64_t x) {
    c.v.store(x, std::memory_order_seq_cst);
    if (c.sleeping.load(std::memory_order_seq_cst) != 0 &&
        x >= c.wake_at.load(std::memory_order_seq_cst)) {
      c.epoch.fetch_add(1, std::memory_order_seq_cst);
      ::syscall(SYS_futex, &c.epoch, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
    }
  }

  static constexpr uint64_t kSlotsAhead = 2;
  // Requests the lines of a slot's decoded frame and the fields after it (not the decision),
  // for reading (Write = 0) or writing.
  template <int Write = 0>
  static void fetch_slot(const Slot& s) {
    const char* p = reinterpret_cast<const char*>(&s);
    // Unrolled: a dozen prefetches with constant offsets, not a loop counted on every slot
    // (44 instructions a frame on the judging thread as a loop, by callgrind).
#pragma GCC unroll 32
    for (size_t off = 0; off < sizeof(wire::DecodedFrame) + 64; off += 64)
      __builtin_prefetch(p + off, Write);
  }

  // Waits until c (which only grows) reaches `target` and returns its value: a short spin, then
  // the futex.
  static uint64_t await(Counter& c, uint64_t target) {
    for (int i = 0; i < kSpins; ++i) {
      const uint64_t v = c.v.load(std::memory_order_acquire);
      if (v >= target) return v;
      __builtin_ia32_pause();
    }
    c.wake_at.store(target, std::memory_order_seq_cst);
    c.sleeping.fetch_add(1, std::memory_order_seq_cst);
    uint64_t v;
    for (;;) {
      // epoch before v: a set() after this read of v bumps epoch, and the futex then returns
      // at once instead of sleeping past it.
      const uint32_t e = c.epoch.load(std::memory_order_seq_cst);
      v = c.v.load(std::memory_order_seq_cst);
      if (v >= target) break;
      ::syscall(SYS_futex, &c.epoch, FUTEX_WAIT_PRIVATE, e, nullptr, nullptr, 0);
    }
    c.sleeping.fetch_sub(1, std::memory_order_seq_cst);
    return v;
  }

  // The next free slot, after the staged ones.
  Slot& acquire() {
    if (!th_.joinable()) th_ = std::thread([this] { run(); });
    const uint64_t next = prod_.filled + prod_.staged;
    if (next - prod_.tail_seen >= kSlots) {
      publish();
      prod_.tail_seen = tail_.v.load(std::memory_order_acquire);
      // A full ring: wait until a quarter of it is free, not one batch, so that the reading
      // thread (the shorter stage) sleeps and is woken once per kSlots / 4 frames rather than
      // once per batch when its spin runs out. (The target is at most `filled`: the judging
      // thread reaches it without the staged slots.)
      if (next - prod_.tail_seen >= kSlots)
        prod_.tail_seen = await(tail_, next - kSlots + kSlots / 4);
    }
    return ring_[next & (kSlots - 1)];
  }
  void commit() {
    if (++prod_.filled - prod_.published >= kBatch) publish();
  }
  // Verifies the ICRCs of the staged frames in one wire::compute_icrcs call, runs the stage
  // that reads them, and commits the slots in order.
  void commit_staged() {
    const uint64_t n = prod_.staged;
    if (n == 0) return;
    wire::DecodedFrame* fs[kIcrcGroup];
    for (uint64_t i = 0; i < n; ++i) fs[i] = &ring_[(prod_.filled + i) & (kSlots - 1)].f;
    Engine::icrc_stage(fs, n);
    for (uint64_t i = 0; i < n; ++i) {
      Slot& s = ring_[(prod_.filled + i) & (kSlots - 1)];
      s.frame_pre = Engine::frame_rules_stage(s.f, s.ok);
    }
    prod_.staged = 0;
    for (uint64_t i = 0; i < n; ++i) commit();
  }
  void publish() {
    if (prod_.published == prod_.filled) return;
    prod_.published = prod_.filled;
    set(head_, prod_.filled);
  }
  void stop() {
    if (!th_.joinable()) return;
    try {
      drain();
    } catch (...) {  // a destructor does not throw; finish() has drained already when it matters
    }
    set(head_, kStop);
    th_.join();
  }
  void run() {
    Slot* const ring = ring_.get();
    Engine& e = e_;
    bool failed = false;
    uint64_t t = 0;
    for (;;) {
      const uint64_t h = await(head_, t + 1);
      if (h == kStop) return;
      // The merge-table line of each frame is fetched while the frame before it is judged.
      auto ahead = [&](const Slot& n) {
        // (A key means the usual shape, whose addresses the decoder has read: the frame's bytes,
        // in the other core's cache, are not touched for this.)
        if (n.is_frame && n.key != 0 &&
            e.may_merge(n.f.ip6.src, n.f.op && n.f.op->kind == wire::PacketKind::kMrcData))
          e.dedup.prefetch(n.key);
      };
      ahead(ring[t & (kSlots - 1)]);
      for (; t < h; ++t) {
        Slot& s = ring[t & (kSlots - 1)];
        // The decoded frame two slots on was written on the other core: its lines are requested
        // now, so that they are here when the frame is judged (a frame's rules take longer than
        // one line's transfer, and the first touch of a slot was the judging thread's costliest
        // load). Only published slots: the reading thread may be writing the next ones.
        if (t + kSlotsAhead < h) fetch_slot(ring[(t + kSlotsAhead) & (kSlots - 1)]);
        if (t + 1 < h) ahead(ring[(t + 1) & (kSlots - 1)]);
        if (!failed) {
          try {
            if (s.is_frame)
              e.on_decoded(s.point, s.frame_no, s.ts, s.data, s.link, s.orig_len, s.f, s.ok, s.key,
                           s.content_h, s.frame_pre);
            else
              e.on_decision(s.d);
          } catch (...) {
            error_ = std::current_exception();  // drain() rethrows it on the caller's thread
            failed = true;
          }
        }
        if (((t + 1) & (kBatch - 1)) == 0) set(tail_, t + 1);
      }
      set(tail_, t);
    }
  }

  Engine& e_;
  std::unique_ptr<wire::WireProfile> wp_;       // the caller thread's own
  std::unique_ptr<wire::DecodeLayout> layout_;  // wp_'s lookups, for decode_stage
  std::unique_ptr<Slot[]> ring_;
  std::exception_ptr error_;  // written by the judging thread, read after drain()
  std::thread th_;
  Counter head_;  // slots published to the judging thread
  Counter tail_;  // slots it has judged
  // The caller's own bookkeeping, on a line of its own.
  struct alignas(64) Producer {
    uint64_t filled = 0;     // slots written
    uint64_t staged = 0;     // slots after `filled` decoded, their ICRC not yet verified
    uint64_t published = 0;  // the last value stored in head_
    uint64_t tail_seen = 0;  // tail_ when last read
  } prod_;
};

}  // namespace detail

struct Checker::Impl {
  detail::Engine e;
  std::unique_ptr<detail::Pipeline> pipe;  // jobs > 1
  Impl(DutProfile p, RuleSelection s, size_t m, unsigned jobs) : e(std::move(p), std::move(s), m) {
    if (jobs > 1) pipe = std::make_unique<detail::Pipeline>(e);
  }
};

Checker::Checker(DutProfile profile, RuleSelection selection, size_t max_evidence, unsigned jobs)
    : impl_(std::make_unique<Impl>(std::move(profile), std::move(selection), max_evidence, jobs)) {}
Checker::~Checker() = default;

uint32_t Checker::add_point(PointInfo point) {
  detail::Engine& e = impl_->e;
  detail::PointState ps;
  ps.info = std::move(point);
  if (!ps.info.node.empty()) {
    for (size_t i = 0; i < e.node_name.size(); ++i)
      if (e.node_name[i] == ps.info.node) ps.node = static_cast<int>(i);
    if (ps.node < 0 && ps.info.node_addr) {
      ps.node = e.node_of(*ps.info.node_addr);
      if (e.node_name[static_cast<size_t>(ps.node)].empty())
        e.node_name[static_cast<size_t>(ps.node)] = ps.info.node;
    }
    if (ps.node < 0) {
      // A node named only on the command line: bind it by address when it is one.
      if (auto a = detail::parse_addr(ps.info.node)) ps.node = e.node_of(*a);
    }
  } else if (ps.info.node_addr) {
    ps.node = e.node_of(*ps.info.node_addr);
  }
  if (ps.node >= 0) e.node_has_point[static_cast<size_t>(ps.node)] = true;
  e.points.push_back(std::move(ps));
  return static_cast<uint32_t>(e.points.size() - 1);
}

void Checker::on_frame(uint32_t point, uint64_t frame_no, uint64_t ts_ns, wire::Bytes data,
                       wire::LinkType link, uint32_t orig_len) {
  if (point >= impl_->e.points.size()) return;
  if (impl_->pipe)
    impl_->pipe->frame(point, frame_no, ts_ns, data, link, orig_len);
  else
    impl_->e.on_frame(point, frame_no, ts_ns, data, link, orig_len);
}

void Checker::prefetch(wire::Bytes data, wire::LinkType link) {
  if (!impl_->pipe) impl_->e.prefetch(data, link);  // the judging thread prefetches for itself
}

void Checker::on_decision(const Decision& d) {
  if (impl_->pipe)
    impl_->pipe->decision(d);
  else
    impl_->e.on_decision(d);
}

Report Checker::finish(uint64_t end_ts_ns) {
  if (impl_->pipe) {
    impl_->pipe->drain();
    impl_->pipe.reset();
  }
  return impl_->e.finish(end_ts_ns);
}

Report Checker::interim() {
  if (impl_->pipe) impl_->pipe->drain();
  return impl_->e.interim();
}

void Checker::keep_annotations(bool keep) {
  if (impl_->pipe) impl_->pipe->drain();
  impl_->e.annotate = keep;
}

void Checker::on_violation(ViolationFn fn) {
  if (impl_->pipe) impl_->pipe->drain();  // the judging thread reads the hook
  if (!fn) {
    impl_->e.on_violation = nullptr;
    return;
  }
  impl_->e.on_violation = [fn = std::move(fn)](detail::RuleIdx r, uint32_t point, uint64_t frame,
                                               uint64_t ts) {
    fn(rule_catalogue()[r].id, point, frame, ts);
  };
}

}  // namespace mrc::check
