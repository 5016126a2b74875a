// The device socket protocol between lib_mrc.so (device mode) and softmrcd, the per-node SoftMRC
// device process. Private header of lib_mrc.so and softmrcd (README.md, "One device per node").
//
// One request and one response per datagram on a SOCK_SEQPACKET Unix socket, in host byte order
// (both ends are on one host and built from one source; HELLO checks the protocol version).
// Request: u32 op, then the op's arguments. Response: i32 rc (what the API call returns), i32
// err (its errno), then the op's results. Descriptors (memfds of registered memory, eventfds of
// completion channels and asynchronous events) travel as SCM_RIGHTS beside the bytes. Objects are
// named by u64 handles that the device hands out per connection: a handle of another
// connection is unknown, so no process can name another's QPs, CQs or MRs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace softmrc::devproto {

// 2: an application CQ's creation returns its completion ring (cq_ring.h); a library of
// version 1 would poll by request and never see a completion, so HELLO refuses it.
constexpr uint32_t kVersion = 2;
// The largest datagram either side sends or accepts (an EV array of 4096 entries, 256 WRs).
constexpr size_t kMaxMessage = 1 << 20;
constexpr size_t kMaxFds = 16;

enum class Op : uint32_t {
  kHello = 1,
  kOpenDevice,
  kCloseDevice,
  kQueryDevice,
  kQueryPort,
  kQueryGid,
  kAllocPd,
  kDeallocPd,
  kRegMr,
  kDeregMr,
  kCreateContext,
  kDestroyContext,
  kQueryDeviceEx,
  kCreateCompChannel,
  kDestroyCompChannel,
  kCreateCq,
  kDestroyCq,
  kPollCq,
  kReqNotifyCq,
  kGetCqEvent,
  kAckCqEvents,
  kCreateQpHint,
  kDestroyQpHint,
  kQueryQpHint,
  kModifyQpHint,
  kCreateQp,
  kDestroyQp,
  kModifyQp,
  kQueryQp,
  kPostSend,
  kPostRecv,
  kGetAsyncEvent,
  kCtlQueryDeviceEx,
  kCtlQueryPort,
  kCtlModifyPort,
  kCtlModifyEvFmtProfile,
  kCtlQueryEvFmtProfile,
  kCtlModifyEvProfile,
  kCtlQueryEvProfile,
  kCtlModifyCcProfile,
  kCtlQueryCcProfile,
  kCtlCreateEvEventCq,
  kCtlPollEvEvent,
  kCtlEpBatchSendWait,
  kLast
};

// Appends values to a message.
class Writer {
 public:
  template <typename T>
  Writer& put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&v, sizeof v);
    return *this;
  }
  Writer& bytes(const void* p, size_t n) {
    put<uint32_t>(static_cast<uint32_t>(n));
    if (n > 0) append(p, n);
    return *this;
  }
  std::vector<uint8_t>& buf() { return buf_; }

 private:
  void append(const void* p, size_t n) {
    const size_t at = buf_.size();
    buf_.resize(at + n);
    std::memcpy(buf_.data() + at, p, n);
  }
  std::vector<uint8_t> buf_;
};

// Reads values from a received message; every read is bounds-checked and a short message
// leaves ok() false and zeroed values (the sender is not trusted: a message is never read past
// its end).
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  template <typename T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memset(&v, 0, sizeof v);
    if (!ok_ || n_ - off_ < sizeof v) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, p_ + off_, sizeof v);
    off_ += sizeof v;
    return v;
  }
  // A length-prefixed byte string; nullptr (and ok() false) if it does not fit. `size` is set.
  const uint8_t* bytes(size_t& size, size_t max = kMaxMessage) {
    const uint32_t n = get<uint32_t>();
    size = 0;
    if (!ok_ || n > max || n_ - off_ < n) {
      ok_ = false;
      return nullptr;
    }
    const uint8_t* at = p_ + off_;
    off_ += n;
    size = n;
    return at;
  }
  // A length-prefixed byte string of exactly sizeof(T), copied into out.
  template <typename T>
  bool blob(T& out) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t n = 0;
    const uint8_t* b = bytes(n);
    if (b == nullptr || n != sizeof out) {
      ok_ = false;
      return false;
    }
    std::memcpy(&out, b, sizeof out);
    return true;
  }
  bool ok() const { return ok_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t off_ = 0;
  bool ok_ = true;
};

// One datagram with descriptors. send: false with errno set. recv: the message size (the bytes
// are the first that many of msg, which keeps its capacity between calls), 0 at end of stream,
// -1 on error (a truncated datagram is EMSGSIZE, its descriptors closed).
bool send_msg(int sock, const std::vector<uint8_t>& msg, const std::vector<int>& fds);
ssize_t recv_msg(int sock, std::vector<uint8_t>& msg, std::vector<int>& fds);

}  // namespace softmrc::devproto
