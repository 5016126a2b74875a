// mrc_scripts: active conformance tests, packetdrill for MRC.
//
// The one public header of conformance/scripts/. A script (*.mrcs, docs/scripts.md) plays one
// side of a connection, exact frame by exact frame, against an implementation under test (a
// Target): it injects frames (including ones no conforming peer would send), waits, and expects
// frames with field matchers, captured variables and timing windows, completions and memory
// contents. parse_script() turns text into a Script with file:line:column errors; play() runs
// it against a Target and returns one result per statement.
//
// Targets: ReferenceTarget is the reference engine in this process on a virtual clock (exact
// timing, no namespaces, mutants from the runtime's Mutator); NetnsTarget (netns.cc) runs it as
// a separate process in a network namespace behind veths, played over AF_PACKET in real time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference-impl/runtime/runtime.h"
#include "wire/wire.h"

namespace mrc::scripts {

// ---------------------------------------------------------------------------------------------
// The language
// ---------------------------------------------------------------------------------------------
struct SourcePos {
  uint32_t line = 0;    // 1-based
  uint32_t column = 0;  // 1-based
};

// An integer expression: a sum of terms, each a number, a named constant or a $variable.
struct Expr {
  struct Term {
    bool negative = false;
    bool is_var = false;
    uint64_t value = 0;
    std::string var;  // without '$'
    SourcePos pos;
  };
  std::vector<Term> terms;
  SourcePos pos;
  // A lone unbound $variable in an expectation captures the field's value.
  bool lone_var() const { return terms.size() == 1 && terms[0].is_var && !terms[0].negative; }
};

// What a field of an expected frame / completion must be.
struct Matcher {
  enum class Kind : uint8_t { kAny, kExact, kRange, kNot } kind = Kind::kExact;
  Expr lo, hi;  // kExact / kNot: lo; kRange: lo..hi inclusive (PSN fields: mod 2^24)
};

struct FieldArg {
  std::string name;
  SourcePos pos;
  Matcher m;         // expect
  std::string text;  // raw value text (fill=, payload=, hex=)
};

enum class Verb : uint8_t {
  kSend,                // send OPCODE fields...
  kExpect,              // expect OPCODE|any fields...
  kExpectNothing,       // expect nothing for T
  kWait,                // wait T
  kExpectCompletion,    // expect completion fields...
  kExpectNoCompletion,  // expect no completion
  kExpectMemory,        // expect memory at=EXPR len=N fill=...|hex=...
  kPostWrite,           // post write len=N [imm=X] [va=..] [rkey=..] (DUT is the requester)
};

struct Statement {
  Verb verb = Verb::kSend;
  SourcePos pos;
  std::string text;  // the source line, trimmed (for reports)
  // Timing window relative to the previous event: +lo..hi (ns). Absent: send/post at once,
  // expect within [0, default_window].
  bool has_window = false;
  uint64_t window_lo_ns = 0, window_hi_ns = 0;
  uint64_t duration_ns = 0;  // wait T, expect nothing for T
  std::string opcode;        // send/expect: opcode name, "any" (expect) or "raw" (send)
  std::vector<FieldArg> fields;
  std::vector<std::string> flags;  // send: bad_icrc, trim, trim_lasthop
};

enum class Role : uint8_t { kResponder, kRequester };  // the implementation's role

// The header block: connection setup, so one script runs against any implementation.
struct Setup {
  Role role = Role::kResponder;
  std::vector<std::string> rules;
  std::vector<std::string> tags;
  std::string description;
  wire::EvFormat format = wire::EvFormat::kStev;
  uint8_t planes = 1;
  uint32_t mtu = 1024;
  uint32_t mr_bytes = 65536;
  uint8_t mr_fill = 0x5A;  // every byte of the DUT's region before the script runs
  uint32_t tester_qpn = 0x11;
  uint32_t tester_psn = 0x100;
  uint32_t dut_psn = 0x800;
  uint64_t tester_va = 0x10000;
  uint32_t tester_rkey = 0x1234;
  uint8_t mpr = 8;  // 128-PSN units, both directions
  bool dynamic_mpr = false;
  uint16_t max_wimm = 4;  // responder max_wimm_dest and requester max_wimm
  uint32_t ack_trigger_bytes = 16384;
  uint32_t ack_min_add_bytes = 1024;
  uint8_t timeout = 10;  // requester local ACK timeout exponent (1.024 us x 2^t)
  uint8_t retry_linear = 7, retry_exp = 0;
  uint32_t recv_wqes = 8;
  bool svc_time = true;
  bool trim_nack = true;
  uint64_t reverse_probe_ns = 1'000'000'000;  // responder reverse-EV probe period
  uint64_t default_window_ns = 5'000'000;
  uint64_t bound_ns = 10'000'000'000;  // the whole script, wall clock
  // Timing tolerance on real time (the netns target): scheduling, socket and veth latency.
  // `--tolerance` overrides it; the in-process target runs with 0 unless told otherwise.
  uint64_t wire_tolerance_ns = 2'000'000;
  std::vector<std::string> ignore;  // opcode names of DUT frames the expectations skip
  // Mutants of the reference this script must fail against (`mrct script run --mutants`).
  std::vector<std::string> mutants;
};

struct Script {
  std::string path;
  std::string name;  // file name without .mrcs
  Setup setup;
  std::vector<Statement> statements;
};

struct ParseError {
  std::string file;
  SourcePos pos;
  std::string message;         // says what was expected
  std::string format() const;  // "file:line:column: message"
};

// Parses script text. Returns false with `err` at the first error.
bool parse_script(std::string_view text, std::string_view path, Script& out, ParseError& err);
bool load_script(const std::string& path, Script& out, ParseError& err);

// Field names the language knows (send and expect), for docs and error hints.
std::vector<std::string> field_names();

// ---------------------------------------------------------------------------------------------
// Targets: the implementation under test
// ---------------------------------------------------------------------------------------------
struct Completion {
  uint64_t wr_id = 0;
  uint32_t status = 0;  // engine::WcStatus value
  uint32_t opcode = 0;  // engine::WcOpcode value
  uint32_t byte_len = 0;
  uint32_t imm = 0;
  bool with_imm = false;
  uint32_t qpn = 0;
};

struct TargetFrame {
  std::vector<std::byte> bytes;
  uint8_t plane = 1;
  uint64_t t_ns = 0;
};

// What the tester knows of the implementation once it is set up.
struct Bindings {
  wire::Ipv6Addr dut_gid{}, tester_gid{};
  wire::MacAddr dut_mac{}, tester_mac{};
  std::map<std::string, uint64_t> vars;  // dut_qpn, va, rkey, ...
};

class Target {
 public:
  virtual ~Target() = default;
  virtual std::string name() const = 0;
  // Creates the implementation's QP, memory region and receive WQEs from the header.
  virtual bool start(const Setup& setup, Bindings& b, std::string& error) = 0;
  virtual uint64_t now_ns() = 0;
  virtual bool inject(std::span<const std::byte> frame, uint8_t plane, std::string& error) = 0;
  // The next frame the implementation sends, no later than deadline_ns (false: none by then;
  // the clock has reached the deadline).
  virtual bool next_frame(uint64_t deadline_ns, TargetFrame& out) = 0;
  virtual std::vector<Completion> poll_completions() = 0;
  virtual bool read_memory(uint64_t va, size_t len, std::vector<std::byte>& out,
                           std::string& error) = 0;
  virtual bool post_write(uint64_t wr_id, uint32_t len, std::optional<uint32_t> imm, uint64_t va,
                          uint32_t rkey, uint8_t fill_seed, std::string& error) = 0;
  virtual void stop() {}
  // Non-empty when the implementation said it cannot run this script (a DUT's "unsupported"
  // answer or exit code 69): the script is reported unsupported with this reason, not failed.
  virtual std::string unsupported_reason() const { return {}; }
};

// The reference engine in this process, on a virtual clock: frames it sends are stamped with the
// time they were polled, timers fire exactly when due. `mutant` rewrites its frames the way
// `mrct endpoint --mutant` does (runtime Mutator), plus script-only mutants (script_mutants()).
std::unique_ptr<Target> make_reference_target(runtime::Mutant mutant = runtime::Mutant::kNone);

// The wire target (netns.cc): a namespace pair per script (pid-unique names, removed when the
// target stops, at exit and on SIGINT/SIGTERM), one veth pair per plane; the reference runs in
// one namespace as `MRCT script serve` (the same engine setup as make_reference_target, on the
// runtime's AF_PACKET back end, `mutant` applied by the runtime), the player in the other over
// AF_PACKET on the real clock. Needs root. `script_path`: the script whose header the serve
// process sets up; `impl_log`: the implementation's stderr (empty: none).
std::unique_ptr<Target> make_netns_target(const std::string& mrct, const std::string& script_path,
                                          runtime::Mutant mutant, const std::string& impl_log = {});

// An implementation plugged in through the DUT contract's script mode (ci/dut/README.md): the
// profile's `script` command template, run with /bin/sh in the implementation's namespace with
// the script's header in MRC_* variables, speaking the JSON lines `mrct script serve` speaks.
struct DutCommand {
  std::string name;                                      // the profile's [dut] name
  std::string command;                                   // the `script` template
  std::vector<std::pair<std::string, std::string>> env;  // the profile's env, MRC_DUT_DIR
  std::string out_dir;                                   // MRC_OUT (the working directory)
};
std::unique_ptr<Target> make_dut_target(const std::string& mrct, const Script& script,
                                        const DutCommand& dut, const std::string& impl_log = {});

// Loads a DUT profile for scripts: [dut] name, script, env; [capabilities] (format and planes
// a script needs). Returns false with "FILE:LINE: KEY: what is wrong".
struct DutProfile {
  DutCommand cmd;
  std::map<std::string, bool> capabilities;
};
bool load_dut_profile(const std::string& path, DutProfile& out, std::string& error);
// Why a script cannot run on this DUT by its capabilities ("" when it can).
std::string dut_unsupported(const DutProfile& d, const Setup& s);

// The script-mode environment of the DUT contract (MRC_ROLE=script, the header in MRC_*
// variables), for the implementation's interfaces `ifaces` (plane order).
std::vector<std::pair<std::string, std::string>> script_env(const Script& script,
                                                            const std::vector<std::string>& ifaces);
// The inverse: a Setup from the MRC_* environment (`mrct script serve --env`). False with the
// variable that is missing or malformed.
bool setup_from_env(Setup& s, std::vector<std::string>& ifaces, std::string& error);

// ---------------------------------------------------------------------------------------------
// Playing
// ---------------------------------------------------------------------------------------------
enum class Outcome : uint8_t { kPass, kFail, kNotRun, kUnsupported };
std::string_view outcome_name(Outcome o);

struct StatementResult {
  const Statement* st = nullptr;  // valid while the Script lives
  uint32_t line = 0;              // copies for reports that outlive the Script
  std::string text;
  Outcome outcome = Outcome::kNotRun;
  uint64_t t_ns = 0;                // relative to the script start
  std::string detail;               // why it failed, or what matched
  std::vector<std::string> frames;  // summaries of the frames involved
};

struct PlayOptions {
  uint64_t tolerance_ns = 0;  // widens every timing window on both sides
  std::string pcap_path;      // both directions, pcapng with comments (empty: none)
};

struct ScriptResult {
  std::string script, path, target;
  std::vector<std::string> rules, tags;
  Outcome outcome = Outcome::kNotRun;
  std::string error;  // setup error or the first failure, "file:line:column: ..."
  std::vector<StatementResult> statements;
  double seconds = 0;
  std::string pcap;  // both directions, when written
};

ScriptResult play(const Script& script, Target& target, const PlayOptions& opts = {});

// Reports in the suite's formats.
std::string report_json(const std::vector<ScriptResult>& results);
std::string report_junit(const std::vector<ScriptResult>& results);
std::string report_markdown(const std::vector<ScriptResult>& results);

// `mrct script ...` (run, list).
int script_main(int argc, char** argv);

}  // namespace mrc::scripts
