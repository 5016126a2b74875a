"""Scenario format, DUT profiles, reports and the run/suite CLI surface (no root needed)."""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET

import _util  # noqa: F401  (puts mrctb on sys.path)
from mrctb import dut as dutlib
from mrctb import plan as planlib
from mrctb import report as reportlib
from mrctb import scenario as sclib
from mrctb import suite as suitelib

REPO = os.path.dirname(_util.TESTBED_DIR)
SCENARIOS = os.path.join(REPO, "scenarios")
DUT_DIR = os.path.join(REPO, "ci", "dut")

MINIMAL = """\
[topology]
shape = "clos"
planes = 2
t0 = 2
t1 = 2
hosts_per_t0 = 1
"""


def load_text(text, name="s.toml"):
    d = tempfile.mkdtemp(prefix="mrctb-sc-")
    try:
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return sclib.load(path)
    finally:
        shutil.rmtree(d)


class KeyLines(unittest.TestCase):
    def test_tables_arrays_dotted_inline_multiline(self):
        text = textwrap.dedent("""\
            # comment
            title = "x"          # 2
            [a]                  # 3
            b = 1                # 4
            c.d = 2              # 5
            "q.k" = 3            # 6
            inline = { x = 1, "y" = { w = 2 } }  # 7
            ok = true            # 8
            arr = [              # 9
              { z = 1 },         # 10
            ]
            s = \"\"\"
            fake = 1
            \"\"\"
            [[f]]                # 15
            k = 1                # 16
            [[f]]                # 17
            k = 2                # 18
            [f.sub]              # 19
            m = 3                # 20
            [[g.h]]              # 21
            n = 4                # 22
            """)
        lines = sclib.key_lines(text)
        self.assertEqual(lines[("title",)], 2)
        self.assertEqual(lines[("a",)], 3)
        self.assertEqual(lines[("a", "b")], 4)
        self.assertEqual(lines[("a", "c", "d")], 5)
        self.assertEqual(lines[("a", "q.k")], 6)
        self.assertEqual(lines[("a", "inline", "x")], 7)
        self.assertEqual(lines[("a", "inline", "y", "w")], 7)
        self.assertEqual(lines[("a", "ok")], 8)
        self.assertEqual(lines[("a", "arr")], 9)
        self.assertNotIn(("a", "fake"), lines)  # inside a multi-line string
        self.assertEqual(lines[("f", 0)], 15)
        self.assertEqual(lines[("f", 0, "k")], 16)
        self.assertEqual(lines[("f", 1, "k")], 18)
        self.assertEqual(lines[("f", 1, "sub", "m")], 20)
        self.assertEqual(lines[("g", "h", 0, "n")], 22)

    def test_format_key(self):
        self.assertEqual(sclib.format_key(("fault", 2, "after", "fault")), "fault[2].after.fault")


class Sizes(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(sclib.parse_size(4096), 4096)
        self.assertEqual(sclib.parse_size("64K"), 65536)
        self.assertEqual(sclib.parse_size("1M"), 1 << 20)
        self.assertEqual(sclib.parse_size("1.5G"), 3 << 29)
        self.assertEqual(sclib.parse_size("512KiB"), 512 << 10)
        for bad in ("", "12Q", "-1", 0, True, 1.5):
            with self.assertRaises(ValueError, msg=repr(bad)):
                sclib.parse_size(bad)
        self.assertEqual(sclib.format_size(65536), "64K")
        self.assertEqual(sclib.format_size(1000), "1000")


class Library(unittest.TestCase):
    def test_every_library_scenario_validates(self):
        files = sclib.discover(SCENARIOS)
        self.assertGreaterEqual(len(files), 18)
        names = set()
        for path in files:
            sc = sclib.load(path)
            self.assertNotIn(sc.name, names)
            names.add(sc.name)
            self.assertTrue(sc.description, f"{path}: no description")
            self.assertTrue(sc.outcome, f"{path}: no expected outcome")
        self.assertFalse(any("profiles" in p for p in files))

    def test_library_covers_the_issue_list(self):
        tags = {}
        for path in sclib.discover(SCENARIOS):
            sc = sclib.load(path)
            for t in sc.tags:
                tags.setdefault(t, []).append(sc.name)
        for needed in ("baseline", "loss", "burst", "reorder", "dup", "corruption", "trim", "ecn",
                       "link-down", "flap", "switch-down", "plane-down", "gray-failure",
                       "exhaustion", "mpr", "wimm", "incast", "all-to-all", "ci-fast",
                       "default"):
            self.assertIn(needed, tags, needed)
        self.assertEqual(len(tags["default"]), 1)
        routings = {sclib.load(os.path.join(SCENARIOS, f"{n}.toml")).topology.routing
                    for n in tags["baseline"]}
        self.assertEqual(routings, {"srv6", "ecmp"})

    def test_no_retirement_without_a_fault(self):
        # Without an impairment or a fault nothing is lost, so a conforming requester retires
        # no EV (issue 17: congestion and reordering are not path failure).
        fault_free = []
        for path in sclib.discover(SCENARIOS):
            sc = sclib.load(path)
            if not sc.has_faults():
                fault_free.append(sc.name)
                self.assertEqual(sc.expect.ev_retired_max, 0, f"{path}: set ev_retired_max = 0")
        self.assertIn("baseline-srv6", fault_free)
        self.assertIn("baseline-ecmp", fault_free)

    def test_no_verdict_depends_on_machine_speed(self):
        """A fault or impairment timed in milliseconds from the start must fall inside the
        transfer on any machine: then the transfer is sized in time (duration_s), at least
        twice the schedule. A transfer sized in messages ends as early as the machine is fast,
        so its faults must be triggered by the transfer itself (after = { data_bytes = ... })."""
        for path in sclib.discover(SCENARIOS):
            sc = sclib.load(path)
            ends = []
            for f in sc.faults:
                if f.trigger.at_ms is None:
                    continue
                end = f.trigger.at_ms + (f.repeat - 1) * (f.period_ms or 0) + (f.for_ms or 0)
                ends.append((f.name, end))
            for imp in sc.impairs:
                for t in (imp.start_ms, imp.stop_ms):
                    if t is not None:
                        ends.append((imp.name, t))
            for name, end in ends:
                with self.subTest(scenario=sc.name, event=name):
                    self.assertGreaterEqual(
                        sc.traffic.duration_s * 1000, 2 * end,
                        f"{path}: {name} is timed up to {end:g} ms from the start but the "
                        "transfer is not sized to outlast it (duration_s), so the verdict "
                        "depends on the machine's speed")

    def test_mutants_named_in_scenarios_cover_the_endpoint_list(self):
        # The endpoint's list (reference-impl/runtime/mutant.cc); each has a matching scenario.
        listed = set()
        for path in sclib.discover(SCENARIOS):
            listed |= set(sclib.load(path).expect.mutants)
        self.assertEqual(listed, {
            "wrong-icrc", "read-opcode", "rtx-without-bit", "wrong-ev-echo", "regress-cack",
            "exceed-mpr", "exceed-wimm", "skip-trim-nack", "ignore-ecn", "reuse-retired-ev",
            "control-dscp-data", "wrong-port", "sparse-reverse-probe"})

    def test_defaults(self):
        sc = load_text(MINIMAL)
        self.assertEqual(sc.name, "s")
        self.assertEqual(sc.ev_format, "srv6")
        self.assertEqual(sc.traffic.messages_per_qp(), 1000)
        plan = sc.topology.make_plan()
        self.assertEqual(sc.pairs(plan), [("h1", "h2")])
        self.assertEqual(sc.capture.points, ["endpoints"])
        self.assertTrue(sc.expect.completes and sc.expect.data_verified)

    def test_without_faults_keeps_relays(self):
        sc = sclib.load(os.path.join(SCENARIOS, "loss-1pct.toml"))
        ref = sc.without_faults()
        self.assertEqual(ref.impairs, [])
        self.assertEqual(ref.passthrough, ["host:h2"])
        self.assertEqual(ref.fault_free_key(), ref.without_faults().fault_free_key())
        self.assertNotEqual(ref.fault_free_key(),
                            sclib.load(os.path.join(SCENARIOS, "baseline-ecmp.toml"))
                            .without_faults().fault_free_key())


class Errors(unittest.TestCase):
    """Each bad input names the line and the key."""

    CASES = [
        # (text appended to MINIMAL or replacing it, line, key, message fragment)
        ("[topology]\nshape = \"clos\"\nplanes = 2\nt0 = 2\nt1 = 2\nhostz_per_t0 = 1\n", 6,
         "topology.hostz_per_t0", "did you mean 'hosts_per_t0'"),
        ("[topology]\nshape = \"ring\"\n", 2, "topology.shape", "not one of"),
        ("[topology]\nshape = \"back_to_back\"\nt0 = 2\n", 3, "topology.t0",
         "not a parameter of shape"),
        ("[topology]\nshape = \"clos\"\nplanes = 17\n", 3, "topology.planes", "1..16"),
        (MINIMAL + "[traffic]\nsize = \"64Q\"\n", 8, "traffic.size", "not a size"),
        (MINIMAL + "[traffic]\npairs = [[\"h1\", \"h9\"]]\n", 8, "traffic.pairs", "no host 'h9'"),
        (MINIMAL + "[traffic]\nmessages = 10\nbytes = \"1M\"\n", 9, "traffic.bytes",
         "give one of"),
        (MINIMAL + "[traffic]\nop = \"read\"\n", 8, "traffic.op", "not one of"),
        (MINIMAL + "[traffic]\nreceiver = \"h2\"\n", 8, "traffic.receiver", "incast"),
        (MINIMAL + "[profiles]\nretry = \"9:1\"\n", 8, "profiles.retry", "LINEAR 0..7"),
        (MINIMAL + "[profiles]\npmtu = 1500\n", 8, "profiles.pmtu", "256, 512"),
        (MINIMAL + "[profiles]\ncc_profile = \"nope.toml\"\n", 8, "profiles.cc_profile",
         "no such file"),
        ("[topology]\nrouting = \"ecmp\"\n[profiles]\nev_format = \"srv6\"\n", 4,
         "profiles.ev_format", "routing = \"srv6\""),
        (MINIMAL + "[[impair]]\ntype = \"loss\"\np = 0.1\n", 7, "impair[0].links", "required"),
        (MINIMAL + "[[impair]]\nlinks = [\"h1:h7\"]\ntype = \"loss\"\np = 0.1\n", 8,
         "impair[0].links", "no link"),
        (MINIMAL + "[[impair]]\nlinks = [\"all\"]\ntype = \"loss\"\np = 1.5\n", 10,
         "impair[0].p", "probability"),
        (MINIMAL + "[[impair]]\nlinks = [\"all\"]\ntype = \"explode\"\n", 9, "impair[0].type",
         "not one of"),
        (MINIMAL + "[[impair]]\nlinks = [\"plane:6\"]\ntype = \"loss\"\np = 0.1\n", 8,
         "impair[0].links", "plane must be 1..2"),
        (MINIMAL + "[[impair]]\nlinks = [\"all\"]\ntype = \"loss\"\np = 0.1\n"
         "start_ms = 50\nstop_ms = 10\n", 12, "impair[0].stop_ms", "after start_ms"),
        (MINIMAL + "[[fault]]\naction = \"flap\"\ntarget = \"p1t0s0:p1t1s0\"\nat_ms = 5\n", 7,
         "fault[0].for_ms", "required for a flap"),
        (MINIMAL + "[[fault]]\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n", 7,
         "fault[0].at_ms", "at_ms"),
        (MINIMAL + "[[fault]]\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n"
         "at_ms = 1\nafter = \"x\"\n", 11, "fault[0].after", "not both"),
        (MINIMAL + "[[fault]]\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n"
         "after = \"ghost\"\n", 10, "fault[0].after", "no fault named 'ghost'"),
        (MINIMAL + "[[fault]]\nname = \"a\"\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n"
         "after = \"b\"\n[[fault]]\nname = \"b\"\naction = \"link_up\"\n"
         "target = \"p1t0s0:p1t1s0\"\nafter = \"a\"\n", 11, "fault[0].after", "cycle"),
        (MINIMAL + "[[fault]]\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n"
         "after = { data_bytes = \"1M\", edge = \"end\" }\n", 10, "fault[0].after.edge",
         "only with fault"),
        (MINIMAL + "[[fault]]\naction = \"node_down\"\ntarget = \"p8t1s0\"\nat_ms = 1\n", 9,
         "fault[0].target", "no node"),
        (MINIMAL + "[[fault]]\naction = \"plane_down\"\ntarget = 0\nat_ms = 1\n", 9,
         "fault[0].target", "1..2"),
        (MINIMAL + "[[fault]]\naction = \"plane_down\"\ntarget = 3\nat_ms = 1\n", 9,
         "fault[0].target", "1..2"),
        (MINIMAL + "[[fault]]\naction = \"flap\"\ntarget = \"p1t0s0:p1t1s0\"\nat_ms = 1\n"
         "for_ms = 50\nrepeat = 3\nperiod_ms = 20\n", 13, "fault[0].period_ms", "exceed for_ms"),
        (MINIMAL + "[[fault]]\naction = \"flap\"\ntarget = \"p1t0s0:p1t1s0\"\nat_ms = 1\n"
         "for_ms = 5\nend = \"h9\"\n", 12, "fault[0].end", "expected both"),
        (MINIMAL + "[[fault]]\naction = \"rule_remove\"\ntarget = \"nothing\"\nat_ms = 1\n", 9,
         "fault[0].target", "names no"),
        (MINIMAL + "[capture]\npoints = [\"everywhere\"]\n", 8, "capture.points",
         "interface name"),
        (MINIMAL + "[expect]\nverdict = \"pass\"\nmust_fail = [\"MRC-FRM-001\"]\n", 9,
         "expect.must_fail", "verdict = \"fail\""),
        (MINIMAL + "[expect]\nmust_fail = [\"FRM-001\"]\n", 8, "expect.must_fail",
         "not a rule ID"),
        (MINIMAL + "[expect]\ncompletes = true\nqp_error = \"IBV_WC_RETRY_EXC_ERR\"\n", 9,
         "expect.qp_error", "completes = false"),
        (MINIMAL + "[expect]\ninjector_min = { drop = 1 }\n", 8, "expect.injector_min",
         "no injector"),
        (MINIMAL + "[expect]\nevents_min = { fireworks = 1 }\n", 8,
         "expect.events_min.fireworks", "event kind"),
        (MINIMAL + "[expect]\ngoodput_min_pct = \"lots\"\n", 8, "expect.goodput_min_pct",
         "must be a number"),
        (MINIMAL + "[expect]\nev_retired_min = 2\nev_retired_max = 1\n", 9,
         "expect.ev_retired_max", "below ev_retired_min"),
        (MINIMAL + "[expect]\nev_retired_max = -1\n", 8, "expect.ev_retired_max", ">= 0"),
        (MINIMAL + "[scenario]\nrequires = [\"teleport\"]\n", 8, "scenario.requires",
         "not one of"),
        (MINIMAL + "[bogus]\nx = 1\n", 7, "bogus", "unknown key"),
        # NaN, infinities, negatives and sizes beyond the machine: refused up front, limit named
        ("[scenario]\ntimeout_s = nan\n", 2, "scenario.timeout_s", "finite number, got nan"),
        (MINIMAL + "[traffic]\nstall_s = inf\n", 8, "traffic.stall_s", "finite number, got inf"),
        (MINIMAL + "[traffic]\nduration_s = -1\n", 8, "traffic.duration_s", "> 0"),
        (MINIMAL + "[traffic]\nduration_s = -inf\n", 8, "traffic.duration_s", "finite"),
        ("[topology]\nshape = \"clos\"\nplanes = 1000\n", 3, "topology.planes", "1..16"),
        ("[topology]\nshape = \"clos\"\nplanes = 16\nt0 = 255\nt1 = 255\n", 2,
         "topology.shape", "at most 512 nodes and 2048 links"),
        ("[topology]\nshape = \"incast\"\nplanes = 16\nsenders = 200\n", 2, "topology.shape",
         "3216 links"),
        (MINIMAL + "[traffic]\nsize = \"1G\"\nmessages = 1099511627776\n", 9,
         "traffic.messages", "available memory"),
        (MINIMAL + "[traffic]\nsize = \"1G\"\nqps = 1024\n", 8, "traffic.size",
         "available memory"),
        (MINIMAL + "[[impair]]\nlinks = [\"all\"]\ntype = \"delay\"\ndelay_us = nan\n", 10,
         "impair[0].delay_us", "finite number"),
        (MINIMAL + "[[impair]]\nlinks = [\"all\"]\ntype = \"loss\"\np = nan\n", 10,
         "impair[0].p", "probability"),
        (MINIMAL + "[[fault]]\naction = \"link_down\"\ntarget = \"p1t0s0:p1t1s0\"\n"
         "at_ms = inf\n", 10, "fault[0].at_ms", "finite"),
        (MINIMAL + "[expect]\nmax_stall_ms = nan\n", 8, "expect.max_stall_ms", "finite"),
        (MINIMAL + "[expect]\ntolerances = { reaction_ns = inf }\n", 8,
         "expect.tolerances.reaction_ns", "finite"),
    ]

    def test_cases(self):
        for text, line, key, fragment in self.CASES:
            with self.subTest(key=key, fragment=fragment):
                with self.assertRaises(sclib.ScenarioError) as cm:
                    load_text(text, "bad.toml")
                err = cm.exception
                self.assertEqual(err.key, key, str(err))
                self.assertEqual(err.line, line, str(err))
                self.assertIn(fragment, err.message, str(err))
                self.assertIn(f"bad.toml:{line}: {key}: ", str(err))

    def test_toml_syntax_error_has_line(self):
        with self.assertRaises(sclib.ScenarioError) as cm:
            load_text("[topology]\nplanes = = 2\n")
        self.assertEqual(cm.exception.line, 2)
        self.assertIn("TOML syntax", str(cm.exception))

    def test_missing_file(self):
        with self.assertRaises(sclib.ScenarioError) as cm:
            sclib.load("/nonexistent/x.toml")
        self.assertIn("cannot read", str(cm.exception))

    def test_overrides(self):
        sc = sclib.load(os.path.join(SCENARIOS, "baseline-srv6.toml"),
                        {"traffic.messages": "20", "traffic.size": "4K"})
        self.assertEqual(sc.traffic.messages, 20)
        self.assertEqual(sc.traffic.size, 4096)
        with self.assertRaises(sclib.ScenarioError):
            sclib.load(os.path.join(SCENARIOS, "baseline-srv6.toml"), {"traffic.nope": "1"})


class Selectors(unittest.TestCase):
    def test_select_links(self):
        plan = planlib.clos(planes=2, t0=2, t1=2, hosts_per_t0=1)
        names = lambda sel: sorted(lk.name for lk in sclib.select_links(plan, sel))  # noqa
        self.assertEqual(names("host:h2"), ["p1t0s1:h2", "p2t0s1:h2"])
        self.assertEqual(len(names("node:p1t1s0")), 2)
        self.assertEqual(len(names("plane:2")), 6)
        self.assertEqual(len(names("plane:2:core")), 4)
        self.assertEqual(len(names("plane:1:access")), 2)
        self.assertEqual(len(names("all")), 12)
        self.assertEqual(names("p1t1s0:p1t0s0"), ["p1t0s0:p1t1s0"])
        self.assertEqual(names("h1-p2"), ["p2t0s0:h1"])
        for bad in ("plane:10", "node:zz", "host:h9", "plane:1:middle", "x:y"):
            with self.assertRaises(planlib.PlanError, msg=bad):
                sclib.select_links(plan, bad)

    def test_patterns(self):
        sc = load_text("[topology]\nshape = \"incast\"\nsenders = 3\n[traffic]\npattern = "
                       "\"incast\"\n")
        plan = sc.topology.make_plan()
        self.assertEqual(sc.pairs(plan), [("h1", "h4"), ("h2", "h4"), ("h3", "h4")])
        sc = load_text("[topology]\nshape = \"single_router\"\nhosts = 3\n[traffic]\npattern = "
                       "\"all_to_all\"\n")
        self.assertEqual(len(sc.pairs(sc.topology.make_plan())), 6)
        sc = load_text("[topology]\nshape = \"dumbbell\"\nleft = 2\nright = 2\n")
        self.assertEqual(sc.pairs(sc.topology.make_plan()), [("h1", "h3"), ("h2", "h4")])


class Dut(unittest.TestCase):
    def test_reference_profile(self):
        d = dutlib.load(os.path.join(DUT_DIR, "reference.toml"))
        self.assertEqual(d.role, "client")
        self.assertTrue(d.plays("client"))
        self.assertFalse(d.plays("server"))
        # the runtime reports carrier loss as port status (PORT_STATUS_UPDATE)
        self.assertTrue(d.has("port_status"))
        self.assertTrue(d.has("imm"))
        self.assertEqual(d.env["MRC_DUT_DIR"], DUT_DIR)
        plane_down = sclib.load(os.path.join(SCENARIOS, "plane-down.toml"))
        self.assertEqual(dutlib.unsupported_reason(d, plane_down), "")
        self.assertEqual(dutlib.unsupported_reason(dutlib.REFERENCE, plane_down), "")
        d.capabilities["port_status"] = False
        self.assertIn("port_status", dutlib.unsupported_reason(d, plane_down))

    def test_script_mode(self):
        """Both shipped profiles have a script mode (conformance scripts through the DUT);
        a script command alone plays no endpoint role, and a script case of a profile without
        one is not-run, never passed."""
        for path in (os.path.join(DUT_DIR, "reference.toml"),
                     os.path.join(REPO, "conformance", "mrc-perf", "mrc-perf.toml")):
            self.assertIn(dutlib.SCRIPT, dutlib.load(path).commands, path)
        with _util.TempDir() as t:
            path = os.path.join(t, "d.toml")
            with open(path, "w") as f:
                f.write('[dut]\nscript = "x"\n')
            with self.assertRaises(dutlib.DutError) as cm:
                dutlib.load(path)
            self.assertIn("at least one role", str(cm.exception))
            with open(path, "w") as f:
                f.write('[dut]\nclient = "x"\n')
            case = suitelib.Case("s", os.path.join(REPO, "scenarios", "scripts",
                                                   "rsp-sack-entropy-echo.mrcs"), None,
                                 script=suitelib.ScriptMeta("s", [], []), dut_path=path)
            res = suitelib.run_script_case(case, os.path.join(t, "out"),
                                           suitelib.SuiteOptions(paths=[], mrct="/nonexistent"))
            self.assertEqual(res["verdict"], "not-run")
            self.assertIn("no script mode", res["reason"])

    def test_node_role(self):
        """A profile's `node` command serves the hosts in several pairs where the DUT plays one
        of the host's roles; without it those hosts cannot be the DUT's."""
        d = dutlib.load(os.path.join(REPO, "conformance", "mrc-perf", "mrc-perf.toml"))
        self.assertEqual(d.role, "both")
        self.assertIn(dutlib.NODE, d.commands)
        self.assertTrue(d.serves_node({"client"}))
        self.assertTrue(d.serves_node({"client", "server"}))
        client_only = dutlib.Dut(name="x", commands={"client": "a", "node": "b"}, role="client")
        self.assertTrue(client_only.serves_node({"client", "server"}))
        self.assertFalse(client_only.serves_node({"server"}))
        no_node = dutlib.Dut(name="x", commands={"client": "a"}, role="client")
        self.assertFalse(no_node.serves_node({"client"}))
        self.assertFalse(dutlib.REFERENCE.serves_node({"client", "server"}))
        with _util.TempDir() as t:
            path = os.path.join(t, "d.toml")
            with open(path, "w") as f:
                f.write('[dut]\nnode = "x"\n')
            with self.assertRaises(dutlib.DutError) as cm:
                dutlib.load(path)  # a node command alone plays no role
            self.assertIn("at least one role", str(cm.exception))
            with open(path, "w") as f:
                f.write('[dut]\nclient = "x"\nnode = ""\n')
            with self.assertRaises(dutlib.DutError) as cm:
                dutlib.load(path)
            self.assertIn("d.toml:3: dut.node", str(cm.exception))

    def test_capability_implications(self):
        sc = sclib.load(os.path.join(SCENARIOS, "wimm-pressure.toml"))
        self.assertIn("imm", dutlib.required_capabilities(sc))
        self.assertIn("multi_plane", dutlib.required_capabilities(sc))
        no_imm = dutlib.Dut(name="x", commands={"client": "true"}, role="client",
                            capabilities={**dutlib.CAP_DEFAULTS, "imm": False})
        self.assertIn("imm", dutlib.unsupported_reason(no_imm, sc))

    def test_rules_to_skip(self):
        d = dutlib.Dut(name="x", commands={"client": "true"}, role="client",
                       capabilities={**dutlib.CAP_DEFAULTS, "trim_nack": False})
        cat = [{"id": "MRC-RSP-013", "capability": "TRIM_NACK (profile capabilities)"},
               {"id": "MRC-FRM-001", "capability": ""}]
        self.assertEqual(list(dutlib.rules_to_skip(d, cat)), ["MRC-RSP-013"])

    def test_profile_errors(self):
        cases = [("[dut]\nrole = \"client\"\n", "at least one role"),
                 ("[dut]\nclient = \"x\"\nrole = \"both\"\n", "needs a `server`"),
                 ("[dut]\nclient = \"x\"\n[capabilities]\nwarp = true\n", "unknown capability"),
                 ("[dut]\nclient = \"x\"\nenv = { MRC_GID = \"1\" }\n", "belong to the runner"),
                 ("[dut]\nclient = \"x\"\ncolour = 1\n", "unknown key"),
                 # each with the line of the offending key
                 ("[dut]\nclient = \"x\"\nenv = { \"BAD=NAME\" = \"x\" }\n",
                  "d.toml:3: dut.env",
                  "not an environment variable name"),
                 ("[dut]\nclient = \"x\"\nenv = { \"1X\" = \"x\" }\n", "d.toml:3: dut.env",
                  "not an environment variable name"),
                 ("[dut]\nclient = \"x\"\nenv = { MRC_VENDOR_KNOB = \"1\" }\n",
                  "d.toml:3: dut.env.MRC_VENDOR_KNOB", "belong to the runner"),
                 ("[dut]\nclient = \"x\"\nenv = { MRCT = \"1\" }\n", "d.toml:3: dut.env.MRCT",
                  "belong to the runner"),
                 ("[dut]\nname = 123\nclient = \"x\"\n", "d.toml:2: dut.name",
                  "must be a string"),
                 ("[dut]\nname = \"\"\nclient = \"x\"\n", "d.toml:2: dut.name", "non-empty"),
                 ("[dut]\nclient = \"x\"\nrole = 1\n", "d.toml:3: dut.role", "must be a string"),
                 ("[dut]\nclient = \"x\"\ndescription = [1]\n", "d.toml:3: dut.description",
                  "must be a string"),
                 ("[dut]\nclient = \"x\"\nenv = { A = 1 }\n", "d.toml:3: dut.env",
                  "table of strings")]
        for case in cases:
            text, frags = case[0], case[1:]
            with self.subTest(frag=frags), _util.TempDir() as d:
                path = os.path.join(d, "d.toml")
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaises(dutlib.DutError) as cm:
                    dutlib.load(path)
                for frag in frags:
                    self.assertIn(frag, str(cm.exception))
                self.assertIn("d.toml:", str(cm.exception))

    def test_bad_profiles_exit_2_without_traceback(self):
        """`mrct run --dut` with a malformed profile: exit 2, the file and line, no traceback."""
        for text in ("[dut]\nname = 123\nclient = \"x\"\n",
                     "[dut]\nclient = \"x\"\nenv = { \"BAD=NAME\" = \"x\" }\n"):
            with self.subTest(text=text), _util.TempDir() as d:
                path = os.path.join(d, "d.toml")
                with open(path, "w") as f:
                    f.write(text)
                proc = subprocess.run(
                    [sys.executable, "-m", "mrctb", "run", "--validate",
                     os.path.join(SCENARIOS, "baseline-srv6.toml"), "--dut", path],
                    cwd=_util.TESTBED_DIR, capture_output=True, text=True, timeout=60)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn("d.toml:", proc.stderr)
                self.assertNotIn("Traceback", proc.stderr)

    def test_judge_reads_sh_127_as_an_error_and_69_as_unsupported(self):
        """The verdict a run gets from its DUT endpoints' exit codes (no fabric needed: the
        judge returns before looking at anything else)."""
        import io
        from mrctb import run as runlib

        def judge(rc, stderr, result=None):
            with _util.TempDir() as d:
                err = os.path.join(d, "h1-client.stderr")
                with open(err, "w") as f:
                    f.write(stderr)
                ep = runlib.Endpoint(pair="h1-h2", role="client", node="h1", peer="h2", env={},
                                     argv=["/bin/sh", "-c", "x"], is_dut=True, stdout_path="",
                                     stderr_path=err, result_path="", events_path="")
                ep.rc, ep.result = rc, result
                r = object.__new__(runlib._Run)
                r.sc = sclib.load(os.path.join(SCENARIOS, "baseline-srv6.toml"))
                r.endpoints = [ep]
                r.opts = runlib.RunOptions(dut=dutlib.Dut(name="acme", commands={"client": "x"},
                                                          role="client"))
                r.result = {"verdict": "", "reason": "", "expectations": []}
                r.log = runlib.Log(None, io.StringIO())
                r._judge()
                return r.result

        res = judge(127, "sh: 1: /opt/acme/bin/dut: not found\n")
        self.assertEqual(res["verdict"], "error")
        self.assertIn("/opt/acme/bin/dut: not found", res["reason"])
        self.assertIn("sh exit 127", res["reason"])
        self.assertEqual(judge(126, "sh: 1: ./dut: Permission denied\n")["verdict"], "error")
        res = judge(69, "no SRv6 here\n")
        self.assertEqual(res["verdict"], "unsupported")
        self.assertIn("exit code 69", res["reason"])
        res = judge(3, "", {"unsupported": "no WRITE_WITH_IMM"})
        self.assertEqual(res["verdict"], "unsupported")
        self.assertIn("no WRITE_WITH_IMM", res["reason"])

    def test_unsupported_only_from_an_explicit_signal(self):
        self.assertEqual(dutlib.unsupported_signal(dutlib.EXIT_UNSUPPORTED, None),
                         f"exit code {dutlib.EXIT_UNSUPPORTED}")
        self.assertEqual(dutlib.unsupported_signal(1, {"unsupported": "no SRv6 here"}),
                         "no SRv6 here")
        # sh's "command not found" and "cannot execute" are not a way to say "unsupported"
        for rc in (126, 127):
            self.assertEqual(dutlib.unsupported_signal(rc, None), "")
            self.assertTrue(dutlib.cannot_run(rc))
        self.assertEqual(dutlib.unsupported_signal(0, {"unsupported": ""}), "")
        self.assertEqual(dutlib.unsupported_signal(0, {"unsupported": True}), "")
        self.assertFalse(dutlib.cannot_run(dutlib.EXIT_UNSUPPORTED))
        self.assertFalse(dutlib.cannot_run(1))
        # what sh really returns for a missing binary
        proc = subprocess.run(["/bin/sh", "-c", "exec /nonexistent/mrc-dut --run"],
                              capture_output=True, text=True, timeout=20)
        self.assertTrue(dutlib.cannot_run(proc.returncode), proc.returncode)
        self.assertEqual(dutlib.unsupported_signal(proc.returncode, None), "")

    def test_env_vars_documented(self):
        with open(os.path.join(DUT_DIR, "README.md")) as f:
            doc = f.read()
        for name in list(dutlib.ENV_VARS) + ["MRC_DUT_DIR"]:
            self.assertIn(f"`{name}`", doc.replace(", `", "`, `"), name)

    def _env(self, role, **extra):
        env = {"MRC_ROLE": role, "MRC_NODE": "h1", "MRC_IFACES": "h1-p1,h1-p2",
               "MRC_PLANES": "2",
               "MRC_NEXT_HOPS": "h1-p1=02:00:00:01:00:01,h1-p2=02:01:00:01:00:01",
               "MRC_GID": "fd00:a::1", "MRC_CTL_ADDR": "10.77.0.1", "MRC_CTL_PORT": "18515",
               "MRC_PEER_CTL_ADDR": "10.77.0.2", "MRC_EV_FORMAT": "stev", "MRC_IO": "packet",
               "MRC_TIMEOUT": "14", "MRC_RETRY": "7:7", "MRC_MPR": "8", "MRC_WIMM": "128",
               "MRC_PROBE_INTERVAL_US": "1000", "MRC_SEED": "5", "MRC_SIZE": "65536",
               "MRC_QPS": "2", "MRC_TX_DEPTH": "64", "MRC_STALL_S": "10", "MRC_MESSAGES": "100",
               "MRC_DURATION_S": "", "MRC_OP": "write_with_imm", "MRC_EV_PROFILE": "",
               "MRC_EVS_PER_PLANE": "4", "MRC_CC_PROFILE": "/p/cc.toml", "MRC_CC": "",
               "MRC_PMTU": "0", "MRC_EVENT_LOG": "/o/ev.jsonl", "MRC_PCAP_PREFIX": "/o/h1",
               "MRC_MUTANT": "", "MRCT": "/bin/mrct"}
        env.update(extra)
        return env

    def test_shell_adapter_matches_builtin(self):
        """ci/dut/run_endpoint.sh and dut.reference_argv build the same command line."""
        with _util.TempDir() as d:
            stub = os.path.join(d, "mrct")
            with open(stub, "w") as f:
                f.write("#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done\n")
            os.chmod(stub, os.stat(stub).st_mode | stat.S_IEXEC)
            variants = [("client", {}), ("server", {}),
                        ("client", {"MRC_DURATION_S": "2.5", "MRC_MESSAGES": "",
                                    "MRC_OP": "write", "MRC_PMTU": "4096",
                                    "MRC_EV_PROFILE": "/p/ev.toml", "MRC_MUTANT": "wrong-port",
                                    "MRC_CC": "none", "MRC_PCAP_PREFIX": ""})]
            for role, extra in variants:
                env = self._env(role, MRCT=stub, **extra)
                want = dutlib.reference_argv(env)[1:]
                proc = subprocess.run(["/bin/sh", os.path.join(DUT_DIR, "run_endpoint.sh")],
                                      env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True,
                                      text=True, timeout=20)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(sorted_pairs(proc.stdout.splitlines()), sorted_pairs(want),
                                 f"{role} {extra}")

    def test_node_argv_serves_every_role_of_a_host(self):
        """A host in several pairs gets one `mrct endpoint node`: its servers, its client count,
        an EV profile per peer; no single --server of the client role is left."""
        from mrctb import run as runlib
        env = self._env("node", MRC_EV_PROFILE="/o/h2-to-h1.ev.toml", MRC_CTL_ADDR="10.0.0.2")
        argv = runlib.node_argv(env, ["10.0.0.1", "10.0.0.3"], 2,
                                [("fd00:a::1", "/o/h2-to-h1.ev.toml"),
                                 ("fd00:a::3", "/o/h2-to-h3.ev.toml")])
        self.assertEqual(argv[1:3], ["endpoint", "node"])
        self.assertEqual(argv.count("--server"), 1)
        self.assertEqual(argv[argv.index("--server") + 1], "10.0.0.1,10.0.0.3")
        self.assertEqual(argv[argv.index("--clients") + 1], "2")
        self.assertEqual(argv[argv.index("--listen") + 1], "10.0.0.2")
        self.assertEqual([argv[i + 1] for i, a in enumerate(argv) if a == "--peer-ev-profile"],
                         ["fd00:a::1=/o/h2-to-h1.ev.toml", "fd00:a::3=/o/h2-to-h3.ev.toml"])
        self.assertEqual(argv[argv.index("--ev-profile") + 1], "/o/h2-to-h1.ev.toml")
        # a pure sender: no listener
        argv = runlib.node_argv(env, ["10.0.0.4"], 0, [])
        self.assertNotIn("--clients", argv)
        self.assertNotIn("--listen", argv)

    def test_shell_adapter_unsupported(self):
        env = self._env("client", MRC_EV_FORMAT="carrier-pigeon")
        proc = subprocess.run(["/bin/sh", os.path.join(DUT_DIR, "run_endpoint.sh")], env=env,
                              capture_output=True, text=True, timeout=20)
        self.assertEqual(proc.returncode, dutlib.EXIT_UNSUPPORTED)


def sorted_pairs(argv):
    """Options as (option, value) pairs in a canonical order: the adapter and the builtin may
    order them differently."""
    head, rest = argv[:2], argv[2:]
    pairs, i = [], 0
    while i < len(rest):
        if i + 1 < len(rest) and not rest[i + 1].startswith("--"):
            pairs.append((rest[i], rest[i + 1]))
            i += 2
        else:
            pairs.append((rest[i], None))
            i += 1
    return head, sorted(pairs, key=lambda p: (p[0], p[1] or ""))


class Reports(unittest.TestCase):
    def frames(self):
        def f(ts, qp, psn, wev, opcode="WRITE_MIDDLE", payload=4096, trimmed=False):
            return {"roce": True, "ts_ns": ts, "dest_qp": qp, "psn": psn, "wev": wev,
                    "opcode_name": opcode, "payload_len": payload, "trimmed": trimmed}
        ms = 1_000_000
        return {0: [f(0, 1, 1, 0), f(5 * ms, 1, 2, 0), f(15 * ms, 1, 2, 0),  # duplicate PSN 2
                    f(16 * ms, 1, 9, 0, trimmed=True),                      # trimmed: no data
                    {"roce": True, "ts_ns": 3 * ms, "opcode_name": "SACK"}],
                1: [f(12 * ms, 1, 3, 1, payload=1000), f(25 * ms, 2, 3, 1)]}

    def test_goodput_series(self):
        s = reportlib.goodput_series(self.frames(), bin_ms=10)
        self.assertEqual(s["bins"], 3)
        self.assertEqual(s["total_bytes"], 4096 * 3 + 1000)
        # Planes 1-based (= NIC port), as in the report and the viewer; capture p0 is plane 1.
        p0 = s["paths"]["plane 1 EV 0"]
        self.assertEqual(p0["bytes"], 8192)
        self.assertEqual(p0["plane"], 1)
        self.assertAlmostEqual(p0["mbit_s"][0], 8192 * 8 / 1e4)
        self.assertEqual(s["paths"]["plane 2 EV 1"]["bytes"], 5096)
        self.assertEqual(reportlib.goodput_series({})["paths"], {})

    def test_svg_is_xml(self):
        s = reportlib.goodput_series(self.frames(), bin_ms=10,
                                     path_label=lambda p, w: f"p{p} <ev {w}>")
        svg = reportlib.goodput_svg(s, "t & t", [(5.0, "flap start")])
        root = ET.fromstring(svg)
        self.assertTrue(root.tag.endswith("svg"))
        self.assertEqual(len(root.findall("{http://www.w3.org/2000/svg}polyline")), 2)
        self.assertIn("flap start", svg)
        ET.fromstring(reportlib.goodput_svg(reportlib.goodput_series({}), "empty"))

    def test_svg_keeps_identical_lines_apart(self):
        # Four paths, two pairs with the same goodput: no line may hide another (issue 18,
        # problem 9: 2 of 4 lines were drawn exactly over identical ones).
        s = {"bins": 2, "bin_ms": 10, "paths": {
            f"plane {p} EV {e}": {"mbit_s": [5.0, 5.0] if e == 0 else [3.0, 3.0]}
            for p in (1, 2) for e in (0, 1)}}
        root = ET.fromstring(reportlib.goodput_svg(s, "t"))
        lines = root.findall("{http://www.w3.org/2000/svg}polyline")
        self.assertEqual(len(lines), 4)
        drawn = [(ln.get("points"), ln.get("stroke-width"), ln.get("stroke-dasharray"))
                 for ln in lines]
        for i, a in enumerate(drawn):
            for b in drawn[i + 1:]:
                if a[0] == b[0]:
                    self.assertNotEqual((a[1], a[2]), (b[1], b[2]))
        # The one drawn later over the same points is narrower: the earlier one shows around it.
        same = [d for d in drawn if d[0] == drawn[0][0]]
        self.assertGreater(float(same[0][1]), float(same[1][1]))

    def results(self):
        base = {"timings": {"total_s": 1.5}, "tags": ["x"], "artifacts": "/a",
                "expectations": [{"name": "goodput", "expected": ">= 1", "observed": "0.5",
                                  "status": "fail"}]}
        return [dict(base, scenario="a", verdict="pass", reason=""),
                dict(base, scenario="b", verdict="fail", reason="goodput <low>"),
                dict(base, scenario="c", verdict="unsupported", reason="lacks imm"),
                dict(base, scenario="d", verdict="error", reason="boom")]

    def test_junit(self):
        root = ET.fromstring(reportlib.suite_junit(self.results(), "lib"))
        self.assertEqual(root.get("tests"), "4")
        self.assertEqual(root.get("failures"), "1")
        self.assertEqual(root.get("errors"), "1")
        self.assertEqual(root.get("skipped"), "1")
        cases = root.findall(".//testcase")
        self.assertEqual([c.get("name") for c in cases], ["a", "b", "c", "d"])
        self.assertIsNotNone(cases[1].find("failure"))
        self.assertIn("goodput", cases[1].find("failure").text)
        self.assertIsNotNone(cases[2].find("skipped"))

    def test_markdown_and_matrix(self):
        md = reportlib.suite_markdown(self.results(), "lib", "reference", 12.0)
        self.assertIn("| b | ❌ fail |", md)
        self.assertIn("goodput <low>", md)
        matrix = reportlib.suite_matrix(self.results())
        self.assertIn("unsupported", matrix)
        summary = reportlib.summary_markdown({
            "scenario": "a", "verdict": "fail", "file": "a.toml", "seed": 3,
            "timings": {"total_s": 2}, "reason": "x",
            "expectations": self.results()[0]["expectations"],
            "checker": {"status": "not-run", "reason": "no checker"}})
        self.assertIn("# a: ❌ fail", summary)
        self.assertIn("--seed 3", summary)
        self.assertIn("Not run: no checker", summary)


class CheckerVerdicts(unittest.TestCase):
    """`mrct check` exit codes and JSON reports as a scenario sees them: exit 3 (INCONCLUSIVE) is
    never a pass."""

    REPORT = {"verdict": "INCONCLUSIVE", "verdict_reasons": ["no frame was recognised as MRC"],
              "unrecognised": [{"reason": "UDP to port 4971, not the profile's RoCE port 4791",
                                "frames": 12, "examples": []}],
              "rules": [{"id": "MRC-FRM-002", "status": "fail", "violations": 12,
                         "statement": "port", "evidence": [{"message": "to port 4971"}]},
                        {"id": "MRC-PRB-007", "status": "warn", "violations": 1,
                         "statement": "reverse probes",
                         "evidence": [{"message": "no EV probe for 23.08 ms (since t=+0.1 s), "
                                                  "limit 22.62 ms"}]}]}

    def test_checker_counts_wire_retransmissions(self):
        # A DUT that reports no retransmissions (mrc-perf) is judged on the checker's count.
        from mrctb import run as runlib
        flows = {"flows": [{"retransmissions": 3}, {"retransmissions": 0}, {}]}
        self.assertEqual(runlib.checker_outcome(0, flows)["retransmissions"], 3)
        self.assertIsNone(runlib.checker_outcome(0, self.REPORT)["retransmissions"])

    def test_exit_codes_map_to_verdicts(self):
        from mrctb import run as runlib
        self.assertEqual(runlib.CHECK_VERDICTS, {0: "pass", 1: "fail", 3: "inconclusive"})
        chk = runlib.checker_outcome(3, self.REPORT)
        self.assertEqual(chk["verdict"], "inconclusive")
        self.assertEqual(chk["inconclusive"], ["no frame was recognised as MRC"])
        self.assertEqual(chk["unrecognised"][0]["frames"], 12)
        self.assertEqual([r["id"] for r in chk["warned"]], ["MRC-PRB-007"])
        observed, status = runlib.checker_expectation("pass", chk)
        self.assertEqual(status, "inconclusive")
        self.assertIn("no frame was recognised as MRC", observed)
        # Expecting "fail" does not make an inconclusive run meet it either.
        self.assertEqual(runlib.checker_expectation("fail", chk)[1], "inconclusive")
        self.assertEqual(runlib.checker_expectation("pass", runlib.checker_outcome(0, {})),
                         ("pass", "pass"))
        self.assertEqual(runlib.checker_expectation("pass", runlib.checker_outcome(1, {}))[1],
                         "fail")

    def test_inconclusive_fails_a_suite(self):
        from mrctb import suite as suitelib
        res = [{"scenario": "x", "verdict": "inconclusive", "reason": "checker verdict: "
                "inconclusive: no frame was recognised as MRC", "timings": {}}]
        self.assertEqual(suitelib.exit_code(res, strict=False), 1)
        root = ET.fromstring(reportlib.suite_junit(res, "lib"))
        self.assertEqual(root.get("failures"), "1")
        self.assertIn("no frame was recognised as MRC",
                      root.find(".//testcase/failure").get("message"))

    def test_summary_names_warnings_and_their_margin(self):
        from mrctb import run as runlib
        chk = runlib.checker_outcome(3, self.REPORT)
        summary = reportlib.summary_markdown({
            "scenario": "a", "verdict": "inconclusive", "file": "a.toml", "seed": 3,
            "timings": {"total_s": 2}, "reason": "x", "expectations": [], "checker": chk})
        self.assertIn("# a: ❔ inconclusive", summary)
        self.assertIn("❔ inconclusive: no frame was recognised as MRC", summary)
        self.assertIn("not MRC: 12 frame(s): UDP to port 4971", summary)
        self.assertIn("⚠️ warning MRC-PRB-007", summary)
        self.assertIn("23.08 ms (since t=+0.1 s), limit 22.62 ms", summary)


class Cli(unittest.TestCase):
    def test_validate(self):
        proc = _util.run_cli("validate", SCENARIOS)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("baseline-srv6", proc.stdout)
        with _util.TempDir() as d:
            bad = os.path.join(d, "bad.toml")
            with open(bad, "w") as f:
                f.write("[traffic]\nsize = 0\n")
            proc = _util.run_cli("validate", bad)
            self.assertEqual(proc.returncode, 2)
            self.assertIn("bad.toml:2: traffic.size:", proc.stderr)

    def test_run_validate_only(self):
        proc = _util.run_cli("run", os.path.join(SCENARIOS, "link-flap.toml"), "--validate")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("1 fault(s)", proc.stdout)
        proc = _util.run_cli("run", "/nonexistent.toml")
        self.assertEqual(proc.returncode, 2)
        proc = _util.run_cli("run", os.path.join(SCENARIOS, "link-flap.toml"), "--set", "nope")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("SECTION.KEY=VALUE", proc.stderr)

    def test_suite_list(self):
        proc = _util.run_cli("suite", SCENARIOS, "--tag", "ci-fast", "--list")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        names = [line.split("\t")[0] for line in proc.stdout.splitlines()]
        self.assertIn("baseline-srv6", names)
        self.assertNotIn("loss-5pct", names)
        proc = _util.run_cli("suite", SCENARIOS, "--mutants", "--list")
        self.assertIn("baseline-srv6+wrong-icrc", proc.stdout)

    def test_suite_collects_scripts(self):
        # Scripts (*.mrcs) under the same paths are cases too, with the same tag selection and
        # mutant mode (docs/scripts.md, "In mrct suite").
        proc = _util.run_cli("suite", SCENARIOS, "--tag", "ci-fast", "--list")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        rows = [line.split("\t") for line in proc.stdout.splitlines()]
        scripts = {r[0] for r in rows if r[1].endswith(".mrcs")}
        self.assertIn("rsp-sack-entropy-echo", scripts)  # tagged ci-fast
        self.assertNotIn("rsp-probe-ce", scripts)        # not tagged ci-fast
        self.assertIn("baseline-srv6", {r[0] for r in rows})
        proc = _util.run_cli("suite", os.path.join(SCENARIOS, "scripts"), "--mutants", "--list")
        self.assertIn("req-port-status+ignore-port-status", proc.stdout)

    @unittest.skipUnless(os.geteuid() == 0 and shutil.which("setpriv"), "needs root to drop it")
    def test_not_root_message(self):
        env = _util.traffic_env()
        for sub in (["run", os.path.join(SCENARIOS, "baseline-srv6.toml")],
                    ["suite", SCENARIOS]):
            proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   _util.PYTHON, "-m", "mrctb"] + sub, cwd="/tmp", env=env,
                                  capture_output=True, text=True, timeout=60)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertIn("needs root", proc.stderr)


if __name__ == "__main__":
    unittest.main()
