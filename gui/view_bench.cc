// Viewer performance on a large capture: opening (mapping + indexing + logs) and drawing.
//
// The capture is MRC_VIEW_BENCH_CAPTURE when set; otherwise a simulated run of about 1M frames
// (gui/fixture.h, 1 KiB MTU) is generated once into MRC_VIEW_BENCH_DIR (default
// /tmp/mrc_view_bench) and reused. Drawing is measured offscreen at 1600x900, for the whole
// capture (the worst case: every frame is in view) and for a 1% window (a typical zoom).
#include <benchmark/benchmark.h>

#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "gui/fixture.h"
#include "gui/view_model.h"
#include "gui/view_render.h"

namespace {

using namespace mrc::view;

// kB from /proc/self/status ("VmRSS", "VmHWM").
long proc_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string k = std::string(key) + ":";
  while (std::getline(f, line))
    if (line.rfind(k, 0) == 0) return std::atol(line.c_str() + k.size());
  return -1;
}

std::string bench_capture() {
  if (const char* p = std::getenv("MRC_VIEW_BENCH_CAPTURE")) return p;
  const char* d = std::getenv("MRC_VIEW_BENCH_DIR");
  fixture::FixtureConfig cfg;
  cfg.out_dir = d ? d : "/tmp/mrc_view_bench";
  const std::string path = cfg.out_dir + "/a.pcap";
  if (std::filesystem::exists(path)) return path;
  cfg.path_mtu = 1024;
  cfg.message_bytes = 1 << 20;
  cfg.messages = 900;
  cfg.flap_from_ns = 20'000'000;
  cfg.flap_until_ns = 60'000'000;
  cfg.trim_probability = 0.001;
  std::fprintf(stderr, "generating a ~1M-frame capture in %s (once)...\n", cfg.out_dir.c_str());
  const auto r = fixture::make_fixture(cfg);
  if (!r.ok) {
    std::fprintf(stderr, "fixture: %s\n", r.error.c_str());
    std::exit(1);
  }
  std::fprintf(stderr, "%s: %llu frames\n", path.c_str(),
               static_cast<unsigned long long>(r.requester_frames));
  return path;
}

const std::string& capture() {
  static const std::string p = bench_capture();
  return p;
}

const ViewModel& loaded() {
  static std::unique_ptr<ViewModel> m = [] {
    auto v = std::make_unique<ViewModel>();
    LoadOptions o;
    o.capture = capture();
    std::string err;
    if (!v->load(o, err)) {
      std::fprintf(stderr, "%s\n", err.c_str());
      std::exit(1);
    }
    return v;
  }();
  return *m;
}

void BM_Open(benchmark::State& state) {
  const long rss_before = proc_kb("VmRSS");
  LoadStats st;
  long rss_after = 0;
  for (auto _ : state) {
    ViewModel m;
    LoadOptions o;
    o.capture = capture();
    std::string err;
    if (!m.load(o, err)) state.SkipWithError(err.c_str());
    st = m.stats();
    rss_after = proc_kb("VmRSS");
    benchmark::DoNotOptimize(m.flows().size());
  }
  state.counters["frames"] = static_cast<double>(st.frames);
  state.counters["index_ms"] = st.index_ms;
  state.counters["logs_ms"] = st.logs_ms;
  state.counters["file_MB"] = static_cast<double>(st.file_bytes) / 1e6;
  state.counters["rss_MB"] = static_cast<double>(rss_after) / 1024.0;
  state.counters["rss_added_MB"] = static_cast<double>(rss_after - rss_before) / 1024.0;
}
BENCHMARK(BM_Open)->Unit(benchmark::kMillisecond)->Iterations(3);

void render(benchmark::State& state, ViewKind kind, double fraction) {
  const ViewModel& m = loaded();
  ViewState s = initial_state(m);
  if (fraction < 1) {
    const uint64_t span = static_cast<uint64_t>(static_cast<double>(s.t1 - s.t0) * fraction);
    s.t0 = (s.t0 + s.t1) / 2 - span / 2;
    s.t1 = s.t0 + span;
  }
  QImage img(1600, 900, QImage::Format_ARGB32_Premultiplied);
  for (auto _ : state) {
    QPainter p(&img);
    p.setRenderHint(QPainter::Antialiasing, true);
    paint_view(kind, p, m, s, img.rect());
  }
  state.counters["frames"] = static_cast<double>(m.frames().size());
}
void BM_Timeline_All(benchmark::State& s) {
  render(s, ViewKind::kTimeline, 1.0);
}
void BM_Timeline_1pct(benchmark::State& s) {
  render(s, ViewKind::kTimeline, 0.01);
}
void BM_Sequence_All(benchmark::State& s) {
  render(s, ViewKind::kSequence, 1.0);
}
void BM_Sequence_1pct(benchmark::State& s) {
  render(s, ViewKind::kSequence, 0.01);
}
void BM_Series_All(benchmark::State& s) {
  render(s, ViewKind::kSeries, 1.0);
}
void BM_Series_1pct(benchmark::State& s) {
  render(s, ViewKind::kSeries, 0.01);
}
BENCHMARK(BM_Timeline_All)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Timeline_1pct)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sequence_All)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Sequence_1pct)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_All)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Series_1pct)->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("QT_QPA_PLATFORM") == nullptr) setenv("QT_QPA_PLATFORM", "offscreen", 1);
  QGuiApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::fprintf(stderr, "peak RSS %.0f MB\n", proc_kb("VmHWM") / 1024.0);
  return 0;
}
