"""`mrct suite` runs a failed scenario case once more when a reference endpoint of it was not
run by its host (run.host_stall: a received frame read >= run.HOST_STALL_MS late), and only
then (issue 20: no verdict may depend on machine speed). No root: the runs are stand-ins."""

import os
import tempfile
import unittest

import _util  # noqa: F401  (puts the testbed on sys.path)
from mrctb import report as reportlib
from mrctb import run as runlib
from mrctb import suite as suitelib


def _ep(node, role, late_ms, is_dut=False, over=1):
    return {"node": node, "role": role, "is_dut": is_dut,
            "result": {"loop": {"rx_late_max_ns": int(late_ms * 1e6),
                                "rx_late_over_20ms": over}}}


def _res(verdict, late_ms=None, **kw):
    r = {"scenario": "loss-1pct", "verdict": verdict, "reason": "" if verdict == "pass" else
         "checker verdict: expected pass, observed fail (MRC-RSP-009)", "timings": {}}
    if late_ms is not None:
        r["host_stall"] = {"node": "h2", "role": "server", "late_ms": late_ms,
                           "frames_over_20ms": 3}
    r.update(kw)
    return r


class Runs:
    """run_once stand-in: each call writes a marker into case_out and returns the next result."""

    def __init__(self, case_out, results):
        self.case_out, self.results, self.calls = case_out, list(results), 0

    def __call__(self):
        self.calls += 1
        os.makedirs(self.case_out, exist_ok=True)
        with open(os.path.join(self.case_out, "attempt"), "w") as f:
            f.write(str(self.calls))
        return dict(self.results.pop(0))


class HostStall(unittest.TestCase):
    def test_worst_reference_endpoint_not_a_duts(self):
        eps = [_ep("h1", "client", 4.0), _ep("h2", "server", 146.1),
               _ep("h3", "server", 900.0, is_dut=True),  # a DUT's word about itself is not taken
               {"node": "h4", "role": "client", "is_dut": False, "result": None}]
        st = runlib.host_stall(eps)
        self.assertEqual((st["node"], st["role"], st["late_ms"]), ("h2", "server", 146.1))
        self.assertIsNone(runlib.host_stall([_ep("h3", "server", 900.0, is_dut=True)]))
        self.assertIsNone(runlib.host_stall([{"node": "h1", "result": {"loop": {}}}]))


class Retry(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "loss-1pct")
        self.case = suitelib.Case(name="loss-1pct", path="scenarios/loss-1pct.toml",
                                  scenario=None)

    def tearDown(self):
        self.tmp.cleanup()

    def run_case(self, results, case=None):
        runs = Runs(self.out, results)
        res = suitelib.run_with_stall_retry(case or self.case, self.out, runs)
        return res, runs.calls

    def test_failure_with_a_stall_runs_once_more_and_says_so(self):
        res, calls = self.run_case([_res("fail", 146.1), _res("pass", 3.0)])
        self.assertEqual(calls, 2)
        self.assertEqual(res["verdict"], "pass")
        t = res["retried"]
        self.assertEqual(t["first_verdict"], "fail")
        self.assertIn("MRC-RSP-009", t["first_reason"])
        self.assertEqual(t["host_stall"]["late_ms"], 146.1)
        # Both attempts' artifacts are kept: the first moved aside, the second in place.
        with open(os.path.join(self.out + ".attempt1", "attempt")) as f:
            self.assertEqual(f.read(), "1")
        with open(os.path.join(self.out, "attempt")) as f:
            self.assertEqual(f.read(), "2")
        for text in (reportlib.suite_markdown([res], "s", "reference", 1.0),
                     reportlib.suite_junit([res], "s"), reportlib.suite_matrix([res])):
            self.assertIn("host stall", text)
            self.assertIn("146 ms", text)

    def test_only_once_and_a_second_failure_stands(self):
        res, calls = self.run_case([_res("fail", 146.1), _res("fail", 150.0),
                                    _res("pass", 1.0)])
        self.assertEqual(calls, 2)
        self.assertEqual(res["verdict"], "fail")
        self.assertEqual(res["retried"]["first_verdict"], "fail")

    def test_no_retry_without_a_stall_or_after_a_pass(self):
        for first in (_res("fail", 19.9), _res("fail"), _res("pass", 500.0),
                      _res("unsupported", 500.0), _res("interrupted", 500.0)):
            res, calls = self.run_case([first, _res("pass", 1.0)])
            self.assertEqual(calls, 1, first)
            self.assertEqual(res["verdict"], first["verdict"])
            self.assertNotIn("retried", res)
            self.assertFalse(os.path.exists(self.out + ".attempt1"))
        self.assertNotIn("host stall", reportlib.suite_markdown([_res("fail", 146.1)], "s",
                                                                "reference", 1.0))

    def test_a_mutant_is_judged_by_its_own_verdict(self):
        mutant = suitelib.Case(name="loss-1pct+rtx-without-bit", path="x", scenario=None,
                               mutant="rtx-without-bit")
        # Caught (the raw run fails, which is the mutant case's pass): no retry.
        res, calls = self.run_case([_res("fail", 146.1, mutant_caught=True, mutant="m"),
                                    _res("fail", 1.0, mutant_caught=True, mutant="m")], mutant)
        self.assertEqual(calls, 1)
        # Not caught during a stall: once more.
        res, calls = self.run_case([_res("fail", 146.1, mutant_caught=False, mutant="m"),
                                    _res("fail", 1.0, mutant_caught=True, mutant="m")], mutant)
        self.assertEqual(calls, 2)
        self.assertTrue(res["mutant_caught"])


if __name__ == "__main__":
    unittest.main()
