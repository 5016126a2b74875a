// libFuzzer target for the device socket protocol (devproto.h) as softmrcd serves it: the input
// is a sequence of requests [u16 length][bytes] handled by one session of a privileged peer
// (CAP_NET_ADMIN: every controller call is reachable) on a loopback device. No request may
// crash the device process or make it touch memory outside its objects; the session's
// teardown at the end frees whatever the requests created. Built only with the fuzz preset.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include <infiniband/verbs.h>

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
  size_t at = 0;
  while (at + 2 <= size) {
    const size_t len = data[at] | (size_t{data[at + 1]} << 8);
    at += 2;
    const size_t n = std::min(len, size - at);
    s.handle(data + at, n, fds_in, rsp, fds_out);
    at += n;
  }
  return 0;
}
