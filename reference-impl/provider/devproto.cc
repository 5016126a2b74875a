// Datagrams with descriptors on the device socket (devproto.h).
#include "reference-impl/provider/devproto.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace softmrc::devproto {

bool send_msg(int sock, const std::vector<uint8_t>& msg, const std::vector<int>& fds) {
  if (msg.size() > kMaxMessage || fds.size() > kMaxFds) {
    errno = EMSGSIZE;
    return false;
  }
  iovec iov{const_cast<uint8_t*>(msg.data()), msg.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  if (!fds.empty()) {
    mh.msg_control = cbuf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(msg.size())) return true;
    if (n < 0 && errno == EINTR) continue;
    if (n >= 0) errno = EMSGSIZE;
    return false;
  }
}

ssize_t recv_msg(int sock, std::vector<uint8_t>& msg, std::vector<int>& fds) {
  if (msg.size() < kMaxMessage) msg.resize(kMaxMessage);  // grown once, reused
  fds.clear();
  iovec iov{msg.data(), msg.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kMaxFds)];
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof cbuf;
  ssize_t n;
  do {
    n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  // A truncated datagram or control message is not a message of the protocol.
  if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
    for (int fd : fds) close(fd);
    fds.clear();
    errno = EMSGSIZE;
    return -1;
  }
  return n;
}

}  // namespace softmrc::devproto
