// Subcommands of mrct. Each registers its CLI11 options and returns the callback to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace mrct {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitViolations = 1;    // the input was read, and it is not conforming
inline constexpr int kExitUsage = 2;         // bad options or unreadable input
inline constexpr int kExitInconclusive = 3;  // the input was read, and had nothing to judge

using Run = std::function<int()>;
Run add_decode(CLI::App& app);
Run add_craft(CLI::App& app);
// Forwards every argument after the subcommand to a tool's own main(argc, argv).
Run add_passthrough(CLI::App& app, int (*entry)(int, char**), const char* prog);
// Replaces mrct with an external program (the Python testbed, the lab script), arguments after
// the subcommand appended to `command`; PYTHONPATH is extended when given.
Run add_exec(CLI::App& app, std::vector<std::string> command, std::string pythonpath = {});
#ifdef MRCT_HAVE_CHECK
Run add_check(CLI::App& app);
Run add_rules(CLI::App& app);
Run add_api_suite(CLI::App& app);
Run add_detect(CLI::App& app);
#endif

}  // namespace mrct
