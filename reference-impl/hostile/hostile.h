// mrc_hostile: an attacker's view of a running MRC transfer, for tests and benchmarks only.
//
// A Learner reads frames from a tap (a mirror port on a router) until it has seen one data
// packet that carries a RETH (requester -> responder: GIDs, the responder's QPN, a PSN, the
// R_Key and a VA of the registered region) and one SACK (responder -> requester: the
// requester's QPN, an EV, the cumulative ACK). A Crafter turns those two frames into hostile
// frames of one Kind, each a well-formed MRP0 frame (valid ICRC unless the kind says otherwise)
// with only the fields the attack needs changed. Nothing is read from the endpoints: the test
// learns exactly what an on-path attacker with a tap would (docs/wire-format.md 8.7).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "wire/wire.h"

namespace mrc::hostile {

enum class Kind : uint8_t {
  kUnexpEvent,  // NACK UNEXP_EVENT to the requester, about PSNs it never sent or had ACKed
  kEvProbe,     // endpoint EV probes (DestQP 2) to the responder from its peer's GID
  kPsnAhead,    // data 2^21 PSNs beyond the responder's window
  kOldPsn,      // the learnt data packet replayed as is (a duplicate of a received PSN)
  kPortStatus,  // PORT_STATUS_UPDATE from a different random GID each time
  kBadIcrc,     // data with a corrupted ICRC
  kWrongRkey,   // data at PSNs just ahead of the newest seen (see track()), with a wrong R_Key
  kVaOutside,   // the same with a VA 2^40 beyond the learnt one (outside any region)
};
// wrong-rkey and va-outside sweep kFollowRings rings of 64 PSNs ahead of the newest PSN seen
// (1..64 first, up to 64 * kFollowRings ahead): see Crafter::craft.
inline constexpr uint64_t kFollowRings = 24;
inline constexpr Kind kAllKinds[] = {Kind::kUnexpEvent, Kind::kEvProbe,    Kind::kPsnAhead,
                                     Kind::kOldPsn,     Kind::kPortStatus, Kind::kBadIcrc,
                                     Kind::kWrongRkey,  Kind::kVaOutside};

std::string_view kind_name(Kind k);  // "unexp-event", "ev-probe", ...
std::optional<Kind> parse_kind(std::string_view s);

// What the attacker learnt: two frames as they were on the tap.
struct Learned {
  std::vector<std::byte> data;  // a WRITE_FIRST/ONLY with RETH, requester -> responder
  std::vector<std::byte> sack;  // a SACK (not a probe answer), responder -> requester
};

class Learner {
 public:
  // Keeps `frame` if it is what is still missing; true once both are known.
  bool offer(wire::Bytes frame);
  bool complete() const { return !learned_.data.empty() && !learned_.sack.empty(); }
  const Learned& learned() const { return learned_; }

 private:
  Learned learned_;
};

class Crafter {
 public:
  // Frames leave from `src_mac` to the router port `dst_mac`. Check ok() before craft().
  Crafter(Learned learned, const wire::MacAddr& src_mac, const wire::MacAddr& dst_mac);
  // The decoded templates point into learned_'s buffers.
  Crafter(const Crafter&) = delete;
  Crafter& operator=(const Crafter&) = delete;
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // The i-th frame of kind k (i varies PSNs, request ids and source GIDs); empty on a bug.
  std::vector<std::byte> craft(Kind k, uint64_t i) const;
  // A frame seen on the tap while flooding: a newer data PSN of the learnt QP moves the base of
  // the wrong-rkey / va-outside sweep, so that they land just ahead of what the client has sent
  // (in the server's window, not yet received: the only PSNs that reach the R_Key check).
  void track(wire::Bytes frame);

  // What the templates say (for the report and the tests).
  uint32_t responder_qpn() const { return data_.bth.dest_qp; }
  uint32_t requester_qpn() const { return sack_.bth.dest_qp; }
  uint32_t data_psn() const { return data_.bth.psn; }
  uint32_t cack_psn() const { return sack_.seth.cack_psn; }
  uint32_t rkey() const { return data_.reth.rkey; }
  uint64_t va() const { return data_.reth.va; }

 private:
  Learned learned_;
  wire::DecodedFrame data_;
  wire::DecodedFrame sack_;
  uint32_t base_psn_ = 0;  // newest data PSN seen
  wire::MacAddr src_mac_{};
  wire::MacAddr dst_mac_{};
  std::string error_;
};

// `mrc_hostile learn|flood ...` (hostile_main.cc); returns the exit code.
int hostile_main(int argc, char** argv);

}  // namespace mrc::hostile
