// Mutant modes (TEST ONLY): frame rewrites on the runtime's transmit and receive paths, each
// breaking one rule of the conformance catalogue. Every rewrite goes through mrc::wire (decode,
// change one field, encode), so apart from the rule it breaks the frame stays well formed and
// its ICRC verifies (except for the wrong-ICRC mutant).
#include <algorithm>
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
     "received SACKs/NACKs with M=01 (ECN echo) are handed to the engine with M=00",
     "CE marks on the path"},
    {Mutant::kReuseRetiredEv, "reuse-retired-ev", "MRC-EV-009",
     "every 2nd data packet on a plane with a retired EV is restamped with that EV",
     "EV retirements (loss on the path); exact with one QP"},
    {Mutant::kControlDscpData, "control-dscp-data", "MRC-REQ-007",
     "data packets leave with DSCP CONTROL", ""},
    {Mutant::kWrongPort, "wrong-port", "MRC-EV-005",
     "data packets leave on the next port instead of their EV's port", "two or more planes"},
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
    : mutant_(m), format_(format), profile_(&profile), nports_(nports) {
  if (m == Mutant::kWrongPort && nports < 2)
    throw std::invalid_argument("mutant wrong-port needs two or more planes");
  if (m == Mutant::kReuseRetiredEv && format == wire::EvFormat::kSrv6)
    throw std::invalid_argument(
        "mutant reuse-retired-ev supports the udp and stev EV formats (an SRv6 EV is a path, "
        "not a stamp)");
}

void Mutator::on_event(const engine::Event& e) {
  if (mutant_ != Mutant::kReuseRetiredEv || e.kind != engine::EventKind::kEvState) return;
  const engine::EventField* to = e.find("to");
  const engine::EventField* wev = e.find("wev");
  const engine::EventField* port = e.find("port");
  if (to == nullptr || wev == nullptr || port == nullptr) return;
  const auto key = std::make_pair(static_cast<uint32_t>(wev->u), static_cast<uint8_t>(port->u));
  auto it = std::find_if(retired_.begin(), retired_.end(),
                         [&](const auto& r) { return r.first == e.qpn && r.second == key; });
  if (to->s == engine::ev_state_name(engine::EvState::kAssumedBad)) {
    if (it == retired_.end()) retired_.push_back({e.qpn, key});
  } else if (to->s == engine::ev_state_name(engine::EvState::kGood) && it != retired_.end()) {
    retired_.erase(it);
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

bool Mutator::on_tx(engine::TxPacket& pkt, std::vector<engine::TxPacket>& extra) {
  if (mutant_ == Mutant::kNone || mutant_ == Mutant::kExceedWimm || mutant_ == Mutant::kIgnoreEcn)
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
      if (sacks_seen_ % 8 == 0) {
        wire::DecodedFrame s = f;
        s.seth.cack_psn = wire::psn_add(it->second, -16);
        s.bth.psn = s.seth.cack_psn;
        reencode(pkt, s);
      }
      return true;
    }
    case Mutant::kExceedMpr:
      if (data && data_seen_ % 500 == 0) {
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
    case Mutant::kReuseRetiredEv: {
      if (!data) return true;
      const uint32_t* wev = nullptr;
      for (const auto& r : retired_) {
        if (r.second.second == pkt.port) wev = &r.second.first;
      }
      if (wev != nullptr && ++port_data_[pkt.port % port_data_.size()] % 2 == 0) {
        if (wire::restamp_wev({pkt.frame.data(), pkt.frame.size()}, f, format_,
                              profile_->ev_stripe(), *wev))
          ++changed_;
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
    default:
      return true;
  }
}

std::span<const std::byte> Mutator::on_rx(std::span<const std::byte> frame,
                                          std::vector<std::byte>& scratch) {
  if (mutant_ != Mutant::kIgnoreEcn) return frame;
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f, {}, *profile_) || !f.roce || f.op == nullptr) return frame;
  const uint8_t skip_once = static_cast<uint8_t>(wire::SackM::kSkipOnce);
  wire::DecodedFrame s = f;
  if (f.op->kind == wire::PacketKind::kMrcSack && f.seth.m == skip_once) {
    s.seth.m = 0;
  } else if (f.op->kind == wire::PacketKind::kMrcNack && f.neth.m == skip_once) {
    s.neth.m = 0;
  } else {
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
  return {scratch.data(), scratch.size()};
}

}  // namespace mrc::runtime
