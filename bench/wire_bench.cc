// Codec benchmarks: per packet type, and over a 1M-frame capture against two peers (libtins
// parsing the same file, and an unchecked raw pointer walk reading the same fields).
#include <benchmark/benchmark.h>
#include <tins/tins.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "wire/samples.h"
#include "wire/wire.h"

using namespace mrc::wire;

namespace {

const std::vector<samples::Sample>& all() {
  static const auto s = samples::all_samples();
  return s;
}

const samples::Sample* find(const std::string& name) {
  for (const auto& s : all())
    if (s.name == name) return &s;
  return nullptr;
}

const char* kTypes[] = {"stev/WRITE_FIRST",
                        "stev/WRITE_MIDDLE",
                        "stev/WRITE_LAST_IMM",
                        "stev/WRITE_ONLY",
                        "stev/SACK",
                        "stev/NACK",
                        "stev/TRANSPORT_ACK",
                        "stev/RELIABILITY_PROBE",
                        "stev/ENDPOINT_REQUEST/ev-probe",
                        "stev/ENDPOINT_RESPONSE",
                        "stev/WRITE_MIDDLE/trimmed",
                        "udp4/WRITE_MIDDLE",
                        "srv6/WRITE_MIDDLE",
                        "srv6-srh/WRITE_MIDDLE",
                        "srv6-srh/SACK"};

void BM_Decode(benchmark::State& state, const char* name) {
  const samples::Sample* s = find(name);
  DecodedFrame f;
  for (auto _ : state) {
    decode_frame(as_bytes(s->frame), f);
    benchmark::DoNotOptimize(f.bth.psn);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_DecodeVerifyIcrc(benchmark::State& state, const char* name) {
  const samples::Sample* s = find(name);
  DecodedFrame f;
  DecodeOptions o;
  o.verify_icrc = true;
  for (auto _ : state) {
    decode_frame(as_bytes(s->frame), f, o);
    benchmark::DoNotOptimize(f.icrc_ok);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(s->frame.size()));
}

void BM_Encode(benchmark::State& state, const char* name) {
  const samples::Sample* s = find(name);
  DecodedFrame spec;
  decode_frame(as_bytes(s->frame), spec);
  std::vector<std::byte> out(s->frame.size() + 64);
  for (auto _ : state) {
    const size_t n = encode_frame(spec, MutBytes(out.data(), out.size()));
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}

// ---- 1M-frame capture ------------------------------------------------------------------------
// 90 % MRP0 data packets (STEV, 256-byte payload, rotating EVs), 10 % SACKs: the mix a
// requestor-side capture of a bulk WRITE has.
constexpr size_t kCaptureFrames = 1'000'000;

const std::string& capture_path() {
  static const std::string path = [] {
    std::string p = "/tmp/mrc_bench_1m_" + std::to_string(getpid()) + ".pcap";
    CaptureWriter w;
    if (!w.open(p, CaptureFormat::kPcap)) std::abort();
    const auto& payload = samples::pattern(256);
    for (size_t i = 0; i < kCaptureFrames; ++i) {
      const bool sack = i % 10 == 9;
      FrameSpec s = samples::base_spec(samples::Carrier::kStev,
                                       sack ? samples::responder() : samples::requestor(),
                                       sack ? samples::requestor() : samples::responder(),
                                       static_cast<uint32_t>(0x10000 + i % 256));
      if (sack) {
        s.bth.opcode = 0xDC;
        s.bth.psn = static_cast<uint32_t>(i & kPsnMask);
        s.seth.cack_psn = s.bth.psn;
        s.seth.sack_bitmap = i;
      } else {
        s.bth.opcode = 0xC7;
        s.bth.ts = true;
        s.bth.psn = static_cast<uint32_t>(i & kPsnMask);
        s.reth = {0x7f0000000000ull + i * 256, 0x1234, 1 << 20};
        s.payload = Bytes(payload.data(), payload.size());
      }
      auto frame = encode_frame(s);
      if (!w.write(1'700'000'000'000'000'000ull + i * 100, as_bytes(frame))) std::abort();
    }
    if (!w.close()) std::abort();
    std::atexit([] { unlink(capture_path().c_str()); });
    return p;
  }();
  return path;
}

template <typename Fn>
void over_capture(benchmark::State& state, Fn&& per_frame) {
  const std::string& path = capture_path();
  for (auto _ : state) {
    CaptureReader r;
    if (!r.open(path)) state.SkipWithError(r.error().c_str());
    CaptureRecord rec;
    uint64_t n = 0;
    while (r.next(rec)) n += per_frame(rec.data);
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kCaptureFrames));
}

void BM_Capture_MrcDecode(benchmark::State& state) {
  DecodedFrame f;
  over_capture(state, [&f](Bytes b) {
    decode_frame(b, f);
    return f.bth.psn + (f.has(kHdrReth) ? f.reth.rkey : 0);
  });
}

void BM_Capture_MrcDecodeVerifyIcrc(benchmark::State& state) {
  DecodedFrame f;
  DecodeOptions o;
  o.verify_icrc = true;
  over_capture(state, [&](Bytes b) {
    decode_frame(b, f, o);
    return static_cast<uint64_t>(f.icrc_ok);
  });
}

// The peer a C++ user would reach for: libtins builds its PDU chain (Ethernet/IPv6/UDP, then
// the RoCE bytes as RawPDU since libtins has no BTH), and the BTH fields are read from it.
void BM_Capture_Libtins(benchmark::State& state) {
  over_capture(state, [](Bytes b) -> uint64_t {
    Tins::EthernetII eth(reinterpret_cast<const uint8_t*>(b.data()),
                         static_cast<uint32_t>(b.size()));
    const Tins::RawPDU* raw = eth.find_pdu<Tins::RawPDU>();
    if (!raw || raw->payload_size() < 12) return 0;
    const uint8_t* p = raw->payload().data();
    return static_cast<uint64_t>(p[9]) << 16 | p[10] << 8 | p[11];
  });
}

// The floor: no checks beyond the ethertype, fixed offsets, the same fields as MrcDecode.
void BM_Capture_RawWalk(benchmark::State& state) {
  over_capture(state, [](Bytes b) -> uint64_t {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data());
    if (p[12] != 0x86 || p[13] != 0xDD) return 0;
    const uint8_t* bth = p + 14 + 40 + 8;
    uint64_t psn = static_cast<uint64_t>(bth[9]) << 16 | bth[10] << 8 | bth[11];
    if (bth[0] == 0xC7) {
      uint32_t rkey;
      std::memcpy(&rkey, bth + 12 + 4 + 4 + 8, 4);
      psn += __builtin_bswap32(rkey);
    }
    return psn;
  });
}

// Reading the file alone (record iteration without touching frame bytes).
void BM_Capture_ReadOnly(benchmark::State& state) {
  over_capture(state, [](Bytes b) -> uint64_t { return b.size(); });
}

}  // namespace

int main(int argc, char** argv) {
  for (const char* t : kTypes) {
    benchmark::RegisterBenchmark((std::string("BM_Decode/") + t).c_str(), BM_Decode, t);
    benchmark::RegisterBenchmark((std::string("BM_Encode/") + t).c_str(), BM_Encode, t);
  }
  for (const char* t : {"stev/WRITE_MIDDLE", "stev/SACK"})
    benchmark::RegisterBenchmark((std::string("BM_DecodeVerifyIcrc/") + t).c_str(),
                                 BM_DecodeVerifyIcrc, t);
  benchmark::RegisterBenchmark("BM_Capture_MrcDecode", BM_Capture_MrcDecode)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Capture_MrcDecodeVerifyIcrc", BM_Capture_MrcDecodeVerifyIcrc)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Capture_Libtins", BM_Capture_Libtins)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Capture_RawWalk", BM_Capture_RawWalk)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Capture_ReadOnly", BM_Capture_ReadOnly)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
