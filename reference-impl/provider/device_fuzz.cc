// libFuzzer target for the device socket protocol (devproto.h) as softmrcd serves it: the input
// is a sequence of requests [u16 length][bytes] handled by one session of a privileged peer
// (CAP_NET_ADMIN: every controller call is reachable) on a loopback device. A length with the
// top bit set is not a request but 8 bytes the peer writes as the `consumed` index of every
// completion ring (cq_ring.h) it was handed so far: the device must not believe it. No request may
// crash the device process or make it touch memory outside its objects; the session's
// teardown at the end frees whatever the requests created. Built only with the fuzz preset.
#include <infiniband/verbs.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "reference-impl/provider/cq_ring.h"
#include "reference-impl/provider/server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The device list (and with it the loopback device) lives for the whole run.
  static ibv_device** list = [] {
    setenv("MRC_SOFT_IO", "loopback", 1);
    unsetenv("MRC_SOFT_DEVICE");
    int n = 0;
    return ibv_get_device_list(&n);
  }();
  ibv_device* device = list[0];
  softmrc::server::Peer peer;
  peer.pid = 1;
  peer.cap_net_admin = true;
  softmrc::server::Session s(peer, device);
  std::vector<uint8_t> rsp;
  std::vector<int> fds_in, fds_out;
  std::vector<std::pair<void*, size_t>> rings;  // the peer's mappings of its rings
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t len = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    if (len & 0x8000) {
      uint64_t consumed = 0;
      std::memcpy(&consumed, data + at, std::min<size_t>(8, size - at));
      at += std::min<size_t>(8, size - at);
      for (auto& [map, bytes] : rings)
        static_cast<softmrc::cq_ring::Header*>(map)->consumed.store(consumed);
      continue;
    }
    const size_t n = std::min(len, size - at);
    s.handle(data + at, n, fds_in, rsp, fds_out);
    at += n;
    // The device's descriptors stay its own (they are its objects'): the peer only maps them.
    for (int fd : fds_out) {
      struct stat st {};
      char name[64] = {};
      const std::string link = "/proc/self/fd/" + std::to_string(fd);
      if (fstat(fd, &st) != 0 || readlink(link.c_str(), name, sizeof name - 1) < 0 ||
          std::strstr(name, "softmrc-cq") == nullptr)
        continue;
      void* m =
          mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (m != MAP_FAILED) rings.emplace_back(m, static_cast<size_t>(st.st_size));
    }
  }
  for (auto& [map, bytes] : rings) munmap(map, bytes);
  return 0;
}
