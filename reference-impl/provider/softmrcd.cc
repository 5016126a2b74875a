// softmrcd: the node's SoftMRC device process. It owns the ports, the engine and the runtime;
// applications and the controller reach it through lib_mrc.so with MRC_SOFT_DEVICE=<socket>
// (README.md, "One device per node").
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "reference-impl/provider/server.h"

namespace {

void usage(FILE* to) {
  std::fputs(
      "usage: softmrcd [--socket PATH]\n"
      "\n"
      "Runs the node's SoftMRC device (softmrc0) and serves it on a Unix socket. Applications\n"
      "and the controller use it through lib_mrc.so with MRC_SOFT_DEVICE=PATH; without that\n"
      "variable lib_mrc.so runs a device inside the process instead.\n"
      "\n"
      "  --socket PATH  the socket (default: $MRC_SOFT_DEVICE, else /run/softmrc/softmrc0.sock)\n"
      "\n"
      "The device is configured by the same variables as the in-process one: MRC_SOFT_IFACES,\n"
      "MRC_SOFT_GID, MRC_SOFT_EV_FORMAT, MRC_SOFT_IO, MRC_SOFT_DEBUG (README.md). Needs\n"
      "CAP_NET_RAW for its AF_PACKET ports. Controller calls (mrc_ctl.h) are allowed to client\n"
      "processes that hold CAP_NET_ADMIN, judged from the peer's credentials.\n"
      "SIGTERM / SIGINT stop it.\n",
      to);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  if (const char* e = std::getenv("MRC_SOFT_DEVICE"); e != nullptr && *e != '\0') path = e;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    }
    if (a == "--socket" && i + 1 < argc) {
      path = argv[++i];
      continue;
    }
    std::fprintf(stderr, "softmrcd: unknown argument '%s'\n", a.c_str());
    usage(stderr);
    return 2;
  }
  if (path.empty()) path = "/run/softmrc/softmrc0.sock";
  // The device process runs the device itself: its own lib_mrc code must not look for a device
  // process.
  unsetenv("MRC_SOFT_DEVICE");
  return softmrc::server::serve(path);
}
