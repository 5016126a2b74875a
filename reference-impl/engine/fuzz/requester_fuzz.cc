// Fuzz target: a requester mid-transfer (node a of fuzz_setup.h has posted kMessages writes and
// sent what its windows allow) takes a sequence of frames: recorded SACKs, NACKs, transport ACKs,
// endpoint messages and data of a real transfer, mutated, with or without a repaired ICRC, with
// time advancing so that timeouts, probes and retry exhaustion happen. Checks on every step:
// every frame sent is well formed; every data packet carries a PSN of the transfer and exactly
// the source bytes of that PSN (retransmissions included); each work request completes at most
// once; bytes in flight never exceed what the transfer holds.
#include <cstdint>
#include <vector>

#include "reference-impl/engine/fuzz/fuzz_setup.h"

using namespace mrc::engine;
using namespace mrc::engine::fuzz;

namespace {

struct State {
  Pair p;
  const std::vector<uint8_t>& src = source_bytes();
  MemoryRegion mr;
  bool completed[kMessages + 1] = {};
  TxPacket pkt;
};

void drain(State& s, uint64_t now) {
  Endpoint& a = *s.p.ep[0];
  for (int n = 0; a.poll_tx(now, s.pkt); ++n) {
    if (n > 100'000) die("requester does not stop transmitting");
    const mrc::wire::DecodedFrame f = check_tx(s.pkt);
    if (f.op->kind != mrc::wire::PacketKind::kMrcData) continue;
    const uint32_t k = mrc::wire::psn_diff(f.bth.psn, s.p.sq_psn[0]);
    if (k >= kPackets) die("data packet with a PSN outside the transfer");
    if (f.payload.size() != kMtu) die("data packet of the wrong size");
    if (std::memcmp(f.payload.data(), s.src.data() + size_t{k} * kMtu, kMtu) != 0)
      die("data packet payload differs from the source bytes of its PSN");
    if (f.reth.va != kRegionAddr + uint64_t{k} * kMtu)
      die("data packet RETH VA is not the address of its PSN's bytes");
  }
  Wc wc[16];
  for (int k; (k = a.poll_cq(s.p.cq[0], wc)) > 0;) {
    for (int i = 0; i < k; ++i) {
      if (wc[i].opcode != WcOpcode::kRdmaWrite) continue;
      if (wc[i].wr_id < 1 || wc[i].wr_id > kMessages) die("completion for an unknown wr_id");
      if (s.completed[wc[i].wr_id]) die("work request completed twice");
      s.completed[wc[i].wr_id] = true;
    }
  }
  QpStats st;
  if (!a.qp_stats(s.p.qpn[0], st).ok()) die("qp_stats");
  if (st.bytes_in_flight > uint64_t{kPackets} * (kMtu + 200))
    die("bytes in flight beyond the transfer");
  AsyncEvent ae;
  while (a.get_async_event(ae)) {
  }
  EpResponse rsp;
  while (a.ep_poll_response(rsp)) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  State s;
  make_side(s.p, 0);
  post_transfer(s.p, s.mr);
  Endpoint& a = *s.p.ep[0];
  uint64_t now = kStartNs;
  drain(s, now);  // the first window leaves: mid-transfer
  std::vector<std::byte> scratch;
  for (const Record& rec : parse_records(data, size)) {
    deliver(a, rec, now, scratch);
    drain(s, now);
  }
  // Timers: retransmissions, probes, retry exhaustion.
  for (int k = 0; k < 12; ++k) {
    const uint64_t d = a.next_deadline_ns();
    if (d == UINT64_MAX) break;
    now = std::max(now, d);
    a.on_timer(now);
    drain(s, now);
  }
  return 0;
}
