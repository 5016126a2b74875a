#include "reference-impl/engine/ev_set.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <numeric>

namespace mrc::engine {
namespace {

// Appends the `bits` low bits of x to the compact EV bit stream, MSB first (A.3.5).
void put_bits(wire::EvBytes& out, uint32_t& pos, uint32_t x, uint32_t bits) {
  for (uint32_t b = 0; b < bits; ++b) {
    const uint32_t bit = (x >> (bits - 1 - b)) & 1u;
    if (bit) out[pos / 8] |= static_cast<uint8_t>(0x80u >> (pos % 8));
    ++pos;
  }
}

uint32_t wev_of(wire::EvFormat format, const wire::EvBytes& o, uint32_t index) {
  switch (format) {
    case wire::EvFormat::kUdp:
      return (uint32_t{o[0]} << 8) | o[1];
    case wire::EvFormat::kStev:
      return (uint32_t{o[0]} << 24) | (uint32_t{o[1]} << 16) | (uint32_t{o[2]} << 8) | o[3];
    case wire::EvFormat::kSrv6:
      return index;  // MRP0 C.1: SRv6 carries the EV's index in the profile's EV array
  }
  return 0;
}

std::string_view format_label(wire::EvFormat f) {
  return wire::ev_format_name(f);
}

}  // namespace

Status EvSet::build(const EvProfile& profile, wire::EvFormat format, uint8_t nports, Rng& rng) {
  evs_.clear();
  by_wev_.clear();
  slots_.clear();
  plane_slots_.assign(size_t{nports} + 1, {});
  backups_.assign(size_t{nports} + 1, {});
  cursor_ = 0;
  resend_cursor_ = 0;
  epoch_ = 0;
  std::fill(std::begin(counts_), std::end(counts_), 0);
  refused_ = 0;
  shuffle_rng_.reseed(rng.next());
  if (nports == 0) return Status::Error(EINVAL, "EV set: endpoint has no ports");

  std::vector<uint32_t> widths = profile.format_widths;
  std::vector<wire::EvField> fields = profile.fields;
  const uint32_t carried_bits =
      format == wire::EvFormat::kUdp ? 16 : (format == wire::EvFormat::kStev ? 32 : 256);

  if (profile.mode == EvMode::kAuto) {
    if (format == wire::EvFormat::kSrv6)
      return Status::Error(EINVAL,
                           "EV profile: mode AUTO needs a hashing fabric; SRv6 needs EXP or GEN");
    if (profile.ev_count == 0)
      return Status::Error(EINVAL, "EV profile: ev_count must be > 0 in AUTO mode");
    // MRP0 gap: AUTO is vendor-managed; the engine draws random 16-bit hash inputs.
    widths.assign(carried_bits / 16, 16);
    fields.assign(carried_bits / 16, wire::EvField{16, 0, 0, 0xFFFF, 0xFFFF});
  }

  uint32_t total_width = 0;
  for (uint32_t w : widths) total_width += w;
  if (widths.empty() || total_width == 0)
    return Status::Error(EINVAL, "EV profile: format_widths is empty");
  if (total_width > carried_bits)
    return Status::Error(EINVAL, "EV profile: format width " + std::to_string(total_width) +
                                     " bits exceeds the " + std::to_string(carried_bits) +
                                     " bits the " + std::string(format_label(format)) +
                                     " EV format carries");
  if (std::string err = wire::validate_ev_profile(widths, fields); !err.empty())
    return Status::Error(EINVAL, "EV profile: " + err);
  if (format == wire::EvFormat::kSrv6 && total_width < 128)
    return Status::Error(EINVAL, "EV profile: SRv6 format needs >= 128 bits (the outer DA), has " +
                                     std::to_string(total_width));

  srh_ = format == wire::EvFormat::kSrv6 && total_width > 128;

  std::vector<EvEntry> entries;
  if (profile.mode == EvMode::kExplicit) {
    if (profile.explicit_evs.empty())
      return Status::Error(EINVAL, "EV profile: EXP mode without explicit_evs");
    if (profile.ev_count != 0 && profile.ev_count != profile.explicit_evs.size())
      return Status::Error(EINVAL, "EV profile: ev_count " + std::to_string(profile.ev_count) +
                                       " != explicit_evs size " +
                                       std::to_string(profile.explicit_evs.size()));
    entries = profile.explicit_evs;
  } else {
    if (profile.ev_count == 0)
      return Status::Error(EINVAL, "EV profile: ev_count must be > 0 in GEN mode");
    uint32_t compact_bits = 0;
    for (const auto& f : fields) compact_bits += static_cast<uint32_t>(std::popcount(f.mask));
    if (compact_bits == 0)
      return Status::Error(EINVAL, "EV profile: GEN mode needs at least one field with a mask");
    std::unordered_map<uint64_t, bool> seen;
    entries.reserve(profile.ev_count);
    for (uint32_t i = 0; i < profile.ev_count; ++i) {
      EvEntry e;
      e.port = static_cast<uint8_t>(i % nports + 1);
      // Redraw a few times to avoid duplicate EVs; a small space may still repeat.
      for (int attempt = 0; attempt < 16; ++attempt) {
        e.ev = {};
        uint32_t pos = 0;
        for (const auto& f : fields) {
          if (f.mask == 0) continue;
          const uint32_t k = static_cast<uint32_t>(std::popcount(f.mask));
          const uint64_t kmax = k >= 32 ? 0xFFFFFFFFull : ((1ull << k) - 1);
          // MRP0 gap: examples disagree whether max_val = 0 means "unbounded"; it does here.
          uint64_t hi = f.max_val == 0 ? kmax : std::min<uint64_t>(f.max_val, kmax);
          uint64_t lo = std::min<uint64_t>(f.min_val, hi);
          put_bits(e.ev, pos, static_cast<uint32_t>(rng.range(lo, hi)), k);
        }
        uint64_t key = 1469598103934665603ull;
        for (uint8_t b : e.ev) key = (key ^ b) * 1099511628211ull;
        key ^= uint64_t{e.port} << 56;
        if (!seen.count(key)) {
          seen[key] = true;
          break;
        }
      }
      entries.push_back(e);
    }
  }
  if (entries.size() >= 0xFFFF)
    return Status::Error(EINVAL, "EV profile: more than 65534 EVs per QP");

  evs_.resize(entries.size());
  std::vector<std::vector<uint32_t>> by_plane(size_t{nports} + 1);
  for (uint32_t i = 0; i < entries.size(); ++i) {
    const EvEntry& in = entries[i];
    if (in.port == 0 || in.port > nports)
      return Status::Error(EINVAL, "EV profile: EV " + std::to_string(i) + " has port " +
                                       std::to_string(in.port) + ", endpoint ports are 1.." +
                                       std::to_string(nports));
    wire::EvExpandResult r = wire::expand_ev(widths, fields, in.ev);
    if (!r.ok) return Status::Error(EINVAL, "EV profile: EV " + std::to_string(i) + ": " + r.error);
    EvRecord& rec = evs_[i];
    rec.expanded = r.expanded;
    rec.port = in.port;
    rec.wev = wev_of(format, r.expanded, i);
    rec.state = EvState::kGood;
    by_wev_.emplace(rec.wev, i);  // duplicates keep the first occurrence
    by_plane[in.port].push_back(i);
    ++counts_[static_cast<int>(EvState::kGood)];
  }

  if (profile.ev_min_active > evs_.size() && profile.ev_min_active != kEvMinActiveAll)
    return Status::Error(EINVAL, "EV profile: ev_min_active " +
                                     std::to_string(profile.ev_min_active) + " > ev_count " +
                                     std::to_string(evs_.size()));
  min_active_ = std::min<uint32_t>(profile.ev_min_active, static_cast<uint32_t>(evs_.size()));

  // Equal active EVs per plane (paper 2.4); the rest of each plane is its backup set.
  const uint32_t active_total =
      profile.active_count == 0
          ? static_cast<uint32_t>(evs_.size())
          : std::min<uint32_t>(profile.active_count, static_cast<uint32_t>(evs_.size()));
  uint32_t planes_with_evs = 0;
  for (uint8_t p = 1; p <= nports; ++p) planes_with_evs += by_plane[p].empty() ? 0 : 1;
  std::vector<uint32_t> target(size_t{nports} + 1, 0);
  if (profile.active_count == 0) {
    for (uint8_t p = 1; p <= nports; ++p) target[p] = static_cast<uint32_t>(by_plane[p].size());
  } else if (planes_with_evs > 0) {
    const uint32_t per = std::max<uint32_t>(1, active_total / planes_with_evs);
    for (uint8_t p = 1; p <= nports; ++p)
      target[p] = std::min<uint32_t>(per, static_cast<uint32_t>(by_plane[p].size()));
  }
  std::vector<std::vector<uint32_t>> active(size_t{nports} + 1);
  for (uint8_t p = 1; p <= nports; ++p) {
    auto& list = by_plane[p];
    for (size_t k = list.size(); k > 1; --k) std::swap(list[k - 1], list[rng.below(k)]);
    for (uint32_t k = 0; k < list.size(); ++k) {
      EvRecord& rec = evs_[list[k]];
      if (k < target[p]) {
        active[p].push_back(list[k]);
        rec.role = EvRecord::Role::kActive;
      } else {
        backups_[p].push_back(list[k]);
        rec.role = EvRecord::Role::kBackup;
      }
    }
  }
  substitute_cursor_.assign(size_t{nports} + 1, 0);
  // Interleave planes so consecutive packets go to different planes.
  for (uint32_t round = 0;; ++round) {
    bool any = false;
    for (uint8_t p = 1; p <= nports; ++p) {
      if (round < active[p].size()) {
        const uint32_t idx = active[p][round];
        evs_[idx].slot = static_cast<uint32_t>(slots_.size());
        plane_slots_[p].push_back(evs_[idx].slot);
        slots_.push_back(idx);
        any = true;
      }
    }
    if (!any) break;
  }
  return Status::Ok();
}

int EvSet::find_wev(uint32_t wev) const {
  auto it = by_wev_.find(wev);
  return it == by_wev_.end() ? -1 : static_cast<int>(it->second);
}

bool EvSet::skip_expired(const EvRecord& e, uint64_t now_ns) const {
  // SKIP holds for the rest of the rotation it was set in and the whole next one, so every
  // other GOOD EV is used at least once before it returns (R39), or until skip_max_ns.
  if (epoch_ >= e.skip_epoch + 2) return true;
  return skip_max_ns_ != 0 && now_ns - e.skip_since_ns >= skip_max_ns_;
}

void EvSet::wrap(Rng* rng) {
  cursor_ = 0;
  ++epoch_;
  if (rng == nullptr) return;
  // Re-randomise the order inside each plane once per rotation (paths, not planes, move).
  for (size_t p = 1; p < plane_slots_.size(); ++p) {
    const auto& pos = plane_slots_[p];
    for (size_t k = pos.size(); k > 1; --k) {
      const size_t j = rng->below(k);
      std::swap(slots_[pos[k - 1]], slots_[pos[j]]);
    }
    for (uint32_t s : pos) evs_[slots_[s]].slot = s;
  }
}

int EvSet::pick(uint32_t usable_ports, bool have_avoid, uint32_t avoid_wev, uint64_t now_ns,
                Stream stream) {
  const size_t n = slots_.size();
  if (n == 0) return -1;
  int fallback = -1;
  for (size_t step = 0; step < 2 * n + 2; ++step) {
    uint32_t idx = 0;
    if (stream == Stream::kNewData) {
      if (cursor_ >= n) wrap(&shuffle_rng_);
      idx = slots_[cursor_++];
    } else {
      // A resend is a turn as much as new data (SKIP, R39): its wraps end rotations too, or a
      // window full of resends waiting on SKIP EVs would wait for new data that cannot go.
      if (resend_cursor_ >= n) {
        resend_cursor_ = 0;
        ++epoch_;
      }
      idx = slots_[resend_cursor_++];
    }
    EvRecord& e = evs_[idx];
    if (e.state == EvState::kSkip && skip_expired(e, now_ns))
      set_state(idx, EvState::kGood, "skip_done");
    if (((usable_ports >> e.port) & 1u) == 0) continue;
    if (e.state == EvState::kAssumedBad || e.state == EvState::kDenied) {
      // A retired EV's turn stays on its plane: another GOOD EV of the plane takes it. Passing
      // it on to the next slot (the next plane) gave each plane a share of the QP's packets in
      // proportion to its GOOD EVs, so a plane that lost EVs to a failure sent less and the
      // other planes' host links, already full, capped the QP (docs/simulation.md,
      // experiment a). Only a plane without a GOOD EV gives its turns away. A SKIP EV's turn
      // does go to the next slot: SKIP is congestion, and moving its load to the other planes
      // is what lets a plane whose remaining paths are full carry less.
      const int sub = good_in_plane(e.port, have_avoid, avoid_wev, now_ns);
      if (sub < 0) continue;
      idx = static_cast<uint32_t>(sub);
    } else if (e.state != EvState::kGood) {
      continue;
    }
    if (have_avoid && evs_[idx].wev == avoid_wev) {
      if (fallback < 0) fallback = static_cast<int>(idx);
      continue;
    }
    return static_cast<int>(idx);
  }
  return fallback;
}

int EvSet::good_in_plane(uint8_t port, bool have_avoid, uint32_t avoid_wev, uint64_t now_ns) {
  if (port >= plane_slots_.size() || plane_slots_[port].empty()) return -1;
  const std::vector<uint32_t>& pos = plane_slots_[port];
  size_t& cur = substitute_cursor_[port];
  int avoided = -1;
  for (size_t k = 0; k < pos.size(); ++k) {
    const size_t at = (cur + k) % pos.size();
    const uint32_t idx = slots_[pos[at]];
    EvRecord& e = evs_[idx];
    if (e.state == EvState::kSkip && skip_expired(e, now_ns))
      set_state(idx, EvState::kGood, "skip_done");
    if (e.state != EvState::kGood) continue;
    if (have_avoid && e.wev == avoid_wev) {
      if (avoided < 0) avoided = static_cast<int>(idx);
      continue;
    }
    cur = (at + 1) % pos.size();  // the next substitute is the next GOOD EV of the plane
    return static_cast<int>(idx);
  }
  return avoided;
}

void EvSet::set_state(uint32_t idx, EvState to, std::string_view reason) {
  EvRecord& e = evs_[idx];
  const EvState from = e.state;
  if (from == to) return;
  --counts_[static_cast<int>(from)];
  ++counts_[static_cast<int>(to)];
  e.state = to;
  if (on_change_) on_change_(idx, from, to, reason);
}

void EvSet::take_out_of_backups(uint32_t idx) {
  auto& list = backups_[evs_[idx].port];
  list.erase(std::remove(list.begin(), list.end(), idx), list.end());
}

bool EvSet::demote(uint32_t idx, uint64_t now_ns, std::string_view reason) {
  EvRecord& e = evs_[idx];
  if (e.state == EvState::kAssumedBad || e.state == EvState::kDenied) return true;
  const uint32_t usable =
      counts_[static_cast<int>(EvState::kGood)] + counts_[static_cast<int>(EvState::kSkip)];
  if (usable <= min_active_) {
    ++refused_;
    if (std::none_of(deferred_.begin(), deferred_.end(),
                     [&](const auto& d) { return d.first == idx; }))
      deferred_.emplace_back(idx, reason);
    return false;
  }
  std::erase_if(deferred_, [&](const auto& d) { return d.first == idx; });
  set_state(idx, EvState::kAssumedBad, reason);
  e.good_probes = 0;
  e.probe_outstanding = false;
  e.next_probe_ns = now_ns;
  if (e.role == EvRecord::Role::kBackup) {
    take_out_of_backups(idx);
    e.role = EvRecord::Role::kOut;
  } else if (e.role == EvRecord::Role::kActive) {
    auto& pool = backups_[e.port];
    if (!pool.empty()) {
      const uint32_t b = pool.back();
      pool.pop_back();
      slots_[e.slot] = b;
      evs_[b].slot = e.slot;
      evs_[b].role = EvRecord::Role::kActive;
      e.slot = kNoSlot;
      e.role = EvRecord::Role::kOut;
    }
  }
  return true;
}

void EvSet::skip(uint32_t idx, uint64_t now_ns, std::string_view reason) {
  EvRecord& e = evs_[idx];
  // A signal on an EV already in SKIP starts the SKIP again: from the latest signal on, the other
  // EVs get their turn first (R39), not only from the first.
  if (e.state != EvState::kGood && e.state != EvState::kSkip) return;
  e.skip_epoch = epoch_;
  e.skip_since_ns = now_ns;
  set_state(idx, EvState::kSkip, reason);
}

void EvSet::recover(uint32_t idx, EvState to, uint64_t now_ns, std::string_view reason) {
  EvRecord& e = evs_[idx];
  if (e.state != EvState::kAssumedBad && e.state != EvState::kDenied) return;
  std::erase_if(deferred_, [&](const auto& d) { return d.first == idx; });
  e.probe_outstanding = false;
  e.good_probes = 0;
  if (e.role != EvRecord::Role::kActive) {
    // Take back a slot of the plane that holds an unusable EV, else join the backups.
    for (uint32_t s : plane_slots_[e.port]) {
      const uint32_t cur = slots_[s];
      const EvState st = evs_[cur].state;
      if (st == EvState::kAssumedBad || st == EvState::kDenied) {
        evs_[cur].slot = kNoSlot;
        evs_[cur].role = EvRecord::Role::kOut;
        slots_[s] = idx;
        e.slot = s;
        e.role = EvRecord::Role::kActive;
        break;
      }
    }
    if (e.role != EvRecord::Role::kActive) {
      e.role = EvRecord::Role::kBackup;
      backups_[e.port].push_back(idx);
      to = EvState::kGood;  // backups are not in the rotation, nothing to skip
    }
  }
  if (to == EvState::kSkip) {
    e.skip_epoch = epoch_;
    e.skip_since_ns = now_ns;
  }
  set_state(idx, to, reason);
  // Held-back demotions, oldest first, while the floor allows.
  while (!deferred_.empty()) {
    const auto [d, why] = deferred_.front();
    const EvState st = evs_[d].state;
    if (st == EvState::kGood || st == EvState::kSkip) {
      const uint32_t usable =
          counts_[static_cast<int>(EvState::kGood)] + counts_[static_cast<int>(EvState::kSkip)];
      if (usable <= min_active_) break;
      deferred_.erase(deferred_.begin());
      demote(d, now_ns, why);
    } else {
      deferred_.erase(deferred_.begin());
    }
  }
}

void EvSet::deny(uint32_t idx, std::string_view reason) {
  EvRecord& e = evs_[idx];
  if (e.state == EvState::kDenied) return;
  set_state(idx, EvState::kDenied, reason);
  e.probe_outstanding = false;
  if (e.role == EvRecord::Role::kBackup) {
    take_out_of_backups(idx);
    e.role = EvRecord::Role::kOut;
  } else if (e.role == EvRecord::Role::kActive) {
    auto& pool = backups_[e.port];
    if (!pool.empty()) {
      const uint32_t b = pool.back();
      pool.pop_back();
      slots_[e.slot] = b;
      evs_[b].slot = e.slot;
      evs_[b].role = EvRecord::Role::kActive;
      e.slot = kNoSlot;
      e.role = EvRecord::Role::kOut;
    }
  }
}

int EvSet::random_good_in_plane(uint8_t port, Rng& rng) const {
  uint32_t n = 0;
  int chosen = -1;
  for (uint32_t i = 0; i < evs_.size(); ++i) {
    if (evs_[i].port != port || evs_[i].state != EvState::kGood) continue;
    ++n;
    if (rng.below(n) == 0) chosen = static_cast<int>(i);  // reservoir sampling
  }
  return chosen;
}

int EvSet::first_good_in_plane(uint8_t port) const {
  if (port < plane_slots_.size()) {
    for (uint32_t s : plane_slots_[port]) {
      if (evs_[slots_[s]].state == EvState::kGood) return static_cast<int>(slots_[s]);
    }
  }
  for (uint32_t i = 0; i < evs_.size(); ++i)
    if (evs_[i].port == port && evs_[i].state == EvState::kGood) return static_cast<int>(i);
  return -1;
}

}  // namespace mrc::engine
