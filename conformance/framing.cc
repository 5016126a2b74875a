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

// MRC-FRM-005: calls bad(describe) for each BTH field off its constant value, where describe()
// makes the report's text. One list for frame_rules() (which reports) and frame_rules_stage()
// (which only asks whether any is off, on the pipelined checker's hot path: nothing is built).
template <class Bad>
void bth_constants(const wire::DecodedFrame& f, Bad&& bad) {
  const auto pos = f.op->position;
  const bool last_or_only = pos == MessagePosition::kLast || pos == MessagePosition::kOnly;
  if (f.bth.tver != 0) bad([&] { return " TVer=" + std::to_string(f.bth.tver); });
  if (f.bth.pkey != 0xFFFF) bad([&] { return " P_Key=" + hex(f.bth.pkey, 4); });
  if (f.bth.mig_req) bad([] { return std::string(" MigReq=1"); });
  if (f.bth.pad_count != 0 && !last_or_only)
    bad([&] {
      return " PadCnt=" + std::to_string(f.bth.pad_count) + " on a non-LAST/ONLY packet";
    });
  if (f.bth.se && !(f.op->has_imm && last_or_only))
    bad([] { return std::string(" SE=1 on a packet without immediate"); });
}

// MRC-FRM-008: calls set(what) for each header with a reserved field that is not zero.
template <class Set>
void reserved_fields(const wire::DecodedFrame& f, Set&& set) {
  if (f.bth.rsvd_b8_6 || f.bth.rsvd_b8_lo) set(" BTH byte 8 reserved bits");
  if (f.has(wire::kHdrTseth) && f.tseth.reserved) set(" TSETH reserved");
  if (f.has(wire::kHdrSeth) && (f.seth.byte0 || f.seth.rsvd_b1 || f.seth.cc_flags_rsvd))
    set(" SETH reserved");
  if (f.has(wire::kHdrCcState) && f.cc_state.rsvd_bit) set(" CC_STATE reserved bit");
  if (f.has(wire::kHdrNeth) &&
      (f.neth.reserved0 || f.neth.reserved12 || f.neth.reserved17 || f.neth.cc_flags_rsvd))
    set(" NETH reserved");
  if (f.has(wire::kHdrPeth) && (f.peth.reserved0[0] || f.peth.reserved0[1] || f.peth.reserved0[2] ||
                                f.peth.reserved6 || f.peth.reserved_tsr))
    set(" PETH reserved");
  if (f.has(wire::kHdrErth) &&
      (f.erth.reserved0 || f.erth.rsvd_b1 || f.erth.reserved2 || f.erth.reserved8 ||
       f.erth.reserved_tsr || (f.erth.port_status_mask & 1u)))
    set(" ERTH reserved");
  if (f.has(wire::kHdrEeth)) {
    bool any = f.eeth.reserved0 || f.eeth.rsvd_b1 || f.eeth.reserved32;
    for (uint8_t b : f.eeth.reserved12) any = any || b;
    if (any) set(" EETH reserved");
  }
}

bool bth_constants_bad(const wire::DecodedFrame& f) {
  bool any = false;
  bth_constants(f, [&](auto&&) { any = true; });
  return any;
}

bool reserved_bits_set(const wire::DecodedFrame& f) {
  bool any = false;
  reserved_fields(f, [&](const char*) { any = true; });
  return any;
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

void Engine::unrecognised(const Obs& o, const wire::DecodedFrame& f) {
  UnrecognisedKey k;
  using K = UnrecognisedKey;
  if (f.roce) {
    k = {f.op ? K::kNotMrcOpcode : K::kUnknownOpcode, f.bth.opcode, 0};
  } else if (f.has_udp && wire_profile->is_roce_port(f.udp.dport)) {
    k = {K::kShortBth, 0, 0};
  } else if (f.has_udp) {
    k = {K::kOtherPort, f.udp.dport, 0};
    const size_t start = static_cast<size_t>(f.off_udp) + 8;
    if (start + 12 <= f.frame.size()) {
      const auto* b = reinterpret_cast<const uint8_t*>(f.frame.data()) + start;
      // An MRC opcode first: the datagram may be MRC under another port (or P_Key) choice.
      if (is_mrc_opcode(b[0])) k.b = 0x10000u | static_cast<uint32_t>(b[2] << 8 | b[3]);
    }
  } else if (f.error) {
    k = {K::kDecodeError, static_cast<uint32_t>(f.error.layer),
         static_cast<uint32_t>(f.error.code)};
  } else if (f.l3 == 4 && (f.ip4.flags_frag & 0x3FFF) != 0) {
    k = {K::kFragment, 0, 0};
  } else if (f.l3 != 0) {
    const uint8_t proto = f.has_inner_ip6 ? f.inner_ip6.next_header
                          : f.l3 == 4     ? f.ip4.protocol
                                          : f.ip6.next_header;
    k = {K::kNotUdp, f.l3, proto};
  } else {
    k = {K::kNotIp, f.has_eth ? f.eth.ethertype : 0u, 0};
  }
  auto it = unrecognised_frames.find(k);
  if (it == unrecognised_frames.end()) {
    if (unrecognised_frames.size() >= kMaxUnrecognisedKinds) k = {K::kOther, 0, 0};
    it = unrecognised_frames.try_emplace(k).first;
  }
  it->second.frames++;
  if (it->second.examples.size() < kUnrecognisedExamples)
    it->second.examples.push_back({o.point, o.frame_no});
}

std::string Engine::describe(const UnrecognisedKey& k) const {
  using K = UnrecognisedKey;
  std::string port;  // the wire profile's ports, "4791" or "4971 or 4791"
  for (uint16_t p : wire_profile->params().udp_ports)
    port += (port.empty() ? "" : " or ") + std::to_string(p);
  switch (k.kind) {
    case K::kNotIp:
      return "not IP (EtherType " + hex(k.a, 4) + ")";
    case K::kNotUdp:
      return std::string(k.a == 4 ? "IPv4, not UDP (protocol " : "IPv6, not UDP (next header ") +
             std::to_string(k.b) + ")";
    case K::kFragment:
      return "IPv4 fragment (no whole UDP datagram)";
    case K::kDecodeError:
      return "undecodable " + std::string(wire::layer_name(static_cast<wire::Layer>(k.a))) + " (" +
             std::string(wire::decode_error_name(static_cast<DecodeErrorCode>(k.b))) + ")";
    case K::kOtherPort: {
      std::string s =
          "UDP to port " + std::to_string(k.a) + ", not the profile's RoCE port " + port;
      if (k.b & 0x10000u) {
        s += "; the payload starts like an MRC BTH (an MRC opcode, P_Key " + hex(k.b & 0xFFFFu, 4) +
             "): MRC under another wire variant? Try mrct detect, then --profile-variant "
             "(or auto)";
      }
      return s;
    }
    case K::kShortBth:
      return "UDP to the RoCE port " + port + " too short for a BTH (12 bytes)";
    case K::kUnknownOpcode:
      return "BTH opcode " + hex(k.a, 2) + " unknown to the wire profile";
    case K::kNotMrcOpcode: {
      const wire::OpcodeInfo* op = wire_profile->opcode_info(static_cast<uint8_t>(k.a));
      return "RoCE opcode " + hex(k.a, 2) + (op ? " (" + std::string(op->name) + ")" : "") +
             ", not an MRC opcode";
    }
    case K::kOther:
      break;
  }
  return "other reasons (more than " + std::to_string(kMaxUnrecognisedKinds) + " distinct reasons)";
}

FramePre Engine::frame_rules_stage(const wire::DecodedFrame& f, bool ok) {
  // Each test below is one way frame_rules() can fail a rule, excuse one (corrupt_near() reads
  // the decisions) or call into state (trim_shape()); the frames left are judged by counting.
  if (!ok || !f.roce || !f.op || !f.op->mrc || !is_mrc_opcode(f.bth.opcode))
    return FramePre::kJudge;
  // (frame_rules() reads Obs::trimmed, which judge_frame() sets from f.trimmed.)
  const bool icrc_judged = f.icrc_checked && !f.trimmed;
  if (icrc_judged && !f.icrc_ok) return FramePre::kJudge;
  if (bth_constants_bad(f)) return FramePre::kJudge;
  if (f.op->kind == PacketKind::kMrcData &&
      (f.trimmed || (f.payload.size() + f.pad_bytes) % 4 != 0))
    return FramePre::kJudge;
  if (reserved_bits_set(f) || f.has_inner_ip6) return FramePre::kJudge;
  return icrc_judged ? FramePre::kCleanIcrc : FramePre::kClean;
}

uint64_t Engine::clean_checked(size_t r) const {
  switch (r) {
    case FRM_001:
      return clean_frames[static_cast<size_t>(FramePre::kCleanIcrc)];
    case FRM_002:
    case FRM_003:
    case FRM_004:
    case FRM_005:
    case FRM_006:
    case FRM_007:
    case FRM_008:
      return clean_frames[static_cast<size_t>(FramePre::kClean)] +
             clean_frames[static_cast<size_t>(FramePre::kCleanIcrc)];
    default:
      return 0;
  }
}

void Engine::fold_clean_frames() {
  for (size_t r = 0; r < kRuleCount; ++r) judge(static_cast<RuleIdx>(r), clean_checked(r));
  clean_frames = {};
}

void Engine::frame_rules(const Obs& o, const wire::DecodedFrame& f, bool ok, FramePre pre) {
  if (pre != FramePre::kJudge) {
    // What the full judgement below counts for such a frame (clean_checked()), and nothing else.
    clean_frames[static_cast<size_t>(pre)]++;
    return;
  }
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
      if (corrupt_near(o.ts)) {
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
  std::string bad;
  bth_constants(f, [&](auto&& describe) { bad += describe(); });
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
  reserved_fields(f, [&](const char* what) { rsv += what; });
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
    if (prof.srv6_locator) {
      const auto& loc = *prof.srv6_locator;
      // wire-format.md 10.4: the DA is a uSID container of the configured block until the
      // container is used up; then the switch loads Segment List[SL] (SL already decremented),
      // which may be another block, and later switches shift that one.
      auto from_segment_list = [&] {
        if (!f.has_srh || f.srh.segments_left > f.srh.last_entry ||
            f.srh.segments_left >= f.srh.segment_count)
          return false;
        Addr seg = f.srh.segments[f.srh.segments_left];
        for (int k = 0; k <= 8; ++k) {
          if (seg == f.ip6.dst) return true;
          if (!wire::usid_shift(seg)) break;
        }
        return false;
      };
      if (!std::equal(loc.begin(), loc.end(), f.ip6.dst.begin()) && !from_segment_list()) {
        e += " outer DA " + wire::format_ipv6(f.ip6.dst) + " outside the configured locator";
        if (f.has_srh)
          e += " with Segments Left " + std::to_string(f.srh.segments_left) +
               (f.srh.segments_left > f.srh.last_entry
                    ? " (the container is still active: no segment was loaded yet)"
                    : " and not Segment List[" + std::to_string(f.srh.segments_left) +
                          "] or a uSID shift of it");
      }
    }
    if (!e.empty()) fail(FRM_009, o, opname(f) + ":" + e);
  }
}

bool Engine::corrupt_near(uint64_t ts) const {
  const uint64_t lo = ts > prof.tol.dedup_window_ns ? ts - prof.tol.dedup_window_ns : 0;
  return std::any_of(corrupt_times.begin(), corrupt_times.end(), [&](uint64_t t) {
    return t >= lo && t <= ts + prof.tol.decision_lookahead_ns;
  });
}

void Engine::srv6_inner_da(const Obs& o, const wire::DecodedFrame& f) {
  if (!f.has_inner_ip6) return;
  const Addr& da = f.inner_ip6.dst;
  const bool in_locator = prof.srv6_locator && std::equal(prof.srv6_locator->begin(),
                                                          prof.srv6_locator->end(), da.begin());
  const bool known = o.dst_node >= 0 && static_cast<size_t>(o.dst_node) < profile_nodes;
  if (!in_locator && !known) {
    na(FRM_012,
       "the inner DA belongs to no node of the profile (nodes[], qps[]) and no "
       "srv6_locator is set");
    return;
  }
  judge(FRM_012);
  const std::string what = f.op ? std::string(f.op->name) : "opcode " + hex(f.bth.opcode, 2);
  if (in_locator) {
    fail(FRM_012, o,
         what + ": inner DA " + wire::format_ipv6(da) +
             " lies inside the SRv6 locator; the receiver decapsulates on its own node GID");
  } else if (da != node_addr[static_cast<size_t>(o.dst_node)]) {
    const std::string& name = node_name[static_cast<size_t>(o.dst_node)];
    fail(FRM_012, o,
         what + ": inner DA " + wire::format_ipv6(da) + " is not the GID " +
             wire::format_ipv6(node_addr[static_cast<size_t>(o.dst_node)]) + " of node " +
             (name.empty() ? std::string("(profile QP)") : name));
  }
}

void Engine::udp_checksum(const Obs& o, const wire::DecodedFrame& f) {
  if (!f.has_udp || o.snapped || o.icrc_bad) return;
  const bool v6 = f.has_inner_ip6 || f.l3 == 6;
  if (f.udp.checksum == 0) {
    judge(FRM_013);
    if (v6 && !prof.udp_zero_checksum)
      fail(FRM_013, o,
           "UDP checksum 0 over IPv6, and the profile does not allow zero-checksum UDP "
           "(udp_zero_checksum false)");
    return;
  }
  const auto want = wire::compute_udp_checksum(f);
  if (!want) return;
  judge(FRM_013);
  if (*want == f.udp.checksum) return;
  if (corrupt_near(o.ts)) {
    excuse(FRM_013);
    return;
  }
  std::string msg = "UDP checksum " + hex(f.udp.checksum, 4) + " does not verify (expected " +
                    hex(*want, 4) + ", over the " +
                    (f.has_inner_ip6 ? "inner IPv6 header, the final destination)"
                     : f.has_srh     ? "final destination Segment List[0])"
                                     : "IP header)");
  if (f.has_inner_ip6) {
    // The classic SRv6 mistake: a checksum over the outer header, whose DA every hop rewrites.
    wire::DecodedFrame outer = f;
    outer.has_inner_ip6 = false;
    outer.has_srh = false;
    if (const auto o2 = wire::compute_udp_checksum(outer); o2 && *o2 == f.udp.checksum)
      msg += "; it is the checksum over the outer header";
  }
  fail(FRM_013, o, msg);
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
