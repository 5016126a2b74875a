// mrct craft: the sample capture used by tests, docs and the README's first command.
#include <cstdio>
#include <string>

#include "mrct/commands.h"
#include "wire/samples.h"
#include "wire/wire.h"
#ifdef MRCT_HAVE_REFERENCE
#include <filesystem>

#include "reference-impl/sim/engine_harness.h"
#endif

namespace mrct {
namespace {

struct CraftArgs {
  std::string out;
  std::string corpus;
  std::string format = "pcap";
  bool list = false;
  uint32_t repeat = 1;
  std::string profile = "MRP0";
  std::string reference;  // directory: a reference conversation instead of the sample set
  uint32_t bytes = 1 << 20;
  uint64_t seed = 1;
};

#ifdef MRCT_HAVE_REFERENCE
// Two reference endpoints (reference-impl/engine) on the deterministic simulator, 2 planes x 4
// paths, clean links, one QP writing `bytes` in 16 messages: the captures at both hosts. What a
// conforming peer speaking `profile` puts on the wire, for mrct detect and mrct check.
int run_reference(const CraftArgs& a, const mrc::wire::WireProfile& profile) {
  namespace h = mrc::sim::harness;
  std::error_code ec;
  std::filesystem::create_directories(a.reference, ec);
  if (ec) {
    std::fprintf(stderr, "mrct craft: cannot create %s: %s\n", a.reference.c_str(),
                 ec.message().c_str());
    return kExitUsage;
  }
  h::HarnessConfig hc;
  hc.seed = a.seed;
  hc.profile = &profile;
  h::Harness hr(hc);
  hr.connect(0, 1, 1, h::QpConfig{});
  std::vector<std::string> paths;
  for (size_t i = 0; i < 2; ++i) {
    paths.push_back(a.reference + "/" + std::string(1, static_cast<char>('a' + i)) +
                    "-eth0.pcapng");
    hr.sim().capture_node(hr.node(i).id, 0, paths.back(), mrc::wire::CaptureFormat::kPcapng);
  }
  h::Transfer t(hr, 0, a.bytes, 1);
  t.post(16, 4);
  const bool done = hr.ok() && hr.run([&] { return t.all_completed(); }, 200'000'000);
  hr.run({}, 2'000'000);  // the last acknowledgements, probes and timers
  if (!hr.sim().close_captures() || !hr.ok() || !done || !t.exact()) {
    std::fprintf(
        stderr, "mrct craft: the reference conversation did not complete: %s\n",
        !hr.ok() ? hr.error().c_str()
                 : (!hr.sim().error().empty() ? hr.sim().error().c_str() : "transfer incomplete"));
    for (const auto& p : paths) std::filesystem::remove(p, ec);
    return kExitUsage;
  }
  for (const auto& p : paths) std::printf("%s\n", p.c_str());
  std::fprintf(stderr, "mrct craft: reference conversation (%u bytes, wire profile %s) in %s\n",
               a.bytes, std::string(profile.name()).c_str(), a.reference.c_str());
  return kExitOk;
}
#endif

int run_craft(const CraftArgs& a) {
  using namespace mrc::wire;
  std::string why;
  const std::unique_ptr<WireProfile> profile = open_wire_profile(a.profile, why);
  if (!profile) {
    std::fprintf(stderr, "mrct craft: %s\n", why.c_str());
    return kExitUsage;
  }
  if (!a.reference.empty()) {
#ifdef MRCT_HAVE_REFERENCE
    return run_reference(a, *profile);
#else
    std::fprintf(stderr, "mrct craft: --reference needs the engine and simulator (not built)\n");
    return kExitUsage;
#endif
  }
  const auto all = samples::all_samples(*profile);
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
  app.add_option("--profile", a->profile,
                 "wire profile: MRP0 or a profile file (TOML, docs/wire-format.md section 19)");
  app.add_option("--reference", a->reference,
                 "write DIR/a-eth0.pcapng and DIR/b-eth0.pcapng: two reference endpoints on the "
                 "simulator (clean fabric) instead of the sample set");
  app.add_option("--bytes", a->bytes, "bytes the reference conversation writes")
      ->check(CLI::Range(1u, 1u << 26));
  app.add_option("--seed", a->seed, "simulator seed of the reference conversation");
  return [a] { return run_craft(*a); };
}

}  // namespace mrct
