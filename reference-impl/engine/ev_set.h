// The EV set of one QP: EV generation/expansion from an EV profile, the per-packet rotation
// balanced across planes, EV states (GOOD / SKIP / ASSUMED_BAD / DENIED) with the ev_min_active
// floor, and the backup set that replaces retired EVs of the same plane. Private header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "reference-impl/engine/rng.h"

namespace mrc::engine {

inline constexpr uint32_t kNoSlot = UINT32_MAX;

struct EvRecord {
  uint32_t wev = 0;  // what the packet carries (SRv6: the EV's index, MRP0 C.1)
  uint8_t port = 0;
  EvState state = EvState::kGood;
  enum class Role : uint8_t { kActive, kBackup, kOut } role = Role::kOut;
  uint32_t slot = kNoSlot;
  uint64_t skip_epoch = 0;
  uint64_t skip_since_ns = 0;
  // Reliability probing while ASSUMED_BAD.
  uint32_t good_probes = 0;
  bool probe_outstanding = false;
  uint16_t probe_id = 0;
  uint64_t next_probe_ns = 0;
  uint64_t last_echo_ns = 0;  // last SACK/NACK that echoed this EV (the path delivered)
  // Send sequence number (TxEntry::tx_seq) of the latest-sent data packet on this EV known to
  // have arrived (SACKed or covered by cack).
  uint64_t delivered_tx_seq = 0;
  // That packet's send time and when its delivery was learnt (the requester's EV delivery hold).
  uint64_t delivered_sent_ns = 0;
  uint64_t delivered_at_ns = 0;
  uint64_t packets_sent = 0;
  wire::EvBytes expanded{};
};

class EvSet {
 public:
  using ChangeFn =
      std::function<void(uint32_t idx, EvState from, EvState to, std::string_view reason)>;

  // Builds the EVs of a QP from the profile. `format` decides how a WEV is derived from the
  // expanded EV; `nports` bounds EV ports. Error strings name the field at fault.
  Status build(const EvProfile& profile, wire::EvFormat format, uint8_t nports, Rng& rng);
  void set_change_callback(ChangeFn fn) { on_change_ = std::move(fn); }
  // Where the first rotation starts. QPs of one endpoint start at different slots so that, served
  // round robin, they do not all send to the same plane at the same time (slot s is plane s mod P
  // while the planes have equal active EVs).
  void start_at(size_t slot) {
    if (!slots_.empty()) cursor_ = resend_cursor_ = slot % slots_.size();
  }
  void set_skip_max_ns(uint64_t ns) { skip_max_ns_ = ns; }

  size_t size() const { return evs_.size(); }
  const EvRecord& at(uint32_t idx) const { return evs_[idx]; }
  EvRecord& at(uint32_t idx) { return evs_[idx]; }
  int find_wev(uint32_t wev) const;

  // New data and resends walk the rotation with cursors of their own: with one cursor, a resend
  // between two new packets moves the new data's place in the rotation, and with few EVs and a
  // steady stream of resends the new data kept landing on one EV (MRC-EV-001, R7). The rotation
  // (its reshuffles) is the new data's; either cursor's wrap ends a rotation for SKIP.
  enum class Stream : uint8_t { kNewData, kResend };
  // Next EV for a data packet: GOOD, on a port in `usable_ports` (bit N = port N), not
  // `avoid_wev` unless it is the only candidate. -1 when none. A slot whose EV is retired
  // (ASSUMED_BAD without a backup left, DENIED) gives its turn to another GOOD EV of the same
  // plane, in turn, so every usable plane with a GOOD EV keeps an equal share of the packets;
  // only a plane without one gives its turns to the next slots. A SKIP slot's turn goes to the
  // next slot (congestion moves load, to other planes too).
  int pick(uint32_t usable_ports, bool have_avoid, uint32_t avoid_wev, uint64_t now_ns,
           Stream stream = Stream::kNewData);

  // GOOD/SKIP -> ASSUMED_BAD, replaced by a backup of the same plane. False when the
  // ev_min_active floor refuses the demotion; the EV is then demoted as soon as another EV
  // recovers (a loss retires its EV, R40: the floor only keeps the QP going meanwhile).
  bool demote(uint32_t idx, uint64_t now_ns, std::string_view reason);
  void skip(uint32_t idx, uint64_t now_ns, std::string_view reason);
  // ASSUMED_BAD / DENIED -> `to` (GOOD or SKIP), back into a slot of its plane or the backups;
  // then the demotions the floor held back go through while it allows.
  void recover(uint32_t idx, EvState to, uint64_t now_ns, std::string_view reason);
  void deny(uint32_t idx, std::string_view reason);

  uint32_t count(EvState s) const { return counts_[static_cast<int>(s)]; }
  uint64_t demotions_refused() const { return refused_; }
  uint32_t min_active() const { return min_active_; }
  size_t active_slots() const { return slots_.size(); }
  const std::vector<uint32_t>& slots() const { return slots_; }
  // SRv6: the expanded EV is wider than the DA, so packets carry a one-segment SRH.
  bool srh() const { return srh_; }
  // A GOOD EV of the plane, chosen uniformly; -1 when the plane has none.
  int random_good_in_plane(uint8_t port, Rng& rng) const;
  int first_good_in_plane(uint8_t port) const;

 private:
  void set_state(uint32_t idx, EvState to, std::string_view reason);
  void wrap(Rng* rng);
  bool skip_expired(const EvRecord& e, uint64_t now_ns) const;
  void take_out_of_backups(uint32_t idx);
  // A GOOD EV of the plane for a slot whose EV cannot take the packet, round robin over the
  // plane's slots; `avoid_wev` only when it is the plane's last. -1 when the plane has none.
  int good_in_plane(uint8_t port, bool have_avoid, uint32_t avoid_wev, uint64_t now_ns);

  std::vector<EvRecord> evs_;
  std::unordered_map<uint32_t, uint32_t> by_wev_;
  std::vector<uint32_t> slots_;                     // rotation order, planes interleaved
  std::vector<std::vector<uint32_t>> plane_slots_;  // slot positions of each plane (index port)
  std::vector<std::vector<uint32_t>> backups_;      // GOOD backups of each plane (index port)
  size_t cursor_ = 0;
  size_t resend_cursor_ = 0;
  std::vector<size_t> substitute_cursor_;  // per plane (index port): next slot to try
  uint64_t epoch_ = 0;
  uint32_t counts_[4] = {0, 0, 0, 0};
  uint32_t min_active_ = 1;
  uint64_t refused_ = 0;
  std::vector<std::pair<uint32_t, std::string_view>> deferred_;  // refused demotions, oldest first
  uint64_t skip_max_ns_ = 0;
  bool srh_ = false;
  Rng shuffle_rng_{1};
  ChangeFn on_change_;
};

}  // namespace mrc::engine
