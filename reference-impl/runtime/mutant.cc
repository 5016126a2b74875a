// Mutant modes (TEST ONLY): frame rewrites on the runtime's transmit and receive paths, each
// breaking one rule of the conformance catalogue. Every rewrite goes through mrc::wire (decode,
// change one field, encode), so apart from the rule it breaks the frame stays well formed and
// its ICRC verifies (except for the wrong-ICRC mutant). wrong-port and ignore-ecn also change
// the port a frame leaves on.
#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "reference-impl/runtime/runtime.h"

namespace mrc::runtime {
namespace {

constexpr MutantInfo kTable[] = {
    {Mutant::kWrongIcrc, "wrong-icrc", "MRC-FRM-001",
     "every 50th new data packet leaves with its ICRC inverted", ""},
    {Mutant::kReadOpcode, "read-opcode", "MRC-FRM-004",
     "every 500th data packet is followed by an IBTA RC READ request on the same QP", ""},
    {Mutant::kRtxWithoutBit, "rtx-without-bit", "MRC-REQ-004",
     "retransmitted data packets leave with BTH.RTX = 0", "retransmissions (loss on the path)"},
    {Mutant::kWrongEvEcho, "wrong-ev-echo", "MRC-RSP-004",
     "SACKs echo the trigger's entropy XOR 0x5a5a", "", true},
    {Mutant::kRegressCack, "regress-cack", "MRC-RSP-002",
     "every 8th SACK carries cack_psn 16 PSNs below the highest one sent", "", true},
    {Mutant::kExceedMpr, "exceed-mpr", "MRC-REQ-008",
     "every 500th data packet is also sent with its PSN 65536 ahead (beyond any MPR window)", ""},
    {Mutant::kExceedWimm, "exceed-wimm", "MRC-REQ-009",
     "the requester's max_wimm is 4x the responder's max_wimm_dest", "--imm"},
    {Mutant::kSkipTrimNack, "skip-trim-nack", "MRC-RSP-013",
     "NACKs TRIMMED / TRIMMED_LASTHOP are dropped instead of sent", "trimmed packets (injector)",
     true},
    {Mutant::kIgnoreEcn, "ignore-ecn", "MRC-EV-008",
     "after a SACK M=01 / NACK TRIMMED on EV e, new data keeps going on e (its port and path) "
     "until 2 have left more than 110 us after the last echo on e (at most 2 ms, 12 packets)",
     "CE marks on the path; exact with one QP"},
    {Mutant::kReuseRetiredEv, "reuse-retired-ev", "MRC-EV-009",
     "the requester never retires an EV: its floor of GOOD EVs is every EV, so loss, timeout and "
     "SACK M=10 leave the EV in the rotation, unprobed",
     "untrimmed loss on some EV's path"},
    {Mutant::kControlDscpData, "control-dscp-data", "MRC-REQ-007",
     "data packets leave with DSCP CONTROL", ""},
    {Mutant::kWrongPort, "wrong-port", "MRC-EV-005",
     "data packets leave on the next port instead of their EV's port", "two or more planes"},
    {Mutant::kAcceptBadIcrc, "accept-bad-icrc", "MRC-FRM-001",
     "received packets with a bad ICRC are repaired and taken as good", "a bad ICRC (script)",
     true},
    {Mutant::kAcceptForeignOpcode, "accept-foreign-opcode", "MRC-FRM-004",
     "received RC WRITE / READ requests are taken as MRC WRITE_ONLY", "RC opcodes (script)", true},
    {Mutant::kIgnoreAckReq, "ignore-ack-req", "MRC-RSP-009",
     "received data packets have BTH.A cleared, so A=1 triggers no SACK", "", true},
    {Mutant::kNackWrongPsn, "nack-wrong-psn", "MRC-RSP-012",
     "NACKs carry nack_psn one above the PSN they refer to", "NACKs", true},
    {Mutant::kWrongNackCode, "wrong-nack-code", "MRC-RSP-013",
     "NACK codes swapped: TRIMMED <-> TRIMMED_LASTHOP, PSN_OOR_WINDOW -> NO_PKT_BUFFER", "NACKs",
     true},
    {Mutant::kSackBitmapExtra, "sack-bitmap-extra", "MRC-RSP-003",
     "SACK bitmaps also claim the last PSN of their 64-PSN window", "", true},
    {Mutant::kProbeIdOff, "probe-id-off", "MRC-PRB-002", "probe SACKs (PR=1) answer probe_id + 1",
     "reliability probes", true},
    {Mutant::kEpWrongEntropy, "ep-wrong-entropy", "MRC-PRB-008",
     "endpoint responses echo the request's WEV XOR 0x5a5a", "endpoint requests", true},
    {Mutant::kAckWrongSyndrome, "ack-wrong-syndrome", "MRC-RSP-010",
     "transport ACKs carry AETH syndrome 0x00 and NAKs 0x1F", "", true},
    {Mutant::kCtrlDscpData, "ctrl-dscp-data", "MRC-RSP-011",
     "SACKs, NACKs and transport ACKs leave with DSCP TRIMMABLE", "", true},
    {Mutant::kTsEchoOff, "ts-echo-off", "MRC-CC-002",
     "SACK / NACK ts_echo 0x8000 ticks (4.2 ms) off (RTT and delay read wrong)", "", true},
    {Mutant::kSparseReverseProbe, "sparse-reverse-probe", "MRC-PRB-007",
     "the responder's EV probes toward its requester: at most one per port every 100 ms, the "
     "rest dropped (the limit is 10 ms, or 4 x the probe round trip)",
     "data for longer than 100 ms", true},
    {Mutant::kIgnoreUnexpEvent, "ignore-unexp-event", "MRC-REQ-012",
     "the requester reads NACK UNEXP_EVENT as NO_RESOURCE and retransmits instead of stopping",
     "NACK UNEXP_EVENT (script)"},
    {Mutant::kIgnoreSackM, "ignore-sack-m", "MRC-EV-009",
     "the requester reads every SACK's M as 00: SKIP_ONCE / ALWAYS_SKIP move no EV",
     "SACK M=01/10 (script)"},
    {Mutant::kIgnoreProbeAnswer, "ignore-probe-answer", "MRC-EV-009",
     "the requester drops probe SACKs (PR=1): a retired EV never comes back",
     "probe answers (script)"},
    {Mutant::kIgnorePortStatus, "ignore-port-status", "MRC-EV-012",
     "the requester reads PORT_STATUS_UPDATE requests as 'every port up'",
     "PORT_STATUS_UPDATE (script)"},
};

constexpr MutantInfo kNoneInfo{Mutant::kNone, "none", "", "no mutation", ""};

bool is_new_data(const wire::DecodedFrame& f) {
  return f.roce && f.op != nullptr && f.op->kind == wire::PacketKind::kMrcData && !f.trimmed;
}

}  // namespace

std::span<const MutantInfo> mutant_table() {
  return kTable;
}

std::optional<Mutant> parse_mutant(std::string_view name) {
  if (name == "none") return Mutant::kNone;
  for (const MutantInfo& m : kTable)
    if (m.name == name) return m.mutant;
  return std::nullopt;
}

const MutantInfo& mutant_info(Mutant m) {
  for (const MutantInfo& i : kTable)
    if (i.mutant == m) return i;
  return kNoneInfo;
}

Mutator::Mutator(Mutant m, wire::EvFormat format, const wire::WireProfile& profile, uint8_t nports)
    : mutant_(m), format_(format), profile_(&profile), nports_(nports), now_ns_([] {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now().time_since_epoch())
                                         .count());
      }) {
  if (m == Mutant::kWrongPort && nports < 2)
    throw std::invalid_argument("mutant wrong-port needs two or more planes");
}

void Mutator::on_event(const engine::Event& e) {
  if (mutant_ != Mutant::kIgnoreEcn || e.kind != engine::EventKind::kEvState) return;
  const engine::EventField* to = e.find("to");
  const engine::EventField* wev = e.find("wev");
  if (to == nullptr || wev == nullptr) return;
  const auto w = static_cast<uint32_t>(wev->u);
  // The bug ignores the ECN echo, not loss: a retired EV is not kept, nor pinned while retired
  // (an echo for a packet still in flight may name it), which is MRC-EV-009.
  if (to->s == engine::ev_state_name(engine::EvState::kAssumedBad)) {
    retired_evs_.insert(w);
    if (pin_.wev == w) pin_.on = false;
  } else {
    retired_evs_.erase(w);
  }
}

bool Mutator::reencode(engine::TxPacket& pkt, const wire::DecodedFrame& spec) {
  wire::EncodeOptions opts;
  opts.udp_checksum =
      spec.udp.checksum != 0 ? wire::UdpChecksumPolicy::kCompute : wire::UdpChecksumPolicy::kZero;
  scratch_.resize(wire::encoded_size(spec, opts, *profile_));
  const size_t n = wire::encode_frame(spec, {scratch_.data(), scratch_.size()}, opts, *profile_);
  if (n == 0) return false;
  scratch_.resize(n);
  pkt.frame.swap(scratch_);
  ++changed_;
  return true;
}

void Mutator::learn_ev(const engine::TxPacket& pkt, const wire::DecodedFrame& f) {
  SeenEv& seen = seen_evs_[wire::wev_of(f, format_, profile_->ev_stripe())];
  seen.port = pkt.port;
  if (format_ == wire::EvFormat::kSrv6 && f.l3 == 6 && f.has_inner_ip6) {
    const size_t from = size_t{f.off_l3} + 8;  // outer SA, DA, then the SRH if any
    seen.path.assign(pkt.frame.begin() + static_cast<ptrdiff_t>(from),
                     pkt.frame.begin() + f.off_inner);
  }
}

bool Mutator::other_ev_clean(uint32_t wev) const {
  return std::any_of(seen_evs_.begin(), seen_evs_.end(),
                     [&](const auto& e) { return e.first != wev && !e.second.marked; });
}

bool Mutator::move_to_ev(engine::TxPacket& pkt, wire::DecodedFrame& f, uint32_t wev) {
  if (wire::wev_of(f, format_, profile_->ev_stripe()) == wev) return false;
  auto it = seen_evs_.find(wev);
  if (it == seen_evs_.end()) return false;
  if (format_ == wire::EvFormat::kSrv6) {
    // An SRv6 EV is its path: the outer SA (its port's address), DA and SRH of an earlier packet
    // on it. The ICRC covers the inner header only and the UDP checksum the final destination,
    // so neither changes.
    if (f.l3 != 6 || !f.has_inner_ip6) return false;
    const size_t from = size_t{f.off_l3} + 8;
    if (it->second.path.empty() || f.off_inner - from != it->second.path.size()) return false;
    std::copy(it->second.path.begin(), it->second.path.end(),
              pkt.frame.begin() + static_cast<ptrdiff_t>(from));
  }
  // The EV leaves on its own port (else MRC-EV-005 fires as well); the runtime writes the
  // Ethernet addresses of the port.
  pkt.port = it->second.port;
  return wire::restamp_wev({pkt.frame.data(), pkt.frame.size()}, f, format_, profile_->ev_stripe(),
                           wev);
}

bool Mutator::on_tx(engine::TxPacket& pkt, std::vector<engine::TxPacket>& extra) {
  // These act in the engine's configuration (endpoint_main.cc), not on frames.
  if (mutant_ == Mutant::kNone || mutant_ == Mutant::kExceedWimm ||
      mutant_ == Mutant::kReuseRetiredEv)
    return true;
  wire::DecodedFrame f;
  if (!wire::decode_frame(wire::as_bytes(pkt.frame), f, {}, *profile_) || !f.roce ||
      f.op == nullptr)
    return true;
  const wire::PacketKind kind = f.op->kind;
  const bool data = is_new_data(f);
  if (data) ++data_seen_;
  if (kind == wire::PacketKind::kMrcSack) ++sacks_seen_;

  switch (mutant_) {
    case Mutant::kWrongIcrc:
      if (data && !f.bth.rtx && f.has_icrc && data_seen_ % 50 == 0) {
        const size_t at = pkt.frame.size() - f.trailer.size() - wire::kIcrcBytes;
        for (size_t k = 0; k < wire::kIcrcBytes; ++k) pkt.frame[at + k] ^= std::byte{0xFF};
        ++changed_;
      }
      return true;
    case Mutant::kReadOpcode:
      if (data && data_seen_ % 500 == 0) {
        wire::DecodedFrame s = f;
        s.bth.opcode = static_cast<uint8_t>(wire::Opcode::kRcReadRequest);
        s.op = profile_->opcode_info(s.bth.opcode);
        if (s.op == nullptr) return true;
        s.headers = s.op->headers;
        s.bth.rtx = false;
        s.bth.ts = false;
        s.bth.ack_req = true;
        s.bth.pad_count = 0;
        s.reth.dma_len = static_cast<uint32_t>(f.payload.size());
        s.payload = {};
        s.pad_data = {};
        s.pad_bytes = 0;
        engine::TxPacket add;
        add.port = pkt.port;
        add.frame = pkt.frame;
        if (reencode(add, s)) {
          --changed_;
          ++added_;
          extra.push_back(std::move(add));
        }
      }
      return true;
    case Mutant::kRtxWithoutBit:
      if (data && f.bth.rtx) {
        wire::DecodedFrame s = f;
        s.bth.rtx = false;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kWrongEvEcho:
      if (kind == wire::PacketKind::kMrcSack) {
        wire::DecodedFrame s = f;
        s.seth.entropy ^= 0x5A5Au;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kRegressCack: {
      if (kind != wire::PacketKind::kMrcSack) return true;
      auto it = std::find_if(max_cack_.begin(), max_cack_.end(),
                             [&](const auto& c) { return c.first == f.bth.dest_qp; });
      if (it == max_cack_.end()) {
        max_cack_.push_back({f.bth.dest_qp, f.seth.cack_psn});
        return true;
      }
      if (wire::psn_lt(it->second, f.seth.cack_psn)) it->second = f.seth.cack_psn;
      if (sacks_seen_ % 8 == 0 && !f.seth.pr) {
        // Only the cumulative ACK goes back: the trigger (cack + ack_psn_offset) and the bitmap
        // (cack + sack_offset) keep naming the same PSNs, so no other rule is broken with it.
        wire::DecodedFrame s = f;
        s.seth.cack_psn = wire::psn_add(it->second, -16);
        s.bth.psn = s.seth.cack_psn;
        const int64_t back = static_cast<int64_t>(wire::psn_diff(f.seth.cack_psn, s.seth.cack_psn));
        const int64_t trig = f.seth.ack_psn_offset + back;
        const int64_t base = int64_t{f.seth.sack_offset} + back;
        if (trig <= INT16_MAX && base <= INT16_MAX) {
          s.seth.ack_psn_offset = static_cast<int16_t>(trig);
          s.seth.sack_offset = static_cast<decltype(s.seth.sack_offset)>(base);
          reencode(pkt, s);
        }
      }
      return true;
    }
    case Mutant::kExceedMpr:
      // A copy of a first transmission only, so that its DSCP stays right (MRC-REQ-007).
      if (data && !f.bth.rtx && data_seen_ % 500 == 0) {
        wire::DecodedFrame s = f;
        s.bth.psn = wire::psn_add(f.bth.psn, 65536);
        s.bth.rtx = false;
        engine::TxPacket add;
        add.port = pkt.port;
        add.frame = pkt.frame;
        if (reencode(add, s)) {
          --changed_;
          ++added_;
          extra.push_back(std::move(add));
        }
      }
      return true;
    case Mutant::kSkipTrimNack:
      if (kind == wire::PacketKind::kMrcNack &&
          (f.neth.nack_code == static_cast<uint8_t>(wire::NackCode::kTrimmed) ||
           f.neth.nack_code == static_cast<uint8_t>(wire::NackCode::kTrimmedLastHop))) {
        ++dropped_;
        return false;
      }
      return true;
    case Mutant::kIgnoreEcn: {
      if (!data || f.bth.rtx) return true;
      const uint64_t now = tx_stamp_ns_.value_or(now_ns_());
      const uint64_t since = pin_.on && now > pin_.echo_ns ? now - pin_.echo_ns : 0;
      // Once every other EV is marked too, keeping e breaks no rule: the pin ends.
      if (pin_.on && (now > pin_.start_ns + kEcnPinMaxNs || !other_ev_clean(pin_.wev)))
        pin_.on = false;
      if (pin_.on) {
        // Every packet from the echo on, so that no other EV gets a turn in between.
        if (since > kEcnPinReactionNs && ++pin_.late >= kEcnPinPackets) pin_.on = false;
        // A longer run on one EV would break MRC-EV-001 too: give the episode up.
        if (++pin_.moved >= kEcnPinRunMax) pin_.on = false;
        if (move_to_ev(pkt, f, pin_.wev)) ++changed_;
      } else {
        learn_ev(pkt, f);
        ++unpinned_;
        // Only the engine's own data on a marked EV shows it took the EV back; data the pin
        // moved there does not (the engine may still hold it in SKIP, with a run on its other
        // EVs that MRC-EV-001 would then read as no spraying).
        auto it = seen_evs_.find(wire::wev_of(f, format_, profile_->ev_stripe()));
        if (it != seen_evs_.end() && it->second.marked &&
            now > it->second.marked_ns + kEcnPinReactionNs)
          it->second.marked = false;
      }
      return true;
    }
    case Mutant::kControlDscpData:
      if (data) {
        if (wire::rewrite_dscp_ecn({pkt.frame.data(), pkt.frame.size()}, f,
                                   profile_->dscp().control, std::nullopt))
          ++changed_;
      }
      return true;
    case Mutant::kWrongPort:
      if (data) {
        pkt.port = static_cast<uint8_t>(pkt.port % nports_ + 1);
        ++changed_;
      }
      return true;
    case Mutant::kNackWrongPsn:
      if (kind == wire::PacketKind::kMrcNack) {
        wire::DecodedFrame s = f;
        s.neth.nack_psn = wire::psn_add(f.neth.nack_psn, 1);
        reencode(pkt, s);
      }
      return true;
    case Mutant::kWrongNackCode:
      if (kind == wire::PacketKind::kMrcNack) {
        wire::DecodedFrame s = f;
        const auto code = static_cast<wire::NackCode>(f.neth.nack_code);
        if (code == wire::NackCode::kTrimmed)
          s.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kTrimmedLastHop);
        else if (code == wire::NackCode::kTrimmedLastHop)
          s.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kTrimmed);
        else if (code == wire::NackCode::kPsnOorWindow)
          s.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kNoPktBuffer);
        else
          return true;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kSackBitmapExtra:
      if (kind == wire::PacketKind::kMrcSack && !f.seth.pr) {
        wire::DecodedFrame s = f;
        s.seth.sack_bitmap |= uint64_t{1} << 63;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kProbeIdOff:
      if (kind == wire::PacketKind::kMrcSack && f.seth.pr) {
        wire::DecodedFrame s = f;
        s.seth.ack_psn_offset = static_cast<int16_t>(f.seth.ack_psn_offset + 1);
        reencode(pkt, s);
      }
      return true;
    case Mutant::kEpWrongEntropy:
      if (kind == wire::PacketKind::kMrcEndpointResponse) {
        wire::DecodedFrame s = f;
        s.eeth.entropy ^= 0x5A5Au;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kAckWrongSyndrome:
      if (kind == wire::PacketKind::kMrcTransportAck) {
        wire::DecodedFrame s = f;
        s.aeth.syndrome = f.aeth.syndrome == 0x1F ? 0x00 : 0x1F;
        reencode(pkt, s);
      }
      return true;
    case Mutant::kCtrlDscpData:
      if (kind == wire::PacketKind::kMrcSack || kind == wire::PacketKind::kMrcNack ||
          kind == wire::PacketKind::kMrcTransportAck) {
        if (wire::rewrite_dscp_ecn({pkt.frame.data(), pkt.frame.size()}, f,
                                   profile_->dscp().trimmable, std::nullopt))
          ++changed_;
      }
      return true;
    case Mutant::kTsEchoOff:
      if (kind == wire::PacketKind::kMrcSack || kind == wire::PacketKind::kMrcNack) {
        wire::DecodedFrame s = f;
        // Half the 16-bit space (4.2 ms): a responder with SVA=1 adds a service time the tester
        // can only bound, so an error of one tick is invisible on real time; this one is not.
        s.cc_state.ts_echo = static_cast<uint16_t>(f.cc_state.ts_echo + 0x8000);
        s.neth.ts_echo = static_cast<uint16_t>(f.neth.ts_echo + 0x8000);
        reencode(pkt, s);
      }
      return true;
    case Mutant::kSparseReverseProbe: {
      // The server is only a responder, so every EV probe it sends is a reverse one (the
      // requester's probes of retired EVs are on the client). The engine sees the dropped
      // requests time out, as on a path that loses them.
      if (kind != wire::PacketKind::kMrcEndpointRequest ||
          f.erth.op != static_cast<uint8_t>(wire::EndpointOp::kEvProbe))
        return true;
      const uint64_t now = tx_stamp_ns_.value_or(now_ns_());
      auto [it, first] = probe_sent_ns_.try_emplace(pkt.port, now);
      if (first || now >= it->second + kSparseProbeGapNs) {
        it->second = now;
        return true;
      }
      ++dropped_;
      return false;
    }
    default:
      return true;
  }
}

std::span<const std::byte> Mutator::rx_rewrite(std::span<const std::byte> frame,
                                               std::vector<std::byte>& scratch) {
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f, {}, *profile_) || !f.roce || f.op == nullptr) return frame;
  wire::DecodedFrame s = f;
  switch (mutant_) {
    case Mutant::kAcceptBadIcrc:
      // Re-encoding writes a fresh ICRC: the bad one is never seen.
      if (!f.has_icrc || wire::verify_icrc(f)) return frame;
      break;
    case Mutant::kAcceptForeignOpcode: {
      const auto op = static_cast<wire::Opcode>(f.bth.opcode);
      if (op != wire::Opcode::kRcWriteOnly && op != wire::Opcode::kRcReadRequest) return frame;
      s.bth.opcode = static_cast<uint8_t>(wire::Opcode::kWriteOnly);
      s.op = profile_->opcode_info(s.bth.opcode);
      if (s.op == nullptr) return frame;
      s.headers = 0;
      s.bth.ts = true;
      s.bth.ack_req = true;
      if (op == wire::Opcode::kRcReadRequest) s.reth.dma_len = 0;
      break;
    }
    case Mutant::kIgnoreAckReq:
      if (f.op->kind != wire::PacketKind::kMrcData || !f.bth.ack_req || f.trimmed) return frame;
      s.bth.ack_req = false;
      break;
    case Mutant::kIgnoreUnexpEvent:
      if (f.op->kind != wire::PacketKind::kMrcNack ||
          f.neth.nack_code != static_cast<uint8_t>(wire::NackCode::kUnexpEvent))
        return frame;
      s.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kNoResource);
      break;
    case Mutant::kIgnoreSackM:
      if (f.op->kind != wire::PacketKind::kMrcSack || f.seth.m == 0 || f.seth.pr) return frame;
      s.seth.m = 0;
      break;
    case Mutant::kIgnoreProbeAnswer:
      if (f.op->kind != wire::PacketKind::kMrcSack || !f.seth.pr) return frame;
      ++dropped_;
      scratch.clear();
      return scratch;  // an empty frame: the engine counts it as malformed and drops it
    case Mutant::kIgnorePortStatus:
      if (f.op->kind != wire::PacketKind::kMrcEndpointRequest ||
          f.erth.op != static_cast<uint8_t>(wire::EndpointOp::kPortStatusUpdate))
        return frame;
      s.erth.port_status_mask = 0xFFFFFFFEu;
      break;
    default:
      return frame;
  }
  wire::EncodeOptions opts;
  opts.udp_checksum =
      f.udp.checksum != 0 ? wire::UdpChecksumPolicy::kCompute : wire::UdpChecksumPolicy::kZero;
  scratch.resize(wire::encoded_size(s, opts, *profile_));
  const size_t n = wire::encode_frame(s, {scratch.data(), scratch.size()}, opts, *profile_);
  if (n == 0) return frame;
  scratch.resize(n);
  ++changed_;
  return scratch;
}

std::span<const std::byte> Mutator::on_rx(std::span<const std::byte> frame,
                                          std::vector<std::byte>& scratch) {
  if (mutant_ == Mutant::kAcceptBadIcrc || mutant_ == Mutant::kAcceptForeignOpcode ||
      mutant_ == Mutant::kIgnoreAckReq || mutant_ == Mutant::kIgnoreUnexpEvent ||
      mutant_ == Mutant::kIgnoreSackM || mutant_ == Mutant::kIgnoreProbeAnswer ||
      mutant_ == Mutant::kIgnorePortStatus)
    return rx_rewrite(frame, scratch);
  if (mutant_ != Mutant::kIgnoreEcn) return frame;
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f, {}, *profile_) || !f.roce || f.op == nullptr) return frame;
  const uint8_t skip_once = static_cast<uint8_t>(wire::SackM::kSkipOnce);
  uint32_t wev = 0;
  if (f.op->kind == wire::PacketKind::kMrcSack && f.seth.m == skip_once) {
    wev = f.seth.entropy;
  } else if (f.op->kind == wire::PacketKind::kMrcNack &&
             (f.neth.m == skip_once ||
              f.neth.nack_code == static_cast<uint8_t>(wire::NackCode::kTrimmed))) {
    wev = f.neth.entropy;
  } else {
    return frame;
  }
  // The engine sees the echo unchanged (its congestion control reacts); the bug is in the EV
  // choice, which keeps the marked EV instead of skipping it.
  // The bug sticks to the first marked EV; a later echo on it restarts the reaction time (as a
  // new SKIP signal does for the checker), echoes on other EVs are ignored while it lasts.
  auto it = seen_evs_.find(wev);
  if (it == seen_evs_.end()) return frame;
  const uint64_t now = rx_stamp_ns_.value_or(now_ns_());
  it->second.marked = true;
  it->second.marked_ns = now;
  if (pin_.on && pin_.wev == wev) {
    pin_.echo_ns = now;
  } else if (!pin_.on && !retired_evs_.count(wev) && other_ev_clean(wev) &&
             unpinned_ >= kEcnPinGap) {
    pin_ = {true, wev, now, now, 0, 0};
    unpinned_ = 0;
  }
  return frame;
}

}  // namespace mrc::runtime
