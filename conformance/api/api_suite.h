// The MRC API conformance suite: one-node and two-node tests of any lib_mrc.so through the OCP
// application (mrc.h) and controller (mrc_ctl.h) APIs. The library is bound at run time with
// dlopen, in a forked child per test, so a crash or hang of the library under test is one failed
// test.
#pragma once

#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mrc::api {

enum class Status { kPass, kFail, kUnsupported, kInformational };

std::string_view status_name(Status s);

// One catalogue row: a stable ID (MRC-API-nnn), what the test checks and where the
// behaviour is written down (tag API + the header section or OCP walkthrough).
struct TestInfo {
  std::string_view id;
  std::string_view area;
  std::string_view statement;
  std::string_view source;
};

std::span<const TestInfo> catalogue();

struct Result {
  std::string id;
  Status status = Status::kFail;
  std::string detail;
  double seconds = 0;
};

struct Options {
  std::string lib;                // path handed to dlopen
  std::string device;             // verbs device name; empty: the first MRC device
  double test_timeout_s = 30;     // a test still running after this is killed and failed
  std::vector<std::string> only;  // test IDs to run; empty: all
  // Two-node tests (data, immediates, ordering, error completions between two network
  // namespaces): node B binds this library (often the reference); empty: they are not run.
  std::string peer_lib;
  std::string peer_device;
  // SoftMRC's device process (softmrcd): when set, every test runs against the library in
  // device mode. The runner starts one softmrcd per node for each test (in the suite's own
  // namespace for a one-node test, in each node's namespace for a two-node test), points the
  // test processes at it with MRC_SOFT_DEVICE, and stops it when the test ends; a device that
  // does not come up or dies during the test fails that test.
  std::string softmrcd;
};

// Whether the test is a two-node test (needs Options::peer_lib).
bool is_two_node(std::string_view id);

// Loads `lib` once in a child to report a clear error; empty string when it loads.
std::string probe_library(const std::string& lib);

// Runs the selected tests, each in its own forked child (two for a two-node test). With
// peer_lib, first makes the two network namespaces (pid-named, a veth pair between them; root)
// and removes them before returning; `error` is set (and nothing run) if they cannot be made.
std::vector<Result> run(const Options& options, std::string* error = nullptr);

void write_json(std::ostream& out, const Options& options, const std::vector<Result>& results);
void write_junit(std::ostream& out, const std::vector<Result>& results);
void write_markdown(std::ostream& out, const Options& options, const std::vector<Result>& results);

// The catalogue for `mrct rules` (text or JSON rows) and the docs/rules.md section.
void print_catalogue(std::ostream& out, bool json);
std::string catalogue_markdown();

}  // namespace mrc::api
