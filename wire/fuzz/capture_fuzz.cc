// Fuzz target for the pcap/pcapng reader: any byte string is either read to its end or
// rejected with an error message, never a crash or an out-of-bounds read.
#include <cstdlib>

#include "wire/wire.h"

using namespace mrc::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CaptureReader r;
  if (!r.open_memory(as_bytes(data, size))) {
    if (r.error().empty()) std::abort();
    return 0;
  }
  CaptureRecord rec;
  DecodedFrame f;
  uint64_t n = 0;
  while (r.next(rec)) {
    DecodeOptions o;
    o.link = rec.link;
    decode_frame(rec.data, f, o);
    if (++n > 100000) break;
  }
  return 0;
}
