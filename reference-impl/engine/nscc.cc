#include "reference-impl/engine/nscc.h"

#include <algorithm>
#include <cmath>

namespace mrc::engine {
namespace {
// Queueing delay below this fraction of target_delay counts as "empty network" for fast
// increase. MRP0 gap: UET names the behaviour, the summary gives no threshold.
constexpr double kFastIncreaseDelayFraction = 0.1;
// Proportional increase: at zero delay the window grows by max_cwnd / 4 per RTT, shrinking
// linearly to 0 at target_delay. MRP0 gap: UET's alpha is derived from deployment constants the
// summary does not give; this reaches max_cwnd in about four RTTs from MTU.
constexpr double kProportionalShare = 0.25;
constexpr double kDelayEwmaGain = 0.125;
// Queueing delay, as a multiple of target_delay, above which the window comes down without an
// ECN mark. UET reads high delay without ECN as congestion elsewhere and increases fairly, which
// assumes every queue on the path marks; a NIC transmit queue, a last hop with ECN disabled (as
// the paper runs it) or a fabric without marking never does, and the window then stayed at
// max_cwnd with the queue it built (RTT from ~10 us to > 150 us in the viewer fixture, ~10 ms on
// the emulated testbed). MRP0 gap: a golden-peer choice, not from the sources.
constexpr double kUnmarkedDecreaseDelayFactor = 2.0;
}  // namespace

Nscc::Nscc(const NsccConfig& cfg, uint32_t mtu_bytes)
    : cfg_(cfg),
      mtu_(std::max<double>(mtu_bytes, 1)),
      cwnd_(std::max<double>(cfg.max_cwnd, mtu_)),
      base_rtt_ns_(cfg.base_rtt) {
  // UET starts a fresh connection at the maximum window (a BDP and a half).
}

void Nscc::clamp() {
  cwnd_ = std::clamp(cwnd_, mtu_, std::max<double>(cfg_.max_cwnd, mtu_));
}

void Nscc::roll_achieved(uint64_t now_ns) {
  const uint64_t period = std::max<uint64_t>(base_rtt_ns_, 1);
  if (now_ns - achieved_start_ns_ >= period) {
    achieved_prev_ = achieved_bytes_;
    achieved_bytes_ = 0;
    achieved_start_ns_ = now_ns;
  }
}

void Nscc::on_ack(const CcAckSample& s) {
  const double newly = static_cast<double>(s.newly_acked_bytes);
  roll_achieved(s.now_ns);
  achieved_bytes_ += newly;

  double delay = have_delay_ ? avg_delay_ns_ : 0;
  if (s.rtt_ns) {
    // base_rtt is the configured unloaded RTT, lowered by any smaller sample.
    base_rtt_ns_ = std::min<uint64_t>(base_rtt_ns_ == 0 ? *s.rtt_ns : base_rtt_ns_, *s.rtt_ns);
    delay = static_cast<double>(*s.rtt_ns - base_rtt_ns_);
    avg_delay_ns_ = have_delay_ ? avg_delay_ns_ + kDelayEwmaGain * (delay - avg_delay_ns_) : delay;
    have_delay_ = true;
  }

  // CC_STATE.RC (restore_cwnd) is not acted on: no receiver in this engine sets it.
  if (s.rcv_cwnd_pen != 0) {
    cwnd_ -= (static_cast<double>(s.rcv_cwnd_pen) * newly) / 128.0;
  }

  const double target = static_cast<double>(cfg_.target_delay);
  if (!s.ecn && delay < target) {
    proportional_increase(newly, delay);
  } else if (!s.ecn && delay < kUnmarkedDecreaseDelayFactor * target) {
    fair_increase(newly);
  } else if (!s.ecn) {
    multiplicative_decrease(s.now_ns);
  } else if (delay >= target) {
    multiplicative_decrease(s.now_ns);
  }  // ECN with small delay: the mark came from elsewhere in the path; hold.

  if (!cfg_.disable_qa && delay > static_cast<double>(cfg_.qa_threshold)) quick_adapt(s.now_ns);
  adjust(s.now_ns, newly);
  clamp();
}

void Nscc::proportional_increase(double newly, double delay_ns) {
  const double target = std::max<double>(cfg_.target_delay, 1);
  if (delay_ns < kFastIncreaseDelayFraction * target) {
    fi_run_bytes_ += newly;
    if (fi_run_bytes_ >= cwnd_) {
      // A whole window went through an empty network: grow like slow start.
      cwnd_ += newly * static_cast<double>(cfg_.fi_scale);
      return;
    }
  } else {
    fi_run_bytes_ = 0;
  }
  const double gain = kProportionalShare * static_cast<double>(cfg_.max_cwnd) / mtu_;
  inc_bytes_ += gain * newly * (target - delay_ns) / target;
}

void Nscc::fair_increase(double newly) {
  fi_run_bytes_ = 0;
  inc_bytes_ += static_cast<double>(cfg_.fi) * newly;
}

void Nscc::multiplicative_decrease(uint64_t now_ns) {
  fi_run_bytes_ = 0;
  if (md_done_ && now_ns - last_md_ns_ < base_rtt_ns_) return;  // at most once per base RTT
  const double target = static_cast<double>(cfg_.target_delay);
  const double avg = std::max(avg_delay_ns_, 1.0);
  const double factor = std::max(1.0 - static_cast<double>(cfg_.gamma) * (avg - target) / avg,
                                 static_cast<double>(cfg_.max_md_jump));
  cwnd_ *= std::min(factor, 1.0);
  last_md_ns_ = now_ns;
  md_done_ = true;
}

void Nscc::adjust(uint64_t now_ns, double newly) {
  received_since_adjust_ += newly;
  const bool by_period = now_ns - last_adjust_ns_ >= cfg_.adjust_period_threshold;
  if (received_since_adjust_ < cfg_.adjust_bytes_threshold && !by_period) return;
  // inc_bytes accumulates "bytes x factor"; spread over the window it yields MTUs per RTT.
  cwnd_ += inc_bytes_ * mtu_ / std::max(cwnd_, mtu_);
  if (by_period) cwnd_ += static_cast<double>(cfg_.eta);
  inc_bytes_ = 0;
  received_since_adjust_ = 0;
  last_adjust_ns_ = now_ns;
}

void Nscc::quick_adapt(uint64_t now_ns) {
  if (cfg_.disable_qa) return;
  if (qa_done_ && now_ns - last_qa_ns_ < base_rtt_ns_) return;  // once per RTT
  roll_achieved(now_ns);
  const double achieved = std::max(achieved_bytes_, achieved_prev_);
  const double gate = static_cast<double>(cfg_.max_cwnd >> std::min<uint8_t>(cfg_.qa_gate, 31));
  if (achieved < gate) {
    cwnd_ = std::max(achieved, mtu_);
    inc_bytes_ = 0;
  }
  last_qa_ns_ = now_ns;
  qa_done_ = true;
}

void Nscc::on_trim(uint64_t now_ns, uint32_t nominal_bytes, bool last_hop) {
  // Last-hop trims are excluded only when receiver-credit CC runs; MRC has none, so both count.
  (void)last_hop;
  cwnd_ = std::max(cwnd_ - static_cast<double>(nominal_bytes), mtu_);
  quick_adapt(now_ns);
  clamp();
}

void Nscc::on_loss(uint64_t now_ns, uint32_t nominal_bytes, bool by_timeout) {
  (void)nominal_bytes;
  if (by_timeout) quick_adapt(now_ns);
  clamp();
}

std::unique_ptr<CongestionControl> make_nscc(const NsccConfig& cfg, uint32_t mtu_bytes) {
  return std::make_unique<Nscc>(cfg, mtu_bytes);
}

std::unique_ptr<CongestionControl> make_no_cc() {
  return std::make_unique<NoCc>();
}

}  // namespace mrc::engine
