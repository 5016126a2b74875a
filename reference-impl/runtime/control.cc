#include "reference-impl/runtime/control.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace mrc::runtime {
namespace {

int remaining_ms(uint64_t deadline) {
  if (deadline == 0) return -1;
  const uint64_t now = monotonic_ns();
  if (now >= deadline) return 0;
  return static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 1u << 30));
}

std::string addr_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
    std::string out = "[";
    out.append(host).append("]:").append(std::to_string(port));
    return out;
  }
  const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
  inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
  port = ntohs(a->sin_port);
  std::string out(host);
  out.append(":").append(std::to_string(port));
  return out;
}

}  // namespace

Status parse_host(const std::string& addr, uint16_t port, sockaddr_storage& out, unsigned& len) {
  std::string host = addr;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr)
    return Status::Error(EINVAL, "control address '" + addr + "': " + gai_strerror(rc));
  std::memcpy(&out, res->ai_addr, res->ai_addrlen);
  len = static_cast<unsigned>(res->ai_addrlen);
  freeaddrinfo(res);
  return Status::Ok();
}

Status ControlChannel::listen(const std::string& addr, uint16_t port, Fd& listener) {
  sockaddr_storage ss{};
  unsigned len = 0;
  if (addr == "::" || addr.empty()) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    len = sizeof(sockaddr_in6);
  } else if (Status s = parse_host(addr, port, ss, len); !s.ok()) {
    return s;
  }
  Fd fd(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.ok()) return sys_error("control socket");
  const int one = 1, zero = 0;
  (void)setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss.ss_family == AF_INET6)
    (void)setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) < 0)
    return sys_error("control: bind " + addr_text(ss));
  if (::listen(fd.get(), 4) < 0) return sys_error("control: listen " + addr_text(ss));
  listener = std::move(fd);
  return Status::Ok();
}

Status ControlChannel::accept(const Fd& listener, uint64_t timeout_ns, ControlChannel& out) {
  const uint64_t deadline = timeout_ns ? monotonic_ns() + timeout_ns : 0;
  for (;;) {
    pollfd p{listener.get(), POLLIN, 0};
    const int r = poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("control: poll");
    if (r == 0) return Status::Error(ETIMEDOUT, "control: no client connected within the timeout");
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    Fd c(accept4(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC));
    if (!c.ok()) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("control: accept");
    }
    const int one = 1;
    (void)setsockopt(c.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    out.fd_ = std::move(c);
    out.peer_ = addr_text(ss);
    out.buf_.clear();
    return Status::Ok();
  }
}

Status ControlChannel::connect(const std::string& addr, uint16_t port, uint64_t timeout_ns,
                               ControlChannel& out) {
  sockaddr_storage ss{};
  unsigned len = 0;
  if (Status s = parse_host(addr, port, ss, len); !s.ok()) return s;
  const std::string target = addr_text(ss);
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  // The server may still be starting: retry refused connections until the deadline.
  for (;;) {
    Fd fd(socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.ok()) return sys_error("control socket");
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      const int r = poll(&p, 1, remaining_ms(deadline));
      if (r == 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t el = sizeof err;
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
      }
    }
    if (err == 0) {
      const int flags = fcntl(fd.get(), F_GETFL);
      fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      const int one = 1;
      (void)setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      out.fd_ = std::move(fd);
      out.peer_ = target;
      out.buf_.clear();
      return Status::Ok();
    }
    const bool retry = err == ECONNREFUSED && monotonic_ns() + 100'000'000 < deadline;
    if (!retry)
      return Status::Error(
          err, "cannot reach the server's control port " + target + ": " + std::strerror(err));
    poll(nullptr, 0, 100);
  }
}

Status ControlChannel::send(const nlohmann::json& msg) {
  const std::string s = msg.dump() + "\n";
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd_.get(), s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("control: send to " + peer_);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ControlChannel::recv(nlohmann::json& msg, uint64_t timeout_ns) {
  const uint64_t deadline = timeout_ns ? monotonic_ns() + timeout_ns : 0;
  for (;;) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      const std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      msg = nlohmann::json::parse(line, nullptr, false);
      if (msg.is_discarded() || !msg.is_object() || !msg.contains("type") ||
          !msg["type"].is_string())
        return Status::Error(
            EPROTO, "control: malformed message from " + peer_ + ": '" + line.substr(0, 120) + "'");
      if (msg["type"] == "error")
        return Status::Error(
            EPROTO, "peer " + peer_ + " reported: " + msg.value("message", std::string("?")));
      return Status::Ok();
    }
    if (buf_.size() > (1u << 20))
      return Status::Error(EPROTO, "control: message from " + peer_ + " too long");
    pollfd p{fd_.get(), POLLIN, 0};
    const int r = poll(&p, 1, remaining_ms(deadline));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("control: poll");
    if (r == 0)
      return Status::Error(ETIMEDOUT, "control: no answer from " + peer_ + " within the timeout");
    char tmp[4096];
    const ssize_t n = ::recv(fd_.get(), tmp, sizeof tmp, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("control: recv from " + peer_);
    }
    if (n == 0) return Status::Error(ECONNRESET, "control: " + peer_ + " closed the connection");
    buf_.append(tmp, static_cast<size_t>(n));
  }
}

Status ControlChannel::expect(const std::string& type, nlohmann::json& msg, uint64_t timeout_ns) {
  if (Status s = recv(msg, timeout_ns); !s.ok()) return s;
  if (msg["type"] != type)
    return Status::Error(EPROTO, "control: expected '" + type + "' from " + peer_ + ", got '" +
                                     msg["type"].get<std::string>() + "'");
  return Status::Ok();
}

}  // namespace mrc::runtime
