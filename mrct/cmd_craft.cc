// mrct craft: the sample capture used by tests, docs and the README's first command.
#include <cstdio>
#include <string>

#include "mrct/commands.h"
#include "wire/samples.h"
#include "wire/wire.h"

namespace mrct {
namespace {

struct CraftArgs {
  std::string out;
  std::string corpus;
  std::string format = "pcap";
  bool list = false;
  uint32_t repeat = 1;
};

int run_craft(const CraftArgs& a) {
  using namespace mrc::wire;
  const auto all = samples::all_samples();
  if (a.list) {
    for (const auto& s : all) std::printf("%s\t%zu bytes\n", s.name.c_str(), s.frame.size());
    return kExitOk;
  }
  if (!a.corpus.empty()) {
    // One file per frame: the seed corpus of the decoder fuzz target.
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string path = a.corpus + "/sample-" + std::to_string(i);
      FILE* fp = std::fopen(path.c_str(), "wb");
      if (!fp ||
          std::fwrite(all[i].frame.data(), 1, all[i].frame.size(), fp) != all[i].frame.size()) {
        std::fprintf(stderr, "mrct craft: cannot write %s\n", path.c_str());
        if (fp) std::fclose(fp);
        return kExitUsage;
      }
      std::fclose(fp);
    }
    return kExitOk;
  }
  if (a.out.empty()) {
    std::fprintf(stderr, "mrct craft: -o FILE is required (or --list, --corpus)\n");
    return kExitUsage;
  }
  CaptureFormat fmt;
  if (a.format == "pcap") {
    fmt = CaptureFormat::kPcap;
  } else if (a.format == "pcapng") {
    fmt = CaptureFormat::kPcapng;
  } else {
    std::fprintf(stderr, "mrct craft: --format must be pcap or pcapng, not '%s'\n",
                 a.format.c_str());
    return kExitUsage;
  }
  CaptureWriter w;
  if (!w.open(a.out, fmt)) {
    std::fprintf(stderr, "mrct craft: %s\n", w.error().c_str());
    return kExitUsage;
  }
  // Deterministic timestamps: 1 µs apart from a fixed epoch, so the file is reproducible.
  uint64_t ts = 1'790'000'000'000'000'000ull;
  uint64_t n = 0;
  for (uint32_t r = 0; r < a.repeat; ++r) {
    for (const auto& s : all) {
      if (!w.write(ts, as_bytes(s.frame), 0,
                   fmt == CaptureFormat::kPcapng ? std::string_view(s.name) : "")) {
        std::fprintf(stderr, "mrct craft: %s\n", w.error().c_str());
        return kExitUsage;
      }
      ts += 1000;
      ++n;
    }
  }
  if (!w.close()) {
    std::fprintf(stderr, "mrct craft: %s\n", w.error().c_str());
    return kExitUsage;
  }
  std::fprintf(stderr, "mrct craft: wrote %llu frames to %s\n", static_cast<unsigned long long>(n),
               a.out.c_str());
  return kExitOk;
}

}  // namespace

Run add_craft(CLI::App& app) {
  auto a = std::make_shared<CraftArgs>();
  app.add_option("-o,--output", a->out, "capture file to write");
  app.add_option("--format", a->format, "pcap or pcapng (pcapng names each frame in a comment)");
  app.add_option("--repeat", a->repeat, "write the sample set this many times (benchmarks)");
  app.add_flag("--list", a->list, "list the sample frames instead of writing them");
  app.add_option("--corpus", a->corpus,
                 "write each frame to its own file in this folder (fuzz seeds)");
  return [a] { return run_craft(*a); };
}

}  // namespace mrct
