#include "gui/test_capture.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "wire/wire.h"

namespace mrc::view::testing {
namespace {

using namespace mrc::wire;

constexpr uint64_t kBase = 1'700'000'000'000'000'000ull;  // an epoch-like start, 2023
uint64_t us(double v) {
  return kBase + static_cast<uint64_t>(v * 1000);
}

Ipv6Addr gid(uint8_t n) {
  Ipv6Addr a{};
  a[0] = 0xfd;
  a[15] = n;
  return a;
}

MacAddr mac(uint8_t node, uint8_t port) {
  return {0x02, 0, 0, 0, node, port};
}

uint32_t psn(uint32_t k) {
  return psn_add(kFirstPsn, k);
}

struct Builder {
  CaptureWriter w;
  SyntheticRun& run;
  uint32_t count = 0;
  std::vector<std::byte> payload = std::vector<std::byte>(kPayload, std::byte{0x5a});

  void put(const std::string& name, uint64_t t, const FrameSpec& s) {
    std::string err;
    std::vector<std::byte> out(9000);
    const size_t n = encode_frame(s, MutBytes(out.data(), out.size()), {}, mrp0(), &err);
    if (n == 0) throw std::runtime_error("encode " + name + ": " + err);
    out.resize(n);
    put_raw(name, t, out);
  }
  void put_raw(const std::string& name, uint64_t t, const std::vector<std::byte>& bytes) {
    if (!w.write(t, Bytes(bytes.data(), bytes.size()))) throw std::runtime_error(w.error());
    run.frame[name] = count++;
    run.t_ns[name] = t;
  }

  FrameSpec base(uint8_t from, uint8_t to, uint8_t port, uint32_t wev) {
    FrameSpec s;
    s.has_eth = true;
    s.eth.src = mac(from, port);
    s.eth.dst = mac(0xEE, port);
    s.l3 = 6;
    s.ip6.src = gid(from);
    s.ip6.dst = gid(to);
    const EvCarriage ev = carry_wev(EvFormat::kStev, mrp0().ev_stripe(), wev);
    s.ip6.flow_label = ev.flow_label;
    s.has_udp = true;
    s.udp.sport = ev.sport;
    s.roce = true;
    return s;
  }
  FrameSpec data(uint8_t opcode, uint32_t k, uint8_t port, uint32_t wev, bool rtx = false) {
    FrameSpec s = base(1, 2, port, wev);
    s.ip6.dscp = rtx ? mrp0().dscp().trimmable_retx : mrp0().dscp().trimmable;
    s.ip6.ecn = 2;
    s.bth.opcode = opcode;
    s.bth.dest_qp = kResponderQpn;
    s.bth.psn = psn(k);
    s.bth.ts = true;
    s.bth.rtx = rtx;
    s.reth = {0x10000 + k * kPayload, 0x77, 6 * kPayload};
    s.payload = Bytes(payload.data(), payload.size());
    return s;
  }
  FrameSpec feedback(uint8_t opcode, uint8_t port) {
    FrameSpec s = base(2, 1, port, 0x00B0000 + port);
    s.ip6.dscp = mrp0().dscp().control;
    s.bth.opcode = opcode;
    s.bth.dest_qp = kRequesterQpn;
    return s;
  }
  FrameSpec sack(uint32_t entropy, uint32_t cack_k, int16_t ack_off, bool pr = false) {
    FrameSpec s = feedback(0xDC, 1);
    s.bth.psn = psn(cack_k);
    s.seth.entropy = entropy;
    s.seth.cack_psn = psn(cack_k);
    s.seth.ack_psn_offset = ack_off;
    s.seth.pr = pr;
    s.seth.spdcid = kResponderQpn;
    s.seth.dpdcid = kRequesterQpn;
    s.seth.sack_offset = 2;
    s.seth.sack_bitmap = 0;
    return s;
  }
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

}  // namespace

SyntheticRun write_synthetic_run(const std::string& dir, bool with_logs) {
  SyntheticRun run;
  std::filesystem::create_directories(dir);
  run.dir = dir;
  run.capture = (std::filesystem::path(dir) / "run.pcap").string();
  Builder b{{}, run};
  if (!b.w.open(run.capture, CaptureFormat::kPcap)) throw std::runtime_error(b.w.error());

  {
    FrameSpec s = b.data(0xCA, 0, 1, 0xE0010009);
    s.ip6.src = gid(3);
    s.eth.src = mac(3, 1);
    s.bth.dest_qp = 0x33;
    s.bth.psn = 100;
    b.put("other_flow", us(0.5), s);
  }
  b.put("d0", us(1), b.data(0xC6, 0, 1, kEvA));
  b.put("d1", us(2), b.data(0xC7, 1, 1, kEvB));
  b.put("d2", us(3), b.data(0xC7, 2, 2, kEvC));
  b.put("d3", us(4), b.data(0xC7, 3, 1, kEvA));
  b.put("d4", us(5), b.data(0xC7, 4, 1, kEvB));
  {
    FrameSpec s = b.data(0xC7, 5, 2, kEvC);
    s.ip6.dscp = mrp0().dscp().trimmed;
    s.trimmed = true;
    s.headers = kHdrMeth | kHdrTseth;
    s.payload = {};
    b.put("d5_trimmed", us(6), s);
  }
  b.put("sack1", us(7), b.sack(kEvA, 3, 0));
  {
    FrameSpec s = b.feedback(0xDD, 2);
    s.bth.psn = psn(5);
    s.neth.nack_code = 0x01;
    s.neth.entropy = kEvC;
    s.neth.nack_psn = psn(5);
    s.neth.spdcid = kResponderQpn;
    s.neth.dpdcid = kRequesterQpn;
    b.put("nack", us(8), s);
  }
  b.put("r5", us(9), b.data(0xC8, 5, 1, kEvA, true));
  b.put("r4", us(10), b.data(0xC7, 4, 2, kEvC, false));  // RTX bit missing: seen-PSN detection
  {
    FrameSpec s = b.base(1, 2, 1, kEvB);
    s.ip6.dscp = mrp0().dscp().trimmable;
    s.bth.opcode = 0xDE;
    s.bth.dest_qp = kResponderQpn;
    s.bth.ack_req = true;
    s.peth.probe_id = 7;
    s.peth.spdcid = kRequesterQpn;
    s.peth.dpdcid = kResponderQpn;
    b.put("probe", us(11), s);
  }
  b.put("sack_probe", us(12), b.sack(kEvB, 3, 7, true));
  {
    FrameSpec s = b.feedback(0xD1, 1);
    s.bth.psn = psn(5);
    s.aeth = {0x1F, 1};
    b.put("ack", us(13), s);
  }
  {
    // Plain UDP (DNS port): not RoCE.
    FrameSpec s = b.base(1, 2, 1, 0);
    s.roce = false;
    s.udp.dport = 53;
    s.payload = Bytes(b.payload.data(), 20);
    b.put("udp_other", us(14), s);
  }
  {
    FrameSpec s = b.base(1, 2, 1, 0x1234);
    s.bth.opcode = 0xD8;
    s.bth.dest_qp = kEndpointOpQpn;
    s.bth.psn = 0x42;
    s.erth.op = static_cast<uint8_t>(EndpointOp::kEvProbe);
    b.put("ep_request", us(15), s);
  }
  b.put("sack2", us(16), b.sack(kEvC, 5, -1));
  // Reverse EV probes of the responder toward the requester (to the requester's port MACs), one
  // on plane 1 and two on plane 2 with a gap between them, and the requester's response.
  const auto reverse_probe = [&](const std::string& name, double at, uint8_t port) {
    FrameSpec s = b.base(2, 1, port, 0x00C0000 + port);
    s.eth.dst = mac(1, port);
    s.ip6.dscp = mrp0().dscp().control;
    s.bth.opcode = 0xD8;
    s.bth.dest_qp = kEndpointOpQpn;
    s.bth.psn = 0x43;
    s.erth.op = static_cast<uint8_t>(EndpointOp::kEvProbe);
    b.put(name, us(at), s);
  };
  reverse_probe("rev_probe_p1", 16.5, 1);
  reverse_probe("rev_probe_p2_a", 17, 2);
  {
    FrameSpec s = b.base(1, 2, 2, 0x00C0002);
    s.ip6.dscp = mrp0().dscp().control;
    s.bth.opcode = 0xD9;
    s.bth.dest_qp = kEndpointOpQpn;
    s.bth.psn = 0x43;
    s.eeth.op = static_cast<uint8_t>(EndpointOp::kEvProbe);
    s.eeth.entropy = 0x00C0002;
    b.put("rev_probe_p2_a_response", us(17.5), s);
  }
  reverse_probe("rev_probe_p2_b", 40, 2);
  if (!b.w.close()) throw std::runtime_error(b.w.error());
  if (!with_logs) return run;

  const auto k = [](uint32_t n) { return std::to_string(psn(n)); };
  const auto t = [](double v) { return std::to_string(us(v)); };
  run.events = (std::filesystem::path(dir) / "a-events.jsonl").string();
  write_text(
      run.events,
      "{\"t_ns\":" + t(0.2) +
          ",\"node\":\"a\",\"kind\":\"qp_state\",\"qpn\":34,\"from\":\"RTR\",\"to\":\"RTS\","
          "\"reason\":\"modify_qp\"}\n"
          "{\"t_ns\":" +
          t(5.6) +
          ",\"node\":\"a\",\"kind\":\"ev_state\",\"qpn\":34,\"wev\":" + std::to_string(kEvB) +
          ",\"port\":1,\"from\":\"GOOD\",\"to\":\"ASSUMED_BAD\",\"reason\":\"sack_gap\"}\n"
          "{\"t_ns\":" +
          t(7) +
          ",\"node\":\"a\",\"kind\":\"cwnd\",\"qpn\":34,\"cwnd\":40000,\"bytes_in_flight\":6144,"
          "\"reason\":\"sack\"}\n"
          "{not json\n"
          "{\"t_ns\":" +
          t(8.5) + ",\"node\":\"a\",\"kind\":\"retransmit\",\"qpn\":34,\"psn\":" + k(5) +
          ",\"cause\":\"nack\",\"attempt\":1,\"wev\":" + std::to_string(kEvA) +
          ",\"port\":1}\n"
          "{\"t_ns\":" +
          t(9.5) + ",\"node\":\"a\",\"kind\":\"retransmit\",\"qpn\":34,\"psn\":" + k(4) +
          ",\"cause\":\"sack_gap\",\"attempt\":1,\"wev\":" + std::to_string(kEvC) +
          ",\"port\":2}\n"
          "{\"t_ns\":" +
          t(12) +
          ",\"node\":\"a\",\"kind\":\"cwnd\",\"qpn\":34,\"cwnd\":20000,\"bytes_in_flight\":2048,"
          "\"reason\":\"sack\"}\n"
          "{\"t_ns\":" +
          t(12.5) +
          ",\"node\":\"a\",\"kind\":\"ev_state\",\"qpn\":34,\"wev\":" + std::to_string(kEvB) +
          ",\"port\":1,\"from\":\"ASSUMED_BAD\",\"to\":\"GOOD\",\"reason\":\"probes_good\"}\n"
          "{\"t_ns\":" +
          t(13) +
          ",\"node\":\"b\",\"kind\":\"completion\",\"qpn\":17,\"wr_id\":0,\"status\":\"SUCCESS\"}"
          "\n");
  run.decisions = (std::filesystem::path(dir) / "decisions.jsonl").string();
  write_text(
      run.decisions,
      "{\"t_ns\":" + t(5.5) +
          ",\"link\":\"p1.a>s1\",\"dir\":\"a>b\",\"action\":\"drop\",\"qpn\":17,\"psn\":" + k(4) +
          ",\"opcode\":199,\"ev\":" + std::to_string(kEvB) +
          ",\"reason\":\"link_down\",\"seed\":1}\n"
          "{\"t_ns\":" +
          t(5.9) + ",\"link\":\"p2.s1>b\",\"dir\":\"a>b\",\"action\":\"trim\",\"qpn\":17,\"psn\":" +
          k(5) + ",\"opcode\":199,\"ev\":" + std::to_string(kEvC) +
          ",\"reason\":\"trim p=0.5\",\"seed\":1}\n"
          "garbage\n"
          "{\"t_ns\":" +
          t(7.5) +
          ",\"link\":\"p1.b>s1\",\"dir\":\"b>a\",\"action\":\"drop\",\"qpn\":34,\"psn\":" + k(3) +
          ",\"opcode\":220,\"ev\":39321,\"reason\":\"link_down\",\"seed\":1}\n"
          "{\"t_ns\":" +
          t(7.6) + ",\"link\":\"p1.a>s1\",\"dir\":\"a>b\",\"action\":\"ecn\",\"qpn\":17,\"psn\":" +
          k(3) + ",\"opcode\":199,\"ev\":" + std::to_string(kEvA) +
          ",\"reason\":\"ecn p=1\",\"seed\":1}\n"
          "{\"t_ns\":" +
          t(7.7) +
          ",\"link\":\"p1.a>s1\",\"dir\":\"a>b\",\"action\":\"drop\",\"qpn\":null,\"psn\":null,"
          "\"opcode\":null,\"ev\":null,\"reason\":\"drop p=1\",\"seed\":1}\n");
  run.report = (std::filesystem::path(dir) / "report.json").string();
  write_text(run.report,
             "{\"tool\":\"mrct check\",\"report_version\":1,\"verdict\":\"fail\",\"rules\":["
             "{\"id\":\"MRC-TEST-001\",\"status\":\"fail\",\"severity\":\"must\",\"statement\":\"A "
             "retransmission has RTX = 1\",\"count\":2,\"evidence\":["
             "{\"capture\":0,\"file\":\"" +
                 run.capture + "\",\"frame\":" + std::to_string(run.frame["r4"] + 1) +
                 ",\"ts_ns\":" + std::to_string(run.t_ns["r4"]) +
                 ",\"message\":\"PSN 4 sent again with RTX=0\"},"
                 "{\"capture\":1,\"file\":\"elsewhere.pcap\",\"frame\":999,\"ts_ns\":" +
                 std::to_string(run.t_ns["nack"]) +
                 ",\"message\":\"seen at another capture point\"}]},"
                 "{\"id\":\"MRC-TEST-002\",\"status\":\"pass\",\"statement\":\"passes\",\"count\":"
                 "0,\"evidence\":[]},"
                 "{\"id\":\"MRC-TEST-003\",\"status\":\"warn\",\"statement\":\"from the injector "
                 "log\",\"count\":1,\"evidence\":["
                 "{\"capture\":null,\"frame\":null,\"ts_ns\":" +
                 t(5.5) +
                 ",\"message\":\"dropped PSN not retransmitted in time\"}]},"
                 "{\"id\":\"MRC-TEST-004\",\"status\":\"warn\",\"statement\":\"reverse EV "
                 "probes about once per RTT\",\"count\":1,\"evidence\":["
                 "{\"capture\":null,\"frame\":null,\"ts_ns\":" +
                 t(38) + ",\"from_ns\":" + t(16.9) +
                 ",\"port\":2,\"message\":\"no EV probe went back on plane 2 for 21 us\"}]}"
                 "]}\n");
  return run;
}

}  // namespace mrc::view::testing
