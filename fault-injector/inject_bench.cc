// Policy core throughput (frames/s, one core), without I/O. The relay's own figures (AF_PACKET,
// veth, added latency) come from NetnsRelay.MeasureThroughputAndLatency in netns_test.cc.
#include <benchmark/benchmark.h>

#include "fault-injector/faults.h"
#include "fault-injector/test_frames.h"

namespace {

using namespace mrc::faults;
using mrc::faults::testing::Carrier;
using mrc::faults::testing::data_frame;
using mrc::faults::testing::DataSpec;

std::vector<std::vector<std::byte>> frames(size_t payload) {
  std::vector<std::vector<std::byte>> out;
  for (uint32_t i = 0; i < 64; ++i) {
    DataSpec s;
    s.carrier = i % 2 ? Carrier::kStev : Carrier::kUdp4;
    s.psn = i;
    s.wev = i % 16;
    s.payload = payload;
    out.push_back(data_frame(s));
  }
  return out;
}

Rule make(FaultType t, double p, const char* name) {
  Rule r;
  r.type = t;
  r.p = p;
  r.name = name;
  return r;
}

std::vector<Rule> rules_for(int which) {
  switch (which) {
    case 0:
      return {};
    case 1:
      return {make(FaultType::kLoss, 0.01, "loss1")};
    case 2: {
      Rule bh = make(FaultType::kBlackhole, 1, "bh");
      bh.match.evs = {3};
      Rule d = make(FaultType::kDelay, 1, "delay");
      d.delay_ns = 10'000;
      d.jitter_ns = 1'000;
      return {bh, make(FaultType::kTrim, 0.01, "trim"), make(FaultType::kEcn, 0.05, "ecn"), d,
              make(FaultType::kLoss, 0.001, "loss")};
    }
    case 3:
      return {make(FaultType::kTrim, 1.0, "trim-all")};
    case 4:
      return {make(FaultType::kCorrupt, 1.0, "corrupt-all")};
    default:
      return {};
  }
}

const char* kNames[] = {"pass-through", "1% loss", "mixed 5 rules", "trim every frame",
                        "corrupt every frame"};

void BM_Policy(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  const auto fs = frames(static_cast<size_t>(state.range(1)));
  PolicyConfig c;
  c.seed = 1;
  c.links.push_back(LinkInfo{"l0", 0, "", "", "", ""});
  c.rules = rules_for(which);
  Policy pol(c, 0);
  uint64_t t = 0, i = 0;
  for (auto _ : state) {
    const auto& f = fs[i++ & 63];
    const Decision& d = pol.on_frame(mrc::wire::as_bytes(f), Direction::kAtoB, 0, t += 1000);
    benchmark::DoNotOptimize(d.out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  state.SetLabel(kNames[which]);
}
BENCHMARK(BM_Policy)->ArgsProduct({{0, 1, 2, 3, 4}, {64, 1024}});

// The cost of one decision log line (formatting only).
void BM_DecisionLine(benchmark::State& state) {
  const auto fs = frames(64);
  PolicyConfig c;
  c.links.push_back(LinkInfo{"l0", 0, "", "", "", ""});
  c.rules = rules_for(1);
  Policy pol(c, 0);
  std::string line;
  uint64_t i = 0;
  for (auto _ : state) {
    ++i;
    const Decision& d = pol.on_frame(mrc::wire::as_bytes(fs[i & 63]), Direction::kAtoB, 0, i);
    line.clear();
    append_decision_json(line, d, "l0", 1);
    benchmark::DoNotOptimize(line.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_DecisionLine);

}  // namespace

BENCHMARK_MAIN();
