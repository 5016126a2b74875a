#include <cstdio>
#include <iostream>
#include <map>

#include "mrct/commands.h"
#ifdef MRCT_HAVE_FAULTS
#include "fault-injector/faults.h"
#endif
#ifdef MRCT_HAVE_RUNTIME
#include "reference-impl/runtime/runtime.h"
#endif
#ifdef MRCT_HAVE_SIM
#include "reference-impl/simrun/simrun.h"
#endif
#ifdef MRCT_HAVE_SCRIPTS
#include "conformance/scripts/scripts.h"
#endif
#ifdef MRCT_HAVE_GUI
#include "gui/view_main.h"
#endif

int main(int argc, char** argv) {
  CLI::App app{"mrct: MRC testbed and conformance suite"};
  app.set_version_flag("--version", std::string("mrct 0.1.0 (wire profile MRP0)"));
  app.require_subcommand(1);
  std::map<CLI::App*, mrct::Run> runs;
  auto add = [&](const char* name, const char* help, auto fn) {
    CLI::App* sub = app.add_subcommand(name, help);
    runs[sub] = fn(*sub);
  };
  add("decode", "Decode a capture: one line per frame, a field tree (-V) or JSON lines (--json)",
      mrct::add_decode);
  add("craft", "Write a capture with every MRP0 packet type in every EV carriage", mrct::add_craft);
#ifdef MRCT_HAVE_CHECK
  add("check", "Check captures against the MRC rule catalogue", mrct::add_check);
  add("rules", "Print the rule catalogue (wire rules and API tests)", mrct::add_rules);
  add("detect", "Infer the wire variant (port, EV stripe, header bits ...) of captures",
      mrct::add_detect);
#endif
#ifdef MRCT_HAVE_API_SUITE
  add("api-suite", "Run the API conformance suite against a lib_mrc.so", mrct::add_api_suite);
#endif
#ifdef MRCT_HAVE_FAULTS
  add("inject", "Fault injector relay on impaired links (see fault-injector/README.md)",
      [](CLI::App& sub) {
        return mrct::add_passthrough(sub, mrc::faults::inject_main, "mrct inject");
      });
#endif
#ifdef MRCT_HAVE_RUNTIME
  add("endpoint", "Reference MRC endpoint on real sockets (perftest-style server/client)",
      [](CLI::App& sub) {
        return mrct::add_passthrough(sub, mrc::runtime::endpoint_main, "mrct endpoint");
      });
#endif
#ifdef MRCT_HAVE_SIM
  add("sim", "The reference engine on large multi-plane Clos fabrics (htsim-style workloads)",
      [](CLI::App& sub) { return mrct::add_passthrough(sub, mrc::simrun::sim_main, "mrct sim"); });
#endif
#ifdef MRCT_HAVE_SCRIPTS
  add("script", "Exact-packet conformance scripts (*.mrcs) against the reference or a DUT",
      [](CLI::App& sub) {
        return mrct::add_passthrough(sub, mrc::scripts::script_main, "mrct script");
      });
#endif
#ifdef MRCT_HAVE_GUI
  add("view", "Per-path timeline viewer; --export renders headless",
      [](CLI::App& sub) { return mrct::add_passthrough(sub, mrc::view::view_main, "mrct view"); });
#endif
  // The Python testbed (Debian's interpreter: the one Mininet is installed for) and the lab.
  const std::string src = MRC_SOURCE_DIR;
  add("run", "Run one scenario end to end: fabric, endpoints, faults, captures, check, report",
      [&](CLI::App& sub) {
        return mrct::add_exec(sub, {"/usr/bin/python3", "-m", "mrctb", "run"}, src + "/testbed");
      });
  add("suite", "Run a library of scenarios against an implementation under test",
      [&](CLI::App& sub) {
        return mrct::add_exec(sub, {"/usr/bin/python3", "-m", "mrctb", "suite"}, src + "/testbed");
      });
  add("lab", "SoftRoCE lab: RoCEv2 RC baselines from the Linux rxe driver in a qemu guest",
      [&](CLI::App& sub) { return mrct::add_exec(sub, {src + "/lab/mrct-lab"}); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : mrct::kExitUsage;
  }
  for (auto& [sub, run] : runs) {
    if (sub->parsed()) return run();
  }
  return mrct::kExitUsage;
}
