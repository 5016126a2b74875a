// mrc_wire: the MRC wire codec (profile MRP0 by default).
//
// The one public header of the wire library. Everything that touches MRC bytes goes through
// here: the endpoint writes packets with encode_frame(), the injector rewrites them in place
// (restamp_wev, fix_icrc), the checker and viewer read them with decode_frame().
//
// Decoding is zero-copy and bounds-checked over std::span<const std::byte>; it never allocates.
// A decode that fails says what is wrong (which header, at which offset, how many bytes were
// needed) in a DecodeError instead of failing silently. Views inside a DecodedFrame point into
// the caller's buffer and live as long as it does.
//
// Byte layouts of the MRC extension headers belong to a WireProfile; MRP0 (docs/wire-format.md)
// is the only one today. Callers hold `const WireProfile&` and never hard-code a layout, so a
// second profile (the OCP text, once public) is a new subclass, not a rewrite.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrc::wire {

using Bytes = std::span<const std::byte>;
using MutBytes = std::span<std::byte>;

inline Bytes as_bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}
inline Bytes as_bytes(const void* p, size_t n) {
  return {static_cast<const std::byte*>(p), n};
}

// ---------------------------------------------------------------------------------------------
// Protocol constants
// ---------------------------------------------------------------------------------------------
inline constexpr uint16_t kRoceV2Port = 4791;
inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr uint16_t kEtherTypeVlan = 0x8100;
inline constexpr uint8_t kIpProtoUdp = 17;
inline constexpr uint8_t kIpProtoIpv6 = 41;
inline constexpr uint8_t kIpProtoRouting = 43;
inline constexpr uint8_t kSrhRoutingType = 4;
inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline constexpr uint32_t kEndpointOpQpn = 2;  // BTH.DestQP of endpoint requests/responses
inline constexpr size_t kIcrcBytes = 4;
inline constexpr size_t kMaxSrhSegments = 8;

// PSN arithmetic mod 2^24: a is "before" b when 0 < (b - a) mod 2^24 < 2^23.
constexpr uint32_t psn_add(uint32_t psn, int64_t delta) {
  return static_cast<uint32_t>((static_cast<int64_t>(psn) + delta) & kPsnMask);
}
constexpr uint32_t psn_diff(uint32_t a, uint32_t b) {
  return (a - b) & kPsnMask;
}  // a - b
constexpr bool psn_lt(uint32_t a, uint32_t b) {
  uint32_t d = psn_diff(b, a);
  return d != 0 && d < (1u << 23);
}
constexpr bool psn_le(uint32_t a, uint32_t b) {
  return a == b || psn_lt(a, b);
}

// BTH opcodes. MRC uses the manufacturer-specific range; IBTA RC opcodes are listed so that
// plain RoCEv2 traffic (rxe captures, mutants sending READ) decodes and can be judged.
enum class Opcode : uint8_t {
  // IBTA RC
  kRcSendFirst = 0x00,
  kRcSendMiddle = 0x01,
  kRcSendLast = 0x02,
  kRcSendLastImm = 0x03,
  kRcSendOnly = 0x04,
  kRcSendOnlyImm = 0x05,
  kRcWriteFirst = 0x06,
  kRcWriteMiddle = 0x07,
  kRcWriteLast = 0x08,
  kRcWriteLastImm = 0x09,
  kRcWriteOnly = 0x0A,
  kRcWriteOnlyImm = 0x0B,
  kRcReadRequest = 0x0C,
  kRcReadResponseFirst = 0x0D,
  kRcReadResponseMiddle = 0x0E,
  kRcReadResponseLast = 0x0F,
  kRcReadResponseOnly = 0x10,
  kRcAcknowledge = 0x11,
  kRcAtomicAcknowledge = 0x12,
  kRcCompareSwap = 0x13,
  kRcFetchAdd = 0x14,
  kRcSendLastInv = 0x16,
  kRcSendOnlyInv = 0x17,
  kCnp = 0x81,
  // MRC (MRP0)
  kWriteFirst = 0xC6,
  kWriteMiddle = 0xC7,
  kWriteLast = 0xC8,
  kWriteLastImm = 0xC9,
  kWriteOnly = 0xCA,
  kWriteOnlyImm = 0xCB,
  kTransportAck = 0xD1,
  kEndpointRequest = 0xD8,
  kEndpointResponse = 0xD9,
  kSack = 0xDC,
  kNack = 0xDD,
  kReliabilityProbe = 0xDE,
};

// What a packet is, independent of the profile's opcode numbers.
enum class PacketKind : uint8_t {
  kUnknown,
  kMrcData,          // WRITE / WRITE_WITH_IMM
  kMrcTransportAck,  // ACK or NAK with AETH
  kMrcSack,
  kMrcNack,
  kMrcProbe,  // reliability probe
  kMrcEndpointRequest,
  kMrcEndpointResponse,
  kRcData,  // IBTA RC SEND/WRITE/READ request (not MRC)
  kRcReadResponse,
  kRcAck,
  kRcAtomic,
  kCnp,
};

// Header presence bits (DecodedFrame::headers, OpcodeInfo::headers).
enum HeaderBit : uint32_t {
  kHdrMeth = 1u << 0,
  kHdrTseth = 1u << 1,
  kHdrReth = 1u << 2,
  kHdrImm = 1u << 3,
  kHdrAeth = 1u << 4,
  kHdrSeth = 1u << 5,
  kHdrCcState = 1u << 6,
  kHdrNeth = 1u << 7,
  kHdrPeth = 1u << 8,
  kHdrErth = 1u << 9,
  kHdrEeth = 1u << 10,
  kHdrAtomicEth = 1u << 11,     // IBTA, 28 B
  kHdrAtomicAckEth = 1u << 12,  // IBTA, 8 B
  kHdrIeth = 1u << 13,          // IBTA invalidate, 4 B
};

enum class MessagePosition : uint8_t { kNone, kFirst, kMiddle, kLast, kOnly };

struct OpcodeInfo {
  uint8_t opcode = 0;
  std::string_view name;  // e.g. "WRITE_ONLY_IMM", "RC_SEND_FIRST"
  PacketKind kind = PacketKind::kUnknown;
  MessagePosition position = MessagePosition::kNone;
  bool has_imm = false;
  bool mrc = false;      // true for the profile's own (MRC) opcodes
  uint32_t headers = 0;  // HeaderBit mask, TSETH is added at decode time iff BTH.TS=1
  bool has_payload = false;
};

// ---------------------------------------------------------------------------------------------
// Header values. Reserved fields are kept so that decode -> encode is byte-identical and the
// checker can flag non-zero reserved bits.
// ---------------------------------------------------------------------------------------------
using MacAddr = std::array<uint8_t, 6>;
using Ipv4Addr = std::array<uint8_t, 4>;
using Ipv6Addr = std::array<uint8_t, 16>;

struct EthHeader {
  MacAddr dst{};
  MacAddr src{};
  bool has_vlan = false;
  uint16_t vlan_tci = 0;  // PCP(3) DEI(1) VID(12)
  uint16_t ethertype = 0;
};

struct Ipv4Header {
  uint8_t ihl = 5;  // 32-bit words; options are kept as a view
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  uint16_t total_length = 0;
  uint16_t id = 0;
  uint16_t flags_frag = 0x4000;  // DF
  uint8_t ttl = 64;
  uint8_t protocol = kIpProtoUdp;
  uint16_t checksum = 0;
  Ipv4Addr src{};
  Ipv4Addr dst{};
  Bytes options{};
};

struct Ipv6Header {
  uint8_t dscp = 0;
  uint8_t ecn = 0;
  uint32_t flow_label = 0;  // 20 bits
  uint16_t payload_length = 0;
  uint8_t next_header = kIpProtoUdp;
  uint8_t hop_limit = 64;
  Ipv6Addr src{};
  Ipv6Addr dst{};
};

// RFC 8754 segment routing header. segments[0] is the LAST segment (final destination).
struct Srh {
  uint8_t next_header = kIpProtoIpv6;
  uint8_t hdr_ext_len = 2;
  uint8_t routing_type = kSrhRoutingType;
  uint8_t segments_left = 1;
  uint8_t last_entry = 0;
  uint8_t flags = 0;
  uint16_t tag = 0;
  uint8_t segment_count = 1;
  std::array<Ipv6Addr, kMaxSrhSegments> segments{};
  Bytes tlvs{};  // bytes after the segment list inside hdr_ext_len
};

struct UdpHeader {
  uint16_t sport = 0;
  uint16_t dport = kRoceV2Port;
  uint16_t length = 0;
  uint16_t checksum = 0;
};

struct Bth {
  uint8_t opcode = 0;
  bool se = false;
  bool mig_req = false;  // IBTA M bit; MRP0 sends 0
  uint8_t pad_count = 0;
  uint8_t tver = 0;
  uint16_t pkey = 0xFFFF;
  uint8_t variant = 0;  // byte 4: reserved/FECN/BECN, masked in ICRC
  uint32_t dest_qp = 0;
  bool ack_req = false;
  bool rsvd_b8_6 = false;  // byte 8 bit 6 (reserved)
  bool rtx = false;        // MRC: this PSN was sent before
  bool ts = false;         // MRC: TSETH follows METH
  uint8_t rsvd_b8_lo = 0;  // byte 8 bits 3..0 (IBTA: reserved 7 bits incl. the flags above)
  uint32_t psn = 0;
};

struct Meth {
  uint16_t rqmsn = 0;
  uint16_t msn = 0;
};

struct Tseth {
  uint16_t ts16 = 0;  // 128 ns ticks mod 2^16
  bool tsr = false;
  uint16_t reserved = 0;  // 11 bits
  uint8_t ftype = 1;      // 4 bits
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
};

struct ImmDt {
  uint32_t imm = 0;
};

struct Aeth {
  uint8_t syndrome = 0x1F;
  uint32_t msn = 0;  // 24 bits
};

// SACK M field / NACK M field (ECN echo and path verdict).
enum class SackM : uint8_t { kNone = 0, kSkipOnce = 1, kAlwaysSkip = 2, kInvalid = 3 };

struct Seth {
  uint8_t byte0 = 0;    // type/nxt in other renderings; reserved in MRP0
  uint8_t m = 0;        // SackM
  bool pr = false;      // answer to a reliability probe
  uint8_t rsvd_b1 = 0;  // the remaining bits of byte 1 (bit7, bits4..2, bit0), kept as a mask
  int16_t ack_psn_offset = 0;  // or probe_id when pr
  uint32_t entropy = 0;
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  uint8_t port_status = 0;
  uint32_t cack_psn = 0;
  uint8_t cc_type = 0;
  bool psv = false;           // port_status valid
  bool sva = false;           // service time added to ts_echo
  uint8_t cc_flags_rsvd = 0;  // cc_flags bits 3..2
  uint8_t mpr = 0;
  int16_t sack_offset = 1;
  uint64_t sack_bitmap = 0;
};

struct CcState {
  uint16_t ts_echo = 0;
  bool rsvd_bit = false;
  uint16_t ooo_count = 0;  // 15 bits
  bool rc = false;
  uint8_t rcv_cwnd_pen = 0;  // 7 bits
  uint32_t rcvd_bytes = 0;   // 24 bits, 256-byte units
};

enum class NackCode : uint8_t {
  kTrimmed = 0x01,
  kTrimmedLastHop = 0x02,
  kNoBitmap = 0x06,
  kNoPktBuffer = 0x07,
  kNoResource = 0x0A,
  kPsnOorWindow = 0x0B,
  kUnexpEvent = 0x19,
};
std::string_view nack_code_name(uint8_t code);  // "" when not a valid MRP0 code

struct Neth {
  uint16_t reserved0 = 0;
  uint8_t nack_code = 0;
  uint8_t vendor_code = 0;
  uint32_t entropy = 0;
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  uint8_t reserved12 = 0;
  uint32_t nack_psn = 0;
  uint8_t cc_type = 0;
  bool psv = false;
  bool sva = false;
  uint8_t cc_flags_rsvd = 0;
  uint8_t m = 0;
  uint8_t reserved17 = 0;  // low 6 bits of byte 17
  uint16_t ts_echo = 0;
};

struct Peth {
  std::array<uint8_t, 3> reserved0{};
  uint8_t vendor = 0;
  uint16_t probe_id = 0;
  uint16_t reserved6 = 0;
  uint16_t spdcid = 0;
  uint16_t dpdcid = 0;
  uint16_t ts16 = 0;
  bool tsr = false;
  uint16_t reserved_tsr = 0;  // 11 bits
  uint8_t ftype = 1;
};

enum class EndpointOp : uint8_t { kPortStatusUpdate = 0, kEvProbe = 1 };

struct Erth {
  uint8_t reserved0 = 0;
  uint8_t rsvd_b1 = 0;  // bits 7..2 of byte 1
  uint8_t op = 0;       // EndpointOp
  uint8_t reserved2 = 0;
  uint8_t vendor = 0;
  uint32_t port_status_mask = 0;
  uint32_t reserved8 = 0;
  uint16_t ts16 = 0;
  bool tsr = false;
  uint16_t reserved_tsr = 0;
  uint8_t ftype = 1;
};

struct Eeth {
  uint8_t reserved0 = 0;
  uint8_t rsvd_b1 = 0;  // bits 7..6 and 2..0 of byte 1
  uint8_t op = 0;
  bool sva = false;
  uint8_t status = 0;
  uint8_t vendor = 0;
  uint32_t entropy = 0;
  uint32_t port_status_mask = 0;
  std::array<uint8_t, 16> reserved12{};
  uint16_t ts_echo = 0;
  uint16_t svc_time = 0;
  uint32_t reserved32 = 0;
};

// IBTA headers only needed to decode plain RoCEv2 RC traffic.
struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;
  uint64_t compare = 0;
};
struct AtomicAckEth {
  uint64_t orig = 0;
};

// ---------------------------------------------------------------------------------------------
// EV carriage
// ---------------------------------------------------------------------------------------------
enum class EvFormat : uint8_t { kUdp, kStev, kSrv6 };
// Which half of the 32-bit wire EV goes into the UDP source port.
enum class EvStripe : uint8_t { kLowInSport, kHighInSport };

std::string_view ev_format_name(EvFormat f);
std::optional<EvFormat> parse_ev_format(std::string_view s);

// Where the WEV lives in the headers of one packet.
struct EvCarriage {
  uint16_t sport = 0;
  uint32_t flow_label = 0;  // 20 bits
};
EvCarriage carry_wev(EvFormat format, EvStripe stripe, uint32_t wev);
uint32_t wev_from_carriage(EvFormat format, EvStripe stripe, uint16_t sport, uint32_t flow_label);
struct WireParams;
// The same under every open choice of a profile: the stripe, the ECMP flow-label content and the
// SRv6 carriage (with Srv6WevCarriage::kNone the carriage is empty and the WEV reads as 0).
EvCarriage carry_wev(const WireParams& p, EvFormat format, uint32_t wev);
uint32_t wev_from_carriage(const WireParams& p, EvFormat format, uint16_t sport,
                           uint32_t flow_label);

// ---------------------------------------------------------------------------------------------
// EV expansion (OCP mrc_ctl.h algorithm; see docs/wire-format.md)
// ---------------------------------------------------------------------------------------------
using EvBytes = std::array<uint8_t, 32>;

struct EvField {
  uint32_t width = 0;
  uint32_t init_val = 0;
  uint32_t min_val = 0;
  uint32_t max_val = 0;
  uint32_t mask = 0;
};

struct EvExpandResult {
  bool ok = false;
  EvBytes expanded{};
  std::string error;  // set when !ok, names the offending field
};

// format_widths: the EV format profile's field widths in bits (Σ ≤ 256).
// fields: the EV profile's fields (count ≤ format fields). compact: the compact EV bytes.
EvExpandResult expand_ev(std::span<const uint32_t> format_widths, std::span<const EvField> fields,
                         const EvBytes& compact);
// Checks the profile restrictions of mrc_ctl.h; empty string when valid.
std::string validate_ev_profile(std::span<const uint32_t> format_widths,
                                std::span<const EvField> fields);

// ---------------------------------------------------------------------------------------------
// SRv6 uSID (RFC 9800 NEXT-C-SID, uN flavour)
// ---------------------------------------------------------------------------------------------
// Shifts the uSID container after the locator block: DA := DA[0:lbl) || DA[lbl+nfl:128) || 0.
// Returns false (and leaves da untouched) when the argument is zero (end of container).
bool usid_shift(Ipv6Addr& da, unsigned lbl_bits = 32, unsigned nfl_bits = 16);
// The active uSID (the nfl bits after the locator block).
uint32_t usid_active(const Ipv6Addr& da, unsigned lbl_bits = 32, unsigned nfl_bits = 16);

// ---------------------------------------------------------------------------------------------
// Checksums and ICRC
// ---------------------------------------------------------------------------------------------
uint32_t crc32(Bytes data, uint32_t crc = 0);  // zlib-compatible (reflected, ~init, ~final)
// The same CRC with the table method only (no carry-less multiply): the reference in tests.
uint32_t crc32_portable(Bytes data, uint32_t crc = 0);
// The CRC-32 methods, widest last. crc32() and the ICRC use the one that ran fastest on this
// CPU when the process first needed a CRC (crc_calibration(): each method CPUID allows, timed
// over frame-sized buffers); MRC_CRC_PATH=table|pclmul|vpclmul512 in the environment forces
// one. Tests and benchmarks may compare them or force one with set_crc_path().
enum class CrcPath : uint8_t {
  kTable,       // slicing-by-8 tables, any CPU
  kPclmul,      // x86-64 PCLMULQDQ + SSE4.1, 128-bit folding
  kVpclmul512,  // x86-64 AVX-512F + VPCLMULQDQ, 512-bit folding
};
bool crc_path_supported(CrcPath path);
const char* crc_path_name(CrcPath path);  // "table", "pclmul", "vpclmul512"
struct CrcCalibration {
  CrcPath chosen = CrcPath::kTable;
  bool supported[3] = {};     // indexed by CrcPath
  double ns_per_kib[3] = {};  // best of five rounds over 256-, 1024- and 4096-byte buffers
  const char* how = "";       // "calibrated", "MRC_CRC_PATH", or why the variable was ignored
  uint32_t sink = 0;          // keeps the timed work from being optimised away
};
// The start-up timing behind crc_path()'s initial method (computed once, on first use, with
// MRC_CRC_PATH as `forced`).
const CrcCalibration& crc_calibration();
// One calibration run: times every method the CPU has (~0.3 ms); `forced` names a method to
// take instead (ignored, and `how` says so, when it names none the CPU has).
CrcCalibration calibrate_crc_paths(const char* forced = nullptr);
CrcPath crc_path();  // the method crc32() and compute_icrc() use now
// Makes crc32() and compute_icrc() use `path`; false (nothing changed) when the CPU lacks it.
// Not thread-safe: for tests and benchmarks.
bool set_crc_path(CrcPath path);
// crc32() with one method (the table when the CPU lacks it).
uint32_t crc32_with(CrcPath path, Bytes data, uint32_t crc = 0);
uint16_t internet_checksum(Bytes data, uint32_t initial_sum = 0);

// ---------------------------------------------------------------------------------------------
// The decoded frame
// ---------------------------------------------------------------------------------------------
enum class Layer : uint8_t {
  kFrame,
  kEthernet,
  kVlan,
  kIpv4,
  kIpv6,
  kSrh,
  kInnerIpv6,
  kUdp,
  kBth,
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
  kAtomicEth,
  kAtomicAckEth,
  kIeth,
  kPayload,
  kIcrc
};
std::string_view layer_name(Layer l);

enum class DecodeErrorCode : uint8_t {
  kOk,
  kTruncated,        // a header does not fit
  kBadVersion,       // IP version nibble wrong
  kBadLength,        // a length field disagrees with the bytes present
  kBadHeaderLength,  // IPv4 IHL < 5, SRH hdr_ext_len inconsistent
  kUnknownOpcode,    // BTH opcode not in the profile
  kBadPad,           // pad count larger than payload
  kTooManySegments,  // SRH with more than kMaxSrhSegments
};
std::string_view decode_error_name(DecodeErrorCode c);

struct DecodeError {
  DecodeErrorCode code = DecodeErrorCode::kOk;
  Layer layer = Layer::kFrame;
  uint32_t offset = 0;  // byte offset in the frame where the layer starts
  uint32_t need = 0;    // bytes the layer needs (kTruncated, kBadLength)
  uint32_t have = 0;    // bytes present
  uint32_t value = 0;   // offending value (opcode, version, length field ...)
  explicit operator bool() const { return code != DecodeErrorCode::kOk; }
  std::string describe() const;  // "truncated RETH at offset 70: need 16 bytes, have 5"
};

enum class LinkType : uint8_t { kEthernet, kRawIp };  // pcap DLT_EN10MB / DLT_RAW

class WireProfile;
struct DscpPlan;

// What decode_frame() asks the profile for on every RoCE frame, asked once: whether a UDP port
// is a RoCE port, the opcode table, the DSCP plan of trimmed packets and, per opcode, its
// extension headers in the profile's order with their sizes. A caller that decodes many frames
// with one profile (the checker's reading thread) builds it once and passes it in
// DecodeOptions::layout: decode_frame() then makes one virtual call per extension header
// (decode_header) instead of five lookups and two per header. The decoded frame is the same with
// or without it. Read-only once built, so threads may share one.
struct DecodeLayout {
  static constexpr size_t kMaxHeaders = 16;  // a profile with a longer header order gets none
  // The headers after the BTH of one opcode (with TSETH or without), in order.
  struct Stack {
    uint8_t n = 0;
    std::array<HeaderBit, kMaxHeaders> bits{};
    std::array<uint8_t, kMaxHeaders> bytes{};
  };
  explicit DecodeLayout(const WireProfile& profile);
  const WireProfile* profile = nullptr;
  bool usable = false;  // false: decode_frame() asks the profile, as without a layout
  // This layout when it was built from p and is usable, else null (the caller asks p).
  const DecodeLayout* for_profile(const WireProfile& p) const {
    return usable && profile == &p ? this : nullptr;
  }
  const DscpPlan* dscp = nullptr;  // the profile's own
  std::array<const OpcodeInfo*, 256> ops{};
  // [opcode][1: a data opcode with BTH.TS=1, which adds TSETH]
  std::array<std::array<Stack, 2>, 256> stacks{};
  std::array<uint64_t, 65536 / 64> roce_ports{};  // a bit per UDP port
  bool is_roce_port(uint16_t port) const { return (roce_ports[port >> 6] >> (port & 63)) & 1; }
};

struct DecodeOptions {
  LinkType link = LinkType::kEthernet;
  bool verify_icrc = false;  // costs a CRC over the whole packet; result in icrc_ok, not an error
  uint16_t roce_port = 0;    // the only MRC destination port; 0: the profile's ports
  // Built from the profile passed to decode_frame(); one built from another profile is ignored.
  const DecodeLayout* layout = nullptr;
};

struct DecodedFrame {
  Bytes frame{};
  DecodeError error{};

  bool has_eth = false;
  EthHeader eth{};

  uint8_t l3 = 0;  // 0 (not IP), 4 or 6: the OUTER IP header
  Ipv4Header ip4{};
  Ipv6Header ip6{};
  bool has_srh = false;
  Srh srh{};
  bool has_inner_ip6 = false;  // IPv6-in-IPv6 (SRv6 mode)
  Ipv6Header inner_ip6{};

  bool has_udp = false;
  UdpHeader udp{};

  bool roce = false;  // UDP to roce_port with a BTH
  Bth bth{};
  const OpcodeInfo* op = nullptr;  // null when the opcode is unknown to the profile
  uint32_t headers = 0;            // HeaderBit mask actually present
  Meth meth{};
  Tseth tseth{};
  Reth reth{};
  ImmDt immdt{};
  Aeth aeth{};
  Seth seth{};
  CcState cc_state{};
  Neth neth{};
  Peth peth{};
  Erth erth{};
  Eeth eeth{};
  AtomicEth atomic_eth{};
  AtomicAckEth atomic_ack_eth{};
  uint32_t ieth = 0;

  Bytes payload{};  // IB payload (without pad); truncated for trimmed packets
  uint8_t pad_bytes = 0;
  Bytes pad_data{};  // the pad bytes as carried (encode writes zeros when empty)
  Bytes trailer{};   // frame bytes after the IP packet (Ethernet padding), kept for round trips
  bool has_icrc = false;
  uint32_t icrc = 0;  // as carried (read little-endian)
  bool icrc_checked = false;
  bool icrc_ok = false;
  // A trimmed data packet (outer DSCP is the profile's TRIMMED or TRIMMED_LASTHOP): decoding
  // stops where the bytes end, with no error and no ICRC. encode_frame writes no ICRC either.
  bool trimmed = false;

  // Offsets into frame (bytes) of each layer, 0xFFFF when absent; used for in-place rewrites.
  uint16_t off_l3 = 0xFFFF;
  uint16_t off_srh = 0xFFFF;
  uint16_t off_inner = 0xFFFF;
  uint16_t off_udp = 0xFFFF;
  uint16_t off_bth = 0xFFFF;
  uint16_t off_payload = 0xFFFF;

  // The IP header that carries the UDP/RoCE packet (inner in SRv6 mode).
  const Ipv6Header* roce_ip6() const {
    return has_inner_ip6 ? &inner_ip6 : (l3 == 6 ? &ip6 : nullptr);
  }
  // DSCP/ECN as a switch sees them (outer header).
  uint8_t dscp() const { return l3 == 4 ? ip4.dscp : (l3 == 6 ? ip6.dscp : 0); }
  uint8_t ecn() const { return l3 == 4 ? ip4.ecn : (l3 == 6 ? ip6.ecn : 0); }
  uint32_t flow_label() const { return l3 == 6 ? ip6.flow_label : 0; }
  bool has(HeaderBit h) const { return (headers & h) != 0; }
  // The format the frame is carried in, guessed from its headers (see wev_of).
  EvFormat ev_format() const {
    return has_inner_ip6 ? EvFormat::kSrv6
                         : (l3 == 6 && ip6.flow_label != 0 ? EvFormat::kStev : EvFormat::kUdp);
  }
};

class WireProfile;
const WireProfile& mrp0();

// The BTH alone (12 bytes; every profile shares the IBTA layout). decode_bth returns false when
// fewer than 12 bytes are given; encode_bth when out is shorter than 12.
inline constexpr size_t kBthBytes = 12;
bool decode_bth(Bytes in, Bth& out);
bool encode_bth(const Bth& bth, MutBytes out);
// The extension headers that follow this BTH under `profile`: the opcode's stack, plus TSETH
// on data packets with TS=1. 0 for opcodes the profile does not know.
uint32_t header_stack(const WireProfile& profile, const Bth& bth);

// Decodes one frame. Returns false when decoding stopped at an error (out.error says why);
// headers decoded before the error remain valid in `out`. A non-RoCE frame is not an error.
bool decode_frame(Bytes frame, DecodedFrame& out, const DecodeOptions& opts = {},
                  const WireProfile& profile = mrp0());

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------
enum class UdpChecksumPolicy : uint8_t { kZero, kCompute, kAsIs };

struct EncodeOptions {
  bool fix_lengths = true;  // IP total/payload length, UDP length, SRH fields, BTH pad count
  bool fix_ip_checksum = true;
  UdpChecksumPolicy udp_checksum = UdpChecksumPolicy::kZero;
  bool fix_icrc = true;
  bool pad_payload = true;  // append pad bytes (zero) to a 4-byte multiple
};

// A frame to build: which layers (has_eth, l3, has_srh, has_inner_ip6, has_udp, roce), their
// header values, the payload. `headers` selects the IB extension headers after BTH; when it is
// 0 the profile's stack for bth.opcode is used (plus TSETH when bth.ts on data packets).
// An ICRC is appended unless `trimmed`. Reuses DecodedFrame so that decode -> encode
// round-trips byte for byte.
using FrameSpec = DecodedFrame;

// Returns the number of bytes written, or 0 when `out` is too small or the spec is invalid
// (error set). Never writes past out.size().
size_t encode_frame(const FrameSpec& spec, MutBytes out, const EncodeOptions& opts = {},
                    const WireProfile& profile = mrp0(), std::string* error = nullptr);
std::vector<std::byte> encode_frame(const FrameSpec& spec, const EncodeOptions& opts = {},
                                    const WireProfile& profile = mrp0());
// Bytes the frame will take.
size_t encoded_size(const FrameSpec& spec, const EncodeOptions& opts = {},
                    const WireProfile& profile = mrp0());

// ---------------------------------------------------------------------------------------------
// ICRC and in-place rewrites on a decoded frame
// ---------------------------------------------------------------------------------------------
// ICRC over the RoCE packet of an already decoded frame (inner IPv6 header in SRv6 mode).
// Returns nullopt when the frame has no complete RoCE packet.
std::optional<uint32_t> compute_icrc(const DecodedFrame& f);
// compute_icrc() of n frames at once: out[i] = compute_icrc(*frames[i]). On the PCLMULQDQ path
// the CRCs of plain IPv6 packets are folded four at a time, interleaved: one packet's folds each
// wait for the one before (a latency chain), so frames of a few hundred bytes leave the
// multiplier idle most of the time unless several packets share it.
void compute_icrcs(const DecodedFrame* const* frames, size_t n, std::optional<uint32_t>* out);
// Verifies the carried ICRC; false for frames without one.
bool verify_icrc(const DecodedFrame& f);
// Rewrites the ICRC trailer in place. Returns false when the frame has no RoCE packet.
bool fix_icrc(MutBytes frame, const DecodedFrame& f);
// UDP checksum of the RoCE packet (pseudo-header with the final destination).
std::optional<uint16_t> compute_udp_checksum(const DecodedFrame& f);
bool fix_udp_checksum(MutBytes frame, const DecodedFrame& f, UdpChecksumPolicy policy);
// Stamps a WEV into sport/flow label(s) and fixes the ICRC (and a non-zero UDP checksum).
bool restamp_wev(MutBytes frame, DecodedFrame& f, EvFormat format, EvStripe stripe, uint32_t wev);
// Rewrites DSCP/ECN of the outer header (and inner in SRv6 mode), fixing the IPv4 checksum.
bool rewrite_dscp_ecn(MutBytes frame, DecodedFrame& f, std::optional<uint8_t> dscp,
                      std::optional<uint8_t> ecn);
// Trims an MRC data packet in place the way a trimming switch does: keeps the first
// profile.min_trim_bytes() after UDP (BTH+METH+TSETH in MRP0), fixes the IP and UDP lengths,
// sets `dscp` (the profile's TRIMMED or TRIMMED_LASTHOP) in the outer and inner header with
// the IPv4 checksum, and recomputes a non-zero UDP checksum. `f` is the decoded `frame`.
// Returns the new frame length (the caller shrinks its buffer), or 0 with `error` set when the
// frame is not an untrimmed MRC data packet longer than the trimmed size.
size_t trim_frame(MutBytes frame, const DecodedFrame& f, uint8_t dscp,
                  const WireProfile& profile = mrp0(), std::string* error = nullptr);
// The WEV a decoded packet carries in `format` (sport + flow label of the RoCE IP header).
// Prefer this over DecodedFrame::ev_format(), which can only guess (a STEV packet whose
// flow-label half is 0 looks like UDP carriage).
uint32_t wev_of(const DecodedFrame& f, EvFormat format, EvStripe stripe);

// ---------------------------------------------------------------------------------------------
// Wire profile: everything about MRC bytes that a second profile could change.
// ---------------------------------------------------------------------------------------------
struct DscpPlan {
  uint8_t no_trim = 0;
  uint8_t trimmable = 4;
  uint8_t trimmable_retx = 8;
  uint8_t trimmed = 12;
  uint8_t trimmed_lasthop = 16;
  uint8_t control = 46;
  bool operator==(const DscpPlan&) const = default;
};

// The open choices of the public sources, one parameter each (docs/wire-format.md section 19):
// our default (MRP0) and the alternatives seen in independent reconstructions. A profile file
// (TOML, load_wire_profile) sets them; every tool that reads or writes MRC bytes accepts one.
enum class EcmpFlowLabel : uint8_t {
  kZero,  // UDP EV format over IPv6: flow label 0, ECMP hashes the port only (MRP0)
  kEv,    // the 16-bit EV also in the flow label (MRC-Client's ECMP mode)
};
enum class Srv6OuterTc : uint8_t {
  kCopy,  // outer traffic class = inner DSCP/ECN (MRP0)
  kZero,  // outer traffic class 0 (MRC-Client)
};
enum class Srv6WevCarriage : uint8_t {
  kSportAndFlowLabel,  // WEV in the UDP source port and both flow labels, per the stripe (MRP0)
  kNone,               // only the outer DA names the path: sport and flow labels carry no WEV
};
struct WireParams {
  std::string name = "MRP0";
  std::vector<uint16_t> udp_ports{kRoceV2Port};  // MRC destination ports; the first is sent to
  EvStripe ev_stripe = EvStripe::kLowInSport;
  EcmpFlowLabel ecmp_flow_label = EcmpFlowLabel::kZero;
  uint8_t eeth_op_shift = 4;  // EETH byte 1: op in bits 5..4 (4, MRP0) or 3..2 (2)
  uint8_t eeth_sva_bit = 3;   // EETH byte 1 bit of SVA (must not overlap the op bits)
  bool sva = true;            // service time signalled by SVA (SETH/NETH byte 16 bit 0, EETH)
  uint8_t cc_type = 0;        // SETH/NETH cc_type a sender writes for NSCC (MRP0 0, others 2)
  uint16_t trim_bytes = 20;   // bytes after UDP a trimmed data packet keeps (BTH+METH+TSETH)
  Srv6OuterTc srv6_outer_tc = Srv6OuterTc::kCopy;
  Srv6WevCarriage srv6_wev = Srv6WevCarriage::kSportAndFlowLabel;
  DscpPlan dscp;

  bool is_roce_port(uint16_t port) const;
  bool operator==(const WireParams&) const = default;
};
// Empty when the parameters are consistent, else what is wrong ("eeth_sva_bit: bit 3 overlaps
// the EETH op bits 3..2").
std::string validate_wire_params(const WireParams& p);

class WireProfile {
 public:
  virtual ~WireProfile() = default;
  virtual std::string_view name() const = 0;
  // Opcode table: nullptr for opcodes the profile does not know.
  virtual const OpcodeInfo* opcode_info(uint8_t opcode) const = 0;
  virtual uint8_t opcode_of(PacketKind kind, MessagePosition pos, bool imm) const = 0;
  // Size in bytes of one extension header (a single HeaderBit).
  virtual size_t header_size(HeaderBit h) const = 0;
  // Decodes / encodes one extension header from/to exactly header_size(h) bytes.
  virtual void decode_header(HeaderBit h, Bytes in, DecodedFrame& out) const = 0;
  virtual void encode_header(HeaderBit h, const DecodedFrame& in, MutBytes out) const = 0;
  // Order in which extension headers follow the BTH.
  virtual std::span<const HeaderBit> header_order() const = 0;
  virtual EvStripe ev_stripe() const = 0;
  virtual const DscpPlan& dscp() const = 0;
  // Bytes after UDP a trimmed data packet keeps (BTH+METH+TSETH in MRP0).
  virtual size_t min_trim_bytes() const = 0;
  // Every open choice this profile was built with (name, ports, stripe, ...).
  virtual const WireParams& params() const = 0;
  bool is_roce_port(uint16_t port) const { return params().is_roce_port(port); }
  uint16_t roce_port() const { return params().udp_ports.front(); }
};

// MRP0 with a different DSCP plan or stripe, for deployments that configure them.
std::unique_ptr<WireProfile> make_mrp0(const DscpPlan& dscp, EvStripe stripe);
// MRP0's layouts with every open choice as given (validate_wire_params first).
std::unique_ptr<WireProfile> make_profile(const WireParams& params);

// Profile files (TOML; format in docs/wire-format.md section 19, examples in
// scenarios/profiles/wire-*.toml). Every key is optional; absent keys keep MRP0's value.
// On error returns false with `error` naming the origin, the key and the line:
// "v.toml:3: udp.ports: expected an array of ports 1..65535".
bool parse_wire_params(std::string_view toml_text, std::string_view origin, WireParams& out,
                       std::string& error);
bool load_wire_params(const std::string& path, WireParams& out, std::string& error);
// The profile file text for `p` (every key, with a comment per key); parse_wire_params reads it
// back to `p`. `comments` (key -> text) replaces the default comment of a key (mrct detect puts
// its confidence there).
std::string format_wire_params(
    const WireParams& p, const std::vector<std::pair<std::string, std::string>>& comments = {});
// A profile by name ("MRP0" or a registered one) or from a file: what `--profile X` means in
// every tool. A name is tried first; anything containing '/' or ending in .toml is a file.
// Returns nullptr with `error` set.
std::unique_ptr<WireProfile> open_wire_profile(const std::string& name_or_path, std::string& error);

// Profiles by name, so tools select one with `--profile NAME`. "MRP0" is always registered; a
// new profile registers itself once at start-up (a later one with the same name replaces it).
// Not thread-safe: register before starting threads.
void register_profile(std::unique_ptr<WireProfile> profile);
const WireProfile* find_profile(std::string_view name);
std::vector<std::string> profile_names();

// ---------------------------------------------------------------------------------------------
// Capture files: pcap (us/ns) and pcapng, read and write.
// ---------------------------------------------------------------------------------------------
struct CaptureRecord {
  uint64_t ts_ns = 0;
  uint32_t orig_len = 0;
  // Captured bytes, in the reader's copy of the input: from a file or memory, valid until the
  // reader is reopened or destroyed; from a pipe or device (read as it is parsed, in bounded
  // memory), until the second call to next() after the one that returned them.
  Bytes data{};
  LinkType link = LinkType::kEthernet;
  uint32_t interface_id = 0;   // pcapng interface, 0 for pcap
  std::string_view comment{};  // pcapng opt_comment, if any
};

class CaptureReader {
 public:
  CaptureReader();
  ~CaptureReader();
  CaptureReader(const CaptureReader&) = delete;
  CaptureReader& operator=(const CaptureReader&) = delete;
  // Opens pcap or pcapng (detected from the magic). False with error() set on failure.
  bool open(const std::string& path);
  bool open_memory(Bytes data);  // the caller keeps data alive
  // Next record: true when one was read; false at end of file or on error (check error()).
  bool next(CaptureRecord& rec);
  const std::string& error() const;  // "file.pcap: truncated record header at byte 1234"
  bool is_pcapng() const;
  uint64_t records_read() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class CaptureFormat : uint8_t { kPcap, kPcapng };

class CaptureWriter {
 public:
  CaptureWriter();
  ~CaptureWriter();
  CaptureWriter(const CaptureWriter&) = delete;
  CaptureWriter& operator=(const CaptureWriter&) = delete;
  // Writes to path.tmp and renames on close(), so a failed run leaves no half-written file.
  bool open(const std::string& path, CaptureFormat format, LinkType link = LinkType::kEthernet,
            uint32_t snaplen = 262144);
  bool write(uint64_t ts_ns, Bytes data, uint32_t orig_len = 0, std::string_view comment = {});
  bool close();
  const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Presentation: one-line summary, field tree, JSON (the decoder JSON contract of the
// architecture: frame, ts_ns, l3, src, dst, sport, dport, flow_label, dscp, ecn, opcode,
// dest_qp, psn, ack_req, pad, icrc, icrc_ok, reth.va ...).
// ---------------------------------------------------------------------------------------------
std::string format_ipv6(const Ipv6Addr& a);
std::string format_ipv4(const Ipv4Addr& a);
std::optional<Ipv6Addr> parse_ipv6(std::string_view s);
std::optional<Ipv4Addr> parse_ipv4(std::string_view s);

void append_summary(std::string& out, const DecodedFrame& f);
void append_field_tree(std::string& out, const DecodedFrame& f);
// `profile` decides how "wev" reads the carriage (stripe, ECMP flow label, SRv6 carriage).
void append_json(std::string& out, const DecodedFrame& f, uint64_t frame_no, uint64_t ts_ns,
                 const WireProfile& profile = mrp0());

}  // namespace mrc::wire
