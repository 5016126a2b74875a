// mrc_wire_samples: reference frames of every MRP0 packet type in every EV carriage.
// Used by tests, the fuzz seed corpus, benchmarks, `mrct craft` and the docs; not part of the
// codec itself.
#pragma once

#include <span>
#include <string>
#include <thread>
#include <vector>

#include "wire/wire.h"

namespace mrc::wire::samples {

// How a packet is carried on the wire.
enum class Carrier { kUdp4, kUdp6, kStev, kSrv6, kSrv6Srh };
std::string_view carrier_name(Carrier c);
std::vector<Carrier> all_carriers();
EvFormat ev_format_of(Carrier c);

// Requestor/responder identities used by the samples (documentation prefixes / ULA).
struct Node {
  MacAddr mac;
  Ipv4Addr ip4;
  Ipv6Addr gid;
  uint32_t qpn;
};
const Node& requestor();
const Node& responder();

// Outer layers for a packet from `from` to `to` in carrier c with wire EV `wev`, ready for the
// caller to fill BTH and headers. SRv6 carriers get an outer DA made of a uSID path.
// `profile` decides the carriage (stripe, ECMP flow label, SRv6) and the destination port.
FrameSpec base_spec(Carrier c, const Node& from, const Node& to, uint32_t wev,
                    const WireProfile& profile = mrp0());

struct Sample {
  std::string name;  // "<carrier>/<opcode name>[/variant]"
  std::vector<std::byte> frame;
};

// Every MRP0 opcode in every carrier, plus a trimmed data packet per carrier, VLAN-tagged
// and IPv4 variants, plain IBTA RC packets (WRITE/ACK/SEND/READ), and two non-RoCE frames.
// Under another profile (mrct craft --profile): the same packets with that profile's open
// choices (port, carriage, EETH bits, cc_type, trim size, SRv6 outer class).
std::vector<Sample> all_samples(const WireProfile& profile = mrp0());

// A deterministic payload pattern (byte i = (seed + i * 31) mod 251).
const std::vector<std::byte>& pattern(size_t len, uint8_t seed = 0);

// Bytes fed through a pipe by a thread as a reader takes them (a pipe holds 64 KiB), for tests
// of input that cannot be mapped. path() opens the read end by name, as `mrct check /dev/stdin`
// would. The destructor closes the read end (a writer still blocked gets EPIPE, not SIGPIPE)
// and joins the writer. `bytes` must outlive the feed.
class PipeFeed {
 public:
  explicit PipeFeed(std::span<const std::byte> bytes);
  ~PipeFeed();
  PipeFeed(const PipeFeed&) = delete;
  PipeFeed& operator=(const PipeFeed&) = delete;
  std::string path() const;

 private:
  int read_fd_ = -1;
  std::thread writer_;
};

}  // namespace mrc::wire::samples
