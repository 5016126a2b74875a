// Frame builders and small helpers shared by the simulator tests and benchmark.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "reference-impl/sim/sim.h"
#include "wire/samples.h"
#include "wire/wire.h"

namespace mrc::sim::testing {

using wire::samples::Carrier;

// A WRITE_ONLY from the sample requestor to the sample responder: PSN, wire EV and payload size
// chosen by the test; DSCP TRIMMABLE and ECT(0) as MRP0 sends data.
inline std::vector<std::byte> data_frame(uint32_t psn, uint32_t wev, size_t payload_len,
                                         Carrier c = Carrier::kUdp6,
                                         std::optional<uint8_t> dscp = std::nullopt,
                                         uint8_t ecn = 2) {
  namespace s = wire::samples;
  wire::FrameSpec f = s::base_spec(c, s::requestor(), s::responder(), wev);
  const uint8_t d = dscp.value_or(wire::mrp0().dscp().trimmable);
  f.ip4.dscp = f.ip6.dscp = f.inner_ip6.dscp = d;
  f.ip4.ecn = f.ip6.ecn = f.inner_ip6.ecn = ecn;
  f.bth.opcode = static_cast<uint8_t>(wire::Opcode::kWriteOnly);
  f.bth.dest_qp = s::responder().qpn;
  f.bth.psn = psn & wire::kPsnMask;
  f.bth.ts = true;
  f.bth.ack_req = true;
  f.meth = {0, static_cast<uint16_t>(psn)};
  f.tseth.ts16 = static_cast<uint16_t>(psn * 7);
  f.reth = {0x10000000ull + uint64_t{psn} * 4096, 0xabc001, static_cast<uint32_t>(payload_len)};
  const auto& pat = s::pattern(payload_len, static_cast<uint8_t>(psn));
  f.payload = wire::Bytes(pat.data(), pat.size());
  std::vector<std::byte> out = wire::encode_frame(f);
  if (out.empty()) std::fprintf(stderr, "data_frame: encode_frame failed\n");
  return out;
}

// A transport ACK from the responder back to the requestor (a small control frame).
inline std::vector<std::byte> ack_frame(uint32_t psn, uint32_t wev, Carrier c = Carrier::kUdp6) {
  namespace s = wire::samples;
  wire::FrameSpec f = s::base_spec(c, s::responder(), s::requestor(), wev);
  f.ip4.dscp = f.ip6.dscp = f.inner_ip6.dscp = wire::mrp0().dscp().control;
  f.bth.opcode = static_cast<uint8_t>(wire::Opcode::kTransportAck);
  f.bth.dest_qp = s::requestor().qpn;
  f.bth.psn = psn & wire::kPsnMask;
  f.aeth = {0x1F, 1};
  return wire::encode_frame(f);
}

inline wire::DecodedFrame decode(const std::vector<std::byte>& frame, bool verify_icrc = false) {
  wire::DecodedFrame f;
  wire::DecodeOptions o;
  o.verify_icrc = verify_icrc;
  wire::decode_frame(wire::as_bytes(frame), f, o);
  return f;
}

// Serialization time of `bytes` at `rate_bps`, rounded up to whole ns.
constexpr uint64_t ser_ns(uint64_t bytes, uint64_t rate_bps) {
  return (bytes * 8 * 1'000'000'000 + rate_bps - 1) / rate_bps;
}

inline std::vector<char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Sends `count` frames, frame i at start_ns + i * interval_ns, built on demand by make(i, port).
class GeneratorNode final : public Node {
 public:
  using Make = std::function<std::vector<std::byte>(uint64_t index, uint8_t& port)>;
  GeneratorNode(uint64_t count, uint64_t start_ns, uint64_t interval_ns, Make make)
      : count_(count), start_ns_(start_ns), interval_ns_(interval_ns), make_(std::move(make)) {}
  void on_packet(std::span<const std::byte>, uint8_t, uint64_t) override { ++received_; }
  void on_timer(uint64_t) override {}
  bool poll_tx(uint64_t now_ns, TxFrame& out) override {
    if (sent_ >= count_ || start_ns_ + sent_ * interval_ns_ > now_ns) return false;
    out.port = 1;
    out.frame = make_(sent_, out.port);
    ++sent_;
    return true;
  }
  uint64_t next_deadline_ns() const override {
    return sent_ < count_ ? start_ns_ + sent_ * interval_ns_ : kNoDeadline;
  }
  uint64_t sent() const { return sent_; }
  uint64_t received() const { return received_; }

 private:
  uint64_t count_, start_ns_, interval_ns_;
  Make make_;
  uint64_t sent_ = 0;
  uint64_t received_ = 0;
};

// Records what arrives, decoded.
class SinkNode final : public Node {
 public:
  struct Got {
    uint64_t t_ns;
    uint8_t port;
    uint32_t psn;
    uint32_t wev;
    uint8_t dscp;
    uint8_t ecn;
    bool trimmed;
    size_t size;
  };
  explicit SinkNode(bool keep_frames = false) : keep_frames_(keep_frames) {}
  void on_packet(std::span<const std::byte> frame, uint8_t port, uint64_t now_ns) override {
    const PacketInfo info = inspect_frame(frame);
    wire::DecodedFrame f;
    wire::decode_frame(frame, f);
    got.push_back({now_ns, port, info.psn, info.wev, info.dscp, info.ecn, f.trimmed, frame.size()});
    if (keep_frames_) frames.emplace_back(frame.begin(), frame.end());
  }
  void on_timer(uint64_t) override {}
  bool poll_tx(uint64_t, TxFrame&) override { return false; }
  uint64_t next_deadline_ns() const override { return kNoDeadline; }

  std::vector<Got> got;
  std::vector<std::vector<std::byte>> frames;

 private:
  bool keep_frames_;
};

// A fresh directory under the test temp dir, removed (with its files) by the destructor.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/mrc_sim_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) != nullptr) path_ = buf.data();
  }
  ~TempDir() {
    for (const std::string& f : files_) std::remove(f.c_str());
    if (!path_.empty()) ::rmdir(path_.c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) {
    files_.push_back(path_ + "/" + name);
    files_.push_back(path_ + "/" + name + ".tmp");
    return path_ + "/" + name;
  }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

}  // namespace mrc::sim::testing
