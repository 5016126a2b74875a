// Stateless per-frame rules (MRC-FRM-*): ICRC, port, opcodes, BTH constants, lengths, header
// stacks, reserved bits, SRv6 framing; and the two-point fabric rules (uSID shift, trimming).
#include <algorithm>

#include "conformance/internal.h"

namespace mrc::check::detail {
namespace {

using wire::DecodeErrorCode;
using wire::MessagePosition;
using wire::PacketKind;

bool is_mrc_opcode(uint8_t op) {
  return (op >= 0xC6 && op <= 0xCB) || op == 0xD1 || op == 0xD8 || op == 0xD9 || op == 0xDC ||
         op == 0xDD || op == 0xDE;
}

// SEND, READ and ATOMIC opcodes, IBTA RC and the same offsets in the MRC range (+0xC0).
bool is_send_read_atomic(uint8_t op) {
  const uint8_t base = op >= 0xC0 ? static_cast<uint8_t>(op - 0xC0) : op;
  if (op >= 0x20 && op < 0xC0) return false;
  return base <= 0x05 || (base >= 0x0C && base <= 0x10) || (base >= 0x12 && base <= 0x14) ||
         base == 0x16 || base == 0x17;
}

std::string opname(const wire::DecodedFrame& f) {
  if (f.op) return std::string(f.op->name) + " (" + hex(f.bth.opcode, 2) + ")";
  return "opcode " + hex(f.bth.opcode, 2);
}

}  // namespace

void Engine::non_roce_rules(const Obs& o, const wire::DecodedFrame& f) {
  if (!f.has_udp || f.off_udp == 0xFFFF) return;
  const size_t start = static_cast<size_t>(f.off_udp) + 8;
  if (wire_profile->is_roce_port(f.udp.dport)) {
    // UDP to the RoCE port without a complete BTH.
    judge(FRM_007);
    if (!o.snapped)
      fail(FRM_007, o,
           "UDP to port " + std::to_string(f.udp.dport) +
               " but no complete BTH: " + f.error.describe());
    return;
  }
  if (start + 12 > f.frame.size()) return;
  const auto* b = reinterpret_cast<const uint8_t*>(f.frame.data()) + start;
  judge(FRM_002);
  if (is_mrc_opcode(b[0]) && b[2] == 0xFF && b[3] == 0xFF) {
    fail(FRM_002, o,
         "UDP datagram to port " + std::to_string(f.udp.dport) + " carries an MRC BTH (opcode " +
             hex(b[0], 2) + "); expected port " + std::to_string(wire_profile->roce_port()));
  }
}

void Engine::frame_rules(const Obs& o, const wire::DecodedFrame& f, bool ok) {
  const uint8_t opc = f.bth.opcode;
  judge(FRM_002);  // a RoCE frame is on the right port by definition

  // Opcodes.
  judge(FRM_003);
  judge(FRM_004);
  if (is_send_read_atomic(opc)) {
    fail(FRM_004, o,
         opname(f) +
             " is a SEND/READ/ATOMIC opcode; MRC carries only WRITE and "
             "WRITE_WITH_IMM");
  } else if (!is_mrc_opcode(opc)) {
    fail(FRM_003, o, opname(f) + " is not an MRC opcode");
  }
  const bool mrc = f.op && f.op->mrc;

  // Decode errors other than the ICRC.
  if (!ok) {
    const auto code = f.error.code;
    if (code == DecodeErrorCode::kBadLength || code == DecodeErrorCode::kBadPad) {
      judge(FRM_006);
      if (!o.snapped) fail(FRM_006, o, f.error.describe());
    } else if (code == DecodeErrorCode::kTruncated) {
      judge(FRM_007);
      if (!o.snapped && !o.trimmed) fail(FRM_007, o, f.error.describe());
    } else if (code == DecodeErrorCode::kBadHeaderLength ||
               code == DecodeErrorCode::kTooManySegments) {
      const RuleIdx r = f.error.layer == wire::Layer::kSrh ? FRM_009 : FRM_006;
      judge(r);
      fail(r, o, f.error.describe());
    }
  } else if (mrc) {
    judge(FRM_006);
    judge(FRM_007);
  }

  // ICRC.
  if (f.icrc_checked && !o.trimmed) {
    judge(FRM_001);
    if (!f.icrc_ok) {
      const uint64_t lo = o.ts > prof.tol.dedup_window_ns ? o.ts - prof.tol.dedup_window_ns : 0;
      const bool excused = std::any_of(corrupt_times.begin(), corrupt_times.end(), [&](uint64_t t) {
        return t >= lo && t <= o.ts + prof.tol.decision_lookahead_ns;
      });
      if (excused) {
        excuse(FRM_001);
      } else {
        auto want = wire::compute_icrc(f);
        fail(FRM_001, o,
             opname(f) + " PSN " + std::to_string(f.bth.psn) + ": ICRC " + hex(f.icrc, 8) +
                 " does not verify" + (want ? " (expected " + hex(*want, 8) + ")" : std::string()));
      }
    }
  }
  if (!mrc) return;

  // BTH constants.
  judge(FRM_005);
  const auto pos = f.op->position;
  const bool last_or_only = pos == MessagePosition::kLast || pos == MessagePosition::kOnly;
  std::string bad;
  if (f.bth.tver != 0) bad += " TVer=" + std::to_string(f.bth.tver);
  if (f.bth.pkey != 0xFFFF) bad += " P_Key=" + hex(f.bth.pkey, 4);
  if (f.bth.mig_req) bad += " MigReq=1";
  if (f.bth.pad_count != 0 && !last_or_only)
    bad += " PadCnt=" + std::to_string(f.bth.pad_count) + " on a non-LAST/ONLY packet";
  if (f.bth.se && !(f.op->has_imm && last_or_only)) bad += " SE=1 on a packet without immediate";
  if (!bad.empty()) fail(FRM_005, o, opname(f) + ":" + bad);

  // Pad alignment of data payloads (not on trimmed copies: their payload is gone).
  if (ok && f.op->kind == PacketKind::kMrcData && !f.trimmed) {
    if ((f.payload.size() + f.pad_bytes) % 4 != 0)
      fail(FRM_006, o,
           opname(f) + ": payload " + std::to_string(f.payload.size()) + " B + pad " +
               std::to_string(f.pad_bytes) + " B is not a multiple of 4");
  }

  if (o.trimmed && f.op->kind == PacketKind::kMrcData) trim_shape(o, f, 0);

  // Reserved bits (warning).
  judge(FRM_008);
  std::string rsv;
  if (f.bth.rsvd_b8_6 || f.bth.rsvd_b8_lo) rsv += " BTH byte 8 reserved bits";
  if (f.has(wire::kHdrTseth) && f.tseth.reserved) rsv += " TSETH reserved";
  if (f.has(wire::kHdrSeth) && (f.seth.byte0 || f.seth.rsvd_b1 || f.seth.cc_flags_rsvd))
    rsv += " SETH reserved";
  if (f.has(wire::kHdrCcState) && f.cc_state.rsvd_bit) rsv += " CC_STATE reserved bit";
  if (f.has(wire::kHdrNeth) &&
      (f.neth.reserved0 || f.neth.reserved12 || f.neth.reserved17 || f.neth.cc_flags_rsvd))
    rsv += " NETH reserved";
  if (f.has(wire::kHdrPeth) && (f.peth.reserved0[0] || f.peth.reserved0[1] || f.peth.reserved0[2] ||
                                f.peth.reserved6 || f.peth.reserved_tsr))
    rsv += " PETH reserved";
  if (f.has(wire::kHdrErth) &&
      (f.erth.reserved0 || f.erth.rsvd_b1 || f.erth.reserved2 || f.erth.reserved8 ||
       f.erth.reserved_tsr || (f.erth.port_status_mask & 1u)))
    rsv += " ERTH reserved";
  if (f.has(wire::kHdrEeth)) {
    bool any = f.eeth.reserved0 || f.eeth.rsvd_b1 || f.eeth.reserved32;
    for (uint8_t b : f.eeth.reserved12) any = any || b;
    if (any) rsv += " EETH reserved";
  }
  if (!rsv.empty()) fail(FRM_008, o, opname(f) + ": non-zero" + rsv);

  // SRv6 framing.
  if (f.has_inner_ip6) {
    judge(FRM_009);
    std::string e;
    if (f.has_srh) {
      if (f.ip6.next_header != wire::kIpProtoRouting)
        e += " outer NH " + std::to_string(f.ip6.next_header) + " (want 43)";
      if (f.srh.next_header != wire::kIpProtoIpv6)
        e += " SRH NH " + std::to_string(f.srh.next_header) + " (want 41)";
      if (f.srh.routing_type != wire::kSrhRoutingType)
        e += " routing type " + std::to_string(f.srh.routing_type);
      if (f.srh.tlvs.empty() && f.srh.hdr_ext_len != 2 * (f.srh.last_entry + 1))
        e += " HdrExtLen " + std::to_string(f.srh.hdr_ext_len) + " != 2*(LastEntry+1)";
      if (f.srh.segments_left > f.srh.last_entry + 1) e += " SegmentsLeft > LastEntry+1";
    } else if (f.ip6.next_header != wire::kIpProtoIpv6) {
      e += " outer NH " + std::to_string(f.ip6.next_header) + " (want 41)";
    }
    if (prof.srv6_locator && !f.has_srh) {
      const auto& loc = *prof.srv6_locator;
      if (!std::equal(loc.begin(), loc.end(), f.ip6.dst.begin()))
        e += " outer DA " + wire::format_ipv6(f.ip6.dst) + " outside the configured locator";
    }
    if (!e.empty()) fail(FRM_009, o, opname(f) + ":" + e);
  }
}

void Engine::trim_shape(const Obs& o, const wire::DecodedFrame& f, uint32_t untrimmed_ib_len) {
  if (f.off_udp == 0xFFFF) return;
  judge(FRM_011);
  const uint32_t ib = static_cast<uint32_t>(f.frame.size() - f.off_udp - 8);
  const size_t min_trim = wire_profile->min_trim_bytes();
  if (ib < min_trim && !o.snapped) {
    fail(FRM_011, o,
         "trimmed packet keeps " + std::to_string(ib) + " B after UDP; at least " +
             std::to_string(min_trim) + " B (BTH+METH+TSETH) must survive");
  } else if (untrimmed_ib_len != 0 && ib >= untrimmed_ib_len) {
    fail(FRM_011, o,
         "trimmed copy is " + std::to_string(ib) + " B after UDP, not shorter than the original (" +
             std::to_string(untrimmed_ib_len) + " B)");
  }
}

void Engine::hop_rules(const Obs& o, const wire::DecodedFrame& f, const DedupEntry& prev,
                       const DedupExt& px) {
  if (o.trimmed && !prev.trimmed && f.op && f.op->kind == PacketKind::kMrcData)
    trim_shape(o, f, px.ib_len);
  if (!f.has_inner_ip6 || !prev.srv6 || f.l3 != 6) return;
  if (f.ip6.dst == px.outer_da) return;
  if (f.has_srh) return;  // SRH processing replaces the DA; only pure uSID shifts are judged
  if (prev.n_ids > 1) {
    // Byte-identical copies in flight at once share the hop record: one seen upstream of where
    // another was last seen is not judged.
    Addr back = f.ip6.dst;
    for (int k = 0; k < 8 && wire::usid_shift(back); ++k)
      if (back == px.outer_da) return;
  }
  judge(FRM_010);
  Addr da = px.outer_da;
  for (unsigned k = 1; k <= 8; ++k) {
    if (!wire::usid_shift(da)) break;
    if (da == f.ip6.dst) {
      if (px.hop_limit < k || px.hop_limit - k < f.ip6.hop_limit)
        fail(FRM_010, o,
             "outer DA shifted " + std::to_string(k) + " uSID(s) but hop limit went " +
                 std::to_string(px.hop_limit) + " -> " + std::to_string(f.ip6.hop_limit));
      return;
    }
  }
  fail(FRM_010, o,
       "outer DA " + wire::format_ipv6(f.ip6.dst) + " is no uSID shift of " +
           wire::format_ipv6(px.outer_da) + " seen at capture " + std::to_string(px.last_point));
}

}  // namespace mrc::check::detail
