// NSCC (UET 1.0 network-signal congestion control, as summarised in mrc-protocol.md A.8.2) and
// the "none" controller. Private header: the rest of the engine only sees CongestionControl.
#pragma once

#include <cstdint>

#include "reference-impl/engine/engine.h"

namespace mrc::engine {

class Nscc final : public CongestionControl {
 public:
  Nscc(const NsccConfig& cfg, uint32_t mtu_bytes);
  std::string_view name() const override { return kCcNscc; }
  uint64_t cwnd_bytes() const override { return static_cast<uint64_t>(cwnd_); }
  void on_ack(const CcAckSample& s) override;
  void on_trim(uint64_t now_ns, uint32_t nominal_bytes, bool last_hop) override;
  void on_loss(uint64_t now_ns, uint32_t nominal_bytes, bool by_timeout) override;

  // Observation for tests.
  double avg_delay_ns() const { return avg_delay_ns_; }
  uint64_t base_rtt_ns() const { return base_rtt_ns_; }
  double inc_bytes() const { return inc_bytes_; }

 private:
  void proportional_increase(double newly, double delay_ns);
  void fair_increase(double newly);
  void multiplicative_decrease(uint64_t now_ns);
  void adjust(uint64_t now_ns, double newly);
  void quick_adapt(uint64_t now_ns);
  void roll_achieved(uint64_t now_ns);
  void clamp();

  NsccConfig cfg_;
  double mtu_;
  double cwnd_;
  double inc_bytes_ = 0;
  double received_since_adjust_ = 0;
  uint64_t last_adjust_ns_ = 0;
  uint64_t base_rtt_ns_;
  double avg_delay_ns_ = 0;
  bool have_delay_ = false;
  uint64_t last_md_ns_ = 0;
  bool md_done_ = false;
  // Quick adapt: bytes acknowledged in the current and the previous base_rtt window.
  double achieved_bytes_ = 0;
  double achieved_prev_ = 0;
  uint64_t achieved_start_ns_ = 0;
  uint64_t last_qa_ns_ = 0;
  bool qa_done_ = false;
  // Fast increase: bytes acknowledged in a row with (almost) no queueing delay.
  double fi_run_bytes_ = 0;
};

class NoCc final : public CongestionControl {
 public:
  std::string_view name() const override { return kCcNone; }
  uint64_t cwnd_bytes() const override { return UINT64_MAX; }
  void on_ack(const CcAckSample&) override {}
  void on_trim(uint64_t, uint32_t, bool) override {}
  void on_loss(uint64_t, uint32_t, bool) override {}
};

}  // namespace mrc::engine
