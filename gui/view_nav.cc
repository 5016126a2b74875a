// The index's answers for inspecting and navigating a flow (issue 18): per-EV figures, the frames
// a frame is related to (copies of its PSN, the NACK of a trim, the packet a SACK answers),
// next/previous of a kind, and "go to" frame / time / PSN.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "gui/view_model_impl.h"

namespace mrc::view {
namespace {

bool is_data(MarkKind k) {
  return k == MarkKind::kFirstTx || k == MarkKind::kRetransmit || k == MarkKind::kTrimmed;
}

std::string_view trim_ws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool starts_with_word(std::string_view& s, std::string_view word) {
  if (s.size() < word.size()) return false;
  for (size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != word[i]) return false;
  s = trim_ws(s.substr(word.size()));
  return true;
}

// "123", "0x7b": an unsigned integer, all of `s`.
std::optional<uint64_t> parse_uint(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  }
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Nearest-rank percentile of sorted values.
uint64_t percentile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

std::string rel_text(int32_t rel) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%+d", rel);
  return buf;
}

}  // namespace

std::string_view nav_kind_label(NavKind k) {
  switch (k) {
    case NavKind::kRetransmit:
      return "retransmission";
    case NavKind::kTrim:
      return "trim";
    case NavKind::kNack:
      return "NACK";
    case NavKind::kStateChange:
      return "EV state change";
    case NavKind::kDrop:
      return "drop";
  }
  return "?";
}

std::optional<uint64_t> parse_duration_ns(std::string_view s) {
  s = trim_ws(s);
  if (s.empty()) return std::nullopt;
  const std::string str(s);
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(str, &pos);
  } catch (...) {
    return std::nullopt;
  }
  const std::string unit(trim_ws(s.substr(pos)));
  double mul = 1;
  if (unit.empty() || unit == "ns")
    mul = 1;
  else if (unit == "us")
    mul = 1e3;
  else if (unit == "ms")
    mul = 1e6;
  else if (unit == "s")
    mul = 1e9;
  else
    return std::nullopt;
  if (!(v >= 0) || v * mul > 1.8e19) return std::nullopt;
  return static_cast<uint64_t>(v * mul + 0.5);
}

std::vector<EvStats> ViewModel::ev_stats(uint32_t flow_index, uint64_t from_ns,
                                         uint64_t to_ns) const {
  std::vector<EvStats> out;
  if (flow_index >= impl_->flows.size()) return out;
  const Flow& f = impl_->flows[flow_index];
  const auto& fr = impl_->frames;
  for (uint32_t li = 0; li < f.lanes.size(); ++li) {
    const Lane& l = f.lanes[li];
    if (l.control || l.endpoint) continue;
    EvStats e;
    e.lane = li;
    e.wev = l.wev;
    e.plane = l.plane;
    e.idle = l.counts[static_cast<size_t>(MarkKind::kFirstTx)] == 0 &&
             l.counts[static_cast<size_t>(MarkKind::kRetransmit)] == 0 &&
             l.counts[static_cast<size_t>(MarkKind::kTrimmed)] == 0;
    for (size_t q = lower_bound(l.frames, from_ns); q < l.frames.size(); ++q) {
      const FrameInfo& x = fr[l.frames[q]];
      if (x.ts_ns > to_ns) break;
      if (!is_data(x.kind)) continue;
      ++e.packets;
      e.retransmissions += x.kind == MarkKind::kRetransmit;
      e.trims += x.kind == MarkKind::kTrimmed;
    }
    for (uint32_t ei : l.ext) {
      const ExtMark& m = f.ext[ei];
      if (m.ts_ns < from_ns || m.ts_ns > to_ns) continue;
      e.drops += m.kind == MarkKind::kInjectorDrop;
      e.trims += m.kind == MarkKind::kTrimmed;
    }
    std::vector<uint64_t> rtts;
    for (const RttSample& r : l.rtt)
      if (r.ts_ns >= from_ns && r.ts_ns <= to_ns) rtts.push_back(r.rtt_ns);
    std::sort(rtts.begin(), rtts.end());
    e.rtt_samples = rtts.size();
    e.rtt_p50_ns = percentile(rtts, 0.50);
    e.rtt_p99_ns = percentile(rtts, 0.99);
    for (const EvSpan& sp : l.states) {
      const uint64_t a = std::max(sp.from_ns, from_ns), b = std::min(sp.until_ns, to_ns);
      if (b <= a) continue;
      if (sp.state == EvState::kSkip) e.skip_ns += b - a;
      if (sp.state == EvState::kAssumedBad) e.assumed_bad_ns += b - a;
    }
    out.push_back(e);
  }
  return out;
}

const PathEntry* ViewModel::lane_path(uint32_t flow_index, uint32_t lane) const {
  if (flow_index >= impl_->flows.size()) return nullptr;
  const Flow& f = impl_->flows[flow_index];
  if (lane >= f.lanes.size() || impl_->paths.empty()) return nullptr;
  for (uint32_t i : f.lanes[lane].frames)
    if (is_data(impl_->frames[i].kind)) return path_of(i);
  return nullptr;
}

std::vector<RelatedFrame> ViewModel::related(uint32_t frame) const {
  std::vector<RelatedFrame> out;
  const auto& fr = impl_->frames;
  if (frame >= fr.size() || fr[frame].flow == kNone) return out;
  const FrameInfo& x = fr[frame];
  const Flow& f = impl_->flows[x.flow];
  const auto first_after = [&](uint64_t ts, uint32_t after, auto pred) -> uint32_t {
    for (size_t q = lower_bound(f.frames, ts); q < f.frames.size(); ++q) {
      const uint32_t i = f.frames[q];
      if (i != after && (fr[i].ts_ns > ts || i > after) && pred(fr[i])) return i;
    }
    return kNone;
  };
  const auto last_before_on_lane = [&](uint32_t lane, uint32_t at, auto pred) -> uint32_t {
    if (lane >= f.lanes.size()) return kNone;
    const auto& lf = f.lanes[lane].frames;
    size_t q = lower_bound(lf, fr[at].ts_ns + 1);
    for (; q > 0; --q) {
      const uint32_t i = lf[q - 1];
      if (i != at && pred(fr[i])) return i;
    }
    return kNone;
  };
  if (is_data(x.kind)) {
    // Every copy of this PSN, in time order: the first is the original.
    bool first = true;
    for (uint32_t i : f.frames) {
      const FrameInfo& c = fr[i];
      if (!is_data(c.kind) || c.rel_psn != x.rel_psn) continue;
      if (i != frame) {
        const bool before = c.ts_ns < x.ts_ns || (c.ts_ns == x.ts_ns && i < frame);
        out.push_back({first ? "original" : before ? "earlier copy" : "later copy", i});
      }
      first = false;
    }
    if (x.kind == MarkKind::kTrimmed || (x.flags & kFlagTrimmedLater)) {
      const uint32_t nack = first_after(x.ts_ns, frame, [&](const FrameInfo& c) {
        return c.kind == MarkKind::kNack && c.rel_psn == x.rel_psn;
      });
      if (nack != kNone) out.push_back({"its NACK", nack});
    }
    if (x.kind == MarkKind::kTrimmed || (x.flags & (kFlagTrimmedLater | kFlagDroppedLater))) {
      const uint32_t resend = first_after(x.ts_ns, frame, [&](const FrameInfo& c) {
        return (c.kind == MarkKind::kRetransmit || c.kind == MarkKind::kFirstTx) &&
               c.rel_psn == x.rel_psn;
      });
      if (resend != kNone) out.push_back({"resend", resend});
    }
  } else if (x.kind == MarkKind::kSack) {
    uint32_t trig = kNone;
    if (x.flags & kFlagProbeReply) {
      trig = last_before_on_lane(x.lane, frame, [&](const FrameInfo& c) {
        return c.kind == MarkKind::kProbe && c.aux == x.aux;
      });
    } else {
      const int32_t target = x.rel_psn + static_cast<int16_t>(x.aux);
      trig = last_before_on_lane(x.lane, frame, [&](const FrameInfo& c) {
        return is_data(c.kind) && c.rel_psn == target;
      });
    }
    if (trig != kNone) out.push_back({"triggered by", trig});
  } else if (x.kind == MarkKind::kNack) {
    const uint32_t trimmed = last_before_on_lane(x.lane, frame, [&](const FrameInfo& c) {
      return is_data(c.kind) && c.rel_psn == x.rel_psn;
    });
    if (trimmed != kNone) out.push_back({"NACKed packet", trimmed});
    const uint32_t resend = first_after(x.ts_ns, frame, [&](const FrameInfo& c) {
      return (c.kind == MarkKind::kRetransmit || c.kind == MarkKind::kFirstTx) &&
             c.rel_psn == x.rel_psn;
    });
    if (resend != kNone) out.push_back({"resend", resend});
  }
  return out;
}

std::string ViewModel::sack_coverage(uint32_t frame) const {
  const auto& fr = impl_->frames;
  if (frame >= fr.size() || fr[frame].kind != MarkKind::kSack || fr[frame].flow == kNone) return {};
  const Flow& f = impl_->flows[fr[frame].flow];
  const auto it =
      std::lower_bound(f.sacks.begin(), f.sacks.end(), fr[frame].ts_ns,
                       [&](const SackInfo& a, uint64_t t) { return fr[a.frame].ts_ns < t; });
  for (auto s = it; s != f.sacks.end() && fr[s->frame].ts_ns == fr[frame].ts_ns; ++s) {
    if (s->frame != frame) continue;
    char buf[96];
    std::snprintf(buf, sizeof buf, "covers: cumulative ACK through PSN 0x%06x (rel %s)",
                  (f.first_psn + static_cast<uint32_t>(s->rel_cack)) & 0xFFFFFFu,
                  rel_text(s->rel_cack).c_str());
    std::string out = buf;
    std::string runs;
    for (int i = 0; i < 64;) {
      if (((s->bitmap >> i) & 1u) == 0) {
        ++i;
        continue;
      }
      int j = i;
      while (j + 1 < 64 && ((s->bitmap >> (j + 1)) & 1u)) ++j;
      if (!runs.empty()) runs += ", ";
      runs += rel_text(s->rel_base + i);
      if (j > i) runs += ".." + rel_text(s->rel_base + j);
      i = j + 1;
    }
    out += runs.empty() ? "; bitmap empty" : "; bitmap: rel " + runs;
    return out;
  }
  return {};
}

std::optional<NavTarget> ViewModel::navigate(uint32_t flow_index, NavKind kind, bool forward,
                                             uint64_t ts_ns, uint32_t frame,
                                             const Filter& filter) const {
  if (flow_index >= impl_->flows.size()) return std::nullopt;
  const Flow& f = impl_->flows[flow_index];
  const auto& fr = impl_->frames;
  // Positions are ordered by (time, frame index); a log entry without a frame sorts before the
  // frames of its nanosecond.
  using Key = std::pair<uint64_t, int64_t>;
  const Key here{ts_ns, frame == kNone ? -1 : static_cast<int64_t>(frame)};
  const auto better = [&](const Key& k, const std::optional<Key>& best) {
    if (forward ? !(k > here) : !(k < here)) return false;
    return !best || (forward ? k < *best : k > *best);
  };
  std::optional<Key> best;
  NavTarget target;
  const auto lane_ok = [&](uint32_t lane) {
    return lane == kNone || lane >= f.lanes.size() || filter.lane_visible(f.lanes[lane]);
  };
  const auto frame_matches = [&](const FrameInfo& x) {
    switch (kind) {
      case NavKind::kRetransmit:
        return x.kind == MarkKind::kRetransmit;
      case NavKind::kTrim:
        return x.kind == MarkKind::kTrimmed || (x.flags & kFlagTrimmedLater) != 0;
      case NavKind::kNack:
        return x.kind == MarkKind::kNack;
      case NavKind::kDrop:
        return (x.flags & kFlagDroppedLater) != 0;
      case NavKind::kStateChange:
        return false;
    }
    return false;
  };
  if (kind != NavKind::kStateChange) {
    // Frames: a scan from the position in the flow's time-ordered list, stopping at the first hit.
    const size_t start = lower_bound(f.frames, ts_ns);
    if (forward) {
      for (size_t q = start; q < f.frames.size(); ++q) {
        const uint32_t i = f.frames[q];
        const Key k{fr[i].ts_ns, i};
        if (frame_matches(fr[i]) && lane_ok(fr[i].lane) && better(k, best)) {
          best = k;
          break;
        }
      }
    } else {
      for (size_t q = std::min(f.frames.size(), lower_bound(f.frames, ts_ns + 1)); q > 0; --q) {
        const uint32_t i = f.frames[q - 1];
        const Key k{fr[i].ts_ns, i};
        if (frame_matches(fr[i]) && lane_ok(fr[i].lane) && better(k, best)) {
          best = k;
          break;
        }
      }
    }
    if (best) {
      target.ts_ns = best->first;
      target.frame = static_cast<uint32_t>(best->second);
      target.what =
          std::string(nav_kind_label(kind)) + ": frame " + std::to_string(target.frame + 1);
    }
  }
  // Log entries: EV state changes, and drops / trims the decision log adds as marks.
  const MarkKind ext_kind = kind == NavKind::kStateChange ? MarkKind::kEvState
                            : kind == NavKind::kDrop      ? MarkKind::kInjectorDrop
                            : kind == NavKind::kTrim      ? MarkKind::kTrimmed
                                                          : MarkKind::kOther;
  if (ext_kind != MarkKind::kOther) {
    for (const ExtMark& e : f.ext) {
      if (e.kind != ext_kind || !lane_ok(e.lane)) continue;
      // A drop or trim matched to its frame is found through the frame's flag above.
      if (e.frame != kNone && kind != NavKind::kStateChange) continue;
      const Key k{e.ts_ns, -1};
      if (!better(k, best)) continue;
      best = k;
      target.ts_ns = e.ts_ns;
      target.frame = e.frame;
      target.what = std::string(nav_kind_label(kind)) + ": " + e.text + " at +" +
                    format_time_ns(e.ts_ns - std::min(e.ts_ns, impl_->first_ns));
    }
  }
  if (!best) return std::nullopt;
  return target;
}

std::optional<NavTarget> ViewModel::go_to(uint32_t flow_index, std::string_view spec,
                                          std::string& error) const {
  const auto& fr = impl_->frames;
  std::string_view s = trim_ws(spec);
  const std::string quoted = "'" + std::string(s) + "'";
  if (s.empty()) {
    error = "empty: give a frame number (123), a time (+1.5ms) or a PSN (psn 0x1234, psn +5)";
    return std::nullopt;
  }
  if (starts_with_word(s, "psn")) {
    if (flow_index >= impl_->flows.size()) {
      error = "no QP selected to look the PSN up in";
      return std::nullopt;
    }
    const Flow& f = impl_->flows[flow_index];
    std::optional<int64_t> rel;
    if (!s.empty() && (s.front() == '+' || s.front() == '-')) {
      const bool neg = s.front() == '-';
      if (const auto v = parse_uint(s.substr(1)); v && *v < (1u << 24))
        rel = neg ? -static_cast<int64_t>(*v) : static_cast<int64_t>(*v);
    } else if (const auto v = parse_uint(s); v && *v < (1u << 24)) {
      rel = static_cast<int32_t>(((static_cast<uint32_t>(*v) - f.first_psn) & 0xFFFFFFu) << 8) >> 8;
    }
    if (!rel) {
      error = "PSN " + quoted + ": expected psn 0x1234 (absolute, < 2^24) or psn +5 (relative)";
      return std::nullopt;
    }
    for (uint32_t i : f.frames)
      if (is_data(fr[i].kind) && fr[i].rel_psn == *rel) {
        NavTarget t{
            fr[i].ts_ns, i,
            "PSN " + rel_text(static_cast<int32_t>(*rel)) + ": frame " + std::to_string(i + 1)};
        return t;
      }
    error = "PSN " + quoted + " (rel " + rel_text(static_cast<int32_t>(*rel)) +
            ") is not in this QP's data";
    return std::nullopt;
  }
  const bool time = starts_with_word(s, "t") || (!s.empty() && s.front() == '+') ||
                    (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back())) &&
                     s.find('#') == std::string_view::npos && !s.starts_with("0x"));
  if (time) {
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    const auto d = parse_duration_ns(s);
    if (!d) {
      error = "time " + quoted + ": expected +1.5ms, 150us, 2s or 800ns after the first frame";
      return std::nullopt;
    }
    const uint32_t i = frame_near(impl_->first_ns + *d);
    if (i == kNone) {
      error = "the capture has no frames";
      return std::nullopt;
    }
    return NavTarget{impl_->first_ns + *d, i, "+" + format_time_ns(*d)};
  }
  if (!starts_with_word(s, "frame") && !s.empty() && s.front() == '#') s.remove_prefix(1);
  const auto n = parse_uint(trim_ws(s));
  if (!n || *n == 0 || *n > fr.size()) {
    error = "frame " + quoted + ": expected a frame number 1.." + std::to_string(fr.size()) +
            ", a time (+1.5ms) or a PSN (psn 0x1234)";
    return std::nullopt;
  }
  const auto i = static_cast<uint32_t>(*n - 1);
  return NavTarget{fr[i].ts_ns, i, "frame " + std::to_string(*n)};
}

}  // namespace mrc::view
