// Parser, matcher and player, unit-tested against the in-process reference (no namespaces).
#include "conformance/scripts/scripts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace mrc::scripts {
namespace {

Script parse_ok(std::string_view text) {
  Script s;
  ParseError e;
  EXPECT_TRUE(parse_script(text, "t.mrcs", s, e)) << e.format();
  return s;
}

ParseError parse_err(std::string_view text) {
  Script s;
  ParseError e;
  EXPECT_FALSE(parse_script(text, "t.mrcs", s, e));
  return e;
}

ScriptResult run(std::string_view text, runtime::Mutant m = runtime::Mutant::kNone,
                 PlayOptions opts = {}) {
  const Script s = parse_ok(text);
  auto t = make_reference_target(m);
  return play(s, *t, opts);
}

TEST(ScriptParse, HeaderAndStatements) {
  const Script s = parse_ok(
      "rules MRC-RSP-009\ntags ci-fast sack\nmtu 1024\nmutants wrong-ev-echo\n"
      "send WRITE_ONLY psn=$psn len=64\n"
      "+0..1ms expect SACK cack=$psn offset=0 entropy=$e bitmap=0b1_0\n"
      "+250us expect any psn=$psn-1..$psn+3\n"
      "wait 2ms\nexpect nothing for 1ms\n");
  EXPECT_EQ(s.name, "t");
  EXPECT_EQ(s.setup.rules, std::vector<std::string>{"MRC-RSP-009"});
  EXPECT_EQ(s.setup.mutants, std::vector<std::string>{"wrong-ev-echo"});
  ASSERT_EQ(s.statements.size(), 5u);
  EXPECT_EQ(s.statements[1].window_lo_ns, 0u);
  EXPECT_EQ(s.statements[1].window_hi_ns, 1'000'000u);
  EXPECT_EQ(s.statements[2].window_lo_ns, 250'000u);
  EXPECT_EQ(s.statements[2].window_hi_ns, 250'000u);
  EXPECT_EQ(s.statements[2].fields[0].m.kind, Matcher::Kind::kRange);
  EXPECT_EQ(s.statements[3].duration_ns, 2'000'000u);
  EXPECT_EQ(s.statements[4].verb, Verb::kExpectNothing);
}

TEST(ScriptParse, ErrorsNameLineColumnAndWhatWasExpected) {
  ParseError e = parse_err("rules MRC-RSP-001\nsend WRITE_ONLY psn=$psn lenn=4\n");
  EXPECT_EQ(e.pos.line, 2u);
  EXPECT_EQ(e.pos.column, 26u);
  EXPECT_NE(e.message.find("unknown field 'lenn'"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("expected one of"), std::string::npos);
  EXPECT_EQ(e.format().substr(0, 11), "t.mrcs:2:26");

  e = parse_err("rules MRC-RSP-001\nsend WRITE_ONLY psn=\n");
  EXPECT_EQ(e.pos.column, 21u);
  EXPECT_NE(e.message.find("expected a value"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\n  +2 expect SACK\n");
  EXPECT_EQ(e.pos.line, 2u);
  EXPECT_EQ(e.pos.column, 4u);
  EXPECT_NE(e.message.find("unit"), std::string::npos) << e.message;

  // Found by script_fuzz: a duration past 2^64 ns is refused, not converted (undefined).
  e = parse_err("rules MRC-RSP-001\nwait 3333333333333333333333333333333333333ns\n");
  EXPECT_EQ(e.pos.line, 2u);
  EXPECT_NE(e.message.find("too long"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nexpect SAK\n");
  EXPECT_EQ(e.pos.column, 8u);
  EXPECT_NE(e.message.find("expected an opcode name"), std::string::npos);

  e = parse_err("rules MRC-RSP-001\nsend WRITE_ONLY psn=1..4\n");
  EXPECT_NE(e.message.find("single value"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nsend WRITE_ONLY psn=$\n");
  EXPECT_NE(e.message.find("variable name"), std::string::npos) << e.message;

  e = parse_err("send WRITE_ONLY psn=1\n");
  EXPECT_NE(e.message.find("rules"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nsend WRITE_ONLY psn=1\nmtu 1024\n");
  EXPECT_EQ(e.pos.line, 3u);
  EXPECT_NE(e.message.find("before the first statement"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nmtu 1000\nwait 1ms\n");
  EXPECT_NE(e.message.find("mtu 256"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nmutants flip-all\nwait 1ms\n");
  EXPECT_NE(e.message.find("mutant name"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nexpect memory at=$va len=4\n");
  EXPECT_NE(e.message.find("fill="), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nsend raw hex=abc\n");
  EXPECT_NE(e.message.find("even number"), std::string::npos) << e.message;

  e = parse_err("rules MRC-RSP-001\nfrobnicate 3\n");
  EXPECT_NE(e.message.find("expected a statement"), std::string::npos) << e.message;

  e = parse_err(std::string_view("rules MRC-RSP-001\n\0", 19));
  EXPECT_NE(e.message.find("NUL"), std::string::npos) << e.message;
}

constexpr std::string_view kAckReq =
    "rules MRC-RSP-009\n"
    "send WRITE_ONLY psn=$psn len=256 ev=0x2C003\n"
    "+0ns expect SACK cack=$psn offset=0 entropy=0x2C003 spdcid=$dut_qpn\n"
    "+0ns expect TRANSPORT_ACK psn=$psn syndrome=ack\n"
    "expect memory at=$va len=256 fill=inc:0\n"
    "expect nothing for 1ms\n";

TEST(ScriptPlay, PassesAgainstTheReference) {
  const ScriptResult r = run(kAckReq);
  EXPECT_EQ(r.outcome, Outcome::kPass) << r.error;
  ASSERT_EQ(r.statements.size(), 5u);
  for (const StatementResult& s : r.statements) EXPECT_EQ(s.outcome, Outcome::kPass);
  EXPECT_EQ(r.statements[0].frames.size(), 1u);  // the frame sent is named in the result
}

TEST(ScriptPlay, FailsAgainstAMutantAndNamesTheFieldAndFrame) {
  const ScriptResult r = run(kAckReq, runtime::Mutant::kWrongEvEcho);
  ASSERT_EQ(r.outcome, Outcome::kFail);
  EXPECT_NE(r.error.find("t.mrcs:3:37:"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("entropy is"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("SACK"), std::string::npos) << r.error;
  EXPECT_EQ(r.statements[1].outcome, Outcome::kFail);
  EXPECT_EQ(r.statements[2].outcome, Outcome::kNotRun);  // stops at the first failure
}

TEST(ScriptPlay, CapturedVariablesAreReused) {
  // $c binds on the first SACK; the second expectation must agree with it.
  EXPECT_EQ(run("rules MRC-RSP-002\nsend WRITE_ONLY psn=$psn len=8\nexpect SACK cack=$c\n"
                "expect TRANSPORT_ACK psn=$c\n")
                .outcome,
            Outcome::kPass);
  const ScriptResult r =
      run("rules MRC-RSP-002\nsend WRITE_ONLY psn=$psn len=8\nexpect SACK cack=$c\n"
          "expect TRANSPORT_ACK psn=$c+1\n");
  EXPECT_EQ(r.outcome, Outcome::kFail);
  EXPECT_NE(r.error.find("expected $c+1"), std::string::npos) << r.error;
  // An unbound variable in a send is a run-time error naming it.
  const ScriptResult u = run("rules MRC-RSP-002\nsend WRITE_ONLY psn=$nope len=8\n");
  EXPECT_EQ(u.outcome, Outcome::kFail);
  EXPECT_NE(u.error.find("$nope"), std::string::npos) << u.error;
}

TEST(ScriptPlay, RangesAreModuloPsnSpace) {
  EXPECT_EQ(run("rules MRC-RSP-002\ntester_psn 0xFFFFFF\nsend WRITE_ONLY psn=0xFFFFFF len=8\n"
                "expect SACK cack=0xFFFFF0..0x000004\n")
                .outcome,
            Outcome::kPass);
  EXPECT_EQ(run("rules MRC-RSP-002\ntester_psn 0xFFFFFF\nsend WRITE_ONLY psn=0xFFFFFF len=8\n"
                "expect SACK cack=0x000000..0x000004\n")
                .outcome,
            Outcome::kFail);
}

int cli(std::vector<std::string> args);  // below: `mrct script ...` in this process

TEST(ScriptPlay, TimestampRangesWrapAndSvcMaxIsZeroOnTheVirtualClock) {
  // ts_echo ranges run mod 2^16; the reference answers at once, so $svc_max is 0 and the
  // range ts16..ts16+$svc_max is exact.
  const std::string head = "rules MRC-CC-002\nsend WRITE_ONLY psn=$psn len=8 ts16=0xFFFE\n";
  EXPECT_EQ(run(head + "expect SACK ts_echo=0xFFF0..0x0004\n").outcome, Outcome::kPass);
  EXPECT_EQ(run(head + "expect SACK ts_echo=0x0000..0x0004\n").outcome, Outcome::kFail);
  EXPECT_EQ(run(head + "expect SACK ts_echo=0xFFFE..0xFFFE+$svc_max\n").outcome, Outcome::kPass);
  EXPECT_EQ(run(head + "expect SACK ts_echo=0xFFFF..0xFFFF+$svc_max\n").outcome, Outcome::kFail);
  // An exact ts_echo wraps too (0xFFFE + 2 = 0x0000).
  EXPECT_EQ(run(head + "expect SACK ts_echo=0xFFFE+2-2\n").outcome, Outcome::kPass);
  // The mutant that moves ts_echo is outside the bound.
  EXPECT_EQ(run(head + "expect SACK ts_echo=0xFFFE..0xFFFE+$svc_max\n", runtime::Mutant::kTsEchoOff)
                .outcome,
            Outcome::kFail);
}

TEST(ScriptDut, TheScriptModeEnvironmentCarriesTheWholeHeader) {
  // script_env() is what a DUT gets; setup_from_env() (`mrct script serve --env`) must
  // rebuild the same setup from it, or the reference through the contract plays another QP.
  Script sc = parse_ok(
      "rules MRC-RSP-001\nrole requester\nformat udp\nplanes 2\nmtu 2048\nmr_bytes 4096\n"
      "mr_fill 0x33\ntester_qpn 0x77\ntester_psn 0xFFFFF0\ndut_psn 0x123\n"
      "tester_va 0x123456789\ntester_rkey 0xABCD\nmpr 4\ndynamic_mpr 1\nmax_wimm 9\n"
      "ack_trigger 8192\nack_min_add 512\ntimeout 12\nretry 3 2\nrecv_wqes 5\nsvc_time 0\n"
      "trim_nack 0\nreverse_probe 2ms\npost write len=8\n");
  const auto env = script_env(sc, {"i1", "i2"});
  for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
  mrc::scripts::Setup s;
  std::vector<std::string> ifaces;
  std::string error;
  ASSERT_TRUE(setup_from_env(s, ifaces, error)) << error;
  const mrc::scripts::Setup& w = sc.setup;
  EXPECT_EQ(ifaces, (std::vector<std::string>{"i1", "i2"}));
  EXPECT_EQ(s.role, w.role);
  EXPECT_EQ(s.format, w.format);
  EXPECT_EQ(s.planes, w.planes);
  EXPECT_EQ(s.mtu, w.mtu);
  EXPECT_EQ(s.mr_bytes, w.mr_bytes);
  EXPECT_EQ(s.mr_fill, w.mr_fill);
  EXPECT_EQ(s.tester_qpn, w.tester_qpn);
  EXPECT_EQ(s.tester_psn, w.tester_psn);
  EXPECT_EQ(s.dut_psn, w.dut_psn);
  EXPECT_EQ(s.tester_va, w.tester_va);
  EXPECT_EQ(s.tester_rkey, w.tester_rkey);
  EXPECT_EQ(s.mpr, w.mpr);
  EXPECT_EQ(s.dynamic_mpr, w.dynamic_mpr);
  EXPECT_EQ(s.max_wimm, w.max_wimm);
  EXPECT_EQ(s.ack_trigger_bytes, w.ack_trigger_bytes);
  EXPECT_EQ(s.ack_min_add_bytes, w.ack_min_add_bytes);
  EXPECT_EQ(s.timeout, w.timeout);
  EXPECT_EQ(s.retry_linear, w.retry_linear);
  EXPECT_EQ(s.retry_exp, w.retry_exp);
  EXPECT_EQ(s.recv_wqes, w.recv_wqes);
  EXPECT_EQ(s.svc_time, w.svc_time);
  EXPECT_EQ(s.trim_nack, w.trim_nack);
  EXPECT_EQ(s.reverse_probe_ns, w.reverse_probe_ns);
  // A malformed variable is named.
  setenv("MRC_RETRY", "3-2", 1);
  EXPECT_FALSE(setup_from_env(s, ifaces, error));
  EXPECT_NE(error.find("MRC_RETRY='3-2'"), std::string::npos) << error;
  setenv("MRC_RETRY", "3:2", 1);
  setenv("MRC_IFACES", "i1", 1);
  EXPECT_FALSE(setup_from_env(s, ifaces, error));
  EXPECT_NE(error.find("MRC_IFACES"), std::string::npos) << error;
  for (const auto& [k, v] : env) unsetenv(k.c_str());
}

TEST(ScriptDut, ProfilesWithoutAScriptModeOrWithRunnerVariablesAreRefused) {
  const std::string dir = ::testing::TempDir() + "/scripts_dut";
  std::filesystem::create_directories(dir);
  DutProfile d;
  std::string error;
  std::ofstream(dir + "/none.toml") << "[dut]\nname = \"x\"\nclient = 'true'\n";
  EXPECT_FALSE(load_dut_profile(dir + "/none.toml", d, error));
  EXPECT_NE(error.find("dut.script"), std::string::npos) << error;
  std::ofstream(dir + "/env.toml") << "[dut]\nscript = 'exec x'\nenv = { MRC_X = \"1\" }\n";
  EXPECT_FALSE(load_dut_profile(dir + "/env.toml", d, error));
  EXPECT_NE(error.find("env.toml:3: dut.env.MRC_X"), std::string::npos) << error;
  std::ofstream(dir + "/ok.toml") << "[dut]\nname = \"n\"\nscript = 'exec x'\n"
                                     "env = { K = \"v\" }\n[capabilities]\nudp = false\n";
  ASSERT_TRUE(load_dut_profile(dir + "/ok.toml", d, error)) << error;
  EXPECT_EQ(d.cmd.name, "n");
  EXPECT_EQ(d.cmd.command, "exec x");
  mrc::scripts::Setup s;
  EXPECT_EQ(dut_unsupported(d, s), "");
  s.format = wire::EvFormat::kUdp;
  EXPECT_EQ(dut_unsupported(d, s), "DUT n lacks capability udp");
  // --dut needs the wire target, and a profile that loads.
  testing::internal::CaptureStderr();
  std::ofstream(dir + "/a.mrcs") << "rules MRC-RSP-009\nsend WRITE_ONLY psn=$psn len=8\n";
  EXPECT_EQ(cli({"run", dir + "/a.mrcs", "--dut", dir + "/ok.toml"}), 2);
  EXPECT_EQ(cli({"run", dir + "/a.mrcs", "--target", "netns", "--dut", dir + "/none.toml"}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--target netns"), std::string::npos) << err;
  EXPECT_NE(err.find("dut.script"), std::string::npos) << err;
  std::filesystem::remove_all(dir);
}

TEST(ScriptPlay, TimingWindowsAndTolerance) {
  // The requester retransmits at its RTO (timeout 10: 1.048576 ms after the first send).
  const std::string head =
      "rules MRC-REQ-013\nrole requester\ntimeout 10\nignore RELIABILITY_PROBE\n"
      "post write len=64\nexpect WRITE_ONLY rtx=0\n";
  EXPECT_EQ(run(head + "+1ms..1100us expect WRITE_ONLY rtx=1\n").outcome, Outcome::kPass);
  const ScriptResult early = run(head + "+2ms..3ms expect WRITE_ONLY rtx=1\n");
  EXPECT_EQ(early.outcome, Outcome::kFail);
  EXPECT_NE(early.error.find("no earlier than"), std::string::npos) << early.error;
  EXPECT_EQ(run(head + "+500us expect WRITE_ONLY rtx=1\n").outcome, Outcome::kFail);
  PlayOptions tol;
  tol.tolerance_ns = 600'000;
  EXPECT_EQ(run(head + "+500us expect WRITE_ONLY rtx=1\n", runtime::Mutant::kNone, tol).outcome,
            Outcome::kPass);
  // Nothing within the window: named as such.
  const ScriptResult none = run(head + "+0..100us expect WRITE_ONLY rtx=1\n");
  EXPECT_NE(none.error.find("nothing arrived"), std::string::npos) << none.error;
}

TEST(ScriptPlay, MemoryAndCompletionExpectations) {
  EXPECT_EQ(run("rules MRC-RSP-010\nsend WRITE_ONLY_IMM psn=$psn len=40 imm=7 fill=byte:3\n"
                "expect completion imm=7 len=40 status=success\nexpect no completion\n"
                "expect memory at=$va len=40 fill=byte:3\n"
                "expect memory at=$va+40 len=4 hex=5a5a5a5a\n")
                .outcome,
            Outcome::kPass);
  const ScriptResult m =
      run("rules MRC-RSP-010\nsend WRITE_ONLY psn=$psn len=4 fill=byte:3\n"
          "expect memory at=$va len=4 hex=03030304\n");
  EXPECT_EQ(m.outcome, Outcome::kFail);
  EXPECT_NE(m.error.find("byte 3"), std::string::npos) << m.error;
}

TEST(ScriptPlay, HostileFramesAreBuiltAsAsked) {
  // bad_icrc: the reference drops it; the mutant that repairs ICRCs takes it.
  const std::string s =
      "rules MRC-FRM-001\nsend WRITE_ONLY psn=$psn len=64 bad_icrc\nexpect nothing for 1ms\n";
  EXPECT_EQ(run(s).outcome, Outcome::kPass);
  EXPECT_EQ(run(s, runtime::Mutant::kAcceptBadIcrc).outcome, Outcome::kFail);
  // trim: NACK TRIMMED, and skip-trim-nack hides it.
  const std::string t =
      "rules MRC-RSP-013\nsend WRITE_ONLY psn=$psn len=1024 trim\nexpect NACK code=trimmed\n";
  EXPECT_EQ(run(t).outcome, Outcome::kPass);
  EXPECT_EQ(run(t, runtime::Mutant::kSkipTrimNack).outcome, Outcome::kFail);
  // cut=N beyond the frame is an error naming both sizes.
  const ScriptResult c = run("rules MRC-FRM-006\nsend WRITE_ONLY psn=$psn len=8 cut=5000\n");
  EXPECT_NE(c.error.find("not shorter than the frame"), std::string::npos) << c.error;
}

TEST(ScriptPlay, ReportsCarryTheFailure) {
  std::vector<ScriptResult> rs{run(kAckReq), run(kAckReq, runtime::Mutant::kWrongEvEcho)};
  const std::string j = report_json(rs);
  EXPECT_NE(j.find("\"verdict\": \"pass\""), std::string::npos);
  EXPECT_NE(j.find("\"verdict\": \"fail\""), std::string::npos);
  const std::string x = report_junit(rs);
  EXPECT_NE(x.find("tests=\"2\" failures=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("<failure"), std::string::npos);
  const std::string md = report_markdown(rs);
  EXPECT_NE(md.find("2 script(s): 1 pass, 1 fail"), std::string::npos) << md;
}

TEST(ScriptPlay, PcapHoldsBothDirections) {
  const std::string path = ::testing::TempDir() + "/script_test.pcapng";
  PlayOptions o;
  o.pcap_path = path;
  ASSERT_EQ(run(kAckReq, runtime::Mutant::kNone, o).outcome, Outcome::kPass);
  wire::CaptureReader rd;
  ASSERT_TRUE(rd.open(path)) << rd.error();
  int n = 0;
  wire::CaptureRecord rec;
  while (rd.next(rec)) ++n;
  EXPECT_EQ(n, 3);  // WRITE_ONLY in, SACK and TRANSPORT_ACK out
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mrc::scripts

namespace mrc::scripts {
namespace {

int cli(std::vector<std::string> args) {
  args.insert(args.begin(), "mrct script");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return script_main(static_cast<int>(args.size()), argv.data());
}

TEST(ScriptCli, AParseErrorExitsTwoBeforeAnythingRuns) {
  const std::string dir = ::testing::TempDir() + "/scripts_cli";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/a.mrcs") << "rules MRC-RSP-009\nsend WRITE_ONLY psn=$psn len=8\n"
                                    "expect SACK cack=$psn\n";
  std::ofstream(dir + "/b.mrcs") << "rules MRC-RSP-009\nexpect SACK cack=\n";
  const std::string json = dir + "/r.json";
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli({"run", dir, "--json", json}), 2);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("b.mrcs:2:18: expected a value"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(json));  // nothing half-written
  std::filesystem::remove(dir + "/b.mrcs");
  testing::internal::CaptureStdout();
  EXPECT_EQ(cli({"run", dir, "--json", json, "-q"}), 0);
  EXPECT_EQ(cli({"run", dir, "--mutant", "ignore-ack-req", "-q"}), 1);
  testing::internal::GetCapturedStdout();
  EXPECT_TRUE(std::filesystem::exists(json));
  EXPECT_EQ(cli({"run", dir, "--tolerance", "5"}), 2);
  EXPECT_EQ(cli({"run", dir + "/nope"}), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mrc::scripts

namespace mrc::scripts {
namespace {

// Not a libFuzzer target (that is still to do): seeded byte mutations of every library script.
// The parser must never crash, and every refusal must name a line and column inside the text.
TEST(ScriptParse, SurvivesMutatedLibraryScripts) {
  std::vector<std::string> texts;
  for (const auto& e :
       std::filesystem::directory_iterator(std::string(MRC_SOURCE_DIR) + "/scenarios/scripts")) {
    std::ifstream in(e.path(), std::ios::binary);
    texts.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GE(texts.size(), 60u);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto rnd = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  static constexpr char kBytes[] = "=.+-$_#\n\t 0x9zZ*!:";
  size_t refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string t = texts[rnd() % texts.size()];
    for (int k = 0, n = 1 + static_cast<int>(rnd() % 4); k < n && !t.empty(); ++k) {
      const size_t at = rnd() % t.size();
      switch (rnd() % 3) {
        case 0:
          t[at] = kBytes[rnd() % (sizeof kBytes - 1)];
          break;
        case 1:
          t.erase(at, 1 + rnd() % 8);
          break;
        default:
          t.insert(at, 1, static_cast<char>(rnd() & 0xFF));
      }
    }
    Script s;
    ParseError e;
    if (!parse_script(t, "m.mrcs", s, e)) {
      ++refused;
      const size_t lines = static_cast<size_t>(std::count(t.begin(), t.end(), '\n')) + 1;
      EXPECT_GE(e.pos.line, 1u) << e.format();
      EXPECT_LE(e.pos.line, lines) << e.format();
      EXPECT_FALSE(e.message.empty());
    }
  }
  EXPECT_GT(refused, 100u);
}

}  // namespace
}  // namespace mrc::scripts
