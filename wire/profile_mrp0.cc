// Wire profile MRP0 (docs/wire-format.md): opcode map and byte layouts of the MRC extension
// headers. Everything a future profile could lay out differently lives behind WireProfile.
#include <array>
#include <cstring>

#include "wire/wire.h"

namespace mrc::wire {
namespace {

using P = MessagePosition;
using K = PacketKind;

constexpr uint32_t kMrcData = kHdrMeth | kHdrReth;

struct OpcodeTable {
  std::array<OpcodeInfo, 256> by_opcode{};
  std::array<bool, 256> known{};
  constexpr void add(uint8_t op, std::string_view name, K kind, P pos, bool imm, bool mrc,
                     uint32_t headers, bool payload) {
    by_opcode[op] = OpcodeInfo{op, name, kind, pos, imm, mrc, headers, payload};
    known[op] = true;
  }
  constexpr OpcodeTable() {
    // IBTA RC (so plain RoCEv2 traffic decodes and can be judged).
    add(0x00, "RC_SEND_FIRST", K::kRcData, P::kFirst, false, false, 0, true);
    add(0x01, "RC_SEND_MIDDLE", K::kRcData, P::kMiddle, false, false, 0, true);
    add(0x02, "RC_SEND_LAST", K::kRcData, P::kLast, false, false, 0, true);
    add(0x03, "RC_SEND_LAST_IMM", K::kRcData, P::kLast, true, false, kHdrImm, true);
    add(0x04, "RC_SEND_ONLY", K::kRcData, P::kOnly, false, false, 0, true);
    add(0x05, "RC_SEND_ONLY_IMM", K::kRcData, P::kOnly, true, false, kHdrImm, true);
    add(0x06, "RC_WRITE_FIRST", K::kRcData, P::kFirst, false, false, kHdrReth, true);
    add(0x07, "RC_WRITE_MIDDLE", K::kRcData, P::kMiddle, false, false, 0, true);
    add(0x08, "RC_WRITE_LAST", K::kRcData, P::kLast, false, false, 0, true);
    add(0x09, "RC_WRITE_LAST_IMM", K::kRcData, P::kLast, true, false, kHdrImm, true);
    add(0x0A, "RC_WRITE_ONLY", K::kRcData, P::kOnly, false, false, kHdrReth, true);
    add(0x0B, "RC_WRITE_ONLY_IMM", K::kRcData, P::kOnly, true, false, kHdrReth | kHdrImm, true);
    add(0x0C, "RC_READ_REQUEST", K::kRcData, P::kOnly, false, false, kHdrReth, false);
    add(0x0D, "RC_READ_RESPONSE_FIRST", K::kRcReadResponse, P::kFirst, false, false, kHdrAeth,
        true);
    add(0x0E, "RC_READ_RESPONSE_MIDDLE", K::kRcReadResponse, P::kMiddle, false, false, 0, true);
    add(0x0F, "RC_READ_RESPONSE_LAST", K::kRcReadResponse, P::kLast, false, false, kHdrAeth, true);
    add(0x10, "RC_READ_RESPONSE_ONLY", K::kRcReadResponse, P::kOnly, false, false, kHdrAeth, true);
    add(0x11, "RC_ACKNOWLEDGE", K::kRcAck, P::kNone, false, false, kHdrAeth, false);
    add(0x12, "RC_ATOMIC_ACKNOWLEDGE", K::kRcAtomic, P::kNone, false, false,
        kHdrAeth | kHdrAtomicAckEth, false);
    add(0x13, "RC_CMP_SWAP", K::kRcAtomic, P::kOnly, false, false, kHdrAtomicEth, false);
    add(0x14, "RC_FETCH_ADD", K::kRcAtomic, P::kOnly, false, false, kHdrAtomicEth, false);
    add(0x16, "RC_SEND_LAST_INV", K::kRcData, P::kLast, false, false, kHdrIeth, true);
    add(0x17, "RC_SEND_ONLY_INV", K::kRcData, P::kOnly, false, false, kHdrIeth, true);
    add(0x81, "CNP", K::kCnp, P::kNone, false, false, 0, true);
    // MRC.
    add(0xC6, "WRITE_FIRST", K::kMrcData, P::kFirst, false, true, kMrcData, true);
    add(0xC7, "WRITE_MIDDLE", K::kMrcData, P::kMiddle, false, true, kMrcData, true);
    add(0xC8, "WRITE_LAST", K::kMrcData, P::kLast, false, true, kMrcData, true);
    add(0xC9, "WRITE_LAST_IMM", K::kMrcData, P::kLast, true, true, kMrcData | kHdrImm, true);
    add(0xCA, "WRITE_ONLY", K::kMrcData, P::kOnly, false, true, kMrcData, true);
    add(0xCB, "WRITE_ONLY_IMM", K::kMrcData, P::kOnly, true, true, kMrcData | kHdrImm, true);
    add(0xD1, "TRANSPORT_ACK", K::kMrcTransportAck, P::kNone, false, true, kHdrAeth, false);
    add(0xD8, "ENDPOINT_REQUEST", K::kMrcEndpointRequest, P::kNone, false, true, kHdrErth, false);
    add(0xD9, "ENDPOINT_RESPONSE", K::kMrcEndpointResponse, P::kNone, false, true, kHdrEeth, false);
    add(0xDC, "SACK", K::kMrcSack, P::kNone, false, true, kHdrSeth | kHdrCcState, false);
    add(0xDD, "NACK", K::kMrcNack, P::kNone, false, true, kHdrNeth, false);
    add(0xDE, "RELIABILITY_PROBE", K::kMrcProbe, P::kNone, false, true, kHdrPeth, false);
  }
};
constexpr OpcodeTable kOpcodes{};

// The order in which extension headers follow the BTH. No opcode carries two headers whose
// relative order would conflict, so one list serves IBTA and MRC stacks alike.
constexpr std::array<HeaderBit, 14> kHeaderOrderAll = {
    kHdrMeth, kHdrTseth, kHdrReth,    kHdrAtomicEth, kHdrAeth, kHdrAtomicAckEth, kHdrImm,
    kHdrIeth, kHdrSeth,  kHdrCcState, kHdrNeth,      kHdrPeth, kHdrErth,         kHdrEeth};

// Big-endian field access on a header's own bytes.
struct In {
  const uint8_t* p;
  uint8_t u8(size_t o) const { return p[o]; }
  uint16_t u16(size_t o) const { return static_cast<uint16_t>(p[o] << 8 | p[o + 1]); }
  uint32_t u24(size_t o) const {
    return static_cast<uint32_t>(p[o]) << 16 | static_cast<uint32_t>(p[o + 1]) << 8 | p[o + 2];
  }
  uint32_t u32(size_t o) const { return static_cast<uint32_t>(u16(o)) << 16 | u16(o + 2); }
  uint64_t u64(size_t o) const { return static_cast<uint64_t>(u32(o)) << 32 | u32(o + 4); }
};
struct Out {
  uint8_t* p;
  void u8(size_t o, uint32_t v) const { p[o] = static_cast<uint8_t>(v); }
  void u16(size_t o, uint32_t v) const {
    p[o] = static_cast<uint8_t>(v >> 8);
    p[o + 1] = static_cast<uint8_t>(v);
  }
  void u24(size_t o, uint32_t v) const {
    p[o] = static_cast<uint8_t>(v >> 16);
    p[o + 1] = static_cast<uint8_t>(v >> 8);
    p[o + 2] = static_cast<uint8_t>(v);
  }
  void u32(size_t o, uint32_t v) const {
    u16(o, v >> 16);
    u16(o + 2, v);
  }
  void u64(size_t o, uint64_t v) const {
    u32(o, static_cast<uint32_t>(v >> 32));
    u32(o + 4, static_cast<uint32_t>(v));
  }
};

// TSR(1) | reserved(11) | FTYPE(4), shared by TSETH, PETH and ERTH.
void read_tsr(uint16_t v, bool& tsr, uint16_t& reserved, uint8_t& ftype) {
  tsr = v >> 15;
  reserved = (v >> 4) & 0x7FF;
  ftype = v & 0xF;
}
uint16_t write_tsr(bool tsr, uint16_t reserved, uint8_t ftype) {
  return static_cast<uint16_t>((tsr ? 0x8000 : 0) | (reserved & 0x7FF) << 4 | (ftype & 0xF));
}

class Mrp0 final : public WireProfile {
 public:
  explicit Mrp0(WireParams params) : p_(std::move(params)) {
    eeth_op_mask_ = static_cast<uint8_t>(3u << p_.eeth_op_shift);
    eeth_sva_mask_ = static_cast<uint8_t>(1u << p_.eeth_sva_bit);
    eeth_rsvd_mask_ = static_cast<uint8_t>(~(eeth_op_mask_ | eeth_sva_mask_));
  }

  std::string_view name() const override { return p_.name; }

  const OpcodeInfo* opcode_info(uint8_t opcode) const override {
    return kOpcodes.known[opcode] ? &kOpcodes.by_opcode[opcode] : nullptr;
  }

  uint8_t opcode_of(PacketKind kind, MessagePosition pos, bool imm) const override {
    switch (kind) {
      case K::kMrcData:
        switch (pos) {
          case P::kFirst:
            return 0xC6;
          case P::kMiddle:
            return 0xC7;
          case P::kLast:
            return imm ? 0xC9 : 0xC8;
          case P::kOnly:
            return imm ? 0xCB : 0xCA;
          case P::kNone:
            break;
        }
        break;
      case K::kMrcTransportAck:
        return 0xD1;
      case K::kMrcEndpointRequest:
        return 0xD8;
      case K::kMrcEndpointResponse:
        return 0xD9;
      case K::kMrcSack:
        return 0xDC;
      case K::kMrcNack:
        return 0xDD;
      case K::kMrcProbe:
        return 0xDE;
      default:
        break;
    }
    return 0xFF;  // not in the table: encode_frame rejects it
  }

  size_t header_size(HeaderBit h) const override {
    switch (h) {
      case kHdrMeth:
        return 4;
      case kHdrTseth:
        return 4;
      case kHdrReth:
        return 16;
      case kHdrImm:
        return 4;
      case kHdrAeth:
        return 4;
      case kHdrSeth:
        return 28;
      case kHdrCcState:
        return 8;
      case kHdrNeth:
        return 20;
      case kHdrPeth:
        return 16;
      case kHdrErth:
        return 16;
      case kHdrEeth:
        return 36;
      case kHdrAtomicEth:
        return 28;
      case kHdrAtomicAckEth:
        return 8;
      case kHdrIeth:
        return 4;
    }
    return 0;
  }

  std::span<const HeaderBit> header_order() const override { return kHeaderOrderAll; }
  EvStripe ev_stripe() const override { return p_.ev_stripe; }
  const DscpPlan& dscp() const override { return p_.dscp; }
  size_t min_trim_bytes() const override { return p_.trim_bytes; }
  const WireParams& params() const override { return p_; }

  void decode_header(HeaderBit h, Bytes bytes, DecodedFrame& f) const override {
    const In in{reinterpret_cast<const uint8_t*>(bytes.data())};
    switch (h) {
      case kHdrMeth:
        f.meth.rqmsn = in.u16(0);
        f.meth.msn = in.u16(2);
        break;
      case kHdrTseth:
        f.tseth.ts16 = in.u16(0);
        read_tsr(in.u16(2), f.tseth.tsr, f.tseth.reserved, f.tseth.ftype);
        break;
      case kHdrReth:
        f.reth.va = in.u64(0);
        f.reth.rkey = in.u32(8);
        f.reth.dma_len = in.u32(12);
        break;
      case kHdrImm:
        f.immdt.imm = in.u32(0);
        break;
      case kHdrAeth:
        f.aeth.syndrome = in.u8(0);
        f.aeth.msn = in.u24(1);
        break;
      case kHdrSeth: {
        Seth& s = f.seth;
        s.byte0 = in.u8(0);
        const uint8_t b1 = in.u8(1);
        s.m = (b1 >> 5) & 3;
        s.pr = (b1 >> 1) & 1;
        s.rsvd_b1 = b1 & 0x9D;  // bits 7, 4..2, 0
        s.ack_psn_offset = static_cast<int16_t>(in.u16(2));
        s.entropy = in.u32(4);
        s.spdcid = in.u16(8);
        s.dpdcid = in.u16(10);
        s.port_status = in.u8(12);
        s.cack_psn = in.u24(13);
        const uint8_t b16 = in.u8(16);
        s.cc_type = b16 >> 4;
        s.cc_flags_rsvd = (b16 >> 2) & 3;
        s.psv = (b16 >> 1) & 1;
        s.sva = b16 & 1;
        s.mpr = in.u8(17);
        s.sack_offset = static_cast<int16_t>(in.u16(18));
        s.sack_bitmap = in.u64(20);
        break;
      }
      case kHdrCcState: {
        CcState& c = f.cc_state;
        c.ts_echo = in.u16(0);
        const uint16_t v = in.u16(2);
        c.rsvd_bit = v >> 15;
        c.ooo_count = v & 0x7FFF;
        const uint8_t b4 = in.u8(4);
        c.rc = b4 >> 7;
        c.rcv_cwnd_pen = b4 & 0x7F;
        c.rcvd_bytes = in.u24(5);
        break;
      }
      case kHdrNeth: {
        Neth& n = f.neth;
        n.reserved0 = in.u16(0);
        n.nack_code = in.u8(2);
        n.vendor_code = in.u8(3);
        n.entropy = in.u32(4);
        n.spdcid = in.u16(8);
        n.dpdcid = in.u16(10);
        n.reserved12 = in.u8(12);
        n.nack_psn = in.u24(13);
        const uint8_t b16 = in.u8(16);
        n.cc_type = b16 >> 4;
        n.cc_flags_rsvd = (b16 >> 2) & 3;
        n.psv = (b16 >> 1) & 1;
        n.sva = b16 & 1;
        const uint8_t b17 = in.u8(17);
        n.m = b17 >> 6;
        n.reserved17 = b17 & 0x3F;
        n.ts_echo = in.u16(18);
        break;
      }
      case kHdrPeth: {
        Peth& p = f.peth;
        p.reserved0 = {in.u8(0), in.u8(1), in.u8(2)};
        p.vendor = in.u8(3);
        p.probe_id = in.u16(4);
        p.reserved6 = in.u16(6);
        p.spdcid = in.u16(8);
        p.dpdcid = in.u16(10);
        p.ts16 = in.u16(12);
        read_tsr(in.u16(14), p.tsr, p.reserved_tsr, p.ftype);
        break;
      }
      case kHdrErth: {
        Erth& e = f.erth;
        e.reserved0 = in.u8(0);
        e.rsvd_b1 = in.u8(1) >> 2;
        e.op = in.u8(1) & 3;
        e.reserved2 = in.u8(2);
        e.vendor = in.u8(3);
        e.port_status_mask = in.u32(4);
        e.reserved8 = in.u32(8);
        e.ts16 = in.u16(12);
        read_tsr(in.u16(14), e.tsr, e.reserved_tsr, e.ftype);
        break;
      }
      case kHdrEeth: {
        Eeth& e = f.eeth;
        e.reserved0 = in.u8(0);
        const uint8_t b1 = in.u8(1);
        e.rsvd_b1 = b1 & eeth_rsvd_mask_;  // MRP0: bits 7..6, 2..0
        e.op = (b1 >> p_.eeth_op_shift) & 3;
        e.sva = (b1 & eeth_sva_mask_) != 0;
        e.status = in.u8(2);
        e.vendor = in.u8(3);
        e.entropy = in.u32(4);
        e.port_status_mask = in.u32(8);
        std::memcpy(e.reserved12.data(), in.p + 12, 16);
        e.ts_echo = in.u16(28);
        e.svc_time = in.u16(30);
        e.reserved32 = in.u32(32);
        break;
      }
      case kHdrAtomicEth:
        f.atomic_eth.va = in.u64(0);
        f.atomic_eth.rkey = in.u32(8);
        f.atomic_eth.swap_add = in.u64(12);
        f.atomic_eth.compare = in.u64(20);
        break;
      case kHdrAtomicAckEth:
        f.atomic_ack_eth.orig = in.u64(0);
        break;
      case kHdrIeth:
        f.ieth = in.u32(0);
        break;
    }
  }

  void encode_header(HeaderBit h, const DecodedFrame& f, MutBytes bytes) const override {
    const Out out{reinterpret_cast<uint8_t*>(bytes.data())};
    switch (h) {
      case kHdrMeth:
        out.u16(0, f.meth.rqmsn);
        out.u16(2, f.meth.msn);
        break;
      case kHdrTseth:
        out.u16(0, f.tseth.ts16);
        out.u16(2, write_tsr(f.tseth.tsr, f.tseth.reserved, f.tseth.ftype));
        break;
      case kHdrReth:
        out.u64(0, f.reth.va);
        out.u32(8, f.reth.rkey);
        out.u32(12, f.reth.dma_len);
        break;
      case kHdrImm:
        out.u32(0, f.immdt.imm);
        break;
      case kHdrAeth:
        out.u8(0, f.aeth.syndrome);
        out.u24(1, f.aeth.msn);
        break;
      case kHdrSeth: {
        const Seth& s = f.seth;
        out.u8(0, s.byte0);
        out.u8(1, static_cast<uint32_t>((s.m & 3) << 5 | (s.pr ? 2 : 0) | (s.rsvd_b1 & 0x9D)));
        out.u16(2, static_cast<uint16_t>(s.ack_psn_offset));
        out.u32(4, s.entropy);
        out.u16(8, s.spdcid);
        out.u16(10, s.dpdcid);
        out.u8(12, s.port_status);
        out.u24(13, s.cack_psn);
        out.u8(16, static_cast<uint32_t>((s.cc_type & 0xF) << 4 | (s.cc_flags_rsvd & 3) << 2 |
                                         (s.psv ? 2 : 0) | (s.sva ? 1 : 0)));
        out.u8(17, s.mpr);
        out.u16(18, static_cast<uint16_t>(s.sack_offset));
        out.u64(20, s.sack_bitmap);
        break;
      }
      case kHdrCcState: {
        const CcState& c = f.cc_state;
        out.u16(0, c.ts_echo);
        out.u16(2, static_cast<uint32_t>((c.rsvd_bit ? 0x8000 : 0) | (c.ooo_count & 0x7FFF)));
        out.u8(4, static_cast<uint32_t>((c.rc ? 0x80 : 0) | (c.rcv_cwnd_pen & 0x7F)));
        out.u24(5, c.rcvd_bytes);
        break;
      }
      case kHdrNeth: {
        const Neth& n = f.neth;
        out.u16(0, n.reserved0);
        out.u8(2, n.nack_code);
        out.u8(3, n.vendor_code);
        out.u32(4, n.entropy);
        out.u16(8, n.spdcid);
        out.u16(10, n.dpdcid);
        out.u8(12, n.reserved12);
        out.u24(13, n.nack_psn);
        out.u8(16, static_cast<uint32_t>((n.cc_type & 0xF) << 4 | (n.cc_flags_rsvd & 3) << 2 |
                                         (n.psv ? 2 : 0) | (n.sva ? 1 : 0)));
        out.u8(17, static_cast<uint32_t>((n.m & 3) << 6 | (n.reserved17 & 0x3F)));
        out.u16(18, n.ts_echo);
        break;
      }
      case kHdrPeth: {
        const Peth& p = f.peth;
        out.u8(0, p.reserved0[0]);
        out.u8(1, p.reserved0[1]);
        out.u8(2, p.reserved0[2]);
        out.u8(3, p.vendor);
        out.u16(4, p.probe_id);
        out.u16(6, p.reserved6);
        out.u16(8, p.spdcid);
        out.u16(10, p.dpdcid);
        out.u16(12, p.ts16);
        out.u16(14, write_tsr(p.tsr, p.reserved_tsr, p.ftype));
        break;
      }
      case kHdrErth: {
        const Erth& e = f.erth;
        out.u8(0, e.reserved0);
        out.u8(1, static_cast<uint32_t>((e.rsvd_b1 & 0x3F) << 2 | (e.op & 3)));
        out.u8(2, e.reserved2);
        out.u8(3, e.vendor);
        out.u32(4, e.port_status_mask);
        out.u32(8, e.reserved8);
        out.u16(12, e.ts16);
        out.u16(14, write_tsr(e.tsr, e.reserved_tsr, e.ftype));
        break;
      }
      case kHdrEeth: {
        const Eeth& e = f.eeth;
        out.u8(0, e.reserved0);
        out.u8(1, static_cast<uint32_t>((e.rsvd_b1 & eeth_rsvd_mask_) |
                                        (e.op & 3) << p_.eeth_op_shift |
                                        (e.sva ? eeth_sva_mask_ : 0)));
        out.u8(2, e.status);
        out.u8(3, e.vendor);
        out.u32(4, e.entropy);
        out.u32(8, e.port_status_mask);
        std::memcpy(out.p + 12, e.reserved12.data(), 16);
        out.u16(28, e.ts_echo);
        out.u16(30, e.svc_time);
        out.u32(32, e.reserved32);
        break;
      }
      case kHdrAtomicEth:
        out.u64(0, f.atomic_eth.va);
        out.u32(8, f.atomic_eth.rkey);
        out.u64(12, f.atomic_eth.swap_add);
        out.u64(20, f.atomic_eth.compare);
        break;
      case kHdrAtomicAckEth:
        out.u64(0, f.atomic_ack_eth.orig);
        break;
      case kHdrIeth:
        out.u32(0, f.ieth);
        break;
    }
  }

 private:
  WireParams p_;
  uint8_t eeth_op_mask_ = 0;
  uint8_t eeth_sva_mask_ = 0;
  uint8_t eeth_rsvd_mask_ = 0;
};

}  // namespace

const WireProfile& mrp0() {
  static const Mrp0 profile{WireParams{}};
  return profile;
}

std::unique_ptr<WireProfile> make_mrp0(const DscpPlan& dscp, EvStripe stripe) {
  WireParams p;
  p.dscp = dscp;
  p.ev_stripe = stripe;
  return std::make_unique<Mrp0>(std::move(p));
}

std::unique_ptr<WireProfile> make_profile(const WireParams& params) {
  return std::make_unique<Mrp0>(params);
}

namespace {
std::vector<std::unique_ptr<WireProfile>>& registry() {
  static std::vector<std::unique_ptr<WireProfile>> profiles;
  return profiles;
}
}  // namespace

void register_profile(std::unique_ptr<WireProfile> profile) {
  auto& r = registry();
  for (auto& p : r) {
    if (p->name() == profile->name()) {
      p = std::move(profile);
      return;
    }
  }
  r.push_back(std::move(profile));
}

const WireProfile* find_profile(std::string_view name) {
  for (const auto& p : registry())
    if (p->name() == name) return p.get();
  if (name == mrp0().name()) return &mrp0();
  return nullptr;
}

std::vector<std::string> profile_names() {
  std::vector<std::string> names{std::string(mrp0().name())};
  for (const auto& p : registry())
    if (p->name() != mrp0().name()) names.emplace_back(p->name());
  return names;
}

std::string_view nack_code_name(uint8_t code) {
  switch (code) {
    case 0x01:
      return "TRIMMED";
    case 0x02:
      return "TRIMMED_LASTHOP";
    case 0x06:
      return "NO_BITMAP";
    case 0x07:
      return "NO_PKT_BUFFER";
    case 0x0A:
      return "NO_RESOURCE";
    case 0x0B:
      return "PSN_OOR_WINDOW";
    case 0x19:
      return "UNEXP_EVENT";
  }
  return {};
}

}  // namespace mrc::wire
