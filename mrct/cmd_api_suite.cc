// mrct api-suite: the API conformance suite (conformance/api) against a lib_mrc.so.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>

#include "conformance/api/api_suite.h"
#include "mrct/commands.h"

namespace mrct {
namespace {

// Writes a report next to its destination and renames it into place: nothing half-written.
bool write_report(const std::string& path, const std::function<void(std::ostream&)>& fill) {
  if (path.empty()) return true;
  if (path == "-") {
    fill(std::cout);
    return true;
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) {
      std::cerr << "mrct api-suite: cannot write " << path << "\n";
      return false;
    }
    fill(out);
    if (!out.good()) {
      std::cerr << "mrct api-suite: error writing " << path << "\n";
      std::remove(tmp.c_str());
      return false;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::cerr << "mrct api-suite: cannot write " << path << ": " << ec.message() << "\n";
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

Run add_api_suite(CLI::App& app) {
  struct Args {
    mrc::api::Options opts;
    std::string junit, json, md;
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("--lib", a->opts.lib, "the lib_mrc.so under test (dlopen path)")->required();
  app.add_option("--device", a->opts.device,
                 "verbs device to test (default: the first one mrc_query_device calls MRC)");
  app.add_option("--peer-lib", a->opts.peer_lib,
                 "also run the two-node tests (MRC-API-043..049): node B binds this library "
                 "(the same one, or the reference); two network namespaces and a veth pair are "
                 "made for them and removed (root)");
  app.add_option("--peer-device", a->opts.peer_device, "verbs device of node B (with --peer-lib)");
  app.add_option("--softmrcd", a->opts.softmrcd,
                 "device mode (SoftMRC): run this softmrcd for every test, one per node (each "
                 "node's namespace for the two-node tests), with MRC_SOFT_DEVICE pointing the "
                 "test processes at it; stopped when the test ends");
  app.add_option("--junit", a->junit, "write JUnit XML (one testcase per test ID)");
  app.add_option("--json", a->json, "write the JSON report here ('-' = stdout)");
  app.add_option("--md", a->md, "write a Markdown report");
  app.add_option("--only", a->opts.only, "run only these test IDs (MRC-API-nnn)");
  app.add_option("--timeout", a->opts.test_timeout_s,
                 "seconds a test may take before it is killed and failed (default 30)")
      ->check(CLI::PositiveNumber);
  app.add_flag("-q,--quiet", a->quiet, "no per-test lines");
  app.footer(
      "Each test runs in its own forked process that dlopens the library: a crash or hang is "
      "that test's failure. Statuses: pass, fail, unsupported (an optional feature the library "
      "does not advertise), informational (the OCP text leaves it open: reported, not judged). "
      "Two-node tests (MRC-API-043..049: data, immediates, ordering, error completions) run "
      "only with --peer-lib, node A on --lib and node B on --peer-lib in two network "
      "namespaces. Exit 0: no failure; 1: some test failed; 2: bad options, a library cannot be "
      "loaded or the namespaces cannot be made.\nTest IDs: mrct rules (docs/rules.md, section API "
      "conformance suite).");
  return [a] {
    for (const std::string& id : a->opts.only) {
      bool known = false;
      for (const auto& t : mrc::api::catalogue()) known = known || t.id == id;
      if (!known) {
        std::cerr << "mrct api-suite: --only: unknown test ID '" << id << "' (see mrct rules)\n";
        return kExitUsage;
      }
      if (mrc::api::is_two_node(id) && a->opts.peer_lib.empty()) {
        std::cerr << "mrct api-suite: --only: " << id
                  << " is a two-node test: give --peer-lib (the library of node B)\n";
        return kExitUsage;
      }
    }
    const std::string err = mrc::api::probe_library(a->opts.lib);
    if (!err.empty()) {
      std::cerr << "mrct api-suite: --lib: " << err << "\n";
      return kExitUsage;
    }
    if (!a->opts.peer_lib.empty()) {
      const std::string perr = mrc::api::probe_library(a->opts.peer_lib);
      if (!perr.empty()) {
        std::cerr << "mrct api-suite: --peer-lib: " << perr << "\n";
        return kExitUsage;
      }
    }
    std::string run_err;
    const auto results = mrc::api::run(a->opts, &run_err);
    if (!run_err.empty()) {
      std::cerr << "mrct api-suite: " << run_err << "\n";
      return kExitUsage;
    }
    int fails = 0, counts[4] = {0, 0, 0, 0};
    for (const auto& r : results) {
      ++counts[static_cast<int>(r.status)];
      fails += r.status == mrc::api::Status::kFail;
      if (!a->quiet || r.status == mrc::api::Status::kFail) {
        std::fprintf(a->json == "-" ? stderr : stdout, "%-12s %-13s %6.2fs  %s\n", r.id.c_str(),
                     std::string(mrc::api::status_name(r.status)).c_str(), r.seconds,
                     r.detail.c_str());
      }
    }
    std::fprintf(a->json == "-" ? stderr : stdout,
                 "mrct api-suite: %zu tests: %d pass, %d fail, %d unsupported, %d informational\n",
                 results.size(), counts[0], counts[1], counts[2], counts[3]);
    bool ok =
        write_report(a->json, [&](std::ostream& o) { mrc::api::write_json(o, a->opts, results); });
    ok = write_report(a->junit, [&](std::ostream& o) { mrc::api::write_junit(o, results); }) && ok;
    ok = write_report(a->md,
                      [&](std::ostream& o) { mrc::api::write_markdown(o, a->opts, results); }) &&
         ok;
    if (!ok) return kExitUsage;
    return fails ? kExitViolations : kExitOk;
  };
}

}  // namespace mrct
