// Learner and Crafter (hostile.h): hostile frames built from what a tap shows.
#include "reference-impl/hostile/hostile.h"

#include <algorithm>

namespace mrc::hostile {
namespace {

constexpr std::string_view kNames[] = {"unexp-event", "ev-probe", "psn-ahead",  "old-psn",
                                       "port-status", "bad-icrc", "wrong-rkey", "va-outside"};

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool decode(const std::vector<std::byte>& bytes, wire::DecodedFrame& out) {
  out = wire::DecodedFrame{};
  return wire::decode_frame(wire::as_bytes(bytes), out) && out.roce && out.op != nullptr &&
         out.l3 == 6 && out.has_eth;
}

// Turns a copy of a template into an endpoint request (DestQP 2, ERTH, no payload).
void make_endpoint_request(wire::FrameSpec& s, wire::EndpointOp op, uint16_t req_id) {
  const wire::WireProfile& p = wire::mrp0();
  s.bth = wire::Bth{};
  s.bth.opcode =
      p.opcode_of(wire::PacketKind::kMrcEndpointRequest, wire::MessagePosition::kNone, false);
  s.op = p.opcode_info(s.bth.opcode);
  s.headers = 0;  // the profile's stack for the opcode
  s.bth.dest_qp = wire::kEndpointOpQpn;
  s.bth.psn = req_id;
  s.erth = wire::Erth{};
  s.erth.op = static_cast<uint8_t>(op);
  s.erth.port_status_mask = 0xFFFFFFFEu;  // every plane up: nothing the arrival contradicts
  s.erth.ts16 = req_id;
  s.payload = {};
  s.pad_data = {};
  s.trailer = {};
}

}  // namespace

std::string_view kind_name(Kind k) {
  return kNames[static_cast<size_t>(k)];
}

std::optional<Kind> parse_kind(std::string_view s) {
  for (Kind k : kAllKinds)
    if (kind_name(k) == s) return k;
  return std::nullopt;
}

bool Learner::offer(wire::Bytes frame) {
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f) || !f.roce || f.op == nullptr || f.l3 != 6 || !f.has_eth ||
      f.trimmed)
    return complete();
  if (learned_.data.empty() && f.op->kind == wire::PacketKind::kMrcData && f.has(wire::kHdrReth) &&
      !f.bth.rtx && wire::verify_icrc(f))
    learned_.data.assign(frame.begin(), frame.end());
  else if (learned_.sack.empty() && f.op->kind == wire::PacketKind::kMrcSack && !f.seth.pr &&
           wire::verify_icrc(f))
    learned_.sack.assign(frame.begin(), frame.end());
  return complete();
}

Crafter::Crafter(Learned learned, const wire::MacAddr& src_mac, const wire::MacAddr& dst_mac)
    : learned_(std::move(learned)), src_mac_(src_mac), dst_mac_(dst_mac) {
  if (!decode(learned_.data, data_) || data_.op->kind != wire::PacketKind::kMrcData ||
      !data_.has(wire::kHdrReth))
    error_ = "the learnt data frame is not an MRC WRITE with a RETH";
  else if (!decode(learned_.sack, sack_) || sack_.op->kind != wire::PacketKind::kMrcSack)
    error_ = "the learnt SACK frame is not an MRC SACK";
  else if (data_.has_inner_ip6 || sack_.has_inner_ip6)
    error_ = "SRv6 frames are not supported (use stev or udp)";
  base_psn_ = data_.bth.psn;
}

void Crafter::track(wire::Bytes frame) {
  wire::DecodedFrame f;
  if (!wire::decode_frame(frame, f) || !f.roce || f.op == nullptr ||
      f.op->kind != wire::PacketKind::kMrcData || f.bth.dest_qp != data_.bth.dest_qp)
    return;
  if (wire::psn_lt(base_psn_, f.bth.psn)) base_psn_ = f.bth.psn;
}

std::vector<std::byte> Crafter::craft(Kind k, uint64_t i) const {
  wire::FrameSpec s = k == Kind::kUnexpEvent ? sack_ : data_;
  s.eth.src = src_mac_;
  s.eth.dst = dst_mac_;
  s.frame = {};
  s.trailer = {};
  const uint64_t r = splitmix64(i);
  switch (k) {
    case Kind::kUnexpEvent: {
      const wire::WireProfile& p = wire::mrp0();
      s.bth.opcode = p.opcode_of(wire::PacketKind::kMrcNack, wire::MessagePosition::kNone, false);
      s.op = p.opcode_info(s.bth.opcode);
      s.headers = 0;
      s.neth = wire::Neth{};
      s.neth.nack_code = static_cast<uint8_t>(wire::NackCode::kUnexpEvent);
      s.neth.entropy = sack_.seth.entropy;
      // Half below the cumulative ACK (sent and acknowledged), half far beyond anything sent:
      // what an attacker who saw one SACK a while ago can name.
      const int64_t off = static_cast<int64_t>(i % 65536);
      s.neth.nack_psn = (i & 1) != 0 ? wire::psn_add(sack_.seth.cack_psn, -4096 - off)
                                     : wire::psn_add(sack_.seth.cack_psn, (1 << 20) + off);
      s.payload = {};
      break;
    }
    case Kind::kEvProbe:
      make_endpoint_request(s, wire::EndpointOp::kEvProbe, static_cast<uint16_t>(i));
      break;
    case Kind::kPortStatus: {
      make_endpoint_request(s, wire::EndpointOp::kPortStatusUpdate, static_cast<uint16_t>(i));
      // fd00:dead::/32 (the test's own ULA space) with 64 random low bits: a new GID each time.
      wire::Ipv6Addr& src = s.ip6.src;
      src = wire::Ipv6Addr{0xfd, 0x00, 0xde, 0xad};
      for (int b = 0; b < 8; ++b) src[8 + b] = static_cast<uint8_t>(r >> (8 * b));
      break;
    }
    case Kind::kPsnAhead:
      s.bth.psn = wire::psn_add(data_.bth.psn, (1 << 21) + static_cast<int64_t>(i % 65536));
      break;
    case Kind::kOldPsn:
      break;  // the learnt packet, byte for byte in its IP part
    case Kind::kBadIcrc:
      s.bth.psn = wire::psn_add(data_.bth.psn, static_cast<int64_t>(i % 1024));
      break;
    case Kind::kWrongRkey:
    case Kind::kVaOutside:
      // Just ahead of the newest PSN seen: inside the responder's window and not received yet,
      // the only PSNs that reach the R_Key / VA check. The nearest 64 first, then 64 at a time
      // further out, up to 1,536 ahead (within twice the endpoint's default 1,024-PSN window,
      // the kernel filter's limit): on a loaded host the tap's queue fills with old frames while
      // the generator waits for a core, the newest PSN it knows lags the transfer by hundreds,
      // and frames only 1..64 ahead of it were all duplicates (a hostile_netns run in which no
      // va-outside frame reached the VA check).
      s.bth.psn = wire::psn_add(base_psn_,
                                1 + static_cast<int64_t>(i % 64 + 64 * ((i / 64) % kFollowRings)));
      s.bth.rtx = false;
      if (k == Kind::kWrongRkey)
        s.reth.rkey = data_.reth.rkey ^ 0x5A5A5A5Au;
      else
        s.reth.va = data_.reth.va + (uint64_t{1} << 40);
      break;
  }
  std::vector<std::byte> out = wire::encode_frame(s);
  if (k == Kind::kBadIcrc && out.size() >= wire::kIcrcBytes) out.back() ^= std::byte{0xFF};
  return out;
}

}  // namespace mrc::hostile
