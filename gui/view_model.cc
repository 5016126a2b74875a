#include "gui/view_model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "gui/view_model_impl.h"

namespace mrc::view {

// ---------------------------------------------------------------------------------------------
// Names and formatting
// ---------------------------------------------------------------------------------------------
namespace {
constexpr std::array<std::string_view, kMarkKindCount> kKindNames = {
    "first_tx", "retransmit", "trimmed", "injector_drop", "sack",       "nack",
    "probe",    "ev_state",   "ack",     "other",         "endpoint_op"};
constexpr std::array<std::string_view, kMarkKindCount> kKindLabels = {"first transmission",
                                                                      "retransmission",
                                                                      "trimmed",
                                                                      "dropped by injector",
                                                                      "SACK",
                                                                      "NACK",
                                                                      "probe",
                                                                      "EV state change",
                                                                      "ACK",
                                                                      "other",
                                                                      "endpoint operation"};
}  // namespace

std::string_view mark_kind_name(MarkKind k) {
  return kKindNames[static_cast<size_t>(k)];
}
std::string_view mark_kind_label(MarkKind k) {
  return kKindLabels[static_cast<size_t>(k)];
}
std::optional<MarkKind> parse_mark_kind(std::string_view name) {
  for (size_t i = 0; i < kMarkKindCount; ++i)
    if (kKindNames[i] == name) return static_cast<MarkKind>(i);
  return std::nullopt;
}

std::string_view ev_state_label(EvState s) {
  switch (s) {
    case EvState::kGood:
      return "GOOD";
    case EvState::kSkip:
      return "SKIP";
    case EvState::kAssumedBad:
      return "ASSUMED_BAD";
    case EvState::kDenied:
      return "DENIED";
    case EvState::kUnknown:
      break;
  }
  return "?";
}

EvState parse_ev_state(std::string_view s) {
  if (s == "GOOD") return EvState::kGood;
  if (s == "SKIP") return EvState::kSkip;
  if (s == "ASSUMED_BAD") return EvState::kAssumedBad;
  if (s == "DENIED") return EvState::kDenied;
  return EvState::kUnknown;
}

std::string format_time_ns(uint64_t ns) {
  char buf[48];
  if (ns < 1'000)
    std::snprintf(buf, sizeof buf, "%" PRIu64 " ns", ns);
  else if (ns < 1'000'000)
    std::snprintf(buf, sizeof buf, "%.3g us", static_cast<double>(ns) / 1e3);
  else if (ns < 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.4g ms", static_cast<double>(ns) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.6g s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::string format_wev(uint32_t wev) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", wev);
  return buf;
}

std::string format_rate(double bps) {
  char buf[32];
  if (bps >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3g Gb/s", bps / 1e9);
  else if (bps >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3g Mb/s", bps / 1e6);
  else if (bps >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3g kb/s", bps / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g b/s", bps);
  return buf;
}

std::string Lane::label() const {
  if (endpoint) return "endpoint ops";
  return control ? std::string("control") : "EV " + format_wev(wev);
}

namespace {
std::string addr_text(const wire::Ipv6Addr& a, bool ipv4) {
  if (ipv4) return wire::format_ipv4({a[12], a[13], a[14], a[15]});
  return wire::format_ipv6(a);
}
}  // namespace

std::string Flow::label() const {
  char qp[32];
  std::snprintf(qp, sizeof qp, " QP 0x%x", responder_qpn);
  std::string s = addr_text(requester, ipv4) + " -> " + addr_text(responder, ipv4) + qp;
  if (!requester_node.empty()) s += " (" + requester_node + ")";
  return s;
}

uint32_t Flow::lane_of(uint32_t wev) const {
  for (uint32_t i = 0; i < lanes.size(); ++i)
    if (!lanes[i].control && !lanes[i].endpoint && lanes[i].wev == wev) return i;
  return kNone;
}

uint32_t Flow::endpoint_lane(uint8_t plane) const {
  for (uint32_t i = 0; i < lanes.size(); ++i)
    if (lanes[i].endpoint && lanes[i].plane == plane) return i;
  return kNone;
}

uint32_t Flow::control_lane() const {
  for (uint32_t i = 0; i < lanes.size(); ++i)
    if (lanes[i].control) return i;
  return kNone;
}

bool Filter::lane_visible(const Lane& l) const {
  if (plane != 0 && (l.control || l.plane != plane)) return false;
  if (!evs.empty() && (l.control || std::find(evs.begin(), evs.end(), l.wev) == evs.end()))
    return false;
  return true;
}

bool Filter::frame_visible(const FrameInfo& f) const {
  if ((kinds & kind_bit(f.kind)) == 0) return false;
  if (opcode && f.opcode != *opcode) return false;
  return true;
}

bool Filter::ext_visible(const ExtMark& m, const Lane& l) const {
  if ((kinds & kind_bit(m.kind)) == 0) return false;
  // Log entries carry no opcode worth filtering on; an opcode filter narrows to frames.
  if (opcode && m.kind != MarkKind::kEvState) return false;
  return lane_visible(l);
}

std::string SelectionStats::to_text() const {
  std::string s;
  char buf[160];
  const uint64_t span = to_ns > from_ns ? to_ns - from_ns : 0;
  s += "span " + format_time_ns(span) + ", " + std::to_string(frames) + " frames\n";
  for (size_t k = 0; k < kMarkKindCount; ++k) {
    if (counts[k] == 0) continue;
    std::snprintf(buf, sizeof buf, "  %-22s %" PRIu64 "\n",
                  std::string(mark_kind_label(static_cast<MarkKind>(k))).c_str(), counts[k]);
    s += buf;
  }
  s += "data bytes " + std::to_string(data_bytes) + ", delivered " +
       std::to_string(delivered_bytes) + " (goodput " + format_rate(goodput_bps) + ")\n";
  for (const auto& [plane, n] : data_per_plane) {
    std::snprintf(buf, sizeof buf, "  plane %u: %" PRIu64 " data packets\n", plane, n);
    s += buf;
  }
  s += std::to_string(lanes_used) + " EVs used\n";
  if (rtt_samples > 0) {
    s += "RTT " + format_time_ns(static_cast<uint64_t>(rtt_min_ns)) + " / " +
         format_time_ns(static_cast<uint64_t>(rtt_avg_ns)) + " / " +
         format_time_ns(static_cast<uint64_t>(rtt_max_ns)) + " (min/avg/max, " +
         std::to_string(rtt_samples) + " samples)\n";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// The index
// ---------------------------------------------------------------------------------------------
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct FlowKey {
  wire::Ipv6Addr a{}, b{};
  uint32_t qpn = 0;
  bool operator==(const FlowKey& o) const { return qpn == o.qpn && a == o.a && b == o.b; }
};
struct FlowKeyHash {
  size_t operator()(const FlowKey& k) const {
    uint64_t h = 1469598103934665603ull ^ k.qpn;
    for (uint8_t x : k.a) h = (h ^ x) * 1099511628211ull;
    for (uint8_t x : k.b) h = (h ^ x) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Feedback frames name the requester QP by DestQP and the responder QP by SPDCID (QPN[15:0]).
struct FeedbackKey {
  wire::Ipv6Addr requester{}, responder{};
  uint32_t requester_qpn = 0;
  bool operator==(const FeedbackKey& o) const {
    return requester_qpn == o.requester_qpn && requester == o.requester && responder == o.responder;
  }
};
struct FeedbackKeyHash {
  size_t operator()(const FeedbackKey& k) const {
    return FlowKeyHash{}(FlowKey{k.requester, k.responder, k.requester_qpn});
  }
};

wire::Ipv6Addr mapped(const wire::Ipv4Addr& a) {
  wire::Ipv6Addr r{};
  r[10] = 0xFF;
  r[11] = 0xFF;
  r[12] = a[0];
  r[13] = a[1];
  r[14] = a[2];
  r[15] = a[3];
  return r;
}

int32_t sdiff24(uint32_t a, uint32_t b) {  // a - b as a signed 24-bit value
  const uint32_t d = wire::psn_diff(a, b);
  return d >= (1u << 23) ? static_cast<int32_t>(d) - (1 << 24) : static_cast<int32_t>(d);
}

uint64_t mac_key(const wire::MacAddr& m) {
  uint64_t k = 0;
  for (uint8_t b : m) k = (k << 8) | b;
  return k;
}

// Build-time state per flow that the public Flow does not keep.
struct FlowBuild {
  std::unordered_map<uint32_t, uint32_t> lane_of_wev;
  std::unordered_map<uint64_t, uint32_t> endpoint_lane_of;  // by the requester-side port key
  std::vector<uint64_t> lane_mac;    // src MAC of the lane's first data/probe frame
  std::vector<uint32_t> lane_iface;  // its pcapng interface
  int32_t max_rel = 0;
  uint32_t max_psn = 0;
  bool have_psn = false;
  std::vector<uint8_t> seen;  // per rel_psn - seen_base: 1 = sent before
  int32_t seen_base = 0;
  std::unordered_set<int32_t> seen_below;  // rel_psn < seen_base (rare: capture starts late)
};

struct SackRaw {
  uint32_t frame;
  int16_t ack_psn_offset;
  int16_t sack_offset;
  uint64_t bitmap;
};

}  // namespace

ViewModel::Impl::~Impl() {
  if (mapping != nullptr) munmap(mapping, size);
}

void ViewModel::Impl::warn(std::string w) {
  if (warnings.size() < 200)
    warnings.push_back(std::move(w));
  else if (warnings.size() == 200)
    warnings.push_back("(further warnings suppressed)");
}

bool ViewModel::Impl::map_file(const std::string& path, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    error = path + ": cannot stat: " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (S_ISREG(st.st_mode)) {
    if (st.st_size == 0) {
      ::close(fd);
      error = path + ": empty file, not a capture";
      return false;
    }
    void* m = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      ::close(fd);
      mapping = m;
      base = static_cast<const std::byte*>(m);
      size = static_cast<size_t>(st.st_size);
      // One sequential pass builds the index; tell the kernel to read ahead.
      madvise(m, size, MADV_SEQUENTIAL);
      return true;
    }
  }
  // A pipe or a file that cannot be mapped: read it.
  std::byte buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = path + ": read error: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (n == 0) break;
    owned.insert(owned.end(), buf, buf + n);
  }
  ::close(fd);
  base = owned.data();
  size = owned.size();
  if (size == 0) {
    error = path + ": empty input, not a capture";
    return false;
  }
  return true;
}

int32_t ViewModel::Impl::rel_psn(const Flow& flow, uint32_t psn) const {
  return sdiff24(psn, flow.first_psn);
}

uint32_t ViewModel::Impl::lane_for(Flow& flow, uint32_t flow_index, uint32_t wev, bool create) {
  const uint32_t l = flow.lane_of(wev);
  if (l != kNone || !create) return l;
  Lane lane;
  lane.wev = wev;
  flow.lanes.push_back(std::move(lane));
  (void)flow_index;
  return static_cast<uint32_t>(flow.lanes.size() - 1);
}

bool ViewModel::Impl::index_capture(std::string& error) {
  const std::string& path = opts.capture;
  wire::CaptureReader reader;
  const auto relabel = [&](std::string msg) {
    // The reader runs over our mapping and calls it "<memory>"; name the file instead.
    const std::string tag = "<memory>";
    if (msg.rfind(tag, 0) == 0) msg = path + msg.substr(tag.size());
    return msg;
  };
  if (!reader.open_memory(wire::Bytes(base, size))) {
    error = relabel(reader.error());
    return false;
  }
  pcapng = reader.is_pcapng();

  const wire::WireProfile& profile = *wire_profile;
  std::unordered_map<FlowKey, uint32_t, FlowKeyHash> flow_of;
  std::unordered_map<FeedbackKey, uint32_t, FeedbackKeyHash> flow_of_feedback;
  std::vector<FlowBuild> build;
  std::vector<SackRaw> sack_raw;
  struct Pending {
    uint32_t frame;
    wire::Ipv6Addr src, dst;
    uint32_t dest_qp;
    uint32_t spdcid;  // kNone when the frame carries none (transport ACK)
  };
  std::vector<Pending> pending;  // feedback frames whose flow was not known yet
  struct PendingEndpointOp {
    uint32_t frame;
    wire::Ipv6Addr src, dst;
    uint64_t src_mac, dst_mac;
  };
  // Endpoint operations, attached to a flow of the same two hosts once every flow is known.
  std::vector<PendingEndpointOp> endpoint_ops;

  FlowKey last_key;
  uint32_t last_flow = kNone;

  const auto new_flow = [&](const FlowKey& k, bool ipv4) {
    Flow f;
    f.requester = k.a;
    f.responder = k.b;
    f.responder_qpn = k.qpn;
    f.ipv4 = ipv4;
    flows.push_back(std::move(f));
    build.emplace_back();
    rtx_events.emplace_back();
    const uint32_t idx = static_cast<uint32_t>(flows.size() - 1);
    flow_of.emplace(k, idx);
    return idx;
  };

  const auto lane_in = [&](uint32_t fi, uint32_t wev, const FrameInfo& fr, uint64_t mac) {
    FlowBuild& b = build[fi];
    auto it = b.lane_of_wev.find(wev);
    if (it != b.lane_of_wev.end()) return it->second;
    Lane lane;
    lane.wev = wev;
    flows[fi].lanes.push_back(std::move(lane));
    const uint32_t l = static_cast<uint32_t>(flows[fi].lanes.size() - 1);
    b.lane_of_wev.emplace(wev, l);
    b.lane_mac.push_back(mac);
    b.lane_iface.push_back(fr.interface_id);
    return l;
  };

  // rel_psn with unwrapping against the highest PSN seen so far in the flow.
  const auto unwrap = [&](uint32_t fi, uint32_t psn) {
    FlowBuild& b = build[fi];
    Flow& f = flows[fi];
    if (!b.have_psn) {
      b.have_psn = true;
      f.first_psn = psn;
      b.max_psn = psn;
      b.max_rel = 0;
      return 0;
    }
    const int32_t rel = b.max_rel + sdiff24(psn, b.max_psn);
    if (rel > b.max_rel) {
      b.max_rel = rel;
      b.max_psn = psn;
    }
    return rel;
  };

  // True when rel was sent before; marks it sent.
  const auto seen_before = [&](uint32_t fi, int32_t rel) {
    FlowBuild& b = build[fi];
    if (rel < b.seen_base) return !b.seen_below.insert(rel).second;
    const size_t i = static_cast<size_t>(rel - b.seen_base);
    if (i >= b.seen.size()) b.seen.resize(std::max(i + 1, b.seen.size() * 2), 0);
    const bool was = b.seen[i] != 0;
    b.seen[i] = 1;
    return was;
  };

  wire::CaptureRecord rec;
  wire::DecodedFrame d;
  wire::DecodeOptions dopt;
  // The pass reads the mapping front to back: ask for the next window ahead of time and drop
  // the one behind, so the resident size stays the index plus two windows, not the file.
  constexpr size_t kWindow = 32u << 20;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t dropped = 0, advised = 0;
  const auto roll = [&](size_t at) {
    if (mapping == nullptr) return;
    if (at + kWindow > advised && advised < size) {
      const size_t len = std::min(size - advised, 2 * kWindow);
      madvise(static_cast<std::byte*>(mapping) + advised, len, MADV_WILLNEED);
      advised += len;
    }
    if (at > dropped + 2 * kWindow) {
      const size_t upto = (at - kWindow) / page * page;
      madvise(static_cast<std::byte*>(mapping) + dropped, upto - dropped, MADV_DONTNEED);
      dropped = upto;
    }
  };
  roll(0);
  while (reader.next(rec)) {
    if ((frames.size() & 1023) == 0) roll(static_cast<size_t>(rec.data.data() - base));
    FrameInfo fr;
    fr.ts_ns = rec.ts_ns;
    fr.offset = static_cast<uint64_t>(rec.data.data() - base);
    fr.caplen = static_cast<uint32_t>(rec.data.size());
    fr.interface_id = static_cast<uint8_t>(std::min<uint32_t>(rec.interface_id, 255));
    if (rec.link == wire::LinkType::kRawIp) fr.flags |= kFlagRawIp;
    const uint32_t idx = static_cast<uint32_t>(frames.size());
    if (rec.orig_len > rec.data.size()) {
      if (frame_orig_len.empty()) frame_orig_len.assign(idx, 0);
    }
    if (!frame_orig_len.empty()) frame_orig_len.push_back(rec.orig_len);

    dopt.link = rec.link;
    const bool ok = wire::decode_frame(rec.data, d, dopt, profile);
    if (!ok) {
      fr.flags |= kFlagDecodeError;
      ++stats.decode_errors;
    }
    if (!d.roce || d.off_bth == 0xFFFF) {
      ++stats.other_frames;
      frames.push_back(fr);
      continue;
    }
    ++stats.roce_frames;
    fr.flags |= kFlagRoce;
    fr.opcode = d.bth.opcode;
    fr.psn = d.bth.psn;
    if (d.bth.rtx) fr.flags |= kFlagRtxBit;
    if (d.bth.ack_req) fr.flags |= kFlagAckReq;
    if (d.ecn() == 3) fr.flags |= kFlagCe;

    wire::Ipv6Addr src{}, dst{};
    bool ipv4 = false;
    if (const wire::Ipv6Header* h = d.roce_ip6()) {
      src = h->src;
      dst = h->dst;
    } else if (d.l3 == 4) {
      src = mapped(d.ip4.src);
      dst = mapped(d.ip4.dst);
      ipv4 = true;
    }
    const wire::PacketKind kind = d.op ? d.op->kind : wire::PacketKind::kUnknown;
    const uint64_t mac = d.has_eth ? mac_key(d.eth.src) : 0;

    switch (kind) {
      case wire::PacketKind::kMrcData:
      case wire::PacketKind::kRcData:
      case wire::PacketKind::kMrcProbe: {
        const FlowKey k{src, dst, d.bth.dest_qp};
        uint32_t fi;
        if (last_flow != kNone && k == last_key) {
          fi = last_flow;
        } else {
          auto it = flow_of.find(k);
          fi = it != flow_of.end() ? it->second : new_flow(k, ipv4);
          last_key = k;
          last_flow = fi;
        }
        const uint32_t fl = d.has_inner_ip6 ? d.inner_ip6.flow_label : d.flow_label();
        fr.wev = wire::wev_from_carriage(profile.params(), d.ev_format(), d.udp.sport, fl);
        fr.flow = fi;
        if (kind == wire::PacketKind::kMrcProbe) {
          fr.kind = MarkKind::kProbe;
          fr.aux = d.peth.probe_id;
          fr.rel_psn = 0;
        } else {
          fr.payload = static_cast<uint16_t>(std::min<size_t>(d.payload.size(), 0xFFFF));
          fr.rel_psn = unwrap(fi, d.bth.psn);
          const bool before = seen_before(fi, fr.rel_psn);
          if (d.trimmed) {
            fr.kind = MarkKind::kTrimmed;
            if (d.dscp() == profile.dscp().trimmed_lasthop) fr.flags |= kFlagTrimmedLastHop;
          } else if (d.bth.rtx || before) {
            fr.kind = MarkKind::kRetransmit;
          } else {
            fr.kind = MarkKind::kFirstTx;
          }
        }
        fr.lane = lane_in(fi, fr.wev, fr, mac);
        flows[fi].frames.push_back(idx);
        flows[fi].lanes[fr.lane].frames.push_back(idx);
        break;
      }
      case wire::PacketKind::kMrcSack:
      case wire::PacketKind::kMrcNack:
      case wire::PacketKind::kMrcTransportAck:
      case wire::PacketKind::kRcAck: {
        uint16_t spdcid = 0;
        bool has_spdcid = false;
        if (kind == wire::PacketKind::kMrcSack && d.has(wire::kHdrSeth)) {
          fr.kind = MarkKind::kSack;
          fr.wev = d.seth.entropy;
          spdcid = d.seth.spdcid;
          has_spdcid = true;
          if (d.seth.pr) {
            fr.flags |= kFlagProbeReply;
            fr.aux = static_cast<uint16_t>(d.seth.ack_psn_offset);
          }
          if (d.seth.m == static_cast<uint8_t>(wire::SackM::kAlwaysSkip))
            fr.flags |= kFlagSackAlwaysSkip;
          sack_raw.push_back({idx, d.seth.ack_psn_offset, d.seth.sack_offset, d.seth.sack_bitmap});
        } else if (kind == wire::PacketKind::kMrcNack && d.has(wire::kHdrNeth)) {
          fr.kind = MarkKind::kNack;
          fr.wev = d.neth.entropy;
          fr.code = d.neth.nack_code;
          spdcid = d.neth.spdcid;
          has_spdcid = true;
          if (d.neth.nack_code == static_cast<uint8_t>(wire::NackCode::kTrimmedLastHop))
            fr.flags |= kFlagTrimmedLastHop;
          if (d.neth.m == static_cast<uint8_t>(wire::SackM::kAlwaysSkip))
            fr.flags |= kFlagSackAlwaysSkip;
        } else {
          fr.kind = MarkKind::kAck;
        }
        // Requester is the destination of feedback.
        const FeedbackKey fk{dst, src, d.bth.dest_qp};
        uint32_t fi = kNone;
        auto it = flow_of_feedback.find(fk);
        if (it != flow_of_feedback.end()) {
          fi = it->second;
        } else if (has_spdcid) {
          // Data flows from dst to src whose responder QPN matches SPDCID.
          for (uint32_t c = 0; c < flows.size(); ++c) {
            const Flow& f = flows[c];
            if (f.requester == dst && f.responder == src && (f.responder_qpn & 0xFFFF) == spdcid &&
                !f.requester_qpn) {
              fi = c;
              break;
            }
          }
          if (fi != kNone) {
            flows[fi].requester_qpn = d.bth.dest_qp;
            flow_of_feedback.emplace(fk, fi);
          }
        }
        if (fi == kNone) {
          frames.push_back(fr);
          pending.push_back({idx, src, dst, d.bth.dest_qp, has_spdcid ? spdcid : kNone});
          continue;
        }
        fr.flow = fi;
        fr.rel_psn =
            build[fi].have_psn ? build[fi].max_rel + sdiff24(fr.psn, build[fi].max_psn) : 0;
        if (fr.kind == MarkKind::kAck) {
          fr.lane = kNone;  // control lane, assigned when lanes are final
        } else {
          fr.lane = lane_in(fi, fr.wev, fr, 0);
          flows[fi].lanes[fr.lane].frames.push_back(idx);
        }
        flows[fi].frames.push_back(idx);
        break;
      }
      case wire::PacketKind::kMrcEndpointRequest:
      case wire::PacketKind::kMrcEndpointResponse: {
        fr.kind = MarkKind::kEndpointOp;
        if (kind == wire::PacketKind::kMrcEndpointResponse) {
          fr.flags |= kFlagEndpointResponse;
          if (d.has(wire::kHdrEeth)) {
            fr.code = d.eeth.op;
            fr.wev = d.eeth.entropy;  // the WEV the request arrived on
          }
        } else {
          if (d.has(wire::kHdrErth)) fr.code = d.erth.op;
          const uint32_t fl = d.has_inner_ip6 ? d.inner_ip6.flow_label : d.flow_label();
          fr.wev = wire::wev_from_carriage(d.ev_format(), profile.ev_stripe(), d.udp.sport, fl);
        }
        endpoint_ops.push_back({idx, src, dst, mac, d.has_eth ? mac_key(d.eth.dst) : 0});
        break;
      }
      default:
        fr.kind = MarkKind::kOther;  // CNP, RC reads/atomics: no flow
        break;
    }
    frames.push_back(fr);
  }
  if (!reader.error().empty()) {
    if (frames.empty()) {
      error = relabel(reader.error());
      return false;
    }
    warn(relabel(reader.error()) + " (kept the " + std::to_string(frames.size()) +
         " frames before it)");
  }
  stats.frames = frames.size();
  stats.file_bytes = size;

  // Feedback that arrived before its flow's data (or whose QP pairing is ambiguous).
  for (const Pending& p : pending) {
    FrameInfo& fr = frames[p.frame];
    uint32_t fi = kNone, candidates = 0;
    for (uint32_t c = 0; c < flows.size(); ++c) {
      const Flow& f = flows[c];
      if (f.requester != p.dst || f.responder != p.src) continue;
      if (f.requester_qpn && *f.requester_qpn != p.dest_qp) continue;
      if (p.spdcid != kNone && (f.responder_qpn & 0xFFFF) != p.spdcid) continue;
      ++candidates;
      fi = c;
    }
    if (candidates != 1) continue;  // no flow, or ambiguous: stays outside every flow
    fr.flow = fi;
    if (!flows[fi].requester_qpn) flows[fi].requester_qpn = p.dest_qp;
    fr.rel_psn = rel_psn(flows[fi], fr.psn);
    if (fr.kind != MarkKind::kAck) {
      fr.lane = lane_in(fi, fr.wev, fr, 0);
      flows[fi].lanes[fr.lane].frames.push_back(p.frame);
    }
    flows[fi].frames.push_back(p.frame);
  }

  // Endpoint operations: to the first flow between the same two hosts (either direction), on
  // one lane per requester port. The port is keyed like data lanes are: by the requester's MAC
  // (source of what it sends, destination of what it receives) or the pcapng interface, so the
  // plane pass below gives the lane the plane of the data lanes on that port.
  for (const PendingEndpointOp& e : endpoint_ops) {
    uint32_t fi = kNone;
    bool from_responder = false;
    for (uint32_t c = 0; c < flows.size() && fi == kNone; ++c) {
      if (flows[c].requester == e.src && flows[c].responder == e.dst) fi = c;
      if (flows[c].requester == e.dst && flows[c].responder == e.src) {
        fi = c;
        from_responder = true;
      }
    }
    if (fi == kNone) continue;  // no data between these hosts: stays outside every flow
    FrameInfo& fr = frames[e.frame];
    if (from_responder) fr.flags |= kFlagFromResponder;
    const uint64_t mac = from_responder ? e.dst_mac : e.src_mac;
    // Both: the plane pass below picks interfaces or MACs once it knows how many interfaces
    // carry data (a merged pcapng may have one interface for every port).
    const uint64_t key = (static_cast<uint64_t>(fr.interface_id) << 48) ^ mac;
    FlowBuild& b = build[fi];
    uint32_t l;
    auto it = b.endpoint_lane_of.find(key);
    if (it != b.endpoint_lane_of.end()) {
      l = it->second;
    } else {
      Lane lane;
      lane.endpoint = true;
      flows[fi].lanes.push_back(std::move(lane));
      l = static_cast<uint32_t>(flows[fi].lanes.size() - 1);
      b.endpoint_lane_of.emplace(key, l);
      b.lane_mac.push_back(mac);
      b.lane_iface.push_back(fr.interface_id);
    }
    fr.flow = fi;
    fr.lane = l;
    flows[fi].lanes[l].frames.push_back(e.frame);
    flows[fi].frames.push_back(e.frame);
  }

  // Lists in time order (captures merged from several points need not be).
  const auto by_time = [&](std::vector<uint32_t>& list) {
    const auto less = [&](uint32_t a, uint32_t b) {
      return frames[a].ts_ns != frames[b].ts_ns ? frames[a].ts_ns < frames[b].ts_ns : a < b;
    };
    if (!std::is_sorted(list.begin(), list.end(), less)) std::sort(list.begin(), list.end(), less);
  };
  for (Flow& f : flows) {
    by_time(f.frames);
    for (Lane& l : f.lanes) by_time(l.frames);
  }

  // Planes. pcapng with several interfaces: one interface per plane. Otherwise the requester's
  // source MACs in ascending order (a NIC's port MACs usually ascend with the port).
  std::unordered_set<uint8_t> ifaces;
  for (size_t fi = 0; fi < flows.size(); ++fi)
    for (uint32_t i : build[fi].lane_iface) ifaces.insert(static_cast<uint8_t>(i));
  const bool by_iface = opts.planes_from_interfaces && pcapng && ifaces.size() > 1;
  std::map<wire::Ipv6Addr, std::vector<uint64_t>> macs_of;
  // Data lanes only: an endpoint lane's MAC is looked up, never adds a plane of its own.
  for (size_t fi = 0; fi < flows.size(); ++fi)
    for (size_t l = 0; l < build[fi].lane_mac.size(); ++l)
      if (build[fi].lane_mac[l] != 0 && !flows[fi].lanes[l].endpoint)
        macs_of[flows[fi].requester].push_back(build[fi].lane_mac[l]);
  for (auto& [a, v] : macs_of) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  for (size_t fi = 0; fi < flows.size(); ++fi) {
    Flow& f = flows[fi];
    for (size_t l = 0; l < f.lanes.size() && l < build[fi].lane_mac.size(); ++l) {
      Lane& lane = f.lanes[l];
      if (by_iface) {
        lane.plane = static_cast<uint8_t>(std::min<uint32_t>(build[fi].lane_iface[l] + 1, 255));
        lane.plane_source = "pcapng interface";
      } else if (build[fi].lane_mac[l] != 0) {
        const auto& v = macs_of[f.requester];
        const auto it = std::lower_bound(v.begin(), v.end(), build[fi].lane_mac[l]);
        if (lane.endpoint && (it == v.end() || *it != build[fi].lane_mac[l])) continue;
        lane.plane = static_cast<uint8_t>(std::min<ptrdiff_t>(it - v.begin() + 1, 255));
        lane.plane_source = lane.endpoint ? "the requester's MAC" : "source MAC";
      }
    }
  }

  // SACK bitmaps, relative to the flow.
  for (const SackRaw& s : sack_raw) {
    const FrameInfo& fr = frames[s.frame];
    if (fr.flow == kNone) continue;
    SackInfo si;
    si.frame = s.frame;
    si.rel_cack = fr.rel_psn;
    si.rel_base = fr.rel_psn + s.sack_offset;
    si.bitmap = s.bitmap;
    flows[fr.flow].sacks.push_back(si);
    // Keep the triggering PSN offset for RTT matching (probe replies keep probe_id in aux).
    if ((fr.flags & kFlagProbeReply) == 0)
      frames[s.frame].aux = static_cast<uint16_t>(s.ack_psn_offset);
  }
  for (Flow& f : flows) {
    std::sort(f.sacks.begin(), f.sacks.end(), [&](const SackInfo& a, const SackInfo& b) {
      return frames[a.frame].ts_ns != frames[b.frame].ts_ns
                 ? frames[a.frame].ts_ns < frames[b.frame].ts_ns
                 : a.frame < b.frame;
    });
  }

  if (!frames.empty()) {
    first_ns = UINT64_MAX;
    last_ns = 0;
    for (const FrameInfo& fr : frames) {
      first_ns = std::min(first_ns, fr.ts_ns);
      last_ns = std::max(last_ns, fr.ts_ns);
    }
  }
  return true;
}

// Sorts lanes (plane, WEV; control last), remaps indices, and derives everything the views
// read: counts, EV state spans, goodput prefix sums, RTT samples.
void ViewModel::Impl::finish_ext(Flow& flow) {
  const uint32_t fi = static_cast<uint32_t>(&flow - flows.data());
  // The control lane exists when the flow has ACKs or feedback drops.
  bool need_control = false;
  for (uint32_t i : flow.frames)
    if (frames[i].lane == kNone) need_control = true;
  for (const ExtMark& m : flow.ext)
    if (m.lane == kNone) need_control = true;
  if (need_control && flow.control_lane() == kNone) {
    Lane c;
    c.control = true;
    flow.lanes.push_back(std::move(c));
  }
  std::vector<uint32_t> order(flow.lanes.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Lane& x = flow.lanes[a];
    const Lane& y = flow.lanes[b];
    if (x.control != y.control) return y.control;
    const unsigned px = x.plane == 0 ? 256u : x.plane, py = y.plane == 0 ? 256u : y.plane;
    if (px != py) return px < py;
    if (x.endpoint != y.endpoint) return y.endpoint;
    return x.wev < y.wev;
  });
  std::vector<uint32_t> remap(order.size());
  std::vector<Lane> sorted;
  sorted.reserve(order.size());
  for (uint32_t n = 0; n < order.size(); ++n) {
    remap[order[n]] = n;
    sorted.push_back(std::move(flow.lanes[order[n]]));
  }
  flow.lanes = std::move(sorted);
  const uint32_t control = flow.control_lane();
  Lane* control_lane = control == kNone ? nullptr : &flow.lanes[control];
  for (uint32_t i : flow.frames) {
    FrameInfo& fr = frames[i];
    if (fr.lane == kNone) {
      fr.lane = control;
      if (control_lane) control_lane->frames.push_back(i);  // flow.frames is in time order
    } else {
      fr.lane = remap[fr.lane];
    }
  }
  std::stable_sort(flow.ext.begin(), flow.ext.end(),
                   [](const ExtMark& a, const ExtMark& b) { return a.ts_ns < b.ts_ns; });
  for (uint32_t e = 0; e < flow.ext.size(); ++e) {
    ExtMark& m = flow.ext[e];
    m.lane = m.lane == kNone ? control : remap[m.lane];
    if (m.lane != kNone) flow.lanes[m.lane].ext.push_back(e);
  }

  // Planes of frames follow their lane; planes of the flow.
  std::vector<uint8_t> planes;
  for (const Lane& l : flow.lanes)
    if (!l.control && !l.endpoint && l.plane != 0) planes.push_back(l.plane);
  std::sort(planes.begin(), planes.end());
  planes.erase(std::unique(planes.begin(), planes.end()), planes.end());
  flow.planes = planes;

  // Counts, time range, PSN range, delivered bytes.
  flow.counts = {};
  for (Lane& l : flow.lanes) l.counts = {};
  flow.first_ns = UINT64_MAX;
  flow.last_ns = 0;
  flow.min_rel_psn = INT32_MAX;
  flow.max_rel_psn = INT32_MIN;
  std::vector<uint8_t> delivered;
  int32_t base_rel = 0;
  std::unordered_set<int32_t> delivered_below;
  bool have_base = false;
  uint64_t total = 0;
  for (uint32_t i : flow.frames) {
    FrameInfo& fr = frames[i];
    if (fr.lane != kNone) {
      Lane& l = flow.lanes[fr.lane];
      fr.plane = l.plane;
      ++l.counts[static_cast<size_t>(fr.kind)];
    }
    ++flow.counts[static_cast<size_t>(fr.kind)];
    flow.first_ns = std::min(flow.first_ns, fr.ts_ns);
    flow.last_ns = std::max(flow.last_ns, fr.ts_ns);
    const bool data = fr.kind == MarkKind::kFirstTx || fr.kind == MarkKind::kRetransmit ||
                      fr.kind == MarkKind::kTrimmed;
    if (data) {
      flow.min_rel_psn = std::min(flow.min_rel_psn, fr.rel_psn);
      flow.max_rel_psn = std::max(flow.max_rel_psn, fr.rel_psn);
    }
    if ((fr.kind == MarkKind::kFirstTx || fr.kind == MarkKind::kRetransmit) &&
        (fr.flags & (kFlagDroppedLater | kFlagTrimmedLater)) == 0) {
      if (!have_base) {
        have_base = true;
        base_rel = fr.rel_psn;
      }
      bool fresh;
      if (fr.rel_psn < base_rel) {
        fresh = delivered_below.insert(fr.rel_psn).second;
      } else {
        const size_t k = static_cast<size_t>(fr.rel_psn - base_rel);
        if (k >= delivered.size()) delivered.resize(std::max(k + 1, delivered.size() * 2), 0);
        fresh = delivered[k] == 0;
        delivered[k] = 1;
      }
      if (fresh) {
        fr.flags |= kFlagDelivered;
        total += fr.payload;
        flow.deliv_ts.push_back(fr.ts_ns);
        flow.deliv_cum.push_back(total);
        Lane& l = flow.lanes[fr.lane];
        l.deliv_ts.push_back(fr.ts_ns);
        l.deliv_cum.push_back((l.deliv_cum.empty() ? 0 : l.deliv_cum.back()) + fr.payload);
      }
    }
  }
  for (const ExtMark& m : flow.ext) {
    ++flow.counts[static_cast<size_t>(m.kind)];
    if (m.lane != kNone) ++flow.lanes[m.lane].counts[static_cast<size_t>(m.kind)];
    if (m.has_psn) {
      flow.min_rel_psn = std::min(flow.min_rel_psn, m.rel_psn);
      flow.max_rel_psn = std::max(flow.max_rel_psn, m.rel_psn);
    }
  }
  if (flow.first_ns == UINT64_MAX) flow.first_ns = flow.last_ns = 0;
  if (flow.min_rel_psn > flow.max_rel_psn) flow.min_rel_psn = flow.max_rel_psn = 0;

  // RTT at the capture point: acknowledgement time minus the time of the packet it answers,
  // found on the same lane (the EV the acknowledgement echoes).
  for (Lane& l : flow.lanes) {
    if (l.control || l.endpoint) continue;
    for (size_t p = 0; p < l.frames.size(); ++p) {
      const FrameInfo& ack = frames[l.frames[p]];
      if (ack.kind != MarkKind::kSack && ack.kind != MarkKind::kNack) continue;
      const bool probe_reply = (ack.flags & kFlagProbeReply) != 0;
      int32_t target = ack.rel_psn;
      if (ack.kind == MarkKind::kSack && !probe_reply)
        target = ack.rel_psn + static_cast<int16_t>(ack.aux);
      constexpr size_t kMaxBack = 512;
      for (size_t q = p, steps = 0; q > 0 && steps < kMaxBack; --q, ++steps) {
        const FrameInfo& c = frames[l.frames[q - 1]];
        const bool match =
            probe_reply ? (c.kind == MarkKind::kProbe && c.aux == ack.aux)
                        : ((c.kind == MarkKind::kFirstTx || c.kind == MarkKind::kRetransmit ||
                            c.kind == MarkKind::kTrimmed) &&
                           c.rel_psn == target);
        if (!match) continue;
        if (ack.ts_ns >= c.ts_ns) l.rtt.push_back({ack.ts_ns, ack.ts_ns - c.ts_ns, l.frames[p]});
        break;
      }
    }
  }
  (void)fi;
  rebuild_states(flow);
}

// EV state spans per lane from its kEvState marks: before the first change the lane is in the
// change's "from" state (kept in the text), after each change in its "to" state.
void ViewModel::Impl::rebuild_states(Flow& flow) {
  for (Lane& l : flow.lanes) {
    l.states.clear();
    EvState current = EvState::kUnknown;
    uint64_t since = 0;
    bool first = true;
    for (uint32_t e : l.ext) {
      const ExtMark& m = flow.ext[e];
      if (m.kind != MarkKind::kEvState) continue;
      if (first) {
        // "FROM -> TO (reason)"
        const size_t arrow = m.text.find(" -> ");
        current = parse_ev_state(m.text.substr(0, arrow));
        since = std::min(flow.first_ns, m.ts_ns);
        first = false;
      }
      if (m.ts_ns > since || !l.states.empty()) l.states.push_back({since, m.ts_ns, current});
      current = m.to_state;
      since = m.ts_ns;
    }
    if (!first) l.states.push_back({since, UINT64_MAX, current});
  }
}

// ---------------------------------------------------------------------------------------------
// ViewModel
// ---------------------------------------------------------------------------------------------
ViewModel::ViewModel() : impl_(std::make_unique<Impl>()) {}
ViewModel::~ViewModel() = default;
ViewModel::ViewModel(ViewModel&&) noexcept = default;
ViewModel& ViewModel::operator=(ViewModel&&) noexcept = default;

bool ViewModel::load(const LoadOptions& opts_in, std::string& error) {
  const auto t0 = Clock::now();
  impl_ = std::make_unique<Impl>();
  Impl& m = *impl_;
  m.opts = opts_in;
  // A capture inside a run directory (captures/, view/) gets the run's artifacts as well.
  if (m.opts.run_dir.empty() && !m.opts.capture.empty() && m.opts.detect) {
    namespace fs = std::filesystem;
    const fs::path parent = fs::path(m.opts.capture).parent_path();
    std::error_code ec;
    if ((parent.filename() == "captures" || parent.filename() == "view") &&
        (fs::is_regular_file(parent.parent_path() / "manifest.json", ec) ||
         fs::is_regular_file(parent.parent_path() / "result.json", ec)))
      m.opts.run_dir = parent.parent_path().string();
  }
  if (!m.opts.run_dir.empty()) {
    if (!resolve_run_dir(m.opts.run_dir, m.run, error)) return false;
    // Explicit files win; the run fills what was not given.
    if (m.opts.capture.empty()) m.opts.capture = m.run.capture;
    if (m.opts.event_logs.empty()) m.opts.event_logs = m.run.event_logs;
    if (m.opts.decision_logs.empty()) m.opts.decision_logs = m.run.decision_logs;
    if (m.opts.report.empty()) m.opts.report = m.run.report;
    m.opts.detect = false;
  }
  if (m.opts.capture.empty()) {
    error = "no capture file given";
    return false;
  }
  m.wire_profile =
      wire::open_wire_profile(m.opts.wire_profile.empty() ? "MRP0" : m.opts.wire_profile, error);
  if (!m.wire_profile) return false;
  if (m.opts.detect) {
    namespace fs = std::filesystem;
    std::vector<std::string> dirs;
    const fs::path cap(m.opts.capture);
    dirs.push_back(cap.has_parent_path() ? cap.parent_path().string() : ".");
    if (!m.opts.artifacts_dir.empty()) dirs.push_back(m.opts.artifacts_dir);
    for (const std::string& dir : dirs) {
      const Artifacts a = detect_artifacts(dir);
      const auto add = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
        for (const auto& p : from)
          if (std::find(to.begin(), to.end(), p) == to.end()) to.push_back(p);
      };
      // Explicit files win; detection only fills what was not given.
      if (opts_in.event_logs.empty()) add(m.opts.event_logs, a.event_logs);
      if (opts_in.decision_logs.empty()) add(m.opts.decision_logs, a.decision_logs);
      if (opts_in.report.empty() && m.opts.report.empty()) m.opts.report = a.report;
    }
  } else if (!m.opts.artifacts_dir.empty()) {
    const Artifacts a = detect_artifacts(m.opts.artifacts_dir);
    if (m.opts.event_logs.empty()) m.opts.event_logs = a.event_logs;
    if (m.opts.decision_logs.empty()) m.opts.decision_logs = a.decision_logs;
    if (m.opts.report.empty()) m.opts.report = a.report;
  }

  if (!m.map_file(m.opts.capture, error)) return false;
  const auto t_index = Clock::now();
  if (!m.index_capture(error)) return false;
  m.stats.index_ms = ms_since(t_index);
  if (m.mapping != nullptr) {
    // The index holds what the views need; the packet pane reads one frame at a time. Drop the
    // file's pages from this process (they stay in the page cache) so that its resident size is
    // the index, not the capture.
    madvise(m.mapping, m.size, MADV_DONTNEED);
    madvise(m.mapping, m.size, MADV_RANDOM);
  }

  const auto t_logs = Clock::now();
  for (const std::string& p : m.opts.event_logs) m.apply_event_log(p);
  for (const std::string& p : m.opts.decision_logs) m.apply_decision_log(p);
  for (Flow& f : m.flows) m.finish_ext(f);
  if (!m.opts.report.empty() && !m.apply_report(m.opts.report, !opts_in.report.empty(), error))
    return false;
  if (!m.run.paths.empty()) m.apply_paths(m.run.paths);
  m.stats.logs_ms = ms_since(t_logs);
  m.stats.total_ms = ms_since(t0);
  return true;
}

const std::string& ViewModel::capture_path() const {
  return impl_->opts.capture;
}
const LoadOptions& ViewModel::options() const {
  return impl_->opts;
}
const LoadStats& ViewModel::stats() const {
  return impl_->stats;
}
const std::vector<std::string>& ViewModel::warnings() const {
  return impl_->warnings;
}
const std::vector<FrameInfo>& ViewModel::frames() const {
  return impl_->frames;
}
const std::vector<Flow>& ViewModel::flows() const {
  return impl_->flows;
}
const std::vector<Violation>& ViewModel::violations() const {
  return impl_->violations;
}
const RunDir& ViewModel::run() const {
  return impl_->run;
}
const std::vector<PathEntry>& ViewModel::paths() const {
  return impl_->paths;
}

const PathEntry* ViewModel::path_of(uint32_t frame) const {
  const Impl& m = *impl_;
  if (m.paths.empty() || frame >= m.frames.size()) return nullptr;
  const FrameInfo& fr = m.frames[frame];
  if (fr.kind != MarkKind::kFirstTx && fr.kind != MarkKind::kRetransmit &&
      fr.kind != MarkKind::kTrimmed && fr.kind != MarkKind::kProbe)
    return nullptr;
  wire::DecodedFrame d;
  if (!decode(frame, d) || !d.has_inner_ip6 || d.l3 != 6) return nullptr;
  // SRv6: the outer destination names the path (its uSID list).
  const std::string da = wire::format_ipv6(d.ip6.dst);
  for (const PathEntry& p : m.paths)
    if (p.outer_da == da) return &p;
  return nullptr;
}

EvidenceFocus ViewModel::evidence_focus(const Violation& v, int evidence) const {
  const Impl& m = *impl_;
  EvidenceFocus out;
  std::vector<const Evidence*> evs;
  for (size_t e = 0; e < v.evidence.size(); ++e)
    if (evidence < 0 || static_cast<size_t>(evidence) == e) evs.push_back(&v.evidence[e]);
  for (const Evidence* e : evs) {
    if (e->frame == kNone) continue;
    out.frames.push_back(e->frame);
    if (out.flow == kNone) out.flow = m.frames[e->frame].flow;
  }
  if (out.flow == kNone) out.flow = busiest_flow();
  if (out.flow == kNone) return out;
  const Flow& f = m.flows[out.flow];
  const auto add_lane = [&](uint32_t l) {
    if (l != kNone && std::find(out.lanes.begin(), out.lanes.end(), l) == out.lanes.end())
      out.lanes.push_back(l);
  };
  const auto add_frame = [&](uint32_t i) {
    if (std::find(out.frames.begin(), out.frames.end(), i) == out.frames.end())
      out.frames.push_back(i);
  };
  for (const Evidence* e : evs) {
    std::vector<uint32_t> lanes;
    if (e->wev) {
      lanes.push_back(f.lane_of(*e->wev));
    } else if (e->plane != 0) {
      for (uint32_t l = 0; l < f.lanes.size(); ++l)
        if (f.lanes[l].plane == e->plane && !f.lanes[l].control) lanes.push_back(l);
    } else if (e->frame != kNone && m.frames[e->frame].flow == out.flow) {
      lanes.push_back(m.frames[e->frame].lane);
    }
    for (uint32_t l : lanes) add_lane(l);
    if (!e->from_ns) continue;
    out.intervals.emplace_back(*e->from_ns, e->ts_ns);
    // The frames that bound the gap, on the lanes it is about: on the plane's endpoint lane
    // (a plane-wide finding is about endpoint operations when the plane has them), the request
    // nearest its start and the next request in the same direction; on an EV's lane, the frame
    // nearest the start and the first at or after its end. Times are the capture point's, so
    // "nearest" rather than "at or before".
    uint32_t focus = kNone;
    if (e->wev)
      focus = f.lane_of(*e->wev);
    else if (e->plane != 0)
      focus = f.endpoint_lane(e->plane);
    if (focus == kNone) continue;
    const Lane& lane = f.lanes[focus];
    const bool ops = lane.endpoint;
    const auto usable = [&](uint32_t i) {
      return !ops || (m.frames[i].flags & kFlagEndpointResponse) == 0;
    };
    uint32_t start = kNone;
    uint64_t best = UINT64_MAX;
    for (uint32_t i : lane.frames) {
      if (!usable(i)) continue;
      const uint64_t t = m.frames[i].ts_ns;
      const uint64_t dist = t > *e->from_ns ? t - *e->from_ns : *e->from_ns - t;
      if (t > e->ts_ns && start != kNone) break;
      if (dist < best) {
        best = dist;
        start = i;
      }
    }
    if (start == kNone) continue;
    add_frame(start);
    const uint16_t dir = m.frames[start].flags & kFlagFromResponder;
    for (uint32_t i : lane.frames) {
      const FrameInfo& c = m.frames[i];
      if (c.ts_ns <= m.frames[start].ts_ns || !usable(i)) continue;
      if (ops ? (c.flags & kFlagFromResponder) == dir : c.ts_ns >= e->ts_ns) {
        add_frame(i);
        break;
      }
    }
  }
  return out;
}

uint64_t ViewModel::first_ns() const {
  return impl_->first_ns;
}
uint64_t ViewModel::last_ns() const {
  return impl_->last_ns;
}
bool ViewModel::is_pcapng() const {
  return impl_->pcapng;
}

wire::Bytes ViewModel::frame_bytes(uint32_t frame) const {
  if (frame >= impl_->frames.size()) return {};
  const FrameInfo& f = impl_->frames[frame];
  return wire::Bytes(impl_->base + f.offset, f.caplen);
}

uint32_t ViewModel::frame_orig_len(uint32_t frame) const {
  if (frame >= impl_->frames.size()) return 0;
  if (frame < impl_->frame_orig_len.size()) return impl_->frame_orig_len[frame];
  return impl_->frames[frame].caplen;
}

bool ViewModel::decode(uint32_t frame, wire::DecodedFrame& out) const {
  if (frame >= impl_->frames.size()) return false;
  wire::DecodeOptions o;
  o.link = (impl_->frames[frame].flags & kFlagRawIp) ? wire::LinkType::kRawIp
                                                     : wire::LinkType::kEthernet;
  o.verify_icrc = true;
  return wire::decode_frame(frame_bytes(frame), out, o, *impl_->wire_profile);
}

std::string ViewModel::field_tree(uint32_t frame) const {
  wire::DecodedFrame d;
  if (frame >= impl_->frames.size()) return {};
  decode(frame, d);
  std::string s;
  wire::append_field_tree(s, d);
  return s;
}

std::string ViewModel::summary(uint32_t frame) const {
  wire::DecodedFrame d;
  if (frame >= impl_->frames.size()) return {};
  decode(frame, d);
  std::string s;
  wire::append_summary(s, d);
  return s;
}

std::string ViewModel::describe(uint32_t frame) const {
  const Impl& m = *impl_;
  if (frame >= m.frames.size()) return {};
  const FrameInfo& fr = m.frames[frame];
  std::string s = "frame " + std::to_string(frame + 1) + " at +" +
                  format_time_ns(fr.ts_ns - m.first_ns) + ", " + std::to_string(fr.caplen) +
                  " bytes captured\n";
  s += "kind: " + std::string(mark_kind_label(fr.kind));
  if (fr.kind == MarkKind::kRetransmit)
    s += (fr.flags & kFlagRtxBit) ? " (BTH.RTX=1)" : " (PSN seen before, RTX=0)";
  if (fr.kind == MarkKind::kNack) {
    const std::string_view n = wire::nack_code_name(fr.code);
    s += " code " + (n.empty() ? std::to_string(fr.code) : std::string(n));
  }
  if (fr.flags & kFlagProbeReply) s += " (answers probe " + std::to_string(fr.aux) + ")";
  if (fr.kind == MarkKind::kEndpointOp) {
    s += fr.code == static_cast<uint8_t>(wire::EndpointOp::kEvProbe) ? ": EV probe"
         : fr.code == static_cast<uint8_t>(wire::EndpointOp::kPortStatusUpdate)
             ? ": port status"
             : ": op " + std::to_string(fr.code);
    s += (fr.flags & kFlagEndpointResponse) ? " response" : " request";
    if (fr.flow != kNone)
      s += (fr.flags & kFlagFromResponder) ? " (responder -> requester)"
                                           : " (requester -> responder)";
    s += ", EV " + format_wev(fr.wev);
  }
  if (fr.flags & kFlagCe) s += ", ECN CE";
  s += "\n";
  if (fr.flags & kFlagDecodeError) s += "decode error (see the field tree)\n";
  if (fr.flow == kNone) return s;
  const Flow& f = m.flows[fr.flow];
  // What became of the frame comes right after its kind (the packet pane's first lines): a
  // first transmission trimmed or dropped after the capture point reads as such at once.
  if (fr.flags & kFlagTrimmedLater) s += "fate: trimmed after the capture point\n";
  if (fr.flags & kFlagDroppedLater) s += "fate: dropped after the capture point\n";
  if (fr.kind == MarkKind::kFirstTx || fr.kind == MarkKind::kRetransmit)
    s += (fr.flags & kFlagDelivered) ? "counted as goodput\n" : "not counted as goodput\n";
  for (const ExtMark& e : f.ext)
    if (e.frame == frame)
      s += "log: " + e.text + " at +" + format_time_ns(e.ts_ns - m.first_ns) + "\n";
  for (const auto& [i, text] : m.notes_on_frames)
    if (i == frame) s += "log: " + text + "\n";
  s += "flow: " + f.label() + "\n";
  if (fr.lane != kNone) {
    const Lane& l = f.lanes[fr.lane];
    s += "lane: " + l.label();
    if (l.plane) s += ", plane " + std::to_string(l.plane) + " (from " + l.plane_source + ")";
    s += "\n";
  }
  if (const PathEntry* p = path_of(frame)) s += "path: " + p->text() + "\n";
  if (fr.kind != MarkKind::kProbe && fr.kind != MarkKind::kEndpointOp) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "PSN 0x%06x (relative %+d)\n", fr.psn, fr.rel_psn);
    s += buf;
  }
  if (fr.kind == MarkKind::kRetransmit && fr.flow < m.rtx_events.size()) {
    const RtxEvent* best = nullptr;
    for (const RtxEvent& r : m.rtx_events[fr.flow]) {
      if (r.psn != fr.psn || r.ts_ns > fr.ts_ns) continue;
      if (!best || r.ts_ns > best->ts_ns) best = &r;
    }
    if (best)
      s += "engine: retransmit cause " + best->cause + ", attempt " +
           std::to_string(best->attempt) + ", EV " + format_wev(best->wev) + "\n";
  }
  if (fr.lane != kNone) {
    for (const RttSample& r : f.lanes[fr.lane].rtt)
      if (r.frame == frame) s += "RTT at the capture point: " + format_time_ns(r.rtt_ns) + "\n";
  }
  return s;
}

uint32_t ViewModel::busiest_flow() const {
  uint32_t best = kNone;
  size_t n = 0;
  for (uint32_t i = 0; i < impl_->flows.size(); ++i) {
    if (best == kNone || impl_->flows[i].frames.size() > n) {
      best = i;
      n = impl_->flows[i].frames.size();
    }
  }
  return best;
}

uint32_t ViewModel::find_flow(std::string_view spec) const {
  const auto& flows = impl_->flows;
  if (spec.empty()) return busiest_flow();
  if (spec[0] == '#') {
    const std::string n(spec.substr(1));
    char* end = nullptr;
    const unsigned long i = std::strtoul(n.c_str(), &end, 10);
    return (end && *end == 0 && !n.empty() && i < flows.size()) ? static_cast<uint32_t>(i) : kNone;
  }
  const std::string n(spec);
  char* end = nullptr;
  const unsigned long q = std::strtoul(n.c_str(), &end, 0);
  if (!end || *end != 0) return kNone;
  for (uint32_t i = 0; i < flows.size(); ++i)
    if (flows[i].responder_qpn == q) return i;
  for (uint32_t i = 0; i < flows.size(); ++i)
    if (flows[i].requester_qpn && *flows[i].requester_qpn == q) return i;
  return kNone;
}

uint32_t ViewModel::frame_near(uint64_t ts_ns) const {
  const auto& fr = impl_->frames;
  if (fr.empty()) return kNone;
  // Frames are in capture order, which is time order for all but merged captures; a binary
  // search is right for the first and close for the second.
  size_t lo = 0, hi = fr.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (fr[mid].ts_ns < ts_ns)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == fr.size()) return static_cast<uint32_t>(fr.size() - 1);
  if (lo > 0 && ts_ns - fr[lo - 1].ts_ns <= fr[lo].ts_ns - ts_ns)
    return static_cast<uint32_t>(lo - 1);
  return static_cast<uint32_t>(lo);
}

size_t ViewModel::lower_bound(const std::vector<uint32_t>& list, uint64_t ts_ns) const {
  const auto& fr = impl_->frames;
  return static_cast<size_t>(
      std::lower_bound(list.begin(), list.end(), ts_ns,
                       [&](uint32_t i, uint64_t t) { return fr[i].ts_ns < t; }) -
      list.begin());
}

namespace {
uint64_t cum_at(const std::vector<uint64_t>& ts, const std::vector<uint64_t>& cum, uint64_t t) {
  // Delivered bytes with timestamp <= t.
  const auto it = std::upper_bound(ts.begin(), ts.end(), t);
  return it == ts.begin() ? 0 : cum[static_cast<size_t>(it - ts.begin()) - 1];
}
}  // namespace

double ViewModel::goodput_bps(const Flow& flow, uint32_t lane, uint64_t t_ns,
                              uint64_t window_ns) const {
  if (window_ns == 0) return 0;
  const std::vector<uint64_t>* ts = &flow.deliv_ts;
  const std::vector<uint64_t>* cum = &flow.deliv_cum;
  if (lane != kNone) {
    if (lane >= flow.lanes.size()) return 0;
    ts = &flow.lanes[lane].deliv_ts;
    cum = &flow.lanes[lane].deliv_cum;
  }
  const uint64_t from = t_ns >= window_ns ? t_ns - window_ns : 0;
  const uint64_t bytes = cum_at(*ts, *cum, t_ns) - cum_at(*ts, *cum, from);
  return static_cast<double>(bytes) * 8.0 * 1e9 / static_cast<double>(window_ns);
}

SelectionStats ViewModel::selection_stats(uint32_t flow_index, uint64_t from_ns, uint64_t to_ns,
                                          const Filter& filter) const {
  SelectionStats st;
  st.from_ns = from_ns;
  st.to_ns = to_ns;
  if (flow_index >= impl_->flows.size() || to_ns < from_ns) return st;
  const Flow& f = impl_->flows[flow_index];
  const auto& fr = impl_->frames;
  std::map<uint8_t, uint64_t> per_plane;
  std::vector<uint8_t> lane_used(f.lanes.size(), 0);
  for (size_t p = lower_bound(f.frames, from_ns); p < f.frames.size(); ++p) {
    const uint32_t i = f.frames[p];
    const FrameInfo& x = fr[i];
    if (x.ts_ns > to_ns) break;
    // Only the lane filter: kinds and opcode change what is drawn, not what happened.
    if (x.lane != kNone && !filter.lane_visible(f.lanes[x.lane])) continue;
    ++st.frames;
    ++st.counts[static_cast<size_t>(x.kind)];
    const bool data = x.kind == MarkKind::kFirstTx || x.kind == MarkKind::kRetransmit;
    if (data) {
      st.data_bytes += x.payload;
      ++per_plane[x.plane];
      if (x.lane != kNone && !f.lanes[x.lane].control) lane_used[x.lane] = 1;
    }
    if (x.flags & kFlagDelivered) st.delivered_bytes += x.payload;
  }
  for (uint32_t l = 0; l < f.lanes.size(); ++l) {
    const Lane& lane = f.lanes[l];
    if (!filter.lane_visible(lane)) continue;
    for (uint32_t e : lane.ext) {
      const ExtMark& m = f.ext[e];
      if (m.ts_ns < from_ns || m.ts_ns > to_ns) continue;
      ++st.counts[static_cast<size_t>(m.kind)];
    }
    const auto it = std::lower_bound(lane.rtt.begin(), lane.rtt.end(), from_ns,
                                     [](const RttSample& r, uint64_t t) { return r.ts_ns < t; });
    for (auto r = it; r != lane.rtt.end() && r->ts_ns <= to_ns; ++r) {
      const double v = static_cast<double>(r->rtt_ns);
      if (st.rtt_samples == 0 || v < st.rtt_min_ns) st.rtt_min_ns = v;
      if (st.rtt_samples == 0 || v > st.rtt_max_ns) st.rtt_max_ns = v;
      st.rtt_avg_ns += v;
      ++st.rtt_samples;
    }
  }
  if (st.rtt_samples) st.rtt_avg_ns /= static_cast<double>(st.rtt_samples);
  for (uint8_t u : lane_used) st.lanes_used += u;
  for (const auto& [plane, n] : per_plane) st.data_per_plane.emplace_back(plane, n);
  const uint64_t span = to_ns - from_ns;
  st.goodput_bps =
      span ? static_cast<double>(st.delivered_bytes) * 8e9 / static_cast<double>(span) : 0;
  return st;
}

}  // namespace mrc::view
