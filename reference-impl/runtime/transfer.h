// The data-moving part of `mrct endpoint`, independent of where the frames go (real interfaces
// through a Runtime, or straight into another engine in memory). Private to the runtime folder.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "reference-impl/engine/engine.h"
#include "reference-impl/runtime/runtime.h"

namespace mrc::runtime {

struct Plan {
  uint64_t size = 65536;  // bytes per message
  uint64_t iters = 1000;  // messages per QP; 0 with a duration
  uint64_t duration_ns = 0;
  uint32_t qps = 1;
  uint32_t tx_depth = 128;  // outstanding messages per QP
  bool imm = false;         // WRITE_WITH_IMM (imm = message index)
  uint64_t slots = 0;       // message slots per QP in the registered buffers
  uint64_t seed = 1;        // data pattern seed
  uint32_t pmtu = 4096;
  uint8_t mpr = 8;       // 128-PSN units, both directions
  uint8_t timeout = 18;  // 1.024 us * 2^timeout (268 ms)
  uint8_t retry_linear = 7;
  uint8_t retry_exp = 7;
  uint16_t wimm = 128;                    // responder max_wimm_dest
  uint64_t stall_ns = 30'000'000'000ull;  // no completion for this long = failure
};

// Anonymous memory, populated so the transfer does not page-fault. A side whose peer waits on
// its control answer gives a budget: what is not populated within it is populated by a thread
// of its own while the handshake goes on (populating 2 GiB took 14 s on a starved host, more
// than --ctl-timeout; on a quiet one it fits the budget, so the transfer starts as before). The
// data path faults pages in itself where it gets ahead of that thread (MADV_POPULATE_WRITE
// never changes the contents).
class Region {
 public:
  Region() = default;
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  Status allocate(size_t bytes, uint64_t budget_ns = UINT64_MAX);
  std::byte* data() const { return p_; }
  size_t size() const { return n_; }

 private:
  std::byte* p_ = nullptr;
  size_t n_ = 0;
  std::thread populate_;
  std::atomic<bool> stop_{false};
};

struct PeerQp {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t va = 0;
};

struct VerifyResult {
  uint64_t messages_checked = 0;
  uint64_t messages_bad = 0;
  uint64_t bytes_checked = 0;
  std::string first_bad;  // "qp 0 message 12 slot 12 byte 4096"
  uint64_t imm_expected = 0, imm_received = 0, imm_duplicates = 0, imm_missing = 0;
};

// One endpoint's side of the transfer: CQ, QPs, buffer, progress.
class Side {
 public:
  Side(const Plan& plan, bool client) : plan_(plan), client_(client) {}

  // The buffer (populated) and, for a client, the first messages. No engine call: a side added
  // to a running loop does this on its own thread, so the loop is not held up for it. create()
  // does it when it was not done.
  Status allocate();
  // The plan both ends agreed on (a client allocates before the handshake, so that its peer's
  // control timeout never covers filling the buffer): fewer slots than allocated are fine (the
  // first messages are in the first slots either way), everything else must be unchanged.
  Status settle(const Plan& agreed);
  // Server: at most this long populating the buffer before create() returns (Region).
  void set_populate_budget_ns(uint64_t ns) { populate_budget_ns_ = ns; }
  // profile_id: the EV and CC profile ids this side registers (one per side when several
  // sides share an engine).
  Status create(engine::Endpoint& ep, const engine::EvProfile& ev, const engine::CcProfile& cc,
                uint64_t profile_id = 1);
  std::vector<uint32_t> qpns() const;
  std::vector<PeerQp> local_qps() const;
  // INIT -> RTR -> RTS towards the peer. max_wimm: requester limit (the responder's
  // max_wimm_dest, or more for the exceed-wimm mutant).
  Status connect(engine::Endpoint& ep, const wire::Ipv6Addr& peer_gid,
                 const std::vector<PeerQp>& peer, uint16_t max_wimm);
  // Server: post the receive WQEs WRITE_WITH_IMM consumes.
  Status post_receives(engine::Endpoint& ep);

  // An engine async event of this side's QPs or CQ is a transfer error (the client's transfer
  // ends at its next step). Port events are not: the runtime handles carrier itself and the
  // engine moves the QPs off the port. Returns whether the event was this side's.
  bool on_async_event(const engine::AsyncEvent& ae);

  // App hooks (runtime.h AppHook semantics). Async events reach the side through
  // dispatch_async_events(), which the hook calls first.
  uint64_t client_step(engine::Endpoint& ep, uint64_t now, bool& done);
  uint64_t server_step(engine::Endpoint& ep, uint64_t now, bool& done);

  // Server, after the client finished: compares every slot with the message that was last
  // written into it. messages_per_qp comes from the client.
  VerifyResult verify(const std::vector<uint64_t>& messages_per_qp) const;

  const std::string& error() const { return error_; }
  const Plan& plan() const { return plan_; }
  std::vector<uint64_t> completed_per_qp() const;
  uint64_t messages_completed() const;
  uint64_t bytes_completed() const { return messages_completed() * plan_.size; }
  uint64_t t_start() const { return t_start_; }
  uint64_t t_end() const { return t_end_; }
  const LatencyHistogram& latency() const { return lat_; }
  // Sum of the QPs' statistics.
  engine::QpStats qp_stats(const engine::Endpoint& ep) const;

 private:
  struct Qp {
    uint32_t qpn = 0;
    uint32_t psn = 0;
    PeerQp peer;
    std::byte* base = nullptr;  // this QP's slots
    uint64_t posted = 0, completed = 0, lowest = 0;
    std::vector<uint64_t> post_ns;  // by message % tx_depth
    std::vector<uint8_t> done;      // by message % tx_depth
    std::vector<bool> imm_seen;
    uint64_t imm_received = 0, imm_duplicates = 0;
  };
  bool fail(const std::string& why, bool& done);
  int qp_index(uint32_t qpn) const;

  Plan plan_;
  bool client_;
  uint64_t stride_slots_ = 0;  // slots per QP in the buffer as allocated (>= plan_.slots)
  uint64_t populate_budget_ns_ = UINT64_MAX;
  uint32_t cq_ = 0;
  uint64_t profile_id_ = 1;
  Region mem_;
  engine::MemoryRegion mr_;
  std::vector<Qp> qps_;
  LatencyHistogram lat_;
  std::vector<engine::Wc> wcs_ = std::vector<engine::Wc>(256);
  std::string error_;
  bool error_is_flush_ = false;
  bool async_failed_ = false;
  uint64_t t_start_ = 0, t_end_ = 0, last_progress_ = 0;
};

// Drains the engine's async events (engine-wide) and hands each to the side that owns it.
void dispatch_async_events(engine::Endpoint& ep, std::span<Side* const> sides);

// Frame size of a data packet with `pmtu` payload bytes (Ethernet included).
uint32_t data_frame_bytes(uint32_t pmtu, wire::EvFormat format, bool srh);

}  // namespace mrc::runtime
