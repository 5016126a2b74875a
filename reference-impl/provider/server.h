// The device side of the device socket (devproto.h): one Session per connected process, holding
// the objects that process created on the node's one SoftMRC device. Used by softmrcd and by the
// protocol's fuzz target. Private header.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "reference-impl/provider/devproto.h"

struct ibv_device;

namespace softmrc::server {

// Who is at the other end of a connection, from the kernel (SO_PEERCRED), never from the
// client's own word.
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  bool cap_net_admin = false;  // CapEff of the peer when it connected
};

// The credentials of a connected Unix socket's peer. false with errno set.
bool peer_of(int sock, Peer& out);

class Session {
 public:
  Session(Peer peer, ibv_device* device);
  // Tears down every object the process left: an application that dies loses its QPs, CQs,
  // MRs and the device mappings of its memory.
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // One request in, one response out (with descriptors to pass). Descriptors received with the
  // request are owned by the session from here on (used or closed). Never fails: a malformed
  // request gets an EINVAL / EPROTO response.
  void handle(const uint8_t* msg, size_t n, std::vector<int>& fds_in, std::vector<uint8_t>& rsp,
              std::vector<int>& fds_out);

  size_t objects() const { return objs_.size(); }

  enum class Kind : uint8_t { kVctx, kPd, kMr, kCtx, kChan, kCq, kHint, kQp };

 private:
  struct Obj {
    Kind kind;
    void* p;
  };
  struct Run {  // a memfd of the process mapped at the process's own addresses
    uint64_t len = 0;
    int refs = 0;
  };

  uint64_t add(Kind k, void* p);
  void* find(uint64_t id, Kind k) const;
  uint64_t id_of(const void* p) const;
  void remove(uint64_t id);
  void release_runs(const std::vector<uint64_t>& starts);
  void teardown();

  Peer peer_;
  ibv_device* device_;
  std::map<uint64_t, Obj> objs_;
  std::map<const void*, uint64_t> ids_;
  std::map<uint64_t, Run> runs_;                       // by start address
  std::map<uint64_t, std::vector<uint64_t>> mr_runs_;  // MR id -> run starts it holds
  uint64_t next_id_ = 1;
};

// softmrcd: listens on `path`, one thread per connection. Returns when SIGTERM/SIGINT arrive
// (exit status for main).
int serve(const std::string& path);

}  // namespace softmrc::server
