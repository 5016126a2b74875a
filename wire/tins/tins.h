// mrc_wire_tins: libtins PDUs for the BTH and the MRC extension headers, for crafting and
// inspecting packets in tests and tools, Scapy-style:
//
//   namespace mt = mrc::tins;
//   mt::Bth bth(mrc::wire::Opcode::kWriteOnly, qpn, psn);
//   bth.ts(true);  // BTH.TS announces the TSETH: set it yourself, serialize() infers no flags
//   auto pkt = Tins::EthernetII(dst, src) / Tins::IPv6(dip, sip) / Tins::UDP(4791, sport) /
//              bth / mt::Meth(0, 41) / mt::Tseth(ts16) / mt::Reth(va, rkey, n) /
//              Tins::RawPDU(payload);
//   std::vector<std::byte> frame = mrc::tins::serialize(pkt);  // padded, with a correct ICRC
//
// Every PDU holds the mrc::wire header struct and reads/writes its bytes through the codec (the
// MRP0 profile's encode_header/decode_header; the BTH through encode_frame/decode_frame), so
// there is exactly one byte layout: the codec's. Accessors carry the names and types of the
// wire.h fields.
//
// libtins serializes inner PDUs before outer ones and knows nothing about the ICRC, so the ICRC
// is filled in after the whole frame exists: serialize() appends an Icrc PDU, lets libtins write
// the frame, decodes it with the codec and fixes the ICRC, then the UDP checksum (which covers
// the ICRC bytes, so it must come last).
//
// Debian 12 ships libtins 4.0: UDP payloads always parse as RawPDU (no dispatch on port), so
// parse_roce()/expand_roce() turn that RawPDU into a chain of these PDUs.
#pragma once

#include <tins/pdu.h>
#include <tins/rawpdu.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wire/wire.h"

namespace mrc::tins {

// IBTA base transport header size; the layout itself is the codec's.
inline constexpr uint32_t kBthBytes = 12;

// PDU type numbers, in the user-defined range so that find_pdu<T>() and tins_cast work. They
// stay below 1024: Tins::PDU::PDUType has no fixed underlying type, so its valid values end at
// the 10-bit range that USER_DEFINED_PDU (1000) needs.
inline constexpr int kPduTypeBase = Tins::PDU::USER_DEFINED_PDU;
enum class PduKind : int {
  kBth = kPduTypeBase,
  kMeth,
  kTseth,
  kReth,
  kImmDt,
  kAeth,
  kSeth,
  kCcState,
  kNeth,
  kPeth,
  kErth,
  kEeth,
  kIcrc,
  kPad,
};
constexpr Tins::PDU::PDUType pdu_type_of(PduKind k) {
  return static_cast<Tins::PDU::PDUType>(static_cast<int>(k));
}

namespace detail {

// Shared storage and accessors for a PDU that is one wire.h header struct.
template <class HeaderT>
class HeaderPdu : public Tins::PDU {
 public:
  using Header = HeaderT;
  HeaderPdu() = default;
  explicit HeaderPdu(const Header& h) : h_(h) {}
  const Header& header() const { return h_; }
  Header& header() { return h_; }
  void header(const Header& h) { h_ = h; }

 protected:
  Header h_{};
};

// Codec glue for extension headers (implemented in tins.cc, through the wire profile).
uint32_t ext_header_size(wire::HeaderBit bit);
void encode_ext(wire::HeaderBit bit, const wire::DecodedFrame& f, uint8_t* out, uint32_t size);
// Throws Tins::malformed_packet when size is smaller than the header.
void decode_ext(wire::HeaderBit bit, wire::Bytes data, wire::DecodedFrame& f);

// An extension header PDU: Bit selects the layout, Member the DecodedFrame field it lives in.
template <class HeaderT, wire::HeaderBit Bit, HeaderT wire::DecodedFrame::*Member, PduKind Kind>
class ExtHeaderPdu : public HeaderPdu<HeaderT> {
 public:
  static constexpr Tins::PDU::PDUType pdu_flag = pdu_type_of(Kind);
  static constexpr wire::HeaderBit header_bit = Bit;

  ExtHeaderPdu() = default;
  explicit ExtHeaderPdu(const HeaderT& h) : HeaderPdu<HeaderT>(h) {}
  // Parses exactly one header from the front of data; throws Tins::malformed_packet when short.
  // (A span, not libtins' (pointer, size) pair, so that Meth(0, 41) is not ambiguous.)
  explicit ExtHeaderPdu(wire::Bytes data) {
    wire::DecodedFrame f;
    decode_ext(Bit, data, f);
    this->h_ = f.*Member;
  }

  uint32_t header_size() const override { return ext_header_size(Bit); }
  Tins::PDU::PDUType pdu_type() const override { return pdu_flag; }

 private:
  void write_serialization(uint8_t* buffer, uint32_t total_sz) override {
    wire::DecodedFrame f;
    f.*Member = this->h_;
    encode_ext(Bit, f, buffer, total_sz);
  }
};

}  // namespace detail

// Getter and setter named after the wire.h field, with its type. The trailing static_assert only
// swallows the semicolon at the use site.
#define MRC_TINS_FIELD(name)            \
  decltype(Header::name) name() const { \
    return this->h_.name;               \
  }                                     \
  void name(decltype(Header::name) v) { \
    this->h_.name = v;                  \
  }                                     \
  static_assert(true, "")

// Base transport header.
class Bth : public detail::HeaderPdu<wire::Bth> {
 public:
  static constexpr PDUType pdu_flag = pdu_type_of(PduKind::kBth);

  Bth() = default;
  explicit Bth(const wire::Bth& h) : HeaderPdu(h) {}
  Bth(uint8_t opcode, uint32_t dest_qp, uint32_t psn);
  Bth(wire::Opcode opcode, uint32_t dest_qp, uint32_t psn)
      : Bth(static_cast<uint8_t>(opcode), dest_qp, psn) {}
  // Parses the BTH only (the rest of the stack depends on the opcode: see parse_roce()).
  // Throws Tins::malformed_packet when data is shorter than kBthBytes.
  explicit Bth(wire::Bytes data);

  MRC_TINS_FIELD(opcode);
  MRC_TINS_FIELD(se);
  MRC_TINS_FIELD(mig_req);
  // serialize() sets pad_count when it pads the payload (SerializeOptions::pad_payload).
  MRC_TINS_FIELD(pad_count);
  MRC_TINS_FIELD(tver);
  MRC_TINS_FIELD(pkey);
  MRC_TINS_FIELD(variant);
  MRC_TINS_FIELD(dest_qp);
  MRC_TINS_FIELD(ack_req);
  MRC_TINS_FIELD(rsvd_b8_6);
  MRC_TINS_FIELD(rtx);
  MRC_TINS_FIELD(ts);
  MRC_TINS_FIELD(rsvd_b8_lo);
  MRC_TINS_FIELD(psn);
  void opcode(wire::Opcode op) { h_.opcode = static_cast<uint8_t>(op); }
  // The opcode's name in the MRP0 table ("WRITE_ONLY"), empty when unknown.
  std::string_view opcode_name() const;

  uint32_t header_size() const override { return kBthBytes; }
  PDUType pdu_type() const override { return pdu_flag; }
  Tins::PDU* clone() const override { return new Bth(*this); }

 private:
  void write_serialization(uint8_t* buffer, uint32_t total_sz) override;
};

class Meth : public detail::ExtHeaderPdu<wire::Meth, wire::kHdrMeth, &wire::DecodedFrame::meth,
                                         PduKind::kMeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Meth() = default;
  Meth(uint16_t rqmsn, uint16_t msn) : ExtHeaderPdu(wire::Meth{rqmsn, msn}) {}
  MRC_TINS_FIELD(rqmsn);
  MRC_TINS_FIELD(msn);
  Tins::PDU* clone() const override { return new Meth(*this); }
};

class Tseth : public detail::ExtHeaderPdu<wire::Tseth, wire::kHdrTseth, &wire::DecodedFrame::tseth,
                                          PduKind::kTseth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Tseth() = default;
  explicit Tseth(uint16_t ts16, bool tsr = false) : ExtHeaderPdu(wire::Tseth{ts16, tsr, 0, 1}) {}
  MRC_TINS_FIELD(ts16);
  MRC_TINS_FIELD(tsr);
  MRC_TINS_FIELD(reserved);
  MRC_TINS_FIELD(ftype);
  Tins::PDU* clone() const override { return new Tseth(*this); }
};

class Reth : public detail::ExtHeaderPdu<wire::Reth, wire::kHdrReth, &wire::DecodedFrame::reth,
                                         PduKind::kReth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Reth() = default;
  Reth(uint64_t va, uint32_t rkey, uint32_t dma_len)
      : ExtHeaderPdu(wire::Reth{va, rkey, dma_len}) {}
  MRC_TINS_FIELD(va);
  MRC_TINS_FIELD(rkey);
  MRC_TINS_FIELD(dma_len);
  Tins::PDU* clone() const override { return new Reth(*this); }
};

class ImmDt : public detail::ExtHeaderPdu<wire::ImmDt, wire::kHdrImm, &wire::DecodedFrame::immdt,
                                          PduKind::kImmDt> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  ImmDt() = default;
  explicit ImmDt(uint32_t imm) : ExtHeaderPdu(wire::ImmDt{imm}) {}
  MRC_TINS_FIELD(imm);
  Tins::PDU* clone() const override { return new ImmDt(*this); }
};

class Aeth : public detail::ExtHeaderPdu<wire::Aeth, wire::kHdrAeth, &wire::DecodedFrame::aeth,
                                         PduKind::kAeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Aeth() = default;
  Aeth(uint8_t syndrome, uint32_t msn) : ExtHeaderPdu(wire::Aeth{syndrome, msn}) {}
  MRC_TINS_FIELD(syndrome);
  MRC_TINS_FIELD(msn);
  Tins::PDU* clone() const override { return new Aeth(*this); }
};

class Seth : public detail::ExtHeaderPdu<wire::Seth, wire::kHdrSeth, &wire::DecodedFrame::seth,
                                         PduKind::kSeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Seth() = default;
  MRC_TINS_FIELD(byte0);
  MRC_TINS_FIELD(m);
  MRC_TINS_FIELD(pr);
  MRC_TINS_FIELD(rsvd_b1);
  MRC_TINS_FIELD(ack_psn_offset);
  MRC_TINS_FIELD(entropy);
  MRC_TINS_FIELD(spdcid);
  MRC_TINS_FIELD(dpdcid);
  MRC_TINS_FIELD(port_status);
  MRC_TINS_FIELD(cack_psn);
  MRC_TINS_FIELD(cc_type);
  MRC_TINS_FIELD(psv);
  MRC_TINS_FIELD(sva);
  MRC_TINS_FIELD(cc_flags_rsvd);
  MRC_TINS_FIELD(mpr);
  MRC_TINS_FIELD(sack_offset);
  MRC_TINS_FIELD(sack_bitmap);
  // A probe response (PR=1) carries the probe id where a SACK carries the ACK PSN offset.
  uint16_t probe_id() const { return static_cast<uint16_t>(h_.ack_psn_offset); }
  void probe_id(uint16_t id) { h_.ack_psn_offset = static_cast<int16_t>(id); }
  Tins::PDU* clone() const override { return new Seth(*this); }
};

class CcState : public detail::ExtHeaderPdu<wire::CcState, wire::kHdrCcState,
                                            &wire::DecodedFrame::cc_state, PduKind::kCcState> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  CcState() = default;
  MRC_TINS_FIELD(ts_echo);
  MRC_TINS_FIELD(rsvd_bit);
  MRC_TINS_FIELD(ooo_count);
  MRC_TINS_FIELD(rc);
  MRC_TINS_FIELD(rcv_cwnd_pen);
  MRC_TINS_FIELD(rcvd_bytes);
  Tins::PDU* clone() const override { return new CcState(*this); }
};

class Neth : public detail::ExtHeaderPdu<wire::Neth, wire::kHdrNeth, &wire::DecodedFrame::neth,
                                         PduKind::kNeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Neth() = default;
  MRC_TINS_FIELD(reserved0);
  MRC_TINS_FIELD(nack_code);
  MRC_TINS_FIELD(vendor_code);
  MRC_TINS_FIELD(entropy);
  MRC_TINS_FIELD(spdcid);
  MRC_TINS_FIELD(dpdcid);
  MRC_TINS_FIELD(reserved12);
  MRC_TINS_FIELD(nack_psn);
  MRC_TINS_FIELD(cc_type);
  MRC_TINS_FIELD(psv);
  MRC_TINS_FIELD(sva);
  MRC_TINS_FIELD(cc_flags_rsvd);
  MRC_TINS_FIELD(m);
  MRC_TINS_FIELD(reserved17);
  MRC_TINS_FIELD(ts_echo);
  void nack_code(wire::NackCode c) { h_.nack_code = static_cast<uint8_t>(c); }
  Tins::PDU* clone() const override { return new Neth(*this); }
};

class Peth : public detail::ExtHeaderPdu<wire::Peth, wire::kHdrPeth, &wire::DecodedFrame::peth,
                                         PduKind::kPeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Peth() = default;
  MRC_TINS_FIELD(reserved0);
  MRC_TINS_FIELD(vendor);
  MRC_TINS_FIELD(probe_id);
  MRC_TINS_FIELD(reserved6);
  MRC_TINS_FIELD(spdcid);
  MRC_TINS_FIELD(dpdcid);
  MRC_TINS_FIELD(ts16);
  MRC_TINS_FIELD(tsr);
  MRC_TINS_FIELD(reserved_tsr);
  MRC_TINS_FIELD(ftype);
  Tins::PDU* clone() const override { return new Peth(*this); }
};

class Erth : public detail::ExtHeaderPdu<wire::Erth, wire::kHdrErth, &wire::DecodedFrame::erth,
                                         PduKind::kErth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Erth() = default;
  MRC_TINS_FIELD(reserved0);
  MRC_TINS_FIELD(rsvd_b1);
  MRC_TINS_FIELD(op);
  MRC_TINS_FIELD(reserved2);
  MRC_TINS_FIELD(vendor);
  MRC_TINS_FIELD(port_status_mask);
  MRC_TINS_FIELD(reserved8);
  MRC_TINS_FIELD(ts16);
  MRC_TINS_FIELD(tsr);
  MRC_TINS_FIELD(reserved_tsr);
  MRC_TINS_FIELD(ftype);
  void op(wire::EndpointOp o) { h_.op = static_cast<uint8_t>(o); }
  Tins::PDU* clone() const override { return new Erth(*this); }
};

class Eeth : public detail::ExtHeaderPdu<wire::Eeth, wire::kHdrEeth, &wire::DecodedFrame::eeth,
                                         PduKind::kEeth> {
 public:
  using ExtHeaderPdu::ExtHeaderPdu;
  Eeth() = default;
  MRC_TINS_FIELD(reserved0);
  MRC_TINS_FIELD(rsvd_b1);
  MRC_TINS_FIELD(op);
  MRC_TINS_FIELD(sva);
  MRC_TINS_FIELD(status);
  MRC_TINS_FIELD(vendor);
  MRC_TINS_FIELD(entropy);
  MRC_TINS_FIELD(port_status_mask);
  MRC_TINS_FIELD(reserved12);
  MRC_TINS_FIELD(ts_echo);
  MRC_TINS_FIELD(svc_time);
  MRC_TINS_FIELD(reserved32);
  void op(wire::EndpointOp o) { h_.op = static_cast<uint8_t>(o); }
  Tins::PDU* clone() const override { return new Eeth(*this); }
};

#undef MRC_TINS_FIELD

// The IB pad bytes between the payload and the ICRC (normally added by serialize()).
class Pad : public Tins::PDU {
 public:
  static constexpr PDUType pdu_flag = pdu_type_of(PduKind::kPad);
  Pad() = default;
  explicit Pad(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  explicit Pad(wire::Bytes data);
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  void bytes(std::vector<uint8_t> b) { bytes_ = std::move(b); }

  uint32_t header_size() const override { return static_cast<uint32_t>(bytes_.size()); }
  PDUType pdu_type() const override { return pdu_flag; }
  Tins::PDU* clone() const override { return new Pad(*this); }

 private:
  void write_serialization(uint8_t* buffer, uint32_t total_sz) override;
  std::vector<uint8_t> bytes_;
};

// The 4-byte invariant CRC trailer. value() is the CRC as carried (read little-endian, like
// DecodedFrame::icrc). serialize() computes it unless told not to.
class Icrc : public Tins::PDU {
 public:
  static constexpr PDUType pdu_flag = pdu_type_of(PduKind::kIcrc);
  Icrc() = default;
  explicit Icrc(uint32_t value) : value_(value) {}
  // Throws Tins::malformed_packet when data is shorter than 4 bytes.
  explicit Icrc(wire::Bytes data);
  uint32_t value() const { return value_; }
  void value(uint32_t v) { value_ = v; }

  uint32_t header_size() const override { return static_cast<uint32_t>(wire::kIcrcBytes); }
  PDUType pdu_type() const override { return pdu_flag; }
  Tins::PDU* clone() const override { return new Icrc(*this); }

 private:
  void write_serialization(uint8_t* buffer, uint32_t total_sz) override;
  uint32_t value_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Serialization with ICRC and UDP checksum
// ---------------------------------------------------------------------------------------------
struct SerializeOptions {
  // kZero (MRP0 sends 0), kCompute (a correct checksum over the final bytes, ICRC included), or
  // kAsIs: keep what libtins wrote, which was summed before the ICRC was filled in and is
  // therefore wrong whenever the ICRC changed (useful for negative tests only).
  wire::UdpChecksumPolicy udp_checksum = wire::UdpChecksumPolicy::kZero;
  // When the IB payload (bytes between the last header and the ICRC) is not a multiple of 4:
  // insert a Pad of zeros and set BTH.PadCnt. An aligned payload leaves PadCnt as set.
  bool pad_payload = true;
  // Append an Icrc PDU when the chain has a Bth and no Icrc, unless the packet is trimmed (an
  // MRC data opcode under an outer DSCP of the profile's TRIMMED or TRIMMED_LASTHOP class).
  bool append_icrc = true;
  // Compute the ICRC into the Icrc PDU's bytes (false keeps Icrc::value(), for negative tests).
  bool fix_icrc = true;
  const wire::WireProfile* profile = nullptr;  // nullptr: wire::mrp0()
};

// Serializes a chain whose outermost PDU is EthernetII (optionally with Dot1Q), IP or IPv6.
// Throws std::invalid_argument when the chain cannot carry an ICRC (a Bth not directly under
// UDP, an Icrc that is not the innermost PDU) or the result does not decode.
std::vector<std::byte> serialize(const Tins::PDU& packet, const SerializeOptions& opts = {});
std::vector<std::byte> serialize(const Tins::PDU& packet, wire::UdpChecksumPolicy udp_checksum);

// ---------------------------------------------------------------------------------------------
// Parsing a UDP payload into a chain of these PDUs
// ---------------------------------------------------------------------------------------------
struct ParseOptions {
  // Whether the packet was trimmed (no ICRC; decoding stops where the bytes end). Unset: taken
  // from the outer IP header's DSCP when the RawPDU sits in a chain, otherwise false.
  std::optional<bool> trimmed;
  const wire::WireProfile* profile = nullptr;  // nullptr: wire::mrp0()
};

struct ParseResult {
  // Bth / extension headers / RawPDU(payload) / Pad / Icrc, as far as decoding got; the bytes
  // it could not decode follow as a RawPDU. Null when not even a BTH fits.
  std::unique_ptr<Tins::PDU> pdu;
  // Empty when the whole payload decoded; otherwise the codec's description with offsets
  // counted from the start of the UDP payload.
  std::string error;
  bool ok() const { return pdu != nullptr && error.empty(); }
};

ParseResult parse_roce(const Tins::RawPDU& udp_payload, const ParseOptions& opts = {});
ParseResult parse_roce(wire::Bytes udp_payload, const ParseOptions& opts = {});

// Replaces the RawPDU under the first UDP to roce_port in `packet` with the parsed chain (in
// place, so find_pdu<mrc::tins::Bth>() works afterwards). Returns an empty string on success,
// otherwise why not; a partial parse still replaces the RawPDU.
std::string expand_roce(Tins::PDU& packet, uint16_t roce_port = wire::kRoceV2Port);

}  // namespace mrc::tins
