// mrct check / mrct rules: thin wrappers over the conformance library.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>
#include <sstream>

#include "conformance/api/api_suite.h"
#include "conformance/check.h"
#include "mrct/commands.h"

namespace mrct {

Run add_check(CLI::App& app) {
  struct Args {
    std::vector<std::string> captures;
    std::string tolerances = "software";
    mrc::check::CheckOptions opts;
    std::vector<std::string> live;
    mrc::check::LiveOptions live_opts;
  };
  auto a = std::make_shared<Args>();
  app.add_option("captures", a->captures,
                 "capture files, each optionally tagged PATH@NODE[:PORT] with its capture point; "
                 "/dev/stdin reads a pipe as it comes (tcpdump -w - | mrct check /dev/stdin@a)");
  auto* live = app.add_option("--live", a->live,
                              "judge frames as they arrive on these interfaces (mirror ports, "
                              "taps; IFACE[@NODE[:PORT]], comma-separated or repeated), in bounded "
                              "memory, until SIGINT/SIGTERM or --duration-s; needs root or "
                              "CAP_NET_RAW")
                   ->delimiter(',');
  app.add_option("--interval-s", a->live_opts.interval_s,
                 "--live: print the verdict so far (and rewrite --json) this often; 0: never")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--duration-s", a->live_opts.duration_s,
                 "--live: stop after this long and give the final verdict; 0: at SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--keep-s", a->live_opts.keep_s,
                 "--live: around each violation, write the frames of this many seconds before "
                 "and after it to KEEP_DIR/<rule>-<n>.pcapng (the violating frame commented); "
                 "0: none")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--keep-dir", a->live_opts.keep_dir, "--live: where --keep-s writes (default .)");
  app.add_option("--keep-files", a->live_opts.keep_files,
                 "--live: at most this many captures around violations (default 100)");
  app.add_option("--keep-mib", a->live_opts.keep_mib,
                 "--live: at most this many MiB of frames held for them (default 256)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20));
  app.add_option("--ring-mib", a->live_opts.ring_mib,
                 "--live: kernel ring per interface, MiB (default 64)")
      ->check(CLI::Range(size_t{2}, size_t{4096}));
  app.add_option("--reorder-ms", a->live_opts.reorder_ms,
                 "--live: hold frames this long to judge the interfaces' frames in time order "
                 "(default 20)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--profile", a->opts.profile_path,
                 "DUT profile (JSON): QPs, capabilities, limits");
  app.add_option("--profile-variant", a->opts.wire_profile,
                 "wire profile: MRP0, a profile file (TOML), or 'auto' (mrct detect on the "
                 "captures first; the report says what was inferred)");
  app.add_option("--decisions", a->opts.decision_logs, "injector decision log(s), JSON lines");
  app.add_option("--json", a->opts.json_out, "write the JSON report here ('-' = stdout)");
  app.add_option("--junit", a->opts.junit_out, "write JUnit XML (one testcase per rule)");
  app.add_option("--markdown", a->opts.markdown_out, "write a GitHub Markdown summary");
  app.add_option("--annotate", a->opts.annotated_out,
                 "write a pcapng with a comment on each violating frame");
  app.add_option("--only", a->opts.rules.only, "judge only these rule ids or prefixes");
  app.add_option("--skip", a->opts.rules.skip, "do not judge these rule ids or prefixes");
  app.add_option("--tolerances", a->tolerances,
                 "time allowances: software (the default: software endpoints and fabrics, "
                 "reactions in tens of us), hardware (NICs reacting within us, short traces), "
                 "auto (derived from the RTTs and reaction times in the captures); tolerances "
                 "the profile sets win")
      ->check(CLI::IsMember({"software", "hardware", "auto"}));
  app.add_flag("--fail-on-warn", a->opts.fail_on_warn, "exit 1 on warnings too");
  app.add_flag("-q,--quiet", a->opts.quiet, "no human summary");
  app.add_option("--max-evidence", a->opts.max_evidence, "evidence items kept per rule");
  app.add_option("-j,--jobs", a->opts.jobs,
                 "threads: 2 or more decode the frames (and verify their ICRCs) on one thread "
                 "while another judges them; the report is byte for byte the one of -j 1. "
                 "Captures read from a pipe or device are checked on one thread")
      ->check(CLI::Range(1u, 256u));
  app.add_flag("--timings", a->opts.timings,
               "print each phase's wall and CPU time to stderr (start-up, profile, frames, "
               "finish, teardown, reports): where a run's time goes");
  app.footer(
      "Exit codes: 0 CONFORMING, 1 NOT CONFORMING (a rule failed; a warning too with "
      "--fail-on-warn), 2 usage or input error, 3 INCONCLUSIVE: no frame was recognised as MRC "
      "(the report lists the frames that were not, and why: UDP port, P_Key, opcode, length), "
      "or something the run asked for had nothing to judge (an --only rule or family, a QP "
      "listed in the profile). A capture with no MRC frame is INCONCLUSIVE even when framing "
      "rules failed on it.");
  return [a, live] {
    if (*live) {
      if (!a->captures.empty()) {
        std::cerr << "mrct check: --live reads interfaces, not capture files: drop "
                  << a->captures.front() << "\n";
        return kExitUsage;
      }
      a->live_opts.ifaces.clear();
      for (const std::string& c : a->live)
        a->live_opts.ifaces.push_back(mrc::check::parse_capture_arg(c));
      a->live_opts.check = a->opts;
      a->live_opts.check.tolerances = *mrc::check::parse_tolerance_preset(a->tolerances);
      return mrc::check::run_live(a->live_opts, std::cout, std::cerr);
    }
    if (a->captures.empty()) {
      std::cerr << "mrct check: give capture files, or --live IFACE\n";
      return kExitUsage;
    }
    a->opts.captures.clear();
    for (const std::string& c : a->captures)
      a->opts.captures.push_back(mrc::check::parse_capture_arg(c));
    a->opts.tolerances = *mrc::check::parse_tolerance_preset(a->tolerances);
    return mrc::check::run_check(a->opts, std::cout, std::cerr);
  };
}

Run add_detect(CLI::App& app) {
  struct Args {
    std::vector<std::string> captures;
    std::string out;
    std::string name = "detected";
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  app.add_option("captures", a->captures, "capture files (pcap or pcapng)")->required();
  app.add_option("-o,--output", a->out, "write the profile file here (default: stdout)");
  app.add_option("--name", a->name, "profile name written in the file");
  app.add_flag("-q,--quiet", a->quiet, "no confidence table on stderr");
  return [a] {
    mrc::check::VariantGuess g;
    std::string error;
    if (!mrc::check::detect_variant(a->captures, g, error)) {
      std::cerr << "mrct detect: " << error << "\n";
      return kExitUsage;
    }
    g.params.name = a->name;
    if (!a->quiet) {
      std::cerr << "mrct detect: " << g.mrc_frames << " MRC frames of " << g.frames << "\n"
                << g.summary();
    }
    if (g.mrc_frames == 0) {
      std::cerr << "mrct detect: no frame decodes as MRC with a valid ICRC: nothing to infer "
                   "from (no profile written)\n";
      return kExitInconclusive;
    }
    const std::string text = g.profile_text();
    if (a->out.empty() || a->out == "-") {
      std::cout << text;
      return kExitOk;
    }
    // Written whole or not at all.
    const std::string tmp = a->out + ".tmp";
    {
      std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
      if (!(f << text) || !f.flush()) {
        std::cerr << "mrct detect: cannot write " << tmp << "\n";
        std::remove(tmp.c_str());
        return kExitUsage;
      }
    }
    if (std::rename(tmp.c_str(), a->out.c_str()) != 0) {
      std::cerr << "mrct detect: cannot rename " << tmp << " to " << a->out << "\n";
      std::remove(tmp.c_str());
      return kExitUsage;
    }
    return kExitOk;
  };
}

Run add_rules(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto markdown = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "JSON array: id, statement, source, severity, side, refs, ...");
  app.add_flag("--markdown", *markdown, "the text of docs/rules.md");
  return [json, markdown] {
    if (*markdown) {
      std::cout << mrc::check::rules_markdown();
    } else if (*json) {
      // One array: the wire rules, then the API suite's tests.
      std::ostringstream wire, api;
      mrc::check::print_rules(wire, true);
      mrc::api::print_catalogue(api, true);
      auto all = nlohmann::ordered_json::parse(wire.str());
      for (auto& t : nlohmann::ordered_json::parse(api.str())) all.push_back(std::move(t));
      std::cout << all.dump(2) << "\n";
    } else {
      mrc::check::print_rules(std::cout, false);
      mrc::api::print_catalogue(std::cout, false);
    }
    return kExitOk;
  };
}

}  // namespace mrct
