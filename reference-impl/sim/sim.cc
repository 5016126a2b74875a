// The event loop, links, switches, node servicing, captures and the decision log.
#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <queue>
#include <stdexcept>

#include "reference-impl/sim/sim.h"

namespace mrc::sim {

std::string_view run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kIdle:
      return "idle";
    case RunStatus::kTimeReached:
      return "time_reached";
    case RunStatus::kEventLimit:
      return "event_limit";
    case RunStatus::kStopped:
      return "stopped";
    case RunStatus::kError:
      return "error";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// ScriptedNode
// ---------------------------------------------------------------------------------------------
void ScriptedNode::send_at(uint64_t t_ns, uint8_t port, std::vector<std::byte> frame) {
  auto pos = std::upper_bound(script_.begin() + static_cast<ptrdiff_t>(next_), script_.end(), t_ns,
                              [](uint64_t t, const Scheduled& s) { return t < s.t_ns; });
  script_.insert(pos, Scheduled{t_ns, port, std::move(frame)});
}

void ScriptedNode::on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) {
  ++received_frames_;
  received_bytes_ += frame.size();
  Arrival a{now_ns, port, {}};
  if (keep_frames_) a.frame.assign(frame.begin(), frame.end());
  if (on_receive_) on_receive_(a, frame);
  arrivals_.push_back(std::move(a));
}

bool ScriptedNode::poll_tx(uint64_t now_ns, TxFrame& out) {
  if (next_ >= script_.size() || script_[next_].t_ns > now_ns) return false;
  out.frame = std::move(script_[next_].frame);
  out.port = script_[next_].port;
  ++next_;
  ++sent_frames_;
  return true;
}

uint64_t ScriptedNode::next_deadline_ns() const {
  return next_ < script_.size() ? script_[next_].t_ns : kNoDeadline;
}

// ---------------------------------------------------------------------------------------------
// Simulator internals
// ---------------------------------------------------------------------------------------------
namespace {

enum class EvType : uint8_t { kTxDone, kArrive, kTimer, kWake, kLinkState, kCall };

struct Event {
  uint64_t t;
  uint64_t seq;  // ties at one instant run in scheduling order: this is what makes runs repeat
  EvType type;
  uint32_t a;
  uint32_t b;
  uint64_t c;
};

struct Later {
  bool operator()(const Event& x, const Event& y) const {
    return x.t != y.t ? x.t > y.t : x.seq > y.seq;
  }
};

constexpr uint64_t kNsPerSecond = 1'000'000'000;
constexpr size_t kMaxSpareBuffers = 4096;
constexpr uint64_t kTimerLivelockLimit = 1'000'000;

}  // namespace

struct Simulator::Impl {
  struct Sink {
    enum class Kind : uint8_t { kUnconnected, kNode, kSwitch } kind = Kind::kUnconnected;
    uint32_t id = kNone;
    uint8_t port = 0;
  };
  struct Hook {
    Fault spec;
    Rng rng;
    std::string reason;
    uint64_t matched = 0;
    uint64_t hits = 0;
    bool ge_bad = false;
  };
  struct LinkSt {
    LinkConfig cfg;
    Sink sink;
    bool up = true;
    uint64_t epoch = 0;  // bumped when the link goes down: frames of an older epoch are lost
    std::deque<uint32_t> queue, prio_queue;
    uint64_t queue_bytes = 0, prio_bytes = 0;
    bool busy = false;
    uint32_t in_service = kNone;
    // Exact serialization over a busy period: finish = t0 + ceil(Σbits·1e9 / rate), kept as
    // quotient + remainder so rounding never accumulates and nothing overflows.
    uint64_t busy_t0 = 0, ser_q = 0, ser_r = 0;
    std::vector<Hook> hooks;
    LinkStats stats;
    int capture = -1;
  };
  struct NodeSt {
    std::string name;
    Node* node = nullptr;
    std::unique_ptr<Node> owned;
    std::vector<LinkId> egress;  // by port
    std::vector<int> capture;    // by port; [0] = all ports
    uint64_t timer_at = kNoDeadline;
    uint64_t timer_gen = 0;
    bool wake_pending = false;
    uint64_t last_timer_t = kNoDeadline;
    uint64_t timer_repeats = 0;
    NodeStats stats;
  };
  struct SwitchSt {
    std::string name;
    RouteFn route;
    SwitchStats stats;
  };

  explicit Impl(SimConfig c)
      : cfg(std::move(c)), profile(cfg.profile ? cfg.profile : &wire::mrp0()) {}

  SimConfig cfg;
  const wire::WireProfile* profile;
  uint64_t now = 0;
  uint64_t seq = 0;
  uint64_t dispatched = 0;
  uint64_t next_uid = 1;
  bool stop_requested = false;
  bool fatal = false;
  std::string error;

  std::priority_queue<Event, std::vector<Event>, Later> events;
  std::vector<LinkSt> links;
  std::vector<NodeSt> nodes;
  std::vector<SwitchSt> switches;
  std::map<std::string, LinkId, std::less<>> link_by_name;
  std::map<wire::Ipv6Addr, NodeId> node_by_addr;

  std::vector<Packet> packets;
  std::vector<uint32_t> free_packets;
  std::vector<std::vector<std::byte>> spare_buffers;

  std::vector<std::unique_ptr<wire::CaptureWriter>> captures;
  std::vector<std::string> capture_paths;
  std::vector<bool> capture_failed;

  std::vector<Decision> decisions;
  std::function<void(const Decision&)> decision_sink;
  std::vector<std::function<void()>> calls;

  // --- events ---
  void push(uint64_t t, EvType type, uint32_t a, uint32_t b = 0, uint64_t c = 0) {
    events.push(Event{t, seq++, type, a, b, c});
  }

  // --- packet pool ---
  std::vector<std::byte> take_spare() {
    if (spare_buffers.empty()) return {};
    std::vector<std::byte> v = std::move(spare_buffers.back());
    spare_buffers.pop_back();
    v.clear();
    return v;
  }
  uint32_t alloc_packet(std::vector<std::byte> bytes) {
    uint32_t idx;
    if (!free_packets.empty()) {
      idx = free_packets.back();
      free_packets.pop_back();
    } else {
      idx = static_cast<uint32_t>(packets.size());
      packets.emplace_back();
    }
    Packet& p = packets[idx];
    p.uid = next_uid++;
    p.bytes = std::move(bytes);
    p.info = PacketInfo{};
    p.src_node = kNone;
    p.dst_node = kNone;
    p.extra_delay_ns = 0;
    return idx;
  }
  uint32_t clone_packet(uint32_t src) {
    std::vector<std::byte> copy = take_spare();
    const std::vector<std::byte>& from = packets[src].bytes;
    copy.assign(from.begin(), from.end());
    uint32_t idx = alloc_packet(std::move(copy));
    Packet& p = packets[idx];
    const Packet& s = packets[src];
    p.info = s.info;
    p.src_node = s.src_node;
    p.dst_node = s.dst_node;
    p.extra_delay_ns = s.extra_delay_ns;
    return idx;
  }
  void free_packet(uint32_t idx) {
    Packet& p = packets[idx];
    if (spare_buffers.size() < kMaxSpareBuffers && p.bytes.capacity() <= 16384) {
      spare_buffers.push_back(std::move(p.bytes));
    }
    p.bytes = {};
    free_packets.push_back(idx);
  }

  // --- naming ---
  std::string node_label(NodeId n) const { return n < nodes.size() ? nodes[n].name : "?"; }

  NodeId resolve_dst(const PacketInfo& info, NodeId src) const {
    if (info.has_dst) {
      auto it = node_by_addr.find(info.dst);
      if (it != node_by_addr.end()) return it->second;
    }
    if (nodes.size() == 2 && src < 2) return 1 - src;
    return kNone;
  }

  // --- decision log ---
  void log(std::string_view where, LinkId link, Action action, const Packet& pk,
           std::string reason) {
    if (!cfg.keep_decisions && !decision_sink) return;
    Decision d;
    d.t_ns = now;
    d.link = link;
    d.link_name = std::string(where);
    d.dir = node_label(pk.src_node) + ">" + node_label(pk.dst_node);
    d.action = action;
    d.roce = pk.info.roce;
    d.qpn = pk.info.qpn;
    d.psn = pk.info.psn;
    d.opcode = pk.info.opcode;
    d.ev = pk.info.wev;
    d.reason = std::move(reason);
    d.seed = cfg.seed;
    d.packet_uid = pk.uid;
    if (decision_sink) decision_sink(d);
    if (cfg.keep_decisions) decisions.push_back(std::move(d));
  }
  void log_link(LinkId l, Action action, const Packet& pk, std::string reason) {
    log(links[l].cfg.name, l, action, pk, std::move(reason));
  }

  // --- captures ---
  void capture_write(int idx, const std::vector<std::byte>& bytes) {
    if (idx < 0) return;
    auto& w = captures[static_cast<size_t>(idx)];
    if (!w->write(now, wire::as_bytes(bytes)) && !capture_failed[static_cast<size_t>(idx)]) {
      capture_failed[static_cast<size_t>(idx)] = true;
      error = capture_paths[static_cast<size_t>(idx)] + ": " + w->error();
    }
  }
  void capture_node_port(const NodeSt& ns, uint8_t port, const std::vector<std::byte>& bytes) {
    if (ns.capture.empty()) return;
    capture_write(ns.capture[0], bytes);
    if (port != 0 && port < ns.capture.size()) capture_write(ns.capture[port], bytes);
  }
  int open_capture(const std::string& path, wire::CaptureFormat format) {
    auto w = std::make_unique<wire::CaptureWriter>();
    if (!w->open(path, format, wire::LinkType::kEthernet)) {
      error = path + ": " + w->error();
      return -1;
    }
    captures.push_back(std::move(w));
    capture_paths.push_back(path);
    capture_failed.push_back(false);
    return static_cast<int>(captures.size() - 1);
  }

  // --- DSCP classes ---
  bool dscp_trimmable(uint8_t dscp) const {
    const wire::DscpPlan& plan = profile->dscp();
    return dscp == plan.trimmable || dscp == plan.trimmable_retx;
  }
  bool dscp_trimmed(uint8_t dscp) const {
    const wire::DscpPlan& plan = profile->dscp();
    return dscp == plan.trimmed || dscp == plan.trimmed_lasthop;
  }

  // --- nodes ---
  void service(NodeId n) {
    NodeSt& ns = nodes[n];
    TxFrame tx;
    tx.frame = take_spare();
    uint64_t count = 0;
    while (ns.node->poll_tx(now, tx)) {
      inject(n, tx.port, std::move(tx.frame));
      tx.frame = take_spare();
      tx.port = 1;
      if (++count >= cfg.max_tx_per_poll) {
        fail("node '" + ns.name + "' returned " + std::to_string(count) +
             " frames from one poll_tx drain at t=" + std::to_string(now) +
             " ns (SimConfig::max_tx_per_poll)");
        break;
      }
    }
    tx.frame.clear();
    if (spare_buffers.size() < kMaxSpareBuffers) spare_buffers.push_back(std::move(tx.frame));
    uint64_t d = ns.node->next_deadline_ns();
    if (d == kNoDeadline) {
      if (ns.timer_at != kNoDeadline) {
        ns.timer_at = kNoDeadline;
        ++ns.timer_gen;  // the queued timer event becomes stale
      }
    } else {
      d = std::max(d, now);
      if (d != ns.timer_at) {
        ns.timer_at = d;
        push(d, EvType::kTimer, n, 0, ++ns.timer_gen);
      }
    }
  }

  void inject(NodeId n, uint8_t port, std::vector<std::byte> frame) {
    NodeSt& ns = nodes[n];
    ns.stats.frames_tx++;
    ns.stats.bytes_tx += frame.size();
    capture_node_port(ns, port, frame);
    uint32_t p = alloc_packet(std::move(frame));
    Packet& pk = packets[p];
    pk.info = inspect_frame(wire::as_bytes(pk.bytes), *profile);
    pk.src_node = n;
    pk.dst_node = resolve_dst(pk.info, n);
    if (port == 0 || port >= ns.egress.size() || ns.egress[port] == kNone) {
      ns.stats.tx_unconnected++;
      free_packet(p);
      return;
    }
    link_ingress(ns.egress[port], p);
  }

  void fail(std::string msg) {
    fatal = true;
    error = std::move(msg);
  }

  // --- links ---
  bool fire(Hook& h, uint64_t k) {
    switch (h.spec.trigger) {
      case Trigger::kAlways:
        return true;
      case Trigger::kIndex:
        return std::binary_search(h.spec.indices.begin(), h.spec.indices.end(), k);
      case Trigger::kBernoulli:
        return h.rng.bernoulli(h.spec.probability);
      case Trigger::kGilbertElliott: {
        const GilbertElliott& ge = h.spec.burst;
        const double move = h.rng.unit();
        if (h.ge_bad) {
          if (move < ge.p_bad_to_good) h.ge_bad = false;
        } else if (move < ge.p_good_to_bad) {
          h.ge_bad = true;
        }
        return h.rng.bernoulli(h.ge_bad ? ge.loss_bad : ge.loss_good);
      }
    }
    return false;
  }

  void link_ingress(LinkId l, uint32_t p) {
    LinkSt& link = links[l];
    link.stats.frames_in++;
    link.stats.bytes_in += packets[p].bytes.size();
    if (!link.up) {
      link.stats.drop_link_down++;
      log_link(l, Action::kDrop, packets[p], "link_down");
      free_packet(p);
      return;
    }
    uint32_t copies = 0;
    bool acted = false;
    for (Hook& h : link.hooks) {
      Packet& pk = packets[p];
      if (!h.spec.match.matches(pk.info, now)) continue;
      const uint64_t k = h.matched++;
      if (h.hits >= h.spec.max_hits) continue;
      if (!fire(h, k)) continue;
      std::string reason = h.reason;
      if (h.spec.trigger == Trigger::kGilbertElliott)
        reason += h.ge_bad ? " state=bad" : " state=good";
      switch (h.spec.action) {
        case Action::kDrop:
          h.hits++;
          link.stats.drop_fault++;
          log_link(l, Action::kDrop, pk, std::move(reason));
          free_packet(p);
          return;
        case Action::kTrim: {
          if (!h.spec.trim_any_dscp && !dscp_trimmable(pk.info.dscp)) {
            if (cfg.log_pass) {
              log_link(l, Action::kPass, pk,
                       reason + ": DSCP " + std::to_string(pk.info.dscp) + " is not trimmable");
            }
            continue;
          }
          const wire::DscpPlan& plan = profile->dscp();
          const uint8_t dscp = h.spec.trim_lasthop ? plan.trimmed_lasthop : plan.trimmed;
          std::string why;
          if (!trim_frame(pk.bytes, dscp, *profile, &why)) {
            if (cfg.log_pass) log_link(l, Action::kPass, pk, reason + ": " + why);
            continue;
          }
          pk.info.dscp = dscp;
          link.stats.trim_fault++;
          log_link(l, Action::kTrim, pk, std::move(reason));
          break;
        }
        case Action::kEcn:
          if ((h.spec.ecn_only_ect && pk.info.ecn == 0) || pk.info.ecn == 3 ||
              !set_ecn(pk.bytes, 3, *profile)) {
            if (cfg.log_pass) log_link(l, Action::kPass, pk, reason + ": not ECN-capable or CE");
            continue;
          }
          pk.info.ecn = 3;
          link.stats.ecn_fault++;
          log_link(l, Action::kEcn, pk, std::move(reason));
          break;
        case Action::kDelay: {
          const uint64_t span = h.spec.delay_max_ns - h.spec.delay_min_ns;
          const uint64_t extra =
              h.spec.delay_min_ns + (span == UINT64_MAX ? h.rng.next() : h.rng.uniform(span + 1));
          pk.extra_delay_ns += extra;
          link.stats.delayed++;
          log_link(l, Action::kDelay, pk, reason + " +" + std::to_string(extra) + "ns");
          break;
        }
        case Action::kDup:
          copies += h.spec.copies;
          link.stats.duplicated += h.spec.copies;
          log_link(l, Action::kDup, pk, std::move(reason));
          break;
        case Action::kCorrupt: {
          auto off = corrupt_frame(pk.bytes, h.rng.next(), *profile);
          if (!off) {
            if (cfg.log_pass) log_link(l, Action::kPass, pk, reason + ": frame too short");
            continue;
          }
          link.stats.corrupted++;
          log_link(l, Action::kCorrupt, pk, reason + " byte=" + std::to_string(*off));
          break;
        }
        case Action::kPass:
          break;
      }
      // Only an action that changed the frame spends the hook's budget (at_most).
      h.hits++;
      acted = true;
    }
    if (!acted && cfg.log_pass) log_link(l, Action::kPass, packets[p], "");
    // Copies are taken after the whole chain so they carry the same changes; they are made
    // before queueing because queueing may free the original.
    std::vector<uint32_t> dup;
    dup.reserve(copies);
    for (uint32_t i = 0; i < copies; ++i) dup.push_back(clone_packet(p));
    enqueue(l, p);
    for (uint32_t c : dup) {
      link.stats.frames_in++;
      link.stats.bytes_in += packets[c].bytes.size();
      enqueue(l, c);
    }
  }

  void enqueue(LinkId l, uint32_t p) {
    LinkSt& link = links[l];
    Packet& pk = packets[p];
    if (!link.busy) {
      link.busy = true;
      link.busy_t0 = now;
      link.ser_q = 0;
      link.ser_r = 0;
      serve(l, p);
      return;
    }
    const uint64_t size = pk.bytes.size();
    if (link.cfg.priority_trimmed && dscp_trimmed(pk.info.dscp)) {
      if (link.prio_bytes + size > link.cfg.trim_queue_bytes) {
        link.stats.drop_queue++;
        log_link(l, Action::kDrop, pk, "queue_full (trimmed queue)");
        free_packet(p);
        return;
      }
      link.prio_queue.push_back(p);
      link.prio_bytes += size;
    } else {
      if (link.queue_bytes + size > link.cfg.queue_bytes) {
        if (link.cfg.trim_on_overflow && dscp_trimmable(pk.info.dscp)) {
          const wire::DscpPlan& plan = profile->dscp();
          const uint8_t dscp = link.cfg.last_hop ? plan.trimmed_lasthop : plan.trimmed;
          if (trim_frame(pk.bytes, dscp, *profile)) {
            pk.info.dscp = dscp;
            link.stats.trim_congestion++;
            log_link(l, Action::kTrim, pk, "queue_full");
            enqueue(l, p);  // once: the trimmed DSCP is not trimmable again
            return;
          }
        }
        link.stats.drop_queue++;
        log_link(l, Action::kDrop, pk, "queue_full");
        free_packet(p);
        return;
      }
      if (link.cfg.ecn_threshold_bytes != 0 && link.queue_bytes >= link.cfg.ecn_threshold_bytes &&
          (pk.info.ecn == 1 || pk.info.ecn == 2) && set_ecn(pk.bytes, 3, *profile)) {
        pk.info.ecn = 3;
        link.stats.ecn_congestion++;
        log_link(l, Action::kEcn, pk,
                 "queue>=" + std::to_string(link.cfg.ecn_threshold_bytes) + "B");
      }
      link.queue.push_back(p);
      link.queue_bytes += size;
    }
    link.stats.max_backlog_bytes =
        std::max(link.stats.max_backlog_bytes, link.queue_bytes + link.prio_bytes);
  }

  void serve(LinkId l, uint32_t p) {
    LinkSt& link = links[l];
    link.in_service = p;
    uint64_t finish = now;
    if (link.cfg.rate_bps != 0) {
      link.ser_r += packets[p].bytes.size() * 8 * kNsPerSecond;
      link.ser_q += link.ser_r / link.cfg.rate_bps;
      link.ser_r %= link.cfg.rate_bps;
      finish = std::max(now, link.busy_t0 + link.ser_q + (link.ser_r != 0 ? 1 : 0));
    }
    push(finish, EvType::kTxDone, l, 0, link.epoch);
  }

  void tx_done(LinkId l) {
    LinkSt& link = links[l];
    const uint32_t p = link.in_service;
    link.in_service = kNone;
    Packet& pk = packets[p];
    push(now + link.cfg.prop_delay_ns + pk.extra_delay_ns, EvType::kArrive, l, p, link.epoch);
    pk.extra_delay_ns = 0;
    std::deque<uint32_t>& q = !link.prio_queue.empty() ? link.prio_queue : link.queue;
    if (q.empty()) {
      link.busy = false;
      return;
    }
    const uint32_t next = q.front();
    q.pop_front();
    (&q == &link.prio_queue ? link.prio_bytes : link.queue_bytes) -= packets[next].bytes.size();
    serve(l, next);
  }

  void arrive(LinkId l, uint32_t p, uint64_t epoch) {
    LinkSt& link = links[l];
    Packet& pk = packets[p];
    if (epoch != link.epoch) {
      link.stats.drop_link_down++;
      log_link(l, Action::kDrop, pk, "link_down (in flight)");
      free_packet(p);
      return;
    }
    link.stats.frames_out++;
    link.stats.bytes_out += pk.bytes.size();
    capture_write(link.capture, pk.bytes);
    switch (link.sink.kind) {
      case Sink::Kind::kNode: {
        const NodeId n = link.sink.id;
        NodeSt& ns = nodes[n];
        ns.stats.frames_rx++;
        ns.stats.bytes_rx += pk.bytes.size();
        capture_node_port(ns, link.sink.port, pk.bytes);
        ns.node->on_packet(std::span<const std::byte>(pk.bytes.data(), pk.bytes.size()),
                           link.sink.port, now);
        free_packet(p);
        service(n);
        return;
      }
      case Sink::Kind::kSwitch: {
        SwitchSt& sw = switches[link.sink.id];
        sw.stats.frames++;
        const LinkId out = sw.route(pk);
        if (out == kNone || out >= links.size()) {
          sw.stats.drop_no_route++;
          log(sw.name, kNone, Action::kDrop, pk, "no_route");
          free_packet(p);
          return;
        }
        link_ingress(out, p);
        return;
      }
      case Sink::Kind::kUnconnected:
        link.stats.drop_unconnected++;
        log_link(l, Action::kDrop, pk, "unconnected");
        free_packet(p);
        return;
    }
  }

  void set_state(LinkId l, bool up) {
    LinkSt& link = links[l];
    if (up) {
      link.up = true;
      return;
    }
    if (!link.up) return;
    link.up = false;
    link.epoch++;
    auto flush = [&](uint32_t p) {
      link.stats.drop_link_down++;
      log_link(l, Action::kDrop, packets[p], "link_down (queued)");
      free_packet(p);
    };
    if (link.in_service != kNone) flush(link.in_service);
    link.in_service = kNone;
    for (uint32_t p : link.prio_queue) flush(p);
    for (uint32_t p : link.queue) flush(p);
    link.prio_queue.clear();
    link.queue.clear();
    link.prio_bytes = 0;
    link.queue_bytes = 0;
    link.busy = false;
  }

  // Returns true when the event did something (stale timers and transmissions do not count).
  bool dispatch(const Event& e) {
    switch (e.type) {
      case EvType::kTxDone:
        if (e.c != links[e.a].epoch) return false;
        tx_done(e.a);
        return true;
      case EvType::kArrive:
        arrive(e.a, e.b, e.c);
        return true;
      case EvType::kTimer: {
        NodeSt& ns = nodes[e.a];
        if (e.c != ns.timer_gen) return false;
        ns.timer_at = kNoDeadline;
        if (ns.last_timer_t == now) {
          if (++ns.timer_repeats > kTimerLivelockLimit) {
            fail("node '" + ns.name + "': timer fired " + std::to_string(ns.timer_repeats) +
                 " times at t=" + std::to_string(now) +
                 " ns without time advancing (next_deadline_ns() stays in the past?)");
            return true;
          }
        } else {
          ns.last_timer_t = now;
          ns.timer_repeats = 0;
        }
        ns.node->on_timer(now);
        service(e.a);
        return true;
      }
      case EvType::kWake:
        nodes[e.a].wake_pending = false;
        service(e.a);
        return true;
      case EvType::kLinkState:
        set_state(e.a, e.b != 0);
        return true;
      case EvType::kCall: {
        std::function<void()> fn = std::move(calls[e.a]);
        calls[e.a] = nullptr;
        if (fn) fn();
        return true;
      }
    }
    return false;
  }

  RunResult run(uint64_t t_limit, uint64_t max_events, bool until_idle) {
    RunResult r;
    stop_requested = false;
    for (;;) {
      if (fatal) {
        r.status = RunStatus::kError;
        break;
      }
      if (stop_requested) {
        r.status = RunStatus::kStopped;
        break;
      }
      if (events.empty()) {
        r.status = until_idle ? RunStatus::kIdle : RunStatus::kTimeReached;
        break;
      }
      if (events.top().t > t_limit) {
        r.status = RunStatus::kTimeReached;
        break;
      }
      if (r.events >= max_events) {
        r.status = RunStatus::kEventLimit;
        break;
      }
      const Event e = events.top();
      events.pop();
      now = e.t;
      if (dispatch(e)) {
        ++r.events;
        ++dispatched;
      }
    }
    if (r.status == RunStatus::kTimeReached && !until_idle && t_limit > now) now = t_limit;
    r.now_ns = now;
    if (r.status == RunStatus::kError) r.error = error;
    return r;
  }

  void check_link(LinkId l) const {
    if (l >= links.size()) throw std::out_of_range("mrc::sim: no link " + std::to_string(l));
  }
  void check_node(NodeId n) const {
    if (n >= nodes.size()) throw std::out_of_range("mrc::sim: no node " + std::to_string(n));
  }
};

// ---------------------------------------------------------------------------------------------
// Simulator
// ---------------------------------------------------------------------------------------------
Simulator::Simulator(SimConfig config) : impl_(std::make_unique<Impl>(std::move(config))) {}
Simulator::~Simulator() {
  // Captures still open are finished so that a run's files appear without an explicit close.
  close_captures();
}

uint64_t Simulator::seed() const {
  return impl_->cfg.seed;
}
uint64_t Simulator::now_ns() const {
  return impl_->now;
}
const wire::WireProfile& Simulator::profile() const {
  return *impl_->profile;
}

NodeId Simulator::add_node(std::string name, Node& node) {
  for (const auto& ns : impl_->nodes) {
    if (ns.name == name)
      throw std::invalid_argument("mrc::sim: duplicate node name '" + name + "'");
  }
  if (name.empty()) name = "n" + std::to_string(impl_->nodes.size());
  const NodeId id = static_cast<NodeId>(impl_->nodes.size());
  Impl::NodeSt ns;
  ns.name = std::move(name);
  ns.node = &node;
  ns.wake_pending = true;
  impl_->nodes.push_back(std::move(ns));
  impl_->push(impl_->now, EvType::kWake, id);
  return id;
}

NodeId Simulator::add_node(std::string name, std::unique_ptr<Node> node) {
  if (!node) throw std::invalid_argument("mrc::sim: add_node with a null node");
  Node& ref = *node;
  const NodeId id = add_node(std::move(name), ref);
  impl_->nodes[id].owned = std::move(node);
  return id;
}

void Simulator::set_node_address(NodeId node, const wire::Ipv6Addr& addr) {
  impl_->check_node(node);
  impl_->node_by_addr[addr] = node;
}

void Simulator::set_node_address(NodeId node, const wire::Ipv4Addr& addr) {
  set_node_address(node, ipv4_mapped(addr));
}

LinkId Simulator::add_link(LinkConfig config) {
  if (config.name.empty()) config.name = "link" + std::to_string(impl_->links.size());
  if (impl_->link_by_name.count(config.name) != 0) {
    // Hook random streams are keyed by link name; two links of one name would share them.
    throw std::invalid_argument("mrc::sim: duplicate link name '" + config.name + "'");
  }
  const LinkId id = static_cast<LinkId>(impl_->links.size());
  impl_->link_by_name.emplace(config.name, id);
  Impl::LinkSt ls;
  ls.cfg = std::move(config);
  impl_->links.push_back(std::move(ls));
  return id;
}

SwitchId Simulator::add_switch(std::string name, RouteFn route) {
  if (!route) throw std::invalid_argument("mrc::sim: switch '" + name + "' without a route");
  const SwitchId id = static_cast<SwitchId>(impl_->switches.size());
  impl_->switches.push_back(Impl::SwitchSt{std::move(name), std::move(route), {}});
  return id;
}

void Simulator::connect_port(NodeId node, uint8_t port, LinkId egress) {
  impl_->check_node(node);
  impl_->check_link(egress);
  if (port == 0) throw std::invalid_argument("mrc::sim: ports are 1-based");
  auto& eg = impl_->nodes[node].egress;
  if (eg.size() <= port) eg.resize(size_t{port} + 1, kNone);
  eg[port] = egress;
}

void Simulator::link_to_node(LinkId link, NodeId node, uint8_t port) {
  impl_->check_link(link);
  impl_->check_node(node);
  if (port == 0) throw std::invalid_argument("mrc::sim: ports are 1-based");
  impl_->links[link].sink = {Impl::Sink::Kind::kNode, node, port};
}

void Simulator::link_to_switch(LinkId link, SwitchId sw) {
  impl_->check_link(link);
  if (sw >= impl_->switches.size()) throw std::out_of_range("mrc::sim: no switch");
  impl_->links[link].sink = {Impl::Sink::Kind::kSwitch, sw, 0};
}

std::pair<LinkId, LinkId> Simulator::cable(NodeId a, uint8_t port_a, NodeId b, uint8_t port_b,
                                           const LinkConfig& config) {
  impl_->check_node(a);
  impl_->check_node(b);
  LinkConfig ab = config;
  ab.name = impl_->nodes[a].name + ".p" + std::to_string(port_a) + ">" + impl_->nodes[b].name;
  LinkConfig ba = config;
  ba.name = impl_->nodes[b].name + ".p" + std::to_string(port_b) + ">" + impl_->nodes[a].name;
  const LinkId l_ab = add_link(std::move(ab));
  const LinkId l_ba = add_link(std::move(ba));
  connect_port(a, port_a, l_ab);
  link_to_node(l_ab, b, port_b);
  connect_port(b, port_b, l_ba);
  link_to_node(l_ba, a, port_a);
  return {l_ab, l_ba};
}

void Simulator::add_fault(LinkId link, Fault fault) {
  impl_->check_link(link);
  if (std::string why = fault.validate(); !why.empty()) throw std::invalid_argument(why);
  auto& ls = impl_->links[link];
  Impl::Hook h;
  h.rng.reseed(derive_seed(impl_->cfg.seed, ls.cfg.name, ls.hooks.size()));
  h.reason = fault.name.empty() ? fault.describe() : fault.name;
  h.spec = std::move(fault);
  ls.hooks.push_back(std::move(h));
}

void Simulator::set_link_state(LinkId link, bool up, uint64_t at_ns) {
  impl_->check_link(link);
  impl_->push(std::max(at_ns, impl_->now), EvType::kLinkState, link, up ? 1 : 0);
}

void Simulator::link_down_between(LinkId link, uint64_t from_ns, uint64_t until_ns) {
  set_link_state(link, false, from_ns);
  if (until_ns != kForever) set_link_state(link, true, until_ns);
}

bool Simulator::link_is_up(LinkId link) const {
  impl_->check_link(link);
  return impl_->links[link].up;
}

void Simulator::at(uint64_t t_ns, std::function<void()> fn) {
  const uint32_t idx = static_cast<uint32_t>(impl_->calls.size());
  impl_->calls.push_back(std::move(fn));
  impl_->push(std::max(t_ns, impl_->now), EvType::kCall, idx);
}

void Simulator::wake(NodeId node) {
  impl_->check_node(node);
  auto& ns = impl_->nodes[node];
  if (ns.wake_pending) return;
  ns.wake_pending = true;
  impl_->push(impl_->now, EvType::kWake, node);
}

void Simulator::stop() {
  impl_->stop_requested = true;
}

RunResult Simulator::run_until(uint64_t t_ns, uint64_t max_events) {
  return impl_->run(t_ns, max_events, false);
}

RunResult Simulator::run_until_idle(uint64_t max_events) {
  return impl_->run(kForever, max_events, true);
}

bool Simulator::capture_link(LinkId link, const std::string& path, wire::CaptureFormat format) {
  impl_->check_link(link);
  const int idx = impl_->open_capture(path, format);
  if (idx < 0) return false;
  impl_->links[link].capture = idx;
  return true;
}

bool Simulator::capture_node(NodeId node, uint8_t port, const std::string& path,
                             wire::CaptureFormat format) {
  impl_->check_node(node);
  const int idx = impl_->open_capture(path, format);
  if (idx < 0) return false;
  auto& cap = impl_->nodes[node].capture;
  if (cap.size() <= port) cap.resize(size_t{port} + 1, -1);
  cap[port] = idx;
  return true;
}

bool Simulator::close_captures() {
  bool ok = true;
  for (size_t i = 0; i < impl_->captures.size(); ++i) {
    auto& w = impl_->captures[i];
    if (!w) continue;
    if (!w->close()) {
      ok = false;
      impl_->error = impl_->capture_paths[i] + ": " + w->error();
    }
    if (impl_->capture_failed[i]) ok = false;
    w.reset();
  }
  // Later frames must not reach closed writers.
  for (auto& l : impl_->links) l.capture = -1;
  for (auto& n : impl_->nodes) n.capture.clear();
  impl_->captures.clear();
  impl_->capture_paths.clear();
  impl_->capture_failed.clear();
  return ok;
}

const std::vector<Decision>& Simulator::decisions() const {
  return impl_->decisions;
}

void Simulator::set_decision_sink(std::function<void(const Decision&)> sink) {
  impl_->decision_sink = std::move(sink);
}

bool Simulator::write_decisions(const std::string& path) const {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return false;
  for (const Decision& d : impl_->decisions) out << decision_json(d) << '\n';
  out.flush();
  return static_cast<bool>(out);
}

size_t Simulator::node_count() const {
  return impl_->nodes.size();
}
size_t Simulator::link_count() const {
  return impl_->links.size();
}
size_t Simulator::switch_count() const {
  return impl_->switches.size();
}

const std::string& Simulator::node_name(NodeId node) const {
  impl_->check_node(node);
  return impl_->nodes[node].name;
}

const std::string& Simulator::link_name(LinkId link) const {
  impl_->check_link(link);
  return impl_->links[link].cfg.name;
}

const LinkConfig& Simulator::link_config(LinkId link) const {
  impl_->check_link(link);
  return impl_->links[link].cfg;
}

LinkId Simulator::find_link(std::string_view name) const {
  auto it = impl_->link_by_name.find(name);
  return it == impl_->link_by_name.end() ? kNone : it->second;
}

const LinkStats& Simulator::link_stats(LinkId link) const {
  impl_->check_link(link);
  return impl_->links[link].stats;
}

const NodeStats& Simulator::node_stats(NodeId node) const {
  impl_->check_node(node);
  return impl_->nodes[node].stats;
}

const SwitchStats& Simulator::switch_stats(SwitchId sw) const {
  if (sw >= impl_->switches.size()) throw std::out_of_range("mrc::sim: no switch");
  return impl_->switches[sw].stats;
}

uint64_t Simulator::backlog_bytes(LinkId link) const {
  impl_->check_link(link);
  return impl_->links[link].queue_bytes + impl_->links[link].prio_bytes;
}

uint64_t Simulator::events_dispatched() const {
  return impl_->dispatched;
}
const std::string& Simulator::error() const {
  return impl_->error;
}

}  // namespace mrc::sim
