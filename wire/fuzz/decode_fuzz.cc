// Fuzz target for the frame decoder. Beyond "no crash, no sanitizer report" it checks two
// properties on every input: a frame that decodes cleanly re-encodes to the very same bytes,
// and presentation code accepts whatever the decoder produced.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "wire/wire.h"

using namespace mrc::wire;

namespace {

// Extension headers the decoder skips are not re-encoded; only frames without them round-trip.
bool round_trippable(const DecodedFrame& f) {
  if (f.l3 == 6) {
    const uint8_t nh = f.ip6.next_header;
    if (nh == 0 || nh == 60) return false;
    if (f.has_srh && (f.srh.next_header == 0 || f.srh.next_header == 60)) return false;
    if (f.has_inner_ip6 && (f.inner_ip6.next_header == 0 || f.inner_ip6.next_header == 60))
      return false;
    if (f.has_srh && f.has_inner_ip6 && f.ip6.next_header != kIpProtoRouting) return false;
  }
  return true;
}

void check(const uint8_t* data, size_t size, LinkType link) {
  DecodedFrame f;
  DecodeOptions o;
  o.link = link;
  o.verify_icrc = true;
  const bool ok = decode_frame(as_bytes(data, size), f, o);
  std::string out;
  append_summary(out, f);
  append_field_tree(out, f);
  append_json(out, f, 1, 0);
  if (!ok) {
    if (!f.error) std::abort();  // a failed decode must say why
    return;
  }
  if (f.has_eth || f.l3) {
    if (!round_trippable(f) || (f.l3 == 0 && !f.has_eth)) return;
    EncodeOptions as_is;
    as_is.fix_lengths = false;
    as_is.fix_ip_checksum = false;
    as_is.udp_checksum = UdpChecksumPolicy::kAsIs;
    as_is.fix_icrc = false;
    as_is.pad_payload = false;
    std::vector<std::byte> buf(size + 64);
    std::string err;
    const size_t n = encode_frame(f, MutBytes(buf.data(), buf.size()), as_is, mrp0(), &err);
    if (n != size || std::memcmp(buf.data(), data, size) != 0) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check(data, size, LinkType::kEthernet);
  check(data, size, LinkType::kRawIp);
  return 0;
}
