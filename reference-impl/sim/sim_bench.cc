// Simulated events per second of wall time: the cost of the simulator itself, with nodes that
// do almost nothing (a pre-built frame is copied per send, arrivals are counted).
#include <benchmark/benchmark.h>

#include "reference-impl/sim/sim.h"
#include "reference-impl/sim/sim_test_util.h"

namespace mrc::sim {
namespace {

constexpr uint32_t kEvs = 16;

// Frames of 1 KiB payload sprayed over 16 EVs and both planes, one every interval_ns.
void run_fabric(benchmark::State& state, bool faults, bool captures) {
  const uint64_t frames = static_cast<uint64_t>(state.range(0));
  std::vector<std::vector<std::byte>> templ;
  for (uint32_t ev = 0; ev < kEvs; ++ev) templ.push_back(testing::data_frame(ev, ev, 1024));
  testing::TempDir dir;
  uint64_t events = 0;
  uint64_t delivered = 0;
  for (auto _ : state) {
    SimConfig sc;
    sc.seed = 1;
    sc.keep_decisions = false;
    Simulator sim(sc);
    testing::GeneratorNode a(frames, 0, 100, [&](uint64_t i, uint8_t& port) {
      port = static_cast<uint8_t>(1 + (i / kEvs) % 2);
      return templ[i % kEvs];
    });
    testing::GeneratorNode b(0, 0, 1, [](uint64_t, uint8_t&) { return std::vector<std::byte>{}; });
    const NodeId na = sim.add_node("a", a);
    const NodeId nb = sim.add_node("b", b);
    FabricConfig cfg;
    cfg.planes = 2;
    cfg.paths = 4;
    Fabric fab(sim, cfg, {na, nb});
    if (faults) {
      sim.add_fault(fab.uplink(na, 1), Fault::drop().with_probability(0.01));
      sim.add_fault(fab.uplink(na, 2), Fault::delay(0, 1000).with_probability(0.05));
      sim.add_fault(fab.downlink(nb, 1), Fault::mark_ecn().with_probability(0.05));
    }
    if (captures) sim.capture_node(nb, 0, dir.file("bench-b.pcap"));
    sim.run_until_idle(UINT64_MAX);
    if (captures) sim.close_captures();
    events += sim.events_dispatched();
    delivered += b.received();
  }
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
  state.counters["frames/s"] =
      benchmark::Counter(static_cast<double>(delivered), benchmark::Counter::kIsRate);
  state.counters["events/frame"] =
      delivered == 0 ? 0.0 : static_cast<double>(events) / static_cast<double>(delivered);
}

void BM_FabricClean(benchmark::State& state) {
  run_fabric(state, false, false);
}
void BM_FabricFaults(benchmark::State& state) {
  run_fabric(state, true, false);
}
void BM_FabricCapture(benchmark::State& state) {
  run_fabric(state, false, true);
}

BENCHMARK(BM_FabricClean)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FabricFaults)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FabricCapture)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mrc::sim

BENCHMARK_MAIN();
