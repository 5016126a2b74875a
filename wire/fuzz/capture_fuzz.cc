// Fuzz target for the pcap/pcapng reader: any byte string is either read to its end or
// rejected with an error message, never a crash or an out-of-bounds read. The same bytes read
// from a pipe (the reader's streaming path) give the same records and the same error.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "wire/wire.h"

using namespace mrc::wire;

namespace {

struct Seen {
  uint64_t frames = 0;
  uint64_t digest = 14695981039346656037ull;  // FNV-1a over every frame's time, length, bytes
  std::string error;                          // without the input's name
  bool operator==(const Seen&) const = default;
};

void mix(uint64_t& d, uint64_t v) {
  d = (d ^ v) * 1099511628211ull;
}

Seen drain(CaptureReader& r, bool opened, const std::string& label) {
  Seen s;
  if (opened) {
    CaptureRecord rec;
    DecodedFrame f;
    while (r.next(rec) && s.frames < 100000) {
      DecodeOptions o;
      o.link = rec.link;
      decode_frame(rec.data, f, o);
      ++s.frames;
      mix(s.digest, rec.ts_ns);
      mix(s.digest, rec.data.size());
      for (std::byte b : rec.data) mix(s.digest, static_cast<uint8_t>(b));
    }
  } else if (r.error().empty()) {
    std::abort();
  }
  s.error = r.error().substr(r.error().empty() ? 0 : label.size());
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CaptureReader m;
  const Seen from_memory = drain(m, m.open_memory(as_bytes(data, size)), "<memory>");
  // One input in 32 (by its bytes, so that a crash replays) also goes through a pipe, which
  // costs far more than the read itself. Inputs that fit in a pipe's buffer go in whole before
  // the reader starts: no thread needed.
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 16777619u;
  int fds[2];
  if ((h & 31) != 0 || size > 60000 || ::pipe(fds) != 0) return 0;
  if (size > 0 && ::write(fds[1], data, size) != static_cast<ssize_t>(size)) {
    ::close(fds[0]);
    ::close(fds[1]);
    return 0;
  }
  ::close(fds[1]);
  const std::string path = "/proc/self/fd/" + std::to_string(fds[0]);
  CaptureReader p;
  const Seen from_pipe = drain(p, p.open(path), path);
  ::close(fds[0]);
  if (!(from_pipe == from_memory)) std::abort();
  return 0;
}
