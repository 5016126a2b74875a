// `mrct script`: run / check scripts, run them against the reference's mutants, print the
// mutant matrix. Every script is parsed before anything runs, so a typo in the last file of a
// library fails the command with exit 2 before any result is written.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "conformance/scripts/internal.h"

namespace mrc::scripts {

namespace {

bool parse_duration(const std::string& s, uint64_t& ns) {
  static constexpr std::pair<std::string_view, uint64_t> kUnits[] = {
      {"ns", 1}, {"us", 1'000}, {"ms", 1'000'000}, {"s", 1'000'000'000}};
  for (const auto& [u, mult] : kUnits) {
    if (s.size() > u.size() && s.ends_with(u)) {
      const std::string num = s.substr(0, s.size() - u.size());
      if (u == "s" && (num.ends_with("m") || num.ends_with("u") || num.ends_with("n"))) continue;
      try {
        size_t used = 0;
        const double v = std::stod(num, &used);
        const double total = v * static_cast<double>(mult) + 0.5;
        if (used != num.size() || v < 0 || !(total < 1.8e19)) return false;
        ns = static_cast<uint64_t>(total);
        return true;
      } catch (...) {
        return false;
      }
    }
  }
  return false;
}

// Expands directories to their *.mrcs files (sorted); files are taken as given.
bool expand(const std::vector<std::string>& args, std::vector<std::string>& out,
            std::string& error) {
  namespace fs = std::filesystem;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(a, ec))
        if (e.path().extension() == ".mrcs") found.push_back(e.path().string());
      std::sort(found.begin(), found.end());
      if (found.empty()) {
        error = a + ": no *.mrcs scripts in this directory";
        return false;
      }
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(a, ec)) {
      out.push_back(a);
    } else {
      error = a + ": no such file or directory";
      return false;
    }
  }
  return true;
}

bool write_file(const std::string& path, const std::string& text) {
  if (path.empty()) return true;
  const std::string tmp = path + ".tmp";
  std::ofstream o(tmp, std::ios::binary);
  o << text;
  o.close();
  if (!o) {
    std::cerr << path << ": cannot write\n";
    return false;
  }
  std::filesystem::rename(tmp, path);
  return true;
}

struct Options {
  std::vector<std::string> files;
  std::string mutant = "none";
  bool mutants = false;
  bool matrix = false;
  std::string tolerance;
  std::vector<std::string> tags, exclude_tags;
  std::string json, junit, md, pcap_dir, dut;
  std::string target = "engine";
  bool quiet = false;
  bool strict = false;  // unsupported scripts fail the run too
  std::string self;     // this mrct binary (the netns target starts `mrct script serve` with it)
};

// Where the wire target's captures go when --pcap-dir is not given: next to the first report.
std::string default_pcap_dir(const Options& o) {
  for (const std::string* r : {&o.json, &o.junit, &o.md}) {
    if (r->empty()) continue;
    const std::filesystem::path p(*r);
    return (p.has_parent_path() ? p.parent_path() : std::filesystem::path(".")).string() + "/pcap";
  }
  return {};
}

int run(const Options& o, bool check_only) {
  std::vector<std::string> paths;
  std::string error;
  if (!expand(o.files, paths, error)) {
    std::cerr << "mrct script: " << error << "\n";
    return 2;
  }
  uint64_t tol = 0;
  const bool tol_given = !o.tolerance.empty();
  if (tol_given && !parse_duration(o.tolerance, tol)) {
    std::cerr << "mrct script: --tolerance '" << o.tolerance
              << "': expected a duration such as 50us or 2ms\n";
    return 2;
  }
  const bool wire = o.target == "netns";
  if (!wire && o.target != "engine") {
    std::cerr << "mrct script: --target '" << o.target << "': expected engine or netns\n";
    return 2;
  }
  if (wire && o.matrix) {
    std::cerr << "mrct script: --matrix runs on the engine target only (67 x 24 real-time "
                 "plays would take hours)\n";
    return 2;
  }
  DutProfile dut;
  if (!o.dut.empty()) {
    if (!wire) {
      std::cerr << "mrct script: --dut runs the implementation over the wire: give --target "
                   "netns\n";
      return 2;
    }
    if (o.mutant != "none" || o.mutants || o.matrix) {
      std::cerr << "mrct script: --mutant/--mutants are mutants of the reference; with --dut "
                   "give a profile whose script command runs the mutant instead\n";
      return 2;
    }
    if (!load_dut_profile(o.dut, dut, error)) {
      std::cerr << error << "\n";
      return 2;
    }
  }
  const std::optional<runtime::Mutant> mutant = runtime::parse_mutant(o.mutant);
  if (!mutant) {
    std::cerr << "mrct script: --mutant '" << o.mutant << "' is unknown (mrct endpoint "
              << "--list-mutants)\n";
    return 2;
  }
  std::vector<Script> scripts;
  bool parse_failed = false;
  for (const std::string& p : paths) {
    Script s;
    ParseError pe;
    if (!load_script(p, s, pe)) {
      std::cerr << pe.format() << "\n";
      parse_failed = true;
      continue;
    }
    auto has = [](const std::vector<std::string>& v, const std::string& x) {
      return std::find(v.begin(), v.end(), x) != v.end();
    };
    if (!o.tags.empty() && std::none_of(o.tags.begin(), o.tags.end(),
                                        [&](const std::string& t) { return has(s.setup.tags, t); }))
      continue;
    if (std::any_of(o.exclude_tags.begin(), o.exclude_tags.end(),
                    [&](const std::string& t) { return has(s.setup.tags, t); }))
      continue;
    scripts.push_back(std::move(s));
  }
  if (parse_failed) return 2;
  if (check_only) {
    if (!o.quiet) std::cout << scripts.size() << " script(s) parse\n";
    return 0;
  }
  const std::string pcap_dir =
      !o.pcap_dir.empty() ? o.pcap_dir : (wire ? default_pcap_dir(o) : std::string());
  if (!pcap_dir.empty()) std::filesystem::create_directories(pcap_dir);
  // MRC_OUT of a DUT: the capture folder, or a fresh temporary one.
  std::string dut_out = pcap_dir;
  if (!o.dut.empty() && dut_out.empty()) {
    char tmpl[] = "/tmp/mrct-script-dut-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      std::cerr << "mrct script: cannot create a temporary directory for MRC_OUT\n";
      return 2;
    }
    dut_out = tmpl;
  }
  if (!dut_out.empty()) dut_out = std::filesystem::absolute(dut_out).string();
  std::vector<ScriptResult> results;
  bool ok = true;
  auto play_one = [&](const Script& s, runtime::Mutant m) {
    PlayOptions po;
    // On the engine's virtual clock windows hold exactly; on real time the script's own
    // tolerance (header `tolerance`) applies unless --tolerance says otherwise.
    po.tolerance_ns = tol_given ? tol : (wire ? s.setup.wire_tolerance_ns : 0);
    std::string name = s.name;
    if (m != runtime::Mutant::kNone) name += "." + std::string(runtime::mutant_info(m).name);
    if (!pcap_dir.empty()) po.pcap_path = pcap_dir + "/" + name + ".pcapng";
    const std::string log = pcap_dir.empty() ? "" : pcap_dir + "/" + name + ".log";
    if (!o.dut.empty()) {
      // What the profile's capabilities rule out is not started at all.
      if (const std::string why = dut_unsupported(dut, s.setup); !why.empty()) {
        ScriptResult r;
        r.script = s.name;
        r.path = s.path;
        r.target = "DUT " + dut.cmd.name + " (netns)";
        r.rules = s.setup.rules;
        r.tags = s.setup.tags;
        r.outcome = Outcome::kUnsupported;
        r.error = why;
        return r;
      }
      DutCommand cmd = dut.cmd;
      cmd.out_dir = dut_out;
      std::unique_ptr<Target> target = make_dut_target(o.self, s, cmd, log);
      ScriptResult r = play(s, *target, po);
      if (!po.pcap_path.empty() && std::filesystem::exists(po.pcap_path)) r.pcap = po.pcap_path;
      return r;
    }
    std::unique_ptr<Target> target =
        wire ? make_netns_target(o.self, s.path, m, log) : make_reference_target(m);
    ScriptResult r = play(s, *target, po);
    if (!po.pcap_path.empty() && std::filesystem::exists(po.pcap_path)) r.pcap = po.pcap_path;
    return r;
  };
  if (o.matrix) {
    // Every script against every mutant: which mutants each script catches.
    std::cout << "script";
    for (const runtime::MutantInfo& mi : runtime::mutant_table()) std::cout << "\t" << mi.name;
    std::cout << "\n";
    for (const Script& s : scripts) {
      std::cout << s.name;
      for (const runtime::MutantInfo& mi : runtime::mutant_table()) {
        if (mi.mutant == runtime::Mutant::kWrongPort && s.setup.planes < 2) {
          std::cout << "\t-";
          continue;
        }
        const ScriptResult r = play_one(s, mi.mutant);
        std::cout << "\t" << (r.outcome == Outcome::kFail ? "X" : ".");
      }
      std::cout << "\n";
    }
    return 0;
  }
  for (const Script& s : scripts) {
    if (o.mutants) {
      // The script must fail against each mutant it names, and pass against the reference.
      ScriptResult base = play_one(s, runtime::Mutant::kNone);
      if (s.setup.mutants.empty()) {
        base.outcome = Outcome::kFail;
        base.error = s.path + ": names no mutant it catches (header 'mutants')";
      }
      for (const std::string& name : s.setup.mutants) {
        if (base.outcome != Outcome::kPass) break;
        const ScriptResult r = play_one(s, *runtime::parse_mutant(name));
        if (r.outcome != Outcome::kFail) {
          base.outcome = Outcome::kFail;
          base.error = s.path + ": passes against mutant " + name + " (it must fail)";
        } else if (!o.quiet) {
          std::cout << "  " << s.name << " catches " << name << ": " << r.error << "\n";
        }
        base.seconds += r.seconds;
      }
      base.target = "reference and its mutants";
      results.push_back(std::move(base));
    } else {
      results.push_back(play_one(s, *mutant));
    }
    const ScriptResult& r = results.back();
    // Unsupported is not a failure of the implementation; it is counted and shown, and
    // --strict makes it fail the run.
    if (r.outcome != Outcome::kPass && (r.outcome != Outcome::kUnsupported || o.strict)) ok = false;
    if (!o.quiet || r.outcome != Outcome::kPass) {
      char t[32];
      std::snprintf(t, sizeof t, "%.3f", r.seconds);
      std::cout << (r.outcome == Outcome::kPass          ? "PASS "
                    : r.outcome == Outcome::kUnsupported ? "UNSUPPORTED "
                                                         : "FAIL ")
                << r.script << "  (" << t << " s)" << (r.error.empty() ? "" : "\n    " + r.error)
                << "\n";
      if (r.outcome == Outcome::kFail) {
        for (const StatementResult& st : r.statements) {
          if (st.outcome != Outcome::kFail) continue;
          for (const std::string& f : st.frames) std::cout << "      " << f << "\n";
        }
      }
    }
  }
  size_t pass = 0, unsupported = 0;
  double secs = 0;
  for (const ScriptResult& r : results) {
    pass += r.outcome == Outcome::kPass;
    unsupported += r.outcome == Outcome::kUnsupported;
    secs += r.seconds;
  }
  char line[160];
  std::snprintf(line, sizeof line, "%zu script(s): %zu pass, %zu fail, %zu unsupported, %.2f s\n",
                results.size(), pass, results.size() - pass - unsupported, unsupported, secs);
  std::cout << line;
  if (!write_file(o.json, report_json(results)) || !write_file(o.junit, report_junit(results)) ||
      !write_file(o.md, report_markdown(results)))
    return 2;
  return ok ? 0 : 1;
}

}  // namespace

int script_main(int argc, char** argv) {
  CLI::App app{"mrct script: exact-packet conformance scripts (*.mrcs, docs/scripts.md)"};
  app.require_subcommand(1);
  Options o;
  auto add_common = [&](CLI::App* sub) {
    sub->add_option("files", o.files, "scripts or directories of *.mrcs")->required();
    sub->add_option("--tag", o.tags, "only scripts with one of these tags (e.g. ci-fast)");
    sub->add_option("--exclude-tag", o.exclude_tags, "leave out scripts with these tags");
    sub->add_flag("-q,--quiet", o.quiet, "print failures and the summary only");
  };
  CLI::App* run_cmd = app.add_subcommand("run", "play scripts against an implementation");
  add_common(run_cmd);
  run_cmd->add_option("--dut", o.dut,
                      "DUT profile with a `script` command (ci/dut/README.md, script mode): "
                      "play against that implementation instead of the reference (--target "
                      "netns)");
  run_cmd->add_flag("--strict", o.strict, "unsupported scripts fail the run (exit 1)");
  run_cmd
      ->add_option("--target", o.target,
                   "engine: the reference engine in this process on a virtual clock "
                   "(default, fast, no root); netns: the reference `mrct endpoint` runtime in "
                   "a namespace pair over AF_PACKET on real time (root)")
      ->capture_default_str();
  run_cmd->add_option("--mutant", o.mutant, "TEST ONLY: play against this mutant of the reference");
  run_cmd->add_flag("--mutants", o.mutants,
                    "each script must pass against the reference and fail against every mutant "
                    "its header names");
  run_cmd->add_flag("--matrix", o.matrix,
                    "play every script against every mutant and print the matrix (X = caught)");
  run_cmd->add_option("--tolerance", o.tolerance,
                      "widen every timing window by this much on both sides (e.g. 200us)");
  run_cmd->add_option("--json", o.json, "write the JSON report here");
  run_cmd->add_option("--junit", o.junit, "write the JUnit XML report here");
  run_cmd->add_option("--md", o.md, "write the Markdown report here");
  run_cmd->add_option("--pcap-dir", o.pcap_dir,
                      "write both directions of every script as DIR/SCRIPT.pcapng");
  CLI::App* check_cmd = app.add_subcommand("check", "parse scripts only (exit 2 on errors)");
  add_common(check_cmd);
  // Internal: the implementation side of the netns target (started by it, in its namespace).
  CLI::App* serve_cmd = app.add_subcommand("serve", "");
  std::string serve_script, serve_mutant = "none";
  std::vector<std::string> serve_ifaces;
  bool serve_env = false;
  serve_cmd->add_option("script", serve_script);
  serve_cmd->add_option("--ifaces", serve_ifaces)->delimiter(',');
  serve_cmd->add_option("--mutant", serve_mutant);
  serve_cmd->add_flag("--env", serve_env,
                      "the header from the DUT contract's script-mode MRC_* environment");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  if (serve_cmd->parsed()) {
    if (serve_env) return serve_env_main();
    if (serve_script.empty() || serve_ifaces.empty()) {
      std::cerr << "mrct script serve: give SCRIPT --ifaces I1,... or --env\n";
      return 2;
    }
    const std::optional<runtime::Mutant> m = runtime::parse_mutant(serve_mutant);
    if (!m) {
      std::cerr << "mrct script serve: --mutant '" << serve_mutant << "' is unknown\n";
      return 2;
    }
    return serve_main(serve_script, serve_ifaces, *m);
  }
  std::error_code ec;
  o.self = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  return run(o, check_cmd->parsed());
}

}  // namespace mrc::scripts
