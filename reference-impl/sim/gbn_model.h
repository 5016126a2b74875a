// A RoCEv2 RC endpoint with go-back-N loss recovery: the transport MRC replaces, on the same
// simulator, so that the engine's figures have a baseline measured the same way.
//
// What it models (IBTA RC as RoCEv2 NICs implement it, reduced to RDMA WRITE):
//   - one QP = one port and one UDP source port, so every packet of a QP takes one path;
//   - packets leave in PSN order, at most `window_psns` unacknowledged;
//   - the responder accepts only the expected PSN: a later PSN is dropped and answered once with
//     a NAK (PSN sequence error) naming the expected PSN; an earlier one is a duplicate and is
//     acknowledged again;
//   - the requester goes back to the NAKed PSN (or, on the local ACK timeout, to the oldest
//     unacknowledged one) and resends everything from there; `retry_cnt` timeouts in a row
//     without progress end the QP with RETRY_EXC_ERR;
//   - ACKs are coalesced: the requester asks for one (AckReq) every `ack_req_every` packets and
//     on the last packet of a message.
// Frames are real RoCEv2 (BTH opcodes 0x06..0x0A, RETH, AETH ACK 0x11, ICRC) built and parsed by
// mrc::wire, so captures of a run open in Wireshark like any RoCE trace.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "reference-impl/sim/sim.h"
#include "wire/wire.h"

namespace mrc::sim {

struct GbnConfig {
  std::string name;
  wire::Ipv6Addr gid{};
  uint8_t port = 1;  // the port (plane) every QP of this node uses
  wire::MacAddr mac{};
  wire::MacAddr next_hop_mac{};
  uint32_t path_mtu = 4096;
  uint32_t window_psns = 1024;   // unacknowledged PSNs a QP may have
  uint64_t timeout_ns = 16'384;  // local ACK timeout
  uint32_t retry_cnt = 7;        // timeouts without progress before RETRY_EXC_ERR
  uint32_t ack_req_every = 16;   // AckReq on every n-th packet of a message and on its last
  uint8_t dscp = 26;
  uint64_t seed = 1;  // initial PSNs
};

enum class GbnStatus : uint8_t { kSuccess, kRetryExceeded, kRemoteAccess, kFlushed };
std::string_view gbn_status_name(GbnStatus s);

struct GbnCompletion {
  uint64_t wr_id = 0;
  uint32_t qpn = 0;
  GbnStatus status = GbnStatus::kSuccess;
  uint64_t t_ns = 0;  // simulated time of the completion
};

struct GbnStats {
  uint64_t data_packets_sent = 0;  // every transmission
  uint64_t retransmitted_packets = 0;
  uint64_t timeouts = 0;
  uint64_t go_backs = 0;  // NAK- or timeout-triggered rewinds
  uint64_t naks_rx = 0;
  uint64_t acks_rx = 0;
  uint64_t naks_sent = 0;
  uint64_t acks_sent = 0;
  uint64_t data_packets_rx = 0;
  uint64_t duplicates_rx = 0;
  uint64_t out_of_sequence_rx = 0;  // dropped: a PSN after the expected one
  uint64_t bytes_placed = 0;        // in order, once
  uint64_t remote_access_errors = 0;
  uint64_t rx_dropped = 0;  // not RoCE, bad ICRC, unknown QP, wrong state
};

class GbnEndpoint final : public Node {
 public:
  explicit GbnEndpoint(GbnConfig cfg);

  // QPs: `sport` is the UDP source port every packet of the QP carries (its one path), `port`
  // the NIC port (plane) it uses; 0: GbnConfig::port.
  uint32_t create_qp(uint16_t sport, uint8_t port = 0);
  uint32_t initial_psn(uint32_t qpn) const;
  // Peer QP and PSNs: sq_psn is this QP's first PSN, rq_psn the peer's.
  bool connect(uint32_t qpn, const wire::Ipv6Addr& peer_gid, uint32_t dest_qpn, uint32_t rq_psn);
  bool qp_in_error(uint32_t qpn) const;

  // Memory the peer may write: returns the rkey.
  uint32_t register_region(void* addr, size_t len);
  // RDMA WRITE of [src, src+len) to remote_addr; false when the QP is not usable.
  bool post_write(uint32_t qpn, uint64_t wr_id, const void* src, uint32_t len, uint64_t remote_addr,
                  uint32_t rkey);
  bool poll(GbnCompletion& out);

  const GbnStats& stats() const { return stats_; }
  uint64_t bytes_placed(uint32_t qpn) const;           // responder side, in order
  uint64_t retransmitted_packets(uint32_t qpn) const;  // requester side

  // Node
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override;
  void on_timer(uint64_t now_ns) override;
  bool poll_tx(uint64_t now_ns, TxFrame& out) override;
  uint64_t next_deadline_ns() const override;

 private:
  struct Wqe {
    uint64_t wr_id = 0;
    const std::byte* src = nullptr;
    uint32_t len = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t first_psn = 0;
    uint32_t npkts = 0;
  };
  struct Qp {
    uint32_t qpn = 0;
    uint16_t sport = 0;
    uint8_t port = 0;
    uint64_t retransmitted = 0;
    bool connected = false;
    bool error = false;
    wire::Ipv6Addr peer{};
    uint32_t dest_qpn = 0;
    // requester
    std::deque<Wqe> sq;
    uint32_t psn_end = 0;  // PSN after the last posted packet
    uint32_t una = 0;      // oldest unacknowledged
    uint32_t nxt = 0;      // next to send
    uint32_t high = 0;     // after the highest PSN ever sent (retransmission accounting)
    uint32_t retries = 0;
    uint64_t deadline = UINT64_MAX;
    // responder
    uint32_t epsn = 0;
    bool nak_sent = false;
    bool writing = false;  // inside a multi-packet WRITE
    uint64_t write_va = 0;
    uint64_t write_end = 0;
    uint64_t placed = 0;
  };
  struct Ctrl {
    uint32_t qpn = 0;
    uint32_t psn = 0;
    uint8_t syndrome = 0;
  };

  Qp* find(uint32_t qpn);
  const Qp* find(uint32_t qpn) const;
  void on_data(Qp& q, const wire::DecodedFrame& f);
  void on_ack(Qp& q, const wire::DecodedFrame& f, uint64_t now_ns);
  void acknowledge(Qp& q, uint32_t psn, uint64_t now_ns);
  void to_error(Qp& q, GbnStatus head_status, uint64_t now_ns);
  bool build_data(Qp& q, uint64_t now_ns, TxFrame& out);
  bool build_ctrl(const Ctrl& c, TxFrame& out);
  bool finish(const Qp& q, TxFrame& out);
  wire::FrameSpec& begin(const Qp& q, uint8_t opcode, uint8_t dscp, uint8_t ecn);

  GbnConfig cfg_;
  uint64_t rng_state_;
  std::vector<Qp> qps_;
  struct Region {
    uint64_t addr;
    uint64_t len;
  };
  std::unordered_map<uint32_t, Region> regions_;
  uint32_t next_rkey_ = 0x5000;
  std::deque<Ctrl> ctrl_;
  std::deque<GbnCompletion> cq_;
  size_t rr_ = 0;
  GbnStats stats_;
  wire::FrameSpec spec_;
};

}  // namespace mrc::sim
