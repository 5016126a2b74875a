// Out-of-band control connection of `mrct endpoint` (like perftest's TCP exchange): one JSON
// object per line over TCP. Private to the runtime folder.
#pragma once

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "reference-impl/runtime/sys.h"

namespace mrc::runtime {

class ControlChannel {
 public:
  // Listens on addr:port (addr "::" = any, IPv4 and IPv6).
  static Status listen(const std::string& addr, uint16_t port, Fd& listener);
  // timeout_ns 0 = wait forever.
  static Status accept(const Fd& listener, uint64_t timeout_ns, ControlChannel& out);
  static Status connect(const std::string& addr, uint16_t port, uint64_t timeout_ns,
                        ControlChannel& out);

  Status send(const nlohmann::json& msg);
  // Reads one message; timeout_ns 0 = wait forever. A message without "type", or of type
  // "error", fails with the peer's message.
  Status recv(nlohmann::json& msg, uint64_t timeout_ns);
  // recv() and check msg["type"] == type.
  Status expect(const std::string& type, nlohmann::json& msg, uint64_t timeout_ns);
  bool ok() const { return fd_.ok(); }
  const std::string& peer() const { return peer_; }
  void close() { fd_.reset(); }

 private:
  Fd fd_;
  std::string buf_;
  std::string peer_;
};

// Parses "addr" into a socket address (numeric IPv6/IPv4 or a name), for messages.
Status parse_host(const std::string& addr, uint16_t port, struct sockaddr_storage& out,
                  unsigned& len);

}  // namespace mrc::runtime
