// Fuzz target: a responder (node b of fuzz_setup.h, connected and in RTS, its region at a fixed
// address between guard bytes and no-access pages) takes a sequence of frames: recorded frames of
// a real transfer, mutated, with or without a repaired ICRC. Beyond "no crash, no sanitizer
// report": the guard bytes never change (no write outside the registered region), every frame
// the responder sends is well formed, and completions never exceed the receive WQEs posted.
#include <cstdint>
#include <vector>

#include "reference-impl/engine/fuzz/fuzz_setup.h"

using namespace mrc::engine;
using namespace mrc::engine::fuzz;

namespace {

FixedRegion& region() {
  static FixedRegion r;
  return r;
}

void drain(Endpoint& ep, uint64_t now, TxPacket& pkt, uint32_t cq) {
  for (int n = 0; ep.poll_tx(now, pkt); ++n) {
    if (n > 100'000) die("responder does not stop transmitting");
    check_tx(pkt);
  }
  Wc wc[16];
  int recv = 0;
  for (int k; (k = ep.poll_cq(cq, wc)) > 0;)
    for (int i = 0; i < k; ++i) recv += wc[i].opcode == WcOpcode::kRecvRdmaWithImm;
  if (recv > 1) die("more receive completions than receive WQEs");
  AsyncEvent ae;
  while (ep.get_async_event(ae)) {
  }
  EpResponse rsp;
  while (ep.ep_poll_response(rsp)) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FixedRegion& r = region();
  Pair p;
  make_side(p, 1);
  MemoryRegion mr;
  prepare_responder(p, r, mr);
  Endpoint& b = *p.ep[1];
  uint64_t now = kStartNs;
  TxPacket pkt;
  std::vector<std::byte> scratch;
  for (const Record& rec : parse_records(data, size)) {
    deliver(b, rec, now, scratch);
    drain(b, now, pkt, p.cq[1]);
    if (!r.guards_intact()) die("a guard byte next to the registered region changed");
  }
  // Let every timer the input armed run out (reverse-EV probes, endpoint requests).
  for (int k = 0; k < 16; ++k) {
    const uint64_t d = b.next_deadline_ns();
    if (d == UINT64_MAX) break;
    now = std::max(now, d);
    b.on_timer(now);
    drain(b, now, pkt, p.cq[1]);
  }
  if (!r.guards_intact()) die("a guard byte next to the registered region changed");
  return 0;
}
