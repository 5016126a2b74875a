// mrct decode: like `tshark -r`, for MRC. Non-RoCE frames are listed, never dropped.
#include <cinttypes>
#include <cstdio>
#include <map>
#include <memory>
#include <string>

#include "mrct/commands.h"
#include "wire/wire.h"

namespace mrct {
namespace {

struct DecodeArgs {
  std::string file;
  bool verbose = false;
  bool json = false;
  bool summary = false;
  bool strict = false;
  uint64_t count = 0;
  uint16_t port = 0;
  std::string profile = "MRP0";
};

int run_decode(const DecodeArgs& a) {
  using namespace mrc::wire;
  std::string why;
  const std::unique_ptr<WireProfile> profile = open_wire_profile(a.profile, why);
  if (!profile) {
    std::fprintf(stderr, "mrct decode: %s\n", why.c_str());
    return kExitUsage;
  }
  CaptureReader reader;
  if (!reader.open(a.file)) {
    std::fprintf(stderr, "mrct decode: %s\n", reader.error().c_str());
    return kExitUsage;
  }
  CaptureRecord rec;
  DecodedFrame f;
  DecodeOptions opts;
  opts.verify_icrc = true;
  opts.roce_port = a.port;
  std::string line;
  uint64_t frame_no = 0, roce = 0, bad_icrc = 0, errors = 0, trimmed = 0;
  uint64_t first_ts = 0;
  std::map<std::string, uint64_t> by_opcode;
  while (reader.next(rec)) {
    ++frame_no;
    if (frame_no == 1) first_ts = rec.ts_ns;
    opts.link = rec.link;
    decode_frame(rec.data, f, opts, *profile);
    roce += f.roce;
    trimmed += f.trimmed;
    if (f.icrc_checked && !f.icrc_ok) ++bad_icrc;
    if (f.error) ++errors;
    if (f.roce) ++by_opcode[f.op ? std::string(f.op->name) : "UNKNOWN"];
    line.clear();
    if (a.json) {
      append_json(line, f, frame_no, rec.ts_ns, *profile);
      line += '\n';
    } else if (!a.summary) {
      const uint64_t rel = rec.ts_ns - first_ts;
      char head[64];
      std::snprintf(head, sizeof head, "%6" PRIu64 " %" PRIu64 ".%09" PRIu64 " ", frame_no,
                    rel / 1000000000, rel % 1000000000);
      line += head;
      append_summary(line, f);
      line += '\n';
      if (a.verbose) append_field_tree(line, f);
    }
    std::fwrite(line.data(), 1, line.size(), stdout);
    if (a.count && frame_no >= a.count) break;
  }
  if (!reader.error().empty()) {
    std::fflush(stdout);
    std::fprintf(stderr, "mrct decode: %s (after %" PRIu64 " frames)\n", reader.error().c_str(),
                 frame_no);
    return kExitUsage;
  }
  if (a.summary) {
    std::printf("%s: %" PRIu64 " frames, %" PRIu64 " RoCE, %" PRIu64 " trimmed, %" PRIu64
                " bad ICRC, %" PRIu64 " decode errors\n",
                a.file.c_str(), frame_no, roce, trimmed, bad_icrc, errors);
    for (const auto& [name, n] : by_opcode) std::printf("  %-24s %" PRIu64 "\n", name.c_str(), n);
  }
  if (a.strict && (bad_icrc || errors)) return kExitViolations;
  return kExitOk;
}

}  // namespace

Run add_decode(CLI::App& app) {
  auto a = std::make_shared<DecodeArgs>();
  app.add_option("file", a->file, "pcap or pcapng capture")->required();
  app.add_flag("-V,--verbose", a->verbose, "print the field tree of every frame");
  app.add_flag("--json", a->json, "one JSON object per frame (decoder contract field names)");
  app.add_flag("--summary", a->summary, "only counts per opcode, ICRC and decode errors");
  app.add_flag("--strict", a->strict, "exit 1 when any frame has a bad ICRC or a decode error");
  app.add_option("-c,--count", a->count, "stop after this many frames");
  app.add_option("--profile", a->profile,
                 "wire profile: MRP0 or a profile file (TOML, docs/wire-format.md section 19)");
  app.add_option("--port", a->port,
                 "the only UDP destination port read as RoCE (default: the profile's ports)");
  return [a] { return run_decode(*a); };
}

}  // namespace mrct
