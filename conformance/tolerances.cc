// Tolerance presets (`mrct check --tolerances software|hardware|auto`) and the derivation of the
// auto preset from the RTTs and reaction times a capture shows.
#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "conformance/internal.h"

namespace mrc::check {

std::string_view tolerance_preset_name(TolerancePreset p) {
  switch (p) {
    case TolerancePreset::kSoftware:
      return "software";
    case TolerancePreset::kHardware:
      return "hardware";
    case TolerancePreset::kAuto:
      return "auto";
  }
  return "?";
}

std::optional<TolerancePreset> parse_tolerance_preset(std::string_view s) {
  for (auto p : {TolerancePreset::kSoftware, TolerancePreset::kHardware, TolerancePreset::kAuto})
    if (s == tolerance_preset_name(p)) return p;
  return std::nullopt;
}

Tolerances preset_tolerances(TolerancePreset p) {
  Tolerances t;  // the software values
  if (p != TolerancePreset::kHardware) return t;
  // A NIC answers and reacts within a few microseconds, a whole trace may last a few hundred: the
  // allowances are a few times that, still well above a hardware reaction so that a conforming
  // NIC is not flagged for timestamp jitter.
  t.reaction_ns = 5'000;
  t.end_grace_ns = 100'000;
  t.t_ack_max_ns = 20'000;
  t.timer_slack_ns = 1'000;
  t.t_port_ns = 20'000;
  t.ep_timeout_ns = 200'000;
  t.dedup_window_ns = 1'000'000;
  return t;
}

namespace {

// The tolerances by profile key. Each preset value is used only for keys the profile left out.
struct U64Field {
  const char* key;
  uint64_t Tolerances::*field;
};
constexpr U64Field kU64Fields[] = {{"dedup_window_ns", &Tolerances::dedup_window_ns},
                                   {"end_grace_ns", &Tolerances::end_grace_ns},
                                   {"reaction_ns", &Tolerances::reaction_ns},
                                   {"t_ack_max_ns", &Tolerances::t_ack_max_ns},
                                   {"t_skip_ns", &Tolerances::t_skip_ns},
                                   {"t_probe_ns", &Tolerances::t_probe_ns},
                                   {"timer_slack_ns", &Tolerances::timer_slack_ns},
                                   {"decision_lookahead_ns", &Tolerances::decision_lookahead_ns},
                                   {"ep_timeout_ns", &Tolerances::ep_timeout_ns},
                                   {"t_port_ns", &Tolerances::t_port_ns},
                                   {"t_reverse_probe_ns", &Tolerances::t_reverse_probe_ns}};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

uint64_t pct(std::vector<uint64_t>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

std::vector<std::pair<std::string, std::string>> tolerance_values(const Tolerances& t) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : kU64Fields) out.emplace_back(f.key, std::to_string(t.*(f.field)));
  out.emplace_back("skip_rotation_fraction", num(t.skip_rotation_fraction));
  out.emplace_back("timer_tolerance", num(t.timer_tolerance));
  out.emplace_back("spray_run_max", std::to_string(t.spray_run_max));
  out.emplace_back("plane_balance_slack", std::to_string(t.plane_balance_slack));
  return out;
}

namespace detail {

// The preset's values for every key the profile did not set.
void apply_preset(const Tolerances& preset, DutProfile& prof) {
  auto given = [&](const char* k) {
    return std::find(prof.tolerances_set.begin(), prof.tolerances_set.end(), k) !=
           prof.tolerances_set.end();
  };
  for (const auto& f : kU64Fields)
    if (!given(f.key)) prof.tol.*(f.field) = preset.*(f.field);
  if (!given("skip_rotation_fraction"))
    prof.tol.skip_rotation_fraction = preset.skip_rotation_fraction;
  if (!given("timer_tolerance")) prof.tol.timer_tolerance = preset.timer_tolerance;
  if (!given("spray_run_max")) prof.tol.spray_run_max = preset.spray_run_max;
  if (!given("plane_balance_slack")) prof.tol.plane_balance_slack = preset.plane_balance_slack;
}

}  // namespace detail

bool derive_tolerances(const CheckOptions& opts, const DutProfile& prof, Tolerances& tol,
                       std::string& derivation, std::string& error) {
  constexpr size_t kMaxSamples = 1 << 20;
  constexpr size_t kMaxPending = 1 << 20;
  const auto wp = wire::make_profile(prof.wire_params());  // every port and choice of it
  // (capture, sender, receiver, PSN): times of data sent and of NACKs awaiting their
  // retransmission.
  using Key = std::tuple<uint32_t, detail::Addr, detail::Addr, uint32_t>;
  std::map<Key, uint64_t> data_ts, nack_ts;
  std::vector<uint64_t> rtt, reaction;
  for (uint32_t i = 0; i < opts.captures.size(); ++i) {
    const std::string& path = opts.captures[i].path;
    wire::CaptureReader rd;
    if (!rd.open(path)) {
      error = rd.error().empty() ? path + ": cannot open" : rd.error();
      return false;
    }
    wire::CaptureRecord rec;
    wire::DecodedFrame f;
    wire::DecodeOptions o;
    while (rd.next(rec)) {
      o.link = rec.link;
      if (!wire::decode_frame(rec.data, f, o, *wp) || !f.roce || !f.op) continue;
      detail::Addr src{}, dst{};
      if (!detail::roce_addrs(f, src, dst)) continue;
      switch (f.op->kind) {
        case wire::PacketKind::kMrcData: {
          if (data_ts.size() >= kMaxPending) data_ts.clear();
          data_ts[{i, src, dst, f.bth.psn}] = rec.ts_ns;
          if (f.bth.rtx) {
            auto it = nack_ts.find({i, src, dst, f.bth.psn});
            if (it != nack_ts.end()) {
              if (rec.ts_ns >= it->second && reaction.size() < kMaxSamples)
                reaction.push_back(rec.ts_ns - it->second);
              nack_ts.erase(it);
            }
          }
          break;
        }
        case wire::PacketKind::kMrcSack: {
          // The SACK goes responder -> requester; its data went the other way.
          // Only the first SACK to name a transmission: later ones repeat a cumulative ACK that
          // did not move, long after.
          auto it = data_ts.find({i, dst, src, f.seth.cack_psn});
          if (it == data_ts.end()) break;
          if (rec.ts_ns >= it->second && rtt.size() < kMaxSamples)
            rtt.push_back(rec.ts_ns - it->second);
          data_ts.erase(it);
          break;
        }
        case wire::PacketKind::kMrcNack:
          if (nack_ts.size() >= kMaxPending) nack_ts.clear();
          nack_ts[{i, dst, src, f.neth.nack_psn}] = rec.ts_ns;
          break;
        default:
          break;
      }
    }
    if (!rd.error().empty()) {
      error = rd.error();
      return false;
    }
  }
  const Tolerances hw = preset_tolerances(TolerancePreset::kHardware);
  const Tolerances sw = preset_tolerances(TolerancePreset::kSoftware);
  tol = sw;
  if (rtt.empty() && reaction.empty()) {
    derivation =
        "no RTT (data -> SACK of its PSN) or reaction (NACK -> retransmission) in the captures: "
        "the software values";
    return true;
  }
  const uint64_t rtt50 = pct(rtt, 0.5), rtt99 = pct(rtt, 0.99), react99 = pct(reaction, 0.99);
  auto clamp = [](uint64_t v, uint64_t lo, uint64_t hi) { return std::clamp(v, lo, hi); };
  // Twice the slowest reaction seen, or one RTT when no NACK was answered.
  tol.reaction_ns =
      clamp(std::max(2 * react99, reaction.empty() ? rtt99 : 0), hw.reaction_ns, sw.reaction_ns);
  tol.end_grace_ns =
      clamp(std::max(10 * rtt99, 4 * tol.reaction_ns), hw.end_grace_ns, sw.end_grace_ns);
  tol.t_ack_max_ns = clamp(4 * rtt99, hw.t_ack_max_ns, sw.t_ack_max_ns);
  tol.t_port_ns = clamp(std::max(4 * rtt99, tol.reaction_ns), hw.t_port_ns, sw.t_port_ns);
  tol.timer_slack_ns = clamp(rtt50, hw.timer_slack_ns, sw.timer_slack_ns);
  tol.ep_timeout_ns = clamp(20 * rtt99, hw.ep_timeout_ns, sw.ep_timeout_ns);
  derivation = std::to_string(rtt.size()) + " RTT sample(s) (data -> SACK of its PSN, same capture";
  derivation += "): median " + detail::Engine::dur(rtt50) + ", p99 " + detail::Engine::dur(rtt99);
  derivation += "; " + std::to_string(reaction.size()) +
                " reaction sample(s) (NACK -> retransmission): p99 " +
                detail::Engine::dur(react99) + ". reaction_ns = max(2 x reaction p99" +
                std::string(reaction.empty() ? ", RTT p99" : "") +
                "), end_grace_ns = max(10 x RTT p99, 4 x reaction_ns), t_ack_max_ns = 4 x RTT "
                "p99, t_port_ns = max(4 x RTT p99, reaction_ns), timer_slack_ns = RTT median, "
                "ep_timeout_ns = 20 x RTT p99; each kept between the hardware and the software "
                "values";
  return true;
}

}  // namespace mrc::check
