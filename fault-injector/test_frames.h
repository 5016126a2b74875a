// Test-only helpers: MRP0 frames crafted with the codec, and the statistics bounds the
// rate tests use. Not part of the library.
#pragma once

#include <cmath>
#include <optional>
#include <vector>

#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::faults::testing {

using wire::samples::Carrier;

struct DataSpec {
  Carrier carrier = Carrier::kUdp6;
  uint32_t wev = 0x00031234;
  uint32_t qpn = 0x22;
  uint32_t psn = 0;
  uint8_t opcode = 0xC7;  // WRITE_MIDDLE
  size_t payload = 1024;
  std::optional<uint8_t> dscp = std::nullopt;  // default: TRIMMABLE (TRIMMABLE_RETX when rtx)
  uint8_t ecn = 2;                             // ECT(0)
  bool rtx = false;
  bool udp_checksum = false;
};

inline std::vector<std::byte> data_frame(const DataSpec& d) {
  using namespace wire;
  const auto& rq = samples::requestor();
  const auto& rs = samples::responder();
  FrameSpec s = samples::base_spec(d.carrier, rq, rs, d.wev);
  const uint8_t dscp =
      d.dscp.value_or(d.rtx ? mrp0().dscp().trimmable_retx : mrp0().dscp().trimmable);
  s.ip4.dscp = s.ip6.dscp = dscp;
  s.ip4.ecn = s.ip6.ecn = d.ecn;
  if (s.has_inner_ip6) {
    s.inner_ip6.dscp = dscp;
    s.inner_ip6.ecn = d.ecn;
  }
  s.bth.opcode = d.opcode;
  s.bth.dest_qp = d.qpn;
  s.bth.psn = d.psn & kPsnMask;
  s.bth.ts = true;
  s.bth.rtx = d.rtx;
  s.meth = {0, 7};
  s.tseth = {0x1234, false, 0, 1};
  s.reth = {0x10000, 0xabc, static_cast<uint32_t>(d.payload)};
  s.immdt.imm = 0x01020304;
  const auto& pay = samples::pattern(d.payload, static_cast<uint8_t>(d.psn));
  s.payload = Bytes(pay.data(), pay.size());
  EncodeOptions o;
  o.udp_checksum = d.udp_checksum ? UdpChecksumPolicy::kCompute : UdpChecksumPolicy::kZero;
  return encode_frame(s, o);
}

// A TRANSPORT_ACK (a control packet) from the responder.
inline std::vector<std::byte> ack_frame(Carrier c, uint32_t wev, uint32_t qpn, uint32_t psn) {
  using namespace wire;
  FrameSpec s = samples::base_spec(c, samples::responder(), samples::requestor(), wev);
  s.ip4.dscp = s.ip6.dscp = mrp0().dscp().control;
  if (s.has_inner_ip6) s.inner_ip6.dscp = mrp0().dscp().control;
  s.bth.opcode = static_cast<uint8_t>(Opcode::kTransportAck);
  s.bth.dest_qp = qpn;
  s.bth.psn = psn & kPsnMask;
  s.aeth = {0x1F, 3};
  return encode_frame(s);
}

// |observed - n p| must stay within k standard deviations of a Binomial(n, p).
inline double binomial_bound(double n, double p, double k = 5.0) {
  return k * std::sqrt(n * p * (1.0 - p));
}

}  // namespace mrc::faults::testing
